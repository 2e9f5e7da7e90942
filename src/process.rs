//! What the daemon learns about a process from `/proc`: whether it lives (its pid plus its start
//! time, so a reused pid is not mistaken for it), its name and its parents. The passive watchers
//! place agents in tmux panes with it (`watch::procs` adds what only they need), and a runtime
//! checks with it that an agent it adopted still runs in its pane.
//!
//! Never writes anything, never signals a process.

/// The fields of `/proc/<pid>/stat` cohost uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    pub ppid: u32,
    /// Clock ticks since boot when the process started: with the pid, a process's identity.
    pub start_time: u64,
    pub zombie: bool,
}

/// Reads `/proc/<pid>/stat`; `None` when the process is gone.
pub fn stat(pid: u32) -> Option<Stat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is parenthesised and may hold spaces or parentheses: split after the
    // last `)`.
    let after = text.rsplit_once(')')?.1;
    let fields: Vec<&str> = after.split_whitespace().collect();
    // After the name: state(0) ppid(1) … starttime is field 22 of the line, 19 here.
    Some(Stat {
        zombie: *fields.first()? == "Z",
        ppid: fields.get(1)?.parse().ok()?,
        start_time: fields.get(19)?.parse().ok()?,
    })
}

/// `/proc/<pid>/comm` without its newline.
pub fn comm(pid: u32) -> Option<String> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
    Some(text.trim_end().to_string())
}

/// Whether `pid` is a live (not zombie) process started at `start_time` (when known).
pub fn alive(pid: u32, start_time: Option<u64>) -> bool {
    match stat(pid) {
        Some(stat) => !stat.zombie && start_time.is_none_or(|start| start == stat.start_time),
        None => false,
    }
}

/// `pid` and its parents up to init (at most 64 levels).
pub fn ancestors(pid: u32) -> Vec<u32> {
    let mut chain = vec![pid];
    let mut current = pid;
    while chain.len() < 64 {
        match stat(current) {
            Some(stat) if stat.ppid > 1 => {
                chain.push(stat.ppid);
                current = stat.ppid;
            }
            _ => break,
        }
    }
    chain
}
