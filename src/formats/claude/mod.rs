//! What Claude Code writes that cohost reads, as serde types: the `hooks.jsonl` line
//! `cohost-hook` appends for each hook (with Claude's own hook payload inside) in `hooks.rs`,
//! the transcript records (`~/.claude/projects/<cwd>/<session>.jsonl`) in `transcript.rs` and
//! the TUI's session file (`~/.claude/sessions/<pid>.json`) in `session_file.rs`. Field names are
//! Claude's (`prompt_id`, `permission_mode`, `tool_use_id`, `last_assistant_message` in hooks;
//! `promptId`, `isAbortedMidStream`, `stop_reason` in the transcript). Shapes are those of
//! Claude Code 2.1.197 and 2.1.332.
//!
//! **Permissive by design.** Unknown record kinds, hook events and fields are ignored; every
//! field cohost reads is optional and read through [`crate::formats::lenient`], so a field of
//! another type reads as absent, exactly as `value.get(key).and_then(Value::as_str)` did. Parsing
//! a record therefore never fails: a record that is not what its kind promises reads with the
//! fields it lacks empty, and its reader does with it what it did with the `Value`.
//!
//! Tool inputs and responses are Claude's per-tool JSON; they stay `Value`s (cohost stores
//! them as they are), with typed views of the few fields it reads ([`BashToolInput`],
//! [`ToolResponse`]).

mod hooks;
mod session_file;
mod transcript;

pub use hooks::*;
pub use session_file::*;
pub use transcript::*;

#[cfg(test)]
mod tests;
