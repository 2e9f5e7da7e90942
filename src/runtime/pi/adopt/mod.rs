//! Adopting a Pi TUI a person started by hand in a tmux pane, for `PiHost`: the checks before it
//! (the pane, a `pi` process in the pane's process tree — Pi names its process `pi` —, and the
//! session file the watcher reads; nothing is typed while checking), the session that then
//! drives it in its own pane (`session.adopted`), its follower task (the session file as
//! session events, see [`session_file`]; the process every tick, the pane every second),
//! prompts pasted into Pi's input box only when the screen shows it empty and no turn runs (see
//! `tui_screen`; a draft refuses with `human_typing`, an unreadable screen with `not_ready`,
//! nothing typed) and confirmed by the prompt's `user` entry in the session file, Escape to
//! interrupt only while the file shows a turn running and the screen is Pi's box, and
//! `disown`, which gives it back.
//!
//! Pi takes a bracketed paste as text (newlines kept, not submitted; a long one shown as
//! `[paste #1 +N lines]`), and Enter submits it. Pi's TUI asks no approvals (it has no
//! permission system), so an adopted Pi has none.
//!
//! No `pi --mode rpc` of cohost's is involved. A daemon restart follows the session file on
//! from its checkpoint — kept at the start of a turn still running, so its calls are known
//! again —, so the events keep Pi's entry ids and none repeats.

pub mod session_file;
mod switch;

use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

use crate::core::CoreHandle;
use crate::process;
use crate::protocol::{
    AgentStatus, EventKind, HostedSessionView, Liveness, Runtime, SessionAdopted, SessionBound,
};
use crate::runtime::common::adopted::{self, AdoptedEnd as End, Adopters};
use crate::runtime::common::{lock, new_session_id};
use crate::runtime::pi::tui_screen::{self, InputBox};
use crate::runtime::{AdoptRefusal, AdoptRequest, HostError, InjectOutcome};
use crate::tail::{self, Checkpoint};
use crate::tmux::SessionCache;
use session_file::SessionEvents;

/// The tracker's name for the agents adopted here (the Pi watcher's).
pub const AGENT: &str = "pi";
/// How often the follower reads the session file and looks at the process.
const TICK: Duration = Duration::from_millis(200);
/// How long a pasted prompt may take to show in the box before it is given up (not submitted).
const SHOW_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a submitted prompt may take to be written to the session file before the inject
/// says so (Pi writes a `user` entry at submit: +0.33 s observed).
const CONFIRM_TIMEOUT: Duration = Duration::from_secs(20);
/// The checkpoint file in an adopted session's directory.
const CHECKPOINT: &str = "session-file.json";

/// One adopted Pi TUI.
pub struct Adopted {
    session_id: String,
    record: SessionAdopted,
    /// The Pi session followed now: the adopted one's id, or the one Pi switched to since
    /// (`/new`, `/resume`; see [`switch`]).
    thread: Mutex<String>,
    /// Serializes pastes and keys into the pane.
    typing: tokio::sync::Mutex<()>,
    events: Mutex<SessionEvents>,
    ended: AtomicBool,
    end: mpsc::Sender<(End, oneshot::Sender<()>)>,
}

impl Adopted {
    /// The adoption's record, naming the Pi session followed now.
    fn now(&self) -> SessionAdopted {
        SessionAdopted {
            agent_session_id: lock(&self.thread).clone(),
            ..self.record.clone()
        }
    }
}

/// The Pi TUIs this daemon adopted.
pub struct Adoptions {
    base: Adopters<Adopted>,
}

impl std::ops::Deref for Adoptions {
    type Target = Adopters<Adopted>;

    fn deref(&self) -> &Adopters<Adopted> {
        &self.base
    }
}

/// Whether `pid` is a Pi: Pi sets its process title, so `/proc` names it `pi` (its arguments
/// are overwritten too) whichever Node runs it.
fn is_pi(pid: u32) -> bool {
    process::comm(pid).as_deref() == Some("pi")
}

/// Whether `path` is a Pi session file (`<ISO-ts>_<sessionId>.jsonl`).
fn is_session_file(path: &Path, session_id: &str) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.ends_with(&format!("_{session_id}.jsonl")))
}

impl Adoptions {
    pub fn new(
        core: CoreHandle,
        tmux: Arc<SessionCache>,
        pi_root: &Path,
        failures: crate::failures::TaskFailures,
    ) -> Self {
        Adoptions {
            base: Adopters::new(Runtime::Pi, core, tmux, pi_root, failures),
        }
    }

    /// Checks the pane and process the watcher placed the Pi in, then logs the session
    /// (`session.created`, `session.adopted`, `session.pane`, `session.bound`) and follows it.
    /// Answers the new session's id.
    pub async fn adopt(self: &Arc<Self>, request: AdoptRequest) -> Result<String, HostError> {
        let _adopting = self.begin(&request, AGENT, "pi session").await?;
        let pane = &request.pane_id;
        let (pane_pid, pid, stat) =
            adopted::check_agent(self.tmux.tmux(), &request, "pi", is_pi).await?;
        let Some(file) = request
            .files
            .iter()
            .map(PathBuf::from)
            .find(|p| is_session_file(p, &request.agent_session_id))
        else {
            return Err(adopted::refuse(
                AdoptRefusal::NotAdoptable,
                format!("the watcher reads no session file for {}", request.key),
            ));
        };
        let bytes = std::fs::read(&file).map_err(|e| {
            adopted::refuse(
                AdoptRefusal::NotAdoptable,
                format!("cannot read the session file {}: {e}", file.display()),
            )
        })?;
        let inode = std::fs::metadata(&file).map(|m| m.ino()).unwrap_or(0);
        let (offset, running) = session_file::start_offset(&bytes);
        let cwd = adopted::cwd(&request, pid);
        let session_id = new_session_id();
        let dir = self.dir.join(&session_id);
        crate::runtime::common::private_dir(&dir).map_err(|e| {
            HostError::failed_by(Runtime::Pi, format!("cannot create a directory: {e}"), e)
        })?;
        let checkpoint = dir.join(CHECKPOINT);
        tail::save_checkpoint(
            &checkpoint,
            &Checkpoint {
                path: file.clone(),
                inode,
                offset,
            },
        )
        .await
        .map_err(|e| HostError::failed_by(Runtime::Pi, e.to_string(), e))?;
        let record = SessionAdopted {
            key: request.key.clone(),
            agent_session_id: request.agent_session_id.clone(),
            tmux_session: request.tmux_session.clone(),
            pane_id: pane.clone(),
            pane_pid,
            pid,
            pid_start: stat.start_time,
            session_file: String::new(),
            transcript: file.to_string_lossy().into_owned(),
        };
        adopted::log_start(&self.core, &session_id, Runtime::Pi, cwd, &record, "pi-tui").await?;
        tracing::info!(session = %session_id, key = %request.key, pane = %record.pane_id, pid, "adopted a pi TUI started by hand");
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

    /// After a daemon restart: follows every adopted Pi the log says is open again, from its
    /// checkpoint.
    pub fn restore(self: &Arc<Self>) {
        for (session_id, record) in adopted::open_sessions(&self.core, Runtime::Pi) {
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
        // After a restart, the session Pi switched to last (its `session.bound`).
        let thread = self
            .core
            .read(|state| state.sessions.get(session_id)?.thread_id.clone())
            .unwrap_or_else(|| record.agent_session_id.clone());
        let adopted = Arc::new(Adopted {
            session_id: session_id.to_string(),
            record,
            thread: Mutex::new(thread),
            typing: tokio::sync::Mutex::new(()),
            events: Mutex::new(SessionEvents::default()),
            ended: AtomicBool::new(false),
            end,
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

    /// The follower task of one adopted Pi.
    async fn run(
        self: Arc<Self>,
        adopted: Arc<Adopted>,
        checkpoint_file: PathBuf,
        mut ends: mpsc::Receiver<(End, oneshot::Sender<()>)>,
    ) {
        let mut checkpoint = match tail::load_checkpoint(&checkpoint_file).await {
            Ok(Some(checkpoint)) => checkpoint,
            _ => Checkpoint {
                path: PathBuf::from(&adopted.record.transcript),
                inode: 0,
                offset: 0,
            },
        };
        let mut reader = Reader {
            read_to: checkpoint.offset,
            turn_at: None,
        };
        let mut siblings = switch::Siblings::new(&checkpoint.path);
        let mut status = None;
        let mut ticks = 0u32;
        let mut interval = tokio::time::interval(TICK);
        loop {
            tokio::select! {
                request = ends.recv() => {
                    if let Some((end, done)) = request {
                        self.finish(&adopted, &end).await;
                        let _ = done.send(());
                    }
                    return;
                }
                _ = interval.tick() => {}
            }
            ticks = ticks.wrapping_add(1);
            if let Some(saved) = self.read(&adopted, &checkpoint.path, &mut reader).await
                && saved != checkpoint.offset
            {
                checkpoint.offset = saved;
                if let Ok(meta) = std::fs::metadata(&checkpoint.path) {
                    checkpoint.inode = meta.ino();
                }
                let _ = tail::save_checkpoint(&checkpoint_file, &checkpoint).await;
            }
            if ticks.is_multiple_of(adopted::PANE_CHECK_TICKS)
                && let Some((path, from)) = siblings.written(&checkpoint.path)
                && self.switched(&adopted, &path).await
            {
                siblings.leave(&checkpoint.path);
                siblings.take(&path);
                checkpoint = Checkpoint {
                    inode: std::fs::metadata(&path).map_or(0, |m| m.ino()),
                    path,
                    offset: from,
                };
                reader = Reader {
                    read_to: from,
                    turn_at: None,
                };
                let _ = tail::save_checkpoint(&checkpoint_file, &checkpoint).await;
                if let Some(saved) = self.read(&adopted, &checkpoint.path, &mut reader).await {
                    checkpoint.offset = saved;
                    let _ = tail::save_checkpoint(&checkpoint_file, &checkpoint).await;
                }
                // The instance of the session followed now.
                status = None;
            }
            let now = {
                let events = lock(&adopted.events);
                if events.tool_running() {
                    AgentStatus::ToolRunning
                } else if events.turn().is_some() {
                    AgentStatus::Running
                } else {
                    AgentStatus::Idle
                }
            };
            if status != Some(now) {
                status = Some(now);
                self.report(&adopted, now, Liveness::Alive).await;
            }
            if let Some(end) =
                adopted::problem(self.tmux.tmux(), &adopted.record, AGENT, ticks).await
            {
                // What Pi wrote before it went is read first.
                let _ = self.read(&adopted, &checkpoint.path, &mut reader).await;
                self.finish(&adopted, &end).await;
                return;
            }
        }
    }

    /// Reads the session file's new whole lines into session events; answers the offset to
    /// save (the start of the turn still open, else the end of what was read), or `None` when
    /// nothing new was read.
    async fn read(&self, adopted: &Adopted, path: &Path, reader: &mut Reader) -> Option<u64> {
        let new = {
            let mut file = std::fs::File::open(path).ok()?;
            file.seek(SeekFrom::Start(reader.read_to)).ok()?;
            let mut new = Vec::new();
            file.read_to_end(&mut new).ok()?;
            new
        };
        let last = new.iter().rposition(|b| *b == b'\n')?;
        let mut kinds = Vec::new();
        {
            let mut events = lock(&adopted.events);
            let mut at = reader.read_to;
            for line in new[..=last].split_inclusive(|b| *b == b'\n') {
                let start = at;
                at += line.len() as u64;
                for kind in events.line(line.trim_ascii_end()) {
                    match &kind {
                        EventKind::TurnStarted(_) => reader.turn_at = Some(start),
                        EventKind::TurnCompleted(_) => reader.turn_at = None,
                        _ => {}
                    }
                    kinds.push(kind);
                }
            }
            reader.read_to = at;
        }
        for kind in kinds {
            // A repeat after a restart is refused by the core as a duplicate: nothing twice.
            let _ = self
                .core
                .append(Some(adopted.session_id.clone()), kind)
                .await;
        }
        Some(reader.turn_at.unwrap_or(reader.read_to))
    }

    /// Whether the session file `path`, written beside the one followed, is this Pi's after a
    /// `/new` or `/resume` (its header names this Pi's directory and no other `pi` runs there);
    /// if so the session is bound to its session (`session.bound`) and the instance of the one
    /// left is dropped. The caller follows the file from then on.
    async fn switched(&self, adopted: &Adopted, path: &Path) -> bool {
        let session_id = &adopted.session_id;
        let pid = adopted.record.pid;
        let Some((thread, cwd)) = switch::header(path) else {
            return false;
        };
        let here = std::fs::read_link(format!("/proc/{pid}/cwd")).ok();
        if here.as_deref() != Some(Path::new(&cwd)) {
            return false;
        }
        if switch::another_pi_in(Path::new(&cwd), pid) {
            tracing::info!(session = %session_id, file = %path.display(), "a pi session file was written beside the adopted one, but another pi runs in its directory: not followed");
            return false;
        }
        let left = std::mem::replace(&mut *lock(&adopted.thread), thread.clone());
        if left == thread {
            return true;
        }
        tracing::info!(session = %session_id, from = %left, to = %thread, "the adopted pi switched sessions (/new or /resume); following it");
        let _ = self
            .core
            .append(
                Some(session_id.clone()),
                EventKind::SessionBound(SessionBound {
                    thread_id: thread,
                    backend: "pi-tui".into(),
                }),
            )
            .await;
        adopted::prune_own_instance(
            &self.core,
            &adopted.record.tmux_session,
            format!("{AGENT}:{left}"),
        )
        .await;
        true
    }

    async fn report(&self, adopted: &Adopted, status: AgentStatus, liveness: Liveness) {
        adopted::report(
            &self.core,
            &self.tmux,
            &adopted.now(),
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
        tracing::info!(session = %session_id, ?end, "an adopted pi session ends");
        adopted.ended.store(true, Ordering::SeqCst);
        self.remove(session_id);
        let open = lock(&adopted.events).turn().map(str::to_string);
        adopted::log_end(&self.core, session_id, &adopted.now(), AGENT, open, end).await;
    }

    /// Gives an adopted Pi back: the session ends, the TUI keeps running, watched only.
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

    /// The pane, checked again right before anything is typed: still the pane's process, Pi
    /// still under it.
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

    async fn screen(&self, adopted: &Adopted) -> Result<tui_screen::Screen, HostError> {
        let capture = self
            .tmux
            .tmux()
            .run(&["capture-pane", "-p", "-e", "-t", &adopted.record.pane_id])
            .await
            .map_err(|e| HostError::failed_by(Runtime::Pi, e.to_string(), e))?;
        Ok(tui_screen::analyze(&capture))
    }

    /// Types `text` into the adopted Pi's input box and submits it, only when the screen shows
    /// the box empty and no turn runs; a person's draft refuses (`HumanTyping`), a screen that
    /// cannot be read refuses (`NotReady`). Confirmed by the prompt's `user` entry in the
    /// session file (the turn it opens).
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
        let screen = self.screen(&adopted).await?;
        match &screen.input {
            InputBox::Empty => {}
            InputBox::Draft(_) => return Err(HostError::HumanTyping(session_id.to_string())),
            InputBox::Unreadable(why) => {
                return Err(HostError::NotReadyBecause(format!(
                    "cannot read pi's input box in pane {pane} ({why}); nothing typed"
                )));
            }
        }
        if screen.busy || lock(&adopted.events).turn().is_some() {
            return Err(HostError::NotReadyBecause(format!(
                "the adopted pi in session `{session_id}` runs a turn; send when it is idle"
            )));
        }
        let tmux = self.tmux.tmux();
        lock(&adopted.events).pasted(text);
        let typed = async {
            tmux.paste(pane, text)
                .await
                .map_err(|e| HostError::failed_by(Runtime::Pi, e.to_string(), e))?;
            // The box shows the pasted text before Enter submits it.
            let deadline = tokio::time::Instant::now() + SHOW_TIMEOUT;
            loop {
                let screen = self.screen(&adopted).await?;
                if matches!(&screen.input, InputBox::Draft(shown) if tui_screen::shows(shown, text))
                {
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
                .map_err(|e| HostError::failed_by(Runtime::Pi, e.to_string(), e))
        }
        .await;
        if let Err(error) = typed {
            lock(&adopted.events).unpasted(text);
            return Err(error);
        }
        let deadline = tokio::time::Instant::now() + CONFIRM_TIMEOUT;
        let turn_id = loop {
            // Pi wrote the prompt (the follower read it) and the core stored its turn.
            let confirmed = lock(&adopted.events).confirmed(text);
            if let Some(turn) = confirmed {
                break turn;
            }
            if tokio::time::Instant::now() >= deadline {
                lock(&adopted.events).unpasted(text);
                // Enter was sent: the prompt may still arrive, so it is not to be typed again.
                return Err(HostError::failed(
                    Runtime::Pi,
                    format!(
                        "pi wrote no prompt to its session file within {CONFIRM_TIMEOUT:?} of the one typed in pane {pane}"
                    ),
                ));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        adopted::started_once_stored(
            &self.core,
            Runtime::Pi,
            session_id,
            turn_id,
            key,
            pane,
            deadline,
        )
        .await
    }

    /// Interrupts the running turn with Pi's own key, Escape, sent only while the session file
    /// shows a turn running — `turn`, when one is named (a task's cancel names its own, so it
    /// never lands on a later one) — and the screen is Pi's box (a selector takes Escape as
    /// its own).
    pub async fn interrupt(&self, session_id: &str, turn: Option<&str>) -> Result<bool, HostError> {
        let adopted = self.live(session_id)?;
        let _typing = adopted.typing.lock().await;
        self.verified(&adopted).await?;
        let running = lock(&adopted.events).turn().map(str::to_string);
        match (running, turn) {
            (None, _) => return Ok(false),
            (Some(running), Some(turn)) if running != turn => return Ok(false),
            _ => {}
        }
        let screen = self.screen(&adopted).await?;
        if let InputBox::Unreadable(why) = &screen.input {
            return Err(HostError::NotReadyBecause(format!(
                "cannot read pi's screen in pane {} ({why}); no Escape sent",
                adopted.record.pane_id
            )));
        }
        self.tmux
            .tmux()
            .send_keys(&adopted.record.pane_id, &["Escape"])
            .await
            .map_err(|e| HostError::failed_by(Runtime::Pi, e.to_string(), e))?;
        Ok(true)
    }
}

/// Where the follower has read to, and where the turn still open started.
struct Reader {
    read_to: u64,
    turn_at: Option<u64>,
}

/// The view of an adopted session.
pub fn view(core: &CoreHandle, session_id: &str) -> Result<HostedSessionView, HostError> {
    core.read(|state| state.session_view(session_id))
        .ok_or_else(|| HostError::UnknownSession(session_id.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_file_is_named_by_its_session_id() {
        let id = "01a230d8-e00a-7090-ab88-eb4087961300";
        assert!(is_session_file(
            Path::new(&format!("/s/--p--/2026-12-01T09-04-09-227Z_{id}.jsonl")),
            id
        ));
        assert!(!is_session_file(
            Path::new("/s/--p--/2026-12-01T09-04-09-227Z_other.jsonl"),
            id
        ));
        assert!(!is_pi(std::process::id()));
    }
}
