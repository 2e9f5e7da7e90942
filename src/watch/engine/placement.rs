//! Placement: which tmux session (and pane) a thread shows in, and hosted-session dedup.
//!
//! The order, decided by [`decide`] from facts the engine gathered: a session cohost hosts
//! (same thread id, same pane, or its runner among the agent's parents — or, while it starts and
//! its thread id is not known yet, the same agent in the same directory) suppresses the watched
//! instance; else the pane whose process is the nearest of the agent's parents (for an agent that
//! exited, the parents it had while it ran: its pane usually outlives it); else the tmux session
//! whose directory matches the thread's cwd; else `:unplaced`. The engine keeps the pane list
//! (`tmux list-panes`) in memory and re-reads it at most once a second on a miss.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::Engine;
use crate::protocol::{SessionPane, SessionState};
use crate::tmux::{PaneInfo, SessionList};
use crate::watch::procs;

/// The tmux pane list is re-read at most this often when a placement misses.
const PANES_MAX_AGE: Duration = Duration::from_secs(1);

/// Where a thread shows.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) enum Placement {
    #[default]
    Unplaced,
    Pane {
        session: String,
        pane_id: String,
    },
    Cwd {
        session: String,
    },
    Suppressed {
        by: String,
    },
}

/// A session cohost hosts (not closed), as placement sees it.
pub(super) struct Hosted<'a> {
    pub(super) id: &'a str,
    pub(super) thread_id: Option<&'a str>,
    pub(super) pane: Option<&'a SessionPane>,
    /// While it starts (its runtime's session not bound, so its thread id unknown): its
    /// runtime's name and its working directory.
    pub(super) starting: Option<(&'a str, &'a Path)>,
}

/// The pane whose process is the first of `chain` (a process and its parents) to run one.
pub(super) fn pane_in_chain<'a>(chain: &[u32], panes: &'a [PaneInfo]) -> Option<&'a PaneInfo> {
    chain
        .iter()
        .find_map(|pid| panes.iter().find(|pane| pane.pid == *pid))
}

/// The thread a watcher found, as [`hosted_by`] compares it with the hosted sessions.
pub(super) struct Seen<'a> {
    pub(super) thread_id: &'a str,
    /// The watched agent's name (`opencode`, `pi`, …).
    pub(super) agent: Option<&'a str>,
    pub(super) cwd: Option<&'a Path>,
    /// Its pane, if one of its parents runs one.
    pub(super) pane: Option<&'a PaneInfo>,
    /// The agent's process and its parents, nearest first.
    pub(super) chain: &'a [u32],
}

/// The hosted session that is this thread, if one is: the same thread id, or the same pane (the
/// agent's pane, or its runner among the agent's parents). A session still starting, whose
/// runtime shares its records with the user's (an OpenCode server writes the user's database),
/// can be seen by a watcher before cohost knows its thread id: a thread of the same agent in
/// the same directory is taken to be it until it is bound (a person's own session started
/// there in that instant shows at its next change).
pub(super) fn hosted_by<'a>(
    hosted: impl IntoIterator<Item = Hosted<'a>>,
    seen: &Seen<'_>,
) -> Option<String> {
    hosted.into_iter().find_map(|session| {
        let same_thread = session.thread_id == Some(seen.thread_id);
        let same_pane = session.pane.is_some_and(|p| {
            seen.pane.is_some_and(|pane| pane.pane_id == p.pane_id)
                || seen.chain.contains(&p.runner_pid)
        });
        let starting_here = session
            .starting
            .is_some_and(|(runtime, cwd)| seen.agent == Some(runtime) && seen.cwd == Some(cwd));
        (same_thread || same_pane || starting_here).then(|| session.id.to_string())
    })
}

/// Where a thread shows, from its pane (see [`pane_in_chain`]), the hosted session that is it
/// (see [`hosted_by`]), its cwd and the tmux sessions.
pub(super) fn decide(
    pane: Option<PaneInfo>,
    hosted: Option<String>,
    cwd: Option<&Path>,
    sessions: &SessionList,
) -> Placement {
    // A session cohost hosts shows once: its own instance wins.
    if let Some(by) = hosted {
        return Placement::Suppressed { by };
    }
    if let Some(pane) = pane {
        return Placement::Pane {
            session: pane.session,
            pane_id: pane.pane_id,
        };
    }
    if let Some(cwd) = cwd
        && let Ok(session) = crate::tmux::resolve(sessions, None, Some(&cwd.to_string_lossy()))
    {
        return Placement::Cwd { session };
    }
    Placement::Unplaced
}

/// What a pane must show to be the one running a thread whose last prompt is `prompt`: its
/// first line, up to 60 characters, with white space folded (a TUI wraps and indents what it
/// echoes). `None` for an empty prompt.
pub(super) fn prompt_needle(prompt: &str) -> Option<String> {
    let needle: String = fold(prompt.lines().next().unwrap_or_default())
        .chars()
        .take(60)
        .collect();
    (!needle.is_empty()).then_some(needle)
}

/// Whether a captured `screen` shows `needle` (from [`prompt_needle`]).
pub(super) fn screen_shows(screen: &str, needle: &str) -> bool {
    fold(screen).contains(needle)
}

fn fold(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

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

    /// Whether the pane `pid` runs in shows `text` (see [`prompt_needle`]).
    pub(super) fn pane_shows(&mut self, pid: u32, text: &str) -> bool {
        let Some(needle) = prompt_needle(text) else {
            return false;
        };
        let Some(pane) = self.pane_of(pid) else {
            return false;
        };
        let tmux = self.tmux.tmux().clone();
        let pane_id = pane.pane_id.clone();
        let screen = self
            .runtime
            .block_on(async move { tmux.capture(&pane_id).await })
            .unwrap_or_default();
        screen_shows(&screen, &needle)
    }

    pub(super) fn pane_of(&mut self, pid: u32) -> Option<PaneInfo> {
        self.pane_of_chain(&procs::ancestors(pid))
    }

    /// The pane whose process is the first of `chain` (a process and its parents) to run one.
    pub(super) fn pane_of_chain(&mut self, chain: &[u32]) -> Option<PaneInfo> {
        if chain.is_empty() {
            return None;
        }
        if let Some(pane) = pane_in_chain(chain, &self.panes) {
            return Some(pane.clone());
        }
        if self.panes_at.is_some_and(|at| at.elapsed() < PANES_MAX_AGE) {
            return None;
        }
        self.refresh_panes();
        pane_in_chain(chain, &self.panes).cloned()
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
        let thread_id = thread.thread_id.clone();
        let cwd = thread.cwd.clone();
        let agent = thread.agent.map(|agent| agent.as_str());
        // A live process's parents now; an exited one's as they were when its pid was learned
        // (the shell that started it, and its pane, usually outlive it).
        let ancestors = match thread.live_pid() {
            Some(pid) => procs::ancestors(pid),
            None => thread.ancestry.clone(),
        };
        let pane = self.pane_of_chain(&ancestors);
        let seen = Seen {
            thread_id: &thread_id,
            agent,
            cwd: cwd.as_deref(),
            pane: pane.as_ref(),
            chain: &ancestors,
        };
        let hosted = self.core.read(|state| {
            let hosted = state
                .sessions
                .iter()
                .filter(|session| !session.is_closed())
                .map(|session| Hosted {
                    id: &session.id,
                    thread_id: session.thread_id.as_deref(),
                    pane: session.pane.as_ref(),
                    // A runtime's name is its watched agent's (but Claude's, whose hosted
                    // sessions have panes).
                    starting: (session.state == SessionState::Starting
                        && session.thread_id.is_none())
                    .then(|| {
                        (
                            session.created.runtime.as_str(),
                            Path::new(&session.created.cwd),
                        )
                    }),
                });
            hosted_by(hosted, &seen)
        });
        decide(pane, hosted, cwd.as_deref(), &self.tmux.get())
    }
}

#[cfg(test)]
mod tests {
    use super::super::thread::Thread;
    use super::*;
    use crate::tmux::{TmuxSession, parse_list_panes};

    /// `tmux list-panes -a -F '#{pane_id}\t#{pane_pid}\t#{session_name}'`: the pane pids are
    /// the shells the agents were started from.
    const PANES: &str = "%0\t4100\twork\n%3\t4200\tproj\n%4\t4300\tproj\n";

    fn sessions() -> SessionList {
        let session = |id: &str, name: &str, dir: &str| TmuxSession {
            id: id.into(),
            name: name.into(),
            dir: dir.into(),
            attached: false,
            windows: 1,
        };
        SessionList {
            running: true,
            server_pid: Some(90),
            sessions: vec![
                session("$0", "work", "/home/me/work"),
                session("$1", "proj", "/home/me/proj"),
            ],
        }
    }

    struct Case<'a> {
        /// The agent and its parents, nearest first.
        chain: &'a [u32],
        cwd: Option<&'a str>,
        hosted: Option<&'a str>,
    }

    fn check(case: Case<'_>, expect: Placement) {
        let panes = parse_list_panes(PANES);
        let pane = pane_in_chain(case.chain, &panes).cloned();
        let got = decide(
            pane,
            case.hosted.map(str::to_string),
            case.cwd.map(Path::new),
            &sessions(),
        );
        assert_eq!(got, expect, "chain {:?}, cwd {:?}", case.chain, case.cwd);
    }

    fn pane(session: &str, pane_id: &str) -> Placement {
        Placement::Pane {
            session: session.into(),
            pane_id: pane_id.into(),
        }
    }

    #[test]
    fn the_pane_of_the_nearest_parent_places_a_thread() {
        // codex (4242) started from the shell of pane %3.
        check(
            Case {
                chain: &[4242, 4200, 1],
                cwd: Some("/home/me/work"),
                hosted: None,
            },
            pane("proj", "%3"),
        );
        // A tmux started inside another pane's shell: the nearest pane wins.
        check(
            Case {
                chain: &[4242, 4300, 4100, 1],
                cwd: None,
                hosted: None,
            },
            pane("proj", "%4"),
        );
    }

    #[test]
    fn without_a_pane_the_cwd_picks_the_session() {
        let case = |cwd| Case {
            chain: &[5000, 4999, 1],
            cwd,
            hosted: None,
        };
        let cwd = |session: &str| Placement::Cwd {
            session: session.into(),
        };
        check(case(Some("/home/me/proj")), cwd("proj"));
        check(case(Some("/home/me/proj/src/")), cwd("proj"));
        check(case(Some("/home/me/work")), cwd("work"));
        check(case(Some("/tmp/elsewhere")), Placement::Unplaced);
        check(case(None), Placement::Unplaced);
        // No process known at all.
        check(
            Case {
                chain: &[],
                cwd: None,
                hosted: None,
            },
            Placement::Unplaced,
        );
    }

    #[test]
    fn a_hosted_session_suppresses_the_watched_instance() {
        check(
            Case {
                chain: &[4242, 4200, 1],
                cwd: Some("/home/me/proj"),
                hosted: Some("s-1"),
            },
            Placement::Suppressed { by: "s-1".into() },
        );
        let runner = SessionPane {
            pane_id: "%3".into(),
            tmux_session: "proj".into(),
            runner_pid: 4200,
        };
        let hosted = |thread_id, pane| {
            [Hosted {
                id: "s-1",
                thread_id,
                pane,
                starting: None,
            }]
        };
        let panes = parse_list_panes(PANES);
        let in_pane = pane_in_chain(&[4242, 4200], &panes);
        let check = |sessions, pane: Option<&PaneInfo>, chain: &[u32], expect: Option<&str>| {
            let seen = Seen {
                thread_id: "t-1",
                agent: Some("opencode"),
                cwd: Some(Path::new("/home/me/proj")),
                pane,
                chain,
            };
            assert_eq!(
                hosted_by(sessions, &seen).as_deref(),
                expect,
                "chain {chain:?}"
            );
        };
        // The same thread id.
        check(hosted(Some("t-1"), None), None, &[], Some("s-1"));
        check(hosted(Some("t-2"), None), in_pane, &[4242, 4200], None);
        // The same pane, or its runner among the agent's parents.
        check(
            hosted(None, Some(&runner)),
            in_pane,
            &[4242, 4200],
            Some("s-1"),
        );
        check(
            hosted(None, Some(&runner)),
            None,
            &[4242, 4200],
            Some("s-1"),
        );
        check(hosted(None, Some(&runner)), None, &[4242, 4300], None);
        // Still starting: the same agent in the same directory, nothing else.
        let starting = |runtime, cwd| {
            [Hosted {
                id: "s-1",
                thread_id: None,
                pane: None,
                starting: Some((runtime, Path::new(cwd))),
            }]
        };
        check(
            starting("opencode", "/home/me/proj"),
            None,
            &[],
            Some("s-1"),
        );
        check(starting("opencode", "/home/me/work"), None, &[], None);
        check(starting("pi", "/home/me/proj"), None, &[], None);
    }

    #[test]
    fn an_exited_agent_keeps_the_pane_it_ran_in() {
        let thread = |gone: bool, ended: bool| Thread {
            pid: Some(4242),
            gone,
            ended,
            ancestry: vec![4242, 4200, 1],
            ..Thread::default()
        };
        assert_eq!(thread(false, false).live_pid(), Some(4242));
        for (gone, ended) in [(true, false), (false, true), (true, true)] {
            let exited = thread(gone, ended);
            // Its parents as they were: the shell, and its pane, outlive it.
            assert_eq!(exited.live_pid(), None);
            check(
                Case {
                    chain: &exited.ancestry,
                    cwd: Some("/home/me/work"),
                    hosted: None,
                },
                pane("proj", "%3"),
            );
        }
    }

    #[test]
    fn a_pane_shows_a_prompt_folded_and_cut() {
        let needle = |prompt| prompt_needle(prompt);
        assert_eq!(needle(""), None);
        assert_eq!(needle("  \n second line"), None);
        assert_eq!(
            needle("fix  the\ttests\nand more").as_deref(),
            Some("fix the tests")
        );
        let long = "word ".repeat(30);
        assert_eq!(needle(&long).unwrap().chars().count(), 60);
        // A TUI wraps and indents what it echoes.
        let screen = "› fix the\n  tests\n\n• Working (3s • esc to interrupt)\n";
        assert!(screen_shows(screen, "fix the tests"));
        assert!(!screen_shows(screen, "fix the bug"));
    }
}
