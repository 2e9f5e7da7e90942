//! The MCP tools: each takes a closed argument object (unknown fields are refused) and answers
//! through [`super::answer`] / [`super::bound`], or [`super::failure`] when it fails.

use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{ErrorData, tool, tool_router};
use serde_json::{Value, json};

use super::args::*;
use super::window::{remote_values, with_machine};
use super::{CohostMcp, answer, answer_list, bound, failure, logged_output, output};
use crate::protocol::RemoteSurface::Mcp;
use crate::protocol::TaskSource as Source;
use crate::protocol::{
    Accepted, AgentEventParams, ApprovalDecided, ApprovalList, CancelResult, Capability,
    EditResult, EventsPage, ForkReply, Interrupted, QueueView, RequestAnswered, RequestList,
    ResultChunk, SendResult, SessionPage, SessionReply, SessionStarted, StateView, TaskReply,
    TaskWaited,
};
use crate::protocol::{Field, codes};
use crate::service::MAX_RESULT_CHUNK;
use crate::service::{CreateRequest, ServiceError};

type ToolResult = Result<CallToolResult, ErrorData>;

/// The `events` answer: an [`EventsPage`] whose events are the log's lines as stored (its
/// `outputSchema` is the page's read form, see [`logged_output`]).
#[derive(serde::Serialize)]
struct LoggedEvents {
    events: Vec<Value>,
    next: u64,
    head: u64,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    gaps: Vec<crate::protocol::SeqRange>,
}

pub(super) const DEFAULT_EVENTS: usize = 100;
pub(super) const MAX_EVENTS: usize = 1000;
/// The longest `wait_seconds` an `events` call may ask for.
const MAX_WAIT_SECONDS: f64 = 60.0;

impl CohostMcp {
    /// `edit_task` and `supersede_task`: a waiting task's prompt replaced `how`, if its
    /// revision is still `args.revision`.
    async fn revise_task(&self, args: EditArgs, how: Revise) -> ToolResult {
        let EditArgs {
            task_id,
            revision,
            prompt,
            idempotency_key,
        } = args;
        let edit = crate::protocol::EditBody {
            revision,
            text: prompt,
            idempotency_key,
        };
        let revised = match how {
            Revise::InPlace => self.service.world_edit_task(Mcp, &task_id, edit).await,
            Revise::Supersede => self.service.world_supersede_task(Mcp, &task_id, edit).await,
        };
        answered(revised)
    }

    /// The refusal when a human holds the session's control lease (MCP acts only while the
    /// lease is managed, like `interrupt`).
    fn human_holds(&self, id: &str, what: &str) -> Option<CallToolResult> {
        let lease = self.service.lease(id).ok()?;
        (lease.holder == crate::protocol::LeaseHolder::Human).then(|| {
            failure(
                codes::HUMAN_CONTROL,
                &format!("a human holds this session's control lease; only they {what}"),
            )
        })
    }
}

/// How `revise_task` replaces a waiting task's prompt.
enum Revise {
    /// In place: the same task, id and queue position (`edit_task`).
    InPlace,
    /// The task cancelled and a new one queued in its position (`supersede_task`).
    Supersede,
}

/// A command for another machine's session at a hub, sent as MCP's (the machine applies MCP's
/// rules), answered with the machine's answer or refusal.
async fn remote_tool(
    mcp: &CohostMcp,
    machine: &str,
    session: &str,
    op: crate::protocol::RemoteOp,
) -> ToolResult {
    answered(
        mcp.service
            .remote_from(crate::protocol::RemoteSurface::Mcp, machine, session, op)
            .await,
    )
}

/// A service's answer as the tool's: the value, or the error mapped as every tool maps it.
fn answered<T: serde::Serialize, E: Into<ServiceError>>(result: Result<T, E>) -> ToolResult {
    Ok(match result {
        Ok(value) => answer(value),
        Err(error) => failed(error),
    })
}

pub(super) fn failed(error: impl Into<ServiceError>) -> CallToolResult {
    CallToolResult::from(error.into())
}

pub(super) fn to_value(value: impl serde::Serialize) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

#[tool_router(vis = "pub(crate)")]
impl CohostMcp {
    #[tool(
        description = "List hosted sessions (codex and claude) with their state, control lease and waiting tasks. At a hub (serve --hub), every machine's: another machine's with its id qualified `machine/id`, its `machine` and `machineLink` (up, or down: its last known state).",
        annotations(read_only_hint = true),
        output_schema = output::<SessionPage>()
    )]
    async fn list_sessions(&self, Parameters(_): Parameters<NoArgs>) -> ToolResult {
        let sessions = self.service.world_sessions();
        let total = sessions.len();
        Ok(answer_list(
            SessionPage { sessions, total },
            "sessions",
            |kept, total| {
                format!(
                    "only the first {kept} of {total} sessions fit; read the others with get_session"
                )
            },
        ))
    }

    #[tool(
        description = "One hosted session: runtime, status, thread, pending approvals, control lease and waiting tasks. At a hub, `machine/id` is another machine's, as the hub last heard it.",
        annotations(read_only_hint = true),
        output_schema = output::<SessionReply>()
    )]
    async fn get_session(&self, Parameters(args): Parameters<SessionArgs>) -> ToolResult {
        if let Some((machine, id)) = self.service.remote_id(&args.session_id) {
            return answered(
                self.service
                    .remote_session(machine, id)
                    .map(|session| SessionReply { session }),
            );
        }
        answered(
            self.service
                .session(self.service.local_id(&args.session_id))
                .map(|session| SessionReply { session }),
        )
    }

    #[tool(
        description = "The tracker: tmux sessions, their agent instances and metadata. At a hub, every machine's (another machine's names qualified `machine/name`, with `machine` and `machineLink`) and `machines`: each machine's link, when it was last heard from and its lag.",
        annotations(read_only_hint = true),
        output_schema = output::<StateView>()
    )]
    async fn tracker_state(&self, Parameters(_): Parameters<NoArgs>) -> ToolResult {
        Ok(answer_list(
            self.service.world_state(),
            "sessions",
            |kept, total| format!("only the first {kept} of {total} tmux sessions fit"),
        ))
    }

    #[tool(
        description = "Report an agent's status in a tmux session (like POST /api/agent-event).",
        output_schema = output::<Accepted>()
    )]
    async fn post_agent_event(&self, Parameters(args): Parameters<AgentEventArgs>) -> ToolResult {
        let params = AgentEventParams {
            agent: args.agent,
            status: args.status.into_status(),
            tmux_session: args.tmux_session,
            project_dir: args.project_dir,
            ts: args.ts,
            thread_id: args.thread_id,
            thread_name: args.thread_name,
            last_user_prompt: args.last_user_prompt,
            pane_id: args.pane_id,
            liveness: args.liveness.map(LivenessArg::into_liveness),
        };
        answered(self.service.agent_event(params, false).await)
    }

    #[tool(
        description = "Start a hosted codex or claude session in a directory under a project root the owner allowed (`cohost serve --mcp-allowed-root DIR`), optionally with a first prompt, or from a `profile` of the daemon's config file (its runtime, directory, model, instructions, MCP servers…; the arguments given override it). A retry with the same idempotency_key returns the first session. At a hub, `machine` starts it on another machine, under that machine's own project roots.",
        output_schema = output::<SessionStarted>()
    )]
    async fn start_session(&self, Parameters(mut args): Parameters<StartArgs>) -> ToolResult {
        // At a hub, `machine` names where: another machine starts it under its own roots.
        if let Some(machine) = args.machine.take()
            && machine != self.service.machine()
        {
            if let Err(error) = self.service.known_machine(&machine) {
                return Ok(failed(error));
            }
            return super::remote::start(self, &machine, args).await;
        }
        // A profile's directory is held to the project roots like one given here.
        let cwd = match self
            .service
            .mcp_cwd(args.cwd.as_deref(), args.profile.as_deref())
        {
            Ok(cwd) => cwd,
            Err(error) => return Ok(failed(error)),
        };
        let created = match self
            .service
            .create(CreateRequest {
                runtime: args
                    .runtime
                    .map(|r| r.as_str().to_string())
                    .unwrap_or_default(),
                cwd,
                profile: args.profile.clone(),
                model: args.model,
                approval_policy: args.approval_policy.map(|p| p.as_str().to_string()),
                sandbox: args.sandbox.map(|s| s.as_str().to_string()),
                permission_mode: args.permission_mode.map(|m| m.as_str().to_string()),
                idempotency_key: args.idempotency_key.clone(),
                ..Default::default()
            })
            .await
        {
            Ok(created) => created,
            Err(error) => return Ok(failed(error)),
        };
        let mut started = SessionStarted {
            session: created.session,
            task: None,
        };
        if let Some(prompt) = args.prompt.filter(|p| !p.trim().is_empty()) {
            // Keyed on the start's key, so a retried start does not queue the prompt twice.
            let key = args.idempotency_key.map(|k| format!("start:{k}"));
            match self
                .service
                .queue_task(&started.session.id, &prompt, key, Source::Mcp)
                .await
            {
                Ok(sent) => started.task = Some(sent.task),
                Err(error) => return Ok(failed(error)),
            }
        }
        Ok(answer(started))
    }

    #[tool(
        description = "Queue a prompt for a hosted session as a task. It is delivered when the session is idle and under managed control; while a human holds control it waits (waitingReason human_control). Follow it with `events` (wait) and read the answer with `task_result`. A retry with the same idempotency_key returns the same task.",
        output_schema = output::<SendResult>()
    )]
    async fn send(&self, Parameters(args): Parameters<SendArgs>) -> ToolResult {
        // At a hub, another machine's session: a hub task, delivered into its machine's queue.
        if let Some((machine, session)) = self.service.remote_id(&args.session_id) {
            let body = crate::protocol::SendBody {
                text: args.prompt,
                idempotency_key: args.idempotency_key,
                source: Some(Source::Mcp.as_str().to_string()),
            };
            return answered(self.service.queue_remote_task(machine, session, body).await);
        }
        answered(
            self.service
                .queue_task(
                    &args.session_id,
                    &args.prompt,
                    args.idempotency_key,
                    Source::Mcp,
                )
                .await,
        )
    }

    #[tool(
        description = "Wait until a task finishes (or `timeout_seconds` pass) and answer its status, as task_status does, with `finished`: true once it has. Read the answer with task_result.",
        annotations(read_only_hint = true),
        output_schema = output::<TaskWaited>()
    )]
    async fn wait_task(&self, Parameters(args): Parameters<WaitTaskArgs>) -> ToolResult {
        let wait = args.timeout_seconds.unwrap_or(MAX_WAIT_SECONDS);
        if !(0.0..=MAX_WAIT_SECONDS).contains(&wait) {
            return Ok(failure(
                codes::INVALID_FIELD,
                &format!("`timeout_seconds` must be between 0 and {MAX_WAIT_SECONDS}"),
            ));
        }
        let wait = std::time::Duration::from_secs_f64(wait);
        Ok(
            match self.service.world_wait_task(Mcp, &args.task_id, wait).await {
                Ok(task) => {
                    let finished = task.phase == crate::protocol::TaskPhase::Finished;
                    answer(TaskWaited { task, finished })
                }
                Err(error) => failed(error),
            },
        )
    }

    #[tool(
        description = "A task's state (waiting, running, completed, failed, cancelled, unknown), delivery phase, waiting reason, revision, cancel outcome and a result excerpt.",
        annotations(read_only_hint = true),
        output_schema = output::<TaskReply>()
    )]
    async fn task_status(&self, Parameters(args): Parameters<TaskArgs>) -> ToolResult {
        answered(
            self.service
                .world_task(Mcp, &args.task_id)
                .await
                .map(|task| TaskReply { task }),
        )
    }

    #[tool(
        description = "A session's queue: its control lease (holder, generation), the task in flight, waiting tasks in delivery order, and recent outcomes.",
        annotations(read_only_hint = true),
        output_schema = output::<QueueView>()
    )]
    async fn queue(&self, Parameters(args): Parameters<SessionArgs>) -> ToolResult {
        Ok(
            match self.service.world_queue(Mcp, &args.session_id).await {
                Ok(queue) => answer_list(queue, "pending", |kept, _| {
                    format!("only the first {kept} pending tasks fit; read one with task_status")
                }),
                Err(error) => failed(error),
            },
        )
    }

    #[tool(
        description = "Read a finished task's final assistant text (redacted) by byte offset, in chunks of at most 16 KiB. Continue with offset = nextOffset until eof.",
        annotations(read_only_hint = true),
        output_schema = output::<ResultChunk>()
    )]
    async fn task_result(&self, Parameters(args): Parameters<ResultArgs>) -> ToolResult {
        let offset = args.offset.unwrap_or(0) as usize;
        let mut max = args.max_bytes.unwrap_or(MAX_RESULT_CHUNK as u64) as usize;
        if max == 0 || max > MAX_RESULT_CHUNK {
            return Ok(failure(
                codes::INVALID_FIELD,
                &format!("`max_bytes` must be between 1 and {MAX_RESULT_CHUNK}"),
            ));
        }
        // A chunk that escapes to more than the answer's budget comes back smaller, never cut.
        loop {
            let chunk = match self
                .service
                .world_task_result(Mcp, &args.task_id, offset, max)
                .await
            {
                Ok(chunk) => chunk,
                Err(error) => return Ok(failed(error)),
            };
            let bounded = match bound(to_value(&chunk), None) {
                Ok(bounded) => bounded,
                Err(failure) => return Ok(failure),
            };
            if !bounded.truncated || max <= 256 {
                return Ok(CallToolResult::structured(bounded.value));
            }
            max /= 2;
        }
    }

    #[tool(
        description = "Cancel a task. A waiting task is cancelled at once (cancelled_before_delivery). A running task's turn is interrupted only while the session is still under managed control at the lease generation of the request (abort_sent, then aborted or finished_before_abort); otherwise the abort is withheld (abort_withheld, with the reason).",
        output_schema = output::<CancelResult>()
    )]
    async fn cancel_task(&self, Parameters(args): Parameters<CancelArgs>) -> ToolResult {
        answered(
            self.service
                .world_cancel_task(Mcp, &args.task_id, args.lease_generation)
                .await,
        )
    }

    #[tool(
        description = "Replace a waiting task's prompt in place (same id and queue position), if its revision is still `revision`.",
        output_schema = output::<EditResult>()
    )]
    async fn edit_task(&self, Parameters(args): Parameters<EditArgs>) -> ToolResult {
        self.revise_task(args, Revise::InPlace).await
    }

    #[tool(
        description = "Cancel a waiting task and queue a replacement prompt in its queue position, if its revision is still `revision`.",
        output_schema = output::<EditResult>()
    )]
    async fn supersede_task(&self, Parameters(args): Parameters<EditArgs>) -> ToolResult {
        self.revise_task(args, Revise::Supersede).await
    }

    #[tool(
        description = "Read the event log after a cursor, optionally only one session's, waiting up to `wait_seconds` for the first new event. Read on with `after` = the answer's `next`. With `session_id`, `last` (the session's last N events) or `before` (the `limit` events before a seq) read a window backwards: page back with `before` = the answer's `olderBefore` while `hasOlder`. At a hub, `session_id` `machine/id` reads another machine's session, with that machine's seqs as the cursor; the answer names its `machine` and `link`.",
        annotations(read_only_hint = true),
        output_schema = logged_output::<EventsPage>()
    )]
    async fn events(&self, Parameters(args): Parameters<EventsArgs>) -> ToolResult {
        if args.last.is_some() || args.before.is_some() {
            return Ok(self.window(args).await);
        }
        let after = args.after.unwrap_or(0);
        let limit = args.limit.unwrap_or(DEFAULT_EVENTS as u64);
        if limit == 0 || limit > MAX_EVENTS as u64 {
            return Ok(failure(
                codes::INVALID_FIELD,
                &format!("`limit` must be between 1 and {MAX_EVENTS}"),
            ));
        }
        let wait = args.wait_seconds.unwrap_or(0.0);
        if !(0.0..=MAX_WAIT_SECONDS).contains(&wait) {
            return Ok(failure(
                codes::INVALID_FIELD,
                &format!("`wait_seconds` must be between 0 and {MAX_WAIT_SECONDS}"),
            ));
        }
        // On a hub, `laptop/<id>` names another machine's session: its seqs are the cursor.
        let remote = args
            .session_id
            .as_deref()
            .and_then(|id| self.service.remote_id(id));
        let (events, next, head, mut gaps, machine) = if let Some((machine, id)) = remote {
            let wait = (wait > 0.0).then(|| std::time::Duration::from_secs_f64(wait));
            let page = match self
                .service
                .remote_events(machine, id, after, limit as usize, wait)
                .await
            {
                Ok(page) => page,
                Err(error) => return Ok(failed(error)),
            };
            let events = remote_values(&page);
            (
                events,
                page.next,
                page.head,
                Vec::new(),
                Some((page.machine, page.link)),
            )
        } else {
            let session = args
                .session_id
                .as_deref()
                .map(|id| self.service.local_id(id).to_string());
            let read = match self
                .service
                .read_request(after, Some(limit), Some(wait), session)
            {
                Ok(read) => read,
                Err(error) => return Ok(failed(error)),
            };
            let page = match self.service.events(read).await {
                Ok(page) => page,
                Err(error) => return Ok(failed(error)),
            };
            // Each stored line is an event the daemon wrote, so it parses (and fits the schema).
            let events: Vec<Value> = page
                .events
                .iter()
                .filter_map(|e| serde_json::from_str(&e.json).ok())
                .collect();
            (events, page.next, page.head, page.gaps, None)
        };
        let total = events.len();
        let answer = LoggedEvents {
            events,
            next,
            head,
            gaps: gaps.clone(),
        };
        let bounded = match bound(to_value(answer), Some("events")) {
            Ok(bounded) => bounded,
            Err(failure) => return Ok(failure),
        };
        let mut value = bounded.value;
        with_machine(&mut value, machine);
        if bounded.kept < total {
            // The cursor moves only past what was returned, and so do the reported gaps.
            let next = value["events"]
                .as_array()
                .and_then(|kept| kept.last())
                .and_then(|last| last.get("seq"))
                .and_then(Value::as_u64)
                .unwrap_or(after);
            value["next"] = json!(next);
            gaps.retain(|gap| gap.to < next);
            if gaps.is_empty() {
                if let Some(object) = value.as_object_mut() {
                    object.remove("gaps");
                }
            } else {
                value["gaps"] = json!(gaps);
            }
            value["note"] = json!(format!(
                "only {} of {total} events fit; call events again with after={next}",
                bounded.kept
            ));
        }
        Ok(CallToolResult::structured(value))
    }

    #[tool(
        description = "Interrupt a hosted session's running turn. Refused while a human holds the session's control lease.",
        output_schema = output::<Interrupted>()
    )]
    async fn interrupt(&self, Parameters(args): Parameters<SessionArgs>) -> ToolResult {
        let id = &args.session_id;
        // At a hub, another machine's session: that machine applies MCP's lease rule.
        if let Some((machine, session)) = self.service.remote_id(id) {
            let op = crate::protocol::RemoteOp::Interrupt {};
            return remote_tool(self, machine, session, op).await;
        }
        if let Ok(lease) = self.service.lease(id)
            && lease.holder == crate::protocol::LeaseHolder::Human
        {
            return Ok(failure(
                codes::HUMAN_CONTROL,
                "a human holds this session's control lease; only they interrupt its turns",
            ));
        }
        answered(
            self.service
                .interrupt(id)
                .await
                .map(|interrupted| Interrupted { interrupted }),
        )
    }

    #[tool(
        description = "A hosted session's approval requests, pending and resolved (at a hub, `machine/id`: that machine's, asked of it).",
        annotations(read_only_hint = true),
        output_schema = output::<ApprovalList>()
    )]
    async fn list_approvals(&self, Parameters(args): Parameters<SessionArgs>) -> ToolResult {
        let id = &args.session_id;
        // At a hub, another machine's session: its machine's list, as it holds it now.
        let listed = match self.service.remote_id(id) {
            Some((machine, session)) => {
                self.service
                    .remote_approvals(crate::protocol::RemoteSurface::Mcp, machine, session)
                    .await
            }
            None => self.service.approvals(self.service.local_id(id)),
        };
        Ok(match listed {
            Ok(approvals) => answer_list(ApprovalList { approvals }, "approvals", |kept, total| {
                format!("only the first {kept} of {total} approvals fit")
            }),
            Err(error) => failed(error),
        })
    }

    #[tool(
        description = "Answer a pending approval: accept, acceptForSession, decline or cancel.",
        output_schema = output::<ApprovalDecided>()
    )]
    async fn resolve_approval(&self, Parameters(args): Parameters<ResolveArgs>) -> ToolResult {
        let id = &args.session_id;
        if let Some((machine, session)) = self.service.remote_id(id) {
            let op = crate::protocol::RemoteOp::Approval {
                approval: args.approval_id,
                decision: crate::protocol::DecisionBody {
                    decision: args.decision.as_str().to_string(),
                    by: None,
                },
            };
            return remote_tool(self, machine, session, op).await;
        }
        Ok(
            match self
                .service
                .resolve_approval(id, &args.approval_id, args.decision.as_str(), None)
                .await
            {
                Ok(()) => answer(ApprovalDecided {
                    ok: true,
                    approval_id: args.approval_id.into(),
                    decision: args.decision.into(),
                }),
                Err(error) => failed(error),
            },
        )
    }

    #[tool(
        description = "A codex session's goal (objective, status, budget).",
        annotations(read_only_hint = true),
        output_schema = output::<Capability>()
    )]
    async fn goal_get(&self, Parameters(args): Parameters<SessionArgs>) -> ToolResult {
        if let Some((machine, session)) = self.service.remote_id(&args.session_id) {
            return super::remote::goal(self, machine, session, None, false).await;
        }
        answered(self.service.goal_get(&args.session_id).await)
    }

    #[tool(
        description = "Set a codex session's goal: any of objective, status, token_budget.",
        output_schema = output::<Capability>()
    )]
    async fn goal_set(&self, Parameters(args): Parameters<GoalSetArgs>) -> ToolResult {
        if let Some((machine, session)) = self.service.remote_id(&args.session_id) {
            let (machine, session) = (machine.to_string(), session.to_string());
            return super::remote::goal(self, &machine, &session, Some(args), false).await;
        }
        answered(
            self.service
                .goal_set(
                    &args.session_id,
                    args.objective,
                    args.status,
                    args.token_budget,
                )
                .await,
        )
    }

    #[tool(
        description = "Clear a codex session's goal.",
        output_schema = output::<Capability>()
    )]
    async fn goal_clear(&self, Parameters(args): Parameters<SessionArgs>) -> ToolResult {
        if let Some((machine, session)) = self.service.remote_id(&args.session_id) {
            return super::remote::goal(self, machine, session, None, true).await;
        }
        answered(self.service.goal_clear(&args.session_id).await)
    }

    #[tool(
        description = "Fork a hosted session's whole conversation into a new session.",
        output_schema = output::<ForkReply>()
    )]
    async fn fork(&self, Parameters(args): Parameters<SessionArgs>) -> ToolResult {
        if let Some((machine, session)) = self.service.remote_id(&args.session_id) {
            return super::remote::fork(self, machine, session).await;
        }
        Ok(match self.service.fork(&args.session_id, None).await {
            Ok(Ok(view)) => answer(ForkReply {
                ok: true,
                session: Some(view),
                reason: None,
                message: None,
            }),
            Ok(Err(capability)) => answer(ForkReply {
                ok: capability.ok,
                session: None,
                reason: capability.reason,
                message: capability.message,
            }),
            Err(error) => failed(error),
        })
    }

    #[tool(
        description = "Adopt a Claude Code, codex, OpenCode or Pi TUI a person started by hand in a tmux pane (a claude-code, codex, opencode or pi instance of tracker_state, source watcher:claude-code, watcher:codex, watcher:opencode or watcher:pi): after checking that its pane still runs it, a new hosted session drives it there (send, interrupt, tasks, events). Refused with pane_gone, agent_exited, pane_changed, already_driven or not_adoptable; nothing is typed while checking.",
        output_schema = output::<SessionReply>()
    )]
    async fn adopt(&self, Parameters(args): Parameters<AdoptArgs>) -> ToolResult {
        answered(
            self.service
                .adopt(&args.tmux_session, &args.key)
                .await
                .map(|session| SessionReply { session }),
        )
    }

    #[tool(
        description = "Give an adopted agent back: its session ends, the agent keeps running in its pane and is watched only again. Only an adopted session can be disowned (not_adopted).",
        output_schema = output::<SessionReply>()
    )]
    async fn disown(&self, Parameters(args): Parameters<SessionArgs>) -> ToolResult {
        answered(
            self.service
                .disown(&args.session_id)
                .await
                .map(|session| SessionReply { session }),
        )
    }

    #[tool(
        description = "Move an adopted codex, claude or opencode under cohost's own host, in its own pane: when it is idle the person's agent ends there (codex by its /quit, claude by SIGTERM, opencode by Ctrl+C on its empty box), and the same conversation goes on in the same pane (codex: the thread resumed on cohost's app-server, a codex --remote TUI; claude: claude --resume with cohost's hooks under cohost's runner; opencode: the session bound to an opencode serve of cohost's, opencode attach in the pane); the session (same id and thread) is hosted from then on. Refused with busy while a turn runs (nothing done), human_typing over a draft, not_adopted for a session cohost started, unsupported for other runtimes.",
        output_schema = output::<SessionReply>()
    )]
    async fn rehome(&self, Parameters(args): Parameters<SessionArgs>) -> ToolResult {
        answered(
            self.service
                .rehome(&args.session_id)
                .await
                .map(|session| SessionReply { session }),
        )
    }

    #[tool(
        description = "The models codex offers.",
        annotations(read_only_hint = true),
        output_schema = output::<Capability>()
    )]
    async fn list_models(&self, Parameters(_): Parameters<NoArgs>) -> ToolResult {
        answered(self.service.models(None).await)
    }

    // -- What the agent asks a person: input requests and the collaboration mode.

    #[tool(
        description = "A hosted session's input requests (questions, plans, MCP elicitations, permissions), pending and resolved.",
        annotations(read_only_hint = true),
        output_schema = output::<RequestList>()
    )]
    async fn list_requests(&self, Parameters(args): Parameters<SessionArgs>) -> ToolResult {
        let id = &args.session_id;
        let listed = match self.service.remote_id(id) {
            Some((machine, session)) => {
                self.service
                    .remote_requests(crate::protocol::RemoteSurface::Mcp, machine, session)
                    .await
            }
            None => self.service.requests(self.service.local_id(id)),
        };
        Ok(match listed {
            Ok(requests) => answer_list(RequestList { requests }, "requests", |kept, total| {
                format!("only the first {kept} of {total} requests fit")
            }),
            Err(error) => failed(error),
        })
    }

    #[tool(
        description = "Answer a pending input request (first answer wins): a question with answers {questionId: label or [labels]} (or, where it lists decline, an opencode question, decision decline to dismiss it); a plan with decision approve (optional mode) or reject (feedback); an elicitation with accept (content), decline or cancel; permissions with accept, acceptForSession or decline. Refused while a human holds the session's control lease.",
        output_schema = output::<RequestAnswered>()
    )]
    async fn answer_request(&self, Parameters(args): Parameters<AnswerArgs>) -> ToolResult {
        let id = &args.session_id;
        let remote = self.service.remote_id(id);
        if remote.is_none()
            && let Some(refused) = self.human_holds(id, "answers what the agent asks")
        {
            return Ok(refused);
        }
        let reply = match serde_json::from_value::<crate::protocol::InputAnswer>(json!({
            "answers": args.answers,
            "decision": args.decision.map(AnswerDecisionArg::as_str),
            "feedback": args.feedback,
            "mode": args.mode.map(ModeArg::as_str),
            "content": args.content,
        })) {
            Ok(reply) => reply,
            Err(error) => {
                return Ok(failed(ServiceError::field(
                    Field::Answers,
                    format!(
                        "answers must map question ids to a string or a list of strings: {error}"
                    ),
                )));
            }
        };
        if let Some((machine, session)) = remote {
            let op = crate::protocol::RemoteOp::Answer {
                request: args.request_id,
                answer: reply,
            };
            return remote_tool(self, machine, session, op).await;
        }
        Ok(
            match self
                .service
                .answer_request(id, &args.request_id, reply)
                .await
            {
                Ok(()) => answer(RequestAnswered {
                    ok: true,
                    request_id: args.request_id,
                }),
                Err(error) => failed(error),
            },
        )
    }

    #[tool(
        description = "Set the collaboration mode of a session's next turns: codex `plan` or `default`; claude `plan`, `default`, `acceptEdits` (as its policy allows). Refused while a human holds the session's control lease.",
        output_schema = output::<Capability>()
    )]
    async fn set_mode(&self, Parameters(args): Parameters<ModeArgs>) -> ToolResult {
        let id = &args.session_id;
        if let Some((machine, session)) = self.service.remote_id(id) {
            // The machine applies MCP's lease rule to it (`surface` mcp).
            let op = crate::protocol::RemoteOp::Mode {
                mode: crate::protocol::ModeBody {
                    mode: args.mode.as_str().to_string(),
                },
            };
            return remote_tool(self, machine, session, op).await;
        }
        if let Some(refused) = self.human_holds(id, "changes its mode") {
            return Ok(refused);
        }
        answered(self.service.set_mode(id, args.mode.as_str()).await)
    }

    #[tool(
        description = "Switch the model (and Pi's thinking level) of a hosted session's next turns: pi and opencode sessions (an opencode model it does not know is refused and nothing changes). Refused while a human holds the session's control lease.",
        output_schema = output::<Capability>()
    )]
    async fn set_model(&self, Parameters(args): Parameters<ModelArgs>) -> ToolResult {
        let id = &args.session_id;
        if let Some((machine, session)) = self.service.remote_id(id) {
            let op = crate::protocol::RemoteOp::Model {
                model: crate::protocol::ModelBody {
                    model: args.model,
                    thinking_level: args.thinking_level,
                },
            };
            return remote_tool(self, machine, session, op).await;
        }
        if let Some(refused) = self.human_holds(id, "changes its model") {
            return Ok(refused);
        }
        answered(
            self.service
                .set_model(id, &args.model, args.thinking_level.as_deref())
                .await,
        )
    }
}
