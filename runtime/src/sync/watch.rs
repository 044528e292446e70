//! Tokio's `sync::watch` channel: one current value, which senders replace and
//! receivers read, each told when it changed since they last looked.
//!
//! # How it works
//! The value sits behind a read-write lock. A version counts the sends (in steps of
//! two; its low bit says every sender is gone), bumped while the value's write lock is
//! held, so a reader holding the read lock sees a version that matches the value. Each
//! receiver keeps the version it last marked seen: it has a change to see when the
//! channel's version differs. Receivers that wait in [`Receiver::changed`] keep a slot
//! each in a reusable slab behind a mutex; a sender bumps the version before it takes
//! that mutex to wake them, and a receiver reads the version with the mutex held before
//! it registers, so no change slips between the two.
//!
//! A wait in [`Receiver::changed`] shows in the console as `changed watch`, one in
//! [`Receiver::wait_for`] as `wait_for watch`, and [`Sender::closed`] as `closed watch`.

use super::waiters::{wake_all_of, Closed, ClosedState, Waiters};
use crate::loom::{lock, Arc, Mutex};
use crate::task::coop;
use std::fmt;
use std::ops::Deref;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::{Acquire, Release};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::task::{Context, Poll};

/// The errors of the channel's operations.
pub mod error {
    use std::fmt;

    /// The value a [`send`](super::Sender::send) could not deliver: no receiver lives.
    #[derive(PartialEq, Eq, Clone, Copy)]
    pub struct SendError<T>(pub T);

    impl<T> fmt::Debug for SendError<T> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.debug_struct("SendError").finish_non_exhaustive()
        }
    }

    impl<T> fmt::Display for SendError<T> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("channel closed")
        }
    }

    impl<T> std::error::Error for SendError<T> {}

    /// Every sender is gone.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct RecvError(pub(super) ());

    impl fmt::Display for RecvError {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("channel closed")
        }
    }

    impl std::error::Error for RecvError {}
}

use error::{RecvError, SendError};

/// Name a receiver's wait for a change.
fn record_changed_wait(what: &str) {
    crate::task::wait::record_label(what);
}

/// The version's low bit: every sender is gone.
const CLOSED: u64 = 1;
/// One send.
const STEP: u64 = 2;

struct Shared<T> {
    value: RwLock<T>,
    version: AtomicU64,
    state: Mutex<State>,
}

struct State {
    rx_count: usize,
    tx_count: usize,
    /// Receivers waiting for a change.
    waiters: Waiters,
    /// Waiters of `Sender::closed`.
    closed: Waiters,
}

impl ClosedState for State {
    const CLOSED_LABEL: &'static str = "closed watch";

    fn rx_gone(&self) -> bool {
        self.rx_count == 0
    }

    fn closed_waiters(&mut self) -> &mut Waiters {
        &mut self.closed
    }
}

impl<T> Shared<T> {
    fn read(&self) -> RwLockReadGuard<'_, T> {
        // A panic in a user's closure under the write lock poisons it; the value is
        // still a value, and Tokio's lock does not poison either.
        self.value.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, T> {
        self.value.write().unwrap_or_else(|e| e.into_inner())
    }

    /// A new version is in: bump it (under the write lock `_guard`).
    fn bump(&self, _guard: &RwLockWriteGuard<'_, T>) {
        self.version.fetch_add(STEP, Release);
    }

    /// The channel's version and whether every sender is gone.
    fn current(&self) -> (u64, bool) {
        let v = self.version.load(Acquire);
        (v & !CLOSED, v & CLOSED != 0)
    }

    fn notify(&self) {
        wake_all_of(&self.state, |st| &mut st.waiters);
    }
}

/// A channel holding `init`, which the receiver has already seen.
pub fn channel<T>(init: T) -> (Sender<T>, Receiver<T>) {
    let shared = Arc::new(Shared {
        value: RwLock::new(init),
        version: AtomicU64::new(0),
        state: Mutex::new(State { rx_count: 1, tx_count: 1, waiters: Waiters::default(), closed: Waiters::default() }),
    });
    (Sender { shared: shared.clone() }, Receiver { shared, version: 0, key: None })
}

/// Replaces the channel's value; clone it for more senders.
pub struct Sender<T> {
    shared: Arc<Shared<T>>,
}

/// Reads the channel's value and waits for changes; clone it for more receivers.
pub struct Receiver<T> {
    shared: Arc<Shared<T>>,
    /// The version it last marked seen (without the closed bit).
    version: u64,
    /// Its slot among the waiters, once it has waited.
    key: Option<usize>,
}

/// A borrow of the channel's value: it holds the read lock, so keep it short, and do
/// not hold it across an `.await` or while sending on the same channel.
pub struct Ref<'a, T> {
    guard: RwLockReadGuard<'a, T>,
    has_changed: bool,
}

impl<T> Ref<'_, T> {
    /// Whether the value was new to the receiver that borrowed it (always `false` for a
    /// sender's borrow).
    pub fn has_changed(&self) -> bool {
        self.has_changed
    }
}

impl<T> Deref for Ref<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.guard
    }
}

impl<T: fmt::Debug> fmt::Debug for Ref<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl<T> Sender<T> {
    /// A sender holding `init`, with no receiver yet ([`subscribe`](Sender::subscribe)
    /// makes them).
    pub fn new(init: T) -> Self {
        let (tx, _) = channel(init);
        tx
    }

    /// Replace the value and tell the receivers. Fails, giving `value` back and leaving
    /// the channel as it was, when no receiver lives.
    pub fn send(&self, value: T) -> Result<(), SendError<T>> {
        if self.receiver_count() == 0 {
            return Err(SendError(value));
        }
        self.send_replace(value);
        Ok(())
    }

    /// Replace the value and tell the receivers, whether any lives or not; returns the
    /// value replaced.
    pub fn send_replace(&self, value: T) -> T {
        let old = {
            let mut guard = self.shared.write();
            let old = std::mem::replace(&mut *guard, value);
            self.shared.bump(&guard);
            old
        };
        self.shared.notify();
        old
    }

    /// Change the value in place and tell the receivers, whether any lives or not.
    pub fn send_modify<F: FnOnce(&mut T)>(&self, modify: F) {
        self.send_if_modified(|v| {
            modify(v);
            true
        });
    }

    /// Change the value in place; the receivers are told only when `modify` returns
    /// `true` (it says whether it changed anything). Returns what `modify` returned.
    pub fn send_if_modified<F: FnOnce(&mut T) -> bool>(&self, modify: F) -> bool {
        let modified = {
            let mut guard = self.shared.write();
            let modified = modify(&mut guard);
            if modified {
                self.shared.bump(&guard);
            }
            modified
        };
        if modified {
            self.shared.notify();
        }
        modified
    }

    /// Borrow the current value.
    pub fn borrow(&self) -> Ref<'_, T> {
        Ref { guard: self.shared.read(), has_changed: false }
    }

    /// A new receiver, which has seen the current value.
    pub fn subscribe(&self) -> Receiver<T> {
        lock(&self.shared.state).rx_count += 1;
        let version = self.shared.version.load(Acquire) & !CLOSED;
        Receiver { shared: self.shared.clone(), version, key: None }
    }

    /// How many receivers live.
    pub fn receiver_count(&self) -> usize {
        lock(&self.shared.state).rx_count
    }

    /// How many senders live.
    pub fn sender_count(&self) -> usize {
        lock(&self.shared.state).tx_count
    }

    /// Whether no receiver lives.
    pub fn is_closed(&self) -> bool {
        self.receiver_count() == 0
    }

    /// Wait until no receiver lives.
    pub async fn closed(&self) {
        Closed::new(&self.shared.state).await
    }

    /// Whether `other` sends on the same channel.
    pub fn same_channel(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.shared, &other.shared)
    }
}

/// A sender of `T::default()`, with no receiver yet (as `Sender::new`).
impl<T: Default> Default for Sender<T> {
    fn default() -> Self {
        Sender::new(T::default())
    }
}

impl<T> Clone for Sender<T> {
    fn clone(&self) -> Self {
        lock(&self.shared.state).tx_count += 1;
        Sender { shared: self.shared.clone() }
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        let last = {
            let mut st = lock(&self.shared.state);
            st.tx_count -= 1;
            st.tx_count == 0
        };
        if last {
            self.shared.version.fetch_or(CLOSED, Release);
            self.shared.notify();
        }
    }
}

impl<T: fmt::Debug> fmt::Debug for Sender<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sender").field("value", &*self.shared.read()).finish_non_exhaustive()
    }
}

impl<T> Receiver<T> {
    fn current(&self) -> (u64, bool) {
        self.shared.current()
    }

    /// Borrow the current value, without marking it seen.
    pub fn borrow(&self) -> Ref<'_, T> {
        let guard = self.shared.read();
        let (version, _) = self.current();
        Ref { guard, has_changed: version != self.version }
    }

    /// Borrow the current value and mark it seen.
    pub fn borrow_and_update(&mut self) -> Ref<'_, T> {
        let guard = self.shared.read();
        let (version, _) = self.current();
        let has_changed = version != self.version;
        self.version = version;
        Ref { guard, has_changed }
    }

    /// Whether a value this receiver has not seen is in. `Err` once every sender is gone.
    pub fn has_changed(&self) -> Result<bool, RecvError> {
        let (version, closed) = self.current();
        if closed {
            return Err(RecvError(()));
        }
        Ok(version != self.version)
    }

    /// Whether every sender is gone (the last value stays readable with `borrow`).
    pub fn is_closed(&self) -> bool {
        self.current().1
    }

    /// Make the current value count as unseen.
    pub fn mark_changed(&mut self) {
        let (version, _) = self.current();
        self.version = version.wrapping_sub(STEP);
    }

    /// Make the current value count as seen.
    pub fn mark_unchanged(&mut self) {
        self.version = self.current().0;
    }

    fn poll_changed(&mut self, cx: &mut Context<'_>, label: &str) -> Poll<Result<(), RecvError>> {
        poll_changed(&self.shared, &mut self.version, &mut self.key, cx, label)
    }

    /// Wait for a value this receiver has not seen, and mark it seen. Returns at once
    /// when one is already in. `Err` when every sender is gone and no unseen value is
    /// in. Cancel safe.
    pub async fn changed(&mut self) -> Result<(), RecvError> {
        std::future::poll_fn(|cx| self.poll_changed(cx, "changed watch")).await
    }

    /// Wait until the value satisfies `f` (tried on the current value first, then on
    /// each new one), mark it seen and borrow it. `Err` when every sender is gone and
    /// the value does not satisfy `f`.
    pub async fn wait_for(&mut self, mut f: impl FnMut(&T) -> bool) -> Result<Ref<'_, T>, RecvError> {
        // The fields apart, so that the borrow returned (of `shared`) can outlive the
        // waits in the loop (on `version` and `key`).
        let Receiver { shared, version: seen, key } = self;
        let shared: &Shared<T> = shared;
        // Each call spends from the task's budget, one that returns at once too (on a
        // value that satisfies `f`, or a closed channel): a loop of such calls still
        // yields, as with Tokio.
        std::future::poll_fn(|cx| {
            std::task::ready!(coop::poll_budget(cx));
            coop::spend();
            Poll::Ready(())
        })
        .await;
        loop {
            // The read guard lives in this block only: the future stays `Send` across
            // the wait below.
            let closed = {
                let guard = shared.read();
                let (version, closed) = shared.current();
                let has_changed = version != *seen;
                *seen = version;
                if f(&guard) {
                    return Ok(Ref { guard, has_changed });
                }
                closed
            };
            if closed {
                return Err(RecvError(()));
            }
            std::future::poll_fn(|cx| poll_changed(shared, seen, key, cx, "wait_for watch")).await?;
        }
    }

    /// Whether `other` receives from the same channel.
    pub fn same_channel(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.shared, &other.shared)
    }
}

/// Wait for a version other than `seen` and mark it seen; `Err` once every sender is
/// gone with no unseen version in. `key` is the receiver's slot among the waiters.
fn poll_changed<T>(
    shared: &Shared<T>,
    seen: &mut u64,
    key: &mut Option<usize>,
    cx: &mut Context<'_>,
    label: &str,
) -> Poll<Result<(), RecvError>> {
    std::task::ready!(coop::poll_budget(cx));
    let mut st = lock(&shared.state);
    // Read under the waiters' mutex: a sender bumps the version before it takes the
    // mutex to wake, so a change after this read finds this waiter registered.
    let (version, closed) = shared.current();
    if version != *seen {
        *seen = version;
    } else if closed {
        drop(st);
        coop::spend();
        return Poll::Ready(Err(RecvError(())));
    } else {
        let old = st.waiters.register(key, cx.waker());
        drop(st);
        drop(old);
        record_changed_wait(label);
        return Poll::Pending;
    }
    drop(st);
    coop::spend();
    Poll::Ready(Ok(()))
}

impl<T> Clone for Receiver<T> {
    fn clone(&self) -> Self {
        lock(&self.shared.state).rx_count += 1;
        Receiver { shared: self.shared.clone(), version: self.version, key: None }
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        let mut old = None;
        let last = {
            let mut st = lock(&self.shared.state);
            if let Some(k) = self.key {
                old = st.waiters.remove(k);
            }
            st.rx_count -= 1;
            st.rx_count == 0
        };
        drop(old);
        if last {
            wake_all_of(&self.shared.state, |st| &mut st.closed);
        }
    }
}

impl<T: fmt::Debug> fmt::Debug for Receiver<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Receiver").field("value", &*self.shared.read()).finish_non_exhaustive()
    }
}
