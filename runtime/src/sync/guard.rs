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
