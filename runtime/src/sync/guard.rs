//! What the guards of `Mutex` and `RwLock` share: narrowing a guard to a part of its
//! data (the guards' `map` and `try_map`), moving the lock's `Arc` out of an owned guard
//! that is narrowed, and the `Deref`, `DerefMut`, `Debug` and `Display` impls.

use std::mem::ManuallyDrop;
use std::sync::Arc;

/// Narrow `guard` to the part of its data that `part` finds (a pointer into the data):
/// `rebuild` makes the narrower guard out of the old one, which is then forgotten, so
/// that its hold on the lock moves to the new guard instead of being given back. When
/// `part` finds nothing, the guard comes back in `Err`; when it panics, the guard is
/// dropped as usual (the lock is let go).
pub(super) fn try_narrow<G, P, N>(
    mut guard: G,
    part: impl FnOnce(&mut G) -> Option<P>,
    rebuild: impl FnOnce(&G, P) -> N,
) -> Result<N, G> {
    match part(&mut guard) {
        Some(p) => {
            let guard = ManuallyDrop::new(guard);
            Ok(rebuild(&guard, p))
        }
        None => Err(guard),
    }
}

/// The narrower guard of a `try_narrow` whose part is always found (a `map`).
pub(super) fn found<N, G>(r: Result<N, G>) -> N {
    match r {
        Ok(n) => n,
        Err(_) => unreachable!("`map` always finds its part"),
    }
}

/// Move the `Arc` of a lock out of `arc`, a field of an owned guard that is being
/// narrowed (in the `rebuild` of [`try_narrow`], which forgets the guard).
///
/// # Safety
/// The guard holding `arc` is never dropped, and `arc` is not read again: the `Arc`
/// moves out exactly once.
pub(super) unsafe fn take_arc<T: ?Sized>(arc: &Arc<T>) -> Arc<T> {
    // SAFETY: as the caller promises, this read is the only move out of `arc`, and the
    // original is never dropped.
    unsafe { std::ptr::read(arc) }
}

/// `Deref`, `Debug` and `Display` for guards: `$g` (with generics `[$gen]`) reaches a
/// `$t` through the pointer `|$s| $ptr` finds in it.
macro_rules! guard_deref {
    ($($g:ty => $t:ident [$($gen:tt)*] |$s:ident| $ptr:expr),* $(,)?) => {$(
        impl<$($gen)*> std::ops::Deref for $g {
            type Target = $t;
            fn deref(&self) -> &$t {
                let $s = self;
                // SAFETY: the pointer points into the lock's data, which the guard keeps
                // alive, and the guard holds the permits that make this access (shared
                // or exclusive) the lock's.
                unsafe { &*$ptr }
            }
        }
        impl<$($gen)*> std::fmt::Debug for $g where $t: std::fmt::Debug {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                std::fmt::Debug::fmt(&**self, f)
            }
        }
        impl<$($gen)*> std::fmt::Display for $g where $t: std::fmt::Display {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                std::fmt::Display::fmt(&**self, f)
            }
        }
    )*};
}

/// `DerefMut` for the guards of exclusive access, as [`guard_deref`] reaches the data.
macro_rules! guard_deref_mut {
    ($($g:ty => $t:ident [$($gen:tt)*] |$s:ident| $ptr:expr),* $(,)?) => {$(
        impl<$($gen)*> std::ops::DerefMut for $g {
            fn deref_mut(&mut self) -> &mut $t {
                let $s = self;
                // SAFETY: the guard holds every permit: the access is exclusive, and
                // `&mut self` makes this the only use of the guard.
                unsafe { &mut *$ptr }
            }
        }
    )*};
}

pub(super) use {guard_deref, guard_deref_mut};

#[cfg(all(test, not(loom)))]
mod tests {
    use crate::sync::{
        MappedMutexGuard, Mutex, MutexGuard, OwnedMappedMutexGuard, OwnedMutexGuard, OwnedRwLockMappedWriteGuard,
        OwnedRwLockReadGuard, OwnedRwLockWriteGuard, RwLock, RwLockMappedWriteGuard, RwLockReadGuard, RwLockWriteGuard,
    };
    use std::sync::Arc;

    type Pair = (u8, String);

    fn pair() -> Pair {
        (1, String::from("a"))
    }

    /// Every mutex guard narrowed, or not (a `try_map` that finds nothing gives the guard
    /// back), still holds the lock, and lets it go once when dropped; an owned guard's
    /// `Arc` moves to the narrower guard, neither leaked nor dropped twice.
    #[test]
    fn narrowed_mutex_guards_hold_the_lock_until_dropped() {
        let m = Arc::new(Mutex::new(pair()));
        let g = MutexGuard::try_map(m.try_lock().unwrap(), |_| None::<&mut u8>).unwrap_err();
        let g = MappedMutexGuard::try_map(MutexGuard::map(g, |t| t), |_| None::<&mut u8>).unwrap_err();
        let mut s = MappedMutexGuard::map(g, |t| &mut t.1);
        s.push('b');
        assert!(m.try_lock().is_err(), "a mapped guard holds the lock");
        drop(s);

        let g = OwnedMutexGuard::try_map(m.clone().try_lock_owned().unwrap(), |_| None::<&mut u8>).unwrap_err();
        let g = OwnedMappedMutexGuard::try_map(OwnedMutexGuard::map(g, |t| t), |_| None::<&mut u8>).unwrap_err();
        let mut n = OwnedMappedMutexGuard::map(g, |t| &mut t.0);
        *n += 1;
        assert!(m.try_lock().is_err(), "an owned mapped guard holds the lock");
        assert_eq!(Arc::strong_count(&m), 2);
        drop(n);
        assert_eq!(Arc::strong_count(&m), 1, "the guard's Arc was dropped once");
        assert_eq!(*m.try_lock().unwrap(), (2, String::from("ab")));
    }

    /// As above for the read-write lock's guards, downgrades included: a downgraded or
    /// read guard keeps writers out and lets readers in.
    #[test]
    fn narrowed_rwlock_guards_hold_the_lock_until_dropped() {
        let l = Arc::new(RwLock::new(pair()));
        let r = RwLockReadGuard::try_map(l.try_read().unwrap(), |_| None::<&u8>).unwrap_err();
        let r = RwLockReadGuard::map(r, |t| &t.1);
        assert!(l.try_write().is_err() && l.try_read().is_ok(), "a mapped read guard is a reader");
        drop(r);

        let w = RwLockWriteGuard::try_map(l.try_write().unwrap(), |_| None::<&mut u8>).unwrap_err();
        let w = RwLockMappedWriteGuard::try_map(RwLockWriteGuard::map(w, |t| t), |_| None::<&mut u8>).unwrap_err();
        RwLockMappedWriteGuard::map(w, |t| &mut t.1).push('b');
        let w = RwLockWriteGuard::try_downgrade_map(l.try_write().unwrap(), |_| None::<&u8>).unwrap_err();
        assert!(l.try_read().is_err(), "a failed try_downgrade_map keeps the write lock");
        let r = RwLockWriteGuard::downgrade_map(w, |t| &t.0);
        assert!(l.try_write().is_err() && l.try_read().is_ok(), "a downgraded guard is a reader");
        drop(r);

        let r = OwnedRwLockReadGuard::try_map(l.clone().try_read_owned().unwrap(), |_| None::<&u8>).unwrap_err();
        let r = OwnedRwLockReadGuard::map(r, |t| &t.1);
        assert_eq!(*r, "ab");
        drop(r);
        let w = OwnedRwLockWriteGuard::try_map(l.clone().try_write_owned().unwrap(), |_| None::<&mut u8>).unwrap_err();
        let w = OwnedRwLockMappedWriteGuard::try_map(OwnedRwLockWriteGuard::into_mapped(w), |_| None::<&mut u8>)
            .unwrap_err();
        *OwnedRwLockMappedWriteGuard::map(w, |t| &mut t.0) += 1;
        let w = OwnedRwLockWriteGuard::try_downgrade_map(l.clone().try_write_owned().unwrap(), |_| None::<&u8>)
            .unwrap_err();
        let r = OwnedRwLockWriteGuard::try_downgrade_map(w, |t| Some(&t.1)).unwrap();
        assert!(l.try_write().is_err() && l.try_read().is_ok(), "an owned downgraded guard is a reader");
        assert_eq!(Arc::strong_count(&l), 2);
        drop(r);
        let r = l.clone().try_write_owned().unwrap().downgrade();
        drop(r);
        assert_eq!(Arc::strong_count(&l), 1, "each guard's Arc was dropped once");
        assert_eq!(*l.try_read().unwrap(), (2, String::from("ab")));
    }
}
