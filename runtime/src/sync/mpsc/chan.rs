//! The channel both kinds of halves share: its state behind one mutex, the receive and
//! send paths, and the wait of a sender for room in a bounded channel ([`Acquire`]).

use super::error::{TryRecvError, TrySendError};
use crate::loom::{lock, Arc, Mutex, MutexGuard};
use crate::sync::waiters::{wake_all_of, ClosedState, Waiters, WakeList};
use crate::task::coop;
use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
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

pub(super) struct Chan<T> {
    pub(super) state: Mutex<State<T>>,
    /// The capacity of a bounded channel; `None` for an unbounded one.
    pub(super) bound: Option<usize>,
}

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
        })
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
        if !st.queue.is_empty() || bound - st.in_use.min(bound) < n {
            return Err(TrySendError::Full(()));
        }
        st.in_use += n;
        Ok(())
    }

    /// Whether the receiver has nothing more to wait for: every sender is gone, or the
    /// channel is closed and the last permit is back (the lock held, the buffer empty).
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

    pub(super) fn poll_recv(&self, cx: &mut Context<'_>) -> Poll<Option<T>> {
        std::task::ready!(coop::poll_proceed(cx));
        let mut st = self.lock();
        if let Some(v) = st.buf.pop_front() {
            let w = self.release(&mut st);
            drop(st);
            coop::spend();
            if let Some(w) = w {
                w.wake();
            }
            return Poll::Ready(Some(v));
        }
        if Self::ended(&st) {
            coop::spend();
            return Poll::Ready(None);
        }
        Self::wait_for_values(st, cx);
        Poll::Pending
    }

    pub(super) fn poll_recv_many(&self, cx: &mut Context<'_>, buffer: &mut Vec<T>, limit: usize) -> Poll<usize> {
        if limit == 0 {
            return Poll::Ready(0);
        }
        std::task::ready!(coop::poll_proceed(cx));
        let mut st = self.lock();
        if !st.buf.is_empty() {
            let n = limit.min(st.buf.len());
            buffer.reserve(n);
            let mut wakes = WakeList::new();
            for _ in 0..n {
                let v = st.buf.pop_front().expect("counted above");
                buffer.push(v);
                if let Some(w) = self.release(&mut st) {
                    if wakes.is_full() {
                        // Rare: more than a batch of senders served at once.
                        drop(st);
                        wakes.wake_all();
                        st = self.lock();
                    }
                    wakes.push(w);
                }
            }
            drop(st);
            coop::spend();
            wakes.wake_all();
            return Poll::Ready(n);
        }
        if Self::ended(&st) {
            coop::spend();
            return Poll::Ready(0);
        }
        Self::wait_for_values(st, cx);
        Poll::Pending
    }

    pub(super) fn try_recv(&self) -> Result<T, TryRecvError> {
        let mut st = self.lock();
        if let Some(v) = st.buf.pop_front() {
            let w = self.release(&mut st);
            drop(st);
            if let Some(w) = w {
                w.wake();
            }
            return Ok(v);
        }
        if Self::ended(&st) {
            Err(TryRecvError::Disconnected)
        } else {
            Err(TryRecvError::Empty)
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
        let (buf, waker) = {
            let mut st = self.lock();
            st.rx_dropped = true;
            st.in_use -= if self.bound.is_some() { st.buf.len() } else { 0 };
            (std::mem::take(&mut st.buf), st.rx_waker.take())
        };
        // The values' destructors, and the receiver's last waker's, run without the lock.
        drop(buf);
        drop(waker);
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

    /// Values buffered.
    pub(super) fn len(&self) -> usize {
        self.lock().buf.len()
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
        match self.bound {
            Some(b) => b - self.lock().in_use.min(b),
            None => usize::MAX,
        }
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
                if st.queue.is_empty() && bound - st.in_use.min(bound) >= this.need {
                    st.in_use += this.need;
                    return Poll::Ready(Ok(()));
                }
                let k = st.senders.insert_needing(cx.waker(), this.need);
                if st.queue.is_empty() {
                    // The first in the queue takes the slots free now, so that a sender
                    // arriving later cannot take them from it.
                    let free = bound - st.in_use.min(bound);
                    st.senders.slot_mut(k).got = free;
                    st.in_use += free;
                }
                st.queue.push_back(k);
                this.key = Some(k);
                drop(st);
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
