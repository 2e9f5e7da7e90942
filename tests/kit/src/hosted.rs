//! A daemon hosting sessions of a runtime cohost drives through the peer's own API (OpenCode,
//! Pi) against the kit's Messages mock: the fixture both suites start from
//! ([`HostedFixture`]: a private home the suite writes the peer's config into, the work
//! directory, a private tmux server with a session `work` there, sessions created, prompted, answered and interrupted over HTTP, their events and
//! waits on them), the filters their assertions read events with ([`of_type`], [`items`]), and
//! the peers' config with the mock as their only provider, as the suites and the hosted bench
//! write it ([`write_opencode_config`], [`write_pi_agent_dir`]). The scenarios both runtimes
//! pass alike are in [`hosted_cases`](super::hosted_cases).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::Binaries;
use super::daemon::TestDaemon;
use super::http::Resp;
use super::mock_messages::{MockMessages, Step};
use super::sessions::merged;
use super::tmux::TmuxServer;

/// How long a turn (or any state a test waits for) may take before it is a failure.
pub const TURN_TIMEOUT: Duration = Duration::from_secs(90);

/// The daemon (HOME = the private home, and what the suite's setup adds to its environment),
/// the mock, the sessions' working directory and the tmux server the daemon uses (session
/// `work` there, in the working directory).
pub struct HostedFixture<B: Binaries> {
    /// The runtime's name on the API (`pi`, `opencode`).
    pub runtime: &'static str,
    pub daemon: TestDaemon<B>,
    pub mock: MockMessages,
    pub work: PathBuf,
    pub tmux: TmuxServer,
    _dir: tempfile::TempDir,
}

impl<B: Binaries> HostedFixture<B> {
    /// A temporary `home/` and `work/`, the Messages mock, a tmux server with a session `work`
    /// in `work/`, and a daemon on that server started with `args` and `HOME` set to the home,
    /// then the environment `setup` returns — after it has written the peer's config under the
    /// home (it is given the home and the mock) — then `extra_env`.
    pub fn start(
        runtime: &'static str,
        args: &[&str],
        extra_env: &[(&str, &str)],
        setup: impl FnOnce(&Path, &MockMessages) -> Vec<(&'static str, String)>,
    ) -> HostedFixture<B> {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let work = dir.path().join("work");
        std::fs::create_dir_all(&work).unwrap();
        let mock = MockMessages::start();
        let mut env = vec![("HOME", home.to_str().unwrap().to_string())];
        env.extend(setup(&home, &mock));
        let mut env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        env.extend_from_slice(extra_env);
        let tmux = TmuxServer::with_sessions(&[("work", work.as_path())]);
        let daemon = TestDaemon::start_with_env(Some(tmux.socket()), args, &env);
        HostedFixture {
            runtime,
            daemon,
            mock,
            work,
            tmux,
            _dir: dir,
        }
    }

    /// Creates a session over HTTP (`extra` merged into the body); returns its id.
    pub fn create(&self, extra: Value) -> String {
        self.daemon.create_session(&merged(
            json!({ "runtime": self.runtime, "cwd": self.work }),
            &extra,
        ))
    }

    /// Asks for a session with `field` set to `value` and checks it is refused by that field.
    #[track_caller]
    pub fn assert_refused(&self, field: &str, value: Value) {
        self.daemon
            .post(
                "/api/sessions",
                &json!({"runtime": self.runtime, "cwd": self.work, field: value}),
            )
            .assert_error(400, "invalid_field", Some(field));
    }

    pub fn send(&self, id: &str, text: &str) -> Value {
        self.daemon.send_message(id, text)
    }

    /// Sends a prompt and returns the turn it started.
    pub fn start_turn(&self, id: &str, text: &str) -> String {
        let sent = self.send(id, text);
        assert_eq!(sent["outcome"], "started", "{sent}");
        sent["turnId"].as_str().unwrap().to_string()
    }

    /// Runs a turn: `prompt` sent (the mock answers it with `reply`) until it completed;
    /// returns the turn.
    #[track_caller]
    pub fn run_turn(&self, id: &str, prompt: &str, reply: &str) -> String {
        self.mock.push(Step::text(reply).when_user_contains(prompt));
        let turn = self.start_turn(id, prompt);
        let done = self.wait_turn(id, &turn);
        assert_eq!(done["data"]["status"], "completed", "{}", self.dump(id));
        turn
    }

    pub fn decide(&self, id: &str, approval: &str, decision: &str) -> Resp {
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

    /// Kills (SIGKILL) the process the session is bound to — `session.bound`'s backend,
    /// `<runtime>:<pid>` — and returns its pid.
    pub fn kill_backend(&self, id: &str) -> String {
        let bound = self.wait_event(id, "the binding", |e| e["type"] == "session.bound");
        let pid = bound["data"]["backend"]
            .as_str()
            .and_then(|b| b.rsplit_once(':'))
            .map(|(_, pid)| pid.to_string())
            .unwrap_or_else(|| panic!("no pid in the binding: {bound}"));
        let killed = std::process::Command::new("kill")
            .args(["-9", &pid])
            .status()
            .unwrap();
        assert!(killed.success(), "kill -9 {pid}");
        pid
    }

    /// Asserts a prompt to the session is refused at once as lost (`409 not_live`), the
    /// message saying why: it starts with `session `<id>` is lost: ` and `why`.
    #[track_caller]
    pub fn assert_refused_as_lost(&self, id: &str, why: &str) {
        self.daemon.assert_prompt_refused_as_lost(id, why);
    }

    /// Every stored event of the session so far.
    pub fn events(&self, id: &str) -> Vec<Value> {
        self.daemon.session_events(id)
    }

    /// The session's events, one `type data` line each, for failure messages.
    pub fn dump(&self, id: &str) -> String {
        self.events(id)
            .iter()
            .map(|e| format!("{} {}", e["type"], e["data"]))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Waits for a stored event matching `pred`; fails with the session's events and what the
    /// mock was asked.
    pub fn wait_event(&self, id: &str, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + TURN_TIMEOUT;
        loop {
            let events = self.events(id);
            if let Some(found) = events.iter().find(|e| pred(e)) {
                return found.clone();
            }
            if Instant::now() >= deadline {
                self.daemon.fail(&format!(
                    "timed out after {TURN_TIMEOUT:?} waiting for {what}; the session's events:\n{}\nthe mock: {}",
                    self.dump(id),
                    self.mock.summary()
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The status of the tracker's instance `key` in tmux session `tmux_session`, if it is
    /// there.
    pub fn tracker_status(&self, tmux_session: &str, key: &str) -> Option<String> {
        self.daemon
            .instance(tmux_session, key)
            .and_then(|i| i["status"].as_str().map(str::to_string))
    }

    /// Waits until the tracker's instance `key` in tmux session `tmux_session` is `status`.
    #[track_caller]
    pub fn wait_tracker_status(&self, tmux_session: &str, key: &str, status: &str) {
        self.daemon.wait_for(
            &format!("the instance {status} in `{tmux_session}`"),
            TURN_TIMEOUT,
            |_| (self.tracker_status(tmux_session, key).as_deref() == Some(status)).then_some(()),
        );
    }

    /// Waits for the `turn.completed` of `turn`.
    pub fn wait_turn(&self, id: &str, turn: &str) -> Value {
        self.wait_event(id, &format!("turn {turn} to complete"), |e| {
            e["type"] == "turn.completed" && e["data"]["turnId"] == turn
        })
    }

    /// Asserts the texts of `turn`'s prompts (its completed `userMessage` items), in order.
    #[track_caller]
    pub fn assert_prompts(&self, id: &str, turn: &str, expected: &[&str]) {
        let events = self.events(id);
        let prompts: Vec<&str> = items(&events, turn, "userMessage")
            .iter()
            .filter_map(|m| m["text"].as_str())
            .collect();
        assert_eq!(prompts, expected, "{}", self.dump(id));
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

/// The mock's models as the suites offer them (id, display name); the first is the default.
pub const MOCK_MODELS: [(&str, &str); 2] = [
    ("mock-model", "Mock Model"),
    ("mock-model-2", "Mock Model 2"),
];

/// Writes OpenCode's config under `home` (`.config/opencode/opencode.json`): the mock its only
/// provider (through `@ai-sdk/anthropic`), offering `models`, the first the default (and the
/// small model); no autoupdate, no sharing. Returns the config's directory.
pub fn write_opencode_config(
    home: &Path,
    mock: &MockMessages,
    models: &[(&str, &str)],
) -> std::io::Result<PathBuf> {
    let config_dir = home.join(".config/opencode");
    std::fs::create_dir_all(&config_dir)?;
    let default = format!("mock/{}", models.first().map_or("", |(id, _)| id));
    let offered: serde_json::Map<String, Value> = models
        .iter()
        .map(|(id, name)| {
            let model = json!({"name": name, "tool_call": true, "limit": {"context": 200000, "output": 8000}});
            (id.to_string(), model)
        })
        .collect();
    let config = json!({
        "$schema": "https://opencode.ai/config.json", "autoupdate": false, "share": "disabled",
        "model": default, "small_model": default,
        "provider": {"mock": {"npm": "@ai-sdk/anthropic", "name": "Mock Anthropic",
            "options": {"baseURL": format!("{}/v1", mock.base_url()), "apiKey": "sk-ant-mock-0000"},
            "models": offered}}
    });
    std::fs::write(config_dir.join("opencode.json"), config.to_string())?;
    Ok(config_dir)
}

/// Writes Pi's agent directory under `home` (`.pi/agent`): `models.json` with the mock as its
/// only provider (Anthropic's Messages API), offering `models`, and `settings.json` making the
/// first the default.
pub fn write_pi_agent_dir(
    home: &Path,
    mock: &MockMessages,
    models: &[(&str, &str)],
) -> std::io::Result<()> {
    let agent_dir = home.join(".pi/agent");
    std::fs::create_dir_all(&agent_dir)?;
    let offered: Vec<Value> = models
        .iter()
        .map(|(id, name)| json!({"id": id, "name": name, "contextWindow": 200000, "maxTokens": 8000}))
        .collect();
    std::fs::write(
        agent_dir.join("models.json"),
        json!({"providers": {"mock": {
            "baseUrl": mock.base_url(), "api": "anthropic-messages", "apiKey": "sk-ant-mock-0000",
            "models": offered}}})
        .to_string(),
    )?;
    let default = models.first().map_or("", |(id, _)| id);
    std::fs::write(
        agent_dir.join("settings.json"),
        json!({"defaultProvider": "mock", "defaultModel": default}).to_string(),
    )
}
