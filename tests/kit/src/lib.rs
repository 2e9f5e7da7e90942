//! cohost's test kit, shared by the integration tests (`tests/all.rs`) and the benches
//! (`benches/`): a private tmux server ([`tmux`]), a spawned `cohost serve` with its HTTP/SSE
//! clients ([`daemon`], [`http`]), the scripted mock model servers ([`mock_server`] with
//! [`mock_responses`] for codex and [`mock_messages`] for Claude), the offline peer homes
//! ([`codex_home`], [`claude_env`]), Claude TUIs started by hand in panes ([`claude_panes`]),
//! the hosted-session routes as the fixtures drive them ([`sessions`]), the codex and claude
//! fixtures ([`codex_host`], [`claude_host`]), the fixture of the runtimes driven through the
//! peer's API, OpenCode and Pi ([`hosted`]), with the scenarios both pass alike
//! ([`hosted_cases`]), a co-driving pane's screen and runner journal ([`panes`]), a real Matrix
//! homeserver ([`synapse`]), a real `nats-server` with JetStream ([`nats`]), a headless
//! Chromium for the web page's tests ([`browser`]), and what the benches share ([`bench`]).
//!
//! Only the integration tests and benches of the `cohost` package get
//! `env!("CARGO_BIN_EXE_cohost")`, so the kit never names the binary itself: a caller implements
//! [`Binaries`] once (`tests/support/mod.rs` does, with an alias per daemon-spawning type), and the
//! benches pass the path to [`bench::serve_command`].
#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod bench;
pub mod browser;
pub mod certs;
pub mod claude_env;
pub mod claude_host;
pub mod claude_panes;
pub mod codex_home;
pub mod codex_host;
pub mod daemon;
pub mod hosted;
pub mod hosted_cases;
pub mod http;
pub mod mock_messages;
pub mod mock_responses;
pub mod mock_server;
pub mod nats;
pub mod panes;
pub mod sessions;
pub mod synapse;
pub mod tmux;
pub mod web;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::thread;
use std::time::{Duration, Instant};

pub use daemon::{CLI_TIMEOUT, SCRUBBED_ENV, TestDaemon, segment_lines};
pub use http::{SseClient, read_answer};
pub use serde_json::{Value, json};
pub use tmux::TmuxServer;

/// The executables under test, named by the caller: in an integration test or a bench of the
/// `cohost` package, `const COHOST: &str = env!("CARGO_BIN_EXE_cohost");`. `cohost-runner` and
/// `cohost-hook` need no entry: the daemon finds them beside its own executable.
pub trait Binaries: 'static {
    /// The `cohost` executable.
    const COHOST: &'static str;
}

/// Polls `f` every 20 ms until it returns `Some`, panicking after `timeout`.
pub fn wait_until<T>(what: &str, timeout: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = f() {
            return value;
        }
        if Instant::now() >= deadline {
            panic!("timed out after {timeout:?} waiting for {what}");
        }
        thread::sleep(Duration::from_millis(20));
    }
}

/// Runs a command to completion with a deadline, capturing stdout and stderr.
pub fn run_with_timeout(command: &mut Command, timeout: Duration) -> Output {
    run_with_input(command, None, timeout)
}

/// [`run_with_timeout`] with `input` written to the command's stdin, which is then closed (a
/// piped one-shot request: `echo '{…}' | cohost mcp`). `None`: stdin is `/dev/null`.
pub fn run_with_input(command: &mut Command, input: Option<&str>, timeout: Duration) -> Output {
    let mut child = command
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("failed to spawn {command:?}: {e}"));
    if let (Some(input), Some(mut stdin)) = (input, child.stdin.take()) {
        let input = input.to_string();
        thread::spawn(move || {
            let _ = std::io::Write::write_all(&mut stdin, input.as_bytes());
        });
    }
    let mut stdout = child.stdout.take().expect("stdout piped");
    let mut stderr = child.stderr.take().expect("stderr piped");
    let out_thread = thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = stdout.read_to_end(&mut buf);
        buf
    });
    let err_thread = thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = stderr.read_to_end(&mut buf);
        buf
    });
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(10)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("{command:?} did not finish within {timeout:?}");
            }
            Err(e) => panic!("waiting for {command:?}: {e}"),
        }
    };
    Output {
        status,
        stdout: out_thread.join().unwrap_or_default(),
        stderr: err_thread.join().unwrap_or_default(),
    }
}

/// A fresh temporary directory under /tmp (short paths keep tmux socket paths under the limit).
pub fn temp_dir(prefix: &str) -> tempfile::TempDir {
    let base = if Path::new("/tmp").is_dir() {
        PathBuf::from("/tmp")
    } else {
        std::env::temp_dir()
    };
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir_in(base)
        .expect("cannot create a temporary directory")
}

/// Creates `dir` (and parents) and returns its canonical path as a string.
pub fn make_dir(dir: &Path) -> String {
    std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("mkdir {}: {e}", dir.display()));
    dir.canonicalize()
        .expect("canonicalize")
        .to_string_lossy()
        .into_owned()
}

/// Removes ANSI colour escapes, so log excerpts stay readable in panic messages.
pub fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' && chars.peek() == Some(&'[') {
            chars.next();
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// An agent-event body addressed by tmux session name.
pub fn report(session: &str, agent: &str, status: &str) -> Value {
    json!({ "agent": agent, "status": status, "tmuxSession": session })
}

/// A tmux server with one session per name, each in its own directory `<tmp>/p/<name>`.
/// Returns the server and the sessions' canonical directories, in order.
pub fn tmux_with_sessions(names: &[&str]) -> (TmuxServer, Vec<String>) {
    let tmux = TmuxServer::new();
    let mut dirs = Vec::new();
    for name in names {
        let dir = make_dir(&tmux.dir().join("p").join(name));
        tmux.new_session(name, Path::new(&dir));
        dirs.push(dir);
    }
    (tmux, dirs)
}

/// The seqs of a list of events.
pub fn seqs(events: &[Value]) -> Vec<u64> {
    events
        .iter()
        .map(|e| e["seq"].as_u64().expect("seq"))
        .collect()
}

/// Asserts that `seqs` is exactly `first..=last`.
#[track_caller]
pub fn assert_contiguous(seqs: &[u64], first: u64, last: u64) {
    let expected: Vec<u64> = (first..=last).collect();
    if seqs != expected.as_slice() {
        let mut problems = Vec::new();
        for pair in seqs.windows(2) {
            if pair[1] != pair[0] + 1 {
                problems.push(format!("{} -> {}", pair[0], pair[1]));
            }
        }
        panic!(
            "expected seqs {first}..={last} ({} events), got {} events from {:?} to {:?}; breaks: {:?}",
            expected.len(),
            seqs.len(),
            seqs.first(),
            seqs.last(),
            &problems[..problems.len().min(20)]
        );
    }
}
