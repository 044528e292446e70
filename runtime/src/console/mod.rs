//! The console server (cargo feature `console`): the runtime's telemetry over gRPC, as the
//! `volt.console.v1.Console` service of `volt-console-proto`.
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
//! stuck client costs at most its backlog in memory and never delays the publisher, other
//! clients, or the runtime.
//!
//! # The task list
//! A runtime may hold a million live tasks, so no message carries all of them. While some
//! client wants tasks (a stream without `omit_tasks`, or a `GetSnapshot`/`ListTasks`
//! in the last [`ONE_OFF_KEEP`]), the server keeps an index of them ([`tasks`]), built by
//! one walk and then fed by the runtime's change log: a publish costs O(tasks that
//! changed). Each stream has a `TaskQuery` (sort, filters, a window); its updates carry
//! only that window's rows that changed, plus counts. With no such client there is no
//! index, the change log is off, and the server does no work per task at all. Every page
//! stays under [`tasks::MAX_PAGE_BYTES`].
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
//! oldest one still in its handshake, so half-open connections cannot lock clients out.
//! See [`limits`].
//!
//! # Security
//! Loopback by default. A non-loopback bind needs a token (`VOLT_CONSOLE_TOKEN` or
//! `Builder::console_token`); with a token set, every call, reflection included, must
//! carry `authorization: Bearer <token>` or gets `UNAUTHENTICATED`.

mod tasks;

use crate::telemetry::{Event, EventKind, Snapshot, TaskInfo, TaskState, Telemetry, WorkerState};
use std::collections::{HashMap, HashSet, VecDeque};
use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tasks::{Query, TaskIndex};
use tokio::sync::{mpsc, watch};
use tokio_stream::Stream;
use tonic::{Request, Response, Status};

pub mod limits;
pub use limits::ConnectionLimits;
pub use volt_console_proto as proto;
use volt_console_proto::console_server::{Console, ConsoleServer};

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

/// A running console server; stopped by [`ConsoleServer::stop`] (the runtime's shutdown).
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

/// `e` and its sources (`std::error::Error::source`), each said once: a cause whose text
/// is already in the message (transport layers often repeat their source's text, as in
/// "tcp connect error: tcp connect error") is left out. For messages a person acts on.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    with_causes(e.to_string(), e.source())
}

/// `message` followed by `source` and its sources, each said once (see [`error_chain`]).
/// For an error whose own text is not the message to show (a gRPC status: its message).
pub fn with_causes(message: String, source: Option<&(dyn std::error::Error + 'static)>) -> String {
    let mut out = message;
    let mut cur = source;
    while let Some(c) = cur {
        let text = c.to_string();
        if !text.is_empty() && !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        cur = c.source();
    }
    out
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
    let token = config.token.clone().or_else(|| std::env::var("VOLT_CONSOLE_TOKEN").ok()).filter(|t| !t.is_empty());
    if !addr.ip().is_loopback() && token.is_none() {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "volt console: {addr} is not a loopback address, and serving telemetry beyond this machine needs \
                 a token: set VOLT_CONSOLE_TOKEN (or Builder::console_token), or bind 127.0.0.1"
            ),
        ));
    }
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
    let state = Arc::new(State::new(telemetry, interval));
    let publisher = tokio::spawn(publish(Arc::clone(&state), stop.clone()));
    let reflection = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(proto::FILE_DESCRIPTOR_SET)
        .build_v1();
    let token: Option<Arc<str>> = token.map(Into::into);
    let check = move |req: Request<()>| check_token(token.as_deref(), req);
    let mut server = tonic::transport::Server::builder().layer(tonic::service::InterceptorLayer::new(check));
    let mut router = server.add_service(ConsoleServer::new(Service { state: Arc::clone(&state) }));
    match reflection {
        Ok(r) => router = router.add_service(r),
        Err(e) => eprintln!("volt console: gRPC reflection is unavailable: {e}"),
    }
    let mut shutdown = stop.clone();
    // Every accepted connection goes through the gate (cap and handshake timeout); one
    // it refuses is dropped, which closes it. Accept errors (out of file descriptors)
    // are skipped: the listener stays up.
    let gate = limits::Gate::new(limits);
    let incoming = tokio_stream::StreamExt::filter_map(
        tokio_stream::wrappers::TcpListenerStream::new(listener),
        move |accepted| match accepted {
            Ok(tcp) => gate.admit(tcp).map(Ok::<_, io::Error>),
            Err(_) => None,
        },
    );
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
    // The publisher may have been cut off before its own cleanup: stop the change log
    // here too, so it holds no task past the server (everything here runs on this one
    // thread, so no read of the log is in progress).
    state.index.lock().unwrap_or_else(|e| e.into_inner()).take();
    state.telemetry.unwatch_tasks();
}

/// Constant-time comparison of the presented token.
fn check_token(expected: Option<&str>, req: Request<()>) -> Result<Request<()>, Status> {
    let Some(expected) = expected else { return Ok(req) };
    let presented = req
        .metadata()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("");
    let (a, b) = (presented.as_bytes(), expected.as_bytes());
    let diff = a.iter().zip(b.iter()).fold(a.len() ^ b.len(), |d, (x, y)| d | (*x ^ *y) as usize);
    if diff == 0 {
        Ok(req)
    } else {
        Err(Status::unauthenticated(
            "volt console: missing or wrong token; send the metadata `authorization: Bearer <VOLT_CONSOLE_TOKEN>`",
        ))
    }
}

/// What a stream's channel carries: the shared update, the updates this client missed
/// before it, and the client's own window of the task list.
type Item = (Arc<proto::Update>, u64, Option<proto::TaskChanges>);

struct Client {
    tx: mpsc::Sender<Item>,
    /// Updates this client missed since the last one it was sent.
    missed: u64,
    /// The stream's `watch_id`.
    id: u64,
    /// False for a stream with `omit_tasks`.
    wants_tasks: bool,
    /// Its window of the task list (see [`ClientView`]).
    view: ClientView,
}

/// What one stream asked for from the task list and what it was sent.
struct ClientView {
    query: Query,
    /// `SetTaskQuery` calls so far on this stream.
    generation: u64,
    /// The rows the client holds (id -> what it was sent), in window order in `ids`.
    sent: HashMap<u64, (u8, u64, u64, u64)>,
    ids: Vec<u64>,
    matching: u64,
    /// The next update resends the whole window (first update, new query, missed update).
    full_next: bool,
    /// The index generation `ids` was computed at.
    index_generation: u64,
}

impl ClientView {
    fn new(query: Query) -> ClientView {
        ClientView {
            query,
            generation: 0,
            sent: HashMap::new(),
            ids: Vec::new(),
            matching: 0,
            full_next: true,
            index_generation: 0,
        }
    }

    /// This stream's task changes since its last update: the window's rows that are new
    /// or changed, the ids that left it, and the counts.
    fn changes(&mut self, idx: &TaskIndex, now_ns: u64) -> proto::TaskChanges {
        let full = std::mem::take(&mut self.full_next);
        let mut out = proto::TaskChanges {
            full,
            counts: Some(idx.counts()),
            query_generation: self.generation,
            ..Default::default()
        };
        if full || self.index_generation != idx.generation {
            self.index_generation = idx.generation;
            let w = idx.window(&self.query);
            self.matching = w.matching;
            // Keep the window under the size bound: its rows as they would be sent whole.
            let (rows, _) = idx.rows_within_bound(&w.ids, now_ns);
            let ids: Vec<u64> = rows.iter().map(|t| t.id).collect();
            let keep: HashSet<u64> = ids.iter().copied().collect();
            if !full {
                out.removed = self.sent.keys().filter(|id| !keep.contains(id)).copied().collect();
                out.removed.sort_unstable();
            }
            let mut sent = HashMap::with_capacity(rows.len());
            for t in rows {
                let (id, Some(v)) = (t.id, idx.version(t.id)) else { continue };
                if full || self.sent.get(&id) != Some(&v) {
                    out.changed.push(t);
                }
                sent.insert(id, v);
            }
            self.sent = sent;
            self.ids = ids;
        }
        out.view = self.ids.clone();
        out.matching = self.matching;
        out
    }
}

struct State {
    telemetry: Telemetry,
    info: proto::RuntimeInfo,
    seq: AtomicU64,
    next_watch_id: AtomicU64,
    clients: Mutex<Vec<Client>>,
    /// The task index, while some client wants tasks (see "The task list").
    index: Mutex<Option<TaskIndex>>,
    /// Until when the last one-off task call keeps the index alive.
    one_off_until: Mutex<Option<Instant>>,
    /// Recent events, for `GetTask`.
    history: Mutex<VecDeque<proto::Event>>,
}

impl State {
    fn new(telemetry: Telemetry, interval: Duration) -> State {
        let info = proto::RuntimeInfo {
            workers: telemetry.num_workers() as u32,
            max_searching: telemetry.max_searching() as u32,
            event_ring_capacity: telemetry.event_ring_capacity() as u64,
            publish_interval_ns: interval.as_nanos() as u64,
            pid: std::process::id(),
            version: env!("CARGO_PKG_VERSION").into(),
            started_unix_ns: std::time::SystemTime::now()
                .checked_sub(telemetry.uptime())
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_nanos() as u64),
        };
        State {
            telemetry,
            info,
            seq: AtomicU64::new(0),
            next_watch_id: AtomicU64::new(1),
            clients: Mutex::new(Vec::new()),
            index: Mutex::new(None),
            one_off_until: Mutex::new(None),
            history: Mutex::new(VecDeque::new()),
        }
    }

    fn recording(&self) -> bool {
        self.info.event_ring_capacity > 0
    }

    /// The index, brought up to date (built by one walk if there is none yet). Only
    /// while recording.
    fn fresh_index<'a>(&self, slot: &'a mut Option<TaskIndex>) -> &'a mut TaskIndex {
        match slot {
            Some(idx) => {
                let drained = self.telemetry.drain_task_changes(|row, name| idx.apply(&row, name));
                if let crate::telemetry::tasks::Drained::Resync = drained {
                    *idx = TaskIndex::build(&self.telemetry);
                }
            }
            None => {
                // Changes from here on are logged; the walk sees everything before.
                self.telemetry.watch_tasks();
                *slot = Some(TaskIndex::build(&self.telemetry));
            }
        }
        slot.as_mut().expect("just filled")
    }

    /// One page for a one-off call, keeping the index alive for [`ONE_OFF_KEEP`].
    fn one_off_page(&self, q: &Query) -> proto::TaskPage {
        *self.one_off_until.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now() + ONE_OFF_KEEP);
        let mut slot = self.index.lock().unwrap_or_else(|e| e.into_inner());
        let now = self.telemetry.now_ns();
        self.fresh_index(&mut slot).page(q, now)
    }

    /// Keep the index while someone wants it; drop it (and stop the change log) once
    /// nobody does. Called by the publisher.
    fn maintain_index(&self, slot: &mut Option<TaskIndex>) -> bool {
        let wanted = self.recording() && {
            let streams = self.clients.lock().unwrap_or_else(|e| e.into_inner()).iter().any(|c| c.wants_tasks);
            streams || self.one_off_until.lock().unwrap_or_else(|e| e.into_inner()).is_some_and(|t| Instant::now() < t)
        };
        if wanted {
            self.fresh_index(slot);
        } else if slot.take().is_some() {
            self.telemetry.unwatch_tasks();
        }
        wanted
    }

    /// An update with the snapshot, outside the publish cycle (a stream's first update,
    /// `GetSnapshot`), with `tasks` as the task part.
    fn full_update(&self, tasks: Option<proto::TaskChanges>) -> proto::Update {
        proto::Update {
            seq: self.seq.load(Relaxed),
            uptime_ns: self.telemetry.uptime().as_nanos() as u64,
            snapshot: Some((&self.telemetry.snapshot()).into()),
            tasks,
            runtime: Some(self.info.clone()),
            ..Default::default()
        }
    }

    /// One publish cycle's update (without tasks: each client gets its own window).
    fn next_update(&self, cursor: &mut crate::telemetry::EventCursor, dropped_before: &mut u64) -> proto::Update {
        let snapshot = self.telemetry.snapshot();
        // Every event read goes into the update (at most what the rings hold); each
        // client's own cap is applied when it is sent (see `for_client`).
        let events = cursor.read();
        let missed_ring = cursor.dropped() - *dropped_before;
        *dropped_before = cursor.dropped();
        let events: Vec<proto::Event> = events.iter().map(proto::Event::from).collect();
        {
            let mut h = self.history.lock().unwrap_or_else(|e| e.into_inner());
            for e in events.iter().rev().take(HISTORY).rev() {
                if h.len() == HISTORY {
                    h.pop_front();
                }
                h.push_back(*e);
            }
        }
        proto::Update {
            seq: self.seq.fetch_add(1, Relaxed) + 1,
            uptime_ns: self.telemetry.uptime().as_nanos() as u64,
            snapshot: Some((&snapshot).into()),
            events,
            events_missed: missed_ring,
            events_missed_ring: missed_ring,
            events_missed_cap: 0,
            tasks: None,
            updates_missed: 0,
            runtime: None,
            ..Default::default()
        }
    }

    /// Offer `update` to every client without waiting for any of them, each with its
    /// window of the task list from `idx`.
    fn broadcast(&self, update: proto::Update, idx: Option<&TaskIndex>) {
        let update = Arc::new(update);
        let now = self.telemetry.now_ns();
        let mut clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
        clients.retain_mut(|c| {
            let tasks = match idx {
                Some(idx) if c.wants_tasks => Some(c.view.changes(idx, now)),
                _ => None,
            };
            match c.tx.try_send((Arc::clone(&update), c.missed, tasks)) {
                Ok(()) => {
                    c.missed = 0;
                    true
                }
                Err(mpsc::error::TrySendError::Full(_)) => {
                    c.missed += 1;
                    // Its task diff is lost with the update: resend the window whole.
                    c.view.full_next = true;
                    true
                }
                Err(mpsc::error::TrySendError::Closed(_)) => false,
            }
        });
    }
}

async fn publish(state: Arc<State>, mut stop: watch::Receiver<bool>) {
    let mut cursor = state.telemetry.events();
    let mut dropped = 0;
    let mut ticker = tokio::time::interval(Duration::from_nanos(state.info.publish_interval_ns));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = stop.wait_for(|s| *s) => break,
        }
        let update = state.next_update(&mut cursor, &mut dropped);
        let mut slot = state.index.lock().unwrap_or_else(|e| e.into_inner());
        let wanted = state.maintain_index(&mut slot);
        state.broadcast(update, if wanted { slot.as_ref() } else { None });
    }
    // Dropping the senders ends every stream.
    state.clients.lock().unwrap_or_else(|e| e.into_inner()).clear();
    if state.index.lock().unwrap_or_else(|e| e.into_inner()).take().is_some() {
        state.telemetry.unwatch_tasks();
    }
}

struct Service {
    state: Arc<State>,
}

type UpdateStream = Pin<Box<dyn Stream<Item = Result<proto::Update, Status>> + Send>>;

#[tonic::async_trait]
impl Console for Service {
    type WatchUpdatesStream = UpdateStream;

    async fn watch_updates(&self, request: Request<proto::WatchRequest>) -> Result<Response<UpdateStream>, Status> {
        let req = request.into_inner();
        if req.max_events_per_update as usize > MAX_EVENTS_PER_UPDATE_LIMIT {
            return Err(Status::invalid_argument(format!(
                "max_events_per_update is {}; the most is {MAX_EVENTS_PER_UPDATE_LIMIT} (0 means the server's \
                 default, {MAX_EVENTS_PER_UPDATE})",
                req.max_events_per_update
            )));
        }
        let max_events = match req.max_events_per_update {
            0 => MAX_EVENTS_PER_UPDATE,
            n => n as usize,
        };
        let query = Query::new(req.task_query.as_ref(), proto::TaskSort::Busy).map_err(Status::invalid_argument)?;
        let wants_tasks = !req.omit_tasks && self.state.recording();
        let id = self.state.next_watch_id.fetch_add(1, Relaxed);
        let mut view = ClientView::new(query);
        let (tx, rx) = mpsc::channel(CLIENT_BACKLOG);
        // The first update: runtime info and the stream's whole window.
        let tasks = wants_tasks.then(|| {
            let mut slot = self.state.index.lock().unwrap_or_else(|e| e.into_inner());
            let now = self.state.telemetry.now_ns();
            view.changes(self.state.fresh_index(&mut slot), now)
        });
        let mut first = self.state.full_update(None);
        first.watch_id = id;
        let _ = tx.try_send((Arc::new(first), 0, tasks));
        self.state.clients.lock().unwrap_or_else(|e| e.into_inner()).push(Client {
            tx,
            missed: 0,
            id,
            wants_tasks,
            view,
        });
        let stream = tokio_stream::StreamExt::map(
            tokio_stream::wrappers::ReceiverStream::new(rx),
            move |(u, missed, tasks): Item| {
                let mut u = for_client(&u, missed, max_events);
                u.tasks = tasks;
                Ok(u)
            },
        );
        Ok(Response::new(Box::pin(stream)))
    }

    async fn get_snapshot(&self, request: Request<proto::SnapshotRequest>) -> Result<Response<proto::Update>, Status> {
        let req = request.into_inner();
        let query = Query::new(req.task_query.as_ref(), proto::TaskSort::Id).map_err(Status::invalid_argument)?;
        if !self.state.recording() {
            return Ok(Response::new(self.state.full_update(None)));
        }
        let page = self.state.one_off_page(&query);
        let tasks = proto::TaskChanges {
            view: page.tasks.iter().map(|t| t.id).collect(),
            changed: page.tasks,
            removed: Vec::new(),
            full: true,
            counts: page.counts,
            matching: page.matching,
            query_generation: 0,
        };
        let mut u = self.state.full_update(Some(tasks));
        u.tasks_more = page.more;
        Ok(Response::new(u))
    }

    async fn list_tasks(&self, request: Request<proto::TaskQuery>) -> Result<Response<proto::TaskPage>, Status> {
        let q = request.into_inner();
        let query = Query::new(Some(&q), proto::TaskSort::Id).map_err(Status::invalid_argument)?;
        if !self.state.recording() {
            return Err(Status::failed_precondition(
                "this runtime does not record tasks: build it with `Builder::event_ring(capacity)`",
            ));
        }
        Ok(Response::new(self.state.one_off_page(&query)))
    }

    async fn set_task_query(
        &self,
        request: Request<proto::SetTaskQueryRequest>,
    ) -> Result<Response<proto::TaskPage>, Status> {
        let req = request.into_inner();
        let query = Query::new(req.query.as_ref(), proto::TaskSort::Busy).map_err(Status::invalid_argument)?;
        if !self.state.recording() {
            return Err(Status::failed_precondition(
                "this runtime does not record tasks: build it with `Builder::event_ring(capacity)`",
            ));
        }
        let mut slot = self.state.index.lock().unwrap_or_else(|e| e.into_inner());
        let now = self.state.telemetry.now_ns();
        let page = self.state.fresh_index(&mut slot).page(&query, now);
        let mut clients = self.state.clients.lock().unwrap_or_else(|e| e.into_inner());
        let Some(c) = clients.iter_mut().find(|c| c.id == req.watch_id) else {
            return Err(Status::not_found(format!(
                "no open stream with watch_id {}; the id is in the first update of a WatchUpdates stream",
                req.watch_id
            )));
        };
        if !c.wants_tasks {
            return Err(Status::failed_precondition("this stream was opened with omit_tasks"));
        }
        c.view.query = query;
        c.view.generation += 1;
        c.view.full_next = true;
        Ok(Response::new(page))
    }

    async fn get_task(&self, request: Request<proto::TaskRequest>) -> Result<Response<proto::TaskDetails>, Status> {
        let id = request.into_inner().id;
        if id == 0 {
            return Err(Status::invalid_argument("task id 0 is never assigned; ids start at 1"));
        }
        if !self.state.recording() {
            return Err(Status::failed_precondition(
                "this runtime does not record tasks: build it with `Builder::event_ring(capacity)`",
            ));
        }
        let mut found = None;
        self.state.telemetry.for_each_task(|row, name| {
            if row.id == id && row.state != TaskState::Complete {
                found = Some(TaskInfo {
                    id,
                    name: name.map(String::from),
                    state: row.state,
                    polls: row.polls,
                    busy: Duration::from_nanos(row.busy_ns),
                    scheduled: Duration::from_nanos(row.scheduled_ns),
                    since_last_poll: row.since_last_poll_ns.map(Duration::from_nanos),
                });
            }
        });
        let Some(task) = found else {
            return Err(Status::not_found(format!("no live task with id {id}")));
        };
        let recent_events = self
            .state
            .history
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter(|e| e.task_id == id)
            .copied()
            .collect();
        Ok(Response::new(proto::TaskDetails { task: Some((&task).into()), recent_events }))
    }
}

/// One client's copy of a published update: its newest `max_events` events (the rest
/// counted in `events_missed_cap`), the updates it missed, and the task list unless it
/// asked to go without. Copies only what the client gets.
fn for_client(u: &proto::Update, updates_missed: u64, max_events: usize) -> proto::Update {
    let cut = u.events.len().saturating_sub(max_events);
    proto::Update {
        seq: u.seq,
        uptime_ns: u.uptime_ns,
        snapshot: u.snapshot.clone(),
        events: u.events[cut..].to_vec(),
        events_missed: u.events_missed + cut as u64,
        events_missed_ring: u.events_missed_ring,
        events_missed_cap: u.events_missed_cap + cut as u64,
        // Each stream's task window is added by its sender.
        tasks: None,
        updates_missed,
        runtime: u.runtime.clone(),
        watch_id: u.watch_id,
        tasks_more: u.tasks_more,
    }
}

// Conversions to the wire types (field for field; see `proto/volt/console/v1`).

fn histogram(h: &crate::telemetry::Histogram) -> Option<proto::Histogram> {
    Some(proto::Histogram { buckets: h.buckets.clone(), sum: h.sum })
}

impl From<WorkerState> for proto::WorkerState {
    fn from(s: WorkerState) -> proto::WorkerState {
        match s {
            WorkerState::Running => proto::WorkerState::Running,
            WorkerState::Searching => proto::WorkerState::Searching,
            WorkerState::Parked => proto::WorkerState::Parked,
        }
    }
}

impl From<&Snapshot> for proto::Snapshot {
    fn from(s: &Snapshot) -> proto::Snapshot {
        proto::Snapshot {
            workers: s
                .workers
                .iter()
                .map(|w| proto::WorkerSnapshot {
                    index: w.index as u32,
                    state: proto::WorkerState::from(w.state) as i32,
                    local_queue_depth: w.local_queue_depth,
                    lifo_occupied: w.lifo_occupied,
                    tasks_polled: w.tasks_polled,
                    tasks_stolen: w.tasks_stolen,
                    steal_operations: w.steal_operations,
                    times_parked: w.times_parked,
                    parked_ns: w.parked_ns,
                    lifo_hits: w.lifo_hits,
                    global_batch_fetches: w.global_batch_fetches,
                    overflows: w.overflows,
                    budget_yields: w.budget_yields,
                    ewma_task_ns: w.ewma_task_ns,
                    global_queue_interval: w.global_queue_interval,
                    poll_time_histogram: histogram(&w.poll_time_histogram),
                })
                .collect(),
            global_queue_depth: s.global_queue_depth,
            num_searching: s.num_searching,
            num_parked: s.num_parked,
            parked_bitmap: s.parked_bitmap,
            tasks_spawned: s.tasks_spawned,
            tasks_alive: s.tasks_alive,
            tasks_completed: s.tasks_completed,
            tasks_cancelled: s.tasks_cancelled,
            tasks_panicked: s.tasks_panicked,
            timers_armed: s.timers_armed,
            timers_fired: s.timers_fired,
            timers_cancelled: s.timers_cancelled,
            timers_pending: s.timers_pending,
            io_events: s.io_events,
            park_duration_histogram: histogram(&s.park_duration_histogram),
            steal_batch_histogram: histogram(&s.steal_batch_histogram),
            schedule_latency_histogram: histogram(&s.schedule_latency_histogram),
            events_recorded: s.events_recorded,
            events_overwritten: s.events_overwritten,
            blocking_threads: s.blocking_threads,
            blocking_queue_depth: s.blocking_queue_depth,
            bridge: s.bridge.as_ref().map(|b| proto::BridgeSnapshot {
                workers: b.workers,
                alive_tasks: b.alive_tasks,
                global_queue_depth: b.global_queue_depth,
                busy_ns: b.busy.as_nanos() as u64,
            }),
        }
    }
}

impl From<EventKind> for proto::EventKind {
    fn from(k: EventKind) -> proto::EventKind {
        use proto::EventKind as P;
        match k {
            EventKind::Spawn => P::Spawn,
            EventKind::Schedule => P::Schedule,
            EventKind::PollStart => P::PollStart,
            EventKind::PollEnd => P::PollEnd,
            EventKind::Transition => P::Transition,
            EventKind::Steal => P::Steal,
            EventKind::Overflow => P::Overflow,
            EventKind::Park => P::Park,
            EventKind::Unpark => P::Unpark,
            EventKind::Complete => P::Complete,
            EventKind::Cancel => P::Cancel,
            EventKind::Panic => P::Panic,
        }
    }
}

impl From<&Event> for proto::Event {
    fn from(e: &Event) -> proto::Event {
        proto::Event {
            timestamp_ns: e.timestamp_ns,
            worker: e.worker.map(|w| w as u32),
            kind: proto::EventKind::from(e.kind) as i32,
            task_id: e.task_id,
            arg: e.arg,
        }
    }
}

impl From<&TaskInfo> for proto::Task {
    fn from(t: &TaskInfo) -> proto::Task {
        proto::Task {
            id: t.id,
            name: t.name.clone(),
            state: match t.state {
                TaskState::Idle => proto::TaskState::Idle,
                TaskState::Scheduled => proto::TaskState::Scheduled,
                TaskState::Running => proto::TaskState::Running,
                TaskState::Complete => proto::TaskState::Complete,
            } as i32,
            polls: t.polls,
            busy_ns: t.busy.as_nanos() as u64,
            scheduled_ns: t.scheduled.as_nanos() as u64,
            since_last_poll_ns: t.since_last_poll.map(|d| d.as_nanos() as u64),
        }
    }
}
