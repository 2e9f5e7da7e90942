//! Launching Claude for `ClaudeHost`: the session directory, `settings.json` (the hooks),
//! `launch.json` (what `cohost-runner` starts, with the environment it passes on), the pane; and
//! relaunching a conversation (`--resume`); a fork is a create with `--resume … --fork-session`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use super::{ClaudeHost, CreateClaude, PERMISSION_TIMEOUT, READY_TIMEOUT, lock};
use crate::protocol::boundary::{Launch, SeedClaude};
use crate::protocol::{EventKind, HostedSessionView, Runtime, SessionCreated};
use crate::runtime::HostError;
use crate::runtime::claude::PermissionPolicy;
use crate::runtime::common::{
    DEFAULT_TMUX_SESSION, new_session_id, send_signal, sibling_binary, which, write_private,
};
use crate::runtime::common::{pane, profile_secrets};

/// Variables passed from the daemon's environment to claude (in the pane, tmux's own
/// environment would apply otherwise).
const FORWARDED_ENV: [&str; 8] = [
    "HOME", "PATH", "LANG", "LC_ALL", "USER", "SHELL", "TMPDIR", "LOGNAME",
];
const FORWARDED_PREFIXES: [&str; 5] = [
    "ANTHROPIC_",
    "CLAUDE_",
    "DISABLE_",
    "IS_SANDBOX",
    "NO_PROXY",
];

/// The hook events cohost registers (MessageDisplay is left out: it is synchronous and slows
/// streaming). Matchers follow the reference: `*` for tool events.
const HOOK_EVENTS: [(&str, &str); 16] = [
    ("SessionStart", ""),
    ("SessionEnd", ""),
    ("UserPromptSubmit", ""),
    ("PreToolUse", "*"),
    ("PostToolUse", "*"),
    ("PostToolUseFailure", "*"),
    ("PostToolBatch", ""),
    ("PermissionRequest", "*"),
    ("Notification", ""),
    ("Stop", ""),
    ("StopFailure", ""),
    ("SubagentStart", ""),
    ("SubagentStop", ""),
    ("PreCompact", ""),
    ("PostCompact", ""),
    ("CwdChanged", ""),
];

/// `COHOST_CLAUDE_BIN`, else `claude` on PATH.
pub fn find_claude() -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os("COHOST_CLAUDE_BIN").filter(|v| !v.is_empty()) {
        let path = PathBuf::from(path);
        return if path.is_file() {
            Ok(path)
        } else {
            Err(format!(
                "COHOST_CLAUDE_BIN={} does not exist",
                path.display()
            ))
        };
    }
    which("claude").ok_or_else(|| {
        "claude not found: set COHOST_CLAUDE_BIN or put `claude` on PATH".to_string()
    })
}

/// The `--settings` JSON registering `cohost-hook` for every event cohost follows, and the
/// permission mode the session starts in (also passed as `--permission-mode`: a user's own
/// settings cannot then put it in another).
pub fn hook_settings(hook_bin: &Path, permission_mode: &str) -> Value {
    let mut hooks = serde_json::Map::new();
    for (event, matcher) in HOOK_EVENTS {
        // Our hook only appends a line, but a loaded machine can take seconds to start it; a
        // hook Claude kills for being slow is an event lost, so the bound is generous.
        let timeout = if event == "PermissionRequest" {
            PERMISSION_TIMEOUT.as_secs() + 30
        } else {
            30
        };
        hooks.insert(
            event.to_string(),
            json!([{ "matcher": matcher, "hooks": [{ "type": "command", "command": format!("{} {event}", hook_bin.display()), "timeout": timeout }] }]),
        );
    }
    json!({ "hooks": hooks, "permissions": { "defaultMode": permission_mode } })
}

/// Writes the session's `settings.json` (cohost's hooks and the permission mode, 0600) in `dir`;
/// answers its path, for `--settings`.
pub(super) fn write_settings(
    dir: &Path,
    hook_bin: &Path,
    permission_mode: &str,
) -> Result<PathBuf, HostError> {
    let settings = dir.join("settings.json");
    write_private(
        &settings,
        hook_settings(hook_bin, permission_mode)
            .to_string()
            .as_bytes(),
    )
    .map_err(|e| {
        HostError::failed_by(
            Runtime::Claude,
            format!("cannot write {}: {e}", settings.display()),
            e,
        )
    })?;
    Ok(settings)
}

impl ClaudeHost {
    /// Starts the claude TUI in a new pane and follows it.
    pub(super) async fn create(
        &self,
        params: CreateClaude,
    ) -> Result<HostedSessionView, HostError> {
        let permission_mode = params
            .permission_mode
            .clone()
            .unwrap_or_else(|| PermissionPolicy::DEFAULT.to_string());
        if let Some(refusal) = self.inner.config.permission_modes.refusal(&permission_mode) {
            return Err(HostError::Invalid(refusal));
        }
        let claude = find_claude().map_err(|e| HostError::unavailable(Runtime::Claude, e))?;
        let hook_bin = sibling_binary("cohost-hook", "COHOST_HOOK_BIN")
            .map_err(|e| HostError::unavailable(Runtime::Claude, e))?;
        let runner_bin = sibling_binary("cohost-runner", "COHOST_RUNNER_BIN")
            .map_err(|e| HostError::unavailable(Runtime::Claude, e))?;
        let session_id = new_session_id();
        let dir = self
            .inner
            .config
            .cohost_home
            .join("claude")
            .join(&session_id);
        std::fs::create_dir_all(dir.join("checkpoints")).map_err(|e| {
            HostError::failed_by(
                Runtime::Claude,
                format!("cannot create {}: {e}", dir.join("checkpoints").display()),
                e,
            )
        })?;
        {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700));
        }
        let settings = write_settings(&dir, &hook_bin, &permission_mode)?;
        let mut argv = vec![
            claude.to_string_lossy().into_owned(),
            "--settings".to_string(),
            settings.to_string_lossy().into_owned(),
        ];
        if let Some(model) = &params.model {
            argv.extend(["--model".to_string(), model.clone()]);
        }
        argv.extend(["--permission-mode".to_string(), permission_mode.clone()]);
        if let Some(profile) = &params.profile {
            argv.extend(profile_argv(profile, &dir)?);
        }
        if let Some((claude_session, _)) = &params.fork_of {
            argv.extend([
                "--resume".to_string(),
                claude_session.clone(),
                "--fork-session".to_string(),
            ]);
        }
        let cwd = params.cwd.clone();
        let profile_env = params
            .profile
            .as_ref()
            .map(|p| p.env.clone())
            .unwrap_or_default();
        self.write_launch(&session_id, &dir, &argv, &cwd, &profile_env)?;
        let created = SessionCreated {
            runtime: Runtime::Claude,
            cwd: cwd.to_string_lossy().into_owned(),
            model: params.model.clone(),
            approval_policy: None,
            permission_mode: Some(permission_mode.as_str().into()),
            sandbox: None,
            budget: None,
            forked_from: params
                .fork_of
                .as_ref()
                .map(|(_, parent)| crate::protocol::ForkOrigin {
                    session_id: parent.clone(),
                    after_turn_id: None,
                }),
            idempotency_key: params.idempotency_key.clone(),
            profile: params
                .profile
                .as_ref()
                .map(|profile| {
                    profile_secrets::record(&self.inner.config.cohost_home, &session_id, profile)
                        .map(Box::new)
                        .map_err(|e| {
                            HostError::failed(
                                Runtime::Claude,
                                format!("cannot keep the profile's secrets: {e}"),
                            )
                        })
                })
                .transpose()?,
        };
        self.inner
            .core
            .append(Some(session_id.clone()), EventKind::SessionCreated(created))
            .await?;
        let tmux_session = params
            .tmux_session
            .clone()
            .unwrap_or_else(|| DEFAULT_TMUX_SESSION.to_string());
        pane::open(
            &self.inner.core,
            &self.inner.tmux,
            &session_id,
            &tmux_session,
            &cwd,
            &runner_bin,
            &dir,
        )
        .await
        .map_err(|e| HostError::failed_by(Runtime::Claude, e.to_string(), e))?;
        let live = self.inner.start_following(&session_id, dir, false);
        // Ready once Claude's SessionStart hook has run.
        let mut started = live.started.subscribe();
        let _ = tokio::time::timeout(READY_TIMEOUT, started.wait_for(|s| *s)).await;
        self.view(&session_id)
    }

    pub(super) fn write_launch(
        &self,
        session_id: &str,
        dir: &Path,
        argv: &[String],
        cwd: &Path,
        profile_env: &std::collections::BTreeMap<String, String>,
    ) -> Result<(), HostError> {
        let mut env = std::collections::BTreeMap::new();
        for (key, value) in std::env::vars() {
            if FORWARDED_ENV.contains(&key.as_str())
                || FORWARDED_PREFIXES.iter().any(|p| key.starts_with(p))
            {
                env.insert(key, Some(value));
            }
        }
        // A profile's environment, under cohost's own variables (set below).
        for (key, value) in profile_env {
            env.insert(key.clone(), Some(value.clone()));
        }
        let mut set = |key: &str, value: String| env.insert(key.to_string(), Some(value));
        set("COHOST_SESSION_DIR", dir.to_string_lossy().into_owned());
        set("COHOST_SESSION_ID", session_id.to_string());
        set(
            "COHOST_SOCKET",
            self.inner.config.socket.to_string_lossy().into_owned(),
        );
        set(
            "COHOST_TOKEN_FILE",
            self.inner.config.token_file.to_string_lossy().into_owned(),
        );
        set(
            "COHOST_PERMISSION_TIMEOUT_SECS",
            PERMISSION_TIMEOUT.as_secs().to_string(),
        );
        // The hook asks before a tool runs under a mode this daemon does not allow (a human
        // cycled to it with shift+tab, or Claude started in it despite the flag).
        set(
            "COHOST_PERMISSION_MODES",
            self.inner.config.permission_modes.allowed().join(","),
        );
        let launch = Launch {
            argv: argv.to_vec(),
            cwd: Some(cwd.to_path_buf()),
            env,
            seed_claude: std::env::var_os("HOME").map(|home| SeedClaude {
                home: PathBuf::from(home),
                api_key: std::env::var("ANTHROPIC_API_KEY").ok(),
                trust_dirs: vec![cwd.to_path_buf()],
            }),
            session_id: None,
        };
        pane::write_launch(dir, &launch).map_err(|e| {
            HostError::failed_by(
                Runtime::Claude,
                format!("could not write {}: {e}", dir.join("launch.json").display()),
                e,
            )
        })
    }

    /// Relaunches the TUI on the same conversation (`--resume <claude session id>`), after it
    /// exited or by making it exit.
    pub(super) async fn relaunch(&self, session_id: &str) -> Result<(), HostError> {
        let live = self.live_session(session_id)?;
        let (claude_session, cwd, pane, profile_env) = self
            .inner
            .core
            .read(|state| {
                state.sessions.get(session_id).map(|s| {
                    (
                        s.thread_id.clone(),
                        s.created.cwd.clone(),
                        s.pane.clone(),
                        s.created
                            .profile
                            .as_ref()
                            .map(|p| {
                                profile_secrets::restore(
                                    &self.inner.config.cohost_home,
                                    session_id,
                                    p,
                                )
                                .env
                            })
                            .unwrap_or_default(),
                    )
                })
            })
            .ok_or_else(|| HostError::UnknownSession(session_id.to_string()))?;
        let claude_session =
            claude_session.ok_or_else(|| HostError::NotReady(session_id.to_string()))?;
        let pane = pane.ok_or_else(|| HostError::NotReady(session_id.to_string()))?;
        let mut argv = pane::read_launch(&live.dir)
            .ok_or_else(|| HostError::failed(Runtime::Claude, "launch.json is missing"))?
            .argv;
        // Drop an earlier --resume/--fork-session (or the --session-id a rehome before the first
        // prompt started with), then resume this conversation.
        let mut cleaned = Vec::new();
        let mut skip = false;
        for arg in argv.drain(..) {
            if skip {
                skip = false;
                continue;
            }
            match arg.as_str() {
                "--resume" | "--session-id" => skip = true,
                "--fork-session" => {}
                _ => cleaned.push(arg),
            }
        }
        cleaned.extend(["--resume".to_string(), claude_session]);
        self.write_launch(
            session_id,
            &live.dir,
            &cleaned,
            Path::new(&cwd),
            &profile_env,
        )?;
        live.started.send_replace(false);
        // Stop a running TUI first and wait for the runner to see it go.
        let running = *lock(&live.claude_pid);
        if let Some(pid) = running {
            send_signal(pid, libc::SIGTERM);
            let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
            while !live.exited.load(std::sync::atomic::Ordering::SeqCst)
                && tokio::time::Instant::now() < deadline
            {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        // The old TUI's last frame stays on screen (with its input box, maybe with text in it)
        // until the new one draws: clear it, so it is never taken for the live box.
        let _ = self
            .tmux()
            .run(&["send-keys", "-R", "-t", &pane.pane_id])
            .await;
        let _ = self
            .tmux()
            .run(&["clear-history", "-t", &pane.pane_id])
            .await;
        // SIGUSR1 asks the runner to launch again (right away if the TUI already exited).
        send_signal(pane.runner_pid, libc::SIGUSR1);
        Ok(())
    }
}

/// What a profile adds to claude's command line: `--effort`, `--append-system-prompt-file`
/// (its instructions, in `instructions.md` in the session's own directory, 0600) and
/// `--mcp-config` with its MCP servers in `mcp.json` in the session's own
/// directory (0600: a server's `env` and `headers` may hold secrets). `--resume` keeps them on a
/// relaunch, the launch's argv being kept.
fn profile_argv(
    profile: &crate::protocol::SessionProfile,
    dir: &Path,
) -> Result<Vec<String>, HostError> {
    let mut argv = Vec::new();
    if let Some(effort) = &profile.effort {
        argv.extend(["--effort".to_string(), effort.clone()]);
    }
    if let Some(instructions) = &profile.instructions {
        // A file, not the text itself: an argv is visible to every user (`ps`). Both supported
        // releases (2.1.197, 2.1.332) take `--append-system-prompt-file`: an option hidden from
        // `--help` but named in its `--bare` text, read as UTF-8 at start.
        let path = dir.join("instructions.md");
        write_private(&path, instructions.as_bytes()).map_err(|e| {
            HostError::failed_by(
                Runtime::Claude,
                format!("cannot write {}: {e}", path.display()),
                e,
            )
        })?;
        argv.extend([
            "--append-system-prompt-file".to_string(),
            path.to_string_lossy().into_owned(),
        ]);
    }
    if !profile.mcp_servers.is_empty() {
        let servers: serde_json::Map<String, Value> = profile
            .mcp_servers
            .iter()
            .map(|(name, server)| {
                let config = match (&server.command, &server.url) {
                    (Some(command), _) => json!({
                        "type": "stdio",
                        "command": command,
                        "args": server.args,
                        "env": server.env,
                    }),
                    (None, url) => json!({
                        "type": "http",
                        "url": url,
                        "headers": server.headers,
                    }),
                };
                (name.clone(), config)
            })
            .collect();
        let path = dir.join("mcp.json");
        write_private(
            &path,
            json!({ "mcpServers": servers }).to_string().as_bytes(),
        )
        .map_err(|e| {
            HostError::failed_by(
                Runtime::Claude,
                format!("cannot write {}: {e}", path.display()),
                e,
            )
        })?;
        argv.extend([
            "--mcp-config".to_string(),
            path.to_string_lossy().into_owned(),
        ]);
    }
    Ok(argv)
}

/// The parent conversation of a fork: `--resume <id>` with `--fork-session` in `launch.json`.
pub(super) fn fork_parent(dir: &Path) -> Option<String> {
    let launch = pane::read_launch(dir)?;
    let argv: Vec<&str> = launch.argv.iter().map(String::as_str).collect();
    if !argv.contains(&"--fork-session") {
        return None;
    }
    let at = argv.iter().position(|a| *a == "--resume")?;
    argv.get(at + 1).map(|id| id.to_string())
}
