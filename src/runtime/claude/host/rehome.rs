//! Rehoming an adopted Claude (`POST /api/sessions/{id}/rehome`), for `ClaudeHost`: the same
//! session, the same Claude conversation, moved under cohost's own runner in the same pane.
//! Checked before anything is done (claude, `cohost-hook`, `cohost-runner`, a permission mode
//! this daemon allows); then — only in the verified pane, only when Claude is idle (no turn open,
//! its session file `idle`, the screen neither busy nor in a dialog: else `busy`) and its box
//! holds no draft (`human_typing`, as for a prompt) — the person's Claude is ended by SIGTERM, as
//! a relaunch ends a hosted one (no key is typed into it; Claude ends its session cleanly,
//! `SessionEnd{other}`), with the pane kept (`remain-on-exit`) whatever its own process was. Once
//! the process has gone and the pane still has the process it had at the adoption, the adopted
//! session task stops after saving its checkpoints (without closing the session),
//! `session.rehomed` records the transcript, and the pane runs `cohost-runner` with
//! `claude --settings <cohost's hooks> --permission-mode <mode> [--model <the model its
//! transcript last names>] --resume <id>` in the session's directory (`common::pane::respawn`): an ordinary hosted session from then on, whose Claude
//! re-renders the conversation and appends to the same transcript. A conversation with no prompt
//! yet has no transcript to resume: its Claude starts with `--session-id <id>`, the same id.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::launch::write_settings;
use super::{ClaudeHost, Command, READY_TIMEOUT};
use crate::process;
use crate::protocol::{EventKind, HostedSessionView, Runtime, SessionAdopted, SessionRehomed};
use crate::runtime::HostError;
use crate::runtime::claude::PermissionPolicy;
use crate::runtime::common::adopted::{self, AdoptedEnd};
use crate::runtime::common::{pane, send_signal, sibling_binary};
use crate::tail;

/// How long the person's Claude may take to exit after SIGTERM.
const EXIT_TIMEOUT: Duration = Duration::from_secs(15);

/// The most of a transcript's end read for the model it last ran on.
const MODEL_TAIL_BYTES: u64 = 4 << 20;

/// The model a transcript's conversation last ran on, from its last [`MODEL_TAIL_BYTES`]
/// (`formats::claude::last_model`); `None` when the file is missing or no line says.
fn transcript_model(transcript: &Path) -> Option<String> {
    use std::io::{Read, Seek, SeekFrom};
    let mut file = std::fs::File::open(transcript).ok()?;
    let len = file.metadata().ok()?.len();
    let start = len.saturating_sub(MODEL_TAIL_BYTES);
    file.seek(SeekFrom::Start(start)).ok()?;
    let mut bytes = Vec::new();
    file.take(MODEL_TAIL_BYTES).read_to_end(&mut bytes).ok()?;
    let text = String::from_utf8_lossy(&bytes);
    // A read from the middle of the file starts inside a line: it is skipped.
    let whole = if start > 0 {
        text.split_once('\n').map_or("", |(_, rest)| rest)
    } else {
        &text
    };
    // Passed as one argument's value: never something Claude could read as a flag.
    crate::formats::claude::last_model(whole.lines()).filter(|model| {
        !model.starts_with('-') && model.len() <= 200 && model.chars().all(|c| c.is_ascii_graphic())
    })
}

impl ClaudeHost {
    /// Moves the adopted Claude of `session_id` under cohost's own runner, in its pane.
    pub(super) async fn rehome(&self, session_id: &str) -> Result<HostedSessionView, HostError> {
        let live = self.live_session(session_id)?;
        let Some(adopted) = live.adopted.clone() else {
            return Err(HostError::NotAdopted(session_id.to_string()));
        };
        let unavailable = |e: String| HostError::unavailable(Runtime::Claude, e);
        let claude = super::find_claude().map_err(unavailable)?;
        let hook_bin = sibling_binary("cohost-hook", "COHOST_HOOK_BIN").map_err(unavailable)?;
        let runner = pane::runner(Runtime::Claude)?;
        let permission_mode = self.rehome_mode(session_id);
        if let Some(refusal) = self.permission_policy().refusal(&permission_mode) {
            return Err(HostError::Invalid(refusal));
        }
        // Nothing else is typed meanwhile: a prompt in flight finishes first.
        let _serialized = live.inject.lock().await;
        let _keys = live.keys.lock().await;
        let pane_id = self.verified_pane(session_id).await?;
        let busy = |what: &str| {
            HostError::Busy(format!(
                "the adopted claude in session `{session_id}` {what}; it is rehomed only when idle (nothing was done)"
            ))
        };
        let turn_open = self.inner.core.read(|state| {
            state
                .sessions
                .get(session_id)
                .is_some_and(|s| s.active_turn.is_some())
        });
        if turn_open {
            return Err(busy("runs a turn"));
        }
        let status = self.inner.session_file(&live).and_then(|file| file.status);
        if status.as_deref() != Some("idle") {
            return Err(busy(&format!(
                "is not idle (its session file says `{}`)",
                status.as_deref().unwrap_or("nothing")
            )));
        }
        let Some(screen) = self.box_screen(&live, session_id).await? else {
            return Err(HostError::Closed(session_id.to_string()));
        };
        if screen.busy {
            return Err(busy("runs a turn"));
        }
        if screen.dialog {
            return Err(busy("shows a dialog"));
        }
        if screen.has_draft() {
            return Err(HostError::HumanTyping(session_id.to_string()));
        }
        if screen.input.is_none() {
            return Err(busy("shows no input box"));
        }
        // What the resumed Claude runs, written before anything is done (only files in the
        // session's own directory): a failure here leaves the person's Claude running, adopted.
        let dir = live.dir.clone();
        let cwd = PathBuf::from(&self.view(session_id)?.cwd);
        let transcript_of = || async {
            tail::load_checkpoint(&dir.join("checkpoints").join("transcript.json"))
                .await
                .ok()
                .flatten()
                .map(|checkpoint| checkpoint.path)
                .unwrap_or_else(|| PathBuf::from(&adopted.transcript))
        };
        // A conversation with no prompt yet has no transcript, which `--resume` refuses ("No
        // conversation found"): its Claude starts under the same session id instead.
        let launch = |claude_session: &str, transcript: &Path| -> Result<(), HostError> {
            let settings = write_settings(&dir, &hook_bin, &permission_mode)?;
            let same_session = if transcript.is_file() {
                "--resume"
            } else {
                "--session-id"
            };
            let mut argv = vec![
                claude.to_string_lossy().into_owned(),
                "--settings".to_string(),
                settings.to_string_lossy().into_owned(),
                "--permission-mode".to_string(),
                permission_mode.clone(),
            ];
            // The model the person's Claude last ran on (`/model`, `--model`): `--resume` alone
            // would start on the default one.
            if let Some(model) = transcript_model(transcript) {
                argv.extend(["--model".to_string(), model]);
            }
            argv.extend([same_session.to_string(), claude_session.to_string()]);
            self.write_launch(session_id, &dir, &argv, &cwd, &Default::default())
        };
        launch(
            &self.conversation(session_id, &adopted),
            &transcript_of().await,
        )?;
        let tmux = self.tmux();
        let failed =
            |e: crate::tmux::TmuxError| HostError::failed_by(Runtime::Claude, e.to_string(), e);
        // The pane outlives Claude when Claude is the pane's own process.
        tmux.run(&["set-option", "-p", "-t", &pane_id, "remain-on-exit", "on"])
            .await
            .map_err(failed)?;
        let unset = || async {
            let _ = tmux
                .run(&["set-option", "-p", "-u", "-t", &pane_id, "remain-on-exit"])
                .await;
        };
        live.rehoming.store(true, Ordering::SeqCst);
        // The process is checked once more right before the signal (pid and start time).
        if let Some(end) = adopted::agent_problem(&adopted, "claude") {
            live.rehoming.store(false, Ordering::SeqCst);
            unset().await;
            tracing::info!(session = %session_id, ?end, "not rehoming: the adopted claude changed");
            return Err(HostError::Closed(session_id.to_string()));
        }
        send_signal(adopted.pid, libc::SIGTERM);
        let deadline = tokio::time::Instant::now() + EXIT_TIMEOUT;
        while process::alive(adopted.pid, Some(adopted.pid_start)) {
            if tokio::time::Instant::now() >= deadline {
                live.rehoming.store(false, Ordering::SeqCst);
                unset().await;
                return Err(HostError::NotReadyBecause(format!(
                    "claude (pid {}) did not exit within {EXIT_TIMEOUT:?} of SIGTERM in pane {pane_id}; it keeps running, adopted",
                    adopted.pid
                )));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // The session task reads what is queued, saves its checkpoints and stops, leaving the
        // session open.
        let (done, ended) = tokio::sync::oneshot::channel();
        live.commands
            .send(Command::End(AdoptedEnd::Rehomed, done))
            .await
            .map_err(|_| HostError::Closed(session_id.to_string()))?;
        let _ = ended.await;
        // From here the person's Claude is gone: what fails says how to get the conversation back.
        let lost = |what: String, claude_session: &str| {
            HostError::failed(
                Runtime::Claude,
                format!(
                    "{what}; the claude in pane {pane_id} has exited: `claude --resume {claude_session}` continues the conversation"
                ),
            )
        };
        // Written again as Claude left them: `/clear` typed in the pane meanwhile moved the
        // session to Claude's newer session, or a first prompt wrote the transcript.
        let claude_session = self.conversation(session_id, &adopted);
        let transcript = transcript_of().await;
        launch(&claude_session, &transcript).map_err(|e| lost(e.to_string(), &claude_session))?;
        let transcript = transcript.to_string_lossy().into_owned();
        self.inner
            .core
            .append(
                Some(session_id.to_string()),
                EventKind::SessionRehomed(SessionRehomed {
                    thread_id: claude_session.clone(),
                    rollout: transcript,
                }),
            )
            .await?;
        // Followed as a hosted session from here (its runner's lines, cohost's hooks), so it can
        // be closed or relaunched whatever happens next.
        let new = self.inner.start_following(session_id, dir.clone(), false);
        // The pane must still have the process it had when the Claude was adopted (its shell,
        // or the dead pane of the Claude that was its own process).
        match tmux.pane_pid(&pane_id).await {
            Some(pid) if pid == adopted.pane_pid => {}
            _ => {
                unset().await;
                return Err(lost(
                    format!(
                        "pane {pane_id} is gone or runs something else now; nothing was started there"
                    ),
                    &claude_session,
                ));
            }
        }
        pane::respawn(
            &self.inner.core,
            &self.inner.tmux,
            session_id,
            &pane_id,
            &adopted.tmux_session,
            &cwd,
            &runner,
            &dir,
        )
        .await
        .map_err(|e| {
            lost(
                format!("could not start claude in the pane: {e}"),
                &claude_session,
            )
        })?;
        unset().await;
        tracing::info!(session = %session_id, claude_session = %claude_session, pane = %pane_id, %permission_mode, "rehomed an adopted claude under cohost's runner");
        // Ready once the resumed Claude's SessionStart hook has run.
        let mut started = new.started.subscribe();
        let _ = tokio::time::timeout(READY_TIMEOUT, started.wait_for(|s| *s)).await;
        self.view(session_id)
    }

    /// The Claude conversation the session follows now (after `/clear`, not the one adopted).
    fn conversation(&self, session_id: &str, adopted: &SessionAdopted) -> String {
        self.inner
            .core
            .read(|state| {
                state
                    .sessions
                    .get(session_id)
                    .and_then(|s| s.thread_id.clone())
            })
            .unwrap_or_else(|| adopted.agent_session_id.clone())
    }

    /// The permission mode the rehomed Claude starts in: the session's own, else the one its
    /// Claude was seen running in when this daemon allows it, else hosted sessions' default.
    fn rehome_mode(&self, session_id: &str) -> String {
        let (created, seen) = self.inner.core.read(|state| {
            state
                .sessions
                .get(session_id)
                .map(|s| {
                    (
                        s.created.claude_permission_mode().map(|m| m.to_string()),
                        s.permission_mode_seen
                            .as_ref()
                            .filter(|seen| seen.allowed)
                            .map(|seen| seen.mode.to_string()),
                    )
                })
                .unwrap_or_default()
        });
        created
            .or(seen)
            .unwrap_or_else(|| PermissionPolicy::DEFAULT.to_string())
    }
}
