//! The channel both kinds of halves share: the senders' state behind a mutex and the
//! receiver's batch beside it, the receive and send paths, and the wait of a sender for
//! room in a bounded channel ([`Acquire`]).

use super::error::{TryRecvError, TrySendError};
use crate::loom::{lock, Arc, AtomicUsize, Mutex, MutexGuard, UnsafeCell};
use crate::padded::CachePadded;
use crate::sync::waiters::{wake_all_of, ClosedState, Waiters, WakeList};
use crate::task::coop;
use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering::{AcqRel, Relaxed};
use std::task::{Context, Poll, Waker};

// ---------------------------------------------------------------------------------------
// Named waits: one place, so that structured sync waits can replace them later.

/// A label formatted on the stack, for a wait whose name holds a number.
struct Label {
    buf: [u8; crate::task::wait::LABEL_BYTES],
    len: usize,
}

impl fmt::Write for Label {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        // Only ASCII is written here, so cutting at a byte keeps the text valid.
        let n = s.len().min(self.buf.len() - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        Ok(())
    }
}

/// What a waiting operation was doing.
#[derive(Clone, Copy)]
pub(super) enum WaitKind {
    Send,
    Reserve,
}

/// Name the wait of a receiver on an empty channel.
fn record_recv_wait() {
    crate::task::wait::record_label("recv mpsc (empty)");
}

/// Name the wait of a sender on a full channel of `cap` slots.
fn record_full_wait(kind: WaitKind, cap: usize) {
    use fmt::Write;
    let mut l = Label { buf: [0; crate::task::wait::LABEL_BYTES], len: 0 };
    let verb = match kind {
        WaitKind::Send => "send",
        WaitKind::Reserve => "reserve",
    };
    let _ = write!(l, "{verb} mpsc (full, {cap})");
    if let Ok(s) = std::str::from_utf8(&l.buf[..l.len]) {
        crate::task::wait::record_label(s);
    }
}

// ---------------------------------------------------------------------------------------
// The channel.
//
// Senders push under the mutex. The one receiver does not take it per value: when its
// own batch (`rx.buf`) is empty it swaps the whole shared buffer for it, under the lock,
// and then hands the values out one by one without it. A value's slot (bounded) is
// still given back when that value is received, as Tokio's documentation says; the
// receiver counts it in `freed` without the lock, and whoever next holds the lock and
// needs the figure folds the count into `in_use`. While senders wait for slots, the
// `WAITING` bit in `freed` sends the receiver to the lock instead, to hand each slot to
// the first waiter as it frees. A sender that starts to wait raises the bit in the swap
// that folds the count once more, so a slot freed just before the bit went up still
// reaches it: both are read-modify-writes of one word, so one of the two sees the other.
//
// With eight senders on two workers this took the receiver from fighting the senders
// for the lock on every value to taking it once per batch.

pub(super) struct Chan<T> {
    pub(super) state: Mutex<State<T>>,
    /// The capacity of a bounded channel; `None` for an unbounded one.
    pub(super) bound: Option<usize>,
    /// The receiver's side, on cache lines of its own: the senders' locking and
    /// unlocking of `state` would otherwise move the line it counts on under it.
    rx: CachePadded<RxSide<T>>,
}

struct RxSide<T> {
    /// The receiver's batch: values it took from `State::buf` in one go. Only the
    /// receiver touches it (its methods take `&mut self`, but for `len`).
    buf: UnsafeCell<VecDeque<T>>,
    /// Slots the receiver gave back without the lock (bounded), with `WAITING` while
    /// senders wait for slots.
    freed: AtomicUsize,
}

/// In `RxSide::freed`: senders wait, so a freed slot goes to them through the lock. A
/// bounded channel holds at most `usize::MAX >> 3` slots, so counts never reach it.
const WAITING: usize = 1 << (usize::BITS - 1);

// SAFETY: `rx.buf` is the only field not behind the mutex or an atomic, and only the
// receiver reaches it: there is one receiver, it is neither `Clone` nor `Copy`, it
// changes the batch only through `&mut self`, and it only reads it (its length) through
// `&self`. Values cross threads, so `T: Send`, as for the mutex's `Sync`.
unsafe impl<T: Send> Sync for Chan<T> {}

pub(super) struct State<T> {
    buf: VecDeque<T>,
    /// Slots in use (bounded): values buffered plus permits out, granted waiters included.
    in_use: usize,
    /// Senders waiting for a slot (in `senders`), first come first served.
    queue: VecDeque<usize>,
    senders: Waiters,
    /// Waiters of `Sender::closed`.
    closed: Waiters,
    rx_waker: Option<Waker>,
    /// The receiver closed the channel, or is gone.
    rx_closed: bool,
    /// The receiver is gone: a value sent through a permit now is dropped.
    rx_dropped: bool,
    tx_count: usize,
    weak_count: usize,
}

impl<T> ClosedState for State<T> {
    const CLOSED_LABEL: &'static str = "closed mpsc";

    fn rx_gone(&self) -> bool {
        self.rx_closed
    }

    fn closed_waiters(&mut self) -> &mut Waiters {
        &mut self.closed
    }
}

// A panic cannot leave a channel half-changed: its state changes under its lock, where
// no user code runs (values are moved in and out, never cloned or dropped there), so
// its senders and receivers are unwind safe whatever `T` is, as Tokio's.
impl<T> std::panic::UnwindSafe for Chan<T> {}
impl<T> std::panic::RefUnwindSafe for Chan<T> {}

impl<T> Chan<T> {
    pub(super) fn new(bound: Option<usize>) -> Arc<Chan<T>> {
        Arc::new(Chan {
            state: Mutex::new(State {
                buf: VecDeque::new(),
                in_use: 0,
                queue: VecDeque::new(),
                senders: Waiters::default(),
                closed: Waiters::default(),
                rx_waker: None,
                rx_closed: false,
                rx_dropped: false,
                tx_count: 1,
                weak_count: 0,
            }),
            bound,
            rx: CachePadded(RxSide { buf: UnsafeCell::new(VecDeque::new()), freed: AtomicUsize::new(0) }),
        })
    }

    /// Fold the slots the receiver gave back without the lock into `in_use` (the lock
    /// held): to the waiting senders first, as `release` does; the wakers of those it
    /// completes go in `wakes`, as many as it has room for. Returns whether slots are
    /// left (put back in `freed`): then the caller wakes `wakes` without the lock and
    /// folds again ([`fold_all`](Chan::fold_all)), so no waker runs under the lock.
    /// Drops the `WAITING` bit once no sender waits.
    #[must_use]
    fn fold(&self, st: &mut State<T>, wakes: &mut WakeList) -> bool {
        if self.bound.is_none() {
            return false;
        }
        let keep = if st.queue.is_empty() { 0 } else { WAITING };
        let mut n = self.rx.freed.swap(keep, AcqRel) & !WAITING;
        while n > 0 {
            if wakes.is_full() {
                // Senders wait (only a waiter fills the list), so the bit is still up.
                self.rx.freed.fetch_add(n, AcqRel);
                return true;
            }
            if let Some(w) = self.release(st) {
                wakes.push(w);
            }
            n -= 1;
        }
        if keep != 0 && st.queue.is_empty() {
            // Slots freed from now on stay counted in `freed`: nobody waits for them.
            self.rx.freed.fetch_and(!WAITING, AcqRel);
        }
        false
    }

    /// [`fold`](Chan::fold) until nothing is left, waking each full list of wakers with
    /// the lock let go; returns the lock held again, the last round's wakers in `wakes`.
    fn fold_all<'a>(&'a self, mut st: MutexGuard<'a, State<T>>, wakes: &mut WakeList) -> MutexGuard<'a, State<T>> {
        while self.fold(&mut st, wakes) {
            drop(st);
            wakes.wake_all();
            st = self.lock();
        }
        st
    }

    /// The receiver gave `n` slots back (it received `n` values): counted without the
    /// lock, unless senders wait for them.
    fn freed_by_receiver(&self, n: usize) {
        if self.bound.is_none() || n == 0 {
            return;
        }
        if self.rx.freed.fetch_add(n, AcqRel) & WAITING != 0 {
            let mut wakes = WakeList::new();
            let st = self.fold_all(self.lock(), &mut wakes);
            drop(st);
            wakes.wake_all();
        }
    }

    /// The receiver's next value: from its batch, or else the whole shared buffer
    /// becomes its batch. With no value, the lock comes back held. Only the receiver
    /// calls it.
    fn next_value(&self) -> Result<T, MutexGuard<'_, State<T>>> {
        // SAFETY: only the receiver reaches `rx.buf`, through `&mut self` here.
        if let Some(v) = self.rx.buf.with_mut(|b| unsafe { (*b).pop_front() }) {
            self.freed_by_receiver(1);
            return Ok(v);
        }
        let mut st = self.lock();
        if st.buf.is_empty() {
            return Err(st);
        }
        // SAFETY: as above. The batch is empty: the swap gives the senders its
        // allocation back.
        let v = self.rx.buf.with_mut(|b| unsafe {
            let b = &mut *b;
            std::mem::swap(b, &mut st.buf);
            b.pop_front()
        });
        drop(st);
        self.freed_by_receiver(1);
        Ok(v.expect("the buffer was not empty"))
    }

    fn lock(&self) -> MutexGuard<'_, State<T>> {
        lock(&self.state)
    }

    /// Give back one slot of a bounded channel: to the first waiting sender if there is
    /// one, else to the pool. Returns a waker to wake once the lock is let go.
    fn release(&self, st: &mut State<T>) -> Option<Waker> {
        self.bound?;
        if !st.rx_closed {
            if let Some(&k) = st.queue.front() {
                // The slot moves to the first waiter: `in_use` stays. It leaves the
                // queue, and is woken, once it has every slot it needs.
                let slot = st.senders.slot_mut(k);
                slot.got += 1;
                if slot.got < slot.need {
                    return None;
                }
                st.queue.pop_front();
                return st.senders.take(k);
            }
        }
        st.in_use -= 1;
        if st.rx_closed && st.in_use == 0 {
            // A closed receiver waits for the last permit before it reports the end.
            return st.rx_waker.take();
        }
        None
    }

    /// Give back `n` slots (permits never used), the lock held; the wakers of the
    /// waiters they go to are put in `wakes`.
    fn release_many(&self, st: &mut State<T>, n: usize, wakes: &mut WakeList) {
        for _ in 0..n {
            if let Some(w) = self.release(st) {
                // At most one waker per slot, and a waiter wakes only once it has all
                // it needs: a full list here would need more waiters than fit, which
                // the batch's size makes rare; they are woken at once then.
                wakes.push(w);
            }
        }
    }

    /// Send without waiting (`try_send`, and `send`'s first attempt).
    pub(super) fn try_push(&self, value: T) -> Result<(), TrySendError<T>> {
        let mut st = self.lock();
        if st.rx_closed {
            return Err(TrySendError::Closed(value));
        }
        if let Some(bound) = self.bound {
            if st.in_use >= bound && st.queue.is_empty() {
                // Take in what the receiver gave back (no sender waits, so nobody is
                // woken).
                let mut wakes = WakeList::new();
                st = self.fold_all(st, &mut wakes);
                debug_assert!(wakes.is_empty());
            }
            // Waiting senders come first (they hold every free slot anyway).
            if st.in_use >= bound || !st.queue.is_empty() {
                return Err(TrySendError::Full(value));
            }
            st.in_use += 1;
        }
        st.buf.push_back(value);
        let w = st.rx_waker.take();
        drop(st);
        if let Some(w) = w {
            w.wake();
        }
        Ok(())
    }

    /// Send with a slot already held (a permit).
    pub(super) fn push_reserved(&self, value: T) {
        let mut st = self.lock();
        if st.rx_dropped {
            // Nobody will read it: give the slot back and drop the value unlocked.
            let w = self.release(&mut st);
            drop(st);
            drop(value);
            if let Some(w) = w {
                w.wake();
            }
            return;
        }
        st.buf.push_back(value);
        let w = st.rx_waker.take();
        drop(st);
        if let Some(w) = w {
            w.wake();
        }
    }

    /// Give back a permit's slot unused.
    pub(super) fn release_unlocked(&self) {
        let w = {
            let mut st = self.lock();
            self.release(&mut st)
        };
        if let Some(w) = w {
            w.wake();
        }
    }

    /// Give back `n` permits' slots unused.
    pub(super) fn release_many_unlocked(&self, n: usize) {
        let mut wakes = WakeList::new();
        let mut st = self.lock();
        self.release_many(&mut st, n, &mut wakes);
        drop(st);
        wakes.wake_all();
    }

    pub(super) fn try_reserve(&self, n: usize) -> Result<(), TrySendError<()>> {
        let mut st = self.lock();
        if st.rx_closed {
            return Err(TrySendError::Closed(()));
        }
        let bound = self.bound.unwrap_or(usize::MAX);
        if st.queue.is_empty() && bound - st.in_use.min(bound) < n {
            let mut wakes = WakeList::new();
            st = self.fold_all(st, &mut wakes);
            debug_assert!(wakes.is_empty());
        }
        if !st.queue.is_empty() || bound - st.in_use.min(bound) < n {
            return Err(TrySendError::Full(()));
        }
        st.in_use += n;
        Ok(())
    }

    /// Whether the receiver has nothing more to wait for: every sender is gone, or the
    /// channel is closed and the last permit is back (the lock held, the buffers empty,
    /// the receiver's gifts folded).
    fn ended(st: &State<T>) -> bool {
        st.tx_count == 0 || (st.rx_closed && st.in_use == 0)
    }

    /// Keep the receiver's waker (the lock held, then let go) and name its wait.
    fn wait_for_values(mut st: MutexGuard<'_, State<T>>, cx: &mut Context<'_>) {
        // A waker replaced is dropped after the lock is let go.
        let old = match &mut st.rx_waker {
            Some(w) if w.will_wake(cx.waker()) => None,
            slot => slot.replace(cx.waker().clone()),
        };
        drop(st);
        drop(old);
        record_recv_wait();
    }

    /// With no value: fold the receiver's gifts (the lock held), then say whether the
    /// stream has ended; else keep the receiver's waker. Wakes those the fold completed.
    fn end_or_wait<'a>(&'a self, mut st: MutexGuard<'a, State<T>>, cx: Option<&mut Context<'_>>) -> bool {
        // Only the receiver adds to `freed` (this thread), so a relaxed look suffices.
        // With nothing to fold, neither the fold's swap of the shared word nor a list of
        // wakers (its wake and drop: 26 instructions a round trip of `per_op oneshot`)
        // is paid for.
        let mut wakes = None;
        if self.bound.is_some() && self.rx.freed.load(Relaxed) & !WAITING != 0 {
            let mut list = WakeList::new();
            st = self.fold_all(st, &mut list);
            wakes = Some(list);
        }
        let ended = Self::ended(&st);
        match cx {
            Some(cx) if !ended => Self::wait_for_values(st, cx),
            _ => drop(st),
        }
        if let Some(mut list) = wakes {
            list.wake_all();
        }
        ended
    }

    pub(super) fn poll_recv(&self, cx: &mut Context<'_>) -> Poll<Option<T>> {
        std::task::ready!(coop::poll_budget(cx));
        match self.next_value() {
            Ok(v) => {
                coop::spend();
                Poll::Ready(Some(v))
            }
            Err(st) => {
                if self.end_or_wait(st, Some(cx)) {
                    coop::spend();
                    return Poll::Ready(None);
                }
                Poll::Pending
            }
        }
    }

    pub(super) fn poll_recv_many(&self, cx: &mut Context<'_>, buffer: &mut Vec<T>, limit: usize) -> Poll<usize> {
        if limit == 0 {
            return Poll::Ready(0);
        }
        std::task::ready!(coop::poll_budget(cx));
        let first = match self.next_value() {
            Ok(v) => v,
            Err(st) => {
                if self.end_or_wait(st, Some(cx)) {
                    coop::spend();
                    return Poll::Ready(0);
                }
                return Poll::Pending;
            }
        };
        buffer.push(first);
        // The rest from the batch `next_value` left (the shared buffer, if it was
        // empty before), without the lock...
        // SAFETY: only the receiver reaches `rx.buf`, through `&mut self` here.
        let mut more = self.rx.buf.with_mut(|b| unsafe {
            let b = &mut *b;
            let n = (limit - 1).min(b.len());
            buffer.extend(b.drain(..n));
            n
        });
        if more < limit - 1 {
            // ...and, with room left, what the senders added since.
            let mut st = self.lock();
            let n = (limit - 1 - more).min(st.buf.len());
            buffer.extend(st.buf.drain(..n));
            drop(st);
            more += n;
        }
        self.freed_by_receiver(more);
        coop::spend();
        Poll::Ready(1 + more)
    }

    pub(super) fn try_recv(&self) -> Result<T, TryRecvError> {
        match self.next_value() {
            Ok(v) => Ok(v),
            Err(st) => {
                if self.end_or_wait(st, None) {
                    Err(TryRecvError::Disconnected)
                } else {
                    Err(TryRecvError::Empty)
                }
            }
        }
    }

    /// The receiver closes the channel: senders fail from now on; the waiting ones and
    /// the `closed()` waiters are woken.
    pub(super) fn close(&self) {
        {
            let mut st = self.lock();
            if st.rx_closed {
                return;
            }
            st.rx_closed = true;
            // Waiters see the flag when they wake; none of them is granted a slot now.
            st.queue.clear();
        }
        wake_all_of(&self.state, |st| &mut st.senders);
        wake_all_of(&self.state, |st| &mut st.closed);
    }

    /// The receiver is dropped: close, and drop the values buffered.
    pub(super) fn close_and_drain(&self) {
        self.close();
        // SAFETY: the receiver is being dropped; nothing else reaches its batch.
        let batch = self.rx.buf.with_mut(|b| unsafe { std::mem::take(&mut *b) });
        let mut wakes = WakeList::new();
        let (buf, waker) = {
            let mut st = self.lock();
            st.rx_dropped = true;
            let mut st = self.fold_all(st, &mut wakes);
            st.in_use -= if self.bound.is_some() { st.buf.len() + batch.len() } else { 0 };
            (std::mem::take(&mut st.buf), st.rx_waker.take())
        };
        // The values' destructors, and the receiver's last waker's, run without the lock.
        drop(batch);
        drop(buf);
        drop(waker);
        wakes.wake_all();
    }

    /// Whether the receiver closed the channel or is gone (the senders' view).
    pub(super) fn is_closed(&self) -> bool {
        self.lock().rx_closed
    }

    /// Whether the channel is closed for the receiver: every sender is gone, or it
    /// closed the channel.
    pub(super) fn is_closed_for_receiver(&self) -> bool {
        let st = self.lock();
        st.rx_closed || st.tx_count == 0
    }

    /// Values buffered. Only the receiver calls it.
    pub(super) fn len(&self) -> usize {
        // SAFETY: only the receiver reaches `rx.buf`, and it does not change it while
        // it reads its length through `&self`.
        let batch = self.rx.buf.with(|b| unsafe { (*b).len() });
        batch + self.lock().buf.len()
    }

    pub(super) fn add_sender(&self) {
        self.lock().tx_count += 1;
    }

    pub(super) fn drop_sender(&self) {
        let mut st = self.lock();
        st.tx_count -= 1;
        if st.tx_count == 0 {
            let w = st.rx_waker.take();
            drop(st);
            if let Some(w) = w {
                w.wake();
            }
        }
    }

    /// A weak sender's upgrade: a new sender while any sender lives.
    pub(super) fn upgrade(&self) -> bool {
        let mut st = self.lock();
        if st.tx_count == 0 {
            return false;
        }
        st.tx_count += 1;
        true
    }

    pub(super) fn add_weak(&self) {
        self.lock().weak_count += 1;
    }

    pub(super) fn drop_weak(&self) {
        self.lock().weak_count -= 1;
    }

    pub(super) fn strong_count(&self) -> usize {
        self.lock().tx_count
    }

    pub(super) fn weak_count(&self) -> usize {
        self.lock().weak_count
    }

    pub(super) fn capacity(&self) -> usize {
        let Some(b) = self.bound else { return usize::MAX };
        // Folded first: a slot the receiver freed while senders wait is theirs, not free.
        let mut wakes = WakeList::new();
        let st = self.fold_all(self.lock(), &mut wakes);
        let free = b - st.in_use.min(b);
        drop(st);
        wakes.wake_all();
        free
    }

    pub(super) fn max_capacity(&self) -> usize {
        self.bound.unwrap_or(usize::MAX)
    }
}

/// Waits for `need` slots of a bounded channel (`send`, `reserve`, `reserve_owned`,
/// `reserve_many`).
pub(super) struct Acquire<'a, T> {
    chan: &'a Chan<T>,
    need: usize,
    key: Option<usize>,
    kind: WaitKind,
}

impl<'a, T> Acquire<'a, T> {
    pub(super) fn new(chan: &'a Chan<T>, need: usize, kind: WaitKind) -> Self {
        Acquire { chan, need, key: None, kind }
    }

    /// Leave the queue (the lock held), giving back the slots handed over so far; the
    /// wakers of the waiters they go to are put in `wakes`. Returns this waiter's own
    /// waker, to drop once the lock is let go.
    #[must_use]
    fn leave(&mut self, st: &mut State<T>, wakes: &mut WakeList) -> Option<Waker> {
        let k = self.key.take()?;
        let slot = st.senders.slot(k);
        let got = slot.got;
        if got < slot.need {
            st.queue.retain(|&q| q != k);
        }
        let own = st.senders.remove(k);
        self.chan.release_many(st, got, wakes);
        own
    }
}

impl<T> Future for Acquire<'_, T> {
    /// `Err` when the receiver closed the channel.
    type Output = Result<(), ()>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), ()>> {
        let this = &mut *self;
        let chan = this.chan;
        let bound = chan.max_capacity();
        let mut st = chan.lock();
        match this.key {
            Some(k) => {
                if st.rx_closed {
                    let mut wakes = WakeList::new();
                    let own = this.leave(&mut st, &mut wakes);
                    drop(st);
                    drop(own);
                    wakes.wake_all();
                    return Poll::Ready(Err(()));
                }
                let slot = st.senders.slot(k);
                if slot.got == slot.need {
                    this.key = None;
                    let own = st.senders.remove(k);
                    drop(st);
                    drop(own);
                    return Poll::Ready(Ok(()));
                }
                let old = st.senders.update(k, cx.waker());
                drop(st);
                drop(old);
            }
            None => {
                if st.rx_closed {
                    return Poll::Ready(Err(()));
                }
                if this.need == 0 {
                    return Poll::Ready(Ok(()));
                }
                let mut wakes = WakeList::new();
                if st.queue.is_empty() {
                    // Nobody waits, so nobody is woken.
                    st = chan.fold_all(st, &mut wakes);
                    if bound - st.in_use.min(bound) >= this.need {
                        st.in_use += this.need;
                        return Poll::Ready(Ok(()));
                    }
                    let k = st.senders.insert_needing(cx.waker(), this.need);
                    // The first in the queue takes the slots free now, so that a sender
                    // arriving later cannot take them from it.
                    let free = bound - st.in_use.min(bound);
                    st.senders.slot_mut(k).got = free;
                    st.in_use += free;
                    st.queue.push_back(k);
                    this.key = Some(k);
                    // The fold raises the bit (the queue is not empty now) in the same
                    // swap that takes the slots freed before it went up (to this
                    // sender, which is then woken to take them); from here the receiver
                    // brings each slot it frees to the lock.
                    st = chan.fold_all(st, &mut wakes);
                } else {
                    let k = st.senders.insert_needing(cx.waker(), this.need);
                    st.queue.push_back(k);
                    this.key = Some(k);
                }
                drop(st);
                wakes.wake_all();
            }
        }
        record_full_wait(this.kind, bound);
        Poll::Pending
    }
}

impl<T> Drop for Acquire<'_, T> {
    fn drop(&mut self) {
        if self.key.is_none() {
            return;
        }
        let mut wakes = WakeList::new();
        let chan = self.chan;
        let mut st = chan.lock();
        // Slots handed to a waiter that left go on to the next ones.
        let own = self.leave(&mut st, &mut wakes);
        drop(st);
        drop(own);
        wakes.wake_all();
    }
}
