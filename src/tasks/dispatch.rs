//! The dispatcher: follows the event stream (and a 1 s retry) and, per session on its own
//! tokio task, delivers the head of the queue through the session's runtime; settles tasks left
//! in flight by a restart; watches the input of runtimes that show it for human text; and
//! defers the abort of a cancelled prompt the agent queued until its own turn starts.

use super::*;

/// Whether a stored event line can matter to the dispatcher, judged from its `type` without
/// parsing the line (tracker reports, items and usage are most of the log and never do).
fn concerns_tasks(json: &str) -> bool {
    const KINDS: [&str; 5] = [
        "task.",
        "lease.",
        "turn.started",
        "turn.completed",
        "session.",
    ];
    json.find("\"type\":\"").is_some_and(|at| {
        let kind = &json[at + 8..];
        KINDS.iter().any(|prefix| kind.starts_with(prefix))
            // A user message binds a prompt the agent queued to its own turn.
            || (kind.starts_with("item.completed") && json.contains("\"type\":\"userMessage\""))
    })
}

impl TaskManager {
    /// Settles tasks a previous daemon left in flight, then runs the dispatcher until `cancel`.
    pub async fn run(self, cancel: CancellationToken) {
        let mut events = self.core().subscribe();
        self.recover().await;
        for session in self.core().read(|s| s.tasks.sessions_with_waiting()) {
            self.pump(&session);
        }
        let mut retry = tokio::time::interval(RETRY_INTERVAL);
        retry.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        loop {
            tokio::select! {
                _ = cancel.cancelled() => break,
                _ = retry.tick() => {
                    for session in self.core().read(|s| s.tasks.sessions_with_waiting()) {
                        self.pump(&session);
                    }
                    self.watch_drafts();
                }
                received = events.recv() => match received {
                    Ok(stored) => {
                        if stored.ephemeral || !concerns_tasks(&stored.json) {
                            continue;
                        }
                        let Ok(event) = serde_json::from_str::<Event>(&stored.json) else {
                            continue;
                        };
                        self.on_event(&event).await;
                    }
                    Err(broadcast::error::RecvError::Lagged(_)) => {
                        for session in self.core().read(|s| s.tasks.sessions_with_waiting()) {
                            self.pump(&session);
                        }
                    }
                    Err(broadcast::error::RecvError::Closed) => break,
                },
            }
        }
        tracing::debug!("task dispatcher exited: shutdown");
    }

    /// Tasks in flight when the daemon stopped: a codex turn died with its backend; a Claude
    /// TUI outlives the daemon, so its turn's end still finishes the task.
    async fn recover(&self) {
        let open = self.core().read(|s| {
            s.tasks
                .all_open()
                .into_iter()
                .filter(|t| t.state == TaskState::Running)
                .map(|t| {
                    let runtime = s.sessions.get(&t.session).map(|r| r.created.runtime);
                    let runtime = runtime
                        .and_then(|r| self.host_of(r))
                        .map(|h| h.after_restart());
                    let sent = s
                        .sessions
                        .get(&t.session)
                        .and_then(|r| r.sent(&format!("task:{}", t.id)).cloned());
                    (t, runtime, sent)
                })
                .collect::<Vec<_>>()
        });
        for (task, runtime, sent) in open {
            let lock = self.lock_of(&task.session);
            let _guard = lock.lock().await;
            let result = match (task.phase, runtime, sent) {
                (TaskPhase::Delivered, Some(AfterRestart::Continues), Some(sent)) => {
                    self.accept(&task.session, &task.id, &sent.turn_id, sent.outcome)
                        .await
                }
                (TaskPhase::Accepted, Some(AfterRestart::Continues), _) => Ok(()),
                _ => self
                    .append(
                        &task.session,
                        EventKind::TaskFinished(TaskFinished {
                            task_id: task.id.clone(),
                            state: TaskState::Unknown,
                            cancel_outcome: task
                                .cancel_requested
                                .then_some(CancelOutcome::OutcomeUnknown),
                            error: Some("the daemon restarted while the task was in flight".into()),
                            superseded_by: None,
                        }),
                    )
                    .await
                    .map(|_| ()),
            };
            if let Err(error) = result {
                tracing::warn!(task = %task.id, %error, "could not settle a task after restart");
            }
        }
    }

    async fn on_event(&self, event: &Event) {
        let Some(session) = event.session.as_deref() else {
            return;
        };
        match &event.kind {
            // A human typed a turn into the session's terminal: the session is theirs now.
            EventKind::TurnStarted(turn) if turn.source == TurnSource::Terminal => {
                let managed = self.core().read(|s| {
                    s.sessions.get(session).is_some()
                        && s.tasks.lease(session).holder == LeaseHolder::Managed
                });
                if managed {
                    let this = self.clone();
                    let session = session.to_string();
                    tokio::spawn(async move {
                        if let Err(error) = this.takeover(&session, None, "terminal_input").await {
                            tracing::warn!(%session, %error, "could not move the lease to the human");
                        }
                    });
                }
            }
            // A cancelled prompt the agent had queued reaches its own turn: abort it now (its
            // acceptance can bind it to a turn that started before it was logged).
            EventKind::TurnStarted(_)
            | EventKind::TaskAccepted(_)
            | EventKind::ItemCompleted(crate::protocol::ItemEvent {
                item: crate::protocol::Item::UserMessage { .. },
                ..
            }) => {
                let deferred: Vec<String> = self.core().read(|s| {
                    s.tasks
                        .open(session)
                        .filter(|t| {
                            t.cancel_requested
                                && t.cancel_outcome.is_none()
                                && t.phase == TaskPhase::Accepted
                                && t.turn_id.is_some()
                        })
                        .map(|t| t.id.clone())
                        .collect()
                });
                for task in deferred {
                    let this = self.clone();
                    let session = session.to_string();
                    tokio::spawn(async move {
                        let lock = this.lock_of(&session);
                        let _guard = lock.lock().await;
                        if let Err(error) = this.abort_locked(&session, &task).await {
                            tracing::warn!(%session, %task, %error, "could not abort a cancelled task");
                        }
                    });
                }
            }
            EventKind::TaskQueued(_)
            | EventKind::TurnCompleted(_)
            | EventKind::TaskReturned(_)
            | EventKind::TaskFinished(_)
            | EventKind::LeaseChanged(_)
            | EventKind::SessionBound(_)
            | EventKind::SessionStatus(_) => self.pump(session),
            _ => {}
        }
    }

    /// Text a human types into an agent's input is human input, whether or not they submit it:
    /// for each managed session of a runtime that shows its input (`watches_human_input`, the
    /// claude TUI) with tasks in play, a draft in the box moves the lease to the human. Sessions
    /// whose lock is held (a delivery pasting our own text) are skipped.
    fn watch_drafts(&self) {
        let watched: Vec<Runtime> = self
            .inner
            .hosts
            .all()
            .filter(|h| h.watches_human_input())
            .map(|h| h.runtime())
            .collect();
        let sessions: Vec<String> = self.core().read(|s| {
            s.sessions
                .iter()
                .filter(|r| watched.contains(&r.created.runtime) && r.state == SessionState::Live)
                .filter(|r| s.tasks.lease(&r.id).holder == LeaseHolder::Managed)
                .filter(|r| s.tasks.open(&r.id).next().is_some())
                .map(|r| r.id.clone())
                .collect()
        });
        for session in sessions {
            let Ok(guard) = self.lock_of(&session).try_lock_owned() else {
                continue;
            };
            let this = self.clone();
            tokio::spawn(async move {
                let _guard = guard;
                let draft = match this.host(&session) {
                    Ok(host) => host.human_input(&session).await.ok().flatten(),
                    Err(_) => None,
                };
                // Text counts once it stays: the same text on two ticks in a row. The box shows
                // a prompt for a moment while Claude takes it; a human's draft stays.
                let steady = {
                    let mut seen = this.inner.drafts.lock().unwrap_or_else(|e| e.into_inner());
                    match &draft {
                        Some(text) => {
                            seen.insert(session.clone(), text.clone()).as_ref() == Some(text)
                        }
                        None => {
                            seen.remove(&session);
                            false
                        }
                    }
                };
                if steady
                    && let Some(draft) = draft
                    && !this.clear_if_ours(&session, &draft).await
                    && let Err(error) = this
                        .set_lease(&session, LeaseHolder::Human, None, "human_typing")
                        .await
                {
                    tracing::warn!(%session, %error, "could not move the lease to the human");
                }
            });
        }
    }

    /// Whether the box holds a human's draft, looked at again after the inject saw text there:
    /// text that is still there and is not a prompt of ours that Claude handed back (which is
    /// cleared instead).
    async fn human_draft(&self, session: &str) -> bool {
        let Ok(host) = self.host(session) else {
            return false;
        };
        match host.human_input(session).await {
            Ok(Some(draft)) => !self.clear_if_ours(session, &draft).await,
            _ => false,
        }
    }

    /// A draft that is one of the session's delivered prompts is Claude handing back an
    /// interrupted prompt of ours, not human input: clear it. True when it was ours.
    async fn clear_if_ours(&self, session: &str, draft: &str) -> bool {
        let words = |text: &str| text.split_whitespace().collect::<Vec<_>>().join(" ");
        let draft = words(draft);
        let ours = self.core().read(|s| {
            s.tasks
                .open(session)
                .chain(s.tasks.recent(session).take(MAX_QUEUE_RECENT))
                .filter(|t| t.delivered_at.is_some())
                .any(|t| words(&t.prompt) == draft)
        });
        if !ours {
            tracing::info!(%session, draft = %draft, "text in Claude's box is human input");
            return false;
        }
        let Ok(host) = self.host(session) else {
            return true;
        };
        match host.human_input(session).await {
            Ok(Some(current)) => {
                if let Err(error) = host.clear_input(session, &current).await {
                    tracing::warn!(%session, %error, "could not clear a restored prompt");
                }
            }
            Ok(None) => {}
            Err(error) => tracing::warn!(%session, %error, "could not read the input box"),
        }
        true
    }

    /// Looks at the session on its own task: delivers its next task if the session is managed,
    /// live and idle. Waits for the session's lock (a send, a cancel, a delivery in progress),
    /// so the dispatcher itself never blocks.
    fn pump(&self, session: &str) {
        let this = self.clone();
        let session = session.to_string();
        tokio::spawn(async move {
            let guard = this.lock_of(&session).lock_owned().await;
            this.pump_locked(&session, guard).await;
        });
    }

    async fn pump_locked(&self, session: &str, _guard: tokio::sync::OwnedMutexGuard<()>) {
        let next = self.core().read(|s| {
            let record = s.sessions.get(session)?;
            if record.is_closed()
                || record.state != SessionState::Live
                || record.active_turn.is_some()
            {
                return None;
            }
            let lease = s.tasks.lease(session);
            if lease.holder != LeaseHolder::Managed {
                return None;
            }
            let mut open = s.tasks.open(session);
            let head = open.next()?;
            if head.state != TaskState::Waiting {
                return None;
            }
            Some((head.clone(), lease.generation))
        });
        let Some((task, generation)) = next else {
            return;
        };
        if let Err(error) = self
            .append(
                session,
                EventKind::TaskDelivered(TaskDelivered {
                    task_id: task.id.clone(),
                    lease_generation: generation,
                }),
            )
            .await
        {
            tracing::warn!(%session, task = %task.id, %error, "could not record a delivery");
            return;
        }
        // The delivery can take seconds (a paste into Claude); the session's lock is held
        // throughout, so nothing else is delivered, and a cancel waits to see its outcome.
        self.deliver(session, &task).await;
    }

    async fn deliver(&self, session: &str, task: &TaskRecord) {
        let key = Some(format!("task:{}", task.id));
        let sent: Result<InjectOutcome, HostError> = match self.host(session) {
            Ok(host) => host.inject(session, &task.prompt, key).await,
            Err(TaskError::Closed(id)) => Err(HostError::Closed(id)),
            Err(TaskError::UnknownSession(id)) => Err(HostError::UnknownSession(id)),
            Err(TaskError::Core(error)) => Err(HostError::Core(error)),
            // No host for the session's runtime: a refusal with no cause behind it.
            Err(error) => Err(HostError::Invalid(error.to_string())),
        };
        let result = match sent {
            Ok(outcome) => {
                let accepted = self
                    .accept(session, &task.id, &outcome.turn_id, outcome.outcome)
                    .await;
                // A cancel that came while the agent was taking the prompt acts now.
                let cancelled = self
                    .core()
                    .read(|s| s.tasks.get(&task.id).map(|t| t.cancel_requested))
                    .unwrap_or(false);
                match accepted {
                    Ok(()) if cancelled => self.abort_locked(session, &task.id).await,
                    other => other,
                }
            }
            Err(HostError::HumanTyping(_)) if self.human_draft(session).await => {
                // Someone is typing in the box: that is human input, so the human has control.
                let lease = self
                    .set_lease(session, LeaseHolder::Human, None, "human_typing")
                    .await;
                match lease {
                    Ok(_) => {
                        self.put_back(session, &task.id, WaitingReason::HumanControl)
                            .await
                    }
                    Err(error) => Err(error),
                }
            }
            // Text that is gone when looked at again (the TUI redrawing, an interrupt clearing
            // the box), or a prompt of ours handed back and now cleared: try again shortly.
            Err(HostError::HumanTyping(_)) => {
                self.put_back(session, &task.id, WaitingReason::NotReady)
                    .await
            }
            Err(HostError::NotReady(_) | HostError::NotReadyBecause(_)) => {
                self.put_back(session, &task.id, WaitingReason::NotReady)
                    .await
            }
            Err(error) => self
                .append(
                    session,
                    EventKind::TaskFinished(TaskFinished {
                        task_id: task.id.clone(),
                        state: TaskState::Failed,
                        cancel_outcome: task
                            .cancel_requested
                            .then_some(CancelOutcome::CancelledBeforeDelivery),
                        error: Some(format!("delivery failed: {error}")),
                        superseded_by: None,
                    }),
                )
                .await
                .map(|_| ()),
        };
        if let Err(error) = result {
            tracing::warn!(%session, task = %task.id, %error, "could not record a delivery's outcome");
        }
    }

    /// Returns an undelivered task to the queue (or ends it, when a cancel came meanwhile).
    async fn put_back(
        &self,
        session: &str,
        task: &str,
        reason: WaitingReason,
    ) -> Result<(), TaskError> {
        let cancelled = self
            .core()
            .read(|s| s.tasks.get(task).map(|t| t.cancel_requested))
            .unwrap_or(false);
        let kind = if cancelled {
            EventKind::TaskFinished(TaskFinished {
                task_id: task.to_string(),
                state: TaskState::Cancelled,
                cancel_outcome: Some(CancelOutcome::CancelledBeforeDelivery),
                error: None,
                superseded_by: None,
            })
        } else {
            EventKind::TaskReturned(TaskReturned {
                task_id: task.to_string(),
                reason,
                message: None,
            })
        };
        self.append(session, kind).await.map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_events_that_move_tasks_are_parsed() {
        assert!(concerns_tasks(
            r#"{"seq":1,"ts":2,"session":"s","type":"turn.completed","data":{}}"#
        ));
        assert!(concerns_tasks(
            r#"{"seq":1,"ts":2,"type":"task.queued","data":{}}"#
        ));
        assert!(concerns_tasks(
            r#"{"seq":1,"ts":2,"type":"session.status","data":{}}"#
        ));
        assert!(!concerns_tasks(
            r#"{"seq":1,"ts":2,"type":"agent.updated","data":{"type":"turn.started"}}"#
        ));
        assert!(!concerns_tasks(
            r#"{"seq":1,"ts":2,"type":"item.completed","data":{}}"#
        ));
        assert!(!concerns_tasks(
            r#"{"seq":1,"ts":2,"type":"item.completed","data":{"turnId":"t","item":{"type":"agentMessage","id":"a","text":"x"}}}"#
        ));
        assert!(concerns_tasks(
            r#"{"seq":1,"ts":2,"type":"item.completed","data":{"turnId":"t","item":{"type":"userMessage","id":"u","text":"x"}}}"#
        ));
    }

    #[test]
    fn cut_keeps_char_boundaries() {
        assert_eq!(cut("héllo", 2), "h");
        assert_eq!(cut("héllo", 3), "hé");
        assert_eq!(cut("abc", 10), "abc");
    }
}
