//! Reading another machine's session at a hub: forward (with a wait, for SSE and long polls)
//! and backwards (windows), from the newest events the world holds in memory and, past them,
//! from the hub's copy on disk ([`ColdEvents`]); and its sessions' last known views.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use super::{
    ColdEvents, HubWorld, MAX_REMOTE_LIMIT, RemoteEvent, RemoteMachine, RemotePage, qualify,
};
use crate::core::now_ms;
use crate::protocol::HostedSessionView;
use crate::protocol::codes;
use crate::service::{ErrorKind, Service, ServiceError};

impl Service {
    /// The hub's world, to read `machine` in (`machine_not_found` when this daemon is no hub).
    fn hub_of(&self, machine: &str) -> Result<Arc<HubWorld>, ServiceError> {
        self.machine.hub.clone().ok_or_else(|| {
            ServiceError::not_found(
                codes::MACHINE_NOT_FOUND,
                format!(
                    "no machine `{machine}`: this daemon is no hub (start it with --hub to view other machines)"
                ),
            )
        })
    }

    /// Another machine's session's events after `after` (that machine's seq), at most `limit`;
    /// with `wait`, waits up to it for one when there is none yet.
    pub async fn remote_events(
        &self,
        machine: &str,
        session: &str,
        after: u64,
        limit: usize,
        wait: Option<Duration>,
    ) -> Result<RemotePage, ServiceError> {
        let world = self.hub_of(machine)?;
        let limit = limit.clamp(1, MAX_REMOTE_LIMIT);
        let mut changed = world.changed.subscribe();
        let deadline = wait.map(|w| tokio::time::Instant::now() + w);
        let mut after = after;
        loop {
            let page = forward_page(&world, machine, session, after, limit).await?;
            after = page.next;
            let Some(deadline) = deadline else {
                return Ok(page);
            };
            if !page.events.is_empty() {
                return Ok(page);
            }
            tokio::select! {
                _ = tokio::time::sleep_until(deadline) => return Ok(page),
                _ = self.shutdown.cancelled() => return Ok(page),
                changed = changed.changed() => {
                    if changed.is_err() {
                        return Ok(page);
                    }
                }
            }
        }
    }
}

impl Service {
    /// A window of another machine's session read backwards, as the local one
    /// (`GET /api/sessions/{id}/events?last=N` or `?before=SEQ&limit=N`): its `limit` events
    /// before `before` (that machine's seq; `None`: its newest), oldest first; `next` is the
    /// cursor a forward read goes on from (the window's end), `older_before` the next window's
    /// `before` while older events are held.
    pub async fn remote_window(
        &self,
        machine: &str,
        session: &str,
        before: Option<u64>,
        limit: usize,
    ) -> Result<RemotePage, ServiceError> {
        let world = self.hub_of(machine)?;
        backward_page(
            &world,
            machine,
            session,
            before,
            limit.clamp(1, MAX_REMOTE_LIMIT),
        )
        .await
    }

    /// Another machine's hosted session as its last view had it (`GET`-like, for MCP's
    /// `get_session`): its id qualified, with its machine and the machine's link.
    pub fn remote_session(
        &self,
        machine: &str,
        session: &str,
    ) -> Result<HostedSessionView, ServiceError> {
        let qualified = qualify(machine, session);
        self.world_sessions()
            .into_iter()
            .find(|s| s.id == qualified)
            .ok_or_else(|| ServiceError::unknown_session(&qualified))
    }

    /// The newest seq the hub holds of `machine` (where a stream without a cursor starts).
    pub fn remote_head(&self, machine: &str) -> u64 {
        self.machine
            .hub
            .as_ref()
            .map_or(0, |world| world.last_seq(machine))
    }
}

/// A window of another machine's session read backwards: its `limit` events before `before`,
/// from memory, then from the [`ColdEvents`] when the window reaches past what memory holds.
async fn backward_page(
    world: &Arc<HubWorld>,
    machine: &str,
    session: &str,
    before: Option<u64>,
    limit: usize,
) -> Result<RemotePage, ServiceError> {
    let (mut page, cold_through) = world.session(machine, session, |m| {
        let (events, end, older_before) = window_of(m, session, before, limit);
        // The memory's window reached its oldest held event: older ones may be cold.
        let cold =
            (older_before.is_none() && m.evicted_through > 0).then(|| end.min(m.evicted_through));
        let page = RemotePage {
            machine: machine.to_string(),
            session: session.to_string(),
            older_before,
            events,
            next: end,
            head: m.last_seq(),
            link: m.link(now_ms(), world.down_after_ms),
        };
        (page, cold)
    })?;
    if let Some(through) = cold_through {
        // One more than the window needs tells whether older events remain.
        let want = limit + 1 - page.events.len();
        let (w, m, s) = (Arc::clone(world), machine.to_string(), session.to_string());
        let older = tokio::task::spawn_blocking(move || w.cold_backward(&m, &s, through, want))
            .await
            .map_err(|e| cold_failed(machine, e))??;
        let mut events: Vec<RemoteEvent> = older.into_iter().collect();
        events.append(&mut page.events);
        let has_older = events.len() > limit;
        if has_older {
            events.drain(..events.len() - limit);
        }
        page.older_before = has_older.then(|| events.first().map(|e| e.seq)).flatten();
        page.events = events;
    }
    Ok(page)
}

/// A forward read of another machine's session: its events after `after`, at most `limit`,
/// from the [`ColdEvents`] while `after` is older than what memory holds, then from memory.
async fn forward_page(
    world: &Arc<HubWorld>,
    machine: &str,
    session: &str,
    after: u64,
    limit: usize,
) -> Result<RemotePage, ServiceError> {
    let (mut page, cold_through) = world.session(machine, session, |m| {
        let mut page = RemotePage {
            machine: machine.to_string(),
            session: session.to_string(),
            next: after,
            events: Vec::new(),
            head: m.last_seq(),
            link: m.link(now_ms(), world.down_after_ms),
            older_before: None,
        };
        if after < m.evicted_through {
            return (page, Some(m.evicted_through));
        }
        page.events = held_after(m, session, after, limit);
        page.next = page.events.last().map_or(after, |e| e.seq);
        (page, None)
    })?;
    let Some(through) = cold_through else {
        return Ok(page);
    };
    let (w, m, s) = (Arc::clone(world), machine.to_string(), session.to_string());
    page.events =
        tokio::task::spawn_blocking(move || w.cold_forward(&m, &s, after, through, limit))
            .await
            .map_err(|e| cold_failed(machine, e))??;
    if page.events.len() == limit {
        page.next = page.events.last().map_or(through, |e| e.seq);
        return Ok(page);
    }
    // Every event of the session up to `through` is read: go on from memory (unless more was
    // let go meanwhile: the next read goes to the disk again from `through`).
    page.next = through;
    let more = world.session(machine, session, |m| {
        if m.evicted_through <= through {
            held_after(m, session, through, limit - page.events.len())
        } else {
            Vec::new()
        }
    })?;
    page.events.extend(more);
    page.next = page.events.last().map_or(through, |e| e.seq.max(through));
    Ok(page)
}

/// The held events of `session` after `after`, at most `limit`.
fn held_after(m: &RemoteMachine, session: &str, after: u64, limit: usize) -> Vec<RemoteEvent> {
    let start = m.events.partition_point(|e| e.seq <= after);
    m.events
        .range(start..)
        .filter(|e| e.session.as_deref() == Some(session))
        .take(limit)
        .cloned()
        .collect()
}

impl HubWorld {
    fn cold(&self, machine: &str) -> Result<&Arc<dyn ColdEvents>, ServiceError> {
        self.cold.get().ok_or_else(|| {
            ServiceError::new(
                ErrorKind::Internal,
                codes::INTERNAL_ERROR,
                format!("the hub let older events of `{machine}` go from memory and has no copy to read them back from"),
            )
        })
    }

    /// `session`'s events of `machine` with seqs in `(after, through]`, from the disk, at most
    /// `limit`.
    fn cold_forward(
        &self,
        machine: &str,
        session: &str,
        after: u64,
        through: u64,
        limit: usize,
    ) -> Result<Vec<RemoteEvent>, ServiceError> {
        let mut found = Vec::new();
        self.cold(machine)?
            .scan(machine, after, &mut |seq, of, json| {
                if seq > through {
                    return false;
                }
                if of == Some(session) {
                    found.push(cold_event(seq, session, json));
                }
                found.len() < limit
            })
            .map_err(|e| cold_failed(machine, e))?;
        Ok(found)
    }

    /// `session`'s last `keep` events of `machine` with seqs up to `through`, from the disk,
    /// oldest first.
    fn cold_backward(
        &self,
        machine: &str,
        session: &str,
        through: u64,
        keep: usize,
    ) -> Result<VecDeque<RemoteEvent>, ServiceError> {
        let mut found = VecDeque::with_capacity(keep);
        if keep == 0 {
            return Ok(found);
        }
        self.cold(machine)?
            .scan_back(machine, through, &mut |seq, of, json| {
                if of == Some(session) {
                    found.push_front(cold_event(seq, session, json));
                }
                found.len() < keep
            })
            .map_err(|e| cold_failed(machine, e))?;
        Ok(found)
    }
}

fn cold_event(seq: u64, session: &str, json: &str) -> RemoteEvent {
    RemoteEvent {
        seq,
        session: Some(session.to_string()),
        json: Arc::from(json),
    }
}

fn cold_failed(machine: &str, error: impl std::fmt::Display) -> ServiceError {
    ServiceError::new(
        ErrorKind::Internal,
        codes::INTERNAL_ERROR,
        format!("failed to read the hub's copy of `{machine}`'s older events: {error:#}"),
    )
}

/// A machine's session's `limit` events before `before` (its newest when `None`), oldest first,
/// with the window's end (the cursor a forward read goes on from) and, while older events of the
/// session are held, the next window's `before`.
fn window_of(
    machine: &RemoteMachine,
    session: &str,
    before: Option<u64>,
    limit: usize,
) -> (Vec<RemoteEvent>, u64, Option<u64>) {
    let head = machine.last_seq();
    let end = before.map_or(head, |before| before.saturating_sub(1).min(head));
    let stop = machine.events.partition_point(|e| e.seq <= end);
    let mut events: Vec<RemoteEvent> = machine
        .events
        .range(..stop)
        .rev()
        .filter(|e| e.session.as_deref() == Some(session))
        .take(limit + 1)
        .cloned()
        .collect();
    let has_older = events.len() > limit;
    events.truncate(limit);
    events.reverse();
    let older_before = has_older.then(|| events.first().map(|e| e.seq)).flatten();
    (events, end, older_before)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::hub::tests::event;
    use crate::service::hub::{DEFAULT_HUB_MEMORY, cost};

    #[test]
    fn a_window_of_another_machines_session_reads_backwards_in_its_seqs() {
        let world = HubWorld::new(Duration::from_secs(5), DEFAULT_HUB_MEMORY);
        let events = (1..=7).map(|seq| event(seq, if seq % 2 == 0 { "t" } else { "s" }));
        world.add_events("b", events, Some(now_ms()));
        let (window, end, older) = world
            .session("b", "s", |m| window_of(m, "s", None, 2))
            .unwrap();
        assert_eq!(end, 7);
        let seqs: Vec<u64> = window.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, [5, 7]);
        assert_eq!(older, Some(5));
        let (window, end, older) = world
            .session("b", "s", |m| window_of(m, "s", Some(5), 2))
            .unwrap();
        assert_eq!(end, 4);
        let seqs: Vec<u64> = window.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, [1, 3]);
        assert_eq!(older, None);
        let unknown = world.session("b", "nope", |_| ()).unwrap_err();
        assert_eq!(unknown.code, codes::SESSION_NOT_FOUND);
    }

    /// Every event, as the hub's copy on disk keeps them.
    struct Kept(Vec<RemoteEvent>);

    impl ColdEvents for Kept {
        fn scan(
            &self,
            _machine: &str,
            after: u64,
            visit: &mut dyn FnMut(u64, Option<&str>, &str) -> bool,
        ) -> anyhow::Result<()> {
            for e in self.0.iter().filter(|e| e.seq > after) {
                if !visit(e.seq, e.session.as_deref(), &e.json) {
                    break;
                }
            }
            Ok(())
        }

        fn scan_back(
            &self,
            _machine: &str,
            through: u64,
            visit: &mut dyn FnMut(u64, Option<&str>, &str) -> bool,
        ) -> anyhow::Result<()> {
            for e in self.0.iter().rev().filter(|e| e.seq <= through) {
                if !visit(e.seq, e.session.as_deref(), &e.json) {
                    break;
                }
            }
            Ok(())
        }
    }

    fn seqs(events: &[RemoteEvent]) -> Vec<u64> {
        events.iter().map(|e| e.seq).collect()
    }

    #[tokio::test]
    async fn a_machines_older_events_leave_memory_and_are_read_back_from_its_copy() {
        let events: Vec<RemoteEvent> = (1..=10)
            .map(|seq| event(seq, if seq % 2 == 0 { "t" } else { "s" }))
            .collect();
        // Room for three events (each costs its JSON, its session and 64).
        let world = HubWorld::new(Duration::from_secs(5), 3 * cost(&events[9]));
        world.add_events("b", events.clone(), Some(now_ms()));
        world.read(|m| {
            let b = &m["b"];
            assert_eq!(seqs(&Vec::from(b.events.clone())), [8, 9, 10]);
            assert_eq!(b.evicted_through, 7);
            assert_eq!(b.last_seq(), 10);
            assert!(b.held_bytes <= 3 * cost(&events[9]));
        });
        // Without the copy, an older read is an error that says so, never a short answer.
        let lost = forward_page(&world, "b", "s", 0, 10).await.unwrap_err();
        assert_eq!(lost.code, codes::INTERNAL_ERROR);
        assert!(lost.to_string().contains("no copy"), "{lost}");
        world.set_cold(Arc::new(Kept(events)));
        // Forward: from the copy, then from memory, the cursor never skipping the session's
        // events.
        let page = forward_page(&world, "b", "s", 0, 2).await.unwrap();
        assert_eq!((seqs(&page.events), page.next), (vec![1, 3], 3));
        let page = forward_page(&world, "b", "s", 3, 10).await.unwrap();
        assert_eq!((seqs(&page.events), page.next), (vec![5, 7, 9], 9));
        let page = forward_page(&world, "b", "t", 7, 10).await.unwrap();
        assert_eq!((seqs(&page.events), page.next), (vec![8, 10], 10));
        let page = forward_page(&world, "b", "s", 9, 10).await.unwrap();
        assert_eq!((seqs(&page.events), page.next), (vec![], 9));
        // Backwards: memory's newest, then the copy's, `older_before` while older ones remain.
        let page = backward_page(&world, "b", "s", None, 2).await.unwrap();
        assert_eq!(
            (seqs(&page.events), page.older_before),
            (vec![7, 9], Some(7))
        );
        let page = backward_page(&world, "b", "s", Some(7), 10).await.unwrap();
        assert_eq!(
            (seqs(&page.events), page.older_before),
            (vec![1, 3, 5], None)
        );
        let page = backward_page(&world, "b", "t", Some(9), 1).await.unwrap();
        assert_eq!((seqs(&page.events), page.older_before), (vec![8], Some(8)));
        // A session only the let-go events name is still known.
        world.add_events("b", [event(11, "u")], None);
        world.add_events("b", (12..=15).map(|seq| event(seq, "t")), None);
        assert!(world.session("b", "u", |_| ()).is_ok());
    }
}
