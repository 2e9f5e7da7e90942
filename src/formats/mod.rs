//! The peers' own files and wire, as pure serde types and decoders: what each agent writes (or
//! sends) that cohost reads, with the agent's own names, read permissively ([`lenient`]).
//!
//! A layer below `runtime/` and `watch/`: the hosts' normalizers and the passive watchers both
//! read a peer's records through the one `formats/<peer>` module that knows their shapes. It
//! does no I/O, reads no clock and imports nothing of the crate but `protocol`.

pub mod amp;
pub mod claude;
pub mod codex;
pub mod droid;
pub mod lenient;
pub mod opencode;
pub mod pi;
