//! A headless Chromium driven through WebDriver (Debian's `chromium` and `chromium-driver`, which
//! `./scripts/test` installs), for the browser tests of the web page.
//!
//! [`Browser::start`] runs `chromedriver --port=P` as a child (killed on drop), with `P` from
//! [`driver_port`], waits for the port it printed and opens one headless Chromium session with a
//! fresh profile. The client is
//! [`fantoccini`], run on a tokio runtime owned by the [`Browser`], behind a blocking API for the
//! suite's plain `#[test]` functions.
//!
//! - Executables: `COHOST_TEST_CHROMIUM` and `COHOST_TEST_CHROMEDRIVER` (exported by
//!   `./scripts/test`; default `/usr/bin/chromium` and `/usr/bin/chromedriver`). A missing one is a
//!   failure, never a skip.
//! - Problems: [`Browser::problems`] are the browser log's errors (chromedriver's
//!   `goog:loggingPrefs` browser log, read through `/session/{id}/se/log`): `console.error`,
//!   uncaught exceptions and rejections, failed loads, and every Content-Security-Policy
//!   violation, whatever its level. Nothing is injected into the page.
//! - Failures: every failing helper saves `target/browser-screenshots/<test>-<n>.png` and the
//!   page's HTML beside it (`.html`), prints both paths and panics with them in the message.

use std::cell::{Cell, RefCell};
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use fantoccini::actions::{InputSource, KeyAction, KeyActions};
use fantoccini::wd::WebDriverCompatibleCommand;
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};

pub use fantoccini::key::Key;

use super::temp_dir;

/// A free port for chromedriver, below the kernel's ephemeral range.
///
/// `chromedriver --port=0` is not safe on a busy machine: on Linux it binds `[::1]:0` first and
/// then `127.0.0.1` on the port that gave it, and exits ("IPv4 port not available") when that
/// port is already taken on IPv4 — by any daemon of the suite listening on `127.0.0.1:0`, or any
/// outgoing connection, all of which the kernel places in the ephemeral range. A port below that
/// range is handed out only to whoever names it, and nothing in the suite names one, so a port
/// found free here (on both addresses; this process's own browsers take turns from a counter,
/// other test processes start elsewhere by their pid) stays free for chromedriver.
fn driver_port() -> u16 {
    use std::net::{Ipv6Addr, TcpListener};
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    const FIRST: u32 = 10_000;
    let ephemeral_low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse::<u32>().ok())
        .unwrap_or(32_768);
    assert!(
        ephemeral_low >= FIRST + 1_000,
        "the ephemeral port range starts at {ephemeral_low}: no room below it for chromedriver"
    );
    let span = ephemeral_low - FIRST;
    let start = std::process::id().wrapping_mul(7_919) % span;
    for _ in 0..span {
        let offset = (start + NEXT.fetch_add(1, Ordering::Relaxed)) % span;
        let port = u16::try_from(FIRST + offset).expect("below the ephemeral range");
        let v4 = TcpListener::bind(("127.0.0.1", port));
        let v6 = TcpListener::bind((Ipv6Addr::LOCALHOST, port));
        let v6_ok = match &v6 {
            Ok(_) => true,
            // A machine without IPv6: chromedriver then listens on IPv4 only.
            Err(e) => e.kind() == std::io::ErrorKind::AddrNotAvailable,
        };
        if v4.is_ok() && v6_ok {
            return port;
        }
    }
    panic!("no free port between {FIRST} and {ephemeral_low} for chromedriver");
}

/// How long chromedriver gets to print its port, and the session to open (Chromium's start).
pub const BROWSER_START_TIMEOUT: Duration = Duration::from_secs(30);
/// How long one WebDriver command may take (the machine is shared and loaded during the suite).
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);
/// The default wait for something to appear on the page (as generous as the TUI tests').
pub const UI_TIMEOUT: Duration = Duration::from_secs(30);
/// The window size a [`Browser`] starts with.
pub const DEFAULT_VIEWPORT: (u32, u32) = (1280, 900);
/// The controls [`Browser::hit_test_all`] checks by default: everything a user can press or type
/// into.
pub const CONTROLS: &str = "button, input, textarea, select, a[href], summary, [role=button], [tabindex]:not([tabindex='-1'])";

/// Chromium's flags for a headless run on a container without a GPU, a sandbox or a big /dev/shm,
/// with nothing phoning home.
const CHROMIUM_ARGS: [&str; 9] = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
];

/// One executable from the environment, or its Debian path; panics if it is not there.
fn executable(var: &str, default: &str, package: &str) -> PathBuf {
    let path = PathBuf::from(std::env::var(var).unwrap_or_else(|_| default.to_string()));
    if !path.is_file() {
        panic!(
            "{} not found ({var}={}): the browser tests need Debian's `{package}`; run \
             ./scripts/test (or ./scripts/test --setup-only), which installs it with apt, or point \
             {var} at it",
            path.display(),
            path.display()
        );
    }
    path
}

/// `target/` of the workspace: the test binary runs from `target/<profile>/deps/`.
fn target_dir() -> PathBuf {
    if let Ok(dir) = std::env::var("CARGO_TARGET_DIR") {
        return PathBuf::from(dir);
    }
    if let Ok(exe) = std::env::current_exe()
        && let Some(deps) = exe.parent()
        && deps.file_name().is_some_and(|n| n == "deps")
        && let Some(target) = deps.parent().and_then(Path::parent)
    {
        return target.to_path_buf();
    }
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target")
}

/// The current test's name (the harness names each test's thread after it), as a file name.
fn test_name() -> String {
    let name = thread::current()
        .name()
        .unwrap_or("browser")
        .rsplit("::")
        .next()
        .unwrap_or("browser")
        .to_string();
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// A command chromedriver has beyond the W3C set: `POST /session/{id}/<path>` with a JSON body.
#[derive(Debug)]
struct SessionPost {
    path: &'static str,
    body: Value,
}

impl WebDriverCompatibleCommand for SessionPost {
    fn endpoint(
        &self,
        base_url: &url::Url,
        session_id: Option<&str>,
    ) -> Result<url::Url, url::ParseError> {
        base_url.join(&format!(
            "session/{}/{}",
            session_id.unwrap_or(""),
            self.path
        ))
    }

    fn method_and_body(&self, _request_url: &url::Url) -> (http::Method, Option<String>) {
        (http::Method::POST, Some(self.body.to_string()))
    }
}

/// A headless Chromium with its chromedriver; both end on drop.
pub struct Browser {
    runtime: tokio::runtime::Runtime,
    client: Option<Client>,
    driver: Child,
    driver_output: Arc<Mutex<String>>,
    _profile: tempfile::TempDir,
    /// How long the start took: chromedriver up and the browser's session open.
    pub startup: Duration,
    name: String,
    shots: Cell<u32>,
    /// Every browser-log entry read so far (the endpoint drains them), formatted.
    log: RefCell<Vec<LogEntry>>,
}

/// One entry of the browser log.
#[derive(Debug, Clone)]
pub struct LogEntry {
    /// `SEVERE`, `WARNING`, `INFO`, `DEBUG`.
    pub level: String,
    /// Where it came from (`javascript`, `console-api`, `network`, `security`, …).
    pub source: String,
    pub message: String,
}

impl LogEntry {
    /// An error, or a CSP violation at any level.
    pub fn is_problem(&self) -> bool {
        self.level == "SEVERE"
            || self.source == "security"
            || self.message.contains("Content Security Policy")
    }
}

impl std::fmt::Display for LogEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "[{} {}] {}", self.level, self.source, self.message)
    }
}

impl Browser {
    /// Starts chromedriver and a headless Chromium of [`DEFAULT_VIEWPORT`]; panics with
    /// chromedriver's output if either does not come up within [`BROWSER_START_TIMEOUT`].
    pub fn start() -> Browser {
        let t0 = Instant::now();
        let chromium = executable("COHOST_TEST_CHROMIUM", "/usr/bin/chromium", "chromium");
        let chromedriver = executable(
            "COHOST_TEST_CHROMEDRIVER",
            "/usr/bin/chromedriver",
            "chromium-driver",
        );
        let profile = temp_dir("cohost-chromium-");
        // HOME and the XDG dirs point into the profile, so Chromium's crash reports and caches
        // land there and not in the developer's home.
        let home = profile.path().join("home");
        let mut driver = Command::new(&chromedriver)
            .arg(format!("--port={}", driver_port()))
            .env("HOME", &home)
            .env("XDG_CONFIG_HOME", home.join(".config"))
            .env("XDG_CACHE_HOME", home.join(".cache"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot spawn {}: {e}", chromedriver.display()));
        let driver_output = Arc::new(Mutex::new(String::new()));
        let (tx, rx) = mpsc::channel();
        let stdout = driver.stdout.take().expect("stdout piped");
        let sink = Arc::clone(&driver_output);
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                sink.lock().unwrap().push_str(&format!("{line}\n"));
                // "ChromeDriver was started successfully on port 40979."
                if let Some(port) = line
                    .split("started successfully on port ")
                    .nth(1)
                    .and_then(|rest| rest.trim_end_matches('.').trim().parse::<u16>().ok())
                {
                    let _ = tx.send(port);
                }
            }
        });
        let mut stderr = driver.stderr.take().expect("stderr piped");
        let sink = Arc::clone(&driver_output);
        thread::spawn(move || {
            let mut buf = [0u8; 4096];
            loop {
                match stderr.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => sink
                        .lock()
                        .unwrap()
                        .push_str(&String::from_utf8_lossy(&buf[..n])),
                }
            }
        });
        let port = match rx.recv_timeout(BROWSER_START_TIMEOUT) {
            Ok(port) => port,
            Err(_) => {
                let _ = driver.kill();
                let _ = driver.wait();
                panic!(
                    "{} printed no port within {BROWSER_START_TIMEOUT:?}; its output:\n{}",
                    chromedriver.display(),
                    driver_output.lock().unwrap()
                );
            }
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("tokio runtime");
        let (width, height) = DEFAULT_VIEWPORT;
        let mut args: Vec<String> = CHROMIUM_ARGS.iter().map(|s| s.to_string()).collect();
        args.push(format!(
            "--user-data-dir={}",
            profile.path().join("data").display()
        ));
        args.push(format!("--window-size={width},{height}"));
        let capabilities = json!({
            "browserName": "chrome",
            "goog:chromeOptions": { "binary": chromium, "args": args },
            "goog:loggingPrefs": { "browser": "ALL" },
        });
        let serde_json::Value::Object(capabilities) = capabilities else {
            unreachable!()
        };
        let connect = async {
            let connector = hyper_util::client::legacy::connect::HttpConnector::new();
            tokio::time::timeout(
                BROWSER_START_TIMEOUT,
                ClientBuilder::new(connector)
                    .capabilities(capabilities)
                    .connect(&format!("http://127.0.0.1:{port}")),
            )
            .await
        };
        let client = match runtime.block_on(connect) {
            Ok(Ok(client)) => client,
            failed => {
                let _ = driver.kill();
                let _ = driver.wait();
                panic!(
                    "cannot open a Chromium session ({}) through {}: {failed:?}; chromedriver's \
                     output:\n{}",
                    chromium.display(),
                    chromedriver.display(),
                    driver_output.lock().unwrap()
                );
            }
        };
        let browser = Browser {
            runtime,
            client: Some(client),
            driver,
            driver_output,
            _profile: profile,
            startup: t0.elapsed(),
            name: test_name(),
            shots: Cell::new(0),
            log: RefCell::new(Vec::new()),
        };
        browser.set_viewport(width, height);
        eprintln!("browser: chromium up in {} ms", browser.startup.as_millis());
        browser
    }

    /// The fantoccini client, for what the helpers do not cover (use with [`Browser::block_on`]).
    pub fn client(&self) -> &Client {
        self.client.as_ref().expect("the session is open")
    }

    /// Runs a future on the browser's runtime.
    pub fn block_on<F: std::future::Future>(&self, future: F) -> F::Output {
        self.runtime.block_on(future)
    }

    /// Runs one WebDriver call with [`COMMAND_TIMEOUT`]; a failure fails the test with a
    /// screenshot.
    #[track_caller]
    fn call<T, E: std::fmt::Debug>(
        &self,
        what: &str,
        future: impl std::future::Future<Output = Result<T, E>>,
    ) -> T {
        match self
            .runtime
            .block_on(async { tokio::time::timeout(COMMAND_TIMEOUT, future).await })
        {
            Ok(Ok(value)) => value,
            Ok(Err(e)) => self.fail(&format!("{what}: {e:?}")),
            Err(_) => self.fail(&format!("{what}: no answer within {COMMAND_TIMEOUT:?}")),
        }
    }

    /// A chromedriver-specific command on the session.
    #[track_caller]
    fn session_post(&self, what: &str, path: &'static str, body: Value) -> Value {
        let client = self.client().clone();
        self.call(what, async move {
            client.issue_cmd(SessionPost { path, body }).await
        })
    }

    /// A Chrome DevTools Protocol command through chromedriver (`goog/cdp/execute`).
    #[track_caller]
    pub fn cdp(&self, method: &str, params: Value) -> Value {
        self.session_post(
            &format!("CDP {method}"),
            "goog/cdp/execute",
            json!({ "cmd": method, "params": params }),
        )
    }

    // ----------------------------------------------------------------------------- navigation

    /// Loads `url` and waits for the document to load.
    #[track_caller]
    pub fn goto(&self, url: &str) {
        self.call(&format!("goto {url}"), self.client().goto(url));
    }

    /// Reloads the page.
    #[track_caller]
    pub fn reload(&self) {
        self.call("reload", self.client().refresh());
    }

    /// The page's CSS viewport becomes `width`×`height` (what `window.innerWidth` and
    /// `innerHeight` report, and what screenshots show), through the window size and CDP's
    /// `Emulation.setDeviceMetricsOverride`; checked before returning.
    #[track_caller]
    pub fn set_viewport(&self, width: u32, height: u32) {
        self.call(
            "set window size",
            self.client().set_window_size(width, height),
        );
        self.cdp(
            "Emulation.setDeviceMetricsOverride",
            json!({ "width": width, "height": height, "deviceScaleFactor": 1, "mobile": false }),
        );
        let size = self.exec("return [window.innerWidth, window.innerHeight];", vec![]);
        if size != json!([width, height]) {
            self.fail(&format!(
                "asked for a {width}x{height} viewport, the page sees {size}"
            ));
        }
    }

    // ----------------------------------------------------------------------------- scripts

    /// Runs `js` as the body of a function (WebDriver's Execute Script, which the page's CSP does
    /// not block) with `args` as `arguments`; returns what it returns.
    #[track_caller]
    pub fn exec(&self, js: &str, args: Vec<Value>) -> Value {
        self.call(
            &format!("script `{}`", short_js(js)),
            self.client().execute(js, args),
        )
    }

    /// Like [`Browser::exec`], for a script that calls its last argument (the callback) when done.
    #[track_caller]
    pub fn exec_async(&self, js: &str, args: Vec<Value>) -> Value {
        self.call(
            &format!("async script `{}`", short_js(js)),
            self.client().execute_async(js, args),
        )
    }

    // ----------------------------------------------------------------------------- waiting

    /// Polls `f` every 50 ms until it returns `Some`; after `timeout`, fails the test (with a
    /// screenshot) naming `what`.
    #[track_caller]
    pub fn wait_for<T>(
        &self,
        what: &str,
        timeout: Duration,
        mut f: impl FnMut() -> Option<T>,
    ) -> T {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(value) = f() {
                return value;
            }
            if Instant::now() >= deadline {
                self.fail(&format!("timed out after {timeout:?} waiting for {what}"));
            }
            thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits until an element matches `css` (and is displayed).
    #[track_caller]
    pub fn wait_visible(&self, css: &str, timeout: Duration) {
        let js = "const e = document.querySelector(arguments[0]); \
                  return !!e && e.checkVisibility({ visibilityProperty: true });";
        self.wait_for(&format!("`{css}` to be visible"), timeout, || {
            (self.exec(js, vec![json!(css)]) == json!(true)).then_some(())
        });
    }

    /// Waits until the visible text of `css` contains `needle`; returns the text.
    #[track_caller]
    pub fn wait_text(&self, css: &str, needle: &str, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let last = self.text_or_empty(css);
            if last.contains(needle) {
                return last;
            }
            if Instant::now() >= deadline {
                self.fail(&format!(
                    "timed out after {timeout:?} waiting for the text of `{css}` to contain \
                     {needle:?}; it was (its end):\n{}",
                    tail(&last, 1500)
                ));
            }
            thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits until the elements matching `css`, in document order, hold `needles` in that order:
    /// the first element whose text contains `needles[0]`, a later one containing `needles[1]`,
    /// and so on (other elements may come between). Returns every element's text. Texts are
    /// `textContent`, so this also reads regions hidden for sighted users (a screen-reader live
    /// region's announcements, one element each).
    #[track_caller]
    pub fn wait_texts_in_order(
        &self,
        css: &str,
        needles: &[&str],
        timeout: Duration,
    ) -> Vec<String> {
        let js = "return Array.from(document.querySelectorAll(arguments[0]), e => e.textContent);";
        let deadline = Instant::now() + timeout;
        loop {
            let texts: Vec<String> = self
                .exec(js, vec![json!(css)])
                .as_array()
                .map(|a| {
                    a.iter()
                        .map(|v| v.as_str().unwrap_or_default().to_string())
                        .collect()
                })
                .unwrap_or_default();
            let mut rest = texts.iter();
            if needles
                .iter()
                .all(|needle| rest.any(|t| t.contains(needle)))
            {
                return texts;
            }
            if Instant::now() >= deadline {
                self.fail(&format!(
                    "timed out after {timeout:?} waiting for `{css}` to hold {needles:?} in that \
                     order; it holds {texts:?}"
                ));
            }
            thread::sleep(Duration::from_millis(50));
        }
    }

    // ----------------------------------------------------------------------------- elements

    #[track_caller]
    fn find(&self, css: &str) -> fantoccini::elements::Element {
        self.call(
            &format!("find `{css}`"),
            self.client().find(Locator::Css(css)),
        )
    }

    /// Clicks the element matching `css` as a user would (WebDriver's Element Click: scrolled into
    /// view, and an error if another element would get the click).
    #[track_caller]
    pub fn click(&self, css: &str) {
        let element = self.find(css);
        self.call(&format!("click `{css}`"), element.click());
    }

    /// Clicks the first element matching `css` whose visible text contains `text`.
    #[track_caller]
    pub fn click_text(&self, css: &str, text: &str) {
        let elements = self.call(
            &format!("find `{css}`"),
            self.client().find_all(Locator::Css(css)),
        );
        for element in elements {
            let shown = self.call(&format!("text of `{css}`"), element.text());
            if shown.contains(text) {
                self.call(&format!("click `{css}` with {text:?}"), element.click());
                return;
            }
        }
        self.fail(&format!("no `{css}` shows {text:?}"));
    }

    /// Types `text` into the element matching `css` (focusing it first), after what it holds.
    #[track_caller]
    pub fn type_into(&self, css: &str, text: &str) {
        self.send_keys(css, text);
    }

    /// Empties the input or textarea matching `css`.
    #[track_caller]
    pub fn clear(&self, css: &str) {
        let element = self.find(css);
        self.call(&format!("clear `{css}`"), element.clear());
    }

    /// WebDriver's Element Send Keys: `keys` may hold [`Key`] characters; a modifier stays down
    /// until the end, so `&format!("{}{}", Key::Control, Key::Enter)` is Ctrl+Enter.
    #[track_caller]
    pub fn send_keys(&self, css: &str, keys: &str) {
        let element = self.find(css);
        self.call(&format!("send keys to `{css}`"), element.send_keys(keys));
    }

    /// Presses a chord on whatever has the focus (the keyboard, not an element): every key down
    /// in order, then up in reverse. `press(&[Key::Tab])`, `press(&[Key::Shift, Key::Tab])`,
    /// `press(&[Key::Control, Key::Enter])`.
    #[track_caller]
    pub fn press(&self, chord: &[Key]) {
        let mut actions = KeyActions::new("keyboard".to_string());
        for key in chord {
            actions = actions.then(KeyAction::Down {
                value: char::from(*key),
            });
        }
        for key in chord.iter().rev() {
            actions = actions.then(KeyAction::Up {
                value: char::from(*key),
            });
        }
        self.call("press keys", self.client().perform_actions(actions));
    }

    /// Types `text` on whatever has the focus, one key at a time.
    #[track_caller]
    pub fn type_active(&self, text: &str) {
        let mut actions = KeyActions::new("keyboard".to_string());
        for c in text.chars() {
            actions = actions
                .then(KeyAction::Down { value: c })
                .then(KeyAction::Up { value: c });
        }
        self.call("type keys", self.client().perform_actions(actions));
    }

    /// The visible text of the element matching `css` (fails if there is none).
    #[track_caller]
    pub fn text(&self, css: &str) -> String {
        let element = self.find(css);
        self.call(&format!("text of `{css}`"), element.text())
    }

    /// The text of `css`, or "" if no element matches (for polling).
    #[track_caller]
    fn text_or_empty(&self, css: &str) -> String {
        let js = "const e = document.querySelector(arguments[0]); return e ? e.innerText : '';";
        self.exec(js, vec![json!(css)])
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// Whether the element matching `css` is enabled.
    #[track_caller]
    pub fn is_enabled(&self, css: &str) -> bool {
        let element = self.find(css);
        self.call(&format!("is `{css}` enabled"), element.is_enabled())
    }

    /// Whether an element matches `css`.
    #[track_caller]
    pub fn exists(&self, css: &str) -> bool {
        self.exec(
            "return !!document.querySelector(arguments[0]);",
            vec![json!(css)],
        ) == json!(true)
    }

    /// The id of the focused element; `None` when the focus is on `<body>`, nowhere, or on an
    /// element without an id (see [`Browser::active_element_label`]).
    #[track_caller]
    pub fn active_element_id(&self) -> Option<String> {
        let id = self.exec(
            "const e = document.activeElement; return e && e !== document.body ? e.id : '';",
            vec![],
        );
        id.as_str().filter(|id| !id.is_empty()).map(str::to_string)
    }

    /// What has the focus, described for a message (`button#queueTask "Queue task"`, `body`).
    #[track_caller]
    pub fn active_element_label(&self) -> String {
        let js = format!("{LABEL_JS} return label(document.activeElement);");
        self.exec(&js, vec![])
            .as_str()
            .unwrap_or("none")
            .to_string()
    }

    // ----------------------------------------------------------------------------- checks

    /// Every control matching `selectors` (e.g. [`CONTROLS`]) that is displayed is scrolled into
    /// the middle of the view, as a user would, and `document.elementFromPoint` at the centre of
    /// its box must be the control or inside it. Returns the failures, one line each: the
    /// control, and what is there instead.
    #[track_caller]
    pub fn hit_test_all(&self, selectors: &str) -> Vec<String> {
        let js = format!(
            "{LABEL_JS}
            const out = [];
            for (const el of document.querySelectorAll(arguments[0])) {{
              if (el.type === 'hidden') continue;
              if (!el.checkVisibility({{ opacityProperty: true, visibilityProperty: true }})) continue;
              el.scrollIntoView({{ block: 'center', inline: 'center', behavior: 'instant' }});
              // A link wrapped over two lines has two boxes: a tap lands on one of them.
              const boxes = el.getClientRects();
              const r = boxes.length ? boxes[0] : el.getBoundingClientRect();
              if (r.width === 0 || r.height === 0) continue;
              const x = r.left + r.width / 2, y = r.top + r.height / 2;
              const hit = document.elementFromPoint(x, y);
              if (hit && (hit === el || el.contains(hit))) continue;
              out.push(label(el) + ' at (' + Math.round(x) + ', ' + Math.round(y) + ') in a ' +
                innerWidth + 'x' + innerHeight + ' viewport: ' +
                (hit ? 'the point hits ' + label(hit) : 'the point is outside the viewport'));
            }}
            return out;"
        );
        let failures = self.exec(&js, vec![json!(selectors)]);
        failures
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|v| v.as_str().unwrap_or_default().to_string())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Fails the test (screenshot and all) if [`Browser::hit_test_all`] finds a control that a
    /// click at its centre would miss.
    #[track_caller]
    pub fn assert_hit_test(&self, selectors: &str) {
        let failures = self.hit_test_all(selectors);
        if !failures.is_empty() {
            self.fail(&format!(
                "{} control(s) cannot be hit at their centre:\n  {}",
                failures.len(),
                failures.join("\n  ")
            ));
        }
    }

    /// Reads the browser log (chromedriver hands each entry out once) into the kept list.
    #[track_caller]
    fn drain_log(&self) {
        let entries = self.session_post(
            "read the browser log",
            "se/log",
            json!({ "type": "browser" }),
        );
        let Some(entries) = entries.as_array() else {
            self.fail(&format!("the browser log is not a list: {entries}"));
        };
        let mut log = self.log.borrow_mut();
        for entry in entries {
            log.push(LogEntry {
                level: entry["level"].as_str().unwrap_or("?").to_string(),
                source: entry["source"].as_str().unwrap_or("").to_string(),
                message: entry["message"].as_str().unwrap_or("").to_string(),
            });
        }
    }

    /// Every browser-log entry so far.
    #[track_caller]
    pub fn log(&self) -> Vec<LogEntry> {
        self.drain_log();
        self.log.borrow().clone()
    }

    /// The errors so far: console errors, uncaught exceptions, failed loads and CSP violations
    /// (see [`LogEntry::is_problem`]), one line each.
    #[track_caller]
    pub fn problems(&self) -> Vec<String> {
        self.log()
            .iter()
            .filter(|e| e.is_problem())
            .map(ToString::to_string)
            .collect()
    }

    /// Fails the test if there is any problem (see [`Browser::problems`]).
    #[track_caller]
    pub fn assert_no_problems(&self) {
        let problems = self.problems();
        if !problems.is_empty() {
            self.fail(&format!(
                "the page logged {} problem(s):\n  {}",
                problems.len(),
                problems.join("\n  ")
            ));
        }
    }

    // ----------------------------------------------------------------------------- evidence

    /// Saves a PNG of the viewport to `path` (parent directories are created).
    #[track_caller]
    pub fn screenshot(&self, path: &Path) {
        let png = self.call("screenshot", self.client().screenshot());
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .unwrap_or_else(|e| panic!("mkdir {}: {e}", parent.display()));
        }
        std::fs::write(path, png).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    }

    /// Saves `target/browser-screenshots/<test>-<n>.png` and `.html` (the DOM as it is now);
    /// returns the PNG's path, or why nothing could be saved.
    pub fn save_evidence(&self) -> String {
        let n = self.shots.get() + 1;
        self.shots.set(n);
        let dir = target_dir().join("browser-screenshots");
        let png = dir.join(format!("{}-{n}.png", self.name));
        let html = dir.join(format!("{}-{n}.html", self.name));
        let client = self.client().clone();
        let saved = self.runtime.block_on(async {
            let shot = tokio::time::timeout(COMMAND_TIMEOUT, client.screenshot()).await;
            let dom = tokio::time::timeout(
                COMMAND_TIMEOUT,
                client.execute("return document.documentElement.outerHTML;", vec![]),
            )
            .await;
            (shot, dom)
        });
        if let Err(e) = std::fs::create_dir_all(&dir) {
            return format!("(cannot create {}: {e})", dir.display());
        }
        let mut out = Vec::new();
        match saved.0 {
            Ok(Ok(bytes)) => match std::fs::write(&png, bytes) {
                Ok(()) => out.push(png.display().to_string()),
                Err(e) => out.push(format!("(cannot write {}: {e})", png.display())),
            },
            other => out.push(format!("(no screenshot: {other:?})")),
        }
        match saved.1 {
            Ok(Ok(Value::String(dom))) => match std::fs::write(&html, dom) {
                Ok(()) => out.push(html.display().to_string()),
                Err(e) => out.push(format!("(cannot write {}: {e})", html.display())),
            },
            other => out.push(format!("(no HTML: {other:?})")),
        }
        out.join(" and ")
    }

    /// Fails the test: saves the evidence, prints where, and panics with `message`, the paths and
    /// the browser log's problems.
    #[track_caller]
    pub fn fail(&self, message: &str) -> ! {
        // The page as a person reads it (CI keeps the log, not the saved files).
        let page = self
            .runtime
            .block_on(async {
                tokio::time::timeout(
                    Duration::from_secs(5),
                    self.client().execute(
                        "return document.body ? document.body.innerText : '';",
                        vec![],
                    ),
                )
                .await
            })
            .ok()
            .and_then(Result::ok)
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_else(|| "(the page's text could not be read)".into());
        eprintln!("browser: the page's text (its end):\n{}", tail(&page, 3000));
        let saved = self.save_evidence();
        eprintln!("browser: saved {saved}");
        let problems: Vec<String> = self
            .log
            .borrow()
            .iter()
            .filter(|e| e.is_problem())
            .map(ToString::to_string)
            .collect();
        let problems = if problems.is_empty() {
            String::new()
        } else {
            format!(
                "\nbrowser log problems so far:\n  {}",
                problems.join("\n  ")
            )
        };
        panic!("{message}\n(saved {saved}){problems}");
    }

    /// chromedriver's output so far (for a failure message).
    pub fn driver_output(&self) -> String {
        self.driver_output.lock().unwrap().clone()
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if let Some(client) = self.client.take() {
            // Ends the session, which quits Chromium; then chromedriver goes.
            let _ = self.runtime.block_on(async {
                tokio::time::timeout(Duration::from_secs(10), client.close()).await
            });
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// A JS function `label(el)` describing an element for messages: `tag#id.class "text"`.
const LABEL_JS: &str = r#"
function label(el) {
  if (!el) return 'nothing';
  if (el === document.body) return 'body';
  let s = el.tagName.toLowerCase();
  if (el.id) s += '#' + el.id;
  if (typeof el.className === 'string' && el.className.trim()) s += '.' + el.className.trim().split(/\s+/).join('.');
  const text = (el.getAttribute('aria-label') || el.innerText || el.value || el.title ||
    el.getAttribute('placeholder') || '').trim().replace(/\s+/g, ' ');
  if (text) s += ' "' + (text.length > 40 ? text.slice(0, 40) + '…' : text) + '"';
  return s;
}
"#;

/// The first line of a script, for a message.
fn short_js(js: &str) -> String {
    let line = js.trim().lines().next().unwrap_or_default();
    if line.chars().count() > 80 {
        format!("{}…", line.chars().take(80).collect::<String>())
    } else {
        line.to_string()
    }
}

/// The last `max` characters of `text` (whole characters), marked when cut.
fn tail(text: &str, max: usize) -> String {
    let count = text.chars().count();
    if count <= max {
        return text.to_string();
    }
    let cut: String = text.chars().skip(count - max).collect();
    format!("…{cut}")
}
