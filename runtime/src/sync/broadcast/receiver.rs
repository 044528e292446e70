//! The receivers' side: [`Receiver`], reading each slot side by side with the others.

use super::error::{RecvError, TryRecvError};
use super::Receiver;
use crate::loom::Arc;
use crate::sync::waiters::wake_all_of;
use crate::task::coop;
use std::fmt;
use std::sync::atomic::Ordering::{Relaxed, Release};
use std::task::{Context, Poll, Waker};

/// Name a receiver's wait.
fn record_recv_wait() {
    crate::task::wait::record_label("recv broadcast");
}

/// What a read without entering the slot found.
enum Marked<T> {
    Got(T),
    /// The slot holds another position: nothing new, or this receiver lags.
    Missed,
    /// The channel is careful: enter the slot to read it.
    Careful,
}

/// Why an attempt to receive found no value.
enum Miss {
    Empty,
    Closed,
    Lagged(u64),
}

impl<T: Clone> Receiver<T> {
    /// Read the slot of `pos` without entering it, unless the channel is careful (see
    /// `slot`): mark the read, fence, and look at the flag.
    #[inline]
    fn read_marked(&mut self, pos: u64) -> Marked<T> {
        let shared = &*self.shared;
        if shared.careful.load(Relaxed) {
            return Marked::Careful;
        }
        // `Release`, like the idle mark after the last read: a sender that sees this mark
        // instead of that one must still know the last read's clone is done.
        let mark = &self.mark.word;
        mark.store(pos << 1 | 1, Release);
        shared.fence.light();
        if shared.careful.load(Relaxed) {
            mark.store(0, Release);
            return Marked::Careful;
        }
        // SAFETY: the read is marked and the channel was not careful after the fence.
        match unsafe { shared.slot(pos).read_marked(&mut self.next, mark) } {
            Some(v) => Marked::Got(v),
            None => Marked::Missed,
        }
    }

    /// Take the next value, or say why there is none. With `waker`, a receiver that
    /// finds nothing new registers it before the tail lock is let go, so a value sent
    /// after the check wakes it.
    fn try_take(&mut self, waker: Option<&Waker>) -> Result<T, Miss> {
        loop {
            let pos = self.next;
            match self.read_marked(pos) {
                Marked::Got(v) => return Ok(v),
                Marked::Missed => {}
                Marked::Careful => {
                    // `None`: a writer has the slot; the tail lock below waits it out.
                    if let Some(mut slot) = self.shared.slot(pos).read() {
                        if slot.pos() == pos {
                            // The value is there for this receiver (it was alive when the
                            // value was sent, so the value counts it and is still held).
                            // The receiver moves past it before cloning: a clone that
                            // panics leaves the value counted as seen (as Tokio does).
                            // Leaving the slot counts it, and the last to leave drops the
                            // value.
                            self.next = pos + 1;
                            slot.seen();
                            let v = slot.clone_val().expect("a value is kept until every receiver has seen it");
                            drop(slot);
                            return Ok(v);
                        }
                    }
                }
            }
            // Nothing for this receiver in the slot: nothing new, or it lags. The tail
            // lock says which, as no sender writes while it is held.
            let mut tail = self.shared.lock();
            if pos >= tail.pos {
                if tail.tx_count == 0 {
                    return Err(Miss::Closed);
                }
                let old = waker.and_then(|w| tail.waiters.register(&mut self.key, w));
                drop(tail);
                drop(old);
                return Err(Miss::Empty);
            }
            let oldest = tail.pos.saturating_sub(self.shared.capacity());
            if pos < oldest {
                self.next = oldest;
                return Err(Miss::Lagged(oldest - pos));
            }
            // A value was sent between the two looks: read it.
        }
    }

    /// Wait for the next value. `Lagged(n)` once when the receiver fell more than the
    /// capacity behind (it then goes on from the oldest value kept); `Closed` when every
    /// sender is gone and every value was seen. Cancel safe.
    pub async fn recv(&mut self) -> Result<T, RecvError> {
        std::future::poll_fn(|cx| self.poll_recv(cx)).await
    }

    fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Result<T, RecvError>> {
        std::task::ready!(coop::poll_budget(cx));
        let out = match self.try_take(Some(cx.waker())) {
            Ok(v) => Ok(v),
            Err(Miss::Closed) => Err(RecvError::Closed),
            Err(Miss::Lagged(n)) => Err(RecvError::Lagged(n)),
            Err(Miss::Empty) => {
                record_recv_wait();
                return Poll::Pending;
            }
        };
        coop::spend();
        Poll::Ready(out)
    }

    /// The next value if there is one now.
    pub fn try_recv(&mut self) -> Result<T, TryRecvError> {
        self.try_take(None).map_err(|m| match m {
            Miss::Empty => TryRecvError::Empty,
            Miss::Closed => TryRecvError::Closed,
            Miss::Lagged(n) => TryRecvError::Lagged(n),
        })
    }

    /// [`recv`](Receiver::recv) from synchronous code, blocking the thread.
    ///
    /// # Panics
    /// On a runtime's worker thread.
    #[cfg(not(loom))]
    #[track_caller]
    pub fn blocking_recv(&mut self) -> Result<T, RecvError> {
        crate::sync::blocking_wait("broadcast::Receiver::blocking_recv", self.recv())
    }
}

impl<T> Receiver<T> {
    /// A new receiver of the same channel, which sees the values sent from now on.
    ///
    /// # Panics
    /// When the channel already has `u32::MAX` receivers.
    pub fn resubscribe(&self) -> Self {
        let mut tail = self.shared.lock();
        let next = tail.pos;
        super::add_receiver(&self.shared, &mut tail, next)
    }

    /// Values sent that this receiver has yet to receive (more than the capacity when it
    /// lags).
    pub fn len(&self) -> usize {
        (self.shared.lock().pos - self.next) as usize
    }

    /// Whether this receiver has received every value sent.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether `other` receives from the same channel.
    pub fn same_channel(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.shared, &other.shared)
    }

    /// Whether every sender is gone (values may still wait to be received).
    pub fn is_closed(&self) -> bool {
        self.shared.lock().tx_count == 0
    }

    /// How many senders the channel has.
    pub fn sender_strong_count(&self) -> usize {
        self.shared.lock().tx_count
    }

    /// How many weak senders the channel has.
    pub fn sender_weak_count(&self) -> usize {
        self.shared.lock().weak_count
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        let mut dropped = Vec::new();
        let mut old = None;
        let last = {
            let mut tail = self.shared.lock();
            if let Some(k) = self.key {
                old = tail.waiters.remove(k);
            }
            // The values this receiver never saw no longer wait for it. With the tail
            // lock held no sender rewrites these slots.
            let from = self.next.max(tail.pos.saturating_sub(self.shared.capacity()));
            for pos in from..tail.pos {
                // SAFETY: the tail lock is held, and this receiver, alive when each of
                // these values was sent and yet to see it, is counted in it.
                if let Some(v) = unsafe { self.shared.slot(pos).count_off_locked(pos) } {
                    dropped.push(v);
                }
            }
            super::remove_mark(&mut tail, &self.mark);
            tail.rx_count -= 1;
            tail.rx_count == 0
        };
        drop(dropped);
        drop(old);
        if last {
            wake_all_of(&*self.shared.tail, |t| &mut t.closed);
        }
    }
}

impl<T> fmt::Debug for Receiver<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Receiver").field("next", &self.next).finish_non_exhaustive()
    }
}
