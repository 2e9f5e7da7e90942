//! Reading the event log: a page after a cursor, optionally for one session, optionally waiting
//! for the next event (the long-poll of `GET /api/events` and MCP's `events` tool). Reads skip
//! seqs with no stored event (a damaged log) and report them once, as `gaps`, so no cursor ever
//! stalls. The SSE stream (HTTP only) reuses [`Service::read_events`] for its catch-up.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::broadcast;

use super::{Service, ServiceError};
use crate::core::{CoreError, StoredEvent};
use crate::protocol::{Field, SeqRange, message};

/// The default and largest page.
pub const DEFAULT_LIMIT: usize = 100;
pub const MAX_LIMIT: usize = 1000;
/// The longest wait a long-poll may ask for.
pub const MAX_WAIT_SECS: f64 = 300.0;

/// A read request, validated by [`Service::events`].
#[derive(Debug, Clone)]
pub struct EventsRead {
    pub after: u64,
    pub limit: usize,
    pub session: Option<String>,
    pub wait: Duration,
}

/// A window of one session's events read backwards (`last=N`, `before=SEQ`).
#[derive(Debug, Clone)]
pub struct Window {
    pub events: Vec<Arc<StoredEvent>>,
    /// The last seq the window covers: a stream or forward read goes on after it.
    pub next: u64,
    pub head: u64,
    /// Seqs the window covers with no stored event (consecutive windows report each once).
    pub gaps: Vec<SeqRange>,
    /// The `before` of the previous window, when the session has older events.
    pub older_before: Option<u64>,
}

/// One page of events.
#[derive(Debug, Clone)]
pub struct Page {
    pub events: Vec<Arc<StoredEvent>>,
    /// Where the read stopped: the cursor for the next read.
    pub next: u64,
    pub head: u64,
    /// Seqs up to `next` with no stored event (a damaged log), skipped by this read.
    pub gaps: Vec<SeqRange>,
}

impl Service {
    /// The newest stored seq.
    pub fn head(&self) -> u64 {
        self.core.store.head()
    }

    /// The live broadcast: every event as it is stored (and live-only ones), in seq order.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<StoredEvent>> {
        self.core.subscribe()
    }

    /// A snapshot (`item.delta`, `snapshot: true`, offset 0) of each agent message streaming
    /// now in `session` (all when `None`): what a stream sends once it reaches the present.
    pub fn streaming_snapshot(&self, session: Option<&str>) -> Vec<Arc<StoredEvent>> {
        self.core.store.streaming().snapshot(session)
    }

    /// A cursor must not be ahead of the newest event.
    pub fn check_cursor(&self, after: u64) -> Result<(), ServiceError> {
        let head = self.core.store.head();
        if after > head {
            return Err(ServiceError::field(
                Field::After,
                format!("cursor {after} is ahead of the newest event {head}"),
            ));
        }
        Ok(())
    }

    /// The session must exist (for a per-session read).
    pub fn known_session(&self, id: &str) -> Result<(), ServiceError> {
        if self.core.read(|s| s.sessions.get(id).is_some()) {
            Ok(())
        } else {
            Err(ServiceError::unknown_session(id))
        }
    }

    /// Checks a wait in seconds and a limit.
    pub fn read_request(
        &self,
        after: u64,
        limit: Option<u64>,
        wait_secs: Option<f64>,
        session: Option<String>,
    ) -> Result<EventsRead, ServiceError> {
        if let Some(id) = &session {
            self.known_session(id)?;
        }
        let limit = match limit {
            Some(limit) if limit == 0 || limit > MAX_LIMIT as u64 => {
                return Err(ServiceError::field(
                    Field::Limit,
                    message![Field::Limit, format!(" must be between 1 and {MAX_LIMIT}")],
                ));
            }
            Some(limit) => limit as usize,
            None => DEFAULT_LIMIT,
        };
        let wait = match wait_secs {
            Some(wait) if !(0.0..=MAX_WAIT_SECS).contains(&wait) => {
                return Err(ServiceError::field(
                    Field::Wait,
                    message![
                        Field::Wait,
                        format!(" must be between 0 and {MAX_WAIT_SECS} seconds")
                    ],
                ));
            }
            Some(wait) => Duration::from_secs_f64(wait),
            None => Duration::ZERO,
        };
        self.check_cursor(after)?;
        Ok(EventsRead {
            after,
            limit,
            session,
            wait,
        })
    }

    /// Reads up to `limit` events after `after`, only `session`'s when given (through the
    /// store's per-session index: a session's next events however many of others lie
    /// between; a short page's `next` is the head).
    pub async fn read_events(
        &self,
        after: u64,
        limit: usize,
        session: Option<&str>,
    ) -> Result<Page, ServiceError> {
        let Some(session) = session else {
            let page = self.core.store.read_after_async(after, limit).await?;
            let next = page.events.last().map(|e| e.seq).unwrap_or(after);
            return Ok(Page {
                events: page.events,
                next,
                head: page.head,
                gaps: page.gaps,
            });
        };
        let page = self
            .core
            .store
            .read_session_async(session, after, limit)
            .await?;
        Ok(Page {
            events: page.events,
            next: page.next,
            head: page.head,
            gaps: page.gaps,
        })
    }

    /// The last `limit` events of `session` before seq `before` (its last events when
    /// `None`): the session index's binary search and `limit` events read, whatever the
    /// session's length. The caller checks `limit` (1 to [`MAX_LIMIT`]); a larger one is cut.
    pub async fn read_window(
        &self,
        session: &str,
        before: Option<u64>,
        limit: usize,
    ) -> Result<Window, ServiceError> {
        self.known_session(session)?;
        let window = self
            .core
            .store
            .read_window_async(session, before, limit.clamp(1, MAX_LIMIT))
            .await?;
        Ok(Window {
            events: window.events,
            next: window.next,
            head: window.head,
            gaps: window.gaps,
            older_before: window.older_before,
        })
    }

    /// A task's view once it has finished, or as it stands when `wait` runs out (or the
    /// daemon stops): a wait on the broadcast, no polling.
    pub async fn wait_task(
        &self,
        id: &str,
        wait: Duration,
    ) -> Result<crate::protocol::TaskView, ServiceError> {
        // Subscribe first: a change stored after the status read below is then in the channel.
        let mut live = self.core.subscribe();
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let task = self.tasks.status(id)?;
            if task.phase == crate::protocol::TaskPhase::Finished
                || tokio::time::Instant::now() >= deadline
            {
                return Ok(task);
            }
            tokio::select! {
                _ = tokio::time::sleep_until(deadline) => {}
                _ = self.shutdown.cancelled() => return Ok(task),
                received = live.recv() => {
                    if let Err(broadcast::error::RecvError::Closed) = received {
                        return Err(ServiceError::from(CoreError::ShuttingDown));
                    }
                }
            }
        }
    }

    /// A page of events; with a wait, blocks until one arrives for the filter (or the wait or
    /// the daemon ends). Gaps crossed while waiting are reported with the page.
    pub async fn events(&self, read: EventsRead) -> Result<Page, ServiceError> {
        // Subscribe first: an event published after the read below is then in the channel.
        let mut live = self.core.subscribe();
        let deadline = tokio::time::Instant::now() + read.wait;
        let mut cursor = read.after;
        let mut gaps = Vec::new();
        loop {
            let mut page = self
                .read_events(cursor, read.limit, read.session.as_deref())
                .await?;
            gaps.append(&mut page.gaps);
            if !page.events.is_empty()
                || read.wait.is_zero()
                || tokio::time::Instant::now() >= deadline
            {
                page.gaps = gaps;
                return Ok(page);
            }
            // Nothing for this filter yet: wait from where the scan stopped.
            cursor = page.next;
            tokio::select! {
                _ = tokio::time::sleep_until(deadline) => {}
                _ = self.shutdown.cancelled() => {}
                received = live.recv() => {
                    if let Err(broadcast::error::RecvError::Closed) = received {
                        return Err(ServiceError::from(CoreError::ShuttingDown));
                    }
                }
            }
        }
    }
}
