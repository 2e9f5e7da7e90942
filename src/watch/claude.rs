//! Claude Code's files, as a [`Format`]: the transcripts under `<config>/projects/<encoded
//! cwd>/<session id>.jsonl` (append-only lines) and the live status files
//! `<config>/sessions/<pid>.json` (rewritten whole on each status change, removed when the TUI
//! exits). `<config>` is `$CLAUDE_CONFIG_DIR`, else `~/.claude`. See docs/peers.md, "Watchers".
//!
//! The session file is the best status source: `busy` → running, `waiting` → waiting (held until
//! the file changes again: the transcript writes the pending `tool_use` after it), `shell` →
//! tool-running; `idle` says nothing by itself and leaves the transcript's last word (done,
//! interrupted, error). The transcript gives the turn's markers, the title (`custom-title` over
//! `ai-title`) and the last prompt a person typed (string content, not `isMeta`, not a command
//! or interrupt marker). Subagent sidechains (`<session>/subagents/…`) are not followed.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::format::{Decoder, FileKind, Format, Locator, Observation, WatchEnv, WatchedAgent};
use crate::formats::claude::{
    AssistantContentBlock, AssistantRecord, HookEvent, HookPayload, RecordHead, SessionFile,
    TitleRecord, TranscriptRecord, UserContent, UserContentBlock, UserRecord,
};
use crate::protocol::AgentStatus;

/// The Claude Code watcher.
pub struct ClaudeCode;

impl ClaudeCode {
    /// `$CLAUDE_CONFIG_DIR`, else `~/.claude`.
    pub fn config_dir(env: &WatchEnv) -> PathBuf {
        match env.var("CLAUDE_CONFIG_DIR") {
            Some(dir) => PathBuf::from(dir),
            None => env.home.join(".claude"),
        }
    }
}

impl Format for ClaudeCode {
    fn agent(&self) -> WatchedAgent {
        WatchedAgent::ClaudeCode
    }

    fn roots(&self, env: &WatchEnv) -> Vec<PathBuf> {
        let dir = ClaudeCode::config_dir(env);
        vec![dir.join("projects"), dir.join("sessions")]
    }

    fn process_names(&self) -> &'static [&'static str] {
        &["claude"]
    }

    fn classify(&self, path: &Path) -> Option<FileKind> {
        let name = path.file_name()?.to_str()?;
        let parent = path.parent()?;
        let parent_name = parent.file_name()?.to_str()?;
        if let Some(stem) = name.strip_suffix(".json")
            && parent_name == "sessions"
            && !stem.is_empty()
            && stem.bytes().all(|b| b.is_ascii_digit())
        {
            return Some(FileKind::Snapshot);
        }
        // `projects/<encoded cwd>/<session id>.jsonl`, not deeper (subagents).
        if name.ends_with(".jsonl") && parent.parent()?.file_name()? == "projects" {
            return Some(FileKind::Lines);
        }
        None
    }

    fn decoder(&self, path: &Path, saved: Option<Value>) -> Box<dyn Decoder> {
        let is_session_file = path.extension().is_some_and(|ext| ext == "json");
        if is_session_file {
            let state = saved
                .and_then(|value| serde_json::from_value(value).ok())
                .unwrap_or_default();
            Box::new(SessionFileDecoder { state })
        } else {
            let thread_id = path
                .file_stem()
                .map(|stem| stem.to_string_lossy().into_owned())
                .unwrap_or_default();
            let state = saved
                .and_then(|value| serde_json::from_value::<TranscriptState>(value).ok())
                .filter(|state| state.thread_id == thread_id)
                .unwrap_or(TranscriptState {
                    thread_id,
                    ..TranscriptState::default()
                });
            Box::new(TranscriptDecoder { state })
        }
    }
}

/// `sessions/<pid>.json`: what the last snapshot said, so its removal can name the thread and
/// an unchanged rewrite says nothing.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SessionFileState {
    session_id: Option<String>,
    pid: Option<u32>,
    status: Option<String>,
    waiting_for: Option<String>,
}

struct SessionFileDecoder {
    state: SessionFileState,
}

impl Decoder for SessionFileDecoder {
    fn line(&mut self, _line: &[u8], _at: &Locator, _out: &mut Vec<Observation>) {}

    fn snapshot(&mut self, bytes: &[u8], out: &mut Vec<Observation>) {
        // A half-written file (the TUI rewrites in place) is not an error: the next write
        // brings the whole object.
        let Some(file) = SessionFile::from_slice(bytes) else {
            return;
        };
        let Some(session_id) = file.session_id else {
            return;
        };
        let status_text = file.status;
        let waiting_for = file.waiting_for;
        let pid = file.pid.and_then(|pid| u32::try_from(pid).ok());
        let (status, holds, rule) = match status_text.as_deref() {
            Some("busy") => (
                Some(AgentStatus::Running),
                false,
                "claude-code: sessions/<pid>.json status busy → running".to_string(),
            ),
            Some("waiting") => (
                Some(AgentStatus::Waiting),
                true,
                format!(
                    "claude-code: sessions/<pid>.json status waiting ({}) → waiting, held until the file changes",
                    waiting_for.as_deref().unwrap_or("no waitingFor")
                ),
            ),
            Some("shell") => (
                Some(AgentStatus::ToolRunning),
                false,
                "claude-code: sessions/<pid>.json status shell → tool-running".to_string(),
            ),
            Some(other) => (
                None,
                false,
                format!(
                    "claude-code: sessions/<pid>.json status {other} → the transcript's last status"
                ),
            ),
            None => (
                None,
                false,
                "claude-code: sessions/<pid>.json without status".to_string(),
            ),
        };
        let unchanged = self.state.session_id.as_deref() == Some(session_id.as_str())
            && self.state.status == status_text
            && self.state.waiting_for == waiting_for
            && self.state.pid == pid;
        self.state = SessionFileState {
            session_id: Some(session_id.clone()),
            pid,
            status: status_text,
            waiting_for,
        };
        if unchanged {
            return;
        }
        out.push(Observation {
            thread_id: session_id,
            status,
            cwd: file.cwd.map(PathBuf::from),
            pid,
            holds,
            rule,
            record_ts: file.status_updated_at.or(file.updated_at),
            ..Observation::default()
        });
    }

    fn removed(&mut self, out: &mut Vec<Observation>) {
        if let Some(session_id) = self.state.session_id.take() {
            out.push(Observation {
                thread_id: session_id,
                ended: true,
                pid: self.state.pid,
                rule: "claude-code: sessions/<pid>.json removed (the TUI exited) → ended".into(),
                ..Observation::default()
            });
        }
        self.state = SessionFileState::default();
    }

    fn save(&self) -> Value {
        serde_json::to_value(&self.state).unwrap_or(Value::Null)
    }
}

/// What a transcript said so far that later lines depend on.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct TranscriptState {
    thread_id: String,
    /// The last status the transcript implied.
    status: Option<AgentStatus>,
    /// `tool_use` ids without their `tool_result` yet.
    open_tools: BTreeSet<String>,
    /// The record timestamp (ms) of the last turn end (duration line, interrupt, error).
    /// Claude may flush a turn's prompt line after the turn's end (file order is not logical
    /// order): a prompt or tool call stamped before it belongs to that ended turn and does
    /// not start a new one.
    #[serde(default)]
    ended_at: Option<u64>,
}

struct TranscriptDecoder {
    state: TranscriptState,
}

/// The `entrypoint` of a headless run's records (`claude -p`); the TUI's is `cli`.
const HEADLESS: &str = "sdk-cli";

/// User texts that are not prompts a person typed.
const NOT_A_PROMPT: [&str; 7] = [
    "<command-name>",
    "<command-message>",
    "<local-command",
    "<bash-",
    "<system-reminder>",
    "<task-notification>",
    "Caveat:",
];

fn is_prompt_text(text: &str) -> bool {
    let text = text.trim_start();
    !text.is_empty()
        && !text.starts_with("[Request interrupted")
        && !NOT_A_PROMPT.iter().any(|prefix| text.starts_with(prefix))
}

fn record_ms(head: &RecordHead) -> Option<u64> {
    super::rfc3339_ms(head.timestamp.as_deref()?)
}

impl TranscriptDecoder {
    fn observe(
        &mut self,
        head: &RecordHead,
        status: Option<AgentStatus>,
        rule: &str,
    ) -> Observation {
        let stamped = record_ms(head);
        // A busy status from a record older than the last turn end is late news of that turn.
        let late = matches!(
            status,
            Some(AgentStatus::Running | AgentStatus::ToolRunning)
        ) && stamped.is_some_and(|at| self.state.ended_at.is_some_and(|end| at < end));
        let (status, rule) = if late {
            (
                None,
                format!("{rule} (written after its turn ended: no status)"),
            )
        } else {
            (status, rule.to_string())
        };
        if matches!(
            status,
            Some(AgentStatus::Done | AgentStatus::Error | AgentStatus::Interrupted)
        ) && let Some(at) = stamped
        {
            self.state.ended_at = Some(self.state.ended_at.map_or(at, |end| end.max(at)));
        }
        let rule = rule.as_str();
        if status.is_some() {
            self.state.status = status;
        }
        Observation {
            thread_id: self.state.thread_id.clone(),
            status,
            cwd: head.cwd.as_deref().map(PathBuf::from),
            rule: format!("claude-code: {rule}"),
            record_ts: stamped,
            ..Observation::default()
        }
    }

    /// Running, or tool-running while a tool call has no result yet.
    fn busy(&self) -> AgentStatus {
        if self.state.open_tools.is_empty() {
            AgentStatus::Running
        } else {
            AgentStatus::ToolRunning
        }
    }
}

impl Decoder for TranscriptDecoder {
    fn line(&mut self, line: &[u8], _at: &Locator, out: &mut Vec<Observation>) {
        let Ok(value) = serde_json::from_slice::<Value>(line) else {
            return;
        };
        match TranscriptRecord::from_value(&value) {
            TranscriptRecord::Other(head) if head.kind.as_deref() == Some("ai-title") => {
                if let Some(title) = TitleRecord::from_value(&value)
                    .ai_title
                    .filter(|t| !t.is_empty())
                {
                    let mut obs = self.observe(&head, None, "ai-title → title");
                    obs.title = Some(title);
                    out.push(obs);
                }
            }
            TranscriptRecord::Other(head) if head.kind.as_deref() == Some("custom-title") => {
                if let Some(title) = TitleRecord::from_value(&value)
                    .custom_title
                    .filter(|t| !t.is_empty())
                {
                    let mut obs = self.observe(&head, None, "custom-title → title");
                    obs.title = Some(title);
                    out.push(obs);
                }
            }
            TranscriptRecord::System(head, system)
                if system.subtype.as_deref() == Some("turn_duration") =>
            {
                self.state.open_tools.clear();
                // An error or an interrupt already ended the turn; the duration line does not
                // turn it into a success.
                let status = match self.state.status {
                    Some(AgentStatus::Error) | Some(AgentStatus::Interrupted) => None,
                    _ => Some(AgentStatus::Done),
                };
                out.push(self.observe(&head, status, "system/turn_duration → done"));
            }
            TranscriptRecord::User(head, user) => self.user_line(&head, &user, out),
            TranscriptRecord::Assistant(head, assistant) => {
                self.assistant_line(&head, &assistant, out)
            }
            _ => {}
        }
    }

    fn save(&self) -> Value {
        serde_json::to_value(&self.state).unwrap_or(Value::Null)
    }
}

impl TranscriptDecoder {
    fn user_line(&mut self, head: &RecordHead, user: &UserRecord, out: &mut Vec<Observation>) {
        if user.is_meta == Some(true) {
            return;
        }
        let blocks = match user.content() {
            Some(UserContent::Text(text)) => {
                if is_prompt_text(text) {
                    let status = self.busy();
                    let mut obs =
                        self.observe(head, Some(status), "user prompt (string content) → running");
                    obs.last_user_prompt = Some(text.to_string());
                    out.push(obs);
                } else if text.trim_start().starts_with("[Request interrupted") {
                    self.state.open_tools.clear();
                    out.push(self.observe(
                        head,
                        Some(AgentStatus::Interrupted),
                        "user `[Request interrupted…` → interrupted",
                    ));
                }
                return;
            }
            Some(UserContent::Blocks(blocks)) => blocks,
            None => return,
        };
        let mut results = 0;
        let mut interrupted = false;
        let mut prompt = None;
        for block in blocks {
            match block {
                UserContentBlock::ToolResult(result) => {
                    results += 1;
                    if let Some(id) = result.tool_use_id.as_deref() {
                        self.state.open_tools.remove(id);
                    }
                    if let Some(Value::String(text)) = &result.content
                        && text.starts_with("[Request interrupted")
                    {
                        interrupted = true;
                    }
                }
                UserContentBlock::Text(block) => {
                    let text = block.text.as_deref().unwrap_or_default();
                    if text.trim_start().starts_with("[Request interrupted") {
                        interrupted = true;
                    } else if is_prompt_text(text) && prompt.is_none() {
                        prompt = Some(text.to_string());
                    }
                }
                UserContentBlock::Other(_) => {}
            }
        }
        let typed = user
            .origin
            .as_ref()
            .is_some_and(|origin| origin.kind.as_deref() == Some("human"))
            || user.prompt_source.is_some();
        if interrupted {
            self.state.open_tools.clear();
            out.push(self.observe(
                head,
                Some(AgentStatus::Interrupted),
                "user `[Request interrupted…` → interrupted",
            ));
        } else if results > 0 {
            let status = self.busy();
            out.push(self.observe(head, Some(status), "user tool_result → running"));
        } else if let Some(text) = prompt
            && typed
        {
            let status = self.busy();
            let mut obs = self.observe(head, Some(status), "user prompt (text blocks) → running");
            obs.last_user_prompt = Some(text);
            out.push(obs);
        }
    }

    fn assistant_line(
        &mut self,
        head: &RecordHead,
        assistant: &AssistantRecord,
        out: &mut Vec<Observation>,
    ) {
        if assistant.is_api_error_message == Some(true)
            || assistant
                .api_error_status
                .as_ref()
                .is_some_and(|status| !status.is_null())
        {
            self.state.open_tools.clear();
            out.push(self.observe(
                head,
                Some(AgentStatus::Error),
                "assistant isApiErrorMessage → error",
            ));
            return;
        }
        let message = assistant.message.as_ref();
        // An interrupted reply's partial text (`<synthetic>` on 2.1.197, `isAbortedMidStream`
        // on 2.1.332): the interrupt marker that follows says what happened.
        if message.and_then(|m| m.model.as_deref()) == Some("<synthetic>")
            || assistant.is_aborted_mid_stream == Some(true)
        {
            return;
        }
        let mut tools = 0;
        let late =
            record_ms(head).is_some_and(|at| self.state.ended_at.is_some_and(|end| at < end));
        if late {
            return;
        }
        for block in message.map(|m| m.content.as_slice()).unwrap_or_default() {
            if let AssistantContentBlock::ToolUse(tool_use) = block
                && let Some(id) = tool_use.id.as_deref()
            {
                self.state.open_tools.insert(id.to_string());
                tools += 1;
            }
        }
        if tools > 0 {
            out.push(self.observe(
                head,
                Some(AgentStatus::ToolRunning),
                "assistant tool_use without tool_result → tool-running",
            ));
        } else if message.and_then(|m| m.stop_reason.as_deref()) == Some("end_turn")
            && head.entrypoint.as_deref() == Some(HEADLESS)
        {
            // A headless run (`claude -p`, the SDK) writes no `turn_duration` line: its answer
            // is the turn's last record, and the run exits after it.
            self.state.open_tools.clear();
            out.push(self.observe(
                head,
                Some(AgentStatus::Done),
                "assistant end_turn in a headless run (entrypoint sdk-cli) → done",
            ));
        }
    }
}

/// What a Claude hook says of its session's status, reported by the machine-wide hook
/// (`cohost hooks install`; the daemon's `POST /api/claude/hook`): `UserPromptSubmit` →
/// running, `PreToolUse` → tool-running, `PostToolUse` / `PostToolUseFailure` → running,
/// `PermissionRequest` and a `permission_prompt` notification → waiting, `Stop` → done,
/// `StopFailure` → error. `None` for an event that implies no status (`SessionStart`,
/// `SessionEnd`, other notifications), or a payload without a `session_id`. `received_at` is
/// the hook's own clock: records written before it do not override this status.
pub fn hook_observation(event: &str, received_at: u64, payload: &Value) -> Option<Observation> {
    let parsed = HookPayload::parse(event, payload);
    let session_id = parsed.common.session_id.filter(|id| !id.is_empty())?;
    let (status, rule) = match &parsed.event {
        HookEvent::UserPromptSubmit(_) => (AgentStatus::Running, "UserPromptSubmit → running"),
        HookEvent::PreToolUse(_) => (AgentStatus::ToolRunning, "PreToolUse → tool-running"),
        HookEvent::PostToolUse(_) => (AgentStatus::Running, "PostToolUse → running"),
        HookEvent::PostToolUseFailure(_) => (AgentStatus::Running, "PostToolUseFailure → running"),
        HookEvent::PermissionRequest(_) => (AgentStatus::Waiting, "PermissionRequest → waiting"),
        HookEvent::Notification(notification)
            if notification.notification_type.as_deref() == Some("permission_prompt") =>
        {
            (
                AgentStatus::Waiting,
                "Notification permission_prompt → waiting",
            )
        }
        HookEvent::Stop(_) => (AgentStatus::Done, "Stop → done"),
        HookEvent::StopFailure(_) => (AgentStatus::Error, "StopFailure → error"),
        _ => return None,
    };
    Some(Observation {
        thread_id: session_id,
        status: Some(status),
        cwd: parsed.common.cwd.map(PathBuf::from),
        rule: format!("claude-code hook: {rule}"),
        record_ts: Some(received_at),
        ..Observation::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> Vec<u8> {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/watchers/claude-code")
            .join(name);
        std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    fn decode_lines(name: &str) -> Vec<Observation> {
        let path = PathBuf::from(format!("/h/.claude/projects/-w/{name}"));
        let mut decoder = ClaudeCode.decoder(&path, None);
        let mut out = Vec::new();
        let bytes = fixture(name);
        let mut offset = 0u64;
        for line in bytes.split(|b| *b == b'\n') {
            if !line.is_empty() {
                decoder.line(line, &Locator::Offset { offset }, &mut out);
            }
            offset += line.len() as u64 + 1;
        }
        out
    }

    fn statuses(out: &[Observation]) -> Vec<AgentStatus> {
        out.iter().filter_map(|o| o.status).collect()
    }

    #[test]
    fn classify_follows_transcripts_and_session_files_only() {
        let f = ClaudeCode;
        let root = Path::new("/h/.claude");
        assert_eq!(
            f.classify(&root.join("projects/-w/abc.jsonl")),
            Some(FileKind::Lines)
        );
        assert_eq!(
            f.classify(&root.join("sessions/123.json")),
            Some(FileKind::Snapshot)
        );
        assert_eq!(f.classify(&root.join("sessions/123.ab12.key")), None);
        assert_eq!(
            f.classify(&root.join("projects/-w/abc/subagents/agent-1.jsonl")),
            None
        );
        assert_eq!(f.classify(&root.join("history.jsonl")), None);
    }

    #[test]
    fn roots_follow_claude_config_dir() {
        let mut env = WatchEnv {
            home: PathBuf::from("/h"),
            ..WatchEnv::default()
        };
        assert_eq!(
            ClaudeCode.roots(&env),
            vec![
                PathBuf::from("/h/.claude/projects"),
                PathBuf::from("/h/.claude/sessions")
            ]
        );
        env.vars.insert("CLAUDE_CONFIG_DIR".into(), "/cfg".into());
        assert_eq!(ClaudeCode.roots(&env)[0], PathBuf::from("/cfg/projects"));
    }

    #[test]
    fn tool_turn_runs_then_tool_runs_then_is_done() {
        let out = decode_lines("tool-turn.jsonl");
        assert_eq!(
            statuses(&out),
            vec![
                AgentStatus::ToolRunning,
                AgentStatus::ToolRunning,
                AgentStatus::Running,
                AgentStatus::Done
            ]
        );
        let titles: Vec<_> = out.iter().filter_map(|o| o.title.clone()).collect();
        assert_eq!(titles, vec!["Mock title".to_string()]);
        let prompts: Vec<_> = out
            .iter()
            .filter_map(|o| o.last_user_prompt.clone())
            .collect();
        assert_eq!(prompts, vec!["Run echo hi please".to_string()]);
        assert!(out.iter().all(|o| o.thread_id == "tool-turn"));
        assert_eq!(out[0].cwd, None, "the ai-title line has no cwd");
        assert_eq!(out[1].cwd.as_deref(), Some(Path::new("/home/me/proj")));
    }

    #[test]
    fn a_headless_run_ends_done_with_its_answer() {
        // `claude -p` against the mock, recorded on both releases: no `turn_duration` follows.
        for name in ["print-mode-2.1.197.jsonl", "print-mode-2.1.332.jsonl"] {
            let out = decode_lines(name);
            assert_eq!(
                statuses(&out),
                vec![AgentStatus::Running, AgentStatus::Done],
                "{name}"
            );
            let prompts: Vec<_> = out
                .iter()
                .filter_map(|o| o.last_user_prompt.clone())
                .collect();
            assert_eq!(
                prompts,
                vec!["Say hello from a script".to_string()],
                "{name}"
            );
        }
    }

    #[test]
    fn an_end_turn_answer_in_the_tui_waits_for_turn_duration() {
        // The same records written by the TUI (`entrypoint: cli`): a Stop hook may still
        // continue the turn, so only the duration line ends it.
        let bytes = fixture("print-mode-2.1.197.jsonl");
        let text = String::from_utf8(bytes)
            .unwrap()
            .replace("\"sdk-cli\"", "\"cli\"");
        let mut decoder = ClaudeCode.decoder(Path::new("/h/.claude/projects/-w/tui.jsonl"), None);
        let mut out = Vec::new();
        for line in text.lines() {
            decoder.line(line.as_bytes(), &Locator::Offset { offset: 0 }, &mut out);
        }
        assert_eq!(statuses(&out), vec![AgentStatus::Running]);
    }

    #[test]
    fn interrupt_marker_is_interrupted_and_meta_lines_are_no_prompt() {
        let out = decode_lines("interrupted.jsonl");
        assert_eq!(
            statuses(&out),
            vec![AgentStatus::Running, AgentStatus::Interrupted]
        );
        let prompts: Vec<_> = out
            .iter()
            .filter_map(|o| o.last_user_prompt.clone())
            .collect();
        assert_eq!(prompts, vec!["Write a long story".to_string()]);
    }

    #[test]
    fn api_error_is_error_and_the_duration_line_keeps_it() {
        let out = decode_lines("api-error.jsonl");
        assert_eq!(
            statuses(&out),
            vec![AgentStatus::Running, AgentStatus::Error]
        );
    }

    #[test]
    fn a_prompt_flushed_after_its_turn_ended_does_not_reopen_it() {
        let path = PathBuf::from("/h/.claude/projects/-w/late.jsonl");
        let mut decoder = ClaudeCode.decoder(&path, None);
        let mut out = Vec::new();
        let at = Locator::Offset { offset: 0 };
        decoder.line(
            br#"{"type":"assistant","timestamp":"2026-12-01T09:00:02.000Z","message":{"content":[{"type":"text","text":"Hello."}]}}"#,
            &at,
            &mut out,
        );
        decoder.line(
            br#"{"type":"system","subtype":"turn_duration","timestamp":"2026-12-01T09:00:02.100Z"}"#,
            &at,
            &mut out,
        );
        decoder.line(
            br#"{"type":"user","timestamp":"2026-12-01T09:00:01.000Z","message":{"content":"Say hello"},"origin":{"kind":"human"}}"#,
            &at,
            &mut out,
        );
        assert_eq!(statuses(&out), vec![AgentStatus::Done]);
        assert_eq!(out[1].last_user_prompt.as_deref(), Some("Say hello"));
        assert!(
            out[1].rule.contains("after its turn ended"),
            "{}",
            out[1].rule
        );
        // The next prompt, stamped after the end, starts a turn.
        decoder.line(
            br#"{"type":"user","timestamp":"2026-12-01T09:00:05.000Z","message":{"content":"Again"},"origin":{"kind":"human"}}"#,
            &at,
            &mut out,
        );
        assert_eq!(out[2].status, Some(AgentStatus::Running));
    }

    #[test]
    fn custom_title_and_saved_state_resume() {
        let path = PathBuf::from("/h/.claude/projects/-w/t1.jsonl");
        let mut decoder = ClaudeCode.decoder(&path, None);
        let mut out = Vec::new();
        let at = Locator::Offset { offset: 0 };
        decoder.line(
            br#"{"type":"assistant","message":{"content":[{"type":"tool_use","id":"tu1","name":"Bash"}]}}"#,
            &at,
            &mut out,
        );
        let saved = decoder.save();
        let mut resumed = ClaudeCode.decoder(&path, Some(saved));
        out.clear();
        resumed.line(
            br#"{"type":"custom-title","customTitle":"Mine"}"#,
            &at,
            &mut out,
        );
        resumed.line(
            br#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"tu1","content":"ok"}]}}"#,
            &at,
            &mut out,
        );
        assert_eq!(out[0].title.as_deref(), Some("Mine"));
        assert_eq!(out[1].status, Some(AgentStatus::Running));
    }

    /// Recorded lines read by the types the host's normalizer consumes (`formats::claude`) and
    /// decoded by the watcher: both read the same record (ids, prompt, cwd, time, status).
    #[test]
    fn the_watcher_reads_the_records_the_host_reads() {
        let path = PathBuf::from("/h/.claude/projects/-w/tool-turn.jsonl");
        let mut decoder = ClaudeCode.decoder(&path, None);
        let text = String::from_utf8(fixture("tool-turn.jsonl")).unwrap();
        for line in text.lines() {
            let record = TranscriptRecord::from_value(&serde_json::from_str(line).unwrap());
            let head = record.head();
            let mut out = Vec::new();
            decoder.line(line.as_bytes(), &Locator::Offset { offset: 0 }, &mut out);
            for obs in &out {
                assert_eq!(obs.cwd, head.cwd.as_deref().map(PathBuf::from), "{line}");
                let stamped = head.timestamp.as_deref().and_then(super::super::rfc3339_ms);
                assert_eq!(obs.record_ts, stamped, "{line}");
            }
            let open_tools = decoder.save()["openTools"].clone();
            match &record {
                TranscriptRecord::Assistant(_, assistant) => {
                    for block in &assistant.message.as_ref().unwrap().content {
                        if let AssistantContentBlock::ToolUse(tool_use) = block {
                            let id = tool_use.id.clone().unwrap();
                            assert!(open_tools.as_array().unwrap().contains(&id.into()));
                        }
                    }
                }
                TranscriptRecord::User(_, user) if user.is_meta != Some(true) => {
                    match user.content().unwrap() {
                        UserContent::Text(prompt) => {
                            assert_eq!(out[0].last_user_prompt.as_ref(), Some(prompt));
                        }
                        UserContent::Blocks(blocks) => {
                            let UserContentBlock::ToolResult(result) = &blocks[0] else {
                                panic!("{line}")
                            };
                            let id = result.tool_use_id.clone().unwrap();
                            assert!(!open_tools.as_array().unwrap().contains(&id.into()));
                        }
                    }
                }
                _ => {}
            }
        }

        let bytes = fixture("session-waiting.json");
        // What the host reads of the file (its status poll) is what the watcher observes.
        let file = SessionFile::from_slice(&bytes).unwrap();
        let mut out = Vec::new();
        ClaudeCode
            .decoder(Path::new("/h/.claude/sessions/20072.json"), None)
            .snapshot(&bytes, &mut out);
        assert_eq!(Some(out[0].thread_id.as_str()), file.session_id.as_deref());
        assert_eq!(out[0].pid.map(u64::from), file.pid);
        assert_eq!(out[0].cwd, file.cwd.map(PathBuf::from));
        assert_eq!(out[0].record_ts, file.status_updated_at);
        assert_eq!(file.status.as_deref(), Some("waiting"));
        assert_eq!(out[0].status, Some(AgentStatus::Waiting));
        assert!(out[0].rule.contains(file.waiting_for.as_deref().unwrap()));
    }

    #[test]
    fn session_file_statuses_hold_waiting_and_removal_ends_the_thread() {
        let path = PathBuf::from("/h/.claude/sessions/20072.json");
        let mut decoder = ClaudeCode.decoder(&path, None);
        let mut out = Vec::new();
        decoder.snapshot(&fixture("session-waiting.json"), &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].status, Some(AgentStatus::Waiting));
        assert!(out[0].holds);
        assert_eq!(out[0].pid, Some(20072));
        assert_eq!(out[0].thread_id, "3c74e8a3-0000-4000-8000-000000000001");
        assert!(out[0].rule.contains("permission prompt"));
        // The same bytes again (an attribute change, a rewrite) say nothing new.
        decoder.snapshot(&fixture("session-waiting.json"), &mut out);
        assert_eq!(out.len(), 1);
        // Half-written: nothing.
        decoder.snapshot(b"{\"pid\":20072,\"sess", &mut out);
        assert_eq!(out.len(), 1);
        let saved = decoder.save();
        let mut resumed = ClaudeCode.decoder(&path, Some(saved));
        resumed.removed(&mut out);
        assert_eq!(out.len(), 2);
        assert!(out[1].ended);
        assert_eq!(out[1].thread_id, "3c74e8a3-0000-4000-8000-000000000001");
    }

    #[test]
    fn hooks_say_the_status_of_their_session() {
        // Literal payloads of Claude Code 2.1.197 (claude-code-observed.md §3), shortened.
        let common = |event: &str| {
            serde_json::json!({
                "session_id": "3c74e8a3-0d49-463f-801d-b8088269916a",
                "transcript_path": "/h/.claude/projects/-w/3c74e8a3-0d49-463f-801d-b8088269916a.jsonl",
                "cwd": "/w",
                "hook_event_name": event,
            })
        };
        let cases = [
            ("UserPromptSubmit", Some(AgentStatus::Running)),
            ("PreToolUse", Some(AgentStatus::ToolRunning)),
            ("PostToolUse", Some(AgentStatus::Running)),
            ("PostToolUseFailure", Some(AgentStatus::Running)),
            ("PermissionRequest", Some(AgentStatus::Waiting)),
            ("Stop", Some(AgentStatus::Done)),
            ("StopFailure", Some(AgentStatus::Error)),
            ("SessionStart", None),
            ("SessionEnd", None),
            ("Notification", None),
            ("PostToolBatch", None),
        ];
        for (event, want) in cases {
            let obs = hook_observation(event, 1_795_957_500_794, &common(event));
            assert_eq!(obs.as_ref().and_then(|o| o.status), want, "{event}");
            if let Some(obs) = obs {
                assert_eq!(obs.thread_id, "3c74e8a3-0d49-463f-801d-b8088269916a");
                assert_eq!(obs.cwd, Some(PathBuf::from("/w")));
                assert_eq!(obs.record_ts, Some(1_795_957_500_794));
                assert!(obs.rule.starts_with("claude-code hook: "), "{}", obs.rule);
                assert!(!obs.holds);
            }
        }
        let mut asking = common("Notification");
        asking["notification_type"] = "permission_prompt".into();
        asking["message"] = "Claude needs your permission to use Bash".into();
        assert_eq!(
            hook_observation("Notification", 1, &asking).and_then(|o| o.status),
            Some(AgentStatus::Waiting)
        );
        // No session, no observation.
        assert_eq!(
            hook_observation("Stop", 1, &serde_json::json!({"hook_event_name": "Stop"})),
            None
        );
        assert_eq!(
            hook_observation("Stop", 1, &serde_json::json!("text")),
            None
        );
    }
}
