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

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc, oneshot, watch};
use tokio_util::sync::CancellationToken;

use super::PermissionPolicy;
use super::fence::HookFence;
use super::normalize::{self, Normalizer, Output};
use super::screen;
use crate::core::{CoreError, CoreHandle, now_ms};
use crate::formats::claude::{HookLine, RecordHead, SessionFile};
use crate::protocol::boundary::{Launch, SeedClaude};
use crate::protocol::{
    AgentStatus, ApprovalResolved, ErrorEvent, EventKind, HostedSessionView, Liveness, Runtime,
    SessionBound, SessionClosed, SessionCreated, SessionState, SessionStatus,
};
use crate::runtime::common::mirror::{self, Placement, Report};
use crate::runtime::common::pane::{self, PaneProblem};
use crate::runtime::common::{
    DEFAULT_TMUX_SESSION, inject, lock, new_session_id, send_signal, sibling_binary, which,
    write_private,
};
use crate::runtime::{HostError, InjectOutcome, InjectState};
use crate::tail::{self, Checkpoint, TailItem};
use crate::tmux::{SessionCache, Tmux};

/// How long a permission request waits for a decision before Claude shows its own prompt.
pub const PERMISSION_TIMEOUT: Duration = Duration::from_secs(300);
/// How long a decision waits for the permission hook of a stored request to connect.
const HOOK_CONNECT_GRACE: Duration = Duration::from_secs(10);
/// How long an inject waits for the TUI to be ready (a new session starts in about a second).
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long Claude gets to confirm a pasted prompt before Enter is sent once more.
const SUBMIT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long after an interrupted turn nothing is pasted into the box.
const AFTER_INTERRUPT: Duration = Duration::from_secs(2);
/// How long a prompt Claude took from the box may still wait for its confirmation.
const LATE_SUBMIT_TIMEOUT: Duration = Duration::from_secs(30);
/// The longest a processed line's checkpoint waits to be saved while lines keep coming.
const CHECKPOINT_INTERVAL: Duration = Duration::from_millis(200);
/// How often the TUI's session file and pending turn ends are checked.
const TICK: Duration = Duration::from_millis(200);
/// Lines queued between a tailer and the session task.
const TAIL_CHANNEL: usize = 1024;

/// Variables passed from the daemon's environment to claude (in the pane, tmux's own
/// environment would apply otherwise).
const FORWARDED_ENV: [&str; 8] = [
    "HOME", "PATH", "LANG", "LC_ALL", "USER", "SHELL", "TMPDIR", "LOGNAME",
];
const FORWARDED_PREFIXES: [&str; 5] = [
    "ANTHROPIC_",
    "CLAUDE_",
    "DISABLE_",
    "IS_SANDBOX",
    "NO_PROXY",
];

/// The hook events cohost registers (MessageDisplay is left out: it is synchronous and slows
/// streaming). Matchers follow the reference: `*` for tool events.
const HOOK_EVENTS: [(&str, &str); 16] = [
    ("SessionStart", ""),
    ("SessionEnd", ""),
    ("UserPromptSubmit", ""),
    ("PreToolUse", "*"),
    ("PostToolUse", "*"),
    ("PostToolUseFailure", "*"),
    ("PostToolBatch", ""),
    ("PermissionRequest", "*"),
    ("Notification", ""),
    ("Stop", ""),
    ("StopFailure", ""),
    ("SubagentStart", ""),
    ("SubagentStop", ""),
    ("PreCompact", ""),
    ("PostCompact", ""),
    ("CwdChanged", ""),
];

#[derive(Debug, Clone)]
pub struct ClaudeConfig {
    pub cohost_home: PathBuf,
    /// The daemon's own URL, for the permission hook.
    pub socket: PathBuf,
    pub token_file: PathBuf,
    /// The permission modes sessions may run in.
    pub permission_modes: PermissionPolicy,
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
}

#[derive(Clone)]
pub struct ClaudeHost {
    inner: Arc<Inner>,
}

mod asks;
pub use asks::MODES;

struct Inner {
    core: CoreHandle,
    tmux: Arc<SessionCache>,
    config: ClaudeConfig,
    live: Mutex<HashMap<String, Arc<Live>>>,
    /// Permission requests waiting for a decision, by approval id.
    permissions: Mutex<HashMap<String, (String, oneshot::Sender<String>)>>,
    /// `AskUserQuestion` / `ExitPlanMode` hooks waiting for a person's answer, by request id.
    inputs: Mutex<HashMap<String, asks::PendingInput>>,
    create_lock: tokio::sync::Mutex<()>,
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
    /// For a fork: the parent's claude session id, which Claude reports until the fork's first
    /// prompt (`--fork-session`); it is not this session's identity.
    fork_of: Option<String>,
    commands: mpsc::Sender<Command>,
    cancel: CancellationToken,
}

enum Command {
    ExpectInjected(String),
    /// cohost's Escape stopped this turn and the TUI is idle again.
    Interrupted(String),
}

/// How Claude took a pasted prompt.
enum Confirmed {
    Started(String),
    Queued,
}

/// `COHOST_CLAUDE_BIN`, else `claude` on PATH.
pub fn find_claude() -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os("COHOST_CLAUDE_BIN").filter(|v| !v.is_empty()) {
        let path = PathBuf::from(path);
        return if path.is_file() {
            Ok(path)
        } else {
            Err(format!(
                "COHOST_CLAUDE_BIN={} does not exist",
                path.display()
            ))
        };
    }
    which("claude").ok_or_else(|| {
        "claude not found: set COHOST_CLAUDE_BIN or put `claude` on PATH".to_string()
    })
}

/// The `--settings` JSON registering `cohost-hook` for every event cohost follows, and the
/// permission mode the session starts in (also passed as `--permission-mode`: a user's own
/// settings cannot then put it in another).
pub fn hook_settings(hook_bin: &Path, permission_mode: &str) -> Value {
    let mut hooks = serde_json::Map::new();
    for (event, matcher) in HOOK_EVENTS {
        // Our hook only appends a line, but a loaded machine can take seconds to start it; a
        // hook Claude kills for being slow is an event lost, so the bound is generous.
        let timeout = if event == "PermissionRequest" {
            PERMISSION_TIMEOUT.as_secs() + 30
        } else {
            30
        };
        hooks.insert(
            event.to_string(),
            json!([{ "matcher": matcher, "hooks": [{ "type": "command", "command": format!("{} {event}", hook_bin.display()), "timeout": timeout }] }]),
        );
    }
    json!({ "hooks": hooks, "permissions": { "defaultMode": permission_mode } })
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
                create_lock: tokio::sync::Mutex::new(()),
                cancel: CancellationToken::new(),
            }),
        }
    }

    fn tmux(&self) -> &Tmux {
        self.inner.tmux.tmux()
    }

    /// The permission modes this daemon lets sessions use.
    pub fn permission_policy(&self) -> &PermissionPolicy {
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

    /// Starts the claude TUI in a new pane and follows it.
    pub async fn create(&self, params: CreateClaude) -> Result<HostedSessionView, HostError> {
        let permission_mode = params
            .permission_mode
            .clone()
            .unwrap_or_else(|| PermissionPolicy::DEFAULT.to_string());
        if let Some(refusal) = self.inner.config.permission_modes.refusal(&permission_mode) {
            return Err(HostError::Invalid(refusal));
        }
        let claude = find_claude().map_err(|e| HostError::unavailable(Runtime::Claude, e))?;
        let hook_bin = sibling_binary("cohost-hook", "COHOST_HOOK_BIN")
            .map_err(|e| HostError::unavailable(Runtime::Claude, e))?;
        let runner_bin = sibling_binary("cohost-runner", "COHOST_RUNNER_BIN")
            .map_err(|e| HostError::unavailable(Runtime::Claude, e))?;
        let _guard = self.inner.create_lock.lock().await;
        if let Some(key) = &params.idempotency_key
            && let Some(view) = self.inner.core.read(|state| {
                state
                    .sessions
                    .by_creation_key(key)
                    .and_then(|s| state.session_view(&s.id))
            })
        {
            return Ok(view);
        }
        let session_id = new_session_id();
        let dir = self
            .inner
            .config
            .cohost_home
            .join("claude")
            .join(&session_id);
        std::fs::create_dir_all(dir.join("checkpoints")).map_err(|e| {
            HostError::failed_by(
                Runtime::Claude,
                format!("cannot create {}: {e}", dir.join("checkpoints").display()),
                e,
            )
        })?;
        {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700));
        }
        let settings = dir.join("settings.json");
        write_private(
            &settings,
            hook_settings(&hook_bin, &permission_mode)
                .to_string()
                .as_bytes(),
        )
        .map_err(|e| {
            HostError::failed_by(
                Runtime::Claude,
                format!("cannot write {}: {e}", settings.display()),
                e,
            )
        })?;
        let mut argv = vec![
            claude.to_string_lossy().into_owned(),
            "--settings".to_string(),
            settings.to_string_lossy().into_owned(),
        ];
        if let Some(model) = &params.model {
            argv.extend(["--model".to_string(), model.clone()]);
        }
        argv.extend(["--permission-mode".to_string(), permission_mode.clone()]);
        if let Some((claude_session, _)) = &params.fork_of {
            argv.extend([
                "--resume".to_string(),
                claude_session.clone(),
                "--fork-session".to_string(),
            ]);
        }
        let cwd = params.cwd.clone();
        self.write_launch(&session_id, &dir, &argv, &cwd)?;
        let created = SessionCreated {
            runtime: Runtime::Claude,
            cwd: cwd.to_string_lossy().into_owned(),
            model: params.model.clone(),
            approval_policy: None,
            permission_mode: Some(permission_mode.clone()),
            sandbox: None,
            budget: None,
            forked_from: params
                .fork_of
                .as_ref()
                .map(|(_, parent)| crate::protocol::ForkOrigin {
                    session_id: parent.clone(),
                    after_turn_id: None,
                }),
            idempotency_key: params.idempotency_key.clone(),
        };
        self.inner
            .core
            .append(Some(session_id.clone()), EventKind::SessionCreated(created))
            .await?;
        drop(_guard);
        let tmux_session = params
            .tmux_session
            .clone()
            .unwrap_or_else(|| DEFAULT_TMUX_SESSION.to_string());
        pane::open(
            &self.inner.core,
            &self.inner.tmux,
            &session_id,
            &tmux_session,
            &cwd,
            &runner_bin,
            &dir,
        )
        .await
        .map_err(|e| HostError::failed(Runtime::Claude, e))?;
        let live = self.inner.start_following(&session_id, dir, false);
        // Ready once Claude's SessionStart hook has run.
        let mut started = live.started.subscribe();
        let _ = tokio::time::timeout(READY_TIMEOUT, started.wait_for(|s| *s)).await;
        self.view(&session_id)
    }

    fn write_launch(
        &self,
        session_id: &str,
        dir: &Path,
        argv: &[String],
        cwd: &Path,
    ) -> Result<(), HostError> {
        let mut env = std::collections::BTreeMap::new();
        for (key, value) in std::env::vars() {
            if FORWARDED_ENV.contains(&key.as_str())
                || FORWARDED_PREFIXES.iter().any(|p| key.starts_with(p))
            {
                env.insert(key, Some(value));
            }
        }
        let mut set = |key: &str, value: String| env.insert(key.to_string(), Some(value));
        set("COHOST_SESSION_DIR", dir.to_string_lossy().into_owned());
        set("COHOST_SESSION_ID", session_id.to_string());
        set(
            "COHOST_SOCKET",
            self.inner.config.socket.to_string_lossy().into_owned(),
        );
        set(
            "COHOST_TOKEN_FILE",
            self.inner.config.token_file.to_string_lossy().into_owned(),
        );
        set(
            "COHOST_PERMISSION_TIMEOUT_SECS",
            PERMISSION_TIMEOUT.as_secs().to_string(),
        );
        // The hook asks before a tool runs under a mode this daemon does not allow (a human
        // cycled to it with shift+tab, or Claude started in it despite the flag).
        set(
            "COHOST_PERMISSION_MODES",
            self.inner.config.permission_modes.allowed().join(","),
        );
        let launch = Launch {
            argv: argv.to_vec(),
            cwd: Some(cwd.to_path_buf()),
            env,
            seed_claude: std::env::var_os("HOME").map(|home| SeedClaude {
                home: PathBuf::from(home),
                api_key: std::env::var("ANTHROPIC_API_KEY").ok(),
                trust_dirs: vec![cwd.to_path_buf()],
            }),
            session_id: None,
        };
        pane::write_launch(dir, &launch).map_err(|e| {
            HostError::failed(Runtime::Claude, format!("could not write launch.json: {e}"))
        })
    }

    pub fn view(&self, session_id: &str) -> Result<HostedSessionView, HostError> {
        self.inner
            .core
            .read(|state| state.session_view(session_id))
            .ok_or_else(|| HostError::UnknownSession(session_id.to_string()))
    }

    /// Re-attaches to every open claude session after a daemon restart: the panes kept running
    /// under tmux, and the tails resume from their checkpoints.
    pub fn restore(&self) {
        let sessions: Vec<String> = self.inner.core.read(|state| {
            state
                .sessions
                .iter()
                .filter(|s| s.created.runtime == Runtime::Claude && !s.is_closed())
                .map(|s| s.id.clone())
                .collect()
        });
        for session_id in sessions {
            let dir = self
                .inner
                .config
                .cohost_home
                .join("claude")
                .join(&session_id);
            self.inner.start_following(&session_id, dir, true);
        }
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

    /// The session's pane, verified: it must still run the runner cohost started there.
    /// The text a human could have typed into the session's input box right now: none while a
    /// paste of ours is in progress (the inject lock is held) or the TUI has exited.
    pub async fn draft(&self, session_id: &str) -> Result<Option<String>, HostError> {
        let live = self.live_session(session_id)?;
        let Ok(_inject) = live.inject.try_lock() else {
            return Ok(None);
        };
        Ok(self
            .box_screen(&live, session_id)
            .await?
            .filter(|screen| screen.has_draft())
            .map(|screen| screen.input.unwrap_or_default()))
    }

    async fn box_screen(
        &self,
        live: &Live,
        session_id: &str,
    ) -> Result<Option<screen::Screen>, HostError> {
        if live.exited.load(std::sync::atomic::Ordering::SeqCst) {
            return Ok(None);
        }
        let pane = self.verified_pane(session_id).await?;
        let capture = self
            .tmux()
            .capture(&pane)
            .await
            .map_err(|e| HostError::failed_by(Runtime::Claude, e.to_string(), e))?;
        Ok(Some(screen::analyze(&capture)))
    }

    /// Clears the input box if it still holds exactly `text` and Claude is idle (Claude puts a
    /// prompt back in the box when its turn is interrupted before the first token). Two Escapes
    /// clear a box with text in it; they are never sent to an empty box (that opens the rewind
    /// dialog) nor while a turn runs (they would interrupt it).
    pub async fn clear_draft(&self, session_id: &str, text: &str) -> Result<bool, HostError> {
        let live = self.live_session(session_id)?;
        // No paste and no interrupt in progress while the box is read and cleared.
        let Ok(_inject) = live.inject.try_lock() else {
            return Ok(false);
        };
        let _keys = live.keys.lock().await;
        let turn_open = self.inner.core.read(|state| {
            state
                .sessions
                .get(session_id)
                .is_some_and(|s| s.active_turn.is_some())
        });
        if turn_open || live.status.borrow().as_str() == "busy" {
            return Ok(false);
        }
        let Some(screen) = self.box_screen(&live, session_id).await? else {
            return Ok(false);
        };
        if screen.busy
            || screen.dialog
            || !screen.has_draft()
            || screen.input.as_deref() != Some(text)
        {
            return Ok(false);
        }
        let pane = self.verified_pane(session_id).await?;
        self.clear_box(&pane).await
    }

    /// Clears the input box, which holds text: Escape twice, then — only when Claude shows it
    /// took just one of them (`esc again to clear`) — once more. Each step waits for the screen
    /// to show its effect instead of assuming it: a loaded machine renders late, and one Escape
    /// too many on the emptied box opens the Rewind dialog (which, should it open anyway, is
    /// closed with one Escape). Returns whether the box ended empty.
    async fn clear_box(&self, pane: &str) -> Result<bool, HostError> {
        let keys = |keys: &'static [&'static str]| async move {
            self.tmux()
                .send_keys(pane, keys)
                .await
                .map_err(|e| HostError::failed_by(Runtime::Claude, e.to_string(), e))
        };
        keys(&["Escape", "Escape"]).await?;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(3);
        let mut again = false;
        loop {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let capture = self
                .tmux()
                .capture(pane)
                .await
                .map_err(|e| HostError::failed_by(Runtime::Claude, e.to_string(), e))?;
            let screen = screen::analyze(&capture);
            if screen.rewind {
                tracing::warn!(pane, "closing a Rewind dialog an Escape opened");
                keys(&["Escape"]).await?;
                return Ok(true);
            }
            if screen.input.as_deref() == Some("") {
                return Ok(true);
            }
            if screen.clear_pending && screen.has_draft() && !again {
                keys(&["Escape"]).await?;
                again = true;
                continue;
            }
            if tokio::time::Instant::now() >= deadline {
                return Ok(false);
            }
        }
    }

    async fn verified_pane(&self, session_id: &str) -> Result<String, HostError> {
        pane::verified(&self.inner.core, &self.inner.tmux, session_id)
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
            })
    }

    /// Types a prompt into the TUI: bracketed paste, Enter, then waits for Claude to confirm.
    pub async fn inject(
        &self,
        session_id: &str,
        text: &str,
        key: Option<String>,
    ) -> Result<InjectOutcome, HostError> {
        if text.trim().is_empty() {
            return Err(HostError::Invalid("text must not be empty".into()));
        }
        let live = self.live_session(session_id)?;
        let _serialized = live.inject.lock().await;
        if let Some(earlier) = inject::previous(&self.inner.core, session_id, key.as_deref()) {
            return Ok(earlier);
        }
        let pane = self.verified_pane(session_id).await?;
        // The TUI exited: the pane shows its last frame, and nothing reads what is typed.
        if live.exited.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(HostError::NotReady(session_id.to_string()));
        }
        // Claude hands an interrupted prompt back into the box, sometimes well after the turn
        // ended; a paste in between would merge with it. Let that settle first.
        let since_interrupt = lock(&live.interrupted_at).map(|at| at.elapsed());
        if let Some(since) = since_interrupt.filter(|since| *since < AFTER_INTERRUPT) {
            tokio::time::sleep(AFTER_INTERRUPT - since).await;
        }
        let mut started = live.started.subscribe();
        if tokio::time::timeout(READY_TIMEOUT, started.wait_for(|s| *s))
            .await
            .is_err()
        {
            return Err(HostError::NotReady(session_id.to_string()));
        }
        // An interrupt watching the box (to clear a prompt Claude hands back) must not take our
        // paste for that prompt: the box is read and typed into by one of them at a time.
        let keys = live.keys.lock().await;
        // Wait until the box is usable: no dialog, and not a human's draft. The screen decides
        // busy-or-idle: the session file lags the screen by tens of milliseconds.
        let deadline = tokio::time::Instant::now() + READY_TIMEOUT;
        let busy = loop {
            let capture = self
                .tmux()
                .capture(&pane)
                .await
                .map_err(|e| HostError::failed_by(Runtime::Claude, e.to_string(), e))?;
            let screen = screen::analyze(&capture);
            if screen.has_draft() {
                return Err(HostError::HumanTyping(session_id.to_string()));
            }
            if !screen.dialog && screen.input.is_some() && (screen.busy || screen.ready()) {
                break screen.busy;
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(HostError::NotReady(session_id.to_string()));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        let _ = live
            .commands
            .send(Command::ExpectInjected(text.to_string()))
            .await;
        let mut submitted = live.submitted.subscribe();
        let tmux = self.tmux();
        tmux.paste(&pane, text)
            .await
            .map_err(|e| HostError::failed_by(Runtime::Claude, e.to_string(), e))?;
        // Give the TUI a moment to take the paste before Enter (a burst can swallow it).
        tokio::time::sleep(Duration::from_millis(150)).await;
        tmux.send_keys(&pane, &["Enter"])
            .await
            .map_err(|e| HostError::failed_by(Runtime::Claude, e.to_string(), e))?;
        drop(keys);
        let outcome = match self.confirm(&pane, &mut submitted, text, busy).await? {
            Some(outcome) => outcome,
            None => {
                // Still in the box? Enter once more, never twice.
                let capture = tmux
                    .capture(&pane)
                    .await
                    .map_err(|e| HostError::failed_by(Runtime::Claude, e.to_string(), e))?;
                if screen::analyze(&capture).has_draft() {
                    tmux.send_keys(&pane, &["Enter"])
                        .await
                        .map_err(|e| HostError::failed_by(Runtime::Claude, e.to_string(), e))?;
                }
                match self.confirm(&pane, &mut submitted, text, busy).await? {
                    Some(outcome) => outcome,
                    None => {
                        let capture = tmux
                            .capture(&pane)
                            .await
                            .map_err(|e| HostError::failed_by(Runtime::Claude, e.to_string(), e))?;
                        if screen::analyze(&capture).has_draft() {
                            // Take our text back out of the box rather than leave it for
                            // someone to send.
                            let _ = self.clear_box(&pane).await;
                            return Err(HostError::failed(
                                Runtime::Claude,
                                "claude did not accept the prompt",
                            ));
                        }
                        // The box is empty: Claude took the prompt, and its confirmation (the
                        // UserPromptSubmit hook) is late — a loaded machine, a slow hook. Wait
                        // for it rather than report a prompt that runs as not sent.
                        match wait_submitted(&mut submitted, text, LATE_SUBMIT_TIMEOUT).await {
                            Some(confirmed) => confirmed,
                            None => {
                                return Err(HostError::failed(
                                    Runtime::Claude,
                                    "claude took the prompt but never confirmed it",
                                ));
                            }
                        }
                    }
                }
            }
        };
        let outcome = match outcome {
            Confirmed::Started(turn) => (InjectState::Started, turn),
            Confirmed::Queued => (
                InjectState::Queued,
                self.inner
                    .core
                    .read(|state| {
                        state
                            .sessions
                            .get(session_id)
                            .and_then(|s| s.active_turn.clone())
                    })
                    .unwrap_or_default(),
            ),
        };
        Ok(inject::record(&self.inner.core, session_id, outcome.0, &outcome.1, key).await?)
    }

    /// Waits for Claude to take a pasted prompt: `UserPromptSubmit` for it (a new turn), or —
    /// when a turn was running — the box emptied with the prompt queued behind the turn.
    async fn confirm(
        &self,
        pane: &str,
        submitted: &mut broadcast::Receiver<(Option<String>, String)>,
        text: &str,
        was_busy: bool,
    ) -> Result<Option<Confirmed>, HostError> {
        let deadline = tokio::time::Instant::now() + SUBMIT_TIMEOUT;
        loop {
            let wait = Duration::from_millis(if was_busy { 150 } else { 250 });
            if let Some(confirmed) = wait_submitted(submitted, text, wait).await {
                return Ok(Some(confirmed));
            }
            if was_busy {
                let capture = self
                    .tmux()
                    .capture(pane)
                    .await
                    .map_err(|e| HostError::failed_by(Runtime::Claude, e.to_string(), e))?;
                let screen = screen::analyze(&capture);
                if !screen.has_draft() && (screen.queued || screen.busy) {
                    return Ok(Some(Confirmed::Queued));
                }
            }
            if tokio::time::Instant::now() >= deadline {
                return Ok(None);
            }
        }
    }

    /// One Escape while a turn runs (with `turn`, only while that turn runs); `Ok(false)` when
    /// Claude is idle or runs another turn.
    pub async fn interrupt(&self, session_id: &str, turn: Option<&str>) -> Result<bool, HostError> {
        let live = self.live_session(session_id)?;
        let _keys = live.keys.lock().await;
        let pane = self.verified_pane(session_id).await?;
        let active = || {
            self.inner.core.read(|state| {
                state
                    .sessions
                    .get(session_id)
                    .and_then(|s| s.active_turn.clone())
            })
        };
        let active_turn = active();
        if turn.is_some_and(|wanted| active_turn.as_deref() != Some(wanted)) {
            return Ok(false);
        }
        let turn_open = active_turn.is_some();
        // The session file as it is now, not as the last tick read it: a turn that just ended
        // must not look busy for up to a tick (an Escape on an idle TUI is no interrupt).
        let busy = self
            .inner
            .session_file_status(&live)
            .unwrap_or_else(|| live.status.borrow().clone())
            == "busy";
        if !turn_open && !busy {
            return Ok(false);
        }
        let before = match self.tmux().capture(&pane).await {
            Ok(capture) => screen::analyze(&capture).input,
            Err(_) => None,
        };
        // Never a blind double Escape: on an empty box it opens the rewind dialog.
        self.tmux()
            .send_keys(&pane, &["Escape"])
            .await
            .map_err(|e| HostError::failed_by(Runtime::Claude, e.to_string(), e))?;
        // Interrupted before the first token, Claude puts the prompt back in the box, after the
        // turn stops (which can take a while on a busy machine): watch the screen until the box
        // shows that text, or has stayed idle and empty for a moment.
        // On a loaded machine the TUI can take seconds to stop: the deadline is generous, and
        // the loop ends as soon as the box has been idle and empty for half a second.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
        let mut idle_since = None;
        let mut cleared = false;
        let mut concluded = false;
        tracing::debug!(session = %session_id, turn = ?active_turn, before = ?before, "interrupt: Escape sent");
        while tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(100)).await;
            // Another turn runs now (a prompt queued behind ours started once ours stopped):
            // ours is over, and nothing of this interrupt may touch the new one.
            if let Some(now) = active()
                && active_turn.as_deref() != Some(now.as_str())
            {
                tracing::debug!(session = %session_id, turn = ?active_turn, now, "interrupt: another turn runs; the watch ends");
                concluded = true;
                break;
            }
            let Ok(capture) = self.tmux().capture(&pane).await else {
                tracing::debug!(session = %session_id, "interrupt: the pane cannot be captured; the watch ends");
                concluded = true;
                break;
            };
            let screen = screen::analyze(&capture);
            if screen.input.is_none() || screen.busy || screen.dialog {
                idle_since = None;
                continue;
            }
            if screen.has_draft() && screen.input != before && !cleared {
                // The prompt Claude put back: clear it, watching the screen between keys.
                cleared = true;
                let cleared_box = self.clear_box(&pane).await;
                tracing::debug!(session = %session_id, input = ?screen.input, ?cleared_box, "interrupt: cleared the prompt Claude put back");
                idle_since = None;
                continue;
            }
            let since = *idle_since.get_or_insert_with(tokio::time::Instant::now);
            if since.elapsed() >= Duration::from_millis(500) {
                // Idle and empty after our Escape: no hook says so, so tell the follower.
                tracing::debug!(session = %session_id, turn = ?active_turn, "interrupt: the TUI is idle and empty; the turn ended interrupted");
                if let Some(turn) = &active_turn {
                    let _ = live.commands.send(Command::Interrupted(turn.clone())).await;
                }
                concluded = true;
                break;
            }
        }
        if !concluded {
            tracing::warn!(
                session = %session_id,
                turn = ?active_turn,
                "interrupt: the TUI did not come back idle and empty within 15 s of the Escape; the turn ends when the TUI says so"
            );
        }
        Ok(true)
    }

    /// The permission hook's request: waits for a decision from any surface.
    pub async fn permission_request(
        &self,
        session_id: &str,
        request_id: &str,
        payload: Value,
    ) -> Result<Value, HostError> {
        let live = self.live_session(session_id)?;
        // A question or a plan waits for an answer, not a permission decision.
        if let Some(answer) = self
            .input_permission(session_id, request_id, &payload)
            .await
        {
            return answer;
        }
        // The hook line may not have been tailed yet: store the request now (deduplicated).
        let line = HookLine::permission_request(now_ms(), request_id, &payload);
        let claude_session = line.payload.common.session_id.clone().unwrap_or_default();
        let approval_id = normalize::approval_id(&claude_session, request_id);
        let (tx, rx) = oneshot::channel();
        lock(&self.inner.permissions).insert(approval_id.clone(), (session_id.to_string(), tx));
        let mut normalizer = Normalizer::resume(Some(claude_session.clone()), None, None);
        for output in normalizer.hook_line(&line, now_ms()) {
            if let Output::Store(kind @ EventKind::ApprovalRequested(_)) = output {
                self.inner.store(session_id, kind).await;
            }
        }
        let _ = &live;
        let decision = tokio::select! {
            decision = rx => decision.ok(),
            _ = tokio::time::sleep(PERMISSION_TIMEOUT) => None,
            _ = self.inner.cancel.cancelled() => None,
        };
        lock(&self.inner.permissions).remove(&approval_id);
        Ok(match decision.as_deref() {
            Some("accept") | Some("acceptForSession") => json!({ "behavior": "allow" }),
            Some("decline") => {
                json!({ "behavior": "deny", "message": "Denied through cohost.", "interrupt": false })
            }
            Some("cancel") => {
                json!({ "behavior": "deny", "message": "Cancelled through cohost.", "interrupt": true })
            }
            _ => {
                self.inner
                    .store(
                        session_id,
                        EventKind::ApprovalResolved(ApprovalResolved {
                            approval_id,
                            decision: None,
                            by: "runtime".into(),
                        }),
                    )
                    .await;
                json!({ "behavior": "ask" })
            }
        })
    }

    pub async fn resolve_approval(
        &self,
        session_id: &str,
        approval_id: &str,
        decision: &str,
        by: &str,
    ) -> Result<(), HostError> {
        if !normalize::DECISIONS.contains(&decision) {
            return Err(HostError::Invalid(format!(
                "decision must be one of {}, got `{decision}`",
                normalize::DECISIONS.join(", ")
            )));
        }
        self.live_session(session_id)?;
        // The hook writes its hooks.jsonl line before it connects: a decision can arrive for an
        // approval that is stored but whose hook is not waiting yet. Give it a moment.
        let deadline = tokio::time::Instant::now() + HOOK_CONNECT_GRACE;
        let pending = loop {
            let taken = {
                let mut permissions = lock(&self.inner.permissions);
                match permissions.get(approval_id) {
                    Some((owner, _)) if owner == session_id => permissions.remove(approval_id),
                    _ => None,
                }
            };
            if taken.is_some() {
                break taken;
            }
            let known = self.inner.core.read(|state| {
                state
                    .sessions
                    .get(session_id)
                    .and_then(|s| s.approvals.get(approval_id))
                    .map(|a| a.resolved.is_some())
            });
            match known {
                Some(false) if tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Some(_) => return Err(HostError::ApprovalResolved(approval_id.to_string())),
                None => return Err(HostError::UnknownApproval(approval_id.to_string())),
            }
        };
        let Some((_, tx)) = pending else {
            return Err(HostError::ApprovalResolved(approval_id.to_string()));
        };
        if tx.send(decision.to_string()).is_err() {
            return Err(HostError::ApprovalResolved(approval_id.to_string()));
        }
        self.inner
            .store(
                session_id,
                EventKind::ApprovalResolved(ApprovalResolved {
                    approval_id: approval_id.to_string(),
                    decision: Some(decision.to_string()),
                    by: by.to_string(),
                }),
            )
            .await;
        Ok(())
    }

    /// Relaunches the TUI on the same conversation (`--resume <claude session id>`), after it
    /// exited or by making it exit.
    pub async fn relaunch(&self, session_id: &str) -> Result<(), HostError> {
        let live = self.live_session(session_id)?;
        let (claude_session, cwd, pane) = self
            .inner
            .core
            .read(|state| {
                state
                    .sessions
                    .get(session_id)
                    .map(|s| (s.thread_id.clone(), s.created.cwd.clone(), s.pane.clone()))
            })
            .ok_or_else(|| HostError::UnknownSession(session_id.to_string()))?;
        let claude_session =
            claude_session.ok_or_else(|| HostError::NotReady(session_id.to_string()))?;
        let pane = pane.ok_or_else(|| HostError::NotReady(session_id.to_string()))?;
        let mut argv = pane::read_launch(&live.dir)
            .ok_or_else(|| HostError::failed(Runtime::Claude, "launch.json is missing"))?
            .argv;
        // Drop an earlier --resume/--fork-session, then resume this conversation.
        let mut cleaned = Vec::new();
        let mut skip = false;
        for arg in argv.drain(..) {
            if skip {
                skip = false;
                continue;
            }
            match arg.as_str() {
                "--resume" => skip = true,
                "--fork-session" => {}
                _ => cleaned.push(arg),
            }
        }
        cleaned.extend(["--resume".to_string(), claude_session]);
        self.write_launch(session_id, &live.dir, &cleaned, Path::new(&cwd))?;
        live.started.send_replace(false);
        // Stop a running TUI first and wait for the runner to see it go.
        let running = *lock(&live.claude_pid);
        if let Some(pid) = running {
            send_signal(pid, libc::SIGTERM);
            let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
            while !live.exited.load(std::sync::atomic::Ordering::SeqCst)
                && tokio::time::Instant::now() < deadline
            {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        // The old TUI's last frame stays on screen (with its input box, maybe with text in it)
        // until the new one draws: clear it, so it is never taken for the live box.
        let _ = self
            .tmux()
            .run(&["send-keys", "-R", "-t", &pane.pane_id])
            .await;
        let _ = self
            .tmux()
            .run(&["clear-history", "-t", &pane.pane_id])
            .await;
        // SIGUSR1 asks the runner to launch again (right away if the TUI already exited).
        send_signal(pane.runner_pid, libc::SIGUSR1);
        Ok(())
    }

    /// Forks the conversation into a new session (`--resume <id> --fork-session`).
    pub async fn fork(&self, session_id: &str) -> Result<HostedSessionView, HostError> {
        let record = self
            .inner
            .core
            .read(|state| state.sessions.get(session_id).cloned())
            .ok_or_else(|| HostError::UnknownSession(session_id.to_string()))?;
        let claude_session = record
            .thread_id
            .clone()
            .ok_or_else(|| HostError::NotReady(session_id.to_string()))?;
        self.create(CreateClaude {
            cwd: PathBuf::from(&record.created.cwd),
            model: record.created.model.clone(),
            permission_mode: record.created.claude_permission_mode().map(str::to_string),
            tmux_session: record.pane.as_ref().map(|p| p.tmux_session.clone()),
            idempotency_key: None,
            fork_of: Some((claude_session, session_id.to_string())),
        })
        .await
    }

    /// Stops the session: the runner and the TUI go, the pane closes, `session.closed` is logged.
    pub async fn close(&self, session_id: &str) -> Result<(), HostError> {
        let live = self.live_session(session_id)?;
        if let Some(pane) = self
            .inner
            .core
            .read(|state| state.sessions.get(session_id).and_then(|s| s.pane.clone()))
            && self.tmux().pane_pid(&pane.pane_id).await == Some(pane.runner_pid)
        {
            let _ = self.tmux().kill_pane(&pane.pane_id).await;
        }
        live.cancel.cancel();
        lock(&self.inner.live).remove(session_id);
        self.inner
            .core
            .append(
                Some(session_id.to_string()),
                EventKind::SessionClosed(SessionClosed {
                    reason: "closed through the API".into(),
                }),
            )
            .await?;
        Ok(())
    }

    pub fn shutdown(&self) {
        self.inner.cancel.cancel();
    }
}

/// Waits for Claude's word on a pasted `text` (compared as the user wrote it: the normalizer
/// removed any `<pasted_content>` wrapper).
async fn wait_submitted(
    rx: &mut broadcast::Receiver<(Option<String>, String)>,
    text: &str,
    timeout: Duration,
) -> Option<Confirmed> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Ok((turn_id, submitted))) if submitted.trim() == text.trim() => {
                return Some(match turn_id {
                    Some(turn) => Confirmed::Started(turn),
                    None => Confirmed::Queued,
                });
            }
            Ok(Ok(_)) | Ok(Err(broadcast::error::RecvError::Lagged(_))) => continue,
            _ => return None,
        }
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
        // After a daemon restart the runner's `started` line is behind the checkpoint: take the
        // running claude from runner.jsonl, so its session file is followed again.
        let running = if restored {
            pane::running_child(&dir)
        } else {
            None
        };
        let fork_of = fork_parent(&dir);
        let live = Arc::new(Live {
            session_id: session_id.to_string(),
            dir,
            home,
            inject: tokio::sync::Mutex::new(()),
            keys: tokio::sync::Mutex::new(()),
            interrupted_at: Mutex::new(None),
            submitted: broadcast::channel(64).0,
            status: watch::channel(String::new()).0,
            started: watch::channel(restored && running.is_some()).0,
            claude_pid: Mutex::new(running),
            reported: Mutex::new(None),
            exited: std::sync::atomic::AtomicBool::new(restored && running.is_none()),
            fork_of,
            commands,
            cancel: self.cancel.child_token(),
        });
        lock(&self.live).insert(session_id.to_string(), Arc::clone(&live));
        let inner = Arc::clone(self);
        let task_live = Arc::clone(&live);
        tokio::spawn(async move { inner.follow(task_live, command_rx).await });
        live
    }

    /// The session task: tails hooks, runner and transcript, and forwards what they mean.
    async fn follow(self: Arc<Self>, live: Arc<Live>, mut commands: mpsc::Receiver<Command>) {
        let session_id = live.session_id.clone();
        let checkpoints = live.dir.join("checkpoints");
        let (record_thread, record_turn) = self.core.read(|state| {
            state
                .sessions
                .get(&session_id)
                .map(|s| (s.thread_id.clone(), s.active_turn.clone()))
                .unwrap_or((None, None))
        });
        let transcript_checkpoint = tail::load_checkpoint(&checkpoints.join("transcript.json"))
            .await
            .ok()
            .flatten();
        let mut normalizer = Normalizer::resume(
            record_thread,
            transcript_checkpoint
                .as_ref()
                .map(|c| c.path.to_string_lossy().into_owned()),
            record_turn,
        );
        let (hooks_tx, mut hooks_rx) = mpsc::channel(TAIL_CHANNEL);
        let (runner_tx, mut runner_rx) = mpsc::channel(TAIL_CHANNEL);
        let (transcript_tx, mut transcript_rx) =
            mpsc::channel::<(TailItem, Checkpoint)>(TAIL_CHANNEL);
        let cancel = live.cancel.clone();
        let hooks_checkpoint = tail::load_checkpoint(&checkpoints.join("hooks.json"))
            .await
            .ok()
            .flatten();
        tail::spawn_tail(
            live.dir.join("hooks.jsonl"),
            hooks_checkpoint.clone(),
            hooks_tx,
            cancel.child_token(),
        );
        tail::spawn_tail(
            live.dir.join("runner.jsonl"),
            tail::load_checkpoint(&checkpoints.join("runner.json"))
                .await
                .ok()
                .flatten(),
            runner_tx,
            cancel.child_token(),
        );
        let mut transcript_cancel = cancel.child_token();
        if let Some(checkpoint) = transcript_checkpoint {
            inherit_fork_history(&live, &checkpoint.path, &mut normalizer);
            tail::spawn_tail(
                checkpoint.path.clone(),
                Some(checkpoint),
                transcript_tx.clone(),
                transcript_cancel.clone(),
            );
        }
        let hooks_path = live.dir.join("hooks.jsonl");
        let hooks_written = || std::fs::metadata(&hooks_path).map_or(0, |meta| meta.len());
        let mut fence = HookFence::new(hooks_checkpoint.as_ref().map_or(0, |c| c.offset));
        let mut unsaved: HashMap<PathBuf, Checkpoint> = HashMap::new();
        let mut unsaved_since = tokio::time::Instant::now();
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        loop {
            // Each input yields outputs and, for a tailed line, the checkpoint to save once
            // they are stored.
            let (outputs, checkpoint) = tokio::select! {
                _ = cancel.cancelled() => break,
                Some(command) = commands.recv() => {
                    match command {
                        Command::ExpectInjected(text) => normalizer.expect_injected(&text),
                        Command::Interrupted(turn) => {
                            fence.interrupted(turn, hooks_written(), tokio::time::Instant::now());
                        }
                    }
                    (Vec::new(), None)
                }
                Some((item, checkpoint)) = hooks_rx.recv() => {
                    let value = match &item {
                        TailItem::Line { line, .. } => serde_json::from_str::<Value>(line).ok(),
                        _ => None,
                    };
                    let outputs = match (value, item) {
                        (Some(value), _) => fence.hook(&mut normalizer, &value, checkpoint.offset, now_ms()),
                        (None, TailItem::Malformed { offset, error, .. }) => {
                            fence.read_to(checkpoint.offset);
                            vec![parse_error("hooks.jsonl", offset, &error)]
                        }
                        (None, _) => {
                            fence.read_to(checkpoint.offset);
                            Vec::new()
                        }
                    };
                    (outputs, Some((checkpoints.join("hooks.json"), checkpoint)))
                }
                Some((item, checkpoint)) = runner_rx.recv() => {
                    if let TailItem::Line { line, .. } = item
                        && let Ok(value) = serde_json::from_str::<Value>(&line)
                    {
                        self.runner_event(&live, &value, &mut normalizer).await;
                    }
                    (Vec::new(), Some((checkpoints.join("runner.json"), checkpoint)))
                }
                Some((item, checkpoint)) = transcript_rx.recv() => {
                    let outputs = match item {
                        TailItem::Line { line, .. } => match serde_json::from_str::<Value>(&line) {
                            Ok(value) => normalizer.transcript_line(&value),
                            Err(_) => Vec::new(),
                        },
                        TailItem::Malformed { offset, error, .. } => vec![parse_error("the transcript", offset, &error)],
                        _ => Vec::new(),
                    };
                    (outputs, Some((checkpoints.join("transcript.json"), checkpoint)))
                }
                _ = tick.tick() => {
                    let mut outputs = normalizer.tick(now_ms());
                    if let Some(status) = self.session_file_status(&live) {
                        // Read after the session file: the hooks it waits for include its Stop.
                        let written = hooks_written();
                        if *live.status.borrow() != status {
                            tracing::debug!(session = %session_id, %status, hooks_written = written, hooks_read = fence.read(), "claude: the session file's status changed");
                            live.status.send_replace(status.clone());
                        }
                        outputs.extend(fence.session_status(&mut normalizer, &status, written, tokio::time::Instant::now()));
                    }
                    (outputs, None)
                }
            };
            let mut outputs = outputs;
            let (released, expired) = fence.apply(&mut normalizer, tokio::time::Instant::now());
            for verdict in expired {
                tracing::warn!(
                    session = %session_id,
                    ?verdict,
                    "hooks.jsonl was not read up to where it stood when the turn looked ended; ending it anyway"
                );
            }
            outputs.extend(released);
            // Transcript switches (first prompt, /clear, fork) restart the transcript tail.
            let new_transcript = outputs
                .iter()
                .rev()
                .find_map(|output| match output {
                    Output::Transcript(path) => Some(path.clone()),
                    _ => None,
                })
                // A fork starts out naming its parent's transcript (`<id>.jsonl`): that one is
                // the parent's to follow; the fork's own comes with its first prompt.
                .filter(|path| {
                    live.fork_of.as_deref().is_none_or(|parent| {
                        Path::new(path).file_stem().and_then(|s| s.to_str()) != Some(parent)
                    })
                });
            self.apply(&live, outputs, &mut normalizer).await;
            // Checkpoints are saved once the queued lines are drained (and on every tick), not
            // after every line: a backlog is then not bound by one fsync'd rename per line. A
            // crash replays at most the lines since the last save; their turn, item and approval
            // events deduplicate.
            if let Some((file, checkpoint)) = checkpoint {
                unsaved.insert(file, checkpoint);
            }
            if !unsaved.is_empty()
                && (hooks_rx.is_empty() && transcript_rx.is_empty() && runner_rx.is_empty()
                    || unsaved_since.elapsed() >= CHECKPOINT_INTERVAL)
            {
                for (file, checkpoint) in unsaved.drain() {
                    let _ = tail::save_checkpoint(&file, &checkpoint).await;
                }
                unsaved_since = tokio::time::Instant::now();
            }
            if let Some(path) = new_transcript {
                inherit_fork_history(&live, Path::new(&path), &mut normalizer);
                transcript_cancel.cancel();
                transcript_cancel = cancel.child_token();
                tail::spawn_tail(
                    PathBuf::from(path),
                    None,
                    transcript_tx.clone(),
                    transcript_cancel.clone(),
                );
            }
        }
        tracing::debug!(session = %session_id, "claude session task exited");
    }

    async fn apply(&self, live: &Arc<Live>, outputs: Vec<Output>, normalizer: &mut Normalizer) {
        let _ = normalizer;
        for output in outputs {
            match output {
                Output::Store(kind) => {
                    if let EventKind::TurnCompleted(done) = &kind
                        && done.status == crate::protocol::TurnStatus::Interrupted
                    {
                        *lock(&live.interrupted_at) = Some(tokio::time::Instant::now());
                    }
                    self.store(&live.session_id, kind).await
                }
                Output::Bound {
                    claude_session_id, ..
                } if live.fork_of.as_deref() == Some(claude_session_id.as_str()) => {
                    // A fork starts under its parent's id; its own comes with its first prompt.
                    live.started.send_replace(true);
                }
                Output::Bound {
                    claude_session_id, ..
                } => {
                    self.store(
                        &live.session_id,
                        EventKind::SessionBound(SessionBound {
                            thread_id: claude_session_id,
                            backend: "claude".into(),
                        }),
                    )
                    .await;
                    live.started.send_replace(true);
                }
                Output::Transcript(_) => {}
                Output::Status(status) => {
                    if status == AgentStatus::Idle
                        && !live.exited.load(std::sync::atomic::Ordering::SeqCst)
                    {
                        live.started.send_replace(true);
                    }
                    // The tracker only needs changes; repeating a status costs a durable append.
                    let changed = {
                        let mut last = lock(&live.reported);
                        let changed = *last != Some(status);
                        *last = Some(status);
                        changed
                    };
                    if changed {
                        self.report(&live.session_id, status).await;
                    }
                }
                Output::PromptSubmitted { turn_id, text } => {
                    let _ = live.submitted.send((Some(turn_id), text));
                }
                Output::PromptQueued { text } => {
                    let _ = live.submitted.send((None, text));
                }
                Output::PermissionMode(mode) => self.permission_mode_seen(live, mode).await,
            }
        }
    }

    /// Records the mode Claude runs in when it changed; a mode the daemon does not allow is an
    /// alarm (an `error` event): cohost's PreToolUse hook asks before every tool call meanwhile.
    async fn permission_mode_seen(&self, live: &Arc<Live>, mode: String) {
        let known = self.core.read(|state| {
            state
                .sessions
                .get(&live.session_id)
                .and_then(|s| s.permission_mode_seen.as_ref().map(|m| m.mode.clone()))
        });
        if known.as_deref() == Some(mode.as_str()) {
            return;
        }
        let allowed = self.config.permission_modes.allows(&mode);
        if !allowed {
            tracing::warn!(session = %live.session_id, %mode, "claude runs in a permission mode this daemon does not allow");
            self.store(
                &live.session_id,
                EventKind::Error(ErrorEvent {
                    turn_id: None,
                    id: None,
                    message: format!(
                        "claude runs in permission mode `{mode}`, which this daemon does not allow \
                         (allowed: {}); cohost asks before every tool call until it is back in an \
                         allowed mode",
                        self.config.permission_modes.allowed().join(", ")
                    ),
                    code: Some("permission_mode_not_allowed".into()),
                }),
            )
            .await;
        }
        self.store(
            &live.session_id,
            EventKind::PermissionModeSeen(crate::protocol::PermissionModeSeen { mode, allowed }),
        )
        .await;
    }

    async fn runner_event(&self, live: &Arc<Live>, line: &Value, normalizer: &mut Normalizer) {
        match line.get("event").and_then(Value::as_str) {
            Some("started") => {
                *lock(&live.claude_pid) = line.get("pid").and_then(Value::as_u64).map(|p| p as u32);
                live.exited
                    .store(false, std::sync::atomic::Ordering::SeqCst);
                self.store(
                    &live.session_id,
                    EventKind::SessionStatus(SessionStatus {
                        state: SessionState::Live,
                        message: None,
                    }),
                )
                .await;
            }
            Some("exited") => {
                *lock(&live.claude_pid) = None;
                live.exited.store(true, std::sync::atomic::Ordering::SeqCst);
                live.started.send_replace(false);
                let code = line.get("code").and_then(Value::as_i64);
                let signal = line.get("signal").and_then(Value::as_i64);
                let outputs = normalizer.hook_line(&HookLine::session_end("exited"), now_ms());
                self.apply(live, outputs, normalizer).await;
                self.store(
                    &live.session_id,
                    EventKind::SessionStatus(SessionStatus {
                        state: SessionState::Exited,
                        message: Some(match (code, signal) {
                            (Some(code), _) => format!("claude exited with code {code}"),
                            (_, Some(signal)) => format!("claude was killed by signal {signal}"),
                            _ => "claude exited".into(),
                        }),
                    }),
                )
                .await;
                self.report_liveness(&live.session_id, Liveness::Exited)
                    .await;
                // The next status after a relaunch must reach the tracker again.
                *lock(&live.reported) = None;
            }
            Some("error") => {
                self.store(
                    &live.session_id,
                    EventKind::Error(ErrorEvent {
                        turn_id: None,
                        id: None,
                        message: line
                            .get("message")
                            .and_then(Value::as_str)
                            .unwrap_or("the runner failed")
                            .to_string(),
                        code: Some("runner_error".into()),
                    }),
                )
                .await;
            }
            _ => {}
        }
    }

    /// `~/.claude/sessions/<claude pid>.json` `status`, when the TUI runs.
    fn session_file_status(&self, live: &Live) -> Option<String> {
        let pid = (*lock(&live.claude_pid))?;
        let home = live.home.as_ref()?;
        let bytes =
            std::fs::read(home.join(".claude/sessions").join(format!("{pid}.json"))).ok()?;
        SessionFile::from_slice(&bytes)?.status
    }

    async fn report(&self, session_id: &str, status: AgentStatus) {
        self.report_with(session_id, status, Liveness::Alive).await;
    }

    async fn report_liveness(&self, session_id: &str, liveness: Liveness) {
        self.report_with(session_id, AgentStatus::Idle, liveness)
            .await;
    }

    async fn report_with(&self, session_id: &str, status: AgentStatus, liveness: Liveness) {
        let Some((thread, pane)) = self.core.read(|state| {
            state
                .sessions
                .get(session_id)
                .map(|s| (s.thread_id.clone(), s.pane.clone()))
        }) else {
            return;
        };
        let Some(pane) = pane else { return };
        // Not bound yet (a fork before its first prompt): no instance under a made-up key.
        let Some(thread) = thread else { return };
        mirror::report(
            &self.core,
            &self.tmux,
            Report {
                agent: "claude-code",
                thread_id: &thread,
                session_id,
                placement: Placement::Pane {
                    tmux_session: &pane.tmux_session,
                    pane_id: &pane.pane_id,
                },
                status,
                liveness,
            },
        )
        .await;
    }
}

/// A fork's transcript opens with a copy of its parent's conversation, line uuids and prompt ids
/// kept: those are the parent's turns, not this session's. Tells the normalizer to pass over the
/// lines of the parent's transcript (`<parent id>.jsonl` beside the fork's).
fn inherit_fork_history(live: &Live, transcript: &Path, normalizer: &mut Normalizer) {
    let Some(parent) = &live.fork_of else {
        return;
    };
    let parent_file = transcript.with_file_name(format!("{parent}.jsonl"));
    if parent_file == transcript {
        return;
    }
    let Ok(text) = std::fs::read_to_string(&parent_file) else {
        return;
    };
    normalizer.inherit(
        text.lines()
            .filter_map(RecordHead::of_line)
            .filter_map(|head| head.uuid),
    );
}

/// The parent conversation of a fork: `--resume <id>` with `--fork-session` in `launch.json`.
fn fork_parent(dir: &Path) -> Option<String> {
    let launch = pane::read_launch(dir)?;
    let argv: Vec<&str> = launch.argv.iter().map(String::as_str).collect();
    if !argv.contains(&"--fork-session") {
        return None;
    }
    let at = argv.iter().position(|a| *a == "--resume")?;
    argv.get(at + 1).map(|id| id.to_string())
}

fn parse_error(source: &str, offset: u64, error: &str) -> Output {
    Output::Store(EventKind::Error(ErrorEvent {
        turn_id: None,
        id: Some(format!("parse:{source}:{offset}")),
        message: format!("a malformed line in {source} at byte {offset}: {error}"),
        code: Some("parse_error".into()),
    }))
}
