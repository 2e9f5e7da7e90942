//! The claude host: the real `claude` TUI in a tmux pane cohost owns, observed through hooks, its
//! transcript and its session file, and driven by typing.
//!
//! Each session has a directory under `$COHOST_HOME/claude/<id>/` with `launch.json` (what
//! `cohost-runner` starts), `settings.json` (the hooks), `hooks.jsonl` (appended by
//! `cohost-hook`), `runner.jsonl` (the runner's lifecycle) and `checkpoints/` (tail offsets).
//! One task per session tails the three files, feeds them to the [`Normalizer`] and is the only
//! producer of the session's events. Injects are serialized per session, only go into the pane
//! this session launched (pane id and runner pid must match), never into a human's draft, and are
//! reported `started` only once Claude confirms the prompt (`UserPromptSubmit`).
//!
//! Its API is its [`SessionHost`](crate::runtime::SessionHost) (`seam.rs`, which also restores,
//! forks and closes sessions); this file holds its state (`Inner`, one `Live` per followed
//! session) and what every concern needs (the live session, the verified pane). Each concern has
//! its own file: `launch.rs` (create, relaunch), `prompt.rs` (typing a prompt, driven by the pure
//! `typing.rs` machine), `draft.rs` (the input box: a human's draft, clearing it with the pure
//! `clearing.rs` machine), `interrupt.rs` (one Escape), `redraw.rs` (one Ctrl+L when the pane
//! shows no box), `permissions.rs` (the permission relay), `asks.rs` (questions, plans, modes),
//! `queued.rs` (prompts Claude queued, followed until they run), `follow.rs` (the session task),
//! `adopt.rs` (a Claude a person started by hand, driven in its own pane: the same session
//! task, typing and interrupt, no runner) and `rehome.rs` (such a Claude ended in its pane and
//! its conversation resumed there under a runner, hosted).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use tokio::sync::{broadcast, mpsc, oneshot, watch};
use tokio_util::sync::CancellationToken;

use super::PermissionPolicy;
use super::normalize::{Normalizer, Output};
use super::screen;
use crate::core::{CoreError, CoreHandle, now_ms};
use crate::formats::claude::HookLine;
use crate::protocol::{AgentStatus, EventKind, HostedSessionView, Runtime};
use crate::runtime::HostError;
use crate::runtime::common::pane::{self, PaneProblem};
use crate::runtime::common::{caught, hosted, lock};
use crate::tmux::{SessionCache, Tmux};

mod adopt;
mod asks;
mod clearing;
mod draft;
mod follow;
mod interrupt;
mod launch;
mod permissions;
mod prompt;
mod queued;
mod redraw;
mod rehome;
mod session_host;
mod typing;

pub use asks::MODES;
use launch::fork_parent;
pub use launch::{find_claude, hook_settings};
use permissions::HOOK_CONNECT_GRACE;
pub use permissions::PERMISSION_TIMEOUT;
use typing::READY_TIMEOUT;

#[derive(Debug, Clone)]
pub struct ClaudeConfig {
    pub cohost_home: PathBuf,
    /// The daemon's own URL, for the permission hook.
    pub socket: PathBuf,
    pub token_file: PathBuf,
    /// The permission modes sessions may run in.
    pub permission_modes: PermissionPolicy,
    /// Where a follower's panic is recorded for health and doctor.
    pub failures: crate::failures::TaskFailures,
}

/// `POST /api/sessions` for `runtime: "claude"`, validated.
#[derive(Debug, Clone, Default)]
pub struct CreateClaude {
    pub cwd: PathBuf,
    pub model: Option<String>,
    pub permission_mode: Option<String>,
    pub tmux_session: Option<String>,
    pub idempotency_key: Option<String>,
    /// `--resume <claude session id>` with `--fork-session`: start as a fork of that conversation.
    pub fork_of: Option<(String, String)>,
    /// The profile the session starts from (a fork keeps its parent's).
    pub profile: Option<crate::protocol::SessionProfile>,
}

#[derive(Clone)]
pub struct ClaudeHost {
    inner: Arc<Inner>,
}

struct Inner {
    core: CoreHandle,
    tmux: Arc<SessionCache>,
    config: ClaudeConfig,
    live: Mutex<HashMap<String, Arc<Live>>>,
    /// Permission requests waiting for a decision, by approval id.
    permissions: Mutex<HashMap<String, (String, oneshot::Sender<String>)>>,
    /// `AskUserQuestion` / `ExitPlanMode` hooks waiting for a person's answer, by request id.
    inputs: Mutex<HashMap<String, asks::PendingInput>>,
    /// Held through an adoption's checks and records (`adopt.rs`).
    adopting: tokio::sync::Mutex<()>,
    cancel: CancellationToken,
}

struct Live {
    session_id: String,
    dir: PathBuf,
    home: Option<PathBuf>,
    inject: tokio::sync::Mutex<()>,
    /// Held by whoever sends Escape to the box (an interrupt, a clear of a handed-back prompt),
    /// so one never reads the box while the other changes it.
    keys: tokio::sync::Mutex<()>,
    /// When the last turn ended interrupted: Claude may still put its prompt back into the box.
    interrupted_at: Mutex<Option<tokio::time::Instant>>,
    /// When cohost last asked the TUI to redraw its screen (`redraw.rs`).
    redrawn_at: Mutex<Option<tokio::time::Instant>>,
    /// `(turn id, text)` of each prompt Claude confirmed.
    /// Without a turn id: Claude queued it behind the running turn (2.1.332 says so at once).
    submitted: broadcast::Sender<(Option<String>, String)>,
    /// The TUI's session-file status: `idle`, `busy`, `waiting`, …
    status: watch::Sender<String>,
    /// Whether the SessionStart hook has been seen since the last launch.
    started: watch::Sender<bool>,
    claude_pid: Mutex<Option<u32>>,
    /// The last status reported to the tracker.
    reported: Mutex<Option<AgentStatus>>,
    /// The runner reported the TUI exited and has not started it again.
    exited: std::sync::atomic::AtomicBool,
    /// Cancelled once the follower panicked: nothing reads the TUI's hooks and transcript any
    /// more, so nothing is typed into it, and a prompt being typed stops waiting for a
    /// confirmation that cannot come.
    unfollowed: CancellationToken,
    /// For a fork: the parent's claude session id, which Claude reports until the fork's first
    /// prompt (`--fork-session`); it is not this session's identity.
    fork_of: Option<String>,
    /// Prompts of ours Claude queued behind a running turn that have not run yet (`queued.rs`).
    queued: Mutex<Vec<String>>,
    /// A `queued.rs` watch runs for this session.
    queue_watch: std::sync::atomic::AtomicBool,
    /// A Claude a person started by hand that this session drives in its own pane (`adopt.rs`):
    /// no runner, its session file and process as adopted.
    adopted: Option<crate::protocol::SessionAdopted>,
    /// The adopted Claude is ending for a rehome (`rehome.rs`): its exit ends no session.
    rehoming: std::sync::atomic::AtomicBool,
    commands: mpsc::Sender<Command>,
    cancel: CancellationToken,
}

enum Command {
    ExpectInjected(String),
    /// cohost's Escape stopped this turn and the TUI is idle again.
    Interrupted(String),
    /// An adopted session ends (given back): the session task closes it, then answers.
    End(adopt::AdoptedEnd, oneshot::Sender<()>),
}

impl ClaudeHost {
    pub fn new(core: CoreHandle, tmux: Arc<SessionCache>, config: ClaudeConfig) -> Self {
        ClaudeHost {
            inner: Arc::new(Inner {
                core,
                tmux,
                config,
                live: Mutex::new(HashMap::new()),
                permissions: Mutex::new(HashMap::new()),
                inputs: Mutex::new(HashMap::new()),
                adopting: tokio::sync::Mutex::new(()),
                cancel: CancellationToken::new(),
            }),
        }
    }

    fn tmux(&self) -> &Tmux {
        self.inner.tmux.tmux()
    }

    /// The permission modes this daemon lets sessions use.
    pub(super) fn permission_policy(&self) -> &PermissionPolicy {
        &self.inner.config.permission_modes
    }

    /// `cohost doctor`'s claude section.
    pub async fn doctor(&self) -> super::doctor::ClaudeDoctor {
        super::doctor::doctor(
            &self.inner.config.cohost_home.join("claude"),
            &self.inner.config.permission_modes,
        )
        .await
    }

    pub(super) fn view(&self, session_id: &str) -> Result<HostedSessionView, HostError> {
        self.inner
            .core
            .read(|state| state.session_view(session_id))
            .ok_or_else(|| HostError::UnknownSession(session_id.to_string()))
    }

    fn live_session(&self, session_id: &str) -> Result<Arc<Live>, HostError> {
        let record = self.inner.core.read(|state| {
            state
                .sessions
                .get(session_id)
                .map(|s| (s.is_closed(), s.created.runtime))
        });
        match record {
            None => Err(HostError::UnknownSession(session_id.to_string())),
            Some((true, _)) => Err(HostError::Closed(session_id.to_string())),
            Some((false, Runtime::Claude)) => lock(&self.inner.live)
                .get(session_id)
                .cloned()
                .ok_or_else(|| HostError::NotReady(session_id.to_string())),
            Some((false, _)) => Err(HostError::Invalid(format!(
                "session `{session_id}` is not a claude session"
            ))),
        }
    }

    /// The session's pane, verified: it must still run the runner cohost started there — or,
    /// adopted, the process it had when it was adopted, with the adopted Claude under it.
    async fn verified_pane(&self, session_id: &str) -> Result<String, HostError> {
        let pane = pane::verified(&self.inner.core, &self.inner.tmux, session_id)
            .await
            .map_err(|problem| match problem {
                PaneProblem::None => HostError::NotReady(session_id.to_string()),
                PaneProblem::Gone => HostError::Closed(session_id.to_string()),
                PaneProblem::Foreign {
                    pane_id,
                    pid,
                    runner_pid,
                } => HostError::Invalid(format!(
                    "pane {pane_id} now runs pid {pid}, not the runner cohost started ({runner_pid}); refusing to type into it"
                )),
            })?;
        let adopted = lock(&self.inner.live)
            .get(session_id)
            .and_then(|live| live.adopted.clone());
        if let Some(adopted) = adopted
            && let Some(end) = crate::runtime::common::adopted::agent_problem(&adopted, "claude")
        {
            // The session task ends the session on its next tick; nothing is typed meanwhile.
            tracing::info!(
                session = session_id,
                ?end,
                "refusing to type into an adopted pane"
            );
            return Err(HostError::Closed(session_id.to_string()));
        }
        Ok(pane)
    }
}

impl Inner {
    async fn store(&self, session_id: &str, kind: EventKind) {
        match self.core.append(Some(session_id.to_string()), kind).await {
            Ok(_) | Err(CoreError::Duplicate) => {}
            Err(error) => {
                tracing::error!(session = session_id, %error, "could not store a claude event")
            }
        }
    }

    fn start_following(
        self: &Arc<Self>,
        session_id: &str,
        dir: PathBuf,
        restored: bool,
    ) -> Arc<Live> {
        let (commands, command_rx) = mpsc::channel(16);
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let adopted = self.core.read(|state| {
            state
                .sessions
                .get(session_id)
                .and_then(|s| s.adopted.clone())
        });
        // After a daemon restart the runner's `started` line is behind the checkpoint: take the
        // running claude from runner.jsonl, so its session file is followed again. An adopted
        // Claude has no runner: it is the process that was adopted.
        let running = match &adopted {
            Some(adopted) => Some(adopted.pid),
            None if restored => pane::running_child(&dir),
            None => None,
        };
        let restored = restored || adopted.is_some();
        let fork_of = fork_parent(&dir);
        let live = Arc::new(Live {
            session_id: session_id.to_string(),
            dir,
            home,
            inject: tokio::sync::Mutex::new(()),
            keys: tokio::sync::Mutex::new(()),
            interrupted_at: Mutex::new(None),
            redrawn_at: Mutex::new(None),
            submitted: broadcast::channel(64).0,
            status: watch::channel(String::new()).0,
            started: watch::channel(restored && running.is_some()).0,
            claude_pid: Mutex::new(running),
            reported: Mutex::new(None),
            exited: std::sync::atomic::AtomicBool::new(restored && running.is_none()),
            unfollowed: CancellationToken::new(),
            fork_of,
            queued: Mutex::new(Vec::new()),
            queue_watch: std::sync::atomic::AtomicBool::new(false),
            adopted,
            rehoming: std::sync::atomic::AtomicBool::new(false),
            commands,
            cancel: self.cancel.child_token(),
        });
        lock(&self.live).insert(session_id.to_string(), Arc::clone(&live));
        let inner = Arc::clone(self);
        let task_live = Arc::clone(&live);
        let resumed = restored && running.is_some();
        tokio::spawn(async move {
            let core = inner.core.clone();
            let failures = inner.config.failures.clone();
            if resumed {
                hosted::following_again(&core, &task_live.session_id).await;
            }
            let stopped = Arc::clone(&task_live);
            let follow = inner.follow(task_live, command_rx);
            let on_panic = move || {
                stopped.unfollowed.cancel();
                vec![stopped.session_id.clone()]
            };
            caught::follow_caught(&core, &failures, "claude follower", on_panic, follow).await
        });
        live
    }
}
