//! Liveness: pidfd exit notices, /proc checks and tool child processes.

use super::*;

/// Which threads [`Engine::find_processes`] looks for.
#[derive(Clone, Copy)]
pub(super) enum Scope<'a> {
    All,
    /// The threads the slow timer looks for ([`Thread::searching`]).
    Searching,
    One(&'a str),
}

impl Engine {
    /// Arms the liveness timer when a thread in a turn has no process yet, or one without an
    /// exit watch.
    pub(super) fn arm_liveness(&mut self) {
        let needed = self.threads.values().any(|thread| {
            self.watches_tools(thread)
                || match thread.agent_pid() {
                    None => {
                        thread.searching()
                            && self
                                .format_of_agent(thread.agent)
                                .is_some_and(|f| !self.formats[f].process_names().is_empty())
                    }
                    Some(pid) => thread.in_turn() && !self.exit_watched.contains(&pid),
                }
        });
        if !needed {
            self.next_liveness = None;
        } else if self.next_liveness.is_none() {
            self.next_liveness = Some(Instant::now() + self.limits.liveness_interval);
        }
    }

    /// Whether `thread` has a tool call open (or a derived wait) whose process the slow timer
    /// looks for.
    pub(super) fn watches_tools(&self, thread: &Thread) -> bool {
        (thread.status == Some(AgentStatus::ToolRunning) || thread.derived_wait)
            && thread.agent_pid().is_some()
            && !thread.gone
            && !thread.ended
            && self
                .format_of_agent(thread.agent)
                .is_some_and(|f| self.formats[f].tools_run_as_children())
    }

    /// An open tool call with no tool process under the agent is an approval waiting; one
    /// whose process appeared is running again.
    pub(super) fn check_tool_processes(&mut self) {
        /// A call younger than this may not have started its process yet.
        const TOOL_START_GRACE_MS: u64 = 2000;
        let now = now_ms();
        let keys: Vec<String> = self
            .threads
            .iter()
            .filter(|(_, t)| {
                self.watches_tools(t)
                    && (t.derived_wait
                        || t.tool_since
                            .is_some_and(|since| now.saturating_sub(since) >= TOOL_START_GRACE_MS))
            })
            .map(|(k, _)| k.clone())
            .collect();
        if keys.is_empty() {
            return;
        }
        let tree = procs::children();
        self.shared.proc_scans.fetch_add(1, Ordering::Relaxed);
        for key in keys {
            let Some(thread) = self.threads.get(&key) else {
                continue;
            };
            let Some(pid) = thread.agent_pid() else {
                continue;
            };
            let Some(format) = self.format_of_agent(thread.agent) else {
                continue;
            };
            let names = self.formats[format].process_names();
            let tools: Vec<u32> = procs::descendants(pid, &tree)
                .into_iter()
                .filter(|child| procs::comm(*child).is_none_or(|c| !names.contains(&c.as_str())))
                .collect();
            let agent = self.formats[format].agent().as_str();
            let change = match (thread.derived_wait, tools.is_empty()) {
                (false, true) => Some((
                    AgentStatus::Waiting,
                    true,
                    format!(
                        "{agent}: a tool call is open and no tool process runs under process {pid} → waiting (an approval)"
                    ),
                )),
                (true, false) => Some((
                    AgentStatus::ToolRunning,
                    false,
                    format!(
                        "{agent}: tool process {} runs under process {pid} → tool-running",
                        tools[0]
                    ),
                )),
                _ => None,
            };
            let Some((status, derived, rule)) = change else {
                continue;
            };
            if let Some(thread) = self.threads.get_mut(&key) {
                thread.status = Some(status);
                thread.derived_wait = derived;
                thread.push_evidence(EvidenceView {
                    file: format!("/proc/{pid}"),
                    locator: None,
                    rule,
                    status: Some(status),
                    at: now_ms(),
                    record_ts: None,
                });
            }
            self.mark_dirty();
            self.emit(&key);
        }
    }

    /// Asks the kernel to tell us when `pid` exits (pidfd on the tokio reactor).
    pub(super) fn watch_exit(&mut self, pid: u32) {
        if self.exit_watched.contains(&pid) {
            return;
        }
        let tx = self.tx.clone();
        let spawned = {
            let _guard = self.runtime.enter();
            match procs::exit_notice(pid) {
                Some(fd) => {
                    self.runtime.spawn(async move {
                        let _ = fd.readable().await;
                        // A full channel: the engine is busy; the send waits for room.
                        let _ =
                            tokio::task::spawn_blocking(move || tx.send(Msg::Exited(pid))).await;
                    });
                    true
                }
                None => false,
            }
        };
        if spawned {
            self.exit_watched.insert(pid);
        }
    }

    pub(super) fn process_exited(&mut self, pid: u32) {
        self.exit_watched.remove(&pid);
        let keys: Vec<String> = self
            .threads
            .iter()
            .filter(|(_, t)| t.agent_pid() == Some(pid) && !t.gone)
            .map(|(k, _)| k.clone())
            .collect();
        if let Some(format) = keys
            .first()
            .and_then(|key| self.threads.get(key))
            .and_then(|thread| self.format_of_agent(thread.agent))
        {
            self.read_before_exit(format);
        }
        for key in keys {
            if let Some(thread) = self.threads.get_mut(&key) {
                thread.gone = true;
                thread.push_evidence(EvidenceView {
                    file: format!("/proc/{pid}"),
                    locator: None,
                    rule: format!("process {pid} exited (pidfd) → ended"),
                    status: None,
                    at: now_ms(),
                    record_ts: None,
                });
            }
            self.mark_dirty();
            self.emit(&key);
        }
    }

    pub(super) fn check_liveness(&mut self) {
        self.find_processes(Scope::Searching);
        self.check_tool_processes();
        let keys: Vec<String> = self
            .threads
            .iter()
            .filter(|(_, t)| {
                t.in_turn()
                    && t.agent_pid()
                        .is_some_and(|pid| !self.exit_watched.contains(&pid))
            })
            .map(|(k, _)| k.clone())
            .collect();
        for key in keys {
            let Some(thread) = self.threads.get(&key) else {
                continue;
            };
            let Some(pid) = thread.agent_pid() else {
                continue;
            };
            if !procs::alive(pid, thread.start_time) {
                self.process_exited(pid);
            }
        }
    }
}
