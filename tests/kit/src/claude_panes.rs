//! Claude Code TUIs a person starts by hand: each in a pane of a private tmux server, under a
//! [`ClaudeEnv`], talking to the scripted [`MockMessages`] — started and waited on until its
//! input box is ready, its screen and its session file's status read, keys pressed and prompts
//! pasted like a person's; every TUI killed with the rig. The Claude watcher's and the Claude
//! hooks' suites drive them.

use std::path::PathBuf;
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::claude_env::{ClaudeEnv, is_running};
use super::mock_messages::MockMessages;
use super::tmux::TmuxServer;

/// Makes a suite's rig, a struct with a `claude: ClaudePanes` field and what else the suite
/// needs, read and used as its [`ClaudePanes`] (`Deref`, `DerefMut`).
#[macro_export]
macro_rules! rig_of_claude_panes {
    ($rig:ty) => {
        impl ::std::ops::Deref for $rig {
            type Target = $crate::claude_panes::ClaudePanes;

            fn deref(&self) -> &Self::Target {
                &self.claude
            }
        }

        impl ::std::ops::DerefMut for $rig {
            fn deref_mut(&mut self) -> &mut Self::Target {
                &mut self.claude
            }
        }
    };
}

/// One claude TUI in a pane.
pub struct Tui {
    pub pane: String,
    pub pid: u32,
}

/// A private tmux server, Claude environment and mock for TUIs started by hand.
pub struct ClaudePanes {
    // Field order is drop order: the tmux server (and claude with it) goes first.
    pub tmux: TmuxServer,
    pub env: ClaudeEnv,
    pub mock: MockMessages,
    /// Where Claude writes a TUI's `<pid>.json` (`~/.claude/sessions`, or `sessions` in the
    /// `CLAUDE_CONFIG_DIR` a suite sets).
    pub sessions_dir: PathBuf,
    /// How long a wait on a TUI may take.
    pub wait: Duration,
    /// Files whose lines a timed-out wait shows too (a hook's own log).
    pub shown_on_timeout: Vec<PathBuf>,
    tuis: Vec<u32>,
}

impl ClaudePanes {
    /// A new tmux server for TUIs of `env` talking to `mock`; a wait takes at most `wait`.
    pub fn new(env: ClaudeEnv, mock: MockMessages, wait: Duration) -> ClaudePanes {
        ClaudePanes {
            tmux: TmuxServer::new(),
            sessions_dir: env.sessions_dir(),
            env,
            mock,
            wait,
            shown_on_timeout: Vec::new(),
            tuis: Vec::new(),
        }
    }

    /// Runs `argv` as tmux session `session` in the env's work directory and environment; the
    /// process is killed with the rig.
    pub fn launch(&mut self, session: &str, argv: &[String]) -> Tui {
        let (pane, pid) = self
            .tmux
            .launch(session, self.env.workdir(), &self.env.env(), argv);
        self.tuis.push(pid);
        Tui { pane, pid }
    }

    /// Starts claude (permission mode `default`: it asks before `touch`) as tmux session
    /// `session` and waits until its input box is ready.
    pub fn start(&mut self, session: &str) -> Tui {
        let argv = vec![
            self.env.claude_bin().to_string_lossy().into_owned(),
            "--permission-mode".into(),
            "default".into(),
        ];
        let tui = self.launch(session, &argv);
        self.wait_ready(&tui);
        tui
    }

    pub fn screen(&self, tui: &Tui) -> String {
        self.tmux.run(&["capture-pane", "-p", "-t", &tui.pane])
    }

    /// The TUI's `<pid>.json` status.
    pub fn status_of(&self, tui: &Tui) -> Option<String> {
        let file = self.sessions_dir.join(format!("{}.json", tui.pid));
        let text = std::fs::read_to_string(file).ok()?;
        let value: Value = serde_json::from_str(&text).ok()?;
        value["status"].as_str().map(str::to_owned)
    }

    /// Waits until `check` holds; fails with the screen, the mock and
    /// [`shown_on_timeout`](Self::shown_on_timeout).
    #[track_caller]
    pub fn wait(&self, tui: &Tui, what: &str, mut check: impl FnMut() -> bool) {
        let deadline = Instant::now() + self.wait;
        while !check() {
            if Instant::now() >= deadline {
                let shown: Vec<String> = self
                    .shown_on_timeout
                    .iter()
                    .map(|path| {
                        let lines = std::fs::read_to_string(path).unwrap_or_default();
                        format!("--- {}:\n{lines}", path.display())
                    })
                    .collect();
                panic!(
                    "timed out after {:?} waiting for {what}\n--- screen ---\n{}\n--- mock: {}\n{}",
                    self.wait,
                    self.screen(tui),
                    self.mock.summary(),
                    shown.join("\n")
                );
            }
            thread::sleep(Duration::from_millis(50));
        }
    }

    /// The input box is on screen and the session file says idle, for half a second.
    pub fn wait_ready(&self, tui: &Tui) {
        let mut since: Option<Instant> = None;
        self.wait(tui, "a ready input box", || {
            let ready = self.screen(tui).contains("❯\u{a0}")
                && self.status_of(tui).as_deref() == Some("idle");
            if !ready {
                since = None;
                return false;
            }
            since.get_or_insert_with(Instant::now).elapsed() >= Duration::from_millis(500)
        });
    }

    pub fn keys(&self, tui: &Tui, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", tui.pane.as_str()];
        args.extend_from_slice(keys);
        self.tmux.run(&args);
    }

    /// Pastes `text` (one line), waits until the box shows it, presses Enter.
    pub fn submit(&self, tui: &Tui, text: &str) {
        let path = self.env.scratch().join("paste.txt");
        std::fs::write(&path, text).expect("write paste file");
        self.tmux.run(&[
            "load-buffer",
            "-b",
            "inj",
            path.to_str().expect("utf-8 path"),
        ]);
        self.tmux
            .run(&["paste-buffer", "-p", "-d", "-b", "inj", "-t", &tui.pane]);
        self.wait(tui, "the pasted prompt in the box", || {
            self.screen(tui).contains(text)
        });
        self.keys(tui, &["Enter"]);
    }
}

impl Drop for ClaudePanes {
    fn drop(&mut self) {
        for pid in &self.tuis {
            if is_running(*pid) {
                let _ = Command::new("kill")
                    .args(["-KILL", &pid.to_string()])
                    .stderr(std::process::Stdio::null())
                    .status();
            }
        }
        let _ = self.tmux.command(&["kill-server"]);
        self.env.kill_leftover_processes();
    }
}
