//! The checks every runtime makes of an agent a person started by hand and cohost adopted: before
//! the adoption, that the pane is there and the agent's process lives under the pane's process
//! ([`check_agent`]); on every tick of the adopted session, that this still holds ([`problem`]:
//! the pane in tmux every [`PANE_CHECK_TICKS`] ticks, `/proc` every tick); and why the session
//! ends ([`AdoptedEnd`]). The adopted agents of a runtime, by session ([`Adopters`]: one
//! adoption at a time, the checks it starts with). And the frame every adoption logs: the
//! refusal of an agent another session already drives ([`refuse_driven`]), the session's start
//! ([`log_start`]: created, adopted, pane, bound), its instance in the tracker ([`report`]), the
//! check before anything is typed ([`verify_before_typing`]), the agent quitting for a rehome
//! ([`Rehoming`]) and its end ([`log_end`]). Reads tmux and `/proc`, appends to the log; types
//! nothing.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::core::CoreHandle;
use crate::process;
use crate::protocol::{
    AgentStatus, EventKind, InstanceRef, Liveness, Runtime, SessionAdopted, SessionBound,
    SessionClosed, SessionCreated, SessionPane, TurnCompleted, TurnStatus,
};
use crate::runtime::common::mirror::{self, Placement, Report};
use crate::runtime::{AdoptRefusal, AdoptRequest, HostError, InjectOutcome};
use crate::tmux::{SessionCache, Tmux};

/// What an adopted TUI's screen shows of its input box (codex's composer, Pi's and OpenCode's
/// box), as its screen reader reads a capture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InputBox {
    /// Nothing typed (a placeholder or the cursor alone): ready for a prompt.
    Empty,
    /// Text a person typed and has not sent (lines joined with `\n`).
    Draft(String),
    /// No input box could be read (the reason): nothing may be typed.
    Unreadable(String),
}

/// An approval prompt on an adopted TUI's screen, as cohost knows it (codex's approval prompt,
/// OpenCode's permission dialog); `A` is what the prompt asks.
#[derive(Debug, Default, PartialEq)]
pub enum ScreenPrompt<A> {
    #[default]
    None,
    /// On screen and pending: `approval.requested` was stored. `misses` counts captures in a
    /// row without it (one capture is not trusted to say it closed).
    Pending { id: String, asked: A, misses: u8 },
    /// Answered by cohost in turn `turn` (the turn running then); the prompt may still show
    /// until the TUI redraws.
    Answered { turn: Option<String> },
}

/// A known prompt after one more capture of the screen.
#[derive(Debug, PartialEq)]
pub enum PromptAfter<A> {
    /// What cohost knows of it now.
    Now(ScreenPrompt<A>),
    /// The pending prompt `id` closed without cohost's answer: it was answered in the pane.
    Closed { id: String, asked: A },
}

impl<A> ScreenPrompt<A> {
    /// This prompt after a capture that shows a prompt (`shown`) or none: a pending one shown
    /// again is kept (its misses reset), missing once is counted, missing from two captures in
    /// a row it closed; one cohost answered is forgotten once the screen no longer shows it. A
    /// new prompt is the runtime's to raise (`None` stays `None` here).
    pub fn after_capture(self, shown: bool) -> PromptAfter<A> {
        match (self, shown) {
            (ScreenPrompt::Pending { id, asked, misses }, false) if misses >= 1 => {
                PromptAfter::Closed { id, asked }
            }
            (ScreenPrompt::Pending { id, asked, misses }, false) => {
                PromptAfter::Now(ScreenPrompt::Pending {
                    id,
                    asked,
                    misses: misses + 1,
                })
            }
            (ScreenPrompt::Pending { id, asked, .. }, true) => {
                PromptAfter::Now(ScreenPrompt::Pending {
                    id,
                    asked,
                    misses: 0,
                })
            }
            (ScreenPrompt::Answered { .. }, false) => PromptAfter::Now(ScreenPrompt::None),
            (state, _) => PromptAfter::Now(state),
        }
    }

    /// This prompt once turn `running` runs: one cohost answered in an earlier turn is forgotten
    /// (a prompt on screen now is the new turn's: the TUI took the new turn's prompt, so the
    /// answered one had closed), even when no capture saw the screen without it in between
    /// (cohost typing the new prompt skips the captures; under load OpenCode redrew after them).
    pub fn in_turn(self, running: Option<&str>) -> Self {
        match self {
            ScreenPrompt::Answered { turn } if running.is_some() && turn.as_deref() != running => {
                ScreenPrompt::None
            }
            state => state,
        }
    }

    /// What the prompt `approval_id` asks, when it is the one pending here.
    pub fn pending(&self, approval_id: &str) -> Option<&A> {
        match self {
            ScreenPrompt::Pending { id, asked, .. } if id == approval_id => Some(asked),
            _ => None,
        }
    }
}

/// The `approval.resolved` of a prompt answered in the pane, not by cohost (`by: "pane"`), with
/// the decision when the screen names it.
pub fn resolved_in_pane(approval_id: String, decision: Option<&str>) -> EventKind {
    EventKind::ApprovalResolved(crate::protocol::ApprovalResolved {
        approval_id: approval_id.into(),
        decision: decision.map(Into::into),
        by: "pane".into(),
    })
}

/// The check before an adopted TUI's prompt is answered with a key: the screen shows a prompt
/// (`on_screen`: whether it is exactly the release's known one, and what it asks), exactly the
/// known one, asking what is pending (`asked`). Else `ScreenMismatch`, saying why: nothing is
/// typed. `what` names the prompt (`approval prompt`, `permission dialog`), `release` the TUI
/// (`codex 0.171.0`).
pub fn check_prompt<A: PartialEq>(
    pane: &str,
    what: &str,
    release: &str,
    on_screen: Option<(&Result<(), String>, &A)>,
    asked: &A,
    describe: impl Fn(&A) -> String,
) -> Result<(), HostError> {
    let Some((exact, shown)) = on_screen else {
        return Err(HostError::ScreenMismatch(format!(
            "no {what} on pane {pane}'s screen; nothing typed"
        )));
    };
    if let Err(why) = exact {
        return Err(HostError::ScreenMismatch(format!(
            "the {what} on pane {pane}'s screen is not {release}'s known {what} exactly ({why}); nothing typed, answer it in the pane"
        )));
    }
    if shown != asked {
        return Err(HostError::ScreenMismatch(format!(
            "the {what} on pane {pane}'s screen asks about {}, not {}; nothing typed",
            describe(shown),
            describe(asked)
        )));
    }
    Ok(())
}

/// A prompt read on a screen: whether it is exactly the known one (or why not), and what it asks.
pub type OnScreen<A> = Option<(Result<(), String>, A)>;

/// An approval prompt an adopted TUI shows on its screen, as its runtime knows it (codex's
/// approval prompt, OpenCode's permission dialog): answered with its own key only where the
/// release's prompt is known and the screen shows exactly it ([`KnownPrompt::answer`]).
pub struct KnownPrompt<A> {
    pub runtime: Runtime,
    /// The prompt in messages: `approval prompt`, `permission dialog`.
    pub what: &'static str,
    /// The TUI in messages: `codex`, `opencode`.
    pub agent: &'static str,
    /// The releases whose prompt is known.
    pub releases: &'static [&'static str],
    /// The key that answers `decision` on `release`'s prompt, where known.
    pub key: fn(release: &str, decision: &str) -> Option<&'static str>,
    /// The prompt on a `capture-pane -e` capture: whether it is exactly the known one, and what
    /// it asks.
    pub read: fn(capture: &str) -> OnScreen<A>,
    pub describe: fn(&A) -> String,
}

impl<A: PartialEq> KnownPrompt<A> {
    /// Types the key that answers `decision` into pane `pane` of a TUI of `release` (`None`:
    /// unknown), only when that release's prompt is known and the screen shows exactly it,
    /// asking `asked` ([`check_prompt`]); else `ScreenMismatch`, nothing typed. The caller
    /// verified the pane.
    pub async fn answer(
        &self,
        tmux: &Tmux,
        pane: &str,
        release: Option<&str>,
        decision: &str,
        asked: &A,
    ) -> Result<(), HostError> {
        let (what, agent) = (self.what, self.agent);
        let release = release.unwrap_or("of unknown release");
        let Some(key) = (self.key)(release, decision) else {
            return Err(HostError::ScreenMismatch(format!(
                "the {what} of {agent} {release} is not one cohost knows (known: {}); nothing typed, answer it in pane {pane}",
                self.releases.join(", ")
            )));
        };
        let failed =
            |e: crate::tmux::TmuxError| HostError::failed_by(self.runtime, e.to_string(), e);
        let capture = tmux
            .run(&["capture-pane", "-p", "-e", "-t", pane])
            .await
            .map_err(failed)?;
        let on_screen = (self.read)(&capture);
        check_prompt(
            pane,
            what,
            &format!("{agent} {release}"),
            on_screen.as_ref().map(|(exact, shown)| (exact, shown)),
            asked,
            self.describe,
        )?;
        tmux.send_keys(pane, &[key]).await.map_err(failed)
    }
}

/// Session ticks between looks at the adopted pane in tmux (`/proc` is read every tick).
pub const PANE_CHECK_TICKS: u32 = 5;

/// Why an adopted session ends; its `session.closed` says so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AdoptedEnd {
    /// Given back (`disown`): the agent keeps running, watched only.
    Disowned,
    /// The pane is gone.
    PaneGone(String),
    /// The agent exited (its pane may show a shell now).
    AgentExited(String),
    /// The pane runs something else than the agent that was adopted.
    PaneChanged(String),
    /// The agent quit in its pane to be resumed under cohost's own host there (a rehome): the
    /// session goes on, hosted; nothing of the adoption is followed any more.
    Rehomed,
}

impl AdoptedEnd {
    /// The `session.closed` reason; `agent` names the agent (`claude`, `codex`).
    pub fn reason(&self, agent: &str) -> String {
        match self {
            AdoptedEnd::Disowned => {
                format!("disowned: the adopted {agent} keeps running in its pane, watched only")
            }
            AdoptedEnd::PaneGone(why) => format!("pane gone: {why}; nothing more is typed there"),
            AdoptedEnd::AgentExited(why) => {
                format!("agent exited: {why}; nothing more is typed in its pane")
            }
            AdoptedEnd::PaneChanged(why) => {
                format!("pane changed: {why}; nothing more is typed there")
            }
            AdoptedEnd::Rehomed => {
                format!("rehomed: the {agent} in its pane now runs under cohost's own host")
            }
        }
    }
}

/// An adoption refused, saying why.
pub fn refuse(refusal: AdoptRefusal, message: String) -> HostError {
    HostError::CannotAdopt { refusal, message }
}

/// What a pane's process is, for a message (`` `sh` (pid 4200) ``).
pub fn describe(pid: u32) -> String {
    match process::comm(pid) {
        Some(name) => format!("`{name}` (pid {pid})"),
        None => format!("pid {pid}"),
    }
}

/// The agent the watcher placed in `request`'s pane, checked: the pane is there, the process
/// lives, `is_agent` says it runs `agent` (`claude`, `codex`), and it runs under the pane's
/// process. Answers the pane's pid, the agent's pid and its `/proc` stat; or the refusal.
pub async fn check_agent(
    tmux: &Tmux,
    request: &AdoptRequest,
    agent: &str,
    is_agent: impl Fn(u32) -> bool,
) -> Result<(u32, u32, process::Stat), HostError> {
    let pane = &request.pane_id;
    let Some(pane_pid) = tmux.pane_pid(pane).await else {
        return Err(refuse(
            AdoptRefusal::PaneGone,
            format!("pane {pane} is gone: there is nothing to adopt"),
        ));
    };
    let Some(pid) = request.pid else {
        return Err(refuse(
            AdoptRefusal::NotAdoptable,
            format!(
                "the watcher knows no {agent} process for {}: it cannot be adopted",
                request.key
            ),
        ));
    };
    let exited = || {
        refuse(
            AdoptRefusal::AgentExited,
            format!(
                "{agent} (pid {pid}) has exited; pane {pane} runs {} now",
                describe(pane_pid)
            ),
        )
    };
    let stat = process::stat(pid)
        .filter(|stat| !stat.zombie)
        .ok_or_else(exited)?;
    if !is_agent(pid) {
        return Err(exited());
    }
    if !process::ancestors(pid).contains(&pane_pid) {
        return Err(refuse(
            AdoptRefusal::PaneChanged,
            format!(
                "{agent} (pid {pid}) does not run in pane {pane}, which runs {} now",
                describe(pane_pid)
            ),
        ));
    }
    Ok((pane_pid, pid, stat))
}

/// Whether the adopted agent still runs, under the pane's process: what `/proc` says (the pane
/// itself is asked of tmux by [`problem`] or the caller).
pub fn agent_problem(adopted: &SessionAdopted, agent: &str) -> Option<AdoptedEnd> {
    let pid = adopted.pid;
    if !process::alive(pid, Some(adopted.pid_start)) {
        return Some(AdoptedEnd::AgentExited(format!(
            "{agent} (pid {pid}) exited"
        )));
    }
    if !process::ancestors(pid).contains(&adopted.pane_pid) {
        return Some(AdoptedEnd::PaneChanged(format!(
            "{agent} (pid {pid}) no longer runs under pane {}'s process (pid {})",
            adopted.pane_id, adopted.pane_pid
        )));
    }
    None
}

/// An adopted session's look at its agent on tick `ticks`: the pane in tmux every
/// [`PANE_CHECK_TICKS`] (gone, or running another process), `/proc` every tick; a pane closed
/// with its agent counts as the pane gone. `Some`: the session ends.
pub async fn problem(
    tmux: &Tmux,
    adopted: &SessionAdopted,
    agent: &str,
    ticks: u32,
) -> Option<AdoptedEnd> {
    let looked = ticks.is_multiple_of(PANE_CHECK_TICKS);
    if looked {
        match tmux.pane_pid(&adopted.pane_id).await {
            None => {
                return Some(AdoptedEnd::PaneGone(format!(
                    "pane {} closed",
                    adopted.pane_id
                )));
            }
            Some(pid) if pid != adopted.pane_pid => {
                return Some(AdoptedEnd::PaneChanged(format!(
                    "pane {} runs {} now",
                    adopted.pane_id,
                    describe(pid)
                )));
            }
            Some(_) => {}
        }
    }
    let end = agent_problem(adopted, agent)?;
    // Closing a pane ends the agent in it: say which went first.
    if !looked && tmux.pane_pid(&adopted.pane_id).await.is_none() {
        return Some(AdoptedEnd::PaneGone(format!(
            "pane {} closed",
            adopted.pane_id
        )));
    }
    Some(end)
}

/// Refuses to adopt an agent session a cohost session already drives (hosted, or adopted
/// before); `agent` names it in the message (`codex thread`, `pi session`).
pub fn refuse_driven(
    core: &CoreHandle,
    request: &AdoptRequest,
    agent: &str,
) -> Result<(), HostError> {
    let driver = core.read(|state| {
        state
            .sessions
            .driving(&request.agent_session_id)
            .map(|s| s.id.clone())
    });
    match driver {
        Some(driver) => Err(refuse(
            AdoptRefusal::AlreadyDriven,
            format!(
                "session `{driver}` already drives {agent} {}",
                request.agent_session_id
            ),
        )),
        None => Ok(()),
    }
}

/// The adopted agent's working directory: the watcher's, else its process's (`/proc`), else
/// none.
pub fn cwd(request: &AdoptRequest, pid: u32) -> String {
    request
        .cwd
        .clone()
        .or_else(|| {
            std::fs::read_link(format!("/proc/{pid}/cwd"))
                .ok()
                .map(|p| p.to_string_lossy().into_owned())
        })
        .unwrap_or_default()
}

/// Logs an adopted session's start: `session.created` (the runtime, the directory),
/// `session.adopted` (`record`), `session.pane` and `session.bound` (the agent's session on
/// `backend`).
pub async fn log_start(
    core: &CoreHandle,
    session_id: &str,
    runtime: Runtime,
    cwd: String,
    record: &SessionAdopted,
    backend: &str,
) -> Result<(), HostError> {
    let session = Some(session_id.to_string());
    core.append(
        session.clone(),
        EventKind::SessionCreated(SessionCreated::plain(runtime, cwd)),
    )
    .await?;
    core.append(session.clone(), EventKind::SessionAdopted(record.clone()))
        .await?;
    core.append(
        session.clone(),
        EventKind::SessionPane(SessionPane {
            pane_id: record.pane_id.clone(),
            tmux_session: record.tmux_session.clone(),
            runner_pid: record.pane_pid,
        }),
    )
    .await?;
    core.append(
        session,
        EventKind::SessionBound(SessionBound {
            thread_id: record.agent_session_id.clone(),
            backend: backend.into(),
        }),
    )
    .await?;
    Ok(())
}

/// Whether session `id` is an adopted one of `runtime` (by the log: also after its end).
pub fn is_adopted(core: &CoreHandle, runtime: Runtime, id: &str) -> bool {
    core.read(|state| {
        state
            .sessions
            .get(id)
            .is_some_and(|s| s.created.runtime == runtime && s.adopted.is_some())
    })
}

/// The adopted sessions of `runtime` the log says are open (to follow again after a restart).
pub fn open_sessions(core: &CoreHandle, runtime: Runtime) -> Vec<(String, SessionAdopted)> {
    core.read(|state| {
        state
            .sessions
            .iter()
            .filter(|s| s.created.runtime == runtime && !s.is_closed())
            .filter_map(|s| s.adopted.clone().map(|a| (s.id.clone(), a)))
            .collect()
    })
}

/// Reports an adopted agent's status to the tracker, in its pane (`agent`: the tracker's name).
pub async fn report(
    core: &CoreHandle,
    tmux: &SessionCache,
    record: &SessionAdopted,
    session_id: &str,
    agent: &str,
    status: AgentStatus,
    liveness: Liveness,
) {
    mirror::report(
        core,
        tmux,
        Report {
            agent,
            thread_id: &record.agent_session_id,
            session_id,
            placement: Placement::Pane {
                tmux_session: &record.tmux_session,
                pane_id: &record.pane_id,
            },
            status,
            liveness,
        },
    )
    .await;
}

/// The pane, checked again right before anything is typed: the session has not `ended`, the
/// pane still runs the process it ran at the adoption, the agent still lives under it.
pub async fn verify_before_typing(
    tmux: &Tmux,
    record: &SessionAdopted,
    session_id: &str,
    ended: bool,
    agent: &str,
) -> Result<(), HostError> {
    if ended {
        return Err(HostError::Closed(session_id.to_string()));
    }
    match tmux.pane_pid(&record.pane_id).await {
        Some(pid) if pid == record.pane_pid => {}
        _ => {
            return Err(HostError::ClosedBecause(format!(
                "session `{session_id}`: pane {} is gone or runs something else; nothing is typed",
                record.pane_id
            )));
        }
    }
    if let Some(end) = agent_problem(record, agent) {
        return Err(HostError::ClosedBecause(format!(
            "session `{session_id}`: {}",
            end.reason(agent)
        )));
    }
    Ok(())
}

/// A prompt typed into `pane` whose turn nothing will store any more: the session is `lost`
/// (its follower stopped). `failed`, saying why, since the agent may have taken the prompt.
pub fn lost_after_typing(
    core: &CoreHandle,
    runtime: Runtime,
    session_id: &str,
    pane: &str,
) -> Option<HostError> {
    let why =
        super::hosted::lost_because(core, session_id)?.unwrap_or_else(|| "no reason given".into());
    Some(HostError::failed(
        runtime,
        format!(
            "the prompt was typed in pane {pane}, but session `{session_id}` was lost before its turn was stored: {why}"
        ),
    ))
}

/// The end of a prompt typed into an adopted TUI whose agent recorded it as turn `turn_id`:
/// waits (until `deadline`) for the follower to have stored that turn in the session, so the
/// answer never names a turn the stream has not shown, then logs `message.sent` started with
/// the caller's idempotency `key`.
pub async fn started_once_stored(
    core: &CoreHandle,
    runtime: Runtime,
    session_id: &str,
    turn_id: String,
    key: Option<String>,
    pane: &str,
    deadline: tokio::time::Instant,
) -> Result<InjectOutcome, HostError> {
    loop {
        let stored = core.read(|state| {
            state.sessions.get(session_id).is_some_and(|s| {
                s.active_turn.as_deref() == Some(turn_id.as_str())
                    || s.last_turn.as_ref().is_some_and(|t| t.turn_id == turn_id)
            })
        });
        if stored {
            break;
        }
        if let Some(lost) = lost_after_typing(core, runtime, session_id, pane) {
            return Err(lost);
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(HostError::failed(
                runtime,
                format!("the turn of the prompt typed in pane {pane} was never stored"),
            ));
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    Ok(crate::runtime::common::inject::record(
        core,
        session_id,
        crate::protocol::InjectState::Started,
        &turn_id,
        key,
    )
    .await?)
}

/// Drops the tracker instance `key` in `tmux_session` when it is a hosted session's (the
/// adopted one's own), so the watcher's shows again.
pub async fn prune_own_instance(core: &CoreHandle, tmux_session: &str, key: String) {
    let ours = core.read(|state| {
        state
            .tracker
            .instance(tmux_session, &key)
            .is_some_and(|(u, _)| u.source.as_deref() == Some(crate::protocol::SOURCE_HOSTED))
    });
    if ours {
        let _ = core
            .append(
                Some(tmux_session.to_string()),
                EventKind::AgentPruned(InstanceRef { key }),
            )
            .await;
    }
}

/// The agents of one runtime this daemon adopted, by session id (`A`: what the runtime's
/// follower keeps of one), and what every adopter shares: the core, the tmux cache, its
/// directory (`<root>/adopted`) and one adoption at a time ([`Adopters::begin`]). A runtime's
/// `Adoptions` derefs to it.
pub struct Adopters<A> {
    pub core: CoreHandle,
    pub tmux: Arc<SessionCache>,
    /// `<the runtime's directory>/adopted`.
    pub dir: PathBuf,
    runtime: Runtime,
    live: Mutex<HashMap<String, Arc<A>>>,
    adopting: tokio::sync::Mutex<()>,
    /// Where a follower's panic is recorded for health and doctor.
    failures: crate::failures::TaskFailures,
}

impl<A> Adopters<A> {
    pub fn new(
        runtime: Runtime,
        core: CoreHandle,
        tmux: Arc<SessionCache>,
        root: &Path,
        failures: crate::failures::TaskFailures,
    ) -> Self {
        Adopters {
            core,
            tmux,
            dir: root.join("adopted"),
            runtime,
            live: Mutex::new(HashMap::new()),
            adopting: tokio::sync::Mutex::new(()),
            failures,
        }
    }

    /// Runs an adopted agent's follower (`run`, of `session_id`): a session a restart finds
    /// `lost` is `live` again as it starts ([`super::hosted::following_again`]); should it
    /// panic, `end` marks the adopted agent ended — nothing is typed into its pane any more —
    /// and the session goes `lost` ([`super::caught::follow_caught`]).
    pub fn spawn_follower(
        &self,
        session_id: String,
        end: impl FnOnce() + Send + 'static,
        run: impl Future<Output = ()> + Send + 'static,
    ) {
        let core = self.core.clone();
        let failures = self.failures.clone();
        let name = format!("{} adoption follower", self.runtime.as_str());
        tokio::spawn(async move {
            super::hosted::following_again(&core, &session_id).await;
            let on_panic = move || {
                end();
                vec![session_id]
            };
            super::caught::follow_caught(&core, &failures, &name, on_panic, run).await
        });
    }

    /// Whether session `id` is an adopted agent of this runtime (by the log: also after its
    /// end).
    pub fn is_adopted(&self, id: &str) -> bool {
        is_adopted(&self.core, self.runtime, id)
    }

    /// The adopted agent of session `id` this daemon follows now; `Closed` once it ended.
    pub fn live(&self, id: &str) -> Result<Arc<A>, HostError> {
        super::lock(&self.live)
            .get(id)
            .cloned()
            .ok_or_else(|| HostError::Closed(id.to_string()))
    }

    /// Follows `adopted` as session `id`'s.
    pub fn insert(&self, id: &str, adopted: Arc<A>) {
        super::lock(&self.live).insert(id.to_string(), adopted);
    }

    /// Session `id` is followed no more.
    pub fn remove(&self, id: &str) {
        super::lock(&self.live).remove(id);
    }

    /// What every adoption starts with: the instance is of this adopter's `agent` (else
    /// `Unsupported`), one adoption at a time (the guard answered), and no cohost session drives
    /// it yet (`what`: how the message names it, `codex thread`).
    pub async fn begin(
        &self,
        request: &AdoptRequest,
        agent: &str,
        what: &str,
    ) -> Result<tokio::sync::MutexGuard<'_, ()>, HostError> {
        if request.agent != agent {
            return Err(HostError::Unsupported(format!(
                "{} sessions adopt {agent} instances, not {}",
                self.runtime.as_str(),
                request.agent
            )));
        }
        let adopting = self.adopting.lock().await;
        refuse_driven(&self.core, request, what)?;
        Ok(adopting)
    }
}

/// An adopted agent quitting in its pane for a rehome: the pane kept (`remain-on-exit`, for an
/// agent that is the pane's own process) and the adopter's `rehoming` flag set, so the expected
/// exit ends neither the pane nor the session. [`Rehoming::undo`] gives both back when the
/// rehome stops short (the agent then keeps running, adopted).
pub struct Rehoming<'a> {
    tmux: &'a Tmux,
    pane: &'a str,
    flag: &'a AtomicBool,
}

impl<'a> Rehoming<'a> {
    pub async fn start(
        tmux: &'a Tmux,
        pane: &'a str,
        flag: &'a AtomicBool,
        runtime: Runtime,
    ) -> Result<Rehoming<'a>, HostError> {
        tmux.run(&["set-option", "-p", "-t", pane, "remain-on-exit", "on"])
            .await
            .map_err(|e| HostError::failed_by(runtime, e.to_string(), e))?;
        flag.store(true, Ordering::SeqCst);
        Ok(Rehoming { tmux, pane, flag })
    }

    pub async fn undo(self) {
        self.flag.store(false, Ordering::SeqCst);
        let _ = self
            .tmux
            .run(&["set-option", "-p", "-u", "-t", self.pane, "remain-on-exit"])
            .await;
    }

    /// Undoes and answers `error` (for a step that failed).
    pub async fn fail<T>(self, error: HostError) -> Result<T, HostError> {
        self.undo().await;
        Err(error)
    }

    /// Waits until the adopted process (`record`'s pid and start time) is gone, `timeout` at
    /// most; else undoes and answers `NotReady` (`after`: what was typed, for the message).
    pub async fn wait_exit(
        self,
        record: &SessionAdopted,
        agent: &str,
        after: &str,
        timeout: Duration,
    ) -> Result<(), HostError> {
        let deadline = tokio::time::Instant::now() + timeout;
        while process::alive(record.pid, Some(record.pid_start)) {
            if tokio::time::Instant::now() >= deadline {
                let pane = self.pane;
                return self
                    .fail(HostError::NotReadyBecause(format!(
                        "{agent} (pid {}) did not quit within {timeout:?} of {after} in pane {pane}; it keeps running, adopted",
                        record.pid
                    )))
                    .await;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(())
    }
}

/// Logs an adopted session's end: its `open_turn` interrupted and lost (unless given back or
/// rehomed: then the turn goes on in the pane), its tracker instance pruned when it is the
/// session's own (the watcher's shows again), and `session.closed` with the reason (unless
/// rehomed: the session goes on, hosted). `agent` is the tracker's name of the agent.
pub async fn log_end(
    core: &CoreHandle,
    session_id: &str,
    record: &SessionAdopted,
    agent: &str,
    open_turn: Option<String>,
    end: &AdoptedEnd,
) {
    let session = Some(session_id.to_string());
    if let Some(turn_id) =
        open_turn.filter(|_| !matches!(end, AdoptedEnd::Disowned | AdoptedEnd::Rehomed))
    {
        let _ = core
            .append(
                session.clone(),
                EventKind::TurnCompleted(TurnCompleted {
                    turn_id,
                    status: TurnStatus::Interrupted,
                    error: None,
                    duration_ms: None,
                    lost: true,
                }),
            )
            .await;
    }
    prune_own_instance(
        core,
        &record.tmux_session,
        format!("{agent}:{}", record.agent_session_id),
    )
    .await;
    if *end == AdoptedEnd::Rehomed {
        return;
    }
    let _ = core
        .append(
            session,
            EventKind::SessionClosed(SessionClosed {
                reason: end.reason(agent),
            }),
        )
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::SessionState;

    #[tokio::test]
    async fn a_typed_prompt_stops_waiting_for_its_turn_once_the_session_is_lost() {
        let dir = tempfile::tempdir().unwrap();
        let (core, _thread) =
            crate::core::started_for_tests(dir.path(), crate::core::event_log::FsyncPolicy::Never);
        let created = SessionCreated::plain(Runtime::Pi, "/w".into());
        core.append(Some("cs_a".into()), EventKind::SessionCreated(created))
            .await
            .unwrap();
        let why = "cohost stopped following this session: its pi adoption follower panicked (x)";
        super::super::hosted::status(&core, "cs_a", SessionState::Lost, Some(why.into())).await;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        let waited = std::time::Instant::now();
        let answer = started_once_stored(
            &core,
            Runtime::Pi,
            "cs_a",
            "t1".into(),
            None,
            "%3",
            deadline,
        )
        .await;
        assert!(
            waited.elapsed() < Duration::from_secs(5),
            "{:?}",
            waited.elapsed()
        );
        match answer {
            Err(HostError::Failed { message, .. }) => assert_eq!(
                message,
                format!(
                    "the prompt was typed in pane %3, but session `cs_a` was lost before its turn was stored: {why}"
                )
            ),
            other => panic!("not failed: {other:?}"),
        }
    }

    #[test]
    fn a_pending_prompt_closes_only_after_two_captures_without_it() {
        let pending = |misses| ScreenPrompt::Pending {
            id: "ap:1".to_string(),
            asked: "ls",
            misses,
        };
        assert_eq!(
            pending(0).after_capture(false),
            PromptAfter::Now(pending(1))
        );
        assert_eq!(pending(1).after_capture(true), PromptAfter::Now(pending(0)));
        assert_eq!(
            pending(1).after_capture(false),
            PromptAfter::Closed {
                id: "ap:1".to_string(),
                asked: "ls"
            }
        );
        let answered = || ScreenPrompt::<&str>::Answered {
            turn: Some("t1".to_string()),
        };
        assert_eq!(answered().after_capture(true), PromptAfter::Now(answered()));
        assert_eq!(
            answered().after_capture(false),
            PromptAfter::Now(ScreenPrompt::None)
        );
        // A prompt answered in an earlier turn is forgotten once another turn runs; in its own
        // turn, or with none running, it is kept until a capture shows the screen without it.
        assert_eq!(answered().in_turn(Some("t2")), ScreenPrompt::None);
        assert_eq!(answered().in_turn(Some("t1")), answered());
        assert_eq!(answered().in_turn(None), answered());
        assert_eq!(pending(0).in_turn(Some("t2")), pending(0));
        assert_eq!(
            ScreenPrompt::<&str>::None.after_capture(true),
            PromptAfter::Now(ScreenPrompt::None)
        );
        assert_eq!(pending(0).pending("ap:1"), Some(&"ls"));
        assert_eq!(pending(0).pending("ap:2"), None);
    }

    #[test]
    fn a_prompt_is_answered_only_when_the_screen_shows_exactly_the_pending_one() {
        let check = |on_screen| {
            check_prompt(
                "%1",
                "permission dialog",
                "opencode 1.18.33",
                on_screen,
                &"ls",
                |a: &&str| format!("`{a}`"),
            )
        };
        let exact = Ok(());
        let inexact = Err("another option selected".to_string());
        assert!(check(Some((&exact, &"ls"))).is_ok());
        let message = |r: Result<(), HostError>| match r {
            Err(HostError::ScreenMismatch(message)) => message,
            other => panic!("not a mismatch: {other:?}"),
        };
        assert_eq!(
            message(check(None)),
            "no permission dialog on pane %1's screen; nothing typed"
        );
        assert!(message(check(Some((&inexact, &"ls")))).contains(
            "is not opencode 1.18.33's known permission dialog exactly (another option selected)"
        ));
        assert!(message(check(Some((&exact, &"rm")))).contains("asks about `rm`, not `ls`"));
    }

    #[test]
    fn a_live_process_under_its_own_parent_has_no_problem() {
        let me = std::process::id();
        let stat = process::stat(me).unwrap();
        let adopted = SessionAdopted {
            key: "k".into(),
            agent_session_id: "s".into(),
            tmux_session: "t".into(),
            pane_id: "%1".into(),
            pane_pid: stat.ppid,
            pid: me,
            pid_start: stat.start_time,
            session_file: String::new(),
            transcript: String::new(),
        };
        assert_eq!(agent_problem(&adopted, "codex"), None);
        let moved = SessionAdopted {
            pane_pid: u32::MAX,
            ..adopted.clone()
        };
        assert!(matches!(
            agent_problem(&moved, "codex"),
            Some(AdoptedEnd::PaneChanged(_))
        ));
        let restarted = SessionAdopted {
            pid_start: stat.start_time + 1,
            ..adopted
        };
        assert!(matches!(
            agent_problem(&restarted, "codex"),
            Some(AdoptedEnd::AgentExited(_))
        ));
    }
}
