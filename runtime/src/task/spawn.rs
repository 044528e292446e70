//! Spawning from a task's point of view: `spawn`, `spawn_blocking`, `block_in_place` and
//! the task [`Builder`]. The one part of `task` that reaches into the runtime (its
//! context, its handle, the blocking pool and a worker's hand-off).

use super::coop;
use super::join::JoinHandle;
#[cfg(not(loom))]
use super::local;
use std::future::Future;

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
    let shared = crate::scheduler::handle::current_handle().expect(
        "volt::task::spawn_blocking called outside a Volt runtime: call it from a task or inside `Runtime::block_on`",
    );
    shared.blocking.spawn(f)
}

/// Spawn the `!Send` future `future` onto this thread's local tasks: the
/// [`LocalSet`](super::local::LocalSet) being driven (or entered) on this thread, or else
/// the [`LocalRuntime`](crate::runtime::LocalRuntime) that is current here (inside its
/// `block_on`, in any of its tasks, or under its `enter` guard). It runs on this thread,
/// when the set or the runtime is driven.
///
/// # Panics
/// Outside both; or where a `LocalRuntime` is current on another thread than the one that
/// built it (through its `Handle`).
#[cfg(not(loom))]
#[track_caller]
pub fn spawn_local<F>(future: F) -> JoinHandle<F::Output>
where
    F: Future + 'static,
    F::Output: 'static,
{
    let future = match local::spawn_on_current_set(future) {
        Ok(join) => return join,
        Err(future) => future,
    };
    match crate::scheduler::handle::current_shared().as_deref().and_then(|s| s.local.get()) {
        Some(tasks) => tasks.spawn(future),
        None => panic!("`spawn_local` called from outside of a `task::LocalSet` or `runtime::LocalRuntime`"),
    }
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
/// Inside a [`LocalSet`](super::local::LocalSet) that is running (in a local task, in `run_until`'s future, in
/// the drop of a local task's future), and on a current-thread runtime, as Tokio's does:
/// the other tasks there cannot move to another thread, so they would all wait.
#[track_caller]
pub fn block_in_place<F, R>(f: F) -> R
where
    F: FnOnce() -> R,
{
    #[cfg(not(loom))]
    {
        // A current-thread runtime has no other thread to run its tasks while `f` blocks.
        let current_thread = crate::scheduler::handle::current_shared().is_some_and(|s| s.current_thread);
        if local::running_here() || current_thread {
            panic!("can call blocking only when running on the multi-threaded runtime");
        }
        // If no thread could be started to take the worker, `f` runs on it anyway: a
        // stall of this worker rather than a failure.
        let _ = crate::scheduler::join::hand_off_current_worker();
        // A blocking closure runs whole: nothing in it should see a cooperative budget
        // run out (see `coop`).
        let _budget = coop::Budget::unlimited();
        // And it is outside any `block_on` (it may block, or start a runtime of its own).
        let _out = crate::runtime::context::InBlockOn::leave();
        f()
    }
    #[cfg(loom)]
    f()
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
        let shared = crate::scheduler::handle::current_handle()
            .expect("volt::task::Builder::spawn called outside a Volt runtime: use `spawn_on` with a `Handle`");
        crate::scheduler::handle::Handle::spawn_named(&shared, future, self.name, std::panic::Location::caller())
    }

    /// Spawn onto the runtime of `handle`, from any thread.
    #[track_caller]
    pub fn spawn_on<F>(self, future: F, handle: &crate::runtime::Handle) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        crate::scheduler::handle::Handle::spawn_named(&handle.shared, future, self.name, std::panic::Location::caller())
    }
}
