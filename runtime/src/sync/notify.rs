//! `Notify`: wake one task or all of them, Volt's own with Tokio's API and semantics.

use super::list::{Key, List};
use super::track::{self, CreatedAt, Tracked, T_NOTIFIED};
use super::waiters::WakeList;
use crate::loom::{lock, AtomicUsize, Mutex};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

// The state: no permit and no waiter, waiters queued, or one stored permit. `WAITING` is
// set and cleared only under the waiter mutex; a permit is stored and taken lock-free,
// and never while waiters are queued.
const EMPTY: usize = 0;
const WAITING: usize = 1;
const NOTIFIED: usize = 2;

// How a queued waiter was served.
const BY_ONE: u8 = 1;
const BY_ALL: u8 = 2;
/// By `notify_last`: a waiter dropped before it saw it passes it to the last waiter
/// again, as Tokio's does.
const BY_LAST: u8 = 3;

/// Wakes tasks waiting on it: [`Notify::notify_one`] wakes one waiter (in the order they
/// started waiting) or, when none waits, stores one permit that the next
/// [`Notify::notified`] consumes at once; [`Notify::notify_waiters`] wakes every waiter
/// there is and stores nothing.
///
/// While a task waits, `Telemetry::tasks()` names the wait `notified`.
///
/// ```
/// # let rt = volt::runtime::Builder::new().worker_threads(1).build().unwrap();
/// # rt.block_on(async {
/// use std::sync::Arc;
/// let n = Arc::new(volt::sync::Notify::new());
/// let n2 = n.clone();
/// let h = volt::spawn(async move { n2.notified().await });
/// n.notify_one();
/// h.await.unwrap();
/// # });
/// ```
pub struct Notify {
    state: AtomicUsize,
    /// Calls to `notify_waiters` so far: a `Notified` created before one is ready.
    calls: AtomicUsize,
    waiters: Mutex<Waiters>,
}

struct Node {
    waker: Option<Waker>,
    served: u8,
}

struct Waiters {
    list: List<Node>,
    tracked: Option<Tracked>,
    /// What a wait here is named (`T_NOTIFIED`, or the primitive built on it).
    tag: u8,
    /// Where the `Notify` was created, for its probe (kept under the mutex beside the
    /// probe it is given to).
    created_at: CreatedAt,
}

/// The future of [`Notify::notified`]. Fused: once ready, it stays ready.
#[must_use = "futures do nothing unless you `.await` or poll them"]
pub struct Notified<'a> {
    notify: &'a Notify,
    w: Waiter,
}

/// The future of [`Notify::notified_owned`]: [`Notified`] through an `Arc`.
#[must_use = "futures do nothing unless you `.await` or poll them"]
pub struct OwnedNotified {
    notify: Arc<Notify>,
    w: Waiter,
}

/// One wait: the `notify_waiters` count at its creation and its place in the queue.
struct Waiter {
    calls: usize,
    key: Option<Key>,
    done: bool,
}

impl Default for Notify {
    #[track_caller]
    fn default() -> Notify {
        Notify::new()
    }
}

impl fmt::Debug for Notify {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Notify").field("permit", &(self.state.load(SeqCst) == NOTIFIED)).finish()
    }
}

impl Notify {
    /// A `Notify` with no permit and no waiter. Where it is called is recorded for the
    /// console's resources view.
    #[track_caller]
    pub fn new() -> Notify {
        Notify::new_tagged(T_NOTIFIED, Some(std::panic::Location::caller()))
    }

    /// [`Notify::new`] in a `const` context. Its creation place is not recorded
    /// (`Location::caller` is not `const` on stable Rust).
    #[cfg(not(loom))]
    pub const fn const_new() -> Notify {
        Notify::const_new_tagged(T_NOTIFIED)
    }

    /// A `Notify` whose waits are named by `tag` (a primitive built on it), created at
    /// `created_at`.
    pub(crate) fn new_tagged(tag: u8, created_at: CreatedAt) -> Notify {
        Notify {
            state: AtomicUsize::new(EMPTY),
            calls: AtomicUsize::new(0),
            waiters: Mutex::new(Waiters { list: List::new(), tracked: None, tag, created_at }),
        }
    }

    /// [`Notify::new_tagged`] in a `const` context, with no creation place.
    #[cfg(not(loom))]
    pub(crate) const fn const_new_tagged(tag: u8) -> Notify {
        Notify {
            state: AtomicUsize::new(EMPTY),
            calls: AtomicUsize::new(0),
            waiters: Mutex::new(Waiters { list: List::new(), tracked: None, tag, created_at: None }),
        }
    }

    /// A future that completes on a notification: a stored permit (consumed at its
    /// first poll or [`Notified::enable`]), a `notify_one` while it is queued, or any
    /// `notify_waiters` after its creation (polled or not).
    pub fn notified(&self) -> Notified<'_> {
        Notified { notify: self, w: Waiter::new(self) }
    }

    /// [`Notify::notified`] through an `Arc`: the future is `'static`.
    pub fn notified_owned(self: Arc<Self>) -> OwnedNotified {
        let w = Waiter::new(&self);
        OwnedNotified { notify: self, w }
    }

    /// Wake the first queued waiter, or store a permit if none waits (at most one is
    /// stored: permits do not add up).
    pub fn notify_one(&self) {
        self.notify(false)
    }

    /// [`Notify::notify_one`], waking the last queued waiter instead of the first.
    pub fn notify_last(&self) {
        self.notify(true)
    }

    fn notify(&self, last: bool) {
        if self.store_permit() {
            return;
        }
        let mut wakers = WakeList::new();
        let mut w = lock(&self.waiters);
        self.notify_locked(&mut w, last, &mut wakers);
        drop(w);
        wakers.wake_all();
    }

    /// Store the permit unless waiters are queued; whether it did.
    fn store_permit(&self) -> bool {
        let mut s = self.state.load(SeqCst);
        while s != WAITING {
            match self.state.compare_exchange(s, NOTIFIED, SeqCst, SeqCst) {
                Ok(_) => return true,
                Err(now) => s = now,
            }
        }
        false
    }

    fn notify_locked(&self, w: &mut Waiters, last: bool, wakers: &mut WakeList) {
        // Under the mutex `WAITING` cannot change, so either there is a waiter to
        // serve, or the permit goes in.
        if self.state.load(SeqCst) != WAITING {
            self.store_permit();
            return;
        }
        let k = if last { w.list.back() } else { w.list.front() };
        if let Some(k) = k {
            if let Some(node) = w.list.get_mut(k) {
                node.served = if last { BY_LAST } else { BY_ONE };
                if let Some(wk) = node.waker.take() {
                    wakers.push(wk);
                }
            }
            w.list.unlink(k);
        }
        if w.list.is_empty() {
            self.state.store(EMPTY, SeqCst);
        }
        refresh(w);
    }

    /// Wake every waiter there is (every `Notified` created before this call, polled or
    /// not); store no permit.
    pub fn notify_waiters(&self) {
        let mut wakers = WakeList::new();
        let mut w = lock(&self.waiters);
        self.calls.fetch_add(1, SeqCst);
        while let Some(k) = w.list.front() {
            if let Some(node) = w.list.get_mut(k) {
                node.served = BY_ALL;
                if let Some(wk) = node.waker.take() {
                    wakers.push(wk);
                }
            }
            w.list.unlink(k);
        }
        if self.state.load(SeqCst) == WAITING {
            self.state.store(EMPTY, SeqCst);
        }
        refresh(&w);
        drop(w);
        wakers.wake_all();
    }
}

fn refresh(w: &Waiters) {
    if let Some(t) = &w.tracked {
        t.probe.waiters.store(w.list.len() as u64, std::sync::atomic::Ordering::Relaxed);
    }
}

impl Waiter {
    fn new(n: &Notify) -> Waiter {
        Waiter { calls: n.calls.load(SeqCst), key: None, done: false }
    }

    /// Poll (with a waker) or enable (without): ready, or queued.
    fn poll(&mut self, n: &Notify, waker: Option<&Waker>) -> Poll<()> {
        if self.done {
            return Poll::Ready(());
        }
        if let Some(key) = self.key {
            let mut w = lock(&n.waiters);
            let Some(node) = w.list.get_mut(key) else {
                self.key = None;
                self.done = true;
                return Poll::Ready(());
            };
            if node.served != 0 {
                w.list.take(key);
                self.key = None;
                self.done = true;
                return Poll::Ready(());
            }
            if let Some(wk) = waker {
                if !node.waker.as_ref().is_some_and(|old| old.will_wake(wk)) {
                    node.waker = Some(wk.clone());
                }
            }
            name_wait(&mut w);
            return Poll::Pending;
        }
        if n.calls.load(SeqCst) != self.calls || n.state.compare_exchange(NOTIFIED, EMPTY, SeqCst, SeqCst).is_ok() {
            self.done = true;
            return Poll::Ready(());
        }
        let mut w = lock(&n.waiters);
        if n.calls.load(SeqCst) != self.calls {
            self.done = true;
            return Poll::Ready(());
        }
        let mut s = n.state.load(SeqCst);
        loop {
            let to = match s {
                NOTIFIED => EMPTY,
                EMPTY => WAITING,
                _ => break,
            };
            match n.state.compare_exchange(s, to, SeqCst, SeqCst) {
                Ok(_) if to == EMPTY => {
                    self.done = true;
                    return Poll::Ready(());
                }
                Ok(_) => break,
                Err(now) => s = now,
            }
        }
        self.key = Some(w.list.push_back(Node { waker: waker.cloned(), served: 0 }));
        refresh(&w);
        name_wait(&mut w);
        Poll::Pending
    }

    fn drop_in(&mut self, n: &Notify) {
        let Some(key) = self.key.take() else { return };
        let mut wakers = WakeList::new();
        let mut w = lock(&n.waiters);
        if let Some(node) = w.list.take(key) {
            if node.served == BY_ONE || node.served == BY_LAST {
                // A `notify_one` (or `notify_last`) this future never saw: pass it on to
                // the same end of the queue, as if it had come after the drop.
                n.notify_locked(&mut w, node.served == BY_LAST, &mut wakers);
            } else if w.list.is_empty() && n.state.load(SeqCst) == WAITING {
                n.state.store(EMPTY, SeqCst);
            }
            refresh(&w);
        }
        drop(w);
        wakers.wake_all();
    }
}

/// Name the wait for the console (under the waiter mutex, before `Pending`).
fn name_wait(w: &mut Waiters) {
    if track::watching() {
        let (at, tag) = (w.created_at, w.tag);
        let id = w.tracked.get_or_insert_with(|| Tracked::new(tag, at)).id;
        refresh(w);
        track::record(tag, id);
    }
}

impl Notified<'_> {
    /// Join the queue without a waker, so that a `notify_one` from now on reaches this
    /// future; returns whether it is ready already (a stored permit it consumed, a
    /// notification since its creation).
    pub fn enable(self: Pin<&mut Self>) -> bool {
        let this = self.get_mut();
        this.w.poll(this.notify, None).is_ready()
    }
}

impl OwnedNotified {
    /// [`Notified::enable`].
    pub fn enable(self: Pin<&mut Self>) -> bool {
        let this = self.get_mut();
        this.w.poll(&this.notify, None).is_ready()
    }
}

impl Future for Notified<'_> {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        this.w.poll(this.notify, Some(cx.waker()))
    }
}

impl Future for OwnedNotified {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        this.w.poll(&this.notify, Some(cx.waker()))
    }
}

impl Drop for Notified<'_> {
    fn drop(&mut self) {
        self.w.drop_in(self.notify);
    }
}

impl Drop for OwnedNotified {
    fn drop(&mut self) {
        self.w.drop_in(&self.notify);
    }
}

impl fmt::Debug for Notified<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Notified").field("done", &self.w.done).finish()
    }
}

impl fmt::Debug for OwnedNotified {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OwnedNotified").field("done", &self.w.done).finish()
    }
}
