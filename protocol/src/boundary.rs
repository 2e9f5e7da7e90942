//! The files and requests that cross from the daemon to the programs it starts in a pane and
//! back: `launch.json` (the daemon → `cohost-runner`), `runner.jsonl` (the runner → the daemon),
//! `hooks.jsonl` lines (`cohost-hook` → the daemon) and the permission relay's request and
//! answer (`cohost-hook` ⇄ `POST /api/claude/permission`).
//!
//! One definition for all three programs: the daemon, `cohost-runner` and `cohost-hook` use
//! this module of the `cohost-protocol` crate, and it names nothing else of the crate. Readers
//! are permissive (unknown fields ignored, optional fields defaulted); the documented field
//! names are checked by a test against `runner/README.md` and `hooks/README.md`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `SESSION_DIR/launch.json`: what the runner starts.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Launch {
    /// The program and its arguments; must not be empty.
    pub argv: Vec<String>,
    /// The child's working directory; the runner's own when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<PathBuf>,
    /// Overlaid on the runner's environment; a `null` value removes the variable.
    #[serde(default)]
    pub env: BTreeMap<String, Option<String>>,
    /// The `~/.claude.json` entries to make sure of before each launch.
    #[serde(default)]
    pub seed_claude: Option<SeedClaude>,
    /// The id shown in the pane's "relaunch with" hint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SeedClaude {
    pub home: PathBuf,
    #[serde(default)]
    pub api_key: Option<String>,
    #[serde(default)]
    pub trust_dirs: Vec<PathBuf>,
}

/// One line of `SESSION_DIR/runner.jsonl`. Every line has `event`, `runnerPid`, `at` (ms since
/// the epoch) and `launch` (1 for the first launch attempt, +1 per attempt).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "event", rename_all = "lowercase")]
pub enum RunnerEvent {
    /// The child started.
    Started {
        #[serde(rename = "runnerPid")]
        runner_pid: u32,
        pid: u32,
        at: u64,
        launch: u32,
    },
    /// The child ended (by itself or by a signal).
    Exited {
        #[serde(rename = "runnerPid")]
        runner_pid: u32,
        pid: u32,
        code: Option<i32>,
        signal: Option<i32>,
        at: u64,
        launch: u32,
    },
    /// The runner itself stopped (SIGTERM, SIGHUP); no child runs after this.
    Stopped {
        #[serde(rename = "runnerPid")]
        runner_pid: u32,
        signal: i32,
        at: u64,
        launch: u32,
    },
    /// This launch attempt did not start a child; the runner waits for SIGUSR1/SIGTERM.
    Error {
        #[serde(rename = "runnerPid")]
        runner_pid: u32,
        message: String,
        at: u64,
        launch: u32,
    },
    /// Something went wrong but the launch goes ahead (e.g. the `.claude.json` seed).
    Warning {
        #[serde(rename = "runnerPid")]
        runner_pid: u32,
        message: String,
        at: u64,
        launch: u32,
    },
}

/// The child the runner says is running, reading its journal from the start: the pid of the
/// last `started` not followed by `exited` or `stopped` (after `stopped` nothing runs). Lines
/// that do not parse are skipped.
pub fn running_child<'a>(lines: impl IntoIterator<Item = &'a str>) -> Option<u32> {
    let mut running = None;
    for line in lines {
        match serde_json::from_str::<RunnerEvent>(line) {
            Ok(RunnerEvent::Started { pid, .. }) => running = Some(pid),
            Ok(RunnerEvent::Exited { .. } | RunnerEvent::Stopped { .. }) => running = None,
            _ => {}
        }
    }
    running
}

/// One line of `SESSION_DIR/hooks.jsonl`, appended by `cohost-hook <Event>`; also the body of
/// `POST /api/claude/hook`, where the machine-wide `cohost-hook --home <home> <Event>` reports
/// an event (its payload cut to the fields a status needs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HookLine {
    /// When the hook ran, ms since the epoch (the hook's own clock).
    pub received_at: u64,
    /// The hook event name from the hook's argv.
    pub event: String,
    /// `PermissionRequest` only: the id the hook relays the request under.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// Claude's stdin JSON (or a truncation / error marker).
    #[serde(default)]
    pub payload: Value,
}

/// `POST /api/claude/permission`: a `PermissionRequest` hook asks the daemon for a decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PermissionAsk {
    pub session_id: String,
    pub request_id: String,
    pub payload: Value,
}

/// The daemon's answer to a [`PermissionAsk`], in the shape of Claude's hook decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "behavior", rename_all = "lowercase")]
pub enum PermissionAnswer {
    /// Allowed; `updatedInput` replaces the tool's input (Claude's `AskUserQuestion` reads the
    /// person's answers from its `answers`), `updatedPermissions` changes permissions
    /// (`[{"type":"setMode","mode":…,"destination":"session"}]` after an approved plan).
    Allow {
        #[serde(
            default,
            rename = "updatedInput",
            skip_serializing_if = "Option::is_none"
        )]
        updated_input: Option<Value>,
        #[serde(
            default,
            rename = "updatedPermissions",
            skip_serializing_if = "Option::is_none"
        )]
        updated_permissions: Option<Value>,
    },
    Deny {
        #[serde(default)]
        message: Option<String>,
        #[serde(default)]
        interrupt: Option<bool>,
    },
    /// No decision: Claude shows its own dialog.
    Ask,
}

/// The daemon's answer to `POST /api/claude/hook`, where the machine-wide hook (`cohost hooks
/// install`) reports a [`HookLine`] of a Claude cohost does not host.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HookAnswer {
    /// The Claude watcher took the event's status for the Claude session.
    #[serde(default)]
    pub tracked: bool,
    /// `PermissionRequest` only: the cohost session that drives this Claude through the
    /// machine-wide hook. The hook then relays the request under it to
    /// `/api/claude/permission`. Absent: not cohost's to decide, and the hook prints nothing
    /// (Claude asks in its TUI).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relay_to: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every field the READMEs of the runner and the hook document is one these types write or
    /// read: renaming or dropping one breaks this test, not the programs at run time.
    #[test]
    fn the_documented_fields_are_in_the_types() {
        // The repository root, above this crate's folder.
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .ancestors()
            .find(|dir| dir.join("runner/README.md").is_file())
            .unwrap();
        let runner = std::fs::read_to_string(root.join("runner/README.md")).unwrap();
        let hooks = std::fs::read_to_string(root.join("hooks/README.md")).unwrap();
        let launch = serde_json::to_value(Launch {
            argv: vec!["/bin/true".into()],
            cwd: Some("/".into()),
            env: [("K".to_string(), None)].into_iter().collect(),
            seed_claude: Some(SeedClaude {
                home: "/h".into(),
                api_key: Some("k".into()),
                trust_dirs: vec!["/w".into()],
            }),
            session_id: Some("cs_1".into()),
        })
        .unwrap();
        for field in ["argv", "cwd", "env", "seedClaude", "sessionId"] {
            assert!(launch.get(field).is_some(), "launch.json lost `{field}`");
            assert!(
                runner.contains(&format!("`{field}`")),
                "runner/README.md no longer documents `{field}`"
            );
        }
        for field in ["home", "apiKey", "trustDirs"] {
            assert!(launch["seedClaude"].get(field).is_some(), "{field}");
            assert!(runner.contains(field), "{field}");
        }
        let events = [
            RunnerEvent::Started {
                runner_pid: 1,
                pid: 2,
                at: 3,
                launch: 1,
            },
            RunnerEvent::Exited {
                runner_pid: 1,
                pid: 2,
                code: Some(0),
                signal: None,
                at: 4,
                launch: 1,
            },
            RunnerEvent::Stopped {
                runner_pid: 1,
                signal: 15,
                at: 5,
                launch: 1,
            },
        ];
        for event in &events {
            let value = serde_json::to_value(event).unwrap();
            for field in ["event", "runnerPid", "at", "launch"] {
                assert!(value.get(field).is_some(), "{value}");
                assert!(runner.contains(&format!("`{field}`")), "{field}");
            }
            let line = serde_json::to_string(event).unwrap();
            assert!(
                runner.contains(&line[..line.find(',').unwrap()]),
                "runner/README.md shows no `{}` line",
                value["event"]
            );
        }
        let line = serde_json::to_value(HookLine {
            received_at: 1,
            event: "PermissionRequest".into(),
            request_id: Some("r".into()),
            payload: serde_json::json!({}),
        })
        .unwrap();
        for field in ["receivedAt", "event", "requestId", "payload"] {
            assert!(line.get(field).is_some(), "hooks.jsonl lost `{field}`");
            assert!(
                hooks.contains(&format!("`{field}`")) || hooks.contains(&format!("\"{field}\"")),
                "hooks/README.md no longer documents `{field}`"
            );
        }
    }

    #[test]
    fn the_journal_says_which_child_runs() {
        let lines = [
            r#"{"event":"started","runnerPid":1,"pid":10,"at":1,"launch":1}"#,
            r#"{"event":"exited","runnerPid":1,"pid":10,"code":0,"signal":null,"at":2,"launch":1}"#,
            r#"{"event":"started","runnerPid":1,"pid":11,"at":3,"launch":2}"#,
            "not json",
        ];
        assert_eq!(running_child(lines), Some(11));
        let stopped = r#"{"event":"stopped","runnerPid":1,"signal":15,"at":4,"launch":2}"#;
        assert_eq!(running_child(lines.into_iter().chain([stopped])), None);
        assert_eq!(running_child([]), None);
    }

    #[test]
    fn permission_answers_round_trip() {
        for (answer, json) in [
            (
                PermissionAnswer::Allow {
                    updated_input: None,
                    updated_permissions: None,
                },
                r#"{"behavior":"allow"}"#,
            ),
            (
                PermissionAnswer::Allow {
                    updated_input: Some(serde_json::json!({"answers": {"Q?": "A"}})),
                    updated_permissions: None,
                },
                r#"{"behavior":"allow","updatedInput":{"answers":{"Q?":"A"}}}"#,
            ),
            (PermissionAnswer::Ask, r#"{"behavior":"ask"}"#),
            (
                PermissionAnswer::Deny {
                    message: Some("no".into()),
                    interrupt: Some(true),
                },
                r#"{"behavior":"deny","message":"no","interrupt":true}"#,
            ),
        ] {
            assert_eq!(serde_json::to_string(&answer).unwrap(), json);
            assert_eq!(
                serde_json::from_str::<PermissionAnswer>(json).unwrap(),
                answer
            );
        }
    }
}
