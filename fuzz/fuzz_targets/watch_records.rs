//! The watchers' record decoders (`cohost::watch::<agent>`), as the engine feeds them: the first
//! byte picks the agent, then each input line is either one appended record or, when its first
//! byte says so, a whole-file snapshot or a removal; midway the decoder is saved and restored
//! from its checkpoint, as a daemon restart does. Nothing may panic, whatever the bytes.
#![no_main]

use std::path::Path;

use cohost::watch::format::{Locator, WatchedAgent};
use cohost::watch::format_for;
use libfuzzer_sys::fuzz_target;

fn path_of(agent: WatchedAgent) -> &'static str {
    match agent {
        WatchedAgent::ClaudeCode => {
            "/h/.claude/projects/-home-me-proj/0b5e7a1c-3f2d-4c1a-9e8b-2d4f6a8c0e1f.jsonl"
        }
        WatchedAgent::Codex => {
            "/h/.codex/sessions/2026/12/01/rollout-2026-12-01T10-00-00-0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b.jsonl"
        }
        WatchedAgent::Opencode => "/h/.local/share/opencode/opencode.db",
        WatchedAgent::Pi => {
            "/h/.pi/agent/sessions/--home-me-proj--/2026-12-01T10-00-00-000Z_0b5e7a1c-3f2d-4c1a-9e8b-2d4f6a8c0e1f.jsonl"
        }
        WatchedAgent::Droid => {
            "/h/.factory/sessions/-home-me-proj/0b5e7a1c-3f2d-4c1a-9e8b-2d4f6a8c0e1f.jsonl"
        }
        WatchedAgent::Amp => "/h/.local/share/amp/threads/T-0b5e7a1c.json",
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((pick, rest)) = data.split_first() else {
        return;
    };
    let agent = WatchedAgent::ALL[usize::from(*pick) % WatchedAgent::ALL.len()];
    let Some(format) = format_for(agent) else {
        return;
    };
    let path = Path::new(path_of(agent));
    let _ = format.classify(path);
    let mut decoder = format.decoder(path, None);
    let mut out = Vec::new();
    let lines: Vec<&[u8]> = rest.split(|b| *b == b'\n').take(128).collect();
    let half = lines.len() / 2;
    let mut offset = 0u64;
    for (index, line) in lines.iter().enumerate() {
        if index == half {
            let saved = decoder.save();
            decoder = format.decoder(path, Some(saved));
        }
        match line.first() {
            Some(0x01) => decoder.snapshot(&line[1..], &mut out),
            Some(0x02) => decoder.removed(&mut out),
            _ => decoder.line(line, &Locator::Offset { offset }, &mut out),
        }
        offset += line.len() as u64 + 1;
        out.clear();
    }
});
