//! A thread as the engine knows it (keyed `agent:threadId`): its status (and which file holds
//! it), title, prompt, cwd, process, evidence and what was last emitted for it; and how one
//! observation from its files ([`Engine::observe`]) or the agent's own report
//! ([`Engine::report`]: Claude's hooks) changes it. A report's status stands against any record
//! written before it; a thread whose process has exited is emitted once after the read's last
//! record.

use std::collections::{BTreeSet, VecDeque};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::Engine;
use super::liveness::Scope;
use super::placement::Placement;
use crate::core::now_ms;
use crate::protocol::{AgentStatus, EvidenceView, Liveness};
use crate::watch::format::{Locator, Observation, WatchedAgent};
use crate::watch::procs;

/// Evidence entries kept per thread.
pub(super) const EVIDENCE_KEPT: usize = 16;
/// How long after a thread's last record the slow timer keeps looking for its process.
pub(super) const PROCESS_SEARCH_MS: u64 = 60_000;

/// One thread, as the engine knows it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Thread {
    pub(super) agent: Option<WatchedAgent>,
    pub(super) thread_id: String,
    pub(super) status: Option<AgentStatus>,
    /// The file whose status holds (see [`Observation::holds`]).
    pub(super) held_by: Option<PathBuf>,
    /// The last status other files implied while the hold stood: the status once the holder
    /// lifts it without saying one (Claude's session file going `idle` after its transcript
    /// wrote the turn's end, as read in one catch-up).
    pub(super) shadow: Option<AgentStatus>,
    pub(super) title: Option<String>,
    pub(super) prompt: Option<String>,
    pub(super) cwd: Option<PathBuf>,
    /// From the records.
    pub(super) pid: Option<u32>,
    /// Found in `/proc` by its format ([`Format::pick_process`]).
    pub(super) found_pid: Option<u32>,
    pub(super) start_time: Option<u64>,
    /// The records say it ended (session file removed).
    pub(super) ended: bool,
    /// Until when (ms) the slow timer looks for the process of a thread in a turn whose process
    /// is unknown: a minute after its last record. A transcript left mid-turn by a crash is
    /// not searched for forever.
    pub(super) search_until: Option<u64>,
    /// Its process and that process's parents, read when its pid became known: the pane it
    /// runs in is found through them even after it exited (a headless run that ends before
    /// the engine places it).
    #[serde(skip)]
    pub(super) ancestry: Vec<u32>,
    /// Several processes fit it equally and none could be told apart yet (see
    /// `find_processes`): it is looked for even after its turn ended.
    #[serde(skip)]
    pub(super) contested: bool,
    /// When a tool call opened (ms), while the records say tool-running.
    pub(super) tool_since: Option<u64>,
    /// `waiting` comes from the process tree (an open tool call with no tool process under the
    /// agent, see [`Format::tools_run_as_children`]), not from a record.
    pub(super) derived_wait: bool,
    /// Its process is gone.
    pub(super) gone: bool,
    pub(super) record_ts: Option<u64>,
    pub(super) files: BTreeSet<PathBuf>,
    pub(super) evidence: VecDeque<EvidenceView>,
    /// When the agent last reported a status itself (ms: its hook's clock): records its files
    /// wrote before then do not override it (Claude flushes its transcript 100–250 ms after
    /// the hook of the same moment).
    #[serde(default)]
    pub(super) reported_at: Option<u64>,
    /// What was last appended for it (`None`: nothing in the tracker).
    pub(super) emitted: Option<Emitted>,
    #[serde(skip)]
    pub(super) placement: Placement,
}

/// Where an observation comes from.
enum Origin<'a> {
    /// A record of one of the thread's files.
    File(&'a Path, Locator),
    /// The agent's own report ([`Engine::report`]).
    Report,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Emitted {
    pub(super) session: String,
    pub(super) status: AgentStatus,
    pub(super) title: Option<String>,
    pub(super) prompt: Option<String>,
    pub(super) pane_id: Option<String>,
    pub(super) liveness: Option<Liveness>,
}

impl Thread {
    pub(super) fn agent_pid(&self) -> Option<u32> {
        self.pid.or(self.found_pid)
    }

    /// Its process, while it runs.
    pub(super) fn live_pid(&self) -> Option<u32> {
        self.agent_pid().filter(|_| !self.gone && !self.ended)
    }

    pub(super) fn liveness(&self) -> Option<Liveness> {
        if self.ended || self.gone {
            Some(Liveness::Exited)
        } else if self.agent_pid().is_some() {
            Some(Liveness::Alive)
        } else {
            Some(Liveness::Unknown)
        }
    }

    /// Whether the slow timer looks for its process at `now` (ms): it has none yet, and it is in
    /// a turn or contested, within [`PROCESS_SEARCH_MS`] of its last record. A thread placed by
    /// its cwd meanwhile is placed in its pane once its process is found.
    pub(super) fn searching_at(&self, now: u64) -> bool {
        self.agent_pid().is_none()
            && !self.ended
            && !self.gone
            && (self.in_turn() || self.contested)
            && self.search_until.is_some_and(|until| until > now)
    }

    pub(super) fn in_turn(&self) -> bool {
        self.status
            .is_some_and(|s| !s.is_terminal() && s != AgentStatus::Idle)
            && !self.ended
            && !self.gone
    }

    pub(super) fn push_evidence(&mut self, evidence: EvidenceView) {
        self.evidence.push_back(evidence);
        while self.evidence.len() > EVIDENCE_KEPT {
            self.evidence.pop_front();
        }
    }
}

impl Engine {
    // ------------------------------------------------------------------ threads

    pub(super) fn observe_all(
        &mut self,
        path: &Path,
        observations: impl Iterator<Item = (Locator, Observation)>,
    ) {
        // A thread whose process has exited is emitted once, after every record of this read:
        // a record of a turn read after the exit is history, and the read's last record says how
        // the turn ended (a headless run's prompt and answer, read in one go after it exited,
        // must not show `stale` in between).
        let outer = self.exited_emits.replace(BTreeSet::new());
        for (at, observation) in observations {
            self.observe(path, at, observation);
        }
        let deferred = std::mem::replace(&mut self.exited_emits, outer).unwrap_or_default();
        for key in deferred {
            self.emit(&key);
        }
    }

    pub(super) fn observe(&mut self, path: &Path, at: Locator, obs: Observation) {
        if obs.thread_id.is_empty() {
            return;
        }
        let Some(format) = self
            .files
            .get(path)
            .map(|f| f.format)
            .or_else(|| self.classify(path).map(|(format, _)| format))
        else {
            return;
        };
        if obs.ended {
            // The agent exited (its session file is gone): what it wrote before is judged first.
            self.read_before_exit(format);
        }
        self.apply(format, Origin::File(path, at), obs);
    }

    /// What the agent reported itself (Claude's hooks, through the daemon): the thread's status
    /// now. `false` when no watcher of `agent` runs.
    pub(super) fn report(&mut self, agent: WatchedAgent, obs: Observation) -> bool {
        if obs.thread_id.is_empty() {
            return false;
        }
        let Some(format) = self.format_of_agent(Some(agent)) else {
            return false;
        };
        self.apply(format, Origin::Report, obs);
        true
    }

    fn apply(&mut self, format: usize, origin: Origin<'_>, obs: Observation) {
        let agent = self.formats[format].agent();
        let key = crate::protocol::instance_key(agent.as_str(), Some(&obs.thread_id));
        let is_new = !self.threads.contains_key(&key);
        let thread = self.threads.entry(key.clone()).or_insert_with(|| Thread {
            agent: Some(agent),
            thread_id: obs.thread_id.clone(),
            ..Thread::default()
        });
        let path = match &origin {
            Origin::File(path, _) => {
                thread.files.insert(path.to_path_buf());
                Some(*path)
            }
            Origin::Report => None,
        };
        thread.search_until = Some(now_ms() + PROCESS_SEARCH_MS);
        self.view_changed.insert(key.clone());
        let mut changed = false;
        let mut rule = obs.rule.clone();
        if path.is_some() && thread.held_by.as_deref() == path {
            thread.held_by = None;
            if let (None, Some(shadow)) = (obs.status, thread.shadow.take()) {
                changed |= thread.status != Some(shadow);
                thread.status = Some(shadow);
                rule = format!(
                    "{rule} (the hold is lifted: {} from the other files)",
                    shadow.as_str()
                );
            }
        }
        // A record written before the agent's last report of its own says nothing newer.
        let outdated = match (path, obs.record_ts, thread.reported_at) {
            (Some(_), Some(written), Some(reported)) => written < reported,
            _ => false,
        };
        if let Some(status) = obs.status {
            if outdated {
                rule = format!(
                    "{rule} (kept aside: written before the agent's own report of {})",
                    thread.status.map(|s| s.as_str()).unwrap_or("-")
                );
            } else if let (Some(holder), Some(_)) = (&thread.held_by, path) {
                rule = format!(
                    "{rule} (kept aside: {} holds {})",
                    holder.display(),
                    thread.status.map(|s| s.as_str()).unwrap_or("-")
                );
                thread.shadow = Some(status);
            } else {
                changed |= thread.status != Some(status);
                if status != AgentStatus::ToolRunning {
                    thread.tool_since = None;
                } else if thread.status != Some(AgentStatus::ToolRunning) || thread.derived_wait {
                    thread.tool_since = Some(now_ms());
                }
                thread.derived_wait = false;
                thread.status = Some(status);
                // The agent's own report is newer than any hold a file set.
                thread.held_by = path.filter(|_| obs.holds).map(Path::to_path_buf);
                thread.shadow = None;
                if path.is_none() {
                    thread.reported_at = Some(obs.record_ts.unwrap_or_else(now_ms));
                }
            }
        }
        if let Some(title) = obs.title {
            changed |= thread.title.as_ref() != Some(&title);
            thread.title = Some(title);
        }
        let mut new_prompt = false;
        if let Some(prompt) = obs.last_user_prompt {
            new_prompt = thread.prompt.as_ref() != Some(&prompt);
            changed |= new_prompt;
            thread.prompt = Some(prompt);
        }
        if let Some(cwd) = obs.cwd {
            thread.cwd = Some(cwd);
        }
        let mut new_pid = None;
        if let Some(pid) = obs.pid
            && thread.pid != Some(pid)
        {
            thread.pid = Some(pid);
            thread.start_time = procs::stat(pid).map(|s| s.start_time);
            thread.gone = thread.start_time.is_none();
            thread.ancestry = procs::ancestors(pid);
            thread.ended = false;
            new_pid = Some(pid);
            changed = true;
        }
        if obs.ended {
            changed |= !thread.ended;
            thread.ended = true;
        } else if obs.status.is_some() && thread.ended && obs.pid.is_some() {
            thread.ended = false;
        }
        if obs.record_ts.is_some() && !outdated {
            thread.record_ts = obs.record_ts;
        }
        let (file, locator) = match &origin {
            Origin::File(path, at) => (path.display().to_string(), serde_json::to_value(at).ok()),
            Origin::Report => (format!("{} hook", agent.as_str()), None),
        };
        thread.push_evidence(EvidenceView {
            file,
            locator,
            rule,
            status: obs.status,
            at: now_ms(),
            record_ts: obs.record_ts,
        });
        if let Some(pid) = new_pid {
            self.watch_exit(pid);
        }
        // A thread that appears while we follow: find its process now (one /proc pass), so its
        // first update is already placed in its pane. A thread still without one looks again
        // when its prompt arrives: the prompt on a pane's screen can tell apart processes that
        // fit it equally (see `find_processes`).
        let unfound = self
            .threads
            .get(&key)
            .is_some_and(|t| t.agent_pid().is_none() && !t.ended);
        if (is_new || new_prompt && unfound) && !self.catching_up && obs.pid.is_none() {
            self.find_processes(Scope::One(&key));
        }
        if changed || !self.catching_up {
            self.mark_dirty();
        }
        if !self.catching_up {
            let exited = self.threads.get(&key).is_some_and(|t| t.ended || t.gone);
            match self.exited_emits.as_mut() {
                Some(deferred) if exited => {
                    deferred.insert(key);
                }
                _ => self.emit(&key),
            }
        }
    }
}
