//! The worker run loop: budget ticks, the order in which a worker looks for work, and
//! how it parks.
//!
//! # The loop
//! A worker runs *budget ticks*. Each tick polls at most [`BUDGET_PER_TICK`] (128) tasks,
//! then updates the EWMA of task time and the global-queue interval; a tick that found no
//! work parks the worker. The LIFO slot serves at most [`MAX_LIFO_POLLS_PER_TICK`] (3)
//! polls in a row; the count restarts when a task comes from any other source and at
//! every tick. Past the cap, a task found in the slot is flushed to the back of the ring
//! so it is visible to FIFO order and to stealers, and two tasks that keep waking each
//! other can't hold the worker.
//!
//! # Finding work (`find_work`)
//! 1. the periodic global check: every `global_queue_interval` polls, fetch a batch (and
//!    right after a poll that yielded, if the global queue holds work);
//! 2. the LIFO slot;
//! 3. the local ring (FIFO);
//! 4. become a searcher (if fewer than half the workers are) and steal half of a random
//!    victim's ring (xorshift + Lemire);
//! 5. a final global check;
//! 6. park.
//!
//! # Where a global batch goes
//! A fetched batch could sit in a private 32-task buffer that `find_work` checks first,
//! but private means no other worker can take those tasks: when the task a worker runs
//! first from a batch takes long (a CPU-heavy poll, a blocking call), up to 32 tasks wait
//! behind it while the other workers find nothing and park; the test
//! `tasks_fetched_by_a_worker_stuck_in_a_long_poll_still_run_elsewhere` caught it stuck
//! for good. So the batch goes into the worker's ring, where stealers see it (and the
//! parking re-check counts it), and the worker, unless it is searching (then the last
//! searcher's wake covers it), wakes a parked one to share it, as a local spawn does. The
//! batch still costs one lock for up to 64 tasks.
//!
//! The periodic global check could come *after* the LIFO slot and the local ring. Done
//! that way, a worker whose local sources never run dry (a task that keeps waking itself
//! always sits in the ring) never reaches the check, and remotely spawned tasks starve. So
//! the check, when due, runs before the local sources, as Tokio does; `tick` counts polls,
//! not budget ticks, because the EWMA gives the interval in tasks ("tasks per 1 ms").
//!
//! # The backlog cap on the interval
//! `clamp(1 ms / avg, 8, 255)` keeps the 1 ms target for *one* task waiting in the global
//! queue. With a backlog of `L` tasks and batches of `b` per worker, the last one waits
//! about `L / (b * workers)` checks, so a busy runtime fed from outside would drain a deep
//! global queue at 64 tasks per ~1 ms per worker (ten times slower than Tokio in the
//! `spawn_many_remote_busy` benchmark). So each global fetch that leaves tasks behind also
//! caps the interval at `1 ms * b * workers / (L * avg)`, within the same 8..=255 clamp, and
//! a fetch that finds the queue empty lifts the cap. The interval in use (and reported) is
//! the smaller of the two.
//!
//! # Yielded tasks and the global queue
//! A task that yields (or wakes itself during its poll) says it can wait. Queued at the
//! back of the ring, it still keeps the ring non-empty, so a worker with a few tasks that
//! yield in a loop only reached the global queue on the periodic check: with four tasks
//! that each yield and then spin 10 µs on two workers, that check came every ~100 polls
//! (the EWMA's 1 ms), and 10,000 tasks spawned from outside waited behind the spinners
//! (the `spawn_many_remote_busy` benchmark, 1.25 to 2.75 times Tokio's time). Tokio defers
//! a yielded task until its worker has nothing else, and its worker takes from the global
//! queue whenever its local queue is empty. Here a poll that ends in such a requeue marks
//! the worker, and its next `find_work` fetches a global batch first if the global queue
//! holds anything (one atomic load when it does not). The yielded task keeps its place in
//! the ring, ahead of the batch's tail, so it still runs once per pass of the ring: no
//! task that yields forever starves the others, and none is starved by them.
//!
//! # Scheduling from a worker (`schedule_local`)
//! A task spawned or woken on a worker goes into that worker's LIFO slot; the task it
//! evicts goes to the back of the ring. A task woken during its own poll (`yield_now`)
//! goes to the back of the ring instead, so a task that wakes itself forever takes turns
//! with everything else. While the worker is transitioning to park it refuses local
//! scheduling (the task goes to the global queue), so nothing lands in a slot nobody will
//! look at. Whenever the ring gets work (a yield, an evicted task) and this worker is not
//! searching, it calls `notify_parked` so an idle worker can come and steal. A push that
//! only fills the empty LIFO slot wakes nobody, as in Tokio: the owner runs that task
//! next. Notifying on every local push instead, in a chain of spawn-and-await, woke
//! the other worker dozens of times per thousand steps, each wake a futex syscall on the
//! busy worker's path, only for the woken worker to find nothing it could take.
//!
//! # Stealing from the LIFO slot
//! An owner-only slot (as in Tokio: tokio-rs/tokio#4941) has a flaw: a task
//! spawned or woken just before its worker's poll turns long (a CPU-heavy loop, a blocking
//! call) waits for that poll, however long, while the other workers sit idle; the test
//! `a_task_in_the_lifo_slot_of_a_worker_stuck_in_a_long_poll_runs_elsewhere` caught it.
//! So the slot is stealable (`lifo.rs`), but only from a worker that is stuck: a worker
//! about to park (`check_stuck_lifo`) notes a task it sees in another worker's slot with
//! that worker's poll count, sleeps at most [`LIFO_STEAL_AFTER`] (100 µs), and takes the
//! task if it is still there and the count has not moved (the owner is still in the same
//! poll). Taking it at once instead, as Tokio 1.51 did (reverted in 1.52.2 for its cost
//! on short request handlers), would break the hand-off between two tasks on one worker.
//! Nothing wakes a worker for a slot-only push (above) while one parked worker is the
//! *watcher* (see "Parking"): it wakes at least every [`PARK_TIMEOUT`], in the reactor
//! too, so such a task waits about 10 ms at most. A slot-only push that finds nobody
//! watching wakes a parked worker, which then parks as the watcher. The owner pays one
//! atomic swap per LIFO hit, and two loads per slot-only push.
//!
//! A poll that turns long with nothing in its slot leaves nothing to rescue, but it is
//! away from the driver. If it was the reactor's holder, woken by I/O or a timer with
//! the other workers asleep and nobody watching, other tasks' timers and I/O wait for
//! that poll to end, as they do on Tokio; a worker woken for work (rule 8 in `idle`)
//! leaves the reactor's holder in place.
//!
//! # Parking (`park`)
//! Set `transitioning_to_park`, run the idle protocol's `transition_worker_to_parked`, then,
//! if no worker is searching afterwards (always so for the last searcher), re-check every
//! queue and cancel the park if anything is there. Re-checking only for the last
//! searcher is not enough: a worker that parks without having become a searcher (the
//! searcher limit refused it) could then set its bit just after a producer looked and found nobody
//! searching, and sleep through the timeout with work queued. Then park, on the futex or
//! in the reactor.
//!
//! A parked worker sleeps until work, a timer or I/O arrives: there is no periodic wake.
//! A fixed 10 ms park timeout woke each parked worker 100 times a second forever (16
//! workers: about 1,600 wakeups and 2% of a core per second of doing nothing). What that
//! timeout did is now done by one worker, and only while it is needed (rule 7 in `idle`):
//! while some worker is out of the parked state (maybe inside a long poll), the one
//! parked worker that holds the watch (the first to claim it, futex or reactor) sleeps at
//! most [`PARK_TIMEOUT`], then looks at the other workers' LIFO slots and, if the driver
//! is free, takes it. When every worker is parked, nobody holds the watch: the worker in
//! the reactor sleeps until the next timer (none: until I/O or a wake) and the others
//! until they are woken. A worker that saw a task in another's LIFO slot sleeps only
//! until that watch is due.
//!
//! # The driver (timers and I/O)
//! A worker that runs out of work takes the driver if it is free and parks in the
//! reactor (see `io` for that protocol): one blocking poll that returns at once with the
//! events already waiting. A running worker polls the reactor without blocking only once
//! every [`IO_POLL_INTERVAL`] (64) polls (`maintain_driver`, at a budget tick's start or
//! within the tick), so that events are still collected while every worker stays busy;
//! due timers are fired at the start of every tick. Polling the reactor at every tick, as
//! this loop first did, cost more: under an HTTP load (wrk, 64 connections, 2 workers),
//! where a tick often ends after a few tasks, it took 0.09 to 0.12 `epoll_wait(0)` calls
//! per request of a minimal responder and 0.04 per axum request, a quarter to a half of
//! them finding nothing, while the workers almost never blocked in the reactor; with the
//! interval, blocking polls collect the events, 12 to 30 per call, about as many as
//! Tokio's (`docs/http-profile.md`). Timer and I/O wakes are dispatched on the worker's
//! own thread, so the woken tasks land in its LIFO slot and ring.
//!
//! # Waking others after a dispatch
//! While a worker delivers a batch of driver wakes (`dispatch_driver`), `schedule_local`
//! does not call `notify_parked` for each task. Once the batch is queued, the worker wakes
//! one parked worker if more than one task is queued here (the LIFO slot and the ring
//! together) and it is not itself searching (then the last searcher's wake covers it).
//! That is the per-push rule's outcome (the first task fills the slot, the second pushes
//! one into the ring and notifies) with one decision per batch instead of a fence and a
//! check per task. A single task needs nobody else: this worker runs it next. With two
//! or more, all but the one in the slot sit in the ring, where the woken worker steals
//! them, so none waits behind a long poll of the first.
//!
//! # Blocking join (`join_on_worker`)
//! `JoinHandle::join` on a worker runs its target and nothing else (the rule and why:
//! `task::join`). `take_local` takes the target out of the LIFO slot (only the owner
//! fills the slot, so a slot seen holding the target holds it or nothing) or out of the
//! ring (popped whole and pushed back in order, since the ring has no removal from the
//! middle), and `run_task` polls it inline while the thread's stack has room
//! (`HELP_STACK`: half the stack, measured from where the worker loop started).
//!
//! Otherwise `hand_off` gives the worker away: the thread writes its pending poll start
//! out of the ring, clears its own context's worker (it is now a plain thread of the
//! runtime: spawns and wakes from it go to the global queue, its task frees to the remote
//! stacks), and queues `run_worker` for this worker on the blocking pool
//! (`Pool::spawn_now`, which never waits behind blocking calls). The pool's lock orders
//! the old owner's last touch of `Core`, the ring and the cell cache before the new
//! owner's first. From then on the old thread must not touch the worker: `run_tick`,
//! `join_on_worker` and the poll hooks (`poll_end`) check `owns(w)` after every poll and
//! let go (`run_worker` returns without counting an exit, and a handed-off pool thread
//! goes back to the pool). The old thread parks until the target completes. If no pool
//! thread can be had at all, the join keeps the worker and waits without running
//! anything. A worker has exactly one owner at a time, so `Exits` still counts each
//! worker's exit once.

use super::exits::Exits;
use super::idle::Idle;
use super::inject::Inject;
use super::lifo::LifoSlot;
use super::park::ParkState;
use super::queue::{Pushed, WorkStealQueue};
use super::rand::FastRand;
use crate::blocking::{Pool, PoolConfig};
use crate::io::{Dispatched, Driver};
use crate::scheduler::cellcache::{self, CellCache};
use crate::task::list::OwnedTasks;
use crate::task::raw::{self, Header};
use crate::task::{new_task, next_task_id, JoinHandle, Notified, Outcome, Schedule, TaskStats};
use crate::task::{PollOutcome, PollToken};
use crate::telemetry::events::{self, Clock, EventKind, EventRing, SCHEDULE_GLOBAL, SCHEDULE_LIFO};
use crate::telemetry::{Recorder, RemoteCounters, WorkerCounters, WorkerState};
use std::cell::Cell;
use std::future::Future;
use std::mem::ManuallyDrop;
use std::ptr::{self, NonNull};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Condvar, Mutex};
use std::task::{Wake, Waker};
use std::time::{Duration, Instant};

/// Polls per budget tick: between ticks the worker fires due timers and refreshes its
/// global-queue interval, so no run of ready tasks can put those off for long.
pub(crate) const BUDGET_PER_TICK: u32 = 128;
/// LIFO-slot polls allowed per budget tick.
pub(crate) const MAX_LIFO_POLLS_PER_TICK: u32 = 3;
/// Bounds of a global-queue batch: `clamp(len / workers, MIN, MAX)`.
pub(crate) const MIN_GLOBAL_BATCH: usize = 4;
pub(crate) const MAX_GLOBAL_BATCH: usize = 64;
/// Polls a running worker makes between two non-blocking reactor polls of its own (see
/// "The driver (timers and I/O)"). A worker that runs out of work polls the reactor anyway,
/// blocking, on its way to park.
pub(crate) const IO_POLL_INTERVAL: u32 = 64;
/// The longest the watcher (the one parked worker that keeps a timeout while another
/// worker is out; see "Parking") sleeps before looking again.
pub(crate) const PARK_TIMEOUT: Duration = Duration::from_millis(10);
/// How long a task may sit in the LIFO slot of a worker that stays in one poll before an
/// idle worker takes it (see "Stealing from the LIFO slot").
pub(crate) const LIFO_STEAL_AFTER: Duration = Duration::from_micros(100);
/// EWMA target: a task waiting in the global queue should wait about this long.
pub(crate) const TARGET_GLOBAL_QUEUE_LATENCY_NS: u64 = 1_000_000;
pub(crate) const MIN_GLOBAL_QUEUE_INTERVAL: u32 = 8;
pub(crate) const MAX_GLOBAL_QUEUE_INTERVAL: u32 = 255;
/// The starting estimate of a task's duration before any tick has been measured: a
/// middle value for mixed workloads (50 µs -> interval 20).
pub(crate) const INITIAL_AVG_TASK_NS: u64 = 50_000;
/// How many times one blocking join runs its target inline before it hands the worker
/// off instead: a target that keeps yielding must not hold the worker's other tasks.
pub(crate) const MAX_INLINE_POLLS_PER_JOIN: u32 = 16;
/// How often a join that could not hand its worker off (no thread could be started)
/// looks at the shutdown flag while it waits.
const HAND_OFF_FAILED_RECHECK: Duration = Duration::from_millis(10);

/// Everything the workers share: one per runtime, behind an `Arc` that every task holds.
pub(crate) struct Shared {
    pub(crate) workers: Box<[Worker]>,
    /// The reactor and the timer wheel.
    pub(crate) driver: Driver,
    /// The `spawn_blocking` threads.
    pub(crate) blocking: Arc<Pool>,
    /// The event ring, when `Builder::event_ring` turned it on.
    pub(crate) recorder: Option<Recorder>,
    /// The clock that times polls, when this runtime times them: for the poll-time
    /// histogram (`Builder::poll_time_histogram`, on by default) or for the event ring,
    /// whose records need the times anyway (both share the one reading per poll).
    pub(crate) clock: Option<Clock>,
    pub(crate) inject: Inject<Arc<Shared>>,
    pub(crate) idle: Idle,
    pub(crate) owned: OwnedTasks,
    pub(crate) shutdown: AtomicBool,
    pub(crate) remote: RemoteCounters,
    /// How many workers have left their loop for good, and whether the last of them
    /// finishes the shutdown (see [`Exits`]).
    pub(crate) exited: Mutex<Exits>,
    pub(crate) exited_cv: Condvar,
    /// The workers' stack size, which bounds how deep a blocking join helps (see
    /// "Blocking join").
    stack_size: usize,
    /// When the runtime was built (`Telemetry::uptime`).
    pub(crate) started: Instant,
    /// The Tokio bridge (`volt::bridge`): configured by `Builder::build`, started on
    /// first use, shut down by `Runtime::shutdown`.
    #[cfg(feature = "tokio-bridge")]
    pub(crate) bridge: crate::bridge::Bridge,
}

/// One worker: the parts other threads touch, plus owner-only `core`.
#[repr(align(128))]
pub(crate) struct Worker {
    pub(crate) index: usize,
    pub(crate) queue: WorkStealQueue<Arc<Shared>>,
    /// The LIFO slot: filled by the owner; emptied by the owner, or by another worker
    /// when the owner is stuck in a poll (see "Stealing from the LIFO slot").
    pub(crate) lifo: LifoSlot<Header>,
    pub(crate) park: ParkState,
    /// Set while the owner parks; `schedule_local` then sends tasks to the global queue.
    pub(crate) transitioning_to_park: AtomicBool,
    pub(crate) counters: WorkerCounters,
    /// Recycled task cells (`cellcache.rs`); in its own allocation, away from the hot fields.
    pub(crate) cache: Box<CellCache>,
    core: Core,
}

/// State only the owning worker thread touches (see the `Sync` impl below).
struct Core {
    /// Polls so far; the periodic global check runs when `tick % interval == 0`.
    tick: Cell<u32>,
    lifo_polls: Cell<u32>,
    is_searching: Cell<bool>,
    rng: Cell<FastRand>,
    /// `clamp(TARGET / avg, 8, 255)` from the EWMA.
    ewma_interval: Cell<u32>,
    /// The backlog cap (see the module doc); 255 when the global queue is drained.
    backlog_interval: Cell<u32>,
    /// The worker's last clock reading (when the runtime times polls): the next poll's
    /// start, and the time of records made inside it (see `telemetry::events`).
    last_ts: Cell<u64>,
    /// The clock's nanoseconds per tick (32.32 fixed point), for the histograms: a copy
    /// of `Shared::clock`'s, because `poll_outcome` has the worker but no `&Shared`.
    ns_per_tick_fp: u64,
    /// This worker's event ring (null when the ring is off): one load in `poll_start`
    /// instead of finding it through `Shared::recorder` on every poll. `run_worker` sets
    /// it from the `Arc`'d `Shared`, which never moves again. (Taken before `Shared` was
    /// built, the pointer would be invalidated by the move of the recorder's `Box` into
    /// it, as Miri's Stacked Borrows check reports.)
    ring: Cell<*const EventRing>,
    /// A task this worker, about to park, saw in another worker's LIFO slot.
    lifo_watch: Cell<Option<LifoWatch>>,
    /// `tick` when this worker last polled the reactor (see `maintain_driver`).
    last_io_poll: Cell<u32>,
    /// Set while this worker delivers the driver's wakes: `schedule_local` then leaves
    /// waking other workers to `dispatch_driver`, which decides once for the whole batch.
    dispatching: Cell<bool>,
    /// The last poll ended in a requeue of its own task (`yield_now`, a self-wake): the
    /// next `find_work` looks at the global queue first (see "Yielded tasks and the
    /// global queue").
    yielded: Cell<bool>,
    // The EWMA itself and the interval in use live in the worker's gauges
    // (`WorkerCounters`), which the owner reads and writes like these cells.
}

// SAFETY: `Core` is only accessed from the worker thread that owns it (through
// `current_worker`, which checks the thread-local context), including the final drain,
// which that thread does itself as it exits; never by two threads at once.
unsafe impl Sync for Core {}
// SAFETY: the one non-`Send` field is `ring`, a pointer into the same `Shared` that holds
// this `Core` (or null); moving the `Core` to another thread changes nothing about what it
// points to.
unsafe impl Send for Core {}

impl Core {
    fn new(index: usize, ns_per_tick_fp: u64) -> Core {
        Core {
            tick: Cell::new(0),
            lifo_polls: Cell::new(0),
            is_searching: Cell::new(false),
            rng: Cell::new(FastRand::new(FastRand::seed_for(index))),
            ewma_interval: Cell::new(interval_for(INITIAL_AVG_TASK_NS)),
            backlog_interval: Cell::new(MAX_GLOBAL_QUEUE_INTERVAL),
            last_ts: Cell::new(0),
            ns_per_tick_fp,
            ring: Cell::new(ptr::null()),
            lifo_watch: Cell::new(None),
            last_io_poll: Cell::new(0),
            dispatching: Cell::new(false),
            yielded: Cell::new(false),
        }
    }
}

/// What a worker about to park saw in another worker's LIFO slot.
#[derive(Clone, Copy)]
struct LifoWatch {
    victim: usize,
    /// The task's address: only compared, never followed.
    task: usize,
    /// The victim's poll count then; the same count later means the same poll.
    polls: u64,
    since: Instant,
}

/// What `check_stuck_lifo` found.
enum LifoCheck {
    /// A task taken from a stuck worker's slot.
    Stole(Notified<Arc<Shared>>),
    /// A task is waiting in another worker's slot: look again after this long.
    Watch(Duration),
    Nothing,
}

/// `clamp(TARGET / avg, 8, 255)`.
fn interval_for(avg_task_ns: u64) -> u32 {
    clamp_interval(TARGET_GLOBAL_QUEUE_LATENCY_NS / avg_task_ns.max(1))
}

/// The backlog cap: `clamp(TARGET * batch * workers / (backlog * avg), 8, 255)`.
fn backlog_interval_for(avg_task_ns: u64, batch: usize, workers: usize, backlog: usize) -> u32 {
    let per_check = (batch * workers) as u64;
    clamp_interval(
        TARGET_GLOBAL_QUEUE_LATENCY_NS.saturating_mul(per_check)
            / (backlog as u64).saturating_mul(avg_task_ns.max(1)).max(1),
    )
}

fn clamp_interval(v: u64) -> u32 {
    v.clamp(MIN_GLOBAL_QUEUE_INTERVAL as u64, MAX_GLOBAL_QUEUE_INTERVAL as u64) as u32
}

/// The thread-local context: which runtime (and which worker of it) this thread serves.
#[derive(Clone, Copy)]
struct Ctx {
    shared: *const Shared,
    /// This thread's worker of `shared` (null: not a worker). A pointer, not an index:
    /// `current_worker` runs several times per poll, and this saves it a bounds check
    /// and a multiply each time.
    worker: *const Worker,
}

const NO_WORKER: *const Worker = ptr::null();

thread_local! {
    static CONTEXT: Cell<Ctx> = const { Cell::new(Ctx { shared: ptr::null(), worker: NO_WORKER }) };
}

/// Restores the previous context on drop.
pub(crate) struct EnterGuard(Ctx);

impl Drop for EnterGuard {
    fn drop(&mut self) {
        CONTEXT.with(|c| c.set(self.0));
    }
}

/// Make `shared` the current runtime of this (non-worker) thread, for `volt::spawn`.
pub(crate) fn enter(shared: &Arc<Shared>) -> EnterGuard {
    let prev = CONTEXT.with(|c| c.replace(Ctx { shared: Arc::as_ptr(shared), worker: NO_WORKER }));
    EnterGuard(prev)
}

/// The runtime this thread is in, if any (borrowed: the caller must not outlive it).
fn current_shared() -> Option<ManuallyDrop<Arc<Shared>>> {
    let ctx = CONTEXT.with(|c| c.get());
    if ctx.shared.is_null() {
        return None;
    }
    // SAFETY: the pointer came from `Arc::as_ptr` of an `Arc` that the worker thread (or
    // the `block_on` caller) keeps alive while the context is set; `ManuallyDrop` keeps
    // this borrowed `Arc` from releasing a count it never took.
    Some(ManuallyDrop::new(unsafe { Arc::from_raw(ctx.shared) }))
}

/// Whether this thread owns worker `w` now (a blocking join may have handed it off).
#[inline(always)]
fn owns(w: &Worker) -> bool {
    CONTEXT.with(|c| ptr::eq(c.get().worker, w))
}

thread_local! {
    /// How far from its start this thread's stack may grow while a blocking join runs
    /// its target inline: half the stack, the other half being left for the target's
    /// own frames and the rest of the poll (see "Blocking join"). 0: no helping here.
    static HELP_STACK: Cell<HelpStack> = const { Cell::new(HelpStack { base: 0, budget: 0 }) };
}

#[derive(Clone, Copy)]
struct HelpStack {
    /// An address near the bottom of the worker's frames.
    base: usize,
    budget: usize,
}

/// The address of a local: where this thread's stack is now, near enough.
#[inline(always)]
fn stack_position() -> usize {
    let marker = 0u8;
    std::hint::black_box(&marker) as *const u8 as usize
}

/// Sets this thread's help budget for the life of a worker loop, and restores it after.
struct HelpStackGuard(HelpStack);

impl HelpStackGuard {
    fn start(stack_size: usize) -> HelpStackGuard {
        let new = HelpStack { base: stack_position(), budget: stack_size / 2 };
        HelpStackGuard(HELP_STACK.with(|h| h.replace(new)))
    }
}

impl Drop for HelpStackGuard {
    fn drop(&mut self) {
        HELP_STACK.with(|h| h.set(self.0));
    }
}

/// Whether a blocking join may still run its target on this thread's stack.
fn help_has_stack_room() -> bool {
    let h = HELP_STACK.with(|h| h.get());
    // `abs_diff`: right whichever way the stack grows.
    h.budget > 0 && stack_position().abs_diff(h.base) < h.budget
}

/// Whether this thread is a worker of any Volt runtime.
pub(crate) fn on_worker_thread() -> bool {
    CONTEXT.with(|c| !c.get().worker.is_null())
}

/// `volt::spawn`: spawn onto the runtime this thread is in.
pub(crate) fn spawn_current<F>(future: F) -> Option<JoinHandle<F::Output>>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let shared = current_shared()?;
    Some(Shared::spawn(&shared, future))
}

/// A clone of the current runtime's `Arc`, if any.
pub(crate) fn current_handle() -> Option<Arc<Shared>> {
    current_shared().map(|s| Arc::clone(&s))
}

impl Shared {
    pub(crate) fn new(
        num_workers: usize,
        blocking: PoolConfig,
        event_ring: Option<usize>,
        poll_time_histogram: bool,
    ) -> std::io::Result<Arc<Shared>> {
        let driver = Driver::new()?;
        let clock = (poll_time_histogram || event_ring.is_some()).then(Clock::new);
        let ns_per_tick_fp = clock.map_or(1 << 32, |c| c.ns_per_tick_fp());
        let stack_size = blocking.stack_size;
        Ok(Arc::new_cyclic(|weak| Shared {
            started: Instant::now(),
            driver,
            recorder: event_ring.map(|cap| Recorder::new(num_workers, cap, clock.expect("the ring has a clock"))),
            clock,
            blocking: Arc::new(Pool::new(blocking, weak.clone())),
            workers: (0..num_workers)
                .map(|index| Worker {
                    index,
                    queue: WorkStealQueue::new(),
                    lifo: LifoSlot::new(),
                    park: ParkState::new(),
                    transitioning_to_park: AtomicBool::new(false),
                    counters: WorkerCounters::new(interval_for(INITIAL_AVG_TASK_NS), INITIAL_AVG_TASK_NS),
                    cache: Box::new(CellCache::new()),
                    core: Core::new(index, ns_per_tick_fp),
                })
                .collect(),
            inject: Inject::new(),
            idle: Idle::new(num_workers),
            owned: OwnedTasks::new(num_workers * 4),
            shutdown: AtomicBool::new(false),
            remote: RemoteCounters::default(),
            exited: Mutex::new(Exits::default()),
            exited_cv: Condvar::new(),
            stack_size,
            #[cfg(feature = "tokio-bridge")]
            bridge: Default::default(),
        }))
    }

    /// Wake worker `i` whether it sleeps on its futex or in the reactor.
    pub(crate) fn unpark_worker(&self, i: usize) {
        self.workers[i].park.unpark(|| self.driver.wake_reactor());
    }

    /// A fresh clock reading; on a worker it also becomes the worker's cached one.
    #[inline(always)]
    fn ts_fresh(&self, clock: &Clock, w: Option<&Worker>) -> u64 {
        let t = clock.raw();
        if let Some(w) = w {
            w.core.last_ts.set(t);
        }
        t
    }

    /// The worker's cached reading (events inside a poll carry the poll's start time;
    /// their order is their position in the ring), or a fresh one off the workers.
    #[inline(always)]
    fn ts_cached(&self, rec: &Recorder, w: Option<&Worker>) -> u64 {
        match w {
            Some(w) => w.core.last_ts.get(),
            None => rec.clock().raw(),
        }
    }

    /// Record an event (cached timestamp on a worker) if the ring is on.
    #[inline(always)]
    pub(crate) fn record(&self, kind: EventKind, task_id: u64, arg: u64) {
        if self.recorder.is_some() {
            self.record_on(self.current_worker(), kind, task_id, arg);
        }
    }

    /// `record` for a caller that already looked up its worker (`None`: not a worker).
    #[inline(always)]
    fn record_on(&self, w: Option<&Worker>, kind: EventKind, task_id: u64, arg: u64) {
        if let Some(r) = &self.recorder {
            r.record_at(w.map(|w| w.index), kind, task_id, arg, self.ts_cached(r, w));
        }
    }

    /// Record an event that happens between polls (park, unpark, steal) with a fresh
    /// timestamp. With polls timed but no ring, just take the fresh reading, so the time
    /// between polls (a sleep, a search) is not counted in the next poll.
    #[inline(always)]
    fn record_fresh(&self, kind: EventKind, task_id: u64, arg: u64) {
        let Some(clock) = &self.clock else { return };
        let w = self.current_worker();
        let t = self.ts_fresh(clock, w);
        if let Some(r) = &self.recorder {
            r.record_at(w.map(|w| w.index), kind, task_id, arg, t);
        }
    }

    /// A woken task starts waiting in a queue: note when (schedule latency, the task's
    /// scheduled time) and record the event.
    #[inline(always)]
    fn record_queued(&self, w: Option<&Worker>, task: NonNull<Header>, target: u64) {
        if let Some(r) = &self.recorder {
            let now = self.ts_cached(r, w);
            if let Some(st) = crate::task::raw::stats(task) {
                st.scheduled_at.store(now.max(1), Relaxed);
                if r.changes.watching() {
                    r.changes.mark(task, &st.queued, w.map(|w| w.index));
                }
            }
            // SAFETY: the caller holds a reference to the task.
            let id = unsafe { task.as_ref() }.id;
            r.record_at(w.map(|w| w.index), EventKind::Schedule, id, target, now);
        }
    }

    /// Note in the live-task change log that `task` changed (only while a reader
    /// watches: otherwise one relaxed load). The caller holds a reference to the task.
    #[inline(always)]
    fn mark_changed(&self, r: &Recorder, task: NonNull<Header>, w: Option<&Worker>) {
        if r.changes.watching() {
            if let Some(st) = crate::task::raw::stats(task) {
                r.changes.mark(task, &st.queued, w.map(|w| w.index));
            }
        }
    }

    /// Count a timer armed (on a worker: its own counter).
    pub(crate) fn count_timer_armed(&self) {
        match self.current_worker() {
            Some(w) => w.counters.timers_armed.inc(),
            None => {
                self.remote.timers_armed.fetch_add(1, Relaxed);
            }
        }
    }

    /// Count a timer dropped before it fired.
    pub(crate) fn count_timer_cancelled(&self) {
        match self.current_worker() {
            Some(w) => w.counters.timers_cancelled.inc(),
            None => {
                self.remote.timers_cancelled.fetch_add(1, Relaxed);
            }
        }
    }

    pub(crate) fn is_shutdown(&self) -> bool {
        self.shutdown.load(Relaxed)
    }

    /// The worker this thread is, if it is one of ours.
    #[inline]
    /// Like `current_worker`, but also safe while the thread's locals are being torn down
    /// (a task freed from a thread-local destructor).
    fn current_worker_index(&self) -> Option<usize> {
        CONTEXT
            .try_with(|c| c.get())
            .ok()
            .filter(|ctx| ptr::eq(ctx.shared, self) && !ctx.worker.is_null())
            // SAFETY: set by `run_worker` to one of `self.workers`, alive while `self` is.
            .map(|ctx| unsafe { &*ctx.worker }.index)
    }

    #[inline(always)]
    fn current_worker(&self) -> Option<&Worker> {
        let ctx = CONTEXT.with(|c| c.get());
        if ptr::eq(ctx.shared, self) && !ctx.worker.is_null() {
            // SAFETY: `run_worker` set it to one of `self.workers` (same `shared`), and
            // `self` is alive while we hold `&self`.
            Some(unsafe { &*ctx.worker })
        } else {
            None
        }
    }

    /// Spawn: allocate, link into the owned list, schedule (LIFO slot from a worker of
    /// this runtime, the global queue otherwise).
    pub(crate) fn spawn<F>(this: &Arc<Shared>, future: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        Shared::spawn_named(this, future, None)
    }

    /// `spawn` with an optional name (kept only when recording events).
    pub(crate) fn spawn_named<F>(this: &Arc<Shared>, future: F, name: Option<String>) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let worker = this.current_worker();
        // One clock reading for the record and the queued time (off a worker, each
        // reading is a fresh one).
        let now = this.recorder.as_ref().map_or(0, |r| this.ts_cached(r, worker));
        let stats = this.recorder.as_ref().map(|_| TaskStats {
            name: name.map(Into::into),
            scheduled_at: AtomicU64::new(now.max(1)),
            ..Default::default()
        });
        let (task, notified, join) = new_task(future, Arc::clone(this), next_task_id(), stats);
        if let Some(r) = &this.recorder {
            // One record for the spawn and where it is queued (the reader expands it).
            let target = match worker {
                Some(w) if !w.transitioning_to_park.load(Relaxed) => SCHEDULE_LIFO,
                _ => SCHEDULE_GLOBAL,
            };
            let arg = worker.is_none() as u64 | (target << 1);
            r.record_at(worker.map(|w| w.index), EventKind::Spawn, task.header().id, arg, now);
        }
        #[cfg(feature = "tracing")]
        tracing::trace_span!(target: "volt::task", "spawn", task.id = task.header().id, remote = worker.is_none())
            .in_scope(|| tracing::trace!(target: "volt::task", "spawned"));
        match worker {
            Some(w) => w.counters.tasks_spawned.inc(),
            None => {
                this.remote.tasks_spawned.fetch_add(1, Relaxed);
            }
        }
        if this.is_shutdown() || !this.owned.bind(task.raw()) {
            // Shut down (or shutting down): the task is cancelled before it ever runs.
            task.shutdown();
            drop(notified);
            drop(task);
            return join;
        }
        if let Some(r) = &this.recorder {
            this.mark_changed(r, task.raw(), worker);
        }
        // The owned list keeps this reference until the task completes.
        let _ = task.into_raw();
        match worker {
            Some(w) => this.schedule_local(w, notified, false),
            None => this.schedule_remote(notified),
        }
        join
    }

    fn schedule_task(&self, task: Notified<Arc<Shared>>, is_yield: bool) {
        let worker = self.current_worker();
        // A requeue after a poll (`is_yield`) is that poll's to record: its `PollEnd`
        // says so, and `poll_end` noted the time. A wake is recorded here.
        if self.recorder.is_some() && !is_yield {
            let target = match worker {
                Some(w) if !w.transitioning_to_park.load(Relaxed) => SCHEDULE_LIFO,
                _ => SCHEDULE_GLOBAL,
            };
            self.record_queued(worker, task.0.raw(), target);
        }
        match worker {
            Some(w) => self.schedule_local(w, task, is_yield),
            None => self.schedule_remote(task),
        }
    }

    /// Queue a task on the owning worker's thread: the LIFO slot, or the ring for a yield.
    fn schedule_local(&self, w: &Worker, task: Notified<Arc<Shared>>, is_yield: bool) {
        if w.transitioning_to_park.load(Relaxed) {
            return self.schedule_remote(task);
        }
        if is_yield {
            w.core.yielded.set(true);
            self.push_local_ring(w, task);
        } else {
            let Some(prev) = w.lifo.push(task.into_raw()) else {
                // Only the slot changed: no worker is woken for it (see "Scheduling from
                // a worker"), unless nobody watches the slots (see "Parking").
                if self.idle.watch_missing() && !w.core.dispatching.get() {
                    self.notify_parked();
                }
                return;
            };
            // SAFETY: the slot held a queue reference, now ours.
            self.push_local_ring(w, unsafe { Notified::from_raw(prev) });
        }
        if !w.core.is_searching.get() && !w.core.dispatching.get() {
            self.notify_parked();
        }
    }

    fn push_local_ring(&self, w: &Worker, task: Notified<Arc<Shared>>) {
        match w.queue.push_back_or_overflow(task, &self.inject) {
            Pushed::Local => {}
            Pushed::Overflowed => {
                #[cfg(feature = "tracing")]
                tracing::debug!(target: "volt::scheduler", worker = w.index, moved = crate::scheduler::queue::HALF + 1, "overflow");
                w.counters.overflows.inc();
                self.record(EventKind::Overflow, 0, crate::scheduler::queue::HALF as u64 + 1);
            }
            Pushed::ToGlobal => {
                #[cfg(feature = "tracing")]
                tracing::debug!(target: "volt::scheduler", worker = w.index, moved = 1, "overflow");
                w.counters.overflows.inc();
                self.record(EventKind::Overflow, 0, 1);
            }
        }
    }

    fn schedule_remote(&self, task: Notified<Arc<Shared>>) {
        if let Err(rejected) = self.inject.push(task) {
            // Shutting down: the owned-task list cancels the task; drop the entry.
            drop(rejected);
            return;
        }
        self.notify_parked();
    }

    pub(crate) fn notify_parked(&self) {
        self.idle.notify_parked(|i| self.unpark_worker(i));
    }

    /// Run worker `index` on this thread until shutdown, or until a blocking join on this
    /// thread hands the worker to another thread (see "Blocking join"). Worker threads
    /// start here, and so does each replacement a hand-off starts on the blocking pool.
    pub(crate) fn run_worker(this: Arc<Shared>, index: usize) {
        /// Counts the exit of the worker's owner (on unwinding too, so `shutdown` never
        /// waits for a worker that is gone); not for a thread that handed the worker off.
        struct Exit<'a> {
            shared: &'a Arc<Shared>,
            owner: bool,
        }
        impl Drop for Exit<'_> {
            fn drop(&mut self) {
                if self.owner {
                    Shared::worker_exited(self.shared);
                }
            }
        }
        let mut exit = Exit { shared: &this, owner: true };
        let w = &this.workers[index];
        let prev = CONTEXT.with(|c| c.replace(Ctx { shared: Arc::as_ptr(&this), worker: w }));
        let _ctx = EnterGuard(prev);
        let _help = HelpStackGuard::start(this.stack_size);
        w.counters.set_state(WorkerState::Running);
        w.core.ring.set(this.recorder.as_ref().map_or(ptr::null(), |r| r.ring(index)));
        if let Some(c) = &this.clock {
            this.ts_fresh(c, Some(w));
        }
        while !this.is_shutdown() {
            match this.run_tick(w) {
                Some(0) => this.park(w),
                Some(_) => {}
                None => {
                    // Handed off: another thread runs this worker now; this one is done.
                    exit.owner = false;
                    return;
                }
            }
        }
        this.drain_local(w);
        if let Some(r) = &this.recorder {
            // The console stopped before the workers were told to exit, so no reader
            // drains this ring any more.
            r.changes.release_ring(index);
        }
    }

    /// The owner of a worker left its loop on shutdown. The last one to leave finishes a
    /// shutdown that was started on one of the runtime's own threads.
    fn worker_exited(this: &Arc<Shared>) {
        let finish = this.exited.lock().unwrap_or_else(|e| e.into_inner()).worker_left(this.workers.len());
        this.exited_cv.notify_all();
        if finish {
            Shared::finish_shutdown_here(this);
        }
    }

    /// The rest of a shutdown, on a thread of the runtime (which must not wait for
    /// itself) once every worker has left its loop: cancel what is left, fail pending
    /// I/O, and stop the blocking pool and the bridge without waiting for their threads,
    /// which exit on their own.
    pub(crate) fn finish_shutdown_here(this: &Arc<Shared>) {
        Shared::close_and_cancel_all(this);
        this.driver.shutdown();
        this.blocking.shutdown(Some(Duration::ZERO));
        #[cfg(feature = "tokio-bridge")]
        this.bridge.shutdown(None);
    }

    /// One budget tick. Returns how many tasks ran, or `None` when a task's blocking join
    /// handed the worker to another thread (then nothing of `w` may be touched here again).
    fn run_tick(&self, w: &Worker) -> Option<u32> {
        let core = &w.core;
        let start = Instant::now();
        self.maintain_driver(w, start);
        core.lifo_polls.set(0);
        let mut ran = 0;
        while ran < BUDGET_PER_TICK && !self.is_shutdown() {
            if ran > 0 && self.io_poll_due(w) {
                // A long tick polls the reactor on schedule too, not only at its start.
                self.maintain_driver(w, Instant::now());
            }
            let Some(task) = self.find_work(w) else { break };
            self.run_task(w, task);
            if !owns(w) {
                return None;
            }
            ran += 1;
        }
        if ran > 0 {
            self.update_adaptive_interval(w, ran, start);
        }
        if ran == BUDGET_PER_TICK {
            w.counters.budget_yields.inc();
        }
        Some(ran)
    }

    fn find_work(&self, w: &Worker) -> Option<Notified<Arc<Shared>>> {
        let core = &w.core;
        // Any source but the LIFO slot ends a run of consecutive LIFO polls.
        let t = self.find_work_inner(w);
        if !matches!(t, Some((_, true))) {
            core.lifo_polls.set(0);
        }
        t.map(|(t, _)| t)
    }

    /// `find_work`, also saying whether the task came from the LIFO slot.
    fn find_work_inner(&self, w: &Worker) -> Option<(Notified<Arc<Shared>>, bool)> {
        let core = &w.core;
        // 1. The periodic global check, when due (see the module doc for why it is here),
        //    or after a yield while the global queue holds work.
        let after_yield = core.yielded.replace(false) && !self.inject.is_empty();
        if after_yield || core.tick.get() % w.counters.global_queue_interval.load(Relaxed) == 0 {
            if let Some(t) = self.fetch_global_batch(w) {
                return Some((t, false));
            }
        }
        // 2. The LIFO slot, at most MAX_LIFO_POLLS_PER_TICK times per tick.
        if let Some(t) = w.lifo.pop() {
            // SAFETY: the slot held a queue reference, now ours.
            let t = unsafe { Notified::from_raw(t) };
            if core.lifo_polls.get() < MAX_LIFO_POLLS_PER_TICK {
                core.lifo_polls.set(core.lifo_polls.get() + 1);
                w.counters.lifo_hits.inc();
                return Some((t, true));
            }
            self.push_local_ring(w, t);
        }
        // 3. The local ring.
        if let Some(t) = w.queue.pop() {
            return Some((t, false));
        }
        // 4. Steal.
        if let Some(t) = self.steal_work(w) {
            return Some((t, false));
        }
        // 5. The final global check.
        self.fetch_global_batch(w).map(|t| (t, false))
    }

    /// Take `clamp(len / workers, 4, 64)` tasks (fewer if the ring lacks room): one to run,
    /// the rest into the ring.
    fn fetch_global_batch(&self, w: &Worker) -> Option<Notified<Arc<Shared>>> {
        let len = self.inject.len();
        if len == 0 {
            if w.core.backlog_interval.get() != MAX_GLOBAL_QUEUE_INTERVAL {
                w.core.backlog_interval.set(MAX_GLOBAL_QUEUE_INTERVAL);
                self.publish_interval(w);
            }
            return None;
        }
        // At most what the ring has room for, besides the task run now: the periodic check
        // can find the ring part full, and an overflow would send half of it straight back
        // to the global queue. (Stealers only take from the ring, so the room only grows.)
        let room = (crate::scheduler::queue::CAPACITY - w.queue.len()) as usize + 1;
        let n = (len / self.workers.len()).clamp(MIN_GLOBAL_BATCH, MAX_GLOBAL_BATCH).min(len).min(room);
        let backlog = len - n;
        let cap = if backlog == 0 {
            MAX_GLOBAL_QUEUE_INTERVAL
        } else {
            backlog_interval_for(w.counters.ewma_task_ns.load(Relaxed), n, self.workers.len(), backlog)
        };
        if cap != w.core.backlog_interval.get() {
            w.core.backlog_interval.set(cap);
            self.publish_interval(w);
        }
        let mut first = None;
        // `pop_n` calls this outside the global queue's lock, so an overflow of the ring
        // (which pushes to the global queue) can't deadlock.
        let got = self.inject.pop_n(n, |t| match first {
            None => first = Some(t),
            Some(_) => self.push_local_ring(w, t),
        });
        if got > 0 {
            w.counters.global_batch_fetches.inc();
            // These tasks were queued by other threads, maybe after this worker's last
            // clock reading, which its next poll's start would carry: read the clock now,
            // so that start never comes before the spawn or wake that queued the task.
            if let Some(r) = &self.recorder {
                self.ts_fresh(r.clock(), Some(w));
            }
        }
        // The rest of the batch is in the ring: see "Where a global batch goes".
        if got > 1 && !w.core.is_searching.get() {
            self.notify_parked();
        }
        first
    }

    fn steal_work(&self, w: &Worker) -> Option<Notified<Arc<Shared>>> {
        let core = &w.core;
        if !core.is_searching.get() {
            if !self.idle.transition_worker_to_searching() {
                return None;
            }
            core.is_searching.set(true);
            w.counters.set_state(WorkerState::Searching);
        }
        let n = self.workers.len();
        if n == 1 {
            return None;
        }
        let mut rng = core.rng.get();
        let start = rng.fastrand_n(n as u32) as usize;
        core.rng.set(rng);
        for i in 0..n {
            let victim = (start + i) % n;
            if victim == w.index {
                continue;
            }
            if let Some((t, count)) = self.workers[victim].queue.steal_into(&w.queue) {
                self.count_steal(w, victim, count as u64, t.header().id);
                return Some(t);
            }
        }
        None
    }

    /// A steal's counters, histogram, record and `tracing` event (`task`: the one run first).
    fn count_steal(&self, w: &Worker, victim: usize, count: u64, task: u64) {
        w.counters.steal_operations.inc();
        w.counters.tasks_stolen.add(count);
        w.counters.histograms.steal_batch.record(count);
        self.record_fresh(EventKind::Steal, task, (victim as u64) << 32 | count);
        #[cfg(feature = "tracing")]
        tracing::trace!(target: "volt::scheduler", worker = w.index, victim, count, "steal");
    }

    fn run_task(&self, w: &Worker, task: Notified<Arc<Shared>>) {
        let core = &w.core;
        if core.is_searching.get() {
            // Rule 2: the last searcher to find work wakes the next one.
            core.is_searching.set(false);
            w.counters.set_state(WorkerState::Running);
            if self.idle.transition_worker_from_searching() {
                self.notify_parked();
            }
        }
        core.tick.set(core.tick.get().wrapping_add(1));
        w.counters.tasks_polled.inc_always();
        // The poll hooks get the worker from here (`poll_start`), not from the thread-local.
        task.run_on((w as *const Worker).cast());
    }

    /// EWMA with alpha 0.1 over per-task time, so one odd tick moves the interval a
    /// little and a lasting change in task length moves it within a few dozen ticks.
    fn update_adaptive_interval(&self, w: &Worker, ran: u32, start: Instant) {
        let core = &w.core;
        let sample = start.elapsed().as_nanos() as u64 / ran as u64;
        let avg = ((sample + 9 * w.counters.ewma_task_ns.load(Relaxed)) / 10).max(1);
        core.ewma_interval.set(interval_for(avg));
        w.counters.ewma_task_ns.store(avg, Relaxed);
        self.publish_interval(w);
    }

    /// The interval in use is the smaller of the EWMA's and the backlog cap.
    fn publish_interval(&self, w: &Worker) {
        let core = &w.core;
        let interval = core.ewma_interval.get().min(core.backlog_interval.get());
        w.counters.global_queue_interval.store(interval, Relaxed);
    }

    /// Whether any queue holds work someone could take (the pre-sleep re-check).
    fn any_work(&self) -> bool {
        !self.inject.is_empty() || self.workers.iter().any(|w| w.queue.is_stealable())
    }

    /// The non-blocking driver pass, run from the loop so timers and I/O make progress
    /// while every worker stays busy:
    /// at the start of every tick for due timers, and whenever [`IO_POLL_INTERVAL`] polls
    /// have run since this worker last polled the reactor, at a tick's start or within it.
    /// An atomic load and a compare when there is nothing to do.
    fn maintain_driver(&self, w: &Worker, now: Instant) {
        let core = &w.core;
        let io_due = self.io_poll_due(w);
        if !io_due && !self.driver.time.is_due(now) {
            return;
        }
        let Some(mut d) = self.driver.try_lock() else { return };
        if io_due {
            core.last_io_poll.set(core.tick.get());
            self.driver.poll_io(&mut d, Some(Duration::ZERO));
        }
        self.dispatch_driver(w, &mut d, now);
        drop(d);
        // A system call and timer work: not part of the next poll's time.
        if let Some(c) = &self.clock {
            self.ts_fresh(c, Some(w));
        }
    }

    /// Whether this worker has run `IO_POLL_INTERVAL` polls since it last polled the
    /// reactor, and anything is registered to poll for.
    #[inline]
    fn io_poll_due(&self, w: &Worker) -> bool {
        w.core.tick.get().wrapping_sub(w.core.last_io_poll.get()) >= IO_POLL_INTERVAL && self.driver.has_io_sources()
    }

    /// Deliver what the driver holds (polled events, due timers) into this worker's own
    /// queues, then wake one parked worker if more than one task is queued here: this
    /// worker runs the first itself, and the rest must be visible to a thief that is
    /// awake, in case that first one polls for long. One decision for the batch instead
    /// of one per woken task (see "Waking others after a dispatch").
    fn dispatch_driver(&self, w: &Worker, d: &mut crate::io::DriverCore, now: Instant) {
        w.core.dispatching.set(true);
        self.driver.dispatch(d, now, |c| self.count_dispatched(w, c));
        w.core.dispatching.set(false);
        let queued_here = w.lifo.peek().is_some() as u32 + w.queue.len();
        self.idle.notify_after_batch(queued_here, w.core.is_searching.get(), |i| self.unpark_worker(i));
    }

    fn count_dispatched(&self, w: &Worker, d: Dispatched) {
        if d.io_events > 0 {
            w.counters.io_events.add(d.io_events);
        }
        if d.timers_fired > 0 {
            w.counters.timers_fired.add(d.timers_fired);
        }
    }

    /// Before parking: take a task another worker has left in its LIFO slot while that
    /// worker stayed in one poll for [`LIFO_STEAL_AFTER`], or note such a task to look at
    /// again. See "Stealing from the LIFO slot".
    fn check_stuck_lifo(&self, w: &Worker) -> LifoCheck {
        let core = &w.core;
        if let Some(watch) = core.lifo_watch.take() {
            let v = &self.workers[watch.victim];
            let same = v.lifo.peek().filter(|p| p.as_ptr() as usize == watch.task);
            if let Some(task) = same.filter(|_| v.counters.tasks_polled.get() == watch.polls) {
                let waited = watch.since.elapsed();
                if waited < LIFO_STEAL_AFTER {
                    core.lifo_watch.set(Some(watch));
                    return LifoCheck::Watch(LIFO_STEAL_AFTER - waited);
                }
                if let Some(t) = v.lifo.steal(task) {
                    // SAFETY: the slot held a queue reference, now ours.
                    let t = unsafe { Notified::<Arc<Shared>>::from_raw(t) };
                    self.count_steal(w, watch.victim, 1, t.header().id);
                    return LifoCheck::Stole(t);
                }
            }
        }
        let n = self.workers.len();
        for i in 1..n {
            let victim = (w.index + i) % n;
            let v = &self.workers[victim];
            if let Some(task) = v.lifo.peek() {
                let polls = v.counters.tasks_polled.get();
                let since = Instant::now();
                core.lifo_watch.set(Some(LifoWatch { victim, task: task.as_ptr() as usize, polls, since }));
                return LifoCheck::Watch(LIFO_STEAL_AFTER);
            }
        }
        LifoCheck::Nothing
    }

    fn park(&self, w: &Worker) {
        let core = &w.core;
        let watch = match self.check_stuck_lifo(w) {
            LifoCheck::Stole(t) => {
                // Run it next, as the thief of a ring's tasks would.
                self.push_local_ring(w, t);
                return;
            }
            LifoCheck::Watch(d) => Some(d),
            LifoCheck::Nothing => None,
        };
        w.transitioning_to_park.store(true, Relaxed);
        let was_searching = core.is_searching.replace(false);
        let last_searcher = self.idle.transition_worker_to_parked(w.index, was_searching);
        w.counters.set_state(WorkerState::Parked);
        let recheck = last_searcher || self.idle.num_searching_seqcst() == 0;
        let mut driver = None;
        if !((recheck && self.any_work()) || self.is_shutdown()) {
            let t0 = Instant::now();
            // Park in the reactor if nobody else is; on the futex otherwise.
            driver = self.driver.try_lock();
            // The watch (rule 7 in `idle`): a timeout only for the one watcher while some
            // worker is out, or to look again at a task seen in a LIFO slot.
            let watching = !self.idle.all_parked() && self.idle.claim_watch(w.index);
            let cap = match watch {
                Some(d) => Some(d.min(PARK_TIMEOUT)),
                None if watching => Some(PARK_TIMEOUT),
                None => None,
            };
            self.record_fresh(EventKind::Park, 0, driver.is_some() as u64);
            #[cfg(feature = "tracing")]
            tracing::trace!(target: "volt::scheduler", worker = w.index, in_reactor = driver.is_some(), watching, "park");
            let woke = match driver.as_mut() {
                Some(d) => {
                    self.idle.set_in_reactor(w.index, true);
                    // The next timer's deadline, or the watch's timeout if sooner.
                    let timeout = match (self.driver.time.begin_reactor_sleep(t0), cap) {
                        (Some(t), Some(c)) => Some(t.min(c)),
                        (t, c) => t.or(c),
                    };
                    let woke = w.park.park_in_driver(|| self.driver.poll_io(d, timeout));
                    self.driver.time.end_reactor_sleep();
                    self.idle.set_in_reactor(w.index, false);
                    core.last_io_poll.set(core.tick.get());
                    woke
                }
                None => w.park.park(cap),
            };
            if watching {
                // Claimed again at the next park if a worker is still out; meanwhile
                // this worker looks at every LIFO slot before it parks.
                self.idle.release_watch(w.index);
            }
            self.record_fresh(EventKind::Unpark, 0, (woke == super::park::Unparked::Notified) as u64);
            #[cfg(feature = "tracing")]
            tracing::trace!(target: "volt::scheduler", worker = w.index, notified = (woke == super::park::Unparked::Notified), "unpark");
            let parked = t0.elapsed().as_nanos() as u64;
            w.counters.times_parked.inc();
            w.counters.parked_ns.add(parked);
            w.counters.histograms.park_duration.record(parked);
        }
        w.transitioning_to_park.store(false, Relaxed);
        if self.idle.unpark_self(w.index) {
            w.counters.set_state(WorkerState::Running);
        } else {
            // A producer claimed us and counted us as a searcher.
            core.is_searching.set(true);
            w.counters.set_state(WorkerState::Searching);
        }
        if let Some(mut d) = driver {
            // Out of the parked state: the wakes land in our own queues.
            self.dispatch_driver(w, &mut d, Instant::now());
        }
    }

    /// `JoinHandle::join` on worker `w`'s own thread: help with the target itself while it
    /// waits in this worker's queues and the stack has room, else hand the worker to
    /// another thread and block. See "Blocking join". Returns early (with the target
    /// maybe not complete) only on shutdown.
    fn join_on_worker(
        this: &Arc<Shared>,
        w: &Worker,
        target: NonNull<Header>,
        poll_join: &mut dyn FnMut(&Waker) -> bool,
    ) {
        let mut inline_polls = 0;
        loop {
            if raw::is_complete(target) || this.is_shutdown() {
                return;
            }
            if inline_polls == MAX_INLINE_POLLS_PER_JOIN || !help_has_stack_room() {
                break;
            }
            let Some(task) = this.take_local(w, target) else { break };
            inline_polls += 1;
            this.run_task(w, task);
            if !owns(w) {
                // The target blocked in a join of its own and handed this worker off.
                return block_off_worker(poll_join, &thread_waker());
            }
        }
        let waker = thread_waker();
        if poll_join(&waker) {
            return;
        }
        match Shared::hand_off(this, w) {
            Ok(()) => block_off_worker(poll_join, &waker),
            Err(()) => {
                // No thread could take the worker: keep it and wait without running
                // anything (the ring stays open to thieves, the LIFO slot to the rescue of
                // "Stealing from the LIFO slot"), looking at the shutdown flag now and then.
                while !poll_join(&waker) && !this.is_shutdown() {
                    std::thread::park_timeout(HAND_OFF_FAILED_RECHECK);
                }
            }
        }
    }

    /// Take `target` out of this worker's LIFO slot or ring, if it is there; the other
    /// tasks keep their order.
    fn take_local(&self, w: &Worker, target: NonNull<Header>) -> Option<Notified<Arc<Shared>>> {
        if !raw::is_scheduled(target) {
            return None;
        }
        if w.lifo.peek() == Some(target) {
            // Only thieves touch a full slot, and they only empty it: this is `target`
            // or nothing.
            // SAFETY: the slot held a queue reference, now ours.
            return w.lifo.pop().map(|t| unsafe { Notified::from_raw(t) });
        }
        let n = w.queue.len() as usize;
        if n == 0 {
            return None;
        }
        // The ring has no removal from the middle: take it all and put back the rest, in
        // order (at most 256 entries, only on a join). Thieves see fewer tasks meanwhile.
        let mut rest = Vec::with_capacity(n);
        let mut found = None;
        while let Some(t) = w.queue.pop() {
            if found.is_none() && ptr::eq(t.header(), target.as_ptr()) {
                found = Some(t);
            } else {
                rest.push(t);
            }
        }
        for t in rest {
            self.push_local_ring(w, t);
        }
        found
    }

    /// Give worker `w` to a thread of the blocking pool (`Pool::spawn_now`), which runs
    /// its loop from where this thread left it, and make this thread a plain thread of
    /// the runtime. `Err` (and the worker kept) when no thread could be had.
    fn hand_off(this: &Arc<Shared>, w: &Worker) -> Result<(), ()> {
        // Still the owner: send the joining poll's start out now, so the new owner's
        // records follow it in the ring.
        let ring = w.core.ring.get();
        if !ring.is_null() {
            // SAFETY: this worker's ring (see `Core::ring`); we are its owner.
            unsafe { (*ring).flush_pending_start() };
        }
        w.core.lifo_watch.set(None);
        let prev = CONTEXT.with(|c| c.replace(Ctx { shared: Arc::as_ptr(this), worker: NO_WORKER }));
        let handoff = HandedOff { shared: Some(Arc::clone(this)), index: w.index };
        // The pool's lock orders everything this thread did to the worker before the new
        // owner's first look at it.
        match this.blocking.spawn_now(handoff, HandedOff::run) {
            Ok(()) => Ok(()),
            Err(handoff) => {
                handoff.forget();
                CONTEXT.with(|c| c.set(prev));
                Err(())
            }
        }
    }

    /// On a worker's own thread as it exits: release the queue entries it holds. The
    /// tasks themselves are cancelled through the owned-task list.
    fn drain_local(&self, w: &Worker) {
        if let Some(t) = w.lifo.pop() {
            // SAFETY: the slot held a queue reference, now ours.
            drop(unsafe { Notified::<Arc<Shared>>::from_raw(t) });
        }
        while let Some(t) = w.queue.pop() {
            drop(t);
        }
    }

    /// Shutdown, after the workers have left their loops: cancel every task that is left
    /// and release the global queue's entries.
    pub(crate) fn close_and_cancel_all(this: &Arc<Shared>) {
        let _enter = enter(this);
        this.inject.close();
        this.owned.close_and_pop(|t| {
            let task = crate::task::Task::<Arc<Shared>>::from_raw(t);
            task.shutdown();
        });
        while let Some(t) = this.inject.pop() {
            drop(t);
        }
    }
}

/// A worker handed off by a blocking join, on its way to its new thread.
struct HandedOff {
    shared: Option<Arc<Shared>>,
    index: usize,
}

impl HandedOff {
    fn run(mut self) {
        let shared = self.shared.take().expect("a hand-off runs once");
        Shared::run_worker(shared, self.index);
    }

    /// The hand-off did not happen: the closure is dropped unrun, and the worker stays.
    fn forget(mut self) {
        self.shared = None;
    }
}

impl Drop for HandedOff {
    fn drop(&mut self) {
        // Queued but never run: the pool shut down first (a `shutdown_timeout` that gave
        // up on it). Nobody owns the worker, so release its queue entries here and count
        // its exit.
        if let Some(shared) = self.shared.take() {
            shared.drain_local(&shared.workers[self.index]);
            Shared::worker_exited(&shared);
        }
    }
}

impl Schedule for Arc<Shared> {
    fn schedule(&self, task: Notified<Self>) {
        self.schedule_task(task, false);
    }

    fn yield_now(&self, task: Notified<Self>) {
        self.schedule_task(task, true);
    }

    fn release(&self, task: NonNull<Header>) -> bool {
        if let Some(r) = &self.recorder {
            // The task is complete: a reader of the task list learns it is gone.
            self.mark_changed(r, task, self.current_worker());
        }
        self.owned.remove(task)
    }

    // The three poll hooks keep clock-dependent stores away from the state transition
    // that follows a poll. That transition is a locked instruction, which on x86 waits
    // until every earlier store has reached the cache; a store whose value comes from the
    // clock (through `rdtsc`'s latency, and for a histogram through a multiply and a
    // bit scan to its bucket's address) would hold it up for dozens of cycles on every
    // poll. So `poll_end` writes only what must be written while this thread still owns
    // the task (its stats), and the worker-owned parts (histograms, the cached clock
    // reading, the record) wait for `poll_outcome`, after the transition. Measured on
    // `yield_many`: see the README's overhead section.
    #[inline(always)]
    fn poll_start(&self, ptr: NonNull<Header>, cx: *const ()) -> PollToken {
        if self.clock.is_none() || cx.is_null() {
            return PollToken::NONE;
        }
        // SAFETY: only `run_task` passes a context: the polling worker, one of
        // `self.workers` (a worker's queues hold only its own runtime's tasks), on that
        // worker's own thread, alive while `self` is.
        let w = unsafe { &*cx.cast::<Worker>() };
        // A poll starts where the worker's last clock reading left off (the end of the
        // previous poll, a park, a steal, a driver pass): one clock read per poll, not two.
        let now = w.core.last_ts.get();
        let ring = w.core.ring.get();
        if !ring.is_null() {
            // Written lazily: see "Lazy poll starts" in `telemetry::events`.
            // SAFETY: `ring` is this worker's ring in the runtime's recorder (see
            // `Core::ring`), alive with `self`; the poller holds the task (RUNNING).
            unsafe { (*ring).set_pending_start(ptr.as_ref().id, now) };
            if let Some(r) = &self.recorder {
                // Running now: a reader of the task list sees a long poll as it happens.
                self.mark_changed(r, ptr, Some(w));
            }
        }
        let ring = ring.cast();
        PollToken {
            cx: (w as *const Worker).cast(),
            ring,
            start: now,
            end: now,
            extra: 0,
            waited: PollToken::NOT_QUEUED,
        }
    }

    #[inline(always)]
    fn poll_end(&self, ptr: NonNull<Header>, token: &mut PollToken) {
        let Some(clock) = &self.clock else { return };
        if token.cx.is_null() {
            return;
        }
        if !ptr::eq(CONTEXT.with(|c| c.get().worker), token.cx.cast()) {
            // A blocking join in this poll handed the worker to another thread, which owns
            // its ring and clock cell now: record nothing of this poll there.
            token.cx = ptr::null();
            token.ring = ptr::null();
            return;
        }
        let now = clock.raw();
        token.end = now;
        if token.ring.is_null() {
            // Timed for the poll-time histogram only: no ring, no task stats.
            return;
        }
        // SAFETY: `poll_start` set it from the recorder, alive with `self`.
        let ring = unsafe { &*token.ring.cast::<EventRing>() };
        let busy = now.saturating_sub(token.start);
        if ring.take_pending_start() {
            token.extra = events::POLL_IMPLICIT_START | (busy << events::POLL_BUSY_SHIFT);
        }
        // The task's statistics, all at once (one lookup, one cache line). Only the
        // thread running the task writes them (RUNNING is exclusive, and nothing queues a
        // RUNNING task: a wake during the poll only sets NOTIFIED), so plain loads and
        // stores suffice, and `scheduled_at` still holds what it held at the poll's start.
        // SAFETY: the poller holds the task (RUNNING), and with the ring on every
        // task of this runtime has statistics (`spawn_named` gives them to each one
        // while `self.recorder` is set, which it is for the runtime's whole life).
        let st = unsafe { crate::task::raw::stats_unchecked(ptr) };
        // Every way into a queue sets `scheduled_at` first (spawn, a wake, or the
        // store below for a requeue), so it is never stale here.
        let queued_at = st.scheduled_at.load(Relaxed);
        if queued_at != 0 {
            let waited = token.start.saturating_sub(queued_at);
            token.waited = waited;
            st.scheduled_ticks.store(st.scheduled_ticks.load(Relaxed) + waited, Relaxed);
        }
        st.polls.store(st.polls.load(Relaxed) + 1, Relaxed);
        st.busy_ticks.store(st.busy_ticks.load(Relaxed) + busy, Relaxed);
        st.last_poll_end.store(now, Relaxed);
        // If the poll ends in a requeue, it was queued now; if it ends idle, the wake
        // that queues it again overwrites this (after it, through the state word).
        st.scheduled_at.store(now, Relaxed);
        if let Some(r) = &self.recorder {
            if r.changes.watching() {
                // SAFETY: `token.cx` is the polling worker (`poll_start`).
                let w = unsafe { &*token.cx.cast::<Worker>() };
                r.changes.mark(ptr, &st.queued, Some(w.index));
            }
        }
    }

    #[inline(always)]
    fn poll_outcome(token: &PollToken, id: u64, outcome: PollOutcome) {
        if token.cx.is_null() {
            return;
        }
        // SAFETY: `poll_start` took this from the runtime's workers on a worker thread (the
        // only threads that poll its tasks), and the worker thread holds an `Arc` to the
        // runtime for its whole life, so it is alive here even if the task is not. This is
        // that worker's thread, so its `core` is ours.
        let w = unsafe { &*token.cx.cast::<Worker>() };
        w.core.last_ts.set(token.end);
        let h = &w.counters.histograms;
        let fp = w.core.ns_per_tick_fp;
        if !token.ring.is_null() {
            // SAFETY: as above: that worker's ring in the runtime's recorder.
            let ring = unsafe { &*token.ring.cast::<EventRing>() };
            // `poll_end` took the poll's start (or a record inside the poll wrote it),
            // and nothing records between `poll_end` and here.
            ring.write_event_no_pending(EventKind::PollEnd, id, outcome as u64 | token.extra, token.end);
            if token.waited != PollToken::NOT_QUEUED {
                h.schedule_latency.record(events::scale_ticks(token.waited, fp));
            }
        }
        h.poll_time.record(events::scale_ticks(token.end.saturating_sub(token.start), fp));
    }

    #[inline(always)]
    fn alloc_cell(&self, layout: std::alloc::Layout) -> (NonNull<u8>, u8) {
        if let (Some(w), Some(c)) = (self.current_worker(), cellcache::class_of(layout)) {
            // SAFETY: this is worker `w`'s own thread (`current_worker` checked the context).
            return (unsafe { w.cache.alloc(c) }, w.index as u8 + 1);
        }
        (crate::task::alloc_global(layout), 0)
    }

    #[inline(always)]
    unsafe fn free_cell(&self, p: NonNull<u8>, layout: std::alloc::Layout, owner: u8) {
        if owner == 0 {
            // SAFETY: untagged cells come from the global allocator with `layout`.
            unsafe { std::alloc::dealloc(p.as_ptr(), layout) };
            return;
        }
        let c = cellcache::class_of(layout).expect("a cached cell has a size class");
        let home = owner as usize - 1;
        if self.current_worker_index() == Some(home) {
            // SAFETY: we are the owning worker's thread; the block is of class `c` from its
            // cache (the tag says so) and unused from here on.
            unsafe { self.workers[home].cache.free_local(c, p) }
        } else {
            // SAFETY: as above, from another thread: the remote stack takes it.
            unsafe { self.workers[home].cache.free_remote(c, p) }
        }
    }

    fn on_complete(&self, id: u64, outcome: Outcome) {
        let worker = self.current_worker();
        if self.recorder.is_some() {
            match outcome {
                // Only a poll completes a task, and its `PollEnd` record (outcome ready)
                // stands for the `Complete` too: the reader expands it.
                Outcome::Completed => {}
                Outcome::Cancelled => self.record_on(worker, EventKind::Cancel, id, 0),
                Outcome::Panicked => self.record_on(worker, EventKind::Panic, id, 0),
            }
        }
        match worker {
            Some(w) => match outcome {
                Outcome::Completed => w.counters.tasks_completed.inc(),
                Outcome::Cancelled => w.counters.tasks_cancelled.inc(),
                Outcome::Panicked => w.counters.tasks_panicked.inc(),
            },
            None => {
                let c = match outcome {
                    Outcome::Completed => &self.remote.tasks_completed,
                    Outcome::Cancelled => &self.remote.tasks_cancelled,
                    Outcome::Panicked => &self.remote.tasks_panicked,
                };
                c.fetch_add(1, Relaxed);
            }
        }
    }
}

/// `JoinHandle::join`'s wait: help on a worker, park the thread elsewhere
/// (a thread outside the runtime has no queues of its own to help with). `poll_join(waker)`
/// registers `waker` as the join waker and returns true once the output is ready. Returns whether the target completed.
pub(crate) fn block_until_complete(target: NonNull<Header>, poll_join: &mut dyn FnMut(&Waker) -> bool) -> bool {
    let ctx = CONTEXT.with(|c| c.get());
    if !ctx.worker.is_null() {
        let shared = current_shared().expect("worker context");
        // SAFETY: a worker's context points at that worker of `shared`, which is alive.
        let w = unsafe { &*ctx.worker };
        Shared::join_on_worker(&shared, w, target, poll_join);
        return raw::is_complete(target);
    }
    block_off_worker(poll_join, &thread_waker());
    true
}

/// Park this thread (not a worker, or no longer one) until the join's output is ready;
/// `waker` unparks this thread.
fn block_off_worker(poll_join: &mut dyn FnMut(&Waker) -> bool, waker: &Waker) {
    while !poll_join(waker) {
        std::thread::park();
    }
}

struct ThreadWaker(std::thread::Thread);

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// A waker that unparks the current thread.
pub(crate) fn thread_waker() -> Waker {
    Waker::from(Arc::new(ThreadWaker(std::thread::current())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ewma_interval_matches_the_design_table() {
        // `clamp(1 ms / avg, 8, 255)`: 1 µs -> 255, 10 µs -> 100, 50 µs -> 20,
        // 100 µs -> 10, 1 ms+ -> 8.
        assert_eq!(interval_for(1_000), 255);
        assert_eq!(interval_for(10_000), 100);
        assert_eq!(interval_for(50_000), 20);
        assert_eq!(interval_for(100_000), 10);
        assert_eq!(interval_for(2_000_000), 8);
        assert_eq!(interval_for(0), 255);
    }

    #[test]
    fn busy_workers_still_poll_the_reactor() {
        // Four tasks that yield forever keep both workers busy, so neither runs out of
        // work and parks in the reactor. A socket's readiness must reach its task all the
        // same: a running worker polls the reactor every `IO_POLL_INTERVAL` polls.
        use futures::AsyncReadExt;
        use std::io::Write;
        use std::sync::atomic::Ordering::SeqCst;
        let rt = crate::runtime::Builder::new().worker_threads(2).build().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        for _ in 0..4 {
            let stop = stop.clone();
            rt.spawn(async move {
                while !stop.load(SeqCst) {
                    crate::task::yield_now().await;
                }
            });
        }
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        rt.spawn(async move {
            let mut s = crate::net::TcpStream::connect(addr).await.unwrap();
            let mut byte = [0u8; 1];
            s.read_exact(&mut byte).await.unwrap();
            tx.send(byte[0]).unwrap();
        });
        let (mut peer, _) = listener.accept().unwrap();
        peer.write_all(&[42]).unwrap();
        // A bound only so that a reactor nobody polls fails the test instead of hanging it.
        let got = rx.recv_timeout(Duration::from_secs(60));
        stop.store(true, SeqCst);
        assert_eq!(got, Ok(42), "the read never completed while the workers stayed busy");
    }

    #[test]
    fn backlog_cap_shrinks_with_a_deep_queue_and_stays_in_range() {
        // 10,000 queued, 64 per batch, 2 workers, 5 µs tasks: check as often as allowed.
        assert_eq!(backlog_interval_for(5_000, 64, 2, 10_000), 8);
        // A shallow backlog of fast tasks leaves the EWMA's interval in charge.
        assert_eq!(backlog_interval_for(1_000, 64, 2, 100), 255);
        // 2,000 queued of 1 µs tasks: 1 ms * 128 / (2,000 * 1 µs) = 64.
        assert_eq!(backlog_interval_for(1_000, 64, 2, 2_000), 64);
    }
}
