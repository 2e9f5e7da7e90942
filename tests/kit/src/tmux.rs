//! A real tmux server on a private socket, killed when dropped (tmux daemonizes, so nothing else
//! would stop it): the integration tests and the benches start one each.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::time::Duration;

use super::{run_with_timeout, temp_dir};

pub struct TmuxServer {
    dir: tempfile::TempDir,
    socket: PathBuf,
}

/// Panics (never skips) when tmux is missing: these tests and benches are about tmux integration.
pub fn require_tmux() {
    static CHECKED: OnceLock<Result<String, String>> = OnceLock::new();
    let result = CHECKED.get_or_init(|| match Command::new("tmux").arg("-V").output() {
        Ok(output) if output.status.success() => {
            Ok(String::from_utf8_lossy(&output.stdout).trim().to_string())
        }
        Ok(output) => Err(format!(
            "`tmux -V` failed: {}",
            String::from_utf8_lossy(&output.stderr)
        )),
        Err(e) => Err(format!("cannot run `tmux`: {e}")),
    });
    if let Err(error) = result {
        panic!(
            "tmux is required by cohost's integration tests and benches but is not usable ({error}). \
             Install it (e.g. `apt-get install tmux`) and run the tests again."
        );
    }
}

impl TmuxServer {
    /// A server with no sessions yet (tmux starts it with the first `new-session`).
    pub fn new() -> Self {
        require_tmux();
        let dir = temp_dir("cohost-tmux-");
        let socket = dir.path().join("tmux.sock");
        TmuxServer { dir, socket }
    }

    /// A server with one session per `(name, dir)`.
    pub fn with_sessions(sessions: &[(&str, &Path)]) -> Self {
        let server = TmuxServer::new();
        for (name, dir) in sessions {
            server.new_session(name, dir);
        }
        server
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// A scratch directory that lives as long as the server.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// `tmux -S socket -f /dev/null ARGS`, whatever it answers.
    pub fn command(&self, args: &[&str]) -> Output {
        let mut command = Command::new("tmux");
        command
            .arg("-S")
            .arg(&self.socket)
            .arg("-f")
            .arg("/dev/null")
            .args(args)
            .env_remove("TMUX")
            .env_remove("TMUX_PANE")
            .env("SHELL", "/bin/sh");
        run_with_timeout(&mut command, Duration::from_secs(10))
    }

    /// Runs a tmux command that must succeed; returns its stdout.
    pub fn run(&self, args: &[&str]) -> String {
        let output = self.command(args);
        if !output.status.success() {
            panic!(
                "tmux {args:?} failed ({}): {}",
                output.status,
                String::from_utf8_lossy(&output.stderr)
            );
        }
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// Starts `argv` (exec'd, no shell: the pane's pid is the program's) as the only pane of a new
    /// tmux session `session` in `cwd`, with exactly `env` (the server itself starts from a
    /// cleared environment). Returns the pane id and pid.
    pub fn launch(
        &self,
        session: &str,
        cwd: &Path,
        env: &[(String, String)],
        argv: &[String],
    ) -> (String, u32) {
        let mut args: Vec<String> = [
            "new-session",
            "-d",
            "-s",
            session,
            "-x",
            "200",
            "-y",
            "50",
            "-P",
            "-F",
            "#{pane_id} #{pane_pid}",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        for (key, value) in env {
            args.push("-e".into());
            args.push(format!("{key}={value}"));
        }
        args.push("-c".into());
        args.push(cwd.to_string_lossy().into_owned());
        args.push("--".into());
        args.push("/usr/bin/env".into());
        args.extend(argv.iter().cloned());
        let mut command = Command::new("tmux");
        command
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("LANG", "C.UTF-8")
            .env("SHELL", "/bin/sh")
            .arg("-S")
            .arg(self.socket())
            .arg("-f")
            .arg("/dev/null")
            .args(&args);
        let output = run_with_timeout(&mut command, Duration::from_secs(10));
        assert!(
            output.status.success(),
            "tmux new-session failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let printed = String::from_utf8_lossy(&output.stdout).into_owned();
        let (pane, pid) = printed
            .trim()
            .split_once(' ')
            .unwrap_or_else(|| panic!("unexpected new-session output {printed:?}"));
        // tmux 3.3a crashes with `window-size manual` and no client; `default-size` is safe.
        self.run(&["set-option", "-g", "default-size", "200x50"]);
        (pane.to_owned(), pid.parse().expect("pane pid"))
    }

    pub fn new_session(&self, name: &str, dir: &Path) {
        std::fs::create_dir_all(dir).expect("session dir");
        let dir = dir.to_string_lossy();
        self.run(&[
            "new-session",
            "-d",
            "-s",
            name,
            "-c",
            &dir,
            "-x",
            "80",
            "-y",
            "24",
        ]);
    }

    pub fn kill_session(&self, name: &str) {
        self.run(&["kill-session", "-t", &format!("={name}")]);
    }

    /// `show-hooks -g`: every global hook, one per line.
    pub fn global_hooks(&self) -> String {
        self.run(&["show-hooks", "-g"])
    }

    /// Lines of `show-hooks -g` that carry a command (as opposed to bare hook names).
    pub fn installed_hooks(&self) -> Vec<String> {
        self.global_hooks()
            .lines()
            .filter(|line| line.contains('[') && line.contains(' '))
            .map(str::to_string)
            .collect()
    }

    /// `#{session_path}` of a session, as tmux reports it.
    pub fn session_path(&self, name: &str) -> String {
        self.run(&[
            "display-message",
            "-p",
            "-t",
            &format!("={name}:"),
            "#{session_path}",
        ])
        .trim()
        .to_string()
    }
}

impl Default for TmuxServer {
    fn default() -> Self {
        TmuxServer::new()
    }
}

impl Drop for TmuxServer {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .arg("kill-server")
            .env_remove("TMUX")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status();
    }
}
