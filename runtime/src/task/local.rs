//! `LocalSet` and `spawn_local`: `!Send` futures, run on the one thread that drives the
//! set.
//!
//! A local task is an ordinary task cell (`raw.rs`), so its `JoinHandle`, `AbortHandle`,
//! id and wakers are the same as any task's; only its scheduler differs. The set's
//! scheduler (`LocalShared`) queues woken tasks in a locked queue that any thread may push
//! to (a waker may be sent anywhere), and wakes whoever drives the set; the tasks are
//! polled, cancelled and dropped only by the set's own methods, which take `&LocalSet`,
//! and a `LocalSet` is neither `Send` nor `Sync`: so every future stays on the set's
//! thread. That is the contract of `new_local_task`.
//!
//! Dropping the set closes its owned list and cancels every task still in it, dropping
//! each future there and then, on the set's thread. A wake that comes later (from another
//! thread) finds the queue closed and only releases its reference: the future is gone by
//! then.
//!
//! A `LocalRuntime` (`runtime::LocalRuntime`) owns a set and drives it in every
//! `block_on`; its runtime keeps the set's [`RuntimeLocalTasks`], so that `spawn_local`
//! finds it wherever that runtime is current on the thread that built it, not only inside
//! the set.
//!
//! Local tasks are not in the runtime's owned list and keep no statistics, so they do not
//! show in `Telemetry::tasks()` and their waits are not named there; what the future
//! that drives the set (`run_until`'s) waits on is recorded as the driving task's wait.

use super::header::Header;
use super::join::JoinHandle;
use super::list::OwnedTasks;
use super::notified::{Notified, Task};
use super::schedule::{Outcome, Schedule};
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

/// How many local tasks one poll of the set runs before it lets the thread's other work
/// go (it then wakes itself to carry on).
const TICK_BUDGET: usize = 61;

thread_local! {
    /// The set being driven (or entered) on this thread, for `spawn_local`.
    static CURRENT: RefCell<Option<Arc<LocalShared>>> = const { RefCell::new(None) };
    /// How many sets are running their tasks (or `run_until`'s future, or their drop) on
    /// this thread right now: `block_in_place` refuses to run there, as Tokio's does, since
    /// the set's tasks could not move to another thread while it blocks.
    static RUNNING: Cell<u32> = const { Cell::new(0) };
}

/// Whether a `LocalSet` is running its tasks on this thread (see `RUNNING`).
pub(crate) fn running_here() -> bool {
    RUNNING.with(|r| r.get() > 0)
}

/// Counts this thread in `RUNNING` while it lives.
struct Running;

impl Running {
    fn enter() -> Running {
        RUNNING.with(|r| r.set(r.get() + 1));
        Running
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        RUNNING.with(|r| r.set(r.get() - 1));
    }
}

/// A set of tasks that run on the thread that drives it, so their futures need not be
/// `Send` (they may hold an `Rc`, a `RefCell` borrow across an `.await`, ...).
///
/// The tasks run while the set is driven: by [`run_until`](LocalSet::run_until) (or
/// [`block_on`](LocalSet::block_on)) until a given future completes, or by awaiting the
/// set itself until all its tasks have finished. Inside,
/// [`spawn_local`](crate::task::spawn_local) adds tasks. Dropping the set cancels the
/// tasks still in it, dropping their futures on this thread.
///
/// ```
/// use std::rc::Rc;
/// let rt = volt::Runtime::new().unwrap();
/// let local = volt::task::LocalSet::new();
/// let n = local.block_on(&rt, async {
///     let shared = Rc::new(41);
///     let s = shared.clone();
///     volt::task::spawn_local(async move { *s + 1 }).await.unwrap()
/// });
/// assert_eq!(n, 42);
/// ```
pub struct LocalSet {
    shared: Arc<LocalShared>,
    /// Its number ([`LocalSet::id`]), from the runtimes' numbers.
    id: crate::runtime::Id,
    /// Neither `Send` nor `Sync`: its tasks are polled only on its thread.
    _not_send: PhantomData<*const ()>,
}

/// The scheduler of a `LocalSet`'s tasks.
pub(crate) struct LocalShared {
    queue: Mutex<LocalQueue>,
    /// Every task not yet finished, so dropping the set can cancel them.
    owned: OwnedTasks,
}

struct LocalQueue {
    tasks: VecDeque<Notified<Arc<LocalShared>>>,
    /// Whoever drives the set, to wake when a task is queued.
    driver: Option<Waker>,
    /// The set was dropped: wakes release their reference instead of queueing.
    closed: bool,
}

impl LocalShared {
    fn lock(&self) -> MutexGuard<'_, LocalQueue> {
        // Plain pushes and pops under the lock: nothing panics half way.
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn push(&self, task: Notified<Arc<LocalShared>>) {
        let mut q = self.lock();
        if q.closed {
            drop(q);
            // The set is gone and its tasks cancelled: only the reference is left.
            drop(task);
            return;
        }
        q.tasks.push_back(task);
        let driver = q.driver.take();
        drop(q);
        if let Some(w) = driver {
            w.wake();
        }
    }

    /// Spawn `future` as a task of this set. Call on the set's thread only.
    fn spawn<F>(this: &Arc<LocalShared>, future: F) -> JoinHandle<F::Output>
    where
        F: Future + 'static,
        F::Output: 'static,
    {
        // SAFETY: `LocalShared` polls, cancels and drops its tasks only through the
        // `LocalSet`'s methods, on the set's thread (which is this one: the set is
        // entered here, or `&LocalSet` is held here, and it is neither `Send` nor
        // `Sync`); `is_shut_down` is false.
        let (task, notified, join) =
            unsafe { super::raw::new_local_task(future, Arc::clone(this), super::id::next_task_id()) };
        if !this.owned.bind(task.raw()) {
            // The set is being dropped: cancel it here, before it ever runs.
            task.shutdown();
            drop(notified);
            drop(task);
            return join;
        }
        // The owned list keeps this reference until the task completes.
        let _ = task.into_raw();
        this.push(notified);
        join
    }
}

impl Schedule for Arc<LocalShared> {
    fn schedule(&self, task: Notified<Self>) {
        self.push(task);
    }

    fn yield_now(&self, task: Notified<Self>) {
        self.push(task);
    }

    fn release(&self, task: NonNull<Header>) -> bool {
        self.owned.remove(task)
    }

    fn on_complete(&self, _task: NonNull<Header>, _outcome: Outcome) {}
}

/// Makes a set current on this thread (for `spawn_local`), and restores the one before.
///
/// Returned by [`LocalSet::enter`]; dropping it leaves the set.
pub struct LocalEnterGuard {
    prev: Option<Arc<LocalShared>>,
    /// False when the thread's `CURRENT` was already destroyed (a set dropped by a
    /// thread-local's destructor): nothing to restore then.
    entered: bool,
    _not_send: PhantomData<*const ()>,
}

impl Drop for LocalEnterGuard {
    fn drop(&mut self) {
        if !self.entered {
            return;
        }
        let prev = self.prev.take();
        // `try_with`: a set kept in a thread-local may drop after `CURRENT` is gone.
        let _ = CURRENT.try_with(|c| *c.borrow_mut() = prev);
    }
}

impl fmt::Debug for LocalEnterGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalEnterGuard").finish_non_exhaustive()
    }
}

impl LocalSet {
    /// An empty set.
    pub fn new() -> LocalSet {
        LocalSet {
            shared: Arc::new(LocalShared {
                queue: Mutex::new(LocalQueue { tasks: VecDeque::new(), driver: None, closed: false }),
                owned: OwnedTasks::new(1),
            }),
            id: crate::runtime::Id::new(super::id::next_runtime_id()),
            _not_send: PhantomData,
        }
    }

    /// The set's number: unique among the sets and runtimes of the process (it counts
    /// with [`Handle::id`](crate::runtime::Handle::id)), never reused.
    pub fn id(&self) -> crate::runtime::Id {
        self.id
    }

    /// The set as a `LocalRuntime`'s runtime keeps it, spawned onto from this thread.
    pub(crate) fn runtime_tasks(&self) -> RuntimeLocalTasks {
        RuntimeLocalTasks { thread: std::thread::current().id(), set: Arc::clone(&self.shared) }
    }

    /// Make this set the one [`spawn_local`](crate::task::spawn_local) spawns onto, on
    /// this thread, until the guard drops. The tasks still run only while the set is
    /// driven.
    pub fn enter(&self) -> LocalEnterGuard {
        match CURRENT.try_with(|c| c.borrow_mut().replace(Arc::clone(&self.shared))) {
            Ok(prev) => LocalEnterGuard { prev, entered: true, _not_send: PhantomData },
            // The thread is tearing down its thread-locals: `spawn_local` will not find
            // the set, which is being dropped anyway.
            Err(_) => LocalEnterGuard { prev: None, entered: false, _not_send: PhantomData },
        }
    }

    /// Spawn the `!Send` future `future` on this set. It runs when the set is driven
    /// (`run_until`, `block_on`, or awaiting the set); until then it waits.
    #[track_caller]
    pub fn spawn_local<F>(&self, future: F) -> JoinHandle<F::Output>
    where
        F: Future + 'static,
        F::Output: 'static,
    {
        LocalShared::spawn(&self.shared, future)
    }

    /// Run `future` on `rt` (as `Runtime::block_on` does), driving this set's tasks on
    /// this thread meanwhile, until `future` completes. Tasks still unfinished stay in the
    /// set.
    ///
    /// # Panics
    /// Where `Runtime::block_on` panics (on a worker thread of a runtime).
    #[track_caller]
    pub fn block_on<F: Future>(&self, rt: &crate::Runtime, future: F) -> F::Output {
        rt.block_on(self.run_until(future))
    }

    /// Drive this set's tasks until `future` completes, and return its output. `future`
    /// runs inside the set, so it may call [`spawn_local`](crate::task::spawn_local).
    pub async fn run_until<F: Future>(&self, future: F) -> F::Output {
        RunUntil { set: self, future }.await
    }

    /// Run queued tasks, at most `TICK_BUDGET` of them; true if more are queued.
    fn tick(&self) -> bool {
        for _ in 0..TICK_BUDGET {
            let Some(task) = self.shared.lock().tasks.pop_front() else { return false };
            task.run();
        }
        !self.shared.lock().tasks.is_empty()
    }

    /// Register `waker` as the set's driver.
    fn register(&self, waker: &Waker) {
        let mut q = self.shared.lock();
        match &q.driver {
            Some(w) if w.will_wake(waker) => {}
            _ => q.driver = Some(waker.clone()),
        }
    }
}

impl Default for LocalSet {
    fn default() -> LocalSet {
        LocalSet::new()
    }
}

impl fmt::Debug for LocalSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalSet").field("tasks", &self.shared.owned.len()).finish()
    }
}

/// Awaiting the set drives its tasks until none is left (every task finished).
impl Future for LocalSet {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let _enter = self.enter();
        let _running = Running::enter();
        self.register(cx.waker());
        if self.tick() {
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        if self.shared.owned.len() == 0 {
            return Poll::Ready(());
        }
        crate::task::wait::record_label("local set tasks");
        Poll::Pending
    }
}

impl Drop for LocalSet {
    fn drop(&mut self) {
        // Entered, so a future whose `Drop` spawns a local task finds the set (its task
        // is refused by the closed list, and cancelled at once).
        let _enter = self.enter();
        let _running = Running::enter();
        self.shared.lock().closed = true;
        // Every unfinished task is cancelled here, on the set's thread: its future is
        // dropped now.
        self.shared.owned.close_and_pop(|t| {
            let task = Task::<Arc<LocalShared>>::from_raw(t);
            task.shutdown();
        });
        let (queued, driver) = {
            let mut q = self.shared.lock();
            (std::mem::take(&mut q.tasks), q.driver.take())
        };
        // Only references are left in the queue now (the futures are gone).
        drop(queued);
        drop(driver);
    }
}

/// `LocalSet::run_until`'s future.
struct RunUntil<'a, F> {
    set: &'a LocalSet,
    future: F,
}

impl<F: Future> Future for RunUntil<'_, F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // SAFETY: `future` is structurally pinned: it is never moved out of `self`, and
        // `RunUntil` has no `Drop` of its own nor an `Unpin` impl that would break that.
        let this = unsafe { self.get_unchecked_mut() };
        let set = this.set;
        let _enter = set.enter();
        let _running = Running::enter();
        set.register(cx.waker());
        // SAFETY: as above.
        let future = unsafe { Pin::new_unchecked(&mut this.future) };
        if let Poll::Ready(out) = future.poll(cx) {
            return Poll::Ready(out);
        }
        if set.tick() {
            // More is queued than one turn runs: come back at once.
            cx.waker().wake_by_ref();
        }
        Poll::Pending
    }
}

/// The tasks of a `LocalRuntime`: its set, and the thread that built it, the only one
/// that may spawn onto it (or poll, cancel or drop its tasks: the set is the
/// `LocalRuntime`'s, which is neither `Send` nor `Sync`).
pub(crate) struct RuntimeLocalTasks {
    thread: std::thread::ThreadId,
    set: Arc<LocalShared>,
}

impl RuntimeLocalTasks {
    /// Spawn `future` onto the runtime's set.
    ///
    /// # Panics
    /// On any thread but the one that built the runtime.
    #[track_caller]
    pub(crate) fn spawn<F>(&self, future: F) -> JoinHandle<F::Output>
    where
        F: Future + 'static,
        F::Output: 'static,
    {
        if std::thread::current().id() != self.thread {
            panic!("Local tasks can only be spawned on a LocalRuntime from the thread the runtime was created on");
        }
        LocalShared::spawn(&self.set, future)
    }
}

/// Spawn `future` on the [`LocalSet`] being driven (or entered) on this thread; give it
/// back if there is none.
pub(crate) fn spawn_on_current_set<F>(future: F) -> Result<JoinHandle<F::Output>, F>
where
    F: Future + 'static,
    F::Output: 'static,
{
    match CURRENT.try_with(|c| c.borrow().clone()).ok().flatten() {
        Some(shared) => Ok(LocalShared::spawn(&shared, future)),
        None => Err(future),
    }
}
