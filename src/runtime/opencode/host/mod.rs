//! The OpenCode host: [`OpencodeHost`] and its [`SessionHost`] implementation.
//!
//! One `opencode serve` per hosted session, started in the session's directory: the server's
//! `/event` stream then carries exactly that directory's sessions, a server that fails takes
//! one session with it, closing a session stops its process, and nothing a session's server
//! holds in memory (an `always` answer, a queued prompt) leaks into another. The cost is one
//! process (and ~5 s of start-up) per session. Sessions share the user's OpenCode home (its
//! config, providers and database), so a restarted server finds the session again.
//!
//! One dispatch task per session reads the stream, runs each event of the session through its
//! [`Forwarder`] and performs the effects in order, so a session's events are stored in
//! OpenCode's order, and reports the session's status to the tracker.
//!
//! A person co-drives a session with `opencode attach` on its server, in a pane cohost opens
//! (`terminal.rs`).
//!
//! **Safety:** every session gets a permission ruleset from its approval policy
//! ([`ruleset`]), checked in OpenCode's answer before the session is used. An interrupt first
//! rejects every permission and question the session has pending (OpenCode keeps a permission
//! past an abort, and a late "once" would run the tool), under the same lock an answer takes,
//! so a late answer can never reach OpenCode: it gets `409` from cohost.
//!
//! Questions (the `question` tool) and the model a session is switched to are in [`asks`].

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hyper::Method;
use serde::Serialize;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::client::{Client, ClientError};
use super::normalize::{self, Forwarder};
use super::process::{ServerProcess, SpawnError, find_opencode};
use super::wire::{
    self, ForkBody, MessageWithParts, ModelRef, PermissionReplyBody, PermissionRequest,
    PermissionRule, SessionCreateBody,
};
use dispatch::dispatch;

mod asks;
mod dispatch;
mod rehome;
mod session_host;
mod terminal;
use crate::core::CoreHandle;
use crate::protocol::{
    EventKind, ForkOrigin, HostedSessionView, Runtime, SessionBound, SessionCreated, SessionState,
};
use crate::runtime::common::gated::Gated;
use crate::runtime::common::hosted::{self, resolved_by_runtime};
use crate::runtime::common::{lock, new_session_id};
use crate::runtime::{CreateSession, HostError};
use crate::tmux::SessionCache;

/// The approval policies an OpenCode session can run under (see [`ruleset`]).
pub const APPROVAL_POLICIES: [&str; 3] = ["untrusted", "on-request", "never"];
/// The policy of a session whose request names none: OpenCode asks before acting.
pub const DEFAULT_POLICY: &str = "on-request";
/// How long the stream may take to say `server.connected` after it opened.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long an inject waits for a session being restored to be bound.
const PARK_TIMEOUT: Duration = Duration::from_secs(120);

fn is_model(model: &str) -> bool {
    ModelRef::parse(model).is_some()
}

/// What an OpenCode session takes, and why it takes nothing else.
const GATED: Gated = Gated {
    runtime: Runtime::Opencode,
    budget: "retries are the provider's settings in opencode.json",
    terminal: None,
    policies: &APPROVAL_POLICIES,
    policies_why: "opencode cannot ask only after a failure",
    model_ok: is_model,
};

/// The permissions that only read (allowed under every policy). Anything else — `bash`,
/// `edit` (which also covers `write` and `patch`), `webfetch`, `websearch`,
/// `external_directory`, MCP tools, … — asks under `untrusted` and `on-request`.
const READ_ONLY: [&str; 7] = [
    "read",
    "glob",
    "grep",
    "list",
    "todoread",
    "todowrite",
    "lsp",
];

/// The session ruleset for a cohost approval policy. OpenCode evaluates the last rule that
/// matches, and a session's rules come after the config's, so the session's rules win:
/// - `never`: `*` allow (tools act without asking);
/// - `untrusted`, `on-request`: `*` ask, then the read-only tools allow;
/// - always: `question` allow (cohost relays its questions as input requests) and `task` deny
///   unless `never` (a subagent's permissions are asked in a child session cohost does not
///   follow, so they could not be answered). A subagent's session does not inherit the
///   `question` allow (OpenCode 1.18.33 passes a child only the parent's `deny` and
///   `external_directory` rules), and its agents (`general`, `explore`) deny `question`, so no
///   question is asked where cohost could not relay it.
pub fn ruleset(policy: &str) -> Vec<PermissionRule> {
    let mut rules = Vec::new();
    if policy == "never" {
        rules.push(PermissionRule::new("*", "allow"));
    } else {
        rules.push(PermissionRule::new("*", "ask"));
        rules.extend(READ_ONLY.iter().map(|p| PermissionRule::new(p, "allow")));
        rules.push(PermissionRule::new("task", "deny"));
    }
    rules.push(PermissionRule::new("question", "allow"));
    rules
}

impl From<ClientError> for HostError {
    fn from(error: ClientError) -> Self {
        HostError::failed_by(Runtime::Opencode, error.to_string(), error)
    }
}

impl From<SpawnError> for HostError {
    fn from(error: SpawnError) -> Self {
        HostError::unavailable_by(Runtime::Opencode, error.to_string(), error)
    }
}

fn path_segment(id: &str) -> Result<&str, HostError> {
    if !id.is_empty()
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        Ok(id)
    } else {
        Err(HostError::failed(
            Runtime::Opencode,
            format!("unexpected opencode id `{id}`"),
        ))
    }
}

#[derive(Clone)]
pub struct OpencodeHost {
    inner: Arc<Inner>,
}

struct Inner {
    core: CoreHandle,
    /// Where a dispatch's panic is recorded for health and doctor.
    failures: crate::failures::TaskFailures,
    tmux: Arc<SessionCache>,
    /// `$COHOST_HOME/opencode`: where a server started only to list models runs.
    scratch: PathBuf,
    bin: Result<PathBuf, String>,
    live: Mutex<HashMap<String, Arc<Live>>>,
    /// Permission requests waiting for an answer, by request id (`per_…`) → cohost session.
    approvals: Mutex<HashMap<String, String>>,
    /// Questions waiting for an answer, by request id (`que_…`) → cohost session.
    questions: Mutex<HashMap<String, String>>,
    /// The OpenCode TUIs started by hand that this daemon adopted.
    adoptions: Arc<super::adopt::Adoptions>,
}

/// What a live session is bound to: its server and OpenCode's session id there.
#[derive(Clone)]
struct Binding {
    server: Arc<ServerProcess>,
    opencode_session: String,
}

impl Binding {
    fn client(&self) -> &Client {
        &self.server.client
    }
}

struct Live {
    session_id: String,
    binding: watch::Sender<Option<Binding>>,
    /// Injects, one at a time.
    inject: tokio::sync::Mutex<()>,
    /// Answers to approvals and interrupts, one at a time (an interrupt's settling and a
    /// person's answer never cross).
    decide: tokio::sync::Mutex<()>,
    forwarder: Mutex<Forwarder>,
    /// Changed when the forwarder placed a prompt an inject waits on (`Forwarder::placed`).
    placed: watch::Sender<()>,
    /// Stops the dispatch task (close, shutdown).
    cancel: CancellationToken,
}

/// `cohost doctor`'s section for OpenCode.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OpencodeDoctor {
    pub found: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    pub supported: crate::peers::Supported,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version_place: Option<crate::peers::Place>,
    /// The policies sessions may use, and the one they get by default.
    pub approval_policies: Vec<&'static str>,
    pub default_approval_policy: &'static str,
    pub issues: Vec<String>,
    pub warnings: Vec<String>,
}

impl OpencodeHost {
    pub fn new(
        core: CoreHandle,
        tmux: Arc<SessionCache>,
        scratch: PathBuf,
        failures: crate::failures::TaskFailures,
    ) -> Self {
        let bin = find_opencode();
        if let Err(error) = &bin {
            tracing::info!(%error, "opencode not found; opencode sessions are unavailable");
        }
        let adoptions = Arc::new(super::adopt::Adoptions::new(
            core.clone(),
            Arc::clone(&tmux),
            &scratch,
            failures.clone(),
        ));
        OpencodeHost {
            inner: Arc::new(Inner {
                adoptions,
                failures,
                core,
                tmux,
                scratch,
                bin,
                live: Mutex::new(HashMap::new()),
                approvals: Mutex::new(HashMap::new()),
                questions: Mutex::new(HashMap::new()),
            }),
        }
    }

    fn adoptions(&self) -> &Arc<super::adopt::Adoptions> {
        &self.inner.adoptions
    }

    fn bin(&self) -> Result<&PathBuf, HostError> {
        self.inner
            .bin
            .as_ref()
            .map_err(|error| HostError::unavailable(Runtime::Opencode, error.clone()))
    }

    fn view(&self, session_id: &str) -> Result<HostedSessionView, HostError> {
        self.inner
            .core
            .read(|state| state.session_view(session_id))
            .ok_or_else(|| HostError::UnknownSession(session_id.to_string()))
    }

    async fn version(&self) -> Result<String, String> {
        let bin = self.inner.bin.clone()?;
        let output = tokio::time::timeout(
            Duration::from_secs(30),
            tokio::process::Command::new(&bin)
                .arg("--version")
                .env("OPENCODE_DISABLE_AUTOUPDATE", "1")
                .stdin(std::process::Stdio::null())
                .kill_on_drop(true)
                .output(),
        )
        .await
        .map_err(|_| "`opencode --version` timed out".to_string())?
        .map_err(|error| format!("`opencode --version` failed: {error}"))?;
        let text = String::from_utf8_lossy(&output.stdout);
        crate::peers::version_in(&text)
            .ok_or_else(|| format!("`opencode --version` printed {:?}", text.trim()))
    }

    /// Starts a server for the session, opens (or, with `existing`, finds) OpenCode's
    /// session, follows its stream and binds them; with `existing`, backfills its history.
    async fn bind(
        &self,
        live: &Arc<Live>,
        existing: Option<String>,
        fork_of: Option<(String, Option<String>)>,
    ) -> Result<(), HostError> {
        let server = self.spawn_server(&live.session_id).await?;
        self.bind_on(live, server, existing, fork_of).await
    }

    /// A server of the session's own, started in its directory.
    async fn spawn_server(&self, session_id: &str) -> Result<ServerProcess, HostError> {
        let bin = self.bin()?.clone();
        let Some(created) = self.inner.settings(session_id) else {
            return Err(HostError::UnknownSession(session_id.to_string()));
        };
        Ok(ServerProcess::spawn(&bin, &PathBuf::from(&created.cwd)).await?)
    }

    /// [`Self::bind`] on a server already started.
    async fn bind_on(
        &self,
        live: &Arc<Live>,
        server: ServerProcess,
        existing: Option<String>,
        fork_of: Option<(String, Option<String>)>,
    ) -> Result<(), HostError> {
        let Some(created) = self.inner.settings(&live.session_id) else {
            return Err(HostError::UnknownSession(live.session_id.clone()));
        };
        let server = Arc::new(server);
        let policy = created
            .approval_policy
            .as_ref()
            .map(|p| p.as_str().to_string())
            .unwrap_or_else(|| DEFAULT_POLICY.to_string());
        let rules = ruleset(&policy);
        let client = server.client.clone();
        let opencode_session = match (existing, fork_of) {
            (Some(id), _) => {
                let path = format!("/session/{}", path_segment(&id)?);
                let session: wire::Session = client.get(&path).await?;
                // Re-assert the policy: the ruleset is the session's own, but a restart is
                // the moment to make sure of it.
                let session: wire::Session = client
                    .send_json(
                        Method::PATCH,
                        &path,
                        &serde_json::json!({ "permission": rules }),
                    )
                    .await
                    .unwrap_or(session);
                check_rules(&session, &rules)?;
                session.id
            }
            (None, Some((source, message_id))) => {
                let path = format!("/session/{}/fork", path_segment(&source)?);
                let forked: wire::Session = client
                    .send_json(Method::POST, &path, &ForkBody { message_id })
                    .await?;
                let path = format!("/session/{}", path_segment(&forked.id)?);
                let session: wire::Session = client
                    .send_json(
                        Method::PATCH,
                        &path,
                        &serde_json::json!({ "permission": rules }),
                    )
                    .await?;
                check_rules(&session, &rules)?;
                session.id
            }
            (None, None) => {
                let session: wire::Session = client
                    .send_json(
                        Method::POST,
                        "/session",
                        &SessionCreateBody {
                            title: None,
                            permission: rules.clone(),
                        },
                    )
                    .await?;
                check_rules(&session, &rules)?;
                session.id
            }
        };
        let binding = Binding {
            server: Arc::clone(&server),
            opencode_session: opencode_session.clone(),
        };
        // A session restored with its pane: a turn cohost did not send is the person's there.
        lock(&live.forwarder).has_terminal = self
            .inner
            .core
            .read(|state| {
                state
                    .sessions
                    .get(&live.session_id)
                    .map(|s| s.pane.is_some())
            })
            .unwrap_or(false);
        // Follow the stream before anything can be prompted.
        let (connected_tx, connected_rx) = tokio::sync::oneshot::channel();
        let body = client.stream("/event").await?;
        tokio::spawn(dispatch(
            Arc::clone(&self.inner),
            Arc::clone(live),
            binding.clone(),
            body,
            connected_tx,
        ));
        match tokio::time::timeout(CONNECT_TIMEOUT, connected_rx).await {
            Ok(Ok(())) => {}
            _ => {
                return Err(HostError::failed(
                    Runtime::Opencode,
                    format!(
                        "opencode's event stream did not connect; its last output:\n{}",
                        server.tail.render()
                    ),
                ));
            }
        }
        if self.inner.thread_of(&live.session_id).is_some() {
            // Restored: what OpenCode kept that was not stored (a turn the restart cut
            // short, items of it) is stored now; what was stored is recognised and dropped.
            let path = format!("/session/{}/message", path_segment(&opencode_session)?);
            let history: Vec<MessageWithParts> = client.get(&path).await?;
            for kind in normalize::history(&history) {
                self.inner.store(&live.session_id, kind).await;
            }
        }
        hosted::append_once(
            &self.inner.core,
            &live.session_id,
            EventKind::SessionBound(SessionBound {
                thread_id: opencode_session,
                backend: format!("opencode:{}", server.pid),
            }),
        )
        .await?;
        live.binding.send_replace(Some(binding));
        Ok(())
    }

    async fn create_session(
        &self,
        request: CreateSession,
        forked_from: Option<(String, ForkOrigin, Option<String>)>,
    ) -> Result<HostedSessionView, HostError> {
        self.bin()?;
        let session_id = new_session_id();
        let created = GATED.created(
            request,
            DEFAULT_POLICY,
            forked_from.as_ref().map(|(_, origin, _)| origin.clone()),
        );
        self.inner
            .core
            .append(Some(session_id.clone()), EventKind::SessionCreated(created))
            .await?;
        let live = self.inner.live_for(&session_id);
        let fork_of = forked_from.map(|(source, _, message)| (source, message));
        if let Err(error) = self.bind(&live, None, fork_of).await {
            self.inner
                .status(&session_id, SessionState::Lost, Some(error.to_string()))
                .await;
            live.cancel.cancel();
            lock(&self.inner.live).remove(&session_id);
            return Err(error);
        }
        self.view(&session_id)
    }

    async fn settle_pending(&self, live: &Live, binding: &Binding) {
        for id in hosted::take_all_pending(&self.inner.approvals, &live.session_id) {
            self.inner.reject(binding, &id).await;
            self.inner
                .store(&live.session_id, resolved_by_runtime(id, Some("cancel")))
                .await;
        }
        self.inner.settle_questions(live, binding).await;
    }

    async fn do_interrupt(&self, session_id: &str, turn: Option<&str>) -> Result<bool, HostError> {
        let live = self.inner.live_session(session_id)?;
        let Some(binding) = live.binding.borrow().clone() else {
            return Ok(false);
        };
        let _decide = live.decide.lock().await;
        let current = {
            let mut forwarder = lock(&live.forwarder);
            let current = forwarder.current.clone();
            if current.is_some() && turn.is_none_or(|wanted| Some(wanted) == current.as_deref()) {
                forwarder.interrupt_requested = true;
            }
            current
        };
        let Some(current) = current else {
            return Ok(false);
        };
        if turn.is_some_and(|wanted| wanted != current) {
            return Ok(false);
        }
        // Settle every pending permission and question first: OpenCode keeps a permission
        // past an abort, and a late "once" would run the tool.
        self.settle_pending(&live, &binding).await;
        let path = format!(
            "/session/{}/abort",
            path_segment(&binding.opencode_session)?
        );
        binding.client().post(&path, &serde_json::json!({})).await?;
        // A permission or question asked in the instant before the abort landed: reject it
        // too.
        self.inner.sweep_permissions(&live, &binding).await;
        self.inner.sweep_questions(&live, &binding).await;
        Ok(true)
    }
}

impl OpencodeHost {
    /// The models of OpenCode's configured providers, as `provider/model` ids, asked of a live
    /// session's server (or of one started for the purpose in the scratch directory).
    pub(super) async fn list_models(&self) -> Result<serde_json::Value, HostError> {
        let running = lock(&self.inner.live)
            .values()
            .find_map(|live| live.binding.borrow().clone());
        let transient;
        let client = match &running {
            Some(binding) => binding.client().clone(),
            None => {
                let bin = self.bin()?.clone();
                crate::runtime::common::private_dir(&self.inner.scratch).map_err(|error| {
                    HostError::failed_by(
                        Runtime::Opencode,
                        format!("cannot create {}", self.inner.scratch.display()),
                        error,
                    )
                })?;
                transient = ServerProcess::spawn(&bin, &self.inner.scratch).await?;
                transient.client.clone()
            }
        };
        let providers: wire::ConfigProviders = client.get("/config/providers").await?;
        let config: wire::Config = client.get("/config").await.unwrap_or_default();
        let mut models = Vec::new();
        for provider in &providers.providers {
            for (key, model) in &provider.models {
                let model_id = model.id.clone().unwrap_or_else(|| key.clone());
                let id = format!("{}/{model_id}", provider.id);
                models.push(serde_json::json!({
                    "id": id,
                    "providerId": provider.id,
                    "modelId": model_id,
                    "displayName": model.name.clone().unwrap_or_else(|| model_id.clone()),
                    "provider": provider.name.clone().unwrap_or_else(|| provider.id.clone()),
                    "isDefault": config.model.as_deref() == Some(id.as_str()),
                }));
            }
        }
        Ok(serde_json::Value::Array(models))
    }
}

fn check_rules(session: &wire::Session, rules: &[PermissionRule]) -> Result<(), HostError> {
    let applied = session.permission.as_deref().unwrap_or_default();
    if rules.iter().all(|rule| applied.contains(rule)) {
        Ok(())
    } else {
        Err(HostError::failed(
            Runtime::Opencode,
            format!(
                "opencode did not take the session's permission rules (it answered {applied:?}); not running a session whose tools could act without the approval its policy requires"
            ),
        ))
    }
}

impl Inner {
    fn live_for(&self, session_id: &str) -> Arc<Live> {
        hosted::live_entry(&self.live, session_id, || Live {
            session_id: session_id.to_string(),
            binding: watch::channel(None).0,
            inject: tokio::sync::Mutex::new(()),
            decide: tokio::sync::Mutex::new(()),
            forwarder: Mutex::new(Forwarder::default()),
            placed: watch::channel(()).0,
            cancel: CancellationToken::new(),
        })
    }

    fn live_session(&self, session_id: &str) -> Result<Arc<Live>, HostError> {
        hosted::check_open(&self.core, session_id, Runtime::Opencode)?;
        if self.adoptions.is_adopted(session_id) {
            // An adopted OpenCode has no server of cohost's: what needs one (fork, models, a
            // co-driving terminal) is refused, never parked waiting for one.
            return Err(HostError::Unsupported(format!(
                "session `{session_id}` drives an opencode TUI adopted in its pane: only prompts, interrupts, its permission dialog's answers and disown reach it (no fork, model switch or terminal)"
            )));
        }
        Ok(self.live_for(session_id))
    }

    fn settings(&self, session_id: &str) -> Option<SessionCreated> {
        hosted::settings(&self.core, session_id)
    }

    fn thread_of(&self, session_id: &str) -> Option<String> {
        self.core.read(|state| {
            state
                .sessions
                .get(session_id)
                .and_then(|s| s.thread_id.clone())
        })
    }

    async fn wait_bound(&self, live: &Live) -> Result<Binding, HostError> {
        hosted::wait_bound(&live.binding, PARK_TIMEOUT, &live.session_id).await
    }

    async fn status(&self, session_id: &str, state: SessionState, message: Option<String>) {
        hosted::status(&self.core, session_id, state, message).await
    }

    async fn store(&self, session_id: &str, kind: EventKind) {
        hosted::store(&self.core, session_id, kind, Runtime::Opencode).await
    }

    /// Rejects a permission request in OpenCode (no message: the turn does not go on with it).
    async fn reject(&self, binding: &Binding, request_id: &str) {
        let Ok(id) = path_segment(request_id) else {
            return;
        };
        let result = binding
            .client()
            .post(
                &format!("/permission/{id}/reply"),
                &PermissionReplyBody {
                    reply: "reject",
                    message: None,
                },
            )
            .await;
        if let Err(error) = result
            && !error.is_not_found()
        {
            tracing::warn!(%error, request_id, "could not reject an opencode permission");
        }
    }

    /// Rejects whatever permission of the session OpenCode still lists.
    async fn sweep_permissions(&self, live: &Live, binding: &Binding) {
        let listed: Vec<PermissionRequest> = match binding.client().get("/permission").await {
            Ok(listed) => listed,
            Err(error) => {
                tracing::warn!(%error, "could not list opencode's pending permissions");
                return;
            }
        };
        for request in listed
            .iter()
            .filter(|r| r.session_id == binding.opencode_session)
        {
            let ours = lock(&self.approvals).remove(&request.id).is_some();
            self.reject(binding, &request.id).await;
            if ours {
                self.store(
                    &live.session_id,
                    resolved_by_runtime(request.id.clone(), Some("cancel")),
                )
                .await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::session_host::message_id;
    use super::*;

    #[test]
    fn policies_map_to_rulesets_that_ask_for_anything_that_acts() {
        let never = ruleset("never");
        assert_eq!(never[0], PermissionRule::new("*", "allow"));
        for policy in ["untrusted", "on-request"] {
            let rules = ruleset(policy);
            assert_eq!(rules[0], PermissionRule::new("*", "ask"));
            // Last match wins: nothing after `* ask` allows a tool that acts.
            for acting in ["bash", "edit", "write", "webfetch", "external_directory"] {
                let last = rules
                    .iter()
                    .rev()
                    .find(|r| r.permission == "*" || r.permission == acting)
                    .unwrap();
                assert_eq!(last.action, "ask", "{policy} {acting}");
            }
            assert!(rules.contains(&PermissionRule::new("task", "deny")));
        }
        // Questions are relayed under every policy; the last rule for `question` allows it.
        for policy in APPROVAL_POLICIES {
            let rules = ruleset(policy);
            let last = rules
                .iter()
                .rev()
                .find(|r| r.permission == "*" || r.permission == "question")
                .unwrap();
            assert_eq!(*last, PermissionRule::new("question", "allow"), "{policy}");
        }
        assert!(!never.contains(&PermissionRule::new("task", "deny")));
    }

    #[test]
    fn message_ids_look_like_opencodes_and_ascend() {
        let a = message_id();
        let b = message_id();
        assert!(a.starts_with("msg_") && a.len() == 4 + 12 + 14, "{a}");
        assert!(a[4..16] <= b[4..16], "{a} {b}");
    }
}
