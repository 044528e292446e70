//! The server's state: what the publisher and the calls share (the streams, the task
//! index, the stalls and deadlocks as last read), and the reads that serve both a publish
//! and a one-off call (a full update, the resources view, the task index kept fresh).

use super::cost::{self, Conn, OneOffBuckets};
use super::proto;
use super::queue::QueuedRows;
use super::stalls::StallFeed;
use super::stream::Client;
use super::tasks::{Query, TaskIndex};
use super::ONE_OFF_KEEP;
use crate::telemetry::{ResourceHolder, Telemetry};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The most resources one update carries (the first by id; `resources_total` counts all).
pub(super) const MAX_RESOURCES_PER_UPDATE: usize = 500;
/// The most deadlocks one update carries.
const MAX_DEADLOCKS_PER_UPDATE: usize = 16;
/// The most held resources `GetTask` lists, and the most resources it looks through.
const HOLDS_MAX: usize = 100;
const HOLDS_SCAN: usize = 10_000;

/// What the publisher and the calls share (one per server).
pub(super) struct State {
    pub(super) telemetry: Telemetry,
    pub(super) info: proto::RuntimeInfo,
    pub(super) seq: AtomicU64,
    /// The last lost-waker count (`u64::MAX`: none yet), for a new stream's first update.
    pub(super) lost_wakers: AtomicU64,
    /// Counts streams; a stream's id is this count hashed with `watch_id_key`.
    pub(super) next_watch_id: AtomicU64,
    watch_id_key: std::collections::hash_map::RandomState,
    pub(super) clients: Mutex<Vec<Client>>,
    /// The task index, while some client wants tasks (see "The task list").
    pub(super) index: Mutex<Option<TaskIndex>>,
    /// Until when the last one-off task call keeps the index alive.
    pub(super) one_off_until: Mutex<Option<Instant>>,
    /// Recent events, for `GetTask`.
    pub(super) history: Mutex<VecDeque<proto::Event>>,
    /// The stalls, as the publisher converted them for the wire.
    pub(super) stalls: Mutex<StallFeed>,
    /// The deadlocks the latest reading found, for the wire (see `watch_deadlocks`).
    pub(super) deadlocks: Mutex<Vec<proto::Deadlock>>,
    /// The publish at which each connection last had a window computed (see `cost`).
    pub(super) served: Mutex<HashMap<Conn, u64>>,
    /// What each connection's one-off task calls may still cost.
    one_off: Mutex<OneOffBuckets>,
    /// The rows in every stream's channel, and what they may come to.
    pub(super) queued: QueuedRows,
}

impl State {
    /// A new stream's id. `SetTaskQuery` changes the stream whose id it names, and every
    /// client holds the same token (or none, on loopback), so the id is what keeps one
    /// client from changing another's task list: it is the stream number keyed with a
    /// secret hash (SipHash, keyed from the OS's random source), which another client
    /// cannot guess from its own ids.
    pub(super) fn new_watch_id(&self) -> u64 {
        use std::hash::BuildHasher;
        let n = self.next_watch_id.fetch_add(1, Relaxed);
        // 0 means "no id" in the protocol.
        self.watch_id_key.hash_one(n).max(1)
    }

    pub(super) fn new(telemetry: Telemetry, interval: Duration) -> State {
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
            stalls: Mutex::new(StallFeed::new(&telemetry)),
            telemetry,
            info,
            seq: AtomicU64::new(0),
            lost_wakers: AtomicU64::new(u64::MAX),
            next_watch_id: AtomicU64::new(1),
            watch_id_key: std::collections::hash_map::RandomState::new(),
            clients: Mutex::new(Vec::new()),
            index: Mutex::new(None),
            one_off_until: Mutex::new(None),
            history: Mutex::new(VecDeque::new()),
            deadlocks: Mutex::new(Vec::new()),
            served: Mutex::new(HashMap::new()),
            one_off: Mutex::new(OneOffBuckets::default()),
            queued: QueuedRows::new(),
        }
    }

    /// Wait until `conn` may spend what `q` costs on a one-off call (see `cost`), or
    /// refuse it with `RESOURCE_EXHAUSTED`.
    pub(super) async fn pay_one_off(&self, conn: Conn, q: &Query) -> Result<(), tonic::Status> {
        let rows = self.telemetry.task_list_len();
        self.pay_rows(conn, q.cost(rows) + self.build_cost(rows), rows).await
    }

    /// Wait until `conn` may spend what `GetTask` costs: a walk of one shard of the task
    /// list.
    pub(super) async fn pay_get_task(&self, conn: Conn) -> Result<(), tonic::Status> {
        let rows = self.telemetry.task_list_len();
        let shards = self.telemetry.task_list_shards().max(1) as u64;
        self.pay_rows(conn, rows.div_ceil(shards).max(1), rows).await
    }

    /// A walk of the task list if the call must build the index first.
    fn build_cost(&self, rows: u64) -> u64 {
        if self.index.lock().unwrap_or_else(|e| e.into_inner()).is_some() {
            0
        } else {
            rows
        }
    }

    async fn pay_rows(&self, conn: Conn, cost: u64, rows: u64) -> Result<(), tonic::Status> {
        let taken = self.one_off.lock().unwrap_or_else(|e| e.into_inner()).take(conn, cost, rows, Instant::now());
        match taken {
            Ok(wait) if wait.is_zero() => Ok(()),
            Ok(wait) => {
                tokio::time::sleep(wait).await;
                Ok(())
            }
            Err(wait) => Err(tonic::Status::resource_exhausted(format!(
                "task queries would have to wait {:.1} s for their turn: a filtered or unindexed query walks \
                 all {rows} live tasks, and the console walks them at most {} times a second for one connection \
                 (more for all together); try again shortly",
                wait.as_secs_f64(),
                cost::one_off_rate(rows) / rows.max(1),
            ))),
        }
    }

    pub(super) fn recording(&self) -> bool {
        self.info.event_ring_capacity > 0
    }

    /// The index, brought up to date (built by one walk if there is none yet). Only
    /// while recording.
    pub(super) fn fresh_index<'a>(&self, slot: &'a mut Option<TaskIndex>) -> &'a mut TaskIndex {
        match slot {
            Some(idx) => idx.refresh(&self.telemetry),
            None => *slot = Some(TaskIndex::start(&self.telemetry)),
        }
        slot.as_mut().expect("just filled")
    }

    /// One page for a one-off call, keeping the index alive for [`ONE_OFF_KEEP`].
    pub(super) fn one_off_page(&self, q: &Query) -> proto::TaskPage {
        *self.one_off_until.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now() + ONE_OFF_KEEP);
        let mut slot = self.index.lock().unwrap_or_else(|e| e.into_inner());
        let now = self.telemetry.now_ns();
        self.fresh_index(&mut slot).page(q, now)
    }

    /// Keep the index while someone wants it; drop it (which stops the change log) once
    /// nobody does. Called by the publisher.
    pub(super) fn maintain_index(&self, slot: &mut Option<TaskIndex>) -> bool {
        let wanted = self.recording() && {
            let streams = self.clients.lock().unwrap_or_else(|e| e.into_inner()).iter().any(|c| c.wants_tasks);
            streams || self.one_off_until.lock().unwrap_or_else(|e| e.into_inner()).is_some_and(|t| Instant::now() < t)
        };
        if wanted {
            self.fresh_index(slot);
        } else {
            *slot = None;
        }
        wanted
    }

    /// An update with the snapshot, outside the publish cycle (a stream's first update,
    /// `GetSnapshot`), with `tasks` as the task part.
    /// It carries the newest stalls the publisher has read, and the number of the next:
    /// a stream's later updates carry only those from there (see `broadcast`).
    pub(super) fn full_update(&self, tasks: Option<proto::TaskChanges>) -> (proto::Update, u64) {
        let mut snapshot: proto::Snapshot = (&self.telemetry.snapshot()).into();
        let stalls_seen = {
            let feed = self.stalls.lock().unwrap_or_else(|e| e.into_inner());
            snapshot.recent_stalls = feed.newest();
            snapshot.ongoing_stalls = feed.ongoing.clone();
            feed.next
        };
        snapshot.tasks_lost_waker = self.lost_wakers();
        snapshot.deadlocks = self.deadlocks.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let (resources, resources_total) = self.resources();
        let update = proto::Update {
            seq: self.seq.load(Relaxed),
            uptime_ns: self.telemetry.uptime().as_nanos() as u64,
            snapshot: Some(snapshot),
            tasks,
            runtime: Some(self.info.clone()),
            task_groups: self.task_groups(),
            resources,
            resources_total,
            ..Default::default()
        };
        (update, stalls_seen)
    }

    /// The resources view: the first [`MAX_RESOURCES_PER_UPDATE`] resources by id, and
    /// how many there are (one short hold of the registry's lock).
    pub(super) fn resources(&self) -> (Vec<proto::Resource>, u64) {
        let mut page = self.telemetry.resources(0);
        page.truncate(MAX_RESOURCES_PER_UPDATE);
        let total = (self.telemetry.resource_count() as u64).max(page.len() as u64);
        (page.iter().map(proto::Resource::from).collect(), total)
    }

    /// The resources task `id` holds alone, among those with probes: at most
    /// [`HOLDS_MAX`], from a walk of at most [`HOLDS_SCAN`] resources.
    pub(super) fn holds(&self, id: u64) -> Vec<proto::Resource> {
        let mut out = Vec::new();
        let mut after = 0;
        let mut scanned = 0;
        while scanned < HOLDS_SCAN && out.len() < HOLDS_MAX {
            let page = self.telemetry.resources(after);
            let Some(last) = page.last() else { break };
            after = last.id;
            scanned += page.len();
            out.extend(page.iter().filter(|r| r.holder == Some(ResourceHolder::Task(id))).map(proto::Resource::from));
        }
        out.truncate(HOLDS_MAX);
        out
    }

    /// Whether a connected stream may show deadlocks: any but one that asked to be spared
    /// the task walks (`skip_lost_wakers` without tasks or resources: a sidecar nobody
    /// scrapes), since a reading walks the task list as the lost-waker count does.
    pub(super) fn deadlocks_wanted(&self) -> bool {
        let clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
        clients.iter().any(|c| c.wants_lost_wakers || c.wants_tasks || c.wants_resources)
    }

    /// Take a reading of the wait-for graph for the wire, while a client is connected
    /// (see `watch_deadlocks`); forget the last one once none is.
    pub(super) fn read_deadlocks(&self) {
        let found: Vec<proto::Deadlock> = if self.deadlocks_wanted() && self.recording() {
            self.telemetry.deadlocks().iter().take(MAX_DEADLOCKS_PER_UPDATE).map(proto::Deadlock::from).collect()
        } else {
            Vec::new()
        };
        *self.deadlocks.lock().unwrap_or_else(|e| e.into_inner()) = found;
    }

    /// The task groups on the wire (none without task statistics).
    pub(super) fn task_groups(&self) -> Vec<proto::TaskGroup> {
        self.telemetry.task_groups().iter().map(proto::TaskGroup::from).collect()
    }

    /// The lost-waker count to publish: the last walk's, or 0 without task statistics
    /// (no task can be found lost then, and no walk is needed to know it).
    pub(super) fn lost_wakers(&self) -> Option<u64> {
        if self.info.event_ring_capacity == 0 {
            return Some(0);
        }
        Some(self.lost_wakers.load(Relaxed)).filter(|&n| n != u64::MAX)
    }
}
