//! `Semaphore`: Volt's own, with Tokio's API and semantics (fair, cancel-safe; see
//! `batch`).

use super::batch::{Acquire, Sem, TryErr};
use super::track::T_SEM_ACQUIRE;
use std::fmt;
use std::sync::Arc;

/// A counting semaphore: a set of permits tasks acquire before going on, and give back
/// by dropping the permit.
///
/// Fair: waiters are served in the order they first waited, and a waiter that needs many
/// permits holds up smaller requests behind it until it has them all. Cancel-safe: a
/// dropped `acquire` future gives its place up, with any permits it had collected.
///
/// While a task waits, `Telemetry::tasks()` names the wait `acquire Semaphore (0 of 10
/// free)`.
///
/// ```
/// # let rt = volt::runtime::Builder::new().worker_threads(1).build().unwrap();
/// # rt.block_on(async {
/// use volt::sync::Semaphore;
/// let sem = Semaphore::new(2);
/// let a = sem.acquire().await.unwrap();
/// let _b = sem.acquire().await.unwrap();
/// assert!(sem.try_acquire().is_err());
/// drop(a);
/// assert_eq!(sem.available_permits(), 1);
/// # });
/// ```
pub struct Semaphore {
    ll: Sem,
}

/// A permit from a [`Semaphore`]; dropping it gives its permits back.
#[must_use]
#[clippy::has_significant_drop]
pub struct SemaphorePermit<'a> {
    sem: &'a Semaphore,
    /// A `usize`, as Tokio's: permits of several `acquire_many` calls merge past
    /// `u32::MAX`.
    permits: usize,
}

/// A permit from a [`Semaphore`] held through an `Arc`; dropping it gives its permits
/// back.
#[must_use]
#[clippy::has_significant_drop]
pub struct OwnedSemaphorePermit {
    sem: Arc<Semaphore>,
    /// A `usize`, as Tokio's: permits of several `acquire_many` calls merge past
    /// `u32::MAX`.
    permits: usize,
}

/// The semaphore was closed: no permit can be acquired.
#[derive(Debug, PartialEq, Eq, Clone)]
pub struct AcquireError(());

impl fmt::Display for AcquireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("semaphore closed")
    }
}

impl std::error::Error for AcquireError {}

/// Why a `try_acquire` failed.
#[derive(Debug, PartialEq, Eq, Clone)]
pub enum TryAcquireError {
    /// The semaphore was closed.
    Closed,
    /// Not enough permits are free (or other tasks wait for them first).
    NoPermits,
}

impl TryAcquireError {
    /// Whether the semaphore was closed.
    pub fn is_closed(&self) -> bool {
        matches!(self, TryAcquireError::Closed)
    }

    /// Whether there were not enough permits.
    pub fn is_no_permits(&self) -> bool {
        matches!(self, TryAcquireError::NoPermits)
    }
}

impl fmt::Display for TryAcquireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TryAcquireError::Closed => f.write_str("semaphore closed"),
            TryAcquireError::NoPermits => f.write_str("no permits available"),
        }
    }
}

impl std::error::Error for TryAcquireError {}

impl From<TryErr> for TryAcquireError {
    fn from(e: TryErr) -> TryAcquireError {
        match e {
            TryErr::Closed => TryAcquireError::Closed,
            TryErr::NoPermits => TryAcquireError::NoPermits,
        }
    }
}

impl fmt::Debug for Semaphore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.ll.fmt(f)
    }
}

impl Semaphore {
    /// The most permits a semaphore can hold: `usize::MAX >> 3`.
    pub const MAX_PERMITS: usize = super::batch::MAX_PERMITS;

    /// A semaphore with `permits` permits. Where it is called is recorded for the
    /// console's resources view.
    ///
    /// # Panics
    /// If `permits` exceeds [`Semaphore::MAX_PERMITS`].
    #[track_caller]
    pub fn new(permits: usize) -> Semaphore {
        Semaphore { ll: Sem::new(permits, Some(std::panic::Location::caller())) }
    }

    /// A semaphore with `permits` permits, in a `const` context (a `static`). Its
    /// creation place is not recorded (`Location::caller` is not `const` on stable).
    ///
    /// # Panics
    /// If `permits` exceeds [`Semaphore::MAX_PERMITS`].
    #[cfg(not(loom))]
    pub const fn const_new(permits: usize) -> Semaphore {
        Semaphore { ll: Sem::const_new(permits) }
    }

    /// Permits free now.
    pub fn available_permits(&self) -> usize {
        self.ll.available()
    }

    /// Add `n` permits, serving waiters first, in order.
    ///
    /// # Panics
    /// If the free permits would exceed [`Semaphore::MAX_PERMITS`].
    pub fn add_permits(&self, n: usize) {
        self.ll.add_permits(n);
    }

    /// Take up to `n` free permits away for good; returns how many were taken.
    pub fn forget_permits(&self, n: usize) -> usize {
        self.ll.forget_permits(n)
    }

    /// Acquire one permit, waiting in line for it.
    ///
    /// Cancel-safe: dropping the future gives its place in line up.
    ///
    /// # Errors
    /// [`AcquireError`] once the semaphore is closed.
    pub async fn acquire(&self) -> Result<SemaphorePermit<'_>, AcquireError> {
        self.acquire_many(1).await
    }

    /// Acquire `n` permits at once, waiting in line for them; while it waits at the head
    /// of the line, permits released collect in its place (and go on to the next waiter
    /// if the future is dropped).
    ///
    /// # Errors
    /// [`AcquireError`] once the semaphore is closed.
    pub async fn acquire_many(&self, n: u32) -> Result<SemaphorePermit<'_>, AcquireError> {
        Acquire::new(&self.ll, n as usize, T_SEM_ACQUIRE).await.map_err(|_| AcquireError(()))?;
        Ok(SemaphorePermit { sem: self, permits: n as usize })
    }

    /// Acquire one permit if one is free and no task waits before this one.
    ///
    /// # Errors
    /// [`TryAcquireError::NoPermits`] or [`TryAcquireError::Closed`].
    pub fn try_acquire(&self) -> Result<SemaphorePermit<'_>, TryAcquireError> {
        self.try_acquire_many(1)
    }

    /// Acquire `n` permits if they are free and no task waits before this one.
    ///
    /// # Errors
    /// [`TryAcquireError::NoPermits`] or [`TryAcquireError::Closed`].
    pub fn try_acquire_many(&self, n: u32) -> Result<SemaphorePermit<'_>, TryAcquireError> {
        self.ll.try_acquire(n as usize, false)?;
        Ok(SemaphorePermit { sem: self, permits: n as usize })
    }

    /// [`Semaphore::acquire`] through an `Arc`: the permit owns a reference.
    ///
    /// # Errors
    /// [`AcquireError`] once the semaphore is closed.
    pub async fn acquire_owned(self: Arc<Self>) -> Result<OwnedSemaphorePermit, AcquireError> {
        self.acquire_many_owned(1).await
    }

    /// [`Semaphore::acquire_many`] through an `Arc`.
    ///
    /// # Errors
    /// [`AcquireError`] once the semaphore is closed.
    pub async fn acquire_many_owned(self: Arc<Self>, n: u32) -> Result<OwnedSemaphorePermit, AcquireError> {
        Acquire::new(&self.ll, n as usize, T_SEM_ACQUIRE).await.map_err(|_| AcquireError(()))?;
        Ok(OwnedSemaphorePermit { sem: self, permits: n as usize })
    }

    /// [`Semaphore::try_acquire`] through an `Arc`.
    ///
    /// # Errors
    /// [`TryAcquireError::NoPermits`] or [`TryAcquireError::Closed`].
    pub fn try_acquire_owned(self: Arc<Self>) -> Result<OwnedSemaphorePermit, TryAcquireError> {
        self.try_acquire_many_owned(1)
    }

    /// [`Semaphore::try_acquire_many`] through an `Arc`.
    ///
    /// # Errors
    /// [`TryAcquireError::NoPermits`] or [`TryAcquireError::Closed`].
    pub fn try_acquire_many_owned(self: Arc<Self>, n: u32) -> Result<OwnedSemaphorePermit, TryAcquireError> {
        self.ll.try_acquire(n as usize, false)?;
        Ok(OwnedSemaphorePermit { sem: self, permits: n as usize })
    }

    /// [`Semaphore::acquire`] from a thread outside the runtime (a `spawn_blocking`
    /// closure, a thread of your own), blocking it until the permit comes.
    ///
    /// # Errors
    /// [`AcquireError`] once the semaphore is closed.
    ///
    /// # Panics
    /// When called from inside a task or `block_on` (it would block a worker).
    #[track_caller]
    pub fn blocking_acquire(&self) -> Result<SemaphorePermit<'_>, AcquireError> {
        super::block_on(self.acquire())
    }

    /// [`Semaphore::acquire_many`], blocking the thread (see
    /// [`Semaphore::blocking_acquire`]).
    ///
    /// # Errors
    /// [`AcquireError`] once the semaphore is closed.
    ///
    /// # Panics
    /// When called from inside a task or `block_on`.
    #[track_caller]
    pub fn blocking_acquire_many(&self, n: u32) -> Result<SemaphorePermit<'_>, AcquireError> {
        super::block_on(self.acquire_many(n))
    }

    /// [`Semaphore::acquire_owned`], blocking the thread (see
    /// [`Semaphore::blocking_acquire`]).
    ///
    /// # Errors
    /// [`AcquireError`] once the semaphore is closed.
    ///
    /// # Panics
    /// When called from inside a task or `block_on`.
    #[track_caller]
    pub fn blocking_acquire_owned(self: Arc<Self>) -> Result<OwnedSemaphorePermit, AcquireError> {
        super::block_on(self.acquire_owned())
    }

    /// [`Semaphore::acquire_many_owned`], blocking the thread (see
    /// [`Semaphore::blocking_acquire`]).
    ///
    /// # Errors
    /// [`AcquireError`] once the semaphore is closed.
    ///
    /// # Panics
    /// When called from inside a task or `block_on`.
    #[track_caller]
    pub fn blocking_acquire_many_owned(self: Arc<Self>, n: u32) -> Result<OwnedSemaphorePermit, AcquireError> {
        super::block_on(self.acquire_many_owned(n))
    }

    /// Close the semaphore: every waiting acquire fails with [`AcquireError`], and so
    /// does every acquire from now on. Permits held stay valid.
    pub fn close(&self) {
        self.ll.close();
    }

    /// Whether [`Semaphore::close`] was called.
    pub fn is_closed(&self) -> bool {
        self.ll.is_closed()
    }
}

impl<'a> SemaphorePermit<'a> {
    /// Keep the permits from the semaphore for good: they are not given back.
    pub fn forget(mut self) {
        self.sem.ll.forgotten(self.permits);
        self.permits = 0;
    }

    /// How many permits this holds.
    pub fn num_permits(&self) -> usize {
        self.permits
    }

    /// Take `other`'s permits into this one.
    ///
    /// # Panics
    /// If the two come from different semaphores.
    #[track_caller]
    pub fn merge(&mut self, mut other: Self) {
        assert!(std::ptr::eq(self.sem, other.sem), "merging permits from different semaphores");
        self.permits += other.permits;
        other.permits = 0;
    }

    /// Split `n` permits off into a new permit; `None` if this holds fewer.
    pub fn split(&mut self, n: usize) -> Option<Self> {
        if n > self.permits {
            return None;
        }
        self.permits -= n;
        Some(SemaphorePermit { sem: self.sem, permits: n })
    }

    /// The semaphore the permit comes from.
    pub fn semaphore(&self) -> &'a Semaphore {
        self.sem
    }
}

impl OwnedSemaphorePermit {
    /// Keep the permits from the semaphore for good: they are not given back.
    pub fn forget(mut self) {
        self.sem.ll.forgotten(self.permits);
        self.permits = 0;
    }

    /// How many permits this holds.
    pub fn num_permits(&self) -> usize {
        self.permits
    }

    /// Take `other`'s permits into this one.
    ///
    /// # Panics
    /// If the two come from different semaphores.
    #[track_caller]
    pub fn merge(&mut self, mut other: Self) {
        assert!(Arc::ptr_eq(&self.sem, &other.sem), "merging permits from different semaphores");
        self.permits += other.permits;
        other.permits = 0;
    }

    /// Split `n` permits off into a new permit; `None` if this holds fewer.
    pub fn split(&mut self, n: usize) -> Option<Self> {
        if n > self.permits {
            return None;
        }
        self.permits -= n;
        Some(OwnedSemaphorePermit { sem: self.sem.clone(), permits: n })
    }

    /// The semaphore the permit comes from.
    pub fn semaphore(&self) -> &Arc<Semaphore> {
        &self.sem
    }
}

impl Drop for SemaphorePermit<'_> {
    fn drop(&mut self) {
        self.sem.ll.release(self.permits);
    }
}

impl Drop for OwnedSemaphorePermit {
    fn drop(&mut self) {
        self.sem.ll.release(self.permits);
    }
}

impl fmt::Debug for SemaphorePermit<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SemaphorePermit").field("permits", &self.permits).finish()
    }
}

impl fmt::Debug for OwnedSemaphorePermit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OwnedSemaphorePermit").field("permits", &self.permits).finish()
    }
}
