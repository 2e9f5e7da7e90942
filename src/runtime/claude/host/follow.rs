//! The session task of `ClaudeHost` (one per session): tails `hooks.jsonl`, `runner.jsonl` and
//! the transcript, checks the session file on a tick, feeds all of it to the [`Normalizer`]
//! (through the [`HookFence`]) and is the only producer of the session's events; it reports the
//! session's status to the tracker.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use super::adopt::AdoptedEnd;
use super::{ClaudeHost, Command, Inner, Live, lock};
use crate::core::now_ms;
use crate::formats::claude::{HookLine, RecordHead, SessionFile};
use crate::protocol::{
    AgentStatus, ErrorEvent, EventKind, Item, ItemEvent, Liveness, SessionBound, SessionState,
    SessionStatus,
};
use crate::runtime::claude::fence::HookFence;
use crate::runtime::claude::normalize::{Normalizer, Output};
use crate::runtime::common::mirror::{self, Placement, Report};
use crate::tail::{self, Checkpoint, TailItem};

/// The longest a processed line's checkpoint waits to be saved while lines keep coming.
const CHECKPOINT_INTERVAL: Duration = Duration::from_millis(200);
/// How often the TUI's session file and pending turn ends are checked.
const TICK: Duration = Duration::from_millis(200);
/// Lines queued between a tailer and the session task.
const TAIL_CHANNEL: usize = 1024;

impl Inner {
    /// The session task: tails hooks, runner and transcript, and forwards what they mean.
    pub(super) async fn follow(
        self: Arc<Self>,
        live: Arc<Live>,
        mut commands: mpsc::Receiver<Command>,
    ) {
        let session_id = live.session_id.clone();
        let checkpoints = live.dir.join("checkpoints");
        let (record_thread, record_turn, last_turn) = self.core.read(|state| {
            state
                .sessions
                .get(&session_id)
                .map(|s| {
                    (
                        s.thread_id.clone(),
                        s.active_turn.clone(),
                        s.last_turn.as_ref().map(|t| t.turn_id.clone()),
                    )
                })
                .unwrap_or((None, None, None))
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
        // An adopted Claude runs under no runner of ours.
        if live.adopted.is_none() {
            tail::spawn_tail(
                live.dir.join("runner.jsonl"),
                tail::load_checkpoint(&checkpoints.join("runner.json"))
                    .await
                    .ok()
                    .flatten(),
                runner_tx,
                cancel.child_token(),
            );
        } else {
            // Until a hook reaches it, the transcript says what the hooks say of a hosted one.
            normalizer.lead_by_transcript();
            if let Some(last) = last_turn {
                normalizer.resume_ended(last);
            }
        }
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
        let mut ticks: u32 = 0;
        // How an adopted session ends, once something says so (and who waits for it).
        let mut ending: Option<(AdoptedEnd, Option<oneshot::Sender<()>>)> = None;
        loop {
            // Each input yields outputs and, for a tailed line, the checkpoint to save once
            // they are stored.
            let (outputs, checkpoint) = tokio::select! {
                _ = cancel.cancelled() => break,
                Some(command) = commands.recv() => {
                    ending = ending.or(apply_command(command, &mut normalizer, &mut fence, hooks_written()));
                    (Vec::new(), None)
                }
                Some((item, checkpoint)) = hooks_rx.recv() => {
                    // cohost's own commands go first: each was sent before what it announces
                    // (a paste's text before the paste) could reach a file, but `select!` may
                    // find both ready and take the line.
                    while let Ok(command) = commands.try_recv() {
                        ending = ending.or(apply_command(command, &mut normalizer, &mut fence, hooks_written()));
                    }
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
                    while let Ok(command) = commands.try_recv() {
                        ending = ending.or(apply_command(command, &mut normalizer, &mut fence, hooks_written()));
                    }
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
                    ticks = ticks.wrapping_add(1);
                    let mut outputs = Vec::new();
                    // A Claude ending for a rehome is expected to go: that ends no session.
                    if ending.is_none() && !live.rehoming.load(std::sync::atomic::Ordering::SeqCst) {
                        match self.check_adopted(&live, ticks, &mut normalizer).await {
                            Ok(rebound) => outputs.extend(rebound),
                            Err(end) => ending = Some((end, None)),
                        }
                    }
                    outputs.extend(normalizer.tick(now_ms()));
                    if let Some(file) = self.session_file(&live)
                        && let Some(status) = file.status
                    {
                        // Read after the session file: the hooks it waits for include its Stop.
                        let written = hooks_written();
                        if *live.status.borrow() != status {
                            tracing::debug!(session = %session_id, %status, hooks_written = written, hooks_read = fence.read(), "claude: the session file's status changed");
                            live.status.send_replace(status.clone());
                        }
                        let reading = (status.as_str(), file.status_updated_at);
                        outputs.extend(fence.session_status(&mut normalizer, reading, written, tokio::time::Instant::now()));
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
            if let Some((end, done)) = ending.take() {
                for (file, checkpoint) in unsaved.drain() {
                    let _ = tail::save_checkpoint(&file, &checkpoint).await;
                }
                if end == AdoptedEnd::Rehomed {
                    // The session goes on, hosted: a new session task follows it from the
                    // checkpoints just saved.
                    live.exited.store(true, std::sync::atomic::Ordering::SeqCst);
                    lock(&self.live).remove(&session_id);
                } else {
                    self.end_adopted(&live, &end, &mut normalizer).await;
                }
                if let Some(done) = done {
                    let _ = done.send(());
                }
                live.cancel.cancel();
                break;
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

    pub(super) async fn apply(
        self: &Arc<Self>,
        live: &Arc<Live>,
        outputs: Vec<Output>,
        normalizer: &mut Normalizer,
    ) {
        let _ = normalizer;
        for output in outputs {
            match output {
                Output::Store(kind) => {
                    if let EventKind::TurnCompleted(done) = &kind
                        && done.status == crate::protocol::TurnStatus::Interrupted
                    {
                        *lock(&live.interrupted_at) = Some(tokio::time::Instant::now());
                    }
                    if let EventKind::ItemCompleted(ItemEvent {
                        item: Item::UserMessage { text, .. },
                        ..
                    }) = &kind
                    {
                        forget_queued(live, text);
                    }
                    let ended = matches!(kind, EventKind::TurnCompleted(_));
                    self.store(&live.session_id, kind).await;
                    if ended {
                        ClaudeHost {
                            inner: Arc::clone(self),
                        }
                        .watch_queued(live);
                    }
                }
                Output::PromptDelivered { text } => forget_queued(live, &text),
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
            EventKind::PermissionModeSeen(crate::protocol::PermissionModeSeen {
                mode: mode.into(),
                allowed,
            }),
        )
        .await;
    }

    async fn runner_event(
        self: &Arc<Self>,
        live: &Arc<Live>,
        line: &Value,
        normalizer: &mut Normalizer,
    ) {
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
    pub(super) fn session_file_status(&self, live: &Live) -> Option<String> {
        self.session_file(live)?.status
    }

    /// `~/.claude/sessions/<claude pid>.json`, when the TUI runs (an adopted Claude's: the one
    /// it was adopted by).
    pub(super) fn session_file(&self, live: &Live) -> Option<SessionFile> {
        let path = match &live.adopted {
            Some(adopted) => PathBuf::from(&adopted.session_file),
            None => {
                let pid = (*lock(&live.claude_pid))?;
                live.home
                    .as_ref()?
                    .join(".claude/sessions")
                    .join(format!("{pid}.json"))
            }
        };
        SessionFile::from_slice(&std::fs::read(path).ok()?)
    }

    pub(super) async fn report(&self, session_id: &str, status: AgentStatus) {
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

fn parse_error(source: &str, offset: u64, error: &str) -> Output {
    Output::Store(EventKind::Error(ErrorEvent {
        turn_id: None,
        id: Some(format!("parse:{source}:{offset}")),
        message: format!("a malformed line in {source} at byte {offset}: {error}"),
        code: Some("parse_error".into()),
    }))
}

/// Applies one of cohost's own commands to the session's machines; the end of an adopted
/// session (and who waits for it) is the session task's to carry out.
fn apply_command(
    command: Command,
    normalizer: &mut Normalizer,
    fence: &mut HookFence,
    written: u64,
) -> Option<(AdoptedEnd, Option<oneshot::Sender<()>>)> {
    match command {
        Command::ExpectInjected(text) => normalizer.expect_injected(&text),
        Command::Interrupted(turn) => {
            fence.interrupted(turn, written, tokio::time::Instant::now());
        }
        Command::End(end, done) => return Some((end, Some(done))),
    }
    None
}

/// A prompt of ours Claude had queued ran (or was delivered into the running turn).
fn forget_queued(live: &Live, text: &str) {
    let mut queued = lock(&live.queued);
    if let Some(at) = queued.iter().position(|q| q.trim() == text.trim()) {
        queued.remove(at);
    }
}
