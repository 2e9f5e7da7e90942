//! The CODEX_HOME cohost gives each codex backend: a private directory it owns, seeded once
//! with the user's `config.toml` and `auth.json` so the backend uses the same model settings
//! and login as the user's own codex.
//!
//! Only those two files are ever copied, only when the target lacks them (so later edits in
//! the managed home are kept), and the user's own CODEX_HOME is only ever read — never written,
//! chmodded or locked. Codex writes sessions, sqlite state and helper links into the managed
//! home, never into the user's. Called by the codex host before it spawns a backend.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The files copied from the user's CODEX_HOME, with the mode each copy gets. Both may hold
/// secrets (`auth.json` tokens; `config.toml` provider settings), so both are private.
const SEED_FILES: [(&str, u32); 2] = [("config.toml", 0o600), ("auth.json", 0o600)];

/// The mode of a managed home directory.
const HOME_DIR_MODE: u32 = 0o700;

#[derive(Debug, thiserror::Error)]
pub enum HomeError {
    /// The managed home (or a parent) could not be created or made private.
    #[error("cannot create codex home {path}: {source}")]
    Create {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// `target` exists and is not a directory.
    #[error("codex home {path} exists and is not a directory")]
    NotADirectory { path: PathBuf },
    /// `target` is the user's own CODEX_HOME; preparing it would modify the user's home.
    #[error("refusing to manage {path}: it is the user's own CODEX_HOME")]
    IsUserHome { path: PathBuf },
    /// Copying a seed file failed; the target was left without it.
    #[error("cannot copy {from} to {to}: {source}")]
    Copy {
        from: PathBuf,
        to: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// The user's own CODEX_HOME: `$CODEX_HOME` if set and non-empty, else `$HOME/.codex`; `None`
/// when neither variable is set.
pub fn user_codex_home() -> Option<PathBuf> {
    if let Some(home) = std::env::var_os("CODEX_HOME").filter(|home| !home.is_empty()) {
        return Some(PathBuf::from(home));
    }
    std::env::var_os("HOME")
        .filter(|home| !home.is_empty())
        .map(|home| PathBuf::from(home).join(".codex"))
}

/// Creates the managed home `target` (mode 0700, parents as needed) and copies `config.toml`
/// and `auth.json` from `user_home` into it when they exist there and `target` lacks them.
/// Copies are mode 0600. Idempotent; safe to call before every spawn.
pub fn prepare_home(target: &Path, user_home: Option<&Path>) -> Result<(), HomeError> {
    let create_error = |source| HomeError::Create {
        path: target.to_owned(),
        source,
    };
    if let Some(user_home) = user_home
        && same_directory(target, user_home)
    {
        return Err(HomeError::IsUserHome {
            path: target.to_owned(),
        });
    }
    match std::fs::symlink_metadata(target) {
        Ok(meta) if meta.is_dir() => {}
        Ok(_) => {
            return Err(HomeError::NotADirectory {
                path: target.to_owned(),
            });
        }
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(HOME_DIR_MODE)
                .create(target)
                .map_err(create_error)?;
        }
        Err(err) => return Err(create_error(err)),
    }
    std::fs::set_permissions(target, std::fs::Permissions::from_mode(HOME_DIR_MODE))
        .map_err(create_error)?;

    let Some(user_home) = user_home else {
        return Ok(());
    };
    for (name, mode) in SEED_FILES {
        let from = user_home.join(name);
        let to = target.join(name);
        if std::fs::symlink_metadata(&to).is_ok() {
            continue; // the managed home has its own copy; keep it
        }
        if !std::fs::metadata(&from).is_ok_and(|meta| meta.is_file()) {
            continue; // nothing to seed from
        }
        copy_private(&from, &to, mode).map_err(|source| HomeError::Copy {
            from: from.clone(),
            to: to.clone(),
            source,
        })?;
        tracing::debug!(from = %from.display(), to = %to.display(), "seeded codex home");
    }
    Ok(())
}

/// Whether two paths name the same existing directory.
fn same_directory(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// Copies `from` to `to` with `mode`, never leaving a partial `to` behind and never replacing
/// a `to` that appeared meanwhile: the bytes go to a temporary file created with `mode` from
/// the start, which is then hard-linked into place (failing if `to` exists) and removed.
fn copy_private(from: &Path, to: &Path, mode: u32) -> std::io::Result<()> {
    let file_name = to
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temp = to.with_file_name(format!(".{file_name}.cohost-{}.tmp", std::process::id()));
    let _ = std::fs::remove_file(&temp);
    let result = (|| {
        let mut source = std::fs::File::open(from)?;
        let mut dest = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&temp)?;
        std::io::copy(&mut source, &mut dest)?;
        dest.flush()?;
        dest.sync_all()?;
        match std::fs::hard_link(&temp, to) {
            Ok(()) => Ok(()),
            Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
            Err(err) => Err(err),
        }
    })();
    let _ = std::fs::remove_file(&temp);
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    fn user_home_with_files(dir: &Path) -> PathBuf {
        let user = dir.join("user-codex");
        std::fs::create_dir_all(user.join("sessions")).unwrap();
        std::fs::write(user.join("config.toml"), "model = \"gpt-x\"\n").unwrap();
        std::fs::write(user.join("auth.json"), "{\"token\":\"secret\"}").unwrap();
        std::fs::set_permissions(
            user.join("auth.json"),
            std::fs::Permissions::from_mode(0o644),
        )
        .unwrap();
        std::fs::write(user.join("history.jsonl"), "{}\n").unwrap();
        std::fs::write(user.join("sessions/rollout.jsonl"), "{}\n").unwrap();
        user
    }

    /// Every file under `dir` with its contents and mode, for before/after comparisons.
    fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>, u32)> {
        let mut out = Vec::new();
        let mut stack = vec![dir.to_owned()];
        while let Some(dir) = stack.pop() {
            out.push((dir.clone(), Vec::new(), mode(&dir)));
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                } else {
                    out.push((path.clone(), std::fs::read(&path).unwrap(), mode(&path)));
                }
            }
        }
        out.sort();
        out
    }

    #[test]
    fn creates_a_private_home_and_copies_only_config_and_auth() {
        let dir = tempfile::tempdir().unwrap();
        let user = user_home_with_files(dir.path());
        let before = snapshot(&user);
        let target = dir.path().join("state/backends/b1/codex-home");

        prepare_home(&target, Some(&user)).unwrap();

        assert_eq!(mode(&target), 0o700);
        let mut names: Vec<String> = std::fs::read_dir(&target)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, vec!["auth.json", "config.toml"]);
        assert_eq!(
            std::fs::read_to_string(target.join("config.toml")).unwrap(),
            "model = \"gpt-x\"\n"
        );
        assert_eq!(
            std::fs::read_to_string(target.join("auth.json")).unwrap(),
            "{\"token\":\"secret\"}"
        );
        assert_eq!(mode(&target.join("auth.json")), 0o600);
        assert_eq!(mode(&target.join("config.toml")), 0o600);
        assert_eq!(snapshot(&user), before, "the user's home was modified");
    }

    #[test]
    fn is_idempotent_and_keeps_the_managed_copies() {
        let dir = tempfile::tempdir().unwrap();
        let user = user_home_with_files(dir.path());
        let target = dir.path().join("home");
        prepare_home(&target, Some(&user)).unwrap();
        std::fs::write(target.join("config.toml"), "model = \"mine\"\n").unwrap();
        std::fs::write(user.join("auth.json"), "{\"token\":\"rotated\"}").unwrap();

        prepare_home(&target, Some(&user)).unwrap();
        prepare_home(&target, Some(&user)).unwrap();

        assert_eq!(
            std::fs::read_to_string(target.join("config.toml")).unwrap(),
            "model = \"mine\"\n"
        );
        assert_eq!(
            std::fs::read_to_string(target.join("auth.json")).unwrap(),
            "{\"token\":\"secret\"}"
        );
        let leftovers: Vec<_> = std::fs::read_dir(&target)
            .unwrap()
            .map(|entry| entry.unwrap().file_name())
            .filter(|name| name.to_string_lossy().ends_with(".tmp"))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
    }

    #[test]
    fn works_without_a_user_home_or_its_files() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("a");
        prepare_home(&target, None).unwrap();
        assert!(target.is_dir());

        let empty_user = dir.path().join("empty-user");
        std::fs::create_dir(&empty_user).unwrap();
        let target = dir.path().join("b");
        prepare_home(&target, Some(&empty_user)).unwrap();
        assert_eq!(std::fs::read_dir(&target).unwrap().count(), 0);

        let target = dir.path().join("c");
        prepare_home(&target, Some(&dir.path().join("no-such-user-home"))).unwrap();
        assert_eq!(std::fs::read_dir(&target).unwrap().count(), 0);
    }

    #[test]
    fn tightens_an_existing_target_and_copies_what_it_lacks() {
        let dir = tempfile::tempdir().unwrap();
        let user = user_home_with_files(dir.path());
        let target = dir.path().join("existing");
        std::fs::create_dir(&target).unwrap();
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(target.join("auth.json"), "{}").unwrap();

        prepare_home(&target, Some(&user)).unwrap();

        assert_eq!(mode(&target), 0o700);
        assert_eq!(
            std::fs::read_to_string(target.join("auth.json")).unwrap(),
            "{}"
        );
        assert!(target.join("config.toml").is_file());
    }

    #[test]
    fn refuses_the_users_own_home_and_non_directories() {
        let dir = tempfile::tempdir().unwrap();
        let user = user_home_with_files(dir.path());
        let before = snapshot(&user);
        let err = prepare_home(&user, Some(&user)).unwrap_err();
        assert!(matches!(err, HomeError::IsUserHome { .. }), "{err:?}");
        assert_eq!(snapshot(&user), before);

        let file = dir.path().join("file");
        std::fs::write(&file, "").unwrap();
        let err = prepare_home(&file, Some(&user)).unwrap_err();
        assert!(matches!(err, HomeError::NotADirectory { .. }), "{err:?}");
    }
}
