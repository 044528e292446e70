//! Tasks: [`spawn`] a future and await its [`JoinHandle`] (or [`abort`](JoinHandle::abort)
//! it), run a group of tasks in a [`JoinSet`], run blocking code on the blocking pool with
//! [`spawn_blocking`], and name what a task waits on with [`WaitingOnExt`].
//!
//! ```
//! use std::time::Duration;
//!
//! let rt = volt::Runtime::new()?;
//! rt.block_on(async {
//!     let answer = volt::task::spawn(async { 6 * 7 });
//!     // Blocking or CPU-heavy code goes to the blocking pool, off the workers.
//!     let sum = volt::task::spawn_blocking(|| (1..=100u64).sum::<u64>());
//!     // An aborted task is dropped; awaiting its handle says it was cancelled.
//!     let sleeper = volt::spawn(volt::time::sleep(Duration::from_secs(60)));
//!     sleeper.abort();
//!     assert_eq!(answer.await.unwrap(), 42);
//!     assert_eq!(sum.await.unwrap(), 5050);
//!     assert!(sleeper.await.unwrap_err().is_cancelled());
//! });
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! Inside: the packed state word (`state`), the one-allocation cell and its vtable
//! (`raw`), `JoinHandle`/`AbortHandle`/`JoinError` (`join`), `JoinSet` (`join_set`),
//! `LocalSet` and `spawn_local` (`local`), the owned-task list (`list`), what a task
//! waits on (`wait`, and naming it: `waiting_on`), and the user-facing helpers `spawn`,
//! `spawn_blocking`, `block_in_place`, `yield_now`, `shield` and the task [`Id`]
//! (`id`, `try_id`).

pub(crate) mod cellcache;
pub mod coop;
mod join;
#[cfg(not(loom))]
mod join_set;
pub(crate) mod list;
#[cfg(not(loom))]
mod local;
pub(crate) mod raw;
pub(crate) mod state;
#[cfg(all(loom, test))]
mod state_loom;
#[cfg(test)]
pub(crate) mod test_util;
pub(crate) mod wait;
mod waiting_on;

pub use coop::{consume_budget, unconstrained, Unconstrained};
pub use join::AbortHandle;
pub use join::{JoinError, JoinHandle};
#[cfg(not(loom))]
pub use join_set::JoinSet;
#[cfg(not(loom))]
pub use local::{spawn_local, LocalEnterGuard, LocalSet};
pub use waiting_on::{waiting_on, WaitingOn, WaitingOnExt};
// `task_local!`'s key and scope future (`macros/task_local.rs`), at Tokio's paths.
#[cfg(not(loom))]
pub use crate::macros::task_local::{AccessError, LocalKey, TaskLocalFuture};

/// The task module's futures, at Tokio's path (`tokio::task::futures`).
#[cfg(not(loom))]
pub mod futures {
    pub use crate::macros::task_local::TaskLocalFuture;
}

use raw::Header;
use std::cell::Cell;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::ptr::NonNull;
use std::task::{Context, Poll};

/// Spawn a future onto the current runtime. Same as [`crate::spawn`].
#[cfg(not(loom))]
#[track_caller]
pub fn spawn<F>(future: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    crate::spawn(future)
}

/// Run the blocking function `f` on the runtime's blocking pool, apart from the workers,
/// and await its result through the handle. A panic in `f` arrives as
/// `JoinError::is_panic`. `f` is cancelled, unrun (`JoinError::is_cancelled`), when the
/// runtime has shut down, or when no pool thread is free to take it and the OS will not
/// start one.
///
/// # Panics
/// Outside a Volt runtime (the panic names the caller's line).
#[cfg(not(loom))]
#[track_caller]
pub fn spawn_blocking<F, R>(f: F) -> JoinHandle<R>
where
    F: FnOnce() -> R + Send + 'static,
    R: Send + 'static,
{
    let shared = crate::runtime::context::current_handle().expect(
        "volt::task::spawn_blocking called outside a Volt runtime: call it from a task or inside `Runtime::block_on`",
    );
    shared.blocking.spawn(f)
}

/// Run the blocking closure `f` right here, on this thread, telling the runtime first so
/// that the other tasks of this thread's worker keep running meanwhile.
///
/// On a worker thread the worker (its queued tasks and its duties) is handed to another
/// thread first, the way a blocking [`JoinHandle::join`] hands it off; the task that
/// called `block_in_place` finishes its current poll on this thread, which then leaves
/// the worker, and the task's later polls run on the workers as usual. Anywhere else
/// (inside `Runtime::block_on`, on a `spawn_blocking` thread, outside a runtime) `f` just
/// runs. Unlike `spawn_blocking`, `f` may borrow from the caller; but the whole task
/// (everything it `join!`s, say) waits for `f`.
///
/// # Panics
/// Inside a [`LocalSet`] that is running (in a local task, in `run_until`'s future, in
/// the drop of a local task's future), as Tokio's does: the set's other tasks cannot move
/// to another thread, so they would all wait. (Volt has no current-thread runtime yet; on
/// one, this is to panic too, as Tokio's does.)
#[track_caller]
pub fn block_in_place<F, R>(f: F) -> R
where
    F: FnOnce() -> R,
{
    #[cfg(not(loom))]
    {
        // A current-thread runtime has no other thread to run its tasks while `f` blocks.
        let current_thread = crate::runtime::context::current_shared().is_some_and(|s| s.current_thread);
        if local::running_here() || current_thread {
            panic!("can call blocking only when running on the multi-threaded runtime");
        }
        // If no thread could be started to take the worker, `f` runs on it anyway: a
        // stall of this worker rather than a failure.
        let _ = crate::scheduler::join::hand_off_current_worker();
        // A blocking closure runs whole: nothing in it should see a cooperative budget
        // run out (see `coop`).
        let _budget = coop::Budget::unlimited();
        f()
    }
    #[cfg(loom)]
    f()
}

/// How a task ended, for the telemetry counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    Completed,
    Cancelled,
    Panicked,
}

/// How a poll ended, for the event ring (stored in a `PollEnd` record's argument).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum PollOutcome {
    /// Pending; RUNNING -> IDLE.
    Idle = 0,
    /// Ready; the task completes.
    Ready = 1,
    /// Pending, but woken during the poll: RUNNING -> SCHEDULED, re-queued locally.
    Requeued = 2,
    /// Pending, and an abort took effect: it is cancelled next.
    Cancelled = 3,
    /// The poll panicked; the task completes as panicked.
    Panicked = 4,
}

/// What a scheduler carries through one poll: `poll_start` makes it, `poll_end` fills
/// in the end, and `poll_outcome` records it without touching the task (which may be gone
/// by then). Plain data on the poller's stack: the poll's context is looked up once.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PollToken {
    /// Scheduler-defined (the worker scheduler: the polling worker); null when nothing
    /// records, and then the other hooks do nothing.
    pub(crate) cx: *const (),
    /// Scheduler-defined (the worker scheduler: that worker's event ring).
    pub(crate) ring: *const (),
    /// Clock readings at the poll's start and end.
    pub(crate) start: u64,
    pub(crate) end: u64,
    /// Scheduler-defined bits recorded with the outcome.
    pub(crate) extra: u64,
    /// How long the task waited in a queue before this poll, in nanoseconds
    /// ([`PollToken::NOT_QUEUED`] if it is not known).
    pub(crate) waited: u64,
    /// The poll's length in nanoseconds, once the poll's end has scaled it for the task's
    /// histogram (the worker scheduler does so whenever it records into a ring);
    /// [`PollToken::NOT_QUEUED`] before.
    pub(crate) busy_ns: u64,
    /// Scheduler-defined (the worker scheduler: the task's group and whether this was
    /// its first poll, `telemetry::groups::poll_tag`; `NO_GROUP` when not read).
    pub(crate) group: u32,
}

impl PollToken {
    /// Nothing records this poll.
    pub(crate) const NONE: PollToken = PollToken {
        cx: std::ptr::null(),
        ring: std::ptr::null(),
        start: 0,
        end: 0,
        extra: 0,
        waited: Self::NOT_QUEUED,
        busy_ns: Self::NOT_QUEUED,
        group: u32::MAX,
    };
    /// `waited` (or `busy_ns`) when the value is not known.
    pub(crate) const NOT_QUEUED: u64 = u64::MAX;
}

/// Memory for a task cell from the global allocator (a cell is never zero-sized).
#[inline(always)]
pub(crate) fn alloc_global(layout: std::alloc::Layout) -> NonNull<u8> {
    // SAFETY: a task cell is never zero-sized (it starts with a header).
    let p = unsafe { std::alloc::alloc(layout) };
    match NonNull::new(p) {
        Some(p) => p,
        None => std::alloc::handle_alloc_error(layout),
    }
}

/// What a task needs from the thing that runs it.
pub(crate) trait Schedule: Send + Sync + Sized + 'static {
    /// Whether this is the blocking pool (see `Vtable::blocking`).
    const BLOCKING: bool = false;
    /// A waker (or an abort) moved the task to SCHEDULED: queue it.
    fn schedule(&self, task: Notified<Self>);
    /// The task was woken during its own poll (`yield_now` is one case): queue it behind
    /// the work that is already waiting, so a task that wakes itself can't starve others.
    fn yield_now(&self, task: Notified<Self>);
    /// Unlink the task from the owned list; true if it was linked (its reference returns
    /// to the caller).
    fn release(&self, task: NonNull<Header>) -> bool;
    /// Count a finished task (the caller holds it; it is COMPLETE next).
    fn on_complete(&self, task: NonNull<Header>, outcome: Outcome);
    /// Whether the runtime behind this scheduler has begun to shut down (a blocking join
    /// then stops waiting for good: see `scheduler::join`).
    #[inline(always)]
    fn is_shut_down(&self) -> bool {
        false
    }
    /// Run `f` in this scheduler's runtime context, as its own shutdown pass runs the
    /// drops of the futures it cancels (so a `Drop` that spawns finds its runtime).
    fn in_context(&self, f: &mut dyn FnMut()) {
        f()
    }
    /// A poll begins (a no-op unless the scheduler records events). `sampled`: a
    /// sampled wake queued the task (see `State::set_sampled`).
    #[inline(always)]
    fn poll_start(&self, _task: NonNull<Header>, _cx: *const (), _sampled: bool) -> PollToken {
        PollToken::NONE
    }
    /// A poll returned: account it while the caller still owns the task.
    #[inline(always)]
    fn poll_end(&self, _task: NonNull<Header>, _token: &mut PollToken) {}
    /// Record how the poll ended. Called after the state transition, when another thread
    /// may already own (or have freed) the task, so it takes no `&self` and no header.
    #[inline(always)]
    fn poll_outcome(_token: &PollToken, _id: u64, _outcome: PollOutcome) {}

    /// Memory for a task cell of `layout`, and the tag to keep in its state word for
    /// [`Schedule::free_cell`] (0: the global allocator).
    #[inline(always)]
    fn alloc_cell(&self, layout: std::alloc::Layout) -> (NonNull<u8>, u8) {
        (alloc_global(layout), 0)
    }

    /// Free a cell's memory (its contents already dropped) that `alloc_cell` gave with
    /// `owner` for `layout`.
    ///
    /// # Safety
    /// `ptr`, `layout` and `owner` must be what `alloc_cell` returned and was given; the
    /// memory is not used again.
    #[inline(always)]
    unsafe fn free_cell(&self, ptr: NonNull<u8>, layout: std::alloc::Layout, owner: u8) {
        debug_assert_eq!(owner, 0);
        // SAFETY: the caller's contract: the global allocator gave it with `layout`.
        unsafe { std::alloc::dealloc(ptr.as_ptr(), layout) }
    }
}

/// What the event ring keeps per task (only when recording is on). The clock values are
/// raw recorder ticks; only the thread running the task writes the poll fields.
///
/// In declaration order (`repr(C)`): what every wake and every poll's end write comes
/// first, and the group, name and spawn location, which the spawner writes with them
/// (about 90 bytes); then two parts only the task's poller writes, [`PollStats`] (its
/// histograms, 64 bytes) and its [`WaitRecord`](wait::WaitRecord) (104 bytes). The
/// spawner leaves those two uninitialized, and the poller writes each when it first
/// needs it: the wait record when a leaf future first records a wait
/// ([`TaskStats::wait_writer`]), the histograms at the end of the second poll
/// ([`TaskStats::poller`]). A task polled once that waited on no leaf never touches the
/// rest, and one that waited (a join in a fork-join tree) touches the wait record only.
#[repr(C)]
pub(crate) struct TaskStats {
    pub(crate) polls: std::sync::atomic::AtomicU64,
    pub(crate) busy_ticks: std::sync::atomic::AtomicU64,
    pub(crate) scheduled_ticks: std::sync::atomic::AtomicU64,
    /// When it was last queued, or its last poll's end (0: never).
    pub(crate) scheduled_at: std::sync::atomic::AtomicU64,
    pub(crate) last_poll_end: std::sync::atomic::AtomicU64,
    /// Who woke it last (`wait::wake_source` + 1; 0: never woken) and when (raw ticks).
    pub(crate) woken_by: std::sync::atomic::AtomicU64,
    pub(crate) woken_at: std::sync::atomic::AtomicU64,
    /// Set while the task sits in the live-task change log (`telemetry::tasks`), so it is
    /// queued there once however often it changes between two reads.
    pub(crate) queued: crate::loom::AtomicBool,
    /// Set (release) once the poller has written `poll`; a reader reads `poll` only after
    /// seeing it set (acquire).
    poll_ready: std::sync::atomic::AtomicBool,
    /// The same for `wait`.
    wait_ready: std::sync::atomic::AtomicBool,
    /// The index of its task group (`telemetry::groups`), found once at its spawn.
    pub(crate) group: u8,
    pub(crate) name: Option<Box<str>>,
    /// Where it was spawned (the caller of `spawn`, through `#[track_caller]`).
    pub(crate) spawned_at: &'static std::panic::Location<'static>,
    /// Uninitialized until `poll_ready` is set.
    poll: std::cell::UnsafeCell<std::mem::MaybeUninit<PollStats>>,
    /// Uninitialized until `wait_ready` is set.
    wait: std::cell::UnsafeCell<std::mem::MaybeUninit<wait::WaitRecord>>,
}

// SAFETY: every field but `poll` and `wait` is `Sync`. Each of those is written once, by
// the thread that polls the task (RUNNING is exclusive, and a later poller synchronizes
// with it through the state word) before it sets its flag with release; every other
// access is a shared read of atomics after an acquire load saw the flag set, or the
// poller's own, after its own write.
unsafe impl Sync for TaskStats {}

/// The histograms of a task's poll times and of its waits in a queue (see
/// `TaskHistogram`): one cache line, written by the task's poller from the end of its
/// second poll on.
#[derive(Default)]
pub(crate) struct PollStats {
    pub(crate) poll_hist: TaskHistogram,
    pub(crate) schedule_hist: TaskHistogram,
}

/// A part of [`TaskStats`] for a reader: `None` until the poller's first use wrote it
/// and set `ready`.
#[inline]
fn lazy_read<'a, T>(
    ready: &std::sync::atomic::AtomicBool,
    part: &'a std::cell::UnsafeCell<std::mem::MaybeUninit<T>>,
) -> Option<&'a T> {
    if !ready.load(std::sync::atomic::Ordering::Acquire) {
        return None;
    }
    // SAFETY: set with release after the part was written, never cleared; from then on
    // the part is only accessed through shared references to its atomics.
    Some(unsafe { (*part.get()).assume_init_ref() })
}

/// A part of [`TaskStats`] for the thread polling the task (its only writer), written
/// first (zeroed) if this is its first use.
///
/// # Safety
/// The caller polls the task now (holds RUNNING).
#[inline]
unsafe fn lazy_write<'a, T: Default>(
    ready: &std::sync::atomic::AtomicBool,
    part: &'a std::cell::UnsafeCell<std::mem::MaybeUninit<T>>,
) -> &'a T {
    use std::sync::atomic::Ordering::{Relaxed, Release};
    // Relaxed suffices for the poller: the poll that set it happened before this one
    // (through the task's state word), or was this one.
    if !ready.load(Relaxed) {
        // SAFETY: not yet written, so no reader looks at it (they wait for the flag),
        // and the caller is the only thread that may write it now.
        unsafe { (*part.get()).write(T::default()) };
        ready.store(true, Release);
    }
    // SAFETY: written, by this thread or an earlier poller (see above).
    unsafe { (*part.get()).assume_init_ref() }
}

/// What a spawn gives a new task's [`TaskStats`].
pub(crate) struct NewTaskStats {
    pub(crate) name: Option<Box<str>>,
    /// When it was queued (raw ticks; 0: not yet).
    pub(crate) scheduled_at: u64,
    pub(crate) spawned_at: &'static std::panic::Location<'static>,
    /// The index of its task group (`telemetry::groups`).
    pub(crate) group: u8,
}

impl TaskStats {
    /// Write a new task's statistics at `dst`, queued at `scheduled_at` (raw ticks; 0:
    /// not yet), leaving the poller's parts for its polls.
    ///
    /// # Safety
    /// `dst` is valid for writes of a `TaskStats` and aligned for one.
    pub(crate) unsafe fn write_new(dst: *mut TaskStats, new: NewTaskStats) {
        use std::sync::atomic::{AtomicBool, AtomicU64};
        // SAFETY: the caller's contract; each field is written in place, and `poll` and
        // `wait` stay uninitialized (they are `MaybeUninit`s).
        unsafe {
            (&raw mut (*dst).polls).write(AtomicU64::new(0));
            (&raw mut (*dst).busy_ticks).write(AtomicU64::new(0));
            (&raw mut (*dst).scheduled_ticks).write(AtomicU64::new(0));
            (&raw mut (*dst).scheduled_at).write(AtomicU64::new(new.scheduled_at));
            (&raw mut (*dst).last_poll_end).write(AtomicU64::new(0));
            (&raw mut (*dst).woken_by).write(AtomicU64::new(0));
            (&raw mut (*dst).woken_at).write(AtomicU64::new(0));
            (&raw mut (*dst).queued).write(crate::loom::AtomicBool::new(false));
            (&raw mut (*dst).poll_ready).write(AtomicBool::new(false));
            (&raw mut (*dst).wait_ready).write(AtomicBool::new(false));
            (&raw mut (*dst).group).write(new.group);
            (&raw mut (*dst).name).write(new.name);
            (&raw mut (*dst).spawned_at).write(new.spawned_at);
        }
    }

    /// The histograms of a task polled once, whose poll took `busy_ns` after `queued_ns`
    /// in a queue. Its poller writes the histograms from its second poll on, and then
    /// adds the first poll's times from the totals, which held them until then: a task
    /// polled once (most tasks of a program that spawns a lot) touches only the first
    /// part of its statistics.
    pub(crate) fn first_poll_histograms(
        busy_ns: u64,
        queued_ns: u64,
    ) -> ([u16; TASK_HIST_BUCKETS], [u16; TASK_HIST_BUCKETS]) {
        let (poll, schedule) = (TaskHistogram::default(), TaskHistogram::default());
        poll.record(busy_ns);
        schedule.record(queued_ns);
        (poll.read(), schedule.read())
    }

    /// The histograms, for a reader: `None` until the poller's first use of them.
    #[inline]
    pub(crate) fn polled(&self) -> Option<&PollStats> {
        lazy_read(&self.poll_ready, &self.poll)
    }

    /// The histograms, for the thread polling the task (the only writer), written first
    /// if this is their first use.
    ///
    /// # Safety
    /// The caller polls the task now (holds RUNNING).
    #[inline]
    pub(crate) unsafe fn poller(&self) -> &PollStats {
        // SAFETY: the caller's contract.
        unsafe { lazy_write(&self.poll_ready, &self.poll) }
    }

    /// [`TaskStats::poller`] for a task whose histograms are surely written (the end of
    /// its second poll writes them): no check.
    ///
    /// # Safety
    /// The caller polls the task now (holds RUNNING), and `poller` was called before.
    #[inline(always)]
    pub(crate) unsafe fn poller_written(&self) -> &PollStats {
        debug_assert!(self.poll_ready.load(std::sync::atomic::Ordering::Relaxed));
        // SAFETY: the caller's contract: an earlier `poller` wrote it.
        unsafe { (*self.poll.get()).assume_init_ref() }
    }

    /// The wait record, for a reader: `None` until a leaf future first recorded a wait.
    #[inline]
    pub(crate) fn wait_record(&self) -> Option<&wait::WaitRecord> {
        lazy_read(&self.wait_ready, &self.wait)
    }

    /// The wait record, for the thread polling the task (the only writer), written first
    /// if this is its first use.
    ///
    /// # Safety
    /// The caller polls the task now (holds RUNNING).
    #[inline]
    pub(crate) unsafe fn wait_writer(&self) -> &wait::WaitRecord {
        // SAFETY: the caller's contract.
        unsafe { lazy_write(&self.wait_ready, &self.wait) }
    }
}

/// Buckets of a per-task histogram: the log2 buckets of `telemetry::Histogram` from
/// 2^10 ns (about 1 µs; shorter times count there) to 2^25 ns (about 34 ms; longer times
/// count there), 16 in all. Counts are 16 bits: a task's two histograms share one cache
/// line (64 bytes), which with a million tasks is 64 MB rather than several times that.
pub(crate) const TASK_HIST_BUCKETS: usize = 16;
/// The `telemetry::Histogram` bucket of this one's first.
pub(crate) const TASK_HIST_FIRST: usize = 10;

/// A per-task log2 histogram of durations, written by one thread (the task's poller)
/// with plain load-and-store, read by any. When a bucket would pass `u16::MAX`, every
/// bucket is halved: the shape stays, and the counts become relative.
#[derive(Default)]
pub(crate) struct TaskHistogram(pub(crate) [std::sync::atomic::AtomicU16; TASK_HIST_BUCKETS]);

impl TaskHistogram {
    /// Count one duration of `ns` nanoseconds (the single writer only).
    #[inline(always)]
    pub(crate) fn record(&self, ns: u64) {
        use std::sync::atomic::Ordering::Relaxed;
        // log2 of `ns / 2^10` is the bucket (0 for anything under 2^11 ns), capped at the
        // last: a shift, a leading-zero count and one compare.
        let i = ((63 - ((ns >> TASK_HIST_FIRST) | 1).leading_zeros()) as usize).min(TASK_HIST_BUCKETS - 1);
        let b = &self.0[i];
        let v = b.load(Relaxed).wrapping_add(1);
        if v == 0 {
            self.halve_and_count(i);
        } else {
            b.store(v, Relaxed);
        }
    }

    /// Bucket `i` was full: halve every bucket, then count the one duration in `i`
    /// (rare, so kept off the recording path).
    #[cold]
    #[inline(never)]
    fn halve_and_count(&self, i: usize) {
        use std::sync::atomic::Ordering::Relaxed;
        for b in &self.0 {
            b.store(b.load(Relaxed) / 2, Relaxed);
        }
        self.0[i].store(self.0[i].load(Relaxed) + 1, Relaxed);
    }

    /// The counts.
    pub(crate) fn read(&self) -> [u16; TASK_HIST_BUCKETS] {
        std::array::from_fn(|i| self.0[i].load(std::sync::atomic::Ordering::Relaxed))
    }
}

#[cfg(all(test, not(loom)))]
mod histogram_tests {
    use super::*;

    /// The spawner's write leaves the poller's parts alone; a reader sees neither until
    /// the poller's first use of each writes it, and then sees what the poller recorded.
    /// (Under Miri: no read of an uninitialized part, and the name is dropped once.)
    #[test]
    fn the_pollers_part_is_written_at_its_first_use_and_read_only_after() {
        let mut mem = std::mem::MaybeUninit::<TaskStats>::uninit();
        let new = NewTaskStats {
            name: Some("t".into()),
            scheduled_at: 7,
            spawned_at: std::panic::Location::caller(),
            group: 0,
        };
        // SAFETY: a `MaybeUninit<TaskStats>` is valid and aligned for one.
        unsafe { TaskStats::write_new(mem.as_mut_ptr(), new) };
        // SAFETY: `write_new` initialized everything but the `MaybeUninit` part.
        let st = unsafe { mem.assume_init_ref() };
        assert_eq!(st.scheduled_at.load(std::sync::atomic::Ordering::Relaxed), 7);
        assert!(st.polled().is_none(), "nothing to read before the first poll");
        // SAFETY: this thread stands for the task's poller.
        let p = unsafe { st.poller() };
        p.poll_hist.record(3_000);
        assert!(st.wait_record().is_none(), "the wait record is written at its own first use");
        // SAFETY: as above.
        let w = unsafe { st.wait_writer() };
        assert_eq!(w.read().map(|w| w.names_any()), Some(false), "a fresh record names no wait");
        assert!(st.wait_record().is_some());
        // SAFETY: as above; the second use finds it written and keeps what it holds.
        unsafe { st.poller() }.poll_hist.record(3_000);
        let read = st.polled().expect("written by the poller").poll_hist.read();
        assert_eq!((read[1], read.iter().map(|&c| c as u32).sum::<u32>()), (2, 2), "{read:?}");
        assert_eq!(TaskStats::first_poll_histograms(3_000, 0).0, {
            let mut one = [0; TASK_HIST_BUCKETS];
            one[1] = 1;
            one
        });
        // SAFETY: initialized above, dropped once.
        unsafe { mem.assume_init_drop() };
    }

    #[test]
    fn task_histograms_bucket_by_log2_and_halve_when_full() {
        let h = TaskHistogram::default();
        h.record(0); // under 1 µs: the first bucket
        h.record(1_500); // 2^10..2^11 ns
        h.record(3_000_000_000); // 3 s: the last bucket
        let c = h.read();
        assert_eq!((c[0], c[TASK_HIST_BUCKETS - 1]), (2, 1), "{c:?}");
        for _ in 0..70_000 {
            h.record(5_000); // 2^12..2^13 ns: bucket 2
        }
        let c = h.read();
        assert!(c[2] > 30_000 && c[2] < u16::MAX, "halved once it was full: {c:?}");
        assert_eq!(c[TASK_HIST_BUCKETS - 1], 0, "the others halved with it: {c:?}");
    }
}

/// A reference-owning pointer to a task.
pub(crate) struct Task<S: 'static> {
    raw: NonNull<Header>,
    _scheduler: PhantomData<S>,
}

// SAFETY: tasks are `Send` (their futures and outputs are), and the header is `Sync`.
unsafe impl<S> Send for Task<S> {}
// SAFETY: see above.
unsafe impl<S> Sync for Task<S> {}

impl<S: 'static> Task<S> {
    /// Adopt a reference the caller owns.
    pub(crate) fn from_raw(raw: NonNull<Header>) -> Task<S> {
        Task { raw, _scheduler: PhantomData }
    }

    pub(crate) fn header(&self) -> &Header {
        // SAFETY: the reference we own keeps the task alive.
        unsafe { self.raw.as_ref() }
    }

    /// The task's pointer as allocated (full provenance over the cell).
    pub(crate) fn raw(&self) -> NonNull<Header> {
        self.raw
    }

    /// Give up ownership of the reference without releasing it.
    pub(crate) fn into_raw(self) -> NonNull<Header> {
        let raw = self.raw;
        std::mem::forget(self);
        raw
    }

    /// Runtime shutdown: cancel the task if no thread is polling it.
    pub(crate) fn shutdown(&self) {
        // SAFETY: we hold a reference.
        unsafe { (self.header().vtable.shutdown)(self.raw) }
    }
}

impl<S: 'static> Drop for Task<S> {
    fn drop(&mut self) {
        if self.header().state.ref_dec() {
            // SAFETY: that was the last reference.
            unsafe { (self.header().vtable.dealloc)(self.raw) }
        }
    }
}

/// A queue entry: a task in SCHEDULED, owning the queue's reference.
pub(crate) struct Notified<S: 'static>(pub(crate) Task<S>);

impl<S: 'static> Notified<S> {
    pub(crate) fn into_raw(self) -> NonNull<Header> {
        self.0.into_raw()
    }

    /// # Safety
    /// `raw` must carry a queue reference (it came from `into_raw`).
    pub(crate) unsafe fn from_raw(raw: NonNull<Header>) -> Notified<S> {
        Notified(Task::from_raw(raw))
    }

    pub(crate) fn header(&self) -> &Header {
        self.0.header()
    }

    /// Run the task once; consumes the queue reference.
    pub(crate) fn run(self) {
        self.run_on(std::ptr::null());
    }

    /// `run`, passing the scheduler's poll context `cx` (the worker scheduler: the
    /// polling worker) to [`Schedule::poll_start`], so a poll need not look it up.
    #[inline(always)]
    pub(crate) fn run_on(self, cx: *const ()) {
        let raw = self.into_raw();
        // SAFETY: we pass on the queue reference we own.
        unsafe { (raw.as_ref().vtable.poll)(raw, cx) }
    }
}

/// Allocate a task, with statistics (see [`TaskStats::write_new`]) if `stats` is given.
/// Returns the owned-list reference, the queue entry and the handle.
pub(crate) fn new_task<F, S>(
    future: F,
    scheduler: S,
    id: u64,
    stats: Option<NewTaskStats>,
) -> (Task<S>, Notified<S>, JoinHandle<F::Output>)
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
    S: Schedule,
{
    let raw = raw::Cell::<F, S>::allocate(future, scheduler, id, stats);
    (Task::from_raw(raw), Notified(Task::from_raw(raw)), JoinHandle::new(raw))
}

/// [`new_task`] for a future that need not be `Send` (a `LocalSet`'s task).
///
/// # Safety
/// The scheduler `S` must poll the task, run its shutdown and drop its queue entries only
/// on the one thread that may touch `future`, and its `is_shut_down` must be false (so no
/// joiner on another thread cancels it); the join handle of a `!Send` output stays on
/// that thread by its own type.
pub(crate) unsafe fn new_local_task<F, S>(
    future: F,
    scheduler: S,
    id: u64,
) -> (Task<S>, Notified<S>, JoinHandle<F::Output>)
where
    F: Future + 'static,
    F::Output: 'static,
    S: Schedule,
{
    let raw = raw::Cell::<F, S>::allocate(future, scheduler, id, None);
    (Task::from_raw(raw), Notified(Task::from_raw(raw)), JoinHandle::new(raw))
}

/// Spawns a task with options (a name, for now).
///
/// ```
/// let rt = volt::Runtime::new().unwrap();
/// let out = rt.block_on(async { volt::task::Builder::new().name("answer").spawn(async { 42 }).await.unwrap() });
/// assert_eq!(out, 42);
/// ```
#[cfg(not(loom))]
#[derive(Debug, Default, Clone)]
pub struct Builder {
    name: Option<String>,
}

#[cfg(not(loom))]
impl Builder {
    /// A builder with no options set.
    pub fn new() -> Builder {
        Builder::default()
    }

    /// Name the task. The name shows in `Telemetry::tasks()` when the runtime records
    /// events; without recording it is not kept.
    pub fn name(mut self, name: impl Into<String>) -> Builder {
        self.name = Some(name.into());
        self
    }

    /// Spawn onto the current runtime, like [`crate::spawn`] (the caller's location is
    /// the task's spawn location).
    ///
    /// # Panics
    /// Outside a Volt runtime.
    #[track_caller]
    pub fn spawn<F>(self, future: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let shared = crate::runtime::context::current_handle()
            .expect("volt::task::Builder::spawn called outside a Volt runtime: use `spawn_on` with a `Handle`");
        crate::runtime::handle::Shared::spawn_named(&shared, future, self.name, std::panic::Location::caller())
    }

    /// Spawn onto the runtime of `handle`, from any thread.
    #[track_caller]
    pub fn spawn_on<F>(self, future: F, handle: &crate::runtime::Handle) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        crate::runtime::handle::Shared::spawn_named(&handle.shared, future, self.name, std::panic::Location::caller())
    }
}

/// A task's id: unique among all tasks of the process (ids are never reused), and the
/// same for every handle of one task ([`JoinHandle::id`], [`AbortHandle::id`],
/// [`JoinError::id`]) and inside it ([`id`]).
///
/// It displays as its number, which is also the `id` the telemetry shows
/// (`Id::as_u64`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Id(std::num::NonZeroU64);

impl Id {
    /// The id of a task whose header says `id` (ids start at 1).
    pub(crate) fn from_u64(id: u64) -> Id {
        Id(std::num::NonZeroU64::new(id).expect("volt: task ids start at 1"))
    }

    /// The id as a number, as telemetry (`TaskInfo::id`, the event ring, the console)
    /// names the task.
    pub fn as_u64(&self) -> u64 {
        self.0.get()
    }
}

impl std::fmt::Display for Id {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(&self.0, f)
    }
}

/// The id of the task being polled on this thread.
///
/// # Panics
/// Outside a task (in `Runtime::block_on`, say, or on a thread of one's own); use
/// [`try_id`] there.
#[track_caller]
pub fn id() -> Id {
    try_id().expect("volt::task::id called outside a task")
}

/// The id of the task being polled on this thread, or `None` outside a task. A closure of
/// `spawn_blocking` is a task with an id of its own.
pub fn try_id() -> Option<Id> {
    // SAFETY: the current task is alive while it is being polled on this thread.
    current_task().map(|t| Id::from_u64(unsafe { t.as_ref() }.id))
}

/// A process-wide task id, never reused.
pub(crate) fn next_task_id() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
    static NEXT_ID: AtomicU64 = AtomicU64::new(1);
    NEXT_ID.fetch_add(1, Relaxed)
}

thread_local! {
    /// The task this thread is polling, saved and restored around every poll (nested
    /// polls happen under `JoinHandle::join`).
    static CURRENT_TASK: Cell<Option<NonNull<Header>>> = const { Cell::new(None) };
}

/// The task being polled on this thread, if any.
#[inline(always)]
pub(crate) fn current_task() -> Option<NonNull<Header>> {
    CURRENT_TASK.with(|c| c.get())
}

/// Marks a task as current for the duration of a poll.
pub(crate) struct CurrentTaskGuard(Option<NonNull<Header>>);

impl CurrentTaskGuard {
    #[inline]
    pub(crate) fn enter(task: NonNull<Header>) -> CurrentTaskGuard {
        CurrentTaskGuard(CURRENT_TASK.with(|c| c.replace(Some(task))))
    }

    /// No task is current until dropped: for work a poll does on behalf of no task (the
    /// signal driver arming itself with the reactor), whose waits are not the task's.
    #[cfg_attr(not(feature = "signal"), allow(dead_code))]
    pub(crate) fn none() -> CurrentTaskGuard {
        CurrentTaskGuard(CURRENT_TASK.with(|c| c.replace(None)))
    }
}

impl Drop for CurrentTaskGuard {
    #[inline]
    fn drop(&mut self) {
        CURRENT_TASK.with(|c| c.set(self.0));
    }
}

/// Yield to the scheduler once: the task goes to the back of its worker's queue.
pub async fn yield_now() {
    struct YieldNow(bool);
    impl Future for YieldNow {
        type Output = ();
        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            if self.0 {
                return Poll::Ready(());
            }
            self.0 = true;
            // No wait is recorded: the task is queued again at once and never idles here.
            // A reader tells a yield from the task's statistics instead (its poll's end
            // queued it, and nothing woke it since: `telemetry::read_task`).
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }
    YieldNow(false).await
}

/// Defer cancellation of the current task while the returned guard lives (it raises the
/// `shield_depth` field of the task's state word), so a critical section is not cut off
/// half way.
///
/// An `abort` that arrives while any guard of the task is alive is remembered; when the
/// last guard drops, it takes effect at the task's next yield point (the next time a poll
/// returns `Pending`). Guards nest, up to 255 deep. Outside a task (in `block_on`, say)
/// the guard does nothing. Shields defer `abort`, not runtime shutdown.
pub fn shield() -> ShieldGuard {
    let task = CURRENT_TASK.with(|c| c.get());
    if let Some(t) = task {
        // SAFETY: the current task is alive while it is being polled.
        let h = unsafe { t.as_ref() };
        let _ = h.state.add_shield();
        // The guard holds a reference, so it stays sound even if it outlives the poll.
        h.state.ref_inc();
    }
    ShieldGuard { task }
}

/// Keeps the current task's cancellation deferred; see [`shield`].
#[must_use = "the shield is lowered as soon as the guard is dropped"]
pub struct ShieldGuard {
    task: Option<NonNull<Header>>,
}

// SAFETY: a guard lives inside its task's future, which may move between workers; it
// only touches the task's atomic state word and owns a reference that keeps it alive.
unsafe impl Send for ShieldGuard {}
// SAFETY: `&ShieldGuard` offers nothing.
unsafe impl Sync for ShieldGuard {}

impl Drop for ShieldGuard {
    fn drop(&mut self) {
        let Some(t) = self.task else { return };
        // SAFETY: the guard's reference keeps the task alive.
        let h = unsafe { t.as_ref() };
        if h.state.remove_shield() == state::TransitionToScheduled::Submit {
            // SAFETY: the transition took a queue reference for `schedule`.
            unsafe { (h.vtable.schedule)(t) };
        }
        if h.state.ref_dec() {
            // SAFETY: that was the last reference.
            unsafe { (h.vtable.dealloc)(t) };
        }
    }
}

impl std::fmt::Debug for ShieldGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShieldGuard").field("active", &self.task.is_some()).finish()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    //! The harness (poll, complete, cancel, free) against the mock scheduler.
    use super::test_util::{spawn, DropCounter, MockScheduler};
    use std::future::Future;
    use std::pin::Pin;
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    use std::sync::Arc;
    use std::task::{Context, Poll, Waker};

    fn ready<T>(h: &mut super::JoinHandle<T>) -> Option<Result<T, super::JoinError>> {
        match Pin::new(h).poll(&mut Context::from_waker(Waker::noop())) {
            Poll::Ready(v) => Some(v),
            Poll::Pending => None,
        }
    }

    #[test]
    fn spawn_run_complete_and_free() {
        let sched = MockScheduler::new();
        let mut h = spawn(&sched, async { 5 });
        assert!(ready(&mut h).is_none());
        assert_eq!(sched.run_all(), 1);
        assert_eq!(ready(&mut h).unwrap().unwrap(), 5);
        drop(h);
        assert_eq!(sched.completed.load(SeqCst), 1);
        assert_eq!(Arc::strong_count(&sched), 1, "the cell (holding a scheduler clone) was freed");
    }

    #[test]
    fn a_self_wake_during_poll_requeues_as_a_yield() {
        let sched = MockScheduler::new();
        let mut h = spawn(&sched, async {
            super::yield_now().await;
            super::yield_now().await;
        });
        assert_eq!(sched.run_all(), 3);
        assert_eq!(sched.yields.load(SeqCst), 2);
        assert!(ready(&mut h).unwrap().is_ok());
    }

    /// A future that panics as it is dropped, after its poll returned `Ready`: the task
    /// panicked, and its handle hears so instead of `Ok` (the first form discarded the
    /// panic); the output it returned is dropped, once.
    #[test]
    fn a_panic_dropping_the_future_after_ready_reaches_the_handle() {
        struct PanicsOnDrop;
        impl Drop for PanicsOnDrop {
            fn drop(&mut self) {
                panic!("dropped after Ready");
            }
        }
        struct ReadyAtOnce(#[allow(dead_code)] PanicsOnDrop, Option<DropCounter>);
        impl Future for ReadyAtOnce {
            type Output = DropCounter;
            fn poll(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<DropCounter> {
                Poll::Ready(self.1.take().expect("polled once"))
            }
        }
        let sched = MockScheduler::new();
        let drops = Arc::new(AtomicUsize::new(0));
        let mut h = spawn(&sched, ReadyAtOnce(PanicsOnDrop, Some(DropCounter(drops.clone()))));
        assert_eq!(sched.run_all(), 1);
        let out = ready(&mut h).expect("the task finished");
        assert!(out.as_ref().is_err_and(|e| e.is_panic()), "the drop's panic was lost: {:?}", out.map(|_| ()));
        assert_eq!(drops.load(SeqCst), 1, "the output was not dropped once");
    }

    #[test]
    fn panic_in_poll_and_abort_before_poll() {
        let sched = MockScheduler::new();
        let drops = Arc::new(AtomicUsize::new(0));
        let d = DropCounter(drops.clone());
        let mut p = spawn(&sched, async move {
            let _d = d;
            panic!("inside");
        });
        let d = DropCounter(drops.clone());
        let mut a = spawn(&sched, async move {
            let _d = d;
        });
        a.abort();
        sched.run_all();
        assert!(ready(&mut p).unwrap().unwrap_err().is_panic());
        assert!(ready(&mut a).unwrap().unwrap_err().is_cancelled());
        assert_eq!(drops.load(SeqCst), 2, "both futures were dropped");
        assert_eq!((sched.panicked.load(SeqCst), sched.cancelled.load(SeqCst)), (1, 1));
        assert_eq!(sched.finished(), 2);
        assert!(sched.pop().is_none());
    }

    /// A waker clone that was `mem::forget`-ed, turned back into an owning `Waker`.
    struct RawWakerCopy(*const (), &'static std::task::RawWakerVTable);
    // SAFETY: the copy is a task waker's data pointer and vtable (both thread-safe).
    unsafe impl Send for RawWakerCopy {}

    impl RawWakerCopy {
        fn of(w: &Waker) -> RawWakerCopy {
            RawWakerCopy(w.data(), w.vtable())
        }
        /// # Safety
        /// Each call must match one forgotten clone (it takes over that clone's reference).
        unsafe fn revive(&self) -> Waker {
            // SAFETY: the caller's contract: this adopts one forgotten clone's reference.
            unsafe { Waker::new(self.0, self.1) }
        }
    }

    /// 17 million live clones of one task's waker (past the first state layout's 24-bit
    /// reference count, which aborted the process) are fine: the task completes while they
    /// live, and its cell is freed exactly when the last one is dropped.
    #[test]
    #[cfg_attr(miri, ignore = "17 million waker clones")]
    fn seventeen_million_waker_clones_then_complete_and_free() {
        const CLONES: usize = 17_000_000;
        let sched = MockScheduler::new();
        let drops = Arc::new(AtomicUsize::new(0));
        let d = DropCounter(drops.clone());
        let copy = Arc::new(std::sync::Mutex::new(None));
        let c2 = copy.clone();
        let mut first = true;
        let mut h = spawn(&sched, async move {
            let _d = d;
            std::future::poll_fn(|cx| {
                if !std::mem::replace(&mut first, false) {
                    return Poll::Ready(7);
                }
                for _ in 0..CLONES {
                    // Held without memory: each forgotten clone owns one reference.
                    std::mem::forget(cx.waker().clone());
                }
                *c2.lock().unwrap() = Some(RawWakerCopy::of(cx.waker()));
                Poll::Pending
            })
            .await
        });
        assert_eq!(sched.run_all(), 1);
        let copy = copy.lock().unwrap().take().unwrap();
        let mut wakers_left = CLONES;
        // SAFETY: one of the forgotten clones.
        unsafe { copy.revive() }.wake();
        wakers_left -= 1;
        assert_eq!(sched.run_all(), 1);
        assert_eq!(ready(&mut h).unwrap().unwrap(), 7);
        drop(h);
        assert_eq!(drops.load(SeqCst), 1, "the future was dropped at completion");
        while wakers_left > 1 {
            // SAFETY: one of the forgotten clones.
            drop(unsafe { copy.revive() });
            wakers_left -= 1;
        }
        assert_eq!(Arc::strong_count(&sched), 2, "the cell was freed while a waker still held it");
        // SAFETY: the last forgotten clone.
        drop(unsafe { copy.revive() });
        assert_eq!(Arc::strong_count(&sched), 1, "the cell was not freed after the last waker");
        assert_eq!(sched.completed.load(SeqCst), 1);
    }
}
