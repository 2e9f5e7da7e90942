//! The service layer and the task dispatcher against an in-memory fake runtime, through the
//! seam: no tmux, no peer, a real core on a temporary log.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::*;
use crate::core::event_log::{FsyncPolicy, LogConfig};
use crate::core::tracker::TrackerConfig;
use crate::core::{CoreConfig, CoreHandle};
use crate::protocol::{
    EventKind, HostedSessionView, Item, ItemEvent, LeaseHolder, SessionBound, SessionCreated,
    SessionStatus, TaskState, TurnCompleted, TurnSource, TurnStarted, TurnStatus,
};
use crate::runtime::common::inject;
use crate::runtime::{
    AfterRestart, CreateSession, Forked, HostError, InjectOutcome, InjectState, SessionHost,
};
use crate::tasks::Source;
use crate::tmux::{SessionCache, Tmux};

/// How the fake answers its next inject.
#[derive(Clone, Debug)]
enum Next {
    /// Start a turn that ends at once with this reply.
    Reply(&'static str),
    /// Start a turn that stays open until `finish`.
    Hold,
    /// Refuse, as a runtime would.
    Fail(fn(&str) -> HostError),
}

/// A runtime that lives in memory: it writes the events a real host writes (session created
/// and bound, turns, replies) and records what it was asked.
struct Fake {
    core: CoreHandle,
    next: Mutex<Vec<Next>>,
    injects: Mutex<Vec<(String, String, Option<String>)>>,
    draft: Mutex<Option<String>>,
    cleared: Mutex<Vec<String>>,
    turns: Mutex<u32>,
}

impl Fake {
    fn new(core: CoreHandle) -> Arc<Fake> {
        Arc::new(Fake {
            core,
            next: Mutex::new(Vec::new()),
            injects: Mutex::new(Vec::new()),
            draft: Mutex::new(None),
            cleared: Mutex::new(Vec::new()),
            turns: Mutex::new(0),
        })
    }

    fn then(&self, next: Next) {
        self.next.lock().unwrap().push(next);
    }

    async fn store(&self, session: &str, kind: EventKind) {
        self.core
            .append(Some(session.to_string()), kind)
            .await
            .unwrap();
    }

    async fn finish(&self, session: &str, turn: &str, reply: &str, status: TurnStatus) {
        self.store(
            session,
            EventKind::ItemCompleted(ItemEvent {
                turn_id: turn.into(),
                item: Item::AgentMessage {
                    id: format!("{turn}:reply"),
                    text: reply.into(),
                    interrupted: false,
                },
            }),
        )
        .await;
        self.store(
            session,
            EventKind::TurnCompleted(TurnCompleted {
                turn_id: turn.into(),
                status,
                error: None,
                duration_ms: None,
                lost: false,
            }),
        )
        .await;
    }
}

#[async_trait::async_trait]
impl SessionHost for Fake {
    fn runtime(&self) -> Runtime {
        Runtime::Codex
    }

    fn start_choices(&self) -> crate::protocol::RuntimeChoices {
        crate::protocol::RuntimeChoices {
            runtime: Runtime::Codex,
            policy_field: crate::protocol::PolicyField::ApprovalPolicy,
            policies: vec![crate::protocol::PolicyChoice::new(
                "never",
                "the fake never asks",
            )],
        }
    }

    fn check_create(&self, request: &CreateSession) -> Result<(), HostError> {
        if request.permission_mode.is_some() {
            return Err(HostError::field(
                crate::protocol::Field::PermissionMode,
                "not for the fake",
            ));
        }
        Ok(())
    }

    async fn create(&self, request: CreateSession) -> Result<HostedSessionView, HostError> {
        let id = crate::runtime::common::new_session_id();
        self.store(
            &id,
            EventKind::SessionCreated(SessionCreated {
                runtime: Runtime::Codex,
                cwd: request.cwd.to_string_lossy().into_owned(),
                model: request.model,
                approval_policy: None,
                permission_mode: None,
                sandbox: None,
                budget: None,
                forked_from: None,
                idempotency_key: request.idempotency_key,
                profile: None,
            }),
        )
        .await;
        self.store(
            &id,
            EventKind::SessionBound(SessionBound {
                thread_id: format!("thread-{id}"),
                backend: "fake".into(),
            }),
        )
        .await;
        self.store(
            &id,
            EventKind::SessionStatus(SessionStatus {
                state: crate::protocol::SessionState::Live,
                message: None,
            }),
        )
        .await;
        Ok(self.core.read(|s| s.session_view(&id)).unwrap())
    }

    async fn restore(&self) {}

    async fn inject(
        &self,
        session: &str,
        text: &str,
        key: Option<String>,
    ) -> Result<InjectOutcome, HostError> {
        if let Some(earlier) = inject::previous(&self.core, session, key.as_deref()) {
            return Ok(earlier);
        }
        self.injects
            .lock()
            .unwrap()
            .push((session.into(), text.into(), key.clone()));
        let next = {
            let mut next = self.next.lock().unwrap();
            if next.is_empty() {
                Next::Reply("Done.")
            } else {
                next.remove(0)
            }
        };
        if let Next::Fail(error) = next {
            return Err(error(session));
        }
        let turn = {
            let mut turns = self.turns.lock().unwrap();
            *turns += 1;
            format!("turn-{turns}")
        };
        self.store(
            session,
            EventKind::TurnStarted(TurnStarted {
                turn_id: turn.clone(),
                source: TurnSource::Api,
            }),
        )
        .await;
        let outcome = inject::record(&self.core, session, InjectState::Started, &turn, key)
            .await
            .unwrap();
        if let Next::Reply(reply) = next {
            self.finish(session, &turn, reply, TurnStatus::Completed)
                .await;
        }
        Ok(outcome)
    }

    async fn interrupt(&self, session: &str, wanted: Option<&str>) -> Result<bool, HostError> {
        let turn = self
            .core
            .read(|s| s.sessions.get(session).and_then(|r| r.active_turn.clone()))
            .filter(|turn| wanted.is_none_or(|wanted| wanted == turn));
        match turn {
            Some(turn) => {
                self.finish(session, &turn, "Cut short.", TurnStatus::Interrupted)
                    .await;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    async fn resolve_approval(
        &self,
        _: &str,
        approval: &str,
        _: &str,
        _: &str,
    ) -> Result<(), HostError> {
        Err(HostError::UnknownApproval(approval.into()))
    }

    async fn close(&self, session: &str) -> Result<(), HostError> {
        Err(HostError::Closed(session.into()))
    }

    async fn fork(&self, _: &str, _: Option<String>) -> Result<Forked, HostError> {
        Ok(Err(crate::runtime::Capability::fail("unsupported", "no")))
    }

    async fn relaunch(&self, _: &str) -> Result<(), HostError> {
        Ok(())
    }

    fn after_restart(&self) -> AfterRestart {
        AfterRestart::Lost
    }

    async fn doctor(&self) -> crate::runtime::RuntimeDoctor {
        crate::runtime::RuntimeDoctor::of(
            &json!({ "fakeFound": true, "issues": [], "warnings": ["a fake"] }),
        )
    }

    async fn shutdown(&self) {}

    fn watches_human_input(&self) -> bool {
        true
    }

    async fn human_input(&self, _: &str) -> Result<Option<String>, HostError> {
        Ok(self.draft.lock().unwrap().clone())
    }

    async fn clear_input(&self, _: &str, text: &str) -> Result<bool, HostError> {
        self.cleared.lock().unwrap().push(text.into());
        *self.draft.lock().unwrap() = None;
        Ok(true)
    }
}

struct Fixture {
    service: Service,
    fake: Arc<Fake>,
    work: tempfile::TempDir,
    cancel: CancellationToken,
    _home: tempfile::TempDir,
}

impl Drop for Fixture {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

fn fixture() -> Fixture {
    let home = tempfile::tempdir().unwrap();
    let (core, _thread, _) = crate::core::start(CoreConfig {
        home: home.path().to_path_buf(),
        log: LogConfig {
            dir: home.path().join("log"),
            quarantine: home.path().join("quarantine.jsonl"),
            segment_bytes: 1 << 20,
            retain_bytes: 1 << 24,
            fsync: FsyncPolicy::Never,
        },
        tracker: TrackerConfig::default(),
    })
    .unwrap();
    let fake = Fake::new(core.clone());
    let hosts = Hosts::from_hosts(vec![fake.clone() as Arc<dyn SessionHost>]);
    let cancel = CancellationToken::new();
    let tasks = TaskManager::new(core.clone(), hosts.clone());
    tokio::spawn(tasks.clone().run(cancel.clone()));
    let tmux = SessionCache::new(Tmux::new(Some(home.path().join("no-tmux"))));
    let task_failures = hosts.task_failures();
    Fixture {
        service: Service {
            core,
            tmux: Arc::new(tmux),
            hosts,
            tasks,
            mcp_roots: Arc::new(Vec::new()),
            shutdown: cancel.clone(),
            watch: crate::watch::WatchHandle::disabled(),
            create_keys: Arc::default(),
            machine: Default::default(),
            profiles: super::profiles::Held::new(Default::default(), None),
            task_failures,
        },
        fake,
        work: tempfile::tempdir().unwrap(),
        cancel,
        _home: home,
    }
}

impl Fixture {
    fn request(&self) -> CreateRequest {
        CreateRequest {
            runtime: "codex".into(),
            cwd: self.work.path().to_string_lossy().into_owned(),
            ..Default::default()
        }
    }

    async fn session(&self) -> String {
        self.service
            .create(self.request())
            .await
            .unwrap()
            .session
            .id
    }

    /// Polls the task until `pred` holds (the dispatcher works on its own task).
    async fn wait_task(&self, id: &str, pred: impl Fn(&crate::protocol::TaskView) -> bool) {
        for _ in 0..500 {
            let view = self.service.tasks.status(id).unwrap();
            if pred(&view) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("task {id}: {:?}", self.service.tasks.status(id));
    }
}

#[tokio::test]
async fn two_creates_with_one_idempotency_key_start_one_session_and_a_retry_finds_it() {
    let fx = fixture();
    let keyed = || CreateRequest {
        idempotency_key: Some("k-1".into()),
        ..fx.request()
    };
    // Both start before either has logged its session: only the key's lock keeps them apart.
    let (first, second) = tokio::join!(fx.service.create(keyed()), fx.service.create(keyed()));
    let (first, second) = (first.unwrap().session.id, second.unwrap().session.id);
    assert_eq!(first, second);
    let retried = fx.service.create(keyed()).await.unwrap().session.id;
    assert_eq!(retried, first);
    assert_eq!(fx.service.sessions().len(), 1, "one session for one key");
    let other = fx
        .service
        .create(CreateRequest {
            idempotency_key: Some("k-2".into()),
            ..fx.request()
        })
        .await
        .unwrap();
    assert_ne!(other.session.id, first);
    assert!(
        fx.service.create_keys.is_empty(),
        "a key no create holds stays held"
    );
}

#[tokio::test]
async fn create_is_validated_once_and_routed_through_the_seam() {
    let fx = fixture();
    let refused = |request: CreateRequest| {
        let service = fx.service.clone();
        async move { service.create(request).await.unwrap_err() }
    };
    let error = refused(CreateRequest {
        runtime: "vim".into(),
        ..fx.request()
    })
    .await;
    assert_eq!(
        (
            error.code,
            error.field.map(crate::protocol::Field::http_name)
        ),
        ("invalid_field", Some("runtime"))
    );
    assert!(
        error.message.to_string().contains("codex, claude"),
        "{error}"
    );
    // The runtime checks its own options and names the field.
    let error = refused(CreateRequest {
        permission_mode: Some("plan".into()),
        ..fx.request()
    })
    .await;
    assert_eq!(
        error.field.map(crate::protocol::Field::http_name),
        Some("permissionMode")
    );
    let error = refused(CreateRequest {
        cwd: "relative".into(),
        ..fx.request()
    })
    .await;
    assert_eq!(
        error.field.map(crate::protocol::Field::http_name),
        Some("cwd")
    );
    let error = refused(CreateRequest {
        idempotency_key: Some(String::new()),
        ..fx.request()
    })
    .await;
    assert_eq!(
        error.field.map(crate::protocol::Field::http_name),
        Some("idempotencyKey")
    );
    assert!(fx.service.sessions().is_empty(), "nothing was created");

    let created = fx
        .service
        .create(CreateRequest {
            prompt: Some("Hello".into()),
            idempotency_key: Some("c-1".into()),
            ..fx.request()
        })
        .await
        .unwrap();
    assert_eq!(created.session.state, crate::protocol::SessionState::Live);
    let inject = created.inject.unwrap();
    assert_eq!(inject.outcome, InjectState::Started);
    let task = created.task_id.unwrap();
    fx.wait_task(&task, |t| t.state == TaskState::Completed)
        .await;
    let injects = fx.fake.injects.lock().unwrap().clone();
    assert_eq!(injects.len(), 1);
    assert_eq!(injects[0].1, "Hello");
    assert_eq!(injects[0].2.as_deref(), Some("create:c-1"));
}

#[tokio::test]
async fn sends_map_runtime_failures_to_the_documented_outcomes() {
    let fx = fixture();
    let id = fx.session().await;
    let error = fx.service.send(&id, "  ", None).await.unwrap_err();
    assert_eq!(
        error.field.map(crate::protocol::Field::http_name),
        Some("text")
    );
    fx.fake
        .then(Next::Fail(|id| HostError::NotReady(id.into())));
    let error = fx.service.send(&id, "now", None).await.unwrap_err();
    assert_eq!(
        (error.kind, error.code),
        (ErrorKind::Unavailable, "not_ready")
    );
    fx.fake
        .then(Next::Fail(|_| HostError::failed(Runtime::Codex, "boom")));
    let error = fx.service.send(&id, "now", None).await.unwrap_err();
    assert_eq!((error.kind, error.code), (ErrorKind::Upstream, "failed"));
    let error = fx.service.send("cs_nope", "now", None).await.unwrap_err();
    assert_eq!((error.kind, error.code), (ErrorKind::NotFound, "not_live"));

    // A key a queued task holds is refused for a direct send, and nothing is sent.
    fx.service
        .tasks
        .takeover(&id, None, "takeover")
        .await
        .unwrap();
    fx.service
        .tasks
        .send(&id, "queued", Some("k".into()), Source::Api)
        .await
        .unwrap();
    let before = fx.fake.injects.lock().unwrap().len();
    let error = fx
        .service
        .send(&id, "direct", Some("k".into()))
        .await
        .unwrap_err();
    assert_eq!(error.code, "idempotency_key_in_use");
    assert_eq!(
        error.field.map(crate::protocol::Field::http_name),
        Some("idempotencyKey")
    );
    assert_eq!(fx.fake.injects.lock().unwrap().len(), before);

    // A direct send is a task that the turn finishes.
    let sent = fx
        .service
        .send(&id, "direct", Some("d".into()))
        .await
        .unwrap();
    fx.wait_task(&sent.task_id, |t| t.state == TaskState::Completed)
        .await;
    let again = fx
        .service
        .send(&id, "direct", Some("d".into()))
        .await
        .unwrap();
    assert!(again.outcome.duplicate);
    assert_eq!(again.task_id, sent.task_id);
}

#[tokio::test]
async fn a_task_refused_as_not_ready_in_the_runtimes_own_words_waits_and_is_delivered_later() {
    let fx = fixture();
    let id = fx.session().await;
    // An adopted TUI whose screen cannot be read now (a selector open): nothing was typed.
    fx.fake.then(Next::Fail(|_| {
        HostError::NotReadyBecause("cannot read the input box (a selector); nothing typed".into())
    }));
    fx.fake.then(Next::Reply("done"));
    let sent = fx
        .service
        .tasks
        .send(&id, "later", None, Source::Api)
        .await
        .unwrap();
    fx.wait_task(&sent.task.task_id, |t| t.state == TaskState::Completed)
        .await;
    let injects = fx.fake.injects.lock().unwrap().clone();
    assert_eq!(
        injects.iter().filter(|i| i.1 == "later").count(),
        2,
        "refused once, delivered on the retry: {injects:?}"
    );
}

#[tokio::test]
async fn the_dispatcher_delivers_in_order_and_waits_for_the_human() {
    let fx = fixture();
    let id = fx.session().await;
    fx.fake.then(Next::Hold);
    let first = fx
        .service
        .tasks
        .send(&id, "first", None, Source::Api)
        .await
        .unwrap()
        .task
        .task_id;
    let second = fx
        .service
        .tasks
        .send(&id, "second", None, Source::Api)
        .await
        .unwrap()
        .task
        .task_id;
    fx.wait_task(&first, |t| t.state == TaskState::Running)
        .await;
    // One task in flight: the second waits until the first's turn ends.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        fx.service.tasks.status(&second).unwrap().state,
        TaskState::Waiting
    );
    let turn = fx
        .service
        .core
        .read(|s| s.sessions.get(&id).and_then(|r| r.active_turn.clone()))
        .unwrap();
    fx.fake
        .finish(&id, &turn, "First done.", TurnStatus::Completed)
        .await;
    fx.wait_task(&second, |t| t.state == TaskState::Completed)
        .await;
    let first = fx.service.tasks.status(&first).unwrap();
    assert_eq!(first.state, TaskState::Completed);
    assert_eq!(first.result_excerpt.as_deref(), Some("First done."));
    let sent: Vec<String> = fx
        .fake
        .injects
        .lock()
        .unwrap()
        .iter()
        .map(|(_, text, key)| format!("{text} {}", key.as_deref().unwrap_or("")))
        .collect();
    assert!(
        sent[0].starts_with("first task:") && sent[1].starts_with("second task:"),
        "{sent:?}"
    );

    // Text a person left in the input (seen on two ticks) hands the session to them.
    fx.fake.then(Next::Hold);
    let third = fx
        .service
        .tasks
        .send(&id, "third", None, Source::Api)
        .await
        .unwrap()
        .task
        .task_id;
    fx.wait_task(&third, |t| t.state == TaskState::Running)
        .await;
    *fx.fake.draft.lock().unwrap() = Some("a person typing".into());
    for _ in 0..60 {
        if fx.service.tasks.lease(&id).unwrap().holder == LeaseHolder::Human {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let lease = fx.service.tasks.lease(&id).unwrap();
    assert_eq!(lease.holder, LeaseHolder::Human, "{lease:?}");
    assert!(
        fx.fake.cleared.lock().unwrap().is_empty(),
        "a person's text is not cleared"
    );
}

#[tokio::test]
async fn a_prompt_of_ours_handed_back_is_cleared_not_taken_for_a_person() {
    let fx = fixture();
    let id = fx.session().await;
    let task = fx
        .service
        .tasks
        .send(&id, "ours", None, Source::Api)
        .await
        .unwrap()
        .task
        .task_id;
    fx.wait_task(&task, |t| t.state == TaskState::Completed)
        .await;
    // A running task keeps the watch on; the agent hands our earlier prompt back.
    fx.fake.then(Next::Hold);
    let held = fx
        .service
        .tasks
        .send(&id, "another", None, Source::Api)
        .await
        .unwrap()
        .task
        .task_id;
    fx.wait_task(&held, |t| t.state == TaskState::Running).await;
    *fx.fake.draft.lock().unwrap() = Some("ours".into());
    for _ in 0..40 {
        if !fx.fake.cleared.lock().unwrap().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(*fx.fake.cleared.lock().unwrap(), ["ours"]);
    assert_eq!(
        fx.service.tasks.lease(&id).unwrap().holder,
        LeaseHolder::Managed
    );
}

#[tokio::test]
async fn reads_wait_for_the_next_event_and_refuse_bad_cursors() {
    let fx = fixture();
    let head = fx.service.head();
    let error = fx
        .service
        .read_request(head + 5, None, None, None)
        .unwrap_err();
    assert_eq!(
        error.field.map(crate::protocol::Field::http_name),
        Some("after")
    );
    for (limit, wait, field) in [
        (Some(0), None, "limit"),
        (Some(MAX_LIMIT as u64 + 1), None, "limit"),
        (None, Some(MAX_WAIT_SECS + 1.0), "wait"),
    ] {
        let error = fx.service.read_request(0, limit, wait, None).unwrap_err();
        assert_eq!(
            error.field.map(crate::protocol::Field::http_name),
            Some(field)
        );
    }
    let error = fx
        .service
        .read_request(0, None, None, Some("cs_nope".into()))
        .unwrap_err();
    assert_eq!(error.code, "session_not_found");

    let read = fx
        .service
        .read_request(head, None, Some(10.0), None)
        .unwrap();
    let service = fx.service.clone();
    let waiting = tokio::spawn(async move { service.events(read).await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!waiting.is_finished(), "nothing to read yet");
    let id = fx.session().await;
    let page = waiting.await.unwrap().unwrap();
    assert!(!page.events.is_empty());
    assert_eq!(page.events[0].session.as_deref(), Some(id.as_str()));
    assert_eq!(page.next, page.events.last().unwrap().seq);
}

#[tokio::test]
async fn doctor_flattens_only_the_first_runtime_and_collects_warnings() {
    let fx = fixture();
    let doctor = json!(fx.service.doctor().await);
    assert_eq!(doctor["fakeFound"], true, "{doctor}");
    assert_eq!(doctor["ok"], true, "{doctor}");
    // The watched Pi's section is there, whatever this machine's PATH holds; its warnings
    // (none without a `pi` on PATH) follow the runtimes'.
    assert!(doctor["pi"]["found"].is_boolean(), "{doctor}");
    let mut warnings = vec![json!("a fake")];
    warnings.extend(doctor["pi"]["warnings"].as_array().unwrap().iter().cloned());
    assert_eq!(doctor["warnings"], json!(warnings));
}

#[test]
fn host_errors_map_to_one_class_each() {
    let cases = [
        (
            HostError::Invalid("x".into()),
            ErrorKind::Invalid,
            "invalid_request",
        ),
        (
            HostError::field(crate::protocol::Field::Cwd, "x"),
            ErrorKind::Invalid,
            "invalid_field",
        ),
        (
            HostError::Unsupported("x".into()),
            ErrorKind::Invalid,
            "unsupported",
        ),
        (
            HostError::UnknownSession("s".into()),
            ErrorKind::NotFound,
            "session_not_found",
        ),
        (
            HostError::Closed("s".into()),
            ErrorKind::Conflict,
            "session_closed",
        ),
        (
            HostError::NotReady("s".into()),
            ErrorKind::Unavailable,
            "not_ready",
        ),
        (
            HostError::NotReadyBecause("the screen cannot be read".into()),
            ErrorKind::Unavailable,
            "not_ready",
        ),
        (
            HostError::ClosedBecause("session `s`: pane %1 is gone".into()),
            ErrorKind::Conflict,
            "session_closed",
        ),
        (
            HostError::HumanTyping("s".into()),
            ErrorKind::Conflict,
            "human_typing",
        ),
        (
            HostError::unavailable(Runtime::Claude, "x"),
            ErrorKind::Unavailable,
            "claude_unavailable",
        ),
        (
            HostError::unavailable_by(Runtime::Codex, "x", std::io::Error::other("y")),
            ErrorKind::Unavailable,
            "codex_unavailable",
        ),
        (
            HostError::failed(Runtime::Codex, "x"),
            ErrorKind::Upstream,
            "codex_error",
        ),
        (
            HostError::Core(storage_error()),
            ErrorKind::Internal,
            "storage_error",
        ),
        (
            HostError::Core(CoreError::Overloaded),
            ErrorKind::Unavailable,
            "overloaded",
        ),
        (
            HostError::UnknownApproval("a".into()),
            ErrorKind::NotFound,
            "approval_not_found",
        ),
        (
            HostError::ApprovalResolved("a".into()),
            ErrorKind::Conflict,
            "approval_resolved",
        ),
    ];
    for (error, kind, code) in cases {
        let mapped = ServiceError::from(error);
        assert_eq!((mapped.kind, mapped.code), (kind, code), "{mapped:?}");
    }
}

#[tokio::test]
async fn a_cancel_interrupts_only_its_own_turn_never_a_later_one() {
    let fx = fixture();
    let id = fx.session().await;
    fx.fake.then(Next::Hold);
    let task = fx
        .service
        .tasks
        .send(&id, "long job", None, Source::Api)
        .await
        .unwrap()
        .task
        .task_id;
    // Running comes with the delivery; the turn id with the acceptance, an event later.
    fx.wait_task(&task, |t| {
        t.state == TaskState::Running && t.turn_id.is_some()
    })
    .await;
    let own = fx.service.tasks.status(&task).unwrap().turn_id.unwrap();
    // Another turn is the session's running one by the time the cancel acts.
    fx.fake
        .store(
            &id,
            EventKind::TurnStarted(TurnStarted {
                turn_id: "later-turn".into(),
                source: TurnSource::Api,
            }),
        )
        .await;
    let generation = fx.service.tasks.lease(&id).unwrap().generation;
    fx.service
        .tasks
        .cancel(&task, Some(generation))
        .await
        .unwrap();
    fx.wait_task(&task, |t| t.cancel_outcome.is_some()).await;
    let active = fx
        .service
        .core
        .read(|s| s.sessions.get(&id).and_then(|r| r.active_turn.clone()));
    assert_eq!(
        active.as_deref(),
        Some("later-turn"),
        "the later turn was not interrupted (the cancel named turn {own})"
    );
}

#[test]
fn a_runtime_failure_keeps_its_causes_for_the_log() {
    let io = std::io::Error::new(std::io::ErrorKind::PermissionDenied, "Permission denied");
    let error = HostError::failed_by(Runtime::Claude, "cannot write /h/settings.json", io);
    let mapped = ServiceError::from(HostError::failed_by(
        Runtime::Claude,
        "cannot write /h/settings.json",
        std::io::Error::other("disk"),
    ));
    assert_eq!(mapped.kind, ErrorKind::Upstream);
    assert_eq!(
        mapped.message.to_string(),
        "claude failed: cannot write /h/settings.json"
    );
    assert_eq!(
        super::chain(&error),
        "claude failed: cannot write /h/settings.json: Permission denied"
    );
}

/// A failed append as the core reports it: the log's directory and the I/O error.
fn storage_error() -> CoreError {
    CoreError::Storage(Arc::new(crate::core::StorageError {
        dir: "/srv/cohost/log".into(),
        source: std::io::Error::new(std::io::ErrorKind::StorageFull, "No space left on device"),
    }))
}

/// What `run` logs (every level, no colours, no time), beside what it returns.
fn logged<T>(run: impl FnOnce() -> T) -> (T, String) {
    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for Buffer {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let buffer = Buffer::default();
    let writer = buffer.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .without_time()
        .with_max_level(tracing::Level::TRACE)
        .finish();
    let value = tracing::subscriber::with_default(subscriber, run);
    let text = String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap();
    (value, text)
}

#[test]
fn a_storage_failure_logs_its_path_and_cause_once_and_answers_without_them() {
    let (mapped, log) = logged(|| ServiceError::from(storage_error()));
    assert_eq!(
        (mapped.kind, mapped.code),
        (ErrorKind::Internal, "storage_error")
    );
    assert_eq!(
        mapped.message.to_string(),
        "the event log could not be written; nothing was recorded"
    );
    assert_eq!(log.lines().count(), 1, "{log}");
    assert!(log.contains("event log write failed"), "{log}");
    assert_eq!(
        log.matches("/srv/cohost/log: No space left on device")
            .count(),
        1,
        "{log}"
    );
    // Through a runtime or the task queue, the same mapping, the same single line.
    let (mapped, log) = logged(|| ServiceError::from(HostError::Core(storage_error())));
    assert_eq!(mapped.code, "storage_error");
    assert_eq!(log.lines().count(), 1, "{log}");
}

#[test]
fn a_runtime_failure_with_a_cause_is_logged_once_and_one_without_is_not() {
    let io = std::io::Error::new(std::io::ErrorKind::PermissionDenied, "Permission denied");
    let (mapped, log) = logged(|| {
        ServiceError::from(HostError::unavailable_by(
            Runtime::Codex,
            "cannot write the websocket token /h/codex/codex/ws-token: Permission denied",
            io,
        ))
    });
    assert_eq!(mapped.code, "codex_unavailable");
    assert_eq!(log.lines().count(), 1, "{log}");
    assert!(log.contains("/h/codex/codex/ws-token"), "{log}");
    // The cause the message already quotes is not repeated.
    assert_eq!(log.matches("Permission denied").count(), 1, "{log}");
    let (_, log) = logged(|| ServiceError::from(HostError::failed(Runtime::Codex, "refused")));
    assert_eq!(log, "");
}

#[test]
fn causes_are_joined_innermost_last_without_repeating_a_quoted_one() {
    #[derive(Debug, thiserror::Error)]
    #[error("{text}")]
    struct Link {
        text: &'static str,
        #[source]
        source: Option<Box<Link>>,
    }
    fn check(links: &[&'static str], expect: &str) {
        let error = links
            .iter()
            .rev()
            .fold(None, |source, text| Some(Box::new(Link { text, source })));
        let error = error.unwrap();
        assert_eq!(super::chain(error.as_ref()), expect, "{links:?}");
    }
    check(&["alone"], "alone");
    check(
        &["claude failed: x", "Permission denied"],
        "claude failed: x: Permission denied",
    );
    // Observed shapes: a message that quotes its source (`HomeError::Create`, `SpawnError::Spawn`).
    check(
        &[
            "codex is not available: cannot create codex home /h: Permission denied",
            "cannot create codex home /h: Permission denied",
            "Permission denied",
        ],
        "codex is not available: cannot create codex home /h: Permission denied",
    );
    check(
        &[
            "the event log could not be written: /l: No space left on device",
            "/l: No space left on device",
            "No space left on device",
        ],
        "the event log could not be written: /l: No space left on device",
    );
    check(&["a: b", "b", "c"], "a: b: c");
}

/// Issue 23 item 4, through the service and the dispatcher: a session that finishes 2,001 tasks
/// (more than the whole daemon once kept) leaves another session's recent tasks, their results
/// and their idempotency keys as they were.
#[tokio::test]
async fn two_thousand_and_one_tasks_of_one_session_leave_another_sessions_tasks_and_results() {
    let fx = fixture();
    let quiet = fx.session().await;
    let busy = fx.session().await;
    const REPLIES: [&str; 3] = ["First quiet answer.", "Second quiet answer.", "Third."];
    let mut kept = Vec::new();
    for (n, reply) in REPLIES.iter().enumerate() {
        fx.fake.then(Next::Reply(reply));
        let sent = fx
            .service
            .tasks
            .send(&quiet, "quiet", Some(format!("quiet-{n}")), Source::Api)
            .await
            .unwrap();
        fx.wait_task(&sent.task.task_id, |t| t.state == TaskState::Completed)
            .await;
        kept.push(sent.task.task_id);
    }
    let mut left = 2001;
    while left > 0 {
        let batch = left.min(crate::tasks::MAX_WAITING);
        let mut last = String::new();
        for _ in 0..batch {
            last = fx
                .service
                .tasks
                .send(&busy, "busy", None, Source::Api)
                .await
                .unwrap()
                .task
                .task_id;
        }
        fx.wait_task(&last, |t| t.state == TaskState::Completed)
            .await;
        left -= batch;
    }

    let queue = fx.service.queue(&quiet).unwrap();
    let recent: Vec<&str> = queue.recent.iter().map(|t| t.task_id.as_str()).collect();
    let newest_first: Vec<&str> = kept.iter().rev().map(String::as_str).collect();
    assert_eq!(recent, newest_first);
    for (id, reply) in kept.iter().zip(REPLIES) {
        let result = fx.service.task_result(id, 0, 1000).unwrap();
        assert_eq!((result.available, result.text.as_str()), (true, reply));
    }
    // A retried send with a kept key finds its task, and sends nothing.
    let injects = fx.fake.injects.lock().unwrap().len();
    let again = fx
        .service
        .tasks
        .send(&quiet, "quiet", Some("quiet-0".into()), Source::Api)
        .await
        .unwrap();
    assert!(again.replayed);
    assert_eq!(again.task.task_id, kept[0]);
    assert_eq!(fx.fake.injects.lock().unwrap().len(), injects);
    // The busy session keeps its own newest, bounded.
    let busy_recent = fx.service.queue(&busy).unwrap().recent;
    assert!(!busy_recent.is_empty());
}

#[tokio::test]
async fn the_machine_wide_hook_relays_only_for_a_claude_driven_through_it() {
    use crate::protocol::boundary::HookLine;
    let fx = fixture();
    let hosted = fx.service.create(fx.request()).await.unwrap().session.id;
    let line = |event: &str, claude: &str| HookLine {
        received_at: 1,
        event: event.into(),
        request_id: (event == "PermissionRequest").then(|| "r1".into()),
        payload: json!({"session_id": claude, "hook_event_name": event, "cwd": "/w"}),
    };
    // A hosted session is driven, through its own hook: the machine-wide one stays out.
    let thread = format!("thread-{hosted}");
    assert_eq!(
        fx.service.claude_driver(&thread),
        Some(crate::service::ClaudeDriver {
            session_id: hosted.clone(),
            route: crate::service::HookRoute::OwnHook,
        })
    );
    let answer = fx
        .service
        .claude_hook(line("PermissionRequest", &thread))
        .unwrap();
    assert_eq!(answer.relay_to, None);
    // A Claude nobody drives: not ours, at once; no watcher runs here, so nothing is tracked.
    let answer = fx
        .service
        .claude_hook(line("PermissionRequest", "someone-elses"))
        .unwrap();
    assert_eq!((answer.tracked, answer.relay_to), (false, None));
    // Adopted (logged `session.adopted`): its permission requests are relayed to the session
    // through the machine-wide hook, and only those; once it ends, nobody drives that Claude.
    let adopted = fx.session().await;
    let claude = format!("thread-{adopted}");
    let append = |kind: EventKind| fx.service.core.append(Some(adopted.clone()), kind);
    append(EventKind::SessionAdopted(crate::protocol::SessionAdopted {
        key: format!("claude-code:{claude}"),
        agent_session_id: claude.clone(),
        tmux_session: "work".into(),
        pane_id: "%1".into(),
        pane_pid: 1,
        pid: 2,
        pid_start: 3,
        session_file: "/c/sessions/2.json".into(),
        transcript: "/c/projects/w/t.jsonl".into(),
    }))
    .await
    .unwrap();
    assert_eq!(
        fx.service.claude_driver(&claude),
        Some(crate::service::ClaudeDriver {
            session_id: adopted.clone(),
            route: crate::service::HookRoute::MachineHook,
        })
    );
    let answer = fx
        .service
        .claude_hook(line("PermissionRequest", &claude))
        .unwrap();
    assert_eq!(answer.relay_to.as_deref(), Some(adopted.as_str()));
    let answer = fx.service.claude_hook(line("Stop", &claude)).unwrap();
    assert_eq!(answer.relay_to, None);
    append(EventKind::SessionClosed(crate::protocol::SessionClosed {
        reason: "disowned".into(),
    }))
    .await
    .unwrap();
    assert_eq!(fx.service.claude_driver(&claude), None);
    // Bad reports are refused, naming what is wrong.
    let mut bad = line("Stop", "x");
    bad.event = "Stop; rm".into();
    assert_eq!(
        fx.service.claude_hook(bad).unwrap_err().kind,
        ErrorKind::Invalid
    );
    let mut bad = line("Stop", "x");
    bad.payload = json!({"hook_event_name": "Stop"});
    let error = fx.service.claude_hook(bad).unwrap_err();
    assert!(error.to_string().contains("session_id"), "{error}");
}

/// An instance in the tracker's `:unplaced` list (no tmux in these tests), as `source` reports it.
async fn report(fx: &Fixture, agent: &str, thread: &str, source: Option<&str>, pane: Option<&str>) {
    fx.service
        .core
        .append(
            Some(crate::protocol::UNPLACED_SESSION.to_string()),
            EventKind::AgentUpdated(crate::protocol::AgentUpdate {
                agent: agent.into(),
                status: crate::protocol::AgentStatus::Idle,
                ts: 1,
                thread_id: Some(thread.into()),
                thread_name: None,
                last_user_prompt: None,
                pane_id: pane.map(Into::into),
                liveness: None,
                source: source.map(Into::into),
                tokenless: false,
            }),
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn only_a_watched_instance_in_a_pane_of_an_adopting_runtime_can_be_adopted() {
    let fx = fixture();
    let unplaced = crate::protocol::UNPLACED_SESSION;
    let refused = |code: &'static str, error: ServiceError| {
        assert_eq!(error.code, code, "{error}");
    };
    refused(
        codes::INSTANCE_NOT_FOUND,
        fx.service
            .adopt(unplaced, "claude-code:nope")
            .await
            .unwrap_err(),
    );
    // Reported over the API: nothing says which process it is.
    report(&fx, "claude-code", "t-api", None, Some("%1")).await;
    refused(
        codes::NOT_ADOPTABLE,
        fx.service
            .adopt(unplaced, "claude-code:t-api")
            .await
            .unwrap_err(),
    );
    // Watched, but no runtime of this daemon adopts that agent (the fake adopts none).
    report(
        &fx,
        "claude-code",
        "t-w",
        Some("watcher:claude-code"),
        Some("%1"),
    )
    .await;
    refused(
        codes::UNSUPPORTED,
        fx.service
            .adopt(unplaced, "claude-code:t-w")
            .await
            .unwrap_err(),
    );
    // A session drives it already.
    let id = fx.session().await;
    report(&fx, "codex", &format!("thread-{id}"), Some("hosted"), None).await;
    refused(
        codes::ALREADY_DRIVEN,
        fx.service
            .adopt(unplaced, &format!("codex:thread-{id}"))
            .await
            .unwrap_err(),
    );
    assert_eq!(fx.service.sessions().len(), 1, "nothing was created");
    // Only an adopted session can be given back.
    refused(
        codes::NOT_ADOPTED,
        fx.service.disown(&id).await.unwrap_err(),
    );
    assert_eq!(
        fx.service
            .session_driving(&format!("thread-{id}"))
            .as_deref(),
        Some(id.as_str())
    );
    assert_eq!(fx.service.session_driving("t-w"), None);
}

#[tokio::test]
async fn the_state_says_how_each_instance_is_controlled() {
    let fx = fixture();
    let id = fx.session().await;
    report(&fx, "codex", &format!("thread-{id}"), Some("hosted"), None).await;
    report(&fx, "claude-code", "t-w", Some("watcher:claude-code"), None).await;
    report(&fx, "my-script", "t-api", None, None).await;
    let state = fx.service.state_view();
    let control = |thread: &str| {
        let instance = state
            .unplaced
            .iter()
            .find(|i| i.thread_id.as_deref() == Some(thread))
            .unwrap();
        (instance.control, instance.session_id.clone())
    };
    assert_eq!(
        control(&format!("thread-{id}")),
        (Some(crate::protocol::Control::Hosted), Some(id.clone()))
    );
    assert_eq!(
        control("t-w"),
        (Some(crate::protocol::Control::Watched), None)
    );
    assert_eq!(control("t-api"), (None, None));
    let explained = fx
        .service
        .explain(
            crate::protocol::UNPLACED_SESSION,
            &format!("codex:thread-{id}"),
        )
        .unwrap();
    assert_eq!(explained.control, Some(crate::protocol::Control::Hosted));
    assert_eq!(explained.session_id.as_deref(), Some(id.as_str()));
    assert!(explained.adopted.is_none());
    assert_eq!(
        fx.service.session(&id).unwrap().control,
        crate::protocol::Control::Hosted
    );
}

#[tokio::test]
async fn a_daemon_task_that_panicked_shows_in_health_and_doctor_the_first_eight_kept() {
    let fx = fixture();
    let listen: std::net::SocketAddr = "127.0.0.1:7391".parse().unwrap();
    let health = json!(fx.service.health(listen));
    assert_eq!(health["ok"], true, "{health}");
    assert!(health.get("failedTasks").is_none(), "{health}");
    fx.service
        .task_failures()
        .record("the tick loop", "planted");
    let health = json!(fx.service.health(listen));
    assert_eq!(health["ok"], false, "{health}");
    assert_eq!(
        health["failedTasks"],
        json!(["the tick loop panicked: planted"])
    );
    let doctor = json!(fx.service.doctor().await);
    assert_eq!(doctor["ok"], false, "{doctor}");
    assert!(
        doctor["issues"].as_array().unwrap().contains(&json!(
            "daemon: the tick loop panicked: planted; its work stopped until cohost restarts"
        )),
        "{doctor}"
    );
    for i in 0..20 {
        fx.service
            .task_failures()
            .record("a task", &format!("again {i}"));
    }
    let failed = fx.service.health(listen).failed_tasks;
    assert_eq!(failed.len(), super::MAX_FAILED_TASKS);
    assert_eq!(failed[0], "the tick loop panicked: planted");
}

#[tokio::test]
async fn a_follower_that_panicked_shows_in_health_and_doctor() {
    let fx = fixture();
    let listen: std::net::SocketAddr = "127.0.0.1:7391".parse().unwrap();
    // What `runtime::common::caught::lost` records, in the list the hosts share.
    let message = crate::runtime::common::caught::lost(
        &fx.service.hosts.task_failures(),
        "pi dispatch",
        &["cs_a".to_string()],
        "planted",
    );
    assert!(
        message.starts_with("cohost stopped following this session"),
        "{message}"
    );
    let health = json!(fx.service.health(listen));
    assert_eq!(health["ok"], false, "{health}");
    assert_eq!(
        health["failedTasks"],
        json!(["the pi dispatch of session `cs_a` panicked: planted"])
    );
    let doctor = json!(fx.service.doctor().await);
    assert!(
        doctor["issues"].as_array().unwrap().contains(&json!(
            "daemon: the pi dispatch of session `cs_a` panicked: planted; its work stopped until cohost restarts"
        )),
        "{doctor}"
    );
}
