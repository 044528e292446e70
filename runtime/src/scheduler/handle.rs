//! The scheduler's handle: one per runtime, behind an `Arc` that every task, worker
//! and [`Handle`](crate::runtime::Handle) holds.
//!
//! It holds the scheduler's own state (the workers, the global queue, the idle state, the
//! owned-task list, the exit count, the shutdown flag), and the parts it is built from,
//! each owned elsewhere: a `driver::Handle` (the reactor and the timer wheel), a
//! `blocking::Spawner` (the pool), the `Arc<Metrics>` it counts in (telemetry), and the
//! Tokio bridge's state. The leaves (`time`, `io`, `net`, `blocking`, `signal`, `sync`,
//! `fs`) hold those parts, never this handle: they find them through their own slots of
//! the thread's context (`runtime::context`), which this file fills when a thread enters
//! the runtime (the end of this file).
//!
//! Spawning starts here: allocate the task, count and record it, link it into the owned
//! list, and hand it to the scheduler (`schedule_local` on a worker of this runtime, the
//! global queue otherwise). The runtime's shutdown steps that run on its own threads
//! (`finish_shutdown_here`) are here too; the order of the steps is in `runtime`'s doc.

use crate::blocking::{Pool, PoolConfig, Spawner};
use crate::padded::CachePadded;
use crate::runtime::context::{self, EnterGuard, Slots};
use crate::scheduler::exits::Exits;
use crate::scheduler::idle::Idle;
use crate::scheduler::inject::Inject;
use crate::scheduler::worker::Worker;
use crate::task::id::next_task_id;
use crate::task::join::JoinHandle;
use crate::task::list::OwnedTasks;
use crate::task::raw::new_task;
use crate::task::stats::NewTaskStats;
use crate::telemetry::metrics::{Metrics, MetricsConfig};
use std::future::Future;
use std::mem::ManuallyDrop;
use std::panic::Location;
use std::ptr;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// `Handle::core` of a current-thread runtime (see `runtime::current`): nobody has the
/// worker.
pub(crate) const CORE_FREE: u8 = 0;
/// A thread inside `block_on` runs the worker.
pub(crate) const CORE_HELD: u8 = 1;
/// The runtime shut down and the worker's exit was counted.
pub(crate) const CORE_EXITED: u8 = 2;

/// The runtime's state (see the module doc).
pub(crate) struct Handle {
    // The runtime's parts.
    /// The reactor and the timer wheel (what the leaves hold too).
    pub(crate) driver: crate::driver::Handle,
    /// The `spawn_blocking` threads.
    pub(crate) blocking: Spawner,
    /// Everything the runtime counts and records (telemetry's; see `telemetry::metrics`).
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) shutdown: AtomicBool,
    /// The Tokio bridge (`volt::bridge`): configured by `Builder::build`, started on
    /// first use, shut down by `Runtime::shutdown`.
    #[cfg(feature = "tokio-bridge")]
    pub(crate) bridge: crate::bridge::state::Bridge,

    // The scheduler's part. The global queue (written by spawns from outside and by the
    // workers that take from it) and the idle state (written by workers as they park and
    // search, read by every spawn) each have cache lines of their own: sharing one with
    // a field every poll reads (the clock, `workers`) made every spawn from outside pull
    // that line from the workers' cores. Which fields met depended on how the compiler
    // laid the struct out, so a change elsewhere in it moved the cost of such a spawn by
    // a third (measured with the event ring off).
    pub(crate) workers: Box<[Worker]>,
    pub(crate) inject: CachePadded<Inject<Arc<Handle>>>,
    pub(crate) idle: CachePadded<Idle>,
    pub(crate) owned: OwnedTasks,
    /// Recycled cells of tasks spawned from threads outside the runtime (the workers'
    /// own are in each `Worker::cache`).
    pub(crate) outside_cells: crate::task::cellcache::OutsideCache,
    /// How many workers have left their loop for good, and whether the last of them
    /// finishes the shutdown (see [`Exits`]).
    pub(crate) exited: Mutex<Exits>,
    pub(crate) exited_cv: Condvar,
    /// The workers' stack size, which bounds how deep a blocking join helps
    /// (`scheduler::join`).
    pub(crate) stack_size: usize,
    /// Built by `Builder::new_current_thread`: the one worker has no thread of its own and
    /// runs on whichever thread is inside `block_on` (see `runtime::current`).
    pub(crate) current_thread: bool,
    /// Current-thread runtimes: who has the one worker (see `runtime::current`).
    pub(crate) core: std::sync::atomic::AtomicU8,
    /// The runtime's number (`Handle::id`), unique in the process.
    pub(crate) id: std::num::NonZeroU64,
    /// Its name (`Builder::name`), set once as it is built.
    pub(crate) name: std::sync::OnceLock<Box<str>>,
    /// `Builder::on_thread_park`/`on_thread_unpark`, set once as it is built (only if
    /// either is given).
    pub(crate) park_hooks: std::sync::OnceLock<crate::blocking::ThreadHooks>,
    /// A `LocalRuntime`'s tasks (`Builder::build_local`), which `spawn_local` finds here
    /// wherever this runtime is current; set once as it is built.
    #[cfg(not(loom))]
    pub(crate) local: std::sync::OnceLock<crate::task::local::RuntimeLocalTasks>,
}

impl Handle {
    pub(crate) fn new(
        num_workers: usize,
        blocking: PoolConfig,
        event_ring: Option<(usize, crate::runtime::TaskStatistics)>,
        poll_time_histogram: bool,
        stall: (Option<Duration>, bool),
        current_thread: bool,
        io_driver: crate::reactor::IoDriver,
    ) -> std::io::Result<Arc<Handle>> {
        let stats = crate::scheduler::stats::Stats::new();
        let metrics = Arc::new(Metrics::new(MetricsConfig {
            workers: num_workers,
            event_ring: event_ring.map(|r| r.0),
            stats_always: event_ring.is_none_or(|r| r.1 == crate::runtime::TaskStatistics::Always),
            poll_time_histogram,
            stall_threshold: stall.0,
            stall_stacks: stall.1,
            interval: stats.interval(),
            ewma_task_ns: stats.ewma_task_ns(),
        }));
        let driver = crate::driver::Handle::new(Arc::clone(&metrics), io_driver)?;
        let stack_size = blocking.stack_size;
        Ok(Arc::new_cyclic(|weak| Handle {
            driver,
            blocking: Spawner::new(Pool::new(blocking, enter_from_pool(weak.clone()))),
            workers: (0..num_workers).map(|index| Worker::new(index, &metrics)).collect(),
            metrics,
            inject: CachePadded(Inject::new()),
            idle: CachePadded(Idle::new(num_workers)),
            owned: OwnedTasks::new(num_workers * 4),
            outside_cells: crate::task::cellcache::OutsideCache::new(),
            shutdown: AtomicBool::new(false),
            exited: Mutex::new(Exits::default()),
            exited_cv: Condvar::new(),
            stack_size,
            current_thread,
            core: std::sync::atomic::AtomicU8::new(CORE_FREE),
            id: crate::task::id::next_runtime_id(),
            name: std::sync::OnceLock::new(),
            park_hooks: std::sync::OnceLock::new(),
            #[cfg(not(loom))]
            local: std::sync::OnceLock::new(),
            #[cfg(feature = "tokio-bridge")]
            bridge: Default::default(),
        }))
    }

    pub(crate) fn is_shutdown(&self) -> bool {
        self.shutdown.load(Relaxed)
    }

    /// Spawn: allocate, link into the owned list, schedule (LIFO slot from a worker of
    /// this runtime, the global queue otherwise). `spawned_at`: the caller of the public
    /// spawn function (kept only when recording events).
    pub(crate) fn spawn<F>(
        this: &Arc<Handle>,
        future: F,
        spawned_at: &'static Location<'static>,
    ) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        Handle::spawn_named(this, future, None, spawned_at)
    }

    /// `spawn` with an optional name (kept only when recording events).
    pub(crate) fn spawn_named<F>(
        this: &Arc<Handle>,
        future: F,
        name: Option<String>,
        spawned_at: &'static Location<'static>,
    ) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let worker = this.current_worker();
        // One clock reading for the record and the queued time (off a worker, each
        // reading is a fresh one).
        let now = this.metrics.spawn_timestamp(worker.map(|w| &w.rec));
        // With task statistics, the task's group is found here, once.
        let group = this.metrics.recorder.as_ref().map(|r| {
            let local = worker.and_then(|w| w.counters().groups.as_deref());
            r.groups.group_of(name.as_deref(), spawned_at, local)
        });
        let stats = group.map(|group| NewTaskStats {
            name: name.map(Into::into),
            scheduled_at: now.max(1),
            spawned_at,
            group: group.index(),
        });
        let (task, notified, join) = new_task(future, Arc::clone(this), next_task_id(), stats);
        let global = worker.is_none_or(|w| w.transitioning_to_park.load(Relaxed));
        this.metrics.on_spawn(worker.map(|w| &w.rec), task.header().id, now, group, global);
        if this.is_shutdown() || !this.owned.bind(task.raw()) {
            // Shut down (or shutting down): the task is cancelled before it ever runs.
            task.shutdown();
            drop(notified);
            drop(task);
            return join;
        }
        this.metrics.on_task_changed(task.raw(), worker.map(|w| &w.rec));
        // The owned list keeps this reference until the task completes.
        let _ = task.into_raw();
        match worker {
            Some(w) => this.schedule_local(w, notified, false),
            None => this.schedule_remote(notified),
        }
        join
    }

    /// Fail pending I/O and fire every timer (see `reactor::Driver::shutdown`), counting those
    /// timers as fired.
    pub(crate) fn shut_down_driver(&self) {
        let fired = self.driver.shutdown();
        self.metrics.remote.timers_fired.fetch_add(fired, Relaxed);
    }

    /// The owner of a worker left its loop on shutdown. The last one to leave finishes a
    /// shutdown that was started on one of the runtime's own threads.
    pub(crate) fn worker_exited(this: &Arc<Handle>) {
        let finish = this.exited.lock().unwrap_or_else(|e| e.into_inner()).worker_left(this.workers.len());
        this.exited_cv.notify_all();
        if finish {
            Handle::finish_shutdown_here(this);
        }
    }

    /// The rest of a shutdown, on a thread of the runtime (which must not wait for
    /// itself) once every worker has left its loop: cancel what is left, fail pending
    /// I/O, and stop the blocking pool and the bridge without waiting for their threads,
    /// which exit on their own.
    pub(crate) fn finish_shutdown_here(this: &Arc<Handle>) {
        Handle::close_and_cancel_all(this);
        this.shut_down_driver();
        this.blocking.shutdown(Some(Duration::ZERO));
        #[cfg(feature = "tokio-bridge")]
        this.bridge.shutdown(None);
    }

    /// Shutdown, after the workers have left their loops: cancel every task that is left
    /// and release the global queue's entries.
    pub(crate) fn close_and_cancel_all(this: &Arc<Handle>) {
        let _enter = enter(this);
        this.inject.close();
        this.owned.close_and_pop(|t| {
            let task = crate::task::notified::Task::<Arc<Handle>>::from_raw(t);
            task.shutdown();
        });
        while let Some(t) = this.inject.pop() {
            drop(t);
        }
    }
}

/// `volt::spawn`: spawn onto the runtime this thread is in.
pub(crate) fn spawn_current<F>(future: F, spawned_at: &'static Location<'static>) -> Option<JoinHandle<F::Output>>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let shared = current_shared()?;
    Some(Handle::spawn(&shared, future, spawned_at))
}

impl crate::telemetry::view::RuntimeView for Handle {
    fn is_shutdown(&self) -> bool {
        Handle::is_shutdown(self)
    }

    fn all_parked(&self) -> bool {
        self.idle.all_parked()
    }

    fn fill_gauges(&self, snap: &mut crate::telemetry::Snapshot) {
        let parked = self.idle.parked_bitmap();
        snap.global_queue_depth = self.inject.len() as u64;
        snap.num_searching = self.idle.num_searching();
        // One reading of the bitmap for both, so they agree.
        snap.num_parked = parked.count_ones();
        snap.parked_bitmap = parked;
        snap.blocking_threads = self.blocking.num_threads_gauge.load(Relaxed);
        snap.blocking_queue_depth = self.blocking.queue_depth_gauge.load(Relaxed);
        snap.outside_cell_cache_bytes = self.outside_cells.cached_bytes() as u64;
        #[cfg(feature = "tokio-bridge")]
        {
            snap.bridge = self.bridge.snapshot();
        }
    }

    fn worker_gauges(&self, i: usize) -> crate::telemetry::view::WorkerGauges {
        let w = &self.workers[i];
        crate::telemetry::view::WorkerGauges {
            queue_depth: w.queue.len() as u64,
            lifo_occupied: w.lifo.peek().is_some(),
            cell_cache_bytes: w.cache.cached_bytes() as u64,
        }
    }

    fn tasks(&self) -> &OwnedTasks {
        &self.owned
    }
}

// ---- The scheduler's view of the thread-local context -------------------------------
//
// Entering fills every owner's slot of `runtime::context` from this handle, which holds
// the parts (the driver, the clock inside it, the blocking pool, each worker's
// recorder), so the leaves find theirs without knowing the scheduler. Only this file
// writes or reads the scheduler's two slots, so only it casts them back.

/// The context of `shared`, with `w` as this thread's worker if given.
fn slots(shared: &Arc<Handle>, w: Option<&Worker>) -> Slots {
    Slots {
        scheduler: Arc::as_ptr(shared).cast(),
        worker: w.map_or(ptr::null(), |w| ptr::from_ref(w).cast()),
        driver: shared.driver.context_ptr(),
        clock: shared.driver.time.clock.context_ptr(),
        spawner: shared.blocking.context_ptr(),
        rec: w.map_or(ptr::null(), |w| &w.rec),
        defer: w.map_or(ptr::null(), |w| w.core.deferred.context_ptr()),
    }
}

/// Make `shared` the current runtime of this (non-worker) thread, for `volt::spawn`.
pub(crate) fn enter(shared: &Arc<Handle>) -> EnterGuard {
    context::enter(slots(shared, None))
}

/// Make this thread worker `w` of `shared` (its loop's owner) until the guard drops.
pub(crate) fn enter_worker(shared: &Arc<Handle>, w: &Worker) -> EnterGuard {
    context::enter(slots(shared, Some(w)))
}

/// How the blocking pool enters its runtime on each of its threads: the context, and a
/// reference that keeps the runtime alive while the thread is in it.
pub(crate) fn enter_from_pool(shared: std::sync::Weak<Handle>) -> crate::blocking::EnterRuntime {
    struct Entered {
        // Dropped in this order: the context first, then the reference it borrows from.
        _guard: EnterGuard,
        _shared: Arc<Handle>,
    }
    Box::new(move || {
        let shared = shared.upgrade()?;
        Some(Box::new(Entered { _guard: enter(&shared), _shared: shared }) as Box<dyn std::any::Any>)
    })
}

/// A blocking join gives this thread's worker away: from now on the thread is a plain
/// thread of its runtime. Dropping the guard takes the worker back (the hand-off failed);
/// forgetting it keeps the change (the enclosing `enter_worker` guard restores the
/// context when the thread leaves the loop).
pub(crate) fn hand_off_worker() -> EnterGuard {
    context::enter(context::get().without_worker())
}

/// The runtime this thread is in, if any (borrowed: the caller must not outlive it).
pub(crate) fn current_shared() -> Option<ManuallyDrop<Arc<Handle>>> {
    let p = context::get().scheduler;
    if p.is_null() {
        return None;
    }
    // SAFETY: only `slots` above fills this slot, with `Arc::as_ptr` of an
    // `Arc<Handle>` that the thread that entered (a worker, a `block_on` caller, a pool
    // thread) keeps alive while the context is set; `ManuallyDrop` keeps this borrowed
    // `Arc` from releasing a count it never took.
    Some(ManuallyDrop::new(unsafe { Arc::from_raw(p.cast::<Handle>()) }))
}

/// A clone of the current runtime's `Arc`, if any.
pub(crate) fn current_handle() -> Option<Arc<Handle>> {
    current_shared().map(|s| Arc::clone(&s))
}

/// This thread's worker (of whichever runtime), or null.
#[inline(always)]
pub(crate) fn current_worker_ptr() -> *const Worker {
    context::worker_ptr().cast()
}

/// Whether this thread owns worker `w` now (a blocking join may have handed it off).
#[inline(always)]
pub(crate) fn owns(w: &Worker) -> bool {
    ptr::eq(current_worker_ptr(), w)
}

impl Handle {
    /// This thread's worker's part of telemetry, if the thread is one of our workers.
    #[inline(always)]
    pub(crate) fn current_rec(&self) -> Option<&crate::telemetry::record::WorkerRecorder> {
        self.current_worker().map(|w| &w.rec)
    }

    /// The worker this thread is, if it is one of ours.
    #[inline(always)]
    pub(crate) fn current_worker(&self) -> Option<&Worker> {
        let ctx = context::get();
        if ptr::eq(ctx.scheduler.cast::<Handle>(), self) && !ctx.worker.is_null() {
            // SAFETY: `enter_worker` set it to one of `self.workers` (same scheduler), and
            // `self` is alive while we hold `&self`.
            Some(unsafe { &*ctx.worker.cast::<Worker>() })
        } else {
            None
        }
    }

    /// The index of the worker this thread is, of whichever runtime (`runtime::worker_index`).
    pub(crate) fn any_worker_index() -> Option<usize> {
        context::try_get()
            .filter(|ctx| !ctx.worker.is_null())
            // SAFETY: set by `enter_worker` to a worker of the runtime it entered, alive
            // while the thread is inside it (the guard restores the slot on the way out).
            .map(|ctx| unsafe { &*ctx.worker.cast::<Worker>() }.index)
    }

    /// Like `current_worker`, but also safe while the thread's locals are being torn down
    /// (a task freed from a thread-local destructor).
    #[inline]
    pub(crate) fn current_worker_index(&self) -> Option<usize> {
        context::try_get()
            .filter(|ctx| ptr::eq(ctx.scheduler.cast::<Handle>(), self) && !ctx.worker.is_null())
            // SAFETY: set by `enter_worker` to one of `self.workers`, alive while `self` is.
            .map(|ctx| unsafe { &*ctx.worker.cast::<Worker>() }.index)
    }
}
