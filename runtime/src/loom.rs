//! The `crate::loom` shim: one import path for atomics, cells and locks, so that the
//! concurrency code in `task/`, `scheduler/queue.rs`, `scheduler/inject.rs`,
//! `scheduler/idle.rs` and `scheduler/park.rs` is the same code that loom model-checks.
//!
//! Under `--cfg loom` the types come from the `loom` crate; otherwise from `std`. The
//! `UnsafeCell` wrapper gives std the closure-based `with`/`with_mut` API loom needs, so
//! every access to shared non-atomic memory goes through a place loom can track.

#[cfg(loom)]
pub(crate) use loom::{
    cell::UnsafeCell,
    sync::{
        atomic::{fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize},
        Arc, Condvar, Mutex, MutexGuard,
    },
    thread,
};

#[cfg(not(loom))]
#[allow(unused_imports)]
pub(crate) use std::{
    sync::{
        atomic::{fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize},
        Arc, Condvar, Mutex, MutexGuard,
    },
    thread,
};

/// `std::cell::UnsafeCell` with loom's closure API.
#[cfg(not(loom))]
#[derive(Debug)]
pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

#[cfg(not(loom))]
impl<T> UnsafeCell<T> {
    pub(crate) const fn new(value: T) -> UnsafeCell<T> {
        UnsafeCell(std::cell::UnsafeCell::new(value))
    }

    #[inline(always)]
    pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        f(self.0.get())
    }

    #[inline(always)]
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}

/// Locks a mutex, ignoring poison: the data it guards stays consistent across a panic
/// because no user code runs while these locks are held.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    #[cfg(loom)]
    {
        m.lock().unwrap()
    }
    #[cfg(not(loom))]
    {
        m.lock().unwrap_or_else(|e| e.into_inner())
    }
}
