//! Tokio's `sync`, Volt's own: locks, a semaphore, `Notify`, `Barrier`, `OnceCell`, `SetOnce`, and
//! the channels `mpsc`, `oneshot`, `broadcast` and `watch`. Each wait names itself in the
//! console with what it waits for.
//!
//! ```
//! use std::sync::Arc;
//! use volt::sync::{mpsc, Mutex};
//!
//! let rt = volt::Runtime::new()?;
//! rt.block_on(async {
//!     let count = Arc::new(Mutex::new(0));
//!     let (tx, mut rx) = mpsc::channel(16);
//!     for i in 0..4 {
//!         let (count, tx) = (count.clone(), tx.clone());
//!         volt::spawn(async move {
//!             *count.lock().await += 1;
//!             tx.send(i).await.unwrap();
//!         });
//!     }
//!     drop(tx); // the channel closes when its last sender is gone
//!     let mut got = Vec::new();
//!     while let Some(i) = rx.recv().await {
//!         got.push(i);
//!     }
//!     got.sort();
//!     assert_eq!(got, [0, 1, 2, 3]);
//!     assert_eq!(*count.lock().await, 4);
//! });
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! The locks are built as Tokio builds its own: on one fair semaphore (`batch`), with a
//! FIFO queue of waiters behind a mutex (`list`) and lock-free uncontended paths (one
//! compare-and-swap). A waiting task's record names the primitive and the operation, and
//! carries the primitive's resource id; the reader resolves the holder (and its name) at
//! the time of reading through the registry in `track`.

pub mod broadcast;
pub mod mpsc;
pub mod oneshot;
pub mod watch;

mod barrier;
mod batch;
mod guard;
mod list;
mod mutex;
mod notify;
mod once_cell;
mod rwlock;
mod semaphore;
mod set_once;
pub(crate) mod track;
mod waiters;

pub use barrier::{Barrier, BarrierWaitResult};
pub use mutex::{MappedMutexGuard, Mutex, MutexGuard, OwnedMappedMutexGuard, OwnedMutexGuard, TryLockError};
pub use notify::Notify;
pub use once_cell::{OnceCell, SetError};
pub use rwlock::{
    OwnedRwLockMappedWriteGuard, OwnedRwLockReadGuard, OwnedRwLockWriteGuard, RwLock, RwLockMappedWriteGuard,
    RwLockReadGuard, RwLockWriteGuard,
};
pub use semaphore::{AcquireError, OwnedSemaphorePermit, Semaphore, SemaphorePermit, TryAcquireError};
pub use set_once::{SetOnce, SetOnceError};

/// The futures of `sync` that have names: [`Notified`](futures::Notified) and
/// [`OwnedNotified`](futures::OwnedNotified) (as Tokio's `tokio::sync::futures`).
pub mod futures {
    pub use super::notify::{Notified, OwnedNotified};
}

/// Run `f` to completion on this thread, parking it between polls (the `blocking_*`
/// methods).
///
/// # Panics
/// On a worker thread or inside `block_on`: parking the thread would stall every task it
/// drives.
#[track_caller]
pub(crate) fn block_on<F: std::future::Future>(f: F) -> F::Output {
    use std::task::{Context, Poll, Wake, Waker};
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: std::sync::Arc<Self>) {
            self.0.unpark();
        }
        fn wake_by_ref(self: &std::sync::Arc<Self>) {
            self.0.unpark();
        }
    }
    // On a worker or inside `block_on`, as with Tokio: where the thread drives tasks. A
    // `spawn_blocking` closure and a `block_in_place` one may block (the loom models
    // build no runtime).
    #[cfg(not(loom))]
    let drives_tasks = crate::runtime::context::on_worker_thread() || crate::runtime::context::in_block_on();
    #[cfg(loom)]
    let drives_tasks = false;
    assert!(
        !drives_tasks,
        "Cannot block the current thread from within a runtime. This happens because a function attempted \
         to block the current thread while the thread is being used to drive asynchronous tasks."
    );
    let waker = Waker::from(std::sync::Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut f = std::pin::pin!(f);
    loop {
        match f.as_mut().poll(&mut cx) {
            Poll::Ready(v) => return v,
            Poll::Pending => std::thread::park(),
        }
    }
}

/// Block this thread on `f` (the channels' `blocking_*` methods; `what` names the method
/// in the panic).
///
/// # Panics
/// On a runtime's worker thread, which would stop running its tasks.
#[cfg(not(loom))]
#[track_caller]
pub(crate) fn blocking_wait<F: std::future::Future>(what: &str, f: F) -> F::Output {
    use std::task::{Context, Poll};
    if crate::runtime::context::on_worker_thread() || crate::runtime::context::in_block_on() {
        panic!(
            "{what} was called on a runtime worker thread or inside `block_on`, where blocking would stop the \
             tasks it drives; call it from a thread of your own or from `spawn_blocking`, or await the async method"
        );
    }
    let waker = crate::runtime::context::thread_waker();
    let mut cx = Context::from_waker(&waker);
    let mut f = std::pin::pin!(f);
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::park();
    }
}

#[cfg(all(test, loom))]
mod batch_loom;
#[cfg(all(test, loom))]
mod loom_support;
