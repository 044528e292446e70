//! The console's index of the live tasks: kept only while some client wants tasks, and
//! kept up to date from the runtime's change log, so a publish costs O(tasks that
//! changed) and a page costs O(page) for the orders it indexes (id, busy time).
//!
//! Built by one walk of the task list when the first client asks; dropped (with the
//! change log stopped) once none does. While it exists it holds one row per live task.
//! The change log is the runtime's one [`TaskWatch`]: should someone else hold it, the
//! index is rebuilt by a walk at each refresh instead.

use super::proto;
use crate::telemetry::{
    SyncHolder, SyncWait, TaskChanges, TaskRow, TaskState, TaskStatisticsWatch, TaskWaits, TaskWatch, Telemetry,
    WaitReason, WakeSource,
};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};
use std::sync::Arc;

/// Rows a query gets when it asks for 0.
pub const DEFAULT_TASK_LIMIT: u32 = 1000;
/// The most rows one page holds.
pub const MAX_TASK_LIMIT: u32 = 10_000;
/// The most bytes of tasks one page (or one update) holds, well under gRPC's 4 MiB
/// default message limit, leaving room for the snapshot and the events beside it.
pub const MAX_PAGE_BYTES: usize = 1 << 20;
/// Task names longer than this are cut (at a character boundary) on the wire, so one
/// task can never push a page past its bound.
pub const MAX_NAME_BYTES: usize = 256;

/// One task as the index keeps it.
#[derive(Clone, Debug)]
struct Entry {
    spawned_at: &'static std::panic::Location<'static>,
    state: TaskState,
    polls: u64,
    busy_ns: u64,
    scheduled_ns: u64,
    last_poll_end_ns: u64,
    name: Option<Arc<str>>,
    /// The wait list as read, decoded when sent (its deadlines are relative).
    wait: TaskWaits,
    lost_waker: bool,
    woken_by: Option<WakeSource>,
    woken_at_ns: u64,
}

impl Entry {
    /// What a client's copy must match to need no resend.
    fn version(&self) -> (u8, u64, u64, u64) {
        (self.state as u8 | (self.lost_waker as u8) << 4, self.polls, self.busy_ns, self.scheduled_ns)
    }
}

/// The index (see the module doc).
pub(crate) struct TaskIndex {
    rows: BTreeMap<u64, Entry>,
    by_busy: BTreeSet<(Reverse<u64>, u64)>,
    /// Live tasks by state: idle, scheduled, running.
    counts: [u64; 3],
    /// The tasks whose last reading found every waker dropped.
    lost: BTreeSet<u64>,
    /// Bumped by every change, so a client's window is recomputed only after one.
    pub(crate) generation: u64,
    /// The change log, from the start (`None`: someone else holds it).
    watch: Option<TaskWatch>,
    /// Keeps the tasks' statistics while the index lives (a client shows tasks), with or
    /// without the change log (`TaskStatistics::WhileWatched`).
    stats: Option<TaskStatisticsWatch>,
}

fn state_slot(s: TaskState) -> Option<usize> {
    match s {
        TaskState::Idle => Some(0),
        TaskState::Scheduled => Some(1),
        TaskState::Running => Some(2),
        TaskState::Complete => None,
    }
}

fn proto_state(s: TaskState) -> proto::TaskState {
    match s {
        TaskState::Idle => proto::TaskState::Idle,
        TaskState::Scheduled => proto::TaskState::Scheduled,
        TaskState::Running => proto::TaskState::Running,
        TaskState::Complete => proto::TaskState::Complete,
    }
}

/// A query, checked and with defaults filled in.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Query {
    sort: i32,
    name_contains: String,
    /// Bit i: proto state i passes (0: every state passes).
    states: u8,
    offset: u64,
    limit: u32,
    after_id: u64,
}

impl Query {
    /// The most rows a window of this query holds.
    pub(crate) fn limit(&self) -> usize {
        self.limit as usize
    }

    /// `q`, or the default window `default_sort` when absent. Bad values are a clear error.
    pub(crate) fn new(q: Option<&proto::TaskQuery>, default_sort: proto::TaskSort) -> Result<Query, String> {
        let Some(q) = q else {
            return Ok(Query { sort: default_sort as i32, limit: DEFAULT_TASK_LIMIT, ..Query::default() });
        };
        if proto::TaskSort::try_from(q.sort).is_err() {
            return Err(format!("task_query.sort {} is not a TaskSort", q.sort));
        }
        let mut states = 0u8;
        for &s in &q.states {
            if !(0..=3).contains(&s) {
                return Err(format!("task_query.states holds {s}, which is not a TaskState"));
            }
            states |= 1 << s;
        }
        if q.limit > MAX_TASK_LIMIT {
            return Err(format!(
                "task_query.limit is {}; the most is {MAX_TASK_LIMIT} (page with after_id or offset)",
                q.limit
            ));
        }
        if q.after_id != 0 && q.sort != proto::TaskSort::Id as i32 {
            return Err("task_query.after_id pages only TASK_SORT_ID".into());
        }
        Ok(Query {
            sort: q.sort,
            name_contains: q.name_contains.clone(),
            states,
            offset: q.offset,
            limit: if q.limit == 0 { DEFAULT_TASK_LIMIT } else { q.limit },
            after_id: q.after_id,
        })
    }

    /// Rows a window for this query may visit in an index of `rows` tasks (at least 1):
    /// up to the window's end for an order the index keeps (id, busy time) with no
    /// filter; every row for a state filter or another order; every row twice for a name
    /// filter (the window, then the count of matches).
    pub(crate) fn cost(&self, rows: u64) -> u64 {
        let indexed = matches!(proto::TaskSort::try_from(self.sort), Ok(proto::TaskSort::Id | proto::TaskSort::Busy));
        let cost = if !self.name_contains.is_empty() {
            rows.saturating_mul(2)
        } else if indexed && self.states == 0 {
            self.offset.saturating_add(self.limit as u64 + 1).min(rows)
        } else {
            rows
        };
        cost.max(1)
    }

    fn has_filter(&self) -> bool {
        self.states != 0 || !self.name_contains.is_empty()
    }

    fn passes(&self, e: &Entry) -> bool {
        (self.states == 0 || self.states & (1 << proto_state(e.state) as i32) != 0)
            && (self.name_contains.is_empty() || e.name.as_deref().is_some_and(|n| n.contains(&*self.name_contains)))
    }
}

/// A window of the index: ids in order, with what the client needs besides.
pub(crate) struct Window {
    pub(crate) ids: Vec<u64>,
    pub(crate) matching: u64,
    pub(crate) more: bool,
}

impl TaskIndex {
    /// Start the change log, then walk the whole task list: a change made before the
    /// start is in the walk, one made after it comes through the log.
    pub(crate) fn start(telemetry: &Telemetry) -> TaskIndex {
        let stats = telemetry.watch_task_statistics();
        let watch = telemetry.watch_tasks();
        TaskIndex { watch, stats, ..TaskIndex::build(telemetry) }
    }

    /// Bring the index up to date: the changes since the last refresh, or a walk of the
    /// whole task list if the log lost some (or there is no log).
    pub(crate) fn refresh(&mut self, telemetry: &Telemetry) {
        let Some(mut watch) = self.watch.take() else {
            self.rebuild(telemetry);
            return;
        };
        let read = watch.read_changes(|row, name| self.apply(&row, name));
        self.watch = Some(watch);
        if read == TaskChanges::Resync {
            self.rebuild(telemetry);
        }
    }

    /// Walk the whole task list, without the change log.
    pub(crate) fn build(telemetry: &Telemetry) -> TaskIndex {
        let mut all = Vec::new();
        telemetry.for_each_task(|row, name| {
            if row.state() != TaskState::Complete {
                all.push((row.id(), entry(&row, name, None)));
            }
        });
        all.sort_unstable_by_key(|(id, _)| *id);
        let mut busy: Vec<(Reverse<u64>, u64)> = all.iter().map(|(id, e)| (Reverse(e.busy_ns), *id)).collect();
        busy.sort_unstable();
        let mut counts = [0; 3];
        for (_, e) in &all {
            if let Some(i) = state_slot(e.state) {
                counts[i] += 1;
            }
        }
        let lost = all.iter().filter(|(_, e)| e.lost_waker).map(|(id, _)| *id).collect();
        TaskIndex {
            rows: all.into_iter().collect(),
            by_busy: busy.into_iter().collect(),
            counts,
            lost,
            generation: 1,
            watch: None,
            stats: None,
        }
    }

    /// Walk the whole task list again (the change log lost changes). The generation moves
    /// on from the old index's, never back to a value a stream has seen: each stream
    /// recomputes its window only when the generation differs from the one it last saw,
    /// so two rebuilds in a row that both restarted at 1 would leave every stream's
    /// window as it was before the second (the case of a change log that overflows at
    /// every publish, under a heavy spawn load). The change log goes on.
    pub(crate) fn rebuild(&mut self, telemetry: &Telemetry) {
        let generation = self.generation;
        let (watch, stats) = (self.watch.take(), self.stats.take());
        *self = TaskIndex { watch, stats, ..TaskIndex::build(telemetry) };
        self.generation = generation + 1;
    }

    /// Take in one changed task.
    fn apply(&mut self, row: &TaskRow, name: Option<&str>) {
        self.generation += 1;
        let (id, complete) = (row.id(), row.state() == TaskState::Complete);
        let old = if complete { self.rows.remove(&id) } else { self.rows.get(&id).cloned() };
        if let Some(o) = &old {
            self.by_busy.remove(&(Reverse(o.busy_ns), id));
            if let Some(i) = state_slot(o.state) {
                self.counts[i] -= 1;
            }
        }
        if row.lost_waker() {
            self.lost.insert(id);
        } else {
            self.lost.remove(&id);
        }
        if complete {
            return;
        }
        let e = entry(row, name, old.and_then(|o| o.name));
        self.by_busy.insert((Reverse(e.busy_ns), id));
        if let Some(i) = state_slot(e.state) {
            self.counts[i] += 1;
        }
        self.rows.insert(id, e);
    }

    /// Take in a walk's finding that the tasks `ids` can never be woken. The change log
    /// reads a task once per change, and a reading can miss a lost waker (a walk holding
    /// the task at that moment counts as a holder): a task that then never changes again
    /// would stay unflagged. Only idle tasks are flagged: one woken since the walk (an
    /// abort) came through the log as changed.
    pub(crate) fn mark_lost(&mut self, ids: &[u64]) {
        let mut changed = false;
        for id in ids {
            let Some(e) = self.rows.get_mut(id) else { continue };
            if e.state == TaskState::Idle && !e.lost_waker {
                e.lost_waker = true;
                self.lost.insert(*id);
                changed = true;
            }
        }
        if changed {
            self.generation += 1;
        }
    }

    pub(crate) fn counts(&self) -> proto::TaskCounts {
        proto::TaskCounts {
            total: self.rows.len() as u64,
            idle: self.counts[0],
            scheduled: self.counts[1],
            running: self.counts[2],
            lost_waker: self.lost.len() as u64,
            lost_waker_ids: self.lost.iter().take(3).copied().collect(),
        }
    }

    /// Live tasks in the index.
    pub(crate) fn len(&self) -> u64 {
        self.rows.len() as u64
    }

    /// Rows [`TaskIndex::window`] may visit for `q` (see [`Query::cost`]).
    pub(crate) fn window_cost(&self, q: &Query) -> u64 {
        q.cost(self.len())
    }

    /// How many tasks pass `q`'s filters (a scan only for a name filter).
    fn matching(&self, q: &Query) -> u64 {
        if q.name_contains.is_empty() {
            if q.states == 0 {
                return self.rows.len() as u64;
            }
            let by = |s: proto::TaskState| if q.states & (1 << s as i32) != 0 { 1 } else { 0 };
            return by(proto::TaskState::Idle) * self.counts[0]
                + by(proto::TaskState::Scheduled) * self.counts[1]
                + by(proto::TaskState::Running) * self.counts[2];
        }
        self.rows.values().filter(|e| q.passes(e)).count() as u64
    }

    /// The ids of `q`'s window, in order.
    pub(crate) fn window(&self, q: &Query) -> Window {
        let want = q.offset.saturating_add(q.limit as u64);
        // Without a name filter the counts say how many tasks pass: a scan stops once it
        // has met them all (at once when none does: no running task among a million).
        let known = q.name_contains.is_empty().then(|| self.matching(q));
        let all = known.map_or(usize::MAX, |n| n as usize);
        let take = |it: &mut dyn Iterator<Item = u64>| -> (Vec<u64>, bool) {
            let mut ids: Vec<u64> = it.skip(q.offset as usize).take(q.limit as usize + 1).collect();
            let more = ids.len() > q.limit as usize;
            ids.truncate(q.limit as usize);
            (ids, more)
        };
        let (ids, more) = match proto::TaskSort::try_from(q.sort).unwrap_or(proto::TaskSort::Id) {
            proto::TaskSort::Id => {
                let range = self.rows.range(q.after_id.saturating_add(1)..);
                take(&mut range.filter(|(_, e)| q.passes(e)).take(all).map(|(id, _)| *id))
            }
            proto::TaskSort::Busy => take(
                &mut self
                    .by_busy
                    .iter()
                    .filter(|(_, id)| self.rows.get(id).is_some_and(|e| q.passes(e)))
                    .take(all)
                    .map(|(_, id)| *id),
            ),
            other => {
                // Not indexed: keep the `offset + limit + 1` first in one pass.
                type Key = (u64, Option<Arc<str>>, u64);
                let key = |id: u64, e: &Entry| -> Key {
                    match other {
                        proto::TaskSort::Polls => (u64::MAX - e.polls, None, id),
                        proto::TaskSort::Scheduled => (u64::MAX - e.scheduled_ns, None, id),
                        // The earliest end of a last poll is the longest wait.
                        proto::TaskSort::Wait if e.state == TaskState::Idle => (e.last_poll_end_ns, None, id),
                        proto::TaskSort::Wait => (u64::MAX, None, id),
                        // Running first, then scheduled, then idle.
                        proto::TaskSort::State => (2 - state_slot(e.state).unwrap_or(0) as u64, None, id),
                        // Named tasks by name, then the unnamed ones.
                        _ => (e.name.is_none() as u64, e.name.clone(), id),
                    }
                };
                let cap = want.saturating_add(1).min(self.rows.len() as u64) as usize;
                let mut heap: BinaryHeap<Key> = BinaryHeap::with_capacity(cap + 1);
                for (&id, e) in self.rows.iter().filter(|(_, e)| q.passes(e)).take(all) {
                    let k = key(id, e);
                    if heap.len() < cap {
                        heap.push(k);
                    } else if heap.peek().is_some_and(|top| k < *top) {
                        heap.pop();
                        heap.push(k);
                    }
                }
                let sorted = heap.into_sorted_vec();
                take(&mut sorted.into_iter().map(|(_, _, id)| id))
            }
        };
        let matching = match known {
            Some(n) => n,
            None if q.has_filter() || q.after_id != 0 => self.matching(q),
            None => self.rows.len() as u64,
        };
        Window { ids, matching, more }
    }

    /// The task `id` on the wire, if it is live.
    pub(crate) fn task(&self, id: u64, now_ns: u64) -> Option<proto::Task> {
        // A lock wait names its holder's task by name, from the index's own rows (a
        // lookup per sync wait sent, not per task).
        let name_of = |holder: u64| self.rows.get(&holder).and_then(|h| h.name.as_deref()).map(String::from);
        self.rows.get(&id).map(|e| wire(id, e, now_ns, &name_of))
    }

    /// `id`'s version, for diffs.
    pub(crate) fn version(&self, id: u64) -> Option<(u8, u64, u64, u64)> {
        self.rows.get(&id).map(Entry::version)
    }

    /// One page for `q` (`ListTasks`, `GetSnapshot`, `SetTaskQuery`), under the size bound.
    pub(crate) fn page(&self, q: &Query, now_ns: u64) -> proto::TaskPage {
        let w = self.window(q);
        let (tasks, cut) = self.rows_within_bound(&w.ids, now_ns);
        let more = w.more || cut;
        let next_after_id = tasks.last().map_or(q.after_id, |t| t.id);
        proto::TaskPage { tasks, counts: Some(self.counts()), matching: w.matching, more, next_after_id }
    }

    /// The wire rows for `ids`, stopping before the size bound. Returns whether it cut.
    pub(crate) fn rows_within_bound(&self, ids: &[u64], now_ns: u64) -> (Vec<proto::Task>, bool) {
        let mut bytes = 0;
        let mut out = Vec::with_capacity(ids.len());
        for &id in ids {
            let Some(t) = self.task(id, now_ns) else { continue };
            // A repeated field costs the message, its length and one tag byte.
            bytes += proto::prost::Message::encoded_len(&t) + 4;
            if bytes > MAX_PAGE_BYTES {
                return (out, true);
            }
            out.push(t);
        }
        (out, false)
    }
}

fn entry(row: &TaskRow, name: Option<&str>, kept: Option<Arc<str>>) -> Entry {
    Entry {
        spawned_at: row.spawned_at(),
        state: row.state(),
        polls: row.polls(),
        busy_ns: row.busy_ns(),
        scheduled_ns: row.scheduled_ns(),
        last_poll_end_ns: row.last_poll_end_ns().unwrap_or(0),
        wait: row.waits(),
        lost_waker: row.lost_waker(),
        woken_by: row.last_woken_by(),
        woken_at_ns: row.last_woken_ns().unwrap_or(0),
        // A task's name never changes: keep the one already copied.
        name: kept.or_else(|| name.map(|n| Arc::from(cut_name(n)))),
    }
}

/// `n` cut to at most [`MAX_NAME_BYTES`], at a character boundary.
fn cut_name(n: &str) -> &str {
    if n.len() <= MAX_NAME_BYTES {
        return n;
    }
    let mut end = MAX_NAME_BYTES;
    while !n.is_char_boundary(end) {
        end -= 1;
    }
    &n[..end]
}

fn wire(id: u64, e: &Entry, now_ns: u64, name_of: &dyn Fn(u64) -> Option<String>) -> proto::Task {
    let idle = e.state == TaskState::Idle;
    // The reading kept waits only for an idle task, or a yield for a queued one.
    let (mut waits, more_waits) = e.wait.decode();
    for w in &mut waits {
        if let WaitReason::Sync(SyncWait { holder: Some(SyncHolder::Task { id, name }), .. }) = w {
            if name.is_none() {
                *name = name_of(*id);
            }
        }
    }
    let waiting = waits.first();
    let woken_by = e.woken_by;
    proto::Task {
        id,
        name: e.name.as_deref().map(String::from),
        spawned_at: Some(e.spawned_at.to_string()),
        state: proto_state(e.state) as i32,
        polls: e.polls,
        busy_ns: e.busy_ns,
        scheduled_ns: e.scheduled_ns,
        since_last_poll_ns: (e.last_poll_end_ns != 0).then(|| now_ns.saturating_sub(e.last_poll_end_ns)),
        waiting_on: waiting.map(|w| w.to_string()),
        waiting_kind: waiting.map(|w| w.kind().to_string()),
        waiting_since_ns: (idle && e.last_poll_end_ns != 0).then(|| now_ns.saturating_sub(e.last_poll_end_ns)),
        lost_waker: e.lost_waker,
        last_woken_by: woken_by.map(|w| w.to_string()),
        last_woken_ns: (e.woken_at_ns != 0).then(|| now_ns.saturating_sub(e.woken_at_ns)),
        last_woken_by_task: match woken_by {
            Some(WakeSource::Task(id)) => Some(id),
            _ => None,
        },
        waits: waits.iter().map(proto::TaskWait::from).collect(),
        more_waits,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A rebuilt index always has a generation no stream has seen, however many rebuilds
    /// come in a row, and it holds the tasks alive at the rebuild.
    #[test]
    fn a_rebuild_moves_the_generation_on() {
        let rt = crate::runtime::Builder::new().worker_threads(1).event_ring(64).build().unwrap();
        let t = rt.handle().telemetry();
        let mut idx = TaskIndex::build(&t);
        let mut seen = vec![idx.generation];
        for round in 1..=3usize {
            // Idle for good: each rebuild finds one more live task.
            rt.spawn(std::future::pending::<()>());
            idx.rebuild(&t);
            assert!(!seen.contains(&idx.generation), "generation {} came back after {seen:?}", idx.generation);
            seen.push(idx.generation);
            assert_eq!(idx.rows.len(), round, "round {round}");
        }
    }

    /// While someone else holds the runtime's change log, the index is kept by walks: a
    /// task spawned after the index was built is in it after a refresh.
    #[test]
    fn without_the_change_log_the_index_walks() {
        let rt = crate::runtime::Builder::new().worker_threads(1).event_ring(64).build().unwrap();
        let t = rt.handle().telemetry();
        let _theirs = t.watch_tasks().expect("the log is free");
        let mut idx = TaskIndex::start(&t);
        assert!(idx.watch.is_none());
        let h = rt.spawn(std::future::pending::<()>());
        let g = idx.generation;
        idx.refresh(&t);
        assert!(idx.generation > g);
        assert!(idx.rows.contains_key(&h.id().as_u64()));
    }

    /// A task whose last waker is dropped without any change the log would see (no wake,
    /// no poll) is flagged in the index once a walk finds it; an id the index does not
    /// hold changes nothing, and a second finding changes nothing more.
    #[test]
    fn a_walks_lost_wakers_reach_the_index() {
        let rt = crate::runtime::Builder::new().worker_threads(1).event_ring(64).build().unwrap();
        let t = rt.handle().telemetry();
        let (tx, rx) = std::sync::mpsc::channel();
        let h = rt.spawn(std::future::poll_fn(move |cx| {
            let _ = tx.send(cx.waker().clone());
            std::task::Poll::<()>::Pending
        }));
        let waker = rx.recv_timeout(std::time::Duration::from_secs(30)).expect("polled within 30 s");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while t.task(h.id().as_u64()).is_none_or(|i| i.state != TaskState::Idle) {
            assert!(std::time::Instant::now() < deadline, "the task never went idle");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let mut idx = TaskIndex::build(&t);
        assert_eq!(idx.counts().lost_waker, 0, "a waker is still held");
        drop(waker);
        let ids = t.lost_waker_ids();
        assert_eq!(ids, vec![h.id().as_u64()]);
        let g = idx.generation;
        idx.mark_lost(&[u64::MAX]);
        assert_eq!(idx.generation, g);
        idx.mark_lost(&ids);
        assert!(idx.generation > g);
        assert_eq!(idx.counts().lost_waker, 1);
        assert_eq!(idx.counts().lost_waker_ids, vec![h.id().as_u64()]);
        let g = idx.generation;
        idx.mark_lost(&ids);
        assert_eq!(idx.generation, g, "nothing new");
    }
}
