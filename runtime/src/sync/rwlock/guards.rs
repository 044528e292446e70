//! The guards of an [`RwLock`]: shared and exclusive access, borrowed or through an
//! `Arc`, and narrowed (mapped) to a part of the data.

use super::RwLock;
use crate::sync::batch::Sem;
use crate::sync::guard::{found, guard_deref, guard_deref_mut, take_arc, try_narrow};
use std::marker::PhantomData;
use std::sync::Arc;

/// Shared access to an [`RwLock`]'s data, until dropped.
#[must_use = "if unused the RwLock will immediately unlock"]
#[clippy::has_significant_drop]
pub struct RwLockReadGuard<'a, T: ?Sized> {
    pub(super) s: &'a Sem,
    pub(super) data: *const T,
    pub(super) marker: PhantomData<&'a T>,
}

/// Exclusive access to an [`RwLock`]'s data, until dropped.
#[must_use = "if unused the RwLock will immediately unlock"]
#[clippy::has_significant_drop]
pub struct RwLockWriteGuard<'a, T: ?Sized> {
    pub(super) s: &'a Sem,
    pub(super) permits: u32,
    pub(super) data: *mut T,
    pub(super) marker: PhantomData<&'a mut T>,
}

/// An [`RwLockWriteGuard`] narrowed to a part of the data.
#[must_use = "if unused the RwLock will immediately unlock"]
#[clippy::has_significant_drop]
pub struct RwLockMappedWriteGuard<'a, T: ?Sized> {
    pub(super) s: &'a Sem,
    pub(super) permits: u32,
    pub(super) data: *mut T,
    pub(super) marker: PhantomData<&'a mut T>,
}

/// Shared access through an `Arc` ([`RwLock::read_owned`]), possibly narrowed to a part
/// `U` of the data.
#[must_use = "if unused the RwLock will immediately unlock"]
#[clippy::has_significant_drop]
pub struct OwnedRwLockReadGuard<T: ?Sized, U: ?Sized = T> {
    pub(super) lock: Arc<RwLock<T>>,
    pub(super) data: *const U,
}

/// Exclusive access through an `Arc` ([`RwLock::write_owned`]).
#[must_use = "if unused the RwLock will immediately unlock"]
#[clippy::has_significant_drop]
pub struct OwnedRwLockWriteGuard<T: ?Sized> {
    pub(super) lock: Arc<RwLock<T>>,
    pub(super) permits: u32,
    pub(super) data: *mut T,
}

/// An [`OwnedRwLockWriteGuard`] narrowed to a part `U` of the data.
#[must_use = "if unused the RwLock will immediately unlock"]
#[clippy::has_significant_drop]
pub struct OwnedRwLockMappedWriteGuard<T: ?Sized, U: ?Sized = T> {
    pub(super) lock: Arc<RwLock<T>>,
    pub(super) permits: u32,
    pub(super) data: *mut U,
}

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
    /// `f` runs while the access is still exclusive (no reader gets in before it returns).
    pub fn downgrade_map<U: ?Sized, F: FnOnce(&T) -> &U>(this: Self, f: F) -> RwLockReadGuard<'a, U> {
        found(RwLockWriteGuard::try_downgrade_map(this, |t| Some(f(t))))
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
    /// `f` runs while the access is still exclusive (no reader gets in before it returns).
    pub fn downgrade_map<U: ?Sized, F: FnOnce(&T) -> &U>(this: Self, f: F) -> OwnedRwLockReadGuard<T, U> {
        found(OwnedRwLockWriteGuard::try_downgrade_map(this, |t| Some(f(t))))
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
