//! tokio-util's synchronization utilities: `CancellationToken` and `ReusableBoxFuture`
//! (its own, re-exported: they need no runtime), and [`PollSender`] and
//! [`PollSemaphore`] over Volt's channel and semaphore.

pub use tokio_util::sync::{
    CancellationToken, DropGuard, DropGuardRef, ReusableBoxFuture, WaitForCancellationFuture,
    WaitForCancellationFutureOwned,
};

use futures_core::Stream;
use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use volt::sync::mpsc::{OwnedPermit, Sender};
use volt::sync::{AcquireError, OwnedSemaphorePermit, Semaphore, TryAcquireError};

/// A [`Semaphore`] with `poll_acquire` methods, for a `poll`-based caller (a tower
/// service's `poll_ready`, say), as tokio-util's `PollSemaphore`.
pub struct PollSemaphore {
    semaphore: Arc<Semaphore>,
    /// An acquire that had to wait: the permits it asks for, and its future.
    waiting: Option<(u32, ReusableBoxFuture<'static, Result<OwnedSemaphorePermit, AcquireError>>)>,
}

impl PollSemaphore {
    /// Poll methods over `semaphore`.
    pub fn new(semaphore: Arc<Semaphore>) -> Self {
        Self { semaphore, waiting: None }
    }

    /// The semaphore, shared.
    pub fn clone_inner(&self) -> Arc<Semaphore> {
        self.semaphore.clone()
    }

    /// The semaphore back (an acquire waiting is dropped).
    pub fn into_inner(self) -> Arc<Semaphore> {
        self.semaphore
    }

    /// A permit, or a wait for one; `None` once the semaphore is closed.
    pub fn poll_acquire(&mut self, cx: &mut Context<'_>) -> Poll<Option<OwnedSemaphorePermit>> {
        self.poll_acquire_many(cx, 1)
    }

    /// `permits` permits at once, or a wait for them; `None` once the semaphore is
    /// closed.
    pub fn poll_acquire_many(&mut self, cx: &mut Context<'_>, permits: u32) -> Poll<Option<OwnedSemaphorePermit>> {
        let waiting = match &mut self.waiting {
            // The same request as the one waiting: keep its place in the queue.
            Some((n, fut)) if *n == permits => fut,
            _ => match self.semaphore.clone().try_acquire_many_owned(permits) {
                Ok(permit) => {
                    self.waiting = None;
                    return Poll::Ready(Some(permit));
                }
                Err(TryAcquireError::Closed) => {
                    self.waiting = None;
                    return Poll::Ready(None);
                }
                Err(TryAcquireError::NoPermits) => {
                    let fut = self.semaphore.clone().acquire_many_owned(permits);
                    match &mut self.waiting {
                        // Reuse the allocation of an earlier wait.
                        Some((n, boxed)) => {
                            boxed.set(fut);
                            *n = permits;
                        }
                        None => self.waiting = Some((permits, ReusableBoxFuture::new(fut))),
                    }
                    &mut self.waiting.as_mut().expect("just set").1
                }
            },
        };
        let result = ready!(waiting.poll(cx));
        self.waiting = None;
        Poll::Ready(result.ok())
    }

    /// Close the semaphore: waits end with `None`, and no permit is handed out again.
    pub fn close(&self) {
        self.semaphore.close();
    }

    /// Permits free now.
    pub fn available_permits(&self) -> usize {
        self.semaphore.available_permits()
    }

    /// Add `n` permits to the semaphore.
    pub fn add_permits(&self, n: usize) {
        self.semaphore.add_permits(n);
    }
}

impl Clone for PollSemaphore {
    fn clone(&self) -> Self {
        Self::new(self.semaphore.clone())
    }
}

impl fmt::Debug for PollSemaphore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PollSemaphore").field("semaphore", &self.semaphore).finish()
    }
}

impl AsRef<Semaphore> for PollSemaphore {
    fn as_ref(&self) -> &Semaphore {
        &self.semaphore
    }
}

impl Stream for PollSemaphore {
    type Item = OwnedSemaphorePermit;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<OwnedSemaphorePermit>> {
        Pin::into_inner(self).poll_acquire(cx)
    }
}

/// What a [`PollSender`] could not send because the channel is closed: the value, when
/// there was one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PollSendError<T>(Option<T>);

impl<T> PollSendError<T> {
    /// The value that was not sent, if the error came from a send.
    pub fn into_inner(self) -> Option<T> {
        self.0
    }
}

impl<T> fmt::Display for PollSendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("channel closed")
    }
}

impl<T: fmt::Debug> std::error::Error for PollSendError<T> {}

type Reserve<T> = ReusableBoxFuture<'static, Result<OwnedPermit<T>, PollSendError<T>>>;

enum State<T> {
    Idle(Sender<T>),
    Reserving,
    Reserved(OwnedPermit<T>),
    Closed,
}

/// A [`Sender`] with a `poll_reserve` and a `futures` `Sink`, for a `poll`-based caller,
/// as tokio-util's `PollSender`: reserve a slot, then [`send_item`](PollSender::send_item)
/// into it. (Its values must be `'static`, where tokio-util's need not be: the wait for a
/// slot is a boxed future, which this crate keeps without `unsafe`.)
pub struct PollSender<T> {
    /// Kept for `get_ref`, `is_closed` and clones while the state holds no sender.
    sender: Option<Sender<T>>,
    state: State<T>,
    /// The wait for a slot; its allocation is reused from one wait to the next.
    reserve: Option<Reserve<T>>,
}

async fn reserve<T>(sender: Option<Sender<T>>) -> Result<OwnedPermit<T>, PollSendError<T>> {
    match sender {
        Some(s) => s.reserve_owned().await.map_err(|_| PollSendError(None)),
        None => Err(PollSendError(None)),
    }
}

impl<T: Send + 'static> PollSender<T> {
    /// Poll methods over `sender`.
    pub fn new(sender: Sender<T>) -> Self {
        Self { sender: Some(sender.clone()), state: State::Idle(sender), reserve: None }
    }

    /// Reserve a slot for the next [`send_item`](PollSender::send_item), or wait for
    /// one; an error once the channel is closed. Ready at once if a slot is reserved.
    pub fn poll_reserve(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), PollSendError<T>>> {
        loop {
            match std::mem::replace(&mut self.state, State::Closed) {
                State::Idle(sender) => {
                    match &mut self.reserve {
                        Some(boxed) => boxed.set(reserve(Some(sender))),
                        None => self.reserve = Some(ReusableBoxFuture::new(reserve(Some(sender)))),
                    }
                    self.state = State::Reserving;
                }
                State::Reserving => match self.reserve.as_mut().expect("a reserve in progress").poll(cx) {
                    Poll::Ready(Ok(permit)) => {
                        self.state = State::Reserved(permit);
                        return Poll::Ready(Ok(()));
                    }
                    Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                    Poll::Pending => {
                        self.state = State::Reserving;
                        return Poll::Pending;
                    }
                },
                State::Reserved(permit) => {
                    self.state = State::Reserved(permit);
                    return Poll::Ready(Ok(()));
                }
                State::Closed => return Poll::Ready(Err(PollSendError(None))),
            }
        }
    }

    /// Send `value` into the slot [`poll_reserve`](PollSender::poll_reserve) reserved.
    ///
    /// # Errors
    /// The value back, if this sender is closed.
    ///
    /// # Panics
    /// If no slot is reserved (as tokio-util's).
    #[track_caller]
    pub fn send_item(&mut self, value: T) -> Result<(), PollSendError<T>> {
        let (result, next) = match std::mem::replace(&mut self.state, State::Closed) {
            State::Reserved(permit) => (Ok(()), State::Idle(permit.send(value))),
            State::Closed => (Err(PollSendError(Some(value))), State::Closed),
            State::Idle(_) | State::Reserving => panic!("`send_item` called without first calling `poll_reserve`"),
        };
        // A `close` between the reserve and this send ends the sender now.
        self.state = if self.sender.is_some() { next } else { State::Closed };
        result
    }

    /// Whether this sender is closed: by [`close`](PollSender::close), or because a
    /// reserve found the channel closed.
    pub fn is_closed(&self) -> bool {
        matches!(self.state, State::Closed) || self.sender.is_none()
    }

    /// The sender, unless this one was closed.
    pub fn get_ref(&self) -> Option<&Sender<T>> {
        self.sender.as_ref()
    }

    /// Close this sender (the channel stays open for its other senders). A reserve in
    /// progress is dropped; a slot already reserved is kept for one last
    /// [`send_item`](PollSender::send_item), or [`abort_send`](PollSender::abort_send)
    /// gives it back.
    pub fn close(&mut self) {
        self.sender = None;
        match self.state {
            State::Idle(_) => self.state = State::Closed,
            State::Reserving => {
                if let Some(boxed) = &mut self.reserve {
                    boxed.set(reserve(None));
                }
                self.state = State::Closed;
            }
            State::Reserved(_) | State::Closed => {}
        }
    }

    /// Give up a reserve in progress or a reserved slot: true if there was one. A closed
    /// sender stays closed.
    pub fn abort_send(&mut self) -> bool {
        let next = match std::mem::replace(&mut self.state, State::Closed) {
            State::Reserving => {
                if let Some(boxed) = &mut self.reserve {
                    boxed.set(reserve(None));
                }
                match &self.sender {
                    Some(s) => State::Idle(s.clone()),
                    None => State::Closed,
                }
            }
            State::Reserved(permit) => {
                let sender = permit.release();
                if self.sender.is_some() {
                    State::Idle(sender)
                } else {
                    State::Closed
                }
            }
            other => {
                self.state = other;
                return false;
            }
        };
        self.state = next;
        true
    }
}

impl<T> Clone for PollSender<T> {
    /// A sender of the same channel, with no slot reserved.
    fn clone(&self) -> Self {
        let sender = self.sender.clone();
        let state = match &sender {
            Some(s) => State::Idle(s.clone()),
            None => State::Closed,
        };
        Self { sender, state, reserve: None }
    }
}

impl<T> fmt::Debug for PollSender<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match self.state {
            State::Idle(_) => "idle",
            State::Reserving => "reserving",
            State::Reserved(_) => "reserved",
            State::Closed => "closed",
        };
        f.debug_struct("PollSender").field("sender", &self.sender).field("state", &state).finish()
    }
}

impl<T: Send + 'static> futures_sink::Sink<T> for PollSender<T> {
    type Error = PollSendError<T>;

    fn poll_ready(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Pin::into_inner(self).poll_reserve(cx)
    }

    fn start_send(self: Pin<&mut Self>, item: T) -> Result<(), Self::Error> {
        Pin::into_inner(self).send_item(item)
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn poll_close(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Pin::into_inner(self).close();
        Poll::Ready(Ok(()))
    }
}
