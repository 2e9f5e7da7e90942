//! `cohost hooks install|uninstall|status` on the file alone (no daemon, no Claude: the real
//! Claude's side is `suite::claude::hooks`): `~/.claude/settings.json` by default, a file that
//! did not exist, one that is not JSON, a hook binary that moved, and a file changed after the
//! install.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use serde_json::Value;

use crate::support::*;

struct Env {
    dir: tempfile::TempDir,
}

impl Env {
    fn new() -> Env {
        let dir = temp_dir("cohost-hooks-");
        std::fs::create_dir_all(dir.path().join("home")).unwrap();
        Env { dir }
    }

    fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    fn cohost_home(&self) -> PathBuf {
        self.dir.path().join("cohost")
    }

    fn settings(&self) -> PathBuf {
        self.home().join(".claude/settings.json")
    }

    /// `cohost hooks ARGS` with this `HOME` (no `CLAUDE_CONFIG_DIR`), and `hook` as the hook
    /// binary when given.
    fn hooks(&self, args: &[&str], hook: Option<&Path>) -> Output {
        let mut command = Command::new(BIN);
        command.arg("hooks").args(args);
        for name in SCRUBBED_ENV {
            command.env_remove(name);
        }
        command
            .env_remove("CLAUDE_CONFIG_DIR")
            .env("HOME", self.home())
            .env("COHOST_HOME", self.cohost_home());
        match hook {
            Some(hook) => command.env("COHOST_HOOK_BIN", hook),
            None => command.env_remove("COHOST_HOOK_BIN"),
        };
        run_with_timeout(&mut command, Duration::from_secs(30))
    }

    #[track_caller]
    fn ok(&self, args: &[&str], hook: Option<&Path>) -> String {
        let out = self.hooks(args, hook);
        assert!(
            out.status.success(),
            "cohost hooks {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

#[test]
fn hooks_install_into_a_missing_file_and_uninstall_removes_it() {
    let env = Env::new();
    let status = env.ok(&["status"], None);
    assert!(status.contains("hooks:     not installed"), "{status}");
    assert!(
        status.contains(&env.settings().display().to_string()),
        "{status}"
    );
    let said = env.ok(&["install"], None);
    assert!(
        said.contains(&env.settings().display().to_string()),
        "{said}"
    );
    let value: Value =
        serde_json::from_str(&std::fs::read_to_string(env.settings()).unwrap()).unwrap();
    let hooks = value["hooks"].as_object().unwrap();
    assert!(hooks.contains_key("PermissionRequest") && hooks.contains_key("Stop"));
    let command = value["hooks"]["Stop"][0]["hooks"][0]["command"]
        .as_str()
        .unwrap()
        .to_owned();
    let hook = Path::new(BIN).with_file_name("cohost-hook");
    assert_eq!(
        command,
        format!(
            "{} --home {} Stop",
            hook.display(),
            env.cohost_home().display()
        )
    );
    let status: Value = serde_json::from_str(&env.ok(&["status", "--json"], None)).unwrap();
    assert_eq!(status["state"], "installed");
    assert_eq!(status["restorable"], true);
    let said = env.ok(&["uninstall"], None);
    assert!(said.contains("there was none before"), "{said}");
    assert!(!env.settings().exists());
    assert!(
        !env.settings()
            .with_file_name("settings.json.cohost-install.json")
            .exists()
    );
    let said = env.ok(&["uninstall"], None);
    assert!(said.contains("nothing changed"), "{said}");
}

#[test]
fn hooks_refuse_a_file_that_is_not_json_and_leave_it() {
    let env = Env::new();
    std::fs::create_dir_all(env.settings().parent().unwrap()).unwrap();
    let broken = "{\n  \"model\": \"opus\",\n}\n";
    std::fs::write(env.settings(), broken).unwrap();
    for args in [&["install"][..], &["uninstall"], &["status"]] {
        let out = env.hooks(args, None);
        assert!(!out.status.success(), "{args:?} accepted it");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("not valid JSON") && stderr.contains("settings.json"),
            "{stderr}"
        );
        assert_eq!(std::fs::read_to_string(env.settings()).unwrap(), broken);
    }
    assert!(
        !env.settings()
            .with_file_name("settings.json.cohost-backup")
            .exists()
    );
}

#[test]
fn hooks_status_says_stale_when_the_hook_moved_and_install_brings_it_back() {
    let env = Env::new();
    let moved = env.dir.path().join("old-bin/cohost-hook");
    std::fs::create_dir_all(moved.parent().unwrap()).unwrap();
    std::fs::copy(Path::new(BIN).with_file_name("cohost-hook"), &moved).unwrap();
    env.ok(&["install"], Some(&moved));
    std::fs::remove_file(&moved).unwrap();
    let status = env.ok(&["status"], None);
    assert!(status.contains("hooks:     stale"), "{status}");
    assert!(status.contains("does not exist"), "{status}");
    let said = env.ok(&["install"], None);
    assert!(said.contains("added cohost's hook"), "{said}");
    let status = env.ok(&["status"], None);
    assert!(status.contains("hooks:     installed"), "{status}");
    // Nothing but cohost wrote it since the first install: still restorable (to no file).
    env.ok(&["uninstall"], None);
    assert!(!env.settings().exists());
}

#[test]
fn hooks_uninstall_after_a_change_removes_only_cohosts_entries() {
    let env = Env::new();
    std::fs::create_dir_all(env.settings().parent().unwrap()).unwrap();
    let original = "{\n  \"model\": \"opus\"\n}\n";
    std::fs::write(env.settings(), original).unwrap();
    env.ok(&["install"], None);
    // The person (or Claude) changes the file after the install.
    let changed = std::fs::read_to_string(env.settings())
        .unwrap()
        .replace("\"opus\"", "\"sonnet\"");
    std::fs::write(env.settings(), &changed).unwrap();
    let status = env.ok(&["status"], None);
    assert!(status.contains("removes cohost's entries only"), "{status}");
    let said = env.ok(&["uninstall"], None);
    assert!(
        said.contains("only cohost's hook entries were removed"),
        "{said}"
    );
    assert_eq!(
        std::fs::read_to_string(env.settings()).unwrap(),
        "{\n  \"model\": \"sonnet\"\n}\n"
    );
    // Their settings from before the install are kept.
    assert_eq!(
        std::fs::read_to_string(env.settings().with_file_name("settings.json.cohost-backup"))
            .unwrap(),
        original
    );
}
