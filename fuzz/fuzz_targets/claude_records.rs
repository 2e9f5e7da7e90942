//! Claude hook lines and transcript records through one `cohost::runtime::claude::normalize::Normalizer`
//! (as the session task feeds it): each input line's first byte says what it is — a hook
//! line, a transcript record, a session-file status (its first byte when it began), a clock
//! tick, an interrupt — and the rest is its JSON (or text).
#![no_main]

use cohost::runtime::claude::normalize::Normalizer;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut normalizer = Normalizer::new();
    let mut now = 1_000u64;
    for line in data.split(|b| *b == b'\n').take(64) {
        let Some((kind, rest)) = line.split_first() else {
            continue;
        };
        now += 250;
        match kind % 6 {
            0 | 1 => {
                if let Ok(value) = serde_json::from_slice(rest) {
                    let _ = normalizer.hook(&value, now);
                }
            }
            2 | 3 => {
                if let Ok(value) = serde_json::from_slice(rest) {
                    let _ = normalizer.transcript_line(&value);
                }
            }
            4 => {
                // The first byte: when the status began (0: the file does not say), up to a
                // second before this reading, so before or after the turn's prompt.
                let (since, status) = rest.split_first().unwrap_or((&0, &[]));
                let since = (*since != 0).then(|| now - u64::from(*since) * 4);
                let _ = normalizer.session_status_since(&String::from_utf8_lossy(status), since);
                let _ = normalizer.tick(now + 60_000);
            }
            _ => {
                let turn = normalizer.turn().map(str::to_string);
                if let Some(turn) = turn {
                    let _ = normalizer.interrupted(&turn);
                }
                normalizer.expect_injected(&String::from_utf8_lossy(rest));
            }
        }
    }
});
