//! The blocking pool behind [`spawn_blocking`](crate::task::spawn_blocking): threads apart
//! from the workers for code that blocks (file I/O, DNS, CPU-heavy work, foreign calls).
//!
//! A blocking call is an ordinary task cell (the same state word, `JoinHandle` and
//! `JoinError`) whose scheduler is this pool: its one poll runs the closure, under the
//! same `catch_unwind`, so a panic arrives as `JoinError::is_panic`.
//!
//! Protocol, all under one mutex:
//! * `spawn` queues the task; if an idle thread is waiting (and not already being
//!   notified) it notifies one; otherwise, below `max_blocking_threads`, it starts a thread;
//!   otherwise the task waits in the queue for a thread to come free.
//! * `spawn_now` (a worker handed off by a blocking join) queues at the front and never
//!   waits for a thread: it notifies an idle one or starts one, past the limit if need be.
//!   Such a job runs a worker loop, which only returns at shutdown or at another
//!   hand-off, so the thread it takes does not count against `max_blocking_threads`:
//!   from the moment the job is queued until it returns (or is dropped unrun),
//!   `num_worker_loops` leaves one thread out of the count `spawn` compares with the
//!   limit. Otherwise a few blocking joins would fill the limit for good, and every later
//!   blocking call (and host-name lookup) would wait until shutdown.
//! * A thread whose worker loop has returned goes back to running queued tasks, unless
//!   the threads left for blocking calls are already at the limit: then it exits.
//! * A thread runs queued tasks; with none, it waits up to the keep-alive, and exits if
//!   it is still idle then.
//! * Shutdown cancels the queued tasks (their `JoinHandle`s report `is_cancelled()`), lets
//!   running ones finish, and joins every thread (or waits up to the runtime's
//!   `shutdown_timeout`).
//!
//! Every pool thread runs the runtime's `on_thread_start` hook when it starts and its
//! `on_thread_stop` hook just before it exits (see [`ThreadHooks`]), outside the pool's
//! lock; the workers run the same hooks.

use crate::task::header::Header;
use crate::task::id::next_task_id;
use crate::task::join::JoinHandle;
use crate::task::notified::Notified;
use crate::task::raw::new_task;
use crate::task::schedule::{Outcome, Schedule};
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::ptr::NonNull;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

pub(crate) mod deadline;

/// What enters a runtime's context on a pool thread: a guard that leaves it on drop.
pub(crate) type EnterRuntime = Box<dyn Fn() -> Option<Box<dyn std::any::Any>> + Send + Sync>;

/// What the scheduler and the leaves hold of the pool: `spawn_blocking` and friends, and
/// how the current one is found (through the thread's context).
#[derive(Clone)]
pub(crate) struct Spawner(Arc<Pool>);

impl Spawner {
    pub(crate) fn new(pool: Pool) -> Spawner {
        Spawner(Arc::new(pool))
    }

    /// The current runtime's pool, if this thread is in one.
    pub(crate) fn current() -> Option<Spawner> {
        let p = crate::runtime::context::get().spawner;
        if p.is_null() {
            return None;
        }
        // SAFETY: only `context_ptr` below makes the pointers the context's spawner slot
        // holds: `Arc::as_ptr` of a live spawner's pool, which the thread that entered
        // keeps alive (through its runtime) while the context is set. The borrowed `Arc`
        // is cloned (a count of our own) and never dropped.
        let borrowed = std::mem::ManuallyDrop::new(unsafe { Arc::from_raw(p.cast::<Pool>()) });
        Some(Spawner(Arc::clone(&borrowed)))
    }

    /// This pool as the context's spawner slot stores it (see `runtime::context`).
    pub(crate) fn context_ptr(&self) -> *const () {
        Arc::as_ptr(&self.0).cast()
    }
}

impl std::ops::Deref for Spawner {
    type Target = Arc<Pool>;

    fn deref(&self) -> &Arc<Pool> {
        &self.0
    }
}

/// The pool: shared by the runtime and its threads.
pub(crate) struct Pool {
    state: Mutex<PoolState>,
    /// Idle threads wait here for work.
    work: Condvar,
    /// Shutdown waits here for threads to exit.
    exited: Condvar,
    max_threads: usize,
    keep_alive: Duration,
    thread_name: String,
    stack_size: usize,
    hooks: ThreadHooks,
    /// Enters the runtime's context on a pool thread (for its life), so `volt::spawn`
    /// and `Handle::current` work there; `None` once the runtime is gone. Given by the
    /// scheduler, which owns the pool, so the pool needs no knowledge of it.
    enter: EnterRuntime,
    /// Gauges for telemetry, written under the lock.
    pub(crate) num_threads_gauge: AtomicU64,
    pub(crate) queue_depth_gauge: AtomicU64,
}

struct PoolState {
    queue: VecDeque<Notified<Arc<Pool>>>,
    /// Every pool thread, including those running a handed-off worker loop.
    num_threads: usize,
    /// Worker-loop jobs (`spawn_now`) queued or running: each has, or will have, a
    /// thread of its own, which `max_threads` does not count.
    num_worker_loops: usize,
    num_idle: usize,
    /// Tasks running now (worker loops included): a paused clock does not auto-advance
    /// while the pool runs a blocking task (see `is_busy`).
    num_running: usize,
    /// Notifications sent to idle threads and not yet taken.
    num_notified: usize,
    shutdown: bool,
    threads: Vec<std::thread::JoinHandle<()>>,
}

/// The settings a runtime's `Builder` passes down.
#[derive(Clone, Debug)]
pub(crate) struct PoolConfig {
    pub(crate) max_threads: usize,
    pub(crate) keep_alive: Duration,
    pub(crate) thread_name: String,
    pub(crate) stack_size: usize,
    pub(crate) hooks: ThreadHooks,
}

/// A hook the runtime calls on its threads.
type ThreadHook = Arc<dyn Fn() + Send + Sync + 'static>;

/// The `Builder::on_thread_start`/`on_thread_stop` callbacks, run by every worker and
/// every blocking-pool thread when it starts and just before it exits; and
/// `on_thread_park`/`on_thread_unpark`, run by a worker around each time it goes idle
/// (see `scheduler::worker_park`).
///
/// A hook runs on the thread itself, inside the runtime's context (so `Handle::current`
/// works there), and never while a scheduler or pool lock is held. A panic in a hook is
/// caught and ignored: the thread carries on (or exits) as if the hook had returned.
#[derive(Clone, Default)]
pub(crate) struct ThreadHooks {
    pub(crate) start: Option<ThreadHook>,
    pub(crate) stop: Option<ThreadHook>,
    pub(crate) park: Option<ThreadHook>,
    pub(crate) unpark: Option<ThreadHook>,
}

impl ThreadHooks {
    /// Run `body` as a runtime thread's life: the start hook first, the stop hook last
    /// (also if `body` unwinds, so starts and stops pair up).
    pub(crate) fn run_thread<R>(&self, body: impl FnOnce() -> R) -> R {
        struct Stop<'a>(&'a ThreadHooks);
        impl Drop for Stop<'_> {
            fn drop(&mut self) {
                ThreadHooks::call(&self.0.stop);
            }
        }
        ThreadHooks::call(&self.start);
        let _stop = Stop(self);
        body()
    }

    /// Run the start hook (a thread of the runtime's that is not run by `run_thread`:
    /// the Tokio bridge's).
    #[cfg(feature = "tokio-bridge")]
    pub(crate) fn started(&self) {
        ThreadHooks::call(&self.start);
    }

    /// Run the stop hook; see [`ThreadHooks::started`].
    #[cfg(feature = "tokio-bridge")]
    pub(crate) fn stopping(&self) {
        ThreadHooks::call(&self.stop);
    }

    pub(crate) fn call(hook: &Option<ThreadHook>) {
        if let Some(f) = hook {
            // The panic message is still printed by the panic hook; the thread goes on.
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f()));
        }
    }
}

impl std::fmt::Debug for ThreadHooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThreadHooks")
            .field("on_thread_start", &self.start.is_some())
            .field("on_thread_stop", &self.stop.is_some())
            .finish()
    }
}

/// The closure as a future that completes on its first poll.
struct BlockingTask<F>(Option<F>);

impl<F> Unpin for BlockingTask<F> {}

impl<F: FnOnce() -> R, R> Future for BlockingTask<F> {
    type Output = R;
    fn poll(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<R> {
        let f = self.0.take().expect("volt: blocking task polled after it completed");
        Poll::Ready(f())
    }
}

impl Pool {
    pub(crate) fn new(config: PoolConfig, enter: EnterRuntime) -> Pool {
        Pool {
            state: Mutex::new(PoolState {
                queue: VecDeque::new(),
                num_threads: 0,
                num_worker_loops: 0,
                num_idle: 0,
                num_running: 0,
                num_notified: 0,
                shutdown: false,
                threads: Vec::new(),
            }),
            work: Condvar::new(),
            exited: Condvar::new(),
            max_threads: config.max_threads.max(1),
            keep_alive: config.keep_alive,
            thread_name: config.thread_name,
            stack_size: config.stack_size,
            hooks: config.hooks,
            enter,
            num_threads_gauge: AtomicU64::new(0),
            queue_depth_gauge: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> MutexGuard<'_, PoolState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Run `f` on a pool thread.
    pub(crate) fn spawn<F, R>(self: &Arc<Pool>, f: F) -> JoinHandle<R>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        let (task, notified, join) = new_task(BlockingTask(Some(f)), Arc::clone(self), next_task_id(), None);
        // Not in the owned-task list: the queue and `shutdown` account for blocking tasks.
        drop(task);
        self.push(notified);
        join
    }

    /// Run `run(job)` on a pool thread now, for a worker handed off by a blocking join
    /// (`scheduler::join`): at the front of the queue, on an idle
    /// thread if one is waiting, else on a new thread even past `max_blocking_threads`,
    /// because a worker must not wait behind blocking calls. Gives `job` back, unrun,
    /// when the pool has shut down or no thread could be started.
    ///
    /// While the job is queued or running, its thread is left out of the count that
    /// `max_blocking_threads` limits (see [`WorkerLoopSlot`]).
    pub(crate) fn spawn_now<J: Send + 'static>(self: &Arc<Pool>, job: J, run: fn(J)) -> Result<(), J> {
        let mut st = self.lock();
        let ready = if st.shutdown {
            false
        } else if st.num_idle > st.num_notified {
            st.num_notified += 1;
            self.work.notify_one();
            true
        } else {
            self.start_thread(&mut st)
        };
        if !ready {
            return Err(job);
        }
        // Counted under the same lock that notified or started the job's thread, so a
        // `spawn` from here on already sees that thread as taken.
        st.num_worker_loops += 1;
        let slot = WorkerLoopSlot(Arc::clone(self));
        let body = move || {
            // Dropped when the loop returns, or with the closure if it never runs.
            let _slot = slot;
            run(job)
        };
        let (task, notified, join) = new_task(BlockingTask(Some(body)), Arc::clone(self), next_task_id(), None);
        drop((task, join));
        st.queue.push_front(notified);
        self.queue_depth_gauge.store(st.queue.len() as u64, Relaxed);
        Ok(())
    }

    fn push(self: &Arc<Pool>, task: Notified<Arc<Pool>>) {
        let mut st = self.lock();
        if st.shutdown {
            drop(st);
            // Cancelled before it ran: the handle reports it.
            task.0.shutdown();
            return;
        }
        st.queue.push_back(task);
        self.queue_depth_gauge.store(st.queue.len() as u64, Relaxed);
        if st.num_idle > st.num_notified {
            st.num_notified += 1;
            self.work.notify_one();
        } else if st.counted_threads() < self.max_threads && !self.start_thread(&mut st) && st.counted_threads() == 0 {
            // No thread could start (the OS is out of threads or memory), and no thread
            // runs that could take the task later (any there are run handed-off worker
            // loops, which may not end before shutdown): left queued, it would wait for
            // good. Cancel it instead, so its handle reports it (Tokio panics here).
            let task = st.queue.pop_back();
            self.queue_depth_gauge.store(st.queue.len() as u64, Relaxed);
            drop(st);
            if let Some(task) = task {
                task.0.shutdown();
            }
        }
    }

    /// Start one more thread; whether it started.
    fn start_thread(self: &Arc<Pool>, st: &mut PoolState) -> bool {
        // Reap threads that exited on keep-alive, so the list stays short.
        st.threads.retain(|t| !t.is_finished());
        let pool = Arc::clone(self);
        let spawned = std::thread::Builder::new()
            .name(self.thread_name.clone())
            .stack_size(self.stack_size)
            .spawn(move || pool.run());
        match spawned {
            Ok(t) => {
                st.num_threads += 1;
                self.num_threads_gauge.store(st.num_threads as u64, Relaxed);
                st.threads.push(t);
                true
            }
            // Out of threads or memory: the caller decides (a queued task waits for a
            // running thread, or is cancelled when there is none). Never a panic here.
            Err(_) => false,
        }
    }

    /// A pool thread's life, between the start and stop hooks (run in the runtime's
    /// context and outside the lock).
    fn run(self: Arc<Pool>) {
        let _enter = (self.enter)();
        let hooks = self.hooks.clone();
        // Wakes from this thread (a blocking task's completion) name the pool.
        crate::task::wait::mark_thread(crate::task::wait::SRC_BLOCKING);
        hooks.run_thread(|| self.run_tasks());
    }

    /// Run queued tasks until shutdown or the keep-alive runs out.
    fn run_tasks(&self) {
        let mut st = self.lock();
        loop {
            if let Some(task) = st.queue.pop_front() {
                self.queue_depth_gauge.store(st.queue.len() as u64, Relaxed);
                st.num_running += 1;
                drop(st);
                // A ring leased for the last job's wake goes back first: this job may be
                // long, or a worker's loop handed to this thread, which records in the
                // worker's own ring.
                crate::telemetry::events::release_current();
                task.run();
                st = self.lock();
                st.num_running -= 1;
                if st.queue.len() + st.num_running <= st.num_worker_loops && crate::time::clock::any_paused() {
                    // The runtime may have nothing to do now: a paused clock's worker in
                    // the reactor looks again (see `time::clock`). Outside the lock. The
                    // thread is in its runtime's context (`run`), if the runtime was
                    // alive when it started.
                    drop(st);
                    crate::driver::Handle::with_current(|d| d.wake_reactor());
                    st = self.lock();
                }
                if !st.shutdown && st.counted_threads() > self.max_threads {
                    // A worker loop has returned (on this thread or another) and handed
                    // its thread back while the others already fill the limit: this one
                    // leaves, so blocking calls never run on more than `max_threads`
                    // threads at once.
                    break;
                }
                continue;
            }
            if st.shutdown {
                break;
            }
            // An idle pool thread records nothing: its outside ring (if it leased one for
            // a completion's wake) goes back for another thread to take.
            crate::telemetry::events::release_current();
            st.num_idle += 1;
            let (guard, waited) = self.work.wait_timeout(st, self.keep_alive).unwrap_or_else(|e| e.into_inner());
            st = guard;
            st.num_idle -= 1;
            if st.num_notified > 0 {
                st.num_notified -= 1;
            } else if waited.timed_out() && st.queue.is_empty() && !st.shutdown {
                break;
            }
        }
        st.num_threads -= 1;
        self.num_threads_gauge.store(st.num_threads as u64, Relaxed);
        drop(st);
        self.exited.notify_all();
    }

    /// Whether a blocking task is queued or running (for a paused clock's auto-advance).
    /// A worker loop handed to a pool thread by a blocking join is not one: that worker
    /// parks like any other, and the idle protocol accounts for it. Each loop is counted
    /// from its queueing (in the queue) to its slot's release inside its run (in
    /// `num_running` until just after), so the difference never undercounts.
    #[cfg(feature = "test-util")]
    pub(crate) fn is_busy(&self) -> bool {
        let st = self.lock();
        st.queue.len() + st.num_running > st.num_worker_loops
    }

    /// Cancel queued tasks, let running ones finish, join the threads (waiting at most
    /// `timeout`, if given; threads still busy after that are left to exit on their own).
    pub(crate) fn shutdown(&self, timeout: Option<Duration>) {
        let deadline = timeout.map(|t| crate::time::deadline_after(Instant::now(), t));
        let queued = {
            let mut st = self.lock();
            st.shutdown = true;
            self.queue_depth_gauge.store(0, Relaxed);
            std::mem::take(&mut st.queue)
        };
        self.work.notify_all();
        for task in queued {
            task.0.shutdown();
        }
        let mut st = deadline::wait_until_deadline(&self.exited, self.lock(), deadline, |st| st.num_threads == 0);
        let threads = std::mem::take(&mut st.threads);
        drop(st);
        // A thread leaves the count before its stop hook and its thread-locals'
        // destructors run: those get what is left of the timeout too, and no more.
        deadline::join_until(threads, deadline);
    }
}

impl PoolState {
    /// The threads that count against `max_threads`: all but those reserved for worker
    /// loops.
    fn counted_threads(&self) -> usize {
        // Each worker loop has its thread in `num_threads` (notified or started before
        // the count went up, and counted until its job is gone), so this cannot
        // underflow; saturating all the same, since an undercount only starts a thread.
        self.num_threads.saturating_sub(self.num_worker_loops)
    }
}

/// A worker-loop job's claim on a thread outside `max_blocking_threads`, given back when
/// the job's closure is dropped: after the loop returns (or unwinds), or unrun, when
/// shutdown cancels the queued job.
struct WorkerLoopSlot(Arc<Pool>);

impl Drop for WorkerLoopSlot {
    fn drop(&mut self) {
        // Never dropped under the pool's lock: the closure is run or dropped by the task
        // machinery outside it (`run_tasks` and `shutdown` let the lock go first).
        let mut st = self.0.lock();
        st.num_worker_loops -= 1;
    }
}

impl Schedule for Arc<Pool> {
    const BLOCKING: bool = true;
    fn schedule(&self, task: Notified<Self>) {
        self.push(task);
    }
    fn yield_now(&self, task: Notified<Self>) {
        self.push(task);
    }
    fn release(&self, _task: NonNull<Header>) -> bool {
        false
    }
    fn on_complete(&self, _task: NonNull<Header>, _outcome: Outcome) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pool whose threads can never start (a stack no address space can hold).
    fn pool_without_threads() -> Arc<Pool> {
        Arc::new(Pool::new(
            PoolConfig {
                max_threads: 4,
                keep_alive: Duration::from_secs(10),
                thread_name: "volt-test-blocking".into(),
                stack_size: 1 << 46,
                hooks: ThreadHooks::default(),
            },
            Box::new(|| None),
        ))
    }

    #[test]
    fn a_task_no_thread_can_run_is_cancelled_not_left_waiting() {
        let pool = pool_without_threads();
        let ran = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let r = Arc::clone(&ran);
        let handle = pool.spawn(move || r.store(true, Relaxed));
        let err = futures::executor::block_on(handle).expect_err("no thread could run it");
        assert!(err.is_cancelled(), "{err:?}");
        assert!(!ran.load(Relaxed));
        let st = pool.lock();
        assert_eq!((st.queue.len(), st.num_threads), (0, 0));
        assert_eq!(pool.queue_depth_gauge.load(Relaxed), 0);
    }
}
