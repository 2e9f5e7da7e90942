//! The CLI's side of the HTTP API: finding the daemon, carrying the token, rendering answers.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use serde::de::DeserializeOwned;

use crate::config::resolve_home;
use crate::daemon::{DAEMON_FILE, DaemonFile, TOKEN_FILE};
use crate::protocol::{ErrorBody, StateView};

pub struct Client {
    base: String,
    home: PathBuf,
    socket: PathBuf,
    agent: ureq::Agent,
}

/// A failed request: either the daemon answered with an error, or it could not be reached.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error(
        "cohost daemon is not running for {home} (no daemon answers on {socket}; start it with `cohost serve`)"
    )]
    NotRunning { home: String, socket: String },
    #[error("{status} {code}: {message}")]
    Api {
        status: u16,
        code: String,
        message: String,
    },
    #[error("request to the daemon failed: {0}")]
    Transport(String),
}

impl Client {
    /// A client of the daemon of `home` (default: `COHOST_HOME`, else the default home), over
    /// its Unix socket (see [`crate::local_socket`]): requests go only to a daemon of this user,
    /// whatever holds the TCP port.
    pub fn new(home: Option<PathBuf>) -> anyhow::Result<Self> {
        let home = resolve_home(home)?;
        let socket = home.join(crate::local_socket::SOCKET_FILE);
        let agent = crate::local_socket::agent(
            socket.clone(),
            ureq::Agent::config_builder()
                .http_status_as_error(false)
                .timeout_connect(Some(Duration::from_secs(3))),
        );
        Ok(Client {
            base: crate::local_socket::SOCKET_ORIGIN.to_string(),
            home,
            socket,
            agent,
        })
    }

    /// The origin of this client's request URLs (`http://localhost`: the socket decides where
    /// they go).
    pub fn base_url(&self) -> &str {
        &self.base
    }

    /// The agent that carries this client's requests to the daemon's socket.
    pub fn agent(&self) -> &ureq::Agent {
        &self.agent
    }

    /// The daemon's TCP address, as the daemon itself says (`/api/health` over the socket):
    /// what a browser opens.
    pub fn listen_addr(&self) -> anyhow::Result<String> {
        let health: serde_json::Value = self.get("/api/health")?;
        health["listen"]
            .as_str()
            .map(str::to_string)
            .context("the daemon's /api/health names no `listen` address")
    }

    /// The tmux socket the running daemon uses, from `daemon.json` (`None`: the default server).
    pub fn tmux_socket(&self) -> Option<PathBuf> {
        read_daemon_file(&self.home).and_then(|file| file.tmux_socket)
    }

    /// A `tmux ARGS` command on the running daemon's tmux server (`-S` its socket, if it has
    /// one), for the commands that move the user's client.
    pub fn tmux_command(&self) -> impl Fn(&[&str]) -> std::process::Command + use<> {
        let socket = self.tmux_socket();
        move |args: &[&str]| {
            let mut command = std::process::Command::new("tmux");
            if let Some(socket) = &socket {
                command.arg("-S").arg(socket);
            }
            command.args(args);
            command
        }
    }

    pub fn token(&self) -> anyhow::Result<String> {
        let path = self.home.join(TOKEN_FILE);
        let token = std::fs::read_to_string(&path).with_context(|| {
            format!(
                "cannot read the token at {} (has `cohost serve` run with this COHOST_HOME?)",
                path.display()
            )
        })?;
        Ok(token.trim().to_string())
    }

    /// What a transport failure means to the user.
    pub fn map_transport(&self, error: ureq::Error) -> ClientError {
        if crate::local_socket::is_not_running(&error) {
            return ClientError::NotRunning {
                home: self.home.display().to_string(),
                socket: self.socket.display().to_string(),
            };
        }
        ClientError::Transport(error.to_string())
    }

    fn finish(
        &self,
        response: Result<ureq::http::Response<ureq::Body>, ureq::Error>,
    ) -> Result<String, ClientError> {
        let mut response = response.map_err(|e| self.map_transport(e))?;
        let status = response.status().as_u16();
        let body = response
            .body_mut()
            .with_config()
            .limit(64 * 1024 * 1024)
            .read_to_string()
            .map_err(|e| ClientError::Transport(e.to_string()))?;
        if status >= 400 {
            return Err(match serde_json::from_str::<ErrorBody>(&body) {
                Ok(error) => ClientError::Api {
                    status,
                    code: error.error.code,
                    message: error.error.message,
                },
                Err(_) => ClientError::Api {
                    status,
                    code: "unknown".into(),
                    message: body,
                },
            });
        }
        Ok(body)
    }

    pub fn get<T: DeserializeOwned>(&self, path: &str) -> anyhow::Result<T> {
        self.request(ureq::http::Method::GET, path, None)
    }

    pub fn put<T: DeserializeOwned>(
        &self,
        path: &str,
        body: &serde_json::Value,
    ) -> anyhow::Result<T> {
        self.request(ureq::http::Method::PUT, path, Some(body))
    }

    pub fn delete<T: DeserializeOwned>(&self, path: &str) -> anyhow::Result<T> {
        self.request(ureq::http::Method::DELETE, path, None)
    }

    pub fn post<T: DeserializeOwned>(
        &self,
        path: &str,
        body: &serde_json::Value,
    ) -> anyhow::Result<T> {
        self.request(ureq::http::Method::POST, path, Some(body))
    }

    /// One request with the token (and a JSON body, if any); the answer parsed as `T`.
    fn request<T: DeserializeOwned>(
        &self,
        method: ureq::http::Method,
        path: &str,
        body: Option<&serde_json::Value>,
    ) -> anyhow::Result<T> {
        let token = self.token()?;
        let request = ureq::http::Request::builder()
            .method(method.clone())
            .uri(format!("{}{path}", self.base))
            .header("Authorization", format!("Bearer {token}"));
        let response = match body {
            Some(body) => self.agent.run(
                request
                    .header("Content-Type", "application/json")
                    .body(body.to_string())?,
            ),
            None => self.agent.run(request.body(())?),
        };
        let body = self.finish(response)?;
        serde_json::from_str(&body)
            .with_context(|| format!("unexpected answer from {method} {path}"))
    }

    /// Prints every event after `after`; with `follow`, streams forever and reconnects with
    /// `Last-Event-ID` after a dropped connection.
    pub fn print_events(
        &self,
        after: u64,
        follow: bool,
        out: &mut impl Write,
    ) -> anyhow::Result<()> {
        self.for_each_event("/api/events", after, follow, |line| {
            writeln!(out, "{line}")?;
            out.flush()
        })
    }

    /// Calls `f` with each event's JSON line from `base` (`/api/events` or a session's), after
    /// `after`; with `follow`, streams and reconnects with `Last-Event-ID` forever.
    pub fn for_each_event(
        &self,
        base: &str,
        after: u64,
        follow: bool,
        mut f: impl FnMut(&str) -> std::io::Result<()>,
    ) -> anyhow::Result<()> {
        let mut cursor = after;
        if !follow {
            loop {
                let page: serde_json::Value =
                    self.get(&format!("{base}?after={cursor}&limit=1000"))?;
                let events = page["events"].as_array().cloned().unwrap_or_default();
                for gap in page["gaps"].as_array().into_iter().flatten() {
                    report_gap(gap);
                }
                for event in &events {
                    f(&event.to_string())?;
                }
                let next = page["next"].as_u64().unwrap_or(cursor);
                let head = page["head"].as_u64().unwrap_or(cursor);
                if next >= head || next == cursor {
                    return Ok(());
                }
                cursor = next;
            }
        }
        let token = self.token()?;
        let mut backoff = Duration::from_millis(200);
        loop {
            let response = self
                .agent
                .get(format!("{}{base}/stream", self.base))
                .header("Authorization", format!("Bearer {token}"))
                .header("Last-Event-ID", cursor.to_string())
                .config()
                .timeout_global(None)
                .build()
                .call();
            let mut response = match response {
                Ok(response) if response.status().is_success() => response,
                Ok(response) => {
                    let status = response.status().as_u16();
                    self.finish(Ok(response))?;
                    bail!("the event stream answered {status}");
                }
                Err(error) => {
                    let error = self.map_transport(error);
                    eprintln!("cohost: {error}; retrying in {backoff:?}");
                    std::thread::sleep(backoff);
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                    continue;
                }
            };
            backoff = Duration::from_millis(200);
            let reader = BufReader::new(response.body_mut().as_reader());
            // The `event:` name of the message being read (none for events).
            let mut message_name = String::new();
            for line in reader.lines() {
                let Ok(line) = line else { break };
                if line.is_empty() {
                    message_name.clear();
                } else if let Some(name) = line.strip_prefix("event:") {
                    message_name = name.trim().to_string();
                } else if message_name == "gap" {
                    if let Some(data) = line.strip_prefix("data:")
                        && let Ok(gap) = serde_json::from_str(data.trim())
                    {
                        report_gap(&gap);
                    }
                } else if let Some(id) = line
                    .strip_prefix("id: ")
                    .or_else(|| line.strip_prefix("id:"))
                {
                    if let Ok(id) = id.trim().parse() {
                        cursor = id;
                    }
                } else if let Some(data) = line
                    .strip_prefix("data: ")
                    .or_else(|| line.strip_prefix("data:"))
                {
                    f(data)?;
                }
            }
        }
    }

    pub fn state(&self) -> anyhow::Result<StateView> {
        self.get("/api/state")
    }

    /// `GET /api/state/{session}/agents/{key}/explain` for `agent`: an instance key, or an
    /// agent name (or key prefix) naming one instance of the session.
    pub fn explain(
        &self,
        session: &str,
        agent: &str,
    ) -> anyhow::Result<crate::protocol::ExplainView> {
        let (session, key) = self.instance_key(session, agent)?;
        self.get(&format!(
            "/api/state/{}/agents/{}/explain",
            encode_segment(&session),
            encode_segment(&key)
        ))
    }

    /// `POST /api/state/{session}/agents/{key}/adopt` for `agent` (as [`Client::explain`]
    /// names it).
    pub fn adopt(
        &self,
        session: &str,
        agent: &str,
    ) -> anyhow::Result<crate::protocol::SessionReply> {
        let (session, key) = self.instance_key(session, agent)?;
        self.post(
            &format!(
                "/api/state/{}/agents/{}/adopt",
                encode_segment(&session),
                encode_segment(&key)
            ),
            &serde_json::json!({}),
        )
    }

    /// The tmux session (`unplaced` read as `:unplaced`) and the instance key `agent` names:
    /// a key, or an agent name (or key prefix) naming one instance of the session.
    fn instance_key(&self, session: &str, agent: &str) -> anyhow::Result<(String, String)> {
        let state = self.state()?;
        let agents: Vec<&crate::protocol::InstanceView> =
            if session == crate::protocol::UNPLACED_SESSION || session == "unplaced" {
                state.unplaced.iter().collect()
            } else {
                state
                    .sessions
                    .iter()
                    .find(|s| s.name == session)
                    .map(|s| s.agents.iter().collect())
                    .unwrap_or_default()
            };
        let session = if session == "unplaced" {
            crate::protocol::UNPLACED_SESSION
        } else {
            session
        };
        let key = match agents.iter().find(|a| a.key == agent) {
            Some(found) => found.key.clone(),
            None => {
                let matching: Vec<&&crate::protocol::InstanceView> = agents
                    .iter()
                    .filter(|a| a.agent == agent || a.key.starts_with(agent))
                    .collect();
                match matching.as_slice() {
                    [one] => one.key.clone(),
                    [] => agent.to_string(),
                    many => anyhow::bail!(
                        "`{agent}` names {} instances of session `{session}`: {}",
                        many.len(),
                        many.iter()
                            .map(|a| a.key.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                }
            }
        };
        Ok((session.to_string(), key))
    }
}

/// Percent-encodes one URL path segment.
fn encode_segment(text: &str) -> String {
    let mut out = String::new();
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// Tells the user, on stderr, that the daemon skipped seqs missing from its log (a damaged log;
/// see the `log.damaged` event): stdout keeps only events.
fn report_gap(gap: &serde_json::Value) {
    let (Some(from), Some(to)) = (gap["from"].as_u64(), gap["to"].as_u64()) else {
        return;
    };
    eprintln!("cohost: events {from}..={to} are missing from the daemon's log (skipped)");
}

fn read_daemon_file(home: &Path) -> Option<DaemonFile> {
    let bytes = std::fs::read(home.join(DAEMON_FILE)).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// Renders the tracker as a table.
pub fn render_state(state: &StateView, out: &mut impl Write) -> std::io::Result<()> {
    if !state.tmux_running {
        writeln!(out, "no tmux server is running on the configured socket")?;
    }
    // At a hub: each other machine's link first; its sessions follow, named `machine/name`.
    if !state.machines.is_empty() {
        writeln!(
            out,
            "{:<20} {:<6} {:<32} LAG",
            "MACHINE", "LINK", "LAST HEARD"
        )?;
        for machine in &state.machines {
            writeln!(
                out,
                "{:<20} {:<6} {:<32} {}",
                machine.machine,
                match machine.link {
                    crate::protocol::MachineLinkState::Up => "up",
                    crate::protocol::MachineLinkState::Down => "down",
                },
                heard(machine.last_heard),
                machine.lag
            )?;
        }
        writeln!(out)?;
    }
    if state.sessions.is_empty() && state.unplaced.is_empty() {
        return writeln!(out, "no tmux sessions");
    }
    writeln!(
        out,
        "{:<20} {:<13} {:<3} {:<24} {:<13} {:<20} DETAIL",
        "SESSION", "STATUS", "NEW", "AGENT", "AGENT STATUS", "SOURCE"
    )?;
    for session in &state.sessions {
        let status = session.status.map(|s| s.as_str()).unwrap_or("-");
        let unseen = if session.unseen { "*" } else { "" };
        let focused = state.focused_session.as_deref() == Some(session.name.as_str());
        let name = if session.machine_link == Some(crate::protocol::MachineLinkState::Down) {
            // Its machine is down: what follows is its last known state.
            format!("{} (down)", session.name)
        } else if focused {
            format!("{} (focused)", session.name)
        } else {
            session.name.clone()
        };
        if session.agents.is_empty() {
            writeln!(out, "{name:<20} {status:<13} {unseen:<3}")?;
        }
        for (i, agent) in session.agents.iter().enumerate() {
            let first = if i == 0 { name.as_str() } else { "" };
            let (session_status, session_unseen) = if i == 0 { (status, unseen) } else { ("", "") };
            render_agent(out, first, session_status, session_unseen, agent)?;
        }
        if let Some(meta) = &session.metadata.status {
            writeln!(out, "{:<20} status: {}", "", meta.text)?;
        }
        if let Some(progress) = &session.metadata.progress {
            let label = progress.label.as_deref().unwrap_or("progress");
            match (progress.current, progress.total, progress.percent) {
                (Some(c), Some(t), _) => writeln!(out, "{:<20} {label}: {c}/{t}", "")?,
                (_, _, Some(p)) => writeln!(out, "{:<20} {label}: {p}%", "")?,
                _ => writeln!(out, "{:<20} {label}", "")?,
            }
        }
    }
    // Agents a watcher found outside every tmux session.
    for (i, agent) in state.unplaced.iter().enumerate() {
        let first = if i == 0 { "(unplaced)" } else { "" };
        render_agent(out, first, "", "", agent)?;
    }
    Ok(())
}

/// When a machine was last heard from, for people: `12s ago (18:40:02 UTC)`, or `never`.
pub fn heard(last_heard: Option<u64>) -> String {
    let Some(at) = last_heard else {
        return "never heard from".to_string();
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let secs = now.saturating_sub(at) / 1000;
    let ago = match secs {
        0..60 => format!("{secs}s"),
        60..3600 => format!("{}m", secs / 60),
        3600..86400 => format!("{}h", secs / 3600),
        _ => format!("{}d", secs / 86400),
    };
    let of_day = (at / 1000) % 86400;
    format!(
        "last heard {ago} ago ({:02}:{:02}:{:02} UTC)",
        of_day / 3600,
        of_day / 60 % 60,
        of_day % 60
    )
}

fn render_agent(
    out: &mut impl Write,
    first: &str,
    session_status: &str,
    session_unseen: &str,
    agent: &crate::protocol::InstanceView,
) -> std::io::Result<()> {
    let detail = agent
        .thread_name
        .as_deref()
        .or(agent.last_user_prompt.as_deref())
        .unwrap_or("");
    let detail: String = detail.chars().take(60).collect();
    let mark = if agent.unseen { "*" } else { "" };
    writeln!(
        out,
        "{first:<20} {session_status:<13} {session_unseen:<3} {:<24} {:<13} {:<20} {detail}",
        agent.key,
        format!("{}{mark}", agent.status),
        agent.source
    )
}

/// Renders `cohost explain`: the instance, then the evidence behind its status.
pub fn render_explain(
    view: &crate::protocol::ExplainView,
    out: &mut impl Write,
) -> std::io::Result<()> {
    writeln!(out, "{} in session {}", view.key, view.session)?;
    writeln!(out, "  status:   {}", view.status.as_str())?;
    writeln!(out, "  source:   {}", view.source)?;
    if let Some(liveness) = view.liveness {
        writeln!(
            out,
            "  liveness: {}",
            serde_json::to_value(liveness)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default()
        )?;
    }
    let Some(watched) = &view.watcher else {
        return writeln!(
            out,
            "  no watcher follows it: its status is what its reporter ({}) last sent",
            view.source
        );
    };
    writeln!(out, "  process:  {}", watched.liveness)?;
    if let Some(cwd) = &watched.cwd {
        writeln!(out, "  cwd:      {cwd}")?;
    }
    writeln!(
        out,
        "  placed:   {}{}",
        watched.placement,
        watched
            .placed_by
            .as_deref()
            .map(|by| format!(" ({by})"))
            .unwrap_or_default()
    )?;
    for file in &watched.files {
        writeln!(out, "  file:     {file}")?;
    }
    writeln!(out, "  evidence (oldest first):")?;
    for evidence in &watched.evidence {
        let at = evidence
            .locator
            .as_ref()
            .map(|locator| match locator["kind"].as_str() {
                Some("offset") => format!("@{}", locator["offset"]),
                Some("row") => format!(
                    "{} row {}",
                    locator["table"].as_str().unwrap_or(""),
                    locator["rowid"]
                ),
                _ => "(whole file)".to_string(),
            })
            .unwrap_or_default();
        let status = evidence.status.map(|s| s.as_str()).unwrap_or("-");
        writeln!(
            out,
            "    {} {:<13} {} {} — {}",
            evidence.at, status, evidence.file, at, evidence.rule
        )?;
    }
    Ok(())
}

/// Renders one session event as transcript lines; `None` for events a reader does not need.
pub fn render_event(line: &str) -> Option<String> {
    let event: serde_json::Value = serde_json::from_str(line).ok()?;
    let data = &event["data"];
    let text = |v: &serde_json::Value| v.as_str().unwrap_or("").to_string();
    let short = |v: &serde_json::Value| {
        let id = v.as_str().unwrap_or("");
        let skip = id.chars().count().saturating_sub(8);
        id.chars().skip(skip).collect::<String>()
    };
    Some(match event["type"].as_str()? {
        "session.created" => format!(
            "== session created ({} in {})",
            text(&data["runtime"]),
            text(&data["cwd"])
        ),
        "session.bound" => format!("== thread {}", text(&data["threadId"])),
        "session.status" => format!("== {}: {}", text(&data["state"]), text(&data["message"])),
        "session.closed" => format!("== session closed: {}", text(&data["reason"])),
        "turn.started" => format!(
            "-- turn …{} started ({})",
            short(&data["turnId"]),
            text(&data["source"])
        ),
        "turn.completed" => {
            let error = data["error"]
                .as_str()
                .map(|e| format!(": {e}"))
                .unwrap_or_default();
            format!(
                "-- turn …{} {}{error}",
                short(&data["turnId"]),
                text(&data["status"])
            )
        }
        "item.started" => {
            let item = &data["item"];
            match item["type"].as_str()? {
                "command" => format!("$ {} …", text(&item["command"])),
                _ => return None,
            }
        }
        "item.completed" => {
            let item = &data["item"];
            match item["type"].as_str()? {
                "userMessage" => format!("> {}", text(&item["text"])),
                "agentMessage" => text(&item["text"]),
                "reasoning" => format!(
                    "(thinking) {}",
                    item["summary"]
                        .as_array()
                        .map(|parts| parts.iter().map(text).collect::<Vec<_>>().join(" "))
                        .unwrap_or_default()
                ),
                "command" => {
                    let mut out = format!("$ {}", text(&item["command"]));
                    if let Some(output) = item["output"].as_str().filter(|o| !o.is_empty()) {
                        out.push('\n');
                        out.push_str(output.trim_end());
                    }
                    match item["exitCode"].as_i64() {
                        Some(code) => {
                            out.push_str(&format!("\n[exit {code}, {}]", text(&item["status"])))
                        }
                        None => out.push_str(&format!("\n[{}]", text(&item["status"]))),
                    }
                    out
                }
                "fileChange" => item["changes"]
                    .as_array()
                    .map(|changes| {
                        changes
                            .iter()
                            .map(|c| format!("~ {} ({})", text(&c["path"]), text(&c["kind"])))
                            .collect::<Vec<_>>()
                            .join("\n")
                    })
                    .unwrap_or_default(),
                "tool" => format!("[tool {}: {}]", text(&item["name"]), text(&item["status"])),
                other => format!("[{other}]"),
            }
        }
        "approval.requested" => format!(
            "? approval {} ({}{}) — answer with `cohost approve {} {} accept|decline`",
            text(&data["approvalId"]),
            text(&data["kind"]),
            data["command"]
                .as_str()
                .map(|c| format!(": {c}"))
                .unwrap_or_default(),
            event["session"].as_str().unwrap_or(""),
            text(&data["approvalId"]),
        ),
        "approval.resolved" => format!(
            "! approval {} resolved{}",
            text(&data["approvalId"]),
            data["decision"]
                .as_str()
                .map(|d| format!(": {d}"))
                .unwrap_or_default()
        ),
        "error" => format!("! error: {}", text(&data["message"])),
        "goal.updated" => format!(
            "== goal: {} ({})",
            text(&data["goal"]["objective"]),
            text(&data["goal"]["status"])
        ),
        "goal.cleared" => "== goal cleared".to_string(),
        _ => return None,
    })
}
