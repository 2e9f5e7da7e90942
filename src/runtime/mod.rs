//! The runtime seam: what a surface or the task queue may ask of any hosted runtime — the
//! [`SessionHost`] trait and the [`Hosts`] registry that maps each [`Runtime`] to its host — and
//! the types every host shares (`HostError`, `InjectOutcome`, `Capability`, `CreateSession`).
//!
//! Each runtime lives in its own folder (`codex/`, `claude/`, `opencode/`, `pi/`) and imports this module and
//! `common/` (what pane-hosted runtimes share), never another runtime. Surfaces and the task
//! queue reach a runtime only through the registry: `Hosts::new` / `Hosts::start` are the one place
//! that names the runtimes (the daemon only calls `Hosts::start`).

pub mod claude;
pub mod codex;
pub mod common;
pub mod opencode;
pub mod pi;
#[cfg(test)]
mod restore_tests;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use crate::core::CoreError;
use crate::protocol::{
    Budget, Field, HostedSessionView, InputAnswer, InputRequested, Message, PromptImage, Runtime,
};

/// What the daemon tells [`Hosts::start`]: its home and the settings the runtimes read.
#[derive(Debug, Clone)]
pub struct HostsConfig {
    /// `$COHOST_HOME`.
    pub home: PathBuf,
    /// The daemon's socket, for the pane programs (the permission hook).
    pub socket: PathBuf,
    pub token_file: PathBuf,
    /// The Claude permission modes sessions may run in.
    pub permission_modes: claude::PermissionPolicy,
}

/// Why a host operation failed. The service layer maps each variant to one error once.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// The request is wrong in a way no field names (a bad decision for this approval, …).
    #[error("{0}")]
    Invalid(String),
    /// One field of the request is wrong; the message names fields as values (each surface
    /// names them its own way).
    #[error("{message}")]
    InvalidField { field: Field, message: Message },
    /// The runtime cannot do this at all (a claude session has no separate terminal, …).
    #[error("{0}")]
    Unsupported(String),
    #[error("no session `{0}`")]
    UnknownSession(String),
    #[error("session `{0}` is closed")]
    Closed(String),
    /// As `Closed` (the same error code), saying why in its own words (naming the session): an
    /// adopted agent's pane gone or changed, its agent exited; nothing was typed.
    #[error("{0}")]
    ClosedBecause(String),
    /// The session exists but cannot take this now (no thread bound yet, the TUI not running).
    #[error("session `{0}` has no live thread yet; retry shortly")]
    NotReady(String),
    /// As `NotReady` (the same error code), saying why in its own words: an adopted TUI's
    /// screen that cannot be read, a turn running, a paste not confirmed; nothing was typed or
    /// submitted.
    #[error("{0}")]
    NotReadyBecause(String),
    /// A human has a half-typed draft in the session's input box; cohost does not type into it.
    #[error("someone is typing in session `{0}`'s input box; not typing over their draft")]
    HumanTyping(String),
    /// The runtime's program is not installed or did not start; `source` keeps the cause when
    /// there is one (an I/O error naming its path, a failed spawn, the handshake's error).
    #[error("{runtime} is not available: {message}")]
    Unavailable {
        runtime: Runtime,
        message: String,
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
    /// The runtime answered with an error, or its process failed us; `source` keeps the cause
    /// when there is one (an RPC error, an I/O error, a tmux failure).
    #[error("{runtime} failed: {message}")]
    Failed {
        runtime: Runtime,
        message: String,
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
    #[error("no approval `{0}` in this session")]
    UnknownApproval(String),
    #[error("approval `{0}` was already resolved")]
    ApprovalResolved(String),
    #[error("no input request `{0}` in this session")]
    UnknownRequest(String),
    /// The request was answered already (first answer wins), or made moot.
    #[error("input request `{0}` was already resolved")]
    RequestResolved(String),
    /// An agent instance cannot be adopted (its pane is gone, its process exited, the pane
    /// runs something else, …); nothing was typed.
    #[error("{message}")]
    CannotAdopt {
        refusal: AdoptRefusal,
        message: String,
    },
    /// Only a session that adopted an agent can give it back.
    #[error("session `{0}` was not adopted: cohost started its agent (close it instead)")]
    NotAdopted(String),
    /// The agent runs a turn (or waits in a dialog): what was asked (a rehome) would stop it.
    #[error("{0}")]
    Busy(String),
    /// A key would answer a prompt on an adopted TUI's screen, but the screen is not exactly
    /// the prompt known for its release (or none is known): nothing was typed.
    #[error("{0}")]
    ScreenMismatch(String),
    /// Recording the outcome in the event log failed.
    #[error(transparent)]
    Core(#[from] CoreError),
}

/// Why an agent instance cannot be adopted (each is its own error code).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdoptRefusal {
    /// The instance's tmux pane is gone.
    PaneGone,
    /// The agent's process exited (or its session file is gone).
    AgentExited,
    /// The pane no longer runs that agent: another process owns it, or another session of the
    /// agent runs there now.
    PaneChanged,
    /// Nothing says which process it is, or where it runs.
    NotAdoptable,
    /// A cohost session drives it already (hosted, or adopted before).
    AlreadyDriven,
}

/// `POST /api/state/{session}/agents/{key}/adopt`: an agent instance as the tracker and the
/// passive watcher know it. The host checks all of it again (pane, process tree, the agent's own
/// files) before it adopts anything, and types nothing while it checks.
#[derive(Debug, Clone)]
pub struct AdoptRequest {
    /// The tracker instance (`claude-code:<session id>`).
    pub key: String,
    /// The agent, as the tracker names it (`claude-code`).
    pub agent: String,
    /// The agent's own session (thread) id.
    pub agent_session_id: String,
    /// The tmux session and pane the watcher placed it in.
    pub tmux_session: String,
    pub pane_id: String,
    /// The agent's process, as the watcher found it.
    pub pid: Option<u32>,
    pub cwd: Option<String>,
    /// The agent's files the watcher reads (its transcript, its session file).
    pub files: Vec<String>,
}

impl HostError {
    pub fn unavailable(runtime: Runtime, message: impl Into<String>) -> Self {
        HostError::Unavailable {
            runtime,
            message: message.into(),
            source: None,
        }
    }

    /// Not available, with the cause kept as the error's source.
    pub fn unavailable_by(
        runtime: Runtime,
        message: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        HostError::Unavailable {
            runtime,
            message: message.into(),
            source: Some(Box::new(source)),
        }
    }

    pub fn failed(runtime: Runtime, message: impl Into<String>) -> Self {
        HostError::Failed {
            runtime,
            message: message.into(),
            source: None,
        }
    }

    /// A failure with its cause kept as the error's source.
    pub fn failed_by(
        runtime: Runtime,
        message: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        HostError::Failed {
            runtime,
            message: message.into(),
            source: Some(Box::new(source)),
        }
    }

    pub fn field(field: Field, message: impl Into<Message>) -> Self {
        HostError::InvalidField {
            field,
            message: message.into(),
        }
    }
}

pub use crate::protocol::{Capability, InjectOutcome, InjectState, RuntimeDoctor, TerminalSpec};

/// `POST /api/sessions` (or MCP `start_session`), validated for syntax by the service; each
/// runtime checks the options that are its own (`SessionHost::check_create`) and refuses the
/// others by field name. A new runtime with options of its own adds them here.
#[derive(Debug, Clone, Default)]
pub struct CreateSession {
    pub cwd: PathBuf,
    pub model: Option<String>,
    pub idempotency_key: Option<String>,
    /// The tmux session to open a pane in (default `cohost`).
    pub tmux_session: Option<String>,
    /// codex: also open the real TUI on the thread in a tmux pane.
    pub terminal: bool,
    /// codex: the thread's approval policy.
    pub approval_policy: Option<String>,
    /// codex: the sandbox mode.
    pub sandbox: Option<String>,
    /// codex: run on a dedicated backend with these retry settings.
    pub budget: Option<Budget>,
    /// claude: the permission mode to start in.
    pub permission_mode: Option<String>,
    /// The profile the session starts from (its effective values; checked against
    /// [`profile_support`] before it gets here).
    pub profile: Option<crate::protocol::SessionProfile>,
}

/// What a profile (`[profiles.NAME]` in the config file) may set on a runtime: the settings it
/// honours and the values they take. A setting not listed is refused, naming it and the
/// runtime, before anything starts (docs/profiles.md has the table).
#[derive(Debug, Clone, Copy)]
pub struct ProfileSupport {
    /// The settings the runtime honours, beyond `runtime`, `cwd`, `prompt` and `extends`.
    pub settings: &'static [&'static str],
    pub efforts: &'static [&'static str],
    pub approval_policies: &'static [&'static str],
    pub sandboxes: &'static [&'static str],
    pub permission_modes: &'static [&'static str],
}

/// The profile settings `runtime` honours.
pub fn profile_support(runtime: Runtime) -> ProfileSupport {
    match runtime {
        Runtime::Codex => codex::PROFILE_SUPPORT,
        Runtime::Claude => claude::PROFILE_SUPPORT,
        Runtime::Opencode => opencode::PROFILE_SUPPORT,
        Runtime::Pi => pi::PROFILE_SUPPORT,
    }
}

/// What happens to a prompt a runtime had taken when the daemon restarts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterRestart {
    /// The agent's process went down with the daemon: the turn is lost.
    Lost,
    /// The agent keeps running without the daemon (a TUI in tmux): its turn still ends.
    Continues,
}

/// A forked session, or why there is none (a capability answer).
pub type Forked = Result<HostedSessionView, Capability>;

/// What a surface or the task queue may ask of a hosted runtime. Every method names the cohost
/// session it acts on; the host refuses sessions of another runtime. Optional capabilities have
/// default bodies that answer `unsupported`.
#[async_trait::async_trait]
pub trait SessionHost: Send + Sync {
    /// The runtime this host runs.
    fn runtime(&self) -> Runtime;

    /// Checks the options of a create request that concern this runtime, and refuses the ones
    /// that do not apply to it, naming the field.
    fn check_create(&self, request: &CreateSession) -> Result<(), HostError>;

    /// How a session of this runtime is started: the create field its policy goes in and the
    /// values it takes, described for a person (`GET /api/runtimes`, the web page's form).
    fn start_choices(&self) -> crate::protocol::RuntimeChoices;

    /// Starts a session (and its terminal, if asked and available).
    async fn create(&self, request: CreateSession) -> Result<HostedSessionView, HostError>;

    /// Follows again, after a daemon restart, every open session of this runtime. What a prompt
    /// must find at once (a lost session being resumed is `restarting`, not `lost`) is stored
    /// before this returns; the binding itself goes on in the background.
    async fn restore(&self);

    /// Sends a prompt: a new turn, a steer of the running one, or queued behind it.
    async fn inject(
        &self,
        session: &str,
        text: &str,
        key: Option<String>,
    ) -> Result<InjectOutcome, HostError>;

    /// Interrupts the running turn; `false` when nothing was running. With `turn`, only that
    /// turn: once it has ended, nothing is sent (an interrupt never lands on a later turn).
    async fn interrupt(&self, session: &str, turn: Option<&str>) -> Result<bool, HostError>;

    /// Answers a pending approval (first answer wins).
    async fn resolve_approval(
        &self,
        session: &str,
        approval: &str,
        decision: &str,
        by: &str,
    ) -> Result<(), HostError>;

    /// Ends the session: its process or pane goes, `session.closed` is logged.
    async fn close(&self, session: &str) -> Result<(), HostError>;

    /// A new session continuing this one's conversation (optionally up to a turn).
    async fn fork(&self, session: &str, after_turn: Option<String>) -> Result<Forked, HostError>;

    /// Starts the session's TUI again on the same conversation.
    async fn relaunch(&self, session: &str) -> Result<(), HostError>;

    /// How a prompt this runtime had taken fares across a daemon restart.
    fn after_restart(&self) -> AfterRestart;

    /// `cohost doctor`'s section for this runtime: `issues` and `warnings` arrays at least.
    async fn doctor(&self) -> RuntimeDoctor;

    /// Stops what the host runs for the daemon (backends), at shutdown.
    async fn shutdown(&self);

    /// Work the host does for the daemon's whole life (codex: stopping idle backends), run
    /// until `cancel`; none by default.
    async fn background(&self, cancel: tokio_util::sync::CancellationToken) {
        cancel.cancelled().await;
    }

    /// Logs, once at start, which release of the peer this daemon found and whether it is in
    /// the tested range (`cohost doctor` says the same, with more).
    async fn log_found(&self) {}

    async fn goal_get(&self, _session: &str) -> Result<Capability, HostError> {
        Ok(self.unsupported("goals"))
    }

    async fn goal_set(
        &self,
        _session: &str,
        _objective: Option<String>,
        _status: Option<String>,
        _token_budget: Option<u64>,
    ) -> Result<Capability, HostError> {
        Ok(self.unsupported("goals"))
    }

    async fn goal_clear(&self, _session: &str) -> Result<Capability, HostError> {
        Ok(self.unsupported("goals"))
    }

    async fn models(&self) -> Result<Capability, HostError> {
        Ok(Capability::fail(
            "unsupported",
            format!(
                "listing models is not supported for runtime `{}`",
                self.runtime().as_str()
            ),
        ))
    }

    /// How to attach the runtime's own TUI to the session from any terminal.
    async fn terminal_spec(
        &self,
        _session: &str,
        _include_token: bool,
    ) -> Result<TerminalSpec, HostError> {
        Err(HostError::Unsupported(format!(
            "{} sessions run their TUI in their own pane; see paneId",
            self.runtime().as_str()
        )))
    }

    /// Opens the runtime's TUI on the session in a tmux pane.
    async fn open_terminal(
        &self,
        _session: &str,
        _tmux_session: Option<String>,
    ) -> Result<HostedSessionView, HostError> {
        Err(HostError::Unsupported(format!(
            "{} sessions already run in their own pane",
            self.runtime().as_str()
        )))
    }

    /// A hook of the runtime asks for a permission decision and waits for it.
    async fn permission_request(
        &self,
        _session: &str,
        _request_id: &str,
        _payload: serde_json::Value,
    ) -> Result<serde_json::Value, HostError> {
        Err(HostError::Unsupported(format!(
            "{} sessions do not ask for permissions through a hook",
            self.runtime().as_str()
        )))
    }

    /// Whether a person can leave unsent input in this runtime's box that cohost can see
    /// ([`SessionHost::human_input`]); the lease watches it each second while tasks are in play.
    fn watches_human_input(&self) -> bool {
        false
    }

    /// Text a person typed into the session's input and did not send, if any (`None` while a
    /// delivery of ours is in progress, or when the runtime cannot tell).
    async fn human_input(&self, _session: &str) -> Result<Option<String>, HostError> {
        Ok(None)
    }

    /// Clears the session's input if it still holds exactly `text` (a prompt of ours the agent
    /// handed back after an interrupt); whether it did.
    async fn clear_input(&self, _session: &str, _text: &str) -> Result<bool, HostError> {
        Ok(false)
    }

    /// Answers a pending input request. The service checked that `request` is pending and that
    /// `answer` fits its kind; the host sends it (first answer wins: a request already answered
    /// or withdrawn is `RequestResolved`) and stores `input.resolved` with secrets withheld.
    /// `Some(prompt)`: the answer continues as a prompt the service sends next (a codex plan
    /// approved: "implement it"; rejected: the feedback).
    async fn answer_request(
        &self,
        _session: &str,
        request: &InputRequested,
        _answer: InputAnswer,
    ) -> Result<Option<String>, HostError> {
        Err(HostError::Unsupported(format!(
            "{} sessions cannot answer a {} request through cohost",
            self.runtime().as_str(),
            request.kind.as_str()
        )))
    }

    /// The collaboration modes a session of this runtime can be set to (`PUT …/mode`).
    fn modes(&self) -> &'static [&'static str] {
        &[]
    }

    /// Sets the mode the session's next turns run in (`plan`, `default`, …; one of
    /// [`SessionHost::modes`]), and stores `session.mode`.
    async fn set_mode(&self, _session: &str, _mode: &str) -> Result<Capability, HostError> {
        Ok(self.unsupported("setting the mode"))
    }

    /// Switches the model (and, where the runtime has one, the thinking level) of the
    /// session's next turns (`PUT …/model`); a turn already running keeps its model.
    async fn set_model(
        &self,
        _session: &str,
        _model: &str,
        _thinking_level: Option<&str>,
    ) -> Result<Capability, HostError> {
        Ok(self.unsupported("switching the model"))
    }

    /// Sends a prompt with images attached (bounded and checked by the service).
    async fn inject_images(
        &self,
        _session: &str,
        _text: &str,
        _images: Vec<PromptImage>,
        _key: Option<String>,
    ) -> Result<InjectOutcome, HostError> {
        Err(HostError::Unsupported(format!(
            "{} sessions do not take images in prompts",
            self.runtime().as_str()
        )))
    }

    /// The tracker agent (`claude-code`) whose watched instances this host can adopt; `None`
    /// (the default): it adopts none.
    fn adopts(&self) -> Option<&'static str> {
        None
    }

    /// Adopts an agent a person started by hand in a tmux pane: after checking that the pane
    /// still runs it, a session of this runtime drives it there (`session.adopted`).
    async fn adopt(&self, request: AdoptRequest) -> Result<HostedSessionView, HostError> {
        Err(HostError::Unsupported(format!(
            "{} sessions cannot adopt a running {}",
            self.runtime().as_str(),
            request.agent
        )))
    }

    /// Gives an adopted agent back: the session ends, the agent keeps running in its pane and
    /// is watched only again.
    async fn disown(&self, session: &str) -> Result<HostedSessionView, HostError> {
        Err(HostError::NotAdopted(session.to_string()))
    }

    /// Moves an adopted agent under this host in its own pane (`rehome`): the agent quits there
    /// when idle and its conversation goes on, same id, as a hosted session of the same id.
    /// Runtimes that cannot answer `unsupported`.
    async fn rehome(&self, session: &str) -> Result<HostedSessionView, HostError> {
        Err(HostError::Unsupported(format!(
            "{} sessions cannot be rehomed (session `{session}`): only an adopted codex, claude or opencode can",
            self.runtime().as_str()
        )))
    }

    /// The answer for an optional capability this runtime lacks.
    fn unsupported(&self, what: &str) -> Capability {
        Capability::fail(
            "unsupported",
            format!(
                "{what} is not supported for {} sessions",
                self.runtime().as_str()
            ),
        )
    }
}

/// The hosts, by runtime: the one place the runtimes are named.
#[derive(Clone)]
pub struct Hosts {
    hosts: HashMap<Runtime, Arc<dyn SessionHost>>,
    /// Where the hosts' followers record their panics (`runtime::common::caught`), shared
    /// with the daemon's own tasks.
    failures: crate::failures::TaskFailures,
}

impl Hosts {
    /// Every runtime cohost hosts. A new runtime is one line here (and its folder).
    pub fn new(
        codex: codex::host::CodexHost,
        claude: claude::host::ClaudeHost,
        opencode: opencode::host::OpencodeHost,
        pi: pi::host::PiHost,
        failures: crate::failures::TaskFailures,
    ) -> Self {
        let list: [Arc<dyn SessionHost>; 4] = [
            Arc::new(codex),
            Arc::new(claude),
            Arc::new(opencode),
            Arc::new(pi),
        ];
        Hosts {
            hosts: list.into_iter().map(|h| (h.runtime(), h)).collect(),
            failures,
        }
    }

    /// Every runtime's host, made from the daemon's settings, each following its open
    /// sessions again (`restore`).
    pub async fn start(
        core: crate::core::CoreHandle,
        tmux: Arc<crate::tmux::SessionCache>,
        config: HostsConfig,
    ) -> Self {
        let failures = crate::failures::TaskFailures::default();
        let codex = codex::host::CodexHost::new(
            core.clone(),
            Arc::clone(&tmux),
            codex::host::HostConfig {
                cohost_home: config.home.clone(),
                user_codex_home: codex::host::user_codex_home(),
                backend_idle_ttl: codex::host::BACKEND_IDLE_TTL,
                park_timeout: codex::host::PARK_TIMEOUT,
                failures: failures.clone(),
            },
        );
        let opencode = opencode::host::OpencodeHost::new(
            core.clone(),
            Arc::clone(&tmux),
            config.home.join("opencode"),
            failures.clone(),
        );
        let pi = pi::host::PiHost::new(
            core.clone(),
            Arc::clone(&tmux),
            config.home.join("pi"),
            failures.clone(),
        );
        let claude = claude::host::ClaudeHost::new(
            core,
            tmux,
            claude::host::ClaudeConfig {
                cohost_home: config.home,
                socket: config.socket,
                token_file: config.token_file,
                permission_modes: config.permission_modes,
                failures: failures.clone(),
            },
        );
        let hosts = Hosts::new(codex, claude, opencode, pi, failures);
        for host in hosts.all() {
            host.restore().await;
        }
        hosts
    }

    /// A registry of the given hosts (tests use fakes through this).
    pub fn from_hosts(hosts: Vec<Arc<dyn SessionHost>>) -> Self {
        Hosts {
            hosts: hosts.into_iter().map(|h| (h.runtime(), h)).collect(),
            failures: crate::failures::TaskFailures::default(),
        }
    }

    /// The tasks that panicked while the daemon went on: the hosts' followers record theirs
    /// here, and the daemon its own tasks' (`service.task_failures()` is this list).
    pub fn task_failures(&self) -> crate::failures::TaskFailures {
        self.failures.clone()
    }

    /// The runtime whose doctor report sits at the top level of `cohost doctor` (codex's
    /// predates the other runtimes'); the others' are nested under their names.
    pub fn flattened_doctor(&self) -> Option<Runtime> {
        Some(Runtime::Codex).filter(|r| self.hosts.contains_key(r))
    }

    /// The host that adopts watched instances of `agent` (a tracker agent name), if one does.
    pub fn adopter(&self, agent: &str) -> Option<&Arc<dyn SessionHost>> {
        self.in_order().find(|host| host.adopts() == Some(agent))
    }

    pub fn get(&self, runtime: Runtime) -> Option<&Arc<dyn SessionHost>> {
        self.hosts.get(&runtime)
    }

    pub fn all(&self) -> impl Iterator<Item = &Arc<dyn SessionHost>> {
        self.hosts.values()
    }

    /// Every runtime's host in [`Runtime::ALL`]'s order.
    pub fn in_order(&self) -> impl Iterator<Item = &Arc<dyn SessionHost>> {
        Runtime::ALL.into_iter().filter_map(|r| self.hosts.get(&r))
    }
}
