//! Emission and the explain view: what the tracker is given for a thread ([`desired`], pure: its
//! status, title, prompt, pane, liveness and session, or nothing), appended through
//! `CoreHandle::append` only when that changed (a move appends `agent.pruned` in the old session
//! first), and the view of every thread and the counters shared with the service's
//! `WatchHandle` (`explain`, `watch/stats`).

use std::sync::atomic::Ordering;

use super::Engine;
use super::placement::Placement;
use super::thread::{Emitted, Thread};
use crate::core::{CoreError, Guard, now_ms};
use crate::protocol::{
    AgentStatus, AgentUpdate, EventKind, InstanceRef, UNPLACED_SESSION, WatchRootView, WatchedView,
    bounds,
};
use crate::watch::format::WatchedAgent;

impl Engine {
    /// Appends what changed about thread `key` (or removes it from the tracker).
    pub(super) fn emit(&mut self, key: &str) {
        self.view_changed.insert(key.to_string());
        let placement = self.place(key);
        let Some(thread) = self.threads.get_mut(key) else {
            return;
        };
        thread.placement = placement.clone();
        let desired = desired(thread, &placement);
        let previous = thread.emitted.clone();
        if desired.as_ref().map(|(e, _)| e) == previous.as_ref() {
            return;
        }
        let mut appends = Vec::new();
        if let Some(previous) = &previous
            && desired
                .as_ref()
                .is_none_or(|(e, _)| e.session != previous.session)
        {
            // Only the watcher's own instance: one a hosted (or adopted) session reports under
            // the same key took its place and is not the watcher's to remove. The core checks
            // that as it admits the removal (`Guard::NotHosted`), so a session's report logged
            // after this thread was looked at is never undone by it.
            appends.push((
                previous.session.clone(),
                EventKind::AgentPruned(InstanceRef {
                    key: key.to_string(),
                }),
                Guard::NotHosted,
            ));
        }
        if let Some((emitted, update)) = &desired {
            appends.push((
                emitted.session.clone(),
                EventKind::AgentUpdated(update.clone()),
                Guard::None,
            ));
        }
        thread.emitted = desired.map(|(e, _)| e);
        // The explain view follows before the tracker does: whoever sees this update and asks
        // why already finds the evidence behind it (the whole view is rebuilt at the pass end).
        let explained = watched_view(thread);
        self.view().instances.insert(key.to_string(), explained);
        let core = self.core.clone();
        let count = appends.len() as u64;
        let result = self.runtime.block_on(async move {
            for (session, kind, guard) in appends {
                match core.append_guarded(Some(session), kind, guard).await {
                    Ok(_) | Err(CoreError::Superseded) => {}
                    Err(error) => return Err(error),
                }
            }
            Ok::<(), CoreError>(())
        });
        match result {
            Ok(()) => {
                self.shared.events.fetch_add(count, Ordering::Relaxed);
            }
            Err(error) => {
                tracing::warn!(key, %error, "a watcher's update was not recorded");
                // Try again with the next change.
                if let Some(thread) = self.threads.get_mut(key) {
                    thread.emitted = previous;
                }
            }
        }
        self.mark_dirty();
    }

    pub(super) fn publish_view(&mut self) {
        let mut roots = Vec::new();
        for format in &self.formats {
            for path in format
                .roots(&self.env)
                .into_iter()
                .chain(format.files(&self.env))
            {
                roots.push(WatchRootView {
                    agent: format.agent().as_str().to_string(),
                    exists: path.exists(),
                    path: path.display().to_string(),
                });
            }
        }
        // Only the threads that changed are rebuilt: an event costs the same with 10 threads
        // as with 10,000.
        let changed = std::mem::take(&mut self.view_changed);
        let updates: Vec<(String, Option<WatchedView>)> = changed
            .into_iter()
            .map(|key| {
                let view = self.threads.get(&key).map(watched_view);
                (key, view)
            })
            .collect();
        let mut view = self.view();
        view.roots = roots;
        view.files_known = self.files.len() as u64;
        view.watched_dirs = self.watched.len() as u64;
        view.unwatched_dirs = self.unwatched.len() as u64;
        for (key, thread) in updates {
            match thread {
                Some(thread) => view.instances.insert(key, thread),
                None => view.instances.remove(&key),
            };
        }
    }
}

pub(super) fn source_of(agent: WatchedAgent) -> String {
    format!("watcher:{}", agent.as_str())
}

/// What the tracker should hold for `thread` placed at `placement`: `None` removes it.
pub(super) fn desired(thread: &Thread, placement: &Placement) -> Option<(Emitted, AgentUpdate)> {
    let agent = thread.agent?;
    // A live agent whose records imply no turn yet (a TUI just started) is idle.
    let mut status = match thread.status {
        Some(status) => status,
        None if thread.agent_pid().is_some() && !thread.gone && !thread.ended => AgentStatus::Idle,
        None => return None,
    };
    if let Placement::Suppressed { .. } = placement {
        return None;
    }
    if thread.ended || thread.gone {
        if status == AgentStatus::Idle {
            // It never ran a turn and it is gone: nothing to show.
            return None;
        }
        // A session file removed while its process still runs: the agent is exiting, and may
        // still be writing its last records (`claude -p` removes its session file before the
        // transcript's last lines are in: a race inside the peer). Its exit decides, after one
        // more read of its files (`process_exited`); until then the turn is what it was.
        let exiting = thread.ended && !thread.gone && thread.agent_pid().is_some();
        if !status.is_terminal() && !exiting {
            // The process is gone in the middle of a turn: that turn will not finish.
            status = AgentStatus::Stale;
        }
    }
    let (session, pane_id) = match placement {
        Placement::Pane { session, pane_id } => (session.clone(), Some(pane_id.clone())),
        Placement::Cwd { session } => (session.clone(), None),
        Placement::Unplaced | Placement::Suppressed { .. } => (UNPLACED_SESSION.to_string(), None),
    };
    let title = thread
        .title
        .as_deref()
        .map(|t| clip(t, bounds::THREAD_NAME));
    let prompt = thread
        .prompt
        .as_deref()
        .map(|p| clip(p, bounds::LAST_USER_PROMPT));
    let liveness = thread.liveness();
    let emitted = Emitted {
        session,
        status,
        title: title.clone(),
        prompt: prompt.clone(),
        pane_id: pane_id.clone(),
        liveness,
    };
    let update = AgentUpdate {
        agent: agent.as_str().to_string(),
        status,
        ts: thread.record_ts.unwrap_or_else(now_ms),
        thread_id: Some(clip(&thread.thread_id, bounds::THREAD_ID)),
        thread_name: title,
        last_user_prompt: prompt,
        pane_id,
        liveness,
        source: Some(source_of(agent)),
        tokenless: false,
    };
    Some((emitted, update))
}

/// `text` cut to at most `max` bytes, at a character boundary.
pub(super) fn clip(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_string()
}

pub(super) fn watched_view(thread: &Thread) -> WatchedView {
    let liveness = match (thread.pid, thread.found_pid) {
        _ if thread.ended => "ended: its records say so".to_string(),
        (Some(pid), _) if thread.gone => format!("process {pid} (from its records) is gone"),
        (None, Some(pid)) if thread.gone => format!("process {pid} (holding its file) is gone"),
        (Some(pid), _) => format!("process {pid}, named by its records, is alive"),
        (None, Some(pid)) => format!("process {pid}, found holding its file, is alive"),
        (None, None) => "no process known: the tracker's stale timer applies".to_string(),
    };
    let (placement, placed_by) = match &thread.placement {
        Placement::Pane { session, pane_id } => (
            "pane".to_string(),
            Some(format!(
                "pane {pane_id} of session {session} holds its process"
            )),
        ),
        Placement::Cwd { session } => (
            "cwd".to_string(),
            Some(format!("session {session}'s directory matches its cwd")),
        ),
        Placement::Unplaced => ("unplaced".to_string(), None),
        Placement::Suppressed { by } => (
            "suppressed".to_string(),
            Some(format!("cohost hosts it as session {by}")),
        ),
    };
    WatchedView {
        agent: thread
            .agent
            .map(|a| a.as_str().to_string())
            .unwrap_or_default(),
        thread_id: thread.thread_id.clone(),
        status: thread.status,
        pid: thread.agent_pid(),
        liveness,
        cwd: thread.cwd.as_ref().map(|c| c.display().to_string()),
        placement,
        placed_by,
        files: thread
            .files
            .iter()
            .map(|f| f.display().to_string())
            .collect(),
        evidence: thread.evidence.iter().cloned().collect(),
    }
}

#[cfg(test)]
mod desired_tests {
    use super::*;

    fn exiting_thread(gone: bool) -> Thread {
        Thread {
            agent: Some(WatchedAgent::ClaudeCode),
            thread_id: "t1".into(),
            status: Some(AgentStatus::Running),
            pid: Some(4242),
            ended: true,
            gone,
            ..Thread::default()
        }
    }

    /// CI, Claude Code 2.1.197: a `claude -p` run removed its session file 31 ms before its
    /// transcript's `end_turn` line was read, and the instance went running → stale → done.
    #[test]
    fn a_turn_is_not_stale_while_the_process_whose_session_file_went_away_still_runs() {
        let placement = Placement::Cwd {
            session: "work".into(),
        };
        let (exiting, _) = desired(&exiting_thread(false), &placement).unwrap();
        assert_eq!(exiting.status, AgentStatus::Running);
        // Its exit (after the last read of its files) ends a turn that never finished.
        let (gone, _) = desired(&exiting_thread(true), &placement).unwrap();
        assert_eq!(gone.status, AgentStatus::Stale);
        // Without a known process there is nothing to wait for.
        let unknown = Thread {
            pid: None,
            ..exiting_thread(false)
        };
        assert_eq!(
            desired(&unknown, &placement).unwrap().0.status,
            AgentStatus::Stale
        );
    }

    /// What the tracker is given for a thread, from its status and whether its process runs:
    /// (status, pid known, records say it ended, process gone) → status shown, or `None`.
    #[test]
    fn the_status_shown_follows_the_records_and_the_process() {
        use AgentStatus::*;
        let placement = Placement::Unplaced;
        let check = |status, pid: bool, ended, gone, expect: Option<AgentStatus>| {
            let thread = Thread {
                agent: Some(WatchedAgent::Codex),
                thread_id: "t1".into(),
                status,
                pid: pid.then_some(4242),
                ended,
                gone,
                ..Thread::default()
            };
            let got = desired(&thread, &placement).map(|(emitted, update)| {
                assert_eq!(emitted.status, update.status);
                assert_eq!(emitted.session, UNPLACED_SESSION);
                assert_eq!(update.source.as_deref(), Some("watcher:codex"));
                emitted.status
            });
            assert_eq!(
                got, expect,
                "{status:?} pid {pid} ended {ended} gone {gone}"
            );
        };
        // Live.
        check(Some(Running), true, false, false, Some(Running));
        check(Some(Waiting), false, false, false, Some(Waiting));
        // A live agent whose records imply no turn yet (a TUI just started) is idle; without a
        // process nothing is known.
        check(None, true, false, false, Some(Idle));
        check(None, false, false, false, None);
        check(None, true, false, true, None);
        // Gone mid-turn: that turn will not finish.
        check(Some(Running), true, false, true, Some(Stale));
        check(Some(ToolRunning), false, true, false, Some(Stale));
        check(Some(Waiting), true, true, true, Some(Stale));
        // Gone after its turn ended: the end stands.
        check(Some(Done), true, false, true, Some(Done));
        check(Some(Interrupted), false, true, false, Some(Interrupted));
        check(Some(Error), true, true, true, Some(Error));
        // Gone idle: it never ran a turn, nothing to show.
        check(Some(Idle), true, false, true, None);
        check(Some(Idle), false, true, false, None);
    }

    #[test]
    fn a_hosted_thread_is_not_shown() {
        let thread = exiting_thread(false);
        let suppressed = Placement::Suppressed { by: "s-1".into() };
        assert!(desired(&thread, &suppressed).is_none());
        let pane = Placement::Pane {
            session: "proj".into(),
            pane_id: "%3".into(),
        };
        let (emitted, update) = desired(&thread, &pane).unwrap();
        assert_eq!(emitted.session, "proj");
        assert_eq!(update.pane_id.as_deref(), Some("%3"));
    }
}
