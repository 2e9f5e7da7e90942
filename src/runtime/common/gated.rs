//! Creating a session of a runtime that drives its peer through an API and gates the peer's
//! tools by `approvalPolicy` (OpenCode, Pi): the create options such a runtime has no use for
//! (`permissionMode`, `sandbox`, `budget`, a co-driving terminal where there is none) refused
//! by field with the reason ([`Gated::check_create`]), the policy checked against its own, the model as
//! `provider/model`; and the session's record ([`Gated::created`]).

use crate::protocol::{Bare, Field, ForkOrigin, Message, Piece, Runtime, SessionCreated, message};
use crate::runtime::{CreateSession, HostError};

use super::hosted::a_runtime;

/// What a gated runtime takes, and why it takes nothing else.
pub struct Gated {
    pub runtime: Runtime,
    /// Why `budget` does not apply (retries are the peer's own settings).
    pub budget: &'static str,
    /// Why no terminal co-drives a session (`terminal`, `tmuxSession`), or `None` when one
    /// can (then `tmuxSession` needs `terminal: true`).
    pub terminal: Option<&'static str>,
    /// The approval policies the runtime can run under.
    pub policies: &'static [&'static str],
    /// Why those and no others.
    pub policies_why: &'static str,
    /// Whether `model` names a model the way the runtime takes it (`provider/model`).
    pub model_ok: fn(&str) -> bool,
}

impl Gated {
    /// The options of `request` the runtime refuses, by field and with the reason.
    pub fn check_create(&self, request: &CreateSession) -> Result<(), HostError> {
        let name = self.runtime.as_str();
        let refuse = |field: Field, why: Vec<Piece>| {
            let mut pieces = vec![
                Piece::from(field),
                Piece::from(format!(" does not apply to {name} sessions: ")),
            ];
            pieces.extend(why);
            Err(HostError::field(field, Message::from_pieces(pieces)))
        };
        if request.permission_mode.is_some() {
            return refuse(
                Field::PermissionMode,
                vec!["use ".into(), Field::ApprovalPolicy.into()],
            );
        }
        if request.sandbox.is_some() {
            return refuse(
                Field::Sandbox,
                vec![
                    format!("{name} has no sandbox; its tools are gated by ").into(),
                    Field::ApprovalPolicy.into(),
                ],
            );
        }
        if request.budget.is_some() {
            return refuse(Field::Budget, vec![self.budget.into()]);
        }
        match self.terminal {
            Some(why) if request.terminal || request.tmux_session.is_some() => {
                return refuse(
                    if request.terminal {
                        Field::Terminal
                    } else {
                        Field::TmuxSession
                    },
                    vec![why.into()],
                );
            }
            None if request.tmux_session.is_some() && !request.terminal => {
                return Err(HostError::field(
                    Field::TmuxSession,
                    message![
                        Field::TmuxSession,
                        " needs `",
                        Bare(Field::Terminal),
                        format!(": true` for {name} sessions")
                    ],
                ));
            }
            _ => {}
        }
        if let Some(policy) = &request.approval_policy
            && !self.policies.contains(&policy.as_str())
        {
            return Err(HostError::field(
                Field::ApprovalPolicy,
                message![
                    Field::ApprovalPolicy,
                    format!(
                        " must be one of {} for {name} sessions, got `{policy}` ({})",
                        self.policies.join(", "),
                        self.policies_why
                    )
                ],
            ));
        }
        if let Some(model) = &request.model {
            self.check_model(model)?;
        }
        Ok(())
    }

    /// Refuses a model not named `provider/model`.
    pub fn check_model(&self, model: &str) -> Result<(), HostError> {
        if (self.model_ok)(model) {
            Ok(())
        } else {
            Err(self.model_refused(model))
        }
    }

    /// Why `model` is refused: not `provider/model`.
    pub fn model_refused(&self, model: &str) -> HostError {
        HostError::field(
            Field::Model,
            message![
                format!("{} ", a_runtime(self.runtime)),
                Field::Model,
                format!(" is `provider/model`, got `{model}`")
            ],
        )
    }

    /// The record of a session created from `request` (a checked one), under its policy or
    /// `default_policy`.
    pub fn created(
        &self,
        request: CreateSession,
        default_policy: &str,
        forked_from: Option<ForkOrigin>,
    ) -> SessionCreated {
        let policy = request
            .approval_policy
            .unwrap_or_else(|| default_policy.to_string());
        SessionCreated {
            runtime: self.runtime,
            cwd: request.cwd.to_string_lossy().into_owned(),
            model: request.model,
            approval_policy: Some(policy.into()),
            permission_mode: None,
            sandbox: None,
            budget: None,
            forked_from,
            idempotency_key: request.idempotency_key,
            // No gated runtime takes a profile's `env` or MCP servers; redacted all the same.
            profile: request.profile.map(|profile| Box::new(profile.redacted())),
        }
    }
}
