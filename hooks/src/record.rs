//! The `hooks.jsonl` record: reading the event's stdin within a bound, turning it into a JSON
//! payload, and appending exactly one line with a single `write` on an `O_APPEND` file so
//! concurrent hook processes never interleave. It must never drop an event silently (an
//! oversized payload becomes a `{"truncated":true,…}` marker) and never touch stdout.

use std::fs::OpenOptions;
use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

/// The most stdin that is kept; a bigger payload is replaced by a truncation marker.
pub const MAX_INPUT: usize = 4 * 1024 * 1024;
/// How much of an oversized payload the truncation marker keeps, as text.
pub const TRUNCATED_HEAD: usize = 64 * 1024;

/// What stdin held.
pub enum Input {
    /// Everything, up to [`MAX_INPUT`] bytes.
    Whole(Vec<u8>),
    /// The first [`MAX_INPUT`] bytes of `total` (the rest was read and discarded).
    Truncated { head: Vec<u8>, total: u64 },
    /// stdin could not be read.
    Failed(String),
}

/// Reads all of `reader`, keeping at most [`MAX_INPUT`] bytes. The rest is drained so Claude
/// never blocks writing to a hook that stopped reading.
pub fn read_stdin(reader: impl Read) -> Input {
    let mut limited = reader.take(MAX_INPUT as u64 + 1);
    let mut buf = Vec::new();
    if let Err(error) = limited.read_to_end(&mut buf) {
        return Input::Failed(error.to_string());
    }
    if buf.len() <= MAX_INPUT {
        return Input::Whole(buf);
    }
    let rest = io::copy(&mut limited.into_inner(), &mut io::sink()).unwrap_or(0);
    let total = buf.len() as u64 + rest;
    buf.truncate(MAX_INPUT);
    Input::Truncated { head: buf, total }
}

/// The payload stored for an input: the parsed JSON; the text as a JSON string when it is not
/// JSON; `null` for empty input; a marker object for oversized or unreadable input.
pub fn payload_of(input: Input) -> Value {
    match input {
        Input::Whole(bytes) => {
            if bytes.iter().all(u8::is_ascii_whitespace) {
                return Value::Null;
            }
            match serde_json::from_slice::<Value>(&bytes) {
                Ok(value) => value,
                Err(_) => Value::String(String::from_utf8_lossy(&bytes).into_owned()),
            }
        }
        Input::Truncated { head, total } => {
            let kept = &head[..head.len().min(TRUNCATED_HEAD)];
            json!({
                "truncated": true,
                "bytes": total,
                "limit": MAX_INPUT,
                "head": String::from_utf8_lossy(kept),
            })
        }
        Input::Failed(error) => json!({ "stdinError": error }),
    }
}

/// One `hooks.jsonl` line (the type is shared with the daemon).
pub use crate::boundary::HookLine as Line;

/// Appends `line` plus `\n` to `path` (created 0600) with one `write` on an `O_APPEND` file.
/// Linux serializes appends to a regular file, so lines from concurrent hooks never mix.
pub fn append_line(path: &Path, line: &Line) -> io::Result<()> {
    let mut bytes = serde_json::to_vec(line)?;
    bytes.push(b'\n');
    let mut file = OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .open(path)?;
    let written = file.write(&bytes)?;
    if written < bytes.len() {
        // Only a full disk or a signal cuts a regular-file write short; finish the line rather
        // than leave half of it (it may then interleave, which beats losing the event).
        file.write_all(&bytes[written..])?;
        return Err(io::Error::other(format!(
            "short write ({written} of {} bytes); the rest was written separately",
            bytes.len()
        )));
    }
    Ok(())
}

/// Milliseconds since the Unix epoch (0 if the clock is before it).
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// A random 128-bit id as 32 lowercase hex digits, from `/dev/urandom` (or, if that cannot be
/// read, from std's randomly keyed hasher mixed with the time and pid).
pub fn random_hex_id() -> String {
    let mut bytes = [0u8; 16];
    let from_os = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes));
    if from_os.is_err() {
        use std::hash::{BuildHasher, Hasher};
        let state = std::collections::hash_map::RandomState::new();
        for (i, chunk) in bytes.chunks_mut(8).enumerate() {
            let mut hasher = state.build_hasher();
            hasher.write_usize(i);
            hasher.write_u32(std::process::id());
            hasher.write_u128(
                SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map(|d| d.as_nanos())
                    .unwrap_or(0),
            );
            chunk.copy_from_slice(&hasher.finish().to_le_bytes());
        }
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
