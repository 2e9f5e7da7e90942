//! The event log's recovery on disk (`EventLog::open`): arbitrary segments are written to a
//! fresh directory (on /dev/shm when there is one), opened (which repairs them), read back
//! with the reader, then opened again.
//!
//! Checks: open never fails on damaged content; the lines it returns are the ones the reader
//! then serves, in strictly increasing seq order; after one more event (at the head + 1, as
//! the daemon writes `daemon.started`, with fsync always: the writer puts zeros ahead of it,
//! and the log is dropped without closing, as a crash leaves it), a second open finds nothing
//! more to quarantine or cut (the repair is complete, the zeros are no damage), returns the
//! same lines plus that event, and the same missing seqs.
#![no_main]

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use cohost::core::event_log::{EventLog, FsyncPolicy, LogConfig};
use cohost::core::log_line;
use libfuzzer_sys::fuzz_target;

static RUN: AtomicU64 = AtomicU64::new(0);

fn scratch() -> PathBuf {
    let base = if std::path::Path::new("/dev/shm").is_dir() {
        PathBuf::from("/dev/shm")
    } else {
        std::env::temp_dir()
    };
    base.join(format!(
        "cohost-fuzz-{}-{}",
        std::process::id(),
        RUN.fetch_add(1, Ordering::Relaxed)
    ))
}

fuzz_target!(|data: &[u8]| {
    let dir = scratch();
    let log_dir = dir.join("log");
    std::fs::create_dir_all(&log_dir).unwrap();
    // Up to three segments, cut at 0xFF; the first byte of each names its first seq (1-250).
    let mut first_seq = 1u64;
    for bytes in data.split(|b| *b == 0xFF).take(3) {
        let (step, content) = bytes.split_first().unwrap_or((&0, &[]));
        first_seq += u64::from(*step % 16);
        std::fs::write(log_dir.join(format!("{first_seq:020}.jsonl")), content).unwrap();
        first_seq += 1;
    }
    let config = LogConfig {
        dir: log_dir.clone(),
        quarantine: dir.join("quarantine.jsonl"),
        // Small segments keep the zeros the writer puts ahead of its line to a few KiB (with
        // large ones, 1 MiB: scanning those under the fuzzer's instrumentation took about 0.2 s
        // a run, 5 runs a second unoptimized), and let an append roll a segment.
        segment_bytes: 4096,
        retain_bytes: u64::MAX,
        fsync: FsyncPolicy::Always,
    };
    let (mut log, first) = EventLog::open(config.clone(), 0).expect("open repairs, never fails");
    let seqs: Vec<u64> = first.lines.iter().map(|line| line.seq).collect();
    assert!(seqs.windows(2).all(|pair| pair[0] < pair[1]));
    assert!(first.head >= first.last_seq);
    let from = first.oldest_segment.unwrap_or(1) - 1;
    let read = log
        .reader()
        .read_after(from, usize::MAX, None)
        .expect("read back");
    assert_eq!(read, first.lines, "the reader serves what open kept");
    // As the daemon does: the next event takes the seq after the head.
    let next = first.head + 1;
    let mut line = Vec::new();
    log_line::encode(
        &format!(
            "{{\"seq\":{next},\"ts\":0,\"type\":\"daemon.started\",\"data\":{{\"pid\":1,\"version\":\"x\"}}}}"
        ),
        &mut line,
    );
    log.append(&line).expect("append");
    drop(log);
    let (_, second) = EventLog::open(config, 0).expect("second open");
    assert!(
        second.quarantined.is_empty(),
        "left to quarantine: {:?}",
        second.quarantined
    );
    assert_eq!(second.truncated_bytes, 0);
    assert_eq!(second.head, next);
    assert_eq!(&second.lines[..second.lines.len() - 1], &first.lines[..]);
    assert_eq!(second.lines.last().map(|line| line.seq), Some(next));
    // What was missing is still missing, no more, no less.
    let mut missing = first.missing.clone();
    missing.extend(first.known_missing.iter().copied());
    let mut again = second.missing.clone();
    again.extend(second.known_missing.iter().copied());
    missing.sort_by_key(|range| range.from);
    again.sort_by_key(|range| range.from);
    assert_eq!(missing, again);
    let _ = std::fs::remove_dir_all(&dir);
});
