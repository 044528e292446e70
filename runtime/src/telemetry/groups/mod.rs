//! Task groups: the figures of all the tasks of one name (or, for unnamed tasks, of one
//! spawn location) added up, as tokio-metrics' `TaskMonitor` adds up the tasks it
//! instruments, here for every task without instrumenting any.
//!
//! Groups exist while the runtime keeps task statistics, that is with the event ring on
//! (`Builder::event_ring`), as for `Telemetry::tasks`: a task's group is kept in its
//! statistics.
//!
//! # What a group counts
//! Tasks spawned, completed, cancelled and panicked (alive: spawned less the three);
//! polls and the time they took, with a log2 histogram of poll times (its count is the
//! polls, its buckets give p50 and p99); slow polls, those of at
//! least [`SLOW_POLL_THRESHOLD`], and their time; the first-poll delay, from a task's
//! spawn to its first poll; and the schedule delay, the time a task waited in a run
//! queue before each later poll (from the wake that queued it, or from the end of the
//! poll that queued it again).
//!
//! # Finding a task's group: once, at its spawn
//! The spawner looks the key up (the name, or the spawn location when there is none) in
//! a table of [`SLOTS`] slots with open addressing, and stores the group's index in the
//! task's statistics; every later event of the task uses that index. The lookup takes no
//! lock and never waits:
//! * A slot's word is 0 while free, then the key's hash (high 56 bits) with its group's
//!   index (low 8 bits), set once by a compare-and-swap and never changed or freed, so a
//!   probe that meets a free slot knows its key is not in the table.
//! * A new key first takes a free index (a bitmap of the [`MAX_TASK_GROUPS`] indices,
//!   lowest first), then claims the free slot. A claim that loses the slot gives its
//!   index back and looks at the winner's word, which may be its own key.
//! * The winner writes the key (the name, cut to [`LABEL_BYTES`], or the `Location`)
//!   after its claim and then marks it ready. A probe compares keys once the slot is
//!   ready, and until then goes by the hash alone (a 56-bit coincidence between two keys
//!   in that window of a few instructions is the only way it could be wrong).
//! * A worker keeps the groups of the last spawn locations it looked up, by the
//!   `Location`'s address: a worker spawning from one place over and over finds the group
//!   with one load and a compare, without hashing the file name.
//! * With every index taken, a new key goes to the group named [`OTHER_TASK_GROUP`] and is
//!   not put in the table: at most 100 keys ever are, so a probe stays short. (A lookup
//!   that finds no index free in the instant a losing claim is giving one back answers
//!   `other` too, so a few tasks of the group that takes the last index may count there.)
//!
//! # Counting without shared writes
//! As the worker counters: each worker adds to cells of its own (a relaxed load and
//! store, one writer), which the reader sums; a spawn or a cancellation off the workers
//! (a spawn from `block_on` or another thread, a task the shutdown cancels) adds to
//! the runtime's remote cells with `fetch_add`. Polls happen only on workers. A poll
//! adds to its group's histogram bucket, busy time and schedule delay: three stores, in
//! two cache lines that a task's spawn and end touch too.
//!
//! # Reading
//! [`TaskGroups::read`] visits every group's cells on every worker: O(groups x workers),
//! whatever the number of tasks. Like the snapshot, a reading taken while tasks run is
//! torn a little (a task's end may be read before its poll); its alive count is read so
//! that it never goes below zero, and at rest every figure adds up.

mod table;
use table::{GroupTable, Lookup};

use super::histogram::{bucket, BUCKETS};
use super::{Counter, Histogram};
use crate::task::schedule::Outcome;
use std::cell::UnsafeCell;
use std::collections::HashMap;
use std::panic::Location;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU64};
use std::time::Duration;

/// The most task groups a runtime keeps; the tasks of any further name or spawn location
/// count in one more group, [`OTHER_TASK_GROUP`].
pub const MAX_TASK_GROUPS: usize = 100;

/// The name of the group that holds the tasks of every name or spawn location past the
/// first [`MAX_TASK_GROUPS`].
pub const OTHER_TASK_GROUP: &str = "other";

/// A poll at least this long counts as slow in its group (tokio-metrics' default): long
/// enough to hold up the other tasks of its worker noticeably.
pub const SLOW_POLL_THRESHOLD: Duration = Duration::from_micros(50);
const SLOW_POLL_NS: u64 = SLOW_POLL_THRESHOLD.as_nanos() as u64;

/// Slots of the lookup table: more than twice the groups, so probes stay short.
const SLOTS: usize = 256;
/// A name longer than this is kept cut (at a character boundary) in the table and in the
/// group's name; the whole name's hash still tells such names apart.
pub(crate) const LABEL_BYTES: usize = 96;

/// A group's index in the cells: `0..MAX_TASK_GROUPS`, or [`GroupId::OTHER`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct GroupId(u8);

impl GroupId {
    pub(crate) const OTHER: GroupId = GroupId(MAX_TASK_GROUPS as u8);

    /// The group a task's statistics name (`TaskStats::group`).
    pub(crate) fn from_index(i: u8) -> GroupId {
        GroupId(i.min(MAX_TASK_GROUPS as u8))
    }

    pub(crate) fn index(self) -> u8 {
        self.0
    }
}

/// The tag of a poll whose task's group was not read (see [`poll_tag`]).
pub(crate) const NO_GROUP: u32 = u32::MAX;
const FIRST_POLL: u32 = 1 << 8;

/// A poll's tag, carried in its `PollToken` from its end (which reads the task's
/// statistics) to the worker's accounting after the state transition: the index of the
/// task's group (`group`), and whether this was its first poll.
#[inline(always)]
pub(crate) fn poll_tag(group: u8, first: bool) -> u32 {
    group as u32 | (first as u32) << 8
}

/// What a group is made of.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TaskGroupKind {
    /// Tasks of one name (`volt::task::Builder::name`).
    Named,
    /// Unnamed tasks spawned at one place in the code.
    SpawnLocation,
    /// The tasks of every name and spawn location past the first [`MAX_TASK_GROUPS`].
    Other,
}

/// The tasks of one name or one spawn location, added up, as
/// [`Telemetry::task_groups`](super::Telemetry::task_groups) reads them.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct TaskGroup {
    /// The tasks' name; for unnamed tasks, where they were spawned (`file:line:column`);
    /// [`OTHER_TASK_GROUP`] for the rest.
    pub name: String,
    /// Which of those it is.
    pub kind: TaskGroupKind,
    /// Tasks spawned.
    pub spawned: u64,
    /// Tasks spawned and not yet finished.
    pub alive: u64,
    /// Tasks that returned their output.
    pub completed: u64,
    /// Tasks aborted or dropped by shutdown.
    pub cancelled: u64,
    /// Tasks that panicked.
    pub panicked: u64,
    /// Polls of its tasks.
    pub polls: u64,
    /// Time spent polling its tasks.
    pub busy: Duration,
    /// Polls of at least [`SLOW_POLL_THRESHOLD`].
    pub slow_polls: u64,
    /// Time those slow polls took.
    pub slow_poll_busy: Duration,
    /// Tasks polled at least once.
    pub first_polls: u64,
    /// Time from spawn to first poll, summed over those tasks.
    pub first_poll_delay: Duration,
    /// Polls after a task's first (each came after a wait in a run queue).
    pub scheduled: u64,
    /// Time those polls waited in a run queue (from the wake, or from the poll that
    /// queued the task again), summed.
    pub schedule_delay: Duration,
    /// Poll times in nanoseconds (log2 buckets, as the runtime's histograms): its count
    /// is `polls` and its sum `busy`, read together.
    pub poll_time_histogram: Histogram,
}

impl TaskGroup {
    /// The upper bound of the histogram bucket that holds the `q`-quantile (0.0..=1.0)
    /// of the poll times (`None` before any poll): with log2 buckets, the true value is
    /// at most that and more than half of it.
    pub fn poll_time_quantile(&self, q: f64) -> Option<Duration> {
        self.poll_time_histogram.quantile_upper_bound(q).map(Duration::from_nanos)
    }

    /// The mean time from spawn to first poll (`None` before any first poll).
    pub fn mean_first_poll_delay(&self) -> Option<Duration> {
        mean(self.first_poll_delay, self.first_polls)
    }

    /// The mean time a poll after the first waited in a run queue (`None` before one).
    pub fn mean_schedule_delay(&self) -> Option<Duration> {
        mean(self.schedule_delay, self.scheduled)
    }
}

fn mean(total: Duration, n: u64) -> Option<Duration> {
    (n > 0).then(|| Duration::from_nanos((total.as_nanos() / n as u128) as u64))
}

// ---- The cells ----------------------------------------------------------------------------

/// One group's figures on one worker, written by that worker only. What a task's spawn,
/// polls and end write shares the first cache line (all but the poll's bucket).
#[repr(C, align(64))]
#[derive(Default)]
struct GroupCells {
    /// The polls' time: the sum of the poll-time histogram.
    busy_ns: Counter,
    schedule_delay_ns: Counter,
    spawned: Counter,
    completed: Counter,
    cancelled: Counter,
    panicked: Counter,
    first_polls: Counter,
    first_poll_delay_ns: Counter,
    slow_polls: Counter,
    slow_poll_ns: Counter,
    /// Poll times (the runtime's log2 buckets): their count is the polls.
    poll_buckets: [Counter; BUCKETS],
}

impl GroupCells {
    /// A poll of at least the threshold (rare in a healthy runtime, so kept out of line).
    #[cold]
    #[inline(never)]
    fn slow_poll(&self, busy_ns: u64) {
        self.slow_polls.inc();
        self.slow_poll_ns.add(busy_ns);
    }

    fn end_counter(&self, outcome: Outcome) -> &Counter {
        match outcome {
            Outcome::Completed => &self.completed,
            Outcome::Cancelled => &self.cancelled,
            Outcome::Panicked => &self.panicked,
        }
    }
}

/// One worker's cells, one per group and one for [`OTHER_TASK_GROUP`] (about 38 KiB),
/// beside its counters (`WorkerCounters::groups`), and the groups of the spawn locations
/// it looked up last.
pub(crate) struct WorkerGroups {
    cells: Box<[GroupCells]>,
    /// A small direct-mapped memory of spawn locations (by address) and their groups,
    /// `address << 8 | group` (0: empty), written by the worker only: a worker that
    /// spawns from one place over and over finds the group with one load instead of
    /// hashing the file name. A location static of the same place at another address
    /// (each copy of a generic caller may have one) goes through the table, which
    /// compares contents, and finds the same group.
    recent: [AtomicU64; RECENT],
}

/// Entries of [`WorkerGroups::recent`].
const RECENT: usize = 16;

impl WorkerGroups {
    pub(crate) fn new() -> WorkerGroups {
        WorkerGroups {
            cells: (0..=MAX_TASK_GROUPS).map(|_| GroupCells::default()).collect(),
            recent: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    /// Owner only: the group of spawn location `at`, from the recent ones or `look_up`.
    #[inline]
    fn group_of_location(&self, at: &'static Location<'static>, look_up: impl FnOnce() -> GroupId) -> GroupId {
        // User-space addresses fit in 56 bits, so the address and a group fit one word.
        let addr = at as *const Location<'static> as u64;
        let slot = &self.recent[(addr >> 3) as usize % RECENT];
        let e = slot.load(Relaxed);
        if e >> 8 == addr {
            return GroupId((e & 0xff) as u8);
        }
        let g = look_up();
        // `other` is not kept: a lookup can answer it for a moment while the table fills
        // (see the module doc), and the table's answer is the one that lasts.
        if g != GroupId::OTHER && addr >> 56 == 0 {
            slot.store(addr << 8 | g.0 as u64, Relaxed);
        }
        g
    }

    /// Owner only: a poll that took `busy_ns`, of a task that waited `waited_ns` in a
    /// queue before it (`PollToken::NOT_QUEUED`: not known), tagged with `poll_tag`.
    #[inline(always)]
    pub(crate) fn on_poll(&self, tag: u32, busy_ns: u64, waited_ns: u64) {
        let Some(c) = self.cells.get((tag & 0xff) as usize) else { return };
        c.poll_buckets[bucket(busy_ns)].inc();
        c.busy_ns.add(busy_ns);
        if busy_ns >= SLOW_POLL_NS {
            c.slow_poll(busy_ns);
        }
        let waited = if waited_ns == crate::task::schedule::PollToken::NOT_QUEUED { 0 } else { waited_ns };
        if tag & FIRST_POLL != 0 {
            c.first_polls.inc();
            c.first_poll_delay_ns.add(waited);
        } else {
            c.schedule_delay_ns.add(waited);
        }
    }
}

/// One group's figures counted off the workers (`fetch_add`: several threads write them).
#[derive(Default)]
struct RemoteCells {
    spawned: AtomicU64,
    completed: AtomicU64,
    cancelled: AtomicU64,
    panicked: AtomicU64,
}

impl RemoteCells {
    fn end_counter(&self, outcome: Outcome) -> &AtomicU64 {
        match outcome {
            Outcome::Completed => &self.completed,
            Outcome::Cancelled => &self.cancelled,
            Outcome::Panicked => &self.panicked,
        }
    }
}

/// What a group counts besides polls.
#[derive(Clone, Copy, Debug)]
pub(crate) enum GroupEvent {
    Spawned,
    Ended(Outcome),
}

/// A runtime's task groups: the lookup table and the cells written off the workers (the
/// workers' own are in their counters). Part of the recorder, so only with the event
/// ring on.
pub(crate) struct TaskGroups {
    table: GroupTable,
    remote: Box<[RemoteCells]>,
    /// This runtime's number among every `TaskGroups` the process made (from 1), which
    /// keys the spawn location a thread off the workers last looked up
    /// ([`LAST_REMOTE`]): an address could be used again by a later runtime, a number
    /// is not.
    id: u64,
}

#[cfg(not(loom))]
std::thread_local! {
    /// The last spawn location a thread that is no worker looked up, and its group:
    /// `(TaskGroups::id, location address << 8 | group)`, `(0, 0)` for none. A thread that
    /// spawns from outside (a `block_on` loop, a blocking-pool thread) mostly spawns from
    /// one place, and hashing the location's file name cost about 170 instructions per
    /// spawn, more than a third of what the ring added to a spawn from outside.
    static LAST_REMOTE: std::cell::Cell<(u64, u64)> = const { std::cell::Cell::new((0, 0)) };
}

impl TaskGroups {
    pub(crate) fn new() -> TaskGroups {
        static NEXT_ID: AtomicU64 = AtomicU64::new(1);
        TaskGroups {
            table: GroupTable::new(),
            remote: (0..=MAX_TASK_GROUPS).map(|_| RemoteCells::default()).collect(),
            id: NEXT_ID.fetch_add(1, Relaxed),
        }
    }

    /// The group of a task named `name` (unnamed: spawned at `spawned_at`). `local`: the
    /// calling worker's cells, if it is a worker (their recent spawn locations).
    #[inline]
    pub(crate) fn group_of(
        &self,
        name: Option<&str>,
        spawned_at: &'static Location<'static>,
        local: Option<&WorkerGroups>,
    ) -> GroupId {
        match (name, local) {
            (Some(n), _) => self.table.group_of(Lookup::Name(n)),
            (None, Some(w)) => w.group_of_location(spawned_at, || self.table.group_of(Lookup::Spawned(spawned_at))),
            (None, None) => self.group_of_location_off_workers(spawned_at),
        }
    }

    /// The group of spawn location `at` for a thread that is none of the workers: the
    /// thread's last lookup if it was of `at` in this runtime, else the table's.
    fn group_of_location_off_workers(&self, at: &'static Location<'static>) -> GroupId {
        let look_up = || self.table.group_of(Lookup::Spawned(at));
        #[cfg(loom)]
        return look_up();
        #[cfg(not(loom))]
        {
            // User-space addresses fit in 56 bits, so the address and a group fit one word.
            let addr = at as *const Location<'static> as u64;
            let last = LAST_REMOTE.try_with(|c| c.get()).unwrap_or((0, 0));
            if last.0 == self.id && last.1 >> 8 == addr {
                return GroupId((last.1 & 0xff) as u8);
            }
            let g = look_up();
            // `other` is not kept, as in `WorkerGroups::group_of_location`.
            if g != GroupId::OTHER && addr >> 56 == 0 {
                let _ = LAST_REMOTE.try_with(|c| c.set((self.id, addr << 8 | g.0 as u64)));
            }
            g
        }
    }

    /// Count `event` in `group`: in `local`, the calling worker's own cells, or in the
    /// remote cells off the workers.
    #[inline(always)]
    pub(crate) fn count(&self, local: Option<&WorkerGroups>, group: GroupId, event: GroupEvent) {
        let i = group.0 as usize;
        match local {
            Some(w) => {
                let c = &w.cells[i];
                match event {
                    GroupEvent::Spawned => c.spawned.inc(),
                    GroupEvent::Ended(o) => c.end_counter(o).inc(),
                }
            }
            None => {
                let c = &self.remote[i];
                let counter = match event {
                    GroupEvent::Spawned => &c.spawned,
                    GroupEvent::Ended(o) => c.end_counter(o),
                };
                counter.fetch_add(1, Relaxed);
            }
        }
    }

    /// Every group with a task so far, in the order they were made, `other` last; groups
    /// of the same name (a name cut to the same [`LABEL_BYTES`], a task named like a
    /// spawn location) are read as one. `workers`: every worker's cells.
    pub(crate) fn read<'a>(&self, workers: impl Iterator<Item = &'a WorkerGroups> + Clone) -> Vec<TaskGroup> {
        let mut out: Vec<TaskGroup> = Vec::new();
        let mut by_name: HashMap<String, usize> = HashMap::new();
        for i in 0..=MAX_TASK_GROUPS {
            let Some(g) = self.read_one(i, workers.clone()) else { continue };
            match by_name.get(&g.name) {
                Some(&at) => add(&mut out[at], &g),
                None => {
                    by_name.insert(g.name.clone(), out.len());
                    out.push(g);
                }
            }
        }
        // `other` last, even when a task named "other" made a group before it.
        if let Some(at) = out.iter().position(|g| g.kind == TaskGroupKind::Other) {
            let other = out.remove(at);
            out.push(other);
        }
        out
    }

    /// Group `i`, summed over the remote cells and `workers`' (`None`: no task yet, or
    /// its key not yet written).
    fn read_one<'a>(&self, i: usize, workers: impl Iterator<Item = &'a WorkerGroups> + Clone) -> Option<TaskGroup> {
        let r = &self.remote[i];
        // The ends first, then the spawns: a task spawned and finished between the two
        // reads counts in neither or in its spawn only, so `alive` never goes below 0.
        let (mut completed, mut cancelled, mut panicked) =
            (r.completed.load(Relaxed), r.cancelled.load(Relaxed), r.panicked.load(Relaxed));
        for w in workers.clone() {
            let c = &w.cells[i];
            completed += c.completed.get();
            cancelled += c.cancelled.get();
            panicked += c.panicked.get();
        }
        let mut spawned = r.spawned.load(Relaxed);
        let mut hist = Histogram::default();
        let mut sums = [0u64; 5];
        for w in workers {
            let c = &w.cells[i];
            spawned += c.spawned.get();
            for (h, b) in hist.buckets.iter_mut().zip(&c.poll_buckets) {
                *h += b.get();
            }
            hist.sum += c.busy_ns.get();
            for (s, v) in sums.iter_mut().zip([
                &c.slow_polls,
                &c.slow_poll_ns,
                &c.first_polls,
                &c.first_poll_delay_ns,
                &c.schedule_delay_ns,
            ]) {
                *s += v.get();
            }
        }
        if spawned == 0 {
            return None;
        }
        let (name, kind) = self.table.label(i)?;
        let [slow_polls, slow_poll_ns, first_polls, first_poll_delay_ns, schedule_delay_ns] = sums;
        let polls = hist.count();
        Some(TaskGroup {
            name,
            kind,
            spawned,
            alive: spawned.saturating_sub(completed + cancelled + panicked),
            completed,
            cancelled,
            panicked,
            polls,
            busy: Duration::from_nanos(hist.sum),
            slow_polls,
            slow_poll_busy: Duration::from_nanos(slow_poll_ns),
            first_polls,
            first_poll_delay: Duration::from_nanos(first_poll_delay_ns),
            scheduled: polls.saturating_sub(first_polls),
            schedule_delay: Duration::from_nanos(schedule_delay_ns),
            poll_time_histogram: hist,
        })
    }
}

/// Add `g`'s figures into `into` (two groups read as one).
fn add(into: &mut TaskGroup, g: &TaskGroup) {
    into.spawned += g.spawned;
    into.alive += g.alive;
    into.completed += g.completed;
    into.cancelled += g.cancelled;
    into.panicked += g.panicked;
    into.polls += g.polls;
    into.busy += g.busy;
    into.slow_polls += g.slow_polls;
    into.slow_poll_busy += g.slow_poll_busy;
    into.first_polls += g.first_polls;
    into.first_poll_delay += g.first_poll_delay;
    into.scheduled += g.scheduled;
    into.schedule_delay += g.schedule_delay;
    for (a, b) in into.poll_time_histogram.buckets.iter_mut().zip(&g.poll_time_histogram.buckets) {
        *a += b;
    }
    into.poll_time_histogram.sum += g.poll_time_histogram.sum;
    if g.kind == TaskGroupKind::Other {
        into.kind = TaskGroupKind::Other;
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn here() -> &'static Location<'static> {
        Location::caller()
    }

    /// One key, one group, found again by every later lookup; a location and a name are
    /// different keys; the 101st key and every one after it go to `other`, and the
    /// groups made before still answer.
    #[test]
    fn keys_get_groups_until_the_table_is_full() {
        let t = TaskGroups::new();
        let a = t.group_of(Some("a"), here(), None);
        assert_eq!(t.group_of(Some("a"), here(), None), a);
        let at = here();
        let l = t.group_of(None, at, None);
        assert_ne!(l, a);
        assert_eq!(t.group_of(None, at, None), l);
        // A worker's memory of recent locations answers the same, looked up or kept.
        let w = WorkerGroups::new();
        assert_eq!(t.group_of(None, at, Some(&w)), l);
        assert_eq!(t.group_of(None, at, Some(&w)), l);
        assert_ne!(w.recent.iter().map(|e| e.load(Relaxed)).max(), Some(0), "kept");
        let names: Vec<String> = (0..150).map(|i| format!("n{i}")).collect();
        let ids: Vec<GroupId> = names.iter().map(|n| t.group_of(Some(n), here(), None)).collect();
        let distinct: std::collections::HashSet<u8> = ids.iter().map(|g| g.0).collect();
        // Two groups were made before: 98 of the names get one of their own.
        assert_eq!(ids.iter().filter(|g| **g != GroupId::OTHER).count(), 98);
        assert_eq!(distinct.len(), 99, "98 groups and other");
        assert!(ids[98..].iter().all(|g| *g == GroupId::OTHER));
        assert_eq!(t.group_of(Some("a"), here(), None), a);
        assert_eq!(t.group_of(Some(&names[10]), here(), None), ids[10]);
    }

    /// Names longer than the table keeps are told apart by their whole hash, and read
    /// back cut.
    #[test]
    fn long_names_are_cut_in_the_label_but_kept_apart() {
        let t = TaskGroups::new();
        let long = "x".repeat(LABEL_BYTES + 10);
        let (a, b) = (format!("{long}a"), format!("{long}b"));
        let (ga, gb) = (t.group_of(Some(&a), here(), None), t.group_of(Some(&b), here(), None));
        assert_ne!(ga, gb);
        assert_eq!(t.group_of(Some(&a), here(), None), ga);
        assert_eq!(t.table.label(ga.0 as usize).unwrap().0, "x".repeat(LABEL_BYTES));
    }

    /// Threads racing to make the same groups get the same group for a name, and no
    /// index is lost to a claim that lost its slot: the 100 indices end up with 100 keys.
    /// (At the moment the last index goes, a lookup that finds none free while a losing
    /// claim is giving its index back answers `other`: only the names well before the
    /// limit must agree on every thread.)
    #[test]
    fn racing_lookups_agree_and_lose_no_index() {
        let t = std::sync::Arc::new(TaskGroups::new());
        let names: std::sync::Arc<Vec<String>> = std::sync::Arc::new((0..120).map(|i| format!("k{i}")).collect());
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let (t, names) = (t.clone(), names.clone());
                std::thread::spawn(move || names.iter().map(|n| t.group_of(Some(n), here(), None)).collect::<Vec<_>>())
            })
            .collect();
        let answers: Vec<Vec<GroupId>> = threads.into_iter().map(|h| h.join().unwrap()).collect();
        for a in &answers[1..] {
            assert_eq!(a[..90], answers[0][..90], "two threads got different groups for one name");
        }
        let mut owner: HashMap<u8, usize> = HashMap::new();
        for a in &answers {
            for (name, g) in a.iter().enumerate().filter(|(_, g)| **g != GroupId::OTHER) {
                assert_eq!(*owner.entry(g.0).or_insert(name), name, "one group for two names");
            }
        }
        assert_eq!(owner.len(), MAX_TASK_GROUPS, "an index was lost");
        assert!(t.table.free.take().is_none());
    }
}
