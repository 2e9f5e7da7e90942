//! The scaffolding the scripted model mocks share ([`super::mock_responses`] for codex's Responses
//! API, [`super::mock_messages`] for Claude's Messages API): an axum server on 127.0.0.1 with its
//! own thread and tokio runtime ([`Server`]); the state both keep behind one lock ([`Shared`],
//! [`Log`]): a queue of scripted steps taken by condition with a default for when none matches,
//! the requests received, disconnects and unexpected requests, and waits on them; and SSE framing
//! ([`sse_response`], [`Sse`], [`chunks`]).
//!
//! What a step is, how a request is classified and what goes on the wire stay in each mock.

use std::collections::{BTreeMap, VecDeque};
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::Response;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

/// An axum app served on 127.0.0.1:0 from a background thread with its own tokio runtime, so it
/// works from plain `#[test]` functions. Dropping it shuts the server down (open streams are cut).
pub struct Server {
    addr: SocketAddr,
    shutdown: Option<oneshot::Sender<()>>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Server {
    /// Binds 127.0.0.1:0 and serves `app`; `name` ("mock responses") prefixes panics and logs.
    pub fn start(name: &'static str, app: Router) -> Server {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap_or_else(|e| panic!("{name}: bind 127.0.0.1:0: {e}"));
        listener
            .set_nonblocking(true)
            .unwrap_or_else(|e| panic!("{name}: set_nonblocking: {e}"));
        let addr = listener
            .local_addr()
            .unwrap_or_else(|e| panic!("{name}: local_addr: {e}"));
        let (shutdown_tx, shutdown_rx) = oneshot::channel::<()>();
        let thread = thread::Builder::new()
            .name(format!("{}-{}", name.replace(' ', "-"), addr.port()))
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(1)
                    .enable_all()
                    .build()
                    .unwrap_or_else(|e| panic!("{name}: tokio runtime: {e}"));
                runtime.block_on(async move {
                    let listener = tokio::net::TcpListener::from_std(listener)
                        .unwrap_or_else(|e| panic!("{name}: listener: {e}"));
                    tokio::select! {
                        result = axum::serve(listener, app) => {
                            if let Err(e) = result {
                                eprintln!("{name}: server error: {e}");
                            }
                        }
                        _ = shutdown_rx => {}
                    }
                });
                runtime.shutdown_timeout(Duration::from_secs(1));
            })
            .unwrap_or_else(|e| panic!("{name}: spawn thread: {e}"));
        Server {
            addr,
            shutdown: Some(shutdown_tx),
            thread: Some(thread),
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// What a mock has been scripted with and has seen, behind [`Shared`]'s lock. `S` is the mock's
/// step, `R` its record of one model request, `X` whatever else the mock keeps.
pub struct Log<S, R, X = ()> {
    /// Pushed steps not consumed yet, each with its index in push order.
    pub queue: VecDeque<(usize, S)>,
    /// How many steps were ever pushed.
    pub pushed: usize,
    /// The answer when no queued step matches.
    pub default_step: S,
    /// Every model request, in arrival order.
    pub received: Vec<R>,
    /// How many answers the client cut before the mock finished them.
    pub disconnects: usize,
    /// `METHOD target` of requests outside the model endpoint (and of unreadable model requests).
    pub other_requests: Vec<String>,
    pub extra: X,
}

impl<S: Clone, R, X> Log<S, R, X> {
    /// Removes and returns the first queued step for which `matches` holds, as
    /// `(Some(push index), false, step)`, or else `(None, true, default step)`.
    pub fn take_step(&mut self, matches: impl Fn(&S) -> bool) -> (Option<usize>, bool, S) {
        match self.queue.iter().position(|(_, step)| matches(step)) {
            Some(pos) => {
                let (index, step) = self.queue.remove(pos).expect("position is in range");
                (Some(index), false, step)
            }
            None => (None, true, self.default_step.clone()),
        }
    }
}

/// A mock's [`Log`] behind a mutex, with a condvar signalled on every change and a counter for
/// the ids in its answers.
pub struct Shared<S, R, X = ()> {
    name: &'static str,
    describe: fn(&Log<S, R, X>) -> String,
    inner: Mutex<Log<S, R, X>>,
    changed: Condvar,
    ids: AtomicU64,
}

impl<S, R, X> Shared<S, R, X> {
    /// An empty log answering `default_step` when the queue has nothing that matches.
    /// `describe` summarises the log for the panic of a timed-out wait.
    pub fn new(
        name: &'static str,
        default_step: S,
        extra: X,
        describe: fn(&Log<S, R, X>) -> String,
    ) -> Arc<Self> {
        Arc::new(Shared {
            name,
            describe,
            inner: Mutex::new(Log {
                queue: VecDeque::new(),
                pushed: 0,
                default_step,
                received: Vec::new(),
                disconnects: 0,
                other_requests: Vec::new(),
                extra,
            }),
            changed: Condvar::new(),
            ids: AtomicU64::new(0),
        })
    }

    /// The log, for reading or for a change nobody waits on.
    pub fn lock(&self) -> MutexGuard<'_, Log<S, R, X>> {
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Changes the log and wakes every waiter.
    pub fn update<T>(&self, change: impl FnOnce(&mut Log<S, R, X>) -> T) -> T {
        let result = change(&mut self.lock());
        self.changed.notify_all();
        result
    }

    /// 1, 2, 3, … across all ids the mock hands out.
    pub fn next_id(&self) -> u64 {
        self.ids.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Enqueues a step, numbered in push order.
    pub fn push(&self, step: S) {
        let mut inner = self.lock();
        let index = inner.pushed;
        inner.pushed += 1;
        inner.queue.push_back((index, step));
    }

    pub fn set_default(&self, step: S) {
        self.lock().default_step = step;
    }

    pub fn pending_steps(&self) -> usize {
        self.lock().queue.len()
    }

    pub fn disconnects(&self) -> usize {
        self.lock().disconnects
    }

    pub fn other_requests(&self) -> Vec<String> {
        self.lock().other_requests.clone()
    }

    /// Logs a request outside the model endpoint.
    pub fn note_other(&self, line: String) {
        self.update(|inner| inner.other_requests.push(line));
    }

    /// The model request body as JSON; a body that is not JSON is logged as an other request
    /// (`POST {target} with a non-JSON body …`) and gives `None`.
    pub fn json_body(&self, target: &str, body: &[u8]) -> Option<Value> {
        match serde_json::from_slice(body) {
            Ok(value) => Some(value),
            Err(e) => {
                let text = String::from_utf8_lossy(body).into_owned();
                self.note_other(format!(
                    "POST {target} with a non-JSON body ({e}): {text:.200}"
                ));
                None
            }
        }
    }

    /// The received requests for which `keep` holds.
    pub fn received_where(&self, keep: impl Fn(&R) -> bool) -> Vec<R>
    where
        R: Clone,
    {
        self.lock()
            .received
            .iter()
            .filter(|r| keep(r))
            .cloned()
            .collect()
    }

    /// How many received requests `count` holds for.
    pub fn count_received(&self, count: impl Fn(&R) -> bool) -> usize {
        self.lock().received.iter().filter(|r| count(r)).count()
    }

    /// The log as the mock describes it.
    pub fn describe(&self) -> String {
        (self.describe)(&self.lock())
    }

    /// Waits until `check` gives a value; panics after `timeout`, describing the log.
    pub fn wait_for<T>(
        &self,
        what: &str,
        timeout: Duration,
        mut check: impl FnMut(&Log<S, R, X>) -> Option<T>,
    ) -> T {
        let deadline = Instant::now() + timeout;
        let mut inner = self.lock();
        loop {
            if let Some(value) = check(&inner) {
                return value;
            }
            let now = Instant::now();
            if now >= deadline {
                panic!(
                    "{}: timed out after {timeout:?} waiting for {what}; {}",
                    self.name,
                    (self.describe)(&inner)
                );
            }
            inner = self
                .changed
                .wait_timeout(inner, deadline - now)
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .0;
        }
    }

    /// Waits until at least `n` received requests satisfy `keep`; returns them all.
    pub fn wait_for_received(
        &self,
        what: &str,
        n: usize,
        timeout: Duration,
        keep: impl Fn(&R) -> bool,
    ) -> Vec<R>
    where
        R: Clone,
    {
        self.wait_for(what, timeout, |inner| {
            let matching: Vec<R> = inner.received.iter().filter(|r| keep(r)).cloned().collect();
            (matching.len() >= n).then_some(matching)
        })
    }

    /// Waits until at least `n` answers were cut by the client.
    pub fn wait_for_disconnects(&self, n: usize, timeout: Duration) -> usize {
        self.wait_for(&format!("{n} client disconnects"), timeout, |inner| {
            (inner.disconnects >= n).then_some(inner.disconnects)
        })
    }
}

/// Lower-cased header names → values (lossily decoded).
pub fn header_map(headers: &HeaderMap) -> BTreeMap<String, String> {
    headers
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().to_owned(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect()
}

/// Runs a closure when dropped, unless disarmed: notes that a client went away before its answer
/// was done, whether the answering task saw it or was dropped.
pub struct OnDrop<F: FnOnce()>(Option<F>);

impl<F: FnOnce()> OnDrop<F> {
    pub fn new(f: F) -> Self {
        OnDrop(Some(f))
    }

    pub fn disarm(mut self) {
        self.0 = None;
    }
}

impl<F: FnOnce()> Drop for OnDrop<F> {
    fn drop(&mut self) {
        if let Some(f) = self.0.take() {
            f();
        }
    }
}

/// Writes SSE events for one answer; `Gone` once the client has hung up.
#[derive(Clone)]
pub struct Sse {
    tx: mpsc::Sender<String>,
    delay: Duration,
}

/// The client hung up.
pub struct Gone;

/// How a streamed answer ended.
pub enum Finish {
    /// The answer was sent in full.
    Done,
    /// Hold the stream open until the client goes away.
    Hang,
}

impl Sse {
    /// One `event: <type>\ndata: <json>\n\n` frame, named by the event's `type` field.
    pub async fn send(&self, event: Value) -> Result<(), Gone> {
        let kind = event["type"].as_str().unwrap_or("message").to_owned();
        self.tx
            .send(format!("event: {kind}\ndata: {event}\n\n"))
            .await
            .map_err(|_| Gone)
    }

    /// Sleeps for the step's delay, if any.
    pub async fn pause(&self) {
        if !self.delay.is_zero() {
            tokio::time::sleep(self.delay).await;
        }
    }
}

/// A `text/event-stream` response fed by `run` on a spawned task, pausing `delay` where `run`
/// asks. `on_gone` runs once if the client hangs up first: mid-answer, or during a
/// [`Finish::Hang`] (which holds the stream open until then).
pub fn sse_response<F, Fut>(
    delay: Duration,
    on_gone: impl FnOnce() + Send + 'static,
    run: F,
) -> Response
where
    F: FnOnce(Sse) -> Fut,
    Fut: Future<Output = Result<Finish, Gone>> + Send + 'static,
{
    let (tx, rx) = mpsc::channel::<String>(16);
    let sse = Sse { tx, delay };
    let answer = run(sse.clone());
    tokio::spawn(async move {
        let gone = OnDrop::new(on_gone);
        match answer.await {
            // The client went away mid-answer; `gone` records it.
            Err(Gone) => {}
            Ok(Finish::Hang) => sse.tx.closed().await,
            Ok(Finish::Done) => gone.disarm(),
        }
    });
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|chunk| (Ok::<Bytes, Infallible>(Bytes::from(chunk)), rx))
    });
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::from_stream(stream))
        .expect("valid SSE response")
}

/// Splits text into word-sized chunks that concatenate back to it ("You ", "said: ", "hi").
pub fn chunks(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut in_space = false;
    for c in text.chars() {
        if !c.is_whitespace() && in_space && !current.is_empty() {
            out.push(std::mem::take(&mut current));
        }
        in_space = c.is_whitespace();
        current.push(c);
    }
    if !current.is_empty() || out.is_empty() {
        out.push(current);
    }
    out
}
