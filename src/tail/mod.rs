//! Following files that another process appends to: the crate's one line buffer, one checkpoint
//! type and its file, and the per-file follower that drives them.
//!
//! - `lines.rs`: [`LineBuffer`], pure: bytes at an offset in, complete lines out, partial lines
//!   held back, overlong lines skipped. The watch engine drives it from its shared inotify loop;
//!   the follower drives it from its own.
//! - `checkpoint.rs`: [`Checkpoint`] `{path, inode, offset}` and [`save_checkpoint`] /
//!   [`load_checkpoint`] (format `core::format::CHECKPOINT_FORMAT`).
//! - `follow.rs`: [`spawn_tail`], the per-file JSONL follower (the Claude host's transcript,
//!   hooks and runner files): JSON lines, malformed lines, rotation and truncation.
//! - `wake.rs`: the follower's inotify watch on the file's directory.

mod checkpoint;
mod follow;
pub mod lines;
mod wake;

pub use checkpoint::{Checkpoint, CheckpointError, load_checkpoint, save_checkpoint};
pub use follow::{
    DEFAULT_MAX_LINE_BYTES, DEFAULT_POLL_INTERVAL, TAIL_CHANNEL_CAPACITY, TailItem, TailOptions,
    spawn_tail, spawn_tail_with,
};
pub use lines::{LineBuffer, Piece};
pub use wake::WatchMode;
