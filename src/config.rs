//! Validated configuration, built from the CLI, the environment and the config file
//! ([`file`]: precedence flags > environment > file > defaults).

pub mod file;

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
    /// `--notify-command`: run once per notification (see `notifier`).
    pub notify_command: Option<String>,
    /// This machine's name (`--machine`, default the host name): see `federation::names`.
    pub machine: String,
    /// `--nats`: publish the log into NATS JetStream (see `federation`).
    pub nats: Option<crate::federation::NatsConfig>,
    /// `--hub`: view every other machine publishing into the NATS server; a machine silent
    /// for this long is shown `down` (`--hub-down-after`).
    pub hub: Option<std::time::Duration>,
    /// `--hub-memory-mb`: the bytes of each machine's events a hub holds in memory.
    pub hub_memory: usize,
    /// `--nats-commands`: answer a hub's commands (see `federation::commands`).
    pub nats_commands: bool,
    /// The config file's agent profiles (`[profiles.NAME]`), validated.
    pub profiles: crate::service::profiles::Profiles,
    /// The config file they are read from again on a reload, and whether it must exist (it was
    /// named, or it existed at start); `None` without `with_profiles` (tests).
    pub profiles_file: Option<(PathBuf, bool)>,
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

    /// Validates the settings; an error names each bad setting where it came from (`origins`:
    /// the flag, the environment variable, or the key and the config file).
    pub fn from_settings(
        home: Option<PathBuf>,
        listen: Option<String>,
        args: &ServeArgs,
        origins: &file::Origins,
    ) -> anyhow::Result<Self> {
        let name = |key: &str| origins.name(key);
        let home = resolve_home(home)?;
        let listen_text = listen.unwrap_or_else(|| DEFAULT_LISTEN.to_string());
        let listen: SocketAddr = listen_text.parse().with_context(|| {
            format!(
                "{} `{listen_text}` is not an IP:PORT address",
                name("listen")
            )
        })?;
        if !listen.ip().is_loopback() && !args.allow_remote {
            bail!(
                "refusing to listen on non-loopback address {listen}: pass --allow-remote (or `allow-remote = true`) if you mean it"
            );
        }
        if args.segment_mb == 0 {
            bail!("{} must be at least 1", name("segment-mb"));
        }
        if args.retain_mb < args.segment_mb {
            bail!(
                "{} ({}) must be at least {} ({})",
                name("retain-mb"),
                args.retain_mb,
                name("segment-mb"),
                args.segment_mb
            );
        }
        if args.max_connections == 0 {
            bail!("{} must be at least 1", name("max-connections"));
        }
        for (key, value) in [
            ("header-timeout", args.header_timeout),
            ("body-timeout", args.body_timeout),
            ("write-timeout", args.write_timeout),
            ("stale-after", args.stale_after),
            ("prune-after", args.prune_after),
        ] {
            if value == 0 {
                bail!("{} must be at least 1 second", name(key));
            }
        }
        let mut mcp_roots = Vec::new();
        for root in args
            .mcp_allowed_roots
            .iter()
            .filter(|r| !r.as_os_str().is_empty())
        {
            let canonical = root.canonicalize().with_context(|| {
                format!(
                    "{} {} is not an existing directory",
                    name("mcp-allowed-roots"),
                    root.display()
                )
            })?;
            if !canonical.is_dir() {
                bail!(
                    "{} {} is not a directory",
                    name("mcp-allowed-roots"),
                    root.display()
                );
            }
            file::check_root_dir(&canonical, &name("mcp-allowed-roots"))?;
            mcp_roots.push(canonical);
        }
        let notify_command = args.notify_command.clone().filter(|c| !c.trim().is_empty());
        if let Some(command) = &notify_command {
            file::check_notify_program(command, &name("notify-command"))?;
        }
        let permission_modes = PermissionPolicy::allowing(&args.allow_permission_modes)
            .with_context(|| name("allow-permission-modes"))?;
        let watchers = if args.no_watchers {
            Vec::new()
        } else {
            match &args.watchers {
                Some(text) => crate::watch::parse_watchers(text)
                    .map_err(|error| anyhow::anyhow!("{}: {error}", name("watchers")))?,
                None => crate::watch::implemented(),
            }
        };
        let machine = match args.machine.as_deref().filter(|m| !m.is_empty()) {
            Some(machine) => {
                crate::federation::names::check_machine(machine)
                    .map_err(|reason| anyhow::anyhow!("{}: {reason}", name("machine")))?;
                machine.to_string()
            }
            None => {
                crate::federation::names::default_machine(&crate::federation::names::host_name())
            }
        };
        let nats = match args.nats_url.as_deref().filter(|u| !u.trim().is_empty()) {
            Some(url) => Some(crate::federation::NatsConfig::check(
                url.trim(),
                args.nats_creds.clone(),
                args.nats_user_file.clone(),
                args.nats_tls,
                args.nats_ca.clone(),
                name,
            )?),
            None => None,
        };
        if args.hub_down_after == 0 {
            bail!("{} must be at least 1 second", name("hub-down-after"));
        }
        if !(1..=1 << 20).contains(&args.hub_memory_mb) {
            bail!(
                "{} must be between 1 and 1048576 (MiB of each machine's events held in memory)",
                name("hub-memory-mb")
            );
        }
        let hub = if args.hub {
            if nats.is_none() {
                bail!(
                    "{} views the machines publishing into a NATS server: name it with {}",
                    name("hub"),
                    name("nats-url")
                );
            }
            Some(std::time::Duration::from_secs(args.hub_down_after))
        } else {
            None
        };
        if args.nats_commands && nats.is_none() {
            bail!(
                "{} takes commands through a NATS server: name it with {}",
                name("nats-commands"),
                name("nats-url")
            );
        }
        Ok(ServeConfig {
            machine,
            nats,
            hub,
            hub_memory: (args.hub_memory_mb as usize) << 20,
            nats_commands: args.nats_commands,
            profiles: Default::default(),
            profiles_file: None,
            watchers,
            notify_command,
            mcp_roots,
            permission_modes,
            http: crate::http::server::Limits {
                max_connections: args.max_connections,
                header_timeout: std::time::Duration::from_secs(args.header_timeout),
                body_timeout: std::time::Duration::from_secs(args.body_timeout),
                write_timeout: std::time::Duration::from_secs(args.write_timeout),
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

impl ServeConfig {
    /// Validates the config file's `[profiles.NAME]` tables (`settings.profiles`) against the
    /// runtimes and the permission modes this daemon allows; an error names the profile, the
    /// key and the file, and stops the start.
    pub fn with_profiles(mut self, settings: &file::Settings) -> anyhow::Result<Self> {
        if let Some(table) = &settings.profiles {
            self.profiles = parse_profiles(table, &settings.file, &self.permission_modes)
                .map_err(|error| anyhow::anyhow!("{error}; nothing was started"))?;
        }
        let must_exist = settings.file_found
            || std::env::var_os(file::CONFIG_ENV).is_some_and(|v| !v.is_empty());
        self.profiles_file = Some((settings.file.clone(), must_exist));
        Ok(self)
    }

    /// What reads the profiles again (`POST /api/profiles/reload`, SIGHUP): the config file
    /// of the start, validated as then; `None` without one.
    pub fn profiles_reload(&self) -> Option<crate::service::profiles::Reload> {
        let (path, must_exist) = self.profiles_file.clone()?;
        let modes = self.permission_modes.clone();
        Some(std::sync::Arc::new(move || {
            reload_profiles(&path, must_exist, &modes).map_err(|error| format!("{error:#}"))
        }))
    }
}

fn parse_profiles(
    table: &toml::Value,
    path: &Path,
    modes: &PermissionPolicy,
) -> Result<crate::service::profiles::Profiles, crate::service::profiles::ProfileError> {
    let read = crate::service::profiles::read_beside(path);
    let refuses = |mode: &str| modes.refusal(mode);
    crate::service::profiles::parse(table, path, &read, &refuses)
}

/// The `[profiles.*]` tables of the config file at `path`, read and validated again (the
/// file's other settings are not): no file (when it need not exist) or no table is no
/// profiles.
pub fn reload_profiles(
    path: &Path,
    must_exist: bool,
    modes: &PermissionPolicy,
) -> anyhow::Result<crate::service::profiles::Profiles> {
    let Some(mut table) = file::load(path, must_exist)? else {
        return Ok(Default::default());
    };
    match table.remove(file::PROFILES_TABLE) {
        Some(profiles) => Ok(parse_profiles(&profiles, path, modes)?),
        None => Ok(Default::default()),
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
