//! Waiting, as the primitives of `sync` share it: a batch of wakers woken once a lock is
//! let go ([`WakeList`]), a slab of waiters in reusable slots ([`Waiters`]) that the
//! channels keep behind their mutex, and the wait of a channel's `closed()`
//! ([`Closed`]).

use crate::loom::{lock, Mutex};
use std::future::Future;
use std::mem::MaybeUninit;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

/// Wakers gathered under a lock, woken together once it is let go; a fixed array, so
/// waking many waiters does not allocate. Past [`CAP`](Self::CAP) wakers, a push wakes
/// the batch in place first (that only schedules their tasks); a caller that would
/// rather let its lock go first checks [`is_full`](Self::is_full).
///
/// Only the first `len` places hold a waker, so making a list writes nothing but `len`:
/// an array of `Option<Waker>` cost 32 stores to make and 32 checks to drop, on paths
/// that make a list for every value or every wait (a broadcast send, a receive that
/// finds nothing).
pub(super) struct WakeList {
    wakers: [MaybeUninit<Waker>; WakeList::CAP],
    len: usize,
}

impl WakeList {
    pub(super) const CAP: usize = 32;

    pub(super) fn new() -> WakeList {
        WakeList { wakers: [const { MaybeUninit::uninit() }; WakeList::CAP], len: 0 }
    }

    pub(super) fn is_full(&self) -> bool {
        self.len == Self::CAP
    }

    pub(super) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Keep `w` to wake later (waking the batch kept so far first when it is full).
    pub(super) fn push(&mut self, w: Waker) {
        if self.is_full() {
            self.wake_all();
        }
        self.wakers[self.len].write(w);
        self.len += 1;
    }

    pub(super) fn wake_all(&mut self) {
        // Emptied first: should a waker panic, the ones after it leak rather than being
        // read twice.
        let n = std::mem::replace(&mut self.len, 0);
        for w in &mut self.wakers[..n] {
            // SAFETY: the first `n` places were written by `push` and not read since
            // (`len` counted them); each is read once, as `len` is 0 now.
            unsafe { w.assume_init_read() }.wake();
        }
    }
}

impl Drop for WakeList {
    fn drop(&mut self) {
        let n = std::mem::replace(&mut self.len, 0);
        for w in &mut self.wakers[..n] {
            // SAFETY: as in `wake_all`: written, not read since, and dropped once.
            unsafe { w.assume_init_drop() };
        }
    }
}

/// One waiter's slot.
#[derive(Default)]
pub(super) struct Slot {
    waker: Option<Waker>,
    /// Slots of a bounded channel this waiter needs, and those handed to it so far.
    pub(super) need: usize,
    pub(super) got: usize,
}

/// Waiters in reusable slots: a waiter keeps its key from its first `Pending` until it
/// completes or is dropped, so registering again only swaps the waker.
#[derive(Default)]
pub(super) struct Waiters {
    slots: Vec<Slot>,
    free: Vec<usize>,
    /// Slots holding a waker.
    waiting: usize,
}

impl Waiters {
    /// A new waiter with `waker`; returns its key.
    pub(super) fn insert(&mut self, waker: &Waker) -> usize {
        self.insert_needing(waker, 0)
    }

    /// A new waiter with `waker` that needs `need` slots of a bounded channel.
    pub(super) fn insert_needing(&mut self, waker: &Waker, need: usize) -> usize {
        self.waiting += 1;
        let slot = Slot { waker: Some(waker.clone()), need, got: 0 };
        match self.free.pop() {
            Some(k) => {
                self.slots[k] = slot;
                k
            }
            None => {
                self.slots.push(slot);
                self.slots.len() - 1
            }
        }
    }

    /// Waiter `key`'s slot.
    pub(super) fn slot(&self, key: usize) -> &Slot {
        &self.slots[key]
    }

    /// Waiter `key`'s slot, to count the slots handed to it.
    pub(super) fn slot_mut(&mut self, key: usize) -> &mut Slot {
        &mut self.slots[key]
    }

    /// Store `waker` for waiter `key` (a repeat poll), unless it would wake the same task.
    /// Returns the waker replaced, for the caller to drop once the lock is let go (a
    /// waker's drop may run code that uses the channel).
    #[must_use]
    pub(super) fn update(&mut self, key: usize, waker: &Waker) -> Option<Waker> {
        let slot = &mut self.slots[key];
        match &mut slot.waker {
            Some(w) if w.will_wake(waker) => None,
            Some(w) => Some(std::mem::replace(w, waker.clone())),
            None => {
                slot.waker = Some(waker.clone());
                self.waiting += 1;
                None
            }
        }
    }

    /// Insert or update, as `key` says; returns a waker to drop unlocked.
    #[must_use]
    pub(super) fn register(&mut self, key: &mut Option<usize>, waker: &Waker) -> Option<Waker> {
        match *key {
            Some(k) => self.update(k, waker),
            None => {
                *key = Some(self.insert(waker));
                None
            }
        }
    }

    /// Free waiter `key`'s slot; returns its waker, to drop unlocked.
    #[must_use]
    pub(super) fn remove(&mut self, key: usize) -> Option<Waker> {
        let slot = std::mem::take(&mut self.slots[key]);
        if slot.waker.is_some() {
            self.waiting -= 1;
        }
        self.free.push(key);
        slot.waker
    }

    /// Take waiter `key`'s waker.
    pub(super) fn take(&mut self, key: usize) -> Option<Waker> {
        let w = self.slots[key].waker.take();
        if w.is_some() {
            self.waiting -= 1;
        }
        w
    }

    /// Move wakers into `list` until it is full. Returns whether wakers remain.
    pub(super) fn drain_into(&mut self, list: &mut WakeList) -> bool {
        if self.waiting == 0 {
            return false;
        }
        for slot in &mut self.slots {
            if list.is_full() {
                return self.waiting > 0;
            }
            if let Some(w) = slot.waker.take() {
                self.waiting -= 1;
                list.push(w);
            }
        }
        false
    }
}

/// Wake every waiter `waiters` picks out of the state behind `m`, in batches, the lock
/// let go around each batch's wakes.
pub(super) fn wake_all_of<S>(m: &Mutex<S>, mut waiters: impl FnMut(&mut S) -> &mut Waiters) {
    let mut list = WakeList::new();
    loop {
        let more = waiters(&mut lock(m)).drain_into(&mut list);
        list.wake_all();
        if !more {
            return;
        }
    }
}

/// A channel's state, as the wait of its senders' `closed()` sees it.
pub(super) trait ClosedState {
    /// The name of the wait, as the console shows it.
    const CLOSED_LABEL: &'static str;

    /// Whether the receiving side is gone (or closed the channel).
    fn rx_gone(&self) -> bool;

    /// The waiters of `closed()`.
    fn closed_waiters(&mut self) -> &mut Waiters;
}

/// The wait of a sender's `closed()`: ready once the receiving side is gone, else
/// registered among the channel's `closed()` waiters (the slot is given back when the
/// wait ends or is dropped).
pub(super) struct Closed<'a, S: ClosedState> {
    state: &'a Mutex<S>,
    key: Option<usize>,
}

impl<'a, S: ClosedState> Closed<'a, S> {
    pub(super) fn new(state: &'a Mutex<S>) -> Self {
        Closed { state, key: None }
    }
}

impl<S: ClosedState> Future for Closed<'_, S> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        // From the task's budget, as every wait that can end at once: a loop on a
        // channel already closed still yields (Tokio's `sender_closed_is_cooperative`).
        std::task::ready!(crate::task::coop::poll_budget(cx));
        let this = &mut *self;
        let mut st = lock(this.state);
        if st.rx_gone() {
            let old = this.key.take().and_then(|k| st.closed_waiters().remove(k));
            drop(st);
            drop(old);
            crate::task::coop::spend();
            return Poll::Ready(());
        }
        let old = st.closed_waiters().register(&mut this.key, cx.waker());
        drop(st);
        drop(old);
        crate::task::wait::record_label(S::CLOSED_LABEL);
        Poll::Pending
    }
}

impl<S: ClosedState> Drop for Closed<'_, S> {
    fn drop(&mut self) {
        if let Some(k) = self.key {
            // The waker is dropped after the lock is let go.
            let _old = lock(self.state).closed_waiters().remove(k);
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::WakeList;
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    use std::sync::Arc;
    use std::task::{Wake, Waker};

    #[derive(Default)]
    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, SeqCst);
        }
    }

    /// Every waker pushed is woken once, past the list's capacity too (a full list wakes
    /// its batch in place), and one left in a list that is dropped unwoken is dropped
    /// once: no waker is lost, woken twice or leaked. (Under Miri: no place is read
    /// unwritten or twice.)
    #[test]
    fn each_waker_is_woken_or_dropped_once() {
        let count = Arc::new(Count::default());
        let waker = Waker::from(Arc::clone(&count));
        let mut list = WakeList::new();
        assert!(list.is_empty());
        for _ in 0..WakeList::CAP + 8 {
            list.push(waker.clone());
        }
        assert_eq!(count.0.load(SeqCst), WakeList::CAP, "the full batch was woken to make room");
        list.wake_all();
        assert_eq!(count.0.load(SeqCst), WakeList::CAP + 8);
        assert!(list.is_empty());
        list.wake_all();
        assert_eq!(count.0.load(SeqCst), WakeList::CAP + 8, "nothing is woken twice");
        for _ in 0..5 {
            list.push(waker.clone());
        }
        drop(list);
        assert_eq!(count.0.load(SeqCst), WakeList::CAP + 8, "a dropped list wakes nobody");
        drop(waker);
        assert_eq!(Arc::strong_count(&count), 1, "every waker was dropped once");
    }
}
