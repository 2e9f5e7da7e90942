//! Request fields as values, and the messages for people that name them.
//!
//! The HTTP API names a field in `camelCase` (`idempotencyKey`); MCP names the same value by its
//! tool argument (`idempotency_key`, and `prompt` for HTTP's `text`). An error raised below the
//! surfaces (the service, the runtimes, the task queue, a body's validation) therefore names a
//! field as a [`Field`], never as text, and its [`Message`] holds the field as a value: each
//! surface renders it with its own names (`Message::to_string` gives HTTP's).

use std::fmt;

/// A field of a request, as a value. [`Field::http_name`] is its name in the HTTP API; the MCP
/// surface maps each to its argument (an exhaustive match, so a new field gets its MCP name when
/// it is added).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Field {
    // Creating a hosted session.
    Runtime,
    Cwd,
    Model,
    ApprovalPolicy,
    Sandbox,
    PermissionMode,
    Budget,
    TmuxSession,
    Terminal,
    IdempotencyKey,
    Profile,
    // Prompts, tasks and commands.
    Text,
    Images,
    Offset,
    MaxBytes,
    // Approvals, requests, modes, goals, forks.
    Decision,
    By,
    Mode,
    Answers,
    Feedback,
    Content,
    RequestId,
    Objective,
    Status,
    TokenBudget,
    AfterTurnId,
    // Reading events.
    After,
    Limit,
    Wait,
    // The tracker's reports.
    Session,
    Source,
    Agent,
    ProjectDir,
    ThreadId,
    ThreadName,
    LastUserPrompt,
    PaneId,
    Label,
    Percent,
    /// `POST /log`'s `message`.
    LogMessage,
}

impl Field {
    /// Every field.
    pub const ALL: [Field; 40] = {
        use Field::*;
        [
            Runtime,
            Cwd,
            Model,
            ApprovalPolicy,
            Sandbox,
            PermissionMode,
            Budget,
            TmuxSession,
            Terminal,
            IdempotencyKey,
            Profile,
            Text,
            Images,
            Offset,
            MaxBytes,
            Decision,
            By,
            Mode,
            Answers,
            Feedback,
            Content,
            RequestId,
            Objective,
            Status,
            TokenBudget,
            AfterTurnId,
            After,
            Limit,
            Wait,
            Session,
            Source,
            Agent,
            ProjectDir,
            ThreadId,
            ThreadName,
            LastUserPrompt,
            PaneId,
            Label,
            Percent,
            LogMessage,
        ]
    };

    /// The field's name in the HTTP API.
    pub const fn http_name(self) -> &'static str {
        match self {
            Field::Runtime => "runtime",
            Field::Cwd => "cwd",
            Field::Model => "model",
            Field::ApprovalPolicy => "approvalPolicy",
            Field::Sandbox => "sandbox",
            Field::PermissionMode => "permissionMode",
            Field::Budget => "budget",
            Field::TmuxSession => "tmuxSession",
            Field::Terminal => "terminal",
            Field::IdempotencyKey => "idempotencyKey",
            Field::Profile => "profile",
            Field::Text => "text",
            Field::Images => "images",
            Field::Offset => "offset",
            Field::MaxBytes => "maxBytes",
            Field::Decision => "decision",
            Field::By => "by",
            Field::Mode => "mode",
            Field::Answers => "answers",
            Field::Feedback => "feedback",
            Field::Content => "content",
            Field::RequestId => "requestId",
            Field::Objective => "objective",
            Field::Status => "status",
            Field::TokenBudget => "tokenBudget",
            Field::AfterTurnId => "afterTurnId",
            Field::After => "after",
            Field::Limit => "limit",
            Field::Wait => "wait",
            Field::Session => "session",
            Field::Source => "source",
            Field::Agent => "agent",
            Field::ProjectDir => "projectDir",
            Field::ThreadId => "threadId",
            Field::ThreadName => "threadName",
            Field::LastUserPrompt => "lastUserPrompt",
            Field::PaneId => "paneId",
            Field::Label => "label",
            Field::Percent => "percent",
            Field::LogMessage => "message",
        }
    }
}

/// One piece of a [`Message`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    Text(String),
    /// A field's name in backticks (`` `idempotencyKey` ``).
    Field(Field),
    /// A field's name as a plain word, for messages written that way.
    Bare(Field),
}

/// A field named as a plain word in a [`message!`](crate::message).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bare(pub Field);

impl From<&str> for Piece {
    fn from(text: &str) -> Self {
        Piece::Text(text.to_string())
    }
}

impl From<String> for Piece {
    fn from(text: String) -> Self {
        Piece::Text(text)
    }
}

impl From<Field> for Piece {
    fn from(field: Field) -> Self {
        Piece::Field(field)
    }
}

impl From<Bare> for Piece {
    fn from(bare: Bare) -> Self {
        Piece::Bare(bare.0)
    }
}

/// A message for people: text, and the request fields it names as values. `Display` writes
/// the HTTP API's names; [`Message::render`] any surface's.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Message {
    pieces: Vec<Piece>,
}

impl Message {
    pub fn from_pieces(pieces: impl IntoIterator<Item = Piece>) -> Message {
        Message {
            pieces: pieces.into_iter().collect(),
        }
    }

    /// The text with each field named by `name` (in backticks where the message quotes it).
    pub fn render(&self, name: impl Fn(Field) -> &'static str) -> String {
        let mut out = String::new();
        for piece in &self.pieces {
            match piece {
                Piece::Text(text) => out.push_str(text),
                Piece::Field(field) => {
                    out.push('`');
                    out.push_str(name(*field));
                    out.push('`');
                }
                Piece::Bare(field) => out.push_str(name(*field)),
            }
        }
        out
    }
}

impl fmt::Display for Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render(Field::http_name))
    }
}

impl From<String> for Message {
    fn from(text: String) -> Self {
        Message {
            pieces: vec![Piece::Text(text)],
        }
    }
}

impl From<&str> for Message {
    fn from(text: &str) -> Self {
        Message::from(text.to_string())
    }
}

/// A [`Message`] from pieces: text (`&str`, `String`), a [`Field`] (named in backticks) or a
/// [`Bare`] field (named as a plain word):
/// `message![Field::TmuxSession, " needs `terminal: true` for codex sessions"]`.
#[macro_export]
macro_rules! message {
    ($($piece:expr),+ $(,)?) => {
        $crate::Message::from_pieces([$($crate::Piece::from($piece)),+])
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_field_is_listed_once_with_its_own_name() {
        let names: std::collections::BTreeSet<&str> =
            Field::ALL.iter().map(|field| field.http_name()).collect();
        assert_eq!(names.len(), Field::ALL.len());
        // An exhaustive match: a new variant fails to compile here until it is in `ALL`.
        for field in Field::ALL {
            match field {
                Field::Runtime
                | Field::Cwd
                | Field::Model
                | Field::ApprovalPolicy
                | Field::Sandbox
                | Field::PermissionMode
                | Field::Budget
                | Field::TmuxSession
                | Field::Terminal
                | Field::IdempotencyKey
                | Field::Profile
                | Field::Text
                | Field::Images
                | Field::Offset
                | Field::MaxBytes
                | Field::Decision
                | Field::By
                | Field::Mode
                | Field::Answers
                | Field::Feedback
                | Field::Content
                | Field::RequestId
                | Field::Objective
                | Field::Status
                | Field::TokenBudget
                | Field::AfterTurnId
                | Field::After
                | Field::Limit
                | Field::Wait
                | Field::Session
                | Field::Source
                | Field::Agent
                | Field::ProjectDir
                | Field::ThreadId
                | Field::ThreadName
                | Field::LastUserPrompt
                | Field::PaneId
                | Field::Label
                | Field::Percent
                | Field::LogMessage => {}
            }
        }
    }

    #[test]
    fn each_surface_names_the_fields_its_own_way() {
        let message = message![
            "one of ",
            Bare(Field::TmuxSession),
            " or ",
            Field::ProjectDir,
            format!(" is required ({})", 2)
        ];
        assert_eq!(
            message.to_string(),
            "one of tmuxSession or `projectDir` is required (2)"
        );
        let snake = |field: Field| match field {
            Field::TmuxSession => "tmux_session",
            Field::ProjectDir => "project_dir",
            _ => "other",
        };
        assert_eq!(
            message.render(snake),
            "one of tmux_session or `project_dir` is required (2)"
        );
    }
}
