//! The runner's only contact with libc: blocking signals and waiting for them synchronously
//! (`pthread_sigmask` + `sigtimedwait`), sending a signal to the child, and saving/restoring the
//! pane's terminal modes. Every `unsafe` block of the crate lives here, each as small as the call
//! it wraps. It must never install signal handlers or change signal dispositions: blocked
//! signals are consumed with `sigtimedwait`, and each child empties the inherited mask before
//! exec (std does not, on the fork/exec path a `pre_exec` hook takes), so it starts with
//! default signal handling.

use std::io;
use std::mem::MaybeUninit;
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::time::Duration;

pub use libc::{
    SIGCHLD, SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGTSTP, SIGTTIN, SIGTTOU, SIGUSR1, c_int,
};

/// A set of signals.
#[derive(Clone, Copy)]
pub struct SignalSet(libc::sigset_t);

impl SignalSet {
    pub fn of(signals: &[c_int]) -> io::Result<Self> {
        let mut set = MaybeUninit::<libc::sigset_t>::uninit();
        #[allow(unsafe_code)]
        // SAFETY: `set` is a valid, writable sigset_t; sigemptyset initializes all of it.
        let rc = unsafe { libc::sigemptyset(set.as_mut_ptr()) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        #[allow(unsafe_code)]
        // SAFETY: sigemptyset returned 0, so the set is initialized.
        let mut set = unsafe { set.assume_init() };
        for &signal in signals {
            #[allow(unsafe_code)]
            // SAFETY: `set` is an initialized sigset_t owned by this frame.
            let rc = unsafe { libc::sigaddset(&mut set, signal) };
            if rc != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(SignalSet(set))
    }

    /// Blocks these signals for the calling thread (the runner is single-threaded), so they stay
    /// pending until [`wait`](Self::wait) takes them. Must run before any child is spawned.
    pub fn block(&self) -> io::Result<()> {
        #[allow(unsafe_code)]
        // SAFETY: both pointers are valid for the call; a null old-set pointer is allowed.
        let rc = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &self.0, std::ptr::null_mut()) };
        if rc != 0 {
            return Err(io::Error::from_raw_os_error(rc));
        }
        Ok(())
    }

    /// Waits until one of these (blocked) signals is pending and takes it. `None` when `timeout`
    /// passes first. Interruptions (SIGSTOP/SIGCONT) are retried.
    pub fn wait(&self, timeout: Option<Duration>) -> io::Result<Option<c_int>> {
        let timespec = timeout.map(|t| libc::timespec {
            tv_sec: libc::time_t::try_from(t.as_secs()).unwrap_or(libc::time_t::MAX),
            tv_nsec: libc::c_long::from(t.subsec_nanos() as i32),
        });
        let timeout_ptr = timespec
            .as_ref()
            .map_or(std::ptr::null(), |t| t as *const libc::timespec);
        loop {
            #[allow(unsafe_code)]
            // SAFETY: the set is initialized, a null siginfo pointer is allowed, and the timeout
            // pointer is null or points at `timespec`, which outlives the call.
            let rc = unsafe { libc::sigtimedwait(&self.0, std::ptr::null_mut(), timeout_ptr) };
            if rc > 0 {
                return Ok(Some(rc));
            }
            let error = io::Error::last_os_error();
            match error.raw_os_error() {
                Some(libc::EAGAIN) => return Ok(None),
                Some(libc::EINTR) => continue,
                _ => return Err(error),
            }
        }
    }
}

/// Sends `signal` to process `pid`.
pub fn send_signal(pid: u32, signal: c_int) -> io::Result<()> {
    let pid = libc::pid_t::try_from(pid).map_err(io::Error::other)?;
    #[allow(unsafe_code)]
    // SAFETY: kill has no memory-safety preconditions.
    let rc = unsafe { libc::kill(pid, signal) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Makes the child get SIGHUP if the runner dies (even by SIGKILL), as it would if the pane
/// closed, so a TUI never outlives its supervisor unseen. If the runner is already gone when the
/// child starts, the spawn fails instead. The child also unblocks every signal the runner
/// blocked: a blocked mask survives exec, and a TUI that inherited it would never see SIGTERM,
/// SIGHUP or SIGINT.
pub fn hang_up_with_parent(cmd: &mut Command) {
    let runner_pid = std::process::id();
    #[allow(unsafe_code)]
    // SAFETY: the closure runs in the forked child before exec and only makes async-signal-safe
    // calls (sigemptyset, pthread_sigmask, prctl, getppid) on its own stack; it allocates
    // nothing and touches no locks.
    unsafe {
        cmd.pre_exec(move || {
            let mut empty = MaybeUninit::<libc::sigset_t>::uninit();
            if libc::sigemptyset(empty.as_mut_ptr()) != 0 {
                return Err(io::Error::last_os_error());
            }
            let rc = libc::pthread_sigmask(libc::SIG_SETMASK, empty.as_ptr(), std::ptr::null_mut());
            if rc != 0 {
                return Err(io::Error::from_raw_os_error(rc));
            }
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGHUP) != 0 {
                return Err(io::Error::last_os_error());
            }
            if u32::try_from(libc::getppid()).ok() != Some(runner_pid) {
                // The runner is already gone (ESRCH: no such process).
                return Err(io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        });
    }
}

/// The terminal modes of stdin (the pane) when it is a terminal.
pub struct TtyModes(libc::termios);

impl TtyModes {
    /// Saves the pane's modes, or `None` when stdin is not a terminal.
    pub fn save() -> Option<Self> {
        let mut termios = MaybeUninit::<libc::termios>::uninit();
        #[allow(unsafe_code)]
        // SAFETY: `termios` is a valid, writable termios; tcgetattr fills it on success.
        let rc = unsafe { libc::tcgetattr(libc::STDIN_FILENO, termios.as_mut_ptr()) };
        if rc != 0 {
            return None;
        }
        #[allow(unsafe_code)]
        // SAFETY: tcgetattr returned 0, so `termios` is initialized.
        let termios = unsafe { termios.assume_init() };
        Some(TtyModes(termios))
    }

    /// Puts the saved modes back (a TUI killed by a signal leaves the pane in raw mode).
    pub fn restore(&self) -> io::Result<()> {
        #[allow(unsafe_code)]
        // SAFETY: `self.0` is an initialized termios from tcgetattr.
        let rc = unsafe { libc::tcsetattr(libc::STDIN_FILENO, libc::TCSADRAIN, &self.0) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}
