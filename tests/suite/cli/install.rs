//! Installing cohost: `cargo install --path .` installs `cohost`, `cohost-runner` and
//! `cohost-hook` side by side, and `cohost` finds its two helpers beside its own executable first,
//! then on PATH, or says which one is missing.
//!
//! A real `cargo install` builds the whole crate again in release mode: measured, `cargo install
//! --path . --root TMP --locked --offline` into a fresh target directory took 4 min 3 s on the
//! 2-core development machine (it installed exactly `cohost`, `cohost-hook` and `cohost-runner`),
//! longer than the rest of the suite's slowest test, and sharing the suite's own target directory
//! would contend for its build lock. So the install is checked in two honest halves: cargo's own metadata says which programs
//! `cargo install --path .` installs (every `bin` target of the root package), and the test
//! lays out exactly what it installs — the three binaries of this build copied into
//! `ROOT/bin` — and runs the daemon from there.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::support::*;

const RUNNER: &str = env!("CARGO_BIN_EXE_cohost-runner");
const HOOK: &str = env!("CARGO_BIN_EXE_cohost-hook");

#[test]
fn cargo_install_path_dot_installs_the_four_programs() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let output = run_with_timeout(
        Command::new(cargo)
            .args([
                "metadata",
                "--no-deps",
                "--offline",
                "--format-version",
                "1",
            ])
            .current_dir(env!("CARGO_MANIFEST_DIR")),
        Duration::from_secs(60),
    );
    assert!(
        output.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let metadata: Value = serde_json::from_slice(&output.stdout).unwrap();
    let root = metadata["packages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| {
            Path::new(p["manifest_path"].as_str().unwrap())
                == Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml")
        })
        .unwrap();
    let mut bins: Vec<&str> = root["targets"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["kind"].as_array().unwrap().iter().any(|k| k == "bin"))
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    bins.sort();
    assert_eq!(
        bins,
        ["cohost", "cohost-hook", "cohost-matrix", "cohost-runner"]
    );
}

/// `ROOT/bin` holding the given programs of this build, as `cargo install --root ROOT` lays them.
fn install(root: &Path, programs: &[(&str, &str)]) -> PathBuf {
    let bin = root.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    for (name, built) in programs {
        std::fs::copy(built, bin.join(name)).unwrap();
    }
    bin
}

/// `cohost serve` run from an installed copy, PATH limited to the system's directories (and
/// `extra_path`): returns the child and its address.
struct Installed {
    child: Child,
    cohost: PathBuf,
    home: PathBuf,
    path: String,
    _tmux: TmuxServer,
}

impl Installed {
    fn start(bin: &Path, home: &Path, extra_path: Option<&Path>) -> Installed {
        let tmux = TmuxServer::new();
        let mut path = String::from("/usr/local/bin:/usr/bin:/bin");
        if let Some(extra) = extra_path {
            path = format!("{}:{path}", extra.display());
        }
        let cohost = bin.join("cohost");
        let mut command = Command::new(&cohost);
        command
            .args(["serve", "--listen", "127.0.0.1:0", "--tmux-socket"])
            .arg(tmux.socket())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        scrub(&mut command, home, &path);
        let mut child = command.spawn().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let line = rx
            .recv_timeout(Duration::from_secs(15))
            .expect("the installed cohost did not start");
        assert!(line.starts_with("cohost listening on"), "{line}");
        Installed {
            child,
            cohost,
            home: home.to_path_buf(),
            path,
            _tmux: tmux,
        }
    }

    /// `cohost doctor --json` of the installed copy.
    fn doctor(&self) -> Value {
        let mut command = Command::new(&self.cohost);
        command.args(["doctor", "--json"]);
        scrub(&mut command, &self.home, &self.path);
        let output = run_with_timeout(&mut command, Duration::from_secs(30));
        serde_json::from_slice(&output.stdout)
            .unwrap_or_else(|e| panic!("doctor: {e}: {}", String::from_utf8_lossy(&output.stderr)))
    }
}

impl Drop for Installed {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn scrub(command: &mut Command, home: &Path, path: &str) {
    for name in SCRUBBED_ENV {
        command.env_remove(name);
    }
    for name in [
        "COHOST_RUNNER_BIN",
        "COHOST_HOOK_BIN",
        "COHOST_CLAUDE_BIN",
        "COHOST_CODEX_BIN",
    ] {
        command.env_remove(name);
    }
    command
        .env("COHOST_HOME", home)
        .env("COHOST_WATCHERS", "none")
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env("PATH", path);
}

fn helper_issues(doctor: &Value) -> Vec<String> {
    doctor["issues"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|i| i.as_str())
        .filter(|i| i.contains("cohost-runner") || i.contains("cohost-hook"))
        .map(str::to_string)
        .collect()
}

#[test]
fn installed_cohost_finds_its_helpers_beside_it_then_on_path_or_names_the_missing_one() {
    let dir = temp_dir("cohost-install-");

    // All three in ROOT/bin, nothing on PATH: found beside cohost.
    let bin = install(
        &dir.path().join("root"),
        &[
            ("cohost", BIN),
            ("cohost-runner", RUNNER),
            ("cohost-hook", HOOK),
        ],
    );
    let daemon = Installed::start(&bin, &dir.path().join("home1"), None);
    let doctor = daemon.doctor();
    assert_eq!(helper_issues(&doctor), Vec::<String>::new(), "{doctor:#}");
    assert_eq!(doctor["claude"]["hooksInstallable"], true, "{doctor:#}");
    drop(daemon);

    // cohost alone, the helpers elsewhere on PATH: found there.
    let bin = install(&dir.path().join("alone"), &[("cohost", BIN)]);
    let elsewhere = install(
        &dir.path().join("elsewhere"),
        &[("cohost-runner", RUNNER), ("cohost-hook", HOOK)],
    );
    let daemon = Installed::start(&bin, &dir.path().join("home2"), Some(&elsewhere));
    let doctor = daemon.doctor();
    assert_eq!(helper_issues(&doctor), Vec::<String>::new(), "{doctor:#}");
    drop(daemon);

    // cohost and the runner, no hook anywhere: the error names the hook and where it looked.
    let bin = install(
        &dir.path().join("partial"),
        &[("cohost", BIN), ("cohost-runner", RUNNER)],
    );
    let daemon = Installed::start(&bin, &dir.path().join("home3"), None);
    let doctor = daemon.doctor();
    assert_eq!(doctor["claude"]["hooksInstallable"], false, "{doctor:#}");
    let issues = helper_issues(&doctor);
    assert_eq!(issues.len(), 1, "{doctor:#}");
    let expected = format!(
        "cohost-hook is missing: it is neither beside cohost (in {}) nor on PATH",
        bin.display()
    );
    assert!(issues[0].contains(&expected), "{issues:?}");
    assert!(issues[0].contains("cargo install --path ."), "{issues:?}");
}
