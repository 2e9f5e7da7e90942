//! `cohost serve` as a child process with its own state directory, and its HTTP, SSE and CLI
//! clients. Which executable runs is the caller's [`Binaries`].

use std::io::{BufRead, BufReader, Read};
use std::marker::PhantomData;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::http::{Resp, SseClient, raw_request, short};
use super::{Binaries, TmuxServer, run_with_timeout, strip_ansi, temp_dir};

/// How long the daemon gets to print its address, or to exit after SIGTERM.
const START_TIMEOUT: Duration = Duration::from_secs(15);
const STOP_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one HTTP request may take: a hang guard, not a speed check, so no shorter than what
/// the daemon may legitimately take to answer. A create that starts a codex backend waits up to
/// 30 s for `codex --version` and up to 30 s more for the backend to be ready (the daemon's
/// `VERSION_TIMEOUT` and `READY_TIMEOUT`); on the CI's 2 loaded cores a start has taken over
/// 15 s (a `claude --version` 19 s).
const HTTP_TIMEOUT: Duration = Duration::from_secs(65);
/// How long one `cohost` CLI command may take in a test: a hung command's deadline, not a speed
/// check. `cohost start` waits for the runtime's backend like an HTTP create, so it gets the same
/// budget: 15 s was not enough for `cohost start opencode` with the 2 cores loaded to 12–15
/// (`opencode --version` alone took 7–8 s).
pub const CLI_TIMEOUT: Duration = HTTP_TIMEOUT;

/// Environment variables that would change how the daemon or the CLI behave; removed from every
/// child so the suite does not depend on the caller's shell. The benches remove these too.
pub const SCRUBBED_ENV: [&str; 11] = [
    "COHOST_HOME",
    "COHOST_CONFIG",
    "COHOST_LISTEN",
    "COHOST_TMUX_SOCKET",
    "COHOST_FSYNC",
    "COHOST_SEGMENT_MB",
    "COHOST_RETAIN_MB",
    "COHOST_STALE_AFTER",
    "COHOST_PRUNE_AFTER",
    "TMUX",
    "TMUX_PANE",
];

/// A `cohost serve` child (`B::COHOST`) with a fresh home, killed on drop.
pub struct TestDaemon<B: Binaries> {
    home_dir: tempfile::TempDir,
    home: PathBuf,
    tmux_socket: Option<PathBuf>,
    args: Vec<String>,
    child: Option<Child>,
    port: u16,
    /// Every stderr byte of every run, runs separated by a marker line.
    stderr: Arc<Mutex<Vec<u8>>>,
    /// Every stdout line of the current run.
    stdout_lines: Arc<Mutex<Vec<String>>>,
    agent: ureq::Agent,
    runs: u32,
    /// Extra environment for the daemon (e.g. CODEX_HOME for codex sessions).
    env: Vec<(String, String)>,
    /// Listen on this port rather than a fresh one (0): a restart a browser must find again.
    listen_port: u16,
    bins: PhantomData<fn() -> B>,
}

impl<B: Binaries> TestDaemon<B> {
    /// Starts `cohost serve --listen 127.0.0.1:0 --tmux-socket <tmux> ARGS` with a fresh home.
    pub fn start(tmux: &TmuxServer, args: &[&str]) -> TestDaemon<B> {
        TestDaemon::start_with(Some(tmux.socket()), args)
    }

    /// Like [`TestDaemon::start`], with any tmux socket (or none).
    pub fn start_with(tmux_socket: Option<&Path>, args: &[&str]) -> TestDaemon<B> {
        TestDaemon::start_with_env(tmux_socket, args, &[])
    }

    /// Like [`TestDaemon::start_with`], with extra environment variables for the daemon.
    pub fn start_with_env(
        tmux_socket: Option<&Path>,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> TestDaemon<B> {
        let home_dir = temp_dir("cohost-home-");
        let home = home_dir.path().join("home");
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(HTTP_TIMEOUT))
            .build()
            .new_agent();
        let mut daemon = TestDaemon {
            home_dir,
            home,
            tmux_socket: tmux_socket.map(Path::to_path_buf),
            args: args.iter().map(|s| s.to_string()).collect(),
            child: None,
            port: 0,
            listen_port: 0,
            stderr: Arc::new(Mutex::new(Vec::new())),
            stdout_lines: Arc::new(Mutex::new(Vec::new())),
            agent,
            runs: 0,
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            bins: PhantomData,
        };
        daemon.spawn();
        daemon
    }

    /// The `cohost serve` command line for the current home, socket and args.
    pub fn serve_command(&self) -> Command {
        let mut command = Command::new(B::COHOST);
        command
            .arg("serve")
            .arg("--listen")
            .arg(format!("127.0.0.1:{}", self.listen_port));
        if let Some(socket) = &self.tmux_socket {
            command.arg("--tmux-socket").arg(socket);
        }
        command.args(&self.args);
        for name in SCRUBBED_ENV {
            command.env_remove(name);
        }
        command
            .env("COHOST_HOME", &self.home)
            // The config file is the test's own (none unless it writes one): `config_dir()`.
            .env("XDG_CONFIG_HOME", self.config_dir())
            .env(
                "RUST_LOG",
                std::env::var("COHOST_TEST_LOG").unwrap_or_else(|_| "info".into()),
            )
            .env("NO_COLOR", "1")
            // The passive watchers would read the HOME the tests run in (the developer's own
            // agents): off unless a test turns them on (its `env` overrides this).
            .env("COHOST_WATCHERS", "none");
        for (key, value) in &self.env {
            command.env(key, value);
        }
        command
    }

    fn spawn(&mut self) {
        assert!(self.child.is_none(), "the daemon is already running");
        self.runs += 1;
        self.stderr
            .lock()
            .unwrap()
            .extend_from_slice(format!("----- daemon run {} -----\n", self.runs).as_bytes());
        self.stdout_lines.lock().unwrap().clear();
        let mut command = self.serve_command();
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot spawn {}: {e}", B::COHOST));
        let mut stderr = child.stderr.take().expect("stderr piped");
        let sink = Arc::clone(&self.stderr);
        thread::spawn(move || {
            let mut buf = [0u8; 8192];
            loop {
                match stderr.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => sink.lock().unwrap().extend_from_slice(&buf[..n]),
                }
            }
        });
        let stdout = child.stdout.take().expect("stdout piped");
        let lines = Arc::clone(&self.stdout_lines);
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                lines.lock().unwrap().push(line.clone());
                let _ = tx.send(line);
            }
        });
        self.child = Some(child);
        let line = match rx.recv_timeout(START_TIMEOUT) {
            Ok(line) => line,
            Err(mpsc::RecvTimeoutError::Timeout) => self.fail(&format!(
                "the daemon printed no address within {START_TIMEOUT:?}"
            )),
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                let status = self.wait_exit(Duration::from_secs(5));
                self.fail(&format!(
                    "the daemon exited ({status:?}) before printing its address"
                ))
            }
        };
        let Some(port) = line
            .strip_prefix("cohost listening on 127.0.0.1:")
            .and_then(|port| port.trim().parse::<u16>().ok())
        else {
            self.fail(&format!("unexpected first stdout line {line:?}"));
        };
        self.port = port;
        self.token_from_file();
    }

    fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let child = self.child.as_mut()?;
        let deadline = Instant::now() + timeout;
        loop {
            match child.try_wait() {
                Ok(Some(status)) => {
                    self.child = None;
                    return Some(status);
                }
                Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(10)),
                _ => return None,
            }
        }
    }

    /// The last lines of the daemon's stderr, colour codes removed.
    pub fn stderr_tail(&self, lines: usize) -> String {
        let text = strip_ansi(&String::from_utf8_lossy(&self.stderr.lock().unwrap()));
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// All stderr so far (every run), colour codes removed.
    pub fn stderr_text(&self) -> String {
        strip_ansi(&String::from_utf8_lossy(&self.stderr.lock().unwrap()))
    }

    /// Stdout lines of the current (or last) run.
    pub fn stdout_lines(&self) -> Vec<String> {
        self.stdout_lines.lock().unwrap().clone()
    }

    /// Panics with `message` and the tail of the daemon's stderr.
    #[track_caller]
    pub fn fail(&self, message: &str) -> ! {
        panic!(
            "{message}\n----- daemon stderr (tail) -----\n{}",
            self.stderr_tail(40)
        )
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn home(&self) -> &Path {
        &self.home
    }

    pub fn log_dir(&self) -> PathBuf {
        self.home.join("log")
    }

    /// A scratch directory beside the home, removed with the daemon.
    pub fn scratch(&self) -> &Path {
        self.home_dir.path()
    }

    pub fn token(&self) -> String {
        std::fs::read_to_string(self.home.join("token"))
            .unwrap_or_else(|e| self.fail(&format!("cannot read the token file: {e}")))
            .trim()
            .to_string()
    }

    fn token_from_file(&self) {
        let token = self.token();
        assert!(token.len() >= 32, "token too short: {token:?}");
    }

    pub fn pid(&self) -> u32 {
        self.child
            .as_ref()
            .map(Child::id)
            .unwrap_or_else(|| self.fail("the daemon is not running"))
    }

    pub fn is_running(&mut self) -> bool {
        match self.child.as_mut().map(Child::try_wait) {
            Some(Ok(None)) => true,
            Some(_) => {
                self.child = None;
                false
            }
            None => false,
        }
    }

    /// Replaces the tmux socket used by the next (re)start.
    pub fn set_tmux_socket(&mut self, socket: Option<&Path>) {
        self.tmux_socket = socket.map(Path::to_path_buf);
    }

    /// Replaces the serve arguments used by the next (re)start.
    pub fn set_args(&mut self, args: &[&str]) {
        self.args = args.iter().map(|s| s.to_string()).collect();
    }

    /// SIGTERM and wait for a clean exit.
    pub fn stop(&mut self) -> ExitStatus {
        let pid = self.pid();
        let status = Command::new("kill")
            .arg("-TERM")
            .arg(pid.to_string())
            .status();
        if !status.is_ok_and(|s| s.success()) {
            self.fail("`kill -TERM` failed");
        }
        match self.wait_exit(STOP_TIMEOUT) {
            Some(status) => {
                if !status.success() {
                    self.fail(&format!("the daemon exited with {status} after SIGTERM"));
                }
                status
            }
            None => {
                if let Some(child) = self.child.as_mut() {
                    let _ = child.kill();
                    let _ = child.wait();
                }
                self.child = None;
                self.fail(&format!(
                    "the daemon did not exit within {STOP_TIMEOUT:?} of SIGTERM"
                ))
            }
        }
    }

    /// SIGKILL: no shutdown code runs.
    pub fn kill9(&mut self) {
        let mut child = self
            .child
            .take()
            .unwrap_or_else(|| self.fail("the daemon is not running"));
        child.kill().expect("SIGKILL the daemon");
        child.wait().expect("reap the daemon");
    }

    /// Starts the daemon again on the same home (after `stop` or `kill9`).
    pub fn start_again(&mut self) {
        self.spawn();
    }

    /// Starts the daemon again on the same home and the same port (after `stop` or `kill9`): a
    /// page loaded from the old address finds it again.
    pub fn start_again_on_the_same_port(&mut self) {
        self.listen_port = self.port;
        self.spawn();
    }

    /// `stop` then `start_again`.
    pub fn restart(&mut self) {
        self.stop();
        self.spawn();
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    fn finish(
        &self,
        what: &str,
        response: Result<ureq::http::Response<ureq::Body>, ureq::Error>,
    ) -> Resp {
        let mut response =
            response.unwrap_or_else(|e| self.fail(&format!("{what}: transport error {e}")));
        let status = response.status().as_u16();
        let content_type = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let www_authenticate = response
            .headers()
            .get("www-authenticate")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let body = response
            .body_mut()
            .with_config()
            .limit(256 * 1024 * 1024)
            .read_to_string()
            .unwrap_or_else(|e| self.fail(&format!("{what}: reading the body: {e}")));
        Resp {
            status,
            content_type,
            www_authenticate,
            body,
        }
    }

    /// Any request through ureq: `headers` are sent as given (add the token yourself).
    pub fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&str>,
    ) -> Resp {
        let what = format!("{method} {path}");
        match method {
            "GET" => {
                let mut request = self.agent.get(self.url(path));
                for (name, value) in headers {
                    request = request.header(*name, *value);
                }
                self.finish(&what, request.call())
            }
            "PUT" => {
                let mut request = self.agent.put(self.url(path));
                for (name, value) in headers {
                    request = request.header(*name, *value);
                }
                let response = match body {
                    Some(body) => request.send(body),
                    None => request.send_empty(),
                };
                self.finish(&what, response)
            }
            "POST" => {
                let mut request = self.agent.post(self.url(path));
                for (name, value) in headers {
                    request = request.header(*name, *value);
                }
                let response = match body {
                    Some(body) => request.send(body),
                    None => request.send_empty(),
                };
                self.finish(&what, response)
            }
            other => panic!("unsupported method {other}"),
        }
    }

    fn bearer(&self) -> String {
        format!("Bearer {}", self.token())
    }

    pub fn get(&self, path: &str) -> Resp {
        let bearer = self.bearer();
        self.request("GET", path, &[("Authorization", &bearer)], None)
    }

    pub fn put(&self, path: &str, body: &Value) -> Resp {
        let bearer = self.bearer();
        self.request(
            "PUT",
            path,
            &[
                ("Authorization", &bearer),
                ("Content-Type", "application/json"),
            ],
            Some(&body.to_string()),
        )
    }

    pub fn get_no_token(&self, path: &str) -> Resp {
        self.request("GET", path, &[], None)
    }

    pub fn post(&self, path: &str, body: &Value) -> Resp {
        let bearer = self.bearer();
        self.request(
            "POST",
            path,
            &[
                ("Authorization", &bearer),
                ("Content-Type", "application/json"),
            ],
            Some(&body.to_string()),
        )
    }

    /// The opensessions way: no token, JSON content type, no Origin.
    pub fn post_no_token(&self, path: &str, body: &Value) -> Resp {
        self.request(
            "POST",
            path,
            &[("Content-Type", "application/json")],
            Some(&body.to_string()),
        )
    }

    /// POST an arbitrary body text with the token and a JSON content type.
    pub fn post_text(&self, path: &str, body: &str) -> Resp {
        let bearer = self.bearer();
        self.request(
            "POST",
            path,
            &[
                ("Authorization", &bearer),
                ("Content-Type", "application/json"),
            ],
            Some(body),
        )
    }

    /// A request over a fresh socket: `head` is the request line plus header lines.
    pub fn raw(&self, head: &str, body: &[u8]) -> Resp {
        raw_request(self.port, head, body)
    }

    /// GET /api/state (must answer 200).
    #[track_caller]
    pub fn state(&self) -> Value {
        let resp = self.get("/api/state");
        if resp.status != 200 {
            self.fail(&format!(
                "GET /api/state answered {}: {}",
                resp.status,
                short(&resp.body)
            ));
        }
        resp.json()
    }

    /// The session named `name` in /api/state.
    #[track_caller]
    pub fn session(&self, name: &str) -> Value {
        let state = self.state();
        state["sessions"]
            .as_array()
            .and_then(|sessions| sessions.iter().find(|s| s["name"] == name).cloned())
            .unwrap_or_else(|| self.fail(&format!("no session `{name}` in {state:#}")))
    }

    /// The instance with `key` in session `name`, if any.
    pub fn instance(&self, name: &str, key: &str) -> Option<Value> {
        self.session(name)["agents"]
            .as_array()
            .and_then(|agents| agents.iter().find(|a| a["key"] == key).cloned())
    }

    /// The newest seq (from /api/health, which needs no token).
    pub fn head(&self) -> u64 {
        let resp = self.get_no_token("/api/health");
        if resp.status != 200 {
            self.fail(&format!(
                "GET /api/health answered {}: {}",
                resp.status, resp.body
            ));
        }
        resp.json()["seq"]
            .as_u64()
            .unwrap_or_else(|| self.fail(&format!("no seq in {}", resp.body)))
    }

    /// Every event after `after`, following `next` page by page.
    pub fn events_after(&self, after: u64) -> Vec<Value> {
        let mut cursor = after;
        let mut all = Vec::new();
        loop {
            let resp = self.get(&format!("/api/events?after={cursor}&limit=1000"));
            if resp.status != 200 {
                self.fail(&format!(
                    "GET /api/events?after={cursor} answered {}: {}",
                    resp.status,
                    short(&resp.body)
                ));
            }
            let page = resp.json();
            let events = page["events"].as_array().cloned().unwrap_or_default();
            let next = page["next"].as_u64().expect("next");
            let head = page["head"].as_u64().expect("head");
            all.extend(events.iter().cloned());
            if events.is_empty() || next >= head {
                return all;
            }
            cursor = next;
        }
    }

    /// POST /api/agent-event with the token; must be accepted. Returns the seq.
    #[track_caller]
    pub fn report(&self, body: &Value) -> u64 {
        let resp = self.post("/api/agent-event", body);
        if resp.status != 200 {
            self.fail(&format!(
                "POST /api/agent-event {} answered {}: {}",
                short(&body.to_string()),
                resp.status,
                short(&resp.body)
            ));
        }
        let answer = resp.json();
        assert_eq!(answer["ok"], true, "{answer}");
        answer["seq"]
            .as_u64()
            .unwrap_or_else(|| self.fail(&format!("no seq in {answer}")))
    }

    /// Polls `f` with this daemon until it yields `Some`, failing with the daemon's stderr.
    #[track_caller]
    pub fn wait_for<T>(
        &self,
        what: &str,
        timeout: Duration,
        mut f: impl FnMut(&TestDaemon<B>) -> Option<T>,
    ) -> T {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(value) = f(self) {
                return value;
            }
            if Instant::now() >= deadline {
                self.fail(&format!("timed out after {timeout:?} waiting for {what}"));
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// Opens the SSE stream; `query` is appended to the path (e.g. `?after=3`).
    pub fn sse(&self, query: &str, last_event_id: Option<u64>) -> Result<SseClient, Resp> {
        let mut headers = vec![("Authorization", self.bearer())];
        if let Some(id) = last_event_id {
            headers.push(("Last-Event-ID", id.to_string()));
        }
        SseClient::connect(self.port, &format!("/api/events/stream{query}"), &headers)
    }

    /// A `cohost` CLI command against this daemon's home (it finds the daemon via daemon.json).
    pub fn cli_command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(B::COHOST);
        command.args(args);
        for name in SCRUBBED_ENV {
            command.env_remove(name);
        }
        command
            .env("COHOST_HOME", &self.home)
            .env("XDG_CONFIG_HOME", self.config_dir())
            .env("NO_COLOR", "1");
        command
    }

    /// The daemon's and the CLI's `XDG_CONFIG_HOME`: a test's config file goes in
    /// `config_dir()/cohost/config.toml` (the daemon reads it when it starts).
    pub fn config_dir(&self) -> PathBuf {
        self.home_dir.path().join("config")
    }

    pub fn cli(&self, args: &[&str]) -> Output {
        run_with_timeout(&mut self.cli_command(args), CLI_TIMEOUT)
    }

    /// Runs the CLI and requires success; returns stdout.
    #[track_caller]
    pub fn cli_ok(&self, args: &[&str]) -> String {
        let output = self.cli(args);
        if !output.status.success() {
            self.fail(&format!(
                "cohost {args:?} failed ({}): stdout {:?} stderr {:?}",
                output.status,
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            ));
        }
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// Sizes of the log segments' lines, by file name (without the zeros the daemon writes
    /// ahead of the active segment's lines: [`segment_lines`]).
    pub fn segments(&self) -> Vec<(String, u64)> {
        let mut segments: Vec<(String, u64)> = std::fs::read_dir(self.log_dir())
            .map(|entries| {
                entries
                    .filter_map(Result::ok)
                    .filter(|e| e.file_name().to_string_lossy().ends_with(".jsonl"))
                    .map(|e| {
                        let lines = segment_lines(&e.path());
                        (
                            e.file_name().to_string_lossy().into_owned(),
                            lines.len() as u64,
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        segments.sort();
        segments
    }

    /// Everything observable that a rejected request must not change: the state, the head seq
    /// and the bytes on disk.
    pub fn stored_fingerprint(&self) -> (Value, u64, Vec<(String, u64)>) {
        (self.state(), self.head(), self.segments())
    }

    /// Shorthand for posting an agent event by session name.
    pub fn report_status(&self, session: &str, agent: &str, status: &str) -> u64 {
        self.report(&json!({ "agent": agent, "status": status, "tmuxSession": session }))
    }
}

impl<B: Binaries> Drop for TestDaemon<B> {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if thread::panicking() {
            eprintln!("----- daemon stderr (tail) -----\n{}", self.stderr_tail(60));
        }
    }
}

/// A log segment's bytes up to where its lines end: with fsync always, the daemon writes zeros
/// ahead of the active segment's lines (so an append does not grow the file), and cuts them when
/// it closes the segment or stops; after a crash they stay until the next start.
pub fn segment_lines(path: &Path) -> Vec<u8> {
    let mut bytes = std::fs::read(path)
        .unwrap_or_else(|e| panic!("reading the log segment {}: {e}", path.display()));
    let end = bytes
        .iter()
        .rposition(|b| *b != 0)
        .map_or(0, |last| last + 1);
    bytes.truncate(end);
    bytes
}
