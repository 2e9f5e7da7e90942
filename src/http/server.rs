//! The HTTP server loop: accepts connections up to a cap, serves each with hyper's HTTP/1
//! connection (which closes a connection whose request head does not arrive in time, idle
//! keep-alive connections included), and drains them on shutdown.
//!
//! Past the cap a connection gets one canned `503 too_many_connections` JSON answer and is
//! closed, so a local process that opens connections and sends nothing can neither exhaust the
//! daemon's file descriptors nor lock other clients out for longer than the header timeout.
//! Request bodies are bounded in time by the guard ([`super::guard`]), which reads them.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

/// Connection limits and timeouts (`cohost serve --max-connections`, `--header-timeout`,
/// `--body-timeout`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Connections served at once; one more is answered `503` and closed.
    pub max_connections: usize,
    /// How long a request head may take to arrive, counted from the connection's start or from
    /// the end of the previous answer: it is also the idle keep-alive timeout.
    pub header_timeout: Duration,
    /// How long a request body may take to arrive once its head is in.
    pub body_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: DEFAULT_MAX_CONNECTIONS,
            header_timeout: Duration::from_secs(30),
            body_timeout: Duration::from_secs(30),
        }
    }
}

/// 1024 open connections is far beyond what local clients use (each SSE or long-poll holds
/// one) and stays well below the file-descriptor limit the daemon raises itself to.
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;

/// Refusals in flight at once; beyond, an excess connection is closed without an answer (each
/// refusal holds its socket for up to [`REFUSAL_TIMEOUT`]).
const MAX_REFUSALS: usize = 64;
/// How long a refusal waits to write its answer and for the client to finish sending.
const REFUSAL_TIMEOUT: Duration = Duration::from_secs(1);
/// How long accepting pauses after an error such as "too many open files".
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Serves `router` on `listener` until `shutdown` completes, then stops accepting and waits
/// for open connections to finish (the caller bounds that wait).
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: Limits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let connections = Arc::new(Semaphore::new(limits.max_connections));
    let refusals = Arc::new(Semaphore::new(MAX_REFUSALS));
    let graceful = GracefulShutdown::new();
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .keep_alive(true);
    tokio::pin!(shutdown);
    loop {
        let (stream, _peer) = tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // A connection reset before it was accepted is the client's business;
                    // anything else (EMFILE, ENFILE) is ours: pause instead of spinning.
                    if !is_connection_error(&error) {
                        tracing::warn!(%error, "accepting a connection failed; pausing");
                        tokio::time::sleep(ACCEPT_BACKOFF).await;
                    }
                    continue;
                }
            },
        };
        let Ok(permit) = Arc::clone(&connections).try_acquire_owned() else {
            match Arc::clone(&refusals).try_acquire_owned() {
                Ok(refusal) => {
                    tokio::spawn(async move {
                        refuse(stream, limits.max_connections).await;
                        drop(refusal);
                    });
                }
                Err(_) => drop(stream),
            }
            continue;
        };
        let _ = stream.set_nodelay(true);
        let service = TowerToHyperService::new(router.clone());
        let connection = graceful.watch(builder.serve_connection(TokioIo::new(stream), service));
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                tracing::debug!(%error, "HTTP connection ended with an error");
            }
            drop(permit);
        });
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}

fn is_connection_error(error: &std::io::Error) -> bool {
    matches!(
        error.kind(),
        std::io::ErrorKind::ConnectionRefused
            | std::io::ErrorKind::ConnectionAborted
            | std::io::ErrorKind::ConnectionReset
    )
}

/// Answers a connection past the cap with `503 too_many_connections` and closes it. What the
/// client sends is read and dropped for a moment, so that closing does not reset the answer.
async fn refuse(mut stream: TcpStream, max_connections: usize) {
    let body = format!(
        "{{\"error\":{{\"code\":\"too_many_connections\",\"message\":\"the daemon already serves {max_connections} connections (its limit); retry shortly\"}}}}"
    );
    let answer = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: {}\r\nretry-after: 1\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = tokio::time::timeout(REFUSAL_TIMEOUT, async {
        stream.write_all(answer.as_bytes()).await?;
        stream.shutdown().await?;
        let mut sink = [0u8; 4096];
        while stream.read(&mut sink).await? > 0 {}
        Ok::<(), std::io::Error>(())
    })
    .await;
}

/// Raises the soft limit on open files to the hard limit, so the connection cap is not the
/// process's limit, and returns the cap that fits under it: `requested`, or less (with a
/// warning) when the limit leaves too few descriptors for the log, children and pipes.
pub fn fit_connection_cap(requested: usize) -> usize {
    /// Descriptors kept for everything but connections: the log, codex children and their
    /// pipes, tails, tmux commands.
    const RESERVED: u64 = 256;
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    #[allow(unsafe_code)]
    // SAFETY: getrlimit(2) writes one `rlimit` we own; setrlimit(2) reads one.
    let soft = unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return requested;
        }
        if limit.rlim_cur < limit.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: limit.rlim_max,
                rlim_max: limit.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                limit.rlim_cur = limit.rlim_max;
            }
        }
        limit.rlim_cur
    };
    let fits = soft.saturating_sub(RESERVED).max(16);
    if (requested as u64) > fits {
        tracing::warn!(
            requested,
            open_files_limit = soft,
            cap = fits,
            "the open-files limit is too low for --max-connections; serving fewer connections"
        );
        return fits as usize;
    }
    requested
}
