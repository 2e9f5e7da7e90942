//! What the agent asks a person: input requests (list, answer once), the session's collaboration
//! mode, and the images a prompt may carry. The answer's shape is checked here, once, against
//! the request as the log recorded it; the runtime sends it (through the `SessionHost` seam).

use base64::Engine as _;
use serde_json::json;

use super::{Service, ServiceError};
use crate::protocol::codes;
use crate::protocol::{
    AnswerValue, Field, IMAGE_MEDIA_TYPES, InputAnswer, InputKind, InputRequested, PromptImage,
    RequestEntry, request_bounds,
};

impl Service {
    /// Every input request of the session, pending and resolved, oldest first.
    pub fn requests(&self, id: &str) -> Result<Vec<RequestEntry>, ServiceError> {
        self.core
            .read(|s| {
                s.sessions.get(id).map(|record| {
                    let mut requests: Vec<_> = record.requests.values().collect();
                    requests.sort_by_key(|r| r.requested_at);
                    requests
                        .into_iter()
                        .map(|r| RequestEntry {
                            request: r.request.clone(),
                            requested_at: r.requested_at,
                            resolved: r.resolved.clone(),
                            resolved_at: r.resolved_at,
                            pending: r.resolved.is_none(),
                            session_id: None,
                        })
                        .collect()
                })
            })
            .ok_or_else(|| ServiceError::unknown_session(id))
    }

    /// Answers a pending request: the first answer wins; an answer to a request already
    /// resolved (or made moot) is `409 request_resolved` and changes nothing.
    pub async fn answer_request(
        &self,
        id: &str,
        request_id: &str,
        answer: InputAnswer,
    ) -> Result<(), ServiceError> {
        let record = self.core.read(|s| {
            s.sessions
                .get(id)
                .map(|record| record.requests.get(request_id).cloned())
        });
        let Some(record) = record else {
            return Err(ServiceError::unknown_session(id));
        };
        let Some(record) = record else {
            return Err(ServiceError::not_found(
                codes::REQUEST_NOT_FOUND,
                format!("no input request `{request_id}` in this session"),
            ));
        };
        if record.resolved.is_some() {
            return Err(ServiceError::conflict(
                codes::REQUEST_RESOLVED,
                format!("input request `{request_id}` was already resolved"),
            ));
        }
        answer.check(&record.request)?;
        super::sessions::check_by(answer.by.as_deref())?;
        let follow_up = self
            .host_of(id)?
            .answer_request(id, &record.request, answer)
            .await?;
        // The answer goes on as a prompt (tracked as a task, like any send).
        if let Some(prompt) = follow_up {
            self.send(id, &prompt, None).await?;
        }
        Ok(())
    }

    /// Sets the collaboration mode of the session's next turns.
    pub async fn set_mode(
        &self,
        id: &str,
        mode: &str,
    ) -> Result<crate::protocol::Capability, ServiceError> {
        let host = self.host_of(id)?;
        let modes = host.modes();
        if modes.is_empty() {
            return Ok(host.unsupported("setting the mode"));
        }
        if !modes.contains(&mode) {
            return Err(ServiceError::field(
                Field::Mode,
                format!("`{mode}` is not a mode of this session: one of {modes:?}"),
            ));
        }
        Ok(host.set_mode(id, mode).await?)
    }

    /// Switches the model (and thinking level) of the session's next turns.
    pub async fn set_model(
        &self,
        id: &str,
        model: &str,
        thinking_level: Option<&str>,
    ) -> Result<crate::protocol::Capability, ServiceError> {
        if model.trim().is_empty() {
            return Err(ServiceError::field(Field::Model, "must not be empty"));
        }
        Ok(self
            .host_of(id)?
            .set_model(id, model, thinking_level)
            .await?)
    }
}

impl Service {
    /// `/plan on|off` (the mode of the next turns) and `/answer [requestId] text`: the text
    /// answers the request named (default: the oldest pending one) — a question's first
    /// question (a label or, where allowed, free text), a plan (`approve [mode]`, or anything
    /// else as the feedback of a rejection), an elicitation or permissions (the decision).
    pub(super) async fn ask_command(
        &self,
        id: &str,
        name: &str,
        rest: &str,
    ) -> Result<crate::protocol::Capability, ServiceError> {
        if name == "/plan" {
            let mode = match rest {
                "on" => "plan",
                "off" => "default",
                _ => {
                    return Err(ServiceError::field(
                        Field::Text,
                        "use `/plan on` or `/plan off`",
                    ));
                }
            };
            return self.set_mode(id, mode).await;
        }
        let pending: Vec<InputRequested> = self.core.read(|s| {
            s.sessions
                .get(id)
                .map(|record| {
                    let mut pending: Vec<_> = record.pending_requests().collect();
                    pending.sort_by_key(|r| r.requested_at);
                    pending.into_iter().map(|r| r.request.clone()).collect()
                })
                .unwrap_or_default()
        });
        let (first, after) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
        let (request, text) = match pending.iter().find(|r| r.request_id == first) {
            Some(request) => (request.clone(), after.trim()),
            None => match pending.first() {
                Some(request) => (request.clone(), rest),
                None => {
                    return Err(ServiceError::conflict(
                        codes::NO_PENDING_REQUEST,
                        "nothing is waiting for an answer in this session",
                    ));
                }
            },
        };
        if text.is_empty() {
            return Err(ServiceError::field(
                Field::Text,
                "give the answer after `/answer`",
            ));
        }
        let mut answer = InputAnswer::default();
        match request.kind {
            InputKind::Question => {
                let Some(question) = request.questions.first() else {
                    return Err(ServiceError::invalid("the request asks no question"));
                };
                answer.answers = Some(
                    [(question.id.clone(), AnswerValue::One(text.to_string()))]
                        .into_iter()
                        .collect(),
                );
            }
            InputKind::Plan => {
                let (word, more) = text.split_once(char::is_whitespace).unwrap_or((text, ""));
                if word == "approve" {
                    answer.decision = Some("approve".into());
                    answer.mode = Some(more.trim().to_string()).filter(|m| !m.is_empty());
                } else {
                    answer.decision = Some("reject".into());
                    answer.feedback = Some(
                        text.strip_prefix("reject")
                            .unwrap_or(text)
                            .trim()
                            .to_string(),
                    )
                    .filter(|f| !f.is_empty());
                }
            }
            InputKind::Elicitation | InputKind::Permissions => {
                answer.decision = Some(text.to_string());
            }
        }
        let request_id = request.request_id.clone();
        self.answer_request(id, &request_id, answer).await?;
        Ok(crate::protocol::Capability::ok(
            json!({ "answered": true, "requestId": request_id }),
        ))
    }
}

/// Bounds and checks the images of a prompt: count, media type, size, base64.
pub(super) fn check_images(images: &[PromptImage]) -> Result<(), ServiceError> {
    if images.len() > request_bounds::IMAGES {
        return Err(ServiceError::field(
            Field::Images,
            format!("at most {} images per prompt", request_bounds::IMAGES),
        ));
    }
    for (n, image) in images.iter().enumerate() {
        if !IMAGE_MEDIA_TYPES.contains(&image.media_type.as_str()) {
            return Err(ServiceError::field(
                Field::Images,
                format!(
                    "image {n}: `mediaType` {:?} is not one of {IMAGE_MEDIA_TYPES:?}",
                    image.media_type
                ),
            ));
        }
        if image.data.len() > request_bounds::IMAGE_BASE64 {
            return Err(ServiceError::field(
                Field::Images,
                format!(
                    "image {n} is {} base64 characters, at most {} allowed",
                    image.data.len(),
                    request_bounds::IMAGE_BASE64
                ),
            ));
        }
        if base64::engine::general_purpose::STANDARD
            .decode(image.data.as_bytes())
            .is_err()
        {
            return Err(ServiceError::field(
                Field::Images,
                format!("image {n}: `data` is not standard base64"),
            ));
        }
    }
    Ok(())
}
