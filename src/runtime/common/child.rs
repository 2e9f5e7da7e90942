//! The children the runtimes start and supervise (codex's `app-server`, `opencode serve`,
//! `pi --mode rpc`): each the leader of its own process group with a parent-death signal
//! ([`spawn_in_group`]), the whole group SIGKILLed when its guard is dropped
//! ([`KillGroupOnDrop`], [`signal_group`]); and, for a child whose stderr needs no more than
//! its last lines, [`supervise`]: the stderr followed into a bounded [`OutputTail`] for error
//! messages, the exit watched ([`Group`]), both logged by the owner ([`ChildLog`], so the lines
//! keep its log target).

use std::collections::VecDeque;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::sync::watch;

use super::lock;

/// How many of a child's last output lines an [`OutputTail`] keeps.
const TAIL_LINES: usize = 30;
/// The longest line an [`OutputTail`] keeps (a longer one is cut, with `…`).
const TAIL_LINE_MAX: usize = 400;

/// `; its last output:` and the tail, for the end of an error message (empty when the child
/// printed nothing).
pub fn tail_suffix(tail: &str) -> String {
    if tail.is_empty() {
        String::new()
    } else {
        format!("; its last output:\n{tail}")
    }
}

/// The bounded tail of a child's output: its last lines, each cut to a length. Cheap to clone
/// (the clones share the lines).
#[derive(Clone, Default)]
pub struct OutputTail(Arc<Mutex<VecDeque<String>>>);

impl OutputTail {
    /// Appends a line (its trailing white space trimmed), dropping the oldest one when full.
    pub fn push(&self, line: &str) {
        let mut line = line.trim_end().to_string();
        if line.len() > TAIL_LINE_MAX {
            let mut cut = TAIL_LINE_MAX;
            while !line.is_char_boundary(cut) {
                cut -= 1;
            }
            line.truncate(cut);
            line.push('…');
        }
        let mut lines = lock(&self.0);
        if lines.len() == TAIL_LINES {
            lines.pop_front();
        }
        lines.push_back(line);
    }

    /// The kept lines joined with newlines (empty when there are none).
    pub fn render(&self) -> String {
        lock(&self.0).iter().cloned().collect::<Vec<_>>().join("\n")
    }

    /// Starts a task that reads `reader` line by line into this tail until it ends, each line
    /// passed to `log` first.
    fn follow<R>(&self, reader: R, pid: u32, log: fn(u32, &str))
    where
        R: AsyncRead + Unpin + Send + 'static,
    {
        let tail = self.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(reader).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                log(pid, &line);
                tail.push(&line);
            }
        });
    }
}

/// Spawns `command` as the leader of a process group of its own, killed (the leader) when the
/// returned [`Child`] is dropped and, on Linux, when the daemon dies.
///
/// The kernel sends the parent-death signal when the *thread* that spawned the child exits, so
/// call this from a runtime worker or the main thread, never from a `spawn_blocking` thread
/// that may be retired.
pub fn spawn_in_group(command: &mut Command) -> std::io::Result<Child> {
    command.kill_on_drop(true).process_group(0);
    set_parent_death_signal(command);
    command.spawn()
}

/// How a [`supervise`]d child is logged, by its owner (so the log lines keep the owner's
/// target and words).
#[derive(Clone, Copy)]
pub struct ChildLog {
    /// One line the child wrote to stderr.
    pub line: fn(pid: u32, line: &str),
    /// The child's exit (its status, or why waiting for it failed).
    pub exit: fn(pid: u32, status: &std::io::Result<ExitStatus>),
}

/// A child started by [`supervise`], as its owner keeps it.
pub struct Supervised {
    pub pid: u32,
    /// The last lines of its stderr.
    pub tail: OutputTail,
    /// Its stdin, when the command piped it.
    pub stdin: Option<ChildStdin>,
    /// Its stdout (always piped).
    pub stdout: Option<ChildStdout>,
    pub group: Group,
}

/// The process group of a [`supervise`]d child: whether it has exited, signals to the group,
/// and the whole group SIGKILLed when this is dropped.
pub struct Group {
    exited: watch::Receiver<bool>,
    guard: KillGroupOnDrop,
}

/// Spawns `command` ([`spawn_in_group`]) with its stdout and stderr piped (its stdin as the
/// command sets it), follows its stderr into an [`OutputTail`] and watches its exit, each
/// stderr line and the exit logged through `log`.
pub fn supervise(command: &mut Command, log: ChildLog) -> std::io::Result<Supervised> {
    command.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = spawn_in_group(command)?;
    let pid = child.id().unwrap_or_default();
    let guard = KillGroupOnDrop::new(pid);
    let tail = OutputTail::default();
    if let Some(stderr) = child.stderr.take() {
        tail.follow(stderr, pid, log.line);
    }
    let stdin = child.stdin.take();
    let stdout = child.stdout.take();
    let (exited_tx, exited) = watch::channel(false);
    tokio::spawn(async move {
        let status = child.wait().await;
        (log.exit)(pid, &status);
        let _ = exited_tx.send(true);
    });
    Ok(Supervised {
        pid,
        tail,
        stdin,
        stdout,
        group: Group { exited, guard },
    })
}

impl Group {
    /// Whether the child has exited.
    pub fn has_exited(&self) -> bool {
        *self.exited.borrow()
    }

    /// Waits until the child has exited.
    pub async fn exited(&self) {
        let mut exited = self.exited.clone();
        let _ = exited.wait_for(|e| *e).await;
    }

    /// Sends `signal` to the whole group.
    pub fn signal(&self, signal: libc::c_int) {
        signal_group(self.guard.pgid, signal);
    }

    /// Gives the child up to `grace` to exit, then SIGKILLs the whole group.
    pub async fn kill_after(&self, grace: Duration) {
        let _ = tokio::time::timeout(grace, self.exited()).await;
        self.signal(libc::SIGKILL);
    }
}

/// SIGKILLs a process group when dropped, unless disarmed.
pub struct KillGroupOnDrop {
    pgid: u32,
    armed: bool,
}

impl KillGroupOnDrop {
    /// A guard over the group `pgid` (a child's pid, as it leads its own group), armed.
    pub fn new(pgid: u32) -> Self {
        KillGroupOnDrop { pgid, armed: true }
    }

    /// Dropping the guard no longer signals the group.
    pub fn disarm(&mut self) {
        self.armed = false;
    }
}

impl Drop for KillGroupOnDrop {
    fn drop(&mut self) {
        if self.armed {
            signal_group(self.pgid, libc::SIGKILL);
        }
    }
}

/// Sends `signal` to the process group `pgid` (the child's pid, as it leads its own group); a
/// group that is gone already is no error.
pub fn signal_group(pgid: u32, signal: libc::c_int) {
    let Ok(pgid) = libc::pid_t::try_from(pgid) else {
        return;
    };
    if pgid <= 1 {
        return; // never signal "every process" or init by accident
    }
    // `kill` with a negative pid signals the group; it is a plain syscall with no memory
    // safety concerns, which the libc crate nevertheless marks unsafe.
    #[allow(unsafe_code)]
    // SAFETY: kill(2) takes two integers and touches no memory of ours.
    let result = unsafe { libc::kill(-pgid, signal) };
    if result == -1 {
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::ESRCH) {
            tracing::warn!(pgid, signal, %err, "signalling a child's process group failed");
        }
    }
}

#[cfg(target_os = "linux")]
fn set_parent_death_signal(command: &mut Command) {
    let parent_pid = libc::pid_t::try_from(std::process::id()).unwrap_or(0);
    #[allow(unsafe_code)]
    // SAFETY: the closure runs in the forked child before exec, where only async-signal-safe
    // calls are allowed: it calls prctl(2) and getppid(2) (plain syscalls), reads errno, and
    // builds an io::Error from a raw OS code — no allocation, no locks, nothing shared with
    // other threads of the parent. `parent_pid` is a copied integer.
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            ) == -1
            {
                return Err(std::io::Error::last_os_error());
            }
            // The daemon may have died between fork and prctl; then no signal will ever come.
            if libc::getppid() != parent_pid {
                return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        });
    }
}

#[cfg(not(target_os = "linux"))]
fn set_parent_death_signal(_command: &mut Command) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_keeps_the_last_lines_each_cut_to_a_length() {
        let tail = OutputTail::default();
        for n in 0..TAIL_LINES + 5 {
            tail.push(&format!("line {n}  \n"));
        }
        let rendered = tail.render();
        let lines: Vec<&str> = rendered.lines().collect();
        assert_eq!(lines.len(), TAIL_LINES);
        assert_eq!(lines[0], "line 5");
        assert_eq!(lines[TAIL_LINES - 1], format!("line {}", TAIL_LINES + 4));
        tail.push(&"é".repeat(TAIL_LINE_MAX));
        let long = tail.render().lines().last().unwrap().to_string();
        assert!(long.ends_with('…') && long.len() <= TAIL_LINE_MAX + '…'.len_utf8());
    }

    #[test]
    fn the_suffix_is_empty_without_output() {
        assert_eq!(tail_suffix(""), "");
        assert_eq!(tail_suffix("boom"), "; its last output:\nboom");
    }
}
