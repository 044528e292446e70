//! `task_local!`: values scoped to a future (`LocalKey::scope`) or a closure
//! (`LocalKey::sync_scope`), read with `with`, `try_with` and `get`.
//!
//! Each key is a thread-local `RefCell<Option<T>>`. A scope swaps its value into the
//! thread-local for as long as it runs (a closure), or around each poll of its future, and
//! swaps it back out afterwards, on unwinding too (a guard does it). So the value moves
//! with the future from thread to thread, whichever worker polls it, and nested scopes of
//! one key see their own value and restore the outer one when they end. Nothing is
//! allocated: the value lives in the scope's future between polls.
//!
//! The scoped future is dropped inside its scope as well, so its destructors can still
//! read the value.

use std::cell::RefCell;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// Declare task-local keys: `volt::task_local! { pub static NAME: Type; }`.
///
/// Each key is a [`LocalKey`](crate::task::LocalKey): give it a value for the length of a
/// future with [`LocalKey::scope`](crate::task::LocalKey::scope) or of a closure with
/// [`LocalKey::sync_scope`](crate::task::LocalKey::sync_scope), and read it inside with
/// `with`, `try_with` or `get`.
///
/// ```
/// volt::task_local! {
///     static REQUEST_ID: u64;
/// }
/// let rt = volt::runtime::Builder::new_current_thread().build().unwrap();
/// rt.block_on(REQUEST_ID.scope(7, async {
///     volt::task::yield_now().await;
///     assert_eq!(REQUEST_ID.get(), 7);
/// }));
/// assert!(REQUEST_ID.try_with(|_| ()).is_err());
/// ```
#[macro_export]
macro_rules! task_local {
    () => {};
    ($(#[$attr:meta])* $vis:vis static $name:ident: $t:ty; $($rest:tt)*) => {
        $crate::__task_local_key!($(#[$attr])* $vis $name, $t);
        $crate::task_local!($($rest)*);
    };
    ($(#[$attr:meta])* $vis:vis static $name:ident: $t:ty) => {
        $crate::__task_local_key!($(#[$attr])* $vis $name, $t);
    };
}

/// One key of `task_local!`.
#[doc(hidden)]
#[macro_export]
macro_rules! __task_local_key {
    ($(#[$attr:meta])* $vis:vis $name:ident, $t:ty) => {
        $(#[$attr])*
        $vis static $name: $crate::task::LocalKey<$t> = {
            ::std::thread_local! {
                static __VOLT_TASK_LOCAL: ::std::cell::RefCell<::std::option::Option<$t>> =
                    const { ::std::cell::RefCell::new(::std::option::Option::None) };
            }
            $crate::task::LocalKey::__new(&__VOLT_TASK_LOCAL)
        };
    };
}

/// A key declared with [`task_local!`](crate::task_local): a value per scope, visible to
/// the code the scope runs.
pub struct LocalKey<T: 'static> {
    inner: &'static std::thread::LocalKey<RefCell<Option<T>>>,
}

/// [`LocalKey::try_with`] outside any scope of the key.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct AccessError {
    _private: (),
}

impl fmt::Debug for AccessError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AccessError").finish()
    }
}

impl fmt::Display for AccessError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("task-local value not set")
    }
}

impl std::error::Error for AccessError {}

/// Why a scope could not put its value in.
enum ScopeError {
    /// The key is borrowed by a `with` that runs this scope.
    Borrowed,
    /// The thread's locals are being destroyed.
    Destroyed,
}

impl ScopeError {
    #[track_caller]
    fn panic(self) -> ! {
        match self {
            ScopeError::Borrowed => panic!(
                "volt: a task-local scope was entered while the same key is borrowed by `with` (a scope of a key \
                 inside its own `with` closure)"
            ),
            ScopeError::Destroyed => {
                panic!("volt: a task-local scope was entered while the thread's locals are being destroyed")
            }
        }
    }
}

impl<T: 'static> LocalKey<T> {
    /// Used by `task_local!`.
    #[doc(hidden)]
    pub const fn __new(inner: &'static std::thread::LocalKey<RefCell<Option<T>>>) -> LocalKey<T> {
        LocalKey { inner }
    }

    /// A future that runs `f` with this key set to `value` during each of its polls (and
    /// while `f` is dropped). Nested scopes of the key see their own value.
    pub fn scope<F: Future>(&'static self, value: T, f: F) -> TaskLocalFuture<T, F> {
        TaskLocalFuture { key: self, slot: Some(value), future: Some(f) }
    }

    /// Run `f` with this key set to `value`, then restore what was there.
    ///
    /// # Panics
    /// Inside a [`LocalKey::with`] of the same key.
    #[track_caller]
    pub fn sync_scope<F: FnOnce() -> R, R>(&'static self, value: T, f: F) -> R {
        let mut slot = Some(value);
        match self.enter(&mut slot, f) {
            Ok(r) => r,
            Err(e) => e.panic(),
        }
    }

    /// Swap `slot` into the thread-local, run `f`, swap it back (on unwinding too).
    fn enter<F: FnOnce() -> R, R>(&'static self, slot: &mut Option<T>, f: F) -> Result<R, ScopeError> {
        struct Restore<'a, T: 'static> {
            key: &'static std::thread::LocalKey<RefCell<Option<T>>>,
            slot: &'a mut Option<T>,
        }
        impl<T: 'static> Drop for Restore<'_, T> {
            fn drop(&mut self) {
                // The swap in succeeded, so the cell is reachable; a `with` that borrows it
                // has ended with `f`.
                let _ = self.key.try_with(|c| {
                    if let Ok(mut v) = c.try_borrow_mut() {
                        std::mem::swap(self.slot, &mut *v);
                    }
                });
            }
        }
        self.inner
            .try_with(|c| {
                c.try_borrow_mut().map(|mut v| std::mem::swap(slot, &mut *v)).map_err(|_| ScopeError::Borrowed)
            })
            .map_err(|_| ScopeError::Destroyed)??;
        let _restore = Restore { key: self.inner, slot };
        Ok(f())
    }

    /// Call `f` with a reference to the key's value.
    ///
    /// # Panics
    /// Outside any scope of the key.
    #[track_caller]
    pub fn with<F: FnOnce(&T) -> R, R>(&'static self, f: F) -> R {
        match self.try_with(f) {
            Ok(r) => r,
            Err(_) => panic!("cannot access a task-local storage value without setting it first"),
        }
    }

    /// Call `f` with a reference to the key's value, or an error outside any scope of the
    /// key.
    pub fn try_with<F: FnOnce(&T) -> R, R>(&'static self, f: F) -> Result<R, AccessError> {
        let f = std::cell::Cell::new(Some(f));
        self.inner
            .try_with(|c| {
                let v = c.try_borrow().ok()?;
                let v = v.as_ref()?;
                f.take().map(|f| f(v))
            })
            .ok()
            .flatten()
            .ok_or(AccessError { _private: () })
    }
}

impl<T: Clone + 'static> LocalKey<T> {
    /// A copy of the key's value.
    ///
    /// # Panics
    /// Outside any scope of the key.
    #[track_caller]
    pub fn get(&'static self) -> T {
        self.with(|v| v.clone())
    }

    /// A copy of the key's value, or an error outside any scope of the key.
    pub fn try_get(&'static self) -> Result<T, AccessError> {
        self.try_with(|v| v.clone())
    }
}

impl<T: 'static> fmt::Debug for LocalKey<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad("LocalKey { .. }")
    }
}

/// The future [`LocalKey::scope`] returns: `F` run with the key set.
pub struct TaskLocalFuture<T: 'static, F> {
    key: &'static LocalKey<T>,
    /// The value between polls (`None` while a poll runs: it is in the thread-local then).
    slot: Option<T>,
    /// Structurally pinned; `None` once dropped inside the scope.
    future: Option<F>,
}

impl<T: 'static, F> TaskLocalFuture<T, F> {
    /// Take the value out; `None` if it was taken already. The future stays: polled
    /// again, it runs with the key unset (as if outside any scope of it), as with Tokio.
    pub fn take_value(self: Pin<&mut Self>) -> Option<T> {
        // SAFETY: only `slot`, which is not structurally pinned, is touched: moving the
        // value out is fine.
        let this = unsafe { self.get_unchecked_mut() };
        this.slot.take()
    }

    /// Drop the future in place inside the scope (its destructor may read the value).
    fn drop_future(&mut self) {
        if self.future.is_none() {
            return;
        }
        let key = self.key;
        let future = &mut self.future;
        // SAFETY: `future` is structurally pinned in `self`, which is pinned (or being
        // dropped); assigning `None` through the pin drops it in place without moving it.
        let clear = || unsafe { Pin::new_unchecked(future) }.set(None);
        // With the value taken, the scope is entered empty: the key reads as unset.
        if key.enter(&mut self.slot, clear).is_err() {
            // The key cannot be entered (its `with` runs this drop, or the thread's locals
            // are gone): drop the future outside the scope rather than panic in a drop.
            // SAFETY: as above.
            unsafe { Pin::new_unchecked(&mut self.future) }.set(None);
        }
    }
}

impl<T: 'static, F: Future> Future for TaskLocalFuture<T, F> {
    type Output = F::Output;

    #[track_caller]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // SAFETY: `future` is only ever reached through a new pin here and dropped in
        // place; `slot` is not structurally pinned.
        let this = unsafe { self.get_unchecked_mut() };
        let key = this.key;
        let future = &mut this.future;
        // After `take_value` the scope is entered empty: the future runs with the key
        // unset.
        let poll = || match future.as_mut() {
            // SAFETY: structurally pinned, see above.
            Some(f) => unsafe { Pin::new_unchecked(f) }.poll(cx),
            None => panic!("`TaskLocalFuture` polled after completion"),
        };
        let res = match key.enter(&mut this.slot, poll) {
            Ok(r) => r,
            Err(e) => e.panic(),
        };
        if res.is_ready() {
            // Done: drop the inner future now, inside the scope.
            this.drop_future();
        }
        res
    }
}

impl<T: 'static, F> Drop for TaskLocalFuture<T, F> {
    fn drop(&mut self) {
        self.drop_future();
    }
}

impl<T: fmt::Debug + 'static, F> fmt::Debug for TaskLocalFuture<T, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TaskLocalFuture").field("value", &self.slot).finish_non_exhaustive()
    }
}
