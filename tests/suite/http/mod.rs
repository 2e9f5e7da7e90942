//! The HTTP surface: SSE, limits, security, the tracker API and metadata.

pub(crate) mod limits;
pub(crate) mod metadata;
pub(crate) mod runtimes;
pub(crate) mod security;
pub(crate) mod sse;
pub(crate) mod tracker;
