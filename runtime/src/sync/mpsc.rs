//! Tokio's `sync::mpsc` channel: many senders, one receiver, bounded ([`channel`]) or
//! not ([`unbounded_channel`]).
//!
//! # How it works
//! One mutex guards the channel: a `VecDeque` of values (its ring is reused, so a
//! message costs no allocation once the channel has warmed up), the receiver's waker,
//! and the senders waiting for room. A bounded channel counts its slots in use: a value
//! in the buffer or a permit handed out ([`Permit`], [`OwnedPermit`]) holds one. A slot
//! the receiver frees goes straight to the first sender in the queue, so senders that
//! wait are served in the order they came, and a `try_send` cannot take a slot from
//! them. The waiting senders live in a slab of slots the channel reuses, so a wait does
//! not allocate either. Wakers are woken after the lock is let go.
//!
//! # Cancel safety (as Tokio documents)
//! [`Receiver::recv`] is cancel safe: a value is taken from the buffer only in the poll
//! that returns it. [`Sender::reserve`] is cancel safe apart from the place in the queue:
//! a slot granted to a dropped `reserve` goes to the next sender. [`Sender::send`] loses
//! its value and its place when dropped before it completes.
//!
//! # Named waits
//! A receive on an empty channel shows in the console as `recv mpsc (empty)`, a send on
//! a full channel as `send mpsc (full, N)` with N the capacity (`reserve mpsc (full, N)`
//! for a reservation), and [`Sender::closed`] as `closed mpsc`.

use super::waiters::{wake_all_of, Closed, ClosedState, Waiters, WakeList};
use crate::loom::{lock, Arc, Mutex, MutexGuard};
use crate::task::coop;
use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

/// The errors of the channel's operations.
pub mod error {
    use std::fmt;

    /// The value a [`send`](super::Sender::send) could not deliver: the receiver is gone
    /// or closed.
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

    /// Why a [`try_send`](super::Sender::try_send) failed; each variant gives the value
    /// back.
    #[derive(PartialEq, Eq, Clone, Copy)]
    pub enum TrySendError<T> {
        /// The channel has no free slot now.
        Full(T),
        /// The receiver is gone or closed.
        Closed(T),
    }

    impl<T> TrySendError<T> {
        /// The value that was not sent.
        pub fn into_inner(self) -> T {
            match self {
                TrySendError::Full(v) | TrySendError::Closed(v) => v,
            }
        }
    }

    impl<T> fmt::Debug for TrySendError<T> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            match self {
                TrySendError::Full(_) => f.write_str("Full(..)"),
                TrySendError::Closed(_) => f.write_str("Closed(..)"),
            }
        }
    }

    impl<T> fmt::Display for TrySendError<T> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(match self {
                TrySendError::Full(_) => "no available capacity",
                TrySendError::Closed(_) => "channel closed",
            })
        }
    }

    impl<T> std::error::Error for TrySendError<T> {}

    impl<T> From<SendError<T>> for TrySendError<T> {
        fn from(e: SendError<T>) -> Self {
            TrySendError::Closed(e.0)
        }
    }

    /// Why a [`send_timeout`](super::Sender::send_timeout) failed; each variant gives the
    /// value back.
    #[derive(PartialEq, Eq, Clone, Copy)]
    pub enum SendTimeoutError<T> {
        /// No slot became free before the timeout.
        Timeout(T),
        /// The receiver is gone or closed.
        Closed(T),
    }

    impl<T> SendTimeoutError<T> {
        /// The value that was not sent.
        pub fn into_inner(self) -> T {
            match self {
                SendTimeoutError::Timeout(v) | SendTimeoutError::Closed(v) => v,
            }
        }
    }

    impl<T> fmt::Debug for SendTimeoutError<T> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            match self {
                SendTimeoutError::Timeout(_) => f.write_str("Timeout(..)"),
                SendTimeoutError::Closed(_) => f.write_str("Closed(..)"),
            }
        }
    }

    impl<T> fmt::Display for SendTimeoutError<T> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(match self {
                SendTimeoutError::Timeout(_) => "timed out waiting on send operation",
                SendTimeoutError::Closed(_) => "channel closed",
            })
        }
    }

    impl<T> std::error::Error for SendTimeoutError<T> {}

    /// Why a [`try_recv`](super::Receiver::try_recv) returned no value.
    #[derive(PartialEq, Eq, Clone, Copy, Debug)]
    pub enum TryRecvError {
        /// Nothing is buffered now, and a sender could still send.
        Empty,
        /// Nothing is buffered, and nothing will be: every sender is gone, or the
        /// receiver closed the channel.
        Disconnected,
    }

    impl fmt::Display for TryRecvError {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(match self {
                TryRecvError::Empty => "receiving on an empty channel",
                TryRecvError::Disconnected => "receiving on a closed channel",
            })
        }
    }

    impl std::error::Error for TryRecvError {}

    /// A receive on a channel whose senders are all gone.
    #[derive(PartialEq, Eq, Clone, Copy, Debug)]
    pub struct RecvError(pub(crate) ());

    impl fmt::Display for RecvError {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("channel closed")
        }
    }

    impl std::error::Error for RecvError {}
}

use error::{SendError, TryRecvError, TrySendError};

/// The largest buffer a bounded channel takes (as Tokio's).
const MAX_BUFFER: usize = usize::MAX >> 3;

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

// ---------------------------------------------------------------------------------------
// Named waits: one place, so that structured sync waits can replace them later.

/// What a waiting operation was doing.
#[derive(Clone, Copy)]
enum WaitKind {
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

struct Chan<T> {
    state: Mutex<State<T>>,
    /// The capacity of a bounded channel; `None` for an unbounded one.
    bound: Option<usize>,
}

struct State<T> {
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
    fn new(bound: Option<usize>) -> Arc<Chan<T>> {
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

    /// Send without waiting (`try_send`, and `send`'s first attempt).
    fn try_push(&self, value: T) -> Result<(), TrySendError<T>> {
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
    fn push_reserved(&self, value: T) {
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
    fn release_unlocked(&self) {
        let w = {
            let mut st = self.lock();
            self.release(&mut st)
        };
        if let Some(w) = w {
            w.wake();
        }
    }

    fn try_reserve(&self, n: usize) -> Result<(), TrySendError<()>> {
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

    fn poll_recv(&self, cx: &mut Context<'_>) -> Poll<Option<T>> {
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
        if st.tx_count == 0 || (st.rx_closed && st.in_use == 0) {
            coop::spend();
            return Poll::Ready(None);
        }
        // A waker replaced is dropped after the lock is let go.
        let old = match &mut st.rx_waker {
            Some(w) if w.will_wake(cx.waker()) => None,
            slot => slot.replace(cx.waker().clone()),
        };
        drop(st);
        drop(old);
        record_recv_wait();
        Poll::Pending
    }

    fn poll_recv_many(&self, cx: &mut Context<'_>, buffer: &mut Vec<T>, limit: usize) -> Poll<usize> {
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
        if st.tx_count == 0 || (st.rx_closed && st.in_use == 0) {
            coop::spend();
            return Poll::Ready(0);
        }
        // A waker replaced is dropped after the lock is let go.
        let old = match &mut st.rx_waker {
            Some(w) if w.will_wake(cx.waker()) => None,
            slot => slot.replace(cx.waker().clone()),
        };
        drop(st);
        drop(old);
        record_recv_wait();
        Poll::Pending
    }

    fn try_recv(&self) -> Result<T, TryRecvError> {
        let mut st = self.lock();
        if let Some(v) = st.buf.pop_front() {
            let w = self.release(&mut st);
            drop(st);
            if let Some(w) = w {
                w.wake();
            }
            return Ok(v);
        }
        if st.tx_count == 0 || (st.rx_closed && st.in_use == 0) {
            Err(TryRecvError::Disconnected)
        } else {
            Err(TryRecvError::Empty)
        }
    }

    /// The receiver closes the channel: senders fail from now on; the waiting ones and
    /// the `closed()` waiters are woken.
    fn close(&self) {
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

    fn close_and_drain(&self) {
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

    fn is_closed(&self) -> bool {
        self.lock().rx_closed
    }

    fn add_sender(&self) {
        self.lock().tx_count += 1;
    }

    fn drop_sender(&self) {
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
    fn upgrade(&self) -> bool {
        let mut st = self.lock();
        if st.tx_count == 0 {
            return false;
        }
        st.tx_count += 1;
        true
    }

    fn capacity(&self) -> usize {
        match self.bound {
            Some(b) => b - self.lock().in_use.min(b),
            None => usize::MAX,
        }
    }
}

/// Waits for `need` slots of a bounded channel (`send`, `reserve`, `reserve_owned`,
/// `reserve_many`).
struct Acquire<'a, T> {
    chan: &'a Chan<T>,
    need: usize,
    key: Option<usize>,
    kind: WaitKind,
}

impl<'a, T> Acquire<'a, T> {
    fn new(chan: &'a Chan<T>, need: usize, kind: WaitKind) -> Self {
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
        for _ in 0..got {
            if let Some(w) = self.chan.release(st) {
                // At most one waker per slot, and a waiter wakes only once it has all
                // it needs: a full list here would need more waiters than fit, which
                // the batch's size makes rare; they are woken at once then.
                if wakes.is_full() {
                    wakes.wake_all();
                }
                wakes.push(w);
            }
        }
        own
    }
}

impl<T> Future for Acquire<'_, T> {
    /// `Err` when the receiver closed the channel.
    type Output = Result<(), ()>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), ()>> {
        let this = &mut *self;
        let chan = this.chan;
        let bound = chan.bound.unwrap_or(usize::MAX);
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

// ---------------------------------------------------------------------------------------
// Bounded channel.

/// A bounded channel with room for `buffer` values: a sender waits while it is full.
///
/// # Panics
/// When `buffer` is 0, or larger than `usize::MAX >> 3` (as Tokio's).
#[track_caller]
pub fn channel<T>(buffer: usize) -> (Sender<T>, Receiver<T>) {
    assert!(buffer > 0, "mpsc bounded channel requires buffer > 0");
    assert!(buffer <= MAX_BUFFER, "mpsc bounded channel requires buffer <= usize::MAX >> 3");
    let chan = Chan::new(Some(buffer));
    (Sender { chan: chan.clone() }, Receiver { chan })
}

/// The sending half of a bounded channel; clone it for more producers.
pub struct Sender<T> {
    chan: Arc<Chan<T>>,
}

/// A sender that does not keep the channel open: [`upgrade`](WeakSender::upgrade) it
/// while a [`Sender`] lives.
pub struct WeakSender<T> {
    chan: Arc<Chan<T>>,
}

/// The receiving half of a bounded channel.
pub struct Receiver<T> {
    chan: Arc<Chan<T>>,
}

/// A reserved slot of a bounded channel: [`send`](Permit::send) fills it without
/// waiting; dropping it gives the slot back.
pub struct Permit<'a, T> {
    chan: &'a Chan<T>,
}

/// A [`Permit`] that owns its [`Sender`], from [`Sender::reserve_owned`].
pub struct OwnedPermit<T> {
    chan: Option<Sender<T>>,
}

impl<T> Sender<T> {
    /// Send `value`, waiting for a slot while the channel is full. Senders that wait
    /// are served in order. Fails, giving the value back, when the receiver is gone or
    /// closed the channel.
    ///
    /// Not cancel safe: dropped before it completes, the value is lost (use
    /// [`reserve`](Sender::reserve) to keep it).
    pub async fn send(&self, value: T) -> Result<(), SendError<T>> {
        let value = match self.chan.try_push(value) {
            Ok(()) => return Ok(()),
            Err(TrySendError::Closed(v)) => return Err(SendError(v)),
            Err(TrySendError::Full(v)) => v,
        };
        match Acquire::new(&self.chan, 1, WaitKind::Send).await {
            Ok(()) => {
                self.chan.push_reserved(value);
                Ok(())
            }
            Err(()) => Err(SendError(value)),
        }
    }

    /// Send `value` if a slot is free now.
    pub fn try_send(&self, value: T) -> Result<(), TrySendError<T>> {
        self.chan.try_push(value)
    }

    /// [`send`](Sender::send), giving up after `timeout`.
    #[cfg(not(loom))]
    pub async fn send_timeout(&self, value: T, timeout: std::time::Duration) -> Result<(), error::SendTimeoutError<T>> {
        let value = match self.chan.try_push(value) {
            Ok(()) => return Ok(()),
            Err(TrySendError::Closed(v)) => return Err(error::SendTimeoutError::Closed(v)),
            Err(TrySendError::Full(v)) => v,
        };
        let acquire = Acquire::new(&self.chan, 1, WaitKind::Send);
        match crate::time::timeout(timeout, acquire).await {
            Ok(Ok(())) => {
                self.chan.push_reserved(value);
                Ok(())
            }
            Ok(Err(())) => Err(error::SendTimeoutError::Closed(value)),
            Err(_) => Err(error::SendTimeoutError::Timeout(value)),
        }
    }

    /// [`send`](Sender::send) from synchronous code, blocking the thread.
    ///
    /// # Panics
    /// On a runtime's worker thread.
    #[cfg(not(loom))]
    #[track_caller]
    pub fn blocking_send(&self, value: T) -> Result<(), SendError<T>> {
        super::blocking_wait("Sender::blocking_send", self.send(value))
    }

    /// Wait for a slot and keep it: the returned [`Permit`] sends without waiting.
    /// Cancel safe, apart from the place in the queue.
    pub async fn reserve(&self) -> Result<Permit<'_, T>, SendError<()>> {
        match Acquire::new(&self.chan, 1, WaitKind::Reserve).await {
            Ok(()) => Ok(Permit { chan: &self.chan }),
            Err(()) => Err(SendError(())),
        }
    }

    /// [`reserve`](Sender::reserve), with a permit that owns the sender.
    pub async fn reserve_owned(self) -> Result<OwnedPermit<T>, SendError<()>> {
        match Acquire::new(&self.chan, 1, WaitKind::Reserve).await {
            Ok(()) => Ok(OwnedPermit { chan: Some(self) }),
            Err(()) => Err(SendError(())),
        }
    }

    /// Wait for `n` slots and keep them: the returned iterator gives `n` permits.
    /// Fails when the receiver is gone or closed, or when `n` is more than the capacity.
    /// Cancel safe, apart from the place in the queue.
    pub async fn reserve_many(&self, n: usize) -> Result<PermitIterator<'_, T>, SendError<()>> {
        if n > self.max_capacity() {
            return Err(SendError(()));
        }
        match Acquire::new(&self.chan, n, WaitKind::Reserve).await {
            Ok(()) => Ok(PermitIterator { chan: &self.chan, n }),
            Err(()) => Err(SendError(())),
        }
    }

    /// Keep `n` slots if they are free now (`Full` too when `n` is more than the
    /// capacity).
    pub fn try_reserve_many(&self, n: usize) -> Result<PermitIterator<'_, T>, TrySendError<()>> {
        if n > self.max_capacity() {
            return Err(TrySendError::Full(()));
        }
        self.chan.try_reserve(n)?;
        Ok(PermitIterator { chan: &self.chan, n })
    }

    /// Keep a slot if one is free now.
    pub fn try_reserve(&self) -> Result<Permit<'_, T>, TrySendError<()>> {
        self.chan.try_reserve(1)?;
        Ok(Permit { chan: &self.chan })
    }

    /// [`try_reserve`](Sender::try_reserve), with a permit that owns the sender; the
    /// sender comes back in the error.
    pub fn try_reserve_owned(self) -> Result<OwnedPermit<T>, TrySendError<Self>> {
        match self.chan.try_reserve(1) {
            Ok(()) => Ok(OwnedPermit { chan: Some(self) }),
            Err(TrySendError::Full(())) => Err(TrySendError::Full(self)),
            Err(TrySendError::Closed(())) => Err(TrySendError::Closed(self)),
        }
    }

    /// Wait until the receiver is dropped or closes the channel.
    pub async fn closed(&self) {
        Closed::new(&self.chan.state).await
    }

    /// Whether the receiver is dropped or closed the channel.
    pub fn is_closed(&self) -> bool {
        self.chan.is_closed()
    }

    /// Slots free now: the capacity less the values buffered and the permits out.
    pub fn capacity(&self) -> usize {
        self.chan.capacity()
    }

    /// The channel's capacity, as given to [`channel`].
    pub fn max_capacity(&self) -> usize {
        self.chan.bound.unwrap_or(usize::MAX)
    }

    /// A [`WeakSender`] of this channel.
    pub fn downgrade(&self) -> WeakSender<T> {
        self.chan.lock().weak_count += 1;
        WeakSender { chan: self.chan.clone() }
    }

    /// Whether `other` sends on the same channel.
    pub fn same_channel(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.chan, &other.chan)
    }

    /// How many senders the channel has.
    pub fn strong_count(&self) -> usize {
        self.chan.lock().tx_count
    }

    /// How many weak senders the channel has.
    pub fn weak_count(&self) -> usize {
        self.chan.lock().weak_count
    }
}

impl<T> Clone for Sender<T> {
    fn clone(&self) -> Self {
        self.chan.add_sender();
        Sender { chan: self.chan.clone() }
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        self.chan.drop_sender();
    }
}

impl<T> fmt::Debug for Sender<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sender").field("capacity", &self.capacity()).finish_non_exhaustive()
    }
}

impl<T> WeakSender<T> {
    /// A [`Sender`], if any sender still lives.
    pub fn upgrade(&self) -> Option<Sender<T>> {
        self.chan.upgrade().then(|| Sender { chan: self.chan.clone() })
    }

    /// How many senders the channel has.
    pub fn strong_count(&self) -> usize {
        self.chan.lock().tx_count
    }

    /// How many weak senders the channel has.
    pub fn weak_count(&self) -> usize {
        self.chan.lock().weak_count
    }
}

impl<T> Clone for WeakSender<T> {
    fn clone(&self) -> Self {
        self.chan.lock().weak_count += 1;
        WeakSender { chan: self.chan.clone() }
    }
}

impl<T> Drop for WeakSender<T> {
    fn drop(&mut self) {
        self.chan.lock().weak_count -= 1;
    }
}

impl<T> fmt::Debug for WeakSender<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WeakSender").finish_non_exhaustive()
    }
}

impl<T> Permit<'_, T> {
    /// Send `value` in the reserved slot.
    pub fn send(self, value: T) {
        self.chan.push_reserved(value);
        // The slot now holds the value: the permit must not give it back.
        std::mem::forget(self);
    }
}

impl<T> Drop for Permit<'_, T> {
    fn drop(&mut self) {
        self.chan.release_unlocked();
    }
}

impl<T> fmt::Debug for Permit<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Permit").finish_non_exhaustive()
    }
}

/// Permits of [`Sender::reserve_many`]: each one sends a value; those not taken are
/// given back when it drops.
pub struct PermitIterator<'a, T> {
    chan: &'a Chan<T>,
    n: usize,
}

impl<'a, T> Iterator for PermitIterator<'a, T> {
    type Item = Permit<'a, T>;

    fn next(&mut self) -> Option<Permit<'a, T>> {
        if self.n == 0 {
            return None;
        }
        self.n -= 1;
        Some(Permit { chan: self.chan })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.n, Some(self.n))
    }
}

impl<T> ExactSizeIterator for PermitIterator<'_, T> {}

impl<T> std::iter::FusedIterator for PermitIterator<'_, T> {}

impl<T> Drop for PermitIterator<'_, T> {
    fn drop(&mut self) {
        if self.n == 0 {
            return;
        }
        let mut wakes = WakeList::new();
        let mut st = self.chan.lock();
        for _ in 0..self.n {
            if let Some(w) = self.chan.release(&mut st) {
                if wakes.is_full() {
                    wakes.wake_all();
                }
                wakes.push(w);
            }
        }
        drop(st);
        wakes.wake_all();
    }
}

impl<T> fmt::Debug for PermitIterator<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PermitIterator").field("remaining", &self.n).finish_non_exhaustive()
    }
}

impl<T> OwnedPermit<T> {
    /// Send `value` in the reserved slot; returns the sender.
    pub fn send(mut self, value: T) -> Sender<T> {
        let tx = self.chan.take().expect("an OwnedPermit holds its sender until consumed");
        tx.chan.push_reserved(value);
        tx
    }

    /// Give the slot back unused; returns the sender.
    pub fn release(mut self) -> Sender<T> {
        let tx = self.chan.take().expect("an OwnedPermit holds its sender until consumed");
        tx.chan.release_unlocked();
        tx
    }
}

impl<T> Drop for OwnedPermit<T> {
    fn drop(&mut self) {
        if let Some(tx) = self.chan.take() {
            tx.chan.release_unlocked();
        }
    }
}

impl<T> fmt::Debug for OwnedPermit<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OwnedPermit").finish_non_exhaustive()
    }
}

impl<T> Receiver<T> {
    /// The next value; `None` once every sender is gone (or the channel is closed) and
    /// the buffer is drained. Cancel safe.
    pub async fn recv(&mut self) -> Option<T> {
        std::future::poll_fn(|cx| self.chan.poll_recv(cx)).await
    }

    /// Wait for at least one value, then move up to `limit` values into `buffer`.
    /// Returns how many moved: 0 when `limit` is 0, or when the channel is closed and
    /// drained. Cancel safe.
    pub async fn recv_many(&mut self, buffer: &mut Vec<T>, limit: usize) -> usize {
        std::future::poll_fn(|cx| self.chan.poll_recv_many(cx, buffer, limit)).await
    }

    /// The next value if one is buffered now.
    pub fn try_recv(&mut self) -> Result<T, TryRecvError> {
        self.chan.try_recv()
    }

    /// [`recv`](Receiver::recv) from synchronous code, blocking the thread.
    ///
    /// # Panics
    /// On a runtime's worker thread.
    #[cfg(not(loom))]
    #[track_caller]
    pub fn blocking_recv(&mut self) -> Option<T> {
        super::blocking_wait("Receiver::blocking_recv", self.recv())
    }

    /// [`recv_many`](Receiver::recv_many) from synchronous code, blocking the thread.
    ///
    /// # Panics
    /// On a runtime's worker thread.
    #[cfg(not(loom))]
    #[track_caller]
    pub fn blocking_recv_many(&mut self, buffer: &mut Vec<T>, limit: usize) -> usize {
        super::blocking_wait("Receiver::blocking_recv_many", self.recv_many(buffer, limit))
    }

    /// Close the channel: sends fail from now on, while the values buffered (and those
    /// sent through permits already out) can still be received.
    pub fn close(&mut self) {
        self.chan.close();
    }

    /// Poll for the next value, as [`recv`](Receiver::recv) does.
    pub fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<T>> {
        self.chan.poll_recv(cx)
    }

    /// Poll for values, as [`recv_many`](Receiver::recv_many) does.
    pub fn poll_recv_many(&mut self, cx: &mut Context<'_>, buffer: &mut Vec<T>, limit: usize) -> Poll<usize> {
        self.chan.poll_recv_many(cx, buffer, limit)
    }

    /// Whether the channel is closed: every sender is gone, or [`close`](Receiver::close)
    /// was called.
    pub fn is_closed(&self) -> bool {
        let st = self.chan.lock();
        st.rx_closed || st.tx_count == 0
    }

    /// Whether no value is buffered.
    pub fn is_empty(&self) -> bool {
        self.chan.lock().buf.is_empty()
    }

    /// Values buffered.
    pub fn len(&self) -> usize {
        self.chan.lock().buf.len()
    }

    /// Slots free now.
    pub fn capacity(&self) -> usize {
        self.chan.capacity()
    }

    /// The channel's capacity, as given to [`channel`].
    pub fn max_capacity(&self) -> usize {
        self.chan.bound.unwrap_or(usize::MAX)
    }

    /// How many senders the channel has.
    pub fn sender_strong_count(&self) -> usize {
        self.chan.lock().tx_count
    }

    /// How many weak senders the channel has.
    pub fn sender_weak_count(&self) -> usize {
        self.chan.lock().weak_count
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        self.chan.close_and_drain();
    }
}

impl<T> fmt::Debug for Receiver<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Receiver").field("len", &self.len()).finish_non_exhaustive()
    }
}

// ---------------------------------------------------------------------------------------
// Unbounded channel.

/// A channel without a bound: a send never waits.
pub fn unbounded_channel<T>() -> (UnboundedSender<T>, UnboundedReceiver<T>) {
    let chan = Chan::new(None);
    (UnboundedSender { chan: chan.clone() }, UnboundedReceiver { chan })
}

/// The sending half of an unbounded channel; clone it for more producers.
pub struct UnboundedSender<T> {
    chan: Arc<Chan<T>>,
}

/// A sender that does not keep the channel open: [`upgrade`](WeakUnboundedSender::upgrade)
/// it while an [`UnboundedSender`] lives.
pub struct WeakUnboundedSender<T> {
    chan: Arc<Chan<T>>,
}

/// The receiving half of an unbounded channel.
pub struct UnboundedReceiver<T> {
    chan: Arc<Chan<T>>,
}

impl<T> UnboundedSender<T> {
    /// Send `value` without waiting. Fails, giving it back, when the receiver is gone or
    /// closed the channel.
    pub fn send(&self, value: T) -> Result<(), SendError<T>> {
        self.chan.try_push(value).map_err(|e| SendError(e.into_inner()))
    }

    /// Wait until the receiver is dropped or closes the channel.
    pub async fn closed(&self) {
        Closed::new(&self.chan.state).await
    }

    /// Whether the receiver is dropped or closed the channel.
    pub fn is_closed(&self) -> bool {
        self.chan.is_closed()
    }

    /// Whether `other` sends on the same channel.
    pub fn same_channel(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.chan, &other.chan)
    }

    /// A [`WeakUnboundedSender`] of this channel.
    pub fn downgrade(&self) -> WeakUnboundedSender<T> {
        self.chan.lock().weak_count += 1;
        WeakUnboundedSender { chan: self.chan.clone() }
    }

    /// How many senders the channel has.
    pub fn strong_count(&self) -> usize {
        self.chan.lock().tx_count
    }

    /// How many weak senders the channel has.
    pub fn weak_count(&self) -> usize {
        self.chan.lock().weak_count
    }
}

impl<T> Clone for UnboundedSender<T> {
    fn clone(&self) -> Self {
        self.chan.add_sender();
        UnboundedSender { chan: self.chan.clone() }
    }
}

impl<T> Drop for UnboundedSender<T> {
    fn drop(&mut self) {
        self.chan.drop_sender();
    }
}

impl<T> fmt::Debug for UnboundedSender<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UnboundedSender").finish_non_exhaustive()
    }
}

impl<T> WeakUnboundedSender<T> {
    /// An [`UnboundedSender`], if any sender still lives.
    pub fn upgrade(&self) -> Option<UnboundedSender<T>> {
        self.chan.upgrade().then(|| UnboundedSender { chan: self.chan.clone() })
    }

    /// How many senders the channel has.
    pub fn strong_count(&self) -> usize {
        self.chan.lock().tx_count
    }

    /// How many weak senders the channel has.
    pub fn weak_count(&self) -> usize {
        self.chan.lock().weak_count
    }
}

impl<T> Clone for WeakUnboundedSender<T> {
    fn clone(&self) -> Self {
        self.chan.lock().weak_count += 1;
        WeakUnboundedSender { chan: self.chan.clone() }
    }
}

impl<T> Drop for WeakUnboundedSender<T> {
    fn drop(&mut self) {
        self.chan.lock().weak_count -= 1;
    }
}

impl<T> fmt::Debug for WeakUnboundedSender<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WeakUnboundedSender").finish_non_exhaustive()
    }
}

impl<T> UnboundedReceiver<T> {
    /// The next value; `None` once every sender is gone (or the channel is closed) and
    /// the buffer is drained. Cancel safe.
    pub async fn recv(&mut self) -> Option<T> {
        std::future::poll_fn(|cx| self.chan.poll_recv(cx)).await
    }

    /// Wait for at least one value, then move up to `limit` values into `buffer`.
    /// Returns how many moved: 0 when `limit` is 0, or when the channel is closed and
    /// drained. Cancel safe.
    pub async fn recv_many(&mut self, buffer: &mut Vec<T>, limit: usize) -> usize {
        std::future::poll_fn(|cx| self.chan.poll_recv_many(cx, buffer, limit)).await
    }

    /// The next value if one is buffered now.
    pub fn try_recv(&mut self) -> Result<T, TryRecvError> {
        self.chan.try_recv()
    }

    /// [`recv`](UnboundedReceiver::recv) from synchronous code, blocking the thread.
    ///
    /// # Panics
    /// On a runtime's worker thread.
    #[cfg(not(loom))]
    #[track_caller]
    pub fn blocking_recv(&mut self) -> Option<T> {
        super::blocking_wait("UnboundedReceiver::blocking_recv", self.recv())
    }

    /// [`recv_many`](UnboundedReceiver::recv_many) from synchronous code, blocking the
    /// thread.
    ///
    /// # Panics
    /// On a runtime's worker thread.
    #[cfg(not(loom))]
    #[track_caller]
    pub fn blocking_recv_many(&mut self, buffer: &mut Vec<T>, limit: usize) -> usize {
        super::blocking_wait("UnboundedReceiver::blocking_recv_many", self.recv_many(buffer, limit))
    }

    /// Close the channel: sends fail from now on, while the values buffered can still
    /// be received.
    pub fn close(&mut self) {
        self.chan.close();
    }

    /// Poll for the next value, as [`recv`](UnboundedReceiver::recv) does.
    pub fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<T>> {
        self.chan.poll_recv(cx)
    }

    /// Poll for values, as [`recv_many`](UnboundedReceiver::recv_many) does.
    pub fn poll_recv_many(&mut self, cx: &mut Context<'_>, buffer: &mut Vec<T>, limit: usize) -> Poll<usize> {
        self.chan.poll_recv_many(cx, buffer, limit)
    }

    /// Whether the channel is closed: every sender is gone, or
    /// [`close`](UnboundedReceiver::close) was called.
    pub fn is_closed(&self) -> bool {
        let st = self.chan.lock();
        st.rx_closed || st.tx_count == 0
    }

    /// Whether no value is buffered.
    pub fn is_empty(&self) -> bool {
        self.chan.lock().buf.is_empty()
    }

    /// Values buffered.
    pub fn len(&self) -> usize {
        self.chan.lock().buf.len()
    }

    /// How many senders the channel has.
    pub fn sender_strong_count(&self) -> usize {
        self.chan.lock().tx_count
    }

    /// How many weak senders the channel has.
    pub fn sender_weak_count(&self) -> usize {
        self.chan.lock().weak_count
    }
}

impl<T> Drop for UnboundedReceiver<T> {
    fn drop(&mut self) {
        self.chan.close_and_drain();
    }
}

impl<T> fmt::Debug for UnboundedReceiver<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UnboundedReceiver").field("len", &self.len()).finish_non_exhaustive()
    }
}

/// Loom models of the channel's hand-offs: a slot freed by the receiver reaches a
/// waiting sender, and a value or the end of the stream reaches a waiting receiver, in
/// every interleaving. Run with
/// `RUSTFLAGS="--cfg loom" cargo test -p volt --lib --release sync::mpsc`.
#[cfg(all(loom, test))]
mod loom_tests {
    use super::*;
    use crate::sync::loom_support::block_on;

    #[test]
    fn loom_two_senders_on_one_slot_lose_nothing() {
        // Three threads on one mutex: bounded preemptions keep it within CI's time.
        crate::loom_tests::model_bounded(2, || {
            let (tx, mut rx) = channel::<u64>(1);
            let tx2 = tx.clone();
            let a = loom::thread::spawn(move || block_on(tx.send(1)).unwrap());
            let b = loom::thread::spawn(move || block_on(tx2.send(2)).unwrap());
            let mut got = Vec::new();
            while let Some(v) = block_on(rx.recv()) {
                got.push(v);
            }
            a.join().unwrap();
            b.join().unwrap();
            crate::loom_tests::assert_each_once(got, vec![1, 2]);
        });
    }

    #[test]
    fn loom_a_dropped_receiver_releases_a_waiting_sender() {
        crate::loom_tests::model(|| {
            let (tx, rx) = channel::<u64>(1);
            tx.try_send(0).unwrap();
            let t = loom::thread::spawn(move || block_on(tx.send(1)));
            drop(rx);
            assert_eq!(t.join().unwrap().unwrap_err().0, 1);
        });
    }

    #[test]
    fn loom_oneshot_value_or_error_reaches_the_receiver() {
        use crate::sync::oneshot;
        crate::loom_tests::model(|| {
            let (tx, rx) = oneshot::channel::<u64>();
            let t = loom::thread::spawn(move || tx.send(7).is_ok());
            let got = block_on(rx);
            let sent = t.join().unwrap();
            assert!(sent);
            assert_eq!(got.unwrap(), 7);
        });
        crate::loom_tests::model(|| {
            let (tx, rx) = oneshot::channel::<u64>();
            let t = loom::thread::spawn(move || drop(tx));
            assert!(block_on(rx).is_err());
            t.join().unwrap();
        });
    }
}
