//! Which process runs a thread.

use super::*;

/// How many equally fitting processes one thread's search weighs at most.
pub(super) const MAX_FITTING: usize = 8;

impl Engine {
    /// Finds the processes of threads without one (by who holds their files open): every thread
    /// (the catch-up), threads in a turn (the slow timer) or one new thread.
    pub(super) fn find_processes(&mut self, scope: Scope<'_>) {
        // The threads to look for, by format.
        let mut wanted: HashMap<usize, Vec<String>> = HashMap::new();
        for (key, thread) in &self.threads {
            let in_scope = match scope {
                Scope::All => true,
                Scope::Searching => thread.searching(),
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
                // Every process the format would take for the thread, best first: its pick,
                // then its pick with that one taken, and so on. A holder of the thread's own
                // file is certain and ends the list; the others fit only by their cwd.
                let holds = |p: &ProcessFacts| p.holds.iter().any(|h| thread_files.contains(h));
                let mut fitting: Vec<&ProcessFacts> = Vec::new();
                let mut taken = claimed.clone();
                while fitting.len() < MAX_FITTING {
                    let facts = ThreadFacts {
                        thread_id: &thread_id,
                        cwd: cwd.as_deref(),
                        files: &thread_files,
                        claimed: &taken,
                    };
                    let Some(pid) = self.formats[format].pick_process(&facts, &candidates) else {
                        break;
                    };
                    let Some(picked) = candidates.iter().find(|p| p.pid == pid) else {
                        break;
                    };
                    if !taken.insert(pid) {
                        break;
                    }
                    fitting.push(picked);
                    if holds(picked) {
                        break;
                    }
                }
                if fitting.is_empty() {
                    continue;
                }
                let certain = fitting.first().is_some_and(|p| holds(p));
                let (picked, how) = if certain || fitting.len() == 1 {
                    let Some(picked) = fitting.first().copied() else {
                        continue;
                    };
                    let how = if certain {
                        "holds the record file open"
                    } else if picked.cwd.is_some() && picked.cwd == cwd {
                        "runs in the thread's cwd"
                    } else {
                        "is the agent above the file's holder"
                    };
                    (picked, how)
                } else {
                    // Several processes fit equally (two TUIs in one directory, whose records
                    // name no pid and which keep no file of their own open — codex's TUIs share
                    // one app-server that writes every rollout). The one whose pane shows the
                    // thread's last prompt runs it; with none or several, the process stays
                    // unknown (the thread is placed by its cwd) and is looked for again when
                    // its prompt arrives and on the slow timer, never guessed.
                    let fitting: Vec<u32> = fitting.iter().map(|p| p.pid).collect();
                    let showing: Vec<u32> = match prompt.as_deref() {
                        Some(prompt) => fitting
                            .into_iter()
                            .filter(|pid| self.pane_shows(*pid, prompt))
                            .collect(),
                        None => Vec::new(),
                    };
                    let [shown] = showing.as_slice() else {
                        if let Some(thread) = self.threads.get_mut(&key) {
                            thread.contested = true;
                        }
                        continue;
                    };
                    let Some(picked) = candidates.iter().find(|p| p.pid == *shown) else {
                        continue;
                    };
                    (
                        picked,
                        "runs in the thread's cwd and its pane shows the thread's prompt",
                    )
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
