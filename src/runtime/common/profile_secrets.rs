//! A profile's secrets kept out of the event log. `session.created` records a session's
//! profile with its `env` values and its MCP servers' `env` and `headers` values redacted (the
//! names stay); the whole profile is written, 0600, to `$COHOST_HOME/profiles/SESSION.json`,
//! which a restart, a relaunch and a fork read back ([`restore`]) to start the agent with the
//! values the session started with.

use std::io;
use std::path::{Path, PathBuf};

use crate::core::private_file;
use crate::protocol::SessionProfile;

/// The largest file [`restore`] reads (a profile's instructions are at most 64 KiB).
const MAX_FILE: u64 = 4 * 1024 * 1024;

fn path(home: &Path, session: &str) -> PathBuf {
    home.join("profiles").join(format!("{session}.json"))
}

/// Whether the profile holds a value [`SessionProfile::redacted`] hides.
fn has_secrets(profile: &SessionProfile) -> bool {
    !profile.env.is_empty()
        || profile
            .mcp_servers
            .values()
            .any(|server| !server.env.is_empty() || !server.headers.is_empty())
}

/// Writes `profile` for `session` (when it holds a secret) and answers what `session.created`
/// records: the profile with its secrets redacted.
pub fn record(home: &Path, session: &str, profile: &SessionProfile) -> io::Result<SessionProfile> {
    if has_secrets(profile) {
        let file = path(home, session);
        if let Some(dir) = file.parent() {
            std::fs::create_dir_all(dir)?;
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
        }
        let bytes = serde_json::to_vec(profile).map_err(io::Error::other)?;
        private_file::write_atomic(&file, &bytes, 0o600)?;
    }
    Ok(profile.redacted())
}

/// The profile `session` started with: `recorded` (from `session.created`) with the secrets
/// [`record`] kept. A session recorded before secrets were kept apart has them in `recorded`
/// itself; one whose file is gone keeps the redacted values (and a warning is logged).
pub fn restore(home: &Path, session: &str, recorded: &SessionProfile) -> SessionProfile {
    if !has_secrets(recorded) {
        return recorded.clone();
    }
    let file = path(home, session);
    match private_file::read(&file, MAX_FILE) {
        Ok(Some(bytes)) => match serde_json::from_slice::<SessionProfile>(&bytes) {
            Ok(kept) if kept.name == recorded.name => return kept,
            Ok(kept) => tracing::warn!(
                session,
                file = %file.display(),
                kept = %kept.name,
                recorded = %recorded.name,
                "the kept profile is another one; its secrets are not used"
            ),
            Err(error) => {
                tracing::warn!(session, file = %file.display(), %error, "the kept profile is not readable")
            }
        },
        Ok(None) if recorded.redacted() == *recorded => {
            tracing::warn!(session, file = %file.display(), "the profile's secrets are gone; the agent starts with them redacted")
        }
        Ok(None) => {}
        Err(error) => tracing::warn!(session, %error, "the kept profile is refused"),
    }
    recorded.clone()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::protocol::{McpServer, REDACTED};

    fn profile() -> SessionProfile {
        SessionProfile {
            name: "p".into(),
            env: BTreeMap::from([("TOKEN".into(), "s3cret-env".into())]),
            mcp_servers: BTreeMap::from([(
                "gh".into(),
                McpServer {
                    command: None,
                    args: Vec::new(),
                    env: BTreeMap::new(),
                    url: Some("https://example.com/mcp".into()),
                    headers: BTreeMap::from([("Authorization".into(), "Bearer s3cret-h".into())]),
                },
            )]),
            ..SessionProfile::default()
        }
    }

    #[test]
    fn the_record_names_the_secrets_without_their_values_and_restore_gives_them_back() {
        let home = tempfile::tempdir().unwrap();
        let full = profile();
        let recorded = record(home.path(), "cs_1", &full).unwrap();
        let text = serde_json::to_string(&recorded).unwrap();
        assert!(!text.contains("s3cret"), "{text}");
        assert_eq!(recorded.env["TOKEN"], REDACTED);
        assert_eq!(
            recorded.mcp_servers["gh"].headers["Authorization"],
            REDACTED
        );
        let file = path(home.path(), "cs_1");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(restore(home.path(), "cs_1", &recorded), full);
        // Another session's record is not this one's.
        assert_eq!(restore(home.path(), "cs_2", &recorded), recorded);
        std::fs::remove_file(&file).unwrap();
        assert_eq!(restore(home.path(), "cs_1", &recorded), recorded);
    }

    #[test]
    fn a_profile_without_secrets_writes_nothing_and_an_old_plain_record_is_used_as_it_is() {
        let home = tempfile::tempdir().unwrap();
        let plain = SessionProfile {
            name: "q".into(),
            effort: Some("high".into()),
            ..SessionProfile::default()
        };
        assert_eq!(record(home.path(), "cs_3", &plain).unwrap(), plain);
        assert!(!home.path().join("profiles").exists());
        // Recorded before the secrets were kept apart: the values are in the event.
        assert_eq!(restore(home.path(), "cs_4", &profile()), profile());
    }
}
