//! A real `nats-server` with JetStream for the federation tests: on a free loopback port with a
//! private store directory (its own flags, or a configuration file's text), stopped (SIGTERM) or killed (SIGKILL) and started again on the same
//! port and store, killed on drop.
//!
//! The binary is `COHOST_TEST_NATS_SERVER` (`scripts/test` installs Debian's `nats-server` and
//! exports it), else `nats-server` on `PATH`; a missing one fails the test with how to get it.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use super::temp_dir;

/// How long the server gets to say it is ready.
const READY_TIMEOUT: Duration = Duration::from_secs(20);

/// The `nats-server` the tests run.
pub fn nats_server_bin() -> PathBuf {
    if let Some(path) = std::env::var_os("COHOST_TEST_NATS_SERVER").filter(|v| !v.is_empty()) {
        let path = PathBuf::from(path);
        if !path.is_file() {
            panic!(
                "COHOST_TEST_NATS_SERVER={} is not a file: install nats-server (`scripts/test --setup-only` does, from Debian's package) or point the variable at one",
                path.display()
            );
        }
        return path;
    }
    let on_path = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join("nats-server"))
            .find(|candidate| candidate.is_file())
    });
    on_path.unwrap_or_else(|| {
        panic!(
            "nats-server is missing: the federation tests run a real one. Run `scripts/test --setup-only` (it installs Debian's nats-server and exports COHOST_TEST_NATS_SERVER), or set COHOST_TEST_NATS_SERVER"
        )
    })
}

/// A running (or stopped) `nats-server -js` on 127.0.0.1.
pub struct NatsServer {
    bin: PathBuf,
    dir: tempfile::TempDir,
    port: u16,
    /// The configuration file the server runs with (`-c`), when it was given one.
    config: Option<PathBuf>,
    child: Option<Child>,
    /// Every stderr line of every run.
    log: Arc<Mutex<Vec<String>>>,
}

impl NatsServer {
    /// Starts a server with JetStream on a port the server picks, its store in a fresh directory.
    pub fn start() -> NatsServer {
        let mut server = NatsServer {
            bin: nats_server_bin(),
            dir: temp_dir("cohost-nats-"),
            port: 0,
            config: None,
            child: None,
            log: Arc::new(Mutex::new(Vec::new())),
        };
        server.spawn();
        server
    }

    /// Starts a server from a configuration file's text, which `config` makes given the store
    /// directory to use (JetStream's `store_dir`); the port is the server's pick (`-p -1`
    /// overrides the file's).
    pub fn start_with_config(config: impl FnOnce(&Path) -> String) -> NatsServer {
        let dir = temp_dir("cohost-nats-");
        let text = config(&dir.path().join("store"));
        let path = dir.path().join("nats.conf");
        std::fs::write(&path, text).expect("write the nats-server configuration");
        let mut server = NatsServer {
            bin: nats_server_bin(),
            dir,
            port: 0,
            config: Some(path),
            child: None,
            log: Arc::new(Mutex::new(Vec::new())),
        };
        server.spawn();
        server
    }

    /// The store directory (JetStream's files are under it).
    pub fn store(&self) -> &Path {
        self.dir.path()
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `nats://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        self.log.lock().unwrap().join("\n")
    }

    fn spawn(&mut self) {
        assert!(self.child.is_none(), "the nats-server is already running");
        let port = if self.port == 0 {
            "-1".to_string()
        } else {
            self.port.to_string()
        };
        let mut command = Command::new(&self.bin);
        match &self.config {
            Some(config) => command.arg("-c").arg(config).args(["-p", &port]),
            None => command
                .args(["-js", "-a", "127.0.0.1", "-p", &port, "-sd"])
                .arg(self.dir.path().join("store"))
                .args(["--http_port", "0"]),
        };
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("failed to start {}: {e}", self.bin.display()));
        let stderr = child.stderr.take().expect("stderr piped");
        let start = self.log.lock().unwrap().len();
        let log = Arc::clone(&self.log);
        thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                log.lock().unwrap().push(line);
            }
        });
        self.child = Some(child);
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            {
                let lines = self.log.lock().unwrap();
                let run = &lines[start.min(lines.len())..];
                if let Some(port) = run.iter().find_map(|line| {
                    line.split("Listening for client connections on ")
                        .nth(1)
                        .and_then(|addr| addr.trim().rsplit(':').next())
                        .and_then(|p| p.parse::<u16>().ok())
                }) {
                    self.port = port;
                }
                if self.port != 0 && run.iter().any(|line| line.contains("Server is ready")) {
                    return;
                }
            }
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                self.child = None;
                panic!(
                    "nats-server exited with {status} before it was ready:\n{}",
                    self.log()
                );
            }
            if Instant::now() >= deadline {
                panic!(
                    "nats-server did not say it was ready within {READY_TIMEOUT:?}:\n{}",
                    self.log()
                );
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGKILL: JetStream recovers from its files on the next start.
    pub fn kill9(&mut self) {
        let mut child = self.child.take().expect("the nats-server is not running");
        child.kill().expect("SIGKILL nats-server");
        child.wait().expect("reap nats-server");
    }

    /// SIGTERM, and wait for it to exit.
    pub fn stop(&mut self) {
        let mut child = self.child.take().expect("the nats-server is not running");
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(child.id().to_string())
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while child.try_wait().ok().flatten().is_none() {
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("nats-server did not exit within 10 s of SIGTERM");
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// Starts it again on the same port and store.
    pub fn start_again(&mut self) {
        self.spawn();
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
