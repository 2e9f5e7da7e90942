//! Droid (Factory CLI): one JSONL file per session,
//! `~/.factory/sessions/<cwd with / as ->/<sessionId>.jsonl`, created at process start with a
//! `session_start` line, then one line per whole message, and an `agent_turn_outcome` line that
//! closes each turn. While Droid writes a session it holds short-lived lock directories beside it
//! (`<sessionId>.jsonl.events.lock/owner.json`, `<sessionId>.settings.json.lock/owner.json`,
//! each `{"token":…,"pid":…}`): the pid the engine checks for liveness. See docs/peers.md,
//! "Droid".
//!
//! Status: a user prompt or a `tool_result` → running; an assistant `tool_use` without its result
//! → tool-running; `agent_turn_outcome` `completed` → done, `model_request_rejected` (the model
//! answered with an error) → error, a reason naming a cancel/abort/interrupt → interrupted, any
//! other reason → error. The `context-…` user records (`<system-reminder>` tool lists) and the
//! `visibility`-tagged notices Droid writes as user messages (`BYOK Error: …`) are not prompts.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::format::{Decoder, FileKind, Format, Locator, Observation, WatchEnv, WatchedAgent};
use crate::formats::droid::{
    ContentBlock, LockOwner, MessageRecord, Role, SessionLine, SessionRecord,
};
use crate::protocol::AgentStatus;

/// Droid's watcher format.
#[derive(Debug, Default, Clone, Copy)]
pub struct Droid;

/// The suffixes of the lock directories whose `owner.json` names the writing process.
const LOCK_SUFFIXES: [&str; 2] = [".jsonl.events.lock", ".settings.json.lock"];

impl Format for Droid {
    fn agent(&self) -> WatchedAgent {
        WatchedAgent::Droid
    }

    /// `~/.factory/sessions`; `FACTORY_HOME_OVERRIDE` stands in for `$HOME` (Droid's own
    /// override). Not `~/.factory/projects`: current Droid does not write there.
    fn roots(&self, env: &WatchEnv) -> Vec<PathBuf> {
        let home = env
            .var("FACTORY_HOME_OVERRIDE")
            .map_or_else(|| env.home.clone(), PathBuf::from);
        vec![home.join(".factory/sessions")]
    }

    fn classify(&self, path: &Path) -> Option<FileKind> {
        let name = path.file_name()?.to_str()?;
        if name == "owner.json" {
            return lock_session_id(path).map(|_| FileKind::Snapshot);
        }
        (name.ends_with(".jsonl") && !name.starts_with('.')).then_some(FileKind::Lines)
    }

    fn decoder(&self, path: &Path, saved: Option<Value>) -> Box<dyn Decoder> {
        if let Some(session_id) = lock_session_id(path) {
            return Box::new(LockDecoder { session_id });
        }
        let restored = saved.and_then(|value| serde_json::from_value::<DroidDecoder>(value).ok());
        Box::new(restored.unwrap_or_else(|| {
            DroidDecoder {
                thread_id: path
                    .file_stem()
                    .and_then(|s| s.to_str())
                    .unwrap_or_default()
                    .to_string(),
                ..DroidDecoder::default()
            }
        }))
    }
}

/// The session id of a `<sessionId>.jsonl.events.lock/owner.json` (or `.settings.json.lock`).
fn lock_session_id(path: &Path) -> Option<String> {
    if path.file_name()? != "owner.json" {
        return None;
    }
    let dir = path.parent()?.file_name()?.to_str()?;
    LOCK_SUFFIXES
        .iter()
        .find_map(|suffix| dir.strip_suffix(suffix))
        .filter(|id| !id.is_empty())
        .map(str::to_string)
}

/// What one Droid session file has said so far (kept in the checkpoint).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DroidDecoder {
    /// `session_start.id` (equal to the file stem, which stands in before that line).
    thread_id: String,
    /// `tool_use` ids of the last assistant message without their `tool_result` yet.
    open_tool_uses: BTreeSet<String>,
}

impl DroidDecoder {
    fn observation(&self, rule: &str) -> Observation {
        Observation {
            thread_id: self.thread_id.clone(),
            rule: format!("droid: {rule}"),
            ..Observation::default()
        }
    }

    fn message(&mut self, record: &MessageRecord) -> Option<Observation> {
        let message = record.message.as_ref()?;
        let id = record.id.as_deref().unwrap_or_default();
        let blocks: &[ContentBlock] = &message.content;
        let of_type = |kind: &'static str| {
            blocks
                .iter()
                .filter(move |b| b.kind.as_deref() == Some(kind))
        };
        let observation = match message.role.as_ref()? {
            Role::User => {
                let results: Vec<&str> = of_type("tool_result")
                    .filter_map(|b| b.tool_use_id.as_deref())
                    .collect();
                if !results.is_empty() {
                    for id in results {
                        self.open_tool_uses.remove(id);
                    }
                    return Some(if self.open_tool_uses.is_empty() {
                        Observation {
                            status: Some(AgentStatus::Running),
                            ..self.observation("message/user tool_result → running")
                        }
                    } else {
                        Observation {
                            status: Some(AgentStatus::ToolRunning),
                            ..self.observation(
                                "message/user tool_result (calls still open) → tool-running",
                            )
                        }
                    });
                }
                // Injected context (`context-…`, `<system-reminder>`) and notices shown to the
                // user only (`visibility`, e.g. `BYOK Error: …`) are not prompts.
                if id.starts_with("context-") || message.has_visibility() {
                    return None;
                }
                let prompt = of_type("text")
                    .filter_map(|b| b.text.as_deref())
                    .filter(|t| !t.trim_start().starts_with("<system-reminder>"))
                    .collect::<Vec<_>>()
                    .join("\n")
                    .trim()
                    .to_string();
                if prompt.is_empty() {
                    return None;
                }
                self.open_tool_uses.clear();
                Observation {
                    status: Some(AgentStatus::Running),
                    last_user_prompt: Some(prompt),
                    ..self.observation("message/user prompt → running")
                }
            }
            Role::Assistant => {
                let uses: BTreeSet<String> =
                    of_type("tool_use").filter_map(|b| b.id.clone()).collect();
                if uses.is_empty() {
                    Observation {
                        status: Some(AgentStatus::Running),
                        ..self.observation(
                            "message/assistant text (turn open until agent_turn_outcome) → running",
                        )
                    }
                } else {
                    self.open_tool_uses = uses;
                    Observation {
                        status: Some(AgentStatus::ToolRunning),
                        ..self.observation("message/assistant tool_use → tool-running")
                    }
                }
            }
            Role::Other(_) => return None,
        };
        Some(observation)
    }
}

impl Decoder for DroidDecoder {
    fn line(&mut self, line: &[u8], _at: &Locator, out: &mut Vec<Observation>) {
        let Some(line) = SessionLine::from_slice(line) else {
            return;
        };
        let record_ts = line.timestamp.as_deref().and_then(iso_ms);
        let observation = match line.record {
            SessionRecord::SessionStart(start) => {
                if let Some(id) = start.id.filter(|id| !id.is_empty()) {
                    self.thread_id = id;
                }
                Observation {
                    status: Some(AgentStatus::Idle),
                    cwd: start.cwd.map(PathBuf::from),
                    title: start.title.filter(|t| !t.trim().is_empty()),
                    ..self.observation("session_start (thread id, title, cwd) → idle")
                }
            }
            SessionRecord::Message(record) => match self.message(&record) {
                Some(observation) => observation,
                None => return,
            },
            SessionRecord::AgentTurnOutcome(outcome) => {
                self.open_tool_uses.clear();
                let reason = outcome.reason.as_deref().unwrap_or_default();
                let lower = reason.to_ascii_lowercase();
                let status = if reason == "completed" {
                    AgentStatus::Done
                } else if ["cancel", "abort", "interrupt"]
                    .iter()
                    .any(|word| lower.contains(word))
                {
                    AgentStatus::Interrupted
                } else {
                    AgentStatus::Error
                };
                Observation {
                    status: Some(status),
                    ..self.observation(&format!(
                        "agent_turn_outcome reason {reason} → {}",
                        status.as_str()
                    ))
                }
            }
            SessionRecord::Other(_) => return,
        };
        out.push(Observation {
            record_ts,
            ..observation
        });
    }

    fn save(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

/// A lock directory's `owner.json`: the pid of the Droid process writing the session.
struct LockDecoder {
    session_id: String,
}

impl Decoder for LockDecoder {
    fn line(&mut self, _line: &[u8], _at: &Locator, _out: &mut Vec<Observation>) {}

    fn snapshot(&mut self, bytes: &[u8], out: &mut Vec<Observation>) {
        let Some(pid) = LockOwner::from_slice(bytes)
            .and_then(|owner| owner.pid)
            .and_then(|pid| u32::try_from(pid).ok())
        else {
            return;
        };
        out.push(Observation {
            thread_id: self.session_id.clone(),
            pid: Some(pid),
            rule: "droid: <session>.lock/owner.json pid → liveness".into(),
            ..Observation::default()
        });
    }

    // The lock is released after every write: its removal says nothing about the process.
}

/// An RFC 3339 timestamp (`2026-12-01T09:06:40.150Z`) as milliseconds since the epoch.
fn iso_ms(text: &str) -> Option<u64> {
    let at = chrono::DateTime::parse_from_rfc3339(text).ok()?;
    u64::try_from(at.timestamp_millis()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIR: &str = "/home/me/.factory/sessions/-home-me-proj";

    fn fixture(name: &str) -> String {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/watchers/droid/-home-me-proj")
            .join(name);
        std::fs::read_to_string(path).unwrap()
    }

    fn decode(id: &str) -> Vec<Observation> {
        let name = format!("{id}.jsonl");
        let mut decoder = Droid.decoder(&Path::new(DIR).join(&name), None);
        let mut out = Vec::new();
        let mut offset = 0u64;
        for line in fixture(&name).split_inclusive('\n') {
            let at = Locator::Offset { offset };
            decoder.line(line.trim_end().as_bytes(), &at, &mut out);
            offset += line.len() as u64;
        }
        assert!(out.iter().all(|o| o.thread_id == id), "{out:?}");
        out
    }

    fn statuses(observations: &[Observation]) -> Vec<AgentStatus> {
        observations.iter().filter_map(|o| o.status).collect()
    }

    use AgentStatus::*;

    #[test]
    fn recorded_tool_turn_runs_a_tool_and_completes() {
        let out = decode("8bd2c876-879b-4d96-995e-c996de365246");
        assert_eq!(
            statuses(&out),
            [Idle, Running, ToolRunning, Running, Running, Done]
        );
        assert_eq!(out[0].title.as_deref(), Some("Run echo hi please"));
        assert_eq!(out[0].cwd.as_deref(), Some(Path::new("/home/me/proj")));
        // The `context-…` <system-reminder> record is no prompt; the typed one is.
        let prompts: Vec<_> = out
            .iter()
            .filter_map(|o| o.last_user_prompt.as_deref())
            .collect();
        assert_eq!(prompts, ["Run echo hi please"]);
        assert!(out[1].record_ts.is_some());
        assert_eq!(
            out.last().unwrap().rule,
            "droid: agent_turn_outcome reason completed → done"
        );
    }

    #[test]
    fn recorded_failed_turn_is_an_error_and_its_notice_is_no_prompt() {
        let out = decode("b8b28d2c-7cff-4575-a0c0-ec30dd01c857");
        assert_eq!(statuses(&out), [Idle, Running, Error]);
        let prompts: Vec<_> = out
            .iter()
            .filter_map(|o| o.last_user_prompt.as_deref())
            .collect();
        assert_eq!(
            prompts,
            ["This one fails"],
            "the BYOK Error notice is not a prompt"
        );
    }

    #[test]
    fn recorded_interrupted_exec_ends_with_the_prompt() {
        // SIGINT to `droid exec` during a reply writes nothing more: the file ends with the
        // prompt, so the status stays running until liveness says the process is gone.
        let out = decode("01d7166b-38bb-4916-93ce-14dc064650c2");
        assert_eq!(statuses(&out), [Idle, Running]);
    }

    #[test]
    fn recorded_permission_refusal_in_exec_mode_completes_the_turn() {
        // `droid exec` without enough autonomy refuses the tool and still completes the turn.
        let out = decode("c3aebdcc-bd5e-4c30-b270-221e292350fd");
        assert_eq!(
            statuses(&out),
            [Idle, Running, ToolRunning, Running, Running, Done]
        );
    }

    #[test]
    fn a_restored_decoder_keeps_open_tool_uses() {
        let name = "8bd2c876-879b-4d96-995e-c996de365246.jsonl";
        let text = fixture(name);
        let lines: Vec<&str> = text.lines().collect();
        let path = Path::new(DIR).join(name);
        let mut first = Droid.decoder(&path, None);
        let mut out = Vec::new();
        for line in &lines[..4] {
            first.line(line.as_bytes(), &Locator::Snapshot, &mut out);
        }
        assert_eq!(out.last().unwrap().status, Some(ToolRunning));
        let mut second = Droid.decoder(&path, Some(first.save()));
        let mut out = Vec::new();
        second.line(lines[4].as_bytes(), &Locator::Snapshot, &mut out);
        assert_eq!(statuses(&out), [Running]);
        assert_eq!(out[0].thread_id, "8bd2c876-879b-4d96-995e-c996de365246");
    }

    #[test]
    fn unknown_outcomes_are_errors_or_interrupts_by_name() {
        let mut decoder = Droid.decoder(Path::new("/s/-x/abc.jsonl"), None);
        let mut out = Vec::new();
        for reason in ["user_cancelled", "aborted", "something_new"] {
            let line = format!(r#"{{"type":"agent_turn_outcome","reason":"{reason}"}}"#);
            decoder.line(line.as_bytes(), &Locator::Snapshot, &mut out);
        }
        assert_eq!(statuses(&out), [Interrupted, Interrupted, Error]);
    }

    #[test]
    fn lock_owner_files_give_the_pid_of_the_session() {
        let lock = Path::new(DIR).join("abc-123.jsonl.events.lock/owner.json");
        assert_eq!(Droid.classify(&lock), Some(FileKind::Snapshot));
        let mut decoder = Droid.decoder(&lock, None);
        let mut out = Vec::new();
        decoder.snapshot(br#"{"token":"t","pid":4657}"#, &mut out);
        decoder.removed(&mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].thread_id, "abc-123");
        assert_eq!(out[0].pid, Some(4657));
        assert!(!out[0].ended, "the lock is released after each write");
        let settings_lock = Path::new(DIR).join("abc-123.settings.json.lock/owner.json");
        assert_eq!(Droid.classify(&settings_lock), Some(FileKind::Snapshot));
        assert_eq!(Droid.classify(&Path::new(DIR).join("x/owner.json")), None);
        assert_eq!(
            Droid.classify(&Path::new(DIR).join("abc.settings.json")),
            None
        );
        assert_eq!(
            Droid.classify(&Path::new(DIR).join("abc.jsonl")),
            Some(FileKind::Lines)
        );
    }

    #[test]
    fn roots_follow_the_factory_home_override() {
        let mut env = WatchEnv {
            home: PathBuf::from("/h"),
            ..WatchEnv::default()
        };
        assert_eq!(Droid.roots(&env), [PathBuf::from("/h/.factory/sessions")]);
        env.vars
            .insert("FACTORY_HOME_OVERRIDE".into(), "/other".into());
        assert_eq!(
            Droid.roots(&env),
            [PathBuf::from("/other/.factory/sessions")]
        );
    }
}
