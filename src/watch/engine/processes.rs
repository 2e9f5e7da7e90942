//! Which process runs a thread whose records name no pid: the engine lists the processes named
//! like the agent (`/proc`: parent, arguments, cwd, start time, which of the threads' files they
//! hold open) and asks the format to pick, again and again with each pick taken, so processes
//! that fit a thread equally are seen as such. A holder of the thread's own file is certain;
//! otherwise one fitting process is taken, and several are told apart only by the prompt their
//! pane shows: never guessed.
//!
//! [`fitting`] and [`choose`] are pure (the pane's screen comes in through a closure); the
//! engine does the scan, the capture and the bookkeeping.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use super::Engine;
use super::liveness::Scope;
use super::thread::Thread;
use crate::core::now_ms;
use crate::protocol::EvidenceView;
use crate::watch::format::{Format, ProcessFacts, ThreadFacts};
use crate::watch::procs;

/// How many equally fitting processes one thread's search weighs at most.
const MAX_FITTING: usize = 8;

/// The thread whose process is sought.
pub(super) struct Sought<'a> {
    pub(super) thread_id: &'a str,
    /// The working directory from its records.
    pub(super) cwd: Option<&'a Path>,
    /// Its record files (canonical paths).
    pub(super) files: &'a [PathBuf],
    /// Its last prompt: what its pane would show.
    pub(super) prompt: Option<&'a str>,
}

impl Sought<'_> {
    fn held_by(&self, process: &ProcessFacts) -> bool {
        process.holds.iter().any(|held| self.files.contains(held))
    }
}

/// What one thread's search concluded.
#[derive(Debug, PartialEq)]
pub(super) enum Choice<'c> {
    /// No process fits.
    Nothing,
    /// This process runs it, and how that is known (for the evidence).
    Picked(&'c ProcessFacts, &'static str),
    /// Several fit equally and none could be told apart: the process stays unknown.
    Contested,
}

/// Every process `format` would take for the thread, best first: its pick, then its pick with
/// that one taken, and so on (at most [`MAX_FITTING`]). A holder of the thread's own file is
/// certain and ends the list; the others fit only by their cwd. `claimed`: the processes other
/// live threads of the agent already have.
pub(super) fn fitting<'c>(
    format: &dyn Format,
    sought: &Sought<'_>,
    claimed: &HashSet<u32>,
    candidates: &'c [ProcessFacts],
) -> Vec<&'c ProcessFacts> {
    let mut fitting: Vec<&ProcessFacts> = Vec::new();
    let mut taken = claimed.clone();
    while fitting.len() < MAX_FITTING {
        let facts = ThreadFacts {
            thread_id: sought.thread_id,
            cwd: sought.cwd,
            files: sought.files,
            claimed: &taken,
        };
        let Some(pid) = format.pick_process(&facts, candidates) else {
            break;
        };
        let Some(picked) = candidates.iter().find(|p| p.pid == pid) else {
            break;
        };
        if !taken.insert(pid) {
            break;
        }
        fitting.push(picked);
        if sought.held_by(picked) {
            break;
        }
    }
    fitting
}

/// Which of the `fitting` processes (see [`fitting`]) runs the thread. `shows(pid, prompt)`
/// says whether the pane `pid` runs in shows the thread's prompt; it is asked only when several
/// fit equally, once for each.
pub(super) fn choose<'c>(
    fitting: &[&'c ProcessFacts],
    sought: &Sought<'_>,
    mut shows: impl FnMut(u32, &str) -> bool,
) -> Choice<'c> {
    let Some(first) = fitting.first().copied() else {
        return Choice::Nothing;
    };
    let certain = sought.held_by(first);
    if certain || fitting.len() == 1 {
        let how = if certain {
            "holds the record file open"
        } else if first.cwd.is_some() && first.cwd.as_deref() == sought.cwd {
            "runs in the thread's cwd"
        } else {
            "is the agent above the file's holder"
        };
        return Choice::Picked(first, how);
    }
    // Several processes fit equally (two TUIs in one directory, whose records name no pid and
    // which keep no file of their own open — codex's TUIs share one app-server that writes every
    // rollout). The one whose pane shows the thread's last prompt runs it; with none or several,
    // the process stays unknown (the thread is placed by its cwd) and is looked for again when
    // its prompt arrives and on the slow timer, never guessed.
    let showing: Vec<&ProcessFacts> = match sought.prompt {
        Some(prompt) => fitting
            .iter()
            .copied()
            .filter(|process| shows(process.pid, prompt))
            .collect(),
        None => Vec::new(),
    };
    match showing.as_slice() {
        [shown] => Choice::Picked(
            shown,
            "runs in the thread's cwd and its pane shows the thread's prompt",
        ),
        _ => Choice::Contested,
    }
}

impl Engine {
    /// Finds the processes of threads without one (by who holds their files open): every thread
    /// (the catch-up), threads in a turn (the slow timer) or one new thread.
    pub(super) fn find_processes(&mut self, scope: Scope<'_>) {
        // The threads to look for, by format.
        let mut wanted: HashMap<usize, Vec<String>> = HashMap::new();
        let now = now_ms();
        for (key, thread) in &self.threads {
            let in_scope = match scope {
                Scope::All => true,
                Scope::Searching => thread.searching_at(now),
                Scope::One(one) => key == one,
            };
            if thread.agent_pid().is_some() || thread.ended || !in_scope {
                continue;
            }
            let Some(format) = self.format_of_agent(thread.agent) else {
                continue;
            };
            if !self.formats[format].process_names().is_empty() {
                wanted.entry(format).or_default().push(key.clone());
            }
        }
        for (format, keys) in wanted {
            let canonical = |file: &PathBuf| file.canonicalize().unwrap_or_else(|_| file.clone());
            let files: HashSet<PathBuf> = keys
                .iter()
                .filter_map(|key| self.threads.get(key))
                .flat_map(|thread| thread.files.iter())
                .filter(|file| !self.single.contains_key(*file))
                .map(canonical)
                .collect();
            let names = self.formats[format].process_names();
            let mut cost = procs::ScanCost::default();
            let candidates = procs::list_processes(names, &files, &mut cost);
            self.shared.proc_scans.fetch_add(1, Ordering::Relaxed);
            if candidates.is_empty() {
                continue;
            }
            let agent = self.formats[format].agent();
            // Processes other live threads of this agent already have.
            let mut claimed: HashSet<u32> = self
                .threads
                .values()
                .filter(|t| t.agent == Some(agent) && !t.gone && !t.ended)
                .filter_map(Thread::agent_pid)
                .collect();
            for key in keys {
                let Some(thread) = self.threads.get(&key) else {
                    continue;
                };
                let thread_files: Vec<PathBuf> = thread.files.iter().map(canonical).collect();
                let thread_id = thread.thread_id.clone();
                let cwd = thread.cwd.clone();
                let prompt = thread.prompt.clone();
                let sought = Sought {
                    thread_id: &thread_id,
                    cwd: cwd.as_deref(),
                    files: &thread_files,
                    prompt: prompt.as_deref(),
                };
                let fitting = fitting(
                    self.formats[format].as_ref(),
                    &sought,
                    &claimed,
                    &candidates,
                );
                let (picked, how) = match choose(&fitting, &sought, |pid, prompt| {
                    self.pane_shows(pid, prompt)
                }) {
                    Choice::Nothing => continue,
                    Choice::Contested => {
                        if let Some(thread) = self.threads.get_mut(&key) {
                            thread.contested = true;
                        }
                        continue;
                    }
                    Choice::Picked(picked, how) => (picked, how),
                };
                let pid = picked.pid;
                claimed.insert(pid);
                if let Some(thread) = self.threads.get_mut(&key) {
                    thread.contested = false;
                    thread.found_pid = Some(pid);
                    thread.ancestry = procs::ancestors(pid);
                    thread.start_time = Some(picked.start_time);
                    thread.gone = false;
                    thread.push_evidence(EvidenceView {
                        file: format!("/proc/{pid}"),
                        locator: None,
                        rule: format!(
                            "{}: process {pid} ({}) {how} → alive",
                            agent.as_str(),
                            picked.comm
                        ),
                        status: None,
                        at: now_ms(),
                        record_ts: None,
                    });
                }
                self.watch_exit(pid);
                if !self.catching_up {
                    self.emit(&key);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::watch::codex::Codex;

    const ROLLOUT: &str = "/home/me/.codex/sessions/2026/12/01/rollout-2026-12-01T09-08-38-01a230dc-f6f8-7663-b1a5-db280f67d13e.jsonl";

    /// A codex process as `/proc` shows it: TUIs in the project, and the app-server they
    /// share, which holds every rollout open.
    fn process(
        pid: u32,
        args: &[&str],
        cwd: &str,
        start_time: u64,
        holds: &[&str],
    ) -> ProcessFacts {
        ProcessFacts {
            pid,
            ppid: 1,
            comm: "codex".into(),
            args: args.iter().map(|a| a.to_string()).collect(),
            cwd: Some(PathBuf::from(cwd)),
            start_time,
            holds: holds.iter().map(PathBuf::from).collect(),
        }
    }

    fn two_tuis_and_their_server() -> Vec<ProcessFacts> {
        vec![
            process(500, &["codex", "app-server"], "/home/me", 10, &[ROLLOUT]),
            process(601, &["codex"], "/home/me/proj", 20, &[]),
            process(602, &["codex"], "/home/me/proj", 30, &[]),
        ]
    }

    /// The pids the search settles on, given which panes show the prompt.
    fn check(
        candidates: &[ProcessFacts],
        claimed: &[u32],
        prompt: Option<&str>,
        showing: &[u32],
        expect: Result<(u32, &str), &str>,
    ) {
        let files = [PathBuf::from(ROLLOUT)];
        let sought = Sought {
            thread_id: "01a230dc-f6f8-7663-b1a5-db280f67d13e",
            cwd: Some(Path::new("/home/me/proj")),
            files: &files,
            prompt,
        };
        let claimed: HashSet<u32> = claimed.iter().copied().collect();
        let fitting = fitting(&Codex, &sought, &claimed, candidates);
        let mut asked = Vec::new();
        let choice = choose(&fitting, &sought, |pid, prompt| {
            asked.push(pid);
            assert_eq!(Some(prompt), sought.prompt);
            showing.contains(&pid)
        });
        let got = match choice {
            Choice::Picked(process, how) => Ok((process.pid, how)),
            Choice::Contested => Err("contested"),
            Choice::Nothing => Err("nothing"),
        };
        assert_eq!(
            got, expect,
            "claimed {claimed:?}, prompt {prompt:?}, showing {showing:?}"
        );
        if fitting.len() < 2 {
            assert!(asked.is_empty(), "no pane is captured for a single fit");
        }
    }

    #[test]
    fn processes_fitting_equally_are_told_apart_by_their_pane_or_not_at_all() {
        let tuis = two_tuis_and_their_server();
        let prompt = Some("fix the tests");
        // Neither pane shows the prompt, or both do, or there is no prompt yet: never guessed.
        check(&tuis, &[], prompt, &[], Err("contested"));
        check(&tuis, &[], prompt, &[601, 602], Err("contested"));
        check(&tuis, &[], None, &[601], Err("contested"));
        // One pane shows it.
        let shown = "runs in the thread's cwd and its pane shows the thread's prompt";
        check(&tuis, &[], prompt, &[602], Ok((602, shown)));
        check(&tuis, &[], prompt, &[601], Ok((601, shown)));
        // The other TUI already runs another thread: one fits.
        check(
            &tuis,
            &[601],
            prompt,
            &[],
            Ok((602, "runs in the thread's cwd")),
        );
        // Both taken, or none in the thread's cwd: nothing.
        check(&tuis, &[601, 602], prompt, &[], Err("nothing"));
        check(&tuis[..1], &[], prompt, &[], Err("nothing"));
    }

    #[test]
    fn a_process_holding_the_thread_file_is_certain() {
        // `codex exec` writes its own rollout: it holds it, whatever else runs in the directory.
        let mut processes = two_tuis_and_their_server();
        processes.push(process(
            700,
            &["codex", "exec", "hi"],
            "/tmp",
            40,
            &[ROLLOUT],
        ));
        check(
            &processes,
            &[],
            None,
            &[],
            Ok((700, "holds the record file open")),
        );
    }
}
