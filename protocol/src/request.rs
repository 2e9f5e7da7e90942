//! "The agent is waiting for a person": input requests (a question, a plan to approve, an MCP
//! elicitation, a permissions grant), their answers, the session's collaboration mode, attention
//! notifications and prompt images.
//!
//! These are the shapes of the events `input.requested`, `input.resolved`, `session.mode` and
//! `notification`, and of the bodies of `POST /api/sessions/{id}/requests/{requestId}` and
//! `PUT /api/sessions/{id}/mode`. An answer to a secret question never appears in any of them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Bounds of what a person may send back.
pub mod request_bounds {
    /// Questions per answer, and answers per question.
    pub const ANSWERS: usize = 16;
    /// One answer's text.
    pub const ANSWER: usize = 16 * 1024;
    /// Plan feedback.
    pub const FEEDBACK: usize = 16 * 1024;
    /// An elicitation's content, serialized.
    pub const CONTENT: usize = 32 * 1024;
    /// Images per prompt.
    pub const IMAGES: usize = 4;
    /// One image, base64 characters (768 KiB decoded).
    pub const IMAGE_BASE64: usize = 1024 * 1024;
}

/// What kind of person-input the agent waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum InputKind {
    /// One or more questions, each with options (codex `request_user_input`, Claude
    /// `AskUserQuestion`). Answered with `answers`.
    Question,
    /// A plan to approve or reject (codex plan mode's `<proposed_plan>`, Claude `ExitPlanMode`).
    /// Answered with `decision` `approve` (and an optional `mode` to continue in) or `reject`
    /// (with `feedback`).
    Plan,
    /// An MCP server asks for structured input (codex `mcpServer/elicitation/request`).
    /// Answered with `decision` `accept` (and `content`), `decline` or `cancel`.
    Elicitation,
    /// The agent asks for more permissions (codex `item/permissions/requestApproval`).
    /// Answered with `decision` `accept`, `acceptForSession` or `decline`.
    Permissions,
}

impl InputKind {
    pub fn as_str(self) -> &'static str {
        match self {
            InputKind::Question => "question",
            InputKind::Plan => "plan",
            InputKind::Elicitation => "elicitation",
            InputKind::Permissions => "permissions",
        }
    }
}

/// One option of a question.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct QuestionOption {
    pub label: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// One question of a `question` request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Question {
    /// The key its answer goes under.
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header: Option<String>,
    pub question: String,
    #[serde(default)]
    pub options: Vec<QuestionOption>,
    /// A free-form answer (not one of the options) is accepted.
    #[serde(default)]
    pub is_other: bool,
    /// The answer is a secret: passed to the agent, never stored or shown.
    #[serde(default)]
    pub is_secret: bool,
    /// More than one option may be chosen.
    #[serde(default)]
    pub multi_select: bool,
}

/// `input.requested`: the agent waits for a person.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InputRequested {
    /// Unique within the daemon and stable (derived from the turn and the runtime's call id).
    pub request_id: String,
    pub kind: InputKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item_id: Option<String>,
    /// `question`: what is asked.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub questions: Vec<Question>,
    /// `plan`: the plan text (Markdown).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<String>,
    /// `elicitation`, `permissions`: what the asker says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// `elicitation`: the MCP server asking.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// `elicitation`: the JSON Schema of the form (`mode: form`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<serde_json::Value>,
    /// `elicitation`: the page to open (`mode: url`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// `permissions`: the permissions asked for (codex's `RequestPermissionProfile`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permissions: Option<serde_json::Value>,
    /// The decisions this request takes. A `question` is answered with `answers`; the
    /// decisions it lists (opencode: `decline`, which dismisses it) take no answers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub decisions: Vec<String>,
}

impl InputRequested {
    /// The ids of the questions whose answers are secret.
    pub fn secret_questions(&self) -> impl Iterator<Item = &str> {
        self.questions
            .iter()
            .filter(|q| q.is_secret)
            .map(|q| q.id.as_str())
    }
}

/// `input.resolved`: answered through cohost, or made moot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InputResolved {
    pub request_id: String,
    /// `api` (or the name the answering surface gave), `runtime` or `turn`.
    pub by: super::ResolvedBy,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<String>,
    /// `question`: the answers by question id; a secret question's answer is left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answers: Option<BTreeMap<String, Vec<String>>>,
    /// The question ids whose (secret) answers were sent but not recorded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub withheld: Vec<String>,
    /// `plan` rejected: what the person said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feedback: Option<String>,
    /// `plan` approved: the mode the agent continues in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// `elicitation` accepted: the content sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<serde_json::Value>,
}

impl InputResolved {
    pub fn moot(request_id: &str, by: super::ResolvedBy) -> Self {
        InputResolved {
            request_id: request_id.to_string(),
            by,
            decision: None,
            answers: None,
            withheld: Vec::new(),
            feedback: None,
            mode: None,
            content: None,
        }
    }
}

/// One answer: a string, or several (a multi-select question).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum AnswerValue {
    One(String),
    Many(Vec<String>),
}

impl AnswerValue {
    pub fn into_vec(self) -> Vec<String> {
        match self {
            AnswerValue::One(one) => vec![one],
            AnswerValue::Many(many) => many,
        }
    }
}

/// The body of `POST /api/sessions/{id}/requests/{requestId}` (and the MCP tool's arguments).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InputAnswer {
    /// `question`: an answer per question id (a string or a list of strings).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answers: Option<BTreeMap<String, AnswerValue>>,
    /// `plan`: `approve` or `reject`; `elicitation`: `accept`, `decline` or `cancel`;
    /// `permissions`: `accept`, `acceptForSession` or `decline`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<String>,
    /// `plan` rejected: what the agent should change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feedback: Option<String>,
    /// `plan` approved: the mode to continue in (default: the runtime's default mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// `elicitation` accepted: the form's content.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<serde_json::Value>,
    /// Who answers, as `input.resolved` will say (`web`, a bot's name, …); default `api`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
}

/// `session.mode`: the collaboration mode the session's next turn runs in (codex `plan` or
/// `default`; Claude's permission modes, `plan` included).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionMode {
    pub mode: String,
}

/// `session.model`: the model the session's next turns run on, switched after it was created
/// (`PUT …/model` on an opencode session); the session view's `model` shows it from then on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionModel {
    /// `provider/model`.
    pub model: String,
}

/// `session.attention`: the agent said it waits for a person (Claude's `Notification` hook:
/// `permission_prompt` when a dialog has gone unanswered for a few seconds, `idle_prompt` when
/// the prompt box has sat idle after a turn). The core derives an `input-needed` notification
/// from it unless an approval or input request of the session is already pending (that wait
/// was notified when it was requested).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionAttention {
    /// Unique per occurrence (for a hook line, from its receive time), so a replayed line is
    /// stored once.
    pub id: String,
    /// Claude's `notification_type` (`permission_prompt`, `idle_prompt`, …), as sent.
    #[serde(rename = "type")]
    pub kind: String,
    /// What the agent says (Claude's `message`, e.g. "Claude is waiting for your input").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_id: Option<String>,
}

impl SessionAttention {
    /// The kinds that mean the agent waits for the person (others, like `auth_success`, are
    /// stored but notify nothing).
    pub fn is_waiting(&self) -> bool {
        matches!(
            self.kind.as_str(),
            "permission_prompt" | "idle_prompt" | "elicitation_dialog"
        )
    }
}

/// The kinds of attention notification.
pub mod notification_kind {
    /// A turn ended (completed, interrupted or failed) and the agent waits for a prompt.
    pub const TURN_ENDED: &str = "turn-ended";
    /// An approval or an input request is pending.
    pub const INPUT_NEEDED: &str = "input-needed";
    /// The agent reported an error.
    pub const ERROR: &str = "error";
}

/// `notification`: something a person should look at, derived once from the event that caused
/// it (see `core::notify`), for hosted sessions and watched agents alike.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Notification {
    /// `turn-ended`, `input-needed` or `error` (see [`notification_kind`]).
    pub kind: String,
    /// Stable: the same occurrence always has the same id (`turn-ended:<turnId>`, …).
    pub id: String,
    /// The seq of the event it was derived from.
    pub cause: u64,
    /// One line for a person.
    pub title: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// `hosted` or `watched`.
    pub source: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
}

/// An image attached to a prompt, as a browser sends it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PromptImage {
    /// `image/png`, `image/jpeg`, `image/gif` or `image/webp`.
    pub media_type: String,
    /// The bytes, base64 (standard alphabet, padded); at most
    /// [`request_bounds::IMAGE_BASE64`] characters.
    pub data: String,
}

pub const IMAGE_MEDIA_TYPES: [&str; 4] = ["image/png", "image/jpeg", "image/gif", "image/webp"];

impl PromptImage {
    /// `data:<media type>;base64,<data>`.
    pub fn data_url(&self) -> String {
        format!("data:{};base64,{}", self.media_type, self.data)
    }
}

fn invalid(field: super::Field, message: impl Into<String>) -> super::FieldError {
    super::FieldError::new(field, message.into())
}

impl InputKind {
    /// The decisions a request of this kind takes (none: `question` takes `answers`).
    pub fn decisions(self) -> &'static [&'static str] {
        match self {
            InputKind::Question => &[],
            InputKind::Plan => &["approve", "reject"],
            InputKind::Elicitation => &["accept", "decline", "cancel"],
            InputKind::Permissions => &["accept", "acceptForSession", "decline"],
        }
    }
}

impl InputAnswer {
    /// Checks that the answer fits `request`, naming the field that does not.
    pub fn check(&self, request: &InputRequested) -> Result<(), super::FieldError> {
        let kind = request.kind;
        if kind == InputKind::Question {
            if let Some(decision) = &self.decision {
                // A question that can be dismissed (opencode's) lists `decline`.
                if !request.decisions.contains(decision) {
                    return Err(invalid(
                        super::Field::Decision,
                        if request.decisions.is_empty() {
                            "a question is answered with `answers`, not a decision".to_string()
                        } else {
                            format!(
                                "`{decision}` is not a decision for this question: give `answers`, or one of {:?}",
                                request.decisions
                            )
                        },
                    ));
                }
                if self.answers.is_some()
                    || self.feedback.is_some()
                    || self.mode.is_some()
                    || self.content.is_some()
                {
                    return Err(invalid(
                        super::Field::Decision,
                        format!("a question answered with `{decision}` takes nothing else"),
                    ));
                }
                return Ok(());
            }
            let Some(answers) = &self.answers else {
                return Err(invalid(
                    super::Field::Answers,
                    "give `answers`: an answer per question id",
                ));
            };
            if answers.is_empty() || answers.len() > request_bounds::ANSWERS {
                return Err(invalid(
                    super::Field::Answers,
                    format!(
                        "give between 1 and {} answers, one per question id",
                        request_bounds::ANSWERS
                    ),
                ));
            }
            for (id, value) in answers {
                let Some(question) = request.questions.iter().find(|q| &q.id == id) else {
                    let known: Vec<&str> =
                        request.questions.iter().map(|q| q.id.as_str()).collect();
                    return Err(invalid(
                        super::Field::Answers,
                        format!("no question `{id}` in this request (it asks {known:?})"),
                    ));
                };
                let values = value.clone().into_vec();
                if values.is_empty() || values.len() > request_bounds::ANSWERS {
                    return Err(invalid(
                        super::Field::Answers,
                        format!("question `{id}` needs at least one answer"),
                    ));
                }
                if values.len() > 1 && !question.multi_select {
                    return Err(invalid(
                        super::Field::Answers,
                        format!("question `{id}` takes one answer"),
                    ));
                }
                for text in &values {
                    if text.len() > request_bounds::ANSWER {
                        return Err(invalid(
                            super::Field::Answers,
                            format!(
                                "an answer to `{id}` is {} bytes, at most {} allowed",
                                text.len(),
                                request_bounds::ANSWER
                            ),
                        ));
                    }
                    let is_option = question.options.iter().any(|o| &o.label == text);
                    if !is_option && !question.is_other && !question.options.is_empty() {
                        let labels: Vec<&str> =
                            question.options.iter().map(|o| o.label.as_str()).collect();
                        return Err(invalid(
                            super::Field::Answers,
                            format!("question `{id}` takes one of {labels:?}, not {text:?}"),
                        ));
                    }
                }
            }
            if self.feedback.is_some() || self.mode.is_some() || self.content.is_some() {
                return Err(invalid(
                    super::Field::Answers,
                    "a question takes only `answers`",
                ));
            }
            return Ok(());
        }
        if self.answers.is_some() {
            return Err(invalid(
                super::Field::Answers,
                format!(
                    "a {} request takes a `decision`, not answers",
                    kind.as_str()
                ),
            ));
        }
        let Some(decision) = self.decision.as_deref() else {
            return Err(invalid(
                super::Field::Decision,
                format!("give a `decision`: one of {:?}", kind.decisions()),
            ));
        };
        if !kind.decisions().contains(&decision) {
            return Err(invalid(
                super::Field::Decision,
                format!(
                    "`{decision}` is not a decision for a {} request: one of {:?}",
                    kind.as_str(),
                    kind.decisions()
                ),
            ));
        }
        if let Some(feedback) = &self.feedback {
            if kind != InputKind::Plan || decision != "reject" {
                return Err(invalid(
                    super::Field::Feedback,
                    "only a rejected plan takes `feedback`",
                ));
            }
            if feedback.len() > request_bounds::FEEDBACK {
                return Err(invalid(
                    super::Field::Feedback,
                    format!("feedback is at most {} bytes", request_bounds::FEEDBACK),
                ));
            }
        }
        if self.mode.is_some() && (kind != InputKind::Plan || decision != "approve") {
            return Err(invalid(
                super::Field::Mode,
                "only an approved plan takes `mode`",
            ));
        }
        if let Some(content) = &self.content {
            if kind != InputKind::Elicitation || decision != "accept" {
                return Err(invalid(
                    super::Field::Content,
                    "only an accepted elicitation takes `content`",
                ));
            }
            if content.to_string().len() > request_bounds::CONTENT {
                return Err(invalid(
                    super::Field::Content,
                    format!("content is at most {} bytes", request_bounds::CONTENT),
                ));
            }
        }
        Ok(())
    }

    /// The answers by question id, secret ones included (what the agent gets).
    pub fn answer_lists(&self) -> BTreeMap<String, Vec<String>> {
        self.answers
            .clone()
            .unwrap_or_default()
            .into_iter()
            .map(|(id, value)| (id, value.into_vec()))
            .collect()
    }

    /// What is recorded of this answer to `request`: secret answers are left out.
    pub fn record(&self, request: &InputRequested, by: super::ResolvedBy) -> InputResolved {
        let secret: Vec<&str> = request.secret_questions().collect();
        let mut withheld = Vec::new();
        let answers = self.answers.as_ref().map(|_| {
            self.answer_lists()
                .into_iter()
                .filter(|(id, _)| {
                    let hidden = secret.contains(&id.as_str());
                    if hidden {
                        withheld.push(id.clone());
                    }
                    !hidden
                })
                .collect()
        });
        InputResolved {
            request_id: request.request_id.clone(),
            by,
            decision: self.decision.clone(),
            answers,
            withheld,
            feedback: self.feedback.clone(),
            mode: self.mode.clone(),
            content: self.content.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn question(secret: bool) -> InputRequested {
        InputRequested {
            request_id: "in:t:c:question".into(),
            kind: InputKind::Question,
            turn_id: Some("t".into()),
            item_id: None,
            questions: vec![Question {
                id: "color".into(),
                header: None,
                question: "Which color?".into(),
                options: vec![
                    QuestionOption {
                        label: "Red".into(),
                        description: None,
                    },
                    QuestionOption {
                        label: "Blue".into(),
                        description: None,
                    },
                ],
                is_other: false,
                is_secret: secret,
                multi_select: false,
            }],
            plan: None,
            message: None,
            server: None,
            schema: None,
            url: None,
            permissions: None,
            decisions: Vec::new(),
        }
    }

    fn answer(value: serde_json::Value) -> InputAnswer {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn answers_are_checked_against_the_request_naming_the_field() {
        let q = question(false);
        assert!(
            answer(json!({"answers": {"color": "Blue"}}))
                .check(&q)
                .is_ok()
        );
        assert!(
            answer(json!({"answers": {"color": ["Blue"]}}))
                .check(&q)
                .is_ok()
        );
        for (body, field) in [
            (json!({}), "answers"),
            (json!({"answers": {"shape": "Round"}}), "answers"),
            (json!({"answers": {"color": "Green"}}), "answers"),
            (json!({"answers": {"color": ["Red", "Blue"]}}), "answers"),
            (
                json!({"answers": {"color": "Blue"}, "decision": "accept"}),
                "decision",
            ),
        ] {
            assert_eq!(
                answer(body.clone())
                    .check(&q)
                    .unwrap_err()
                    .field
                    .http_name(),
                field,
                "{body}"
            );
        }
        let mut plan = question(false);
        plan.kind = InputKind::Plan;
        assert!(
            answer(json!({"decision": "approve", "mode": "default"}))
                .check(&plan)
                .is_ok()
        );
        assert!(
            answer(json!({"decision": "reject", "feedback": "no"}))
                .check(&plan)
                .is_ok()
        );
        for (body, field) in [
            (json!({"decision": "accept"}), "decision"),
            (json!({"decision": "approve", "feedback": "x"}), "feedback"),
            (json!({"decision": "reject", "mode": "plan"}), "mode"),
            (json!({"answers": {"color": "Blue"}}), "answers"),
        ] {
            assert_eq!(
                answer(body.clone())
                    .check(&plan)
                    .unwrap_err()
                    .field
                    .http_name(),
                field,
                "{body}"
            );
        }
        let mut elicitation = question(false);
        elicitation.kind = InputKind::Elicitation;
        assert!(
            answer(json!({"decision": "accept", "content": {"a": 1}}))
                .check(&elicitation)
                .is_ok()
        );
        assert_eq!(
            answer(json!({"decision": "decline", "content": {}}))
                .check(&elicitation)
                .unwrap_err()
                .field,
            crate::Field::Content
        );
        assert!(serde_json::from_value::<InputAnswer>(json!({"answer": "x"})).is_err());
    }

    #[test]
    fn a_question_that_lists_decline_can_be_declined_and_takes_nothing_else() {
        let mut q = question(false);
        assert_eq!(
            answer(json!({"decision": "decline"}))
                .check(&q)
                .unwrap_err()
                .field,
            crate::Field::Decision
        );
        q.decisions = vec!["decline".into()];
        assert!(answer(json!({"decision": "decline"})).check(&q).is_ok());
        assert!(
            answer(json!({"answers": {"color": "Red"}}))
                .check(&q)
                .is_ok()
        );
        for body in [
            json!({"decision": "accept"}),
            json!({"decision": "decline", "answers": {"color": "Red"}}),
            json!({"decision": "decline", "feedback": "no"}),
        ] {
            assert_eq!(
                answer(body.clone()).check(&q).unwrap_err().field,
                crate::Field::Decision,
                "{body}"
            );
        }
    }

    #[test]
    fn a_secret_answer_is_sent_but_not_recorded() {
        let q = question(true);
        let given = answer(json!({"answers": {"color": "Blue"}}));
        assert_eq!(given.answer_lists()["color"], vec!["Blue".to_string()]);
        let recorded = given.record(&q, crate::ResolvedBy::Api);
        assert_eq!(recorded.answers, Some(BTreeMap::new()));
        assert_eq!(recorded.withheld, vec!["color".to_string()]);
        assert!(!serde_json::to_string(&recorded).unwrap().contains("Blue"));
    }
}
