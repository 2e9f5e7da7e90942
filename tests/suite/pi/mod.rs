//! Hosted Pi sessions against the real `pi --mode rpc` (the release of this run of the matrix,
//! `COHOST_TEST_PI_BIN`, under `COHOST_TEST_PI_NODE`) and the kit's Messages mock, with a
//! private HOME holding Pi's config (provider `mock`, two models), which the host copies into
//! each session's own agent directory, and a private tmux server with a session `work` in the
//! sessions' working directory.

mod capabilities;
mod host;
mod mcp;
mod tracker;
mod web;

use std::path::{Path, PathBuf};
use std::time::Duration;

use cohost::peers::PI;

use crate::support::mock_messages::MockMessages;
use crate::support::{TestDaemon, TmuxServer, Value, json, pinned_version};

pub const TURN_TIMEOUT: Duration = Duration::from_secs(90);

/// The daemon (told where pi is, with HOME = the private home and this run's node first on
/// PATH), the mock, the session's working directory and the tmux server (session `work`
/// there).
pub struct PiFixture {
    pub daemon: TestDaemon,
    pub mock: MockMessages,
    pub work: PathBuf,
    /// Kept for the daemon's life (it places the sessions' instances there).
    _tmux: TmuxServer,
    _dir: tempfile::TempDir,
}

fn env_path(var: &str) -> PathBuf {
    let value = std::env::var(var).unwrap_or_else(|_| {
        panic!(
            "{var} is not set: run the tests through ./scripts/test, which installs {} {} and {} {}",
            PI.package,
            PI.oldest,
            PI.newest_package(),
            PI.newest
        )
    });
    assert!(Path::new(&value).is_file(), "{var}={value} does not exist");
    PathBuf::from(value)
}

impl PiFixture {
    pub fn start() -> PiFixture {
        PiFixture::start_with_args(&[])
    }

    /// [`PiFixture::start`] with more `cohost serve` arguments.
    pub fn start_with_args(args: &[&str]) -> PiFixture {
        PiFixture::start_with(args, &[])
    }

    /// [`PiFixture::start`] with more `cohost serve` arguments and environment.
    pub fn start_with(args: &[&str], extra_env: &[(&str, &str)]) -> PiFixture {
        pinned_version(&PI);
        let bin = env_path("COHOST_TEST_PI_BIN");
        let node = env_path("COHOST_TEST_PI_NODE");
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let work = dir.path().join("work");
        std::fs::create_dir_all(&work).unwrap();
        let agent_dir = home.join(".pi/agent");
        std::fs::create_dir_all(&agent_dir).unwrap();
        let mock = MockMessages::start();
        std::fs::write(
            agent_dir.join("models.json"),
            json!({"providers": {"mock": {
                "baseUrl": mock.base_url(), "api": "anthropic-messages", "apiKey": "sk-ant-mock-0000",
                "models": [
                    {"id": "mock-model", "name": "Mock Model", "contextWindow": 200000, "maxTokens": 8000},
                    {"id": "mock-model-2", "name": "Mock Model 2", "contextWindow": 200000, "maxTokens": 8000}
                ]}}})
            .to_string(),
        )
        .unwrap();
        std::fs::write(
            agent_dir.join("settings.json"),
            r#"{"defaultProvider":"mock","defaultModel":"mock-model"}"#,
        )
        .unwrap();
        // Pi's launcher runs `env node`: this run's node first on PATH (the doctor finds it
        // there too), and pi's own directory after it.
        let path = format!(
            "{}:{}:{}",
            node.parent().unwrap().display(),
            bin.parent().unwrap().display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let tmux = TmuxServer::with_sessions(&[("work", work.as_path())]);
        let mut env = vec![
            ("HOME", home.to_str().unwrap()),
            ("PATH", &path),
            ("COHOST_PI_BIN", bin.to_str().unwrap()),
            ("COHOST_WATCHERS", "none"),
        ];
        env.extend_from_slice(extra_env);
        let daemon = TestDaemon::start_with_env(Some(tmux.socket()), args, &env);
        PiFixture {
            daemon,
            mock,
            work,
            _tmux: tmux,
            _dir: dir,
        }
    }

    /// Creates a session over HTTP (`extra` merged into the body); returns its id.
    pub fn create(&self, extra: Value) -> String {
        let mut body = json!({ "runtime": "pi", "cwd": self.work });
        if let (Some(body), Some(extra)) = (body.as_object_mut(), extra.as_object()) {
            for (key, value) in extra {
                body.insert(key.clone(), value.clone());
            }
        }
        let resp = self.daemon.post("/api/sessions", &body);
        if resp.status != 201 {
            self.daemon
                .fail(&format!("create answered {}: {}", resp.status, resp.body));
        }
        let answer = resp.json();
        answer["session"]["id"]
            .as_str()
            .unwrap_or_else(|| self.daemon.fail(&format!("no session id in {answer}")))
            .to_string()
    }

    pub fn send(&self, id: &str, text: &str) -> Value {
        let resp = self.daemon.post(
            &format!("/api/sessions/{id}/messages"),
            &json!({ "text": text }),
        );
        if resp.status != 200 {
            self.daemon
                .fail(&format!("send answered {}: {}", resp.status, resp.body));
        }
        resp.json()
    }

    /// Sends a prompt and returns the turn it started.
    pub fn start_turn(&self, id: &str, text: &str) -> String {
        let sent = self.send(id, text);
        assert_eq!(sent["outcome"], "started", "{sent}");
        sent["turnId"].as_str().unwrap().to_string()
    }

    pub fn decide(&self, id: &str, approval: &str, decision: &str) -> crate::support::http::Resp {
        self.daemon.post(
            &format!("/api/sessions/{id}/approvals/{approval}"),
            &json!({ "decision": decision }),
        )
    }

    pub fn interrupt(&self, id: &str) -> Value {
        self.daemon
            .post(&format!("/api/sessions/{id}/interrupt"), &json!({}))
            .assert_ok()
    }

    /// Every stored event of the session so far.
    pub fn events(&self, id: &str) -> Vec<Value> {
        let mut after = 0;
        let mut out = Vec::new();
        loop {
            let page = self
                .daemon
                .get(&format!(
                    "/api/sessions/{id}/events?after={after}&limit=1000"
                ))
                .assert_ok();
            out.extend(page["events"].as_array().cloned().unwrap_or_default());
            let next = page["next"].as_u64().unwrap();
            if next >= page["head"].as_u64().unwrap() || next == after {
                return out;
            }
            after = next;
        }
    }

    pub fn dump(&self, id: &str) -> String {
        self.events(id)
            .iter()
            .map(|e| format!("{} {}", e["type"], e["data"]))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Waits for a stored event matching `pred`; fails with the session's events.
    pub fn wait_event(&self, id: &str, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        let deadline = std::time::Instant::now() + TURN_TIMEOUT;
        loop {
            let events = self.events(id);
            if let Some(found) = events.iter().find(|e| pred(e)) {
                return found.clone();
            }
            if std::time::Instant::now() >= deadline {
                self.daemon.fail(&format!(
                    "timed out after {TURN_TIMEOUT:?} waiting for {what}; the session's events:\n{}\nthe mock: {}",
                    self.dump(id),
                    self.mock.summary()
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits for the `turn.completed` of `turn`.
    pub fn wait_turn(&self, id: &str, turn: &str) -> Value {
        self.wait_event(id, &format!("turn {turn} to complete"), |e| {
            e["type"] == "turn.completed" && e["data"]["turnId"] == turn
        })
    }
}

/// The events of type `kind`.
pub fn of_type<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == kind).collect()
}

/// The completed items of `item_type` in turn `turn`.
pub fn items<'a>(events: &'a [Value], turn: &str, item_type: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|e| {
            e["type"] == "item.completed"
                && e["data"]["turnId"] == turn
                && e["data"]["item"]["type"] == item_type
        })
        .map(|e| &e["data"]["item"])
        .collect()
}
