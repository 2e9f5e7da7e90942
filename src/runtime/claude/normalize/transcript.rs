//! Transcript lines for the [`Normalizer`]: the session's JSONL transcript — prompts, replies,
//! tool calls and results, and `turn_duration`, which releases a turn's end held for it.

use serde_json::Value;

use super::items::{prompt_item_id, tool_item, tool_item_id, unwrap_pasted};
use super::{Normalizer, Output};
use crate::formats::claude::{
    AssistantContentBlock, AssistantRecord, PromptSource, QueuedCommandRecord, RecordHead,
    TextBlock, ToolUseBlock, TranscriptRecord, UserContent, UserContentBlock, UserRecord,
};
use crate::protocol::{
    ErrorEvent, EventKind, Item, ItemEvent, TokenCounts, TurnCompleted, TurnStatus, Usage,
};

/// Whether `record` is a prompt a person (or cohost) submitted, which opens (or joins) a turn.
fn is_prompt(record: &TranscriptRecord) -> bool {
    matches!(record, TranscriptRecord::User(head, user)
        if head.is_sidechain != Some(true) && user.prompt_id.is_some() && user.submitted_prompt().is_some())
}

impl Normalizer {
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
        if let Some(prompt) = QueuedCommandRecord::prompt_of(line) {
            return vec![Output::PromptDelivered {
                text: unwrap_pasted(&prompt).into_owned(),
            }];
        }
        let record = TranscriptRecord::from_value(line);
        // Transcript-led with no turn known yet, a reply or a turn's end waits for the prompt
        // line that opens its turn (Claude may flush a first turn's lines above its prompt).
        if self.transcript_led
            && self.transcript_turn.is_none()
            && self.turn.is_none()
            && !is_prompt(&record)
            && matches!(
                record,
                TranscriptRecord::Assistant(..)
                    | TranscriptRecord::User(..)
                    | TranscriptRecord::System(..)
            )
        {
            if self.before_prompt.len() < super::MAX_BEFORE_PROMPT {
                self.before_prompt.push(record);
            }
            return Vec::new();
        }
        let mut out = self.record(&record);
        if is_prompt(&record) && !self.before_prompt.is_empty() {
            for held in std::mem::take(&mut self.before_prompt) {
                out.extend(self.record(&held));
            }
        }
        out
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
            TranscriptRecord::User(head, user) => self.user_record(head, user, &mut out),
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

    fn user_record(&mut self, head: &RecordHead, line: &UserRecord, out: &mut Vec<Output>) {
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
                // Transcript-led, a typed prompt's line says when its turn began, as a
                // `UserPromptSubmit` does with hooks: the session file going `idle` after it
                // ends the turn even when no reading saw it busy, or saw it busy before this
                // line was read (an Escape before the first token writes nothing more here).
                // Not a queued prompt's: it may be written with an earlier time than the `idle`
                // between its turn and the one before.
                if self.transcript_led
                    && line.prompt_source == Some(PromptSource::Typed)
                    && self.open_turn() == Some(turn_id.as_str())
                    && self.turn_since.is_none()
                {
                    self.turn_since = head.written_at_ms();
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
                // The session file's `idle` held it: the transcript says it completed.
                if pending.by_idle {
                    pending.done.status = TurnStatus::Completed;
                }
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
}
