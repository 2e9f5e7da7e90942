//! An adopted OpenCode's permission dialogs, relayed as approvals: read from the screen while a
//! turn runs, answered with the dialog's own key only on the exact known screen (see the parent
//! module's "Permissions").

use std::time::Duration;

use super::{Adopted, Adoptions, screen};
use crate::protocol::{ApprovalKind, ApprovalRequested, EventKind, Runtime};
use crate::runtime::HostError;
use crate::runtime::common::{adopted, hosted, lock};

/// How long `opencode --version` may take.
const VERSION_TIMEOUT: Duration = Duration::from_secs(30);

/// OpenCode's permission dialog, as its screen reader knows it.
const PROMPT: adopted::KnownPrompt<screen::Asked> = adopted::KnownPrompt {
    runtime: Runtime::Opencode,
    what: "permission dialog",
    agent: "opencode",
    releases: &screen::PERMISSION_RELEASES,
    key: screen::permission_key,
    read: |capture| screen::permission(capture).map(|d| (d.exact, d.asked)),
    describe: screen::Asked::describe,
};

/// The permission dialog on an adopted TUI's screen, as cohost knows it.
pub(super) type Shown = adopted::ScreenPrompt<screen::Asked>;

/// The approval a permission dialog asks for, the session's `n`th, in turn `turn_id`: a shell
/// command as `command`, an edit as `fileChange`, any other as `tool`; the dialog's title (and,
/// but for a command, its body) as the reason. Its id is `ap:<turn>:screen<n>:<kind>`.
pub(super) fn approval_request(
    turn_id: String,
    n: usize,
    asked: &screen::Asked,
) -> ApprovalRequested {
    let command = asked.command();
    let kind = if command.is_some() {
        ApprovalKind::Command
    } else if asked.title.starts_with("\u{2192} Edit ") {
        ApprovalKind::FileChange
    } else {
        ApprovalKind::Tool
    };
    let reason = if command.is_some() || asked.body.is_empty() {
        format!("opencode asks for permission: {}", asked.title)
    } else {
        format!(
            "opencode asks for permission: {}: {}",
            asked.title,
            asked.body.join("\n")
        )
    };
    ApprovalRequested {
        approval_id: format!("ap:{turn_id}:screen{n}:{}", kind.as_str()).into(),
        kind,
        turn_id,
        item_id: None,
        command,
        cwd: None,
        reason: Some(reason),
        decisions: screen::PERMISSION_DECISIONS
            .iter()
            .map(|d| (*d).into())
            .collect(),
    }
}

impl Adoptions {
    /// Looks at the screen for a permission dialog while a turn runs (or one is known): a new
    /// one is `approval.requested`; a pending one gone from two captures in a row was answered
    /// in the pane (`by: "pane"`). A later stage of the dialog (`Always allow`) keeps it
    /// pending. Skipped while cohost types (an answer in flight settles the dialog itself).
    pub(super) async fn watch_approval(&self, adopted: &Adopted) {
        let turn = lock(&adopted.follow).running.clone();
        if turn.is_none() && matches!(*lock(&adopted.approval), Shown::None) {
            return;
        }
        let Ok(_typing) = adopted.typing.try_lock() else {
            return;
        };
        let Ok(capture) = self.capture(adopted).await else {
            return;
        };
        let dialog = screen::permission(&capture);
        let session_id = &adopted.session_id;
        let state = std::mem::take(&mut *lock(&adopted.approval)).in_turn(turn.as_deref());
        let (next, event) = match (state, dialog) {
            (Shown::None, Some(dialog)) => match turn {
                // OpenCode draws the dialog before what it asks (a command shows once the tool's
                // input is stored): asked only once its body shows.
                Some(turn_id)
                    if dialog.stage == screen::PERMISSION_HEADER
                        && !dialog.asked.body.is_empty() =>
                {
                    let n = self.core.read(|state| {
                        state
                            .sessions
                            .get(session_id)
                            .map_or(0, |s| s.approvals.len())
                    });
                    let request = approval_request(turn_id, n, &dialog.asked);
                    let id = request.approval_id.to_string();
                    tracing::info!(session = %session_id, approval = %id, asked = ?dialog.asked, "a permission dialog on the adopted opencode's screen");
                    let shown = Shown::Pending {
                        id,
                        asked: dialog.asked,
                        misses: 0,
                    };
                    (shown, Some(EventKind::ApprovalRequested(request)))
                }
                _ => (Shown::None, None),
            },
            // Another permission asked: the pending one was answered in the pane meanwhile (the
            // new one is asked on the next look).
            (Shown::Pending { id, asked, .. }, Some(dialog))
                if dialog.stage == screen::PERMISSION_HEADER
                    && !dialog.asked.body.is_empty()
                    && dialog.asked != asked =>
            {
                (Shown::None, Some(adopted::resolved_in_pane(id, None)))
            }
            (state, dialog) => match state.after_capture(dialog.is_some()) {
                adopted::PromptAfter::Now(next) => (next, None),
                adopted::PromptAfter::Closed { id, .. } => {
                    (Shown::None, Some(adopted::resolved_in_pane(id, None)))
                }
            },
        };
        *lock(&adopted.approval) = next;
        if let Some(event) = event {
            hosted::store(&self.core, session_id, event, Runtime::Opencode).await;
        }
    }

    /// The release of the adopted OpenCode (`/proc/<pid>/exe --version`: the binary the
    /// process runs, also once replaced on disk), asked once; `None` when it cannot be told.
    async fn release(&self, adopted: &Adopted) -> Option<String> {
        let mut release = adopted.release.lock().await;
        if release.is_none() {
            let exe = format!("/proc/{}/exe", adopted.record.pid);
            let output = tokio::time::timeout(
                VERSION_TIMEOUT,
                tokio::process::Command::new(&exe)
                    .arg("--version")
                    .env("OPENCODE_DISABLE_AUTOUPDATE", "1")
                    .stdin(std::process::Stdio::null())
                    .kill_on_drop(true)
                    .output(),
            )
            .await;
            match output {
                Ok(Ok(output)) => {
                    *release = crate::peers::version_in(&String::from_utf8_lossy(&output.stdout));
                }
                Ok(Err(error)) => {
                    tracing::warn!(session = %adopted.session_id, %error, "cannot run `{exe} --version`");
                }
                Err(_) => {
                    tracing::warn!(session = %adopted.session_id, "`{exe} --version` timed out");
                }
            }
        }
        release.clone()
    }

    /// Answers the permission dialog on the adopted TUI's screen with its own key (Enter on
    /// `Allow once` accepts, Escape rejects: `cancel`), only when it is still pending here, the
    /// pane is verified, the TUI's release is one whose dialog is known, and the screen is
    /// exactly that dialog, `Allow once` selected, asking the same; else nothing is typed
    /// (`ScreenMismatch`). The first answer wins.
    pub async fn resolve_approval(
        &self,
        session_id: &str,
        approval_id: &str,
        decision: &str,
        by: &str,
    ) -> Result<(), HostError> {
        hosted::check_decision(decision, &screen::PERMISSION_DECISIONS)?;
        let adopted = self.live(session_id)?;
        let _typing = adopted.typing.lock().await;
        let Some(asked) = lock(&adopted.approval).pending(approval_id).cloned() else {
            return Err(hosted::not_pending(&self.core, session_id, approval_id));
        };
        self.verified(&adopted).await?;
        let release = self.release(&adopted).await;
        PROMPT
            .answer(
                self.tmux.tmux(),
                &adopted.record.pane_id,
                release.as_deref(),
                decision,
                &asked,
            )
            .await?;
        let turn = lock(&adopted.follow).running.clone();
        *lock(&adopted.approval) = Shown::Answered { turn };
        tracing::info!(session = %session_id, approval = %approval_id, decision, "answered the adopted opencode's permission dialog");
        hosted::record_resolved(&self.core, session_id, approval_id, decision, by).await
    }
}
