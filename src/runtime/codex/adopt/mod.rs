//! Adopting a codex TUI a person started by hand in a tmux pane, for `CodexHost`: the checks
//! before it (the pane, the `codex` TUI process in the pane's process tree — not the shared
//! `app-server` that writes the rollout — and the rollout; nothing is typed while checking),
//! the session that then drives it in its own pane (`session.adopted`), its follower task (the
//! rollout as session events, see [`rollout`]; the pane and the process looked at on every
//! tick), prompts pasted into the composer only when the screen shows it empty (see
//! `tui_screen`; a draft or an unreadable screen refuses, nothing typed), Escape to interrupt
//! only while the rollout shows a running turn, and `disown`, which gives it back.
//!
//! Approvals: codex 0.169/0.171 have a `PermissionRequest` hook, but hooks are read from the
//! config when the TUI starts, and a TUI started by hand has none of cohost's; its `notify`
//! program hears only a turn's end. So an adopted TUI's command or file-edit approval is read
//! from its screen while a turn runs (`tui_screen::approval`): `approval.requested` with the
//! command (or, for edits, kind `fileChange` and the destination in its reason),
//! the instance `waiting`; answered with the prompt's own key only when the screen is exactly
//! the prompt known for the TUI's release (else `ScreenMismatch`, nothing typed); a prompt that
//! closes unanswered by cohost was answered in the pane (`by: "pane"`).
//!
//! No app-server of cohost's is involved: the TUI keeps its own. A daemon restart follows the
//! rollout on from its checkpoint, so the events keep codex's ids and none repeats.

mod handover;
pub mod rollout;

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

use crate::core::CoreHandle;
use crate::process;
use crate::protocol::{
    AgentStatus, ApprovalKind, ApprovalRequested, EventKind, HostedSessionView, InjectState,
    Liveness, Runtime, SessionAdopted,
};
use crate::runtime::codex::tui_screen::{self, Asked, Composer};
use crate::runtime::common::adopted::{self, AdoptedEnd as End, Adopters};
use crate::runtime::common::hosted;
use crate::runtime::common::{lock, new_session_id};
use crate::runtime::{AdoptRefusal, AdoptRequest, HostError, InjectOutcome};
use crate::tail::{self, Checkpoint};
use crate::tmux::SessionCache;
use rollout::RolloutEvents;

/// The tracker's name for the agents adopted here.
pub const AGENT: &str = "codex";
/// How often the follower reads the rollout and looks at the process.
const TICK: Duration = Duration::from_millis(200);
/// How long a pasted prompt may take to show a turn in the rollout before the inject says so.
const CONFIRM_TIMEOUT: Duration = Duration::from_secs(20);

/// One adopted codex TUI.
pub struct Adopted {
    session_id: String,
    record: SessionAdopted,
    /// Serializes pastes and keys into the pane.
    typing: tokio::sync::Mutex<()>,
    events: Mutex<RolloutEvents>,
    ended: AtomicBool,
    /// The TUI is quitting for a rehome: its exit does not end the session.
    rehoming: AtomicBool,
    end: mpsc::Sender<(End, oneshot::Sender<()>)>,
    /// The codex release that wrote the rollout (`session_meta`'s `cli_version`): which
    /// approval prompt its screen shows.
    release: Option<String>,
    /// The approval prompt on the screen, as cohost knows it.
    approval: Mutex<Shown>,
}

/// The approval prompt on an adopted TUI's screen, as cohost knows it.
type Shown = adopted::ScreenPrompt<tui_screen::Asked>;

/// What an approval prompt asks about, for a message.
/// codex's approval prompt, as its screen reader knows it.
const PROMPT: adopted::KnownPrompt<Asked> = adopted::KnownPrompt {
    runtime: Runtime::Codex,
    what: "approval prompt",
    agent: "codex",
    releases: &tui_screen::APPROVAL_RELEASES,
    key: tui_screen::approval_key,
    read: |capture| tui_screen::approval(capture).map(|p| (p.exact, p.asked)),
    describe,
};

fn describe(asked: &Asked) -> String {
    match asked {
        Asked::Command(command) => format!("running `{command}`"),
        Asked::Edits { destination, .. } => format!("edits to `{destination}`"),
    }
}

/// The release named by a rollout's first line (`session_meta.payload.cli_version`).
fn cli_version(rollout: &Path) -> Option<String> {
    use std::io::{BufRead, Read};
    let file = std::fs::File::open(rollout).ok()?;
    let mut first = String::new();
    // `session_meta` carries codex's base instructions (~20 kB): bounded, not the whole file.
    std::io::BufReader::new(file.take(1 << 20))
        .read_line(&mut first)
        .ok()?;
    let value: serde_json::Value = serde_json::from_str(&first).ok()?;
    value
        .pointer("/payload/cli_version")
        .and_then(serde_json::Value::as_str)
        .map(str::to_string)
}

/// The codex TUIs this daemon adopted.
pub struct Adoptions {
    base: Adopters<Adopted>,
}

impl std::ops::Deref for Adoptions {
    type Target = Adopters<Adopted>;

    fn deref(&self) -> &Adopters<Adopted> {
        &self.base
    }
}

/// Whether `pid` is a codex TUI: a `codex` process that runs no other subcommand (the TUI spawns
/// the shared app-server and its helpers as its own children, so they run in the pane's tree
/// too).
fn is_tui(pid: u32) -> bool {
    let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
        return false;
    };
    let args: Vec<String> = cmdline
        .split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    let named_codex = process::comm(pid).as_deref() == Some("codex")
        || args
            .first()
            .is_some_and(|a| Path::new(a).file_name().is_some_and(|n| n == "codex"));
    named_codex && !args.iter().skip(1).any(|a| NOT_TUI.contains(&a.as_str()))
}

/// Subcommands of `codex` that run no TUI (the TUI is `codex`, `codex resume`, `codex fork`).
const NOT_TUI: [&str; 12] = [
    "exec",
    "e",
    "app-server",
    "mcp-server",
    "mcp",
    "review",
    "login",
    "logout",
    "apply",
    "sandbox",
    "debug",
    "cloud",
];

/// Whether the composer shows `text` as pasted: the same characters but for the wrapping
/// (lines the composer breaks), or codex's marker for a long paste.
fn same_text(shown: &str, text: &str) -> bool {
    let squeeze = |s: &str| s.chars().filter(|c| !c.is_whitespace()).collect::<String>();
    shown.starts_with("[Pasted Content") || squeeze(shown) == squeeze(text)
}

/// Where to follow a rollout from at adoption: its end, or the `task_started` line of a turn
/// still running (so the running turn is followed from its start); and whether one runs.
fn start_offset(bytes: &[u8]) -> (u64, bool) {
    let mut events = RolloutEvents::default();
    let mut offset = 0u64;
    let mut open_at = None;
    let mut complete = 0u64;
    for line in bytes.split_inclusive(|b| *b == b'\n') {
        let start = offset;
        offset += line.len() as u64;
        if !line.ends_with(b"\n") {
            break;
        }
        complete = offset;
        for event in events.line(line) {
            match event {
                EventKind::TurnStarted(_) => open_at = Some(start),
                EventKind::TurnCompleted(_) => open_at = None,
                _ => {}
            }
        }
    }
    (open_at.unwrap_or(complete), open_at.is_some())
}

impl Adoptions {
    pub fn new(
        core: CoreHandle,
        tmux: Arc<SessionCache>,
        cohost_home: &Path,
        failures: crate::failures::TaskFailures,
    ) -> Self {
        Adoptions {
            base: Adopters::new(
                Runtime::Codex,
                core,
                tmux,
                &cohost_home.join("codex"),
                failures,
            ),
        }
    }

    /// Checks the pane and process the watcher placed the codex in, then logs the session
    /// (`session.created`, `session.adopted`, `session.pane`, `session.bound`) and follows it.
    /// Answers the new session's id.
    pub async fn adopt(self: &Arc<Self>, request: AdoptRequest) -> Result<String, HostError> {
        let _adopting = self.begin(&request, AGENT, "codex thread").await?;
        let pane = &request.pane_id;
        let (pane_pid, pid, stat) =
            adopted::check_agent(self.tmux.tmux(), &request, "codex", is_tui).await?;
        let Some(rollout) = request.files.iter().map(PathBuf::from).find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("rollout-") && n.ends_with(".jsonl"))
        }) else {
            return Err(adopted::refuse(
                AdoptRefusal::NotAdoptable,
                format!("the watcher reads no rollout for {}", request.key),
            ));
        };
        let bytes = std::fs::read(&rollout).map_err(|e| {
            adopted::refuse(
                AdoptRefusal::NotAdoptable,
                format!("cannot read the rollout {}: {e}", rollout.display()),
            )
        })?;
        let inode = std::fs::metadata(&rollout).map(|m| m.ino()).unwrap_or(0);
        let (offset, running) = start_offset(&bytes);
        let cwd = adopted::cwd(&request, pid);
        let session_id = new_session_id();
        let checkpoint = self.dir.join(&session_id).join("rollout.json");
        crate::runtime::common::private_dir(&self.dir.join(&session_id)).map_err(|e| {
            HostError::failed_by(Runtime::Codex, format!("cannot create a directory: {e}"), e)
        })?;
        tail::save_checkpoint(
            &checkpoint,
            &Checkpoint {
                path: rollout.clone(),
                inode,
                offset,
            },
        )
        .await
        .map_err(|e| HostError::failed_by(Runtime::Codex, e.to_string(), e))?;
        let record = SessionAdopted {
            key: request.key.clone(),
            agent_session_id: request.agent_session_id.clone(),
            tmux_session: request.tmux_session.clone(),
            pane_id: pane.clone(),
            pane_pid,
            pid,
            pid_start: stat.start_time,
            session_file: String::new(),
            transcript: rollout.to_string_lossy().into_owned(),
        };
        adopted::log_start(
            &self.core,
            &session_id,
            Runtime::Codex,
            cwd,
            &record,
            "codex-tui",
        )
        .await?;
        tracing::info!(session = %session_id, key = %request.key, pane = %record.pane_id, pid, "adopted a codex TUI started by hand");
        let adopted = self.follow(&session_id, record, checkpoint).await;
        // The tracker shows the session's instance at once (the watcher's gives way to it).
        let status = if running {
            AgentStatus::Running
        } else {
            AgentStatus::Idle
        };
        self.report(&adopted, status, Liveness::Alive).await;
        Ok(session_id)
    }

    /// After a daemon restart: follows every adopted codex the log says is open again, from its
    /// checkpoint.
    pub fn restore(self: &Arc<Self>) {
        for (session_id, record) in adopted::open_sessions(&self.core, Runtime::Codex) {
            let this = self.clone();
            tokio::spawn(async move {
                let checkpoint = this.dir.join(&session_id).join("rollout.json");
                let _ = this.follow(&session_id, record, checkpoint).await;
            });
        }
    }

    async fn follow(
        self: &Arc<Self>,
        session_id: &str,
        record: SessionAdopted,
        checkpoint: PathBuf,
    ) -> Arc<Adopted> {
        let (end, ends) = mpsc::channel(1);
        let release = cli_version(Path::new(&record.transcript));
        let adopted = Arc::new(Adopted {
            session_id: session_id.to_string(),
            record,
            typing: tokio::sync::Mutex::new(()),
            events: Mutex::new(RolloutEvents::default()),
            ended: AtomicBool::new(false),
            rehoming: AtomicBool::new(false),
            end,
            release,
            approval: Mutex::new(Shown::None),
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

    /// The follower task of one adopted codex.
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
        let mut status = None;
        let mut ticks = 0u32;
        let mut interval = tokio::time::interval(TICK);
        loop {
            tokio::select! {
                request = ends.recv() => {
                    if let Some((end, done)) = request {
                        if end == End::Rehomed
                            && self.read_rollout(&adopted, &mut checkpoint).await
                        {
                            let _ = tail::save_checkpoint(&checkpoint_file, &checkpoint).await;
                        }
                        self.finish(&adopted, &end).await;
                        let _ = done.send(());
                    }
                    return;
                }
                _ = interval.tick() => {}
            }
            ticks = ticks.wrapping_add(1);
            if self.read_rollout(&adopted, &mut checkpoint).await {
                let _ = tail::save_checkpoint(&checkpoint_file, &checkpoint).await;
            }
            if !adopted.rehoming.load(Ordering::SeqCst) {
                self.watch_approval(&adopted).await;
            }
            let now = if matches!(*lock(&adopted.approval), Shown::Pending { .. }) {
                AgentStatus::Waiting
            } else if lock(&adopted.events).turn().is_some() {
                AgentStatus::Running
            } else {
                AgentStatus::Idle
            };
            if status != Some(now) {
                status = Some(now);
                self.report(&adopted, now, Liveness::Alive).await;
            }
            if adopted.rehoming.load(Ordering::SeqCst) {
                continue;
            }
            if let Some(end) = self.problem(&adopted, ticks).await {
                self.finish(&adopted, &end).await;
                return;
            }
        }
    }

    /// Reads the rollout's new whole lines into session events; whether the offset moved.
    async fn read_rollout(&self, adopted: &Adopted, checkpoint: &mut Checkpoint) -> bool {
        let Ok(bytes) = std::fs::read(&checkpoint.path) else {
            return false;
        };
        let from = usize::try_from(checkpoint.offset).unwrap_or(usize::MAX);
        let Some(new) = bytes.get(from..) else {
            return false;
        };
        let Some(last) = new.iter().rposition(|b| *b == b'\n') else {
            return false;
        };
        let mut kinds = Vec::new();
        {
            let mut events = lock(&adopted.events);
            for line in new[..=last]
                .split(|b| *b == b'\n')
                .filter(|l| !l.is_empty())
            {
                kinds.extend(events.line(line));
            }
        }
        for kind in kinds {
            let _ = self
                .core
                .append(Some(adopted.session_id.clone()), kind)
                .await;
        }
        checkpoint.offset += last as u64 + 1;
        if let Ok(meta) = std::fs::metadata(&checkpoint.path) {
            checkpoint.inode = meta.ino();
        }
        true
    }

    async fn problem(&self, adopted: &Adopted, ticks: u32) -> Option<End> {
        adopted::problem(self.tmux.tmux(), &adopted.record, AGENT, ticks).await
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
        tracing::info!(session = %session_id, ?end, "an adopted codex session ends");
        adopted.ended.store(true, Ordering::SeqCst);
        self.remove(session_id);
        let open = lock(&adopted.events).turn().map(str::to_string);
        adopted::log_end(&self.core, session_id, &adopted.record, AGENT, open, end).await;
    }

    /// Gives an adopted codex back: the session ends, the TUI keeps running, watched only.
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

    /// The pane, checked again right before anything is typed: still the pane's process, the
    /// TUI still under it.
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

    async fn capture(&self, adopted: &Adopted) -> Result<String, HostError> {
        self.tmux
            .tmux()
            .run(&["capture-pane", "-p", "-e", "-t", &adopted.record.pane_id])
            .await
            .map_err(|e| HostError::failed_by(Runtime::Codex, e.to_string(), e))
    }

    async fn screen(&self, adopted: &Adopted) -> Result<tui_screen::Screen, HostError> {
        Ok(tui_screen::analyze(&self.capture(adopted).await?))
    }

    /// Looks at the screen for a command-approval prompt while a turn runs (or one is known):
    /// a new one is `approval.requested`; a pending one gone from two captures in a row was
    /// answered in the pane (`by: "pane"`, with the decision the screen then shows). Skipped
    /// while cohost types (an answer in flight settles the prompt itself).
    async fn watch_approval(&self, adopted: &Adopted) {
        let turn = lock(&adopted.events).turn().map(str::to_string);
        if turn.is_none() && matches!(*lock(&adopted.approval), Shown::None) {
            return;
        }
        let Ok(_typing) = adopted.typing.try_lock() else {
            return;
        };
        let Ok(capture) = self.capture(adopted).await else {
            return;
        };
        let prompt = tui_screen::approval(&capture);
        let session_id = &adopted.session_id;
        let state = std::mem::take(&mut *lock(&adopted.approval)).in_turn(turn.as_deref());
        let (next, event) = match (state, prompt) {
            (Shown::None, Some(prompt)) => match turn {
                Some(turn_id) => {
                    let n = self.core.read(|state| {
                        state
                            .sessions
                            .get(session_id)
                            .map_or(0, |s| s.approvals.len())
                    });
                    let (kind, command, reason) = match &prompt.asked {
                        Asked::Command(command) => (
                            ApprovalKind::Command,
                            Some(command.clone()),
                            prompt.reason.clone(),
                        ),
                        // What the edits are for and where they go, as the screen says.
                        Asked::Edits {
                            destination,
                            description,
                        } => (
                            ApprovalKind::FileChange,
                            None,
                            Some(format!(
                                "{}: {destination}",
                                prompt.reason.as_deref().unwrap_or(description)
                            )),
                        ),
                    };
                    let id = format!("ap:{turn_id}:screen{n}:{}", kind.as_str());
                    tracing::info!(session = %session_id, approval = %id, asked = ?prompt.asked, "an approval prompt on the adopted codex's screen");
                    let event = EventKind::ApprovalRequested(ApprovalRequested {
                        approval_id: id.clone().into(),
                        kind,
                        turn_id,
                        item_id: None,
                        command,
                        cwd: None,
                        reason,
                        decisions: tui_screen::APPROVAL_DECISIONS
                            .iter()
                            .map(|d| (*d).into())
                            .collect(),
                    });
                    let shown = Shown::Pending {
                        id,
                        asked: prompt.asked,
                        misses: 0,
                    };
                    (shown, Some(event))
                }
                None => (Shown::None, None),
            },
            (state, prompt) => match state.after_capture(prompt.is_some()) {
                adopted::PromptAfter::Now(next) => (next, None),
                adopted::PromptAfter::Closed { id, asked } => {
                    let decision = match &asked {
                        Asked::Command(command) => tui_screen::answered(&capture, command),
                        // The screen names no answer to file edits.
                        Asked::Edits { .. } => None,
                    };
                    (Shown::None, Some(adopted::resolved_in_pane(id, decision)))
                }
            },
        };
        *lock(&adopted.approval) = next;
        if let Some(event) = event {
            hosted::store(&self.core, session_id, event, Runtime::Codex).await;
        }
    }

    /// Answers the approval prompt on the adopted TUI's screen with its own key (`y` accepts,
    /// Escape cancels), only when it is still pending here, the pane is verified, the TUI's
    /// release is one whose prompt is known, and the screen is exactly that prompt about the
    /// same command; else nothing is typed (`ScreenMismatch`). The first answer wins.
    pub async fn resolve_approval(
        &self,
        session_id: &str,
        approval_id: &str,
        decision: &str,
        by: &str,
    ) -> Result<(), HostError> {
        hosted::check_decision(decision, &tui_screen::APPROVAL_DECISIONS)?;
        let adopted = self.live(session_id)?;
        let _typing = adopted.typing.lock().await;
        let Some(asked) = lock(&adopted.approval).pending(approval_id).cloned() else {
            return Err(hosted::not_pending(&self.core, session_id, approval_id));
        };
        self.verified(&adopted).await?;
        PROMPT
            .answer(
                self.tmux.tmux(),
                &adopted.record.pane_id,
                adopted.release.as_deref(),
                decision,
                &asked,
            )
            .await?;
        let turn = lock(&adopted.events).turn().map(str::to_string);
        *lock(&adopted.approval) = Shown::Answered { turn };
        tracing::info!(session = %session_id, approval = %approval_id, decision, "answered the adopted codex's approval prompt");
        hosted::record_resolved(&self.core, session_id, approval_id, decision, by).await
    }

    /// Types `text` into the adopted TUI's composer and submits it, only when the screen shows
    /// the composer empty and no turn running; a person's draft refuses (`HumanTyping`), a
    /// screen that cannot be read refuses (`NotReady`). Confirmed by the turn it starts in the
    /// rollout.
    pub async fn inject(
        &self,
        session_id: &str,
        text: &str,
        key: Option<String>,
    ) -> Result<InjectOutcome, HostError> {
        if let Some(previous) =
            crate::runtime::common::inject::previous(&self.core, session_id, key.as_deref())
        {
            return Ok(previous);
        }
        let adopted = self.live(session_id)?;
        let _typing = adopted.typing.lock().await;
        self.verified(&adopted).await?;
        let screen = self.screen(&adopted).await?;
        match &screen.composer {
            Composer::Empty => {}
            Composer::Draft(_) => return Err(HostError::HumanTyping(session_id.to_string())),
            Composer::Unreadable(why) => {
                return Err(HostError::NotReadyBecause(format!(
                    "cannot read the codex composer in pane {} ({why}); nothing typed",
                    adopted.record.pane_id
                )));
            }
        }
        if screen.busy || lock(&adopted.events).turn().is_some() {
            return Err(HostError::NotReadyBecause(format!(
                "the adopted codex in session `{session_id}` runs a turn; send when it is idle"
            )));
        }
        let turns = |core: &CoreHandle| {
            core.read(|state| {
                state.sessions.get(session_id).map(|s| {
                    let id = s
                        .active_turn
                        .clone()
                        .or_else(|| s.last_turn.as_ref().map(|t| t.turn_id.clone()));
                    (s.turns, id)
                })
            })
        };
        let before = turns(&self.core).map_or(0, |(n, _)| n);
        lock(&adopted.events).pasted(text);
        let tmux = self.tmux.tmux();
        tmux.paste(&adopted.record.pane_id, text)
            .await
            .map_err(|e| HostError::failed_by(Runtime::Codex, e.to_string(), e))?;
        // The composer shows the pasted text before Enter submits it.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        loop {
            let screen = self.screen(&adopted).await?;
            if matches!(&screen.composer, Composer::Draft(shown) if same_text(shown, text)) {
                break;
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(HostError::NotReadyBecause(format!(
                    "the pasted prompt never showed in pane {}'s composer; not submitted",
                    adopted.record.pane_id
                )));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        self.verified(&adopted).await?;
        tmux.send_keys(&adopted.record.pane_id, &["Enter"])
            .await
            .map_err(|e| HostError::failed_by(Runtime::Codex, e.to_string(), e))?;
        let deadline = tokio::time::Instant::now() + CONFIRM_TIMEOUT;
        let turn_id = loop {
            if let Some((n, Some(id))) = turns(&self.core)
                && n > before
            {
                break id;
            }
            let pane = &adopted.record.pane_id;
            if let Some(lost) =
                adopted::lost_after_typing(&self.core, Runtime::Codex, session_id, pane)
            {
                return Err(lost);
            }
            if tokio::time::Instant::now() >= deadline {
                // Enter was sent: the prompt may still start a turn, so it is not to be typed
                // again.
                return Err(HostError::failed(
                    Runtime::Codex,
                    format!(
                        "codex started no turn for the prompt typed in pane {} within {CONFIRM_TIMEOUT:?}",
                        adopted.record.pane_id
                    ),
                ));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        crate::runtime::common::inject::record(
            &self.core,
            session_id,
            InjectState::Started,
            &turn_id,
            key,
        )
        .await?;
        Ok(InjectOutcome {
            outcome: InjectState::Started,
            turn_id,
            duplicate: false,
        })
    }

    /// Interrupts the running turn with the TUI's own key, Escape, sent only while the rollout
    /// shows a turn running and no dialog is on screen (on an idle composer Escape does
    /// something else).
    pub async fn interrupt(&self, session_id: &str) -> Result<bool, HostError> {
        let adopted = self.live(session_id)?;
        let _typing = adopted.typing.lock().await;
        self.verified(&adopted).await?;
        // The rollout says whether a turn runs: the screen's `esc to interrupt` goes away while
        // a reply streams (seen on 0.169: the streamed text, then an idle-looking composer).
        if lock(&adopted.events).turn().is_none() {
            return Ok(false);
        }
        // A dialog takes Escape as its own answer (`esc to cancel`): not sent then.
        let screen = self.screen(&adopted).await?;
        if let Composer::Unreadable(why) = &screen.composer {
            return Err(HostError::NotReadyBecause(format!(
                "cannot read the codex screen in pane {} ({why}); no Escape sent",
                adopted.record.pane_id
            )));
        }
        self.tmux
            .tmux()
            .send_keys(&adopted.record.pane_id, &["Escape"])
            .await
            .map_err(|e| HostError::failed_by(Runtime::Codex, e.to_string(), e))?;
        Ok(true)
    }
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
    fn a_running_turn_is_followed_from_its_start() {
        let started =
            "{\"type\":\"event_msg\",\"payload\":{\"type\":\"task_started\",\"turn_id\":\"t1\"}}\n";
        let done = "{\"type\":\"event_msg\",\"payload\":{\"type\":\"task_complete\",\"turn_id\":\"t1\"}}\n";
        let other = "{\"type\":\"session_meta\",\"payload\":{}}\n";
        let idle = format!("{other}{started}{done}");
        assert_eq!(start_offset(idle.as_bytes()), (idle.len() as u64, false));
        let running = format!("{idle}{started}{other}");
        assert_eq!(start_offset(running.as_bytes()), (idle.len() as u64, true));
        // A partial last line is not followed past.
        let partial = format!("{idle}{{\"type\"");
        assert_eq!(start_offset(partial.as_bytes()), (idle.len() as u64, false));
    }

    #[test]
    fn only_a_codex_that_is_not_an_app_server_is_a_tui() {
        assert!(!is_tui(std::process::id()));
    }
}
