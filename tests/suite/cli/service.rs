//! `cohost service install|uninstall|status`: the systemd user unit, checked by
//! `systemd-analyze verify` where it is installed. `systemctl` is a stand-in script on PATH that
//! records its arguments, so the tests never touch the user manager of the machine they run on;
//! it plays a running user manager or none.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use crate::support::*;

struct Env {
    dir: tempfile::TempDir,
}

impl Env {
    /// A config home, and a fake `systemctl` that answers as a running user manager (`up`) or
    /// as none.
    fn new(up: bool) -> Env {
        let dir = temp_dir("cohost-service-");
        let bin = dir.path().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        let script = format!(
            "#!/bin/sh\necho \"$*\" >> '{}'\ncase \"$2\" in\n  show-environment) exit {};;\n  is-enabled) echo enabled;;\n  is-active) echo active;;\nesac\nexit 0\n",
            dir.path().join("systemctl.log").display(),
            if up { 0 } else { 1 }
        );
        std::fs::write(bin.join("systemctl"), script).unwrap();
        std::fs::set_permissions(
            bin.join("systemctl"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        Env { dir }
    }

    fn unit(&self) -> PathBuf {
        self.dir.path().join("config/systemd/user/cohost.service")
    }

    fn calls(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.path().join("systemctl.log"))
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }

    fn cohost(&self, args: &[&str], home: &Path) -> Output {
        let mut command = Command::new(BIN);
        command.args(args);
        for name in SCRUBBED_ENV {
            command.env_remove(name);
        }
        let path = format!(
            "{}:{}",
            self.dir.path().join("bin").display(),
            std::env::var("PATH").unwrap_or_default()
        );
        command
            .env("XDG_CONFIG_HOME", self.dir.path().join("config"))
            .env("COHOST_HOME", home)
            .env("PATH", path)
            .env("NO_COLOR", "1");
        run_with_timeout(&mut command, Duration::from_secs(15))
    }

    fn cohost_ok(&self, args: &[&str], home: &Path) -> String {
        let output = self.cohost(args, home);
        assert!(
            output.status.success(),
            "cohost {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).unwrap()
    }
}

#[test]
fn service_install_writes_a_verified_unit_enables_it_and_uninstall_removes_it() {
    let env = Env::new(true);
    let (tmux, _) = tmux_with_sessions(&["s"]);
    let daemon = TestDaemon::start(&tmux, &[]);
    let home = daemon.home().to_path_buf();
    let out = env.cohost_ok(&["service", "install"], &home);
    assert!(
        out.contains(&format!("wrote {}", env.unit().display())),
        "{out}"
    );
    assert!(out.contains("enabled and started cohost.service"), "{out}");

    let unit = std::fs::read_to_string(env.unit()).unwrap();
    let lines: Vec<&str> = unit.lines().collect();
    for expected in [
        format!("ExecStart=\"{BIN}\" serve"),
        format!("Environment=\"COHOST_HOME={}\"", home.display()),
        "Restart=on-failure".to_string(),
        "StandardError=journal".to_string(),
        "WantedBy=default.target".to_string(),
    ] {
        assert!(
            lines.contains(&expected.as_str()),
            "no {expected:?} in\n{unit}"
        );
    }
    assert!(
        lines.iter().any(|l| l.starts_with("Environment=\"PATH=")),
        "{unit}"
    );
    assert_eq!(
        env.calls(),
        [
            "--user show-environment",
            "--user daemon-reload",
            "--user enable --now cohost.service"
        ]
    );

    // systemd's own checker accepts it (the user manager's view, offline).
    if let Some(analyze) = ["/usr/bin/systemd-analyze", "/bin/systemd-analyze"]
        .iter()
        .find(|p| Path::new(p).exists())
    {
        let runtime = env.dir.path().join("runtime");
        std::fs::create_dir_all(&runtime).unwrap();
        std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o700)).unwrap();
        let output = run_with_timeout(
            Command::new(analyze)
                .args(["--user", "verify"])
                .arg(env.unit())
                .env("XDG_RUNTIME_DIR", &runtime),
            Duration::from_secs(30),
        );
        assert!(
            output.status.success() && output.stderr.is_empty(),
            "systemd-analyze verify: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }

    let status: Value =
        serde_json::from_str(&env.cohost_ok(&["service", "status", "--json"], &home)).unwrap();
    assert_eq!(status["installed"], true);
    assert_eq!(status["systemd"], true);
    assert_eq!(status["enabled"], "enabled");
    assert_eq!(status["active"], "active");
    assert_eq!(status["daemonHealthy"], true, "{status}");

    let out = env.cohost_ok(&["service", "uninstall"], &home);
    assert!(out.contains("removed"), "{out}");
    assert!(!env.unit().exists());
    assert!(
        env.calls().ends_with(&[
            "--user show-environment".to_string(),
            "--user disable --now cohost.service".to_string(),
            "--user daemon-reload".to_string()
        ]),
        "{:?}",
        env.calls()
    );
    let status: Value =
        serde_json::from_str(&env.cohost_ok(&["service", "status", "--json"], &home)).unwrap();
    assert_eq!(status["installed"], false);
}

#[test]
fn without_systemd_service_install_says_so_and_prints_what_to_run() {
    let env = Env::new(false);
    let home = env.dir.path().join("home");
    let out = env.cohost_ok(&["service", "install"], &home);
    assert!(out.contains("systemd is not running here"), "{out}");
    assert!(out.contains(&format!("nohup {BIN} serve")), "{out}");
    // Only asked whether a manager answers: nothing enabled.
    assert_eq!(env.calls(), ["--user show-environment"]);
    assert!(env.unit().is_file(), "the unit is still written for later");

    let out = env.cohost_ok(&["service", "status"], &home);
    assert!(out.contains("installed"), "{out}");
    assert!(out.contains("systemd is not running here"), "{out}");
    assert!(out.contains("daemon:    not answering"), "{out}");
}
