//! The command line: clap structs only. Validation into a `Config` happens in `config.rs`.

pub mod integration;

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::core::event_log::FsyncPolicy;
use crate::protocol::{AgentStatus, Liveness};

#[derive(Debug, Parser)]
#[command(
    name = "cohost",
    version,
    about = "Host coding agents and follow every turn as one durable event stream"
)]
pub struct Cli {
    /// State directory (token, event log, snapshot). Default: $XDG_STATE_HOME/cohost, else ~/.local/state/cohost.
    #[arg(long, global = true, env = "COHOST_HOME")]
    pub home: Option<PathBuf>,

    /// The daemon's TCP address: where `serve` listens (for browsers and remote-style clients).
    /// Default: 127.0.0.1:7391. The other commands reach the daemon of $COHOST_HOME over its
    /// socket, $COHOST_HOME/cohost.sock, never over this address.
    #[arg(long, global = true, env = "COHOST_LISTEN")]
    pub listen: Option<String>,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the daemon in the foreground.
    Serve(ServeArgs),
    /// Show the tracker: tmux sessions and their agent instances.
    State {
        /// Print the raw JSON of GET /api/state.
        #[arg(long)]
        json: bool,
    },
    /// Show the evidence behind an agent instance's status: the files (or tables) and records
    /// a watcher read, the rule that fired, when, and how it was placed.
    Explain {
        /// The tmux session (`unplaced` for agents outside every session).
        session: String,
        /// The instance key (`agent:threadId`), or an agent name naming one instance.
        agent: String,
        /// Print the raw JSON of the explain route.
        #[arg(long)]
        json: bool,
    },
    /// Adopt an agent a person started by hand in a tmux pane (claude-code): a new session
    /// drives it there from now on; prints the session id.
    Adopt {
        /// The tmux session the instance shows in.
        session: String,
        /// The instance key (`claude-code:<session id>`), or an agent name naming one instance.
        agent: String,
        /// Print the raw JSON of the adopt route's answer.
        #[arg(long)]
        json: bool,
    },
    /// Give an adopted agent back: its session ends, the agent keeps running, watched only.
    Disown { id: String },
    /// Move an adopted codex, claude or opencode under cohost's own host in its pane (when
    /// idle): the same session and conversation, hosted from then on.
    Rehome { id: String },
    /// Print events: all of them as JSON lines, or one session's as a readable transcript.
    Events {
        /// A hosted session id: only its events, rendered as a transcript.
        id: Option<String>,
        /// Start after this seq (default: 0, the oldest retained event).
        #[arg(long, default_value_t = 0)]
        after: u64,
        /// Keep streaming new events (Server-Sent Events), resuming after disconnects.
        #[arg(long)]
        follow: bool,
        /// Raw JSON lines even for a session.
        #[arg(long)]
        json: bool,
    },
    /// Start a hosted agent session.
    Start(StartArgs),
    /// The config file's agent profiles: list them, `show NAME` with each effective value and
    /// the profile it came from, or `reload` them from the config file.
    Profiles {
        #[command(subcommand)]
        command: Option<ProfilesCommand>,
        #[arg(long)]
        json: bool,
    },
    /// List hosted sessions.
    Sessions {
        #[arg(long)]
        json: bool,
    },
    /// Send a prompt to a session (starts a turn, or steers the running one).
    Send {
        id: String,
        text: String,
        /// A retried send with the same key is not sent twice.
        #[arg(long)]
        idempotency_key: Option<String>,
    },
    /// Interrupt a session's running turn.
    Interrupt { id: String },
    /// Queue prompts as tasks and follow them: send, status, result, cancel, edit, supersede.
    #[command(subcommand)]
    Task(TaskCommand),
    /// Show a session's queue: its control lease, the task in flight, waiting and recent tasks.
    Queue {
        id: String,
        #[arg(long)]
        json: bool,
    },
    /// Take control of a session as a human: queued tasks wait until you release it.
    Takeover { id: String },
    /// Hand a session back to the task queue (only a human does this: never over MCP).
    Release {
        id: String,
        /// Cancel the tasks that were waiting instead of delivering them.
        #[arg(long)]
        drop_queued: bool,
    },
    // -- What the agent asks a person.
    /// List a session's input requests (questions, plans, elicitations, permissions).
    Requests {
        id: String,
        /// Pending and resolved (default: pending only).
        #[arg(long)]
        all: bool,
        #[arg(long)]
        json: bool,
    },
    /// Answer a pending input request: `--answer QUESTION=TEXT` (repeatable) for a question;
    /// `--decision` (approve/reject a plan; accept/decline/cancel an elicitation;
    /// accept/acceptForSession/decline permissions; decline an opencode question), with
    /// `--feedback`, `--mode`, `--content`.
    Answer(AnswerArgs),
    /// Set the collaboration mode of a session's next turns (codex: plan, default).
    Mode { id: String, mode: String },
    /// Answer a pending approval: accept, acceptForSession, decline or cancel.
    Approve {
        id: String,
        approval: String,
        decision: String,
    },
    /// Show, set or clear a session's goal.
    Goal {
        id: String,
        /// The objective to set.
        text: Option<String>,
        #[arg(long, conflicts_with = "text")]
        clear: bool,
        /// active, paused, budgetLimited or complete.
        #[arg(long)]
        status: Option<String>,
        #[arg(long)]
        token_budget: Option<u64>,
    },
    /// Fork a session into a new one.
    Fork {
        id: String,
        /// Keep history only up to and including this turn.
        #[arg(long)]
        after_turn: Option<String>,
    },
    /// List the models codex offers.
    Models {
        #[arg(long)]
        json: bool,
    },
    /// Switch (or attach) your tmux client to a session's terminal pane.
    Attach { id: String },
    /// Start a session's terminal again on the same conversation (after it exited).
    Relaunch { id: String },
    /// Check that codex is installed and usable.
    Doctor {
        #[arg(long)]
        json: bool,
    },
    /// Report an agent's status (POST /api/agent-event), for hook scripts.
    Event(EventArgs),
    /// Mark a tmux session focused (its finished agents become seen).
    Focus {
        session: String,
        /// Who saw it: `api` or `tmux`.
        #[arg(long, default_value = "api")]
        source: String,
    },
    /// Print the bearer token.
    Token,
    /// Check the event log on disk.
    #[command(subcommand)]
    Log(LogCommand),
    /// Print the web page's URL, with the token in its fragment (open it in a browser).
    Web,
    /// Serve MCP on stdin/stdout for a client that spawns it, forwarding to the running daemon.
    Mcp,
    /// Re-read tmux sessions (the daemon's tmux hooks call this).
    #[command(hide = true)]
    TmuxRefresh,
    // -- Living with cohost every day: `cli/integration.rs`, run in `crate::commands`.
    #[command(flatten)]
    Integration(integration::IntegrationCommand),
}

#[derive(Debug, Subcommand)]
pub enum LogCommand {
    /// Check every line of the event log and compare it with the snapshot, offline: nothing is
    /// changed. Exits with 1 when anything is damaged (the next `cohost serve` repairs it).
    Verify {
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum TaskCommand {
    /// Queue a prompt for a session; prints the task id.
    Send {
        id: String,
        text: String,
        /// A retried send with the same key returns the first task.
        #[arg(long)]
        idempotency_key: Option<String>,
    },
    /// Show a task: state, phase, revision, why it waits, how a cancel ended.
    Status {
        task: String,
        /// Print the raw JSON of GET /api/tasks/{id}.
        #[arg(long)]
        json: bool,
    },
    /// Print a finished task's final assistant text (read in chunks).
    Result {
        task: String,
        /// Print the whole result as one GET /api/tasks/{id}/result answer (JSON).
        #[arg(long)]
        json: bool,
    },
    /// Cancel a task (see `docs/api.md` for the outcomes).
    Cancel {
        task: String,
        /// Interrupt a running task only while the lease is managed at this generation.
        #[arg(long)]
        lease_generation: Option<u64>,
    },
    /// Replace a waiting task's prompt, if it is still at `--revision`.
    Edit {
        task: String,
        text: String,
        #[arg(long)]
        revision: u64,
        #[arg(long)]
        idempotency_key: Option<String>,
    },
    /// Cancel a waiting task and queue a replacement in its place, if still at `--revision`.
    Supersede {
        task: String,
        text: String,
        #[arg(long)]
        revision: u64,
        #[arg(long)]
        idempotency_key: Option<String>,
    },
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// tmux server socket (passed as `tmux -S`). Default: the user's default server.
    #[arg(long, env = "COHOST_TMUX_SOCKET")]
    pub tmux_socket: Option<PathBuf>,
    /// Allow listening on a non-loopback address (the bearer token is then the only guard).
    #[arg(long)]
    pub allow_remote: bool,
    /// When to fdatasync the event log: after every batch (before acknowledging it) or never.
    #[arg(long, value_enum, default_value = "always", env = "COHOST_FSYNC")]
    pub fsync: FsyncPolicy,
    /// Close a log segment (and snapshot the state) once it reaches this many MiB.
    #[arg(long, default_value_t = 64, env = "COHOST_SEGMENT_MB")]
    pub segment_mb: u64,
    /// Delete the oldest closed segments while the log is larger than this many MiB.
    #[arg(long, default_value_t = 1024, env = "COHOST_RETAIN_MB")]
    pub retain_mb: u64,
    /// Seconds without an update after which a running or waiting agent becomes `stale`.
    #[arg(long, default_value_t = 600, env = "COHOST_STALE_AFTER")]
    pub stale_after: u64,
    /// Seconds after which a finished, seen agent is removed from the state.
    #[arg(long, default_value_t = 1800, env = "COHOST_PRUNE_AFTER")]
    pub prune_after: u64,
    /// A project root under which MCP clients may start sessions (repeatable; env: a
    /// colon-separated list). None: MCP clients cannot start sessions.
    #[arg(
        long = "mcp-allowed-root",
        env = "COHOST_MCP_ROOTS",
        value_delimiter = ':'
    )]
    pub mcp_allowed_roots: Vec<PathBuf>,
    /// A Claude permission mode that skips cohost's approvals, allowed for sessions only when
    /// named here: `auto` (Claude decides which tool calls need no prompt) or `bypassPermissions`
    /// (nothing asks). Repeat it, or a comma-separated list in the environment. Without it,
    /// sessions may only use `default`, `acceptEdits` and `plan`.
    #[arg(
        long = "allow-permission-mode",
        env = "COHOST_ALLOW_PERMISSION_MODES",
        value_delimiter = ','
    )]
    pub allow_permission_modes: Vec<String>,
    /// Metadata log entries kept per session.
    #[arg(long, default_value_t = 100)]
    pub max_logs: usize,
    /// HTTP connections served at once; one more is answered 503 `too_many_connections`.
    #[arg(long, default_value_t = crate::http::server::DEFAULT_MAX_CONNECTIONS)]
    pub max_connections: usize,
    /// Seconds a request head may take to arrive, counted from the connection's start or the
    /// end of the previous answer (so also the idle keep-alive timeout).
    #[arg(long, default_value_t = 30)]
    pub header_timeout: u64,
    /// Seconds a request body may take to arrive once its head is in.
    #[arg(long, default_value_t = 30)]
    pub body_timeout: u64,
    /// Seconds one write of an answer may wait for the client to read before the connection is
    /// closed (SSE streams and long polls included).
    #[arg(long, default_value_t = crate::http::server::DEFAULT_WRITE_TIMEOUT.as_secs())]
    pub write_timeout: u64,
    /// The passive watchers to run: comma-separated agent names (`claude-code`, `codex`,
    /// `opencode`, `pi`, `droid`, `amp`), `all` (the default) or `none`.
    #[arg(long, env = "COHOST_WATCHERS", conflicts_with = "no_watchers")]
    pub watchers: Option<String>,
    /// Run no passive watcher (the same as `--watchers none`).
    #[arg(long)]
    pub no_watchers: bool,
    /// A shell command run once per attention notification (`turn-ended`, `input-needed`,
    /// `error`) with the event's JSON on stdin; rate-limited, never on the ingest path.
    #[arg(long, env = "COHOST_NOTIFY_COMMAND")]
    pub notify_command: Option<String>,
    /// This machine's name, which qualifies its ids across machines (`laptop/<session>`) and
    /// names its NATS subjects: letters, digits, `-` and `_`, at most 64. Default: the host name.
    #[arg(long, env = "COHOST_MACHINE")]
    pub machine: Option<String>,
    /// Publish the event log into NATS JetStream at this URL (`nats://HOST:PORT`,
    /// `tls://HOST:PORT`); config file: `nats-url`, or `url` under `[nats]`. A non-loopback
    /// server needs TLS and credentials.
    #[arg(long = "nats", env = "COHOST_NATS_URL", value_name = "URL")]
    pub nats_url: Option<String>,
    /// A NATS credentials file (`.creds`: the user's JWT and nkey seed).
    #[arg(long, env = "COHOST_NATS_CREDS", value_name = "FILE")]
    pub nats_creds: Option<PathBuf>,
    /// A file holding `USER:PASSWORD` for NATS (instead of a credentials file).
    #[arg(long, env = "COHOST_NATS_USER_FILE", value_name = "FILE")]
    pub nats_user_file: Option<PathBuf>,
    /// Require TLS to the NATS server (implied by a `tls://` URL).
    #[arg(long)]
    pub nats_tls: bool,
    /// Trust the CA certificates in this PEM file for the NATS server's certificate (a server
    /// whose certificate a private CA signs), beside the system's roots. Needs TLS.
    #[arg(long, env = "COHOST_NATS_CA", value_name = "FILE")]
    pub nats_ca: Option<PathBuf>,
    /// View every other machine publishing into the NATS server (`--nats`): their state,
    /// sessions and events, machine-qualified (`laptop/<session>`), read through a durable
    /// consumer. Config file: `hub = true`.
    #[arg(long)]
    pub hub: bool,
    /// A hub shows a machine `down` when it heard nothing from it (heartbeat or event) for
    /// this many seconds.
    #[arg(long, default_value_t = 10)]
    pub hub_down_after: u64,
    /// A hub holds each machine's newest events in memory up to this many MiB (their JSON);
    /// older ones are read back from its copy on disk when asked for.
    #[arg(long, default_value_t = 64)]
    pub hub_memory_mb: u64,
    /// Take commands from a hub over NATS (`cohost.cmd.<machine>`: prompts to this machine's
    /// sessions, executed through this daemon's own service layer). Give only hub credentials
    /// permission to publish there. Config file: `nats-commands = true`.
    #[arg(long)]
    pub nats_commands: bool,
}

/// `cohost answer`'s arguments.
#[derive(Debug, Args)]
pub struct AnswerArgs {
    pub id: String,
    pub request: String,
    /// `QUESTION_ID=TEXT`; repeat the id for a multi-select question.
    #[arg(long = "answer", value_name = "QUESTION_ID=TEXT")]
    pub answers: Vec<String>,
    #[arg(long)]
    pub decision: Option<String>,
    /// A rejected plan: what the agent should change.
    #[arg(long)]
    pub feedback: Option<String>,
    /// An approved plan: the mode to continue in.
    #[arg(long)]
    pub mode: Option<String>,
    /// An accepted elicitation: the content, as JSON.
    #[arg(long)]
    pub content: Option<String>,
}

#[derive(Debug, Args)]
pub struct StartArgs {
    /// The runtime: codex, claude, opencode or pi (with `--profile`, optional: the profile's).
    #[arg(required_unless_present = "profile")]
    pub runtime: Option<String>,
    /// The first prompt.
    pub prompt: Option<String>,
    /// Working directory (default: the current one).
    #[arg(long)]
    pub cwd: Option<PathBuf>,
    #[arg(long)]
    pub model: Option<String>,
    /// codex, opencode and pi: untrusted, on-request or never.
    #[arg(long)]
    pub approval_policy: Option<String>,
    /// claude: default (the default), acceptEdits or plan; auto and bypassPermissions only where
    /// the daemon allows them.
    #[arg(long)]
    pub permission_mode: Option<String>,
    /// read-only, workspace-write or danger-full-access.
    #[arg(long)]
    pub sandbox: Option<String>,
    #[arg(long)]
    pub idempotency_key: Option<String>,
    /// codex, opencode: also open the runtime's own TUI on the session in a tmux pane
    /// (co-driving).
    #[arg(long)]
    pub terminal: bool,
    /// The tmux session for the pane (default `cohost`).
    #[arg(long)]
    pub tmux_session: Option<String>,
    /// Start from a profile of the daemon's config file (`[profiles.NAME]`); the options given
    /// here override its values. `cohost start --profile NAME [PROMPT]` takes the profile's
    /// runtime.
    #[arg(long)]
    pub profile: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum ProfilesCommand {
    /// One profile: each effective value and the profile (of its `extends` chain) it came from.
    Show {
        name: String,
        #[arg(long)]
        json: bool,
    },
    /// Read the config file's profiles again; on an error the daemon keeps the old ones.
    Reload {
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Args)]
pub struct EventArgs {
    /// Agent name, e.g. `claude-code`, `codex`, `my-script`.
    pub agent: String,
    /// idle, running, tool-running, done, error, waiting, interrupted or stale.
    pub status: AgentStatus,
    /// The tmux session.
    #[arg(long, required_unless_present = "project_dir")]
    pub session: Option<String>,
    /// A project directory, resolved to the session whose directory matches.
    #[arg(long)]
    pub project_dir: Option<PathBuf>,
    #[arg(long)]
    pub thread_id: Option<String>,
    #[arg(long)]
    pub thread_name: Option<String>,
    /// The last prompt the user gave the agent.
    #[arg(long)]
    pub prompt: Option<String>,
    #[arg(long)]
    pub pane_id: Option<String>,
    #[arg(long, value_parser = parse_liveness)]
    pub liveness: Option<Liveness>,
    /// Milliseconds since the epoch (default: now).
    #[arg(long)]
    pub ts: Option<u64>,
}

fn parse_liveness(s: &str) -> Result<Liveness, String> {
    match s {
        "alive" => Ok(Liveness::Alive),
        "exited" => Ok(Liveness::Exited),
        "unknown" => Ok(Liveness::Unknown),
        _ => Err(format!("expected alive, exited or unknown, got `{s}`")),
    }
}
