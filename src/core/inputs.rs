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

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::mpsc;

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
                mpsc::error::TrySendError::Closed(_) => CoreError::ShuttingDown,
            }
        })
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
        let led = match self.core.lock() {
            // Closed under this lock by `Core::stop`: nothing is written after daemon.stopped.
            Ok(_) if tx.is_closed() => Err(CoreError::ShuttingDown),
            Ok(mut core) => {
                #[cfg(test)]
                self.led.fetch_add(1, Ordering::SeqCst);
                core.append_one(session, kind, guard, reply);
                Ok(core.take_replies())
            }
            // A batch panicked with the core held; see `run`.
            Err(_) => Err(CoreError::ShuttingDown),
        };
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
            let Ok(mut core) = self.core.lock() else {
                // A caller's batch panicked with the core held: nothing more can be written
                // safely. What waits is refused, and so is everything after.
                tracing::error!("the core panicked while handling a batch; refusing every event");
                rx.close();
                return;
            };
            let (taken, shutdown) = core.step(first, &mut rx);
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
        match self.core.lock() {
            Ok(mut core) => core.stop(&mut rx, None),
            Err(_) => tracing::error!("the core panicked earlier; daemon.stopped not written"),
        }
    }
}
