//! Validated configuration, built from the CLI and the environment.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

use crate::cli::ServeArgs;
use crate::core::event_log::{FsyncPolicy, LogConfig};
use crate::core::tracker::TrackerConfig;
use crate::runtime::claude::PermissionPolicy;

pub const DEFAULT_LISTEN: &str = "127.0.0.1:7391";

/// Everything `cohost serve` needs.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    pub home: PathBuf,
    pub listen: SocketAddr,
    pub tmux_socket: Option<PathBuf>,
    pub allow_remote: bool,
    pub fsync: FsyncPolicy,
    pub segment_bytes: u64,
    pub retain_bytes: u64,
    pub tracker: TrackerConfig,
    /// Canonical project roots under which MCP clients may start sessions.
    pub mcp_roots: Vec<PathBuf>,
    /// The Claude permission modes sessions may use.
    pub permission_modes: PermissionPolicy,
    /// HTTP connection cap and timeouts.
    pub http: crate::http::server::Limits,
    /// The passive watchers to run (`--watchers`, `--no-watchers`, `COHOST_WATCHERS`).
    pub watchers: Vec<crate::watch::format::WatchedAgent>,
}

impl ServeConfig {
    pub fn log(&self) -> LogConfig {
        LogConfig {
            dir: self.home.join("log"),
            quarantine: self.home.join("quarantine.jsonl"),
            segment_bytes: self.segment_bytes,
            retain_bytes: self.retain_bytes,
            fsync: self.fsync,
        }
    }

    pub fn from_args(
        home: Option<PathBuf>,
        listen: Option<String>,
        args: &ServeArgs,
    ) -> anyhow::Result<Self> {
        let home = resolve_home(home)?;
        let listen_text = listen.unwrap_or_else(|| DEFAULT_LISTEN.to_string());
        let listen: SocketAddr = listen_text
            .parse()
            .with_context(|| format!("--listen `{listen_text}` is not an IP:PORT address"))?;
        if !listen.ip().is_loopback() && !args.allow_remote {
            bail!(
                "refusing to listen on non-loopback address {listen}: pass --allow-remote if you mean it"
            );
        }
        if args.segment_mb == 0 {
            bail!("--segment-mb must be at least 1");
        }
        if args.retain_mb < args.segment_mb {
            bail!(
                "--retain-mb ({}) must be at least --segment-mb ({})",
                args.retain_mb,
                args.segment_mb
            );
        }
        if args.max_connections == 0 {
            bail!("--max-connections must be at least 1");
        }
        if args.header_timeout == 0 || args.body_timeout == 0 {
            bail!("--header-timeout and --body-timeout must be at least 1 second");
        }
        if args.stale_after == 0 || args.prune_after == 0 {
            bail!("--stale-after and --prune-after must be at least 1 second");
        }
        let mut mcp_roots = Vec::new();
        for root in args
            .mcp_allowed_roots
            .iter()
            .filter(|r| !r.as_os_str().is_empty())
        {
            let canonical = root.canonicalize().with_context(|| {
                format!(
                    "--mcp-allowed-root {} is not an existing directory",
                    root.display()
                )
            })?;
            if !canonical.is_dir() {
                bail!("--mcp-allowed-root {} is not a directory", root.display());
            }
            mcp_roots.push(canonical);
        }
        let permission_modes = PermissionPolicy::allowing(&args.allow_permission_modes)?;
        let watchers = if args.no_watchers {
            Vec::new()
        } else {
            match &args.watchers {
                Some(text) => crate::watch::parse_watchers(text)
                    .map_err(|error| anyhow::anyhow!("--watchers: {error}"))?,
                None => crate::watch::implemented(),
            }
        };
        Ok(ServeConfig {
            watchers,
            mcp_roots,
            permission_modes,
            http: crate::http::server::Limits {
                max_connections: args.max_connections,
                header_timeout: std::time::Duration::from_secs(args.header_timeout),
                body_timeout: std::time::Duration::from_secs(args.body_timeout),
            },
            home,
            listen,
            tmux_socket: args.tmux_socket.clone(),
            allow_remote: args.allow_remote,
            fsync: args.fsync,
            segment_bytes: args.segment_mb * 1024 * 1024,
            retain_bytes: args.retain_mb * 1024 * 1024,
            tracker: TrackerConfig {
                stale_after_ms: args.stale_after * 1000,
                prune_after_ms: args.prune_after * 1000,
                max_logs: args.max_logs.max(1),
                ..TrackerConfig::default()
            },
        })
    }
}

/// `COHOST_HOME`, else `$XDG_STATE_HOME/cohost`, else `~/.local/state/cohost`.
pub fn resolve_home(home: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    if let Some(home) = home.filter(|h| !h.as_os_str().is_empty()) {
        return Ok(absolute(&home));
    }
    if let Some(state) = std::env::var_os("XDG_STATE_HOME").filter(|v| !v.is_empty()) {
        return Ok(absolute(Path::new(&state)).join("cohost"));
    }
    let Some(user_home) = std::env::var_os("HOME").filter(|v| !v.is_empty()) else {
        bail!("cannot find a state directory: set COHOST_HOME (or XDG_STATE_HOME or HOME)");
    };
    Ok(PathBuf::from(user_home).join(".local/state/cohost"))
}

fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}
