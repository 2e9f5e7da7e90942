//! Adopting an OpenCode TUI a person started by hand in a tmux pane (issue 25), for
//! `OpencodeHost`: the checks before it (the pane, an `opencode` process in the pane's process
//! tree that holds the database the watcher reads open, runs in the session's directory and is
//! the only `opencode` there, and the session's messages in that database; nothing is typed
//! while checking), the session that then drives it in its own pane (`session.adopted`), its
//! follower task (the session's messages in OpenCode's database as session events, see
//! [`read`]; the process every tick, the pane every second), prompts pasted into OpenCode's box
//! only when the screen shows it empty and no turn runs (see [`screen`]; a draft refuses with
//! `human_typing`, an unreadable screen — a permission dialog — with `not_ready`, nothing
//! typed) and confirmed by the prompt's user message in the database, Escape twice to
//! interrupt only while the database shows a turn running and the screen shows OpenCode's box,
//! its permission dialogs relayed as approvals (below), and `disown`, which gives it back.
//!
//! A hand-started `opencode` listens on no port (its server runs inside the process; only
//! `--port N` opens one: docs/peers.md "An OpenCode TUI started by hand"), so a prompt can only
//! be pasted into its input box and a turn interrupted by its own key, Escape twice (the status
//! line says `esc interrupt`, after one Escape `esc again to interrupt`).
//!
//! Permissions: such a TUI has no hook or notify program of cohost's, and a pending permission
//! is in neither its database nor its log (observed on 1.18.33: no `permission` row, no
//! `event` row; the tool part only says `running`), so its permission dialog is read from the
//! screen while a turn runs ([`screen::permission`]): `approval.requested` with what it asks
//! (a command as `command`), the instance `waiting`; answered with the dialog's own key
//! (Enter on `Allow once` for `accept`, Escape — OpenCode's reject, which ends the turn — for
//! `cancel`) only when the pane is verified, the TUI's release (`/proc/<pid>/exe --version`) is
//! one whose dialog is known and the screen is exactly that dialog, `Allow once` selected,
//! asking the same (else `ScreenMismatch`, nothing typed); a dialog that closes unanswered by
//! cohost was answered in the pane (`by: "pane"`, the decision unknown).
//!
//! The events are `normalize::history` over the session's messages, read from the database
//! ([`database`]), so a turn is named by its prompt's message id and an item by its part id: a
//! daemon restart reads the session again from its checkpoint (the last turn before the
//! adoption; a turn running then is the session's) and the core drops what it stored before.
//! A turn still running is held back from `history`, which would close it as interrupted: its
//! start, its prompt and the steps OpenCode completed are read, its end only once the database
//! shows it.

mod approval;
pub mod database;
mod handover;
pub mod screen;
mod turns;

use turns::adopted_after;
pub use turns::{Read, read};

use approval::Shown;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};
use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, oneshot};

use crate::core::CoreHandle;
use crate::process;
use crate::protocol::{
    AgentStatus, EventKind, HostedSessionView, Item, Liveness, Runtime, SessionAdopted, TurnSource,
};
use crate::runtime::common::adopted::{self, AdoptedEnd as End, Adopters, InputBox};
use crate::runtime::common::{lock, new_session_id};
use crate::runtime::{AdoptRefusal, AdoptRequest, HostError, InjectOutcome};
use crate::tmux::SessionCache;

/// The tracker's name for the agents adopted here (the OpenCode watcher's).
pub const AGENT: &str = "opencode";
/// How often the follower looks at the database and the process.
const TICK: Duration = Duration::from_millis(200);
/// How long a pasted prompt may take to show in the box before it is given up (not submitted).
const SHOW_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the screen may take to catch up with the database before a prompt is refused: the
/// status line still says `esc interrupt` a moment after OpenCode stored a turn's end, and a
/// capture taken while OpenCode redraws may not show the box whole.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(3);
/// How long a submitted prompt may take to be written to the database before the inject says
/// so (OpenCode inserts the prompt's message at submit: +0.56 s observed).
const CONFIRM_TIMEOUT: Duration = Duration::from_secs(20);
/// How long OpenCode may take to show `esc again to interrupt` after the first Escape.
const ARM_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a read waits for OpenCode's write lock.
const BUSY_TIMEOUT: Duration = Duration::from_millis(500);
/// The checkpoint file in an adopted session's directory.
const CHECKPOINT: &str = "database.json";
/// Where an adopted session reads its turns: the database, and the last turn before the
/// adoption (the session's turns are the later ones; `None`: all of them).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Checkpoint {
    database: PathBuf,
    after: Option<String>,
}

/// What the follower knows of the session now.
#[derive(Debug, Default)]
struct Follow {
    /// The turn the database shows running.
    running: Option<String>,
    tool_running: bool,
    /// Prompts pasted and submitted, not yet read back (whitespace squeezed out).
    pasted: Vec<String>,
    /// Pasted prompts read back: (prompt, the turn it opened).
    confirmed: Vec<(String, String)>,
    /// Every prompt of the session, the turns before the adoption too (see [`Read::prompts`]).
    prompts: Vec<String>,
}

/// One adopted OpenCode TUI.
pub struct Adopted {
    session_id: String,
    record: SessionAdopted,
    /// Serializes pastes and keys into the pane.
    typing: tokio::sync::Mutex<()>,
    follow: Mutex<Follow>,
    ended: AtomicBool,
    /// The TUI is quitting for a rehome: its exit does not end the session.
    rehoming: AtomicBool,
    end: mpsc::Sender<(End, oneshot::Sender<()>)>,
    /// The permission dialog on the screen, as cohost knows it.
    approval: Mutex<Shown>,
    /// The OpenCode release the process runs (`--version`), once asked: which permission
    /// dialog its screen shows.
    release: tokio::sync::Mutex<Option<String>>,
}

/// The OpenCode TUIs this daemon adopted.
pub struct Adoptions {
    base: Adopters<Adopted>,
}

impl std::ops::Deref for Adoptions {
    type Target = Adopters<Adopted>;

    fn deref(&self) -> &Adopters<Adopted> {
        &self.base
    }
}

/// Whether `pid` is an OpenCode (`/proc` names its process `opencode`).
fn is_opencode(pid: u32) -> bool {
    process::comm(pid).as_deref() == Some("opencode")
}

/// Whether `pid` holds `path` open (one of its `/proc/<pid>/fd` links to it).
fn holds_open(pid: u32, path: &Path) -> bool {
    let Ok(path) = path.canonicalize() else {
        return false;
    };
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    fds.filter_map(Result::ok)
        .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|target| target == path))
}

/// Whether an `opencode` other than `pid` runs in `cwd` (then which of them shows the session
/// cannot be told); an unreadable `/proc` counts as yes.
fn another_opencode_in(cwd: &Path, pid: u32) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return true;
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|other| *other != pid && is_opencode(*other))
        // A child of the adopted one (a tool's subprocess renamed) is not another TUI.
        .filter(|other| !process::ancestors(*other).contains(&pid))
        .any(|other| std::fs::read_link(format!("/proc/{other}/cwd")).is_ok_and(|c| c == cwd))
}

/// The database read-only (OpenCode, which runs, keeps its WAL sidecars).
fn open_database(path: &Path) -> rusqlite::Result<Connection> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let db = Connection::open_with_flags(path, flags)?;
    db.busy_timeout(BUSY_TIMEOUT)?;
    Ok(db)
}

/// Whitespace left out: how a prompt is compared with the box that shows it (OpenCode wraps a
/// long line) and with what OpenCode stored.
fn squeezed(text: &str) -> String {
    text.chars().filter(|c| !c.is_whitespace()).collect()
}

/// The session's directory in the database, and whether it has messages.
fn session_directory(db: &Connection, session: &str) -> rusqlite::Result<Option<String>> {
    use rusqlite::OptionalExtension;
    db.query_row(
        "SELECT directory FROM session WHERE id = ?1",
        [session],
        |row| row.get::<_, String>(0),
    )
    .optional()
}

async fn save_checkpoint(path: &Path, checkpoint: &Checkpoint) -> std::io::Result<()> {
    let bytes = serde_json::to_vec(checkpoint)?;
    let tmp = path.with_extension("tmp");
    tokio::fs::write(&tmp, bytes).await?;
    tokio::fs::rename(&tmp, path).await
}

async fn load_checkpoint(path: &Path) -> Option<Checkpoint> {
    let bytes = tokio::fs::read(path).await.ok()?;
    serde_json::from_slice(&bytes).ok()
}

impl Adoptions {
    pub fn new(
        core: CoreHandle,
        tmux: Arc<SessionCache>,
        opencode_root: &Path,
        failures: crate::failures::TaskFailures,
    ) -> Self {
        Adoptions {
            base: Adopters::new(Runtime::Opencode, core, tmux, opencode_root, failures),
        }
    }

    /// Checks the pane, the process and the database the watcher placed the OpenCode in, then
    /// logs the session (`session.created`, `session.adopted`, `session.pane`,
    /// `session.bound`) and follows it. Answers the new session's id.
    pub async fn adopt(self: &Arc<Self>, request: AdoptRequest) -> Result<String, HostError> {
        let _adopting = self.begin(&request, AGENT, "opencode session").await?;
        let pane = &request.pane_id;
        let session = &request.agent_session_id;
        let (pane_pid, pid, stat) =
            adopted::check_agent(self.tmux.tmux(), &request, "opencode", is_opencode).await?;
        let not_adoptable = |message: String| adopted::refuse(AdoptRefusal::NotAdoptable, message);
        let Some(database) = request
            .files
            .iter()
            .map(PathBuf::from)
            .find(|p| holds_open(pid, p))
        else {
            return Err(not_adoptable(format!(
                "opencode (pid {pid}) in pane {pane} holds none of the databases the watcher reads for {} ({:?}) open",
                request.key, request.files
            )));
        };
        let read_database = |e: rusqlite::Error| {
            not_adoptable(format!(
                "cannot read opencode's database {}: {e}",
                database.display()
            ))
        };
        let db = open_database(&database).map_err(read_database)?;
        let Some(directory) = session_directory(&db, session).map_err(read_database)? else {
            return Err(not_adoptable(format!(
                "opencode's database {} has no session {session}",
                database.display()
            )));
        };
        let here = std::fs::read_link(format!("/proc/{pid}/cwd")).ok();
        if here.as_deref() != Some(Path::new(&directory)) {
            return Err(not_adoptable(format!(
                "opencode (pid {pid}) in pane {pane} runs in {}, not in session {session}'s directory {directory}: it may show another session",
                here.map_or_else(
                    || "an unknown directory".into(),
                    |h| h.display().to_string()
                )
            )));
        }
        if another_opencode_in(Path::new(&directory), pid) {
            return Err(not_adoptable(format!(
                "another opencode runs in {directory}: which one shows session {session} cannot be told"
            )));
        }
        let messages = database::session_messages(&db, session).map_err(read_database)?;
        drop(db);
        if messages.is_empty() {
            return Err(not_adoptable(format!(
                "session {session} has no messages in opencode's database yet"
            )));
        }
        let now = read(&messages, None);
        let after = adopted_after(&now);
        let running = now.running.is_some();
        let session_id = new_session_id();
        let dir = self.dir.join(&session_id);
        crate::runtime::common::private_dir(&dir).map_err(|e| {
            HostError::failed_by(
                Runtime::Opencode,
                format!("cannot create a directory: {e}"),
                e,
            )
        })?;
        let checkpoint = dir.join(CHECKPOINT);
        save_checkpoint(
            &checkpoint,
            &Checkpoint {
                database: database.clone(),
                after,
            },
        )
        .await
        .map_err(|e| HostError::failed_by(Runtime::Opencode, e.to_string(), e))?;
        let record = SessionAdopted {
            key: request.key.clone(),
            agent_session_id: session.clone(),
            tmux_session: request.tmux_session.clone(),
            pane_id: pane.clone(),
            pane_pid,
            pid,
            pid_start: stat.start_time,
            session_file: String::new(),
            transcript: database.to_string_lossy().into_owned(),
        };
        adopted::log_start(
            &self.core,
            &session_id,
            Runtime::Opencode,
            directory,
            &record,
            "opencode-tui",
        )
        .await?;
        tracing::info!(session = %session_id, key = %request.key, pane = %record.pane_id, pid, "adopted an opencode TUI started by hand");
        let adopted = self.follow(&session_id, record, checkpoint);
        // The tracker shows the session's instance at once (the watcher's gives way to it).
        let status = if running {
            AgentStatus::Running
        } else {
            AgentStatus::Idle
        };
        self.report(&adopted, status, Liveness::Alive).await;
        Ok(session_id)
    }

    /// After a daemon restart: follows every adopted OpenCode the log says is open again, from
    /// its checkpoint.
    pub fn restore(self: &Arc<Self>) {
        for (session_id, record) in adopted::open_sessions(&self.core, Runtime::Opencode) {
            let checkpoint = self.dir.join(&session_id).join(CHECKPOINT);
            self.follow(&session_id, record, checkpoint);
        }
    }

    fn follow(
        self: &Arc<Self>,
        session_id: &str,
        record: SessionAdopted,
        checkpoint: PathBuf,
    ) -> Arc<Adopted> {
        let (end, ends) = mpsc::channel(1);
        let adopted = Arc::new(Adopted {
            session_id: session_id.to_string(),
            record,
            typing: tokio::sync::Mutex::new(()),
            follow: Mutex::new(Follow::default()),
            ended: AtomicBool::new(false),
            rehoming: AtomicBool::new(false),
            end,
            approval: Mutex::new(Shown::None),
            release: tokio::sync::Mutex::new(None),
        });
        self.insert(session_id, adopted.clone());
        let this = self.clone();
        let task = adopted.clone();
        let stopped = adopted.clone();
        let end = move || stopped.ended.store(true, Ordering::SeqCst);
        let run = this.run(task, checkpoint, ends);
        let session = session_id.to_string();
        self.spawn_follower(session, end, run);
        adopted
    }

    /// The follower task of one adopted OpenCode.
    async fn run(
        self: Arc<Self>,
        adopted: Arc<Adopted>,
        checkpoint_file: PathBuf,
        mut ends: mpsc::Receiver<(End, oneshot::Sender<()>)>,
    ) {
        let checkpoint = load_checkpoint(&checkpoint_file)
            .await
            .unwrap_or_else(|| Checkpoint {
                database: PathBuf::from(&adopted.record.transcript),
                // Unknown: what the core stored already is dropped as a repeat.
                after: None,
            });
        let mut reader = Reader {
            checkpoint,
            db: None,
            version: None,
            warned: false,
        };
        let mut status = None;
        let mut ticks = 0u32;
        let mut interval = tokio::time::interval(TICK);
        loop {
            tokio::select! {
                request = ends.recv() => {
                    if let Some((end, done)) = request {
                        // What OpenCode wrote last is read first.
                        reader.version = None;
                        self.read(&adopted, &mut reader).await;
                        self.finish(&adopted, &end).await;
                        let _ = done.send(());
                    }
                    return;
                }
                _ = interval.tick() => {}
            }
            ticks = ticks.wrapping_add(1);
            self.read(&adopted, &mut reader).await;
            let rehoming = adopted.rehoming.load(Ordering::SeqCst);
            if !rehoming {
                self.watch_approval(&adopted).await;
            }
            let now = {
                let follow = lock(&adopted.follow);
                if matches!(*lock(&adopted.approval), Shown::Pending { .. }) {
                    AgentStatus::Waiting
                } else if follow.tool_running {
                    AgentStatus::ToolRunning
                } else if follow.running.is_some() {
                    AgentStatus::Running
                } else {
                    AgentStatus::Idle
                }
            };
            if status != Some(now) {
                status = Some(now);
                self.report(&adopted, now, Liveness::Alive).await;
            }
            if rehoming {
                continue;
            }
            if let Some(end) =
                adopted::problem(self.tmux.tmux(), &adopted.record, AGENT, ticks).await
            {
                // What OpenCode wrote before it went is read first.
                reader.version = None;
                self.read(&adopted, &mut reader).await;
                self.finish(&adopted, &end).await;
                return;
            }
        }
    }

    /// Reads the session's messages when the database changed (SQLite's `data_version`) and
    /// stores the events not stored yet: a turn's start says `api` when it is a prompt cohost
    /// pasted, else `terminal` (a person's in the pane).
    async fn read(&self, adopted: &Adopted, reader: &mut Reader) {
        let Some(read) = reader.changed(&adopted.record.agent_session_id, &adopted.session_id)
        else {
            return;
        };
        // Each new turn's prompt, to tell cohost's from a person's.
        let mut prompts: HashMap<String, String> = HashMap::new();
        for kind in &read.events {
            if let EventKind::ItemCompleted(item) = kind
                && let Item::UserMessage { text, .. } = &item.item
            {
                prompts
                    .entry(item.turn_id.clone())
                    .or_insert_with(|| squeezed(text));
            }
        }
        {
            // Known before the events are stored: whoever sees a turn's end stored sees it
            // ended here too.
            let mut follow = lock(&adopted.follow);
            follow.running = read.running;
            follow.tool_running = read.tool_running;
            follow.prompts = read.prompts;
        }
        let session = &adopted.session_id;
        for mut kind in read.events {
            if self
                .core
                .read(|state| state.sessions.is_duplicate(session, &kind))
            {
                continue;
            }
            if let EventKind::TurnStarted(started) = &mut kind {
                let prompt = prompts.get(&started.turn_id).cloned().unwrap_or_default();
                let mut follow = lock(&adopted.follow);
                started.source = match follow.pasted.iter().position(|p| *p == prompt) {
                    Some(at) => {
                        follow.pasted.remove(at);
                        follow.confirmed.push((prompt, started.turn_id.clone()));
                        TurnSource::Api
                    }
                    None => TurnSource::Terminal,
                };
            }
            let _ = self.core.append(Some(session.clone()), kind).await;
        }
    }

    async fn report(&self, adopted: &Adopted, status: AgentStatus, liveness: Liveness) {
        adopted::report(
            &self.core,
            &self.tmux,
            &adopted.record,
            &adopted.session_id,
            AGENT,
            status,
            liveness,
        )
        .await;
    }

    /// Ends an adopted session: its open turn (unless given back: then it goes on in the pane),
    /// its tracker instance, and `session.closed` with the reason.
    async fn finish(&self, adopted: &Adopted, end: &End) {
        let session_id = &adopted.session_id;
        tracing::info!(session = %session_id, ?end, "an adopted opencode session ends");
        adopted.ended.store(true, Ordering::SeqCst);
        self.remove(session_id);
        let open = lock(&adopted.follow).running.clone();
        adopted::log_end(&self.core, session_id, &adopted.record, AGENT, open, end).await;
    }

    /// Gives an adopted OpenCode back: the session ends, the TUI keeps running, watched only.
    pub async fn disown(&self, session_id: &str) -> Result<(), HostError> {
        let adopted = self.live(session_id)?;
        let _typing = adopted.typing.lock().await;
        let (done, ended) = oneshot::channel();
        adopted
            .end
            .send((End::Disowned, done))
            .await
            .map_err(|_| HostError::Closed(session_id.to_string()))?;
        let _ = ended.await;
        Ok(())
    }

    /// The pane, checked again right before anything is typed: still the pane's process,
    /// OpenCode still under it.
    async fn verified(&self, adopted: &Adopted) -> Result<(), HostError> {
        adopted::verify_before_typing(
            self.tmux.tmux(),
            &adopted.record,
            &adopted.session_id,
            adopted.ended.load(Ordering::SeqCst),
            AGENT,
        )
        .await
    }

    async fn screen(&self, adopted: &Adopted) -> Result<screen::Screen, HostError> {
        Ok(screen::analyze(&self.capture(adopted).await?))
    }

    /// The screen once it agrees with the database: while the database shows no turn running, a
    /// screen that shows one, or no readable box, is captured again for up to
    /// [`SETTLE_TIMEOUT`] (reading types nothing); then the last capture, whatever it shows.
    async fn settled_screen(&self, adopted: &Adopted) -> Result<screen::Screen, HostError> {
        let deadline = tokio::time::Instant::now() + SETTLE_TIMEOUT;
        loop {
            let shown = self.screen(adopted).await?;
            let settling = lock(&adopted.follow).running.is_none()
                && (shown.busy || matches!(shown.input, InputBox::Unreadable(_)));
            if !settling || tokio::time::Instant::now() >= deadline {
                return Ok(shown);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Refuses (`NotReady`) when the TUI shows another session than the adopted one: the last
    /// user message in view is none of the session's prompts (a person switched with
    /// `/sessions`, which OpenCode records nowhere). With no user message in view (a long reply
    /// scrolled them away) it cannot be told, and is not refused.
    async fn check_session(&self, adopted: &Adopted) -> Result<(), HostError> {
        let shown = screen::user_messages(&self.capture(adopted).await?);
        let Some(last) = shown.last() else {
            return Ok(());
        };
        if lock(&adopted.follow)
            .prompts
            .iter()
            .any(|prompt| screen::shows_prompt(last, prompt))
        {
            return Ok(());
        }
        Err(HostError::NotReadyBecause(format!(
            "opencode in pane {} shows another session than {}: the last message in view, {last:?}, is none of its prompts (a switch with /sessions?); nothing typed",
            adopted.record.pane_id, adopted.record.agent_session_id
        )))
    }

    async fn capture(&self, adopted: &Adopted) -> Result<String, HostError> {
        self.tmux
            .tmux()
            .run(&["capture-pane", "-p", "-e", "-t", &adopted.record.pane_id])
            .await
            .map_err(|e| HostError::failed_by(Runtime::Opencode, e.to_string(), e))
    }

    /// Pastes `text` into the adopted OpenCode's input box and submits it, only when the screen
    /// shows the box empty and no turn runs; a person's draft refuses (`HumanTyping`), a screen
    /// that cannot be read refuses (`NotReady`). Confirmed by the prompt's user message in the
    /// database (the turn it opens).
    pub async fn inject(
        &self,
        session_id: &str,
        text: &str,
        key: Option<String>,
    ) -> Result<InjectOutcome, HostError> {
        if text.trim().is_empty() {
            return Err(HostError::Invalid("text must not be empty".into()));
        }
        if let Some(previous) =
            crate::runtime::common::inject::previous(&self.core, session_id, key.as_deref())
        {
            return Ok(previous);
        }
        let adopted = self.live(session_id)?;
        let _typing = adopted.typing.lock().await;
        self.verified(&adopted).await?;
        let pane = &adopted.record.pane_id;
        let shown = self.settled_screen(&adopted).await?;
        match &shown.input {
            InputBox::Empty => {}
            InputBox::Draft(_) => return Err(HostError::HumanTyping(session_id.to_string())),
            InputBox::Unreadable(why) => {
                return Err(HostError::NotReadyBecause(format!(
                    "cannot read opencode's input box in pane {pane} ({why}); nothing typed"
                )));
            }
        }
        if shown.busy || lock(&adopted.follow).running.is_some() {
            return Err(HostError::NotReadyBecause(format!(
                "the adopted opencode in session `{session_id}` runs a turn; send when it is idle"
            )));
        }
        // The adopted session has messages; a box with the first prompt's placeholder is a new
        // session's (the person typed `/new`): a prompt there would start another conversation.
        if shown.new_session {
            return Err(HostError::NotReadyBecause(format!(
                "opencode in pane {pane} shows a new session (its first prompt's placeholder), not the adopted one; nothing typed"
            )));
        }
        self.check_session(&adopted).await?;
        let prompt = squeezed(text);
        let tmux = self.tmux.tmux();
        lock(&adopted.follow).pasted.push(prompt.clone());
        let unpaste = || {
            let mut follow = lock(&adopted.follow);
            if let Some(at) = follow.pasted.iter().position(|p| *p == prompt) {
                follow.pasted.remove(at);
            }
        };
        let typed = async {
            tmux.paste(pane, text)
                .await
                .map_err(|e| HostError::failed_by(Runtime::Opencode, e.to_string(), e))?;
            // The box shows the pasted text before Enter submits it.
            let deadline = tokio::time::Instant::now() + SHOW_TIMEOUT;
            loop {
                let now = self.screen(&adopted).await?;
                if matches!(&now.input, InputBox::Draft(draft) if screen::shows(draft, text)) {
                    break;
                }
                if tokio::time::Instant::now() >= deadline {
                    return Err(HostError::NotReadyBecause(format!(
                        "the pasted prompt never showed in pane {pane}'s input box; not submitted"
                    )));
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            self.verified(&adopted).await?;
            tmux.send_keys(pane, &["Enter"])
                .await
                .map_err(|e| HostError::failed_by(Runtime::Opencode, e.to_string(), e))
        }
        .await;
        if let Err(error) = typed {
            unpaste();
            return Err(error);
        }
        let deadline = tokio::time::Instant::now() + CONFIRM_TIMEOUT;
        let turn_id = loop {
            // OpenCode stored the prompt (the follower read it) and the core stored its turn.
            let confirmed = {
                let mut follow = lock(&adopted.follow);
                follow
                    .confirmed
                    .iter()
                    .position(|(p, _)| *p == prompt)
                    .map(|at| follow.confirmed.remove(at).1)
            };
            if let Some(turn) = confirmed {
                break turn;
            }
            if tokio::time::Instant::now() >= deadline {
                unpaste();
                // Enter was sent: the prompt may still arrive, so it is not to be typed again.
                return Err(HostError::failed(
                    Runtime::Opencode,
                    format!(
                        "opencode stored no prompt in its database within {CONFIRM_TIMEOUT:?} of the one typed in pane {pane}"
                    ),
                ));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        adopted::started_once_stored(
            &self.core,
            Runtime::Opencode,
            session_id,
            turn_id,
            key,
            pane,
            deadline,
        )
        .await
    }

    /// Interrupts the running turn with OpenCode's own key, Escape twice (the second once the
    /// status line says `esc again to interrupt`), sent only while the database shows a turn
    /// running — `turn`, when one is named — and the screen shows OpenCode's box with a turn
    /// running (a permission dialog takes the keys as its own: refused, nothing sent).
    pub async fn interrupt(&self, session_id: &str, turn: Option<&str>) -> Result<bool, HostError> {
        let adopted = self.live(session_id)?;
        let _typing = adopted.typing.lock().await;
        self.verified(&adopted).await?;
        let running = lock(&adopted.follow).running.clone();
        match (running, turn) {
            (None, _) => return Ok(false),
            (Some(running), Some(turn)) if running != turn => return Ok(false),
            _ => {}
        }
        let pane = &adopted.record.pane_id;
        let shown = self.screen(&adopted).await?;
        if let InputBox::Unreadable(why) = &shown.input {
            return Err(HostError::NotReadyBecause(format!(
                "cannot read opencode's screen in pane {pane} ({why}); no Escape sent"
            )));
        }
        if !shown.busy {
            return Err(HostError::NotReadyBecause(format!(
                "opencode's status line in pane {pane} shows no turn running (no `esc interrupt`); no Escape sent"
            )));
        }
        let escape = || async {
            self.tmux
                .tmux()
                .send_keys(pane, &["Escape"])
                .await
                .map_err(|e| HostError::failed_by(Runtime::Opencode, e.to_string(), e))
        };
        if !shown.interrupt_armed {
            escape().await?;
            let deadline = tokio::time::Instant::now() + ARM_TIMEOUT;
            loop {
                let now = self.screen(&adopted).await?;
                if now.interrupt_armed {
                    break;
                }
                if lock(&adopted.follow).running.is_none() {
                    // The turn ended meanwhile: nothing left to interrupt.
                    return Ok(true);
                }
                if tokio::time::Instant::now() >= deadline {
                    return Err(HostError::NotReadyBecause(format!(
                        "opencode in pane {pane} never showed `esc again to interrupt` after one Escape; the turn runs on"
                    )));
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            self.verified(&adopted).await?;
        }
        escape().await?;
        Ok(true)
    }
}

/// The follower's database reader: the checkpoint, the connection (opened again after an
/// error) and the `data_version` it last read.
struct Reader {
    checkpoint: Checkpoint,
    db: Option<Connection>,
    version: Option<i64>,
    warned: bool,
}

impl Reader {
    /// The session read again when the database changed since the last look; `None` when it
    /// did not (or cannot be read now: logged once, tried again next tick).
    fn changed(&mut self, session: &str, session_id: &str) -> Option<Read> {
        match self.try_read(session) {
            Ok(read) => {
                self.warned = false;
                read
            }
            Err(error) => {
                self.db = None;
                if !self.warned {
                    tracing::warn!(session = %session_id, database = %self.checkpoint.database.display(), %error, "cannot read the adopted opencode's database; trying again");
                    self.warned = true;
                }
                None
            }
        }
    }

    fn try_read(&mut self, session: &str) -> rusqlite::Result<Option<Read>> {
        if self.db.is_none() {
            self.db = Some(open_database(&self.checkpoint.database)?);
        }
        let Some(db) = self.db.as_ref() else {
            return Ok(None);
        };
        let version: i64 = db.query_row("PRAGMA data_version", [], |row| row.get(0))?;
        if self.version == Some(version) {
            return Ok(None);
        }
        let messages = database::session_messages(db, session)?;
        self.version = Some(version);
        Ok(Some(read(&messages, self.checkpoint.after.as_deref())))
    }
}

/// The view of an adopted session.
pub fn view(core: &CoreHandle, session_id: &str) -> Result<HostedSessionView, HostError> {
    core.read(|state| state.session_view(session_id))
        .ok_or_else(|| HostError::UnknownSession(session_id.to_string()))
}

#[cfg(test)]
mod tests;
