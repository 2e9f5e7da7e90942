//! Pi (`@mariozechner/pi-coding-agent` 0.73.1, `@earendil-works/pi-coding-agent` 1.6.0, the same
//! files): one JSONL file per session,
//! `~/.pi/agent/sessions/--<cwd with / as ->--/<ISO-ts>_<sessionId>.jsonl`, one line per whole
//! entry (a header, then messages, model changes, `session_info`, …), appended when an entry is
//! complete — nothing is written while a reply streams. See docs/peers.md, "Pi".
//!
//! Status comes from the last `message` entry: a user message opens a turn (running), an
//! assistant `stopReason:"toolUse"` runs tools until a `toolResult` answers each call
//! (tool-running), and `stop`/`length` → done, `aborted` → interrupted, `error` → error. Pi has
//! no approval prompts, so it is never waiting. The title is the last `session_info.name`, the
//! cwd the header's `cwd`, the prompt the last user message's text. Pi 1.x's `system` message
//! (the system prompt, before the first prompt) opens no turn.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::format::{
    Decoder, FileKind, Format, Locator, Observation, ProcessFacts, ThreadFacts, WatchEnv,
    WatchedAgent,
};
use crate::formats::pi::{
    AgentMessage, MessageContent, MessageEntry, Role, SessionEntry, Settings, StopReason,
};
use crate::protocol::AgentStatus;

/// Pi's watcher format.
#[derive(Debug, Default, Clone, Copy)]
pub struct Pi;

impl Format for Pi {
    fn agent(&self) -> WatchedAgent {
        WatchedAgent::Pi
    }

    /// `PI_CODING_AGENT_SESSION_DIR`, else `sessionDir` in `<agent dir>/settings.json`, else
    /// `<agent dir>/sessions`, where the agent dir is `PI_CODING_AGENT_DIR` or `~/.pi/agent`
    /// (Pi's own precedence, after its `--session-dir` flag, which no file records).
    fn roots(&self, env: &WatchEnv) -> Vec<PathBuf> {
        if let Some(dir) = env.var("PI_CODING_AGENT_SESSION_DIR") {
            return vec![expand_home(dir, env)];
        }
        let agent_dir = env
            .var("PI_CODING_AGENT_DIR")
            .map(|dir| expand_home(dir, env))
            .unwrap_or_else(|| env.home.join(".pi/agent"));
        let configured = std::fs::read(agent_dir.join("settings.json"))
            .ok()
            .and_then(|bytes| Settings::from_slice(&bytes))
            .and_then(|settings| settings.session_dir)
            .filter(|dir| !dir.is_empty());
        match configured {
            Some(dir) => vec![expand_home(&dir, env)],
            None => vec![agent_dir.join("sessions")],
        }
    }

    /// Pi's process is named `pi` (node sets its title).
    fn process_names(&self) -> &'static [&'static str] {
        &["pi"]
    }

    /// Pi names no pid in its files and holds none open (it appends and closes), so its process
    /// is the `pi` whose cwd is the session's and that no other live Pi thread took, the oldest
    /// first. The engine looks when a thread first appears (Pi 0.73.1 writes a session's first
    /// lines together once its first answer is complete, 1.6.0 at the first prompt) and at
    /// start-up; the pid's exit then ends the instance.
    fn pick_process(&self, thread: &ThreadFacts<'_>, candidates: &[ProcessFacts]) -> Option<u32> {
        let cwd = thread.cwd?;
        candidates
            .iter()
            .filter(|p| p.cwd.as_deref() == Some(cwd) && !thread.claimed.contains(&p.pid))
            .min_by_key(|p| (p.start_time, p.pid))
            .map(|p| p.pid)
    }

    fn classify(&self, path: &Path) -> Option<FileKind> {
        let name = path.file_name()?.to_str()?;
        (name.ends_with(".jsonl") && !name.starts_with('.')).then_some(FileKind::Lines)
    }

    fn decoder(&self, path: &Path, saved: Option<Value>) -> Box<dyn Decoder> {
        let restored = saved.and_then(|value| serde_json::from_value::<PiDecoder>(value).ok());
        Box::new(restored.unwrap_or_else(|| PiDecoder::new(path)))
    }
}

/// `~/x` and `~` in a configured directory, against the watched `$HOME`.
fn expand_home(dir: &str, env: &WatchEnv) -> PathBuf {
    match dir.strip_prefix("~") {
        Some(rest) if rest.is_empty() || rest.starts_with('/') => {
            env.home.join(rest.trim_start_matches('/'))
        }
        _ => PathBuf::from(dir),
    }
}

/// What one Pi session file has said so far (kept in the checkpoint).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PiDecoder {
    /// The header's `id`; before the header, the file name's suffix after `_`.
    thread_id: String,
    /// `toolCall` ids of the last assistant message without their `toolResult` yet.
    open_tool_calls: BTreeSet<String>,
    /// A title was given: by the first prompt (which stands in until the session is named) or
    /// by `session_info.name`.
    titled: bool,
}

impl PiDecoder {
    fn new(path: &Path) -> PiDecoder {
        let stem = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default();
        let thread_id = stem.rsplit_once('_').map_or(stem, |(_, id)| id).to_string();
        PiDecoder {
            thread_id,
            ..PiDecoder::default()
        }
    }

    fn observation(&self, rule: &str) -> Observation {
        Observation {
            thread_id: self.thread_id.clone(),
            rule: format!("pi: {rule}"),
            ..Observation::default()
        }
    }

    fn message(&mut self, entry: &MessageEntry, out: &mut Vec<Observation>) {
        let Some(message) = &entry.message else {
            return;
        };
        let record_ts = message
            .timestamp
            .or_else(|| entry.timestamp.as_deref().and_then(iso_ms));
        let observation = match &message.role {
            Some(Role::User) => {
                self.open_tool_calls.clear();
                let prompt = text_of(message.content.as_ref());
                let title = (!self.titled && !prompt.is_empty()).then(|| prompt.clone());
                self.titled |= title.is_some();
                Observation {
                    status: Some(AgentStatus::Running),
                    last_user_prompt: (!prompt.is_empty()).then_some(prompt),
                    title,
                    ..self.observation("message/user → running")
                }
            }
            Some(Role::ToolResult) => {
                if let Some(id) = &message.tool_call_id {
                    self.open_tool_calls.remove(id);
                }
                if self.open_tool_calls.is_empty() {
                    Observation {
                        status: Some(AgentStatus::Running),
                        ..self.observation("message/toolResult (all calls answered) → running")
                    }
                } else {
                    Observation {
                        status: Some(AgentStatus::ToolRunning),
                        ..self.observation("message/toolResult (calls still open) → tool-running")
                    }
                }
            }
            Some(Role::Assistant) => {
                let (status, rule) = match &message.stop_reason {
                    Some(StopReason::ToolUse) => {
                        self.open_tool_calls = tool_call_ids(message);
                        (
                            AgentStatus::ToolRunning,
                            "message/assistant stopReason toolUse → tool-running",
                        )
                    }
                    Some(StopReason::Stop) => (
                        AgentStatus::Done,
                        "message/assistant stopReason stop → done",
                    ),
                    Some(StopReason::Length) => (
                        AgentStatus::Done,
                        "message/assistant stopReason length (cut at the token limit) → done",
                    ),
                    Some(StopReason::Aborted) => (
                        AgentStatus::Interrupted,
                        "message/assistant stopReason aborted → interrupted",
                    ),
                    Some(StopReason::Error) => (
                        AgentStatus::Error,
                        "message/assistant stopReason error → error",
                    ),
                    // An assistant message without a known stop reason says nothing new.
                    Some(StopReason::Other(_)) | None => return,
                };
                if status != AgentStatus::ToolRunning {
                    self.open_tool_calls.clear();
                }
                Observation {
                    status: Some(status),
                    ..self.observation(rule)
                }
            }
            // `bashExecution` (a `!` command typed by the user), `custom`, summaries, Pi 1.x's
            // `system` prompt: no turn.
            _ => return,
        };
        out.push(Observation {
            record_ts,
            ..observation
        });
    }
}

impl Decoder for PiDecoder {
    fn line(&mut self, line: &[u8], _at: &Locator, out: &mut Vec<Observation>) {
        let Some(entry) = SessionEntry::from_slice(line) else {
            return;
        };
        match entry {
            SessionEntry::Session(header) => {
                if let Some(id) = header.id.filter(|id| !id.is_empty()) {
                    self.thread_id = id;
                }
                out.push(Observation {
                    cwd: header.cwd.map(PathBuf::from),
                    record_ts: header.timestamp.as_deref().and_then(iso_ms),
                    ..self.observation("session header (thread id, cwd)")
                });
            }
            SessionEntry::Message(message) => self.message(&message, out),
            SessionEntry::SessionInfo(info) => {
                let Some(name) = info.name.filter(|n| !n.trim().is_empty()) else {
                    return;
                };
                self.titled = true;
                out.push(Observation {
                    title: Some(name),
                    record_ts: info.timestamp.as_deref().and_then(iso_ms),
                    ..self.observation("session_info.name → title")
                });
            }
            SessionEntry::Other(_) => {}
        }
    }

    fn save(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

/// The ids of an assistant message's `toolCall` blocks.
fn tool_call_ids(message: &AgentMessage) -> BTreeSet<String> {
    let Some(MessageContent::Blocks(blocks)) = &message.content else {
        return BTreeSet::new();
    };
    blocks
        .iter()
        .filter(|block| block.kind.as_deref() == Some("toolCall"))
        .filter_map(|block| block.id.clone())
        .collect()
}

/// The text blocks of a message's content, joined (a plain string content is taken whole).
fn text_of(content: Option<&MessageContent>) -> String {
    match content {
        Some(MessageContent::Text(text)) => text.trim().to_string(),
        Some(MessageContent::Blocks(blocks)) => blocks
            .iter()
            .filter(|block| block.kind.as_deref() == Some("text"))
            .filter_map(|block| block.text.as_deref())
            .collect::<Vec<_>>()
            .join("\n")
            .trim()
            .to_string(),
        None => String::new(),
    }
}

/// An RFC 3339 timestamp (`2026-12-01T09:04:09.227Z`) as milliseconds since the epoch.
fn iso_ms(text: &str) -> Option<u64> {
    let at = chrono::DateTime::parse_from_rfc3339(text).ok()?;
    u64::try_from(at.timestamp_millis()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIXTURE: &str = include_str!("../../tests/fixtures/watchers/pi/session.jsonl");
    const FILE: &str = "/home/me/.pi/agent/sessions/--home-me-proj--/\
                        2026-12-01T14-09-46-787Z_01a231f0-af22-73af-834e-b6a674073bcc.jsonl";

    fn decode(decoder: &mut dyn Decoder, text: &str) -> Vec<Observation> {
        let mut out = Vec::new();
        let mut offset = 0u64;
        for line in text.split_inclusive('\n') {
            let at = Locator::Offset { offset };
            decoder.line(line.trim_end_matches('\n').as_bytes(), &at, &mut out);
            offset += line.len() as u64;
        }
        out
    }

    fn statuses(observations: &[Observation]) -> Vec<AgentStatus> {
        observations.iter().filter_map(|o| o.status).collect()
    }

    #[test]
    fn roots_follow_pi_overrides() {
        let mut env = WatchEnv {
            home: PathBuf::from("/nonexistent-home"),
            ..WatchEnv::default()
        };
        assert_eq!(
            Pi.roots(&env),
            [PathBuf::from("/nonexistent-home/.pi/agent/sessions")]
        );
        env.vars
            .insert("PI_CODING_AGENT_DIR".into(), "/opt/pi-agent".into());
        assert_eq!(Pi.roots(&env), [PathBuf::from("/opt/pi-agent/sessions")]);
        env.vars
            .insert("PI_CODING_AGENT_SESSION_DIR".into(), "~/pi-sessions".into());
        assert_eq!(
            Pi.roots(&env),
            [PathBuf::from("/nonexistent-home/pi-sessions")]
        );
    }

    #[test]
    fn session_dir_in_settings_is_honoured() {
        let home = tempfile::tempdir().unwrap();
        let agent = home.path().join(".pi/agent");
        std::fs::create_dir_all(&agent).unwrap();
        std::fs::write(
            agent.join("settings.json"),
            r#"{"sessionDir":"~/elsewhere"}"#,
        )
        .unwrap();
        let env = WatchEnv {
            home: home.path().to_path_buf(),
            ..WatchEnv::default()
        };
        assert_eq!(Pi.roots(&env), [home.path().join("elsewhere")]);
    }

    #[test]
    fn recorded_session_gives_tool_interrupt_error_and_name() {
        let mut decoder = Pi.decoder(Path::new(FILE), None);
        let out = decode(decoder.as_mut(), FIXTURE);
        assert!(
            out.iter()
                .all(|o| o.thread_id == "01a231f0-af22-73af-834e-b6a674073bcc")
        );
        assert_eq!(out[0].cwd.as_deref(), Some(Path::new("/home/me/proj")));
        use AgentStatus::*;
        assert_eq!(
            statuses(&out),
            [
                Running,     // "Run echo hi please"
                ToolRunning, // toolCall bash
                Running,     // toolResult
                Done,        // stop
                Running,     // "Tell me a long story"
                Interrupted, // aborted (Escape)
                Running,     // "This one fails"
                Error,       // 400 from the model
            ]
        );
        let prompts: Vec<_> = out
            .iter()
            .filter_map(|o| o.last_user_prompt.as_deref())
            .collect();
        assert_eq!(
            prompts,
            [
                "Run echo hi please",
                "Tell me a long story",
                "This one fails"
            ]
        );
        assert_eq!(
            out.last().unwrap().title.as_deref(),
            Some("My watcher test")
        );
        assert!(out.iter().all(|o| o.rule.starts_with("pi: ")));
        assert!(out.iter().all(|o| o.pid.is_none() && !o.ended));
    }

    /// Pi 1.6.0's file of the same turns (recorded by the watcher test): a `system` message
    /// before the first prompt, more fields on replies — read as 0.73.1's.
    #[test]
    fn recorded_1_6_0_session_reads_as_0_73_1() {
        const FIXTURE_1_6_0: &str =
            include_str!("../../tests/fixtures/watchers/pi/session-1.6.0.jsonl");
        const FILE_1_6_0: &str = "/home/me/.pi/agent/sessions/--home-me-proj--/\
                                  2026-12-02T22-25-17-287Z_01a238dc-b1e7-7333-bc85-630a481bd88e.jsonl";
        let lines: Vec<&str> = FIXTURE_1_6_0.lines().collect();
        assert!(lines[3].contains(r#""role":"system""#), "{}", lines[3]);
        let mut decoder = Pi.decoder(Path::new(FILE_1_6_0), None);
        let out = decode(decoder.as_mut(), FIXTURE_1_6_0);
        assert!(
            out.iter()
                .all(|o| o.thread_id == "01a238dc-b1e7-7333-bc85-630a481bd88e")
        );
        assert_eq!(out[0].cwd.as_deref(), Some(Path::new("/home/me/proj")));
        use AgentStatus::*;
        assert_eq!(
            statuses(&out),
            [
                Running,     // "Run echo hi please"
                ToolRunning, // toolCall bash
                Running,     // toolResult
                Done,        // stop
                Running,     // "Tell me a long story"
                Interrupted, // aborted (Escape)
                Running,     // "This one fails"
                Error,       // 400 from the model
            ]
        );
        // The system message says nothing: after the header, the first observation is the
        // prompt's, which titles the session until it is named.
        assert_eq!(
            out[1].last_user_prompt.as_deref(),
            Some("Run echo hi please")
        );
        assert_eq!(out[1].title.as_deref(), Some("Run echo hi please"));
        assert_eq!(
            out.last().unwrap().title.as_deref(),
            Some("My watcher test")
        );
        // The header and the system message alone (before the prompt is read): no status.
        let mut decoder = Pi.decoder(Path::new(FILE_1_6_0), None);
        let head = decode(decoder.as_mut(), &lines[..4].join("\n"));
        assert_eq!(statuses(&head), []);
        assert!(
            head.iter()
                .all(|o| o.title.is_none() && o.last_user_prompt.is_none())
        );
    }

    #[test]
    fn a_restored_decoder_continues_where_the_saved_one_stopped() {
        let lines: Vec<&str> = FIXTURE.lines().collect();
        let mut first = Pi.decoder(Path::new(FILE), None);
        // Up to and including the assistant's toolCall: one call is open.
        decode(first.as_mut(), &lines[..5].join("\n"));
        let saved = first.save();
        let mut second = Pi.decoder(Path::new(FILE), Some(saved));
        let out = decode(second.as_mut(), &lines[5..].join("\n"));
        assert_eq!(out[0].status, Some(AgentStatus::Running), "{out:?}");
        assert_eq!(out[0].thread_id, "01a231f0-af22-73af-834e-b6a674073bcc");
        // The first prompt gave the title: later prompts do not replace it.
        assert!(
            !out.iter()
                .any(|o| o.title.as_deref() == Some("Tell me a long story"))
        );
    }

    #[test]
    fn parallel_tool_calls_stay_tool_running_until_each_is_answered() {
        let mut decoder = Pi.decoder(Path::new("/s/2026_abc.jsonl"), None);
        let text = [
            r#"{"type":"message","message":{"role":"assistant","content":[{"type":"toolCall","id":"a"},{"type":"toolCall","id":"b"}],"stopReason":"toolUse"}}"#,
            r#"{"type":"message","message":{"role":"toolResult","toolCallId":"a"}}"#,
            r#"{"type":"message","message":{"role":"toolResult","toolCallId":"b"}}"#,
            r#"not json"#,
            r#"{"type":"message","message":{"role":"bashExecution","command":"ls"}}"#,
        ]
        .join("\n");
        let out = decode(decoder.as_mut(), &text);
        use AgentStatus::*;
        assert_eq!(statuses(&out), [ToolRunning, ToolRunning, Running]);
        assert_eq!(
            out[0].thread_id, "abc",
            "the file name's id stands in before the header"
        );
    }

    #[test]
    fn only_jsonl_files_are_sessions() {
        assert_eq!(
            Pi.classify(Path::new("/s/--x--/a_b.jsonl")),
            Some(FileKind::Lines)
        );
        assert_eq!(Pi.classify(Path::new("/s/settings.json")), None);
        assert_eq!(Pi.classify(Path::new("/s/.a.jsonl.tmp")), None);
    }
}
