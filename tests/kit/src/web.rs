//! A long hosted session written straight into a stopped daemon's log: what months of use leave
//! behind, for the web page's tests and its bench. The caller encodes the lines with the daemon's
//! own `cohost::core::log_line::encode` (the kit cannot name the `cohost` crate) and appends them.

use std::path::{Path, PathBuf};

/// The lines of a closed codex session, numbered after the last event of the home's log.
pub struct LongSession {
    pub session: String,
    /// One serialized event each (`{"seq":…}`, without the log's checksum).
    pub lines: Vec<String>,
    pub events: usize,
    segment: PathBuf,
}

/// A closed codex session of `turns` turns, five events each (start, prompt, command, Markdown
/// answer `Answer **n**`, end), ready to append to `home`'s newest log segment.
pub fn long_session(home: &Path, turns: usize, session: &str) -> LongSession {
    let (segment, mut seq) = newest_segment(home);
    let mut session_seq = 0;
    let mut lines = Vec::new();
    let mut push = |kind: &str, data: serde_json::Value| {
        seq += 1;
        session_seq += 1;
        // The log's lines start with `{"seq":` (json! would sort the keys).
        lines.push(format!(
            "{{\"seq\":{seq},\"ts\":{},\"session\":\"{session}\",\"sessionSeq\":{session_seq},\"type\":\"{kind}\",\"data\":{data}}}",
            1_795_000_000_000u64 + seq
        ));
    };
    use serde_json::json;
    push(
        "session.created",
        json!({ "runtime": "codex", "cwd": "/tmp", "approvalPolicy": "never" }),
    );
    for n in 0..turns {
        let turn = format!("turn-{n}");
        push("turn.started", json!({ "turnId": turn, "source": "api" }));
        push(
            "item.completed",
            json!({ "turnId": turn, "item": { "type": "userMessage", "id": format!("{turn}:u"), "text": format!("Question {n}") } }),
        );
        push(
            "item.completed",
            json!({ "turnId": turn, "item": { "type": "command", "id": format!("{turn}:c"), "command": "cargo test", "status": "completed", "exitCode": 0, "output": "test result: ok" } }),
        );
        push(
            "item.completed",
            json!({ "turnId": turn, "item": { "type": "agentMessage", "id": format!("{turn}:a"), "text": format!("Answer **{n}** with `code`") } }),
        );
        push(
            "turn.completed",
            json!({ "turnId": turn, "status": "completed", "durationMs": 1000 }),
        );
    }
    push("session.closed", json!({ "reason": "closed by the test" }));
    LongSession {
        session: session.to_string(),
        events: lines.len(),
        lines,
        segment,
    }
}

/// The newest segment of `home`'s log and the highest seq in it.
fn newest_segment(home: &Path) -> (PathBuf, u64) {
    let dir = home.join("log");
    let mut segments: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    segments.sort();
    let segment = segments.pop().expect("a log segment");
    let seq = std::fs::read_to_string(&segment)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v["seq"].as_u64())
        .max()
        .unwrap_or(0);
    (segment, seq)
}

/// `n` `meta.log` events spread over the tmux sessions `sessions`, numbered after the last event
/// of the home's log: other sessions' traffic to put before or between a session's events.
pub fn others(home: &Path, n: usize, sessions: &[&str]) -> LongSession {
    let (segment, mut seq) = newest_segment(home);
    let lines = (0..n)
        .map(|i| {
            seq += 1;
            format!(
                "{{\"seq\":{seq},\"ts\":{},\"session\":\"{}\",\"type\":\"meta.log\",\"data\":{{\"message\":\"line {i}\"}}}}",
                1_795_000_000_000u64 + seq,
                sessions[i % sessions.len()]
            )
        })
        .collect::<Vec<_>>();
    LongSession {
        session: String::new(),
        events: lines.len(),
        lines,
        segment,
    }
}

impl LongSession {
    /// Appends the encoded lines to the segment they were numbered for (the daemon stopped).
    pub fn append(&self, encoded: &[u8]) {
        use std::io::Write;
        std::fs::OpenOptions::new()
            .append(true)
            .open(&self.segment)
            .and_then(|mut f| f.write_all(encoded))
            .unwrap_or_else(|e| panic!("append to {}: {e}", self.segment.display()));
    }
}
