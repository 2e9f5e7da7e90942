//! The few Matrix client-server API calls the bridge makes (login, sync, send, create, join),
//! as JSON over the `ureq` client cohost already has. Sends carry transaction ids the caller
//! derives from what it posts, so a send repeated after a restart (same device) is the same
//! event; a send that meets a transport error, a 5xx or a 429 is retried until it lands.

use std::time::Duration;

use anyhow::{Context, bail};
use serde_json::{Value, json};
use ureq::tls::{Certificate, RootCerts, TlsConfig};

/// A failed call the homeserver answered.
#[derive(Debug, thiserror::Error)]
#[error("{status} {errcode}: {message}")]
pub struct MatrixError {
    pub status: u16,
    pub errcode: String,
    pub message: String,
    pub retry_after_ms: Option<u64>,
}

/// Why a call failed: the homeserver said no, or it could not be reached.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    #[error("homeserver answered {0}")]
    Matrix(MatrixError),
    #[error("homeserver unreachable: {0}")]
    Transport(String),
    #[error(
        "TLS with the homeserver failed: {0} (is its certificate signed by a CA the bridge \
         trusts? [bridge.matrix] ca_file names the CAs to trust instead of Mozilla's roots)"
    )]
    Tls(String),
}

impl CallError {
    /// Worth retrying: unreachable, overloaded, restarting or rate limited.
    pub fn transient(&self) -> bool {
        match self {
            CallError::Transport(_) => true,
            CallError::Tls(_) => false,
            CallError::Matrix(e) => e.status >= 500 || e.status == 429,
        }
    }
}

#[derive(Clone)]
pub struct Homeserver {
    base: String,
    token: String,
    agent: ureq::Agent,
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

/// The HTTP client: TLS (rustls) for an `https://` homeserver, trusting `roots` when given
/// (`ca_file`), else Mozilla's root certificates.
pub fn agent(roots: Option<Vec<Certificate<'static>>>) -> ureq::Agent {
    let mut tls = TlsConfig::builder();
    if let Some(roots) = roots {
        tls = tls.root_certs(RootCerts::from(roots));
    }
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .tls_config(tls.build())
        .timeout_connect(Some(Duration::from_secs(5)))
        .timeout_global(Some(Duration::from_secs(90)))
        .build()
        .into()
}

/// How a call failed before the homeserver answered: TLS (a certificate not trusted, a
/// handshake refused) is not worth retrying; anything else is the link. An untrusted
/// certificate reaches us as `Io` of kind `InvalidData` wrapping rustls' error (observed:
/// `Io(Custom { kind: InvalidData, error: InvalidCertificate(UnknownIssuer) })`), not as
/// `Error::Rustls`.
fn transport(error: ureq::Error) -> CallError {
    let tls = match &error {
        ureq::Error::Rustls(_) | ureq::Error::Tls(_) | ureq::Error::TlsRequired => true,
        ureq::Error::Io(e) => e.kind() == std::io::ErrorKind::InvalidData,
        _ => false,
    };
    if tls {
        CallError::Tls(error.to_string())
    } else {
        CallError::Transport(error.to_string())
    }
}

impl Homeserver {
    pub fn with_token(base: &str, token: &str, agent: ureq::Agent) -> Homeserver {
        Homeserver {
            base: base.trim_end_matches('/').to_string(),
            token: token.to_string(),
            agent,
        }
    }

    /// Logs `user` in with `password` as the device `device_id` (kept across restarts).
    pub fn login(
        base: &str,
        user: &str,
        password: &str,
        device_id: &str,
        agent: ureq::Agent,
    ) -> anyhow::Result<Homeserver> {
        let mut server = Homeserver::with_token(base, "", agent);
        let body = json!({
            "type": "m.login.password",
            "identifier": {"type": "m.id.user", "user": user},
            "password": password,
            "device_id": device_id,
            "initial_device_display_name": "cohost Matrix bridge",
        });
        let answer = retrying("login", || server.call("POST", "/login", Some(&body)))
            .context("logging the bot in")?;
        server.token = answer["access_token"]
            .as_str()
            .context("the login answer has no access_token")?
            .to_string();
        Ok(server)
    }

    /// One call of `/_matrix/client/v3{path}`.
    pub fn call(&self, method: &str, path: &str, body: Option<&Value>) -> Result<Value, CallError> {
        let url = format!("{}/_matrix/client/v3{path}", self.base);
        let auth = format!("Bearer {}", self.token);
        let result = match method {
            "GET" => self.agent.get(&url).header("Authorization", &auth).call(),
            "PUT" => self
                .agent
                .put(&url)
                .header("Authorization", &auth)
                .header("Content-Type", "application/json")
                .send(body.map(Value::to_string).unwrap_or_else(|| "{}".into())),
            _ => self
                .agent
                .post(&url)
                .header("Authorization", &auth)
                .header("Content-Type", "application/json")
                .send(body.map(Value::to_string).unwrap_or_else(|| "{}".into())),
        };
        let mut response = result.map_err(transport)?;
        let status = response.status().as_u16();
        let text = response
            .body_mut()
            .with_config()
            .limit(64 * 1024 * 1024)
            .read_to_string()
            .map_err(|e| CallError::Transport(e.to_string()))?;
        let value: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        if status >= 400 {
            return Err(CallError::Matrix(MatrixError {
                status,
                errcode: value["errcode"].as_str().unwrap_or("M_UNKNOWN").to_string(),
                message: value["error"].as_str().unwrap_or(&text).to_string(),
                retry_after_ms: value["retry_after_ms"].as_u64(),
            }));
        }
        Ok(value)
    }

    /// The bot's user id (`GET /account/whoami`).
    pub fn whoami(&self) -> anyhow::Result<String> {
        let answer = retrying("whoami", || self.call("GET", "/account/whoami", None))?;
        Ok(answer["user_id"]
            .as_str()
            .context("whoami answered no user_id")?
            .to_string())
    }

    /// `/sync` after `since` (long-polling `timeout_ms`) with `filter` (JSON).
    pub fn sync(
        &self,
        since: Option<&str>,
        timeout_ms: u64,
        filter: &str,
    ) -> Result<Value, CallError> {
        let mut path = format!("/sync?timeout={timeout_ms}&filter={}", encode(filter));
        if let Some(since) = since {
            path.push_str(&format!("&since={}", encode(since)));
        }
        self.call("GET", &path, None)
    }

    /// Sends `content` as an `m.room.message` with the transaction id `txn`; the same `txn`
    /// again (this device, within the homeserver's memory of it) is the same event. Retried
    /// until it lands; answers the event id.
    pub fn send(&self, room: &str, txn: &str, content: &Value) -> anyhow::Result<String> {
        let path = format!(
            "/rooms/{}/send/m.room.message/{}",
            encode(room),
            encode(txn)
        );
        let answer = retrying("send", || self.call("PUT", &path, Some(content)))?;
        Ok(answer["event_id"]
            .as_str()
            .context("send answered no event_id")?
            .to_string())
    }

    /// One try of [`Homeserver::send`] (for an edit that may be dropped when rate limited).
    pub fn send_once(&self, room: &str, txn: &str, content: &Value) -> Result<Value, CallError> {
        let path = format!(
            "/rooms/{}/send/m.room.message/{}",
            encode(room),
            encode(txn)
        );
        self.call("PUT", &path, Some(content))
    }

    /// Joins a room by id or alias; answers its id.
    pub fn join(&self, room: &str) -> anyhow::Result<String> {
        let answer = retrying("join", || {
            self.call("POST", &format!("/join/{}", encode(room)), Some(&json!({})))
        })
        .with_context(|| format!("joining {room}"))?;
        Ok(answer["room_id"]
            .as_str()
            .context("join answered no room_id")?
            .to_string())
    }

    /// Creates a private room with the alias `#alias_local:server`, inviting `invite`; when the
    /// alias exists already (a creation a restart interrupted), answers that room.
    pub fn create_room(
        &self,
        alias_local: &str,
        server: &str,
        name: &str,
        topic: &str,
        invite: &[String],
    ) -> anyhow::Result<String> {
        let body = json!({
            "room_alias_name": alias_local,
            "name": name,
            "topic": topic,
            "preset": "private_chat",
            "invite": invite,
        });
        match retrying("createRoom", || {
            self.call("POST", "/createRoom", Some(&body))
        }) {
            Ok(answer) => Ok(answer["room_id"]
                .as_str()
                .context("createRoom answered no room_id")?
                .to_string()),
            Err(CallError::Matrix(e)) if e.errcode == "M_ROOM_IN_USE" => {
                let alias = format!("#{alias_local}:{server}");
                let answer = retrying("directory", || {
                    self.call("GET", &format!("/directory/room/{}", encode(&alias)), None)
                })
                .with_context(|| format!("resolving {alias}"))?;
                Ok(answer["room_id"]
                    .as_str()
                    .context("the directory answered no room_id")?
                    .to_string())
            }
            Err(e) => bail!("creating the room {alias_local}: {e}"),
        }
    }
}

/// Runs `call` until it succeeds or fails for good; transient failures wait (the homeserver's
/// `retry_after_ms`, else a backoff up to 10 s) and are logged.
pub fn retrying(
    what: &str,
    mut call: impl FnMut() -> Result<Value, CallError>,
) -> Result<Value, CallError> {
    let mut backoff = Duration::from_millis(200);
    loop {
        match call() {
            Ok(value) => return Ok(value),
            Err(error) if error.transient() => {
                let wait = match &error {
                    CallError::Matrix(MatrixError {
                        retry_after_ms: Some(ms),
                        ..
                    }) => Duration::from_millis(*ms),
                    _ => backoff,
                };
                tracing::warn!("matrix {what}: {error}; retrying in {wait:?}");
                std::thread::sleep(wait);
                backoff = (backoff * 2).min(Duration::from_secs(10));
            }
            Err(error) => return Err(error),
        }
    }
}
