//! The ids and items the [`Normalizer`](super::Normalizer)'s two sources agree on: a prompt's
//! item id (its turn and text), a tool call's (its `tool_use_id`), an approval's and an input
//! request's, the unwrapped text of a paste, and the input request a `PermissionRequest` opens.

use serde_json::Value;

use crate::formats::claude::BashToolInput;
use crate::protocol::{InputKind, InputRequested, Item, Question, QuestionOption};

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

pub(super) fn tool_item(
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
