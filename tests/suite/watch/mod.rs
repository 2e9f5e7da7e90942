//! The passive watchers: the engine, each peer, and the helpers they share.

pub(crate) mod common;
pub(crate) mod engine;
pub(crate) mod peers;
