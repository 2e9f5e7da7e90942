//! Hosted sessions: create, list, send, interrupt, approvals, capabilities (goal, fork, models,
//! slash commands), terminals, relaunch, the runtimes' permission hooks, and doctor — each
//! validated once and routed to the session's runtime through the registry.

use std::path::PathBuf;

use serde_json::{Value, json};

use super::{ErrorKind, Service, ServiceError};
use crate::protocol::codes;
use crate::protocol::{
    ApprovalEntry, Bare, Budget, CreatedReply, DoctorReport, Field, HostedSessionView, InjectError,
    Message, PromptSent, Runtime, RuntimeList, TerminalSpec, message,
};
use crate::runtime::{Capability, CreateSession, Forked, HostError};

/// `POST /api/sessions` (and MCP `start_session`) before validation.
#[derive(Debug, Clone, Default)]
pub struct CreateRequest {
    pub runtime: String,
    pub cwd: String,
    pub model: Option<String>,
    pub approval_policy: Option<String>,
    pub sandbox: Option<String>,
    pub budget: Option<Budget>,
    pub permission_mode: Option<String>,
    pub tmux_session: Option<String>,
    pub terminal: bool,
    pub idempotency_key: Option<String>,
    /// Sent at once as the first message (a direct inject, tracked as a task).
    pub prompt: Option<String>,
    /// A profile of the config file whose values are this request's defaults.
    pub profile: Option<String>,
}

impl From<crate::protocol::CreateBody> for CreateRequest {
    /// `POST /api/sessions`'s body (its `machine` already decided: this one).
    fn from(body: crate::protocol::CreateBody) -> Self {
        CreateRequest {
            runtime: body.runtime,
            cwd: body.cwd,
            model: body.model,
            approval_policy: body.approval_policy,
            sandbox: body.sandbox,
            budget: body.budget,
            permission_mode: body.permission_mode,
            tmux_session: body.tmux_session,
            terminal: body.terminal,
            idempotency_key: body.idempotency_key,
            prompt: body.prompt,
            profile: body.profile,
        }
    }
}

/// The goal statuses codex takes.
pub const GOAL_STATUSES: [&str; 4] = ["active", "paused", "budgetLimited", "complete"];

pub fn check_key(field: Field, key: &Option<String>) -> Result<(), ServiceError> {
    match key {
        Some(key) if key.is_empty() || key.len() > 256 => Err(ServiceError::field(
            field,
            message![field, " must be 1 to 256 bytes"],
        )),
        _ => Ok(()),
    }
}

fn check_choice(
    field: Field,
    value: &Option<String>,
    allowed: &[&str],
) -> Result<(), ServiceError> {
    match value {
        Some(value) if !allowed.contains(&value.as_str()) => Err(ServiceError::field(
            field,
            message![
                field,
                format!(" must be one of {}, got `{value}`", allowed.join(", "))
            ],
        )),
        _ => Ok(()),
    }
}

/// A `cwd` that is neither absolute nor starts with `~`.
fn relative_cwd() -> ServiceError {
    ServiceError::field(
        Field::Cwd,
        message![
            Field::Cwd,
            " must be an absolute path (or start with `~`, your home)"
        ],
    )
}

/// `cwd` as a shell expands a word: `~` and `~/…` are the daemon's `$HOME`, `~user` and
/// `~user/…` that user's home (`/etc/passwd`); anything else is taken as given. The daemon
/// does it, so HTTP, MCP and the CLI (which sends such a path untouched) agree.
pub fn expand_home(cwd: &str) -> Result<PathBuf, ServiceError> {
    let home = std::env::var_os("HOME")
        .filter(|home| !home.is_empty())
        .map(PathBuf::from);
    expand_tilde(cwd, home.as_deref(), |user| {
        let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
        home_in_passwd(&passwd, user)
    })
    .map_err(|rest| ServiceError::field(Field::Cwd, message![Field::Cwd, rest]))
}

/// [`expand_home`] without the environment: `home` is `$HOME`, `user_home` looks a user up.
fn expand_tilde(
    cwd: &str,
    home: Option<&std::path::Path>,
    user_home: impl Fn(&str) -> Option<PathBuf>,
) -> Result<PathBuf, String> {
    let Some(word) = cwd.strip_prefix('~') else {
        return Ok(PathBuf::from(cwd));
    };
    let (user, rest) = match word.split_once('/') {
        Some((user, rest)) => (user, rest),
        None => (word, ""),
    };
    let base = if user.is_empty() {
        home.map(std::path::Path::to_path_buf).ok_or_else(|| {
            format!(" {cwd} starts with `~`, but the daemon has no $HOME to expand it to")
        })?
    } else {
        user_home(user).ok_or_else(|| {
            format!(" {cwd}: there is no user `{user}` whose home `~{user}` could name")
        })?
    };
    Ok(if rest.is_empty() {
        base
    } else {
        base.join(rest)
    })
}

/// The home directory of `user` in an `/etc/passwd` text (`name:x:uid:gid:gecos:home:shell`).
fn home_in_passwd(passwd: &str, user: &str) -> Option<PathBuf> {
    passwd.lines().find_map(|line| {
        let fields: Vec<&str> = line.split(':').collect();
        (fields.len() >= 7 && fields[0] == user && !fields[5].is_empty())
            .then(|| PathBuf::from(fields[5]))
    })
}

/// Inject errors use the outcome names: `not_live`, `not_ready`, `failed`.
fn inject_error(error: HostError) -> ServiceError {
    let message = error.to_string();
    match error {
        HostError::UnknownSession(_) => ServiceError::not_found(codes::NOT_LIVE, message),
        HostError::Closed(_) | HostError::ClosedBecause(_) => {
            ServiceError::conflict(codes::NOT_LIVE, message)
        }
        HostError::NotReady(_) | HostError::NotReadyBecause(_) => {
            ServiceError::new(ErrorKind::Unavailable, codes::NOT_READY, message)
        }
        HostError::Failed { .. } | HostError::Unavailable { .. } => {
            super::log_causes(&error);
            ServiceError::new(ErrorKind::Upstream, codes::FAILED, message)
        }
        other => ServiceError::from(other),
    }
}

impl Service {
    /// Validates a create request and starts the session (with its terminal when asked). A
    /// `prompt` is sent at once and tracked as a task; its failure leaves the session standing.
    pub async fn create(&self, request: CreateRequest) -> Result<CreatedReply, ServiceError> {
        let (request, profile) = self.apply_profile(request)?;
        if request.runtime.is_empty() {
            return Err(ServiceError {
                code: codes::MISSING_FIELD,
                ..ServiceError::field(
                    Field::Runtime,
                    message![
                        Field::Runtime,
                        " is required (or a ",
                        Field::Profile,
                        " that names one)"
                    ],
                )
            });
        }
        if request.cwd.is_empty() {
            return Err(ServiceError {
                code: codes::MISSING_FIELD,
                ..ServiceError::field(
                    Field::Cwd,
                    message![
                        Field::Cwd,
                        " is required (or a ",
                        Field::Profile,
                        " that sets one)"
                    ],
                )
            });
        }
        let runtime = Runtime::parse(&request.runtime).ok_or_else(|| {
            ServiceError::field(
                Field::Runtime,
                format!(
                    "runtime `{}` is not supported (supported: {})",
                    request.runtime,
                    Runtime::ALL.map(Runtime::as_str).join(", ")
                ),
            )
        })?;
        let host = self.host(runtime)?;
        let create = CreateSession {
            cwd: expand_home(&request.cwd)?,
            model: request.model,
            idempotency_key: request.idempotency_key,
            tmux_session: request.tmux_session,
            terminal: request.terminal,
            approval_policy: request.approval_policy,
            sandbox: request.sandbox,
            budget: request.budget,
            permission_mode: request.permission_mode,
            profile,
        };
        host.check_create(&create)?;
        if let Some(name) = &create.tmux_session
            && (name.is_empty() || name.len() > 128 || name.contains([':', '.']))
        {
            return Err(ServiceError::field(
                Field::TmuxSession,
                message![
                    Field::TmuxSession,
                    " must be 1 to 128 bytes without `:` or `.`"
                ],
            ));
        }
        if !create.cwd.is_absolute() {
            return Err(relative_cwd());
        }
        if !create.cwd.is_dir() {
            return Err(ServiceError::field(
                Field::Cwd,
                message![
                    Field::Cwd,
                    format!(" {} is not a directory", create.cwd.display())
                ],
            ));
        }
        check_key(Field::IdempotencyKey, &create.idempotency_key)?;
        if let Some(model) = &create.model
            && (model.is_empty() || model.len() > 256)
        {
            return Err(ServiceError::field(
                Field::Model,
                message![Field::Model, " must be 1 to 256 bytes"],
            ));
        }
        let key = create.idempotency_key.clone();
        // A retried create finds the session of its key, whatever the runtime, at once once it
        // is logged (its backend or pane may still be starting); creates of one key run one at
        // a time, so two retries cannot both start a session.
        let existing = |service: &Service| {
            key.as_ref().and_then(|key| {
                service.core.read(|state| {
                    state
                        .sessions
                        .by_creation_key(key)
                        .and_then(|s| state.session_view(&s.id))
                })
            })
        };
        let mut held = None;
        if let Some(k) = &key
            && existing(self).is_none()
        {
            held = Some(self.create_keys.hold(k).await);
        }
        let session = match existing(self) {
            Some(view) => view,
            None => host.create(create).await?,
        };
        drop(held);
        let mut created = CreatedReply {
            session,
            inject: None,
            task_id: None,
            inject_error: None,
        };
        if let Some(prompt) = request.prompt.filter(|p| !p.trim().is_empty()) {
            // The prompt's idempotency derives from the creation key, so a retried create
            // does not send the prompt twice.
            let key = key.map(|k| format!("create:{k}"));
            match host.inject(&created.session.id, &prompt, key.clone()).await {
                Ok(outcome) => {
                    // Tracked as a task like every prompt.
                    created.task_id = self
                        .tasks
                        .record_direct(&created.session.id, &prompt, key, &outcome)
                        .await
                        .ok();
                    created.inject = Some(outcome);
                }
                Err(error) => {
                    created.inject_error = Some(InjectError {
                        code: inject_error(error).code.to_string(),
                        message: "the prompt was not sent".into(),
                    })
                }
            }
        }
        Ok(created)
    }

    /// A create request with its profile (if it names one) applied under its own values, and
    /// the profile's effective values; a profile error names the profile, the key and the file.
    fn apply_profile(
        &self,
        mut request: CreateRequest,
    ) -> Result<(CreateRequest, Option<crate::protocol::SessionProfile>), ServiceError> {
        let Some(name) = request.profile.take() else {
            return Ok((request, None));
        };
        let applied = self
            .profiles
            .current()
            .apply(
                &name,
                super::profiles::Overrides {
                    runtime: Some(request.runtime.clone()),
                    cwd: Some(request.cwd.clone()),
                    model: request.model.clone(),
                    approval_policy: request.approval_policy.clone(),
                    permission_mode: request.permission_mode.clone(),
                    sandbox: request.sandbox.clone(),
                    prompt: request.prompt.clone(),
                },
            )
            .map_err(|error| ServiceError::field(Field::Profile, error.to_string()))?;
        request.runtime = applied.runtime.as_str().to_string();
        request.cwd = applied.cwd.unwrap_or_default();
        request.model = applied.model;
        request.approval_policy = applied.approval_policy;
        request.permission_mode = applied.permission_mode;
        request.sandbox = applied.sandbox;
        request.prompt = applied.prompt;
        Ok((request, Some(applied.profile)))
    }

    /// Where MCP's start puts a session: `cwd`, else the directory `profile` sets, held to the
    /// project roots ([`Service::check_root`]); empty when neither names one (the create's own
    /// error then names `cwd`, or the profile's).
    pub fn mcp_cwd(
        &self,
        cwd: Option<&str>,
        profile: Option<&str>,
    ) -> Result<String, ServiceError> {
        let cwd_text = cwd
            .map(str::to_string)
            .or_else(|| profile.and_then(|name| self.profile_cwd(name)));
        match cwd_text {
            Some(cwd_text) => Ok(self.check_root(&cwd_text)?.to_string_lossy().into_owned()),
            None => Ok(String::new()),
        }
    }

    /// Where an MCP client may start a session: `cwd`, resolved (symlinks, `..`), under one of
    /// the project roots the owner allowed.
    pub fn check_root(&self, cwd: &str) -> Result<PathBuf, ServiceError> {
        let forbidden = |message: Message| {
            ServiceError::new(ErrorKind::Forbidden, codes::PERMISSION_DENIED, message)
        };
        if self.mcp_roots.is_empty() {
            return Err(forbidden(
                "the owner allowed no project roots for sessions started over MCP (cohost serve --mcp-allowed-root DIR)".into(),
            ));
        }
        let path = expand_home(cwd)?;
        if !path.is_absolute() {
            return Err(relative_cwd());
        }
        let Ok(path) = path.canonicalize() else {
            return Err(ServiceError::field(
                Field::Cwd,
                message![Field::Cwd, format!(" {cwd} does not exist")],
            ));
        };
        if !path.is_dir() {
            return Err(ServiceError::field(
                Field::Cwd,
                message![Field::Cwd, format!(" {cwd} is not a directory")],
            ));
        }
        // Compared after resolving symlinks and `..`, so a path cannot talk its way out.
        if !self.mcp_roots.iter().any(|root| path.starts_with(root)) {
            return Err(forbidden(message![
                Field::Cwd,
                format!(
                    " {} is outside the project roots the owner allowed",
                    path.display()
                )
            ]));
        }
        Ok(path)
    }

    /// A person saw the session (the web page opened it): its tracker instance, if it had
    /// news (a turn's end not seen yet), is reported again as `idle` — a report that is not
    /// terminal marks it seen, the opensessions rule — so every list agrees it waits for a
    /// prompt. Unlike `POST /api/focus` it touches no other instance of the tmux session.
    pub async fn seen(&self, id: &str) -> Result<usize, ServiceError> {
        let instances = self.core.read(|state| {
            let record = state.sessions.get(id)?;
            let thread = record.thread_id.clone().unwrap_or_else(|| id.to_string());
            Some(state.tracker.hosted_instances(&thread))
        });
        let Some(instances) = instances else {
            return Err(ServiceError::unknown_session(id));
        };
        let mut seen = 0;
        for (tmux_session, mut update, unseen) in instances {
            if !unseen {
                continue;
            }
            update.status = crate::protocol::AgentStatus::Idle;
            update.ts = crate::core::now_ms();
            self.core
                .append(
                    Some(tmux_session),
                    crate::protocol::EventKind::AgentUpdated(update),
                )
                .await?;
            seen += 1;
        }
        Ok(seen)
    }

    pub fn sessions(&self) -> Vec<HostedSessionView> {
        self.core.read(|state| {
            state
                .sessions
                .iter()
                .filter_map(|s| state.session_view(&s.id))
                .collect()
        })
    }

    pub fn session(&self, id: &str) -> Result<HostedSessionView, ServiceError> {
        self.core
            .read(|state| state.session_view(id))
            .ok_or_else(|| ServiceError::unknown_session(id))
    }

    pub async fn close(&self, id: &str) -> Result<(), ServiceError> {
        Ok(self.host_of(id)?.close(id).await?)
    }

    /// Sends a prompt now (a new turn, a steer, or queued by the agent), tracked as a task. A
    /// key a queued task holds is that task's: a direct send must not reuse it.
    pub async fn send(
        &self,
        id: &str,
        text: &str,
        key: Option<String>,
    ) -> Result<PromptSent, ServiceError> {
        self.send_prompt(id, text, Vec::new(), key).await
    }

    /// [`Service::send`] with images attached (checked by `check_images`; runtimes that
    /// take none answer `unsupported`).
    pub async fn send_prompt(
        &self,
        id: &str,
        text: &str,
        images: Vec<crate::protocol::PromptImage>,
        key: Option<String>,
    ) -> Result<PromptSent, ServiceError> {
        check_key(Field::IdempotencyKey, &key)?;
        super::requests::check_images(&images)?;
        if text.trim().is_empty() {
            return Err(ServiceError::field(
                Field::Text,
                message![Field::Text, " must not be empty"],
            ));
        }
        if let Some(key) = &key {
            let held = self.core.read(|s| {
                let sent = s.sessions.get(id).is_some_and(|r| r.sent(key).is_some());
                s.tasks
                    .by_key(id, key)
                    .filter(|_| !sent)
                    .map(|t| t.id.clone())
            });
            if let Some(task) = held {
                return Err(ServiceError::conflict(
                    codes::IDEMPOTENCY_KEY_IN_USE,
                    message![
                        Field::IdempotencyKey,
                        format!(" already names queued task `{task}`")
                    ],
                )
                .with_field(Field::IdempotencyKey));
            }
        }
        let host = self
            .host_of(id)
            .map_err(|_| ServiceError::not_found(codes::NOT_LIVE, format!("no session `{id}`")))?;
        let outcome = if images.is_empty() {
            host.inject(id, text, key.clone()).await
        } else {
            host.inject_images(id, text, images, key.clone()).await
        }
        .map_err(inject_error)?;
        // The prompt was taken: track it as a task (a repeat with the key finds the first one).
        let task_id = self.tasks.record_direct(id, text, key, &outcome).await?;
        Ok(PromptSent { outcome, task_id })
    }

    pub async fn interrupt(&self, id: &str) -> Result<bool, ServiceError> {
        Ok(self.host_of(id)?.interrupt(id, None).await?)
    }

    /// Every approval of the session, pending or resolved.
    pub fn approvals(&self, id: &str) -> Result<Vec<ApprovalEntry>, ServiceError> {
        self.core
            .read(|s| {
                s.sessions.get(id).map(|record| {
                    record
                        .approvals
                        .values()
                        .map(|a| ApprovalEntry {
                            request: a.request.clone(),
                            requested_at: a.requested_at,
                            resolved: a.resolved.clone(),
                            pending: a.resolved.is_none(),
                            session_id: None,
                        })
                        .collect()
                })
            })
            .ok_or_else(|| ServiceError::unknown_session(id))
    }

    pub async fn resolve_approval(
        &self,
        id: &str,
        approval: &str,
        decision: &str,
        by: Option<&str>,
    ) -> Result<(), ServiceError> {
        let by = check_by(by)?;
        self.host_of(id)?
            .resolve_approval(id, approval, decision, by)
            .await
            .map_err(|error| match error {
                HostError::Invalid(message) => ServiceError::field(Field::Decision, message),
                other => ServiceError::from(other),
            })
    }

    pub async fn goal_get(&self, id: &str) -> Result<Capability, ServiceError> {
        Ok(self.host_of(id)?.goal_get(id).await?)
    }

    pub async fn goal_set(
        &self,
        id: &str,
        objective: Option<String>,
        status: Option<String>,
        token_budget: Option<u64>,
    ) -> Result<Capability, ServiceError> {
        check_choice(Field::Status, &status, &GOAL_STATUSES)?;
        if objective.is_none() && status.is_none() && token_budget.is_none() {
            return Err(ServiceError::invalid(message![
                "give at least one of ",
                Bare(Field::Objective),
                ", ",
                Bare(Field::Status),
                ", ",
                Bare(Field::TokenBudget)
            ]));
        }
        Ok(self
            .host_of(id)?
            .goal_set(id, objective, status, token_budget)
            .await?)
    }

    pub async fn goal_clear(&self, id: &str) -> Result<Capability, ServiceError> {
        Ok(self.host_of(id)?.goal_clear(id).await?)
    }

    pub async fn fork(&self, id: &str, after_turn: Option<String>) -> Result<Forked, ServiceError> {
        Ok(self.host_of(id)?.fork(id, after_turn).await?)
    }

    /// Models of a runtime (the first registered one, codex, when none is named).
    pub async fn models(&self, runtime: Option<&str>) -> Result<Capability, ServiceError> {
        let name = runtime.unwrap_or(Runtime::ALL[0].as_str());
        match Runtime::parse(name).and_then(|r| self.hosts.get(r).cloned()) {
            Some(host) => Ok(host.models().await?),
            None => Ok(Capability::fail(
                "unsupported",
                format!("listing models is not supported for runtime `{name}`"),
            )),
        }
    }

    /// Chat-bot slash commands: `/goal [text|clear]`, `/fork`, `/models`, `/interrupt`, and
    /// (in `requests.rs`) `/plan on|off`, `/answer [requestId] text`.
    pub async fn command(&self, id: &str, text: &str) -> Result<Capability, ServiceError> {
        let host = self.host_of(id)?;
        let text = text.trim();
        let (name, rest) = text.split_once(char::is_whitespace).unwrap_or((text, ""));
        let rest = rest.trim();
        Ok(match name {
            "/goal" if rest.is_empty() => host.goal_get(id).await?,
            "/goal" if rest == "clear" => host.goal_clear(id).await?,
            "/goal" => {
                host.goal_set(id, Some(rest.to_string()), None, None)
                    .await?
            }
            "/fork" => match host.fork(id, None).await? {
                Ok(view) => Capability::ok(json!({ "session": view })),
                Err(capability) => capability,
            },
            "/models" => host.models().await?,
            "/interrupt" => {
                Capability::ok(json!({ "interrupted": host.interrupt(id, None).await? }))
            }
            "/plan" | "/answer" => return self.ask_command(id, name, rest).await,
            _ => {
                return Err(ServiceError::field(
                    Field::Text,
                    format!(
                        "unknown command `{name}`; known: /goal [text|clear], /fork, /models, /interrupt, /plan on|off, /answer [requestId] text"
                    ),
                ));
            }
        })
    }

    pub async fn relaunch(&self, id: &str) -> Result<(), ServiceError> {
        Ok(self.host_of(id)?.relaunch(id).await?)
    }

    pub async fn terminal_spec(
        &self,
        id: &str,
        include_token: bool,
    ) -> Result<TerminalSpec, ServiceError> {
        Ok(self.host_of(id)?.terminal_spec(id, include_token).await?)
    }

    pub async fn open_terminal(
        &self,
        id: &str,
        tmux_session: Option<String>,
    ) -> Result<HostedSessionView, ServiceError> {
        Ok(self.host_of(id)?.open_terminal(id, tmux_session).await?)
    }

    /// A runtime's permission hook asks for a decision and waits for it.
    pub async fn permission_request(
        &self,
        session: &str,
        request_id: &str,
        payload: Value,
    ) -> Result<Value, ServiceError> {
        if request_id.is_empty() || request_id.len() > 128 {
            return Err(ServiceError::field(
                Field::RequestId,
                message![Field::RequestId, " must be 1 to 128 bytes"],
            ));
        }
        Ok(self
            .host_of(session)?
            .permission_request(session, request_id, payload)
            .await?)
    }

    /// `GET /api/runtimes`: the runtimes this daemon hosts and how a session of each starts.
    pub fn runtimes(&self) -> RuntimeList {
        RuntimeList {
            runtimes: self.hosts.in_order().map(|h| h.start_choices()).collect(),
        }
    }

    /// `cohost doctor`: codex's checks at the top level (as before claude was covered), every
    /// other runtime's under its name, the watched Pi's under `pi`; `ok` when none found an
    /// issue, `warnings` from all.
    pub async fn doctor(&self) -> DoctorReport {
        let mut answer = DoctorReport::default();
        let flattened = self.hosts.flattened_doctor();
        for runtime in Runtime::ALL {
            let Some(host) = self.hosts.get(runtime) else {
                continue;
            };
            let report = host.doctor().await;
            let top = Some(runtime) == flattened;
            let prefix = if top {
                String::new()
            } else {
                format!("{runtime}: ")
            };
            answer
                .issues
                .extend(report.issues.iter().map(|issue| format!("{prefix}{issue}")));
            answer.warnings.extend(report.warnings.iter().cloned());
            if top {
                let mut details = report.details;
                details.remove("ok");
                answer.sections.extend(details);
            } else {
                answer.sections.insert(
                    runtime.as_str().to_string(),
                    serde_json::to_value(&report).unwrap_or_default(),
                );
            }
        }
        // The installed Pi and the Node it needs (the watcher's checks): warnings, never
        // issues. They join the hosted runtime's `pi` section when there is one.
        let pi = crate::watch::doctor::pi().await;
        answer
            .issues
            .extend(pi.issues.iter().map(|i| format!("pi: {i}")));
        answer.warnings.extend(pi.warnings.iter().cloned());
        let watched = serde_json::to_value(&pi).unwrap_or_default();
        match (answer.sections.get_mut("pi"), watched) {
            (Some(serde_json::Value::Object(hosted)), serde_json::Value::Object(watched)) => {
                for (key, value) in watched {
                    match (hosted.get_mut(&key), value) {
                        (Some(serde_json::Value::Array(mine)), serde_json::Value::Array(more)) => {
                            mine.extend(more)
                        }
                        (_, value) => {
                            hosted.insert(key, value);
                        }
                    }
                }
            }
            (_, watched) => {
                answer.sections.insert("pi".into(), watched);
            }
        }
        self.doctor_federation(&mut answer);
        for failure in self.failed_tasks() {
            answer.issues.push(format!(
                "daemon: {failure}; its work stopped until cohost restarts"
            ));
        }
        answer.ok = answer.issues.is_empty();
        answer
    }
}

/// Who answers (`by` of an approval or request answer): default `api`; a label is at most 64
/// bytes of printable text, so an event never carries a log-breaking or huge name.
pub(crate) fn check_by(by: Option<&str>) -> Result<&str, ServiceError> {
    match by {
        // `ResolvedBy::Api`.
        None => Ok("api"),
        Some(by)
            if !by.trim().is_empty() && by.len() <= 64 && !by.chars().any(char::is_control) =>
        {
            Ok(by)
        }
        Some(_) => Err(ServiceError::field(
            Field::By,
            "`by` must be 1 to 64 bytes of printable text",
        )),
    }
}

#[cfg(test)]
mod by_tests {
    #[test]
    fn by_defaults_to_api_and_refuses_empty_long_or_control_text() {
        assert_eq!(super::check_by(None).unwrap(), "api");
        assert_eq!(super::check_by(Some("web")).unwrap(), "web");
        for bad in ["", "  ", "a\nb", &"x".repeat(65)] {
            let error = super::check_by(Some(bad)).unwrap_err();
            assert_eq!(
                error.field.map(crate::protocol::Field::http_name),
                Some("by"),
                "{bad:?}"
            );
        }
    }
}

#[cfg(test)]
mod home_tests {
    use std::path::{Path, PathBuf};

    use super::{expand_tilde, home_in_passwd};

    const PASSWD: &str = "root:x:0:0:root:/root:/bin/bash\n\
                          ana:x:1000:1000:Ana,,,:/home/ana:/bin/zsh\n\
                          nohome:x:1001:1001::\n";

    fn expand(cwd: &str, home: Option<&str>) -> Result<PathBuf, String> {
        expand_tilde(cwd, home.map(Path::new), |user| {
            home_in_passwd(PASSWD, user)
        })
    }

    #[test]
    fn a_leading_tilde_is_the_home_as_a_shell_expands_it() {
        let home = Some("/home/me");
        assert_eq!(expand("~", home).unwrap(), Path::new("/home/me"));
        assert_eq!(expand("~/", home).unwrap(), Path::new("/home/me"));
        assert_eq!(
            expand("~/src/proj", home).unwrap(),
            Path::new("/home/me/src/proj")
        );
        assert_eq!(expand("~ana", home).unwrap(), Path::new("/home/ana"));
        assert_eq!(expand("~ana/x", home).unwrap(), Path::new("/home/ana/x"));
        // Only a leading `~` is special, as in a shell; other paths are taken as given.
        assert_eq!(expand("/srv/~/x", home).unwrap(), Path::new("/srv/~/x"));
        assert_eq!(expand("proj", home).unwrap(), Path::new("proj"));
    }

    #[test]
    fn an_unknown_user_or_a_missing_home_is_a_clear_error() {
        let error = expand("~nobody/x", Some("/home/me")).unwrap_err();
        assert!(error.contains("no user `nobody`"), "{error}");
        let error = expand("~nohome", Some("/home/me")).unwrap_err();
        assert!(error.contains("no user `nohome`"), "{error}");
        let error = expand("~/x", None).unwrap_err();
        assert!(error.contains("no $HOME"), "{error}");
    }
}
