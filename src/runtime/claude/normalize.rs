//! Claude Code hooks and transcript lines → cohost events.
//!
//! [`Normalizer`] is a small state machine fed with the session's `hooks.jsonl` lines, its
//! transcript JSONL lines and the TUI's session-file status, in whatever order they arrive.
//! Hooks fire 100–250 ms before the matching transcript lines land, so both sources map the same
//! thing to the same id — a tool call to its `tool_use_id`, a prompt to its `prompt_id` and text —
//! and the core stores whichever comes first and drops the other. A turn's end is held back
//! until the transcript has written it (`system/turn_duration`), so the assistant's reply is
//! stored before `turn.completed`. It does no I/O and reads no clock.

use std::collections::{HashSet, VecDeque};

use serde_json::Value;

use crate::formats::claude::{
    AssistantContentBlock, AssistantRecord, BashToolInput, HookEvent, HookLine, HookPayload,
    PostToolUseFailureHookInput, PostToolUseHookInput, PromptSource, RecordHead, TextBlock,
    ToolResponse, ToolUseBlock, TranscriptRecord, UserContent, UserContentBlock, UserRecord,
};
use crate::protocol::{
    AgentStatus, ApprovalRequested, ErrorEvent, EventKind, InputKind, InputRequested, Item,
    ItemEvent, Question, QuestionOption, SessionAttention, TokenCounts, TurnCompleted, TurnSource,
    TurnStarted, TurnStatus, Usage,
};

/// How long a turn's end waits for the transcript to catch up before it is stored anyway.
pub const STOP_GRACE_MS: u64 = 5000;

/// What the host should do with a normalized input.
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    /// Store this event.
    Store(EventKind),
    /// Claude's own session id (and transcript) changed: startup, `/clear`, a fork.
    Bound {
        claude_session_id: String,
        transcript_path: Option<String>,
    },
    /// The transcript file to tail (it may not exist yet).
    Transcript(String),
    /// The agent's status for the tracker.
    Status(AgentStatus),
    /// A prompt reached Claude (`UserPromptSubmit`): `text` is what was submitted.
    PromptSubmitted { turn_id: String, text: String },
    /// The permission mode Claude's hooks report changed (or was seen for the first time).
    PermissionMode(String),
    /// A prompt reached Claude while a turn ran, and Claude queued it to run as a turn of its own
    /// later (2.1.332 fires `UserPromptSubmit` at once, naming the running turn).
    PromptQueued { text: String },
}

#[derive(Debug, Default)]
pub struct Normalizer {
    claude_session: Option<String>,
    transcript: Option<String>,
    /// The turn hooks say is running (Claude's `prompt_id`).
    turn: Option<String>,
    /// The turn the transcript is writing (the `promptId` of its last user line).
    transcript_turn: Option<String>,
    /// The turns a `Stop`/`StopFailure` ended that wait for the transcript's `turn_duration`,
    /// oldest first. More than one when Claude runs a queued prompt's turn (and its `Stop`)
    /// before cohost has read the transcript of the turn before it.
    pending_ends: VecDeque<PendingEnd>,
    /// `(turn, text)` of the last reply text the transcript wrote.
    last_reply: Option<(String, String)>,
    /// Uuids of transcript lines that belong to another session (a fork's copied history).
    inherited: HashSet<String>,
    /// Turns already ended, so a late signal does not end them twice.
    ended: HashSet<String>,
    /// Texts cohost injected and not yet seen submitted, to tell API turns from typed ones.
    injected: Vec<String>,
    /// The turn the last session-file status showed busy (`busy` seen with no turn: `None`).
    busy_turn: Option<String>,
    /// The last `permission_mode` a hook reported.
    permission_mode: Option<String>,
    /// Claude prompt ids that belong to another turn, and that turn: the prompts of one batch of
    /// queued prompts Claude sends as one request (several ids, one `Stop`).
    aliases: VecDeque<(String, String)>,
    /// The (trimmed) texts of the running turn's prompts.
    turn_texts: Vec<String>,
    /// A turn a batch of queued prompts opened that has produced nothing yet: further prompts of
    /// the same batch fold into it.
    batch_turn: Option<String>,
}

/// A turn `Stop` ended whose end waits for the transcript (its reply and `turn_duration`).
#[derive(Debug, Clone)]
struct PendingEnd {
    done: TurnCompleted,
    /// When the end goes without the transcript (ms).
    deadline: u64,
    /// The reply `Stop` reported (`last_assistant_message`).
    awaited_reply: Option<String>,
    /// The transcript wrote the turn's `turn_duration` before its reply: the end waits for the
    /// reply line (Claude flushes a batch of lines in no fixed order).
    ended_before_reply: bool,
}

/// Pending ends kept at most (a turn's end waits seconds; more is a stuck transcript).
const MAX_PENDING_ENDS: usize = 16;

/// Aliases remembered (a batch folds at most a handful of prompts).
const MAX_ALIASES: usize = 64;

/// The cohost item id of a prompt: its turn and a hash of its text, so the hook and the
/// transcript line of the same prompt agree (queued prompts share one `prompt_id`).
pub fn prompt_item_id(prompt_id: &str, text: &str) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in text.trim().as_bytes() {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{prompt_id}:prompt:{hash:016x}")
}

/// A prompt as the user wrote it. Claude Code 2.1.332 wraps a paste of more than two newlines or
/// 800 characters as `\n\n<pasted_content id="d893">\n…\n</pasted_content id="d893">\n` — in
/// `UserPromptSubmit.prompt`, in the transcript and in the model request — while 2.1.197 and
/// shorter pastes keep the plain text. Each well-formed block (its closing tag names its opening
/// id) is replaced by its content, with the newlines Claude added around it; anything else is
/// left as it is.
pub fn unwrap_pasted(text: &str) -> std::borrow::Cow<'_, str> {
    const OPEN: &str = "<pasted_content id=\"";
    if !text.contains(OPEN) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find(OPEN) {
        let after_open = &rest[start + OPEN.len()..];
        let block = after_open.find("\">\n").and_then(|id_end| {
            let id = &after_open[..id_end];
            if id.is_empty() || id.len() > 64 || id.contains(['"', '\n', '<', '>']) {
                return None;
            }
            let body = &after_open[id_end + 3..];
            let close = format!("\n</pasted_content id=\"{id}\">");
            let body_end = body.find(&close)?;
            let consumed = start + OPEN.len() + id_end + 3 + body_end + close.len();
            Some((&body[..body_end], consumed))
        });
        let Some((content, consumed)) = block else {
            out.push_str(&rest[..start + OPEN.len()]);
            rest = &rest[start + OPEN.len()..];
            continue;
        };
        // The blank line Claude puts before the block, and the newline after it.
        let before = &rest[..start];
        out.push_str(before.strip_suffix("\n\n").unwrap_or(before));
        out.push_str(content);
        rest = &rest[consumed..];
        rest = rest.strip_prefix('\n').unwrap_or(rest);
    }
    out.push_str(rest);
    std::borrow::Cow::Owned(out)
}

pub fn tool_item_id(turn_id: &str, tool_use_id: &str) -> String {
    format!("{turn_id}:{tool_use_id}")
}

fn tool_item(
    turn_id: &str,
    tool_use_id: &str,
    name: &str,
    input: Option<&Value>,
    status: &str,
    output: Option<String>,
) -> Item {
    let id = tool_item_id(turn_id, tool_use_id);
    if name == "Bash" {
        Item::Command {
            id,
            command: BashToolInput::of(input).command.unwrap_or_default(),
            cwd: None,
            status: status.to_string(),
            exit_code: None,
            output,
            duration_ms: None,
        }
    } else {
        Item::Tool {
            id,
            name: name.to_string(),
            input: input.cloned(),
            output,
            status: status.to_string(),
        }
    }
}

impl Normalizer {
    pub fn new() -> Self {
        Normalizer::default()
    }

    /// Restores what a restart must know: the claude session, transcript and running turn.
    pub fn resume(
        claude_session: Option<String>,
        transcript: Option<String>,
        turn: Option<String>,
    ) -> Self {
        Normalizer {
            claude_session,
            transcript,
            transcript_turn: turn.clone(),
            turn,
            ..Normalizer::default()
        }
    }

    pub fn claude_session(&self) -> Option<&str> {
        self.claude_session.as_deref()
    }

    pub fn transcript(&self) -> Option<&str> {
        self.transcript.as_deref()
    }

    pub fn turn(&self) -> Option<&str> {
        self.turn.as_deref()
    }

    /// Remembers a text cohost is about to paste, so its turn is attributed to the API.
    pub fn expect_injected(&mut self, text: &str) {
        self.injected.push(text.trim().to_string());
        if self.injected.len() > 16 {
            self.injected.remove(0);
        }
    }

    /// The turn a Claude prompt id belongs to (itself, unless it was folded into another).
    fn resolve(&self, prompt_id: &str) -> String {
        self.aliases
            .iter()
            .rev()
            .find(|(id, _)| id == prompt_id)
            .map(|(_, turn)| turn.clone())
            .unwrap_or_else(|| prompt_id.to_string())
    }

    fn alias(&mut self, prompt_id: &str, turn_id: &str) {
        if prompt_id == turn_id {
            return;
        }
        if self.aliases.len() >= MAX_ALIASES {
            self.aliases.pop_front();
        }
        self.aliases
            .push_back((prompt_id.to_string(), turn_id.to_string()));
    }

    /// The running turn, if it has not ended.
    fn open_turn(&self) -> Option<&str> {
        self.turn
            .as_deref()
            .filter(|turn| !self.ended.contains(*turn))
    }

    fn begin_turn(&mut self, turn_id: &str, text: &str, out: &mut Vec<Output>) {
        self.begin_turn_from(turn_id, text, true, out);
    }

    /// `from_hooks: false` for a turn the transcript shows first: it does not replace a turn
    /// the hooks say is running (a fork's transcript starts with a copy of the parent's turns).
    fn begin_turn_from(
        &mut self,
        turn_id: &str,
        text: &str,
        from_hooks: bool,
        out: &mut Vec<Output>,
    ) {
        if self.turn.as_deref() != Some(turn_id) && !self.ended.contains(turn_id) {
            let source = match self.injected.iter().position(|t| t == text.trim()) {
                Some(i) => {
                    self.injected.remove(i);
                    TurnSource::Api
                }
                None => TurnSource::Terminal,
            };
            if from_hooks || self.turn.is_none() {
                self.turn = Some(turn_id.to_string());
                self.turn_texts.clear();
            }
            out.push(Output::Store(EventKind::TurnStarted(TurnStarted {
                turn_id: turn_id.to_string(),
                source,
            })));
        }
    }

    fn end_turn(&mut self, done: TurnCompleted, out: &mut Vec<Output>) {
        if self.batch_turn.as_deref() == Some(done.turn_id.as_str()) {
            self.batch_turn = None;
        }
        // Its pending end is moot either way (a turn ended once is never ended again).
        self.pending_ends
            .retain(|pending| pending.done.turn_id != done.turn_id);
        if self.ended.insert(done.turn_id.clone()) {
            if self.turn.as_deref() == Some(done.turn_id.as_str()) {
                self.turn = None;
            }
            let status = match done.status {
                TurnStatus::Completed => AgentStatus::Done,
                TurnStatus::Interrupted => AgentStatus::Interrupted,
                TurnStatus::Failed => AgentStatus::Error,
            };
            out.push(Output::Store(EventKind::TurnCompleted(done)));
            out.push(Output::Status(status));
        }
    }

    /// One `hooks.jsonl` line: `{"receivedAt", "event", "payload", "requestId"?}`, as JSON.
    pub fn hook(&mut self, line: &Value, now: u64) -> Vec<Output> {
        self.hook_line(&HookLine::from_value(line), now)
    }

    /// One `hooks.jsonl` line.
    pub fn hook_line(&mut self, line: &HookLine, now: u64) -> Vec<Output> {
        let mut out = Vec::new();
        let HookPayload { common, event } = &line.payload;
        let session_end = matches!(event, HookEvent::SessionEnd(_));
        // Claude's session id can change under us (/clear, --fork-session): re-read it always.
        if let Some(session) = &common.session_id
            && self.claude_session.as_deref() != Some(session.as_str())
            && !session_end
        {
            self.claude_session = Some(session.clone());
            out.push(Output::Bound {
                claude_session_id: session.clone(),
                transcript_path: common.transcript_path.clone(),
            });
        }
        if let Some(path) = &common.transcript_path
            && self.transcript.as_deref() != Some(path.as_str())
            && !session_end
        {
            self.transcript = Some(path.clone());
            out.push(Output::Transcript(path.clone()));
        }
        // UserPromptSubmit, PreToolUse, PermissionRequest and Stop carry the mode in force.
        if let Some(mode) = &common.permission_mode
            && self.permission_mode.as_deref() != Some(mode.as_str())
        {
            self.permission_mode = Some(mode.as_str().to_string());
            out.push(Output::PermissionMode(mode.as_str().to_string()));
        }
        let raw_prompt_id = common.prompt_id.clone();
        let prompt_id = raw_prompt_id.as_deref().map(|id| self.resolve(id));
        let turn_id = prompt_id
            .clone()
            .or_else(|| self.turn.clone())
            .unwrap_or_default();
        tracing::debug!(
            event = ?line.event,
            prompt_id = ?raw_prompt_id,
            current = ?self.turn,
            pending = ?self.pending_turns(),
            "claude: hook"
        );
        match event {
            HookEvent::SessionStart(_) => out.push(Output::Status(AgentStatus::Idle)),
            HookEvent::UserPromptSubmit(input) => {
                let text = unwrap_pasted(input.prompt.as_deref().unwrap_or_default()).into_owned();
                let trimmed = text.trim().to_string();
                if let (Some(raw), Some(mut turn_id)) = (&raw_prompt_id, prompt_id.clone()) {
                    // 2.1.197 sends a batch of queued prompts as one turn, yet may name a prompt
                    // id for one of them that no transcript line carries: the batch's line with
                    // the same text says which turn it is.
                    if let Some(batch) = self.batch_turn.clone()
                        && batch != turn_id
                        && self.open_turn() == Some(batch.as_str())
                        && self.turn_texts.contains(&trimmed)
                    {
                        self.alias(raw, &batch);
                        turn_id = batch;
                    }
                    // 2.1.332 fires the hook of a prompt typed while a turn runs at once, naming
                    // the running turn: Claude queued it, and it runs later as a turn of its own
                    // (opened by its transcript line, `promptSource: "queued"`).
                    if self.open_turn() == Some(turn_id.as_str())
                        && self.batch_turn.as_deref() != Some(turn_id.as_str())
                        && !self.turn_texts.is_empty()
                        && !self.turn_texts.contains(&trimmed)
                    {
                        out.push(Output::PromptQueued { text });
                        return out;
                    }
                    let turn_id = &turn_id;
                    self.begin_turn(turn_id, &text, &mut out);
                    if !self.turn_texts.contains(&trimmed) {
                        self.turn_texts.push(trimmed);
                    }
                    out.push(Output::Store(EventKind::ItemCompleted(ItemEvent {
                        turn_id: turn_id.clone(),
                        item: Item::UserMessage {
                            id: prompt_item_id(turn_id, &text),
                            text: text.clone(),
                        },
                    })));
                    out.push(Output::PromptSubmitted {
                        turn_id: turn_id.clone(),
                        text,
                    });
                    out.push(Output::Status(AgentStatus::Running));
                }
            }
            HookEvent::PreToolUse(input) => {
                if let (Some(id), Some(name)) = (&input.tool_use_id, &input.tool_name) {
                    out.push(Output::Store(EventKind::ItemStarted(ItemEvent {
                        turn_id: turn_id.clone(),
                        item: tool_item(
                            &turn_id,
                            id,
                            name,
                            input.tool_input.as_ref(),
                            "inProgress",
                            None,
                        ),
                    })));
                    out.push(Output::Status(AgentStatus::ToolRunning));
                }
            }
            HookEvent::PostToolUse(PostToolUseHookInput {
                tool_name: Some(name),
                tool_input,
                tool_use_id: Some(id),
                duration_ms,
                ..
            })
            | HookEvent::PostToolUseFailure(PostToolUseFailureHookInput {
                tool_name: Some(name),
                tool_input,
                tool_use_id: Some(id),
                duration_ms,
                ..
            }) => {
                let (output, status) = match event {
                    HookEvent::PostToolUseFailure(failure) => (failure.error.clone(), "failed"),
                    HookEvent::PostToolUse(success) => (
                        success.tool_response.as_ref().map(ToolResponse::text),
                        "completed",
                    ),
                    _ => (None, "completed"),
                };
                let mut item = tool_item(&turn_id, id, name, tool_input.as_ref(), status, output);
                if let Item::Command {
                    duration_ms: item_duration,
                    ..
                } = &mut item
                {
                    *item_duration = *duration_ms;
                }
                out.push(Output::Store(EventKind::ItemCompleted(ItemEvent {
                    turn_id: turn_id.clone(),
                    item,
                })));
                out.push(Output::Status(AgentStatus::Running));
            }
            HookEvent::PermissionRequest(request) => {
                let request_id = line.request_id.clone().unwrap_or_default();
                let session = self.claude_session.clone().unwrap_or_default();
                let tool = request.tool_name.clone().unwrap_or_default();
                let input = request.tool_input.as_ref();
                // Claude asks the person, not for a permission: an input request.
                if let Some(request) =
                    input_request(&session, &request_id, &tool, input, Some(turn_id.clone()))
                {
                    out.push(Output::Store(EventKind::InputRequested(Box::new(request))));
                    out.push(Output::Status(AgentStatus::Waiting));
                } else {
                    let BashToolInput {
                        command,
                        description,
                    } = BashToolInput::of(input);
                    out.push(Output::Store(EventKind::ApprovalRequested(
                        ApprovalRequested {
                            approval_id: approval_id(&session, &request_id),
                            kind: if tool == "Bash" {
                                "command".into()
                            } else {
                                "tool".into()
                            },
                            turn_id: turn_id.clone(),
                            item_id: None,
                            command: command.or_else(|| {
                                (!tool.is_empty()).then(|| {
                                    format!(
                                        "{tool} {}",
                                        input.map(|i| i.to_string()).unwrap_or_default()
                                    )
                                })
                            }),
                            cwd: common.cwd.clone(),
                            reason: description,
                            decisions: DECISIONS.iter().map(|d| d.to_string()).collect(),
                        },
                    )));
                    out.push(Output::Status(AgentStatus::Waiting));
                }
            }
            HookEvent::Stop(_) | HookEvent::StopFailure(_) => {
                if let Some(turn_id) = prompt_id.or_else(|| self.turn.clone()) {
                    let (failure, stop) = match event {
                        HookEvent::StopFailure(failure) => (Some(failure), None),
                        HookEvent::Stop(stop) => (None, Some(stop)),
                        _ => (None, None),
                    };
                    let done = TurnCompleted {
                        turn_id,
                        status: if failure.is_some() {
                            TurnStatus::Failed
                        } else {
                            TurnStatus::Completed
                        },
                        error: failure.map(|failure| {
                            failure
                                .last_assistant_message
                                .clone()
                                .or_else(|| failure.error.clone())
                                .unwrap_or_else(|| "the turn failed".into())
                        }),
                        duration_ms: None,
                        lost: false,
                    };
                    if let Some(failure) = failure {
                        out.push(Output::Store(EventKind::Error(ErrorEvent {
                            turn_id: Some(done.turn_id.clone()),
                            id: Some(format!("turn-failed:{}", done.turn_id)),
                            message: done.error.clone().unwrap_or_default(),
                            code: failure.error.clone(),
                        })));
                    }
                    // A turn the transcript already ended (its end was read before this line:
                    // the two files are read apart) has nothing left to hold; a pending end
                    // for it would only stand in the way of the next turn's.
                    if !self.ended.contains(&done.turn_id) {
                        // Held until the transcript writes the turn's end (or the grace
                        // expires). Another turn's pending end stays: Claude may run the
                        // next (queued) turn to its `Stop` before its transcript is read.
                        let awaited_reply = stop
                            .and_then(|stop| stop.last_assistant_message.as_deref())
                            .map(|text| text.trim().to_string())
                            .filter(|text| !text.is_empty());
                        self.pending_ends
                            .retain(|pending| pending.done.turn_id != done.turn_id);
                        if self.pending_ends.len() >= MAX_PENDING_ENDS
                            && let Some(oldest) = self.pending_ends.pop_front()
                        {
                            self.end_turn(oldest.done, &mut out);
                        }
                        self.pending_ends.push_back(PendingEnd {
                            done,
                            deadline: now + STOP_GRACE_MS,
                            awaited_reply,
                            ended_before_reply: false,
                        });
                    }
                }
            }
            HookEvent::Notification(notification) => {
                let kind = notification.notification_type.clone().unwrap_or_default();
                // One per hook line: a line read again after a restart is stored once.
                let at = line.received_at.unwrap_or(now);
                out.push(Output::Store(EventKind::SessionAttention(
                    SessionAttention {
                        id: format!(
                            "{}:{at}:{kind}",
                            self.claude_session.as_deref().unwrap_or_default()
                        ),
                        kind,
                        message: notification.message.clone(),
                        turn_id: Some(turn_id.clone()).filter(|t| !t.is_empty()),
                    },
                )));
            }
            HookEvent::SessionEnd(end) => {
                if let Some(turn) = self.turn.clone() {
                    self.end_turn(
                        TurnCompleted {
                            turn_id: turn,
                            status: TurnStatus::Interrupted,
                            error: Some(format!(
                                "claude ended the session ({})",
                                end.reason.as_deref().unwrap_or_default()
                            )),
                            duration_ms: None,
                            lost: false,
                        },
                        &mut out,
                    );
                }
                out.push(Output::Status(AgentStatus::Idle));
            }
            _ => {}
        }
        out
    }

    /// The turn a transcript line belongs to: the last prompt the transcript wrote, else the
    /// turn the hooks started. Claude flushes a turn's lines in batches whose order is not
    /// always chronological, so a reply can land before the first prompt's own line.
    fn transcript_turn_id(&self) -> String {
        self.transcript_turn
            .clone()
            .or_else(|| self.turn.clone())
            .unwrap_or_default()
    }

    /// Transcript lines with these uuids are passed over: a fork's transcript starts with a copy
    /// of its parent's conversation, which is the parent's history, not turns of the fork.
    pub fn inherit(&mut self, uuids: impl IntoIterator<Item = String>) {
        self.inherited.extend(uuids);
    }

    /// One transcript line, as JSON.
    pub fn transcript_line(&mut self, line: &Value) -> Vec<Output> {
        tracing::debug!(
            kind = %line["type"],
            subtype = %line["subtype"],
            prompt_id = %line["promptId"],
            current = ?self.turn,
            "claude: transcript line"
        );
        self.record(&TranscriptRecord::from_value(line))
    }

    /// One transcript record.
    pub fn record(&mut self, record: &TranscriptRecord) -> Vec<Output> {
        let mut out = Vec::new();
        let head = record.head();
        if head
            .uuid
            .as_ref()
            .is_some_and(|uuid| self.inherited.contains(uuid))
        {
            return out;
        }
        if head.is_sidechain == Some(true) {
            return out;
        }
        match record {
            TranscriptRecord::User(_, user) => self.user_record(user, &mut out),
            TranscriptRecord::Assistant(head, assistant) => {
                self.assistant_record(head, assistant, &mut out)
            }
            TranscriptRecord::System(_, system)
                if system.subtype.as_deref() == Some("turn_duration") =>
            {
                self.turn_duration(system.duration_ms, &mut out)
            }
            _ => {}
        }
        out
    }

    fn user_record(&mut self, line: &UserRecord, out: &mut Vec<Output>) {
        let content = line.content();
        let prompt_text = match content {
            Some(UserContent::Text(text))
                if line.is_meta != Some(true)
                    && !line.is_compact_summary()
                    && !text.starts_with("<command-name>")
                    && !text.starts_with("<local-command") =>
            {
                Some(unwrap_pasted(text).into_owned())
            }
            _ => None,
        };
        // A prompt Claude queued behind a turn and now runs (`promptSource: "queued"`,
        // both versions): a turn of its own — or, for the later prompts of one batch
        // sent as one request, part of the batch's turn.
        let queued = line.prompt_source == Some(PromptSource::Queued) && prompt_text.is_some();
        if let Some(raw) = &line.prompt_id {
            let mut resolved = self.resolve(raw);
            if queued && let Some(text) = &prompt_text {
                let open = self.open_turn().map(str::to_string);
                if let Some(batch) = self.batch_turn.clone()
                    && open.as_deref() == Some(batch.as_str())
                {
                    self.alias(raw, &batch);
                    resolved = batch;
                } else if let Some(open) = open
                    && open != resolved
                    && self.turn_texts.contains(&text.trim().to_string())
                {
                    // The hooks opened its turn first, under another prompt id (2.1.197).
                    self.alias(raw, &open);
                    resolved = open;
                }
                self.batch_turn = Some(resolved.clone());
            }
            self.transcript_turn = Some(resolved);
        }
        let turn_id = self.transcript_turn_id();
        match content {
            Some(UserContent::Text(_)) if prompt_text.is_some() => {
                let text = prompt_text.as_ref().unwrap_or(&String::new()).clone();
                let text = &text;
                self.begin_turn_from(&turn_id, text, queued, out);
                if self.turn.as_deref() == Some(turn_id.as_str())
                    && !self.turn_texts.contains(&text.trim().to_string())
                {
                    self.turn_texts.push(text.trim().to_string());
                }
                out.push(Output::Store(EventKind::ItemCompleted(ItemEvent {
                    turn_id: turn_id.clone(),
                    item: Item::UserMessage {
                        id: prompt_item_id(&turn_id, text),
                        text: text.clone(),
                    },
                })));
            }
            Some(UserContent::Blocks(blocks)) => {
                for block in blocks {
                    match block {
                        UserContentBlock::ToolResult(result) => {
                            let Some(id) = &result.tool_use_id else {
                                continue;
                            };
                            out.push(Output::Store(EventKind::ItemCompleted(ItemEvent {
                                turn_id: turn_id.clone(),
                                item: Item::Tool {
                                    id: tool_item_id(&turn_id, id),
                                    name: "tool".into(),
                                    input: None,
                                    output: Some(result.text()),
                                    status: if result.is_error == Some(true) {
                                        "failed".into()
                                    } else {
                                        "completed".into()
                                    },
                                },
                            })));
                        }
                        UserContentBlock::Text(block) => {
                            let text = block.text.as_deref().unwrap_or_default();
                            if text.starts_with("[Request interrupted by user") {
                                self.end_turn(
                                    TurnCompleted {
                                        turn_id: turn_id.clone(),
                                        status: TurnStatus::Interrupted,
                                        error: None,
                                        duration_ms: None,
                                        lost: false,
                                    },
                                    out,
                                );
                            }
                        }
                        UserContentBlock::Other(_) => {}
                    }
                }
            }
            _ => {}
        }
    }

    fn assistant_record(
        &mut self,
        head: &RecordHead,
        line: &AssistantRecord,
        out: &mut Vec<Output>,
    ) {
        // The batch's request was sent: no more prompts fold into its turn.
        self.batch_turn = None;
        let turn_id = self.transcript_turn_id();
        let uuid = head.uuid.clone().unwrap_or_default();
        let message = line.message.as_ref();
        // The partial text of an interrupted reply was not the reply: 2.1.197 wrote it as
        // model `<synthetic>`, 2.1.332 with the real model and `isAbortedMidStream`.
        let synthetic = message.and_then(|m| m.model.as_deref()) == Some("<synthetic>")
            || line.is_aborted_mid_stream == Some(true);
        let blocks = message.map(|m| m.content.as_slice()).unwrap_or_default();
        if line.is_api_error_message == Some(true) {
            let text = match blocks.first() {
                Some(AssistantContentBlock::Text(TextBlock { text: Some(text) })) => text.clone(),
                _ => "API error".to_string(),
            };
            out.push(Output::Store(EventKind::Error(ErrorEvent {
                id: head.uuid.as_ref().map(|uuid| format!("transcript:{uuid}")),
                turn_id: Some(turn_id),
                message: text,
                code: line.api_error_status.as_ref().map(|s| s.to_string()),
            })));
            return;
        }
        for (i, block) in blocks.iter().enumerate() {
            match block {
                // An interrupt's partial text is not the reply.
                AssistantContentBlock::Text(block) if !synthetic => {
                    let text = block.text.clone().unwrap_or_default();
                    if text.trim().is_empty() {
                        continue;
                    }
                    self.last_reply = Some((turn_id.clone(), text.trim().to_string()));
                    out.push(Output::Store(EventKind::ItemCompleted(ItemEvent {
                        turn_id: turn_id.clone(),
                        item: Item::AgentMessage {
                            id: format!("{turn_id}:{uuid}:{i}"),
                            text,
                            interrupted: false,
                        },
                    })));
                }
                AssistantContentBlock::ToolUse(ToolUseBlock {
                    id: Some(id),
                    name: Some(name),
                    input,
                }) => {
                    out.push(Output::Store(EventKind::ItemStarted(ItemEvent {
                        turn_id: turn_id.clone(),
                        item: tool_item(&turn_id, id, name, input.as_ref(), "inProgress", None),
                    })));
                }
                _ => {}
            }
        }
        if let Some(message) = message
            && let Some(usage) = &message.usage
            && !synthetic
            && message.stop_reason.is_some()
        {
            let get = |count: Option<u64>| count.unwrap_or(0);
            let input = get(usage.input_tokens)
                + get(usage.cache_read_input_tokens)
                + get(usage.cache_creation_input_tokens);
            let counts = TokenCounts {
                input,
                cached_input: get(usage.cache_read_input_tokens),
                output: get(usage.output_tokens),
                reasoning_output: 0,
                total: input + get(usage.output_tokens),
            };
            out.push(Output::Store(EventKind::Usage(Usage {
                id: head.uuid.as_ref().map(|uuid| format!("transcript:{uuid}")),
                turn_id,
                total: counts.clone(),
                last: counts,
                context_window: None,
            })));
        }
        // An end the transcript wrote ahead of this reply can go now.
        let ready: Vec<TurnCompleted> = self
            .pending_ends
            .iter()
            .filter(|pending| pending.ended_before_reply && self.reply_written(pending))
            .map(|pending| pending.done.clone())
            .collect();
        for done in ready {
            self.end_turn(done, out);
        }
    }

    /// `system/turn_duration`: the transcript's turn ended normally (or on an API error).
    fn turn_duration(&mut self, duration: Option<u64>, out: &mut Vec<Output>) {
        let turn = self.transcript_turn_id();
        // The transcript's turn's pending end; else, when the batch wrote it above the turn's
        // own prompt line (the transcript's last prompt is then an earlier, ended turn), the
        // oldest pending end.
        let index = self
            .pending_ends
            .iter()
            .position(|pending| pending.done.turn_id == turn)
            .or_else(|| {
                (turn.is_empty() || self.ended.contains(&turn))
                    .then_some(0)
                    .filter(|_| !self.pending_ends.is_empty())
            });
        match index {
            Some(index) => {
                let pending = &mut self.pending_ends[index];
                pending.done.duration_ms = duration;
                if self.reply_written(&self.pending_ends[index]) {
                    let done = self.pending_ends[index].done.clone();
                    self.end_turn(done, out);
                } else {
                    // The reply is further down the same batch: end after it (or when
                    // the grace runs out).
                    self.pending_ends[index].ended_before_reply = true;
                }
            }
            // Not the turn `Stop` reported (a fork's copied history), or no `Stop` seen:
            // this ends the transcript's own turn, and leaves the pending ones be.
            None => {
                if !turn.is_empty() {
                    self.end_turn(
                        TurnCompleted {
                            turn_id: turn,
                            status: TurnStatus::Completed,
                            error: None,
                            duration_ms: duration,
                            lost: false,
                        },
                        out,
                    );
                }
            }
        }
    }

    /// Whether a `Stop` ended `turn_id` and its end waits for the transcript: the turn
    /// completed, and no later verdict may say otherwise. Another turn's pending end says
    /// nothing about this one.
    fn ends_pending(&self, turn_id: &str) -> bool {
        self.pending_ends
            .iter()
            .any(|pending| pending.done.turn_id == turn_id)
    }

    /// The turns whose ends wait for the transcript (for the debug log).
    fn pending_turns(&self) -> Vec<&str> {
        self.pending_ends
            .iter()
            .map(|pending| pending.done.turn_id.as_str())
            .collect()
    }

    /// Whether the transcript has written the reply `Stop` reported for a pending turn.
    fn reply_written(&self, pending: &PendingEnd) -> bool {
        match &pending.awaited_reply {
            Some(want) => self.last_reply.as_ref().is_some_and(|(turn, text)| {
                // The line's text is the reply, or the last block of a multi-block one.
                *turn == pending.done.turn_id && (text == want || want.ends_with(text.as_str()))
            }),
            None => true,
        }
    }

    /// Time passes: a turn end held for the transcript is released after the grace period.
    pub fn tick(&mut self, now: u64) -> Vec<Output> {
        let mut out = Vec::new();
        let due: Vec<TurnCompleted> = self
            .pending_ends
            .iter()
            .filter(|pending| now >= pending.deadline)
            .map(|pending| pending.done.clone())
            .collect();
        for done in due {
            self.end_turn(done, &mut out);
        }
        out
    }

    /// The TUI's session file (`~/.claude/sessions/<pid>.json`) `status`: the only signal that a
    /// human's Escape ended a turn, since no hook fires on an interrupt.
    /// cohost pressed Escape on `turn_id` and the TUI is idle again: the turn ended interrupted,
    /// unless it finished first (its `Stop` is pending or it already ended). This covers an
    /// Escape before the first token, whose busy spell can be too short for the session file.
    pub fn interrupted(&mut self, turn_id: &str) -> Vec<Output> {
        let mut out = Vec::new();
        tracing::debug!(
            turn_id,
            current = ?self.turn,
            pending = ?self.pending_turns(),
            "claude: cohost's Escape ended a turn"
        );
        if self.turn.as_deref() == Some(turn_id) && !self.ends_pending(turn_id) {
            self.end_turn(
                TurnCompleted {
                    turn_id: turn_id.to_string(),
                    status: TurnStatus::Interrupted,
                    error: None,
                    duration_ms: None,
                    lost: false,
                },
                &mut out,
            );
        }
        out
    }

    pub fn session_status(&mut self, status: &str) -> Vec<Output> {
        let mut out = Vec::new();
        // Only the turn that was seen busy is ended by going idle: between a turn and the
        // queued prompt that follows it the file reads idle for a moment, when the hooks may
        // have started the next turn already.
        let busy_turn = self.busy_turn.take();
        if status == "busy" {
            self.busy_turn = self.turn.clone();
        }
        tracing::debug!(
            status,
            current = ?self.turn,
            busy = ?busy_turn,
            pending = ?self.pending_turns(),
            "claude: the session file's status applies"
        );
        if status == "idle"
            && let Some(turn) = self.turn.clone()
            && !self.ends_pending(&turn)
            && busy_turn.as_deref() == Some(turn.as_str())
        {
            self.end_turn(
                TurnCompleted {
                    turn_id: turn,
                    status: TurnStatus::Interrupted,
                    error: None,
                    duration_ms: None,
                    lost: false,
                },
                &mut out,
            );
        }
        out
    }
}

/// The decisions cohost relays to Claude.
pub const DECISIONS: [&str; 4] = ["accept", "acceptForSession", "decline", "cancel"];

/// The approval id of a permission request: Claude's session and the hook's request id.
pub fn approval_id(claude_session: &str, request_id: &str) -> String {
    format!("ap:{claude_session}:{request_id}")
}

/// The cohost id of the input request a `PermissionRequest` hook (its own `request_id`) opened.
pub fn input_id(claude_session: &str, request_id: &str, kind: InputKind) -> String {
    format!("in:{claude_session}:{request_id}:{}", kind.as_str())
}

/// The `PermissionRequest` of `AskUserQuestion` (questions) or `ExitPlanMode` (a plan) → the
/// input request it is; `None` for every other tool (an approval). A question's id is its text:
/// Claude reads the answers from `updatedInput.answers`, keyed by the question's text.
pub fn input_request(
    claude_session: &str,
    request_id: &str,
    tool: &str,
    input: Option<&Value>,
    turn_id: Option<String>,
) -> Option<InputRequested> {
    let kind = match tool {
        "AskUserQuestion" => InputKind::Question,
        "ExitPlanMode" => InputKind::Plan,
        _ => return None,
    };
    let text = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).map(str::to_string);
    let questions = input
        .and_then(|i| i.get("questions"))
        .and_then(Value::as_array)
        .map(|questions| {
            questions
                .iter()
                .filter_map(|q| {
                    let question = text(q, "question")?;
                    Some(Question {
                        id: question.clone(),
                        header: text(q, "header"),
                        question,
                        options: q
                            .get("options")
                            .and_then(Value::as_array)
                            .map(|options| {
                                options
                                    .iter()
                                    .filter_map(|o| {
                                        Some(QuestionOption {
                                            label: text(o, "label")?,
                                            description: text(o, "description"),
                                        })
                                    })
                                    .collect()
                            })
                            .unwrap_or_default(),
                        // Claude's dialog always offers a free-form "Other".
                        is_other: true,
                        is_secret: false,
                        multi_select: q
                            .get("multiSelect")
                            .and_then(Value::as_bool)
                            .unwrap_or(false),
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    Some(InputRequested {
        request_id: input_id(claude_session, request_id, kind),
        kind,
        turn_id,
        item_id: None,
        questions,
        // 2.1.197 sends the plan in the input; 2.1.332 sends `{}` (its plan is a file).
        plan: input.and_then(|i| text(i, "plan")),
        message: (kind == InputKind::Plan).then(|| "Claude wants to exit plan mode".to_string()),
        server: None,
        schema: None,
        url: None,
        permissions: None,
        decisions: kind.decisions().iter().map(|d| d.to_string()).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn hook(event: &str, payload: Value) -> Value {
        json!({"receivedAt": 1, "event": event, "payload": payload})
    }

    fn stored(out: &[Output]) -> Vec<&'static str> {
        out.iter()
            .filter_map(|o| match o {
                Output::Store(kind) => Some(kind.type_name()),
                _ => None,
            })
            .collect()
    }

    // Payload shapes are literal as Claude Code 2.1.197 and 2.1.332 write them (docs/peers.md).

    #[test]
    fn a_plain_turn_from_hooks_and_transcript() {
        let mut n = Normalizer::new();
        let start = n.hook(&hook("SessionStart", json!({"session_id":"s1","transcript_path":"/t/s1.jsonl","cwd":"/w","hook_event_name":"SessionStart","source":"startup"})), 0);
        assert!(start.contains(&Output::Bound {
            claude_session_id: "s1".into(),
            transcript_path: Some("/t/s1.jsonl".into())
        }));
        n.expect_injected("Say hello");
        let submit = n.hook(&hook("UserPromptSubmit", json!({"session_id":"s1","transcript_path":"/t/s1.jsonl","prompt_id":"p1","hook_event_name":"UserPromptSubmit","prompt":"Say hello"})), 10);
        assert_eq!(stored(&submit), ["turn.started", "item.completed"]);
        assert!(
            matches!(&submit[0], Output::Store(EventKind::TurnStarted(t)) if t.source == TurnSource::Api)
        );
        let stop = n.hook(&hook("Stop", json!({"session_id":"s1","prompt_id":"p1","hook_event_name":"Stop","last_assistant_message":"Hello"})), 20);
        assert!(stored(&stop).is_empty(), "the end waits for the transcript");
        // The transcript lands later: the user line (a duplicate by id), the reply, the end.
        let user = n.transcript_line(&json!({"type":"user","promptId":"p1","message":{"role":"user","content":"Say hello"},"uuid":"u1"}));
        let Output::Store(EventKind::ItemCompleted(ItemEvent {
            item: Item::UserMessage { id, .. },
            ..
        })) = &user[0]
        else {
            panic!("{user:?}")
        };
        assert_eq!(id, &prompt_item_id("p1", "Say hello"));
        let reply = n.transcript_line(&json!({"type":"assistant","uuid":"a1","message":{"id":"msg_1","model":"claude-opus-4-8","content":[{"type":"text","text":"Hello"}],"stop_reason":"end_turn","usage":{"input_tokens":10,"output_tokens":2}}}));
        assert_eq!(stored(&reply), ["item.completed", "usage"]);
        let end = n
            .transcript_line(&json!({"type":"system","subtype":"turn_duration","durationMs":5859}));
        assert_eq!(stored(&end), ["turn.completed"]);
        assert!(n.tick(10_000).is_empty(), "ended once");
    }

    #[test]
    fn pasted_content_is_unwrapped() {
        // Literal from Claude Code 2.1.332 (a 4-line paste; hook, transcript and request alike).
        let wrapped = "\n\n<pasted_content id=\"d893\">\nFirst line\n  second \"q\" $HOME\n\nlast line\n</pasted_content id=\"d893\">\n";
        assert_eq!(
            unwrap_pasted(wrapped),
            "First line\n  second \"q\" $HOME\n\nlast line"
        );
        assert_eq!(unwrap_pasted("plain text"), "plain text");
        // Typed text around a paste keeps its place; a mismatched or unclosed tag stays as is.
        assert_eq!(
            unwrap_pasted(
                "Look:\n\n<pasted_content id=\"a1\">\nx\ny\n</pasted_content id=\"a1\">\nThanks"
            ),
            "Look:x\nyThanks"
        );
        let odd = "<pasted_content id=\"a1\">\nx\n</pasted_content id=\"b2\">";
        assert_eq!(unwrap_pasted(odd), odd);
        let open = "say <pasted_content id=\"";
        assert_eq!(unwrap_pasted(open), open);

        // The hook's prompt and the transcript's line both store the plain text, under one id,
        // and an injected paste is still recognised as the API's.
        let mut n = Normalizer::new();
        let plain = "First line\n  second \"q\" $HOME\n\nlast line";
        n.expect_injected(plain);
        let submit = n.hook(
            &hook(
                "UserPromptSubmit",
                json!({"session_id":"s1","prompt_id":"p1","prompt":wrapped}),
            ),
            0,
        );
        assert!(
            submit.iter().any(|o| matches!(o, Output::Store(EventKind::TurnStarted(t)) if t.source == TurnSource::Api)),
            "{submit:?}"
        );
        assert!(submit.contains(&Output::PromptSubmitted {
            turn_id: "p1".into(),
            text: plain.into()
        }));
        let user = n.transcript_line(
            &json!({"type":"user","promptId":"p1","message":{"role":"user","content":wrapped}}),
        );
        let Output::Store(EventKind::ItemCompleted(ItemEvent {
            item: Item::UserMessage { id, text },
            ..
        })) = &user[0]
        else {
            panic!("{user:?}")
        };
        assert_eq!(text, plain);
        assert_eq!(id, &prompt_item_id("p1", plain));
    }

    /// The turns, user messages and replies a run of outputs stores, once each (the core drops
    /// repeated ids), and the prompts reported queued.
    #[derive(Debug, Default, PartialEq)]
    struct Seen {
        started: Vec<(String, TurnSource)>,
        completed: Vec<(String, TurnStatus)>,
        users: Vec<(String, String)>,
        replies: Vec<(String, String)>,
        queued: Vec<String>,
        submitted: Vec<(String, String)>,
    }

    fn seen(out: &[Output]) -> Seen {
        let mut seen = Seen::default();
        let mut ids = HashSet::new();
        for output in out {
            match output {
                Output::Store(kind) => {
                    if let Some(key) = crate::core::sessions::dedupe_key(kind)
                        && !ids.insert(key)
                    {
                        continue;
                    }
                    match kind {
                        EventKind::TurnStarted(t) => {
                            seen.started.push((t.turn_id.clone(), t.source))
                        }
                        EventKind::TurnCompleted(t) => {
                            seen.completed.push((t.turn_id.clone(), t.status))
                        }
                        EventKind::ItemCompleted(ItemEvent {
                            turn_id,
                            item: Item::UserMessage { text, .. },
                        }) => seen.users.push((turn_id.clone(), text.clone())),
                        EventKind::ItemCompleted(ItemEvent {
                            turn_id,
                            item: Item::AgentMessage { text, .. },
                        }) => seen.replies.push((turn_id.clone(), text.clone())),
                        _ => {}
                    }
                }
                Output::PromptQueued { text } => seen.queued.push(text.clone()),
                Output::PromptSubmitted { turn_id, text } => {
                    seen.submitted.push((turn_id.clone(), text.clone()))
                }
                _ => {}
            }
        }
        seen
    }

    enum In {
        Hook(Value),
        Line(Value),
        /// A reading of the session file's `status`.
        Status(&'static str),
    }

    fn feed(n: &mut Normalizer, inputs: Vec<In>) -> Vec<Output> {
        let mut out = Vec::new();
        for (i, input) in inputs.into_iter().enumerate() {
            out.extend(match input {
                In::Hook(line) => n.hook(&line, i as u64),
                In::Line(line) => n.transcript_line(&line),
                In::Status(status) => n.session_status(status),
            });
        }
        out
    }

    fn ups(prompt_id: &str, text: &str) -> In {
        In::Hook(hook(
            "UserPromptSubmit",
            json!({"session_id":"s1","prompt_id":prompt_id,"permission_mode":"default","prompt":text}),
        ))
    }

    fn stop(prompt_id: &str, last: &str) -> In {
        In::Hook(hook(
            "Stop",
            json!({"session_id":"s1","prompt_id":prompt_id,"last_assistant_message":last}),
        ))
    }

    fn user_line(prompt_id: &str, text: &str, source: &str) -> In {
        In::Line(
            json!({"type":"user","promptId":prompt_id,"promptSource":source,"message":{"role":"user","content":text}}),
        )
    }

    fn reply_line(uuid: &str, text: &str) -> In {
        In::Line(
            json!({"type":"assistant","uuid":uuid,"message":{"content":[{"type":"text","text":text}],"stop_reason":"end_turn"}}),
        )
    }

    fn line(value: Value) -> In {
        In::Line(value)
    }

    fn end_line() -> In {
        line(json!({"type":"system","subtype":"turn_duration","durationMs":5}))
    }

    // The orders below are the arrival orders recorded on the real CLIs (a SLOW turn with one or
    // two prompts pasted and sent while it streamed).

    #[test]
    fn a_prompt_queued_mid_turn_on_2_1_332_runs_as_its_own_turn() {
        let mut n = Normalizer::new();
        n.expect_injected("SLOW answer please");
        n.expect_injected("And then this");
        let out = feed(
            &mut n,
            vec![
                user_line("p1", "SLOW answer please", "typed"),
                ups("p1", "SLOW answer please"),
                // Fired at enqueue time, naming the running turn.
                ups("p1", "And then this"),
                line(
                    json!({"type":"queue-operation","operation":"enqueue","content":"And then this"}),
                ),
                reply_line("a1", "Long answer."),
                stop("p1", "Long answer."),
                end_line(),
                line(json!({"type":"queue-operation","operation":"dequeue"})),
                user_line("q2", "And then this", "queued"),
                reply_line("a2", "Short reply."),
                stop("q2", "Short reply."),
                end_line(),
            ],
        );
        let seen = seen(&out);
        assert_eq!(seen.queued, ["And then this"]);
        assert_eq!(
            seen.started,
            [
                ("p1".into(), TurnSource::Api),
                ("q2".into(), TurnSource::Api)
            ]
        );
        assert_eq!(
            seen.completed,
            [
                ("p1".into(), TurnStatus::Completed),
                ("q2".into(), TurnStatus::Completed)
            ]
        );
        assert_eq!(
            seen.users,
            [
                ("p1".into(), "SLOW answer please".into()),
                ("q2".into(), "And then this".into())
            ]
        );
        assert_eq!(
            seen.replies,
            [
                ("p1".into(), "Long answer.".into()),
                ("q2".into(), "Short reply.".into())
            ]
        );
        assert_eq!(seen.submitted, [("p1".into(), "SLOW answer please".into())]);
    }

    /// The order a CI run read them in (Claude Code 2.1.332 under load): the queued turn ran to
    /// its `Stop` before cohost read its transcript, and the session file's idle between the two
    /// turns came after both `Stop`s. Each turn still ends once, completed: the second `Stop`
    /// does not push the first turn's pending end aside (it did: the idle then ended the first
    /// turn `interrupted`, and the first turn's `turn_duration` ended the second).
    #[test]
    fn a_queued_turns_stop_read_before_the_turn_before_it_ended_leaves_that_end_alone() {
        let mut n = Normalizer::new();
        n.expect_injected("Write a long answer");
        n.expect_injected("And then this");
        let out = feed(
            &mut n,
            vec![
                ups("p1", "Write a long answer"),
                In::Status("busy"),
                ups("p1", "And then this"),
                user_line("p1", "Write a long answer", "typed"),
                line(
                    json!({"type":"queue-operation","operation":"enqueue","content":"And then this"}),
                ),
                In::Status("busy"),
                stop("p1", "word1 word2"),
                reply_line("a1", "word1 word2"),
                stop("q2", "Second answer."),
                In::Status("idle"),
                line(json!({"type":"queue-operation","operation":"dequeue"})),
                line(json!({"type":"system","subtype":"turn_duration","durationMs":6400})),
                user_line("q2", "And then this", "queued"),
                reply_line("a2", "Second answer."),
                line(json!({"type":"system","subtype":"turn_duration","durationMs":40})),
                In::Status("idle"),
            ],
        );
        let seen = seen(&out);
        assert_eq!(
            seen.completed,
            [
                ("p1".into(), TurnStatus::Completed),
                ("q2".into(), TurnStatus::Completed)
            ]
        );
        let durations: Vec<(String, Option<u64>)> = out
            .iter()
            .filter_map(|o| match o {
                Output::Store(EventKind::TurnCompleted(t)) => {
                    Some((t.turn_id.clone(), t.duration_ms))
                }
                _ => None,
            })
            .collect();
        assert_eq!(
            durations,
            [("p1".into(), Some(6400)), ("q2".into(), Some(40))]
        );
        assert_eq!(
            seen.replies,
            [
                ("p1".into(), "word1 word2".into()),
                ("q2".into(), "Second answer.".into())
            ]
        );
    }

    #[test]
    fn two_prompts_queued_on_2_1_332_are_one_turn() {
        let mut n = Normalizer::new();
        let out = feed(
            &mut n,
            vec![
                user_line("p1", "SLOW answer please", "typed"),
                ups("p1", "SLOW answer please"),
                ups("p1", "And then this"),
                ups("p1", "Queued prompt B"),
                reply_line("a1", "Long answer."),
                stop("p1", "Long answer."),
                end_line(),
                user_line("qa", "And then this", "queued"),
                user_line("qb", "Queued prompt B", "queued"),
                reply_line("a2", "Short reply."),
                // The one Stop names the batch's last prompt.
                stop("qb", "Short reply."),
                end_line(),
            ],
        );
        let seen = seen(&out);
        assert_eq!(seen.queued, ["And then this", "Queued prompt B"]);
        let turns: Vec<&str> = seen.started.iter().map(|(t, _)| t.as_str()).collect();
        assert_eq!(turns, ["p1", "qa"]);
        assert_eq!(
            seen.completed,
            [
                ("p1".into(), TurnStatus::Completed),
                ("qa".into(), TurnStatus::Completed)
            ]
        );
        assert_eq!(
            seen.users[1..],
            [
                ("qa".into(), "And then this".into()),
                ("qa".into(), "Queued prompt B".into())
            ]
        );
        assert_eq!(seen.replies[1], ("qa".into(), "Short reply.".into()));
        assert_eq!(n.turn(), None, "nothing left running");
    }

    #[test]
    fn queued_prompts_on_2_1_197_start_their_turn_at_dequeue() {
        // One queued prompt: no hook at enqueue; the transcript line, then its hook.
        let mut n = Normalizer::new();
        let out = feed(
            &mut n,
            vec![
                user_line("p1", "SLOW answer please", "typed"),
                ups("p1", "SLOW answer please"),
                reply_line("a1", "Long answer."),
                stop("p1", "Long answer."),
                end_line(),
                user_line("q2", "And then this", "queued"),
                ups("q2", "And then this"),
                reply_line("a2", "Short reply."),
                stop("q2", "Short reply."),
                end_line(),
            ],
        );
        let seen1 = seen(&out);
        assert!(seen1.queued.is_empty());
        let turns: Vec<&str> = seen1.started.iter().map(|(t, _)| t.as_str()).collect();
        assert_eq!(turns, ["p1", "q2"]);
        assert_eq!(seen1.completed.len(), 2);
        assert_eq!(seen1.submitted[1], ("q2".into(), "And then this".into()));

        // Two: one turn; the first hook names an id no transcript line carries.
        let mut n = Normalizer::new();
        let out = feed(
            &mut n,
            vec![
                user_line("p1", "SLOW answer please", "typed"),
                ups("p1", "SLOW answer please"),
                reply_line("a1", "Long answer."),
                stop("p1", "Long answer."),
                end_line(),
                user_line("e5", "And then this", "queued"),
                ups("3f", "And then this"),
                user_line("e5", "Queued prompt B", "queued"),
                ups("e5", "Queued prompt B"),
                reply_line("a2", "Short reply."),
                stop("e5", "Short reply."),
                end_line(),
            ],
        );
        let seen2 = seen(&out);
        let turns: Vec<&str> = seen2.started.iter().map(|(t, _)| t.as_str()).collect();
        assert_eq!(turns, ["p1", "e5"], "{seen2:?}");
        assert_eq!(
            seen2.completed,
            [
                ("p1".into(), TurnStatus::Completed),
                ("e5".into(), TurnStatus::Completed)
            ]
        );
        assert_eq!(
            seen2.users[1..],
            [
                ("e5".into(), "And then this".into()),
                ("e5".into(), "Queued prompt B".into())
            ]
        );
        assert_eq!(n.turn(), None, "nothing left running");
    }

    #[test]
    fn a_stop_without_transcript_ends_after_the_grace() {
        let mut n = Normalizer::new();
        n.hook(
            &hook(
                "UserPromptSubmit",
                json!({"session_id":"s1","prompt_id":"p1","prompt":"x"}),
            ),
            0,
        );
        n.hook(
            &hook("Stop", json!({"session_id":"s1","prompt_id":"p1"})),
            100,
        );
        assert!(n.tick(100 + STOP_GRACE_MS - 1).is_empty());
        assert_eq!(stored(&n.tick(100 + STOP_GRACE_MS)), ["turn.completed"]);
    }

    #[test]
    fn tools_from_hooks_and_transcript_share_ids() {
        let mut n = Normalizer::new();
        n.hook(
            &hook(
                "UserPromptSubmit",
                json!({"session_id":"s1","prompt_id":"p1","prompt":"run"}),
            ),
            0,
        );
        let pre = n.hook(&hook("PreToolUse", json!({"session_id":"s1","prompt_id":"p1","tool_name":"Bash","tool_input":{"command":"echo hi"},"tool_use_id":"toolu_1"})), 1);
        let post = n.hook(&hook("PostToolUse", json!({"session_id":"s1","prompt_id":"p1","tool_name":"Bash","tool_input":{"command":"echo hi"},"tool_response":{"stdout":"hi","stderr":""},"tool_use_id":"toolu_1","duration_ms":86})), 2);
        let id_of = |out: &[Output]| match &out[0] {
            Output::Store(EventKind::ItemStarted(e))
            | Output::Store(EventKind::ItemCompleted(e)) => e.id().to_string(),
            other => panic!("{other:?}"),
        };
        assert_eq!(id_of(&pre), "p1:toolu_1");
        assert_eq!(id_of(&post), "p1:toolu_1");
        n.transcript_line(&json!({"type":"user","promptId":"p1","message":{"content":"run"}}));
        let use_line = n.transcript_line(&json!({"type":"assistant","uuid":"a1","message":{"content":[{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"echo hi"}}]}}));
        assert_eq!(id_of(&use_line), "p1:toolu_1");
        let result = n.transcript_line(&json!({"type":"user","promptId":"p1","message":{"content":[{"tool_use_id":"toolu_1","type":"tool_result","content":"hi","is_error":false}]}}));
        assert_eq!(id_of(&result), "p1:toolu_1");
    }

    #[test]
    fn permission_request_becomes_an_approval() {
        let mut n = Normalizer::new();
        let out = n.hook(&json!({"receivedAt":1,"event":"PermissionRequest","requestId":"r1","payload":{"session_id":"s1","prompt_id":"p1","hook_event_name":"PermissionRequest","tool_name":"Bash","tool_input":{"command":"touch made.txt","description":"Create file"}}}), 0);
        let Some(Output::Store(EventKind::ApprovalRequested(a))) = out
            .iter()
            .find(|o| matches!(o, Output::Store(EventKind::ApprovalRequested(_))))
        else {
            panic!("{out:?}")
        };
        assert_eq!(a.approval_id, "ap:s1:r1");
        assert_eq!(a.command.as_deref(), Some("touch made.txt"));
        assert!(out.contains(&Output::Status(AgentStatus::Waiting)));
    }

    #[test]
    fn ask_user_question_and_exit_plan_mode_become_input_requests() {
        let mut n = Normalizer::new();
        let out = n.hook(&json!({"receivedAt":1,"event":"PermissionRequest","requestId":"r2","payload":{"session_id":"s1","prompt_id":"p1","hook_event_name":"PermissionRequest","tool_name":"AskUserQuestion","tool_input":{"questions":[{"question":"Which color?","header":"Color","options":[{"label":"Red","description":"warm"},{"label":"Blue","description":"cold"}],"multiSelect":true}]}}}), 0);
        let Some(Output::Store(EventKind::InputRequested(q))) = out
            .iter()
            .find(|o| matches!(o, Output::Store(EventKind::InputRequested(_))))
        else {
            panic!("{out:?}")
        };
        assert_eq!(q.request_id, "in:s1:r2:question");
        assert_eq!(q.questions[0].id, "Which color?");
        assert!(q.questions[0].multi_select && q.questions[0].is_other);
        assert_eq!(q.questions[0].options[1].label, "Blue");
        assert!(
            !out.iter()
                .any(|o| matches!(o, Output::Store(EventKind::ApprovalRequested(_))))
        );
        // 2.1.332 sends no plan in the input; 2.1.197 does.
        for (input, plan) in [(json!({}), None), (json!({"plan": "# A"}), Some("# A"))] {
            let out = n.hook(&json!({"receivedAt":2,"event":"PermissionRequest","requestId":"r3","payload":{"session_id":"s1","prompt_id":"p1","hook_event_name":"PermissionRequest","tool_name":"ExitPlanMode","tool_input":input}}), 0);
            let Some(Output::Store(EventKind::InputRequested(p))) = out
                .iter()
                .find(|o| matches!(o, Output::Store(EventKind::InputRequested(_))))
            else {
                panic!("{out:?}")
            };
            assert_eq!(p.kind, InputKind::Plan);
            assert_eq!(p.plan.as_deref(), plan);
            assert_eq!(p.decisions, ["approve", "reject"]);
        }
    }

    #[test]
    fn interrupts_from_the_transcript_marker_and_the_session_file() {
        let mut n = Normalizer::new();
        n.hook(
            &hook(
                "UserPromptSubmit",
                json!({"session_id":"s1","prompt_id":"p1","prompt":"long"}),
            ),
            0,
        );
        n.transcript_line(&json!({"type":"user","promptId":"p1","message":{"content":"long"}}));
        let marker = n.transcript_line(&json!({"type":"user","promptId":"p1","message":{"content":[{"type":"text","text":"[Request interrupted by user]"}]}}));
        assert_eq!(stored(&marker), ["turn.completed"]);
        // Before the first token there is no marker: the session file going idle ends the turn.
        n.hook(
            &hook(
                "UserPromptSubmit",
                json!({"session_id":"s1","prompt_id":"p2","prompt":"again"}),
            ),
            10,
        );
        assert!(n.session_status("busy").is_empty());
        let idle = n.session_status("idle");
        // (A turn the file never showed busy is not ended by idle: see the queued test below.)
        assert!(
            matches!(&idle[0], Output::Store(EventKind::TurnCompleted(t)) if t.turn_id == "p2" && t.status == TurnStatus::Interrupted)
        );
    }

    #[test]
    fn an_aborted_partial_reply_is_not_an_answer() {
        for partial in [
            // 2.1.197
            json!({"type":"assistant","uuid":"a1","message":{"id":"6c1e…","model":"<synthetic>","content":[{"type":"text","text":"word0 word1"}],"stop_reason":"stop_sequence","usage":{"input_tokens":0,"output_tokens":0}}}),
            // 2.1.332 (a literal capture)
            json!({"parentUuid":"6eda","message":{"id":"msg_ae01365aeb57","type":"message","role":"assistant","model":"claude-mock","content":[{"type":"text","text":"word0 word1"}],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":100,"output_tokens":1}},"type":"assistant","uuid":"e9f88735","isAbortedMidStream":true}),
        ] {
            let mut n = Normalizer::new();
            n.hook(
                &hook(
                    "UserPromptSubmit",
                    json!({"session_id":"s1","prompt_id":"p1","prompt":"SLOW"}),
                ),
                0,
            );
            assert!(stored(&n.transcript_line(&partial)).is_empty(), "{partial}");
            let marker = n.transcript_line(&json!({"type":"user","promptId":"p1","message":{"role":"user","content":[{"type":"text","text":"[Request interrupted by user]"}]},"interruptedMessageId":"msg_ae01365aeb57"}));
            assert_eq!(stored(&marker), ["turn.completed"]);
        }
    }

    #[test]
    fn a_reply_flushed_before_the_first_prompt_line_keeps_its_turn() {
        let mut n = Normalizer::new();
        n.hook(
            &hook(
                "UserPromptSubmit",
                json!({"session_id":"s1","prompt_id":"p1","prompt":"hi"}),
            ),
            0,
        );
        // Seen in a real first turn: the batch put the assistant line before the user line.
        let reply = n.transcript_line(&json!({"type":"assistant","uuid":"a1","message":{"content":[{"type":"text","text":"Hello"}]}}));
        let Output::Store(EventKind::ItemCompleted(e)) = &reply[0] else {
            panic!("{reply:?}")
        };
        assert_eq!(e.turn_id, "p1");
        assert_eq!(e.id(), "p1:a1:0");
    }

    #[test]
    fn a_turn_end_flushed_before_its_reply_waits_for_it() {
        let mut n = Normalizer::new();
        n.hook(
            &hook(
                "UserPromptSubmit",
                json!({"session_id":"s1","prompt_id":"p1","prompt":"hi"}),
            ),
            0,
        );
        n.hook(
            &hook(
                "Stop",
                json!({"session_id":"s1","prompt_id":"p1","last_assistant_message":"Hello."}),
            ),
            10,
        );
        // Seen in a real first turn: one flush wrote `turn_duration` above the reply.
        let end =
            n.transcript_line(&json!({"type":"system","subtype":"turn_duration","durationMs":150}));
        assert!(stored(&end).is_empty(), "{end:?}");
        n.transcript_line(&json!({"type":"user","promptId":"p1","message":{"content":"hi"}}));
        let reply = n.transcript_line(&json!({"type":"assistant","uuid":"a1","message":{"content":[{"type":"text","text":"Hello."}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}}));
        assert_eq!(
            stored(&reply),
            ["item.completed", "usage", "turn.completed"]
        );
        assert!(
            matches!(&reply[2], Output::Store(EventKind::TurnCompleted(t)) if t.turn_id == "p1" && t.duration_ms == Some(150))
        );
        assert!(n.tick(100_000).is_empty(), "ended once");
    }

    #[test]
    fn a_forks_copied_history_does_not_end_the_running_turn() {
        let mut n = Normalizer::new();
        n.expect_injected("fork prompt");
        n.hook(
            &hook(
                "UserPromptSubmit",
                json!({"session_id":"f1","prompt_id":"pf","prompt":"fork prompt"}),
            ),
            0,
        );
        n.hook(
            &hook(
                "Stop",
                json!({"session_id":"f1","prompt_id":"pf","last_assistant_message":"Fork reply."}),
            ),
            10,
        );
        // The fork's transcript starts with the parent's turn, ids and all.
        let copied = [
            n.transcript_line(&json!({"type":"user","promptId":"pp","message":{"content":"parent prompt"}})),
            n.transcript_line(&json!({"type":"assistant","uuid":"a0","message":{"content":[{"type":"text","text":"Parent reply."}]}})),
            n.transcript_line(&json!({"type":"system","subtype":"turn_duration","durationMs":100})),
        ]
        .concat();
        assert_eq!(
            stored(&copied),
            [
                "turn.started",
                "item.completed",
                "item.completed",
                "turn.completed"
            ]
        );
        assert!(
            matches!(&copied[3], Output::Store(EventKind::TurnCompleted(t)) if t.turn_id == "pp")
        );
        assert_eq!(n.turn(), Some("pf"), "the fork's turn still runs");
        n.transcript_line(
            &json!({"type":"user","promptId":"pf","message":{"content":"fork prompt"}}),
        );
        let reply = n.transcript_line(&json!({"type":"assistant","uuid":"a1","message":{"content":[{"type":"text","text":"Fork reply."}]}}));
        let end =
            n.transcript_line(&json!({"type":"system","subtype":"turn_duration","durationMs":90}));
        assert!(
            matches!(&reply[0], Output::Store(EventKind::ItemCompleted(e)) if e.turn_id == "pf")
        );
        assert!(
            matches!(&end[0], Output::Store(EventKind::TurnCompleted(t)) if t.turn_id == "pf" && t.status == TurnStatus::Completed)
        );
    }

    #[test]
    fn a_later_turns_end_flushed_above_its_prompt_line_ends_that_turn() {
        let mut n = Normalizer::new();
        n.hook(
            &hook(
                "UserPromptSubmit",
                json!({"session_id":"s1","prompt_id":"p1","prompt":"one"}),
            ),
            0,
        );
        n.transcript_line(&json!({"type":"user","promptId":"p1","message":{"content":"one"}}));
        n.transcript_line(&json!({"type":"system","subtype":"turn_duration","durationMs":5}));
        n.hook(
            &hook(
                "UserPromptSubmit",
                json!({"session_id":"s1","prompt_id":"p2","prompt":"two"}),
            ),
            10,
        );
        n.hook(
            &hook(
                "Stop",
                json!({"session_id":"s1","prompt_id":"p2","last_assistant_message":"Two."}),
            ),
            20,
        );
        assert!(
            stored(&n.transcript_line(
                &json!({"type":"system","subtype":"turn_duration","durationMs":7})
            ))
            .is_empty()
        );
        n.transcript_line(&json!({"type":"user","promptId":"p2","message":{"content":"two"}}));
        let reply = n.transcript_line(&json!({"type":"assistant","uuid":"a2","message":{"content":[{"type":"text","text":"Two."}]}}));
        assert_eq!(stored(&reply), ["item.completed", "turn.completed"]);
        assert!(
            matches!(&reply[1], Output::Store(EventKind::TurnCompleted(t)) if t.turn_id == "p2" && t.duration_ms == Some(7))
        );
    }

    #[test]
    fn inherited_lines_are_passed_over() {
        let mut n = Normalizer::new();
        n.inherit(["u0".to_string(), "a0".to_string()]);
        assert!(n.transcript_line(&json!({"type":"user","uuid":"u0","promptId":"pp","message":{"content":"parent prompt"}})).is_empty());
        assert!(n.transcript_line(&json!({"type":"assistant","uuid":"a0","message":{"content":[{"type":"text","text":"Parent reply."}]}})).is_empty());
        assert_eq!(
            stored(&n.transcript_line(&json!({"type":"user","uuid":"u1","promptId":"pf","message":{"content":"fork prompt"}}))),
            ["turn.started", "item.completed"]
        );
    }

    #[test]
    fn idle_between_a_turn_and_its_queued_successor_interrupts_nothing() {
        let mut n = Normalizer::new();
        n.hook(
            &hook(
                "UserPromptSubmit",
                json!({"session_id":"s1","prompt_id":"p1","prompt":"one"}),
            ),
            0,
        );
        assert!(n.session_status("busy").is_empty());
        n.hook(
            &hook("Stop", json!({"session_id":"s1","prompt_id":"p1"})),
            10,
        );
        n.transcript_line(&json!({"type":"system","subtype":"turn_duration","durationMs":5}));
        // The queued prompt starts the next turn before the file's brief idle is read.
        n.hook(
            &hook(
                "UserPromptSubmit",
                json!({"session_id":"s1","prompt_id":"p2","prompt":"two"}),
            ),
            20,
        );
        assert!(
            n.session_status("idle").is_empty(),
            "p2 was never seen busy"
        );
        assert_eq!(n.turn(), Some("p2"));
    }

    #[test]
    fn a_new_session_id_rebinds() {
        let mut n = Normalizer::new();
        n.hook(
            &hook(
                "SessionStart",
                json!({"session_id":"old","transcript_path":"/t/old.jsonl"}),
            ),
            0,
        );
        let out = n.hook(&hook("UserPromptSubmit", json!({"session_id":"new","transcript_path":"/t/new.jsonl","prompt_id":"p","prompt":"x"})), 1);
        assert!(out.contains(&Output::Bound {
            claude_session_id: "new".into(),
            transcript_path: Some("/t/new.jsonl".into())
        }));
        assert!(out.contains(&Output::Transcript("/t/new.jsonl".into())));
    }
}
