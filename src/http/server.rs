//! The HTTP server loop: accepts connections up to a cap, serves each with hyper's HTTP/1
//! connection (which closes a connection whose request head does not arrive in time, idle
//! keep-alive connections included), and drains them on shutdown.
//!
//! Three bounds keep other local processes from locking the token holder and the hooks out:
//!
//! - **A write timeout** ([`Limits::write_timeout`]): an answer the client does not read within
//!   it closes the connection, so a client that pipelines requests and never reads holds its
//!   slot (and kernel socket memory) for a bounded time. SSE and long polls are bounded the
//!   same way: their heartbeats are writes too.
//! - **Slots a stranger cannot keep**: a connection is *proven* once one of its requests carried
//!   the bearer token. When every slot is taken, a new connection closes the oldest connection
//!   not proven (token-less: the hooks, the web page's first load, or anyone) to make room, so
//!   a flood of token-less connections cannot keep out a hook's report or `cohost state`.
//! - Past the cap with every slot proven, a connection gets one canned
//!   `503 too_many_connections` JSON answer and is closed.
//!
//! Request bodies are bounded in time by the guard ([`super::guard`]), which reads them.
//!
//! The same router also answers on the home's Unix socket ([`crate::local_socket`]), where the
//! local clients connect: only this user can reach it (the home is 0700), so its connections
//! count as proven from the start and share the cap with the port's.

use std::collections::VecDeque;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::Semaphore;
use tokio_util::either::Either;
use tokio_util::sync::CancellationToken;
use tower_service::Service as _;

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
    /// How long one write of an answer may wait for the client to read.
    pub write_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: DEFAULT_MAX_CONNECTIONS,
            header_timeout: Duration::from_secs(30),
            body_timeout: Duration::from_secs(30),
            write_timeout: DEFAULT_WRITE_TIMEOUT,
        }
    }
}

/// 1024 open connections is far beyond what local clients use (each SSE or long-poll holds
/// one) and stays well below the file-descriptor limit the daemon raises itself to.
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;

/// A client that has not read for this long is gone or hostile (a local client reads in
/// microseconds; a browser tab in the background still reads its stream).
pub const DEFAULT_WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// Refusals in flight at once; beyond, an excess connection is closed without an answer (each
/// refusal holds its socket for up to [`REFUSAL_TIMEOUT`]).
const MAX_REFUSALS: usize = 64;
/// How long a refusal waits to write its answer and for the client to finish sending.
const REFUSAL_TIMEOUT: Duration = Duration::from_secs(1);
/// How long accepting pauses after an error such as "too many open files".
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Serves `router` on `listener` and `socket` until `shutdown` completes, then stops accepting
/// and waits for open connections to finish (the caller bounds that wait).
pub async fn serve(
    listener: TcpListener,
    socket: UnixListener,
    router: Router,
    limits: Limits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let slots = Arc::new(Slots::new(limits.max_connections));
    let refusals = Arc::new(Semaphore::new(MAX_REFUSALS));
    let graceful = GracefulShutdown::new();
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .keep_alive(true);
    tokio::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => accepted.map(|(stream, _)| {
                let _ = stream.set_nodelay(true);
                Either::Left(stream)
            }),
            accepted = socket.accept() => accepted.map(|(stream, _)| Either::Right(stream)),
        };
        let stream = match accepted {
            Ok(stream) => stream,
            Err(error) => {
                // A connection reset before it was accepted is the client's business;
                // anything else (EMFILE, ENFILE) is ours: pause instead of spinning.
                if !is_connection_error(&error) {
                    tracing::warn!(%error, "accepting a connection failed; pausing");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                }
                continue;
            }
        };
        let Some(slot) = slots.take() else {
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
        // Only this user reaches the socket: its connections are the token holder's.
        if matches!(stream, Either::Right(_)) {
            slot.proven.store(true, Ordering::Relaxed);
        }
        let proof = ConnectionProof(Arc::clone(&slot.proven));
        let router = router.clone();
        let service = hyper::service::service_fn(
            move |mut request: hyper::Request<hyper::body::Incoming>| {
                request.extensions_mut().insert(proof.clone());
                router.clone().call(request)
            },
        );
        let io = TokioIo::new(WriteDeadline::new(stream, limits.write_timeout));
        let connection = graceful.watch(builder.serve_connection(io, service));
        let slots = Arc::clone(&slots);
        tokio::spawn(async move {
            tokio::select! {
                result = connection => {
                    if let Err(error) = result {
                        tracing::debug!(%error, "HTTP connection ended with an error");
                    }
                }
                () = slot.close.cancelled() => {
                    tracing::debug!("closed a connection that had not shown the token, to make room");
                }
            }
            slots.release(slot.id);
        });
    }
    drop(listener);
    drop(socket);
    graceful.shutdown().await;
    Ok(())
}

/// Set on a connection once one of its requests carried the bearer token (by the guard, which
/// finds it among the request's extensions).
#[derive(Debug, Clone)]
pub struct ConnectionProof(Arc<AtomicBool>);

impl ConnectionProof {
    pub fn prove(&self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// One open connection's place.
#[derive(Clone)]
struct Slot {
    id: u64,
    proven: Arc<AtomicBool>,
    close: CancellationToken,
}

/// The open connections, oldest first.
struct Slots {
    max: usize,
    open: Mutex<Open>,
}

#[derive(Default)]
struct Open {
    next_id: u64,
    slots: VecDeque<Slot>,
}

impl Slots {
    fn new(max: usize) -> Slots {
        Slots {
            max,
            open: Mutex::new(Open::default()),
        }
    }

    /// A place for a new connection: a free one, else the oldest connection that has not
    /// shown the token is closed for it. `None` when every open connection has.
    fn take(&self) -> Option<Slot> {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if open.slots.len() >= self.max {
            let oldest = open
                .slots
                .iter()
                .position(|slot| !slot.proven.load(Ordering::Relaxed))?;
            if let Some(evicted) = open.slots.remove(oldest) {
                evicted.close.cancel();
            }
        }
        open.next_id += 1;
        let slot = Slot {
            id: open.next_id,
            proven: Arc::new(AtomicBool::new(false)),
            close: CancellationToken::new(),
        };
        open.slots.push_back(slot.clone());
        Some(slot)
    }

    fn release(&self, id: u64) {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        open.slots.retain(|slot| slot.id != id);
    }
}

/// A connection's socket whose writes fail with `TimedOut` once one has waited
/// `timeout` for the client to read (the wait restarts with every write that goes through).
struct WriteDeadline<S> {
    inner: S,
    timeout: Duration,
    stalled: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<S> WriteDeadline<S> {
    fn new(inner: S, timeout: Duration) -> Self {
        WriteDeadline {
            inner,
            timeout,
            stalled: None,
        }
    }

    /// After the inner write returned `Pending`: an error once the deadline has passed.
    fn pending<T>(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        let timeout = self.timeout;
        let sleep = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        match sleep.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client did not read its answer in time",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn done<T>(
        &mut self,
        result: Poll<io::Result<T>>,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<T>> {
        match result {
            Poll::Ready(result) => {
                self.stalled = None;
                Poll::Ready(result)
            }
            Poll::Pending => self.pending(cx),
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for WriteDeadline<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for WriteDeadline<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let result = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.done(result, cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let result = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.done(result, cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let result = Pin::new(&mut self.inner).poll_flush(cx);
        self.done(result, cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let result = Pin::new(&mut self.inner).poll_shutdown(cx);
        self.done(result, cx)
    }
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
async fn refuse(mut stream: impl AsyncRead + AsyncWrite + Unpin, max_connections: usize) {
    let code = crate::protocol::codes::TOO_MANY_CONNECTIONS;
    let body = format!(
        "{{\"error\":{{\"code\":\"{code}\",\"message\":\"the daemon already serves {max_connections} connections (its limit); retry shortly\"}}}}"
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
