//! `RwLock`: an async reader-writer lock, Volt's own with Tokio's API and semantics, on
//! the fair semaphore (`batch`): a reader takes one permit, a writer all of them.

mod guards;

pub use guards::{
    OwnedRwLockMappedWriteGuard, OwnedRwLockReadGuard, OwnedRwLockWriteGuard, RwLockMappedWriteGuard, RwLockReadGuard,
    RwLockWriteGuard,
};

use super::batch::{Acquire, Sem};
use super::mutex::TryLockError;
use super::track::{T_RW_READ, T_RW_WRITE};
use std::cell::UnsafeCell;
use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

/// The most readers an `RwLock` admits at once (Tokio's limit).
const MAX_READS: u32 = u32::MAX >> 3;

/// An asynchronous reader-writer lock: many readers or one writer.
///
/// Fair: tasks are served in the order they first waited, so a waiting writer holds up
/// readers that come after it (no writer starves). Cancel-safe: dropping a `read()` or
/// `write()` future gives its place up.
///
/// While a task waits, `Telemetry::tasks()` names the wait `read RwLock (held by task
/// 3)` or `write RwLock (held by 2 readers)`.
///
/// ```
/// # let rt = volt::runtime::Builder::new().worker_threads(1).build().unwrap();
/// # rt.block_on(async {
/// let lock = volt::sync::RwLock::new(5);
/// {
///     let a = lock.read().await;
///     let b = lock.read().await;
///     assert_eq!(*a + *b, 10);
/// }
/// *lock.write().await += 1;
/// assert_eq!(*lock.read().await, 6);
/// # });
/// ```
pub struct RwLock<T: ?Sized> {
    mr: u32,
    s: Sem,
    c: UnsafeCell<T>,
}

// SAFETY: as `std::sync::RwLock`: sending the lock sends the `T` inside.
unsafe impl<T: ?Sized + Send> Send for RwLock<T> {}
// SAFETY: sharing the lock lets readers on several threads hold `&T` (T: Sync) and a
// writer on any thread `&mut T` (T: Send).
unsafe impl<T: ?Sized + Send + Sync> Sync for RwLock<T> {}
fn never_closed(r: Result<(), super::batch::Closed>) {
    if r.is_err() {
        unreachable!("an RwLock's semaphore is never closed")
    }
}

impl<T> RwLock<T> {
    /// A new, unlocked lock. Where it is called is recorded for the console's resources
    /// view.
    #[track_caller]
    pub fn new(value: T) -> RwLock<T> {
        RwLock::with_max_readers(value, MAX_READS)
    }

    /// A new lock that admits at most `max_reads` readers at once.
    ///
    /// # Panics
    /// If `max_reads` is 0 or above `u32::MAX >> 3`.
    #[track_caller]
    pub fn with_max_readers(value: T, max_reads: u32) -> RwLock<T> {
        assert!(max_reads <= MAX_READS, "a lock cannot have more than MAX_READS ({MAX_READS}) readers");
        // Tokio's message, which tests written for it match.
        assert!(max_reads > 0, "a RwLock may not be created with 0 readers");
        RwLock {
            mr: max_reads,
            s: Sem::new(max_reads as usize, Some(std::panic::Location::caller())),
            c: UnsafeCell::new(value),
        }
    }

    /// A new, unlocked lock in a `const` context. Its creation place is not recorded
    /// (`Location::caller` is not `const` on stable Rust).
    #[cfg(not(loom))]
    pub const fn const_new(value: T) -> RwLock<T> {
        RwLock { mr: MAX_READS, s: Sem::const_new(MAX_READS as usize), c: UnsafeCell::new(value) }
    }

    /// [`RwLock::with_max_readers`] in a `const` context.
    ///
    /// # Panics
    /// If `max_reads` is 0 or above `u32::MAX >> 3`.
    #[cfg(not(loom))]
    pub const fn const_with_max_readers(value: T, max_reads: u32) -> RwLock<T> {
        assert!(max_reads > 0, "a RwLock may not be created with 0 readers");
        assert!(max_reads <= MAX_READS, "a lock cannot have more than MAX_READS readers");
        RwLock { mr: max_reads, s: Sem::const_new(max_reads as usize), c: UnsafeCell::new(value) }
    }

    /// The data, taking the lock apart.
    pub fn into_inner(self) -> T {
        self.c.into_inner()
    }
}

impl<T: ?Sized> RwLock<T> {
    /// Shared access, waiting in line for it (behind any waiting writer).
    pub async fn read(&self) -> RwLockReadGuard<'_, T> {
        never_closed(Acquire::new(&self.s, 1, T_RW_READ).await);
        RwLockReadGuard { s: &self.s, data: self.c.get(), marker: PhantomData }
    }

    /// [`RwLock::read`] from synchronous code, blocking the thread.
    ///
    /// # Panics
    /// When called from inside a task.
    #[track_caller]
    pub fn blocking_read(&self) -> RwLockReadGuard<'_, T> {
        super::block_on(self.read())
    }

    /// [`RwLock::read`] through an `Arc`.
    pub async fn read_owned(self: Arc<Self>) -> OwnedRwLockReadGuard<T> {
        never_closed(Acquire::new(&self.s, 1, T_RW_READ).await);
        let data = self.c.get() as *const T;
        OwnedRwLockReadGuard { lock: self, data }
    }

    /// Shared access if no writer holds it or waits for it.
    ///
    /// # Errors
    /// [`TryLockError`] otherwise.
    pub fn try_read(&self) -> Result<RwLockReadGuard<'_, T>, TryLockError> {
        self.s.try_acquire(1, false).map_err(|_| TryLockError(()))?;
        Ok(RwLockReadGuard { s: &self.s, data: self.c.get(), marker: PhantomData })
    }

    /// [`RwLock::try_read`] through an `Arc`.
    ///
    /// # Errors
    /// [`TryLockError`] when it is write-locked or a writer waits.
    pub fn try_read_owned(self: Arc<Self>) -> Result<OwnedRwLockReadGuard<T>, TryLockError> {
        self.s.try_acquire(1, false).map_err(|_| TryLockError(()))?;
        let data = self.c.get() as *const T;
        Ok(OwnedRwLockReadGuard { lock: self, data })
    }

    /// Exclusive access, waiting in line for it.
    pub async fn write(&self) -> RwLockWriteGuard<'_, T> {
        never_closed(Acquire::new(&self.s, self.mr as usize, T_RW_WRITE).await);
        RwLockWriteGuard { s: &self.s, permits: self.mr, data: self.c.get(), marker: PhantomData }
    }

    /// [`RwLock::write`] from synchronous code, blocking the thread.
    ///
    /// # Panics
    /// When called from inside a task.
    #[track_caller]
    pub fn blocking_write(&self) -> RwLockWriteGuard<'_, T> {
        super::block_on(self.write())
    }

    /// [`RwLock::write`] through an `Arc`.
    pub async fn write_owned(self: Arc<Self>) -> OwnedRwLockWriteGuard<T> {
        never_closed(Acquire::new(&self.s, self.mr as usize, T_RW_WRITE).await);
        let (permits, data) = (self.mr, self.c.get());
        OwnedRwLockWriteGuard { lock: self, permits, data }
    }

    /// Exclusive access if nobody holds it or waits for it.
    ///
    /// # Errors
    /// [`TryLockError`] otherwise.
    pub fn try_write(&self) -> Result<RwLockWriteGuard<'_, T>, TryLockError> {
        self.s.try_acquire(self.mr as usize, true).map_err(|_| TryLockError(()))?;
        Ok(RwLockWriteGuard { s: &self.s, permits: self.mr, data: self.c.get(), marker: PhantomData })
    }

    /// [`RwLock::try_write`] through an `Arc`.
    ///
    /// # Errors
    /// [`TryLockError`] when it is locked.
    pub fn try_write_owned(self: Arc<Self>) -> Result<OwnedRwLockWriteGuard<T>, TryLockError> {
        self.s.try_acquire(self.mr as usize, true).map_err(|_| TryLockError(()))?;
        let (permits, data) = (self.mr, self.c.get());
        Ok(OwnedRwLockWriteGuard { lock: self, permits, data })
    }

    /// The data, through `&mut self`: no lock needed.
    pub fn get_mut(&mut self) -> &mut T {
        self.c.get_mut()
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for RwLock<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("RwLock");
        match self.try_read() {
            Ok(g) => d.field("data", &&*g),
            Err(_) => d.field("data", &format_args!("<locked>")),
        };
        d.finish()
    }
}

impl<T: Default> Default for RwLock<T> {
    #[track_caller]
    fn default() -> RwLock<T> {
        RwLock::new(T::default())
    }
}

impl<T> From<T> for RwLock<T> {
    #[track_caller]
    fn from(t: T) -> RwLock<T> {
        RwLock::new(t)
    }
}
