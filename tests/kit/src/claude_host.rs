//! A daemon hosting claude sessions against the project's mock Messages server: the fixture
//! every claude-host test starts from.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::Binaries;
use super::claude_env::{ClaudeEnv, claude_bin};
use super::daemon::TestDaemon;
use super::mock_messages::MockMessages;
use super::temp_dir;
use super::tmux::TmuxServer;

/// How long a claude turn may take in a test before it is a failure.
pub const CLAUDE_TIMEOUT: Duration = Duration::from_secs(40);

pub struct ClaudeFixture<B: Binaries> {
    pub mock: MockMessages,
    pub env: ClaudeEnv,
    pub daemon: TestDaemon<B>,
    pub tmux: TmuxServer,
    pub work: PathBuf,
    _work_dir: tempfile::TempDir,
}

impl<B: Binaries> ClaudeFixture<B> {
    /// A mock Messages server, a throwaway HOME seeded for the work directory, a private tmux
    /// server with a session `work`, and a daemon whose claude sessions open panes there.
    pub fn start() -> ClaudeFixture<B> {
        ClaudeFixture::start_with_args(&[])
    }

    /// [`ClaudeFixture::start`] with extra `cohost serve` arguments.
    pub fn start_with_args(args: &[&str]) -> ClaudeFixture<B> {
        ClaudeFixture::start_with(args, &[])
    }

    /// [`ClaudeFixture::start`] with extra `cohost serve` arguments and daemon environment.
    pub fn start_with(args: &[&str], extra_env: &[(&str, &str)]) -> ClaudeFixture<B> {
        let mock = MockMessages::start();
        let work_dir = temp_dir("cohost-claude-work-");
        let work = work_dir.path().canonicalize().unwrap();
        let env = ClaudeEnv::new(&mock.base_url(), &work);
        let tmux = TmuxServer::with_sessions(&[("work", work.as_path())]);
        let mut vars = env.env();
        vars.push((
            "COHOST_CLAUDE_BIN".into(),
            claude_bin().to_string_lossy().into_owned(),
        ));
        for (key, value) in extra_env {
            vars.push((key.to_string(), value.to_string()));
        }
        let refs: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let daemon = TestDaemon::start_with_env(Some(tmux.socket()), args, &refs);
        ClaudeFixture {
            mock,
            env,
            daemon,
            tmux,
            work,
            _work_dir: work_dir,
        }
    }

    /// Creates a claude session (extra body fields merged in); returns its id.
    pub fn create(&self, extra: Value) -> String {
        let mut body = json!({ "runtime": "claude", "cwd": self.work, "tmuxSession": "work" });
        if let (Some(body), Some(extra)) = (body.as_object_mut(), extra.as_object()) {
            for (key, value) in extra {
                body.insert(key.clone(), value.clone());
            }
        }
        let resp = self.daemon.post("/api/sessions", &body);
        if resp.status != 201 {
            self.fail(&format!("create answered {}: {}", resp.status, resp.body));
        }
        resp.json()["session"]["id"].as_str().unwrap().to_string()
    }

    pub fn send(&self, id: &str, text: &str) -> (u16, Value) {
        let resp = self.daemon.post(
            &format!("/api/sessions/{id}/messages"),
            &json!({ "text": text }),
        );
        let status = resp.status;
        (status, resp.json())
    }

    pub fn view(&self, id: &str) -> Value {
        self.daemon.get(&format!("/api/sessions/{id}")).assert_ok()
    }

    pub fn pane(&self, id: &str) -> String {
        self.view(id)["paneId"].as_str().unwrap().to_string()
    }

    pub fn screen(&self, id: &str) -> String {
        self.tmux.run(&["capture-pane", "-p", "-t", &self.pane(id)])
    }

    /// Every stored event of the session so far.
    pub fn events(&self, id: &str) -> Vec<Value> {
        self.daemon.session_events(id)
    }

    /// Fails with the daemon's stderr, the session events and the screen of every pane.
    #[track_caller]
    pub fn fail(&self, message: &str) -> ! {
        let screens = self.tmux.run(&["list-panes", "-a", "-F", "#{pane_id}"]);
        let mut text = String::new();
        for pane in screens.lines() {
            text.push_str(&format!("--- screen of {pane} ---\n"));
            text.push_str(&self.tmux.run(&["capture-pane", "-p", "-t", pane]));
        }
        self.daemon.fail(&format!("{message}\n{text}"))
    }

    /// Waits until the session has an event matching `pred`, and returns it.
    #[track_caller]
    pub fn wait_event(&self, id: &str, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + CLAUDE_TIMEOUT;
        loop {
            if let Some(event) = self.events(id).into_iter().find(|e| pred(e)) {
                return event;
            }
            if Instant::now() >= deadline {
                let events: Vec<String> = self
                    .events(id)
                    .iter()
                    .map(|e| format!("{} {}", e["type"], e["data"]))
                    .collect();
                self.fail(&format!(
                    "timed out waiting for {what}; events:\n{}",
                    events.join("\n")
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    #[track_caller]
    pub fn wait_turns_completed(&self, id: &str, n: usize) -> Vec<Value> {
        let deadline = Instant::now() + CLAUDE_TIMEOUT;
        loop {
            let done: Vec<Value> = self
                .events(id)
                .into_iter()
                .filter(|e| e["type"] == "turn.completed")
                .collect();
            if done.len() >= n {
                return done;
            }
            if Instant::now() >= deadline {
                let events: Vec<String> = self
                    .events(id)
                    .iter()
                    .map(|e| format!("{} {}", e["type"], e["data"]))
                    .collect();
                self.fail(&format!(
                    "timed out waiting for {n} completed turns; events:\n{}",
                    events.join("\n")
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}
