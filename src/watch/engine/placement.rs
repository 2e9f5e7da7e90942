//! Placement in tmux and hosted-session dedup.

use super::*;

/// The tmux pane list is re-read at most this often when a placement misses.
pub(super) const PANES_MAX_AGE: Duration = Duration::from_secs(1);

impl Engine {
    pub(super) fn refresh_placements_if_tmux_changed(&mut self) {
        let list = self.tmux.get();
        let changed = self
            .tmux_seen
            .as_ref()
            .is_none_or(|seen| !Arc::ptr_eq(seen, &list));
        if !changed {
            return;
        }
        self.tmux_seen = Some(list);
        self.panes_at = None;
        if self.catching_up {
            return;
        }
        let keys: Vec<String> = self
            .threads
            .iter()
            .filter(|(_, t)| t.emitted.is_some())
            .map(|(k, _)| k.clone())
            .collect();
        for key in keys {
            self.emit(&key);
        }
    }

    /// Whether the pane `pid` runs in shows `text` (its first line, up to 60 characters, with
    /// white space folded: a TUI wraps and indents what it echoes).
    pub(super) fn pane_shows(&mut self, pid: u32, text: &str) -> bool {
        let fold = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
        let needle: String = fold(text.lines().next().unwrap_or_default())
            .chars()
            .take(60)
            .collect();
        if needle.is_empty() {
            return false;
        }
        let Some(pane) = self.pane_of(pid) else {
            return false;
        };
        let tmux = self.tmux.tmux().clone();
        let pane_id = pane.pane_id.clone();
        let screen = self
            .runtime
            .block_on(async move { tmux.capture(&pane_id).await })
            .unwrap_or_default();
        fold(&screen).contains(&needle)
    }

    pub(super) fn pane_of(&mut self, pid: u32) -> Option<PaneInfo> {
        self.pane_of_chain(&procs::ancestors(pid))
    }

    /// The pane whose process is the first of `chain` (a process and its parents) to run one.
    pub(super) fn pane_of_chain(&mut self, chain: &[u32]) -> Option<PaneInfo> {
        if chain.is_empty() {
            return None;
        }
        let find = |panes: &[PaneInfo]| {
            chain
                .iter()
                .find_map(|pid| panes.iter().find(|pane| pane.pid == *pid).cloned())
        };
        if let Some(pane) = find(&self.panes) {
            return Some(pane);
        }
        if self.panes_at.is_some_and(|at| at.elapsed() < PANES_MAX_AGE) {
            return None;
        }
        self.refresh_panes();
        find(&self.panes)
    }

    /// Lists the panes again, unless that was done less than [`PANES_MAX_AGE`] ago.
    pub(super) fn refresh_panes(&mut self) {
        if self.panes_at.is_some_and(|at| at.elapsed() < PANES_MAX_AGE) {
            return;
        }
        let tmux = self.tmux.tmux().clone();
        self.panes = self
            .runtime
            .block_on(async move { tmux.list_panes().await })
            .unwrap_or_default();
        self.panes_at = Some(Instant::now());
    }

    pub(super) fn place(&mut self, key: &str) -> Placement {
        let Some(thread) = self.threads.get(key) else {
            return Placement::Unplaced;
        };
        let pid = thread.agent_pid().filter(|_| !thread.gone && !thread.ended);
        let thread_id = thread.thread_id.clone();
        let cwd = thread.cwd.clone();
        // A live process's parents now; an exited one's as they were when its pid was learned
        // (the shell that started it, and its pane, usually outlive it).
        let ancestors = match pid {
            Some(pid) => procs::ancestors(pid),
            None => thread.ancestry.clone(),
        };
        let pane = self.pane_of_chain(&ancestors);
        // A session cohost hosts shows once: its own instance wins.
        let hosted = self.core.read(|state| {
            state.sessions.iter().find_map(|session| {
                if session.is_closed() {
                    return None;
                }
                let same_thread = session.thread_id.as_deref() == Some(thread_id.as_str());
                let same_pane = session.pane.as_ref().is_some_and(|p| {
                    pane.as_ref().is_some_and(|pane| pane.pane_id == p.pane_id)
                        || ancestors.contains(&p.runner_pid)
                });
                (same_thread || same_pane).then(|| session.id.clone())
            })
        });
        if let Some(by) = hosted {
            return Placement::Suppressed { by };
        }
        if let Some(pane) = pane {
            return Placement::Pane {
                session: pane.session,
                pane_id: pane.pane_id,
            };
        }
        if let Some(cwd) = cwd {
            let list = self.tmux.get();
            if let Ok(session) = crate::tmux::resolve(&list, None, Some(&cwd.to_string_lossy())) {
                return Placement::Cwd { session };
            }
        }
        Placement::Unplaced
    }
}
