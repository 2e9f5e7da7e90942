//! `[bridge.matrix]` of cohost's config file: the homeserver, the bot and its secret (read from
//! a file that only its owner may read), who may command, the control room, the profiles
//! `/start` offers, and where the bridge keeps its cursors.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde::Deserialize;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MatrixConfig {
    /// `https://matrix.example.org`, or `http://127.0.0.1:8008` for a homeserver on loopback.
    pub homeserver: String,
    /// A PEM file of the certificate authorities to trust for an `https://` homeserver,
    /// instead of Mozilla's roots (a homeserver with a private or self-signed certificate).
    pub ca_file: Option<PathBuf>,
    /// The bot's full user id, `@cohost:example.org`.
    pub user: String,
    /// A file holding the bot's access token …
    pub access_token_file: Option<PathBuf>,
    /// … or its password (the bridge logs in as the device `device_id`).
    pub password_file: Option<PathBuf>,
    /// The device the bridge logs in as: Matrix scopes transaction ids to a device, so keeping
    /// it makes a resent message after a restart the same message.
    #[serde(default = "default_device")]
    pub device_id: String,
    /// The Matrix users whose commands are obeyed; everyone else is ignored.
    pub allowed_users: Vec<String>,
    /// The control room: `!id:server` or `#alias:server`; the bot joins it.
    pub control_room: String,
    /// Where `/start RUNTIME` runs the agent (a profile may name its own).
    pub cwd: Option<String>,
    /// The prefix of the session rooms' aliases (`#PREFIX-SESSION:server`).
    #[serde(default = "default_prefix")]
    pub room_prefix: String,
    /// The fewest milliseconds between two edits of a streaming message.
    #[serde(default = "default_edit_interval")]
    pub edit_interval_ms: u64,
    /// The bridge's cursors (default: `matrix-bridge.json` in cohost's home).
    pub state_file: Option<PathBuf>,
    /// `/start NAME`: named session settings.
    #[serde(default)]
    pub profiles: BTreeMap<String, Profile>,
}

/// What `/start PROFILE` creates: `POST /api/sessions` fields.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub struct Profile {
    pub runtime: String,
    pub cwd: Option<String>,
    pub model: Option<String>,
    pub approval_policy: Option<String>,
    pub sandbox: Option<String>,
    pub permission_mode: Option<String>,
}

fn default_device() -> String {
    "COHOST_MATRIX_BRIDGE".into()
}
fn default_prefix() -> String {
    "cohost".into()
}
fn default_edit_interval() -> u64 {
    2000
}

/// How the bot authenticates.
pub enum Secret {
    Token(String),
    Password(String),
}

impl MatrixConfig {
    /// `[bridge.matrix]` of the parsed config file.
    pub fn from_table(table: &toml::Table, file: &Path) -> anyhow::Result<MatrixConfig> {
        let Some(section) = table
            .get("bridge")
            .and_then(|b| b.as_table())
            .and_then(|b| b.get("matrix"))
        else {
            bail!("config file {}: no [bridge.matrix] table", file.display());
        };
        let config: MatrixConfig = section
            .clone()
            .try_into()
            .with_context(|| format!("config file {}: [bridge.matrix]", file.display()))?;
        config.validate()?;
        Ok(config)
    }

    fn validate(&self) -> anyhow::Result<()> {
        if !(self.homeserver.starts_with("http://") || self.homeserver.starts_with("https://")) {
            bail!(
                "[bridge.matrix] homeserver must be an http:// or https:// URL, got `{}`",
                self.homeserver
            );
        }
        if self.ca_file.is_some() && !self.homeserver.starts_with("https://") {
            bail!(
                "[bridge.matrix] ca_file is set, but homeserver `{}` is not an https:// URL",
                self.homeserver
            );
        }
        if !is_user_id(&self.user) {
            bail!(
                "[bridge.matrix] user must be a full Matrix id like `@cohost:example.org`, got `{}`",
                self.user
            );
        }
        for user in &self.allowed_users {
            if !is_user_id(user) {
                bail!("[bridge.matrix] allowed_users: `{user}` is not a Matrix user id");
            }
        }
        if self.allowed_users.is_empty() {
            bail!("[bridge.matrix] allowed_users is empty: nobody could command the bridge");
        }
        if !(self.control_room.starts_with('!') || self.control_room.starts_with('#')) {
            bail!(
                "[bridge.matrix] control_room must be a room id (`!…`) or an alias (`#…`), got `{}`",
                self.control_room
            );
        }
        match (&self.access_token_file, &self.password_file) {
            (Some(_), Some(_)) => {
                bail!("[bridge.matrix] set access_token_file or password_file, not both")
            }
            (None, None) => bail!("[bridge.matrix] needs access_token_file or password_file"),
            _ => {}
        }
        if !self
            .room_prefix
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            || self.room_prefix.is_empty()
        {
            bail!("[bridge.matrix] room_prefix may hold only letters, digits, `-` and `_`");
        }
        for (name, profile) in &self.profiles {
            if name.is_empty() || name.contains(char::is_whitespace) {
                bail!("[bridge.matrix.profiles] `{name}`: a profile name is one word");
            }
            if profile.runtime.is_empty() {
                bail!("[bridge.matrix.profiles.{name}] runtime is empty");
            }
        }
        Ok(())
    }

    /// The bot's secret, from its file: refused when group or others may read it.
    pub fn secret(&self) -> anyhow::Result<Secret> {
        let (path, token) = match (&self.access_token_file, &self.password_file) {
            (Some(path), _) => (path, true),
            (None, Some(path)) => (path, false),
            (None, None) => bail!("[bridge.matrix] needs access_token_file or password_file"),
        };
        let text = read_secret(path)?;
        Ok(if token {
            Secret::Token(text)
        } else {
            Secret::Password(text)
        })
    }

    /// The certificate authorities of `ca_file`, when it is set: a file that cannot be read or
    /// holds no certificate is refused, naming it.
    pub fn roots(&self) -> anyhow::Result<Option<Vec<ureq::tls::Certificate<'static>>>> {
        let Some(path) = &self.ca_file else {
            return Ok(None);
        };
        let pem = std::fs::read(path)
            .with_context(|| format!("[bridge.matrix] ca_file: cannot read {}", path.display()))?;
        let mut certs = Vec::new();
        for item in ureq::tls::parse_pem(&pem) {
            match item {
                Ok(ureq::tls::PemItem::Certificate(cert)) => certs.push(cert),
                Ok(_) => {}
                Err(e) => bail!("[bridge.matrix] ca_file {}: {e}", path.display()),
            }
        }
        if certs.is_empty() {
            bail!(
                "[bridge.matrix] ca_file {} holds no PEM certificate",
                path.display()
            );
        }
        Ok(Some(certs))
    }

    /// The server name of the bot's id (`example.org` of `@cohost:example.org`).
    pub fn server_name(&self) -> &str {
        self.user.split_once(':').map(|(_, s)| s).unwrap_or("")
    }
}

/// `@local:server`.
pub fn is_user_id(id: &str) -> bool {
    id.starts_with('@')
        && id
            .split_once(':')
            .is_some_and(|(local, server)| local.len() > 1 && !server.is_empty())
        && !id.contains(char::is_whitespace)
}

/// Reads a secret file: a regular file of this user, readable by nobody else.
pub fn read_secret(path: &Path) -> anyhow::Result<String> {
    let meta = std::fs::metadata(path)
        .with_context(|| format!("cannot read the secret file {}", path.display()))?;
    if !meta.is_file() {
        bail!("the secret file {} is not a regular file", path.display());
    }
    let mode = meta.mode() & 0o777;
    if mode & 0o077 != 0 {
        bail!(
            "the secret file {} may be read by others (mode {mode:04o}): `chmod 600` it",
            path.display()
        );
    }
    // Our own uid: the owner of /proc/self.
    let own = std::fs::metadata("/proc/self").map(|m| m.uid()).ok();
    if own.is_some_and(|uid| uid != meta.uid()) {
        bail!(
            "the secret file {} is owned by another user (uid {})",
            path.display(),
            meta.uid()
        );
    }
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the secret file {}", path.display()))?;
    let text = text.trim().to_string();
    if text.is_empty() {
        bail!("the secret file {} is empty", path.display());
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(text: &str) -> toml::Table {
        toml::from_str(text).unwrap()
    }

    const GOOD: &str = r#"
[bridge.matrix]
homeserver = "http://127.0.0.1:8008"
user = "@bot:localhost"
password_file = "/nonexistent"
allowed_users = ["@me:localhost"]
control_room = "!abc:localhost"
[bridge.matrix.profiles.careful]
runtime = "codex"
approval_policy = "untrusted"
"#;

    #[test]
    fn a_ca_file_that_cannot_be_read_or_holds_no_certificate_is_refused_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let with = |path: &Path| {
            let text = GOOD.replace(
                "http://127.0.0.1:8008",
                &format!("https://x.org\"\nca_file = \"{}", path.display()),
            );
            MatrixConfig::from_table(&table(&text), Path::new("c.toml")).unwrap()
        };
        let missing = dir.path().join("missing.pem");
        let err = with(&missing).roots().unwrap_err();
        assert!(format!("{err:#}").contains("missing.pem"), "{err:#}");
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let err = with(&empty).roots().unwrap_err();
        assert!(
            format!("{err:#}").contains("empty.pem holds no PEM certificate"),
            "{err:#}"
        );
        let none = MatrixConfig::from_table(&table(GOOD), Path::new("c.toml")).unwrap();
        assert!(none.roots().unwrap().is_none());
    }

    #[test]
    fn a_good_table_parses_and_bad_ones_say_why() {
        let config = MatrixConfig::from_table(&table(GOOD), Path::new("c.toml")).unwrap();
        assert_eq!(config.server_name(), "localhost");
        assert_eq!(config.profiles["careful"].runtime, "codex");
        assert_eq!(config.edit_interval_ms, 2000);
        for (from, to, says) in [
            ("\"@me:localhost\"", "\"me\"", "not a Matrix user id"),
            ("\"!abc:localhost\"", "\"abc\"", "control_room"),
            (
                "http://127.0.0.1:8008",
                "ftp://x.org",
                "http:// or https:// URL",
            ),
            (
                "allowed_users",
                "ca_file = \"/etc/ca.pem\"\nallowed_users",
                "not an https:// URL",
            ),
            ("approval_policy", "approval_polic", "unknown field"),
        ] {
            let text = GOOD.replace(from, to);
            let err = MatrixConfig::from_table(&table(&text), Path::new("c.toml"))
                .err()
                .unwrap();
            assert!(format!("{err:#}").contains(says), "{from}: {err:#}");
        }
        let err = MatrixConfig::from_table(&table("[other]\n"), Path::new("c.toml"))
            .err()
            .unwrap();
        assert!(err.to_string().contains("no [bridge.matrix]"));
    }

    #[test]
    fn a_secret_file_others_may_read_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("cohost-matrix-secret-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("pw");
        std::fs::write(&file, "hunter2\n").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        let err = read_secret(&file).err().unwrap();
        assert!(err.to_string().contains("chmod 600"), "{err}");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(read_secret(&file).unwrap(), "hunter2");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
