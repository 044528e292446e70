//! `Mutex`: an async mutex, Volt's own with Tokio's API and semantics, on the fair
//! semaphore (`batch`) with one permit.

use super::batch::{Acquire, Sem};
use super::guard::{found, guard_deref, guard_deref_mut, take_arc, try_narrow};
use super::track::T_MUTEX_LOCK;
use std::cell::UnsafeCell;
use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

/// An asynchronous mutex: `lock().await` waits without blocking the thread, and the
/// guard may be held across an `.await`.
///
/// Fair: tasks get the lock in the order they first waited for it (a task that waits is
/// never overtaken by a later `lock` or `try_lock`). Cancel-safe: dropping a `lock()`
/// future gives its place in line up.
///
/// While a task waits, `Telemetry::tasks()` names the wait `lock Mutex (held by task 17
/// "writer")`: the task that holds the lock at the time of reading.
///
/// ```
/// # let rt = volt::runtime::Builder::new().worker_threads(1).build().unwrap();
/// # rt.block_on(async {
/// use std::sync::Arc;
/// let m = Arc::new(volt::sync::Mutex::new(0));
/// let m2 = m.clone();
/// volt::spawn(async move { *m2.lock().await += 1 }).await.unwrap();
/// assert_eq!(*m.lock().await, 1);
/// # });
/// ```
pub struct Mutex<T: ?Sized> {
    s: Sem,
    c: UnsafeCell<T>,
}

/// The lock of a [`Mutex`], held until dropped.
#[must_use = "if unused the Mutex will immediately unlock"]
#[clippy::has_significant_drop]
pub struct MutexGuard<'a, T: ?Sized> {
    lock: &'a Mutex<T>,
}

/// The lock of a [`Mutex`] held through an `Arc` ([`Mutex::lock_owned`]).
#[must_use = "if unused the Mutex will immediately unlock"]
#[clippy::has_significant_drop]
pub struct OwnedMutexGuard<T: ?Sized> {
    lock: Arc<Mutex<T>>,
}

/// A [`MutexGuard`] narrowed to a part of the data ([`MutexGuard::map`]).
#[must_use = "if unused the Mutex will immediately unlock"]
#[clippy::has_significant_drop]
pub struct MappedMutexGuard<'a, T: ?Sized> {
    s: &'a Sem,
    data: *mut T,
    marker: PhantomData<&'a mut T>,
}

/// An [`OwnedMutexGuard`] narrowed to a part of the data ([`OwnedMutexGuard::map`]).
#[must_use = "if unused the Mutex will immediately unlock"]
#[clippy::has_significant_drop]
pub struct OwnedMappedMutexGuard<T: ?Sized, U: ?Sized = T> {
    data: *mut U,
    lock: Arc<Mutex<T>>,
}

/// `try_lock` found the mutex locked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TryLockError(pub(super) ());

impl fmt::Display for TryLockError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("operation would block")
    }
}

impl std::error::Error for TryLockError {}

// SAFETY: the mutex hands `&mut T` to one holder at a time, so it may be shared and sent
// whenever `T` may be sent (as `std::sync::Mutex`).
unsafe impl<T: ?Sized + Send> Send for Mutex<T> {}
// SAFETY: as above.
unsafe impl<T: ?Sized + Send> Sync for Mutex<T> {}
// SAFETY: a shared guard gives `&T` only, so sharing it needs `T: Sync`.
unsafe impl<T: ?Sized + Send + Sync> Sync for MutexGuard<'_, T> {}
// SAFETY: as above.
unsafe impl<T: ?Sized + Send + Sync> Sync for OwnedMutexGuard<T> {}
// SAFETY: a mapped guard is `&mut T` for the lock's life.
unsafe impl<T: ?Sized + Sync> Sync for MappedMutexGuard<'_, T> {}
// SAFETY: as above.
unsafe impl<T: ?Sized + Send> Send for MappedMutexGuard<'_, T> {}
// SAFETY: the owned mapped guard is `&mut U` and a reference to the mutex.
unsafe impl<T: ?Sized + Send + Sync, U: ?Sized + Send + Sync> Sync for OwnedMappedMutexGuard<T, U> {}
// SAFETY: as above.
unsafe impl<T: ?Sized + Send, U: ?Sized + Send> Send for OwnedMappedMutexGuard<T, U> {}

fn never_closed<T>(r: Result<T, super::batch::Closed>) -> T {
    match r {
        Ok(t) => t,
        Err(_) => unreachable!("a mutex's semaphore is never closed"),
    }
}

impl<T> Mutex<T> {
    /// A new, unlocked mutex. Where it is called is recorded for the console's
    /// resources view.
    #[track_caller]
    pub fn new(t: T) -> Mutex<T> {
        Mutex { s: Sem::new(1, Some(std::panic::Location::caller())), c: UnsafeCell::new(t) }
    }

    /// A new, unlocked mutex in a `const` context (a `static`). Its creation place is
    /// not recorded (`Location::caller` is not `const` on stable Rust).
    #[cfg(not(loom))]
    pub const fn const_new(t: T) -> Mutex<T> {
        Mutex { s: Sem::const_new(1), c: UnsafeCell::new(t) }
    }

    /// The data, taking the mutex apart.
    pub fn into_inner(self) -> T {
        self.c.into_inner()
    }
}

impl<T: ?Sized> Mutex<T> {
    /// Lock, waiting in line for it.
    ///
    /// Cancel-safe: dropping the future gives its place in line up.
    pub async fn lock(&self) -> MutexGuard<'_, T> {
        never_closed(Acquire::new(&self.s, 1, T_MUTEX_LOCK).await);
        MutexGuard { lock: self }
    }

    /// Lock from synchronous code, blocking the thread until it is ours.
    ///
    /// # Panics
    /// When called from inside a task (it would block a worker).
    #[track_caller]
    pub fn blocking_lock(&self) -> MutexGuard<'_, T> {
        super::block_on(self.lock())
    }

    /// [`Mutex::blocking_lock`] through an `Arc`.
    ///
    /// # Panics
    /// When called from inside a task.
    #[track_caller]
    pub fn blocking_lock_owned(self: Arc<Self>) -> OwnedMutexGuard<T> {
        super::block_on(self.lock_owned())
    }

    /// Lock through an `Arc`: the guard owns a reference and is `'static`.
    pub async fn lock_owned(self: Arc<Self>) -> OwnedMutexGuard<T> {
        never_closed(Acquire::new(&self.s, 1, T_MUTEX_LOCK).await);
        OwnedMutexGuard { lock: self }
    }

    /// Lock if the mutex is free and no task waits for it.
    ///
    /// # Errors
    /// [`TryLockError`] when it is locked.
    pub fn try_lock(&self) -> Result<MutexGuard<'_, T>, TryLockError> {
        match self.s.try_acquire(1, true) {
            Ok(()) => Ok(MutexGuard { lock: self }),
            Err(_) => Err(TryLockError(())),
        }
    }

    /// [`Mutex::try_lock`] through an `Arc`.
    ///
    /// # Errors
    /// [`TryLockError`] when it is locked.
    pub fn try_lock_owned(self: Arc<Self>) -> Result<OwnedMutexGuard<T>, TryLockError> {
        match self.s.try_acquire(1, true) {
            Ok(()) => Ok(OwnedMutexGuard { lock: self }),
            Err(_) => Err(TryLockError(())),
        }
    }

    /// The data, through `&mut self`: no lock needed.
    pub fn get_mut(&mut self) -> &mut T {
        self.c.get_mut()
    }

    /// Unlock: the holder's release (after the guard is gone).
    fn unlock(&self) {
        self.s.clear_holder();
        self.s.release(1);
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for Mutex<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Mutex");
        match self.try_lock() {
            Ok(g) => d.field("data", &&*g),
            Err(_) => d.field("data", &format_args!("<locked>")),
        };
        d.finish()
    }
}

impl<T: Default> Default for Mutex<T> {
    #[track_caller]
    fn default() -> Mutex<T> {
        Mutex::new(T::default())
    }
}

impl<T> From<T> for Mutex<T> {
    #[track_caller]
    fn from(t: T) -> Mutex<T> {
        Mutex::new(t)
    }
}

impl<'a, T: ?Sized> MutexGuard<'a, T> {
    /// Narrow the guard to a part of the data.
    pub fn map<U: ?Sized, F: FnOnce(&mut T) -> &mut U>(this: Self, f: F) -> MappedMutexGuard<'a, U> {
        found(MutexGuard::try_map(this, |t| Some(f(t))))
    }

    /// Narrow the guard to a part of the data, if `f` finds one; else the guard back.
    ///
    /// # Errors
    /// The guard itself, when `f` returns `None`.
    pub fn try_map<U: ?Sized, F: FnOnce(&mut T) -> Option<&mut U>>(
        this: Self,
        f: F,
    ) -> Result<MappedMutexGuard<'a, U>, Self> {
        try_narrow(
            this,
            |g| f(&mut **g).map(|d| d as *mut U),
            |g, data| MappedMutexGuard { s: &g.lock.s, data, marker: PhantomData },
        )
    }

    /// The mutex this guard locks.
    pub fn mutex(this: &Self) -> &'a Mutex<T> {
        this.lock
    }
}

impl<T: ?Sized> Drop for MutexGuard<'_, T> {
    fn drop(&mut self) {
        self.lock.unlock();
    }
}

impl<T: ?Sized> OwnedMutexGuard<T> {
    /// Narrow the guard to a part of the data.
    pub fn map<U: ?Sized, F: FnOnce(&mut T) -> &mut U>(this: Self, f: F) -> OwnedMappedMutexGuard<T, U> {
        found(OwnedMutexGuard::try_map(this, |t| Some(f(t))))
    }

    /// Narrow the guard to a part of the data, if `f` finds one; else the guard back.
    ///
    /// # Errors
    /// The guard itself, when `f` returns `None`.
    pub fn try_map<U: ?Sized, F: FnOnce(&mut T) -> Option<&mut U>>(
        this: Self,
        f: F,
    ) -> Result<OwnedMappedMutexGuard<T, U>, Self> {
        try_narrow(
            this,
            |g| f(&mut **g).map(|d| d as *mut U),
            // SAFETY: `try_narrow` forgets the guard: its `Arc` moves out once.
            |g, data| OwnedMappedMutexGuard { data, lock: unsafe { take_arc(&g.lock) } },
        )
    }

    /// The mutex this guard locks.
    pub fn mutex(this: &Self) -> &Arc<Mutex<T>> {
        &this.lock
    }
}

impl<T: ?Sized> Drop for OwnedMutexGuard<T> {
    fn drop(&mut self) {
        self.lock.unlock();
    }
}

impl<'a, T: ?Sized> MappedMutexGuard<'a, T> {
    /// Narrow further.
    pub fn map<U: ?Sized, F: FnOnce(&mut T) -> &mut U>(this: Self, f: F) -> MappedMutexGuard<'a, U> {
        found(MappedMutexGuard::try_map(this, |t| Some(f(t))))
    }

    /// Narrow further, if `f` finds a part; else the guard back.
    ///
    /// # Errors
    /// The guard itself, when `f` returns `None`.
    pub fn try_map<U: ?Sized, F: FnOnce(&mut T) -> Option<&mut U>>(
        this: Self,
        f: F,
    ) -> Result<MappedMutexGuard<'a, U>, Self> {
        try_narrow(
            this,
            |g| f(&mut **g).map(|d| d as *mut U),
            |g, data| MappedMutexGuard { s: g.s, data, marker: PhantomData },
        )
    }
}

impl<T: ?Sized> Drop for MappedMutexGuard<'_, T> {
    fn drop(&mut self) {
        self.s.clear_holder();
        self.s.release(1);
    }
}

impl<T: ?Sized, U: ?Sized> OwnedMappedMutexGuard<T, U> {
    /// Narrow further.
    pub fn map<S: ?Sized, F: FnOnce(&mut U) -> &mut S>(this: Self, f: F) -> OwnedMappedMutexGuard<T, S> {
        found(OwnedMappedMutexGuard::try_map(this, |u| Some(f(u))))
    }

    /// Narrow further, if `f` finds a part; else the guard back.
    ///
    /// # Errors
    /// The guard itself, when `f` returns `None`.
    pub fn try_map<S: ?Sized, F: FnOnce(&mut U) -> Option<&mut S>>(
        this: Self,
        f: F,
    ) -> Result<OwnedMappedMutexGuard<T, S>, Self> {
        try_narrow(
            this,
            |g| f(&mut **g).map(|d| d as *mut S),
            // SAFETY: `try_narrow` forgets the guard: its `Arc` moves out once.
            |g, data| OwnedMappedMutexGuard { data, lock: unsafe { take_arc(&g.lock) } },
        )
    }

    /// The mutex this guard locks.
    pub fn mutex(this: &Self) -> &Arc<Mutex<T>> {
        &this.lock
    }
}

impl<T: ?Sized, U: ?Sized> Drop for OwnedMappedMutexGuard<T, U> {
    fn drop(&mut self) {
        self.lock.unlock();
    }
}

guard_deref!(
    MutexGuard<'a, T> => T ['a, T: ?Sized] |g| g.lock.c.get(),
    OwnedMutexGuard<T> => T [T: ?Sized] |g| g.lock.c.get(),
    MappedMutexGuard<'a, T> => T ['a, T: ?Sized] |g| g.data,
    OwnedMappedMutexGuard<T, U> => U [T: ?Sized, U: ?Sized] |g| g.data,
);

guard_deref_mut!(
    MutexGuard<'a, T> => T ['a, T: ?Sized] |g| g.lock.c.get(),
    OwnedMutexGuard<T> => T [T: ?Sized] |g| g.lock.c.get(),
    MappedMutexGuard<'a, T> => T ['a, T: ?Sized] |g| g.data,
    OwnedMappedMutexGuard<T, U> => U [T: ?Sized, U: ?Sized] |g| g.data,
);

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    /// A wait registers its mutex for readers only when the waiting task keeps
    /// statistics (the runtime records events): an unwatched program allocates no probe.
    #[test]
    fn only_a_watched_wait_registers_its_mutex() {
        for ring in [None, Some(64)] {
            let mut b = crate::runtime::Builder::new();
            b.worker_threads(1);
            if let Some(n) = ring {
                b.event_ring(n);
            }
            let rt = b.build().unwrap();
            let m = Arc::new(Mutex::new(()));
            let g = m.try_lock().unwrap();
            let m2 = m.clone();
            let h = rt.spawn(async move { drop(m2.lock().await) });
            let deadline = Instant::now() + Duration::from_secs(10);
            while m.s.queue_and_probe().0 == 0 {
                assert!(Instant::now() < deadline, "the task never queued");
                std::thread::sleep(Duration::from_millis(1));
            }
            assert_eq!(m.s.queue_and_probe().1, ring.is_some(), "event ring {ring:?}");
            drop(g);
            rt.block_on(h).unwrap();
        }
    }
}
