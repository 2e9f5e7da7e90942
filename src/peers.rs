//! The peer CLIs cohost supports: for each, the oldest and the newest release the tests run
//! against, and the npm package each is installed from. This table is the one place the range is
//! written: `scripts/test` reads the `Supported::new` / `Supported::renamed` lines below to
//! install the pinned releases, `cohost doctor` and the daemon's start-up line compare the
//! installed version with it, and a test checks that `docs/api.md` names the same versions.
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
    /// The npm package the oldest release is installed from (the newest too, unless
    /// `newest_package` names another).
    pub package: &'static str,
    pub oldest: &'static str,
    pub newest: &'static str,
    /// The package the newest release is installed from, when the peer moved to another name
    /// within the range (Pi: `@mariozechner/pi-coding-agent` stopped at 0.73.1, its releases
    /// since are `@earendil-works/pi-coding-agent`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub newest_package: Option<&'static str>,
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
            newest_package: None,
        }
    }

    /// A range whose newest release comes from another package than its oldest.
    const fn renamed(
        name: &'static str,
        package: &'static str,
        oldest: &'static str,
        newest_package: &'static str,
        newest: &'static str,
    ) -> Self {
        Supported {
            name,
            package,
            oldest,
            newest,
            newest_package: Some(newest_package),
        }
    }

    /// The package the newest release is installed from (what a user installs today).
    pub fn newest_package(&self) -> &'static str {
        self.newest_package.unwrap_or(self.package)
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

// scripts/test reads these lines: keep each `Supported::new(…)` / `Supported::renamed(…)` on one
// line, in this form.
pub const CODEX: Supported = Supported::new("codex", "@openai/codex", "0.169.0", "0.171.0");
pub const CLAUDE: Supported =
    Supported::new("claude", "@anthropic-ai/claude-code", "2.1.197", "2.1.332");

// The agents cohost only watches (`src/watch/`). OpenCode and Droid: one release each, the one
// whose files the watchers were written against (oldest = newest). Droid is installed from its
// platform package: the `@factory/cli` shim's optional binary is not published for every release.
// Pi: the last release of its old package and today's of its new one (which needs Node ≥ 22.19).
pub const OPENCODE: Supported = Supported::new("opencode", "opencode-ai", "1.18.33", "1.18.33");
#[rustfmt::skip] // one line, for scripts/test
pub const PI: Supported = Supported::renamed("pi", "@mariozechner/pi-coding-agent", "0.73.1", "@earendil-works/pi-coding-agent", "1.6.0");
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

/// How two `x.y.z` versions compare, numerically (`22.9.0` < `22.19.0`); `None` when either is
/// not one.
pub fn compare(a: &str, b: &str) -> Option<Ordering> {
    Some(parse(a)?.cmp(&parse(b)?))
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
    fn a_renamed_peer_names_the_package_of_each_end() {
        assert_eq!(PI.package, "@mariozechner/pi-coding-agent");
        assert_eq!(PI.newest_package(), "@earendil-works/pi-coding-agent");
        assert_eq!(CODEX.newest_package(), CODEX.package);
        assert_eq!(PI.place("0.73.1"), Some(Place::Tested));
        assert_eq!(PI.place("1.6.0"), Some(Place::Tested));
        assert_eq!(PI.place("1.7.0"), Some(Place::Newer));
        let supported = serde_json::to_value(PI).unwrap();
        assert_eq!(
            supported["newestPackage"], "@earendil-works/pi-coding-agent",
            "{supported}"
        );
        assert!(
            serde_json::to_value(CODEX)
                .unwrap()
                .get("newestPackage")
                .is_none()
        );
        assert_eq!(compare("22.9.0", "22.19.0"), Some(Ordering::Less));
        assert_eq!(compare("v22", "22.19.0"), None);
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
            let line = match peer.newest_package {
                None => format!(
                    "Supported::new(\"{}\", \"{}\", \"{}\", \"{}\")",
                    peer.name, peer.package, peer.oldest, peer.newest
                ),
                Some(newest_package) => format!(
                    "Supported::renamed(\"{}\", \"{}\", \"{}\", \"{newest_package}\", \"{}\")",
                    peer.name, peer.package, peer.oldest, peer.newest
                ),
            };
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
            for package in [peer.package, peer.newest_package()] {
                assert!(
                    api.contains(&format!("`{package}`")),
                    "docs/api.md does not name the package {package} of {}",
                    peer.name
                );
            }
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
