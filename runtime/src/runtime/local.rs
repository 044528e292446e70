//! [`LocalRuntime`]: a current-thread runtime whose tasks need not be `Send`.
//!
//! It is a current-thread [`Runtime`] and a [`LocalSet`] that every `block_on` drives.
//! The runtime keeps the set's tasks (`RuntimeLocalTasks`), so `spawn_local` finds them
//! wherever the runtime is current on the thread that built it: inside `block_on`, in
//! any of its tasks (`Send` or not), under `enter`. The `LocalRuntime` is neither `Send`
//! nor `Sync`, so its set is only ever driven, and its tasks dropped, on that thread.

use super::{Builder, EnterGuard, Handle, Runtime, RuntimeMetrics};
use crate::task::{JoinHandle, LocalSet};
use std::future::Future;
use std::io;
use std::time::Duration;

/// Options for [`Builder::build_local`]. There are none yet; `LocalOptions::default()`
/// is the one value.
#[derive(Default, Debug)]
#[non_exhaustive]
pub struct LocalOptions {
    /// Neither `Send` nor `Sync`, as Tokio's.
    _not_send: std::marker::PhantomData<*mut u8>,
}

/// A runtime that runs `!Send` futures: [`spawn_local`](crate::task::spawn_local) works
/// anywhere it is current, with no [`LocalSet`] of the program's own.
///
/// It is a current-thread runtime (its tasks, timers and I/O run on the thread inside
/// `block_on`), built with [`Builder::build_local`] or [`LocalRuntime::new`]; `spawn`
/// and its [`Handle`] work as a current-thread runtime's. It stays on the thread that
/// built it: `spawn_local` through its handle on another thread panics.
///
/// ```
/// use std::rc::Rc;
/// let rt = volt::runtime::LocalRuntime::new()?;
/// let shared = Rc::new(41);
/// let s = Rc::clone(&shared);
/// let task = rt.spawn_local(async move { *s + 1 });     // runs at the next block_on
/// assert_eq!(rt.block_on(task).unwrap(), 42);
/// # Ok::<(), std::io::Error>(())
/// ```
///
/// Dropping it drops every local task's future on this thread, then shuts the runtime
/// down as dropping a [`Runtime`] does.
#[derive(Debug)]
pub struct LocalRuntime {
    /// Dropped first, inside the runtime's context.
    tasks: Option<LocalSet>,
    /// `None` only once `shutdown_timeout` took it.
    rt: Option<Runtime>,
}

impl LocalRuntime {
    /// A local runtime with every driver on: the same as
    /// `Builder::new_current_thread().enable_all().build_local(LocalOptions::default())`.
    pub fn new() -> io::Result<LocalRuntime> {
        Builder::new_current_thread().enable_all().build_local(LocalOptions::default())
    }

    /// Wrap `rt`, a current-thread runtime just built, on the thread that built it.
    pub(crate) fn from_runtime(rt: Runtime) -> LocalRuntime {
        let tasks = LocalSet::new();
        let set = rt.handle().shared.local.set(tasks.runtime_tasks());
        debug_assert!(set.is_ok(), "a runtime becomes local once, as it is built");
        LocalRuntime { tasks: Some(tasks), rt: Some(rt) }
    }

    fn rt(&self) -> &Runtime {
        self.rt.as_ref().expect("the runtime lives until the LocalRuntime is shut down")
    }

    fn tasks(&self) -> &LocalSet {
        self.tasks.as_ref().expect("the tasks live until the LocalRuntime is shut down")
    }

    /// The runtime's handle: `spawn` (`Send` futures) and `block_on` from anywhere;
    /// `spawn_local` under its `enter` on this thread only.
    pub fn handle(&self) -> &Handle {
        self.rt().handle()
    }

    /// Spawn the `!Send` future `future`. It runs on this thread, the next time the
    /// runtime is driven (`block_on`).
    #[track_caller]
    pub fn spawn_local<F>(&self, future: F) -> JoinHandle<F::Output>
    where
        F: Future + 'static,
        F::Output: 'static,
    {
        self.tasks().spawn_local(future)
    }

    /// Run the blocking function `f` on the runtime's blocking pool.
    #[track_caller]
    pub fn spawn_blocking<F, R>(&self, f: F) -> JoinHandle<R>
    where
        F: FnOnce() -> R + Send + 'static,
        R: Send + 'static,
    {
        self.rt().spawn_blocking(f)
    }

    /// Run `future` to completion on this thread, running the runtime's tasks (local and
    /// not), timers and I/O meanwhile, as [`Runtime::block_on`] does on a current-thread
    /// runtime.
    ///
    /// # Panics
    /// Inside another runtime's task or `block_on` future, as [`Runtime::block_on`].
    #[track_caller]
    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        self.rt().block_on(self.tasks().run_until(future))
    }

    /// Make this runtime the thread's current one until the guard drops: `spawn`,
    /// `spawn_local` and the leaf futures' constructors find it.
    pub fn enter(&self) -> EnterGuard<'_> {
        self.rt().enter()
    }

    /// Tokio's runtime metrics.
    pub fn metrics(&self) -> RuntimeMetrics {
        self.rt().metrics()
    }

    /// Shut down, waiting at most `timeout` for the runtime's threads (see
    /// [`Runtime::shutdown_timeout`]); every local task's future is dropped first, here.
    pub fn shutdown_timeout(mut self, timeout: Duration) {
        self.drop_tasks();
        if let Some(rt) = self.rt.take() {
            rt.shutdown_timeout(timeout);
        }
    }

    /// Shut down without waiting for anything (see [`Runtime::shutdown_background`]).
    pub fn shutdown_background(self) {
        self.shutdown_timeout(Duration::ZERO);
    }

    /// Drop every local task's future, inside the runtime (a `Drop` of a future may
    /// spawn, or deregister a socket).
    fn drop_tasks(&mut self) {
        if let (Some(tasks), Some(rt)) = (self.tasks.take(), &self.rt) {
            let _in = rt.enter();
            drop(tasks);
        }
    }
}

impl Drop for LocalRuntime {
    fn drop(&mut self) {
        self.drop_tasks();
        // Then the runtime itself, as the field drops.
    }
}

// As `Runtime`: the runtime's state stays consistent across a panic that unwinds past it.
impl std::panic::UnwindSafe for LocalRuntime {}
impl std::panic::RefUnwindSafe for LocalRuntime {}
