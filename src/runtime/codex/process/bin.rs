//! Finding codex: `COHOST_CODEX_BIN` or `codex` on `PATH`, the npm launcher resolved to the
//! native binary it wraps, and `codex --version`.

use super::*;

// ---------------------------------------------------------------------------------------------
// finding the binary

/// The codex binary cohost runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodexBin {
    /// The executable to spawn: the native binary, never the node launcher.
    pub path: PathBuf,
    /// What `codex --version` said (`0.169.0`), once [`CodexBin::detect_version`] ran.
    pub version: Option<String>,
    /// When `path` was found through the npm launcher: the `@openai/codex` package directory.
    /// Children then get the env the launcher would have set (`CODEX_MANAGED_PACKAGE_ROOT`,
    /// `CODEX_MANAGED_BY_NPM=1`), so codex behaves exactly as when started through it.
    pub package_root: Option<PathBuf>,
}

#[derive(Debug, thiserror::Error)]
pub enum FindError {
    /// [`find_codex`]: `COHOST_CODEX_BIN` is unset and no `codex` is on `PATH`. Install codex or
    /// set the variable.
    #[error("codex not found: {CODEX_BIN_ENV} is not set and no executable `codex` is on PATH")]
    NotFound,
    /// `COHOST_CODEX_BIN` (or a path given to [`resolve_codex_bin`]) names no file.
    #[error("codex binary {path} does not exist")]
    Missing { path: PathBuf },
    /// The binary or the npm launcher could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The npm launcher has no native binary for this platform next to it (the optional
    /// platform package was not installed). `tried` lists where we looked.
    #[error(
        "{launcher} is the npm launcher, but no native codex binary for {target} was found (tried: {tried:?}); reinstall @openai/codex with optional dependencies"
    )]
    NativeMissing {
        launcher: PathBuf,
        target: String,
        tried: Vec<PathBuf>,
    },
    /// The npm launcher supports no native build for this OS/architecture.
    #[error("{launcher} is the npm launcher, and it ships no native codex for {os}/{arch}")]
    UnsupportedPlatform {
        launcher: PathBuf,
        os: &'static str,
        arch: &'static str,
    },
    /// `codex --version` failed or printed no version.
    #[error("`{path} --version` failed: {message}")]
    Version { path: PathBuf, message: String },
    /// `<bin> --version` could not be run at all.
    #[error("`{path} --version` failed: {source}")]
    VersionRun {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl CodexBin {
    /// The version, when [`CodexBin::detect_version`] found one.
    pub fn version(&self) -> Option<&str> {
        self.version.as_deref()
    }

    /// Runs `<bin> --version` with `CODEX_HOME=codex_home` (codex writes helper links under
    /// `$CODEX_HOME/tmp` even for `--version`, so this must not be the user's home), records the
    /// first `x.y.z` it prints and returns it.
    pub async fn detect_version(&mut self, codex_home: &Path) -> Result<String, FindError> {
        let version_error = |message: String| FindError::Version {
            path: self.path.clone(),
            message,
        };
        let mut command = Command::new(&self.path);
        command
            .arg("--version")
            .env("CODEX_HOME", codex_home)
            .stdin(Stdio::null())
            .kill_on_drop(true);
        let output = tokio::time::timeout(VERSION_TIMEOUT, command.output())
            .await
            .map_err(|_| version_error(format!("no answer within {VERSION_TIMEOUT:?}")))?
            .map_err(|source| FindError::VersionRun {
                path: self.path.clone(),
                source,
            })?;
        let stdout = String::from_utf8_lossy(&output.stdout);
        if !output.status.success() {
            let stderr = String::from_utf8_lossy(&output.stderr);
            return Err(version_error(format!(
                "{}: {}",
                output.status,
                stderr.trim()
            )));
        }
        let version = parse_version(&stdout)
            .ok_or_else(|| version_error(format!("no version in {:?}", stdout.trim())))?;
        self.version = Some(version.clone());
        Ok(version)
    }
}

/// The first `x.y.z` (digits and dots, three parts) in `text`, with any `-suffix` it carries.
pub(super) fn parse_version(text: &str) -> Option<String> {
    text.split_whitespace().find_map(|word| {
        let word = word.trim_start_matches('v');
        let core = word.split(['-', '+']).next()?;
        let parts: Vec<&str> = core.split('.').collect();
        let numeric = parts.len() == 3
            && parts
                .iter()
                .all(|part| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()));
        numeric.then(|| word.to_owned())
    })
}

/// Finds the codex binary: `$COHOST_CODEX_BIN` if set, else the first executable `codex` on
/// `PATH`; an npm launcher is resolved to the native binary it wraps ([`resolve_codex_bin`]).
/// The version is not probed here; see [`CodexBin::detect_version`].
pub fn find_codex() -> Result<CodexBin, FindError> {
    find_codex_in(std::env::var_os(CODEX_BIN_ENV), std::env::var_os("PATH"))
}

pub(super) fn find_codex_in(
    env_bin: Option<OsString>,
    path_var: Option<OsString>,
) -> Result<CodexBin, FindError> {
    if let Some(bin) = env_bin.filter(|bin| !bin.is_empty()) {
        return resolve_codex_bin(Path::new(&bin));
    }
    let path_var = path_var.ok_or(FindError::NotFound)?;
    std::env::split_paths(&path_var)
        .filter(|dir| !dir.as_os_str().is_empty())
        .map(|dir| dir.join("codex"))
        .find(|candidate| is_executable_file(candidate))
        .map_or(Err(FindError::NotFound), |found| resolve_codex_bin(&found))
}

fn is_executable_file(path: &Path) -> bool {
    std::fs::metadata(path)
        .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

/// Turns a `codex` path into the binary to spawn. A native binary is returned as is. The npm
/// launcher (`bin/codex.js` of `@openai/codex`, a script whose shebang runs `node`) is resolved
/// like the launcher itself does: the platform package `@openai/codex-<os>-<arch>` found by
/// node's module lookup from the launcher's real directory, then
/// `vendor/<target-triple>/bin/codex` inside it, falling back to the launcher package's own
/// `vendor/` directory. For 0.169.0 on x86_64 Linux that is
/// `…/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex`.
pub fn resolve_codex_bin(path: &Path) -> Result<CodexBin, FindError> {
    if !path.exists() {
        return Err(FindError::Missing {
            path: path.to_owned(),
        });
    }
    if !is_node_script(path)? {
        return Ok(CodexBin {
            path: path.to_owned(),
            version: None,
            package_root: None,
        });
    }
    let read_error = |source| FindError::Read {
        path: path.to_owned(),
        source,
    };
    let launcher = std::fs::canonicalize(path).map_err(read_error)?;
    let unsupported = || FindError::UnsupportedPlatform {
        launcher: launcher.clone(),
        os: std::env::consts::OS,
        arch: std::env::consts::ARCH,
    };
    let (target, platform_package) =
        native_target(std::env::consts::OS, std::env::consts::ARCH).ok_or_else(unsupported)?;
    let bin_dir = launcher.parent().ok_or_else(unsupported)?;
    let package_root = bin_dir.parent().ok_or_else(unsupported)?.to_owned();

    let relative_binary = Path::new("vendor").join(target).join("bin").join("codex");
    let mut tried = Vec::new();
    // node's lookup: `<dir>/node_modules/<package>` for every ancestor that is not itself a
    // `node_modules` directory, nearest first.
    for dir in bin_dir.ancestors() {
        if dir.file_name().is_some_and(|name| name == "node_modules") {
            continue;
        }
        let package_dir = dir.join("node_modules").join(platform_package);
        if package_dir.join("package.json").is_file() {
            let candidate = package_dir.join(&relative_binary);
            if candidate.is_file() {
                return Ok(CodexBin {
                    path: candidate,
                    version: None,
                    package_root: Some(package_root),
                });
            }
            tried.push(candidate);
        }
    }
    let fallback = package_root.join(&relative_binary);
    if fallback.is_file() {
        return Ok(CodexBin {
            path: fallback,
            version: None,
            package_root: Some(package_root),
        });
    }
    tried.push(fallback);
    Err(FindError::NativeMissing {
        launcher,
        target: target.to_owned(),
        tried,
    })
}

/// The launcher's target triple and platform package for an OS/arch pair (its table, minus
/// Windows, which cohost does not run on).
pub(super) fn native_target(os: &str, arch: &str) -> Option<(&'static str, &'static str)> {
    match (os, arch) {
        ("linux" | "android", "x86_64") => {
            Some(("x86_64-unknown-linux-musl", "@openai/codex-linux-x64"))
        }
        ("linux" | "android", "aarch64") => {
            Some(("aarch64-unknown-linux-musl", "@openai/codex-linux-arm64"))
        }
        ("macos", "x86_64") => Some(("x86_64-apple-darwin", "@openai/codex-darwin-x64")),
        ("macos", "aarch64") => Some(("aarch64-apple-darwin", "@openai/codex-darwin-arm64")),
        _ => None,
    }
}

/// Whether the file starts with a `#!` line that mentions `node`.
pub(super) fn is_node_script(path: &Path) -> Result<bool, FindError> {
    let read_error = |source| FindError::Read {
        path: path.to_owned(),
        source,
    };
    let mut file = std::fs::File::open(path).map_err(read_error)?;
    let mut head = [0u8; 256];
    let mut n_read = 0;
    while n_read < head.len() {
        match file.read(&mut head[n_read..]) {
            Ok(0) => break,
            Ok(n) => n_read += n,
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
            Err(err) => return Err(read_error(err)),
        }
    }
    let head = &head[..n_read];
    let first_line = head.split(|byte| *byte == b'\n').next().unwrap_or_default();
    Ok(first_line.starts_with(b"#!") && first_line.windows(4).any(|window| window == b"node"))
}
