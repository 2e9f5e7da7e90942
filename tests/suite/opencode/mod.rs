//! Hosted OpenCode sessions against the real `opencode serve` (the release `./scripts/test`
//! pins, `COHOST_TEST_OPENCODE_BIN`) and the kit's Messages mock, with a private HOME holding
//! OpenCode's config (provider `mock`, two models) and its database, and a private tmux server
//! with a session `work` in the sessions' working directory.

mod asks;
mod capabilities;
mod codrive;
mod host;
mod mcp;
mod web;

use std::path::{Path, PathBuf};
use std::time::Duration;

use cohost::peers::OPENCODE;

use crate::support::mock_messages::MockMessages;
use crate::support::{TestDaemon, TmuxServer, Value, json, pinned_version};

pub const TURN_TIMEOUT: Duration = Duration::from_secs(90);

/// The daemon (told where opencode is, with HOME = the private home), the mock, the
/// session's working directory and the tmux server (session `work` there).
pub struct OpencodeFixture {
    pub daemon: TestDaemon,
    pub mock: MockMessages,
    pub work: PathBuf,
    pub tmux: TmuxServer,
    _dir: tempfile::TempDir,
}

fn opencode_bin() -> PathBuf {
    pinned_version(&OPENCODE);
    let bin = std::env::var("COHOST_TEST_OPENCODE_BIN").unwrap_or_else(|_| {
        panic!(
            "COHOST_TEST_OPENCODE_BIN is not set: run the tests through ./scripts/test, which installs {} {}",
            OPENCODE.package, OPENCODE.oldest
        )
    });
    assert!(
        Path::new(&bin).is_file(),
        "COHOST_TEST_OPENCODE_BIN={bin} does not exist"
    );
    PathBuf::from(bin)
}

impl OpencodeFixture {
    pub fn start() -> OpencodeFixture {
        OpencodeFixture::start_with_args(&[])
    }

    /// [`OpencodeFixture::start`] with more `cohost serve` arguments.
    pub fn start_with_args(args: &[&str]) -> OpencodeFixture {
        OpencodeFixture::start_with(args, &[])
    }

    /// [`OpencodeFixture::start`] with more `cohost serve` arguments and environment.
    pub fn start_with(args: &[&str], extra_env: &[(&str, &str)]) -> OpencodeFixture {
        let bin = opencode_bin();
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let work = dir.path().join("work");
        std::fs::create_dir_all(&work).unwrap();
        let config_dir = home.join(".config/opencode");
        std::fs::create_dir_all(&config_dir).unwrap();
        let mock = MockMessages::start();
        let model = |name: &str| json!({"name": name, "tool_call": true, "limit": {"context": 200000, "output": 8000}});
        let config = json!({
            "$schema": "https://opencode.ai/config.json", "autoupdate": false, "share": "disabled",
            "model": "mock/mock-model", "small_model": "mock/mock-model",
            "provider": {"mock": {"npm": "@ai-sdk/anthropic", "name": "Mock Anthropic",
                "options": {"baseURL": format!("{}/v1", mock.base_url()), "apiKey": "sk-ant-mock-0000"},
                "models": {"mock-model": model("Mock Model"), "mock-model-2": model("Mock Model 2")}}}
        });
        std::fs::write(config_dir.join("opencode.json"), config.to_string()).unwrap();
        let tmux = TmuxServer::with_sessions(&[("work", work.as_path())]);
        let mut env = vec![
            ("HOME", home.to_str().unwrap()),
            // The kit points the daemon's XDG_CONFIG_HOME at its own config: OpenCode
            // reads its config from there.
            (
                "XDG_CONFIG_HOME",
                config_dir.parent().unwrap().to_str().unwrap(),
            ),
            ("COHOST_OPENCODE_BIN", bin.to_str().unwrap()),
            ("OPENCODE_DISABLE_MODELS_FETCH", "1"),
            ("OPENCODE_DISABLE_AUTOUPDATE", "1"),
            ("OPENCODE_DISABLE_LSP_DOWNLOAD", "1"),
            ("OPENCODE_DISABLE_SHARE", "1"),
            ("OPENCODE_DISABLE_DEFAULT_PLUGINS", "1"),
        ];
        env.extend_from_slice(extra_env);
        let daemon = TestDaemon::start_with_env(Some(tmux.socket()), args, &env);
        OpencodeFixture {
            daemon,
            mock,
            work,
            tmux,
            _dir: dir,
        }
    }

    /// Creates a session over HTTP (`extra` merged into the body); returns its id.
    pub fn create(&self, extra: Value) -> String {
        let mut body = json!({ "runtime": "opencode", "cwd": self.work });
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

    pub fn decide(&self, id: &str, approval: &str, decision: &str) -> crate::support::http::Resp {
        self.daemon.post(
            &format!("/api/sessions/{id}/approvals/{approval}"),
            &json!({ "decision": decision }),
        )
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
        self.daemon.wait_for(what, TURN_TIMEOUT, |_| {
            self.events(id).into_iter().find(|e| pred(e))
        })
    }

    /// Waits for the `turn.completed` of `turn`.
    pub fn wait_turn(&self, id: &str, turn: &str) -> Value {
        let deadline = std::time::Instant::now() + TURN_TIMEOUT;
        loop {
            if let Some(done) = self
                .events(id)
                .into_iter()
                .find(|e| e["type"] == "turn.completed" && e["data"]["turnId"] == turn)
            {
                return done;
            }
            if std::time::Instant::now() >= deadline {
                self.daemon.fail(&format!(
                    "turn {turn} did not complete within {TURN_TIMEOUT:?}; events:\n{}",
                    self.dump(id)
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
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
