//! Passive watchers: cohost discovers the agents running on the machine from their own files
//! (Claude Code, Codex, OpenCode, Pi, Droid, Amp), follows those files incrementally and feeds
//! the tracker through the core like any other producer (`agent.updated`).
//!
//! The split: [`format`] is the contract — what one agent's files look like and how its records
//! turn into [`format::Observation`]s (pure: no I/O, no clock). The engine (discovery with
//! `notify`, byte offsets and checkpoints, liveness, placement in tmux, evidence for `explain`)
//! is shared by every agent and knows no agent by name. One module per agent implements
//! [`format::Format`]; [`format_for`] is the one place they are named.
//!
//! Layering: `watch` imports `protocol`, `formats`, `core`, `tmux`, `tail` and `peers`; never a
//! runtime, the service or a surface (the tidy test in `lib.rs` checks it). What the surfaces
//! show of it goes through the service ([`WatchHandle`], and [`doctor`] for `cohost doctor`).

pub mod amp;
pub mod claude;
pub mod codex;
pub mod doctor;
pub mod droid;
pub mod engine;
pub mod format;
pub mod opencode;
pub mod pi;
pub mod procs;

pub use engine::{WatchConfig, WatchHandle, WatchLimits};
use format::{Format, WatchedAgent};

/// The environment the daemon started with, for the formats' roots (`$HOME`, and the agents'
/// own overrides: `CLAUDE_CONFIG_DIR`, `CODEX_HOME`, `XDG_DATA_HOME`, …).
pub fn process_env() -> format::WatchEnv {
    let vars: std::collections::BTreeMap<String, String> = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect();
    format::WatchEnv {
        home: vars
            .get("HOME")
            .map(std::path::PathBuf::from)
            .unwrap_or_default(),
        vars,
    }
}

/// The format of `agent`, or `None` when cohost has no watcher for it yet.
pub fn format_for(agent: WatchedAgent) -> Option<Box<dyn Format>> {
    match agent {
        WatchedAgent::ClaudeCode => Some(Box::new(claude::ClaudeCode)),
        WatchedAgent::Codex => Some(Box::new(codex::Codex)),
        WatchedAgent::Opencode => Some(Box::new(opencode::OpenCode::default())),
        WatchedAgent::Pi => Some(Box::new(pi::Pi)),
        WatchedAgent::Droid => Some(Box::new(droid::Droid)),
        WatchedAgent::Amp => Some(Box::new(amp::Amp)),
    }
}

/// The agents with a watcher, in [`WatchedAgent::ALL`] order: what `serve` watches by default.
pub fn implemented() -> Vec<WatchedAgent> {
    WatchedAgent::ALL
        .into_iter()
        .filter(|agent| format_for(*agent).is_some())
        .collect()
}

/// Parses `--watchers` / `COHOST_WATCHERS`: comma-separated agent names, `all`, or `none` (also
/// the empty string). An unknown or unimplemented name is an error that names it.
pub fn parse_watchers(text: &str) -> Result<Vec<WatchedAgent>, String> {
    let text = text.trim();
    if text.is_empty() || text == "none" || text == "off" {
        return Ok(Vec::new());
    }
    if text == "all" {
        return Ok(implemented());
    }
    let mut agents = Vec::new();
    for name in text.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let Some(agent) = WatchedAgent::parse(name) else {
            let known: Vec<&str> = WatchedAgent::ALL.iter().map(|a| a.as_str()).collect();
            return Err(format!(
                "unknown watcher `{name}` (known: {}, all, none)",
                known.join(", ")
            ));
        };
        if format_for(agent).is_none() {
            return Err(format!("the `{name}` watcher is not implemented yet"));
        }
        if !agents.contains(&agent) {
            agents.push(agent);
        }
    }
    Ok(agents)
}

/// Milliseconds since the epoch of an RFC 3339 UTC timestamp (`2026-12-01T09:08:39.027Z`, any
/// number of fraction digits, `Z` or `+00:00`); `None` for anything else.
pub(crate) fn rfc3339_ms(text: &str) -> Option<u64> {
    let bytes = text.as_bytes();
    if bytes.len() < 20 || bytes[4] != b'-' || bytes[7] != b'-' || bytes[10] != b'T' {
        return None;
    }
    let num = |range: std::ops::Range<usize>| -> Option<i64> { text.get(range)?.parse().ok() };
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let rest = &text[19..];
    let (fraction, zone) = match rest.strip_prefix('.') {
        Some(after) => {
            let digits = after.bytes().take_while(u8::is_ascii_digit).count();
            (&after[..digits], &after[digits..])
        }
        None => ("", rest),
    };
    if zone != "Z" && zone != "+00:00" {
        return None;
    }
    let millis: i64 = format!("{fraction:0<3}").get(..3)?.parse().ok()?;
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = (month + 9) % 12;
    let doy = (153 * m + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + hour * 3600 + minute * 60 + second;
    u64::try_from(secs * 1000 + millis).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_parses_what_the_agents_write() {
        assert_eq!(rfc3339_ms("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(
            rfc3339_ms("2026-12-01T09:08:39.027366275Z"),
            Some(1_796_116_119_027)
        );
        assert_eq!(
            rfc3339_ms("2026-12-01T09:10:13.04Z"),
            Some(1_796_116_213_040)
        );
        assert_eq!(rfc3339_ms("2026-12-01 09:10:13Z"), None);
        assert_eq!(rfc3339_ms("2026-12-01T09:10:13+02:00"), None);
    }

    #[test]
    fn watchers_parse_names_all_and_none() {
        assert_eq!(parse_watchers("none"), Ok(vec![]));
        assert_eq!(parse_watchers(""), Ok(vec![]));
        assert_eq!(parse_watchers("all"), Ok(implemented()));
        assert_eq!(
            parse_watchers("codex, claude-code,codex"),
            Ok(vec![WatchedAgent::Codex, WatchedAgent::ClaudeCode])
        );
        assert!(parse_watchers("cursor").unwrap_err().contains("`cursor`"));
    }
}
