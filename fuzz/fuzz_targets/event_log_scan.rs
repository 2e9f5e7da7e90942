//! The event log's segment scan (`cohost::core::log_line::scan_segment`) on arbitrary bytes.
//!
//! The input is cut into segments at 0xFF bytes (never in a log line); each segment's limit is
//! the seq its successor's first line claims. Checks: kept seqs strictly increase across
//! segments, stay under each limit and under MAX_SEQ; every kept line decodes to the seq it
//! was kept with; kept, bad and torn ranges are in bounds and do not overlap.
#![no_main]

use cohost::core::log_line::{self, MAX_SEQ, ScanState};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let segments: Vec<&[u8]> = data.split(|b| *b == 0xFF).take(4).collect();
    let mut state = ScanState::default();
    let mut previous = 0u64;
    for (index, bytes) in segments.iter().enumerate() {
        let limit = segments
            .get(index + 1)
            .map(|next| log_line::claimed_seq(next).unwrap_or(u64::MAX));
        let scan = log_line::scan_segment(bytes, limit, &mut state);
        let mut ranges: Vec<std::ops::Range<usize>> = Vec::new();
        for kept in &scan.kept {
            assert!(kept.seq > previous, "seqs must increase");
            assert!(kept.seq <= MAX_SEQ);
            if let Some(limit) = limit {
                assert!(kept.seq < limit);
            }
            previous = kept.seq;
            let line = log_line::decode(&bytes[kept.range.clone()]).expect("a kept line decodes");
            assert_eq!(line.seq, kept.seq);
            assert!(line.json.starts_with("{\"seq\":"));
            ranges.push(kept.range.clone());
        }
        ranges.extend(scan.bad.iter().map(|bad| bad.range.clone()));
        ranges.extend(scan.torn.clone());
        ranges.sort_by_key(|range| range.start);
        for pair in ranges.windows(2) {
            assert!(pair[0].end <= pair[1].start, "ranges overlap");
        }
        for range in &ranges {
            assert!(range.start <= range.end && range.end <= bytes.len());
        }
        assert_eq!(state.previous, previous);
    }
});
