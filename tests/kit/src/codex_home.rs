//! An offline `CODEX_HOME` for the real `codex` (see docs/peers.md, "Offline"): the model
//! provider points at a [`super::mock_responses::MockResponses`] (or, in the codex bench, at a
//! closed port), every feature that would reach the network is off, and the work directory is
//! trusted. Also finds the pinned codex binary.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The environment variable the mock provider reads its API key from (`env_key`).
pub const MOCK_API_KEY_ENV: &str = "MOCK_API_KEY";
/// The key codex sends as `Authorization: Bearer …`.
pub const MOCK_API_KEY: &str = "dummy";
/// The environment variable `./scripts/test` exports with the pinned codex executable.
pub const CODEX_BIN_ENV: &str = "COHOST_TEST_CODEX_BIN";

/// Writes `<dir>/config.toml` for an offline codex talking to `mock_base_url`
/// (e.g. `http://127.0.0.1:PORT/v1`), with `workdir` trusted. Creates `dir` if needed and returns
/// the config path. `approval_policy` is `on-request`: `untrusted` in config.toml makes codex
/// 0.169.0 exit (choose it per thread with `thread/start {approvalPolicy}` instead).
pub fn write_codex_home(dir: &Path, mock_base_url: &str, workdir: &Path) -> PathBuf {
    try_write_codex_home(dir, mock_base_url, workdir)
        .unwrap_or_else(|e| panic!("writing the codex home {}: {e}", dir.display()))
}

/// [`write_codex_home`] for callers that report errors rather than panic (the benches).
pub fn try_write_codex_home(
    dir: &Path,
    mock_base_url: &str,
    workdir: &Path,
) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let workdir = workdir
        .canonicalize()
        .unwrap_or_else(|_| workdir.to_path_buf());
    let config = format!(
        r#"model = "mock-model"
model_provider = "mock"
approval_policy = "on-request"
sandbox_mode = "workspace-write"
check_for_update_on_startup = false

[analytics]
enabled = false

[feedback]
enabled = false

[features]
plugins = false
apps = false
remote_plugin = false
plugin_sharing = false
tool_suggest = false
in_app_updates = false

[model_providers.mock]
name = "Mock Responses"
base_url = {base_url}
wire_api = "responses"
env_key = "{MOCK_API_KEY_ENV}"
request_max_retries = 0
stream_max_retries = 0

[projects.{workdir}]
trust_level = "trusted"
"#,
        base_url = toml_string(mock_base_url),
        workdir = toml_string(&workdir.to_string_lossy()),
    );
    let path = dir.join("config.toml");
    std::fs::write(&path, config)?;
    Ok(path)
}

/// A TOML basic string literal.
fn toml_string(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The pinned codex executable from `$COHOST_TEST_CODEX_BIN`. Panics (never skips) when it is
/// unset or missing: `./scripts/test` installs codex and exports the variable.
pub fn codex_bin() -> PathBuf {
    let value = std::env::var_os(CODEX_BIN_ENV).filter(|v| !v.is_empty()).unwrap_or_else(|| {
        panic!(
            "{CODEX_BIN_ENV} is not set: these tests run the real codex CLI. Run ./scripts/test \
             (it installs the pinned @openai/codex releases and exports {CODEX_BIN_ENV}), or \
             export what ./scripts/test --setup-only prints"
        )
    });
    let path = PathBuf::from(value);
    if !path.is_file() {
        panic!(
            "{CODEX_BIN_ENV}={} does not point to an executable file; run ./scripts/test --setup-only to \
             install codex",
            path.display()
        );
    }
    path
}

/// The native codex binary the pinned npm package runs (`vendor/<target>/bin/codex` in the
/// package or in its platform package, as the launcher finds it). Panics, saying where it
/// looked, when there is none.
pub fn native_codex_bin() -> PathBuf {
    let launcher = std::fs::canonicalize(codex_bin()).expect("the codex launcher resolves");
    // `<node_modules>/@openai/codex/bin/codex.js`
    let scope = launcher
        .ancestors()
        .nth(3)
        .expect("the launcher sits in node_modules/@openai/codex/bin")
        .to_path_buf();
    let found = std::fs::read_dir(&scope)
        .into_iter()
        .flatten()
        .flatten()
        .flat_map(|package| {
            std::fs::read_dir(package.path().join("vendor"))
                .into_iter()
                .flatten()
        })
        .flatten()
        .map(|target| target.path().join("bin").join("codex"))
        .find(|candidate| candidate.is_file());
    found.unwrap_or_else(|| {
        panic!(
            "no native codex binary under {}/*/vendor/*/bin/ for the launcher {}",
            scope.display(),
            launcher.display()
        )
    })
}

/// Points `command` at `codex_home` with the mock API key set (`CODEX_HOME`, `MOCK_API_KEY`).
pub fn codex_env<'a>(command: &'a mut Command, codex_home: &Path) -> &'a mut Command {
    command
        .env("CODEX_HOME", codex_home)
        .env(MOCK_API_KEY_ENV, MOCK_API_KEY)
}
