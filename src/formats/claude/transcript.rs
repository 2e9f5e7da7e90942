//! Claude's transcript records (`~/.claude/projects/<cwd>/<session>.jsonl`): one line's head
//! (`type`, `uuid`, `isSidechain`, `timestamp`, `cwd`, `entrypoint`), the `user`, `assistant`
//! and `system` lines with the content blocks cohost reads (every other kind is `Other`), and the
//! title lines.

use serde::Deserialize;
use serde::de::{self, Deserializer};
use serde_json::Value;

use crate::formats::lenient::{self, Lenient, lenient_object, open_enum};

/// One transcript line. The kinds cohost reads are typed; every other one (`attachment`,
/// `mode`, `permission-mode`, `queue-operation`, `last-prompt`, `ai-title`,
/// `file-history-snapshot`, 2.1.332's `api-request*`, `atis-latch`, `tools-used`, `cost-state`,
/// …) is `Other` with its `type`, read no further (the title lines are read as a
/// [`TitleRecord`]). What every line may carry is in `head`.
#[derive(Debug, Clone, PartialEq)]
pub enum TranscriptRecord {
    User(RecordHead, UserRecord),
    Assistant(RecordHead, AssistantRecord),
    System(RecordHead, SystemRecord),
    Other(RecordHead),
}

/// What cohost reads of every line: its `type`, its `uuid` (message lines; metadata lines have
/// none), `isSidechain` (a subagent's lines), and what message lines carry besides: when it was
/// written, the working directory and the program's entry point.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RecordHead {
    #[serde(rename = "type", deserialize_with = "lenient::opt")]
    pub kind: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub uuid: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub is_sidechain: Option<bool>,
    /// RFC 3339 with milliseconds (`2026-12-01T09:18:23.092Z`).
    #[serde(deserialize_with = "lenient::opt")]
    pub timestamp: Option<String>,
    /// Follows `cd` done by the Bash tool.
    #[serde(deserialize_with = "lenient::opt")]
    pub cwd: Option<String>,
    /// `cli` for the TUI, `sdk-cli` for a headless run (`claude -p`, the SDK).
    #[serde(deserialize_with = "lenient::opt")]
    pub entrypoint: Option<String>,
}

impl RecordHead {
    /// When the line was written (`timestamp`), in ms since the epoch.
    pub fn written_at_ms(&self) -> Option<u64> {
        let at = chrono::DateTime::parse_from_rfc3339(self.timestamp.as_deref()?).ok()?;
        u64::try_from(at.timestamp_millis()).ok()
    }

    /// The head of one transcript line's text, read without building the rest; `None` for a
    /// line that is not one JSON object.
    pub fn of_line(line: &str) -> Option<RecordHead> {
        let mut deserializer = serde_json::Deserializer::from_str(line);
        let head = lenient::read_object(&mut deserializer).ok()??;
        deserializer.end().ok()?;
        Some(head)
    }
}

impl TranscriptRecord {
    /// Reads one line's JSON. Never fails: a line that is not an object is `Other` with an empty
    /// head, and fields of another type read as absent.
    pub fn from_value(line: &Value) -> TranscriptRecord {
        fn record<T: de::DeserializeOwned + Default>(line: &Value) -> T {
            T::deserialize(line).unwrap_or_default()
        }
        if !line.is_object() {
            return TranscriptRecord::Other(RecordHead::default());
        }
        let head: RecordHead = record(line);
        match head.kind.as_deref() {
            Some("user") => TranscriptRecord::User(head, record(line)),
            Some("assistant") => TranscriptRecord::Assistant(head, record(line)),
            Some("system") => TranscriptRecord::System(head, record(line)),
            _ => TranscriptRecord::Other(head),
        }
    }

    pub fn head(&self) -> &RecordHead {
        match self {
            TranscriptRecord::User(head, _)
            | TranscriptRecord::Assistant(head, _)
            | TranscriptRecord::System(head, _)
            | TranscriptRecord::Other(head) => head,
        }
    }
}

impl<'de> Deserialize<'de> for TranscriptRecord {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(TranscriptRecord::from_value(&Value::deserialize(
            deserializer,
        )?))
    }
}

/// The model the conversation last ran on, from its transcript's lines (oldest first): the
/// newest assistant line of the main thread (not a subagent's, `isSidechain`) whose
/// `message.model` is a real one (not `<synthetic>`, which Claude writes for the lines it makes
/// up). `None` when no line says.
pub fn last_model<'a>(lines: impl DoubleEndedIterator<Item = &'a str>) -> Option<String> {
    lines.rev().find_map(|line| {
        let value: Value = serde_json::from_str(line).ok()?;
        match TranscriptRecord::from_value(&value) {
            TranscriptRecord::Assistant(head, record) if head.is_sidechain != Some(true) => record
                .message?
                .model
                .filter(|model| !model.is_empty() && model != "<synthetic>"),
            _ => None,
        }
    })
}

/// The title lines, `ai-title` (Claude's own title for the session) and `custom-title` (one a
/// person set with `/rename`); [`TranscriptRecord`] reads them as `Other`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TitleRecord {
    #[serde(deserialize_with = "lenient::opt")]
    pub ai_title: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub custom_title: Option<String>,
}

impl TitleRecord {
    /// Reads one line's JSON. Never fails: a line that is not an object reads with no title.
    pub fn from_value(line: &Value) -> TitleRecord {
        if line.is_object() {
            TitleRecord::deserialize(line).unwrap_or_default()
        } else {
            TitleRecord::default()
        }
    }
}

/// An `attachment` line of type `queued_command`: a prompt queued while a tool ran, which Claude
/// delivered into the running turn (as a system message after the tool's result; no
/// `UserPromptSubmit` fires for it). [`TranscriptRecord`] reads it as `Other`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct QueuedCommandRecord {
    #[serde(deserialize_with = "lenient::opt")]
    pub attachment: Option<QueuedCommand>,
}

/// The `attachment` of a [`QueuedCommandRecord`].
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct QueuedCommand {
    #[serde(rename = "type", deserialize_with = "lenient::opt")]
    pub kind: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub prompt: Option<String>,
}

impl QueuedCommandRecord {
    /// The prompt a `queued_command` attachment line delivered; `None` for every other line.
    pub fn prompt_of(line: &Value) -> Option<String> {
        if line.get("type").and_then(Value::as_str) != Some("attachment") {
            return None;
        }
        let record = QueuedCommandRecord::deserialize(line).ok()?;
        let attachment = record.attachment?;
        (attachment.kind.as_deref() == Some("queued_command"))
            .then_some(attachment.prompt)
            .flatten()
    }
}

open_enum! {
    /// A user line's `promptSource`.
    pub enum PromptSource {
        /// Typed or pasted into the box.
        Typed = "typed",
        /// Queued behind a running turn, sent when it ended.
        Queued = "queued",
    }
}

/// A `user` line: a prompt (string content), tool results, an interrupt marker or a slash
/// command's expansion (block content).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct UserRecord {
    /// The hook's `prompt_id`.
    #[serde(deserialize_with = "lenient::opt")]
    pub prompt_id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub prompt_source: Option<PromptSource>,
    /// Harness-made lines (caveats, command expansions).
    #[serde(deserialize_with = "lenient::opt")]
    pub is_meta: Option<bool>,
    /// Present (as `true`) on the summary a compaction writes. Kept as sent: cohost tells a
    /// summary by the field's presence.
    #[serde(deserialize_with = "lenient::opt")]
    pub is_compact_summary: Option<Value>,
    /// The API message id an interrupt marker interrupted (2.1.332: equals the partial reply's
    /// `message.id`).
    #[serde(deserialize_with = "lenient::opt")]
    pub interrupted_message_id: Option<String>,
    /// Who wrote the prompt (2.1.332: `{"kind":"human"}` on a prompt a person typed).
    #[serde(deserialize_with = "lenient::opt")]
    pub origin: Option<Origin>,
    #[serde(deserialize_with = "lenient::opt")]
    pub message: Option<UserMessage>,
}

/// A user line's `origin`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct Origin {
    /// `human`, …
    #[serde(deserialize_with = "lenient::opt")]
    pub kind: Option<String>,
}

impl UserRecord {
    pub fn content(&self) -> Option<&UserContent> {
        self.message.as_ref()?.content.as_ref()
    }

    pub fn is_compact_summary(&self) -> bool {
        self.is_compact_summary.is_some()
    }

    /// The prompt a person (or cohost) submitted, when this line is one: string content that
    /// is not harness-made (`isMeta`), a compaction summary, a slash command or its output.
    pub fn submitted_prompt(&self) -> Option<&str> {
        match self.content()? {
            UserContent::Text(text)
                if self.is_meta != Some(true)
                    && !self.is_compact_summary()
                    && !text.starts_with("<command-name>")
                    && !text.starts_with("<local-command") =>
            {
                Some(text)
            }
            _ => None,
        }
    }
}

/// The folder under `<config>/projects/` that holds the transcripts of a session started in
/// `cwd` (its real path): every UTF-16 unit outside `[a-zA-Z0-9]` becomes `-`; a name over 200
/// characters is cut to 200 and `-<hash>` appended (the base-36 absolute value of Java's string
/// hash of `cwd`), as Claude Code 2.1.197 and 2.1.332 name it.
pub fn project_dir_name(cwd: &str) -> String {
    const MAX: usize = 200;
    let units: Vec<u16> = cwd.encode_utf16().collect();
    let name: String = units
        .iter()
        .map(|&unit| match char::from_u32(u32::from(unit)) {
            Some(c) if c.is_ascii_alphanumeric() => c,
            _ => '-',
        })
        .collect();
    if name.len() <= MAX {
        return name;
    }
    let hash = units.iter().fold(0i32, |h, &unit| {
        h.wrapping_mul(31).wrapping_add(i32::from(unit))
    });
    let mut value = i64::from(hash).unsigned_abs();
    let mut digits = Vec::new();
    loop {
        let digit = (value % 36) as u32;
        digits.push(char::from_digit(digit, 36).unwrap_or('0'));
        value /= 36;
        if value == 0 {
            break;
        }
    }
    let suffix: String = digits.into_iter().rev().collect();
    format!("{}-{suffix}", &name[..MAX])
}

/// A user line's `message`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct UserMessage {
    #[serde(deserialize_with = "lenient::opt")]
    pub content: Option<UserContent>,
}

/// A user message's `content`: a string (a prompt) or content blocks.
#[derive(Debug, Clone, PartialEq)]
pub enum UserContent {
    Text(String),
    Blocks(Vec<UserContentBlock>),
}

impl Lenient for UserContent {
    fn read<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Self>, D::Error> {
        struct ContentVisitor;
        impl<'de> de::Visitor<'de> for ContentVisitor {
            type Value = Option<UserContent>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("any value")
            }
            fn visit_str<E: de::Error>(self, text: &str) -> Result<Self::Value, E> {
                Ok(Some(UserContent::Text(text.to_owned())))
            }
            fn visit_string<E: de::Error>(self, text: String) -> Result<Self::Value, E> {
                Ok(Some(UserContent::Text(text)))
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
                let blocks: Vec<UserContentBlock> =
                    lenient::vec(de::value::SeqAccessDeserializer::new(seq))?;
                Ok(Some(UserContent::Blocks(blocks)))
            }
            fn visit_map<A: de::MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                let _: Option<Value> = Lenient::read(de::value::MapAccessDeserializer::new(map))?;
                Ok(None)
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(None)
            }
        }
        deserializer.deserialize_any(ContentVisitor)
    }
}

impl<'de> Deserialize<'de> for UserContent {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        UserContent::read(deserializer)?
            .ok_or_else(|| de::Error::custom("message content is a string or blocks"))
    }
}

/// Every field of every content block cohost reads, read in one pass; a block is then what its
/// `type` says.
#[derive(Default, Deserialize)]
#[serde(default)]
struct RawBlock {
    #[serde(rename = "type", deserialize_with = "lenient::opt")]
    kind: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    text: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    name: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    input: Option<Value>,
    #[serde(deserialize_with = "lenient::opt")]
    tool_use_id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    content: Option<Value>,
    #[serde(deserialize_with = "lenient::opt")]
    is_error: Option<bool>,
}

lenient_object!(RawBlock);

/// Reads an array element as a raw block: an element that is not an object is a block
/// without a type.
fn raw_block<'de, D: Deserializer<'de>>(deserializer: D) -> Result<RawBlock, D::Error> {
    Ok(RawBlock::read(deserializer)?.unwrap_or_default())
}

/// A block of a user message. Every element of the array is one (so positions are kept):
/// what is not a block cohost reads is `Other` with its `type` (empty when it has none).
#[derive(Debug, Clone, PartialEq)]
pub enum UserContentBlock {
    /// `{"type":"tool_result","tool_use_id","content","is_error"}`.
    ToolResult(ToolResultBlock),
    /// `{"type":"text","text"}`: an interrupt marker, or part of a command's expansion.
    Text(TextBlock),
    Other(String),
}

impl From<RawBlock> for UserContentBlock {
    fn from(raw: RawBlock) -> Self {
        match raw.kind.as_deref().unwrap_or_default() {
            "tool_result" => UserContentBlock::ToolResult(ToolResultBlock {
                tool_use_id: raw.tool_use_id,
                content: raw.content,
                is_error: raw.is_error,
            }),
            "text" => UserContentBlock::Text(TextBlock { text: raw.text }),
            _ => UserContentBlock::Other(raw.kind.unwrap_or_default()),
        }
    }
}

impl Lenient for UserContentBlock {
    fn read<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Self>, D::Error> {
        raw_block(deserializer).map(|raw| Some(raw.into()))
    }
}

impl<'de> Deserialize<'de> for UserContentBlock {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        raw_block(deserializer).map(Into::into)
    }
}

/// `{"type":"text","text"}`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct TextBlock {
    #[serde(deserialize_with = "lenient::opt")]
    pub text: Option<String>,
}

/// `{"type":"tool_result"}`: a tool's result as the model sees it.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct ToolResultBlock {
    #[serde(deserialize_with = "lenient::opt")]
    pub tool_use_id: Option<String>,
    /// A string, or blocks; kept as sent (`Some(Value::Null)` when `null`).
    #[serde(deserialize_with = "lenient::opt")]
    pub content: Option<Value>,
    #[serde(deserialize_with = "lenient::opt")]
    pub is_error: Option<bool>,
}

impl ToolResultBlock {
    /// The result as text: a string content as it is, any other as JSON text, none as empty.
    pub fn text(&self) -> String {
        match &self.content {
            Some(Value::String(text)) => text.clone(),
            Some(other) => other.to_string(),
            None => String::new(),
        }
    }
}

/// An `assistant` line: one content block of one API message (a message's blocks share its
/// `message.id`), or a synthetic line (an interrupt's partial text, an API error).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct AssistantRecord {
    #[serde(deserialize_with = "lenient::opt")]
    pub message: Option<AssistantMessage>,
    /// A synthetic line reporting an API error (`apiErrorStatus` is then its HTTP status).
    #[serde(deserialize_with = "lenient::opt")]
    pub is_api_error_message: Option<bool>,
    /// The HTTP status of an API error, kept as sent (cohost records its JSON text).
    #[serde(deserialize_with = "lenient::opt")]
    pub api_error_status: Option<Value>,
    /// 2.1.332: the partial text of a reply an interrupt cut off (its `message.model` is the
    /// real model; 2.1.197 wrote such lines as model `<synthetic>`).
    #[serde(deserialize_with = "lenient::opt")]
    pub is_aborted_mid_stream: Option<bool>,
}

/// An assistant line's `message` (an Anthropic API `Message`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct AssistantMessage {
    #[serde(deserialize_with = "lenient::opt")]
    pub id: Option<String>,
    /// `<synthetic>` for lines Claude Code made up (2.1.197 interrupts, API errors).
    #[serde(deserialize_with = "lenient::opt")]
    pub model: Option<String>,
    /// Every element of the array, in place (see [`AssistantContentBlock`]).
    #[serde(deserialize_with = "lenient::vec")]
    pub content: Vec<AssistantContentBlock>,
    /// `end_turn`, `tool_use`, `stop_sequence`; `null` while streaming or when aborted.
    #[serde(deserialize_with = "lenient::opt")]
    pub stop_reason: Option<String>,
    /// `Some` whenever present (a `null` or malformed one reads as all zeros).
    #[serde(deserialize_with = "lenient::present")]
    pub usage: Option<Usage>,
}

/// A block of an assistant message. Every element of the array is one (positions are part of
/// cohost's item ids): what is not a block cohost reads is `Other` with its `type` (`thinking`,
/// …; empty when it has none).
#[derive(Debug, Clone, PartialEq)]
pub enum AssistantContentBlock {
    Text(TextBlock),
    ToolUse(ToolUseBlock),
    Other(String),
}

impl From<RawBlock> for AssistantContentBlock {
    fn from(raw: RawBlock) -> Self {
        match raw.kind.as_deref().unwrap_or_default() {
            "text" => AssistantContentBlock::Text(TextBlock { text: raw.text }),
            "tool_use" => AssistantContentBlock::ToolUse(ToolUseBlock {
                id: raw.id,
                name: raw.name,
                input: raw.input,
            }),
            _ => AssistantContentBlock::Other(raw.kind.unwrap_or_default()),
        }
    }
}

impl Lenient for AssistantContentBlock {
    fn read<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Self>, D::Error> {
        raw_block(deserializer).map(|raw| Some(raw.into()))
    }
}

impl<'de> Deserialize<'de> for AssistantContentBlock {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        raw_block(deserializer).map(Into::into)
    }
}

/// `{"type":"tool_use","id","name","input"}`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct ToolUseBlock {
    #[serde(deserialize_with = "lenient::opt")]
    pub id: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub name: Option<String>,
    /// As sent (`Some(Value::Null)` when `null`).
    #[serde(deserialize_with = "lenient::opt")]
    pub input: Option<Value>,
}

/// An API message's `usage` (token counts; the cache counts are input tokens too).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct Usage {
    #[serde(deserialize_with = "lenient::opt")]
    pub input_tokens: Option<u64>,
    #[serde(deserialize_with = "lenient::opt")]
    pub cache_creation_input_tokens: Option<u64>,
    #[serde(deserialize_with = "lenient::opt")]
    pub cache_read_input_tokens: Option<u64>,
    #[serde(deserialize_with = "lenient::opt")]
    pub output_tokens: Option<u64>,
}

/// A `system` line. cohost reads `turn_duration` (a turn's normal or API-error end); other
/// subtypes (`stop_hook_summary`, `local_command`, `compact_boundary`) are passed over.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SystemRecord {
    #[serde(deserialize_with = "lenient::opt")]
    pub subtype: Option<String>,
    #[serde(deserialize_with = "lenient::opt")]
    pub duration_ms: Option<u64>,
}

lenient_object!(UserMessage, Origin, AssistantMessage, Usage, QueuedCommand);
