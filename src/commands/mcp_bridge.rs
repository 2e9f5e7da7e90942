//! `cohost mcp`: a stdio MCP server for clients that spawn one. It is a byte bridge: each
//! JSON-RPC line read on stdin is POSTed to the running daemon's `/mcp` (with the token from
//! `$COHOST_HOME/token`), and each JSON-RPC message of the answer (a JSON body, or the events
//! of an SSE body) is written to stdout as one line. Stdout carries protocol only; diagnostics
//! go to stderr.
//!
//! Requests run concurrently (one thread each), so a blocking `events` call does not hold up
//! the others. When the daemon cannot be reached or refuses the request, the client gets a
//! JSON-RPC error (code `-32000`) for that request id instead of silence.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use crate::client::Client;

/// The JSON-RPC error code for "the daemon could not answer".
pub const DAEMON_ERROR: i64 = -32000;
/// The largest answer body the bridge relays.
const MAX_BODY: u64 = 16 * 1024 * 1024;

struct Bridge {
    home: Option<PathBuf>,
    out: Mutex<std::io::Stdout>,
    /// The protocol version the daemon chose at `initialize`, sent on later requests.
    protocol_version: Mutex<Option<String>>,
}

/// Runs the bridge until stdin closes and every request read before has its answer (a piped
/// one-shot `echo '{…}' | cohost mcp` gets its answer too).
pub fn run(home: Option<PathBuf>) -> anyhow::Result<()> {
    let bridge = Arc::new(Bridge {
        home,
        out: Mutex::new(std::io::stdout()),
        protocol_version: Mutex::new(None),
    });
    let stdin = std::io::stdin();
    let mut in_flight: Vec<std::thread::JoinHandle<()>> = Vec::new();
    let mut read = || -> anyhow::Result<()> {
        for line in stdin.lock().lines() {
            let line = line?;
            if line.trim().is_empty() {
                continue;
            }
            in_flight.retain(|request| !request.is_finished());
            let bridge = Arc::clone(&bridge);
            in_flight.push(std::thread::spawn(move || bridge.forward(&line)));
        }
        Ok(())
    };
    let read = read();
    for request in in_flight {
        let _ = request.join();
    }
    read
}

impl Bridge {
    fn forward(&self, line: &str) {
        let message: Option<Value> = serde_json::from_str(line).ok();
        let id = message.as_ref().and_then(|m| m.get("id")).cloned();
        let is_initialize = message
            .as_ref()
            .and_then(|m| m.get("method"))
            .and_then(Value::as_str)
            == Some("initialize");
        if let Err(error) = self.post(line, is_initialize) {
            eprintln!("cohost mcp: {error}");
            if let Some(id) = id {
                self.write(&json!({
                    "jsonrpc": "2.0",
                    "id": id,
                    "error": { "code": DAEMON_ERROR, "message": error },
                }));
            }
        }
    }

    fn post(&self, line: &str, is_initialize: bool) -> Result<(), String> {
        // The home's socket each time: a daemon restarted since is found again, and the token
        // goes only to a daemon of this user (see `crate::local_socket`).
        let client = Client::new(self.home.clone()).map_err(|e| format!("{e:#}"))?;
        let token = client.token().map_err(|e| format!("{e:#}"))?;
        let mut request = client
            .agent()
            .post(format!("{}/mcp", client.base_url()))
            .header("Authorization", format!("Bearer {token}"))
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream");
        let version = self
            .protocol_version
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        if let Some(version) = version {
            request = request.header("MCP-Protocol-Version", version);
        }
        let mut response = request
            .send(line)
            .map_err(|error| client.map_transport(error).to_string())?;
        let status = response.status().as_u16();
        let content_type = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_ascii_lowercase();
        let reader = response.body_mut().with_config().limit(MAX_BODY).reader();
        if content_type.starts_with("text/event-stream") {
            let mut data = String::new();
            for line in BufReader::new(reader).lines() {
                let line = line.map_err(|e| format!("reading the daemon's answer: {e}"))?;
                if line.is_empty() {
                    self.relay(&data, is_initialize);
                    data.clear();
                } else if let Some(rest) = line.strip_prefix("data:") {
                    if !data.is_empty() {
                        data.push('\n');
                    }
                    data.push_str(rest.strip_prefix(' ').unwrap_or(rest));
                }
            }
            self.relay(&data, is_initialize);
            return Ok(());
        }
        let mut body = String::new();
        BufReader::new(reader)
            .read_to_string(&mut body)
            .map_err(|e| format!("reading the daemon's answer: {e}"))?;
        if (200..300).contains(&status) {
            self.relay(&body, is_initialize);
            return Ok(());
        }
        // A JSON-RPC error body is relayed as it is; anything else becomes an error.
        if serde_json::from_str::<Value>(&body)
            .is_ok_and(|v| v.get("jsonrpc").is_some() && v.get("error").is_some())
        {
            self.relay(&body, is_initialize);
            return Ok(());
        }
        Err(format!(
            "the daemon answered HTTP {status}: {}",
            body.trim()
        ))
    }

    /// Writes one JSON-RPC message (if `data` is one) to stdout as a single line.
    fn relay(&self, data: &str, is_initialize: bool) {
        if data.trim().is_empty() {
            return;
        }
        let Ok(message) = serde_json::from_str::<Value>(data) else {
            eprintln!("cohost mcp: dropped a non-JSON message from the daemon");
            return;
        };
        if is_initialize
            && let Some(version) = message
                .get("result")
                .and_then(|r| r.get("protocolVersion"))
                .and_then(Value::as_str)
        {
            *self
                .protocol_version
                .lock()
                .unwrap_or_else(|e| e.into_inner()) = Some(version.to_string());
        }
        self.write(&message);
    }

    fn write(&self, message: &Value) {
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        let written = writeln!(out, "{message}").and_then(|()| out.flush());
        if let Err(error) = written {
            eprintln!("cohost mcp: cannot write to stdout: {error}");
        }
    }
}
