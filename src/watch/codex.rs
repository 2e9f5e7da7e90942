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
//! messages are skipped. The process is found by who holds the rollout open (the TUI's
//! `app-server` child) and climbing to the TUI (`process_names`).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::format::{Decoder, FileKind, Format, Locator, Observation, WatchEnv, WatchedAgent};
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
        let Ok(value) = serde_json::from_slice::<Value>(line) else {
            return;
        };
        let (Some(id), Some(name)) = (value["id"].as_str(), value["thread_name"].as_str()) else {
            return;
        };
        if name.trim().is_empty() {
            return;
        }
        out.push(Observation {
            thread_id: id.to_string(),
            title: Some(name.to_string()),
            rule: "codex: session_index.jsonl thread_name → title (last wins)".into(),
            record_ts: value["updated_at"].as_str().and_then(super::rfc3339_ms),
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
fn content_text(content: &Value) -> Option<String> {
    let parts: Vec<&str> = content
        .as_array()?
        .iter()
        .filter_map(|part| part["text"].as_str())
        .collect();
    (!parts.is_empty()).then(|| parts.join("\n"))
}

impl RolloutDecoder {
    fn observe(&self, value: &Value, status: Option<AgentStatus>, rule: &str) -> Observation {
        Observation {
            thread_id: self.state.thread_id.clone(),
            status,
            rule: format!("codex: {rule}"),
            record_ts: value["timestamp"].as_str().and_then(super::rfc3339_ms),
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
}

impl Decoder for RolloutDecoder {
    fn line(&mut self, line: &[u8], _at: &Locator, out: &mut Vec<Observation>) {
        let Ok(value) = serde_json::from_slice::<Value>(line) else {
            return;
        };
        let payload = &value["payload"];
        let kind = payload["type"].as_str().unwrap_or_default();
        match value["type"].as_str().unwrap_or_default() {
            "session_meta" => {
                if let Some(id) = payload["id"].as_str()
                    && id != self.state.thread_id
                    && !id.is_empty()
                    && self.state.thread_id.is_empty()
                {
                    self.state.thread_id = id.to_string();
                }
                let mut obs = self.observe(&value, None, "session_meta → cwd");
                obs.cwd = payload["cwd"].as_str().map(PathBuf::from);
                out.push(obs);
            }
            "turn_context" => {
                let mut obs = self.observe(&value, None, "turn_context → cwd");
                obs.cwd = payload["cwd"].as_str().map(PathBuf::from);
                if obs.cwd.is_some() {
                    out.push(obs);
                }
            }
            "event_msg" => match kind {
                "task_started" => {
                    self.state.open_calls.clear();
                    out.push(self.observe(
                        &value,
                        Some(AgentStatus::Running),
                        "event_msg/task_started → running",
                    ));
                }
                "task_complete" => {
                    self.state.open_calls.clear();
                    let failed = !payload["error"].is_null();
                    out.push(if failed {
                        self.observe(
                            &value,
                            Some(AgentStatus::Error),
                            "event_msg/task_complete with error → error",
                        )
                    } else {
                        self.observe(
                            &value,
                            Some(AgentStatus::Done),
                            "event_msg/task_complete → done",
                        )
                    });
                }
                "turn_aborted" => {
                    self.state.open_calls.clear();
                    let reason = payload["reason"].as_str().unwrap_or("unknown");
                    out.push(self.observe(
                        &value,
                        Some(AgentStatus::Interrupted),
                        &format!("event_msg/turn_aborted ({reason}) → interrupted"),
                    ));
                }
                "item_completed" if payload["item"]["type"] == "UserMessage" => {
                    if let Some(text) = content_text(&payload["item"]["content"])
                        && is_prompt_text(&text)
                    {
                        let mut obs = self.observe(
                            &value,
                            None,
                            "event_msg/item_completed UserMessage → prompt",
                        );
                        obs.last_user_prompt = Some(text);
                        out.push(obs);
                    }
                }
                "user_message" => {
                    if let Some(text) = payload["message"].as_str().filter(|t| is_prompt_text(t)) {
                        let mut obs = self.observe(&value, None, "event_msg/user_message → prompt");
                        obs.last_user_prompt = Some(text.to_string());
                        out.push(obs);
                    }
                }
                _ => {}
            },
            "response_item" => match kind {
                "function_call" | "custom_tool_call" | "local_shell_call" => {
                    if let Some(id) = payload["call_id"]
                        .as_str()
                        .or_else(|| payload["id"].as_str())
                    {
                        self.state.open_calls.insert(id.to_string());
                    }
                    out.push(self.observe(
                        &value,
                        Some(AgentStatus::ToolRunning),
                        &format!("response_item/{kind} without output → tool-running"),
                    ));
                }
                "function_call_output" | "custom_tool_call_output" | "local_shell_call_output" => {
                    if let Some(id) = payload["call_id"].as_str() {
                        self.state.open_calls.remove(id);
                    }
                    let status = self.after_call();
                    out.push(self.observe(
                        &value,
                        Some(status),
                        &format!("response_item/{kind} → running"),
                    ));
                }
                "message" if payload["role"] == "user" => {
                    if let Some(text) = content_text(&payload["content"])
                        && is_prompt_text(&text)
                    {
                        let mut obs =
                            self.observe(&value, None, "response_item/message role=user → prompt");
                        obs.last_user_prompt = Some(text);
                        out.push(obs);
                    }
                }
                _ => {}
            },
            _ => {}
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
