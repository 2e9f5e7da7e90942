//! Who runs the core: its thread, or an appending caller that finds it idle.
//!
//! Every input goes into the core's channel, and the core thread takes it from there in
//! batches — except an append that finds the core idle while the load comes one at a time: it
//! handles its own event as a batch of one, on its own thread, and the core thread is neither
//! woken nor wakes the caller back. Those two hand-offs were most of what a lone request cost
//! above its `fdatasync` (docs/benchmarks.md). One batch at a time under the core's lock: the
//! single writer is the lock, not the thread.
//!
//! "Idle" is `pending == 0`: every input sent has been handled, so an event handled out of the
//! channel's order cannot overtake one its own caller sent before (an input is counted until its
//! batch is done, and a batch's answers go out only after that). "One at a time" is `lone`: the
//! last [`LONE_STREAK`] batches were each one input with nothing pending behind it when it was
//! done. Under load the core thread takes everything, in batches that share one `fdatasync`: a
//! caller leading a batch of one there would pay a flush for a single event and hold its tokio
//! worker meanwhile (measured with one lone batch as the condition: 0.90–0.93× the rate at 64
//! connections, about one batch in ten led). At one request at a time, the worker a leader holds
//! for the write and its `fdatasync` is one the load does not need.
//!
//! A batch that panics, on either thread, leaves the core's state unknown: the panic is caught
//! where the lock is held, the core is marked failed ([`Shared::failure`]), and from then on
//! every input is refused with [`CoreError::Failed`] and nothing more is written, not even
//! `daemon.stopped`. The daemon stops on it with an error (`daemon.rs`), so a supervisor
//! restarts it, and the next start recovers from the log as after a crash.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::writer::{Core, Reply};
use super::{CoreError, CoreInput, EventKind, Guard};

/// Lone batches in a row before a caller may lead. At 64 connections, with one lone batch as the
/// condition, about one batch in ten was led (measured); with four in a row, fewer than one in
/// forty-eight, and the rate was the same as without leading.
const LONE_STREAK: usize = 4;

pub(super) struct Shared {
    /// Inputs sent into the channel and not yet handled, plus a leading caller's own.
    pending: AtomicUsize,
    /// How many batches in a row were one input with nothing pending when they were done.
    lone: AtomicUsize,
    core: Mutex<Core>,
    /// Why the core stopped taking events, once a batch panicked.
    failure: OnceLock<String>,
    /// Cancelled when `failure` is set, for whoever must stop with it.
    failed: CancellationToken,
    /// Appends their callers handled, for the tests.
    #[cfg(test)]
    pub(super) led: AtomicUsize,
}

impl Shared {
    pub(super) fn new(core: Core) -> Self {
        Shared {
            pending: AtomicUsize::new(0),
            lone: AtomicUsize::new(0),
            core: Mutex::new(core),
            failure: OnceLock::new(),
            failed: CancellationToken::new(),
            #[cfg(test)]
            led: AtomicUsize::new(0),
        }
    }

    /// Sends `input` to the core thread, counted as pending until it is handled.
    pub(super) fn send(
        &self,
        tx: &mpsc::Sender<CoreInput>,
        input: CoreInput,
    ) -> Result<(), CoreError> {
        self.pending.fetch_add(1, Ordering::SeqCst);
        tx.try_send(input).map_err(|error| {
            self.pending.fetch_sub(1, Ordering::SeqCst);
            match error {
                mpsc::error::TrySendError::Full(_) => CoreError::Overloaded,
                mpsc::error::TrySendError::Closed(_) => self.closed(),
            }
        })
    }

    /// What an input the core no longer takes is refused with: the core failed, or the daemon
    /// is stopping.
    pub(super) fn closed(&self) -> CoreError {
        if self.failure.get().is_some() {
            CoreError::Failed
        } else {
            CoreError::ShuttingDown
        }
    }

    /// Why the core failed, if it did.
    pub(super) fn failure(&self) -> Option<&str> {
        self.failure.get().map(String::as_str)
    }

    /// Cancelled once the core failed.
    pub(super) fn failed(&self) -> CancellationToken {
        self.failed.clone()
    }

    /// Plants a panic in the next batch, right after its write (`panic_tests`).
    #[cfg(test)]
    pub(super) fn plant_panic(&self) {
        self.lock().panic_after_write = true;
    }

    /// Marks the core failed by a batch's panic (`payload`), the first cause kept.
    fn fail(&self, payload: Box<dyn std::any::Any + Send>) {
        let message = super::panic_message(payload.as_ref());
        tracing::error!(
            panic = %message,
            "the core panicked while handling a batch; it takes no more events and the daemon stops"
        );
        let _ = self.failure.set(format!("a batch panicked: {message}"));
        self.failed.cancel();
    }

    /// Handles an append here when the core is idle and the load comes one at a time; sends it
    /// to the core thread otherwise.
    pub(super) fn append(
        &self,
        tx: &mpsc::Sender<CoreInput>,
        (session, kind, guard): (Option<String>, EventKind, Guard),
        reply: Reply,
    ) -> Result<(), CoreError> {
        let lead = self.lone.load(Ordering::SeqCst) >= LONE_STREAK
            && self
                .pending
                .compare_exchange(0, 1, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok();
        if !lead {
            let input = CoreInput::Append {
                session,
                kind,
                guard,
                reply,
            };
            return self.send(tx, input);
        }
        let mut core = self.lock();
        // Closed under this lock by `Core::stop` (nothing is written after daemon.stopped) or
        // by a failure.
        let led = if tx.is_closed() || self.failure.get().is_some() {
            Err(self.closed())
        } else {
            #[cfg(test)]
            self.led.fetch_add(1, Ordering::SeqCst);
            let handled = catch_unwind(AssertUnwindSafe(|| {
                core.append_one(session, kind, guard, reply)
            }));
            match handled {
                Ok(()) => Ok(core.take_replies()),
                Err(payload) => {
                    // The batch's answers are dropped: its callers hear `Failed`.
                    drop(core.take_replies());
                    self.fail(payload);
                    Err(CoreError::Failed)
                }
            }
        };
        drop(core);
        let left = self.pending.fetch_sub(1, Ordering::SeqCst) - 1;
        self.count_lone(1, left);
        led.map(|replies| replies.send())
    }

    fn count_lone(&self, taken: usize, left: usize) {
        if taken == 1 && left == 0 {
            let _ = self
                .lone
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                    Some(n.saturating_add(1))
                });
        } else {
            self.lone.store(0, Ordering::SeqCst);
        }
    }

    /// The core thread: takes inputs from the channel in batches until a shutdown, or until
    /// every handle is gone.
    pub(super) fn run(&self, mut rx: mpsc::Receiver<CoreInput>) {
        while let Some(first) = rx.blocking_recv() {
            let mut core = self.lock();
            if self.failure.get().is_some() {
                // A caller's batch failed: nothing more is written.
                drop(core);
                refuse_one(first);
                self.refuse_rest(&mut rx);
                return;
            }
            let (taken, shutdown) =
                match catch_unwind(AssertUnwindSafe(|| core.step(first, &mut rx))) {
                    Ok(stepped) => stepped,
                    Err(payload) => {
                        // The batch's answers are dropped: its callers hear `Failed`.
                        drop(core.take_replies());
                        drop(core);
                        self.fail(payload);
                        self.refuse_rest(&mut rx);
                        return;
                    }
                };
            let replies = core.take_replies();
            if let Some(reply) = shutdown {
                replies.send();
                core.stop(&mut rx, Some(reply));
                return;
            }
            drop(core);
            let left = self.pending.fetch_sub(taken, Ordering::SeqCst) - taken;
            self.count_lone(taken, left);
            replies.send();
        }
        if self.failure.get().is_none() {
            self.lock().stop(&mut rx, None);
        } else {
            tracing::error!("the core failed earlier; daemon.stopped not written");
        }
    }

    /// The core. A batch's panic is caught under the lock (`fail`), so only `Core::stop` could
    /// leave it poisoned, and nothing is written after that.
    fn lock(&self) -> MutexGuard<'_, Core> {
        self.core.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// After a failure: refuses everything queued or sent later, and closes the channel.
    fn refuse_rest(&self, rx: &mut mpsc::Receiver<CoreInput>) {
        rx.close();
        while let Ok(input) = rx.try_recv() {
            refuse_one(input);
        }
    }
}

/// An input after a failure: an append refused, a shutdown answered at once (there is nothing
/// to write).
fn refuse_one(input: CoreInput) {
    match input {
        CoreInput::Append { reply, .. } => {
            let _ = reply.send(Err(CoreError::Failed));
        }
        CoreInput::Shutdown { reply } => {
            let _ = reply.send(());
        }
        CoreInput::Publish { .. } | CoreInput::Tick => {}
    }
}
