//! Prometheus metrics for Volt runtimes.
//!
//! In-process: [`install`] (or [`Builder`]) samples `Telemetry::snapshot()` from a thread
//! of its own, every second by default, and serves the figures at `http://ADDR/metrics`.
//! As a sidecar: the `volt-exporter` binary reads a process's console stream
//! (`volt.console.v1.Console/WatchUpdates`) and serves the same metrics, so a process that
//! only enabled the console can be scraped without recompiling. The sidecar serves the
//! runtime's series only while the stream delivers: with the console down, a scrape has
//! the `volt_exporter_*` series alone, not the last figures of a process that may be gone
//! (see [`Metrics`]).
//!
//! ```no_run
//! let rt = volt::Runtime::new()?;
//! let exporter = volt_exporter::install(rt.handle(), "127.0.0.1:9670")?;   // port in use: an error here
//! // curl http://127.0.0.1:9670/metrics
//! # drop(exporter);
//! # Ok::<_, std::io::Error>(())
//! ```
//!
//! # How the metrics are made
//! Counters and gauges go through the `metrics` facade into
//! `metrics-exporter-prometheus`'s recorder (a private one per exporter, not the global
//! recorder, so several exporters can live in one process), which renders them. Two kinds
//! of figures the `metrics` API cannot carry are rendered next to them, in the same text
//! format: the histograms, which the runtime has already bucketed (log2 buckets of
//! nanoseconds; `metrics` histograms take one observation at a time, which would cost the
//! sampler a call per poll), and `volt_worker_parked_seconds_total` and
//! `volt_worker_busy_seconds_total`, counters in fractional seconds (`metrics` counters
//! are integers). The Tokio bridge's families (`volt_bridge_*`, from `Snapshot::bridge`)
//! are rendered by hand too, from their own table: they are there exactly while the
//! runtime reports a running bridge, which a registered series, kept once set, could not
//! follow. So are the task groups' families (`volt_task_group_*`, label `group`, from
//! `Telemetry::task_groups` or the console's `Update.task_groups`): one series per group
//! the runtime reports, at most 101 (100 groups and `other`). HTTP is served by axum.
//!
//! # Connections that never finish
//! The HTTP server takes at most 256 connections at once, and each must send each
//! request header within 10 s, idle time on a kept-alive connection included
//! ([`ConnectionLimits`], [`Builder::connection_limits`], the sidecar's
//! `--max-connections` and `--handshake-timeout`). A connection over the cap closes the
//! oldest one that has not made a request yet, so connections that never send one (or
//! send blank lines) cannot lock Prometheus out; refusals are logged. A connection that
//! made requests but does not read the answers (a client that pipelines requests and
//! never reads) is closed once a write has waited that long for it (`WriteDeadline`),
//! so it cannot hold its place either.

use metrics::{Counter, Gauge, Unit};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusRecorder};
use std::fmt::Write as _;
use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::Duration;
pub use volt::console::ConnectionLimits;
use volt_console_proto as proto;

/// The default sampling interval.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(1);
/// The address the demo and the sidecar serve on by default.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:9670";

/// Install an exporter for `handle`'s runtime serving `http://addr/metrics`, sampling
/// every second. See [`Builder`] for the options.
pub fn install(handle: &volt::runtime::Handle, addr: impl ToSocketAddrs) -> io::Result<Exporter> {
    Builder::new().listen(addr)?.install(handle)
}

/// Configures an in-process exporter.
#[derive(Clone, Debug)]
pub struct Builder {
    /// What the address resolved to, tried in order.
    listen: Option<Vec<SocketAddr>>,
    interval: Duration,
    limits: ConnectionLimits,
}

impl Default for Builder {
    fn default() -> Builder {
        Builder::new()
    }
}

impl Builder {
    /// Listen on `127.0.0.1:9670`, sample every second.
    pub fn new() -> Builder {
        Builder { listen: None, interval: DEFAULT_INTERVAL, limits: ConnectionLimits::default() }
    }

    /// The address to serve `/metrics` on (port 0 picks a free port; see
    /// [`Exporter::local_addr`]). A name that resolves to several addresses (`localhost`
    /// to `::1` and `127.0.0.1`) binds the first of them that can be bound (see
    /// [`bind_first`]).
    pub fn listen(mut self, addr: impl ToSocketAddrs) -> io::Result<Builder> {
        self.listen = Some(resolve_all(addr)?);
        Ok(self)
    }

    /// How often to sample the runtime (default 1 s).
    pub fn interval(mut self, every: Duration) -> Builder {
        self.interval = every.max(Duration::from_millis(1));
        self
    }

    /// The HTTP server's connection cap and header timeout (default: 256 connections,
    /// 10 s).
    pub fn connection_limits(mut self, limits: ConnectionLimits) -> Builder {
        self.limits = limits;
        self
    }

    /// Bind the listener (a port in use is an error here) and start the exporter's thread.
    /// It stops when the [`Exporter`] is dropped or the runtime shuts down.
    pub fn install(self, handle: &volt::runtime::Handle) -> io::Result<Exporter> {
        let addrs = match self.listen {
            Some(a) => a,
            None => resolve_all(DEFAULT_LISTEN)?,
        };
        let listener = bind_first(&addrs)?;
        let telemetry = handle.telemetry();
        let metrics = Arc::new(Metrics::new());
        let m = Arc::clone(&metrics);
        let interval = self.interval;
        start_limited(listener, self.limits, metrics, "volt-exporter", move |stop| async move {
            let mut ticker = tokio::time::interval(interval);
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            let mut stop = stop;
            // The lost-waker count walks every task: only while someone scrapes
            // (`Metrics::scraper_present`), at most once a second, and its last value stands in
            // between. Until it is first counted, the gauge is left out (not 0).
            let mut lost = None;
            let mut walked: Option<std::time::Instant> = None;
            loop {
                tokio::select! {
                    _ = ticker.tick() => {}
                    _ = stop.wait_for(|s| *s) => return,
                }
                // The runtime was dropped: stop sampling, and stop serving.
                if telemetry.is_shut_down() {
                    return;
                }
                // At most once a second, whatever the sampling interval.
                let due = walked.is_none_or(|t| t.elapsed() >= Duration::from_secs(1));
                if due && m.scraper_present() {
                    walked = Some(std::time::Instant::now());
                    lost = Some(telemetry.lost_wakers());
                }
                // Deadlocks are looked for only while someone scrapes, on a blocking
                // thread: a reading walks the task list, and a call after a quiet spell
                // takes two readings a moment apart. The count is in the snapshot.
                if m.scraper_present() {
                    let t = telemetry.clone();
                    let _ = tokio::task::spawn_blocking(move || t.deadlocks()).await;
                }
                let mut snap = proto::Snapshot::from(&telemetry.snapshot());
                snap.tasks_lost_waker = lost;
                m.publish(&snap);
                let groups: Vec<proto::TaskGroup> = telemetry.task_groups().iter().map(Into::into).collect();
                m.publish_groups(&groups);
            }
        })
    }
}

/// A running exporter: an HTTP listener and a sampler on a thread of their own.
pub struct Exporter {
    addr: SocketAddr,
    stop: tokio::sync::watch::Sender<bool>,
    thread: Option<std::thread::JoinHandle<()>>,
    metrics: Arc<Metrics>,
}

impl Exporter {
    /// Where `/metrics` is served.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The current exposition text, as a scrape would return it.
    pub fn render(&self) -> String {
        self.metrics.render()
    }

    /// Whether the exporter's thread has exited (it does when the runtime shuts down).
    pub fn is_finished(&self) -> bool {
        self.thread.as_ref().is_none_or(|t| t.is_finished())
    }

    /// Block until the exporter's thread exits (the runtime shut down, or its work ended).
    pub fn wait(self) {
        let _ = self.join();
    }

    /// [`Exporter::wait`], with the panic that ended the thread, if one did.
    pub fn join(mut self) -> std::thread::Result<()> {
        match self.thread.take() {
            Some(t) => t.join(),
            None => Ok(()),
        }
    }

    /// Stop serving and sampling, and join the thread.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        let _ = self.stop.send(true);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        self.shutdown();
    }
}

impl std::fmt::Debug for Exporter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exporter").field("addr", &self.addr).finish()
    }
}

/// `host:port` (an `http://` prefix is allowed) to one socket address.
pub fn resolve(addr: impl ToSocketAddrs) -> io::Result<SocketAddr> {
    Ok(resolve_all(addr)?[0])
}

/// Every address `addr` resolves to (at least one), in the resolver's order.
fn resolve_all(addr: impl ToSocketAddrs) -> io::Result<Vec<SocketAddr>> {
    let all: Vec<SocketAddr> = addr.to_socket_addrs()?.collect();
    if all.is_empty() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "the address resolves to nothing"));
    }
    Ok(all)
}

/// Parse a user-given `host:port` or `http://host:port` to one socket address, with a
/// clear error (the console client library's address parser).
pub fn parse_addr(s: &str) -> io::Result<SocketAddr> {
    Ok(volt_console_client::resolve_addr(s)?)
}

/// Parse a user-given `host:port` or `http://host:port` to every address it names (at
/// least one), with a clear error; for [`bind_first`].
pub fn parse_addrs(s: &str) -> io::Result<Vec<SocketAddr>> {
    Ok(volt_console_client::resolve_addrs(s)?)
}

/// Bind the first of `addrs` that can be bound, as `std::net::TcpListener::bind` does.
/// If none can be: a port in use is the error to show (`localhost:P` on a host without
/// IPv6 whose `127.0.0.1:P` is taken fails first on `::1` for another reason), else the
/// last address's.
pub fn bind_first(addrs: &[SocketAddr]) -> io::Result<std::net::TcpListener> {
    let mut err: Option<io::Error> = None;
    for &a in addrs {
        match bind(a) {
            Ok(l) => return Ok(l),
            Err(e) if err.as_ref().is_some_and(|p| p.kind() == io::ErrorKind::AddrInUse) => drop(e),
            Err(e) => err = Some(e),
        }
    }
    Err(err.unwrap_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no address to listen on")))
}

/// Bind the metrics listener, with an error that says which address.
pub fn bind(addr: SocketAddr) -> io::Result<std::net::TcpListener> {
    let l = std::net::TcpListener::bind(addr)
        .map_err(|e| io::Error::new(e.kind(), format!("volt-exporter: cannot listen on {addr}: {e}")))?;
    l.set_nonblocking(true)?;
    if !addr.ip().is_loopback() {
        // Asked for, so allowed; but /metrics has no authentication, so say so.
        tracing::warn!(
            "volt-exporter: serving {addr}, beyond loopback: whoever can reach it reads this process's metrics (there is no authentication)"
        );
    }
    Ok(l)
}

/// Serve `metrics` on `listener` and run `work` on a thread of its own (a current-thread
/// Tokio runtime). The thread ends when `work` returns or the exporter is stopped.
pub fn start<F, Fut>(
    listener: std::net::TcpListener,
    metrics: Arc<Metrics>,
    name: &str,
    work: F,
) -> io::Result<Exporter>
where
    F: FnOnce(tokio::sync::watch::Receiver<bool>) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()>,
{
    start_limited(listener, ConnectionLimits::default(), metrics, name, work)
}

/// Accept connections under `limits` and serve `app` on each until `stop`.
///
/// Each connection must send its request header within the handshake timeout, and that
/// timeout runs again for every request on a kept-alive connection, idle time between
/// requests included (hyper's header-read timeout): a connection that sits idle, or
/// sends blank lines and nothing else, is closed then. A connection counts as a real
/// client (which the gate never closes to make room) only once it has made a request.
async fn serve_http(
    listener: tokio::net::TcpListener,
    limits: ConnectionLimits,
    app: axum::Router,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    use tower::ServiceExt as _;
    let name = match listener.local_addr() {
        Ok(addr) => format!("volt-exporter on {addr}"),
        Err(_) => "volt-exporter".to_string(),
    };
    let mut incoming =
        volt::console::limits::Incoming::new(listener, volt::console::limits::Gate::until_called(limits), name)
            .log_with(|line| tracing::warn!("{line}"));
    loop {
        let io = tokio::select! {
            io = incoming.next() => io,
            _ = stop.wait_for(|s| *s) => return,
        };
        let admission = io.admission();
        let app = app.clone();
        let service = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
            admission.prove();
            app.clone().oneshot(req.map(axum::body::Body::new))
        });
        tokio::spawn(async move {
            let io = WriteDeadline::new(io, limits.handshake_timeout);
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(limits.handshake_timeout)
                .serve_connection(hyper_util::rt::TokioIo::new(io), service);
            // A client that goes away or times out is no error of the server's.
            let _ = conn.await;
        });
    }
}

/// A connection whose writes wait at most `limit` for the client to make room: a write
/// (or flush) that has found the socket full for that long fails with `TimedOut`, and
/// hyper closes the connection. A client that made a request is never closed to make
/// room for others (see the module doc), so without this one that pipelines requests
/// and never reads the answers would hold its place, and hyper's task, for good.
struct WriteDeadline<T> {
    io: T,
    limit: Duration,
    /// Since when writes have been waiting, as a timer that ends the wait.
    stalled: Option<std::pin::Pin<Box<tokio::time::Sleep>>>,
}

impl<T> WriteDeadline<T> {
    fn new(io: T, limit: Duration) -> WriteDeadline<T> {
        WriteDeadline { io, limit, stalled: None }
    }

    /// Pass a write's result on, starting the stall timer when it waits and failing it
    /// once the timer has run out; any progress stops the timer.
    fn watch<R>(&mut self, cx: &mut std::task::Context<'_>, r: Poll<io::Result<R>>) -> Poll<io::Result<R>> {
        if r.is_ready() {
            self.stalled = None;
            return r;
        }
        let limit = self.limit;
        let timer = self.stalled.get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        match std::future::Future::poll(timer.as_mut(), cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("the client read nothing for {limit:?} while an answer waited"),
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<T: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for WriteDeadline<T> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        std::pin::Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<T: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for WriteDeadline<T> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let r = std::pin::Pin::new(&mut self.io).poll_write(cx, buf);
        self.watch(cx, r)
    }

    fn poll_write_vectored(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let r = std::pin::Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        self.watch(cx, r)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> Poll<io::Result<()>> {
        let r = std::pin::Pin::new(&mut self.io).poll_flush(cx);
        self.watch(cx, r)
    }

    fn poll_shutdown(mut self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> Poll<io::Result<()>> {
        let r = std::pin::Pin::new(&mut self.io).poll_shutdown(cx);
        self.watch(cx, r)
    }
}

/// [`start`] with a connection cap and header timeout.
pub fn start_limited<F, Fut>(
    listener: std::net::TcpListener,
    limits: ConnectionLimits,
    metrics: Arc<Metrics>,
    name: &str,
    work: F,
) -> io::Result<Exporter>
where
    F: FnOnce(tokio::sync::watch::Receiver<bool>) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()>,
{
    let addr = listener.local_addr()?;
    let (stop, stop_rx) = tokio::sync::watch::channel(false);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let m = Arc::clone(&metrics);
    let thread = std::thread::Builder::new().name(name.into()).spawn(move || {
        rt.block_on(async move {
            let listener = match tokio::net::TcpListener::from_std(listener) {
                Ok(l) => l,
                Err(e) => {
                    tracing::error!("volt-exporter: cannot serve on {addr}: {e}");
                    return;
                }
            };
            let app = axum::Router::new()
                .route("/metrics", axum::routing::get(move || async move { text(m.render()) }))
                .route("/", axum::routing::get(|| async { "volt-exporter: metrics are at /metrics\n" }));
            let server = tokio::spawn(serve_http(listener, limits, app, stop_rx.clone()));
            work(stop_rx).await;
            server.abort();
        });
    })?;
    Ok(Exporter { addr, stop, thread: Some(thread), metrics })
}

fn text(body: String) -> impl axum::response::IntoResponse {
    ([(axum::http::header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], body)
}

/// How a metric family reads its figure off `T` (a snapshot, or one worker's part of it).
enum Figure<T> {
    /// A counter: the runtime's running total, published as it is.
    Total(fn(&T) -> u64),
    /// A gauge.
    Level(fn(&T) -> f64),
}

impl<T> Clone for Figure<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for Figure<T> {}

/// One metric family the `metrics` side publishes: declared once here, and described,
/// registered and set from this table.
struct Family<T> {
    name: &'static str,
    help: &'static str,
    unit: Option<Unit>,
    figure: Figure<T>,
}

const fn total<T>(name: &'static str, help: &'static str, f: fn(&T) -> u64) -> Family<T> {
    Family { name, help, unit: None, figure: Figure::Total(f) }
}

const fn level<T>(name: &'static str, help: &'static str, f: fn(&T) -> f64) -> Family<T> {
    Family { name, help, unit: None, figure: Figure::Level(f) }
}

/// The runtime-wide families.
const GLOBAL: &[Family<proto::Snapshot>] = &[
    total("volt_tasks_spawned_total", "Tasks spawned.", |s| s.tasks_spawned),
    total("volt_tasks_completed_total", "Tasks that returned their output.", |s| s.tasks_completed),
    total("volt_tasks_cancelled_total", "Tasks aborted or dropped by shutdown.", |s| s.tasks_cancelled),
    total("volt_tasks_panicked_total", "Tasks that panicked.", |s| s.tasks_panicked),
    total("volt_events_recorded_total", "Records written to the event ring.", |s| s.events_recorded),
    total(
        "volt_events_overwritten_total",
        "Event-ring records overwritten to make room, read or not (the ring's churn, not a loss).",
        |s| s.events_overwritten,
    ),
    total("volt_timers_armed_total", "Timers registered with the timing wheel.", |s| s.timers_armed),
    total("volt_timers_fired_total", "Timers that fired.", |s| s.timers_fired),
    total("volt_timers_cancelled_total", "Timers dropped before they fired.", |s| s.timers_cancelled),
    total("volt_io_events_total", "I/O readiness events delivered by the reactor.", |s| s.io_events),
    total(
        "volt_deadlocks_total",
        "Deadlocks found: cycles of tasks each waiting on a lock or join the next holds, each counted once (looked for while scraped, or while the console is watched; 0 without an event ring).",
        |s| s.deadlocks_total,
    ),
    level("volt_global_queue_depth", "Tasks in the global injection queue.", |s| s.global_queue_depth as f64),
    level("volt_workers_searching", "Workers searching for work.", |s| s.num_searching as f64),
    level("volt_workers_parked", "Workers parked.", |s| s.num_parked as f64),
    level("volt_workers", "Worker threads.", |s| s.workers.len() as f64),
    level("volt_tasks_alive", "Tasks spawned and not yet finished.", |s| s.tasks_alive as f64),
    level("volt_timers_pending", "Timers armed that neither fired nor were dropped.", |s| s.timers_pending as f64),
    level("volt_blocking_threads", "Threads in the blocking pool.", |s| s.blocking_threads as f64),
    level("volt_blocking_queue_depth", "spawn_blocking calls waiting for a thread.", |s| s.blocking_queue_depth as f64),
];

/// The per-worker families (label `worker`): the counters from the runtime's one list of
/// them ([`volt::console::WORKER_COUNTER_FAMILIES`]), then the gauges.
static WORKER: std::sync::LazyLock<Vec<Family<proto::WorkerSnapshot>>> = std::sync::LazyLock::new(|| {
    let counters = volt::console::WORKER_COUNTER_FAMILIES.iter().map(|&(name, help, read)| total(name, help, read));
    counters
        .chain(WORKER_GAUGES.iter().map(|f| Family { name: f.name, help: f.help, unit: f.unit, figure: f.figure }))
        .collect()
});

/// The per-worker gauges.
const WORKER_GAUGES: &[Family<proto::WorkerSnapshot>] = &[
    level("volt_worker_local_queue_depth", "Tasks in the worker's local queue.", |w| w.local_queue_depth as f64),
    level("volt_worker_global_queue_interval", "Polls between the worker's global-queue checks (EWMA-tuned).", |w| {
        w.global_queue_interval as f64
    }),
    Family {
        name: "volt_worker_mean_poll_seconds",
        help: "The worker's EWMA of the time per task.",
        unit: Some(Unit::Seconds),
        figure: Figure::Level(|w| w.ewma_task_ns as f64 / 1e9),
    },
];

/// A family rendered by hand from the last snapshot (see the crate doc).
struct Rendered<T> {
    name: &'static str,
    help: &'static str,
    /// `counter` or `gauge`.
    kind: &'static str,
    read: fn(&T) -> f64,
}

/// The Tokio bridge's families, present while the runtime reports its bridge running.
const BRIDGE: &[Rendered<proto::BridgeSnapshot>] = &[
    Rendered {
        name: "volt_bridge_workers",
        help: "Worker threads of the Tokio bridge (not Volt workers).",
        kind: "gauge",
        read: |b| b.workers as f64,
    },
    Rendered {
        name: "volt_bridge_alive_tasks",
        help: "Tasks spawned on the Tokio bridge and not yet finished.",
        kind: "gauge",
        read: |b| b.alive_tasks as f64,
    },
    Rendered {
        name: "volt_bridge_global_queue_depth",
        help: "Tasks in the Tokio bridge's global queue.",
        kind: "gauge",
        read: |b| b.global_queue_depth as f64,
    },
    Rendered {
        name: "volt_bridge_busy_seconds_total",
        help: "Time the Tokio bridge's workers spent busy, summed over them.",
        kind: "counter",
        read: |b| b.busy_ns as f64 / 1e9,
    },
];

/// The task groups' families (label `group`), one series per group.
const GROUP: &[Rendered<proto::TaskGroup>] = &[
    Rendered {
        name: "volt_task_group_spawned_total",
        help: "Tasks of the group spawned.",
        kind: "counter",
        read: |g| g.spawned as f64,
    },
    Rendered {
        name: "volt_task_group_alive",
        help: "Tasks of the group spawned and not yet finished.",
        kind: "gauge",
        read: |g| g.alive as f64,
    },
    Rendered {
        name: "volt_task_group_completed_total",
        help: "Tasks of the group that returned their output.",
        kind: "counter",
        read: |g| g.completed as f64,
    },
    Rendered {
        name: "volt_task_group_cancelled_total",
        help: "Tasks of the group aborted or dropped by shutdown.",
        kind: "counter",
        read: |g| g.cancelled as f64,
    },
    Rendered {
        name: "volt_task_group_panicked_total",
        help: "Tasks of the group that panicked.",
        kind: "counter",
        read: |g| g.panicked as f64,
    },
    Rendered {
        name: "volt_task_group_polls_total",
        help: "Polls of the group's tasks.",
        kind: "counter",
        read: |g| g.polls as f64,
    },
    Rendered {
        name: "volt_task_group_busy_seconds_total",
        help: "Time spent polling the group's tasks.",
        kind: "counter",
        read: |g| g.busy_ns as f64 / 1e9,
    },
    Rendered {
        name: "volt_task_group_slow_polls_total",
        help: "Polls of the group's tasks that took at least 50 microseconds.",
        kind: "counter",
        read: |g| g.slow_polls as f64,
    },
    Rendered {
        name: "volt_task_group_slow_poll_seconds_total",
        help: "Time the group's slow polls (at least 50 microseconds) took.",
        kind: "counter",
        read: |g| g.slow_poll_busy_ns as f64 / 1e9,
    },
    Rendered {
        name: "volt_task_group_first_polls_total",
        help: "Tasks of the group polled at least once.",
        kind: "counter",
        read: |g| g.first_polls as f64,
    },
    Rendered {
        name: "volt_task_group_first_poll_delay_seconds_total",
        help: "Time from spawn to first poll, summed over the group's tasks polled at least once.",
        kind: "counter",
        read: |g| g.first_poll_delay_ns as f64 / 1e9,
    },
    Rendered {
        name: "volt_task_group_scheduled_polls_total",
        help: "Polls of the group's tasks after their first (each after a wait in a run queue).",
        kind: "counter",
        read: |g| g.scheduled as f64,
    },
    Rendered {
        name: "volt_task_group_schedule_delay_seconds_total",
        help: "Time the group's tasks waited in a run queue before their polls after the first, summed.",
        kind: "counter",
        read: |g| g.schedule_delay_ns as f64 / 1e9,
    },
];

/// A gauge family read off a group when the group has the figure: name, help, reader.
type GroupGauge = (&'static str, &'static str, fn(&proto::TaskGroup) -> Option<u64>);

/// The groups' poll-time quantiles, present for a group once it has been polled.
const GROUP_QUANTILES: [GroupGauge; 2] = [
    (
        "volt_task_group_poll_p50_seconds",
        "Median poll time of the group's tasks since the runtime started (the upper bound of its log2 bucket).",
        |g| g.poll_p50_ns,
    ),
    (
        "volt_task_group_poll_p99_seconds",
        "99th percentile poll time of the group's tasks since the runtime started (the upper bound of its log2 bucket).",
        |g| g.poll_p99_ns,
    ),
];

/// `v` as a label value: backslash, double quote and newline escaped.
fn label_value(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// The most groups a scrape shows: the runtime's bound (100 groups and `other`), kept
/// here too for a console that is not Volt's.
const MAX_GROUPS: usize = volt::telemetry::MAX_TASK_GROUPS + 1;

/// A registered family: its handle, and how to read its figure off `T`.
enum Handle<T> {
    Total(Counter, fn(&T) -> u64),
    Level(Gauge, fn(&T) -> f64),
}

/// Describe `families` to the current recorder (inside `with_local_recorder`).
fn describe<T>(families: &[Family<T>]) {
    metrics::with_recorder(|r| {
        for f in families {
            let (name, help) = (f.name.into(), f.help.into());
            match f.figure {
                Figure::Total(_) => r.describe_counter(name, f.unit, help),
                Figure::Level(_) => r.describe_gauge(name, f.unit, help),
            }
        }
    });
}

/// Register `families` with `labels` with the current recorder (inside
/// `with_local_recorder`).
fn register<T>(families: &[Family<T>], labels: &[(&'static str, String)]) -> Vec<Handle<T>> {
    families
        .iter()
        .map(|f| match f.figure {
            Figure::Total(read) => Handle::Total(metrics::counter!(f.name, labels), read),
            Figure::Level(read) => Handle::Level(metrics::gauge!(f.name, labels), read),
        })
        .collect()
}

/// Set every handle from `v`.
fn set<T>(handles: &[Handle<T>], v: &T) {
    for h in handles {
        match h {
            Handle::Total(c, read) => c.absolute(read(v)),
            Handle::Level(g, read) => g.set(read(v)),
        }
    }
}

/// The figures one runtime publishes: handles into a private Prometheus recorder, plus the
/// histograms and fractional counters rendered alongside (see the crate doc).
struct Registry {
    recorder: PrometheusRecorder,
    /// Registered at the first snapshot: until then nothing is known, and a series
    /// served as 0 would read as a counter reset when the real total arrives.
    global: Option<Vec<Handle<proto::Snapshot>>>,
    workers: Vec<Vec<Handle<proto::WorkerSnapshot>>>,
    last: Option<proto::Snapshot>,
    /// Each worker's largest `parked_ns` served. Volt's readings never go down; keeping
    /// the largest makes the counter's rendering (by hand, not through `metrics`, whose
    /// counters keep their largest value) keep that promise for any source.
    parked_ns: Vec<u64>,
    /// The same for each worker's busy time.
    busy_ns: Vec<u64>,
    /// The last lost-waker count (kept when an update carries none).
    lost_waker: Option<u64>,
    /// The task groups last published, each name once, at most [`MAX_GROUPS`].
    groups: Vec<proto::TaskGroup>,
}

/// The metric families, with their help text: one place for both the `metrics` side and
/// the hand-rendered part.
const POLL_HISTOGRAM: (&str, &str) =
    ("volt_task_poll_duration_seconds", "How long task polls took, all workers (empty if the runtime was built with poll_time_histogram(false) and no event ring).");
const PARK_HISTOGRAM: (&str, &str) =
    ("volt_worker_park_duration_seconds", "How long workers stayed parked, all workers.");
const SCHEDULE_HISTOGRAM: (&str, &str) = (
    "volt_task_schedule_latency_seconds",
    "How long woken tasks waited in a run queue before their poll, all workers: every wake with the event ring on, one wake in eight without it (empty with poll_time_histogram(false) and no event ring).",
);
const PARKED_SECONDS: (&str, &str) = ("volt_worker_parked_seconds_total", "Time the worker spent parked.");
const BUSY_SECONDS: (&str, &str) = ("volt_worker_busy_seconds_total", "Time the worker spent polling tasks.");
/// Present once counted: a walk of every task, so only while scraped (in-process) or while
/// the console counts it (the sidecar); 0 without an event ring.
const LOST_WAKER: (&str, &str) = (
    "volt_tasks_lost_waker",
    "Idle tasks with every waker dropped: nothing can wake them again (0 without an event ring; counted once a second while scraped).",
);

impl Registry {
    fn new() -> Registry {
        let recorder = PrometheusBuilder::new().build_recorder();
        metrics::with_local_recorder(&recorder, || {
            describe(GLOBAL);
            describe(&WORKER);
        });
        Registry {
            recorder,
            global: None,
            workers: Vec::new(),
            last: None,
            parked_ns: Vec::new(),
            busy_ns: Vec::new(),
            lost_waker: None,
            groups: Vec::new(),
        }
    }

    fn worker(&mut self, i: usize) -> &[Handle<proto::WorkerSnapshot>] {
        while self.workers.len() <= i {
            let labels = [("worker", self.workers.len().to_string())];
            let w = metrics::with_local_recorder(&self.recorder, || register(&WORKER, &labels));
            self.workers.push(w);
        }
        &self.workers[i]
    }

    fn publish(&mut self, s: &proto::Snapshot) {
        // A worker's index is its place in the list. One past it (a console that is not
        // Volt's, or a broken one) would register series for workers that do not exist,
        // as many as the index says: such entries are left out.
        for w in s.workers.iter().filter(|w| (w.index as usize) < s.workers.len()) {
            set(self.worker(w.index as usize), w);
        }
        let recorder = &self.recorder;
        let global =
            self.global.get_or_insert_with(|| metrics::with_local_recorder(recorder, || register(GLOBAL, &[])));
        set(global, s);
        for w in &s.workers {
            let i = w.index as usize;
            if i < s.workers.len() {
                for (kept, now) in [(&mut self.parked_ns, w.parked_ns), (&mut self.busy_ns, w.busy_ns)] {
                    if kept.len() <= i {
                        kept.resize(i + 1, 0);
                    }
                    kept[i] = kept[i].max(now);
                }
            }
        }
        if s.tasks_lost_waker.is_some() {
            self.lost_waker = s.tasks_lost_waker;
        }
        self.last = Some(s.clone());
    }

    fn render(&self) -> String {
        let mut out = self.recorder.handle().render();
        let Some(s) = &self.last else { return out };
        if !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
        for ((name, help), per_worker) in [(PARKED_SECONDS, &self.parked_ns), (BUSY_SECONDS, &self.busy_ns)] {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
            for (i, ns) in per_worker.iter().enumerate() {
                let _ = writeln!(out, "{name}{{worker=\"{i}\"}} {}", *ns as f64 / 1e9);
            }
        }
        if let Some(n) = self.lost_waker {
            let (name, help) = LOST_WAKER;
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {n}");
        }
        let mut poll = proto::Histogram { buckets: vec![0; 32], sum: 0 };
        for w in &s.workers {
            if let Some(h) = &w.poll_time_histogram {
                // A console's worker may send more buckets than Volt's 32 (one that is
                // not Volt's, or a broken one): those count in the last, open-ended one.
                for (i, b) in h.buckets.iter().enumerate() {
                    let o = &mut poll.buckets[i.min(31)];
                    *o = o.saturating_add(*b);
                }
                poll.sum = poll.sum.saturating_add(h.sum);
            }
        }
        render_histogram(&mut out, POLL_HISTOGRAM, &poll);
        if let Some(h) = &s.park_duration_histogram {
            render_histogram(&mut out, PARK_HISTOGRAM, h);
        }
        if let Some(h) = &s.schedule_latency_histogram {
            render_histogram(&mut out, SCHEDULE_HISTOGRAM, h);
        }
        if let Some(b) = &s.bridge {
            for f in BRIDGE {
                let name = f.name;
                let _ = writeln!(out, "# HELP {name} {}\n# TYPE {name} {}\n{name} {}", f.help, f.kind, (f.read)(b));
            }
        }
        self.render_groups(&mut out);
        out
    }

    /// The task groups' families, each with one series per group (none without groups).
    fn render_groups(&self, out: &mut String) {
        if self.groups.is_empty() {
            return;
        }
        let labels: Vec<String> = self.groups.iter().map(|g| label_value(&g.name)).collect();
        for f in GROUP {
            let name = f.name;
            let _ = writeln!(out, "# HELP {name} {}\n# TYPE {name} {}", f.help, f.kind);
            for (g, label) in self.groups.iter().zip(&labels) {
                let _ = writeln!(out, "{name}{{group=\"{label}\"}} {}", (f.read)(g));
            }
        }
        for (name, help, read) in GROUP_QUANTILES {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
            for (g, label) in self.groups.iter().zip(&labels) {
                if let Some(ns) = read(g) {
                    let _ = writeln!(out, "{name}{{group=\"{label}\"}} {}", ns as f64 / 1e9);
                }
            }
        }
    }

    fn publish_groups(&mut self, groups: &[proto::TaskGroup]) {
        let mut seen = std::collections::HashSet::new();
        self.groups = groups.iter().filter(|g| seen.insert(g.name.as_str())).take(MAX_GROUPS).cloned().collect();
    }
}

/// A log2 histogram of nanoseconds as a Prometheus histogram in seconds: bucket `i` holds
/// values below `2^(i+1)` ns, so its cumulative count is exact at `le = 2^(i+1) ns`. The
/// last bucket is open-ended (`+Inf`), and so is every bucket from the 64th on (their
/// bound would pass `u64`), which only a console that is not Volt's would send.
fn render_histogram(out: &mut String, (name, help): (&str, &str), h: &proto::Histogram) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
    let mut cumulative = 0u64;
    let bounded = h.buckets.len().saturating_sub(1).min(63);
    for (i, c) in h.buckets.iter().enumerate() {
        cumulative = cumulative.saturating_add(*c);
        if i < bounded {
            let le = (1u64 << (i + 1)) as f64 / 1e9;
            let _ = writeln!(out, "{name}_bucket{{le=\"{le:e}\"}} {cumulative}");
        }
    }
    let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {cumulative}");
    let _ = writeln!(out, "{name}_sum {}", h.sum as f64 / 1e9);
    let _ = writeln!(out, "{name}_count {cumulative}");
}

/// What an exporter serves. `publish` a snapshot; `render` the exposition text.
///
/// # Whose series, and when
/// The watched runtime's series (every family but the exporter's own `volt_exporter_*`)
/// live in one registry: a private recorder, the last snapshot and what is rendered from
/// it. In-process the runtime is this process's own, and its series are always served.
/// The sidecar knows its runtime only through the console stream, so the registry follows
/// the stream ([`Metrics::set_console_up`]):
///
/// 1. Down (at start, and when the stream ends, fails or stalls): the registry is dropped,
///    and a scrape has `volt_exporter_*` only. A process that may be gone is not reported,
///    not even with its last values.
/// 2. Connected: updates are published into a fresh registry, not served yet.
/// 3. Up (set once the first update is published): served, so the first scrape that says
///    `volt_exporter_console_up 1` has the figures too.
///
/// So every connection starts from an empty registry: a restarted process's counters start
/// over instead of being held at the old process's values, and no series of the old
/// process comes back (a worker index the new one does not have). A new process seen
/// without the stream going down (the sidecar subscribing again) gets a fresh registry via
/// [`Metrics::reset`]. The state and the registry share one lock, so a scrape sees both
/// as they were at one moment.
pub struct Metrics {
    served: Mutex<Served>,
    /// When the last renders (scrapes) were: the figures that walk every task are wanted
    /// only while someone scrapes.
    scrapes: Mutex<Scrapes>,
}

/// The watched runtime's registry and whether it is served, under one lock.
struct Served {
    source: Source,
    runtime: Registry,
}

/// Where the runtime's figures come from, which decides whether they are served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Source {
    /// This process's runtime (in-process): always served, no `volt_exporter_console_up`.
    InProcess,
    /// A console stream that is not delivering: nothing of the runtime is served.
    ConsoleDown,
    /// A console stream that delivers.
    ConsoleUp,
}

impl Source {
    /// Whether the runtime's series are served.
    fn serves_runtime(self) -> bool {
        self != Source::ConsoleDown
    }

    /// The value of `volt_exporter_console_up`, for a sidecar.
    fn console_up(self) -> Option<u8> {
        match self {
            Source::InProcess => None,
            Source::ConsoleDown => Some(0),
            Source::ConsoleUp => Some(1),
        }
    }
}

/// The sidecar's own family.
const CONSOLE_UP: (&str, &str) =
    ("volt_exporter_console_up", "Whether the sidecar is receiving the console stream (1) or not (0).");

/// The last scrape, and the time between it and the one before.
#[derive(Clone, Copy, Debug, Default)]
struct Scrapes {
    last: Option<std::time::Instant>,
    gap: Option<Duration>,
}

impl Scrapes {
    fn scraped(&mut self, now: std::time::Instant) {
        if let Some(last) = self.last {
            self.gap = Some(now.saturating_duration_since(last));
        }
        self.last = Some(now);
    }

    /// Whether a scraper is still there at `now`: its last scrape is less than
    /// [`SCRAPER_GONE`] old, or less than three of its own intervals when it scrapes less
    /// often than that (up to [`SCRAPER_GONE_MAX`]).
    fn present_at(&self, now: std::time::Instant) -> bool {
        let window = self.gap.map_or(SCRAPER_GONE, |g| g.saturating_mul(3).clamp(SCRAPER_GONE, SCRAPER_GONE_MAX));
        self.last.is_some_and(|t| now.saturating_duration_since(t) < window)
    }
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics::new()
    }
}

/// How long after the last scrape the exporter keeps asking for the figures that walk
/// every task (the in-process sampler, and the sidecar of the console), unless the
/// scraper's own interval is longer (see [`Metrics::scraper_present`]).
pub const SCRAPER_GONE: Duration = Duration::from_secs(60);

/// The longest a scraper with a long interval counts as present after its last scrape.
pub const SCRAPER_GONE_MAX: Duration = Duration::from_secs(600);

impl Metrics {
    /// An empty registry, for a runtime whose series are always served (in-process). The
    /// sidecar makes it follow the console with [`Metrics::set_console_up`].
    pub fn new() -> Metrics {
        Metrics {
            served: Mutex::new(Served { source: Source::InProcess, runtime: Registry::new() }),
            scrapes: Default::default(),
        }
    }

    fn served(&self) -> std::sync::MutexGuard<'_, Served> {
        self.served.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Set every metric from `s` (served while the source is up; see the type's doc).
    pub fn publish(&self, s: &proto::Snapshot) {
        self.served().runtime.publish(s);
    }

    /// Set the task groups' series from `groups` (the runtime's `task_groups`, or an
    /// update's): one series per group and family; a group no longer listed goes. A name
    /// listed twice (a console that is not Volt's) keeps its first entry, and past the
    /// runtime's bound of 101 the rest are left out.
    pub fn publish_groups(&self, groups: &[proto::TaskGroup]) {
        self.served().runtime.publish_groups(groups);
    }

    /// Drop every series (a different process is being watched now).
    pub fn reset(&self) {
        self.served().runtime = Registry::new();
    }

    /// Sidecar: whether the console stream is up (`volt_exporter_console_up`). Down drops
    /// every series of the watched runtime, so that nothing of a process that may be gone
    /// is served, now or after the stream comes back; up serves what was published since.
    pub fn set_console_up(&self, up: bool) {
        let mut served = self.served();
        if up {
            served.source = Source::ConsoleUp;
        } else {
            served.source = Source::ConsoleDown;
            served.runtime = Registry::new();
        }
    }

    /// Whether something rendered (scraped) these metrics within `d`.
    pub fn scraped_within(&self, d: Duration) -> bool {
        self.scrapes.lock().unwrap_or_else(|e| e.into_inner()).last.is_some_and(|t| t.elapsed() < d)
    }

    /// Whether a scraper is still there: the last scrape is less than [`SCRAPER_GONE`]
    /// old, or, for a scraper whose interval is longer than a third of that, less than
    /// three of its intervals (at most [`SCRAPER_GONE_MAX`]). So a Prometheus that scrapes
    /// every two minutes counts as present between its scrapes, not as gone and back each
    /// time.
    pub fn scraper_present(&self) -> bool {
        self.scrapes.lock().unwrap_or_else(|e| e.into_inner()).present_at(std::time::Instant::now())
    }

    /// The Prometheus text exposition: the runtime's series from the last published
    /// snapshot while they are served, then the sidecar's own.
    pub fn render(&self) -> String {
        self.scrapes.lock().unwrap_or_else(|e| e.into_inner()).scraped(std::time::Instant::now());
        let served = self.served();
        let mut out = if served.source.serves_runtime() { served.runtime.render() } else { String::new() };
        if let Some(up) = served.source.console_up() {
            if !out.is_empty() && !out.ends_with('\n') {
                out.push('\n');
            }
            let (name, help) = CONSOLE_UP;
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {up}");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    /// Histograms with more buckets than Volt sends (a console that is not Volt's): the
    /// scrape still renders, with bounds that only grow, and counts that add up (the
    /// first form panicked past 64 buckets and dropped a worker's poll buckets past 32
    /// while still adding their sum).
    #[test]
    fn wide_histograms_from_a_console_render_whole() {
        let wide = |n: usize| proto::Histogram { buckets: vec![1; n], sum: 5 };
        let snap = proto::Snapshot {
            park_duration_histogram: Some(wide(70)),
            workers: vec![proto::WorkerSnapshot { poll_time_histogram: Some(wide(40)), ..Default::default() }],
            ..Default::default()
        };
        let m = Metrics::new();
        m.publish(&snap);
        let text = m.render();
        for (family, n) in [("volt_worker_park_duration_seconds", 70), ("volt_task_poll_duration_seconds", 40)] {
            let mut last_le = 0.0;
            let mut last_count = 0;
            for line in text.lines().filter(|l| l.starts_with(&format!("{family}_bucket{{"))) {
                let (labels, count) = line.rsplit_once(' ').unwrap();
                let count: u64 = count.parse().unwrap();
                assert!(count >= last_count, "{line}");
                last_count = count;
                let le = labels.split('"').nth(1).unwrap();
                if le != "+Inf" {
                    let le: f64 = le.parse().unwrap();
                    assert!(le > last_le, "{line}");
                    last_le = le;
                }
            }
            assert_eq!(last_count, n, "{family}: +Inf does not count every bucket");
            assert!(text.contains(&format!("{family}_count {n}\n")), "{family}");
        }
    }

    /// A scraper counts as present between its scrapes whatever its interval (up to ten
    /// minutes' worth), and as gone once it has missed about three; one with a short
    /// interval, or a single scrape, counts for a minute.
    #[test]
    fn a_scraper_with_a_long_interval_stays_present_between_its_scrapes() {
        let t0 = Instant::now();
        let mut s = Scrapes::default();
        assert!(!s.present_at(t0), "present before any scrape");
        s.scraped(t0);
        assert!(s.present_at(t0 + secs(59)));
        assert!(!s.present_at(t0 + secs(61)), "a single scrape counts for a minute");
        // Every two minutes: present until the next scrape and through two missed ones.
        s.scraped(t0 + secs(120));
        assert!(s.present_at(t0 + secs(120 + 119)), "gone between two scrapes of a 2-minute scraper");
        assert!(s.present_at(t0 + secs(120 + 359)));
        assert!(!s.present_at(t0 + secs(120 + 361)), "still present after three missed scrapes");
        // Every 15 s: a minute after the last.
        let mut f = Scrapes::default();
        f.scraped(t0);
        f.scraped(t0 + secs(15));
        assert!(f.present_at(t0 + secs(15 + 59)));
        assert!(!f.present_at(t0 + secs(15 + 61)));
        // Two scrapes an hour apart (someone's curl): ten minutes, not three hours.
        let mut c = Scrapes::default();
        c.scraped(t0);
        c.scraped(t0 + secs(3600));
        assert!(c.present_at(t0 + secs(3600 + 599)));
        assert!(!c.present_at(t0 + secs(3600 + 601)));
    }
}
