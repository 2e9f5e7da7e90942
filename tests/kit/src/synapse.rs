//! A real Matrix homeserver for the Matrix bridge's tests: Synapse from the venv `scripts/test`
//! installs (`COHOST_TEST_SYNAPSE`, that venv's python), with a generated config (SQLite,
//! loopback only, a free port, registration by shared secret, rate limits relaxed, `/sync`
//! answers not cached: Synapse keeps one for 2 minutes by default, so a person's second initial
//! sync would get the first one's answer and miss a new invite), two users registered (the bot
//! and a person) and a stranger on demand; it can be restarted in place. [`Synapse::start_tls`]
//! adds a second, TLS listener whose certificate a test CA (made here by `rcgen`) signs, for
//! the bridge's https path. [`MatrixUser`] is a small Matrix client over `ureq` for the tests'
//! people (on the plain listener).

use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use super::{temp_dir, wait_until};

/// The server name every test homeserver uses (user ids end in `:localhost`).
pub const SERVER_NAME: &str = "localhost";
const SHARED_SECRET: &str = "cohost-test-registration-secret";
/// How long Synapse may take to answer after a start (it takes 6–10 s on 2 busy cores).
pub const START_TIMEOUT: Duration = Duration::from_secs(90);

pub struct Synapse {
    python: PathBuf,
    dir: PathBuf,
    port: u16,
    /// The TLS listener's port, when there is one; its CA is `ca.pem` in `dir`.
    tls_port: Option<u16>,
    child: Option<Child>,
    _dir: tempfile::TempDir,
}

/// The python of the venv Synapse is installed in, from `COHOST_TEST_SYNAPSE`.
pub fn synapse_python() -> PathBuf {
    let Some(python) = std::env::var_os("COHOST_TEST_SYNAPSE").filter(|v| !v.is_empty()) else {
        panic!(
            "COHOST_TEST_SYNAPSE is not set: the Matrix tests need the Synapse homeserver; \
             run `scripts/test --setup-only` and export what it prints"
        );
    };
    let python = PathBuf::from(python);
    assert!(
        python.is_file(),
        "COHOST_TEST_SYNAPSE={} is not a file: run `scripts/test --setup-only`",
        python.display()
    );
    python
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// Unpadded standard base64, as Synapse's signing key file holds its seed.
fn base64_unpadded(bytes: &[u8]) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..=chunk.len() {
            out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    out
}

fn config_text(dir: &Path, port: u16, tls_port: Option<u16>) -> String {
    let d = dir.display();
    let fast = "{per_second: 10000, burst_count: 10000}";
    let tls = match tls_port {
        Some(tls_port) => format!(
            "  - port: {tls_port}
    bind_addresses: ['127.0.0.1']
    type: http
    tls: true
    resources:
      - names: [client]
        compress: false
tls_certificate_path: {d}/server.pem
tls_private_key_path: {d}/server.key
"
        ),
        None => String::new(),
    };
    format!(
        "server_name: \"{SERVER_NAME}\"
pid_file: {d}/homeserver.pid
listeners:
  - port: {port}
    bind_addresses: ['127.0.0.1']
    type: http
    tls: false
    resources:
      - names: [client]
        compress: false
{tls}database:
  name: sqlite3
  args:
    database: {d}/homeserver.db
media_store_path: {d}/media
registration_shared_secret: \"{SHARED_SECRET}\"
enable_registration: false
report_stats: false
macaroon_secret_key: \"cohost-test-macaroon\"
form_secret: \"cohost-test-form\"
signing_key_path: {d}/signing.key
trusted_key_servers: []
suppress_key_server_warning: true
federation_domain_whitelist: []
enable_metrics: false
presence:
  enabled: false
caches:
  sync_response_cache_duration: 0
rc_message: {fast}
rc_registration: {fast}
rc_login:
  address: {fast}
  account: {fast}
  failed_attempts: {fast}
rc_joins:
  local: {fast}
  remote: {fast}
rc_joins_per_room: {fast}
rc_invites:
  per_room: {fast}
  per_user: {fast}
  per_issuer: {fast}
rc_room_creation: {fast}
"
    )
}

impl Synapse {
    /// Writes a config and a signing key into a new temp dir and starts Synapse on a free
    /// loopback port; returns once it answers `GET /_matrix/client/versions`.
    pub fn start() -> Synapse {
        Synapse::start_with(false)
    }

    /// [`Synapse::start`] with a second, TLS listener ([`Synapse::tls_url`]): its certificate
    /// (for `127.0.0.1` and `localhost`) is signed by a CA made for this homeserver alone,
    /// whose certificate is [`Synapse::ca_file`].
    pub fn start_tls() -> Synapse {
        Synapse::start_with(true)
    }

    fn start_with(tls: bool) -> Synapse {
        let python = synapse_python();
        let dir_guard = temp_dir("cohost-synapse-");
        let dir = dir_guard.path().to_path_buf();
        let port = free_port();
        let tls_port = tls.then(|| {
            crate::certs::write_certificates(&dir);
            free_port()
        });
        std::fs::write(
            dir.join("homeserver.yaml"),
            config_text(&dir, port, tls_port),
        )
        .unwrap();
        let mut seed = [0u8; 32];
        std::fs::File::open("/dev/urandom")
            .and_then(|mut f| f.read_exact(&mut seed))
            .unwrap();
        std::fs::write(
            dir.join("signing.key"),
            format!("ed25519 a_test {}\n", base64_unpadded(&seed)),
        )
        .unwrap();
        let mut synapse = Synapse {
            python,
            dir,
            port,
            tls_port,
            child: None,
            _dir: dir_guard,
        };
        synapse.spawn();
        synapse
    }

    fn spawn(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("synapse.log"))
            .unwrap();
        let child = Command::new(&self.python)
            .args(["-m", "synapse.app.homeserver", "-c"])
            .arg(self.dir.join("homeserver.yaml"))
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn Synapse with {}: {e}", self.python.display()));
        self.child = Some(child);
        let url = self.url("/_matrix/client/versions");
        let agent = agent();
        let child = self.child.as_mut().unwrap();
        let mut exited = None;
        wait_until("Synapse to answer", START_TIMEOUT, || {
            if let Ok(Some(status)) = child.try_wait() {
                exited = Some(status);
                return Some(());
            }
            match agent.get(&url).call() {
                Ok(resp) if resp.status() == 200 => Some(()),
                _ => None,
            }
        });
        if let Some(status) = exited {
            panic!("Synapse exited ({status}) at start:\n{}", self.log_tail(40));
        }
    }

    /// The last `lines` lines of Synapse's log (for failure messages).
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(self.dir.join("synapse.log")).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// Stops Synapse (SIGTERM, then waits) and starts it again on the same port and database.
    pub fn restart(&mut self) {
        self.stop();
        self.spawn();
    }

    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // SIGTERM through kill(1): the kit has no libc.
            let _ = Command::new("kill")
                .arg("-TERM")
                .arg(child.id().to_string())
                .status();
            let deadline = std::time::Instant::now() + Duration::from_secs(20);
            loop {
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
                if std::time::Instant::now() >= deadline {
                    let _ = child.kill();
                    let _ = child.wait();
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `http://127.0.0.1:PORT`.
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// `https://127.0.0.1:PORT`, the TLS listener of [`Synapse::start_tls`].
    pub fn tls_url(&self) -> String {
        let port = self.tls_port.expect("a Synapse started with start_tls");
        format!("https://127.0.0.1:{port}")
    }

    /// The PEM certificate of the CA that signed the TLS listener's certificate.
    pub fn ca_file(&self) -> PathBuf {
        assert!(self.tls_port.is_some(), "a Synapse started with start_tls");
        self.dir.join("ca.pem")
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base_url())
    }

    /// Registers `name` with `password` through the shared-secret admin API (HMAC-SHA1 by
    /// the venv's python, so the kit needs no crypto crate); returns `@name:localhost`.
    pub fn register(&self, name: &str, password: &str) -> String {
        let script = r#"
import hashlib, hmac, json, sys, urllib.request
base, secret, user, password = sys.argv[1:5]
url = base + "/_synapse/admin/v1/register"
nonce = json.load(urllib.request.urlopen(url))["nonce"]
mac = hmac.new(secret.encode(), digestmod=hashlib.sha1)
for part in (nonce, user, password, "notadmin"):
    mac.update(part.encode())
    if part != "notadmin":
        mac.update(b"\x00")
body = json.dumps({"nonce": nonce, "username": user, "password": password, "admin": False,
                   "mac": mac.hexdigest()}).encode()
req = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
print(json.load(urllib.request.urlopen(req))["user_id"])
"#;
        let out = Command::new(&self.python)
            .arg("-c")
            .arg(script)
            .args([&self.base_url(), SHARED_SECRET, name, password])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "registering {name} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// Registers `name` and logs it in.
    pub fn user(&self, name: &str) -> MatrixUser {
        let password = format!("{name}-password");
        self.register(name, &password);
        MatrixUser::login(&self.base_url(), name, &password)
    }
}

impl Drop for Synapse {
    fn drop(&mut self) {
        self.stop();
    }
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .into()
}

/// Percent-encodes one path segment (room ids, aliases, transaction ids).
pub fn encode(segment: &str) -> String {
    let mut out = String::new();
    for b in segment.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A person's Matrix client: one access token, plain requests, no sync state of its own.
pub struct MatrixUser {
    pub user_id: String,
    pub token: String,
    base: String,
    agent: ureq::Agent,
    txn: std::cell::Cell<u64>,
}

impl MatrixUser {
    pub fn login(base: &str, name: &str, password: &str) -> MatrixUser {
        let agent = agent();
        let body = json!({
            "type": "m.login.password",
            "identifier": {"type": "m.id.user", "user": name},
            "password": password,
        });
        let mut resp = agent
            .post(format!("{base}/_matrix/client/v3/login"))
            .header("Content-Type", "application/json")
            .send(body.to_string())
            .unwrap();
        let answer: Value =
            serde_json::from_str(&resp.body_mut().read_to_string().unwrap()).unwrap();
        MatrixUser {
            user_id: answer["user_id"].as_str().expect("user_id").to_string(),
            token: answer["access_token"].as_str().expect("token").to_string(),
            base: base.to_string(),
            agent,
            txn: std::cell::Cell::new(0),
        }
    }

    /// One request; answers (status, JSON body).
    pub fn call(&self, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
        let url = format!("{}/_matrix/client/v3{path}", self.base);
        let auth = format!("Bearer {}", self.token);
        let text = body.map(Value::to_string).unwrap_or_else(|| "{}".into());
        let result = match method {
            "GET" => self.agent.get(&url).header("Authorization", &auth).call(),
            "PUT" => self
                .agent
                .put(&url)
                .header("Authorization", &auth)
                .header("Content-Type", "application/json")
                .send(text),
            _ => self
                .agent
                .post(&url)
                .header("Authorization", &auth)
                .header("Content-Type", "application/json")
                .send(text),
        };
        let mut resp = result.unwrap_or_else(|e| panic!("{method} {path}: {e}"));
        let status = resp.status().as_u16();
        let value = serde_json::from_str(&resp.body_mut().read_to_string().unwrap_or_default())
            .unwrap_or(Value::Null);
        (status, value)
    }

    #[track_caller]
    fn ok(&self, method: &str, path: &str, body: Option<&Value>) -> Value {
        let (status, value) = self.call(method, path, body);
        assert_eq!(status, 200, "{method} {path} answered {status}: {value}");
        value
    }

    /// Creates a private room inviting `invite`; returns its id.
    pub fn create_room(&self, name: &str, invite: &[&str]) -> String {
        let body = json!({"name": name, "preset": "private_chat", "invite": invite});
        self.ok("POST", "/createRoom", Some(&body))["room_id"]
            .as_str()
            .unwrap()
            .to_string()
    }

    pub fn join(&self, room: &str) -> (u16, Value) {
        self.call("POST", &format!("/join/{}", encode(room)), Some(&json!({})))
    }

    /// Sends a text message; returns its event id.
    pub fn send_text(&self, room: &str, text: &str) -> String {
        let n = self.txn.get() + 1;
        self.txn.set(n);
        let txn = format!("t{}-{n}", std::process::id());
        let body = json!({"msgtype": "m.text", "body": text});
        let path = format!(
            "/rooms/{}/send/m.room.message/{}",
            encode(room),
            encode(&txn)
        );
        self.ok("PUT", &path, Some(&body))["event_id"]
            .as_str()
            .unwrap()
            .to_string()
    }

    /// The rooms this user is invited to (one `/sync` without a token).
    pub fn invites(&self) -> Vec<String> {
        let sync = self.ok(
            "GET",
            "/sync?timeout=0&filter=%7B%22room%22%3A%7B%22timeline%22%3A%7B%22limit%22%3A0%7D%7D%7D",
            None,
        );
        sync["rooms"]["invite"]
            .as_object()
            .map(|o| o.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// Every `m.room.message` of the room, oldest first (up to 1000).
    pub fn messages(&self, room: &str) -> Vec<Value> {
        let path = format!("/rooms/{}/messages?dir=b&limit=1000", encode(room));
        let answer = self.ok("GET", &path, None);
        let mut events: Vec<Value> = answer["chunk"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .filter(|e| e["type"] == "m.room.message")
            .collect();
        events.reverse();
        events
    }
}

/// The room's messages as people see them: each message not an edit, with the content of its
/// latest edit applied (`m.new_content`), as (sender, msgtype, body, event id).
pub fn as_seen(events: &[Value]) -> Vec<(String, String, String, String)> {
    let mut out: Vec<(String, String, String, String)> = Vec::new();
    for event in events {
        let content = &event["content"];
        if content["m.relates_to"]["rel_type"] == "m.replace" {
            let target = content["m.relates_to"]["event_id"].as_str().unwrap_or("");
            if let Some(row) = out.iter_mut().find(|r| r.3 == target) {
                row.2 = content["m.new_content"]["body"]
                    .as_str()
                    .unwrap_or("")
                    .to_string();
            }
            continue;
        }
        out.push((
            event["sender"].as_str().unwrap_or("").to_string(),
            content["msgtype"].as_str().unwrap_or("").to_string(),
            content["body"].as_str().unwrap_or("").to_string(),
            event["event_id"].as_str().unwrap_or("").to_string(),
        ));
    }
    out
}
