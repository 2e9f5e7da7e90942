//! The Pi host: [`PiHost`] and its [`SessionHost`](crate::runtime::SessionHost) implementation.
//!
//! One `pi --mode rpc` per hosted session, in the session's directory, with a directory of its
//! own under `$COHOST_HOME/pi/<session>/`: `agent/` (Pi's agent directory: `models.json`,
//! `settings.json` and `auth.json` copied from the user's, so Pi's writes never reach the
//! user's files and the user's own extensions are not loaded), `sessions/` (Pi's session file)
//! and, when the policy asks, `gate.ts` (cohost's approval gate, loaded with `-e`).
//!
//! One dispatch task per session reads Pi's events, runs each through its [`Forwarder`] and
//! performs the effects in order, so a session's events are stored in Pi's order, and reports
//! the session's status to the tracker (in the tmux session whose directory holds its cwd: a
//! Pi session has no pane).
//!
//! **Safety:** Pi has no permission system: under `on-request` and `untrusted` the gate asks
//! cohost before every tool call but the read-only built-ins (`read`, `grep`, `find`, `ls`),
//! and the call waits for the answer. An interrupt first cancels every gate dialog of the
//! session (Pi's `abort` waits until an open dialog is answered), under the same lock an
//! approval's answer takes, then aborts: a late answer gets `409` from cohost and never
//! reaches Pi.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::normalize::Forwarder;
use super::process::{Launch, PiError, PiProcess, find_pi};
use super::wire::{ExtensionUiResponse, RpcCommand, State};
use dispatch::dispatch;

mod dispatch;
mod session_host;

use crate::core::CoreHandle;
use crate::protocol::{
    EventKind, Field, ForkOrigin, HostedSessionView, Runtime, SessionBound, SessionCreated,
    SessionState, message,
};
use crate::runtime::common::gated::Gated;
use crate::runtime::common::hosted::{self, resolved_by_runtime};
use crate::runtime::common::{lock, new_session_id, private_dir, write_private};
use crate::runtime::{CreateSession, HostError};
use crate::tmux::SessionCache;

/// The approval policies a Pi session can run under.
pub const APPROVAL_POLICIES: [&str; 3] = ["untrusted", "on-request", "never"];
/// The policy of a session whose request names none: Pi asks before tools act.
pub const DEFAULT_POLICY: &str = "on-request";
/// The gate extension (see its header).
const GATE_SOURCE: &str = include_str!("../gate.ts");
/// The files of the user's agent directory a session's Pi gets a copy of.
const AGENT_FILES: [&str; 3] = ["models.json", "settings.json", "auth.json"];
/// The file in a session's directory naming its Pi session file (once Pi named one).
const SESSION_FILE: &str = "session-file";
/// The file in a forked session's directory naming the parent's session file it forks.
const FORK_OF: &str = "fork-of";
/// How long an inject waits for a session being started or restored to be bound.
const PARK_TIMEOUT: Duration = Duration::from_secs(120);
/// Why a Pi session has no co-driving terminal (the capability's answer).
pub const NO_TERMINAL: &str = "pi sessions cannot be co-driven: cohost drives Pi through `pi --mode rpc`, whose stdio is the session's only interface, and Pi's TUI cannot attach to a running RPC session";

/// The thinking levels Pi takes (`--thinking`; Pi clamps one to what the model supports).
pub const THINKING_LEVELS: [&str; 6] = ["off", "minimal", "low", "medium", "high", "xhigh"];

/// `provider/model` split, both parts non-empty.
pub fn split_model(model: &str) -> Option<(&str, &str)> {
    model
        .split_once('/')
        .filter(|(provider, id)| !provider.is_empty() && !id.is_empty())
}

fn is_model(model: &str) -> bool {
    split_model(model).is_some()
}

/// What a Pi session takes, and why it takes nothing else.
const GATED: Gated = Gated {
    runtime: Runtime::Pi,
    budget: "retries are pi's own settings",
    terminal: Some(NO_TERMINAL),
    policies: &APPROVAL_POLICIES,
    policies_why: "pi's gate asks before a tool runs; it cannot ask only after a failure",
    model_ok: is_model,
};

/// Whether the policy puts the gate in front of Pi's tools.
pub fn gated(policy: &str) -> bool {
    policy != "never"
}

impl From<PiError> for HostError {
    fn from(error: PiError) -> Self {
        HostError::failed_by(Runtime::Pi, error.to_string(), error)
    }
}

#[derive(Clone)]
pub struct PiHost {
    inner: Arc<Inner>,
}

struct Inner {
    core: CoreHandle,
    /// Where a dispatch's panic is recorded for health and doctor.
    failures: crate::failures::TaskFailures,
    tmux: Arc<SessionCache>,
    /// `$COHOST_HOME/pi`.
    root: PathBuf,
    bin: Result<PathBuf, String>,
    /// The release found, once probed.
    version: Mutex<Option<String>>,
    live: Mutex<HashMap<String, Arc<Live>>>,
    /// The Pi TUIs adopted in their panes.
    adoptions: Arc<super::adopt::Adoptions>,
}

impl PiHost {
    /// The Pi TUIs adopted in their panes.
    fn adoptions(&self) -> &Arc<super::adopt::Adoptions> {
        &self.inner.adoptions
    }
}

/// The gate dialogs a session has open.
#[derive(Default)]
struct Dialogs {
    /// An interrupt is settling them: a dialog that opens now is cancelled at once.
    interrupting: bool,
    pending: BTreeSet<String>,
}

struct Live {
    session_id: String,
    process: watch::Sender<Option<Arc<PiProcess>>>,
    /// Injects, one at a time.
    inject: tokio::sync::Mutex<()>,
    /// Answers to approvals and interrupts, one at a time.
    decide: tokio::sync::Mutex<()>,
    forwarder: Mutex<Forwarder>,
    dialogs: Mutex<Dialogs>,
    /// Stops the dispatch task (close, shutdown).
    cancel: CancellationToken,
}

/// The hosted part of `cohost doctor`'s `pi` section (the watcher's checks of the installed
/// Pi and the Node it needs are merged into the same section by the service).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PiHostDoctor {
    /// The `pi` sessions run (`COHOST_PI_BIN`, else `pi` on `PATH`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hosted_path: Option<String>,
    pub approval_policies: Vec<&'static str>,
    pub default_approval_policy: &'static str,
    /// Why no terminal can co-drive a Pi session.
    pub co_driving: &'static str,
    pub issues: Vec<String>,
    pub warnings: Vec<String>,
}

/// The user's Pi agent directory: `PI_CODING_AGENT_DIR`, else `~/.pi/agent`.
fn user_agent_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("PI_CODING_AGENT_DIR").filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(dir));
    }
    std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".pi/agent"))
}

/// A turn id for a prompt cohost sends (`pi-turn-` + 16 random hex digits).
fn new_turn_id() -> String {
    let mut bytes = [0u8; 8];
    let _ = getrandom::fill(&mut bytes);
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("pi-turn-{hex}")
}

fn io_failure(what: &str, path: &Path, error: std::io::Error) -> HostError {
    HostError::failed_by(
        Runtime::Pi,
        format!("cannot {what} {}", path.display()),
        error,
    )
}

impl PiHost {
    pub fn new(
        core: CoreHandle,
        tmux: Arc<SessionCache>,
        root: PathBuf,
        failures: crate::failures::TaskFailures,
    ) -> Self {
        let bin = find_pi();
        if let Err(error) = &bin {
            tracing::info!(%error, "pi not found; pi sessions are unavailable");
        }
        let adoptions = Arc::new(super::adopt::Adoptions::new(
            core.clone(),
            Arc::clone(&tmux),
            &root,
            failures.clone(),
        ));
        PiHost {
            inner: Arc::new(Inner {
                adoptions,
                failures,
                core,
                tmux,
                root,
                bin,
                version: Mutex::new(None),
                live: Mutex::new(HashMap::new()),
            }),
        }
    }

    fn bin(&self) -> Result<&PathBuf, HostError> {
        self.inner
            .bin
            .as_ref()
            .map_err(|error| HostError::unavailable(Runtime::Pi, error.clone()))
    }

    fn view(&self, session_id: &str) -> Result<HostedSessionView, HostError> {
        self.inner
            .core
            .read(|state| state.session_view(session_id))
            .ok_or_else(|| HostError::UnknownSession(session_id.to_string()))
    }

    /// The release of `pi`, probed once; a release outside `peers::PI` is refused.
    async fn checked_version(&self) -> Result<String, HostError> {
        if let Some(version) = lock(&self.inner.version).clone() {
            return Ok(version);
        }
        let bin = self.bin()?.clone();
        let version = super::process::version(&bin)
            .await
            .map_err(|error| HostError::unavailable(Runtime::Pi, error))?;
        let supported = crate::peers::PI;
        if supported.place(&version) != Some(crate::peers::Place::Tested) {
            return Err(HostError::unavailable(
                Runtime::Pi,
                format!(
                    "pi {version} is outside the releases cohost supports ({}); install {}@{}",
                    supported.range(),
                    supported.newest_package(),
                    supported.newest
                ),
            ));
        }
        *lock(&self.inner.version) = Some(version.clone());
        Ok(version)
    }

    /// The session's directory, prepared: its agent directory (the user's config copied),
    /// its session directory, and the gate when the policy asks for it.
    fn prepare(&self, session_id: &str, policy: &str) -> Result<Launch, HostError> {
        let dir = self.inner.root.join(session_id);
        let agent_dir = dir.join("agent");
        let session_dir = dir.join("sessions");
        for path in [&self.inner.root, &dir, &agent_dir, &session_dir] {
            private_dir(path).map_err(|e| io_failure("create", path, e))?;
        }
        if let Some(user) = user_agent_dir() {
            for name in AGENT_FILES {
                let from = user.join(name);
                let to = agent_dir.join(name);
                if to.exists() {
                    continue;
                }
                match std::fs::read(&from) {
                    Ok(bytes) => {
                        write_private(&to, &bytes).map_err(|e| io_failure("write", &to, e))?
                    }
                    Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
                    Err(error) => return Err(io_failure("read", &from, error)),
                }
            }
        }
        let gate = if gated(policy) {
            let path = dir.join("gate.ts");
            write_private(&path, GATE_SOURCE.as_bytes())
                .map_err(|e| io_failure("write", &path, e))?;
            Some(path)
        } else {
            None
        };
        let named_file = |name: &str| {
            std::fs::read_to_string(dir.join(name))
                .ok()
                .map(|s| PathBuf::from(s.trim()))
                .filter(|p| p.is_file())
        };
        let resume = named_file(SESSION_FILE);
        // A fork whose own file Pi has not written yet forks its parent's again.
        let fork = resume.is_none().then(|| named_file(FORK_OF)).flatten();
        Ok(Launch {
            bin: self.bin()?.clone(),
            cwd: PathBuf::new(),
            agent_dir,
            session_dir,
            gate,
            resume,
            fork,
        })
    }

    /// Starts the session's Pi (resuming its session file when it has one), follows its
    /// events, sets the model, and binds them.
    async fn bind(&self, live: &Arc<Live>) -> Result<(), HostError> {
        self.checked_version().await?;
        let Some(created) = self.inner.settings(&live.session_id) else {
            return Err(HostError::UnknownSession(live.session_id.clone()));
        };
        let policy = created
            .approval_policy
            .as_ref()
            .map(|p| p.as_str().to_string())
            .unwrap_or_else(|| DEFAULT_POLICY.to_string());
        let mut launch = self.prepare(&live.session_id, &policy)?;
        launch.cwd = PathBuf::from(&created.cwd);
        // A resumed or forked conversation keeps the model its file records.
        let resumed = launch.resume.is_some() || launch.fork.is_some();
        let (process, events) = PiProcess::spawn(&launch)
            .map_err(|error| HostError::unavailable_by(Runtime::Pi, error.to_string(), error))?;
        tokio::spawn(dispatch(
            Arc::clone(&self.inner),
            Arc::clone(live),
            Arc::clone(&process),
            events,
        ));
        // No ready line: the first answer is the signal.
        let state: State = serde_json::from_value(process.request(RpcCommand::GetState).await?)
            .unwrap_or_default();
        if !resumed && let Some(model) = &created.model {
            let (provider, model_id) = model.split_once('/').unwrap_or(("", model));
            let set = process
                .request(RpcCommand::SetModel {
                    provider: provider.to_string(),
                    model_id: model_id.to_string(),
                })
                .await;
            if let Err(error) = set {
                process.stop().await;
                return Err(match error.refusal() {
                    Some(refusal) => HostError::field(
                        Field::Model,
                        message![
                            format!("pi does not know the "),
                            Field::Model,
                            format!(" `{model}`: {refusal}")
                        ],
                    ),
                    None => error.into(),
                });
            }
        }
        if let Some(file) = &state.session_file {
            let path = self.inner.root.join(&live.session_id).join(SESSION_FILE);
            write_private(&path, file.as_bytes()).map_err(|e| io_failure("write", &path, e))?;
        }
        let thread_id = state.session_id.clone().unwrap_or_default();
        hosted::append_once(
            &self.inner.core,
            &live.session_id,
            EventKind::SessionBound(SessionBound {
                thread_id,
                backend: format!("pi:{}", process.pid),
            }),
        )
        .await?;
        live.process.send_replace(Some(process));
        Ok(())
    }

    /// Creates a session; a fork names its origin and the session file its Pi starts from
    /// (`--fork`; none when the parent's Pi has written none yet).
    async fn create_session(
        &self,
        request: CreateSession,
        forked_from: Option<(ForkOrigin, Option<PathBuf>)>,
    ) -> Result<HostedSessionView, HostError> {
        self.bin()?;
        self.checked_version().await?;
        let session_id = new_session_id();
        if let Some((_, Some(parent_file))) = &forked_from {
            let dir = self.inner.root.join(&session_id);
            for path in [&self.inner.root, &dir] {
                private_dir(path).map_err(|e| io_failure("create", path, e))?;
            }
            let path = dir.join(FORK_OF);
            write_private(&path, parent_file.as_os_str().as_encoded_bytes())
                .map_err(|e| io_failure("write", &path, e))?;
        }
        let created = GATED.created(
            request,
            DEFAULT_POLICY,
            forked_from.map(|(origin, _)| origin),
        );
        self.inner
            .core
            .append(Some(session_id.clone()), EventKind::SessionCreated(created))
            .await?;
        let live = self.inner.live_for(&session_id);
        if let Err(error) = self.bind(&live).await {
            self.inner
                .status(&session_id, SessionState::Lost, Some(error.to_string()))
                .await;
            live.cancel.cancel();
            if let Some(process) = live.process.send_replace(None) {
                process.stop().await;
            }
            lock(&self.inner.live).remove(&session_id);
            return Err(error);
        }
        self.view(&session_id)
    }

    /// Forks the whole conversation into a new session whose Pi starts with `--fork` on the
    /// parent's session file: a new file (new session id, `parentSession` in its header) holding
    /// the parent's entries; the parent's Pi is not touched.
    async fn fork_session(
        &self,
        session_id: &str,
        after_turn: Option<String>,
    ) -> Result<HostedSessionView, HostError> {
        if after_turn.is_some() {
            return Err(HostError::field(
                Field::AfterTurnId,
                message![
                    "pi forks the whole conversation; ",
                    Field::AfterTurnId,
                    " is codex and opencode only"
                ],
            ));
        }
        let live = self.inner.live_session(session_id)?;
        self.inner.wait_bound(&live).await?;
        let Some(created) = self.inner.settings(session_id) else {
            return Err(HostError::UnknownSession(session_id.to_string()));
        };
        // Pi 0.73.1 writes its file once the first reply completes: before that there is no
        // conversation to copy, and the fork starts empty.
        let parent_file =
            std::fs::read_to_string(self.inner.root.join(session_id).join(SESSION_FILE))
                .ok()
                .map(|s| PathBuf::from(s.trim()))
                .filter(|p| p.is_file());
        let request = CreateSession {
            cwd: PathBuf::from(&created.cwd),
            model: created.model.clone(),
            approval_policy: created
                .approval_policy
                .as_ref()
                .map(|p| p.as_str().to_string()),
            profile: created.profile.clone().map(|p| *p),
            ..CreateSession::default()
        };
        let origin = ForkOrigin {
            session_id: session_id.to_string(),
            after_turn_id: None,
        };
        self.create_session(request, Some((origin, parent_file)))
            .await
    }

    /// Cancels every gate dialog the session has open, storing each as resolved by the
    /// runtime, and makes any dialog that opens until [`Self::end_interrupt`] be cancelled too.
    async fn settle_dialogs(&self, live: &Live, process: &PiProcess) {
        let ids: Vec<String> = {
            let mut dialogs = lock(&live.dialogs);
            dialogs.interrupting = true;
            std::mem::take(&mut dialogs.pending).into_iter().collect()
        };
        for id in ids {
            if let Err(error) = process
                .answer_dialog(&ExtensionUiResponse::cancelled(&id))
                .await
            {
                tracing::warn!(%error, "could not cancel a pi dialog");
            }
            self.inner
                .store(&live.session_id, resolved_by_runtime(id, Some("cancel")))
                .await;
        }
    }

    /// Interrupts the running turn (only `turn`, when given). The caller holds `decide`.
    async fn interrupt_locked(
        &self,
        live: &Arc<Live>,
        turn: Option<&str>,
    ) -> Result<bool, HostError> {
        let Some(process) = live.process.borrow().clone() else {
            return Ok(false);
        };
        let current = {
            let mut forwarder = lock(&live.forwarder);
            let current = forwarder
                .current
                .clone()
                .or_else(|| forwarder.pending_api.back().cloned());
            if current.is_some() && turn.is_none_or(|wanted| Some(wanted) == current.as_deref()) {
                forwarder.interrupt_requested = true;
            }
            current
        };
        let Some(current) = current else {
            return Ok(false);
        };
        if turn.is_some_and(|wanted| wanted != current) {
            return Ok(false);
        }
        // Pi's abort waits until an open dialog is answered: cancel them first.
        self.settle_dialogs(live, &process).await;
        let aborted = process.request(RpcCommand::Abort).await;
        lock(&live.dialogs).interrupting = false;
        aborted?;
        Ok(true)
    }

    async fn do_interrupt(&self, session_id: &str, turn: Option<&str>) -> Result<bool, HostError> {
        let live = self.inner.live_session(session_id)?;
        let _decide = live.decide.lock().await;
        self.interrupt_locked(&live, turn).await
    }

    /// Switches the session's model (Pi's `set_model`, which Pi writes to its session file as
    /// a `model_change`, so a restart keeps it) and, when given, its thinking level; answers
    /// what Pi then runs on.
    async fn switch_model(
        &self,
        session_id: &str,
        model: &str,
        thinking_level: Option<&str>,
    ) -> Result<crate::runtime::Capability, HostError> {
        let Some((provider, model_id)) = split_model(model) else {
            return Err(GATED.model_refused(model));
        };
        if let Some(level) = thinking_level
            && !THINKING_LEVELS.contains(&level)
        {
            return Err(HostError::Invalid(format!(
                "thinkingLevel must be one of {}, got `{level}`",
                THINKING_LEVELS.join(", ")
            )));
        }
        let live = self.inner.live_session(session_id)?;
        let process = self.inner.wait_bound(&live).await?;
        process
            .request(RpcCommand::SetModel {
                provider: provider.to_string(),
                model_id: model_id.to_string(),
            })
            .await
            .map_err(|error| match error.refusal() {
                Some(refusal) => HostError::field(
                    Field::Model,
                    message![
                        "pi does not know the ",
                        Field::Model,
                        format!(" `{model}`: {refusal}")
                    ],
                ),
                None => error.into(),
            })?;
        if let Some(level) = thinking_level {
            process
                .request(RpcCommand::SetThinkingLevel {
                    level: level.to_string(),
                })
                .await?;
        }
        let state: State = serde_json::from_value(process.request(RpcCommand::GetState).await?)
            .unwrap_or_default();
        Ok(crate::runtime::Capability::ok(serde_json::json!({
            "model": state.model.map(|m| format!("{}/{}", m.provider, m.id)),
            "thinkingLevel": state.thinking_level,
            "appliesTo": "the next model request",
        })))
    }

    /// The models Pi knows (its `models.json` and built-in providers), as `provider/model`
    /// ids, asked of a live session's Pi (or of one started for the purpose).
    pub(super) async fn list_models(&self) -> Result<serde_json::Value, HostError> {
        let running = lock(&self.inner.live)
            .values()
            .find_map(|live| live.process.borrow().clone());
        // A Pi started for the purpose lives (with its event channel open, so its responses
        // are read) until the end of this call; dropping it kills it.
        let mut transient = None;
        let process = match running {
            Some(process) => process,
            None => {
                self.checked_version().await?;
                let mut launch = self.prepare("models", "never")?;
                launch.cwd = self.inner.root.join("models");
                launch.resume = None;
                launch.fork = None;
                let (process, events) = PiProcess::spawn(&launch).map_err(|error| {
                    HostError::unavailable_by(Runtime::Pi, error.to_string(), error)
                })?;
                transient = Some((Arc::clone(&process), events));
                process
            }
        };
        let state: State = serde_json::from_value(process.request(RpcCommand::GetState).await?)
            .unwrap_or_default();
        let available: super::wire::AvailableModels =
            serde_json::from_value(process.request(RpcCommand::GetAvailableModels).await?)
                .unwrap_or_default();
        let default = state.model.map(|m| format!("{}/{}", m.provider, m.id));
        let models: Vec<serde_json::Value> = available
            .models
            .iter()
            .map(|model| {
                let id = format!("{}/{}", model.provider, model.id);
                serde_json::json!({
                    "id": id,
                    "providerId": model.provider,
                    "modelId": model.id,
                    "displayName": model.name.clone().unwrap_or_else(|| model.id.clone()),
                    "provider": model.provider,
                    "isDefault": default.as_deref() == Some(id.as_str()),
                })
            })
            .collect();
        if let Some((process, _events)) = transient {
            process.stop().await;
        }
        Ok(serde_json::Value::Array(models))
    }
}

impl Inner {
    fn live_for(&self, session_id: &str) -> Arc<Live> {
        hosted::live_entry(&self.live, session_id, || Live {
            session_id: session_id.to_string(),
            process: watch::channel(None).0,
            inject: tokio::sync::Mutex::new(()),
            decide: tokio::sync::Mutex::new(()),
            forwarder: Mutex::new(Forwarder::default()),
            dialogs: Mutex::new(Dialogs::default()),
            cancel: CancellationToken::new(),
        })
    }

    fn live_session(&self, session_id: &str) -> Result<Arc<Live>, HostError> {
        hosted::check_open(&self.core, session_id, Runtime::Pi)?;
        if self.adoptions.is_adopted(session_id) {
            // An adopted Pi has no RPC process: what needs one (fork, models, approvals) is
            // refused, never parked waiting for a process that never comes.
            return Err(HostError::Unsupported(format!(
                "session `{session_id}` drives a pi TUI adopted in its pane: only prompts, interrupts and disown reach it (no fork, model switch or approvals)"
            )));
        }
        Ok(self.live_for(session_id))
    }

    fn settings(&self, session_id: &str) -> Option<SessionCreated> {
        hosted::settings(&self.core, session_id)
    }

    async fn wait_bound(&self, live: &Live) -> Result<Arc<PiProcess>, HostError> {
        hosted::wait_bound(&live.process, PARK_TIMEOUT, &live.session_id).await
    }

    async fn status(&self, session_id: &str, state: SessionState, message: Option<String>) {
        hosted::status(&self.core, session_id, state, message).await
    }

    async fn store(&self, session_id: &str, kind: EventKind) {
        hosted::store(&self.core, session_id, kind, Runtime::Pi).await
    }

    /// After a daemon restart: what Pi's session file holds of the turn the restart cut short
    /// and was not stored is backfilled (items already stored are duplicates the core drops),
    /// its approvals (whose dialogs went with the old Pi) are resolved by the runtime, the items
    /// it left open end `interrupted`, and the turn ends `interrupted` (`lost`).
    async fn end_cut_turn(&self, session_id: &str) {
        let turn = self.core.read(|state| {
            state
                .sessions
                .get(session_id)
                .and_then(|s| s.active_turn.clone())
        });
        if let Some(turn_id) = &turn {
            let file = std::fs::read_to_string(self.root.join(session_id).join(SESSION_FILE))
                .ok()
                .and_then(|path| std::fs::read_to_string(path.trim()).ok())
                .unwrap_or_default();
            let messages = super::normalize::file_messages(&file);
            let history = self.core.read(|state| {
                super::normalize::backfill(&messages, turn_id, |user_item| {
                    let probe = EventKind::ItemCompleted(crate::protocol::ItemEvent {
                        turn_id: turn_id.clone(),
                        item: crate::protocol::Item::UserMessage {
                            id: user_item.to_string(),
                            text: String::new(),
                        },
                    });
                    state.sessions.is_duplicate(session_id, &probe)
                })
            });
            for kind in history {
                self.store(session_id, kind).await;
            }
        }
        let cut = "the daemon restarted while the turn ran";
        hosted::end_cut_turn(&self.core, session_id, Runtime::Pi, cut).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_never_runs_without_the_gate() {
        assert!(!gated("never"));
        assert!(gated("on-request"));
        assert!(gated("untrusted"));
    }

    #[test]
    fn the_gate_has_no_imports_and_asks_with_the_title_the_forwarder_reads() {
        assert!(
            !GATE_SOURCE.contains("import "),
            "the gate must load in both releases"
        );
        assert!(GATE_SOURCE.contains(&format!("\"{}\"", super::super::normalize::GATE_TITLE)));
        assert!(GATE_SOURCE.contains(super::super::normalize::DECLINE_REASON));
        assert!(GATE_SOURCE.contains("[\"read\", \"grep\", \"find\", \"ls\"]"));
    }
}
