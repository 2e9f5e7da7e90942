//! cohost's own wire contract: the events it logs and streams, and the bodies of its HTTP API.
//!
//! This module is an API boundary: everything here is serialized to clients and to the event log,
//! so a change here is a change to `docs/api.md`.
//! It imports nothing else from the crate and does no I/O.

mod api;
mod event;
mod session;
mod task;

pub use api::*;
pub use event::*;
pub use session::*;
pub use task::*;

/// Bumped whenever a stored or streamed shape changes incompatibly.
pub const SCHEMA_VERSION: u32 = 1;
