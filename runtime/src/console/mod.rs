//! The console server (cargo feature `console`): the runtime's telemetry over gRPC, as the
//! `volt.console.v1.Console` service of `volt-console-proto`.
//!
//! ```
//! let rt = volt::runtime::Builder::new()
//!     .console_bind("127.0.0.1:0") // any free port; the default is 127.0.0.1:6670
//!     .event_ring(1024) // lets the console list the tasks
//!     .build()?;
//! let addr = rt.console_addr().expect("the console is on");
//! println!("watch this runtime with: volt-console {addr}");
//! rt.block_on(async {
//!     // The application.
//! });
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! # Shape
//! `Builder::enable_console()` binds the listening socket inside `build()`, so a port in
//! use or a refused address is an error there, and then starts one thread,
//! `volt-console`, running a current-thread Tokio runtime. Nothing the server does runs
//! on a worker: it reads [`Telemetry`] (relaxed loads, and the event ring's lock-free
//! cursor), which never blocks a worker.
//!
//! # Publishing
//! Every publish interval (250 ms by default) the publisher takes a snapshot and drains
//! the event ring. The resulting `Update` is offered to every watching client through a
//! bounded channel of [`CLIENT_BACKLOG`] updates. A client whose channel is full misses
//! that update; its next one says how many it missed (`updates_missed`). So a slow or
//! stuck client costs at most its backlog in memory (and what HTTP/2 buffers for its
//! stream, up to 400 KiB) and never delays the publisher, other clients, or the runtime.
//! What all the channels hold together is capped too (about a million rows: task rows,
//! stall frames, and each update's events once): a stream that has taken its last update
//! gets the next unless older updates held by others fill the cap, one that has not gets
//! it only while the total is under half the cap, and a new stream is refused with
//! `RESOURCE_EXHAUSTED` while the cap has no room for its first update.
//!
//! # The task list
//! A runtime may hold a million live tasks, so no message carries all of them. While some
//! client wants tasks (a stream without `omit_tasks`, or a `GetSnapshot`/`ListTasks`
//! in the last [`ONE_OFF_KEEP`]), the server keeps an index of them (`tasks`), built by
//! one walk and then fed by the runtime's change log (`Telemetry::watch_tasks`): a
//! publish costs O(tasks that changed). Each stream has a `TaskQuery` (sort, filters, a
//! window); its updates carry only that window's rows that changed, plus counts. With no
//! such client there is no index, the change log is off, and the server does no work per
//! task at all. Every page stays under [`tasks::MAX_PAGE_BYTES`].
//!
//! A window with a filter, or in an order the index does not keep, walks every task.
//! Each publish recomputes such windows within a budget of two walks of the index,
//! connections taking turns; one-off calls pay from their connection's allowance of four
//! walks a second and from one allowance all connections share, waiting when either runs
//! out, and are refused with `RESOURCE_EXHAUSTED` past a 2 s wait; a connection has at
//! most 32 streams open at once. So one client's queries slow its own windows first, and
//! all of them together take a bounded share of the console's thread (see `cost`).
//!
//! # Lost events: the ring, and the per-client cap
//! The publisher reads the event ring with one cursor of its own. Two things can cost a
//! client events, and each update says which: `events_missed_ring` counts records the
//! ring overwrote before the publisher read them (the ring is too small for the event
//! rate at this publish interval: a bigger `Builder::event_ring` or a shorter publish
//! interval fixes it), and `events_missed_cap` counts events the publisher read but left
//! out of this client's update because of its `max_events_per_update` (default
//! [`MAX_EVENTS_PER_UPDATE`], up to [`MAX_EVENTS_PER_UPDATE_LIMIT`]). Records the ring
//! overwrote after they were read are no loss (`Snapshot::events_overwritten` counts
//! those too: it is the ring's churn).
//!
//! # Pausing
//! There is no server-side pause: it froze every client, the sidecar exporter included.
//! A client that wants a still picture stops applying updates (`volt-console`'s space).
//!
//! # Connections that never finish
//! At most [`limits::DEFAULT_MAX_CONNECTIONS`] connections (256) are open at once, and
//! each must send its HTTP/2 preface within [`limits::DEFAULT_HANDSHAKE_TIMEOUT`] (10 s);
//! `Builder::console_connection_limits` changes both. A connection over the cap closes the
//! oldest one that has not yet made a call past the token check, so neither half-open
//! connections nor idle ones without the token can lock clients out. See [`limits`].
//!
//! # Security
//! Loopback by default. A non-loopback bind needs a token (`VOLT_CONSOLE_TOKEN` or
//! `Builder::console_token`); with a token set, every call, reflection included, must
//! carry `authorization: Bearer <token>` or gets `UNAUTHENTICATED`.

mod auth;
mod convert;
mod cost;
pub mod limits;
mod publisher;
mod queue;
mod service;
mod stalls;
mod state;
mod stream;
mod tasks;

use crate::telemetry::Telemetry;
use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tonic::Request;

pub use convert::{WorkerCounterFamily, WORKER_COUNTER_FAMILIES};
pub use limits::ConnectionLimits;
pub use volt_console_proto as proto;
use volt_console_proto::console_server::ConsoleServer;

/// The address `enable_console` binds when `VOLT_CONSOLE_BIND` is not set.
pub const DEFAULT_BIND: &str = "127.0.0.1:6670";
/// The default publish interval.
pub const DEFAULT_PUBLISH_INTERVAL: Duration = Duration::from_millis(250);
/// Updates queued per client before it starts missing them.
pub const CLIENT_BACKLOG: usize = 4;
/// Events per update for a client that does not choose (`max_events_per_update` 0); the
/// newest are kept, and the rest are counted in the update's `events_missed_cap`.
pub const MAX_EVENTS_PER_UPDATE: usize = 16_384;
/// The most events per update a client may ask for. The publisher itself keeps every
/// event it reads in a cycle (at most what the rings hold, a fixed bound), so a client
/// that asks for at least the rings' capacity gets every event the server read.
pub const MAX_EVENTS_PER_UPDATE_LIMIT: usize = 1 << 20;
/// Events kept for `GetTask`'s recent history.
const HISTORY: usize = 16_384;
/// How long a `GetSnapshot` or `ListTasks` keeps the task index alive, so that paging
/// through a big runtime does not rebuild it for every page.
pub const ONE_OFF_KEEP: Duration = Duration::from_secs(10);
pub use tasks::{DEFAULT_TASK_LIMIT, MAX_PAGE_BYTES, MAX_TASK_LIMIT};

/// The console settings a `Builder` collects.
#[derive(Clone, Debug, Default)]
pub(crate) struct ConsoleConfig {
    /// Explicit address; `None`: `VOLT_CONSOLE_BIND`, else [`DEFAULT_BIND`].
    pub(crate) bind: Option<String>,
    /// Explicit token; `None`: `VOLT_CONSOLE_TOKEN` if set and non-empty.
    pub(crate) token: Option<String>,
    pub(crate) publish_interval: Option<Duration>,
    /// `None`: [`ConnectionLimits::default`].
    pub(crate) limits: Option<ConnectionLimits>,
}

/// A running console server; stopped by [`ServerHandle::stop`] (the runtime's shutdown).
pub(crate) struct ServerHandle {
    addr: SocketAddr,
    stop: watch::Sender<bool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ServerHandle {
    pub(crate) fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stop serving and join the thread. Streams end; a client that stopped reading is cut
    /// off after a short grace period instead of holding shutdown up.
    pub(crate) fn stop(&mut self) {
        let _ = self.stop.send(true);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

/// Resolve `host:port` (an `http://` prefix is allowed) to one socket address.
fn resolve(addr: &str) -> io::Result<SocketAddr> {
    let bare = addr.strip_prefix("http://").unwrap_or(addr).trim_end_matches('/');
    bare.to_socket_addrs()
        .map_err(|e| invalid(format!("volt console: cannot use {addr:?} as an address (want host:port): {e}")))?
        .next()
        .ok_or_else(|| invalid(format!("volt console: {addr:?} resolves to no address")))
}

/// Bind and start the server thread. Every failure is returned here, never left to the
/// background thread.
pub(crate) fn start(config: &ConsoleConfig, telemetry: Telemetry) -> io::Result<ServerHandle> {
    let bind = match &config.bind {
        Some(b) => b.clone(),
        None => std::env::var("VOLT_CONSOLE_BIND").ok().filter(|s| !s.is_empty()).unwrap_or(DEFAULT_BIND.into()),
    };
    let addr = resolve(&bind)?;
    let token = auth::token_for(config.token.clone(), addr)?;
    let listener = std::net::TcpListener::bind(addr)
        .map_err(|e| io::Error::new(e.kind(), format!("volt console: cannot listen on {addr}: {e}")))?;
    listener.set_nonblocking(true)?;
    let local = listener.local_addr()?;
    let interval = config.publish_interval.unwrap_or(DEFAULT_PUBLISH_INTERVAL).max(Duration::from_millis(1));
    let limits = config.limits.unwrap_or_default();
    let (stop, stop_rx) = watch::channel(false);
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<io::Result<()>>();
    let thread = std::thread::Builder::new().name("volt-console".into()).spawn(move || {
        let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
            Ok(rt) => rt,
            Err(e) => {
                let _ = ready_tx.send(Err(e));
                return;
            }
        };
        rt.block_on(async move {
            let listener = match tokio::net::TcpListener::from_std(listener) {
                Ok(l) => l,
                Err(e) => {
                    let _ = ready_tx.send(Err(e));
                    return;
                }
            };
            let _ = ready_tx.send(Ok(()));
            serve(listener, telemetry, token, interval, limits, stop_rx).await;
        });
        // Whatever is left (a stuck client's connection) is dropped with the runtime.
        rt.shutdown_timeout(Duration::from_millis(100));
    })?;
    match ready_rx.recv() {
        Ok(Ok(())) => Ok(ServerHandle { addr: local, stop, thread: Some(thread) }),
        Ok(Err(e)) => {
            let _ = thread.join();
            Err(io::Error::new(e.kind(), format!("volt console: cannot start the server thread: {e}")))
        }
        Err(_) => {
            let _ = thread.join();
            Err(io::Error::other("volt console: the server thread exited during startup"))
        }
    }
}

async fn serve(
    listener: tokio::net::TcpListener,
    telemetry: Telemetry,
    token: Option<String>,
    interval: Duration,
    limits: ConnectionLimits,
    mut stop: watch::Receiver<bool>,
) {
    let state = Arc::new(state::State::new(telemetry, interval));
    let publisher = tokio::spawn(publisher::publish(Arc::clone(&state), stop.clone()));
    let reflection = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(proto::FILE_DESCRIPTOR_SET)
        .build_v1();
    let token: Option<Arc<str>> = token.map(Into::into);
    let check = move |req: Request<()>| auth::check_token(token.as_deref(), req);
    let mut server = tonic::transport::Server::builder()
        .max_concurrent_streams(cost::MAX_STREAMS_PER_CONNECTION)
        .layer(tonic::service::InterceptorLayer::new(check));
    let mut router = server.add_service(ConsoleServer::new(service::Service { state: Arc::clone(&state) }));
    match reflection {
        Ok(r) => router = router.add_service(r),
        Err(e) => eprintln!("volt console: gRPC reflection is unavailable: {e}"),
    }
    let mut shutdown = stop.clone();
    // Every accepted connection goes through the gate (cap and handshake timeout); one
    // it refuses is dropped, which closes it.
    let name = match listener.local_addr() {
        Ok(addr) => format!("volt console on {addr}"),
        Err(_) => "volt console".to_string(),
    };
    let incoming = limits::Incoming::new(listener, limits::Gate::until_called(limits), name);
    let serving = router.serve_with_incoming_shutdown(incoming, async move {
        let _ = shutdown.wait_for(|s| *s).await;
    });
    tokio::pin!(serving);
    tokio::select! {
        r = &mut serving => {
            if let Err(e) = r {
                eprintln!("volt console: the server stopped: {e}");
            }
        }
        _ = async {
            let _ = stop.wait_for(|s| *s).await;
            // Graceful shutdown waits for open streams; the publisher has ended them, but a
            // client that stopped reading could hold it up. Give it a moment, no more.
            tokio::time::sleep(Duration::from_millis(300)).await;
        } => {}
    }
    publisher.abort();
    // The publisher may have been cut off before its own cleanup: drop the index here
    // too, which stops the change log, so it holds no task past the server (everything
    // here runs on this one thread, so no read of the log is in progress).
    state.index.lock().unwrap_or_else(|e| e.into_inner()).take();
}
