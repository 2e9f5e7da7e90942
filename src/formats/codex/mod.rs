//! What codex writes under `$CODEX_HOME` that cohost reads, as serde types: the rollout lines
//! (`sessions/YYYY/MM/DD/rollout-<ts>-<thread id>.jsonl`) in `rollout.rs` and the thread names
//! of `session_index.jsonl` in `session_index.rs`. Field names are codex's own (`session_meta`,
//! `event_msg`, `response_item`, `call_id`, `thread_name`). Shapes are those of codex 0.169.
//!
//! The app-server's JSON-RPC wire is not here: it is `runtime/codex/wire/`, the only reader of it.
//!
//! **Permissive by design**, as `formats::claude`: unknown line kinds, payload kinds and fields
//! are ignored; every field cohost reads is optional and read through
//! [`crate::formats::lenient`], so a field of another type reads as absent, exactly as
//! `value["key"].as_str()` did. Only a line that is not JSON at all fails to read.

mod rollout;
mod session_index;

pub use rollout::*;
pub use session_index::*;

#[cfg(test)]
pub(crate) mod tests;
