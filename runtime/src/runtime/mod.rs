//! [`Runtime`], [`Builder`] and [`Handle`]: starting, entering and stopping a runtime.
//!
//! ```
//! use std::time::Duration;
//!
//! let rt = volt::runtime::Builder::new_multi_thread()
//!     .worker_threads(2)
//!     .thread_name("app-worker")
//!     .build()?;
//! // A Handle spawns from any thread, whether it is in the runtime or not.
//! let handle = rt.handle().clone();
//! let from_thread = std::thread::spawn(move || handle.spawn(async { 1 })).join().unwrap();
//! let sum = rt.block_on(async move {
//!     let here = volt::spawn(async { 2 });
//!     from_thread.await.unwrap() + here.await.unwrap()
//! });
//! assert_eq!(sum, 3);
//! // Every task still there is dropped and every thread joined, waiting a second at most.
//! rt.shutdown_timeout(Duration::from_secs(1));
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! [`Builder::new_current_thread`] builds a runtime with no worker threads, whose tasks
//! run on the thread inside `block_on`; [`Builder::build_local`] makes one a
//! [`LocalRuntime`], whose tasks need not be `Send`.
//!
//! # Shutdown
//! Dropping a `Runtime` (or `shutdown_timeout`) does, in order:
//! 1. set the shutdown flag and unpark every worker;
//! 2. each worker finishes the poll it is in, leaves its loop, releases the queue entries
//!    it holds and exits; the caller joins the worker threads (or waits up to the timeout);
//! 3. close the global queue and the owned-task list, and cancel every task that is left:
//!    each future is dropped on the calling thread, and each `JoinHandle` then reports
//!    `is_cancelled()`. Shields do not defer this.
//! 4. release the global queue's entries;
//! 5. shut the reactor down: every socket's pending and later operations fail with an
//!    `io::Error`;
//! 6. shut the blocking pool down: queued `spawn_blocking` calls are cancelled, running
//!    ones finish, and its threads are joined;
//! 7. (feature `tokio-bridge`) shut the Tokio bridge down, if it started: waiting for its
//!    threads within what is left of the timeout on a plain thread, without waiting on a
//!    runtime or async thread (see `volt::bridge`);
//! 8. wait up to a second (or what is left of the timeout) for the stall monitor's
//!    thread to leave (it holds no lock and does no long work, so it leaves at its next
//!    look).
//!
//! Steps 3 to 6 run after the workers have left their loops, and the worker threads are
//! joined after step 6 (a thread that handed its worker off in a blocking join may be
//! waiting for a task that step 3 cancels).
//!
//! Dropped (or shut down) on one of the runtime's own threads (inside a task, a
//! `spawn_blocking` call, or a task whose worker a blocking join handed off), the runtime
//! can't wait for its workers: one of them may be the caller. Then `drop` does step 1 and
//! returns, and the last worker to leave its loop does steps 3 to 7 (the shutdown
//! hand-off), without joining any thread: each exits on its own once its poll or blocking
//! call returns. Every pending future is still dropped and nothing is leaked; a spawn
//! through a `Handle` after step 1 is cancelled at once.
//!
//! A current-thread runtime has no worker thread to join: its worker's exit (step 2) is
//! counted by the thread that shuts down, or, when a thread is inside `block_on` then, by
//! that thread as it leaves its loop (see `current`). The other steps are the same.
//!
//! Task memory is freed when the last reference goes: the runtime's, or a `JoinHandle`
//! or waker the program still holds.

mod builder;
pub(crate) mod context;
pub(crate) mod current;
mod local;
mod metrics;

pub use crate::reactor::IoDriver;
pub use builder::{Builder, TaskStatistics, DEFAULT_STALL_THRESHOLD, MAX_EVENT_RING};
pub use local::{LocalOptions, LocalRuntime};
pub use metrics::RuntimeMetrics;

/// The index of the worker this thread is, as Tokio's: `0..num_workers` on a worker
/// thread of a multi-thread runtime (the index `RuntimeMetrics` and the console use),
/// `Some(0)` on the thread driving a current-thread runtime, `None` elsewhere (the
/// blocking pool, a thread of the program's own, `block_on`'s thread of a multi-thread
/// runtime). It may change across an `.await`, when the task moves to another worker.
pub fn worker_index() -> Option<usize> {
    crate::scheduler::handle::Handle::any_worker_index()
}

use crate::blocking::deadline::{join_until, wait_until_deadline};
use crate::scheduler::handle::Handle as Scheduler;
use crate::task::join::JoinHandle;
use crate::telemetry::Telemetry;
use std::future::Future;
use std::io;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// A Volt runtime: multi-thread with work stealing ([`Builder::new_multi_thread`], the
/// default), or current-thread, whose tasks run on the thread inside `block_on`
/// ([`Builder::new_current_thread`]).
pub struct Runtime {
    handle: Handle,
    threads: Vec<std::thread::JoinHandle<()>>,
    /// The stall monitor's thread, waited for only a moment at shutdown (see
    /// `telemetry::stall`, "At shutdown").
    monitor: Option<std::thread::JoinHandle<()>>,
    shut_down: bool,
    #[cfg(feature = "console")]
    console: Option<crate::console::ServerHandle>,
}

impl Runtime {
    /// A runtime with one worker per available core.
    pub fn new() -> io::Result<Runtime> {
        Builder::new().build()
    }

    /// The address the console server listens on, when it is enabled.
    #[cfg(feature = "console")]
    pub fn console_addr(&self) -> Option<std::net::SocketAddr> {
        self.console.as_ref().map(|c| c.local_addr())
    }

    /// The handle: spawn from anywhere, read telemetry.
    pub fn handle(&self) -> &Handle {
        &self.handle
    }

    /// Spawn a task; same as `self.handle().spawn(future)`.
    #[track_caller]
    pub fn spawn<F>(&self, future: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.handle.spawn(future)
    }

    /// Run `future` to completion on the calling thread, with this runtime as the context
    /// for `volt::spawn`. On a current-thread runtime the calling thread also runs the
    /// runtime's tasks, timers and I/O while it waits (see [`Builder::new_current_thread`]).
    ///
    /// # Panics
    /// When called on a worker thread (inside a task): that would block the worker. Use
    /// `.await`, or `JoinHandle::join`, which keeps the worker busy with other tasks.
    #[track_caller]
    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        self.handle.block_on(future)
    }

    /// Run a blocking function on the runtime's blocking pool; same as
    /// `self.handle().spawn_blocking(f)`.
    #[track_caller]
    pub fn spawn_blocking<F, R>(&self, f: F) -> JoinHandle<R>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        self.handle.spawn_blocking(f)
    }

    /// Make this runtime the calling thread's current one until the guard drops, so that
    /// `volt::spawn`, `Handle::current` and the leaf futures' constructors find it.
    pub fn enter(&self) -> EnterGuard<'_> {
        self.handle.enter()
    }

    /// Tokio's runtime metrics; same as `self.handle().metrics()`.
    pub fn metrics(&self) -> RuntimeMetrics {
        self.handle.metrics()
    }

    /// Shut down without waiting for anything: as [`Runtime::shutdown_timeout`] with a
    /// zero timeout. Tasks the workers are not polling are still cancelled and their
    /// futures dropped; threads still busy exit on their own.
    pub fn shutdown_background(self) {
        self.shutdown_timeout(Duration::ZERO);
    }

    /// Shut down, waiting at most `timeout` for the workers to finish the polls they are in
    /// and for the runtime's threads (workers and blocking pool) to finish exiting (their
    /// stop hooks, their thread-locals' destructors). Threads still busy after that are
    /// left to exit on their own; every task the workers are not polling is still
    /// cancelled and its future dropped.
    pub fn shutdown_timeout(mut self, timeout: Duration) {
        self.shutdown(Some(timeout));
    }

    fn shutdown(&mut self, timeout: Option<Duration>) {
        if std::mem::replace(&mut self.shut_down, true) {
            return;
        }
        #[cfg(feature = "console")]
        if let Some(mut c) = self.console.take() {
            c.stop();
        }
        let shared = &self.handle.shared;
        shared.shutdown.store(true, std::sync::atomic::Ordering::SeqCst);
        for i in 0..shared.workers.len() {
            shared.unpark_worker(i);
        }
        // The stall monitor sees the flag when it wakes, and leaves.
        shared.metrics.stall.unpark();
        if shared.current_thread {
            // Its worker has no thread: count its exit here, unless a thread inside
            // `block_on` has it (that thread does it as it leaves; see `current`).
            current::exit_core(shared);
        }
        let n = shared.workers.len();
        if crate::scheduler::handle::current_handle().is_some_and(|s| Arc::ptr_eq(&s, shared)) {
            // On one of this runtime's own threads (inside a task, a blocking call, or a
            // task that lost its worker to a blocking join): waiting for the workers would
            // wait on ourselves. Leave the rest to the last worker to exit its loop, or do
            // it now if they all have; the threads exit on their own.
            self.threads.clear();
            self.monitor = None;
            let finish_now = shared.exited.lock().unwrap_or_else(|e| e.into_inner()).shut_down_inside(n);
            if finish_now {
                Scheduler::finish_shutdown_here(shared);
            }
            return;
        }
        let deadline = timeout.map(|t| crate::time::deadline_after(Instant::now(), t));
        let exits = shared.exited.lock().unwrap_or_else(|e| e.into_inner());
        drop(wait_until_deadline(&shared.exited_cv, exits, deadline, |exits| exits.count >= n));
        // Cancel first, then join: a thread that handed its worker off inside a blocking
        // join waits for that join's target, which this cancels if nothing else ends it.
        Scheduler::close_and_cancel_all(shared);
        // Pending I/O now fails instead of waiting; then the blocking pool winds down
        // within what is left of the timeout.
        shared.shut_down_driver();
        shared.blocking.shutdown(deadline.map(|d| d.saturating_duration_since(Instant::now())));
        // A worker counts as exited once it leaves its loop; its thread still runs the
        // stop hook and its thread-locals' destructors after that, within the timeout.
        join_until(self.threads.drain(..), deadline);
        #[cfg(feature = "tokio-bridge")]
        shared.bridge.shutdown(deadline);
        // Woken above, the monitor leaves at its next look.
        let monitor_by = Instant::now() + crate::telemetry::stall::EXIT_WAIT;
        join_until(self.monitor.take(), Some(deadline.map_or(monitor_by, |d| d.min(monitor_by))));
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        self.shutdown(None);
    }
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime").field("workers", &self.handle.shared.workers.len()).finish()
    }
}

// The runtime's shared state stays consistent across a panic that unwinds past a
// `Runtime` or a `Handle`: tasks' panics are caught at their poll, and no user code runs
// under the runtime's locks. As Tokio's.
impl std::panic::UnwindSafe for Runtime {}
impl std::panic::RefUnwindSafe for Runtime {}
impl std::panic::UnwindSafe for Handle {}
impl std::panic::RefUnwindSafe for Handle {}

/// A cheap, cloneable reference to a runtime: spawn onto it from any thread.
#[derive(Clone)]
pub struct Handle {
    pub(crate) shared: Arc<Scheduler>,
}

impl Handle {
    /// The handle of the runtime this thread is in (a worker, or inside `block_on`).
    ///
    /// # Panics
    /// Outside a runtime (the panic names the caller, as Tokio's does).
    #[track_caller]
    pub fn current() -> Handle {
        Handle::try_current().expect("volt: `Handle::current` called outside a Volt runtime")
    }

    /// The handle of the runtime this thread is in, or an error saying why there is none.
    pub fn try_current() -> Result<Handle, TryCurrentError> {
        crate::scheduler::handle::current_handle()
            .map(|shared| Handle { shared })
            .ok_or(TryCurrentError { _private: () })
    }

    /// The I/O driver this runtime's reactor uses ([`IoDriver::Epoll`] or
    /// [`IoDriver::IoUring`]; see [`Builder::io_driver`]).
    pub fn io_driver(&self) -> IoDriver {
        self.shared.driver.io_driver()
    }

    /// Make this runtime the calling thread's current one until the guard drops (guards
    /// nest: dropping one restores what was current before it). Drop guards in the reverse
    /// order of their creation.
    pub fn enter(&self) -> EnterGuard<'_> {
        EnterGuard::new(&self.shared)
    }

    /// Run `future` to completion on the calling thread, with this runtime as the context.
    ///
    /// From a thread outside the runtime: on a multi-thread runtime the workers run the
    /// timers and the reactor that wake the future; on a current-thread runtime this call
    /// runs the runtime's worker (its tasks, timers and I/O) while it waits, unless
    /// another thread inside `block_on` has it (then this thread takes the worker over
    /// when that one leaves).
    ///
    /// # Panics
    /// When called on a worker thread (inside a task): that would block the worker.
    #[track_caller]
    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        // As Tokio's: a `block_on` inside another's future would block what the outer one
        // drives (on a current-thread runtime, every task).
        assert!(
            !context::in_block_on(),
            "Cannot start a runtime from within a runtime. This happens because a function (like `block_on`) \
             attempted to block the current thread while the thread is being used to drive asynchronous tasks. \
             If you are in an async function, use `.await` on the future instead of blocking on it."
        );
        assert!(
            !context::on_worker_thread(),
            "Cannot start a runtime from within a runtime. This happens because a function (like `block_on`) \
             attempted to block the current thread while the thread is being used to drive asynchronous tasks. \
             If you are in an async function, use `.await` on the future instead of blocking on it (volt: or \
             `JoinHandle::join`, which keeps the worker busy with other tasks while it waits)."
        );
        let _in_block_on = context::InBlockOn::enter();
        if self.shared.current_thread {
            return current::block_on(&self.shared, future);
        }
        let _enter = crate::scheduler::handle::enter(&self.shared);
        // The park counts this thread as busy while it polls, for a paused clock's
        // auto-advance (`time::clock`).
        let park = crate::time::block_on::BlockOnPark::new(&self.shared.driver);
        let waker = park.waker();
        let mut cx = Context::from_waker(&waker);
        let mut future = pin!(future);
        loop {
            // Each poll has a cooperative budget of its own, as a task's does (and as
            // Tokio's `block_on`): a loop on always-ready operations inside it is made to
            // return `Pending` once it is spent, and its wake, off the workers, comes at
            // once, so the next poll follows with a new budget (see `task::coop`).
            let polled = {
                let _budget = crate::task::coop::Budget::enter();
                future.as_mut().poll(&mut cx)
            };
            if let Poll::Ready(v) = polled {
                return v;
            }
            park.park();
        }
    }

    /// Tokio's runtime metrics, read from this runtime's telemetry (see
    /// [`Handle::telemetry`] for all of it).
    pub fn metrics(&self) -> RuntimeMetrics {
        RuntimeMetrics::new(self.clone())
    }

    /// The runtime's number, unique among the runtimes this process has built.
    pub fn id(&self) -> Id {
        Id(self.shared.id)
    }

    /// The runtime's name, if [`Builder::name`] gave it one.
    pub fn name(&self) -> Option<&str> {
        self.shared.name.get().map(|n| &**n)
    }

    /// Which kind of runtime this is.
    pub fn runtime_flavor(&self) -> RuntimeFlavor {
        if self.shared.current_thread {
            RuntimeFlavor::CurrentThread
        } else {
            RuntimeFlavor::MultiThread
        }
    }

    /// Spawn a task. From a worker of this runtime it goes into that worker's LIFO slot;
    /// from any other thread into the global queue, waking a parked worker. After
    /// shutdown, the task is cancelled at once (its handle reports `is_cancelled()`). The
    /// caller's location is the task's spawn location (`TaskInfo::spawned_at`).
    #[track_caller]
    pub fn spawn<F>(&self, future: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        Scheduler::spawn(&self.shared, future, std::panic::Location::caller())
    }

    /// Run a blocking function on this runtime's blocking pool, from any thread. Same as
    /// [`volt::task::spawn_blocking`](crate::task::spawn_blocking) inside the runtime.
    #[track_caller]
    pub fn spawn_blocking<F, R>(&self, f: F) -> JoinHandle<R>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        self.shared.blocking.spawn(f)
    }

    /// The runtime's counters and gauges.
    pub fn telemetry(&self) -> Telemetry {
        Telemetry::new(
            Arc::clone(&self.shared.metrics),
            Arc::clone(&self.shared) as Arc<dyn crate::telemetry::view::RuntimeView>,
        )
    }

    /// The number of worker threads.
    pub fn num_workers(&self) -> usize {
        self.shared.workers.len()
    }

    /// The Tokio runtime handle of this runtime's Tokio bridge, starting the bridge if it
    /// has not started yet (see `volt::bridge`). Spawn on it, or enter it, from any thread.
    ///
    /// # Panics
    /// After this runtime has shut down, or if the bridge's threads cannot be started; see
    /// [`Handle::try_tokio_bridge`].
    #[cfg(feature = "tokio-bridge")]
    pub fn tokio_bridge(&self) -> tokio::runtime::Handle {
        self.try_tokio_bridge().unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`Handle::tokio_bridge`], with an error instead of a panic after shutdown or when
    /// the bridge's threads cannot be started.
    #[cfg(feature = "tokio-bridge")]
    pub fn try_tokio_bridge(&self) -> io::Result<tokio::runtime::Handle> {
        self.shared.bridge.handle()
    }
}

impl std::fmt::Debug for Handle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handle")
            .field("id", &self.id())
            .field("name", &self.name())
            .field("workers", &self.shared.workers.len())
            .finish()
    }
}

/// A runtime's number ([`Handle::id`]), or a `LocalSet`'s ([`LocalSet::id`]): unique
/// among the runtimes and sets of the process, never reused. Shown as the number.
///
/// [`LocalSet::id`]: crate::task::LocalSet::id
#[derive(Clone, Copy, Debug, Hash, Eq, PartialEq)]
pub struct Id(std::num::NonZeroU64);

impl Id {
    pub(crate) fn new(n: std::num::NonZeroU64) -> Id {
        Id(n)
    }
}

impl std::fmt::Display for Id {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// Whether `err` is the error of an I/O operation that failed because its runtime shut
/// down (a socket of a dropped runtime, a blocking file operation cancelled by the
/// shutdown, a `ctrl_c` the shutdown ended), as Tokio's.
pub fn is_rt_shutdown_err(err: &io::Error) -> bool {
    crate::shutdown_error::is_shutdown_error(err)
}

/// The kind of a runtime: [`Builder::new_current_thread`] or
/// [`Builder::new_multi_thread`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RuntimeFlavor {
    /// One worker, run by the thread inside `block_on`.
    CurrentThread,
    /// Worker threads of their own, with work stealing.
    MultiThread,
}

/// Keeps a runtime the thread's current one ([`Handle::enter`], [`Runtime::enter`]) until
/// dropped, then restores the one before.
///
/// It keeps the runtime's memory alive too: a runtime dropped (shut down) while a guard
/// lives stays the current one, shut down, as with Tokio. Guards must be dropped in the
/// reverse order of their creation; dropping one out of order panics (unless the thread
/// is panicking already) and leaves the context as it is.
#[must_use = "the runtime is current only while the guard lives"]
pub struct EnterGuard<'a> {
    // The drop is `Entered`'s: a `Drop` on this type would keep the handle borrowed
    // until the guard drops, and Tokio's guard lets its runtime be dropped or shut down
    // (`shutdown_timeout(self, ..)`) while it lives.
    _entered: Entered,
    _handle: std::marker::PhantomData<&'a Handle>,
}

/// What an [`EnterGuard`] restores when it drops.
struct Entered {
    /// The context to restore; dropped (which restores it) only in order.
    guard: std::mem::ManuallyDrop<context::EnterGuard>,
    /// How many guards this thread held, this one included, when it was made.
    depth: usize,
}

std::thread_local! {
    /// The runtimes this thread entered through `Handle::enter`, innermost last: each
    /// guard's reference, which keeps alive the runtime that the thread's context points
    /// to (the context holds plain pointers). A guard dropped out of order leaves its
    /// reference here, so whatever the context points to after it stays alive until the
    /// thread exits.
    static ENTERED: std::cell::RefCell<Vec<Arc<Scheduler>>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl EnterGuard<'_> {
    fn new(shared: &Arc<Scheduler>) -> Self {
        let depth = ENTERED.with(|e| {
            let mut e = e.borrow_mut();
            e.push(Arc::clone(shared));
            e.len()
        });
        // After the reference is kept: the context points into what it keeps alive.
        let guard = std::mem::ManuallyDrop::new(crate::scheduler::handle::enter(shared));
        EnterGuard { _entered: Entered { guard, depth }, _handle: std::marker::PhantomData }
    }
}

impl Drop for Entered {
    fn drop(&mut self) {
        // A guard kept in another thread-local may drop after this one, as the thread
        // exits: then there is nothing left to restore.
        let Ok(in_order) = ENTERED.try_with(|e| e.borrow().len() == self.depth) else { return };
        if !in_order {
            // The context stays as it is, and every reference in `ENTERED` stays too, so
            // it points to nothing freed.
            if !std::thread::panicking() {
                panic!(
                    "volt: `EnterGuard`s dropped out of order: drop the guards of `Handle::enter` and \
                     `Runtime::enter` in the reverse order of their creation"
                );
            }
            return;
        }
        // SAFETY: dropped once, here; the field is not used again.
        unsafe { std::mem::ManuallyDrop::drop(&mut self.guard) };
        // The context no longer points to it: its reference can go.
        let shared = ENTERED.try_with(|e| e.borrow_mut().pop());
        drop(shared);
    }
}

// SAFETY: a shared reference to the guard reaches nothing: it has no method that takes
// `&self` but `Debug`, which reads no field. Its context pointers are used only by its
// drop, which takes it by value on the thread that made it (it is not `Send`). So it is
// `Sync`, as Tokio's guard is.
unsafe impl Sync for EnterGuard<'_> {}

impl std::fmt::Debug for EnterGuard<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EnterGuard").finish_non_exhaustive()
    }
}

/// [`Handle::try_current`] found no runtime: the thread is not inside one.
#[derive(Debug)]
pub struct TryCurrentError {
    _private: (),
}

impl TryCurrentError {
    /// Whether the thread is simply outside any runtime (always so in Volt).
    pub fn is_missing_context(&self) -> bool {
        true
    }

    /// Whether the thread's runtime context was already destroyed (never so in Volt: the
    /// context is a plain pointer that needs no destructor).
    pub fn is_thread_local_destroyed(&self) -> bool {
        false
    }
}

impl std::fmt::Display for TryCurrentError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("there is no reactor running, must be called from the context of a Volt runtime")
    }
}

impl std::error::Error for TryCurrentError {}
