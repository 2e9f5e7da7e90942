//! Codex's files, as a [`Format`]: the rollouts under
//! `$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<ts>-<thread id>.jsonl` (append-only, one line per
//! item or event, written only when an item is whole) and `$CODEX_HOME/session_index.jsonl`
//! (thread names, appended; the last non-empty name of a thread wins). `$CODEX_HOME` defaults to
//! `~/.codex`. See docs/peers.md, "Watchers".
//!
//! Status: `task_started` → running; a `function_call` / `custom_tool_call` /
//! `local_shell_call` without its `*_output` yet → tool-running (an approval looks the same on
//! disk); `task_complete` → done, or error when it carries `error`; `turn_aborted` →
//! interrupted. The prompt is the last `UserMessage` item (or a user `message` that is not
//! injected context: `<environment_context>`, `<turn_aborted>`, `# AGENTS.md`, …); developer
//! messages are skipped. The process is the TUI running in the thread's cwd (see
//! `Codex::pick_process`): the rollout's writer is an `app-server` the TUIs share. An open tool
//! call with no tool process under the TUI is an approval waiting.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::format::{
    Decoder, FileKind, Format, Locator, Observation, ProcessFacts, ThreadFacts, WatchEnv,
    WatchedAgent,
};
use crate::formats::codex::{
    ContentItem, EventMsg, ResponseItem, RolloutItem, RolloutLine, SessionIndexEntry,
};
use crate::protocol::AgentStatus;

/// The Codex watcher.
pub struct Codex;

impl Codex {
    /// `$CODEX_HOME`, else `~/.codex`.
    pub fn home(env: &WatchEnv) -> PathBuf {
        match env.var("CODEX_HOME") {
            Some(dir) => PathBuf::from(dir),
            None => env.home.join(".codex"),
        }
    }
}

const INDEX_FILE: &str = "session_index.jsonl";

impl Format for Codex {
    fn agent(&self) -> WatchedAgent {
        WatchedAgent::Codex
    }

    fn roots(&self, env: &WatchEnv) -> Vec<PathBuf> {
        vec![Codex::home(env).join("sessions")]
    }

    fn files(&self, env: &WatchEnv) -> Vec<PathBuf> {
        vec![Codex::home(env).join(INDEX_FILE)]
    }

    fn process_names(&self) -> &'static [&'static str] {
        &["codex"]
    }

    fn tools_run_as_children(&self) -> bool {
        true
    }

    /// The TUI a person runs. Since 0.169 the rollout is written by an `app-server` that one
    /// TUI spawned and every TUI of the same `CODEX_HOME` shares (it outlives them), so holding
    /// the file says nothing about which TUI runs the thread. A holder that is not an
    /// `app-server` (`codex exec`) is the agent; otherwise the TUI (not an `app-server`) whose
    /// cwd is the thread's and that no other live thread took, the oldest first.
    fn pick_process(&self, thread: &ThreadFacts<'_>, candidates: &[ProcessFacts]) -> Option<u32> {
        let is_server = |p: &ProcessFacts| p.args.iter().any(|arg| arg == "app-server");
        if let Some(holder) = candidates
            .iter()
            .find(|p| !is_server(p) && p.holds.iter().any(|held| thread.files.contains(held)))
        {
            return Some(holder.pid);
        }
        let cwd = thread.cwd?;
        candidates
            .iter()
            .filter(|p| {
                !is_server(p) && p.cwd.as_deref() == Some(cwd) && !thread.claimed.contains(&p.pid)
            })
            .min_by_key(|p| (p.start_time, p.pid))
            .map(|p| p.pid)
    }

    fn classify(&self, path: &Path) -> Option<FileKind> {
        let name = path.file_name()?.to_str()?;
        if name == INDEX_FILE {
            return Some(FileKind::Lines);
        }
        (name.starts_with("rollout-") && name.ends_with(".jsonl") && thread_of(path).is_some())
            .then_some(FileKind::Lines)
    }

    fn decoder(&self, path: &Path, saved: Option<Value>) -> Box<dyn Decoder> {
        if path.file_name().is_some_and(|name| name == INDEX_FILE) {
            return Box::new(IndexDecoder);
        }
        let thread_id = thread_of(path).unwrap_or_default();
        let state = saved
            .and_then(|value| serde_json::from_value::<RolloutState>(value).ok())
            .filter(|state| state.thread_id == thread_id)
            .unwrap_or(RolloutState {
                thread_id,
                ..RolloutState::default()
            });
        Box::new(RolloutDecoder { state })
    }
}

/// The thread id at the end of a rollout's name (`rollout-<ts>-<uuid>.jsonl`).
fn thread_of(path: &Path) -> Option<String> {
    let stem = path.file_stem()?.to_str()?;
    let id = stem.get(stem.len().checked_sub(36)?..)?;
    let uuid_like = id.len() == 36
        && id.bytes().enumerate().all(|(i, b)| {
            matches!(i, 8 | 13 | 18 | 23) == (b == b'-') && (b == b'-' || b.is_ascii_hexdigit())
        });
    uuid_like.then(|| id.to_string())
}

/// `session_index.jsonl`: one thread name per line.
struct IndexDecoder;

impl Decoder for IndexDecoder {
    fn line(&mut self, line: &[u8], _at: &Locator, out: &mut Vec<Observation>) {
        let Some(entry) = SessionIndexEntry::from_slice(line) else {
            return;
        };
        let (Some(id), Some(name)) = (entry.id, entry.thread_name) else {
            return;
        };
        if name.trim().is_empty() {
            return;
        }
        out.push(Observation {
            thread_id: id,
            title: Some(name),
            rule: "codex: session_index.jsonl thread_name → title (last wins)".into(),
            record_ts: entry.updated_at.as_deref().and_then(super::rfc3339_ms),
            ..Observation::default()
        });
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RolloutState {
    thread_id: String,
    /// Tool calls without their output yet, by `call_id`.
    open_calls: BTreeSet<String>,
}

struct RolloutDecoder {
    state: RolloutState,
}

/// Texts codex injects as `user` messages; none is a prompt a person typed.
const INJECTED: [&str; 6] = [
    "<environment_context>",
    "<turn_aborted>",
    "# AGENTS.md",
    "<permissions",
    "<user_instructions>",
    "<user_shell_command>",
];

fn is_prompt_text(text: &str) -> bool {
    let text = text.trim_start();
    !text.is_empty() && !INJECTED.iter().any(|prefix| text.starts_with(prefix))
}

/// The text of a `content` array (`[{type, text}]`).
fn content_text(content: &[ContentItem]) -> Option<String> {
    let parts: Vec<&str> = content
        .iter()
        .filter_map(|part| part.text.as_deref())
        .collect();
    (!parts.is_empty()).then(|| parts.join("\n"))
}

impl RolloutDecoder {
    fn observe(&self, line: &RolloutLine, status: Option<AgentStatus>, rule: &str) -> Observation {
        Observation {
            thread_id: self.state.thread_id.clone(),
            status,
            rule: format!("codex: {rule}"),
            record_ts: line.timestamp.as_deref().and_then(super::rfc3339_ms),
            ..Observation::default()
        }
    }

    fn after_call(&self) -> AgentStatus {
        if self.state.open_calls.is_empty() {
            AgentStatus::Running
        } else {
            AgentStatus::ToolRunning
        }
    }

    fn event(&mut self, line: &RolloutLine, event: &EventMsg, out: &mut Vec<Observation>) {
        match event {
            EventMsg::TaskStarted(_) => {
                self.state.open_calls.clear();
                out.push(self.observe(
                    line,
                    Some(AgentStatus::Running),
                    "event_msg/task_started → running",
                ));
            }
            EventMsg::TaskComplete(complete) => {
                self.state.open_calls.clear();
                out.push(if complete.has_error() {
                    self.observe(
                        line,
                        Some(AgentStatus::Error),
                        "event_msg/task_complete with error → error",
                    )
                } else {
                    self.observe(
                        line,
                        Some(AgentStatus::Done),
                        "event_msg/task_complete → done",
                    )
                });
            }
            EventMsg::TurnAborted(aborted) => {
                self.state.open_calls.clear();
                let reason = aborted.reason.as_deref().unwrap_or("unknown");
                out.push(self.observe(
                    line,
                    Some(AgentStatus::Interrupted),
                    &format!("event_msg/turn_aborted ({reason}) → interrupted"),
                ));
            }
            EventMsg::ItemCompleted(completed) => {
                let Some(item) = completed
                    .item
                    .as_ref()
                    .filter(|item| item.kind.as_deref() == Some("UserMessage"))
                else {
                    return;
                };
                if let Some(text) = content_text(&item.content)
                    && is_prompt_text(&text)
                {
                    let mut obs =
                        self.observe(line, None, "event_msg/item_completed UserMessage → prompt");
                    obs.last_user_prompt = Some(text);
                    out.push(obs);
                }
            }
            EventMsg::UserMessage(message) => {
                if let Some(text) = message.message.as_deref().filter(|t| is_prompt_text(t)) {
                    let mut obs = self.observe(line, None, "event_msg/user_message → prompt");
                    obs.last_user_prompt = Some(text.to_string());
                    out.push(obs);
                }
            }
            EventMsg::Other(_) => {}
        }
    }

    fn response_item(
        &mut self,
        line: &RolloutLine,
        item: &ResponseItem,
        out: &mut Vec<Observation>,
    ) {
        let kind = item.kind();
        match item {
            ResponseItem::FunctionCall(call)
            | ResponseItem::CustomToolCall(call)
            | ResponseItem::LocalShellCall(call) => {
                if let Some(id) = call.call_id.as_ref().or(call.id.as_ref()) {
                    self.state.open_calls.insert(id.clone());
                }
                out.push(self.observe(
                    line,
                    Some(AgentStatus::ToolRunning),
                    &format!("response_item/{kind} without output → tool-running"),
                ));
            }
            ResponseItem::FunctionCallOutput(output)
            | ResponseItem::CustomToolCallOutput(output)
            | ResponseItem::LocalShellCallOutput(output) => {
                if let Some(id) = &output.call_id {
                    self.state.open_calls.remove(id);
                }
                let status = self.after_call();
                out.push(self.observe(
                    line,
                    Some(status),
                    &format!("response_item/{kind} → running"),
                ));
            }
            ResponseItem::Message(message) if message.role.as_deref() == Some("user") => {
                if let Some(text) = content_text(&message.content)
                    && is_prompt_text(&text)
                {
                    let mut obs =
                        self.observe(line, None, "response_item/message role=user → prompt");
                    obs.last_user_prompt = Some(text);
                    out.push(obs);
                }
            }
            ResponseItem::Message(_) | ResponseItem::Other(_) => {}
        }
    }
}

impl Decoder for RolloutDecoder {
    fn line(&mut self, line: &[u8], _at: &Locator, out: &mut Vec<Observation>) {
        let Some(line) = RolloutLine::from_slice(line) else {
            return;
        };
        match &line.item {
            RolloutItem::SessionMeta(meta) => {
                if let Some(id) = meta.id.as_deref()
                    && id != self.state.thread_id
                    && !id.is_empty()
                    && self.state.thread_id.is_empty()
                {
                    self.state.thread_id = id.to_string();
                }
                let mut obs = self.observe(&line, None, "session_meta → cwd");
                obs.cwd = meta.cwd.as_deref().map(PathBuf::from);
                out.push(obs);
            }
            RolloutItem::TurnContext(context) => {
                let mut obs = self.observe(&line, None, "turn_context → cwd");
                obs.cwd = context.cwd.as_deref().map(PathBuf::from);
                if obs.cwd.is_some() {
                    out.push(obs);
                }
            }
            RolloutItem::EventMsg(event) => self.event(&line, event, out),
            RolloutItem::ResponseItem(item) => self.response_item(&line, item, out),
            RolloutItem::Other(_) => {}
        }
    }

    fn save(&self) -> Value {
        serde_json::to_value(&self.state).unwrap_or(Value::Null)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const THREAD: &str = "01a230dc-f6f8-7663-b1a5-db280f67d13e";

    fn decode(name: &str) -> Vec<Observation> {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/watchers/codex");
        let bytes = std::fs::read(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        let path = PathBuf::from(format!(
            "/h/.codex/sessions/2026/12/01/rollout-2026-12-01T09-08-38-{THREAD}.jsonl"
        ));
        let path = if name == INDEX_FILE {
            PathBuf::from("/h/.codex").join(INDEX_FILE)
        } else {
            path
        };
        let mut decoder = Codex.decoder(&path, None);
        let mut out = Vec::new();
        for line in bytes.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            decoder.line(line, &Locator::Offset { offset: 0 }, &mut out);
        }
        out
    }

    fn statuses(out: &[Observation]) -> Vec<AgentStatus> {
        out.iter().filter_map(|o| o.status).collect()
    }

    #[test]
    fn classify_and_thread_ids() {
        let p = Path::new("/h/.codex/sessions/2026/12/01")
            .join(format!("rollout-2026-12-01T09-08-38-{THREAD}.jsonl"));
        assert_eq!(Codex.classify(&p), Some(FileKind::Lines));
        assert_eq!(thread_of(&p).as_deref(), Some(THREAD));
        assert_eq!(
            Codex.classify(Path::new("/h/.codex/session_index.jsonl")),
            Some(FileKind::Lines)
        );
        assert_eq!(Codex.classify(Path::new("/h/.codex/history.jsonl")), None);
        assert_eq!(
            Codex.classify(Path::new("/h/.codex/sessions/rollout-x.jsonl")),
            None
        );
    }

    #[test]
    fn roots_follow_codex_home() {
        let mut env = WatchEnv {
            home: PathBuf::from("/h"),
            ..WatchEnv::default()
        };
        assert_eq!(Codex.roots(&env), vec![PathBuf::from("/h/.codex/sessions")]);
        env.vars.insert("CODEX_HOME".into(), "/c".into());
        assert_eq!(Codex.roots(&env), vec![PathBuf::from("/c/sessions")]);
        assert_eq!(
            Codex.files(&env),
            vec![PathBuf::from("/c/session_index.jsonl")]
        );
    }

    #[test]
    fn tool_turn_approval_interrupt_and_failure() {
        let out = decode("rollout.jsonl");
        assert_eq!(
            statuses(&out),
            vec![
                // turn 1: a tool call, its output, done
                AgentStatus::Running,
                AgentStatus::ToolRunning,
                AgentStatus::Running,
                AgentStatus::Done,
                // turn 2: a call waiting for its approval (tool-running on disk), then done
                AgentStatus::Running,
                AgentStatus::ToolRunning,
                AgentStatus::Running,
                AgentStatus::Done,
                // turn 3: interrupted; turn 4: failed
                AgentStatus::Running,
                AgentStatus::Interrupted,
                AgentStatus::Running,
                AgentStatus::Error,
            ]
        );
        let prompts: Vec<_> = out
            .iter()
            .filter_map(|o| o.last_user_prompt.clone())
            .collect();
        assert!(
            prompts.iter().all(|p| !p.starts_with('<')),
            "injected context is never a prompt: {prompts:?}"
        );
        assert!(prompts.contains(&"Run echo hi please".to_string()));
        assert_eq!(out[0].cwd.as_deref(), Some(Path::new("/home/me/proj")));
        assert!(out.iter().all(|o| o.thread_id == THREAD));
    }

    #[test]
    fn index_titles_last_non_empty_wins() {
        let out = decode(INDEX_FILE);
        let titles: Vec<_> = out
            .iter()
            .map(|o| (o.thread_id.as_str(), o.title.as_deref().unwrap_or("")))
            .collect();
        assert_eq!(
            titles,
            vec![(THREAD, "Echo hi test"), (THREAD, "Renamed")],
            "the empty name is skipped"
        );
    }
}
