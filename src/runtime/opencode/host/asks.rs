//! What an OpenCode session asks a person, and the model a person switches it to, for
//! `OpencodeHost`.
//!
//! **Questions.** The `question` tool's requests (`question.asked`, id `que_…`) are stored as
//! input requests and held here, by id, until the first of: an answer through cohost
//! (`POST /question/:id/reply`, one list of labels per question, in OpenCode's order), a
//! `decline` (`POST /question/:id/reject`), an answer or dismissal in another client
//! (`question.replied` / `question.rejected`), an interrupt (cohost rejects every question the
//! session has pending: OpenCode would otherwise keep it), or the server going away. Taking it
//! out of the map decides who resolves it, so a second answer is refused (`409`) and never
//! reaches OpenCode; answers and interrupts take the session's `decide` lock, so they never
//! cross.
//!
//! **Model.** OpenCode's model is sticky per session once a prompt names one, and a prompt
//! naming an unknown model fails and poisons the prompts after it; so a switch is checked
//! against the server's providers (`GET /config/providers`) first, stored as `session.model`
//! (the session view shows it, a daemon restart keeps it), and named by every later prompt.

use std::collections::BTreeMap;

use serde_json::json;

use super::super::wire::{ConfigProviders, ModelRef, QuestionReplyBody, QuestionRequest};
use super::{Binding, GATED, Inner, Live, OpencodeHost, path_segment};
use crate::protocol::{
    EventKind, Field, InputAnswer, InputKind, InputRequested, InputResolved, ResolvedBy,
    SessionModel, message,
};
use crate::runtime::common::{hosted, lock};
use crate::runtime::{Capability, HostError};

/// How a question cohost held ended without an answer through cohost.
enum Ended {
    /// Another client answered it: per question, in OpenCode's order.
    Answered(Vec<Vec<String>>),
    /// Another client dismissed it.
    Dismissed,
    /// cohost withdrew it (an interrupt), or its server went away.
    Withdrawn,
}

impl Inner {
    /// The model the session's prompts name: the one switched to, else the one it was created
    /// with (`None`: OpenCode's configured default).
    pub(super) fn current_model(&self, session_id: &str) -> Option<ModelRef> {
        self.core
            .read(|state| state.sessions.get(session_id).map(|s| s.current_model()))
            .flatten()
            .and_then(|model| ModelRef::parse(&model))
    }

    /// Stores a question and keeps it pending; one asked while an interrupt is under way is
    /// rejected at once (and resolved by the runtime), so it never waits for an answer.
    pub(super) async fn hold_question(
        &self,
        live: &Live,
        binding: &Binding,
        request: InputRequested,
    ) {
        let request_id = request.request_id.clone();
        let interrupting = lock(&live.forwarder).interrupt_requested;
        if !interrupting {
            lock(&self.questions).insert(request_id.clone(), live.session_id.clone());
        }
        self.store(
            &live.session_id,
            EventKind::InputRequested(Box::new(request)),
        )
        .await;
        if interrupting {
            self.reject_question(binding, &request_id).await;
            self.question_ended(&live.session_id, &request_id, Ended::Withdrawn)
                .await;
        }
    }

    /// OpenCode says a question was answered (`answers`, in its order) or dismissed (`None`) by
    /// another client: if it was one of ours still pending, it is resolved by the runtime.
    pub(super) async fn question_settled(
        &self,
        session_id: &str,
        request_id: &str,
        answers: Option<Vec<Vec<String>>>,
    ) {
        let ours = lock(&self.questions).remove(request_id).is_some();
        if ours {
            let ended = match answers {
                Some(answers) => Ended::Answered(answers),
                None => Ended::Dismissed,
            };
            self.question_ended(session_id, request_id, ended).await;
        }
    }

    /// Stores `input.resolved` by the runtime for a question no one answered through cohost:
    /// with the answers another client gave (by question id), `decline` when it was dismissed,
    /// nothing else when cohost withdrew it.
    async fn question_ended(&self, session_id: &str, request_id: &str, ended: Ended) {
        let mut resolved = InputResolved::moot(request_id, ResolvedBy::Runtime);
        if let Ended::Dismissed = ended {
            resolved.decision = Some("decline".into());
        }
        if let Ended::Answered(answers) = ended {
            let ids: Vec<String> = self
                .core
                .read(|state| {
                    state
                        .sessions
                        .get(session_id)
                        .and_then(|s| s.requests.get(request_id))
                        .map(|r| r.request.questions.iter().map(|q| q.id.clone()).collect())
                })
                .unwrap_or_default();
            let by_id: BTreeMap<String, Vec<String>> = ids.into_iter().zip(answers).collect();
            resolved.answers = Some(by_id);
        }
        self.store(session_id, EventKind::InputResolved(resolved))
            .await;
    }

    /// Dismisses a question in OpenCode (its tool fails; the turn ends). One it no longer
    /// holds (`404`) is fine.
    pub(super) async fn reject_question(&self, binding: &Binding, request_id: &str) {
        let Ok(id) = path_segment(request_id) else {
            return;
        };
        if let Err(error) = binding
            .client()
            .post(&format!("/question/{id}/reject"), &json!({}))
            .await
            && !error.is_not_found()
        {
            tracing::warn!(%error, request_id, "could not reject an opencode question");
        }
    }

    /// Rejects every question of the session cohost holds, resolving each by the runtime.
    pub(super) async fn settle_questions(&self, live: &Live, binding: &Binding) {
        let ids = hosted::take_all_pending(&self.questions, &live.session_id);
        for id in ids {
            self.reject_question(binding, &id).await;
            self.question_ended(&live.session_id, &id, Ended::Withdrawn)
                .await;
        }
    }

    /// Rejects whatever question of the session OpenCode still lists (one asked in the instant
    /// before an abort landed).
    pub(super) async fn sweep_questions(&self, live: &Live, binding: &Binding) {
        let listed: Vec<QuestionRequest> = match binding.client().get("/question").await {
            Ok(listed) => listed,
            Err(error) => {
                tracing::warn!(%error, "could not list opencode's pending questions");
                return;
            }
        };
        for request in listed
            .iter()
            .filter(|r| r.session_id == binding.opencode_session)
        {
            let ours = lock(&self.questions).remove(&request.id).is_some();
            self.reject_question(binding, &request.id).await;
            if ours {
                self.question_ended(&live.session_id, &request.id, Ended::Withdrawn)
                    .await;
            }
        }
    }

    /// The server went away with the session's questions: none can be answered any more.
    pub(super) async fn orphan_questions(&self, session_id: &str) {
        let ids = hosted::take_all_pending(&self.questions, session_id);
        for id in ids {
            self.question_ended(session_id, &id, Ended::Withdrawn).await;
        }
    }
}

impl OpencodeHost {
    /// Answers (or, with `decline`, dismisses) a pending question (see
    /// `SessionHost::answer_request`).
    pub(super) async fn answer_question(
        &self,
        session_id: &str,
        request: &InputRequested,
        answer: InputAnswer,
    ) -> Result<Option<String>, HostError> {
        if request.kind != InputKind::Question {
            return Err(HostError::Unsupported(format!(
                "opencode sessions do not ask {} requests",
                request.kind.as_str()
            )));
        }
        let live = self.inner.live_session(session_id)?;
        let _decide = live.decide.lock().await;
        let request_id = request.request_id.clone();
        if !hosted::take_pending(&self.inner.questions, &request_id, session_id) {
            return Err(HostError::RequestResolved(request_id));
        }
        let put_back = || {
            lock(&self.inner.questions).insert(request_id.clone(), session_id.to_string());
        };
        let Some(binding) = live.binding.borrow().clone() else {
            put_back();
            return Err(HostError::NotReady(session_id.to_string()));
        };
        let id = path_segment(&request_id)?;
        let sent = if answer.decision.as_deref() == Some("decline") {
            binding
                .client()
                .post(&format!("/question/{id}/reject"), &json!({}))
                .await
        } else {
            let mut by_id = answer.answer_lists();
            let answers = request
                .questions
                .iter()
                .map(|q| by_id.remove(&q.id).unwrap_or_default())
                .collect();
            binding
                .client()
                .post(
                    &format!("/question/{id}/reply"),
                    &QuestionReplyBody { answers },
                )
                .await
        };
        match sent {
            Ok(()) => {}
            // OpenCode no longer waits on it (answered in the attached TUI, or withdrawn).
            Err(error) if error.is_not_found() => {
                return Err(HostError::RequestResolved(request_id));
            }
            Err(error) => {
                put_back();
                return Err(error.into());
            }
        }
        let by = answer
            .by
            .as_deref()
            .map_or(ResolvedBy::Api, ResolvedBy::from);
        let resolved = EventKind::InputResolved(answer.record(request, by));
        hosted::append_once(&self.inner.core, session_id, resolved).await?;
        Ok(None)
    }

    /// Switches the model the session's next prompts name (see `SessionHost::set_model`).
    pub(super) async fn switch_model(
        &self,
        session_id: &str,
        model: &str,
        thinking_level: Option<&str>,
    ) -> Result<Capability, HostError> {
        if thinking_level.is_some() {
            return Err(HostError::Invalid(
                "thinkingLevel does not apply to opencode sessions (a model's variants are its provider's settings in opencode.json)".into(),
            ));
        }
        let Some(wanted) = ModelRef::parse(model) else {
            return Err(GATED.model_refused(model));
        };
        let live = self.inner.live_session(session_id)?;
        let binding = self.inner.wait_bound(&live).await?;
        let providers: ConfigProviders = binding.client().get("/config/providers").await?;
        let refuse = |why: String| {
            Err(HostError::field(
                Field::Model,
                message![
                    "opencode does not know the ",
                    Field::Model,
                    format!(" `{model}`: {why}; the session keeps its model")
                ],
            ))
        };
        match providers
            .providers
            .iter()
            .find(|p| p.id == wanted.provider_id)
        {
            None => {
                let ids: Vec<&str> = providers.providers.iter().map(|p| p.id.as_str()).collect();
                return refuse(format!(
                    "no provider `{}` is configured (there are {ids:?})",
                    wanted.provider_id
                ));
            }
            Some(provider)
                if !provider.models.iter().any(|(key, m)| {
                    *key == wanted.model_id || m.id.as_deref() == Some(wanted.model_id.as_str())
                }) =>
            {
                let ids: Vec<&str> = provider.models.keys().map(String::as_str).collect();
                return refuse(format!(
                    "provider `{}` has no model `{}` (it has {ids:?})",
                    wanted.provider_id, wanted.model_id
                ));
            }
            Some(_) => {}
        }
        // After any prompt being sent: the switch applies from the next one.
        let _serialized = live.inject.lock().await;
        self.inner
            .core
            .append(
                Some(session_id.to_string()),
                EventKind::SessionModel(SessionModel {
                    model: model.to_string(),
                }),
            )
            .await?;
        let running = lock(&live.forwarder).current.is_some();
        Ok(Capability::ok(json!({
            "model": model,
            "appliesTo": if running {
                "the next prompt (the running turn keeps its model)"
            } else {
                "the next prompt"
            },
        })))
    }
}
