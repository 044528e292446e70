//! The owned-task list: every live task of a runtime, so shutdown can drop every future
//! even when no queue holds the task (it waits on a waker somebody else owns).
//!
//! An intrusive doubly-linked list through `Header::owned`, split into shards by task id
//! so that spawns and completions on different workers rarely share a lock. A task is
//! linked at spawn ([`OwnedTasks::bind`]) and unlinked at completion
//! ([`OwnedTasks::remove`]); the list holds one reference while the task is linked.
//!
//! Shutdown protocol: [`OwnedTasks::close_and_pop`] closes each shard (later binds fail,
//! so a task spawned during shutdown is cancelled at once) and pops the tasks one at a
//! time, handing the caller the list's reference. No user code runs under a shard lock.
//!
//! Readers (the console, the exporter, `Telemetry::tasks`) walk the list in batches: a
//! walk takes a reference to each of up to [`WALK_BATCH`] tasks under the shard lock,
//! lets the lock go while it reads them, and keeps its place in `Shard::cursor`, which an
//! unlink moves past the task it removes. So a worker spawning or completing a task
//! waits for at most one batch, never for a walk of the whole shard (tens of
//! milliseconds at a million tasks).

use super::header::Header;
use crate::loom::{lock, Mutex};
use crate::padded::CachePadded;
use std::ops::ControlFlow;
use std::ptr::NonNull;

pub(crate) struct OwnedTasks {
    /// Each on its own cache lines: a spawn binds into one shard while a worker removes a
    /// finished task from the next (ids are consecutive), often on another core.
    shards: Box<[CachePadded<Mutex<Shard>>]>,
    /// One walk per shard at a time (its place is the shard's one `cursor`). Only readers
    /// take these, never a worker's spawn or completion.
    walkers: Box<[Mutex<()>]>,
    mask: u64,
}

/// How many tasks a walk takes per hold of a shard lock.
#[cfg(not(loom))]
pub(crate) const WALK_BATCH: usize = 64;
#[cfg(loom)]
pub(crate) const WALK_BATCH: usize = 1;

struct Shard {
    head: Option<NonNull<Header>>,
    len: usize,
    closed: bool,
    /// While a walk has let go of the lock between two batches: the next task it will
    /// take (`None`: none left). Unlinking that task moves it to the task's successor.
    cursor: Option<NonNull<Header>>,
}

// SAFETY: the raw pointers in a shard are only dereferenced under the shard's lock, and
// each points at a live task because the list holds a reference to every linked task.
unsafe impl Send for Shard {}

impl OwnedTasks {
    /// A list with at least `min_shards` shards (rounded up to a power of two).
    pub(crate) fn new(min_shards: usize) -> OwnedTasks {
        let n = min_shards.max(1).next_power_of_two();
        let shards = (0..n)
            .map(|_| CachePadded(Mutex::new(Shard { head: None, len: 0, closed: false, cursor: None })))
            .collect();
        let walkers = (0..n).map(|_| Mutex::new(())).collect();
        OwnedTasks { shards, walkers, mask: n as u64 - 1 }
    }

    /// How many shards the list has (a walk for one id visits one of them).
    pub(crate) fn shards(&self) -> usize {
        self.shards.len()
    }

    /// How many tasks are linked: each shard's count, under its lock for a moment.
    pub(crate) fn len(&self) -> usize {
        self.shards.iter().map(|s| lock(s).len).sum()
    }

    fn shard(&self, task: NonNull<Header>) -> &Mutex<Shard> {
        // SAFETY: callers pass live tasks.
        let id = unsafe { task.as_ref() }.id;
        &self.shards[(id & self.mask) as usize]
    }

    /// Link a new task (taking the list's reference). Returns false if the list is
    /// closed; the caller then cancels the task.
    pub(crate) fn bind(&self, task: NonNull<Header>) -> bool {
        let mut shard = lock(self.shard(task));
        if shard.closed {
            return false;
        }
        // SAFETY: under the shard lock; `task` is not yet linked anywhere.
        unsafe {
            task.as_ref().owned.with_mut(|l| {
                (*l).prev = None;
                (*l).next = shard.head;
            });
            task.as_ref().linked.with_mut(|l| *l = true);
            if let Some(old) = shard.head {
                old.as_ref().owned.with_mut(|l| (*l).prev = Some(task));
            }
        }
        shard.head = Some(task);
        shard.len += 1;
        true
    }

    /// Unlink a task if it is linked. Returns true if it was: the caller now owns the
    /// list's reference.
    pub(crate) fn remove(&self, task: NonNull<Header>) -> bool {
        let mut shard = lock(self.shard(task));
        // SAFETY: under the shard lock.
        unsafe { unlink(&mut shard, task) }
    }

    /// Close every shard and pop tasks one at a time, calling `f` with each (and its
    /// reference) outside the lock. Tasks bound meanwhile are refused by `bind`.
    pub(crate) fn close_and_pop(&self, mut f: impl FnMut(NonNull<Header>)) {
        for shard in self.shards.iter() {
            lock(shard).closed = true;
        }
        for shard in self.shards.iter() {
            loop {
                let task = {
                    let mut s = lock(shard);
                    let Some(head) = s.head else { break };
                    // SAFETY: under the shard lock; `head` is linked.
                    unsafe { unlink(&mut s, head) };
                    head
                };
                f(task);
            }
        }
    }
}

impl OwnedTasks {
    /// Call `f` with the linked task whose id is `id`, if there is one, walking only that
    /// id's shard, up to the task. `f` runs outside the shard lock, while the walk holds a
    /// reference to the task (one more than the list's); the tasks passed on the way are
    /// only compared, under the lock. `f` must not walk the list itself (one walk per
    /// shard at a time).
    pub(crate) fn with_task<R>(&self, id: u64, f: impl FnOnce(NonNull<Header>) -> R) -> Option<R> {
        let mut f = Some(f);
        let mut out = None;
        self.walk_shard(
            (id & self.mask) as usize,
            |h| h.id == id,
            |t| {
                out = f.take().map(|f| f(t));
                ControlFlow::Break(())
            },
        );
        out
    }

    /// Visit every task linked when the walk reaches it, one shard and one batch at a
    /// time (for `Telemetry::tasks` and the console). `f` runs outside the shard locks,
    /// while the walk holds a reference to the task (one more than the list's), so it
    /// may see a task that completed since the walk took it. Tasks linked during the walk
    /// may or may not be visited; none is visited twice. `f` may complete tasks, but must
    /// not walk the list itself (one walk per shard at a time).
    pub(crate) fn for_each(&self, mut f: impl FnMut(NonNull<Header>)) {
        for i in 0..self.shards.len() {
            self.walk_shard(
                i,
                |_| true,
                |t| {
                    f(t);
                    ControlFlow::Continue(())
                },
            );
        }
    }

    /// Walk shard `i` in batches (see the module doc), handing `f` each task that `pick`
    /// (which sees only the header's fixed fields, under the lock) accepts, until `f`
    /// breaks.
    fn walk_shard(
        &self,
        i: usize,
        pick: impl Fn(&Header) -> bool,
        mut f: impl FnMut(NonNull<Header>) -> ControlFlow<()>,
    ) {
        let _walk = lock(&self.walkers[i]);
        let mut first = true;
        loop {
            let mut batch = Batch { tasks: [NonNull::dangling(); WALK_BATCH], next: 0, len: 0 };
            let more = {
                let mut s = lock(&self.shards[i]);
                // Between batches the place is the cursor, which unlinks kept on a linked
                // task (or at the end).
                let mut cur = if first { s.head } else { s.cursor.take() };
                first = false;
                let mut visited = 0;
                while let Some(t) = cur {
                    if visited == WALK_BATCH {
                        break;
                    }
                    visited += 1;
                    // SAFETY: under the shard lock every linked task is alive (the list
                    // holds a reference) and its links are stable. A reference taken here
                    // keeps the task alive once the lock is let go; `batch` gives it back.
                    unsafe {
                        if pick(t.as_ref()) {
                            t.as_ref().state.ref_inc();
                            batch.tasks[batch.len] = t;
                            batch.len += 1;
                        }
                        cur = t.as_ref().owned.with(|l| (*l).next);
                    }
                }
                s.cursor = cur;
                cur.is_some()
            };
            let mut stop = false;
            while batch.next < batch.len {
                let t = batch.tasks[batch.next];
                if !stop {
                    stop = f(t).is_break();
                }
                batch.next += 1;
                // Give back the walk's reference (freeing the task if it completed and
                // every other holder let go meanwhile).
                drop(super::notified::Task::<()>::from_raw(t));
            }
            if stop && more {
                // Leave no place behind for unlinks to keep moving.
                lock(&self.shards[i]).cursor = None;
            }
            if stop || !more {
                return;
            }
        }
    }
}

/// A walk's references to the tasks of one batch, `tasks[next..len]` not yet given back.
/// Dropping it gives back the rest, so a visit that unwinds leaks none.
struct Batch {
    tasks: [NonNull<Header>; WALK_BATCH],
    next: usize,
    len: usize,
}

impl Drop for Batch {
    fn drop(&mut self) {
        for &t in &self.tasks[self.next..self.len] {
            drop(super::notified::Task::<()>::from_raw(t));
        }
    }
}

/// # Safety
/// The caller holds the lock of `shard`, which is the shard of `task`.
unsafe fn unlink(shard: &mut Shard, task: NonNull<Header>) -> bool {
    // SAFETY: under the shard lock (caller), every linked pointer is live.
    unsafe {
        let (prev, next) = task.as_ref().owned.with(|l| ((*l).prev, (*l).next));
        let linked = task.as_ref().linked.with(|l| *l);
        if !linked {
            return false;
        }
        match prev {
            Some(p) => p.as_ref().owned.with_mut(|l| (*l).next = next),
            None => shard.head = next,
        }
        if shard.cursor == Some(task) {
            // A paused walk's next task: its place moves on to the next linked one.
            shard.cursor = next;
        }
        if let Some(n) = next {
            n.as_ref().owned.with_mut(|l| (*l).prev = prev);
        }
        task.as_ref().owned.with_mut(|l| *l = super::header::OwnedLinks::default());
        task.as_ref().linked.with_mut(|l| *l = false);
    }
    shard.len -= 1;
    true
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::super::test_util::{spawn, MockScheduler};

    /// `with_task` finds every linked task by its id, under its own shard, and nothing
    /// once the task is unlinked (or for an id never given).
    #[test]
    fn with_task_finds_each_linked_task_and_only_those() {
        let sched = MockScheduler::new();
        let handles: Vec<_> = (0..20).map(|_| spawn(&sched, async {})).collect();
        let ids: Vec<u64> = handles.iter().map(|h| h.id().as_u64()).collect();
        for &id in &ids {
            // SAFETY: `with_task` hands over a linked, live task.
            assert_eq!(sched.owned.with_task(id, |t| unsafe { t.as_ref() }.id), Some(id));
        }
        assert_eq!(sched.owned.with_task(u64::MAX, |_| ()), None);
        assert_eq!(sched.run_all(), 20);
        for &id in &ids {
            assert!(sched.owned.with_task(id, |_| ()).is_none(), "task {id} still found once complete");
        }
        drop(handles);
    }

    /// A walk that lets go of the shard lock between batches visits every task that stays
    /// linked exactly once, skips the ones unlinked before it reached them (its paused
    /// place among them), and keeps alive the ones it already took while they complete
    /// and are freed under it (Miri checks the frees).
    #[test]
    fn a_walk_survives_unlinks_between_and_within_its_batches() {
        use super::WALK_BATCH;
        use std::collections::HashMap;
        const N: usize = 3 * WALK_BATCH + 10;
        let sched = MockScheduler::new();
        let mut handles: Vec<_> = (0..N).map(|_| Some(spawn(&sched, std::future::pending::<()>()))).collect();
        assert_eq!(sched.run_all(), N, "each task polled once, now idle");
        // The list is newest first: walk position p is the task spawned (N - 1 - p)th.
        let at = |p: usize| N - 1 - p;
        let id_at: Vec<u64> = (0..N).map(|p| handles[at(p)].as_ref().unwrap().id().as_u64()).collect();
        // Unlinked while the walk holds the first batch: the paused place (the first task
        // of the second batch), one after it, one deep in the third batch, the last task,
        // and two of the first batch, which the walk has taken already.
        let ahead = [WALK_BATCH, WALK_BATCH + 1, 2 * WALK_BATCH + 5, N - 1];
        let taken = [1, WALK_BATCH - 1];
        let mut seen: HashMap<u64, usize> = HashMap::new();
        let mut first = true;
        sched.owned.for_each(|t| {
            // SAFETY: the walk holds a reference to `t`.
            *seen.entry(unsafe { t.as_ref() }.id).or_default() += 1;
            if first {
                first = false;
                for p in ahead.iter().chain(&taken) {
                    // Abort, run (cancelled, unlinked), and drop the join handle, so only
                    // the walk's reference is left on the ones it took.
                    let h = handles[at(*p)].take().unwrap();
                    h.abort();
                    drop(h);
                }
                assert_eq!(sched.run_all(), ahead.len() + taken.len());
            }
        });
        for (p, id) in id_at.iter().enumerate() {
            let want = usize::from(!ahead.contains(&p));
            assert_eq!(seen.get(id).copied().unwrap_or(0), want, "walk position {p} (task {id})");
        }
        assert_eq!(seen.len(), N - ahead.len(), "nothing but the list's tasks");
        assert_eq!(sched.cancelled.load(std::sync::atomic::Ordering::SeqCst), ahead.len() + taken.len());
        // The paused place is gone: a second walk sees the survivors once each.
        let mut again = 0;
        sched.owned.for_each(|_| again += 1);
        assert_eq!(again, N - ahead.len() - taken.len());
        for h in handles.iter().flatten() {
            h.abort();
        }
        sched.run_all();
        assert_eq!(sched.finished(), N);
        drop(handles);
        let mut left = 0;
        sched.owned.for_each(|_| left += 1);
        assert_eq!(left, 0);
    }

    /// `with_task` finds a task in a later batch, and a stop part-way through a walk
    /// leaves no place behind: the next unlink of what would have been its place, and
    /// every later walk, work as usual.
    #[test]
    fn a_walk_that_stops_early_leaves_no_place_behind() {
        use super::WALK_BATCH;
        const N: usize = 2 * WALK_BATCH + 3;
        let sched = MockScheduler::new();
        let handles: Vec<_> = (0..N).map(|_| spawn(&sched, std::future::pending::<()>())).collect();
        sched.run_all();
        // The oldest task is the last in the walk, in the third batch.
        let oldest = handles[0].id().as_u64();
        // SAFETY: `with_task` hands over a task the walk holds.
        assert_eq!(sched.owned.with_task(oldest, |t| unsafe { t.as_ref() }.id), Some(oldest));
        // Stops in the first batch, with a place in the second.
        let newest = handles[N - 1].id().as_u64();
        assert!(sched.owned.with_task(newest, |_| ()).is_some());
        assert!(sched.owned.shards[0].lock().unwrap().cursor.is_none());
        for h in &handles {
            h.abort();
        }
        assert_eq!(sched.run_all(), N);
        assert_eq!(sched.finished(), N);
        assert!(sched.owned.with_task(oldest, |_| ()).is_none());
        drop(handles);
    }
}

#[cfg(all(test, not(loom)))]
mod unwind_tests {
    use super::super::test_util::{spawn, MockScheduler};

    /// A visit that panics gives back the walk's references to the rest of its batch:
    /// each task is left with the list's and its join handle's alone, and every one
    /// completes and is freed (Miri reports a leak otherwise).
    #[test]
    fn a_visit_that_panics_leaks_no_reference() {
        let sched = MockScheduler::new();
        let handles: Vec<_> = (0..10).map(|_| spawn(&sched, std::future::pending::<()>())).collect();
        assert_eq!(sched.run_all(), 10);
        let mut visits = 0;
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            sched.owned.for_each(|_| {
                visits += 1;
                assert!(visits < 3, "a visit that panics");
            })
        }));
        assert!(r.is_err());
        for h in &handles {
            // SAFETY: `with_task` hands over a task the walk holds.
            let refs = sched.owned.with_task(h.id().as_u64(), |t| unsafe { t.as_ref() }.state.load().ref_count());
            assert_eq!(refs, Some(3), "the list, the join handle and this walk");
        }
        for h in &handles {
            h.abort();
        }
        assert_eq!(sched.run_all(), 10);
        assert_eq!(sched.finished(), 10);
        drop(handles);
    }
}

/// The paused walk under loom: one batch is one task, so the walk lets go of the lock
/// after each, while another thread completes tasks (unlinking them, the walk's place
/// among them).
#[cfg(all(loom, test))]
mod loom_tests {
    use super::super::test_util::{spawn, MockScheduler};
    use crate::loom::thread;
    use crate::loom_tests::model;
    use std::sync::atomic::Ordering::SeqCst;

    #[test]
    fn loom_walk_with_concurrent_unlinks() {
        model(|| {
            let sched = MockScheduler::new();
            // Polled once each, then idle; the walk meets them newest first.
            let mut handles: Vec<_> = (0..3).map(|_| spawn(&sched, std::future::pending::<()>())).collect();
            assert_eq!(sched.run_all(), 3);
            let ids: Vec<u64> = handles.iter().map(|h| h.id().as_u64()).collect();
            // The middle one (the walk's place after its first batch) and the oldest (the
            // place after its second) complete during the walk, and their join handles
            // go with them: the walk's reference may be the last, and free the task.
            handles[1].abort();
            handles[0].abort();
            let doomed: Vec<_> = handles.drain(..2).collect();
            let s2 = sched.clone();
            let completer = thread::spawn(move || {
                let n = s2.run_all();
                drop(doomed);
                n
            });
            let mut seen = Vec::new();
            // SAFETY: the walk holds a reference to each task it hands over.
            sched.owned.for_each(|t| seen.push(unsafe { t.as_ref() }.id));
            assert_eq!(completer.join().unwrap(), 2);
            // The newest stays linked throughout: seen exactly once. The others at most
            // once each, and nothing else.
            assert_eq!(seen.iter().filter(|&&i| i == ids[2]).count(), 1, "{seen:?}");
            for i in [ids[0], ids[1]] {
                assert!(seen.iter().filter(|&&x| x == i).count() <= 1, "{seen:?}");
            }
            assert!(seen.iter().all(|i| ids.contains(i)));
            assert_eq!(sched.cancelled.load(SeqCst), 2);
            handles[0].abort();
            sched.run_all();
            assert_eq!(sched.finished(), 3);
            drop(handles);
        });
    }
}
