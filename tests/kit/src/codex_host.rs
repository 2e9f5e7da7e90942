//! A daemon hosting codex sessions against the project's mock Responses server: the fixture
//! every codex-host test starts from.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use super::Binaries;
use super::codex_home::{codex_bin, write_codex_home};
use super::daemon::TestDaemon;
use super::mock_responses::MockResponses;
use super::sessions::merged;
use super::tmux::TmuxServer;
use super::{temp_dir, wait_until};

/// How long a codex turn may take in a test before it is a failure.
pub const TURN_TIMEOUT: Duration = Duration::from_secs(30);

pub struct CodexFixture<B: Binaries> {
    pub mock: MockResponses,
    pub daemon: TestDaemon<B>,
    pub tmux: TmuxServer,
    pub work: PathBuf,
    pub codex_home: PathBuf,
    _dirs: Vec<tempfile::TempDir>,
}

impl<B: Binaries> CodexFixture<B> {
    /// A mock model server, an offline CODEX_HOME pointing at it, a private tmux server with a
    /// session `work` in the work directory, and a daemon that hosts codex from that home.
    pub fn start() -> CodexFixture<B> {
        CodexFixture::start_with_args(&[])
    }

    pub fn start_with_args(args: &[&str]) -> CodexFixture<B> {
        CodexFixture::start_with_config(args, "")
    }

    /// [`CodexFixture::start_with_args`] with `extra_toml` appended to the codex `config.toml`
    /// (an `[mcp_servers.*]` table, …) before the daemon starts.
    pub fn start_with_config(args: &[&str], extra_toml: &str) -> CodexFixture<B> {
        CodexFixture::start_with_env(args, extra_toml, &[])
    }

    /// [`CodexFixture::start_with_config`] with `env` added to the daemon's environment
    /// (`HOME`, …), after the fixture's own.
    pub fn start_with_env(
        args: &[&str],
        extra_toml: &str,
        env: &[(&str, &str)],
    ) -> CodexFixture<B> {
        let mock = MockResponses::start();
        let work_dir = temp_dir("cohost-work-");
        let home_dir = temp_dir("cohost-codex-home-");
        let work = work_dir.path().to_path_buf();
        let codex_home = home_dir.path().to_path_buf();
        let config = write_codex_home(&codex_home, &mock.base_url(), &work);
        if !extra_toml.is_empty() {
            let mut text = std::fs::read_to_string(&config).unwrap();
            text.push('\n');
            text.push_str(extra_toml);
            std::fs::write(&config, text).unwrap();
        }
        let tmux = TmuxServer::with_sessions(&[("work", work.as_path())]);
        let bin = codex_bin();
        let mut daemon_env = vec![
            ("CODEX_HOME", codex_home.to_str().unwrap()),
            ("MOCK_API_KEY", "dummy"),
            ("COHOST_CODEX_BIN", bin.to_str().unwrap()),
        ];
        daemon_env.extend_from_slice(env);
        let daemon = TestDaemon::start_with_env(Some(tmux.socket()), args, &daemon_env);
        CodexFixture {
            mock,
            daemon,
            tmux,
            work,
            codex_home,
            _dirs: vec![work_dir, home_dir],
        }
    }

    /// Creates a codex session with `extra` fields merged into the body; returns its id.
    pub fn create(&self, extra: Value) -> String {
        self.daemon.create_session(&merged(
            json!({ "runtime": "codex", "cwd": self.work }),
            &extra,
        ))
    }

    pub fn send(&self, id: &str, text: &str) -> Value {
        self.daemon.send_message(id, text)
    }

    /// Every stored event of the session so far.
    pub fn events(&self, id: &str) -> Vec<Value> {
        self.daemon.session_events(id)
    }

    /// Waits until the session has an event matching `pred`, and returns it.
    #[track_caller]
    pub fn wait_event(&self, id: &str, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        let deadline = std::time::Instant::now() + TURN_TIMEOUT;
        loop {
            if let Some(event) = self.events(id).into_iter().find(|e| pred(e)) {
                return event;
            }
            if std::time::Instant::now() >= deadline {
                let types: Vec<String> = self
                    .events(id)
                    .iter()
                    .map(|e| format!("{} {}", e["type"], e["data"]))
                    .collect();
                self.daemon.fail(&format!(
                    "timed out waiting for {what}; session events:\n{}\nmock model: {}",
                    types.join("\n"),
                    self.mock.describe()
                ));
            }
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// Waits for the `n`-th (1-based) `turn.completed` of the session.
    #[track_caller]
    pub fn wait_turns_completed(&self, id: &str, n: usize) -> Vec<Value> {
        let deadline = std::time::Instant::now() + TURN_TIMEOUT;
        loop {
            let done: Vec<Value> = self
                .events(id)
                .into_iter()
                .filter(|e| e["type"] == "turn.completed")
                .collect();
            if done.len() >= n {
                return done;
            }
            if std::time::Instant::now() >= deadline {
                self.daemon.fail(&format!(
                    "timed out waiting for {n} completed turns; events: {:#?}",
                    self.events(id)
                        .iter()
                        .map(|e| format!("{} {}", e["type"], e["data"]))
                        .collect::<Vec<_>>()
                ));
            }
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    pub fn view(&self, id: &str) -> Value {
        self.daemon.get(&format!("/api/sessions/{id}")).assert_ok()
    }

    pub fn work(&self) -> &Path {
        &self.work
    }
}

/// The `type`s of events, for order assertions.
pub fn types(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| e["type"].as_str().unwrap_or("").to_string())
        .collect()
}

/// Polls until `f` holds.
pub fn eventually(what: &str, f: impl FnMut() -> Option<()>) {
    wait_until(what, TURN_TIMEOUT, f)
}
