//! cohost-runner: the in-pane launcher. tmux starts `cohost-runner <SESSION_DIR>` as the pane's
//! process; it reads `SESSION_DIR/launch.json`, seeds `~/.claude.json`, starts the agent TUI as a
//! child on the pane's terminal, and reports `started`/`exited`/`stopped`/`error` lines in
//! `SESSION_DIR/runner.jsonl`. After an exit it waits, without polling, for SIGUSR1 (relaunch)
//! or SIGTERM/SIGHUP (stop). It owns the child's lifecycle and nothing else: it must never read
//! stdin (the terminal belongs to the child), never exit on its own while the pane should stay
//! inspectable, and never let a keyboard signal (SIGINT, SIGQUIT, SIGTSTP) meant for the child
//! take it down.

#![deny(clippy::print_stdout, clippy::print_stderr)]

use cohost_protocol::boundary;
mod journal;
mod launch;
mod seed;
mod sys;

use std::io::Write;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{Child, ExitStatus};
use std::time::{Duration, Instant};

use journal::{Event, Journal, now_ms};
use launch::{Launch, LaunchExt};
use sys::{SignalSet, TtyModes, c_int};

/// How long a child gets to exit after the runner forwards SIGTERM/SIGHUP, before SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// Signals the runner takes synchronously. Keyboard signals are taken and dropped: the child,
/// in the same foreground process group, gets its own copy from the terminal.
const WAITED: [c_int; 7] = [
    sys::SIGUSR1,
    sys::SIGTERM,
    sys::SIGHUP,
    sys::SIGCHLD,
    sys::SIGINT,
    sys::SIGQUIT,
    sys::SIGTSTP,
];

fn main() {
    let Some(dir) = std::env::args_os().nth(1).map(PathBuf::from) else {
        let _ = writeln!(std::io::stderr(), "usage: cohost-runner <SESSION_DIR>");
        std::process::exit(2);
    };
    std::process::exit(Runner::new(dir).run());
}

/// What to do once a launch attempt is over.
enum Next {
    /// SIGUSR1 came: read launch.json again and launch.
    Relaunch,
    /// Nothing asked for yet: show the hint and wait.
    Idle,
    /// SIGTERM/SIGHUP came: record `stopped` and exit 0.
    Stop(c_int),
}

struct Runner {
    dir: PathBuf,
    journal: Journal,
    pid: u32,
    launch: u32,
    tty: Option<TtyModes>,
}

impl Runner {
    fn new(dir: PathBuf) -> Self {
        Runner {
            journal: Journal::new(dir.join("runner.jsonl")),
            dir,
            pid: std::process::id(),
            launch: 0,
            tty: TtyModes::save(),
        }
    }

    fn run(&mut self) -> i32 {
        let waited = match SignalSet::of(&WAITED) {
            Ok(set) => set,
            Err(error) => return self.fatal(&format!("cannot build the signal set: {error}")),
        };
        // SIGTTOU/SIGTTIN are blocked too, so restoring the terminal can never stop the runner.
        let blocked = SignalSet::of(&[&WAITED[..], &[sys::SIGTTOU, sys::SIGTTIN]].concat());
        if let Err(error) = blocked.and_then(|set| set.block()) {
            return self.fatal(&format!("cannot block signals: {error}"));
        }

        loop {
            self.launch += 1;
            let (next, hint) = self.attempt(&waited);
            let next = match next {
                Next::Idle => {
                    self.say(&hint);
                    self.wait_idle(&waited)
                }
                other => other,
            };
            match next {
                Next::Relaunch => continue,
                Next::Stop(signal) => {
                    self.journal.append(&Event::Stopped {
                        runner_pid: self.pid,
                        signal,
                        at: now_ms(),
                        launch: self.launch,
                    });
                    return 0;
                }
                Next::Idle => unreachable!("wait_idle never returns Idle"),
            }
        }
    }

    /// Reads launch.json, seeds, starts the child and supervises it. Returns what comes next and
    /// the line to show in the pane if the runner goes idle.
    fn attempt(&mut self, waited: &SignalSet) -> (Next, String) {
        let fallback_id = self
            .dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "<id>".into());
        let launch = match Launch::read(&self.dir.join("launch.json")) {
            Ok(launch) => launch,
            Err(message) => {
                self.error(&message);
                return (
                    Next::Idle,
                    idle_hint(&format!("launch failed: {message}"), &fallback_id),
                );
            }
        };
        let id = launch.hint_id().unwrap_or(&fallback_id).to_string();
        if let Some(seed) = &launch.seed_claude {
            for message in seed::apply(seed) {
                self.journal.append(&Event::Warning {
                    runner_pid: self.pid,
                    message: message.clone(),
                    at: now_ms(),
                    launch: self.launch,
                });
            }
        }
        let mut command = launch.command();
        sys::hang_up_with_parent(&mut command);
        let child = match command.spawn() {
            Ok(child) => child,
            Err(error) => {
                let message = format!("cannot start {:?}: {error}", launch.argv[0]);
                self.error(&message);
                return (
                    Next::Idle,
                    idle_hint(&format!("launch failed: {message}"), &id),
                );
            }
        };
        let pid = child.id();
        self.journal.append(&Event::Started {
            runner_pid: self.pid,
            pid,
            at: now_ms(),
            launch: self.launch,
        });
        let (next, status) = self.supervise(child, waited);
        let what = match status {
            Some(status) => describe(status),
            None => "exited".into(),
        };
        (
            next,
            idle_hint(&format!("{} {what}", launch.program_name()), &id),
        )
    }

    /// Waits for the child to exit, taking signals meanwhile. A SIGUSR1 is remembered (relaunch
    /// right after the exit); SIGTERM/SIGHUP are forwarded and end the runner once the child is
    /// gone (SIGKILL after [`STOP_GRACE`]).
    fn supervise(&mut self, mut child: Child, waited: &SignalSet) -> (Next, Option<ExitStatus>) {
        let pid = child.id();
        let mut relaunch = false;
        let mut stop: Option<c_int> = None;
        let mut kill_at: Option<Instant> = None;
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break Some(status),
                Ok(None) => {}
                Err(error) => {
                    self.error(&format!("cannot wait for pid {pid}: {error}"));
                    break None;
                }
            }
            let timeout = kill_at.map(|at| at.saturating_duration_since(Instant::now()));
            match waited.wait(timeout) {
                Ok(None) => {
                    // The grace period is over.
                    let _ = child.kill();
                    kill_at = None;
                }
                Ok(Some(sys::SIGUSR1)) => relaunch = true,
                Ok(Some(signal @ (sys::SIGTERM | sys::SIGHUP))) => {
                    if stop.is_none() {
                        stop = Some(signal);
                        let _ = sys::send_signal(pid, signal);
                        kill_at = Some(Instant::now() + STOP_GRACE);
                    }
                }
                // SIGCHLD: loop to reap. Keyboard signals: the child got them itself.
                Ok(Some(_)) => {}
                Err(error) => {
                    self.error(&format!("waiting for signals failed: {error}"));
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
        };
        self.journal.append(&Event::Exited {
            runner_pid: self.pid,
            pid,
            code: status.and_then(|s| s.code()),
            signal: status.and_then(|s| s.signal()),
            at: now_ms(),
            launch: self.launch,
        });
        if let Some(tty) = &self.tty {
            let _ = tty.restore();
        }
        let next = match (stop, relaunch) {
            (Some(signal), _) => Next::Stop(signal),
            (None, true) => Next::Relaunch,
            (None, false) => Next::Idle,
        };
        (next, status)
    }

    /// No child: blocks until SIGUSR1 (relaunch) or SIGTERM/SIGHUP (stop).
    fn wait_idle(&mut self, waited: &SignalSet) -> Next {
        loop {
            match waited.wait(None) {
                Ok(Some(sys::SIGUSR1)) => return Next::Relaunch,
                Ok(Some(signal @ (sys::SIGTERM | sys::SIGHUP))) => return Next::Stop(signal),
                Ok(_) => {}
                Err(error) => {
                    self.error(&format!("waiting for signals failed: {error}"));
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
        }
    }

    fn error(&self, message: &str) {
        self.journal.append(&Event::Error {
            runner_pid: self.pid,
            message: message.to_string(),
            at: now_ms(),
            launch: self.launch,
        });
    }

    /// The runner cannot work at all: record it, show it, and exit 1.
    fn fatal(&self, message: &str) -> i32 {
        self.error(message);
        let _ = writeln!(std::io::stderr(), "cohost-runner: {message}");
        1
    }

    /// One line in the pane. `\r\n` and a visible cursor, since a killed TUI may have left the
    /// terminal in raw mode with the cursor hidden.
    fn say(&self, line: &str) {
        let mut out = std::io::stdout().lock();
        let _ = write!(out, "\x1b[?25h\r\n[cohost] {line}\r\n");
        let _ = out.flush();
    }
}

fn idle_hint(what: &str, id: &str) -> String {
    format!("{what}. Relaunch with: cohost relaunch {id}")
}

fn describe(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with code {code}"),
        (None, Some(signal)) => format!("was killed by signal {signal}"),
        (None, None) => "exited".into(),
    }
}
