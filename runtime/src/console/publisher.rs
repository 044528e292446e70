//! The publisher: every publish interval, one snapshot and one drain of the event ring
//! become one `Update`, offered to every watching client through its bounded channel
//! (see "Publishing", "The task list" and "Lost events" in the module doc).

use super::cost::{self, Conn, OneOffBuckets, Want};
use super::tasks::{Query, TaskIndex};
use super::{proto, HISTORY, ONE_OFF_KEEP};
use crate::telemetry::Telemetry;
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, watch};

/// What a stream's channel carries: the shared update, the updates this client missed
/// before it, and the client's own window of the task list.
/// The stalls new to this client ride along (see `broadcast`), and its own rows' share
/// of the queued total (see [`QUEUED_ROWS_CAP`]).
pub(super) type Item = (Arc<Published>, u64, Option<proto::TaskChanges>, Vec<proto::Stall>, Queued);

/// A published update, shared by every stream it is queued for: its events are counted
/// in the queued total once, until the last stream has taken it (or dropped it).
pub(super) struct Published {
    pub(super) update: proto::Update,
    _rows: Option<Queued>,
}

impl Published {
    /// An update no queued total counts (a stream's first, which has no events).
    pub(super) fn uncounted(update: proto::Update) -> Published {
        Published { update, _rows: None }
    }
}

/// What every stream's channel together may hold, in rows: a task row, an event or a
/// stall's frame count one each, and an update's events count once however many
/// streams it is queued for. A client that stops reading keeps what it was last sent, up
/// to [`CLIENT_BACKLOG`](super::CLIENT_BACKLOG) updates; without a bound on the sum, many
/// streams that stopped reading at different times (256 connections of 32 streams each)
/// could hold gigabytes of old updates. A stream's count includes the item its transport
/// took last, until it takes the next (see `service`). So a stream with an empty channel
/// (one that reads takes each update before the next) gets an update unless what older
/// updates and other streams hold already fills the cap; a stream that still has one
/// queued gets it only while the total stays under half the cap. The total passes the
/// cap by at most the largest update still held (one that was bigger than the cap on
/// its own, taken by a stream that then stopped reading) and the one being published.
/// Streams that stopped reading thus miss their updates while those that read keep
/// getting theirs, unless the stuck ones hold the whole cap between them. Not counted:
/// what HTTP/2 holds in a stream's send buffer once encoded (hyper keeps up to 400 KiB a
/// stream there, while the client's flow-control window lets it).
pub(super) const QUEUED_ROWS_CAP: usize = 1 << 20;

/// Rows counted in the queued total (and in one stream's, for a stream's own rows)
/// until the item or update holding them is taken from the channel, or dropped.
pub(super) struct Queued {
    rows: usize,
    stream: Option<Arc<AtomicUsize>>,
    all: Arc<AtomicUsize>,
}

impl Drop for Queued {
    fn drop(&mut self) {
        if let Some(stream) = &self.stream {
            stream.fetch_sub(self.rows, Relaxed);
        }
        self.all.fetch_sub(self.rows, Relaxed);
    }
}

/// A stream's own rows in an item, as [`QUEUED_ROWS_CAP`] counts them: its task rows
/// (and its window's ids, one per eight), its stalls' frames, and one for the item.
pub(super) fn own_rows(tasks: Option<&proto::TaskChanges>, stalls: &[proto::Stall]) -> usize {
    let tasks = tasks.map_or(0, |t| t.changed.len() + (t.view.len() + t.removed.len()).div_ceil(8));
    let stalls: usize = stalls.iter().map(|s| 1 + s.stack.len()).sum();
    1 + tasks + stalls
}

pub(super) struct Client {
    pub(super) tx: mpsc::Sender<Item>,
    /// The connection it came on, which pays for its windows (see `cost`).
    pub(super) conn: Conn,
    /// Updates this client missed since the last one it was sent.
    pub(super) missed: u64,
    /// The stream's `watch_id`.
    pub(super) id: u64,
    /// False for a stream with `omit_tasks`.
    pub(super) wants_tasks: bool,
    /// False for a stream with `skip_lost_wakers`.
    pub(super) wants_lost_wakers: bool,
    /// True for a stream with `want_resources`.
    pub(super) wants_resources: bool,
    /// Its window of the task list (see [`ClientView`]).
    pub(super) view: ClientView,
    /// The number (in the publisher's [`StallFeed`]) of the first stall this client was
    /// not sent: each stall reaches each client once, even one that missed updates.
    pub(super) stalls_seen: u64,
    /// The rows in its channel (see [`QUEUED_ROWS_CAP`]).
    pub(super) queued: Arc<AtomicUsize>,
}

/// What one stream asked for from the task list and what it was sent.
pub(super) struct ClientView {
    pub(super) query: Query,
    /// `SetTaskQuery` calls so far on this stream.
    pub(super) generation: u64,
    /// The rows the client holds (id -> what it was sent), in window order in `ids`.
    pub(super) sent: HashMap<u64, (u8, u64, u64, u64)>,
    pub(super) ids: Vec<u64>,
    pub(super) matching: u64,
    /// The next update resends the whole window (first update, new query, missed update).
    pub(super) full_next: bool,
    /// The index generation `ids` was computed at.
    pub(super) index_generation: u64,
    /// The publish (`State::seq`) `ids` was computed at (0: never), for taking turns.
    pub(super) window_at: u64,
}

impl ClientView {
    pub(super) fn new(query: Query) -> ClientView {
        ClientView {
            query,
            generation: 0,
            sent: HashMap::new(),
            ids: Vec::new(),
            matching: 0,
            full_next: true,
            index_generation: 0,
            window_at: 0,
        }
    }

    /// Whether the index changed since the window was computed.
    pub(super) fn stale(&self, idx: &TaskIndex) -> bool {
        self.index_generation != idx.generation
    }

    /// Take `page`, computed for this stream's new query from `idx`, as its window: the
    /// next update resends it whole, without computing it again.
    pub(super) fn take_page(&mut self, page: &proto::TaskPage, idx: &TaskIndex, at: u64) {
        self.ids = page.tasks.iter().map(|t| t.id).collect();
        self.computed(idx, at, page.matching);
        self.full_next = true;
    }

    /// Note a window just computed from `idx` at publish `at`, with `matching` tasks.
    fn computed(&mut self, idx: &TaskIndex, at: u64, matching: u64) {
        self.index_generation = idx.generation;
        self.window_at = at;
        self.matching = matching;
    }

    /// This stream's task changes since its last update: the window's rows that are new
    /// or changed, the ids that left it, and the counts. With `recompute` false (not its
    /// turn: see `cost`) a stale window stays as it was and only the counts come (or, for
    /// an update that must resend the window whole, its rows as they are now).
    pub(super) fn changes(&mut self, idx: &TaskIndex, now_ns: u64, recompute: bool, at: u64) -> proto::TaskChanges {
        let full = std::mem::take(&mut self.full_next);
        let mut out = proto::TaskChanges {
            full,
            counts: Some(idx.counts()),
            query_generation: self.generation,
            ..Default::default()
        };
        let stale = self.stale(idx);
        if stale && !recompute && !full {
            // Not its turn (see `cost`): the window as it was, with today's counts.
            out.view = self.ids.clone();
            out.matching = self.matching;
            return out;
        }
        if full || stale {
            let window = if stale && recompute {
                let w = idx.window(&self.query);
                self.computed(idx, at, w.matching);
                w.ids
            } else {
                std::mem::take(&mut self.ids)
            };
            // Keep the window under the size bound: its rows as they would be sent whole.
            let (rows, _) = idx.rows_within_bound(&window, now_ns);
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

pub(super) struct State {
    pub(super) telemetry: Telemetry,
    pub(super) info: proto::RuntimeInfo,
    pub(super) seq: AtomicU64,
    /// The last lost-waker count (`u64::MAX`: none yet), for a new stream's first update.
    lost_wakers: AtomicU64,
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
    deadlocks: Mutex<Vec<proto::Deadlock>>,
    /// The publish at which each connection last had a window computed (see `cost`).
    served: Mutex<HashMap<Conn, u64>>,
    /// What each connection's one-off task calls may still cost.
    one_off: Mutex<OneOffBuckets>,
    /// The rows in every stream's channel, and what they may come to (see
    /// [`QUEUED_ROWS_CAP`]).
    queued: Arc<AtomicUsize>,
    pub(super) queued_cap: usize,
}

/// The stalls as the publisher reads them, converted for the wire once, whatever the
/// number of clients. Their stacks are named on a blocking thread (`refresh_stalls`): the
/// first stack named in a process loads its debug info, which must not hold up the
/// console.
#[derive(Default)]
pub(super) struct StallFeed {
    /// The runtime's report count per worker, read up to here.
    cursor: Vec<u64>,
    /// Ended stalls read so far (the next one's number).
    pub(super) next: u64,
    /// The newest [`STALLS_KEPT`] ended stalls read, numbered: a stream is sent at most
    /// [`MAX_STALLS_PER_UPDATE`] an update, the oldest it was not sent first, so a burst
    /// reaches it over several updates.
    recent: VecDeque<(u64, proto::Stall)>,
    /// The polls running past the threshold at the last publish.
    pub(super) ongoing: Vec<proto::Stall>,
}

/// Ended stalls the publisher keeps for its streams.
const STALLS_KEPT: usize = crate::telemetry::STALL_HISTORY;

impl StallFeed {
    /// The oldest [`MAX_STALLS_PER_UPDATE`] ended stalls numbered `seen` or later that the
    /// feed holds, and the number after the last of them (`seen` if none).
    pub(super) fn since(&self, seen: u64) -> (Vec<proto::Stall>, u64) {
        let mut next = seen;
        let stalls = self
            .recent
            .iter()
            .filter(|(n, _)| *n >= seen)
            .take(MAX_STALLS_PER_UPDATE)
            .map(|(n, s)| {
                next = n + 1;
                s.clone()
            })
            .collect();
        (stalls, next)
    }

    /// The newest [`MAX_STALLS_PER_UPDATE`] ended stalls, for a stream's first update.
    fn newest(&self) -> Vec<proto::Stall> {
        let skip = self.recent.len().saturating_sub(MAX_STALLS_PER_UPDATE);
        self.recent.iter().skip(skip).map(|(_, s)| s.clone()).collect()
    }
}

impl State {
    /// Read the stalls that ended since the last call and the polls running past the
    /// threshold now, naming their stacks on a blocking thread. The publish loop runs it
    /// as a task of its own and goes on publishing meanwhile.
    async fn refresh_stalls(&self) {
        let cursor = self.stalls.lock().unwrap_or_else(|e| e.into_inner()).cursor.clone();
        let had_ongoing = !self.stalls.lock().unwrap_or_else(|e| e.into_inner()).ongoing.is_empty();
        if !had_ongoing && !self.telemetry.stalls_pending(&cursor) {
            return;
        }
        let t = self.telemetry.clone();
        let read = tokio::task::spawn_blocking(move || {
            let mut cursor = cursor;
            let ended = t.stalls_since(&mut cursor, STALLS_KEPT);
            let mut ongoing = t.stalls_ongoing();
            ongoing.truncate(MAX_STALLS_PER_UPDATE);
            let wire = |v: Vec<crate::telemetry::Stall>| v.iter().map(proto::Stall::from).collect::<Vec<_>>();
            (cursor, wire(ended), wire(ongoing))
        })
        .await;
        let Ok((cursor, ended, ongoing)) = read else { return };
        let mut feed = self.stalls.lock().unwrap_or_else(|e| e.into_inner());
        feed.cursor = cursor;
        for s in ended {
            let n = feed.next;
            feed.next += 1;
            feed.recent.push_back((n, s));
            if feed.recent.len() > STALLS_KEPT {
                feed.recent.pop_front();
            }
        }
        feed.ongoing = ongoing;
    }

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
            stalls: Mutex::new(StallFeed::default()),
            deadlocks: Mutex::new(Vec::new()),
            served: Mutex::new(HashMap::new()),
            one_off: Mutex::new(OneOffBuckets::default()),
            queued: Arc::new(AtomicUsize::new(0)),
            queued_cap: QUEUED_ROWS_CAP,
        }
    }

    /// Count `rows` more of a stream's own, counted in `own`, for an item with the update
    /// being published, whose events (`current` rows) the total counts already; `empty`:
    /// the stream's channel is empty. `None` when [`QUEUED_ROWS_CAP`] does not allow it.
    pub(super) fn reserve(&self, own: &Arc<AtomicUsize>, rows: usize, current: usize, empty: bool) -> Option<Queued> {
        let all = self.queued.load(Relaxed);
        let allowed = if empty {
            // It takes what it is sent: allowed unless what is held (older updates, the
            // items streams have queued or taken last) leaves no room.
            all.saturating_sub(current) + rows <= self.queued_cap
        } else {
            all + rows <= self.queued_cap / 2
        };
        if !allowed {
            return None;
        }
        own.fetch_add(rows, Relaxed);
        self.queued.fetch_add(rows, Relaxed);
        Some(Queued { rows, stream: Some(Arc::clone(own)), all: Arc::clone(&self.queued) })
    }

    /// Whether the queued total leaves room for a new stream's first update of about
    /// `rows` (checked again, exactly, once it is made).
    pub(super) fn room_for(&self, rows: usize) -> bool {
        self.queued.load(Relaxed) + rows <= self.queued_cap
    }

    /// The rows in every stream's channel now.
    #[cfg(test)]
    pub(super) fn queued_rows(&self) -> usize {
        self.queued.load(Relaxed)
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
            Some(idx) => {
                let drained = self.telemetry.drain_task_changes(|row, name| idx.apply(&row, name));
                if let crate::telemetry::tasks::Drained::Resync = drained {
                    idx.rebuild(&self.telemetry);
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
    pub(super) fn one_off_page(&self, q: &Query) -> proto::TaskPage {
        *self.one_off_until.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now() + ONE_OFF_KEEP);
        let mut slot = self.index.lock().unwrap_or_else(|e| e.into_inner());
        let now = self.telemetry.now_ns();
        self.fresh_index(&mut slot).page(q, now)
    }

    /// Keep the index while someone wants it; drop it (and stop the change log) once
    /// nobody does. Called by the publisher.
    pub(super) fn maintain_index(&self, slot: &mut Option<TaskIndex>) -> bool {
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
    fn resources(&self) -> (Vec<proto::Resource>, u64) {
        let page = self.telemetry.resources_page(0, MAX_RESOURCES_PER_UPDATE);
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
            let page = self.telemetry.resources_page(after, crate::telemetry::MAX_RESOURCES);
            let Some(last) = page.last() else { break };
            after = last.id;
            scanned += page.len();
            out.extend(
                page.iter()
                    .filter(|r| r.holder == Some(crate::telemetry::ResourceHolder::Task(id)))
                    .map(proto::Resource::from),
            );
        }
        out.truncate(HOLDS_MAX);
        out
    }

    /// Whether a connected stream may show deadlocks: any but one that asked to be spared
    /// the task walks (`skip_lost_wakers` without tasks or resources: a sidecar nobody
    /// scrapes), since a reading walks the task list as the lost-waker count does.
    fn deadlocks_wanted(&self) -> bool {
        let clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
        clients.iter().any(|c| c.wants_lost_wakers || c.wants_tasks || c.wants_resources)
    }

    /// Take a reading of the wait-for graph for the wire, while a client is connected
    /// (see `watch_deadlocks`); forget the last one once none is.
    fn read_deadlocks(&self) {
        let found: Vec<proto::Deadlock> = if self.deadlocks_wanted() && self.recording() {
            self.telemetry.deadlocks().iter().take(MAX_DEADLOCKS_PER_UPDATE).map(proto::Deadlock::from).collect()
        } else {
            Vec::new()
        };
        *self.deadlocks.lock().unwrap_or_else(|e| e.into_inner()) = found;
    }

    /// The task groups on the wire (none without task statistics).
    fn task_groups(&self) -> Vec<proto::TaskGroup> {
        self.telemetry.task_groups().iter().map(proto::TaskGroup::from).collect()
    }

    /// The lost-waker count to publish: the last walk's, or 0 without task statistics
    /// (no task can be found lost then, and no walk is needed to know it).
    fn lost_wakers(&self) -> Option<u64> {
        if self.info.event_ring_capacity == 0 {
            return Some(0);
        }
        Some(self.lost_wakers.load(Relaxed)).filter(|&n| n != u64::MAX)
    }

    /// One publish cycle's update (without tasks: each client gets its own window).
    pub(super) fn next_update(
        &self,
        cursor: &mut crate::telemetry::EventCursor,
        dropped_before: &mut u64,
    ) -> proto::Update {
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
        let mut snap: proto::Snapshot = (&snapshot).into();
        snap.deadlocks = self.deadlocks.lock().unwrap_or_else(|e| e.into_inner()).clone();
        // The resources list costs a page of the registry: only for streams that want it.
        let wanted = self.clients.lock().unwrap_or_else(|e| e.into_inner()).iter().any(|c| c.wants_resources);
        let (resources, resources_total) = if wanted { self.resources() } else { (Vec::new(), 0) };
        proto::Update {
            seq: self.seq.fetch_add(1, Relaxed) + 1,
            uptime_ns: self.telemetry.uptime().as_nanos() as u64,
            snapshot: Some(snap),
            resources,
            resources_total,
            events,
            events_missed: missed_ring,
            events_missed_ring: missed_ring,
            events_missed_cap: 0,
            tasks: None,
            updates_missed: 0,
            runtime: None,
            task_groups: self.task_groups(),
            ..Default::default()
        }
    }

    /// Offer `update` to every client without waiting for any of them, each with its
    /// window of the task list from `idx`, and the stalls it has not been sent (at most
    /// [`MAX_STALLS_PER_UPDATE`], the oldest of them; the rest come with later updates).
    pub(super) fn broadcast(&self, mut update: proto::Update, idx: Option<&TaskIndex>) {
        let feed = self.stalls.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(s) = update.snapshot.as_mut() {
            s.ongoing_stalls = feed.ongoing.clone();
        }
        let at = update.seq;
        // Its events (and task groups) are counted once, for as long as some stream
        // holds it.
        let events = update.events.len() + update.task_groups.len();
        self.queued.fetch_add(events, Relaxed);
        let rows = Queued { rows: events, stream: None, all: Arc::clone(&self.queued) };
        let update = Arc::new(Published { update, _rows: Some(rows) });
        let now = self.telemetry.now_ns();
        let mut clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
        let mut recompute = vec![false; clients.len()];
        if let Some(idx) = idx {
            for i in self.plan_windows(&clients, idx, at) {
                recompute[i] = true;
            }
        }
        let mut i = 0;
        clients.retain_mut(|c| {
            let recompute = recompute[i];
            i += 1;
            if c.tx.capacity() == 0 && !c.tx.is_closed() {
                // It misses this update: nothing to work out for it.
                c.missed += 1;
                c.view.full_next = true;
                return true;
            }
            let tasks = match idx {
                Some(idx) if c.wants_tasks => Some(c.view.changes(idx, now, recompute, at)),
                _ => None,
            };
            let (stalls, seen) =
                if feed.next > c.stalls_seen { feed.since(c.stalls_seen) } else { (Vec::new(), c.stalls_seen) };
            let empty = c.tx.capacity() == c.tx.max_capacity();
            let Some(queued) = self.reserve(&c.queued, own_rows(tasks.as_ref(), &stalls), events, empty) else {
                // Past its share of the queued rows: it misses this update, as if its
                // channel were full.
                c.missed += 1;
                c.view.full_next = true;
                return !c.tx.is_closed();
            };
            match c.tx.try_send((Arc::clone(&update), c.missed, tasks, stalls, queued)) {
                Ok(()) => {
                    c.missed = 0;
                    c.stalls_seen = seen;
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

impl State {
    /// The streams whose stale windows are recomputed at publish `at`, within the
    /// publish's budget, connections taking turns (see `cost`).
    fn plan_windows(&self, clients: &[Client], idx: &TaskIndex, at: u64) -> Vec<usize> {
        let wants: Vec<Want> = clients
            .iter()
            .enumerate()
            // A stream whose channel is full misses this update: no window for it.
            .filter(|(_, c)| c.wants_tasks && c.view.stale(idx) && c.tx.capacity() > 0 && !c.tx.is_closed())
            .map(|(stream, c)| Want {
                stream,
                conn: c.conn,
                window_at: c.view.window_at,
                cost: idx.window_cost(&c.view.query),
            })
            .collect();
        let mut served = self.served.lock().unwrap_or_else(|e| e.into_inner());
        let (chosen, served_now) = cost::plan(&wants, &served, cost::publish_budget(idx.len()));
        for conn in served_now {
            served.insert(conn, at);
        }
        // Forget connections with no stream left.
        if served.len() > clients.len() {
            served.retain(|conn, _| clients.iter().any(|c| c.conn == *conn));
        }
        chosen
    }
}

/// The most stalls one update carries (their stacks make them large). A stream's first
/// update and `GetSnapshot` carry the newest; each later update only those the client
/// was not yet sent, oldest first, so a stall crosses the wire once per client (unless
/// the client falls more than `STALL_HISTORY` stalls behind).
pub(super) const MAX_STALLS_PER_UPDATE: usize = 8;

/// The most resources one update carries (the first by id; `resources_total` counts all).
pub(super) const MAX_RESOURCES_PER_UPDATE: usize = 500;
/// The most deadlocks one update carries.
const MAX_DEADLOCKS_PER_UPDATE: usize = 16;
/// The most held resources `GetTask` lists, and the most resources it looks through.
const HOLDS_MAX: usize = 100;
const HOLDS_SCAN: usize = 10_000;
/// How often the console reads the wait-for graph while a client is connected: often
/// enough that a deadlock shows within a second of forming (it is confirmed on the
/// second reading that finds it).
const DEADLOCK_INTERVAL: Duration = Duration::from_millis(250);

/// Read the wait-for graph every [`DEADLOCK_INTERVAL`] while a client is connected, on a
/// blocking thread (a reading walks the task list), never on a worker.
async fn watch_deadlocks(state: Arc<State>, mut stop: watch::Receiver<bool>) {
    let mut ticker = tokio::time::interval(DEADLOCK_INTERVAL);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = stop.wait_for(|s| *s) => break,
        }
        if !state.deadlocks_wanted() {
            // Nobody to show it to: no reading, and none kept for a later client.
            state.deadlocks.lock().unwrap_or_else(|e| e.into_inner()).clear();
            continue;
        }
        let st = Arc::clone(&state);
        if tokio::task::spawn_blocking(move || st.read_deadlocks()).await.is_err() {
            break;
        }
    }
}

pub(super) async fn publish(state: Arc<State>, mut stop: watch::Receiver<bool>) {
    let mut cursor = state.telemetry.events();
    let mut dropped = 0;
    let mut ticker = tokio::time::interval(Duration::from_nanos(state.info.publish_interval_ns));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    // The lost-waker count walks every task: at most once a second, while someone listens.
    let mut lost: Option<Instant> = None;
    let recording = state.info.event_ring_capacity > 0;
    let mut refreshing: Option<tokio::task::JoinHandle<()>> = None;
    let deadlocks = tokio::spawn(watch_deadlocks(Arc::clone(&state), stop.clone()));
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = stop.wait_for(|s| *s) => break,
        }
        // Stalls are read (and their stacks named, which the first time loads the debug
        // info) beside the publishing, never in its way: this update carries what the
        // last finished read found.
        if refreshing.as_ref().is_none_or(|h| h.is_finished()) {
            let st = Arc::clone(&state);
            refreshing = Some(tokio::spawn(async move { st.refresh_stalls().await }));
        }
        let mut update = state.next_update(&mut cursor, &mut dropped);
        let listened = state.clients.lock().unwrap_or_else(|e| e.into_inner()).iter().any(|c| c.wants_lost_wakers);
        if !listened {
            // A count from before would be stale by the time someone wants it again.
            lost = None;
            state.lost_wakers.store(u64::MAX, Relaxed);
        }
        let mut found_lost = None;
        if recording && listened && lost.is_none_or(|at| at.elapsed() >= Duration::from_secs(1)) {
            let ids = state.telemetry.lost_waker_ids();
            lost = Some(Instant::now());
            state.lost_wakers.store(ids.len() as u64, Relaxed);
            found_lost = Some(ids);
        }
        if let Some(s) = update.snapshot.as_mut() {
            s.tasks_lost_waker = state.lost_wakers();
        }
        let mut slot = state.index.lock().unwrap_or_else(|e| e.into_inner());
        let wanted = state.maintain_index(&mut slot);
        if let (Some(idx), Some(ids)) = (slot.as_mut().filter(|_| wanted), found_lost) {
            idx.mark_lost(&ids);
        }
        state.broadcast(update, if wanted { slot.as_ref() } else { None });
    }
    deadlocks.abort();
    // Dropping the senders ends every stream.
    state.clients.lock().unwrap_or_else(|e| e.into_inner()).clear();
    if state.index.lock().unwrap_or_else(|e| e.into_inner()).take().is_some() {
        state.telemetry.unwatch_tasks();
    }
}

/// One client's copy of a published update: its newest `max_events` events (the rest
/// counted in `events_missed_cap`), the updates it missed, and the task list unless it
/// asked to go without. Copies only what the client gets.
/// Without `resources`, the resources list is left out.
pub(super) fn for_client(u: &proto::Update, updates_missed: u64, max_events: usize, resources: bool) -> proto::Update {
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
        task_groups: u.task_groups.clone(),
        resources: if resources { u.resources.clone() } else { Vec::new() },
        resources_total: if resources { u.resources_total } else { 0 },
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn client(state: &State, tx: mpsc::Sender<Item>) -> Client {
        Client {
            tx,
            conn: None,
            missed: 0,
            id: state.new_watch_id(),
            wants_tasks: false,
            wants_lost_wakers: false,
            wants_resources: false,
            view: ClientView::new(Query::new(None, proto::TaskSort::Id).unwrap()),
            stalls_seen: 0,
            queued: Arc::new(AtomicUsize::new(0)),
        }
    }

    fn stream(state: &State) -> mpsc::Receiver<Item> {
        let (tx, rx) = mpsc::channel(super::super::CLIENT_BACKLOG);
        state.clients.lock().unwrap().push(client(state, tx));
        rx
    }

    fn update(seq: u64, events: usize) -> proto::Update {
        proto::Update { seq, events: vec![proto::Event::default(); events], ..Default::default() }
    }

    /// Takes every update `rx` has, checking they come in order with none missed.
    fn read_all(rx: &mut mpsc::Receiver<Item>, next: &mut u64) {
        while let Ok((u, missed, ..)) = rx.try_recv() {
            assert_eq!((u.update.seq, missed), (*next, 0), "a reading stream missed an update");
            *next += 1;
        }
    }

    fn state(cap: usize) -> (crate::Runtime, State) {
        let rt = crate::runtime::Builder::new().worker_threads(1).build().unwrap();
        let mut state = State::new(rt.handle().telemetry(), Duration::from_millis(10));
        state.queued_cap = cap;
        (rt, state)
    }

    /// Streams that stop reading one after another, each at a different update, would
    /// hold every update since the first between them: the total stays within the cap
    /// (plus the update being published), every update offered to them is queued or
    /// counted missed, and every row comes back once their channels are dropped.
    #[test]
    fn streams_that_stop_reading_at_different_times_hold_at_most_the_cap() {
        let (_rt, state) = state(2000);
        const EVENTS: usize = 50;
        let mut stuck = Vec::new();
        let mut most = 0;
        for seq in 1..=100u64 {
            stuck.push((seq, stream(&state)));
            state.broadcast(update(seq, EVENTS), None);
            most = most.max(state.queued_rows());
            assert!(state.queued_rows() <= 2000 + EVENTS, "{} rows queued at update {seq}", state.queued_rows());
        }
        // Unbounded, 100 distinct updates of 50 events would be held.
        assert!(most > 2000 / 2, "the stuck streams held only {most} rows: the cap did not bind");
        let clients = state.clients.lock().unwrap();
        for (c, (first, rx)) in clients.iter().zip(stuck.iter_mut()) {
            let offered = 100 - *first + 1;
            let mut accounted = c.missed;
            while let Ok((_, missed, ..)) = rx.try_recv() {
                accounted += 1 + missed;
            }
            assert_eq!(accounted, offered, "a stream that joined at update {first}");
        }
        drop(clients);
        stuck.clear();
        assert_eq!(state.queued_rows(), 0, "rows still counted after every channel was dropped");
    }

    /// Streams that read get every update, however many there are and however many
    /// events an update holds (counted once, not once per stream), while streams that
    /// stopped reading hold what the cap lets them.
    #[test]
    fn reading_streams_miss_nothing_beside_stuck_ones() {
        let (_rt, state) = state(2000);
        let mut stuck: Vec<_> = (0..20).map(|_| stream(&state)).collect();
        let mut readers: Vec<_> = (0..5).map(|_| (stream(&state), 1)).collect();
        for seq in 1..=100u64 {
            // 499 events: five streams' worth passes the cap, one update's does not.
            state.broadcast(update(seq, 499), None);
            assert!(state.queued_rows() <= 2000 + 499);
            for (rx, next) in &mut readers {
                read_all(rx, next);
            }
        }
        assert!(readers.iter().all(|(_, next)| *next == 101), "a reader fell behind");
        assert!(stuck.iter().all(|rx| !rx.is_empty()), "a stuck stream was never sent an update");
        stuck.clear();
        readers.clear();
        state.clients.lock().unwrap().clear();
        assert_eq!(state.queued_rows(), 0);
    }

    /// An update with more events than the cap still reaches a stream that reads.
    #[test]
    fn an_update_bigger_than_the_cap_still_reaches_a_reader() {
        let (_rt, state) = state(2000);
        let mut rx = stream(&state);
        let mut next = 1;
        for seq in 1..=3 {
            state.broadcast(update(seq, 5000), None);
            read_all(&mut rx, &mut next);
        }
        assert_eq!(next, 4);
        drop(rx);
        state.clients.lock().unwrap().clear();
        assert_eq!(state.queued_rows(), 0);
    }
}
