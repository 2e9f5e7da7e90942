//! Wiring for `cohost serve`: state directory, token, core, tmux cache and hooks, HTTP server,
//! background ticks, and the shutdown order.
//!
//! Shutdown order: the HTTP server stops accepting and open streams end (cancellation token),
//! then cohost's tmux hooks are removed, then the core writes `daemon.stopped`, syncs the log and
//! snapshots the state. The caller's `shutdown` future decides when; a second signal is handled
//! in `main` and forces exit. A core that failed (a batch panicked: `core/inputs.rs`) starts the
//! same shutdown, without `daemon.stopped`, and `run` returns its error, so `cohost serve` exits
//! non-zero and a supervisor (`cohost service install`: `Restart=on-failure`) starts it again.
//! A panic in one of the daemon-long tasks ([`Essential`]: the task queue's dispatcher, the
//! ticks, the tmux poll, the hosts' background work, …) does not stop the daemon: it is logged
//! and shown by `/api/health` and `cohost doctor` (`service/failures.rs`), so that work does not
//! stop without a word.

use std::fs::{self, OpenOptions};
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use tokio_util::sync::CancellationToken;

use crate::config::ServeConfig;
use crate::core::{self, CoreConfig, TICK_INTERVAL};
use crate::http::{self, AppState};
use crate::runtime::{Hosts, HostsConfig};
use crate::service::{Service, TaskFailures};
use crate::tasks::TaskManager;
use crate::tmux::{SessionCache, Tmux, shell_quote};
use crate::watch::{WatchConfig, WatchHandle, WatchLimits};

/// How often the tmux session list is re-read even without a hook: a safety net for a server
/// that was restarted (hooks gone) or hooks that failed to run. Lookups that miss refresh at once.
const TMUX_POLL_INTERVAL: Duration = Duration::from_secs(5);
/// How long open connections get to finish once shutdown starts.
const HTTP_DRAIN: Duration = Duration::from_secs(5);

pub use crate::protocol::{DAEMON_FILE, DaemonFile};
pub const TOKEN_FILE: &str = "token";

/// Runs the daemon until `shutdown` completes. `on_listening` gets the bound address.
pub async fn run(
    config: ServeConfig,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    on_listening: impl FnOnce(SocketAddr),
) -> anyhow::Result<()> {
    // Before anything is written: a home in a newer format than this build reads is refused
    // untouched (see core::format).
    let manifest = crate::core::format::check_home(&config.home)?;
    prepare_home(&config.home)?;
    let _lock = crate::core::home_lock::lock_home(&config.home)?;
    let token = load_or_create_token(&config.home)?;
    // A clean exit removes daemon.json: one still there is a predecessor that was killed.
    let predecessor = read_daemon_file(&config.home);

    let (core, core_thread, info) = core::start(CoreConfig {
        home: config.home.clone(),
        log: config.log(),
        tracker: config.tracker,
    })?;
    crate::core::format::write_manifest(&config.home, manifest.as_ref()).with_context(|| {
        format!(
            "failed to write {}",
            config.home.join(crate::core::format::FILE).display()
        )
    })?;
    tracing::info!(
        head = info.head,
        snapshot = info.snapshot_seq,
        replayed = info.replayed,
        truncated_bytes = info.truncated_bytes,
        "state restored from the event log"
    );

    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("failed to listen on {}", config.listen))?;
    let local_addr = listener.local_addr()?;
    let socket = bind_socket(&config.home)?;

    let tmux = Tmux::new(config.tmux_socket.clone());
    let sessions = Arc::new(SessionCache::new(tmux.clone()));
    let hooks = HookInstaller::new(&config.home)?;
    if let Some(predecessor) = predecessor {
        remove_predecessor_hooks(&predecessor, hooks.index).await;
    }
    let initial = sessions.refresh().await;
    if initial.running {
        hooks.install(&tmux).await;
    }

    let hosts = Hosts::start(
        core.clone(),
        Arc::clone(&sessions),
        HostsConfig {
            home: config.home.clone(),
            socket: config.home.join(crate::local_socket::SOCKET_FILE),
            token_file: config.home.join(TOKEN_FILE),
            permission_modes: config.permission_modes.clone(),
        },
    )
    .await;

    let watch = WatchHandle::start(
        WatchConfig {
            agents: config.watchers.clone(),
            env: crate::watch::process_env(),
            state_dir: config.home.join("watch"),
            limits: watch_limits_from_env(),
        },
        core.clone(),
        Arc::clone(&sessions),
    )
    .context("failed to start the watchers")?;
    if watch.enabled() {
        tracing::info!(watchers = ?config.watchers, "passive watchers started");
    }

    let cancel = CancellationToken::new();
    let queue = TaskManager::new(core.clone(), hosts.clone());
    let service = Service::new(crate::service::ServiceParts {
        core: core.clone(),
        tmux: Arc::clone(&sessions),
        hosts: hosts.clone(),
        tasks: queue.clone(),
        mcp_roots: config.mcp_roots.clone(),
        shutdown: cancel.clone(),
        watch: watch.clone(),
        profiles: config.profiles.clone(),
        profiles_reload: config.profiles_reload(),
    })
    .with_machine(
        &config.machine,
        config.nats.as_ref().map(|nats| {
            Arc::new(std::sync::Mutex::new(
                crate::federation::Publisher::initial_status(nats, &config.machine),
            ))
        }),
    );
    let hub_world = config
        .hub
        .map(|down_after| crate::service::HubWorld::new(down_after, config.hub_memory));
    if let Some(world) = &hub_world {
        world.open_tasks(&config.home)?;
    }
    let service = match &hub_world {
        Some(world) => service.with_hub(Arc::clone(world)),
        None => service,
    };
    let hub = hub_world
        .zip(config.nats.clone())
        .map(|(world, nats)| crate::federation::Hub {
            world,
            home: config.home.clone(),
            machine: config.machine.clone(),
            nats,
            status: service.federation_status().unwrap_or_default(),
        });
    let commands = config
        .nats
        .clone()
        .filter(|_| config.nats_commands)
        .map(|nats| crate::federation::Commands {
            service: service.clone(),
            machine: config.machine.clone(),
            nats,
            status: service.federation_status().unwrap_or_default(),
        });
    let publisher = config
        .nats
        .clone()
        .map(|nats| crate::federation::Publisher {
            core: core.clone(),
            service: service.clone(),
            home: config.home.clone(),
            machine: config.machine.clone(),
            nats,
            status: service.federation_status().unwrap_or_default(),
        });
    let state = AppState::new(crate::http::AppStateParts {
        service: service.clone(),
        token: token.into(),
        local_addr,
        allow_remote: config.allow_remote,
        shutdown: cancel.clone(),
        body_timeout: config.http.body_timeout,
    });

    let tasks = Essential::new(service.task_failures());
    tasks.spawn(
        "the peers' report",
        log_peers(hosts.clone(), cancel.clone()),
    );
    tasks.spawn("the tick loop", tick_loop(core.clone(), cancel.clone()));
    tasks.spawn(
        "the profiles' reload on SIGHUP",
        reload_on_hangup(service.clone(), cancel.clone()),
    );
    if let Some(command) = config.notify_command.clone() {
        tasks.spawn(
            "the notify command's runner",
            crate::notifier::run(command, core.clone(), cancel.clone()),
        );
    }
    tasks.spawn("the task queue's dispatcher", queue.run(cancel.clone()));
    if let Some(publisher) = publisher {
        tracing::info!(machine = %config.machine, url = %publisher.nats.url, "publishing into NATS JetStream");
        tasks.spawn("the NATS publisher", publisher.run(cancel.clone()));
    }
    if let Some(commands) = commands {
        tasks.spawn("the NATS commands' server", commands.run(cancel.clone()));
    }
    if let Some(hub) = hub {
        tracing::info!(machine = %config.machine, url = %hub.nats.url, "viewing the other machines through NATS JetStream (hub)");
        tasks.spawn("the hub", hub.run(cancel.clone()));
        tasks.spawn(
            "the hub's task delivery",
            service.clone().deliver_hub_tasks(cancel.clone()),
        );
    }
    tasks.spawn(
        "the adoptions' give-back",
        service.clone().give_back_ended_adoptions(cancel.clone()),
    );
    for host in hosts.all() {
        let host = Arc::clone(host);
        let cancel = cancel.clone();
        tasks.spawn("a runtime's background work", async move {
            host.background(cancel).await
        });
    }
    tasks.spawn(
        "the tmux poll",
        tmux_poll_loop(Arc::clone(&sessions), hooks.clone(), cancel.clone()),
    );

    write_daemon_file(&config.home, local_addr, config.tmux_socket.clone())?;
    tracing::info!(%local_addr, home = %config.home.display(), "cohost listening");
    on_listening(local_addr);

    let server_cancel = cancel.clone();
    let limits = http::server::Limits {
        max_connections: http::server::fit_connection_cap(config.http.max_connections),
        ..config.http
    };
    // The MCP endpoint sits beside the HTTP routes, behind the same guard.
    let mounted = axum::Router::new().route_service(
        "/mcp",
        crate::mcp::http_service(service.clone(), http::MAX_BODY_BYTES),
    );
    let server = http::server::serve(listener, socket, http::router(state, mounted), limits, {
        let failed = core.failed();
        async move {
            tokio::select! {
                () = shutdown => {}
                () = failed => {}
            }
            server_cancel.cancel();
        }
    });
    let server_result = {
        let serve = server;
        tokio::pin!(serve);
        tokio::select! {
            result = &mut serve => result,
            _ = async { cancel.cancelled().await; tokio::time::sleep(HTTP_DRAIN).await } => {
                tracing::warn!("connections still open after {HTTP_DRAIN:?}; closing them");
                Ok(())
            }
        }
    };
    cancel.cancel();
    tasks.tracker.close();
    if tokio::time::timeout(Duration::from_secs(2), tasks.tracker.wait())
        .await
        .is_err()
    {
        tracing::warn!("background tasks did not stop in time");
    }

    for host in hosts.all() {
        host.shutdown().await;
    }
    // The watchers save their checkpoint while the core still takes their last updates.
    watch.stop().await;
    if let Err(error) = tmux.remove_hooks(hooks.index).await {
        tracing::warn!(%error, "failed to remove cohost's tmux hooks");
    }
    core.shutdown().await;
    let _ = tokio::task::spawn_blocking(move || core_thread.join()).await;
    let _ = fs::remove_file(config.home.join(DAEMON_FILE));
    let _ = fs::remove_file(config.home.join(crate::local_socket::SOCKET_FILE));
    if let Some(failure) = core.failure() {
        bail!(
            "the core stopped taking events ({failure}); cohost stopped without daemon.stopped, and the next start recovers from the log"
        );
    }
    tracing::info!("cohost stopped");
    server_result.context("the HTTP server failed")
}

/// The daemon-long tasks, tracked for the shutdown. A panic in one is logged and recorded for
/// `/api/health` and `cohost doctor`: the work it did would otherwise stop without a word
/// (queued prompts never sent, instances never aged, the tmux cache never refreshed).
struct Essential {
    tracker: tokio_util::task::TaskTracker,
    failures: TaskFailures,
}

impl Essential {
    fn new(failures: TaskFailures) -> Self {
        Essential {
            tracker: tokio_util::task::TaskTracker::new(),
            failures,
        }
    }

    fn spawn(
        &self,
        name: &'static str,
        task: impl std::future::Future<Output = ()> + Send + 'static,
    ) {
        use futures_util::FutureExt as _;
        let failures = self.failures.clone();
        self.tracker.spawn(async move {
            if let Err(payload) = std::panic::AssertUnwindSafe(task).catch_unwind().await {
                let message = core::panic_message(payload.as_ref());
                tracing::error!(task = name, panic = %message, "a daemon task panicked; its work stopped until cohost restarts");
                failures.record(name, &message);
            }
        });
    }
}

/// The watchers' limits, with two knobs the tests and the bench use to reach the degraded mode
/// quickly: `COHOST_WATCH_MAX_WATCHES` (pretend the inotify limit is this many directories) and
/// `COHOST_WATCH_RESCAN_MS` (how often unwatched directories are re-listed).
fn watch_limits_from_env() -> WatchLimits {
    let number = |name: &str| {
        std::env::var(name)
            .ok()
            .and_then(|value| value.trim().parse::<u64>().ok())
    };
    let mut limits = WatchLimits::default();
    if let Some(max) = number("COHOST_WATCH_MAX_WATCHES") {
        limits.max_watches = usize::try_from(max).ok();
    }
    if let Some(ms) = number("COHOST_WATCH_RESCAN_MS").filter(|ms| *ms > 0) {
        limits.rescan_interval = Duration::from_millis(ms);
    }
    limits
}

/// SIGHUP reads the config file's profiles again, as `POST /api/profiles/reload` does; the
/// outcome goes to the log (on an error the old profiles stay).
async fn reload_on_hangup(service: Service, cancel: CancellationToken) {
    use tokio::signal::unix::{SignalKind, signal};
    let mut hangup = match signal(SignalKind::hangup()) {
        Ok(hangup) => hangup,
        Err(error) => {
            tracing::warn!(%error, "cannot install the SIGHUP handler: profiles reload over HTTP only");
            return;
        }
    };
    loop {
        tokio::select! {
            _ = cancel.cancelled() => break,
            _ = hangup.recv() => match service.reload_profiles() {
                Ok(list) => tracing::info!(
                    profiles = ?list.profiles.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(),
                    "SIGHUP: profiles reloaded"
                ),
                Err(error) => tracing::error!("SIGHUP: profiles not reloaded: {error}"),
            },
        }
    }
}

async fn tick_loop(core: core::CoreHandle, cancel: CancellationToken) {
    let mut interval = tokio::time::interval(TICK_INTERVAL);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tokio::select! {
            _ = cancel.cancelled() => break,
            _ = interval.tick() => core.tick(),
        }
    }
    tracing::debug!("tick loop exited: shutdown");
}

async fn tmux_poll_loop(
    sessions: Arc<SessionCache>,
    hooks: HookInstaller,
    cancel: CancellationToken,
) {
    let mut hooked_pid = sessions.get().server_pid.filter(|_| sessions.get().running);
    let mut interval = tokio::time::interval(TMUX_POLL_INTERVAL);
    interval.tick().await;
    loop {
        tokio::select! {
            _ = cancel.cancelled() => break,
            _ = interval.tick() => {}
        }
        let list = sessions.refresh().await;
        // A server that (re)started since we last hooked it needs the hooks again.
        if list.running && list.server_pid != hooked_pid {
            hooks.install(sessions.tmux()).await;
            hooked_pid = list.server_pid;
        }
    }
    tracing::debug!("tmux poll loop exited: shutdown");
}

/// Installs the tmux hooks that report focus and session changes back to this daemon.
#[derive(Clone)]
struct HookInstaller {
    index: u32,
    focus_command: String,
    changed_command: String,
}

impl HookInstaller {
    /// The hooks run `cohost` with this home: it reaches the daemon over the home's socket.
    fn new(home: &Path) -> anyhow::Result<Self> {
        let exe =
            std::env::current_exe().context("cannot find the cohost executable for tmux hooks")?;
        let prefix = format!(
            "COHOST_HOME={} {}",
            shell_quote(&home.to_string_lossy()),
            shell_quote(&exe.to_string_lossy()),
        );
        Ok(HookInstaller {
            index: hook_index(home),
            focus_command: format!("{prefix} focus --source tmux"),
            changed_command: format!("{prefix} tmux-refresh"),
        })
    }

    async fn install(&self, tmux: &Tmux) {
        match tmux
            .install_hooks(self.index, &self.focus_command, &self.changed_command)
            .await
        {
            Ok(()) => tracing::info!(index = self.index, "installed tmux hooks"),
            Err(error) => tracing::warn!(%error, "failed to install tmux hooks"),
        }
    }
}

/// A hook array index derived from the state directory, so two daemons with different homes on
/// one tmux server do not overwrite each other's hooks.
fn hook_index(home: &Path) -> u32 {
    let mut hash: u32 = 0x811c_9dc5;
    for byte in home.as_os_str().as_encoded_bytes() {
        hash ^= u32::from(*byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    1000 + hash % 9000
}

/// Listens on the home's Unix socket (see [`crate::local_socket`]), mode 0600 inside the 0700
/// home. A file left there by a daemon that was killed is replaced: the home lock, held by now,
/// says no other daemon serves this home.
fn bind_socket(home: &Path) -> anyhow::Result<tokio::net::UnixListener> {
    let path = home.join(crate::local_socket::SOCKET_FILE);
    match fs::symlink_metadata(&path) {
        Ok(meta) if meta.file_type().is_dir() => {
            anyhow::bail!(
                "{} is a directory: cohost's socket goes there; move it away",
                path.display()
            )
        }
        Ok(_) => {
            fs::remove_file(&path)
                .with_context(|| format!("failed to remove the old socket {}", path.display()))?;
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => {
            return Err(error).with_context(|| format!("cannot look at {}", path.display()));
        }
    }
    // sun_path holds 108 bytes with its final NUL.
    let length = path.as_os_str().len();
    if length > 107 {
        anyhow::bail!(
            "the socket path {} is {length} bytes, longer than a Unix socket path may be (107): choose a shorter COHOST_HOME",
            path.display()
        );
    }
    let socket = tokio::net::UnixListener::bind(&path)
        .with_context(|| format!("failed to listen on {}", path.display()))?;
    fs::set_permissions(&path, fs::Permissions::from_mode(0o600))
        .with_context(|| format!("failed to restrict {}", path.display()))?;
    Ok(socket)
}

fn prepare_home(home: &Path) -> anyhow::Result<()> {
    fs::create_dir_all(home).with_context(|| format!("failed to create {}", home.display()))?;
    fs::set_permissions(home, fs::Permissions::from_mode(0o700))
        .with_context(|| format!("failed to restrict {}", home.display()))?;
    Ok(())
}

/// The longest token file read (a token is 64 hex digits and a newline).
const MAX_TOKEN_FILE_BYTES: u64 = 4096;

/// Reads the token, or creates a random one with mode 0600 on first start. The file is opened
/// without following links and must be a regular file of this user (a FIFO is refused at once,
/// not waited on); one readable by others is tightened through its descriptor.
pub fn load_or_create_token(home: &Path) -> anyhow::Result<String> {
    let path = home.join(TOKEN_FILE);
    match crate::core::private_file::open(&path, false)? {
        Some(file) => {
            let mode = file.metadata()?.permissions().mode();
            if mode & 0o077 != 0 {
                tracing::warn!(path = %path.display(), "the token file was readable by others; restricting it to 0600");
                file.set_permissions(fs::Permissions::from_mode(0o600))
                    .with_context(|| format!("failed to restrict {}", path.display()))?;
            }
            let mut token = String::new();
            file.take(MAX_TOKEN_FILE_BYTES)
                .read_to_string(&mut token)
                .with_context(|| format!("failed to read {}", path.display()))?;
            let token = token.trim().to_string();
            if token.len() < 32 {
                bail!(
                    "the token in {} is too short; delete it to have a new one made",
                    path.display()
                );
            }
            Ok(token)
        }
        None => {
            let mut bytes = [0u8; 32];
            getrandom::fill(&mut bytes)
                .map_err(|e| anyhow::anyhow!("no randomness for the token: {e}"))?;
            let token: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
            // `create_new` never follows a link planted meanwhile: it fails instead.
            let mut file = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&path)
                .with_context(|| format!("failed to create {}", path.display()))?;
            file.write_all(token.as_bytes())?;
            file.write_all(b"\n")?;
            file.sync_all()?;
            Ok(token)
        }
    }
}

/// The `daemon.json` a previous daemon of this home left, if it left one.
fn read_daemon_file(home: &Path) -> Option<DaemonFile> {
    let bytes = crate::core::private_file::read(&home.join(DAEMON_FILE), 64 * 1024)
        .ok()
        .flatten()?;
    serde_json::from_slice(&bytes).ok()
}

/// Removes the hooks a killed predecessor (pid `predecessor.pid`) left on its tmux server: it
/// had no chance to, and they would run `cohost` commands against a daemon that is gone — on a
/// server this daemon may not even use. A server that is gone took its hooks with it.
async fn remove_predecessor_hooks(predecessor: &DaemonFile, index: u32) {
    let tmux = Tmux::new(predecessor.tmux_socket.clone());
    match tmux.remove_hooks(index).await {
        Ok(()) => tracing::info!(
            pid = predecessor.pid,
            socket = ?predecessor.tmux_socket,
            "removed the tmux hooks a killed predecessor left"
        ),
        Err(error) => tracing::warn!(%error, "failed to remove a killed predecessor's tmux hooks"),
    }
}

fn write_daemon_file(
    home: &Path,
    addr: SocketAddr,
    tmux_socket: Option<PathBuf>,
) -> anyhow::Result<()> {
    let file = DaemonFile {
        pid: std::process::id(),
        listen: addr.to_string(),
        version: env!("CARGO_PKG_VERSION").to_string(),
        tmux_socket,
    };
    crate::core::private_file::write_atomic(
        &home.join(DAEMON_FILE),
        &serde_json::to_vec(&file)?,
        0o600,
    )
    .with_context(|| format!("failed to write {}", home.join(DAEMON_FILE).display()))?;
    Ok(())
}

/// Logs, once at start, which release of each peer this daemon found and whether it is inside
/// the tested range (`cohost doctor` says the same, with more).
async fn log_peers(hosts: Hosts, cancel: CancellationToken) {
    let check = async {
        for host in hosts.all() {
            host.log_found().await;
        }
    };
    tokio::select! {
        _ = check => {}
        _ = cancel.cancelled() => {}
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::Essential;
    use crate::service::TaskFailures;

    const DEADLINE: Duration = Duration::from_secs(10);

    #[tokio::test]
    async fn a_daemon_task_that_panics_is_recorded_by_name_and_the_others_go_on() {
        let failures = TaskFailures::default();
        // Two sets recording into one list: the panicking one is waited for alone.
        let waiting = Essential::new(failures.clone());
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        waiting.spawn("a task that waits", async move {
            let _ = rx.await;
        });
        let panicking = Essential::new(failures.clone());
        panicking.spawn("the test's task", async { panic!("planted") });
        panicking.tracker.close();
        tokio::time::timeout(DEADLINE, panicking.tracker.wait())
            .await
            .expect("the panicked task counts as ended");
        assert_eq!(failures.list(), ["the test's task panicked: planted"]);
        assert_eq!(waiting.tracker.len(), 1, "the other task still runs");
        tx.send(()).unwrap();
        waiting.tracker.close();
        tokio::time::timeout(DEADLINE, waiting.tracker.wait())
            .await
            .expect("the waiting task ends");
    }

    #[tokio::test]
    async fn daemon_tasks_that_end_record_nothing() {
        let failures = TaskFailures::default();
        let tasks = Essential::new(failures.clone());
        for _ in 0..3 {
            tasks.spawn("a task that ends", async { tokio::task::yield_now().await });
        }
        tasks.tracker.close();
        tokio::time::timeout(DEADLINE, tasks.tracker.wait())
            .await
            .expect("the tasks end");
        assert!(failures.list().is_empty());
    }
}
