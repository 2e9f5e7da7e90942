//! Adopting a Claude a person started by hand, for `ClaudeHost`: the checks before it (the pane,
//! the process tree, Claude's own session file; nothing is typed while checking), the session
//! that then drives it in its own pane (`session.adopted`), the checks on every tick of its
//! session task that end it when the pane goes, the agent exits or the pane runs something else,
//! and `disown`, which gives it back.
//!
//! An adopted session is followed by the same session task, normalizer and typing machine as a
//! hosted one (`follow.rs`, `prompt.rs`, `interrupt.rs`): its transcript is the one Claude's
//! session file names, its session file is that Claude's `sessions/<pid>.json`, and no runner
//! runs in its pane. Until a hook reaches it, the transcript leads (see the normalizer): its
//! prompt lines open turns and confirm prompts, `turn_duration` ends them, and the session
//! file's `idle` ends a turn the transcript says nothing more of. Its `hooks.jsonl` is tailed
//! like a hosted session's (hook lines written there lead instead), and a hook's permission
//! request reaches it through the host's relay (`permission_request`) once the one driver lookup
//! — `Sessions::driving(<Claude session id>)`: the session bound to it, whose `session.adopted`
//! says its hooks are not its own — names it.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{ClaudeHost, Command, Inner, Live, lock};
use crate::core::now_ms;
use crate::formats::claude::{HookLine, SessionFile, TranscriptRecord, project_dir_name};
use crate::process;
use crate::protocol::{
    AgentStatus, EventKind, HostedSessionView, InstanceRef, Runtime, SessionAdopted, SessionClosed,
};
use crate::runtime::claude::normalize::{Normalizer, Output};
use crate::runtime::common::adopted;
pub(super) use crate::runtime::common::adopted::AdoptedEnd;
use crate::runtime::common::new_session_id;
use crate::runtime::{AdoptRefusal, AdoptRequest, HostError};
use crate::tail::{self, Checkpoint};

/// The tracker's name for the agents this host adopts.
pub(super) const AGENT: &str = "claude-code";
/// How much of a transcript's end is read to find the prompt of a turn that runs at adoption.
const TURN_SCAN_BYTES: u64 = 256 * 1024;
/// What the checks before an adoption found.
struct Checked {
    pane_pid: u32,
    pid: u32,
    pid_start: u64,
    session_file: PathBuf,
    file: SessionFile,
    cwd: String,
    transcript: PathBuf,
}

/// `$CLAUDE_CONFIG_DIR`, else `~/.claude` (what the claude-code watcher reads too).
fn config_dir() -> Option<PathBuf> {
    match std::env::var_os("CLAUDE_CONFIG_DIR").filter(|v| !v.is_empty()) {
        Some(dir) => Some(PathBuf::from(dir)),
        None => std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".claude")),
    }
}

/// Whether `pid` runs claude (its name, or its command line for a launcher).
fn is_claude(pid: u32) -> bool {
    process::comm(pid).as_deref() == Some("claude")
        || std::fs::read(format!("/proc/{pid}/cmdline"))
            .is_ok_and(|cmdline| String::from_utf8_lossy(&cmdline).contains("claude"))
}

/// The offset to start following `transcript` at: its end, or — while a turn runs
/// (`running`) — the start of the last prompt line in its last [`TURN_SCAN_BYTES`], so the
/// running turn is followed from its prompt.
fn start_offset(transcript: &Path, len: u64, running: bool) -> u64 {
    if !running {
        return len;
    }
    let from = len.saturating_sub(TURN_SCAN_BYTES);
    let Ok(bytes) = read_range(transcript, from, len) else {
        return len;
    };
    let mut offset = from;
    let mut last_prompt = None;
    let mut first = from > 0;
    for line in bytes.split_inclusive(|b| *b == b'\n') {
        let start = offset;
        offset += line.len() as u64;
        // A read from the middle of the file starts mid-line.
        if std::mem::take(&mut first) || !line.ends_with(b"\n") {
            continue;
        }
        let Ok(value) = serde_json::from_slice::<Value>(line) else {
            continue;
        };
        if let TranscriptRecord::User(head, user) = TranscriptRecord::from_value(&value)
            && head.is_sidechain != Some(true)
            && user.prompt_id.is_some()
            && user.submitted_prompt().is_some()
        {
            last_prompt = Some(start);
        }
    }
    last_prompt.unwrap_or(len)
}

fn read_range(path: &Path, from: u64, to: u64) -> std::io::Result<Vec<u8>> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = std::fs::File::open(path)?;
    file.seek(SeekFrom::Start(from))?;
    let mut bytes = Vec::new();
    file.take(to - from).read_to_end(&mut bytes)?;
    Ok(bytes)
}

impl ClaudeHost {
    /// Adopts the Claude the watcher placed in `request.pane_id`: checks it (refusing with the
    /// reason, typing nothing), then logs the session (`session.created`, `session.adopted`,
    /// `session.pane`, `session.bound`) and follows it like a hosted one.
    pub(super) async fn adopt(
        &self,
        request: AdoptRequest,
    ) -> Result<HostedSessionView, HostError> {
        if request.agent != AGENT {
            return Err(HostError::Unsupported(format!(
                "claude sessions adopt claude-code instances, not {}",
                request.agent
            )));
        }
        // One adoption at a time: two requests for one instance cannot both pass the checks.
        let _adopting = self.inner.adopting.lock().await;
        adopted::refuse_driven(&self.inner.core, &request, "claude session")?;
        let checked = self.check_adoptable(&request).await?;
        let running = matches!(
            checked.file.status.as_deref(),
            Some("busy" | "waiting" | "shell")
        );
        let session_id = new_session_id();
        let dir = self
            .inner
            .config
            .cohost_home
            .join("claude")
            .join(&session_id);
        crate::runtime::common::private_dir(&dir.join("checkpoints")).map_err(|e| {
            HostError::failed_by(
                Runtime::Claude,
                format!("cannot create {}: {e}", dir.join("checkpoints").display()),
                e,
            )
        })?;
        // Where the transcript is followed from: its end, or the prompt of the running turn.
        let (inode, offset) = match std::fs::metadata(&checked.transcript) {
            Ok(meta) => (
                meta.ino(),
                start_offset(&checked.transcript, meta.len(), running),
            ),
            // Not written yet (no prompt so far): followed from its first line.
            Err(_) => (0, 0),
        };
        tail::save_checkpoint(
            &dir.join("checkpoints").join("transcript.json"),
            &Checkpoint {
                path: checked.transcript.clone(),
                inode,
                offset,
            },
        )
        .await
        .map_err(|e| HostError::failed_by(Runtime::Claude, e.to_string(), e))?;
        let adopted = SessionAdopted {
            key: request.key.clone(),
            agent_session_id: request.agent_session_id.clone(),
            tmux_session: request.tmux_session.clone(),
            pane_id: request.pane_id.clone(),
            pane_pid: checked.pane_pid,
            pid: checked.pid,
            pid_start: checked.pid_start,
            session_file: checked.session_file.to_string_lossy().into_owned(),
            transcript: checked.transcript.to_string_lossy().into_owned(),
        };
        adopted::log_start(
            &self.inner.core,
            &session_id,
            Runtime::Claude,
            checked.cwd.clone(),
            &adopted,
            "claude",
        )
        .await?;
        tracing::info!(session = %session_id, key = %request.key, pane = %adopted.pane_id, pid = adopted.pid, "adopted a claude started by hand");
        let live = self.inner.start_following(&session_id, dir, false);
        // The tracker shows the session's instance (the watcher's gives way to it) at once.
        let status = match checked.file.status.as_deref() {
            Some("busy") => AgentStatus::Running,
            Some("waiting") => AgentStatus::Waiting,
            Some("shell") => AgentStatus::ToolRunning,
            _ => AgentStatus::Idle,
        };
        *lock(&live.reported) = Some(status);
        self.inner.report(&session_id, status).await;
        self.view(&session_id)
    }

    /// Checks that `request`'s pane still runs the Claude the watcher placed there, and finds
    /// its session file and transcript. Reads tmux, `/proc` and Claude's files; types nothing.
    async fn check_adoptable(&self, request: &AdoptRequest) -> Result<Checked, HostError> {
        let pane = &request.pane_id;
        let (pane_pid, pid, stat) =
            adopted::check_agent(self.tmux(), request, "claude", is_claude).await?;
        // Claude's own word: its session file names the pid, the session and the directory.
        let wanted = format!("{pid}.json");
        let session_file = request
            .files
            .iter()
            .map(PathBuf::from)
            .find(|path| {
                path.file_name().is_some_and(|name| *name == *wanted)
                    && path
                        .parent()
                        .and_then(Path::file_name)
                        .is_some_and(|dir| dir == "sessions")
            })
            .or_else(|| config_dir().map(|dir| dir.join("sessions").join(&wanted)))
            .ok_or_else(|| {
                adopted::refuse(
                    AdoptRefusal::NotAdoptable,
                    "the daemon has no $HOME: it cannot find claude's session file".into(),
                )
            })?;
        let file = std::fs::read(&session_file)
            .ok()
            .and_then(|bytes| SessionFile::from_slice(&bytes))
            .ok_or_else(|| {
                adopted::refuse(
                    AdoptRefusal::AgentExited,
                    format!(
                        "claude's session file {} is gone: claude (pid {pid}) is exiting",
                        session_file.display()
                    ),
                )
            })?;
        if file.pid.is_some_and(|p| p != u64::from(pid))
            || file.session_id.as_deref() != Some(request.agent_session_id.as_str())
        {
            return Err(adopted::refuse(
                AdoptRefusal::PaneChanged,
                format!(
                    "claude (pid {pid}) in pane {pane} runs session {} now, not {}",
                    file.session_id.as_deref().unwrap_or("(none)"),
                    request.agent_session_id
                ),
            ));
        }
        let Some(cwd) = file.cwd.clone().or_else(|| request.cwd.clone()) else {
            return Err(adopted::refuse(
                AdoptRefusal::NotAdoptable,
                format!(
                    "claude's session file {} names no directory",
                    session_file.display()
                ),
            ));
        };
        let transcript = find_transcript(
            &session_file,
            &request.files,
            &request.agent_session_id,
            &cwd,
        );
        Ok(Checked {
            pane_pid,
            pid,
            pid_start: stat.start_time,
            session_file,
            file,
            cwd,
            transcript,
        })
    }

    /// Gives an adopted Claude back: its session task ends the session (`session.closed`) and
    /// drops its tracker instance, so the watcher shows it again; Claude keeps running.
    pub(super) async fn disown(&self, session_id: &str) -> Result<HostedSessionView, HostError> {
        let live = self.live_session(session_id)?;
        if live.adopted.is_none() {
            return Err(HostError::NotAdopted(session_id.to_string()));
        }
        // Nothing is typed meanwhile: a prompt in flight finishes first.
        let _serialized = live.inject.lock().await;
        let _keys = live.keys.lock().await;
        let (done, ended) = tokio::sync::oneshot::channel();
        live.commands
            .send(Command::End(AdoptedEnd::Disowned, done))
            .await
            .map_err(|_| HostError::Closed(session_id.to_string()))?;
        let _ = ended.await;
        self.view(session_id)
    }
}

/// The transcript of Claude session `claude_session`: the one the watcher reads, else the one in
/// the folder of `cwd` (found, or where the first prompt will create it), else one of that name
/// in any project folder.
fn find_transcript(
    session_file: &Path,
    files: &[String],
    claude_session: &str,
    cwd: &str,
) -> PathBuf {
    let name = format!("{claude_session}.jsonl");
    if let Some(known) = files
        .iter()
        .map(PathBuf::from)
        .find(|path| path.file_name().is_some_and(|n| *n == *name))
    {
        return known;
    }
    // `<config>/sessions/<pid>.json` → `<config>/projects`.
    let projects = session_file
        .parent()
        .and_then(Path::parent)
        .map(|config| config.join("projects"))
        .unwrap_or_default();
    let real = std::fs::canonicalize(cwd).unwrap_or_else(|_| PathBuf::from(cwd));
    let expected = projects
        .join(project_dir_name(&real.to_string_lossy()))
        .join(&name);
    if expected.exists() {
        return expected;
    }
    std::fs::read_dir(&projects)
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.path().join(&name))
        .find(|path| path.is_file())
        .unwrap_or(expected)
}

impl Inner {
    /// An adopted session's look at its agent on a tick: `/proc` each time, the pane in tmux
    /// every `PANE_CHECK_TICKS` (`common::adopted::problem`); and Claude's session file, which names another session after
    /// `/clear` (the session then follows it: the outputs to apply). `Err`: the session ends.
    pub(super) async fn check_adopted(
        &self,
        live: &Live,
        ticks: u32,
        normalizer: &mut Normalizer,
    ) -> Result<Vec<Output>, AdoptedEnd> {
        let Some(adopted) = live.adopted.as_ref() else {
            return Ok(Vec::new());
        };
        if let Some(end) = adopted::problem(self.tmux.tmux(), adopted, "claude", ticks).await {
            return Err(end);
        }
        // `/clear` starts another Claude session (and transcript) in the same process.
        let Some(file) = self.session_file(live) else {
            return Ok(Vec::new());
        };
        match (file.session_id, normalizer.transcript()) {
            (Some(claude_session), Some(current))
                if normalizer.claude_session() != Some(claude_session.as_str()) =>
            {
                let transcript =
                    Path::new(current).with_file_name(format!("{claude_session}.jsonl"));
                tracing::info!(session = %live.session_id, %claude_session, "the adopted claude started another session (/clear)");
                Ok(normalizer.rebind(&claude_session, &transcript.to_string_lossy()))
            }
            _ => Ok(Vec::new()),
        }
    }

    /// Ends an adopted session: its open turn, its tracker instance (the watcher shows the agent
    /// again), and `session.closed` with the reason. The caller stops the session task.
    pub(super) async fn end_adopted(
        self: &std::sync::Arc<Self>,
        live: &std::sync::Arc<Live>,
        end: &AdoptedEnd,
        normalizer: &mut Normalizer,
    ) {
        let session_id = &live.session_id;
        tracing::info!(session = %session_id, ?end, "an adopted claude session ends");
        // Given back, its turn goes on in the pane; otherwise the turn is over with its agent.
        if *end != AdoptedEnd::Disowned {
            let outputs: Vec<Output> = normalizer
                .hook_line(&HookLine::session_end("exited"), now_ms())
                .into_iter()
                .filter(|output| matches!(output, Output::Store(_)))
                .collect();
            self.apply(live, outputs, normalizer).await;
        }
        live.exited.store(true, std::sync::atomic::Ordering::SeqCst);
        lock(&self.live).remove(session_id);
        // Its instance goes first: once the session is closed, the watcher's is the one shown
        // (the service has the watcher place it again on `session.closed`).
        let instance = self.core.read(|state| {
            let record = state.sessions.get(session_id)?;
            let pane = record.pane.as_ref()?;
            let key = format!("{AGENT}:{}", record.thread_id.as_deref()?);
            let (update, _) = state.tracker.instance(&pane.tmux_session, &key)?;
            (update.source.as_deref() == Some(crate::protocol::SOURCE_HOSTED))
                .then(|| (pane.tmux_session.clone(), key))
        });
        if let Some((tmux_session, key)) = instance {
            let _ = self
                .core
                .append(
                    Some(tmux_session),
                    EventKind::AgentPruned(InstanceRef { key }),
                )
                .await;
        }
        self.store(
            session_id,
            EventKind::SessionClosed(SessionClosed {
                reason: end.reason("claude"),
            }),
        )
        .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lines as Claude Code writes them (2.1.197 shapes, trimmed).
    const LINES: [&str; 5] = [
        r#"{"type":"user","promptId":"p1","message":{"role":"user","content":"First"},"uuid":"u1"}"#,
        r#"{"type":"system","subtype":"turn_duration","durationMs":900,"uuid":"s1"}"#,
        r#"{"type":"user","promptId":"p2","message":{"role":"user","content":"Second"},"uuid":"u2"}"#,
        r#"{"type":"user","promptId":"p2","message":{"role":"user","content":[{"tool_use_id":"t1","type":"tool_result","content":"hi"}]},"uuid":"u3"}"#,
        r#"{"type":"assistant","uuid":"a1","message":{"id":"m","model":"claude-opus-4-8","content":[{"type":"text","text":"Hello"}],"stop_reason":"end_turn"}}"#,
    ];

    fn transcript() -> (tempfile::TempDir, PathBuf, u64, u64) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let text: String = LINES.iter().map(|l| format!("{l}\n")).collect();
        std::fs::write(&path, &text).unwrap();
        let second = (LINES[0].len() + LINES[1].len() + 2) as u64;
        (dir, path, second, text.len() as u64)
    }

    #[test]
    fn an_idle_claude_is_followed_from_the_transcripts_end() {
        let (_dir, path, _, len) = transcript();
        assert_eq!(start_offset(&path, len, false), len);
    }

    #[test]
    fn a_running_turn_is_followed_from_its_prompt() {
        let (_dir, path, second, len) = transcript();
        // The tool result (a `user` line with blocks) is no prompt: the last prompt is `Second`.
        assert_eq!(start_offset(&path, len, true), second);
        // No prompt in what is read: its end.
        let none = path.with_file_name("none.jsonl");
        std::fs::write(&none, format!("{}\n", LINES[4])).unwrap();
        assert_eq!(
            start_offset(&none, LINES[4].len() as u64 + 1, true),
            LINES[4].len() as u64 + 1
        );
    }

    #[test]
    fn the_transcript_is_the_watchers_else_the_one_in_the_projects_folder() {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join(".claude");
        let session_file = config.join("sessions").join("42.json");
        let cwd = dir.path().join("my proj");
        std::fs::create_dir_all(&cwd).unwrap();
        let real = cwd.canonicalize().unwrap();
        let expected = config
            .join("projects")
            .join(project_dir_name(&real.to_string_lossy()))
            .join("s1.jsonl");
        // Not written yet: where the first prompt will write it.
        assert_eq!(
            find_transcript(&session_file, &[], "s1", &cwd.to_string_lossy()),
            expected
        );
        // The watcher's own file wins.
        let known = "/elsewhere/s1.jsonl".to_string();
        assert_eq!(
            find_transcript(
                &session_file,
                std::slice::from_ref(&known),
                "s1",
                "/nowhere"
            ),
            PathBuf::from(known)
        );
        // Found in another project folder (the session moved with `cd`).
        let other = config.join("projects").join("-other").join("s1.jsonl");
        std::fs::create_dir_all(other.parent().unwrap()).unwrap();
        std::fs::write(&other, "").unwrap();
        assert_eq!(find_transcript(&session_file, &[], "s1", "/nowhere"), other);
    }
}
