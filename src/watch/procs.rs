//! What the watchers learn from `/proc`: whether an agent's process lives (pid plus its start
//! time, so a reused pid is not mistaken for it), its parents (placement in a tmux pane), which
//! process holds a record file open (agents whose records name no pid), and an exit notice
//! through a pidfd (no timer: the kernel wakes us when the process ends).
//!
//! Never writes anything, never signals a process.

use std::collections::{HashMap, HashSet};
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::PathBuf;

pub use crate::process::{Stat, alive, ancestors, comm, stat};

/// Every process's children, from one pass over `/proc`.
pub fn children() -> HashMap<u32, Vec<u32>> {
    let mut tree: HashMap<u32, Vec<u32>> = HashMap::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return tree;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if let Some(stat) = stat(pid)
            && !stat.zombie
        {
            tree.entry(stat.ppid).or_default().push(pid);
        }
    }
    tree
}

/// The live descendants of `pid` (not `pid` itself), from a [`children`] map.
pub fn descendants(pid: u32, tree: &HashMap<u32, Vec<u32>>) -> Vec<u32> {
    let mut out = Vec::new();
    let mut stack = vec![pid];
    while let Some(parent) = stack.pop() {
        for child in tree.get(&parent).into_iter().flatten() {
            if out.len() < 4096 && !out.contains(child) {
                out.push(*child);
                stack.push(*child);
            }
        }
    }
    out
}

/// How many processes one [`list_processes`] call looked at (the bench counts them).
#[derive(Debug, Default, Clone, Copy)]
pub struct ScanCost {
    pub processes: u64,
    pub fds: u64,
}

/// Every live process named one of `names`, with what a format needs to pick its agent: parent,
/// arguments, cwd, start time, and which of `wanted` it holds open. One pass over `/proc`;
/// only processes whose name matches are read further.
pub fn list_processes(
    names: &[&str],
    wanted: &HashSet<PathBuf>,
    cost: &mut ScanCost,
) -> Vec<crate::watch::format::ProcessFacts> {
    let mut found = Vec::new();
    if names.is_empty() {
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
        let Some(comm) = comm(pid).filter(|c| names.contains(&c.as_str())) else {
            continue;
        };
        let Some(stat) = stat(pid).filter(|s| !s.zombie) else {
            continue;
        };
        let args = std::fs::read(format!("/proc/{pid}/cmdline"))
            .map(|bytes| {
                bytes
                    .split(|b| *b == 0)
                    .filter(|arg| !arg.is_empty())
                    .map(|arg| String::from_utf8_lossy(arg).into_owned())
                    .collect()
            })
            .unwrap_or_default();
        let cwd = std::fs::read_link(format!("/proc/{pid}/cwd")).ok();
        let mut holds = Vec::new();
        if !wanted.is_empty()
            && let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd"))
        {
            for fd in fds.flatten() {
                cost.fds += 1;
                if let Ok(target) = std::fs::read_link(fd.path())
                    && wanted.contains(&target)
                    && !holds.contains(&target)
                {
                    holds.push(target);
                }
            }
        }
        found.push(crate::watch::format::ProcessFacts {
            pid,
            ppid: stat.ppid,
            comm,
            args,
            cwd,
            start_time: stat.start_time,
            holds,
        });
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
    fn descendants_include_a_child() {
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .expect("spawn sleep");
        let tree = children();
        let found = descendants(std::process::id(), &tree);
        let _ = child.kill();
        let _ = child.wait();
        assert!(found.contains(&child.id()), "{found:?}");
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
        let found = list_processes(&[name.as_str()], &wanted, &mut cost);
        let me = found
            .iter()
            .find(|p| p.pid == std::process::id())
            .expect("this process is listed");
        assert_eq!(me.holds, vec![path.clone()]);
        assert_eq!(me.cwd, std::env::current_dir().ok());
        assert!(cost.processes > 0 && cost.fds > 0);
    }
}
