//! Liveness: whether an agent's process still runs, and what its child processes say of an
//! open tool call.
//!
//! Exits come from the kernel (a pidfd per agent process, [`Engine::watch_exit`]); the slow timer
//! (`liveness_interval`) is armed only while a thread needs it ([`Thread::needs_slow_check`]): a
//! thread in a turn whose process is not known yet (looked for during a minute after its last
//! record) or has no pidfd (checked in `/proc`), or a tool call open for an agent whose tools are
//! child processes (none under it: an approval waits). Those decisions are pure, over the thread
//! and [`AgentTraits`]; the engine reads `/proc` and keeps the evidence.

use std::sync::atomic::Ordering;
use std::time::Instant;

use super::thread::Thread;
use super::{Engine, Msg};
use crate::core::now_ms;
use crate::protocol::{AgentStatus, EvidenceView};
use crate::watch::format::WatchedAgent;
use crate::watch::procs;

/// A call younger than this may not have started its process yet.
const TOOL_START_GRACE_MS: u64 = 2000;

/// What liveness needs to know of a thread's agent (its [`Format`]).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct AgentTraits {
    /// Its processes can be found by name ([`Format::process_names`](crate::watch::format::Format::process_names) is not empty).
    pub(super) findable: bool,
    /// It runs its tools as child processes ([`Format::tools_run_as_children`](crate::watch::format::Format::tools_run_as_children)).
    pub(super) tools_as_children: bool,
}

/// What the processes under an agent say of its open tool call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ToolVerdict {
    /// No tool process runs under it: the call waits for an approval.
    Waiting,
    /// A tool process (this one) appeared under an agent that was waiting: running again.
    Running(u32),
}

impl ToolVerdict {
    /// From whether the thread's wait was derived from the process tree and the tool processes
    /// under its agent now; `None`: nothing changed.
    pub(super) fn of(derived_wait: bool, tools: &[u32]) -> Option<ToolVerdict> {
        match (derived_wait, tools.first()) {
            (false, None) => Some(ToolVerdict::Waiting),
            (true, Some(tool)) => Some(ToolVerdict::Running(*tool)),
            _ => None,
        }
    }
}

impl Thread {
    /// Whether it has a tool call open (or a derived wait) whose processes the slow timer looks
    /// at.
    pub(super) fn watches_tools(&self, traits: AgentTraits) -> bool {
        (self.status == Some(AgentStatus::ToolRunning) || self.derived_wait)
            && self.agent_pid().is_some()
            && !self.gone
            && !self.ended
            && traits.tools_as_children
    }

    /// Whether its tool processes are looked at on this pass (`now`, ms): a derived wait always,
    /// an open call once it is [`TOOL_START_GRACE_MS`] old.
    pub(super) fn tool_check_due(&self, traits: AgentTraits, now: u64) -> bool {
        self.watches_tools(traits)
            && (self.derived_wait
                || self
                    .tool_since
                    .is_some_and(|since| now.saturating_sub(since) >= TOOL_START_GRACE_MS))
    }

    /// Whether its process is checked in `/proc`: it is in a turn, and its process has no exit
    /// watch (`exit_watched`).
    pub(super) fn needs_proc_check(&self, exit_watched: impl Fn(u32) -> bool) -> bool {
        self.in_turn() && self.agent_pid().is_some_and(|pid| !exit_watched(pid))
    }

    /// Whether the slow timer has work for it at `now` (ms): its tools to look at, its process
    /// to look for, or its process to check in `/proc`.
    pub(super) fn needs_slow_check(
        &self,
        traits: AgentTraits,
        now: u64,
        exit_watched: impl Fn(u32) -> bool,
    ) -> bool {
        self.watches_tools(traits)
            || match self.agent_pid() {
                None => self.searching_at(now) && traits.findable,
                Some(_) => self.needs_proc_check(exit_watched),
            }
    }
}

/// Which threads [`Engine::find_processes`] looks for.
#[derive(Clone, Copy)]
pub(super) enum Scope<'a> {
    All,
    /// The threads the slow timer looks for ([`Thread::searching_at`]).
    Searching,
    One(&'a str),
}

impl Engine {
    /// Arms the liveness timer when a thread in a turn has no process yet, or one without an
    /// exit watch.
    pub(super) fn arm_liveness(&mut self) {
        let now = now_ms();
        let needed = self.threads.values().any(|thread| {
            thread.needs_slow_check(self.traits(thread.agent), now, |pid| {
                self.exit_watched.contains(&pid)
            })
        });
        if !needed {
            self.next_liveness = None;
        } else if self.next_liveness.is_none() {
            self.next_liveness = Some(Instant::now() + self.limits.liveness_interval);
        }
    }

    pub(super) fn traits(&self, agent: Option<WatchedAgent>) -> AgentTraits {
        match self.format_of_agent(agent) {
            Some(format) => AgentTraits {
                findable: !self.formats[format].process_names().is_empty(),
                tools_as_children: self.formats[format].tools_run_as_children(),
            },
            None => AgentTraits::default(),
        }
    }

    /// An open tool call with no tool process under the agent is an approval waiting; one
    /// whose process appeared is running again.
    pub(super) fn check_tool_processes(&mut self) {
        let now = now_ms();
        let keys: Vec<String> = self
            .threads
            .iter()
            .filter(|(_, t)| t.tool_check_due(self.traits(t.agent), now))
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
            let change = ToolVerdict::of(thread.derived_wait, &tools).map(|verdict| match verdict {
                ToolVerdict::Waiting => (
                    AgentStatus::Waiting,
                    true,
                    format!(
                        "{agent}: a tool call is open and no tool process runs under process {pid} → waiting (an approval)"
                    ),
                ),
                ToolVerdict::Running(tool) => (
                    AgentStatus::ToolRunning,
                    false,
                    format!("{agent}: tool process {tool} runs under process {pid} → tool-running"),
                ),
            });
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
            .filter(|(_, t)| t.needs_proc_check(|pid| self.exit_watched.contains(&pid)))
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

#[cfg(test)]
mod tests {
    use super::super::thread::PROCESS_SEARCH_MS;
    use super::*;
    use crate::protocol::Liveness;

    const NOW: u64 = 1_800_000_000_000;
    const CODEX: AgentTraits = AgentTraits {
        findable: true,
        tools_as_children: true,
    };
    const CLAUDE: AgentTraits = AgentTraits {
        findable: true,
        tools_as_children: false,
    };
    const DROID: AgentTraits = AgentTraits {
        findable: false,
        tools_as_children: false,
    };

    /// The facts the slow timer looks at, as one line of a table.
    #[derive(Clone, Copy)]
    struct Facts {
        status: Option<AgentStatus>,
        pid: Option<u32>,
        exit_watched: bool,
        ended: bool,
        gone: bool,
        /// ms since its last record (the search stops a minute after it).
        quiet_ms: u64,
        contested: bool,
    }

    const IN_TURN_NO_PID: Facts = Facts {
        status: Some(AgentStatus::Running),
        pid: None,
        exit_watched: false,
        ended: false,
        gone: false,
        quiet_ms: 1_000,
        contested: false,
    };

    fn thread(facts: Facts) -> Thread {
        Thread {
            agent: Some(WatchedAgent::Codex),
            thread_id: "t".into(),
            status: facts.status,
            pid: facts.pid,
            ended: facts.ended,
            gone: facts.gone,
            contested: facts.contested,
            search_until: Some(NOW - facts.quiet_ms + PROCESS_SEARCH_MS),
            ..Thread::default()
        }
    }

    fn check(facts: Facts, traits: AgentTraits, expect: bool) {
        let thread = thread(facts);
        let got = thread.needs_slow_check(traits, NOW, |_| facts.exit_watched);
        assert_eq!(
            got,
            expect,
            "status {:?}, pid {:?}, exit watched {}, ended {}, gone {}, quiet {} ms, contested {}",
            facts.status,
            facts.pid,
            facts.exit_watched,
            facts.ended,
            facts.gone,
            facts.quiet_ms,
            facts.contested
        );
    }

    #[test]
    fn the_slow_timer_runs_only_while_a_thread_needs_it() {
        let base = IN_TURN_NO_PID;
        // In a turn, process unknown: looked for during a minute after its last record.
        check(base, CODEX, true);
        check(
            Facts {
                quiet_ms: 59_000,
                ..base
            },
            CODEX,
            true,
        );
        check(
            Facts {
                quiet_ms: 60_000,
                ..base
            },
            CODEX,
            false,
        );
        // Not by an agent whose processes cannot be found by name.
        check(base, DROID, false);
        // Idle, or the turn is over: nothing to look for, unless several processes fit.
        check(
            Facts {
                status: Some(AgentStatus::Idle),
                ..base
            },
            CODEX,
            false,
        );
        check(
            Facts {
                status: Some(AgentStatus::Done),
                ..base
            },
            CODEX,
            false,
        );
        check(
            Facts {
                status: Some(AgentStatus::Done),
                contested: true,
                ..base
            },
            CODEX,
            true,
        );
        // Ended or gone: nothing to look for.
        check(
            Facts {
                ended: true,
                ..base
            },
            CODEX,
            false,
        );
        check(Facts { gone: true, ..base }, CODEX, false);
        // Its process known: the kernel tells its exit; without a pidfd, /proc is checked.
        let known = Facts {
            pid: Some(4242),
            ..base
        };
        check(
            Facts {
                exit_watched: true,
                ..known
            },
            CLAUDE,
            false,
        );
        check(known, CLAUDE, true);
        check(
            Facts {
                status: Some(AgentStatus::Idle),
                ..known
            },
            CLAUDE,
            false,
        );
        // An open tool call of an agent whose tools are children: its tree is looked at.
        let tool = Facts {
            status: Some(AgentStatus::ToolRunning),
            exit_watched: true,
            ..known
        };
        check(tool, CODEX, true);
        check(tool, CLAUDE, false);
        check(Facts { gone: true, ..tool }, CODEX, false);
    }

    #[test]
    fn an_open_tool_call_is_checked_after_its_grace() {
        let thread = |tool_since: Option<u64>, derived_wait: bool| Thread {
            status: Some(if derived_wait {
                AgentStatus::Waiting
            } else {
                AgentStatus::ToolRunning
            }),
            pid: Some(4242),
            tool_since,
            derived_wait,
            ..Thread::default()
        };
        let check = |thread: Thread, traits, expect| {
            assert_eq!(
                thread.tool_check_due(traits, NOW),
                expect,
                "since {:?}, derived wait {}",
                thread.tool_since,
                thread.derived_wait
            );
        };
        check(thread(Some(NOW - 500), false), CODEX, false);
        check(thread(Some(NOW - 2_000), false), CODEX, true);
        check(thread(None, false), CODEX, false);
        check(thread(None, true), CODEX, true);
        check(thread(Some(NOW - 5_000), false), CLAUDE, false);
    }

    #[test]
    fn the_process_tree_turns_an_open_call_into_a_wait_and_back() {
        let check = |derived_wait, tools: &[u32], expect| {
            assert_eq!(
                ToolVerdict::of(derived_wait, tools),
                expect,
                "{derived_wait} {tools:?}"
            );
        };
        check(false, &[], Some(ToolVerdict::Waiting));
        check(false, &[5001], None);
        check(true, &[], None);
        check(true, &[5001, 5002], Some(ToolVerdict::Running(5001)));
    }

    #[test]
    fn liveness_follows_the_records_and_the_process() {
        let check = |facts: Facts, expect| assert_eq!(thread(facts).liveness(), Some(expect));
        check(IN_TURN_NO_PID, Liveness::Unknown);
        check(
            Facts {
                pid: Some(1),
                ..IN_TURN_NO_PID
            },
            Liveness::Alive,
        );
        check(
            Facts {
                pid: Some(1),
                gone: true,
                ..IN_TURN_NO_PID
            },
            Liveness::Exited,
        );
        check(
            Facts {
                ended: true,
                ..IN_TURN_NO_PID
            },
            Liveness::Exited,
        );
    }
}
