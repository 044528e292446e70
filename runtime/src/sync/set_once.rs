//! `SetOnce`: a value set once, which tasks can wait for. Volt's own, with Tokio's API
//! and semantics (Tokio 1.47's `sync::SetOnce`).
//!
//! Setters take a small lock, so that a `set` that fails does so only once the value is
//! there to read; the value is published with its flag, and a `Notify` wakes every task
//! in [`SetOnce::wait`]. A waiter makes its `Notified` before it looks at the flag
//! again, and a `Notified` sees every `notify_waiters` after its creation, so a set
//! that lands between the two is never missed.

use super::notify::Notify;
use super::track::T_SET_ONCE;
use crate::loom::{lock, AtomicBool, Mutex};
use std::cell::UnsafeCell;
use std::fmt;
use std::mem::MaybeUninit;
use std::sync::atomic::Ordering::{Acquire, Release};

/// A cell written once, that tasks can wait to be written: [`SetOnce::set`] gives it
/// its value (once; later calls fail and give theirs back), [`SetOnce::wait`] waits for
/// it, [`SetOnce::get`] looks without waiting. An event that carries a value.
///
/// While a task waits, `Telemetry::tasks()` names the wait `wait SetOnce`.
///
/// ```
/// # let rt = volt::runtime::Builder::new().worker_threads(1).build().unwrap();
/// # rt.block_on(async {
/// use std::sync::Arc;
/// let ready = Arc::new(volt::sync::SetOnce::new());
/// let waiter = {
///     let ready = ready.clone();
///     volt::spawn(async move { *ready.wait().await + 1 })
/// };
/// ready.set(41).unwrap();
/// assert_eq!(waiter.await.unwrap(), 42);
/// assert_eq!(ready.set(7), Err(volt::sync::SetOnceError(7)));
/// # });
/// ```
pub struct SetOnce<T> {
    value_set: AtomicBool,
    value: UnsafeCell<MaybeUninit<T>>,
    /// Held by a setter from its check of `value_set` to its publication.
    setting: Mutex<()>,
    /// Wakes every waiter when the value is set.
    notify: Notify,
}

/// Why [`SetOnce::set`] failed: the cell had its value already. Holds the value given.
#[derive(Debug, PartialEq, Eq)]
pub struct SetOnceError<T>(pub T);

impl<T> fmt::Display for SetOnceError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SetOnceError")
    }
}

impl<T: fmt::Debug> std::error::Error for SetOnceError<T> {}

// SAFETY: the value is written once, under `setting`, before `value_set` is published
// (release); after that it is only read through shared references (readers acquire the
// flag first), so sharing the cell shares `&T` (needs `T: Sync`), and a value set on one
// thread may be dropped on another (needs `T: Send`).
unsafe impl<T: Sync + Send> Sync for SetOnce<T> {}
// SAFETY: sending the cell sends the value.
unsafe impl<T: Send> Send for SetOnce<T> {}

impl<T> Default for SetOnce<T> {
    #[track_caller]
    fn default() -> SetOnce<T> {
        SetOnce::new()
    }
}

impl<T: fmt::Debug> fmt::Debug for SetOnce<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SetOnce").field("value", &self.get()).finish()
    }
}

impl<T: Clone> Clone for SetOnce<T> {
    #[track_caller]
    fn clone(&self) -> SetOnce<T> {
        SetOnce::new_with(self.get().cloned())
    }
}

impl<T: PartialEq> PartialEq for SetOnce<T> {
    fn eq(&self, other: &SetOnce<T>) -> bool {
        self.get() == other.get()
    }
}

impl<T: Eq> Eq for SetOnce<T> {}

impl<T> From<T> for SetOnce<T> {
    #[track_caller]
    fn from(value: T) -> SetOnce<T> {
        SetOnce::new_with(Some(value))
    }
}

impl<T> Drop for SetOnce<T> {
    fn drop(&mut self) {
        if self.value_set.load(Acquire) {
            // SAFETY: set (the flag), and `&mut self` means no reference to it is left.
            unsafe { self.value.get_mut().assume_init_drop() };
        }
    }
}

impl<T> SetOnce<T> {
    /// An empty cell. Where it is called is recorded for the console's resources view.
    #[track_caller]
    pub fn new() -> SetOnce<T> {
        SetOnce::new_with(None)
    }

    /// An empty cell in a `const` context (a `static`). Its creation place is not
    /// recorded (`Location::caller` is not `const` on stable Rust).
    #[cfg(not(loom))]
    pub const fn const_new() -> SetOnce<T> {
        SetOnce {
            value_set: AtomicBool::new(false),
            value: UnsafeCell::new(MaybeUninit::uninit()),
            setting: Mutex::new(()),
            notify: Notify::const_new_tagged(T_SET_ONCE),
        }
    }

    /// A cell holding `value` already, in a `const` context.
    #[cfg(not(loom))]
    pub const fn const_new_with(value: T) -> SetOnce<T> {
        SetOnce {
            value_set: AtomicBool::new(true),
            value: UnsafeCell::new(MaybeUninit::new(value)),
            setting: Mutex::new(()),
            notify: Notify::const_new_tagged(T_SET_ONCE),
        }
    }

    /// A cell holding `value`, or an empty one for `None`. Where it is called is
    /// recorded for the console's resources view.
    #[track_caller]
    pub fn new_with(value: Option<T>) -> SetOnce<T> {
        let notify = Notify::new_tagged(T_SET_ONCE, Some(std::panic::Location::caller()));
        let (set, value) = match value {
            Some(v) => (true, MaybeUninit::new(v)),
            None => (false, MaybeUninit::uninit()),
        };
        SetOnce { value_set: AtomicBool::new(set), value: UnsafeCell::new(value), setting: Mutex::new(()), notify }
    }

    /// Whether the value is set.
    pub fn initialized(&self) -> bool {
        self.value_set.load(Acquire)
    }

    /// The value, if set.
    pub fn get(&self) -> Option<&T> {
        if !self.initialized() {
            return None;
        }
        // SAFETY: the flag was seen set (acquire), so the value's write is visible, and
        // it is never written again while `&self` lives.
        Some(unsafe { (*self.value.get()).assume_init_ref() })
    }

    /// Give the cell its value, and wake every task waiting for it.
    ///
    /// # Errors
    /// [`SetOnceError`] with `value`, if the cell has a value already. A `set` that
    /// fails returns only once the value that won is there: `get` then returns it.
    pub fn set(&self, value: T) -> Result<(), SetOnceError<T>> {
        if self.initialized() {
            return Err(SetOnceError(value));
        }
        {
            // No user code runs under it: the value is moved in, not built here.
            let _setting = lock(&self.setting);
            if self.initialized() {
                return Err(SetOnceError(value));
            }
            // SAFETY: `setting` is held and the flag is clear: no other thread writes the
            // value, and none reads it until the flag is published below.
            unsafe { (*self.value.get()).write(value) };
            self.value_set.store(true, Release);
        }
        self.notify.notify_waiters();
        Ok(())
    }

    /// The value, taking the cell apart.
    pub fn into_inner(mut self) -> Option<T> {
        if !self.value_set.load(Acquire) {
            return None;
        }
        self.value_set = AtomicBool::new(false);
        // SAFETY: it was set; the flag now says empty, so `Drop` leaves it alone, and
        // `self` is owned.
        Some(unsafe { self.value.get_mut().assume_init_read() })
    }

    /// Wait until the value is set, and return it (at once if it is). Cancel safe:
    /// dropping the future loses nothing.
    pub async fn wait(&self) -> &T {
        loop {
            if let Some(v) = self.get() {
                return v;
            }
            // Made before the second look: a set after that look notifies it.
            let notified = self.notify.notified();
            if let Some(v) = self.get() {
                return v;
            }
            notified.await;
        }
    }
}
