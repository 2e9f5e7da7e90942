//! The task queue and the control lease, through a codex and a Claude session.

pub(crate) mod claude;
pub(crate) mod codex;
