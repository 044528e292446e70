//! `OnceCell`: a value set once, with async initialization, Volt's own with Tokio's API
//! and semantics. The initializer holds the one permit of a fair semaphore (`batch`);
//! the tasks behind it wait in line, and the semaphore is closed once the value is set,
//! which wakes them all to read it.

use super::batch::{Acquire, Sem, TryErr};
use super::track::T_ONCE_INIT;
use crate::loom::AtomicBool;
use std::cell::UnsafeCell;
use std::fmt;
use std::future::Future;
use std::mem::MaybeUninit;
use std::sync::atomic::Ordering::{Acquire as Acq, Release};

/// A cell written once. [`OnceCell::get_or_init`] runs the initializer of one caller at
/// a time: if it completes, its value is the cell's; if it fails, panics or is dropped,
/// the next caller in line runs its own.
///
/// While a task waits behind another's initialization, `Telemetry::tasks()` names the
/// wait `init OnceCell (held by task 5)`.
///
/// ```
/// # let rt = volt::runtime::Builder::new().worker_threads(1).build().unwrap();
/// # rt.block_on(async {
/// static CELL: volt::sync::OnceCell<u32> = volt::sync::OnceCell::const_new();
/// assert_eq!(*CELL.get_or_init(|| async { 7 }).await, 7);
/// assert_eq!(*CELL.get_or_init(|| async { 8 }).await, 7);
/// # });
/// ```
pub struct OnceCell<T> {
    value_set: AtomicBool,
    value: UnsafeCell<MaybeUninit<T>>,
    sem: Sem,
}

/// Why [`OnceCell::set`] failed; holds the value it was given.
#[derive(Debug, PartialEq, Eq)]
pub enum SetError<T> {
    /// The cell was initialized already.
    AlreadyInitializedError(T),
    /// Another caller is initializing it now.
    InitializingError(T),
}

impl<T> SetError<T> {
    /// Whether the cell was initialized already.
    pub fn is_already_init_err(&self) -> bool {
        matches!(self, SetError::AlreadyInitializedError(_))
    }

    /// Whether another caller was initializing it.
    pub fn is_initializing_err(&self) -> bool {
        matches!(self, SetError::InitializingError(_))
    }
}

impl<T> fmt::Display for SetError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SetError::AlreadyInitializedError(_) => f.write_str("AlreadyInitializedError"),
            SetError::InitializingError(_) => f.write_str("InitializingError"),
        }
    }
}

impl<T: fmt::Debug> std::error::Error for SetError<T> {}

// SAFETY: the value is written once, by the permit's holder, before `value_set` is
// published; after that it is only read, so sharing needs `T: Sync` and, since one
// thread's initializer may produce what another drops, `T: Send`.
unsafe impl<T: Sync + Send> Sync for OnceCell<T> {}
// SAFETY: sending the cell sends the value.
unsafe impl<T: Send> Send for OnceCell<T> {}

/// The initializer's permit: given back (to the next caller in line) unless the value
/// was set.
struct InitPermit<'a>(&'a Sem);

impl Drop for InitPermit<'_> {
    fn drop(&mut self) {
        self.0.clear_holder();
        self.0.release(1);
    }
}

impl<T> Default for OnceCell<T> {
    #[track_caller]
    fn default() -> OnceCell<T> {
        OnceCell::new()
    }
}

impl<T: fmt::Debug> fmt::Debug for OnceCell<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OnceCell").field("value", &self.get()).finish()
    }
}

impl<T: Clone> Clone for OnceCell<T> {
    #[track_caller]
    fn clone(&self) -> OnceCell<T> {
        OnceCell::new_with(self.get().cloned())
    }
}

impl<T: PartialEq> PartialEq for OnceCell<T> {
    fn eq(&self, other: &OnceCell<T>) -> bool {
        self.get() == other.get()
    }
}

impl<T: Eq> Eq for OnceCell<T> {}

impl<T> From<T> for OnceCell<T> {
    #[track_caller]
    fn from(value: T) -> OnceCell<T> {
        OnceCell::new_with(Some(value))
    }
}

impl<T> Drop for OnceCell<T> {
    fn drop(&mut self) {
        if self.initialized_mut() {
            // SAFETY: the value was set (`value_set`), and `&mut self` means no reference
            // to it is left.
            unsafe { self.value.get_mut().assume_init_drop() };
        }
    }
}

impl<T> OnceCell<T> {
    /// An empty cell. Where it is called is recorded for the console's resources view.
    #[track_caller]
    pub fn new() -> OnceCell<T> {
        OnceCell {
            value_set: AtomicBool::new(false),
            value: UnsafeCell::new(MaybeUninit::uninit()),
            sem: Sem::new(1, Some(std::panic::Location::caller())),
        }
    }

    /// An empty cell in a `const` context (a `static`). Its creation place is not
    /// recorded (`Location::caller` is not `const` on stable Rust).
    #[cfg(not(loom))]
    pub const fn const_new() -> OnceCell<T> {
        OnceCell {
            value_set: AtomicBool::new(false),
            value: UnsafeCell::new(MaybeUninit::uninit()),
            sem: Sem::const_new(1),
        }
    }

    /// A cell holding `value` already, in a `const` context.
    #[cfg(not(loom))]
    pub const fn const_new_with(value: T) -> OnceCell<T> {
        OnceCell {
            value_set: AtomicBool::new(true),
            value: UnsafeCell::new(MaybeUninit::new(value)),
            sem: Sem::const_closed(),
        }
    }

    /// A cell holding `value`, or an empty one for `None`. Where it is called is
    /// recorded for the console's resources view.
    #[track_caller]
    pub fn new_with(value: Option<T>) -> OnceCell<T> {
        match value {
            Some(v) => {
                let sem = Sem::new(0, Some(std::panic::Location::caller()));
                sem.close();
                OnceCell { value_set: AtomicBool::new(true), value: UnsafeCell::new(MaybeUninit::new(v)), sem }
            }
            None => OnceCell::new(),
        }
    }

    /// Whether the value is set.
    pub fn initialized(&self) -> bool {
        self.value_set.load(Acq)
    }

    fn initialized_mut(&mut self) -> bool {
        self.value_set.load(Acq)
    }

    /// The value, unchecked.
    ///
    /// # Safety
    /// `initialized()` returned true.
    unsafe fn get_unchecked(&self) -> &T {
        // SAFETY: the caller saw `value_set` (acquire), so the write is visible, and the
        // value is never written again while `&self` lives.
        unsafe { (*self.value.get()).assume_init_ref() }
    }

    /// Write the value with the permit held, publish it, and close the semaphore:
    /// every caller in line wakes, sees it, and returns it.
    fn set_value(&self, value: T, permit: InitPermit<'_>) -> &T {
        // SAFETY: the permit is held: no other caller writes or reads the value until
        // `value_set` is published below.
        unsafe { (*self.value.get()).write(value) };
        self.value_set.store(true, Release);
        std::mem::forget(permit);
        self.sem.clear_holder();
        self.sem.close();
        // SAFETY: set just above.
        unsafe { self.get_unchecked() }
    }

    /// The value, if set.
    pub fn get(&self) -> Option<&T> {
        // SAFETY: checked just before.
        self.initialized().then(|| unsafe { self.get_unchecked() })
    }

    /// The value, mutably, if set.
    pub fn get_mut(&mut self) -> Option<&mut T> {
        if self.initialized_mut() {
            // SAFETY: set, and `&mut self` is the only reference.
            Some(unsafe { self.value.get_mut().assume_init_mut() })
        } else {
            None
        }
    }

    /// Set the value if the cell is empty and nobody is initializing it.
    ///
    /// # Errors
    /// [`SetError::AlreadyInitializedError`] or [`SetError::InitializingError`], with the
    /// value given back.
    pub fn set(&self, value: T) -> Result<(), SetError<T>> {
        if self.initialized() {
            return Err(SetError::AlreadyInitializedError(value));
        }
        match self.sem.try_acquire(1, true) {
            Ok(()) => {
                self.set_value(value, InitPermit(&self.sem));
                Ok(())
            }
            Err(TryErr::NoPermits) => Err(SetError::InitializingError(value)),
            Err(TryErr::Closed) => Err(SetError::AlreadyInitializedError(value)),
        }
    }

    /// The value, running `f` to set it if the cell is empty. Callers queue: the first
    /// runs its `f`; the others wait, and get its value, or run their own `f` in turn
    /// if it was dropped or panicked.
    pub async fn get_or_init<F, Fut>(&self, f: F) -> &T
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = T>,
    {
        if let Some(v) = self.get() {
            return v;
        }
        match Acquire::new(&self.sem, 1, T_ONCE_INIT).await {
            Ok(()) => {
                let permit = InitPermit(&self.sem);
                let value = f().await;
                self.set_value(value, permit)
            }
            // Closed: the value was set.
            Err(_) => self.get().expect("a closed cell holds its value"),
        }
    }

    /// [`OnceCell::get_or_init`] with a fallible initializer: an error is returned to
    /// its caller and leaves the cell empty for the next one.
    ///
    /// # Errors
    /// The error of this caller's `f`.
    pub async fn get_or_try_init<E, F, Fut>(&self, f: F) -> Result<&T, E>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        if let Some(v) = self.get() {
            return Ok(v);
        }
        match Acquire::new(&self.sem, 1, T_ONCE_INIT).await {
            Ok(()) => {
                let permit = InitPermit(&self.sem);
                let value = f().await?;
                Ok(self.set_value(value, permit))
            }
            Err(_) => Ok(self.get().expect("a closed cell holds its value")),
        }
    }

    /// The value, taking the cell apart.
    pub fn into_inner(mut self) -> Option<T> {
        self.take()
    }

    /// Take the value out, leaving the cell empty.
    pub fn take(&mut self) -> Option<T> {
        if !self.initialized_mut() {
            return None;
        }
        self.value_set = AtomicBool::new(false);
        // The same cell, empty again: it keeps its creation place.
        self.sem = Sem::new(1, self.sem.created_at());
        // SAFETY: it was set, the flag now says empty so it is never read or dropped
        // again, and `&mut self` is the only reference.
        Some(unsafe { self.value.get_mut().assume_init_read() })
    }
}
