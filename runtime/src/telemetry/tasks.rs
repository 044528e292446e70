//! The live-task change log: how a reader of the task list (a `TaskWatch`) learns which
//! tasks changed without walking all of them.
//!
//! # Protocol
//! Nothing here runs until a reader calls [`TaskChangeLog::start`]; until then every hook
//! costs one relaxed load of `watching`, and the reader does no per-task work at all.
//!
//! While watching, a task that changes (spawned, woken, polled, finished) is *marked*:
//! if its `queued` flag (in its `TaskStats`) is clear, the thread that changed it takes a
//! reference to the task, puts the pointer in a change ring and sets the flag. A task
//! whose flag is already set is not queued again, so a task sits in the log at most once
//! (per marker that raced on the clear flag) however often it changes between two reads,
//! and a read costs O(tasks that changed).
//!
//! - A worker marks into its own [`ChangeRing`]: single producer, single consumer, plain
//!   loads and stores of atomics, no lock, no allocation. Any other thread (a wake from a
//!   thread outside the runtime, a spawn from `block_on`) marks into the shared `remote`
//!   list under its mutex; those threads are not workers, so a short lock is fine there.
//! - A full ring or list is not waited on: the marker sets `overflowed` instead, and the
//!   next read tells its caller to walk the whole task list once (a resync).
//! - The reader clears a task's flag *before* it reads the task's values, with a
//!   `SeqCst` fence between; a marker that finds the flag set fences and looks again.
//!   So a change either is seen by the read in progress or queues the task again: no
//!   change is lost (see the loom model `loom_task_change_flag`).
//!
//! A poll's figures are stored (and the task marked) just before the poll's end moves the
//! task out of RUNNING, and nothing marks it after that move (from then on another thread
//! may free it). So a reader that finds a task RUNNING keeps the entry's reference and
//! reads the task again at its next drain, until it is no longer running: the reader
//! learns every poll's end state, at the cost of the tasks it saw running.
//!
//! The queued reference keeps a finished task's memory valid until the reader has seen
//! it finish. References still queued when the reader stops are released by
//! [`TaskChangeLog::stop`], and a worker releases what is left in its own ring as it
//! exits (no reader runs then), so no task outlives its runtime through the log.

use crate::loom::{fence, lock, AtomicBool, AtomicPtr, AtomicUsize, Mutex};
use std::ptr::NonNull;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release, SeqCst};

/// Entries per worker ring (and in the remote list). At four reads a second, a worker
/// that changes more distinct tasks than this between two reads makes the reader walk
/// the whole list once instead.
#[cfg(not(loom))]
pub(crate) const RING_CAPACITY: usize = 8192;
#[cfg(loom)]
pub(crate) const RING_CAPACITY: usize = 2;

/// A bounded single-producer, single-consumer ring of pointers. The producer is one
/// worker thread; the consumer is the one reader of the log.
pub(crate) struct ChangeRing<T> {
    slots: Box<[AtomicPtr<T>]>,
    /// Next slot to read (written by the consumer only).
    head: AtomicUsize,
    /// Next slot to write (written by the producer only).
    tail: AtomicUsize,
    /// Set by the producer when the ring was full; cleared by the consumer.
    overflowed: AtomicBool,
}

impl<T> ChangeRing<T> {
    pub(crate) fn new(capacity: usize) -> ChangeRing<T> {
        assert!(capacity.is_power_of_two());
        ChangeRing {
            slots: (0..capacity).map(|_| AtomicPtr::new(std::ptr::null_mut())).collect(),
            head: AtomicUsize::new(0),
            tail: AtomicUsize::new(0),
            overflowed: AtomicBool::new(false),
        }
    }

    /// Producer only: append `p`, or return false (and note the overflow) when full.
    #[inline]
    pub(crate) fn push(&self, p: NonNull<T>) -> bool {
        let tail = self.tail.load(Relaxed);
        // Acquire: the consumer's loads of the slots it freed happen before we reuse them.
        let head = self.head.load(Acquire);
        if tail.wrapping_sub(head) == self.slots.len() {
            self.overflowed.store(true, Release);
            return false;
        }
        self.slots[tail & (self.slots.len() - 1)].store(p.as_ptr(), Relaxed);
        // Release: the slot's store (and the marker's earlier writes) before the new tail.
        self.tail.store(tail.wrapping_add(1), Release);
        true
    }

    /// Consumer only: take every entry pushed so far.
    pub(crate) fn drain(&self, mut f: impl FnMut(NonNull<T>)) {
        let head = self.head.load(Relaxed);
        let tail = self.tail.load(Acquire);
        let mut i = head;
        while i != tail {
            let p = self.slots[i & (self.slots.len() - 1)].load(Relaxed);
            i = i.wrapping_add(1);
            if let Some(p) = NonNull::new(p) {
                f(p);
            }
        }
        self.head.store(tail, Release);
    }

    /// Consumer only: whether the producer found the ring full since the last call.
    pub(crate) fn take_overflow(&self) -> bool {
        self.overflowed.swap(false, Acquire)
    }
}

/// The shared list for markers that are not workers.
struct RemoteList {
    tasks: Vec<NonNull<crate::task::header::Header>>,
    overflowed: bool,
}

// SAFETY: the pointers are only dereferenced by the consumer while the reference each
// entry carries keeps the task alive.
unsafe impl Send for RemoteList {}

/// The change log of one runtime (see the module doc).
pub(crate) struct TaskChangeLog {
    watching: AtomicBool,
    rings: Box<[ChangeRing<crate::task::header::Header>]>,
    remote: Mutex<RemoteList>,
    /// Reader only: tasks it last saw running, each with a reference, to read again.
    running: Mutex<RemoteList>,
    /// Held by whoever takes entries out of the rings: the reader (`drain`, `stop`) and a
    /// worker releasing its own ring as it exits, which at shutdown may meet a read in
    /// progress. A ring has one consumer at a time.
    consumer: Mutex<()>,
}

/// What [`TaskChangeLog::drain`] found.
pub(crate) enum Drained {
    /// Only the tasks given to the callback changed.
    Changes,
    /// Some change could not be queued: walk the whole list.
    Resync,
}

impl TaskChangeLog {
    pub(crate) fn new(workers: usize) -> TaskChangeLog {
        TaskChangeLog {
            watching: AtomicBool::new(false),
            rings: (0..workers).map(|_| ChangeRing::new(RING_CAPACITY)).collect(),
            remote: Mutex::new(RemoteList { tasks: Vec::new(), overflowed: false }),
            running: Mutex::new(RemoteList { tasks: Vec::new(), overflowed: false }),
            consumer: Mutex::new(()),
        }
    }

    /// Whether a reader wants changes (a relaxed load: the only cost while none does).
    #[inline(always)]
    pub(crate) fn watching(&self) -> bool {
        self.watching.load(Relaxed)
    }

    /// The reader starts watching. It walks the whole task list afterwards: a change made
    /// before this store is in that walk, one made after it is queued. False, with nothing
    /// changed, while a reader is watching already: the log has one reader at a time.
    pub(crate) fn start(&self) -> bool {
        let mut r = lock(&self.remote);
        // `start` and `stop` both hold this lock while they change `watching`.
        if self.watching.load(Relaxed) {
            return false;
        }
        let len = r.tasks.len();
        r.tasks.reserve_exact(RING_CAPACITY.saturating_sub(len));
        self.watching.store(true, SeqCst);
        true
    }

    /// The reader stops: markers stop queueing, and the references queued so far are
    /// released. Consumer only.
    pub(crate) fn stop(&self) {
        let _consumer = lock(&self.consumer);
        {
            let mut r = lock(&self.remote);
            self.watching.store(false, SeqCst);
            for t in r.tasks.drain(..) {
                release(t);
            }
            r.tasks = Vec::new();
            r.overflowed = false;
        }
        for ring in self.rings.iter() {
            ring.drain(release);
            ring.take_overflow();
        }
        for t in std::mem::take(&mut lock(&self.running).tasks) {
            release(t);
        }
    }

    /// Worker `index`, exiting: release what its ring holds (after any read in progress;
    /// later reads find the ring empty, as nothing marks into it any more).
    pub(crate) fn release_ring(&self, index: usize) {
        let _consumer = lock(&self.consumer);
        self.rings[index].drain(release);
    }

    /// Note that `task` changed. `worker`: the index of the calling worker of this
    /// runtime, `None` on any other thread. `queued` is the task's flag.
    ///
    /// The caller holds a reference to the task.
    #[inline]
    pub(crate) fn mark(&self, task: NonNull<crate::task::header::Header>, queued: &AtomicBool, worker: Option<usize>) {
        if !self.watching.load(Relaxed) {
            return;
        }
        if !needs_queue(queued) {
            return;
        }
        // SAFETY: the caller holds a reference, so the task is alive; the entry's own
        // reference is released by the reader (or `stop`, or `release_ring`).
        unsafe { task.as_ref() }.state.ref_inc();
        // The flag is set before the entry is published, so the reader's clear (after it
        // takes the entry) always comes after this store.
        queued.store(true, Relaxed);
        let pushed = match worker {
            Some(w) => self.rings[w].push(task),
            None => {
                let mut r = lock(&self.remote);
                if !self.watching.load(Relaxed) {
                    false
                } else if r.tasks.len() >= RING_CAPACITY {
                    r.overflowed = true;
                    false
                } else {
                    // Capacity was reserved by `start`: this never allocates.
                    r.tasks.push(task);
                    true
                }
            }
        };
        if !pushed {
            queued.store(false, Relaxed);
            release(task);
        }
    }

    /// Consumer only: hand every queued task, and every task it last saw running, to `f`
    /// (which must clear the task's flag, fence, then read it: see [`clear_then_read`]),
    /// and release its reference unless `f` says the task is running (true). `f` must not
    /// unwind: a ring it left would hand the entries it had taken over again.
    pub(crate) fn drain(&self, mut f: impl FnMut(NonNull<crate::task::header::Header>) -> bool) -> Drained {
        let _consumer = lock(&self.consumer);
        let mut resync = false;
        let mut running = std::mem::take(&mut lock(&self.running).tasks);
        let mut still = Vec::new();
        let mut visit = |t| {
            if f(t) {
                still.push(t);
            } else {
                release(t);
            }
        };
        for t in running.drain(..) {
            visit(t);
        }
        for ring in self.rings.iter() {
            resync |= ring.take_overflow();
            ring.drain(&mut visit);
        }
        let remote = {
            let mut r = lock(&self.remote);
            resync |= std::mem::take(&mut r.overflowed);
            std::mem::replace(&mut r.tasks, Vec::with_capacity(RING_CAPACITY))
        };
        for t in remote {
            visit(t);
        }
        lock(&self.running).tasks = still;
        if resync {
            Drained::Resync
        } else {
            Drained::Changes
        }
    }
}

/// The marker's side of the flag, after it wrote the task's new figures: whether the
/// task must be queued (its flag is clear).
#[inline]
pub(crate) fn needs_queue(queued: &AtomicBool) -> bool {
    if !queued.load(Relaxed) {
        return true;
    }
    // Queued already, unless the reader cleared the flag and read the task just now: the
    // fence orders our writes to the task before this second look, and the reader's
    // clear before its reads (module doc).
    fence(SeqCst);
    !queued.load(Relaxed)
}

/// The reader's side of the flag: clear it, then fence, before reading the task.
#[inline]
pub(crate) fn clear_then_read(queued: &AtomicBool) {
    queued.store(false, Relaxed);
    fence(SeqCst);
}

/// Drop the log's reference to a task (freeing it if that was the last).
fn release(task: NonNull<crate::task::header::Header>) {
    drop(crate::task::notified::Task::<()>::from_raw(task));
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::ChangeRing;
    use std::ptr::NonNull;

    /// Entries come out once, in order; a full ring refuses and reports an overflow; the
    /// slots are reused after a drain.
    #[test]
    fn change_ring_keeps_order_and_reports_overflow() {
        let values: Vec<Box<u64>> = (0..10).map(Box::new).collect();
        let ring = ChangeRing::<u64>::new(4);
        let mut out = Vec::new();
        // SAFETY: the pointers are into `values`, alive for the whole test.
        let read = |p: NonNull<u64>| unsafe { *p.as_ptr() };
        for v in &values[..4] {
            assert!(ring.push(NonNull::from(&**v)));
        }
        assert!(!ring.push(NonNull::from(&*values[4])), "full");
        assert!(ring.take_overflow());
        assert!(!ring.take_overflow(), "reported once");
        ring.drain(|p| out.push(read(p)));
        for v in &values[5..9] {
            assert!(ring.push(NonNull::from(&**v)));
        }
        ring.drain(|p| out.push(read(p)));
        assert_eq!(out, [0, 1, 2, 3, 5, 6, 7, 8]);
    }
}

/// The change log's protocols under loom (`--cfg loom`; `lib.rs` builds this module alone
/// then).
#[cfg(all(loom, test))]
mod loom_tests {
    use crate::loom::{thread, Arc};
    use crate::loom_tests::model;

    /// The live-task change ring: what the producer pushed arrives once, in order, and a push
    /// into a full ring is refused and reported as an overflow, never lost silently.
    #[test]
    fn loom_task_change_ring() {
        use super::ChangeRing;
        use std::ptr::NonNull;
        model(|| {
            let ring = Arc::new(ChangeRing::<u64>::new(2));
            let values: Arc<Vec<u64>> = Arc::new(vec![1, 2, 3]);
            let producer = {
                let (ring, values) = (ring.clone(), values.clone());
                thread::spawn(move || {
                    let mut pushed = Vec::new();
                    for v in values.iter() {
                        if ring.push(NonNull::from(v)) {
                            pushed.push(*v);
                        }
                    }
                    pushed
                })
            };
            let mut got = Vec::new();
            ring.drain(|p| got.push(unsafe_read(p)));
            let pushed = producer.join().unwrap();
            ring.drain(|p| got.push(unsafe_read(p)));
            assert_eq!(got, pushed, "each pushed entry once, in order");
            assert_eq!(ring.take_overflow(), pushed.len() < 3, "a refused push is an overflow");
        });

        fn unsafe_read(p: NonNull<u64>) -> u64 {
            // SAFETY: the pointers are into `values`, alive for the whole model.
            unsafe { *p.as_ptr() }
        }
    }

    /// The queued flag: a change made while the task is queued is either seen by the read in
    /// progress or queues the task again; the reader never ends with a stale figure.
    #[test]
    fn loom_task_change_flag() {
        use super::{clear_then_read, needs_queue, ChangeRing};
        use crate::loom::{AtomicBool, AtomicU64};
        use std::ptr::NonNull;
        model(|| {
            static TASK: u64 = 0;
            let figure = Arc::new(AtomicU64::new(0));
            let queued = Arc::new(AtomicBool::new(true));
            let ring = Arc::new(ChangeRing::<u64>::new(2));
            // The task is queued with figure 0.
            assert!(ring.push(NonNull::from(&TASK)));
            let marker = {
                let (figure, queued, ring) = (figure.clone(), queued.clone(), ring.clone());
                thread::spawn(move || {
                    figure.store(1, std::sync::atomic::Ordering::Relaxed);
                    if needs_queue(&queued) {
                        queued.store(true, std::sync::atomic::Ordering::Relaxed);
                        assert!(ring.push(NonNull::from(&TASK)));
                    }
                })
            };
            let mut seen = None;
            let mut read = |_| {
                clear_then_read(&queued);
                seen = Some(figure.load(std::sync::atomic::Ordering::Relaxed));
            };
            ring.drain(&mut read);
            marker.join().unwrap();
            ring.drain(&mut read);
            assert_eq!(seen, Some(1), "the last read saw the last change");
        });
    }
}
