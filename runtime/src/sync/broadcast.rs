//! Tokio's `sync::broadcast` channel: many senders, many receivers, and each receiver
//! sees every value sent while it lives, in order.
//!
//! # How it works
//! A ring of `capacity` slots (rounded up to a power of two, as Tokio does) behind one
//! mutex. A value takes the slot of its position, with a count of the receivers that
//! have yet to see it (those alive when it was sent); the last of them drops it. A
//! receiver keeps the position it reads next. When senders get more than the capacity
//! ahead of a receiver, its oldest values are overwritten: its next `recv` returns
//! [`RecvError::Lagged`](error::RecvError::Lagged) with how many it missed, once, and then
//! goes on from the oldest value still kept. Receivers that wait keep one slot each in
//! a reusable slab, woken in batches after the lock is let go.
//!
//! A receive that waits shows in the console as `recv broadcast`; [`Sender::closed`] as
//! `closed broadcast`.

use super::mpsc::{wake_all_of, Waiters};
use crate::loom::{lock, Arc, Mutex, MutexGuard};
use crate::task::coop;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
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

    /// Why a [`recv`](super::Receiver::recv) returned no value.
    #[derive(Debug, PartialEq, Eq, Clone)]
    pub enum RecvError {
        /// Every sender is gone, and this receiver has seen every value.
        Closed,
        /// The receiver fell behind: this many values were overwritten before it read
        /// them. The next receive returns the oldest value still kept.
        Lagged(u64),
    }

    impl fmt::Display for RecvError {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            match self {
                RecvError::Closed => f.write_str("channel closed"),
                RecvError::Lagged(n) => write!(f, "channel lagged by {n}"),
            }
        }
    }

    impl std::error::Error for RecvError {}

    /// Why a [`try_recv`](super::Receiver::try_recv) returned no value.
    #[derive(Debug, PartialEq, Eq, Clone)]
    pub enum TryRecvError {
        /// Nothing new now, and a sender could still send.
        Empty,
        /// Every sender is gone, and this receiver has seen every value.
        Closed,
        /// The receiver fell behind by this many values (as [`RecvError::Lagged`]).
        Lagged(u64),
    }

    impl fmt::Display for TryRecvError {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            match self {
                TryRecvError::Empty => f.write_str("channel empty"),
                TryRecvError::Closed => f.write_str("channel closed"),
                TryRecvError::Lagged(n) => write!(f, "channel lagged by {n}"),
            }
        }
    }

    impl std::error::Error for TryRecvError {}
}

use error::{RecvError, SendError, TryRecvError};

/// Name a receiver's wait.
fn record_recv_wait() {
    crate::task::wait::record_label("recv broadcast");
}

/// Name the wait of [`Sender::closed`].
fn record_closed_wait() {
    crate::task::wait::record_label("closed broadcast");
}

struct Slot<T> {
    /// The position of the value it holds (or last held).
    pos: u64,
    /// Receivers yet to see it.
    rem: usize,
    val: Option<T>,
}

struct Shared<T> {
    state: Mutex<State<T>>,
    mask: u64,
}

struct State<T> {
    buf: Box<[Slot<T>]>,
    /// The position of the next value sent.
    tail: u64,
    /// Values still held (some receiver has yet to see them).
    held: usize,
    rx_count: usize,
    tx_count: usize,
    weak_count: usize,
    /// Receivers waiting for a value.
    waiters: Waiters,
    /// Waiters of `Sender::closed`.
    closed: Waiters,
}

impl<T> Shared<T> {
    fn lock(&self) -> MutexGuard<'_, State<T>> {
        lock(&self.state)
    }

    fn capacity(&self) -> u64 {
        self.mask + 1
    }
}

/// A channel that keeps the last `capacity` values (rounded up to a power of two) for
/// receivers that fall behind.
///
/// # Panics
/// When `capacity` is 0 or larger than `usize::MAX / 2`.
#[track_caller]
pub fn channel<T: Clone>(capacity: usize) -> (Sender<T>, Receiver<T>) {
    assert!(capacity > 0, "broadcast channel capacity cannot be zero");
    assert!(capacity <= usize::MAX >> 1, "broadcast channel capacity exceeded `usize::MAX / 2`");
    let cap = capacity.next_power_of_two();
    let buf = (0..cap).map(|_| Slot { pos: 0, rem: 0, val: None }).collect();
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            buf,
            tail: 0,
            held: 0,
            rx_count: 1,
            tx_count: 1,
            weak_count: 0,
            waiters: Waiters::default(),
            closed: Waiters::default(),
        }),
        mask: cap as u64 - 1,
    });
    let rx = Receiver { shared: shared.clone(), next: 0, key: None };
    (Sender { shared }, rx)
}

/// Sends values to every receiver; clone it for more producers.
pub struct Sender<T> {
    shared: Arc<Shared<T>>,
}

/// Receives every value sent while it lives, in order.
pub struct Receiver<T> {
    shared: Arc<Shared<T>>,
    /// The position it reads next.
    next: u64,
    /// Its slot among the waiters, once it has waited.
    key: Option<usize>,
}

/// A sender that does not keep the channel open: [`upgrade`](WeakSender::upgrade) it
/// while a [`Sender`] lives.
pub struct WeakSender<T> {
    shared: Arc<Shared<T>>,
}

impl<T: Clone> Sender<T> {
    /// A sender of a new channel with no receiver yet ([`subscribe`](Sender::subscribe)
    /// makes them).
    ///
    /// # Panics
    /// As [`channel`] does, for the capacity.
    #[track_caller]
    pub fn new(capacity: usize) -> Self {
        let (tx, _) = channel(capacity);
        tx
    }
}

impl<T> Sender<T> {
    /// Send `value` to every receiver; returns how many there are. With none, the value
    /// comes back in `Err` and is not kept.
    pub fn send(&self, value: T) -> Result<usize, SendError<T>> {
        let mut st = self.shared.lock();
        if st.rx_count == 0 {
            return Err(SendError(value));
        }
        let rx = st.rx_count;
        let tail = st.tail;
        let slot = &mut st.buf[(tail & self.shared.mask) as usize];
        let evicted = slot.rem > 0;
        let old = slot.val.take();
        slot.pos = tail;
        slot.rem = rx;
        slot.val = Some(value);
        if !evicted {
            st.held += 1;
        }
        st.tail = tail + 1;
        drop(st);
        // An overwritten value is dropped without the lock.
        drop(old);
        wake_all_of(&self.shared.state, |st| &mut st.waiters);
        Ok(rx)
    }

    /// A new receiver, which sees the values sent from now on.
    pub fn subscribe(&self) -> Receiver<T> {
        let mut st = self.shared.lock();
        st.rx_count += 1;
        Receiver { shared: self.shared.clone(), next: st.tail, key: None }
    }

    /// How many receivers live.
    pub fn receiver_count(&self) -> usize {
        self.shared.lock().rx_count
    }

    /// Values held: sent, and not yet seen by every receiver alive when they were sent
    /// (at most the capacity).
    pub fn len(&self) -> usize {
        self.shared.lock().held
    }

    /// Whether no value is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether `other` sends on the same channel.
    pub fn same_channel(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.shared, &other.shared)
    }

    /// Wait until no receiver lives.
    pub async fn closed(&self) {
        ClosedFut { shared: &self.shared, key: None }.await
    }

    /// How many senders the channel has.
    pub fn strong_count(&self) -> usize {
        self.shared.lock().tx_count
    }

    /// How many weak senders the channel has.
    pub fn weak_count(&self) -> usize {
        self.shared.lock().weak_count
    }

    /// A [`WeakSender`] of this channel.
    pub fn downgrade(&self) -> WeakSender<T> {
        self.shared.lock().weak_count += 1;
        WeakSender { shared: self.shared.clone() }
    }
}

impl<T> WeakSender<T> {
    /// A [`Sender`], if any sender still lives.
    pub fn upgrade(&self) -> Option<Sender<T>> {
        let mut st = self.shared.lock();
        if st.tx_count == 0 {
            return None;
        }
        st.tx_count += 1;
        Some(Sender { shared: self.shared.clone() })
    }

    /// How many senders the channel has.
    pub fn strong_count(&self) -> usize {
        self.shared.lock().tx_count
    }

    /// How many weak senders the channel has.
    pub fn weak_count(&self) -> usize {
        self.shared.lock().weak_count
    }
}

impl<T> Clone for WeakSender<T> {
    fn clone(&self) -> Self {
        self.shared.lock().weak_count += 1;
        WeakSender { shared: self.shared.clone() }
    }
}

impl<T> Drop for WeakSender<T> {
    fn drop(&mut self) {
        self.shared.lock().weak_count -= 1;
    }
}

impl<T> fmt::Debug for WeakSender<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WeakSender").finish_non_exhaustive()
    }
}

struct ClosedFut<'a, T> {
    shared: &'a Shared<T>,
    key: Option<usize>,
}

impl<T> Future for ClosedFut<'_, T> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = &mut *self;
        let mut st = this.shared.lock();
        if st.rx_count == 0 {
            let old = this.key.take().and_then(|k| st.closed.remove(k));
            drop(st);
            drop(old);
            return Poll::Ready(());
        }
        let old = st.closed.register(&mut this.key, cx.waker());
        drop(st);
        drop(old);
        record_closed_wait();
        Poll::Pending
    }
}

impl<T> Drop for ClosedFut<'_, T> {
    fn drop(&mut self) {
        if let Some(k) = self.key {
            // The waker is dropped after the lock is let go.
            let _old = self.shared.lock().closed.remove(k);
        }
    }
}

impl<T> Clone for Sender<T> {
    fn clone(&self) -> Self {
        self.shared.lock().tx_count += 1;
        Sender { shared: self.shared.clone() }
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        let last = {
            let mut st = self.shared.lock();
            st.tx_count -= 1;
            st.tx_count == 0
        };
        if last {
            // Receivers that wait learn that the channel is closed.
            wake_all_of(&self.shared.state, |st| &mut st.waiters);
        }
    }
}

impl<T> fmt::Debug for Sender<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sender").field("receivers", &self.receiver_count()).finish_non_exhaustive()
    }
}

/// What one attempt to receive found.
enum Got<T> {
    Value(T),
    /// The value itself: this receiver was the last to see it.
    Last(T),
    Empty,
    Closed,
    Lagged(u64),
}

impl<T: Clone> Receiver<T> {
    /// Take the next value, or say why there is none; with the lock held.
    fn try_take(&mut self, st: &mut State<T>) -> Got<T> {
        if self.next >= st.tail {
            return if st.tx_count == 0 { Got::Closed } else { Got::Empty };
        }
        let oldest = st.tail.saturating_sub(self.shared.capacity());
        if self.next < oldest {
            let missed = oldest - self.next;
            self.next = oldest;
            return Got::Lagged(missed);
        }
        let slot = &mut st.buf[(self.next & self.shared.mask) as usize];
        debug_assert_eq!(slot.pos, self.next);
        // The receiver moves past the value before cloning it: a clone that panics
        // leaves the channel consistent, the value counted as seen (as Tokio does).
        self.next += 1;
        slot.rem -= 1;
        if slot.rem == 0 {
            // The last receiver to see it takes it out, to clone (every receiver gets a
            // clone, as with Tokio) and drop without the lock.
            let v = slot.val.take().expect("a value is kept until every receiver has seen it");
            st.held -= 1;
            return Got::Last(v);
        }
        Got::Value(slot.val.as_ref().expect("a value is kept until every receiver has seen it").clone())
    }

    /// Wait for the next value. `Lagged(n)` once when the receiver fell more than the
    /// capacity behind (it then goes on from the oldest value kept); `Closed` when every
    /// sender is gone and every value was seen. Cancel safe.
    pub async fn recv(&mut self) -> Result<T, RecvError> {
        std::future::poll_fn(|cx| self.poll_recv(cx)).await
    }

    fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Result<T, RecvError>> {
        std::task::ready!(coop::poll_proceed(cx));
        let shared = self.shared.clone();
        let mut st = shared.lock();
        let got = self.try_take(&mut st);
        let out = match got {
            Got::Value(v) => Ok(v),
            Got::Last(v) => {
                drop(st);
                coop::spend();
                return Poll::Ready(Ok(v.clone()));
            }
            Got::Closed => Err(RecvError::Closed),
            Got::Lagged(n) => Err(RecvError::Lagged(n)),
            Got::Empty => {
                let old = st.waiters.register(&mut self.key, cx.waker());
                drop(st);
                drop(old);
                record_recv_wait();
                return Poll::Pending;
            }
        };
        drop(st);
        coop::spend();
        Poll::Ready(out)
    }

    /// The next value if there is one now.
    pub fn try_recv(&mut self) -> Result<T, TryRecvError> {
        let shared = self.shared.clone();
        let mut st = shared.lock();
        let got = self.try_take(&mut st);
        drop(st);
        match got {
            Got::Value(v) => Ok(v),
            Got::Last(v) => Ok(v.clone()),
            Got::Empty => Err(TryRecvError::Empty),
            Got::Closed => Err(TryRecvError::Closed),
            Got::Lagged(n) => Err(TryRecvError::Lagged(n)),
        }
    }

    /// [`recv`](Receiver::recv) from synchronous code, blocking the thread.
    ///
    /// # Panics
    /// On a runtime's worker thread.
    #[cfg(not(loom))]
    #[track_caller]
    pub fn blocking_recv(&mut self) -> Result<T, RecvError> {
        super::mpsc::block_on("broadcast::Receiver::blocking_recv", self.recv())
    }
}

impl<T> Receiver<T> {
    /// A new receiver of the same channel, which sees the values sent from now on.
    pub fn resubscribe(&self) -> Self {
        let mut st = self.shared.lock();
        st.rx_count += 1;
        Receiver { shared: self.shared.clone(), next: st.tail, key: None }
    }

    /// Values sent that this receiver has yet to receive (more than the capacity when it
    /// lags).
    pub fn len(&self) -> usize {
        (self.shared.lock().tail - self.next) as usize
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
            let mut st = self.shared.lock();
            if let Some(k) = self.key {
                old = st.waiters.remove(k);
            }
            // The values this receiver never saw no longer wait for it.
            let from = self.next.max(st.tail.saturating_sub(self.shared.capacity()));
            for pos in from..st.tail {
                let slot = &mut st.buf[(pos & self.shared.mask) as usize];
                slot.rem -= 1;
                if slot.rem == 0 {
                    if let Some(v) = slot.val.take() {
                        dropped.push(v);
                    }
                    st.held -= 1;
                }
            }
            st.rx_count -= 1;
            st.rx_count == 0
        };
        drop(dropped);
        drop(old);
        if last {
            wake_all_of(&self.shared.state, |st| &mut st.closed);
        }
    }
}

impl<T> fmt::Debug for Receiver<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Receiver").field("next", &self.next).finish_non_exhaustive()
    }
}
