//! Tokio's `sync::oneshot` channel: one value, from one [`Sender`] to one [`Receiver`].
//!
//! A mutex guards the slot for the value, the two halves' flags and their wakers; every
//! operation takes it once, and wakes after letting it go. The [`Receiver`] is a future
//! of the value, or of [`RecvError`] when the sender is dropped without sending. Its
//! wait shows in the console as `recv oneshot`, and the sender's
//! [`closed`](Sender::closed) as `closed oneshot`.

use crate::loom::{lock, Arc, Mutex, MutexGuard};
use crate::task::coop;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

/// The errors of the channel's operations.
pub mod error {
    use std::fmt;

    /// The sender was dropped without sending.
    #[derive(Debug, Eq, PartialEq, Clone)]
    pub struct RecvError(pub(super) ());

    impl fmt::Display for RecvError {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("channel closed")
        }
    }

    impl std::error::Error for RecvError {}

    /// Why [`try_recv`](super::Receiver::try_recv) returned no value.
    #[derive(Debug, Eq, PartialEq, Clone)]
    pub enum TryRecvError {
        /// No value yet, and the sender could still send one.
        Empty,
        /// The sender was dropped without sending, or the value was already taken.
        Closed,
    }

    impl fmt::Display for TryRecvError {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(match self {
                TryRecvError::Empty => "channel empty",
                TryRecvError::Closed => "channel closed",
            })
        }
    }

    impl std::error::Error for TryRecvError {}
}

use error::{RecvError, TryRecvError};

/// Name the receiver's wait.
fn record_recv_wait() {
    crate::task::wait::record_label("recv oneshot");
}

/// Name the wait of [`Sender::closed`].
fn record_closed_wait() {
    crate::task::wait::record_label("closed oneshot");
}

struct Inner<T> {
    state: Mutex<State<T>>,
}

struct State<T> {
    value: Option<T>,
    /// The sender sent or was dropped.
    tx_done: bool,
    /// The receiver closed or was dropped.
    rx_closed: bool,
    rx_waker: Option<Waker>,
    tx_waker: Option<Waker>,
}

impl<T> Inner<T> {
    fn lock(&self) -> MutexGuard<'_, State<T>> {
        lock(&self.state)
    }
}

/// Keep `waker` in `slot`, unless it already wakes the same task. Returns the waker
/// replaced, to drop once the lock is let go (its drop may use the channel).
#[must_use]
fn set_waker(slot: &mut Option<Waker>, waker: &Waker) -> Option<Waker> {
    match slot {
        Some(w) if w.will_wake(waker) => None,
        _ => slot.replace(waker.clone()),
    }
}

/// A new channel for one value.
pub fn channel<T>() -> (Sender<T>, Receiver<T>) {
    let inner = Arc::new(Inner {
        state: Mutex::new(State { value: None, tx_done: false, rx_closed: false, rx_waker: None, tx_waker: None }),
    });
    (Sender { inner: Some(inner.clone()) }, Receiver { inner: Some(inner) })
}

/// Sends the channel's one value.
pub struct Sender<T> {
    inner: Option<Arc<Inner<T>>>,
}

/// Receives the channel's one value: await it, or [`try_recv`](Receiver::try_recv).
pub struct Receiver<T> {
    /// `None` once the receiver has returned its result.
    inner: Option<Arc<Inner<T>>>,
}

impl<T> Sender<T> {
    /// Send `value`; when the receiver is dropped or closed, it comes back in `Err`.
    pub fn send(mut self, value: T) -> Result<(), T> {
        let inner = self.inner.take().expect("a Sender holds the channel until it sends");
        let mut st = inner.lock();
        if st.rx_closed {
            st.tx_done = true;
            return Err(value);
        }
        st.value = Some(value);
        st.tx_done = true;
        let w = st.rx_waker.take();
        drop(st);
        if let Some(w) = w {
            w.wake();
        }
        Ok(())
    }

    /// Wait until the receiver is dropped or closes the channel.
    pub async fn closed(&mut self) {
        std::future::poll_fn(|cx| self.poll_closed(cx)).await
    }

    /// Whether the receiver is dropped or closed the channel.
    pub fn is_closed(&self) -> bool {
        self.inner.as_ref().is_none_or(|i| i.lock().rx_closed)
    }

    /// Poll for the receiver's drop or close, as [`closed`](Sender::closed) waits for.
    pub fn poll_closed(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let Some(inner) = self.inner.as_ref() else { return Poll::Ready(()) };
        let mut st = inner.lock();
        if st.rx_closed {
            return Poll::Ready(());
        }
        let old = set_waker(&mut st.tx_waker, cx.waker());
        drop(st);
        drop(old);
        record_closed_wait();
        Poll::Pending
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        let Some(inner) = self.inner.take() else { return };
        let mut st = inner.lock();
        st.tx_done = true;
        let w = st.rx_waker.take();
        let own = st.tx_waker.take();
        drop(st);
        drop(own);
        if let Some(w) = w {
            w.wake();
        }
    }
}

impl<T> fmt::Debug for Sender<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sender").field("closed", &self.is_closed()).finish()
    }
}

impl<T> Receiver<T> {
    /// The value if it was sent: `Empty` while the sender could still send, `Closed`
    /// when it was dropped without sending, the receiver was closed without a value, or
    /// the value was already taken.
    pub fn try_recv(&mut self) -> Result<T, TryRecvError> {
        let Some(inner) = self.inner.as_ref() else { return Err(TryRecvError::Closed) };
        let mut st = inner.lock();
        if let Some(v) = st.value.take() {
            drop(st);
            self.inner = None;
            return Ok(v);
        }
        // After `close`, no value can come any more.
        if st.tx_done || st.rx_closed {
            drop(st);
            self.inner = None;
            return Err(TryRecvError::Closed);
        }
        Err(TryRecvError::Empty)
    }

    /// Close the channel: the sender's `send` fails from now on. A value sent before
    /// can still be received; without one, receiving returns the error at once.
    pub fn close(&mut self) {
        let Some(inner) = self.inner.as_ref() else { return };
        let mut st = inner.lock();
        st.rx_closed = true;
        let w = st.tx_waker.take();
        drop(st);
        if let Some(w) = w {
            w.wake();
        }
    }

    /// Wait for the value from synchronous code, blocking the thread.
    ///
    /// # Panics
    /// On a runtime's worker thread.
    #[cfg(not(loom))]
    #[track_caller]
    pub fn blocking_recv(self) -> Result<T, RecvError> {
        super::blocking_wait("oneshot::Receiver::blocking_recv", self)
    }

    /// Whether this receiver already returned its result (a value or an error).
    pub fn is_terminated(&self) -> bool {
        self.inner.is_none()
    }

    /// Whether no value is waiting to be received now.
    pub fn is_empty(&self) -> bool {
        self.inner.as_ref().is_none_or(|i| i.lock().value.is_none())
    }
}

impl<T> Future for Receiver<T> {
    type Output = Result<T, RecvError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<T, RecvError>> {
        let Some(inner) = self.inner.as_ref() else { panic!("oneshot::Receiver polled after it returned its result") };
        std::task::ready!(coop::poll_budget(cx));
        let mut st = inner.lock();
        let out = if let Some(v) = st.value.take() {
            Ok(v)
        } else if st.tx_done || st.rx_closed {
            Err(RecvError(()))
        } else {
            let old = set_waker(&mut st.rx_waker, cx.waker());
            drop(st);
            drop(old);
            record_recv_wait();
            return Poll::Pending;
        };
        drop(st);
        coop::spend();
        self.inner = None;
        Poll::Ready(out)
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        let Some(inner) = self.inner.take() else { return };
        let mut st = inner.lock();
        st.rx_closed = true;
        let value = st.value.take();
        let w = st.tx_waker.take();
        let own = st.rx_waker.take();
        drop(st);
        // A value nobody will read, and the receiver's last waker, are dropped here,
        // without the lock.
        drop(value);
        drop(own);
        if let Some(w) = w {
            w.wake();
        }
    }
}

impl<T> fmt::Debug for Receiver<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Receiver").field("terminated", &self.is_terminated()).finish()
    }
}
