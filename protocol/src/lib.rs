//! cohost's own wire contract: the events it logs and streams, the bodies of its HTTP API and
//! MCP tools, and (in [`boundary`]) the files and requests exchanged with `cohost-runner` and
//! `cohost-hook`.
//!
//! This crate is an API boundary: everything here is serialized to clients and to the event log,
//! so a change here is a change to `docs/api.md`. It is its own crate so that the daemon, its
//! pane programs and the tests share one definition and nothing here can reach into the daemon
//! (the build enforces what a grep once did); it does no I/O.

mod api;
mod body;
pub mod boundary;
pub mod codes;
mod event;
mod field;
mod home;
mod ids;
mod open_enum;
mod profile;
mod reply;
mod request;
#[cfg(test)]
mod schema;
mod session;
mod task;
mod vocabulary;
mod watch;

pub use api::*;
pub use body::*;
pub use event::*;
pub use field::*;
pub use home::*;
pub use ids::*;
pub use profile::*;
pub use reply::*;
pub use request::*;
pub use session::*;
pub use task::*;
pub use vocabulary::*;
pub use watch::*;

/// Bumped whenever a stored or streamed shape changes incompatibly.
pub const SCHEMA_VERSION: u32 = 1;
