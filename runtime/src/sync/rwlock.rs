//! `RwLock`: an async reader-writer lock, Volt's own with Tokio's API and semantics, on
//! the fair semaphore (`batch`): a reader takes one permit, a writer all of them.

use super::batch::{Acquire, Sem};
use super::guard::{found, guard_deref, guard_deref_mut, take_arc, try_narrow};
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

/// Shared access to an [`RwLock`]'s data, until dropped.
#[must_use = "if unused the RwLock will immediately unlock"]
#[clippy::has_significant_drop]
pub struct RwLockReadGuard<'a, T: ?Sized> {
    s: &'a Sem,
    data: *const T,
    marker: PhantomData<&'a T>,
}

/// Exclusive access to an [`RwLock`]'s data, until dropped.
#[must_use = "if unused the RwLock will immediately unlock"]
#[clippy::has_significant_drop]
pub struct RwLockWriteGuard<'a, T: ?Sized> {
    s: &'a Sem,
    permits: u32,
    data: *mut T,
    marker: PhantomData<&'a mut T>,
}

/// An [`RwLockWriteGuard`] narrowed to a part of the data.
#[must_use = "if unused the RwLock will immediately unlock"]
#[clippy::has_significant_drop]
pub struct RwLockMappedWriteGuard<'a, T: ?Sized> {
    s: &'a Sem,
    permits: u32,
    data: *mut T,
    marker: PhantomData<&'a mut T>,
}

/// Shared access through an `Arc` ([`RwLock::read_owned`]), possibly narrowed to a part
/// `U` of the data.
#[must_use = "if unused the RwLock will immediately unlock"]
#[clippy::has_significant_drop]
pub struct OwnedRwLockReadGuard<T: ?Sized, U: ?Sized = T> {
    lock: Arc<RwLock<T>>,
    data: *const U,
}

/// Exclusive access through an `Arc` ([`RwLock::write_owned`]).
#[must_use = "if unused the RwLock will immediately unlock"]
#[clippy::has_significant_drop]
pub struct OwnedRwLockWriteGuard<T: ?Sized> {
    lock: Arc<RwLock<T>>,
    permits: u32,
    data: *mut T,
}

/// An [`OwnedRwLockWriteGuard`] narrowed to a part `U` of the data.
#[must_use = "if unused the RwLock will immediately unlock"]
#[clippy::has_significant_drop]
pub struct OwnedRwLockMappedWriteGuard<T: ?Sized, U: ?Sized = T> {
    lock: Arc<RwLock<T>>,
    permits: u32,
    data: *mut U,
}

// SAFETY: as `std::sync::RwLock`: sending the lock sends the `T` inside.
unsafe impl<T: ?Sized + Send> Send for RwLock<T> {}
// SAFETY: sharing the lock lets readers on several threads hold `&T` (T: Sync) and a
// writer on any thread `&mut T` (T: Send).
unsafe impl<T: ?Sized + Send + Sync> Sync for RwLock<T> {}
// SAFETY: a read guard is a `&T`.
unsafe impl<T: ?Sized + Sync> Send for RwLockReadGuard<'_, T> {}
// SAFETY: as above.
unsafe impl<T: ?Sized + Sync> Sync for RwLockReadGuard<'_, T> {}
// SAFETY: a read guard is a `&U` and a share of the lock.
unsafe impl<T: ?Sized + Send + Sync, U: ?Sized + Sync> Send for OwnedRwLockReadGuard<T, U> {}
// SAFETY: as above.
unsafe impl<T: ?Sized + Send + Sync, U: ?Sized + Sync> Sync for OwnedRwLockReadGuard<T, U> {}
// SAFETY: a write guard is a `&mut T`, and downgrades to a `&T`.
unsafe impl<T: ?Sized + Send + Sync> Send for RwLockWriteGuard<'_, T> {}
// SAFETY: as above.
unsafe impl<T: ?Sized + Send + Sync> Sync for RwLockWriteGuard<'_, T> {}
// SAFETY: as above.
unsafe impl<T: ?Sized + Send + Sync> Send for RwLockMappedWriteGuard<'_, T> {}
// SAFETY: as above.
unsafe impl<T: ?Sized + Send + Sync> Sync for RwLockMappedWriteGuard<'_, T> {}
// SAFETY: as above, with a share of the lock.
unsafe impl<T: ?Sized + Send + Sync> Send for OwnedRwLockWriteGuard<T> {}
// SAFETY: as above.
unsafe impl<T: ?Sized + Send + Sync> Sync for OwnedRwLockWriteGuard<T> {}
// SAFETY: as above.
unsafe impl<T: ?Sized + Send + Sync, U: ?Sized + Send + Sync> Send for OwnedRwLockMappedWriteGuard<T, U> {}
// SAFETY: as above.
unsafe impl<T: ?Sized + Send + Sync, U: ?Sized + Send + Sync> Sync for OwnedRwLockMappedWriteGuard<T, U> {}

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
        assert!(max_reads > 0, "a lock must admit at least one reader");
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
        assert!(max_reads <= MAX_READS && max_reads > 0, "max_reads must be in 1..=MAX_READS");
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

/// Give back the permits of an exclusive hold (the holder cleared first).
fn release_write(s: &Sem, permits: u32) {
    s.clear_holder();
    s.release(permits as usize);
}

impl<'a, T: ?Sized> RwLockReadGuard<'a, T> {
    /// Narrow the guard to a part of the data.
    pub fn map<U: ?Sized, F: FnOnce(&T) -> &U>(this: Self, f: F) -> RwLockReadGuard<'a, U> {
        found(RwLockReadGuard::try_map(this, |t| Some(f(t))))
    }

    /// Narrow the guard to a part of the data, if `f` finds one; else the guard back.
    ///
    /// # Errors
    /// The guard itself, when `f` returns `None`.
    pub fn try_map<U: ?Sized, F: FnOnce(&T) -> Option<&U>>(this: Self, f: F) -> Result<RwLockReadGuard<'a, U>, Self> {
        try_narrow(
            this,
            |g| f(&**g).map(|d| d as *const U),
            |g, data| RwLockReadGuard { s: g.s, data, marker: PhantomData },
        )
    }
}

impl<'a, T: ?Sized> RwLockWriteGuard<'a, T> {
    /// Narrow the guard to a part of the data.
    pub fn map<U: ?Sized, F: FnOnce(&mut T) -> &mut U>(this: Self, f: F) -> RwLockMappedWriteGuard<'a, U> {
        found(RwLockWriteGuard::try_map(this, |t| Some(f(t))))
    }

    /// Narrow the guard to a part of the data, if `f` finds one; else the guard back.
    ///
    /// # Errors
    /// The guard itself, when `f` returns `None`.
    pub fn try_map<U: ?Sized, F: FnOnce(&mut T) -> Option<&mut U>>(
        this: Self,
        f: F,
    ) -> Result<RwLockMappedWriteGuard<'a, U>, Self> {
        try_narrow(
            this,
            |g| f(&mut **g).map(|d| d as *mut U),
            |g, data| RwLockMappedWriteGuard { s: g.s, permits: g.permits, data, marker: PhantomData },
        )
    }

    /// The guard as a mapped guard over the whole data.
    pub fn into_mapped(this: Self) -> RwLockMappedWriteGuard<'a, T> {
        RwLockWriteGuard::map(this, |t| t)
    }

    /// [`RwLockWriteGuard::downgrade`], narrowing the read guard to a part of the data.
    pub fn downgrade_map<U: ?Sized, F: FnOnce(&T) -> &U>(this: Self, f: F) -> RwLockReadGuard<'a, U> {
        RwLockReadGuard::map(this.downgrade(), f)
    }

    /// [`RwLockWriteGuard::downgrade_map`] if `f` finds a part; else the write guard
    /// back, still exclusive.
    ///
    /// # Errors
    /// The guard itself, when `f` returns `None`.
    pub fn try_downgrade_map<U: ?Sized, F: FnOnce(&T) -> Option<&U>>(
        this: Self,
        f: F,
    ) -> Result<RwLockReadGuard<'a, U>, Self> {
        // SAFETY: `try_narrow` forgets the write guard once it is a read guard.
        try_narrow(this, |g| f(&**g).map(|d| d as *const U), |g, data| unsafe { g.downgraded(data) })
    }

    /// Turn exclusive access into shared access, with no other writer in between;
    /// readers waiting behind can proceed.
    pub fn downgrade(self) -> RwLockReadGuard<'a, T> {
        // SAFETY: `try_narrow` forgets the write guard once it is a read guard.
        found(try_narrow(self, |g| Some(g.data as *const T), |g, data| unsafe { g.downgraded(data) }))
    }

    /// The read guard over `data` this guard turns into: every permit but a reader's is
    /// given back.
    ///
    /// # Safety
    /// The write guard is forgotten right after (its access is no longer exclusive).
    unsafe fn downgraded<U: ?Sized>(&self, data: *const U) -> RwLockReadGuard<'a, U> {
        self.s.clear_holder();
        self.s.release(self.permits as usize - 1);
        RwLockReadGuard { s: self.s, data, marker: PhantomData }
    }
}

impl<'a, T: ?Sized> RwLockMappedWriteGuard<'a, T> {
    /// Narrow further.
    pub fn map<U: ?Sized, F: FnOnce(&mut T) -> &mut U>(this: Self, f: F) -> RwLockMappedWriteGuard<'a, U> {
        found(RwLockMappedWriteGuard::try_map(this, |t| Some(f(t))))
    }

    /// Narrow further, if `f` finds a part; else the guard back.
    ///
    /// # Errors
    /// The guard itself, when `f` returns `None`.
    pub fn try_map<U: ?Sized, F: FnOnce(&mut T) -> Option<&mut U>>(
        this: Self,
        f: F,
    ) -> Result<RwLockMappedWriteGuard<'a, U>, Self> {
        try_narrow(
            this,
            |g| f(&mut **g).map(|d| d as *mut U),
            |g, data| RwLockMappedWriteGuard { s: g.s, permits: g.permits, data, marker: PhantomData },
        )
    }
}

impl<T: ?Sized, U: ?Sized> OwnedRwLockReadGuard<T, U> {
    /// Narrow the guard to a part of the data.
    pub fn map<V: ?Sized, F: FnOnce(&U) -> &V>(this: Self, f: F) -> OwnedRwLockReadGuard<T, V> {
        found(OwnedRwLockReadGuard::try_map(this, |u| Some(f(u))))
    }

    /// Narrow the guard to a part of the data, if `f` finds one; else the guard back.
    ///
    /// # Errors
    /// The guard itself, when `f` returns `None`.
    pub fn try_map<V: ?Sized, F: FnOnce(&U) -> Option<&V>>(
        this: Self,
        f: F,
    ) -> Result<OwnedRwLockReadGuard<T, V>, Self> {
        try_narrow(
            this,
            |g| f(&**g).map(|d| d as *const V),
            // SAFETY: `try_narrow` forgets the guard: its `Arc` moves out once.
            |g, data| OwnedRwLockReadGuard { lock: unsafe { take_arc(&g.lock) }, data },
        )
    }

    /// The lock this guard reads.
    pub fn rwlock(this: &Self) -> &Arc<RwLock<T>> {
        &this.lock
    }
}

impl<T: ?Sized> OwnedRwLockWriteGuard<T> {
    /// Narrow the guard to a part of the data.
    pub fn map<U: ?Sized, F: FnOnce(&mut T) -> &mut U>(this: Self, f: F) -> OwnedRwLockMappedWriteGuard<T, U> {
        found(OwnedRwLockWriteGuard::try_map(this, |t| Some(f(t))))
    }

    /// Narrow the guard to a part of the data, if `f` finds one; else the guard back.
    ///
    /// # Errors
    /// The guard itself, when `f` returns `None`.
    pub fn try_map<U: ?Sized, F: FnOnce(&mut T) -> Option<&mut U>>(
        this: Self,
        f: F,
    ) -> Result<OwnedRwLockMappedWriteGuard<T, U>, Self> {
        try_narrow(
            this,
            |g| f(&mut **g).map(|d| d as *mut U),
            // SAFETY: `try_narrow` forgets the guard: its `Arc` moves out once.
            |g, data| OwnedRwLockMappedWriteGuard { lock: unsafe { take_arc(&g.lock) }, permits: g.permits, data },
        )
    }

    /// The guard as a mapped guard over the whole data.
    pub fn into_mapped(this: Self) -> OwnedRwLockMappedWriteGuard<T> {
        OwnedRwLockWriteGuard::map(this, |t| t)
    }

    /// [`OwnedRwLockWriteGuard::downgrade`], narrowing the read guard to a part of the
    /// data.
    pub fn downgrade_map<U: ?Sized, F: FnOnce(&T) -> &U>(this: Self, f: F) -> OwnedRwLockReadGuard<T, U> {
        OwnedRwLockReadGuard::map(this.downgrade(), f)
    }

    /// [`OwnedRwLockWriteGuard::downgrade_map`] if `f` finds a part; else the write
    /// guard back, still exclusive.
    ///
    /// # Errors
    /// The guard itself, when `f` returns `None`.
    pub fn try_downgrade_map<U: ?Sized, F: FnOnce(&T) -> Option<&U>>(
        this: Self,
        f: F,
    ) -> Result<OwnedRwLockReadGuard<T, U>, Self> {
        // SAFETY: `try_narrow` forgets the write guard once it is a read guard.
        try_narrow(this, |g| f(&**g).map(|d| d as *const U), |g, data| unsafe { g.downgraded(data) })
    }

    /// Turn exclusive access into shared access, with no other writer in between.
    pub fn downgrade(self) -> OwnedRwLockReadGuard<T> {
        // SAFETY: `try_narrow` forgets the write guard once it is a read guard.
        found(try_narrow(self, |g| Some(g.data as *const T), |g, data| unsafe { g.downgraded(data) }))
    }

    /// The read guard over `data` this guard turns into: every permit but a reader's is
    /// given back, and the `Arc` moves to the read guard.
    ///
    /// # Safety
    /// The write guard is forgotten right after, and not used again.
    unsafe fn downgraded<U: ?Sized>(&self, data: *const U) -> OwnedRwLockReadGuard<T, U> {
        self.lock.s.clear_holder();
        self.lock.s.release(self.permits as usize - 1);
        // SAFETY: as the caller promises, the guard is forgotten: the `Arc` moves out once.
        OwnedRwLockReadGuard { lock: unsafe { take_arc(&self.lock) }, data }
    }

    /// The lock this guard writes.
    pub fn rwlock(this: &Self) -> &Arc<RwLock<T>> {
        &this.lock
    }
}

impl<T: ?Sized, U: ?Sized> OwnedRwLockMappedWriteGuard<T, U> {
    /// Narrow further.
    pub fn map<V: ?Sized, F: FnOnce(&mut U) -> &mut V>(this: Self, f: F) -> OwnedRwLockMappedWriteGuard<T, V> {
        found(OwnedRwLockMappedWriteGuard::try_map(this, |u| Some(f(u))))
    }

    /// Narrow further, if `f` finds a part; else the guard back.
    ///
    /// # Errors
    /// The guard itself, when `f` returns `None`.
    pub fn try_map<V: ?Sized, F: FnOnce(&mut U) -> Option<&mut V>>(
        this: Self,
        f: F,
    ) -> Result<OwnedRwLockMappedWriteGuard<T, V>, Self> {
        try_narrow(
            this,
            |g| f(&mut **g).map(|d| d as *mut V),
            // SAFETY: `try_narrow` forgets the guard: its `Arc` moves out once.
            |g, data| OwnedRwLockMappedWriteGuard { lock: unsafe { take_arc(&g.lock) }, permits: g.permits, data },
        )
    }

    /// The lock this guard writes.
    pub fn rwlock(this: &Self) -> &Arc<RwLock<T>> {
        &this.lock
    }
}

guard_deref!(
    RwLockReadGuard<'a, T> => T ['a, T: ?Sized] |g| g.data,
    RwLockWriteGuard<'a, T> => T ['a, T: ?Sized] |g| g.data,
    RwLockMappedWriteGuard<'a, T> => T ['a, T: ?Sized] |g| g.data,
    OwnedRwLockReadGuard<T, U> => U [T: ?Sized, U: ?Sized] |g| g.data,
    OwnedRwLockWriteGuard<T> => T [T: ?Sized] |g| g.data,
    OwnedRwLockMappedWriteGuard<T, U> => U [T: ?Sized, U: ?Sized] |g| g.data,
);

guard_deref_mut!(
    RwLockWriteGuard<'a, T> => T ['a, T: ?Sized] |g| g.data,
    RwLockMappedWriteGuard<'a, T> => T ['a, T: ?Sized] |g| g.data,
    OwnedRwLockWriteGuard<T> => T [T: ?Sized] |g| g.data,
    OwnedRwLockMappedWriteGuard<T, U> => U [T: ?Sized, U: ?Sized] |g| g.data,
);

impl<T: ?Sized> Drop for RwLockReadGuard<'_, T> {
    fn drop(&mut self) {
        self.s.release(1);
    }
}

impl<T: ?Sized, U: ?Sized> Drop for OwnedRwLockReadGuard<T, U> {
    fn drop(&mut self) {
        self.lock.s.release(1);
    }
}

impl<T: ?Sized> Drop for RwLockWriteGuard<'_, T> {
    fn drop(&mut self) {
        release_write(self.s, self.permits);
    }
}

impl<T: ?Sized> Drop for RwLockMappedWriteGuard<'_, T> {
    fn drop(&mut self) {
        release_write(self.s, self.permits);
    }
}

impl<T: ?Sized> Drop for OwnedRwLockWriteGuard<T> {
    fn drop(&mut self) {
        release_write(&self.lock.s, self.permits);
    }
}

impl<T: ?Sized, U: ?Sized> Drop for OwnedRwLockMappedWriteGuard<T, U> {
    fn drop(&mut self) {
        release_write(&self.lock.s, self.permits);
    }
}
