//! What Claude asks a person, for `ClaudeHost`: `AskUserQuestion` and `ExitPlanMode` reach cohost
//! as `PermissionRequest` hooks (both supported releases), held here until a surface answers;
//! and the permission mode of a live, idle session, cycled with shift+tab in its verified pane.
//!
//! The answers are Claude's own hook decisions (see `docs/peers.md`): a question is allowed with
//! `updatedInput.answers` (`{question text: label}`), a rejected plan is denied with the feedback
//! as the message, an approved plan is allowed with a `setMode` permission update. 2.1.332 does
//! not take a hook's `allow` for `ExitPlanMode` and shows its "Exit plan mode?" dialog instead:
//! cohost then chooses the dialog's "Yes" in the pane it launched, and confirms on screen that
//! the dialog closed.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::oneshot;

use super::{
    ClaudeHost, HOOK_CONNECT_GRACE, HookLine, Normalizer, Output, PERMISSION_TIMEOUT, lock, now_ms,
    screen,
};
use crate::protocol::{
    EventKind, Field, InputAnswer, InputKind, InputRequested, InputResolved, ResolvedBy, Runtime,
    SessionMode,
};
use crate::runtime::{Capability, HostError};

/// The modes `PUT …/mode` can set on a Claude session (each also allowed by the daemon's
/// permission policy); shift+tab cycles `default → acceptEdits → plan → auto → default`.
pub const MODES: [&str; 3] = ["default", "acceptEdits", "plan"];

/// How long `set_mode` waits for a session that just ended a turn to be idle.
const IDLE_WAIT: Duration = Duration::from_secs(3);

/// The most shift+tab presses one mode change takes (the cycle has at most five modes).
const MAX_CYCLE: usize = 6;

/// A hook waiting for a person's answer.
pub(in crate::runtime::claude) struct PendingInput {
    session_id: String,
    /// The tool's input as Claude sent it (a question's answer is sent back inside it).
    tool_input: Value,
    reply: oneshot::Sender<Value>,
}

/// The mode Claude's footer names, if the screen shows one (none: `default` on 2.1.197).
fn footer_mode(screen: &str) -> Option<&'static str> {
    // The footer is below the input box (the last line starting with `❯`).
    let lines: Vec<&str> = screen.lines().collect();
    let start = lines
        .iter()
        .rposition(|line| line.starts_with('❯'))
        .unwrap_or(0);
    let footer = lines[start..].join("\n");
    if footer.contains("plan mode on") {
        Some("plan")
    } else if footer.contains("accept edits on") {
        Some("acceptEdits")
    } else if footer.contains("auto mode on") {
        Some("auto")
    } else if footer.contains("bypass permissions on") {
        Some("bypassPermissions")
    } else {
        None
    }
}

impl ClaudeHost {
    /// The `PermissionRequest` of `AskUserQuestion` or `ExitPlanMode`: stored as an input
    /// request, answered by [`ClaudeHost::answer_request`]. `None` for every other tool.
    pub(super) async fn input_permission(
        &self,
        session_id: &str,
        request_id: &str,
        payload: &Value,
    ) -> Option<Result<Value, HostError>> {
        let tool = payload.get("tool_name").and_then(Value::as_str)?;
        if tool != "AskUserQuestion" && tool != "ExitPlanMode" {
            return None;
        }
        let line = HookLine::permission_request(now_ms(), request_id, payload);
        let claude_session = line.payload.common.session_id.clone().unwrap_or_default();
        let mut normalizer = Normalizer::resume(Some(claude_session), None, None);
        let request = normalizer
            .hook_line(&line, now_ms())
            .into_iter()
            .find_map(|output| match output {
                Output::Store(EventKind::InputRequested(request)) => Some(request),
                _ => None,
            })?;
        let id = request.request_id.clone();
        let (reply, answered) = oneshot::channel();
        lock(&self.inner.inputs).insert(
            id.clone(),
            PendingInput {
                session_id: session_id.to_string(),
                tool_input: payload.get("tool_input").cloned().unwrap_or(json!({})),
                reply,
            },
        );
        self.inner
            .store(session_id, EventKind::InputRequested(request))
            .await;
        let decision = tokio::select! {
            decision = answered => decision.ok(),
            _ = tokio::time::sleep(PERMISSION_TIMEOUT) => None,
            _ = self.inner.cancel.cancelled() => None,
        };
        lock(&self.inner.inputs).remove(&id);
        Some(Ok(match decision {
            Some(decision) => decision,
            None => {
                // Nobody answered in time: Claude shows its own dialog to whoever is at the pane.
                self.inner
                    .store(
                        session_id,
                        EventKind::InputResolved(InputResolved::moot(&id, ResolvedBy::Runtime)),
                    )
                    .await;
                json!({ "behavior": "ask" })
            }
        }))
    }

    /// Answers a question or a plan (see `SessionHost::answer_request`).
    pub(super) async fn answer_request(
        &self,
        session_id: &str,
        request: &InputRequested,
        answer: InputAnswer,
    ) -> Result<Option<String>, HostError> {
        if !matches!(request.kind, InputKind::Question | InputKind::Plan) {
            return Err(HostError::Unsupported(format!(
                "claude sessions do not ask {} requests",
                request.kind.as_str()
            )));
        }
        self.live_session(session_id)?;
        let approve = answer.decision.as_deref() == Some("approve");
        let mode = (request.kind == InputKind::Plan && approve)
            .then(|| answer.mode.clone().unwrap_or_else(|| "default".into()));
        if let Some(mode) = &mode
            && let Some(refusal) = self.permission_policy().refusal(mode)
        {
            return Err(HostError::field(Field::Mode, refusal));
        }
        // The hook writes its line before it connects: an answer can come first. Wait a little.
        let deadline = tokio::time::Instant::now() + HOOK_CONNECT_GRACE;
        let pending = loop {
            let taken = {
                let mut inputs = lock(&self.inner.inputs);
                match inputs.get(&request.request_id) {
                    Some(pending) if pending.session_id == session_id => {
                        inputs.remove(&request.request_id)
                    }
                    _ => None,
                }
            };
            if let Some(pending) = taken {
                break pending;
            }
            let resolved = self.inner.core.read(|state| {
                state
                    .sessions
                    .get(session_id)
                    .and_then(|s| s.requests.get(&request.request_id))
                    .is_none_or(|r| r.resolved.is_some())
            });
            if resolved || tokio::time::Instant::now() >= deadline {
                return Err(HostError::RequestResolved(request.request_id.clone()));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        let decision = match (request.kind, &mode) {
            (InputKind::Question, _) => {
                let mut input = pending.tool_input.clone();
                let answers: serde_json::Map<String, Value> = answer
                    .answer_lists()
                    .into_iter()
                    .map(|(question, labels)| (question, json!(labels.join(", "))))
                    .collect();
                input["answers"] = Value::Object(answers);
                json!({ "behavior": "allow", "updatedInput": input })
            }
            (_, Some(mode)) => json!({
                "behavior": "allow",
                "updatedPermissions": [{ "type": "setMode", "mode": mode, "destination": "session" }],
            }),
            (_, None) => json!({
                "behavior": "deny",
                "message": answer
                    .feedback
                    .clone()
                    .filter(|f| !f.trim().is_empty())
                    .unwrap_or_else(|| "The user rejected the plan. Keep planning.".into()),
            }),
        };
        if pending.reply.send(decision).is_err() {
            return Err(HostError::RequestResolved(request.request_id.clone()));
        }
        let mut resolved = answer.record(
            request,
            answer
                .by
                .as_deref()
                .map_or(ResolvedBy::Api, ResolvedBy::from),
        );
        resolved.mode = mode.clone();
        match self
            .inner
            .core
            .append(
                Some(session_id.to_string()),
                EventKind::InputResolved(resolved),
            )
            .await
        {
            Ok(_) | Err(crate::core::CoreError::Duplicate) => {}
            Err(error) => return Err(error.into()),
        }
        if mode.is_some() {
            // 2.1.332 asks again in its own dialog; choose its "Yes" in our pane.
            let host = self.clone();
            let session = session_id.to_string();
            tokio::spawn(async move { host.confirm_plan_dialog(&session).await });
        }
        Ok(None)
    }

    /// After an approved plan: if the pane shows "Exit plan mode?" within a few seconds, choose
    /// its first "Yes" option (once it has been up a second: a key sent the moment a dialog
    /// appears can be ignored), then confirm the dialog closed.
    async fn confirm_plan_dialog(&self, session_id: &str) {
        let Ok(live) = self.live_session(session_id) else {
            return;
        };
        let _keys = live.keys.lock().await;
        let Ok(pane) = self.verified_pane(session_id).await else {
            return;
        };
        let deadline = tokio::time::Instant::now() + Duration::from_secs(6);
        let mut seen_at = None;
        while tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(150)).await;
            let Ok(capture) = self.tmux().capture(&pane).await else {
                return;
            };
            if !capture.contains("Exit plan mode?") {
                if seen_at.is_some() {
                    tracing::info!(session = session_id, "plan approved in the TUI's dialog");
                    return;
                }
                continue;
            }
            let since = *seen_at.get_or_insert_with(tokio::time::Instant::now);
            if since.elapsed() < Duration::from_secs(1) {
                continue;
            }
            let choice = capture.lines().find_map(|line| {
                let line = line.trim_start_matches([' ', '❯']).trim_start();
                let (digit, rest) = line.split_once(". ")?;
                (digit.len() == 1 && rest.starts_with("Yes")).then(|| digit.to_string())
            });
            let Some(choice) = choice else {
                tracing::warn!(
                    session = session_id,
                    "the exit-plan dialog shows no Yes option"
                );
                return;
            };
            if let Err(error) = self.tmux().send_keys(&pane, &[choice.as_str()]).await {
                tracing::warn!(session = session_id, %error, "could not answer the exit-plan dialog");
                return;
            }
            // Wait for it to close (checked above on the next rounds).
            seen_at = Some(tokio::time::Instant::now() - Duration::from_secs(60));
        }
    }

    /// Cycles the permission mode of an idle session with shift+tab until the footer names
    /// `mode`, then stores `session.mode`. The hooks' `permission_mode` shows it from the next
    /// prompt on.
    pub(super) async fn set_mode(
        &self,
        session_id: &str,
        mode: &str,
    ) -> Result<Capability, HostError> {
        let live = self.live_session(session_id)?;
        if let Some(refusal) = self.permission_policy().refusal(mode) {
            return Err(HostError::field(Field::Mode, refusal));
        }
        // Right after a turn the session file can say `busy` a moment longer: wait a little.
        let deadline = tokio::time::Instant::now() + IDLE_WAIT;
        loop {
            let turn_open = self.inner.core.read(|state| {
                state
                    .sessions
                    .get(session_id)
                    .is_some_and(|s| s.active_turn.is_some())
            });
            if !turn_open && live.status.borrow().as_str() != "busy" {
                break;
            }
            if tokio::time::Instant::now() >= deadline {
                return Ok(Capability::fail(
                    "busy",
                    "the session is running a turn; set its mode when it is idle",
                ));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let _keys = live.keys.lock().await;
        let pane = self.verified_pane(session_id).await?;
        let capture = |pane: String| async move {
            self.tmux()
                .capture(&pane)
                .await
                .map_err(|e| HostError::failed_by(Runtime::Claude, e.to_string(), e))
        };
        for _ in 0..MAX_CYCLE {
            let screen_text = capture(pane.clone()).await?;
            let analysis = screen::analyze(&screen_text);
            if analysis.dialog || analysis.input.is_none() {
                return Ok(Capability::fail(
                    "busy",
                    "the TUI shows a dialog, not its input box; set the mode when it is idle",
                ));
            }
            let current = footer_mode(&screen_text).unwrap_or("default");
            if current == mode {
                match self
                    .inner
                    .core
                    .append(
                        Some(session_id.to_string()),
                        EventKind::SessionMode(SessionMode { mode: mode.into() }),
                    )
                    .await
                {
                    Ok(_) | Err(crate::core::CoreError::Duplicate) => {}
                    Err(error) => return Err(error.into()),
                }
                return Ok(Capability::ok(json!({ "mode": mode })));
            }
            self.tmux()
                .send_keys(&pane, &["BTab"])
                .await
                .map_err(|e| HostError::failed_by(Runtime::Claude, e.to_string(), e))?;
            // Wait for the footer to change before the next press.
            let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
            while tokio::time::Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(100)).await;
                let after = capture(pane.clone()).await?;
                if footer_mode(&after).unwrap_or("default") != current {
                    break;
                }
            }
        }
        Ok(Capability::fail(
            "error",
            format!("the footer never showed `{mode}` after cycling the modes"),
        ))
    }
}
