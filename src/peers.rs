//! The peer CLIs cohost supports: for each, the oldest and the newest release the tests run
//! against. This table is the one place the range is written: `scripts/test` reads the two
//! `Supported::new` lines below to install the pinned releases, `cohost doctor` and the daemon's
//! start-up line compare the installed version with it, and a test checks that `docs/api.md`
//! names the same versions.
//!
//! Behaviour that differs between releases is detected from what the peer writes (the paste
//! wrapper, the queued-prompt shape, the abort marker), not from these numbers: a release between
//! the two (or after the newest) works as long as it writes one of the shapes cohost knows.

use std::cmp::Ordering;

use serde::Serialize;

/// A supported range of one peer CLI, inclusive at both ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Supported {
    /// The command's name (`codex`, `claude`).
    pub name: &'static str,
    /// The npm package it is installed from.
    pub package: &'static str,
    pub oldest: &'static str,
    pub newest: &'static str,
}

impl Supported {
    const fn new(
        name: &'static str,
        package: &'static str,
        oldest: &'static str,
        newest: &'static str,
    ) -> Self {
        Supported {
            name,
            package,
            oldest,
            newest,
        }
    }

    /// Where `version` lies relative to the range; `None` when it is not an `x.y.z` version.
    pub fn place(&self, version: &str) -> Option<Place> {
        let version = parse(version)?;
        let oldest = parse(self.oldest)?;
        let newest = parse(self.newest)?;
        Some(if version.cmp(&oldest) == Ordering::Less {
            Place::Older
        } else if version.cmp(&newest) == Ordering::Greater {
            Place::Newer
        } else {
            Place::Tested
        })
    }

    /// `0.169.0–0.171.0`.
    pub fn range(&self) -> String {
        format!("{}–{}", self.oldest, self.newest)
    }

    /// The warning for a version outside the range, or `None` inside it (or when unparsable).
    pub fn warning(&self, version: &str) -> Option<String> {
        match self.place(version)? {
            Place::Tested => None,
            Place::Older => Some(format!(
                "{} {version} is older than the oldest release cohost is tested with ({}); supported: {}",
                self.name,
                self.oldest,
                self.range()
            )),
            Place::Newer => Some(format!(
                "{} {version} is newer than the newest release cohost is tested with ({}); supported: {}",
                self.name,
                self.newest,
                self.range()
            )),
        }
    }
}

/// Where an installed version lies relative to the tested range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Place {
    Older,
    Tested,
    Newer,
}

// scripts/test reads these lines: keep each `Supported::new(…)` on one line, in this form.
pub const CODEX: Supported = Supported::new("codex", "@openai/codex", "0.169.0", "0.171.0");
pub const CLAUDE: Supported =
    Supported::new("claude", "@anthropic-ai/claude-code", "2.1.197", "2.1.332");

// The agents cohost only watches (`src/watch/`): one release each, the one whose files the
// watchers were written against (oldest = newest). Droid is installed from its platform package:
// the `@factory/cli` shim's optional binary is not published for every release.
pub const OPENCODE: Supported = Supported::new("opencode", "opencode-ai", "1.18.33", "1.18.33");
pub const PI: Supported = Supported::new("pi", "@mariozechner/pi-coding-agent", "0.73.1", "0.73.1");
pub const DROID: Supported =
    Supported::new("droid", "@factory/cli-linux-x64", "0.225.2", "0.225.2");

/// Every peer of the table: the hosted ones, then the watched ones.
pub const ALL: [Supported; 5] = [CODEX, CLAUDE, OPENCODE, PI, DROID];

/// The first `x.y.z` in a `--version` line (`codex-cli 0.171.0`, `2.1.332 (Claude Code)`).
pub fn version_in(text: &str) -> Option<String> {
    text.split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .find(|word| parse(word).is_some())
        .map(str::to_string)
}

fn parse(version: &str) -> Option<(u64, u64, u64)> {
    let mut parts = version.split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    let patch = parts.next()?.parse().ok()?;
    parts.next().is_none().then_some((major, minor, patch))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_placed_numerically_not_as_text() {
        assert_eq!(CLAUDE.place("2.1.197"), Some(Place::Tested));
        assert_eq!(CLAUDE.place("2.1.250"), Some(Place::Tested));
        assert_eq!(CLAUDE.place("2.1.332"), Some(Place::Tested));
        assert_eq!(CLAUDE.place("2.1.98"), Some(Place::Older));
        assert_eq!(CLAUDE.place("2.1.1000"), Some(Place::Newer));
        assert_eq!(CODEX.place("0.170.5"), Some(Place::Tested));
        assert_eq!(CODEX.place("1.0.0"), Some(Place::Newer));
        assert_eq!(CODEX.place("latest"), None);
        assert!(CODEX.warning("0.171.0").is_none());
        let warning = CODEX.warning("0.99.0").unwrap();
        assert!(
            warning.contains("0.99.0") && warning.contains(&CODEX.range()),
            "{warning}"
        );
    }

    #[test]
    fn the_version_is_found_in_what_the_cli_prints() {
        assert_eq!(
            version_in("codex-cli 0.171.0\n").as_deref(),
            Some("0.171.0")
        );
        assert_eq!(
            version_in("2.1.332 (Claude Code)\n").as_deref(),
            Some("2.1.332")
        );
        assert_eq!(version_in("no version here"), None);
    }

    /// `scripts/test` installs exactly the releases of this table, and the docs name them.
    #[test]
    fn scripts_and_docs_use_this_table() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let source = std::fs::read_to_string(root.join("src/peers.rs")).unwrap();
        for peer in ALL {
            let line = format!(
                "Supported::new(\"{}\", \"{}\", \"{}\", \"{}\")",
                peer.name, peer.package, peer.oldest, peer.newest
            );
            assert!(
                source.contains(&line),
                "scripts/test greps for `{line}` in src/peers.rs: keep it on one line"
            );
        }
        let script = std::fs::read_to_string(root.join("scripts/test")).unwrap();
        assert!(
            script.contains("src/peers.rs")
                && ALL
                    .iter()
                    .all(|peer| !script.contains(peer.oldest) && !script.contains(peer.newest)),
            "scripts/test must read the versions from src/peers.rs, not repeat them"
        );
        let api = std::fs::read_to_string(root.join("docs/api.md")).unwrap();
        for peer in ALL {
            for version in [peer.oldest, peer.newest] {
                assert!(
                    api.contains(&format!("{} {version}", peer.name)),
                    "docs/api.md does not name {} {version}",
                    peer.name
                );
            }
        }
    }
}
