//! What the watchers learn from `/proc`: whether an agent's process lives (pid plus its start
//! time, so a reused pid is not mistaken for it), its parents (placement in a tmux pane), which
//! process holds a record file open (agents whose records name no pid), and an exit notice
//! through a pidfd (no timer: the kernel wakes us when the process ends).
//!
//! Never writes anything, never signals a process.

use std::collections::{HashMap, HashSet};
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::PathBuf;

/// The fields of `/proc/<pid>/stat` the watchers use.
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

/// Climbs from `pid` while the parent is also one of the agent's processes (`names`): the
/// rollout holder is Codex's `app-server`, its parent the TUI a person runs.
pub fn climb(pid: u32, names: &[&str]) -> u32 {
    let mut current = pid;
    for _ in 0..16 {
        let Some(stat) = stat(current) else { break };
        if stat.ppid <= 1 || !comm(stat.ppid).is_some_and(|c| names.contains(&c.as_str())) {
            break;
        }
        current = stat.ppid;
    }
    current
}

/// How many processes one [`find_holders`] call looked at (the bench counts them).
#[derive(Debug, Default, Clone, Copy)]
pub struct ScanCost {
    pub processes: u64,
    pub fds: u64,
}

/// The processes named one of `names` that hold one of `wanted` open, by file: one pass over
/// `/proc`, reading only the fd links of processes whose name matches.
pub fn find_holders(
    wanted: &HashSet<PathBuf>,
    names: &[&str],
    cost: &mut ScanCost,
) -> HashMap<PathBuf, u32> {
    let mut found = HashMap::new();
    if wanted.is_empty() || names.is_empty() {
        return found;
    }
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return found;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        cost.processes += 1;
        if !comm(pid).is_some_and(|c| names.contains(&c.as_str())) {
            continue;
        }
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            cost.fds += 1;
            if let Ok(target) = std::fs::read_link(fd.path())
                && wanted.contains(&target)
            {
                found.entry(target).or_insert(pid);
            }
        }
    }
    found
}

/// A pidfd for `pid` (Linux 5.3+): readable once the process has exited. `None` when the
/// process is gone or the kernel refuses (then the engine's slow timer checks instead).
#[allow(unsafe_code)]
pub fn pidfd(pid: u32) -> Option<OwnedFd> {
    let pid = libc::pid_t::try_from(pid).ok()?;
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1; the
    // descriptor is owned by the returned value and closed on drop.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return None;
    }
    let fd = i32::try_from(fd).ok()?;
    // SAFETY: `fd` is a fresh descriptor nobody else owns.
    Some(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A pidfd for `pid` on the current tokio reactor: readable once the process has exited. Call it
/// within the runtime's context (`Handle::enter`).
#[allow(unsafe_code)]
pub fn exit_notice(pid: u32) -> Option<tokio::io::unix::AsyncFd<OwnedFd>> {
    let fd = pidfd(pid)?;
    // SAFETY: the `OwnedFd` is moved into the `AsyncFd`, so the descriptor stays open and the
    // same until the `AsyncFd` drops.
    unsafe { tokio::io::unix::AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE) }
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_lives_and_has_parents() {
        let me = std::process::id();
        let stat = stat(me).expect("own stat");
        assert!(alive(me, Some(stat.start_time)));
        assert!(
            !alive(me, Some(stat.start_time + 1)),
            "another start time is another process"
        );
        assert_eq!(ancestors(me)[0], me);
        assert!(pidfd(me).is_some(), "pidfd_open works here");
    }

    #[test]
    fn holders_are_found_by_open_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("held.jsonl");
        let _file = std::fs::File::create(&path).expect("create");
        let path = path.canonicalize().expect("canonical");
        let name = comm(std::process::id()).expect("own comm");
        let wanted: HashSet<PathBuf> = [path.clone()].into();
        let mut cost = ScanCost::default();
        let found = find_holders(&wanted, &[name.as_str()], &mut cost);
        assert_eq!(found.get(&path), Some(&std::process::id()));
        assert!(cost.processes > 0 && cost.fds > 0);
    }
}
