//! `BroadcastStream`: a receiver of Volt's `broadcast` channel as a stream.

use futures_core::Stream;
use std::fmt;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use tokio_util::sync::ReusableBoxFuture;
use volt::sync::broadcast::error::RecvError;
use volt::sync::broadcast::Receiver;

/// A `recv` that hands the receiver back with its result, so the stream can own both.
type Recv<T> = ReusableBoxFuture<'static, (Result<T, RecvError>, Receiver<T>)>;

/// The values sent on a broadcast channel, as a stream that ends when every sender is
/// gone. A receiver that fell behind gets [`BroadcastStreamRecvError::Lagged`] with the
/// number of values it missed, then the oldest value still in the channel.
///
/// Volt's broadcast values are read side by side by the receivers, so `T` must be `Sync`
/// as well as `Send` here (tokio-stream's asks for `Send`).
pub struct BroadcastStream<T> {
    recv: Recv<T>,
}

/// What a [`BroadcastStream`] yields instead of a value it missed.
#[derive(Debug, PartialEq, Eq, Clone)]
pub enum BroadcastStreamRecvError {
    /// The receiver fell behind, and this many values were overwritten before it read
    /// them.
    Lagged(u64),
}

impl fmt::Display for BroadcastStreamRecvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BroadcastStreamRecvError::Lagged(n) => write!(f, "channel lagged by {n}"),
        }
    }
}

impl std::error::Error for BroadcastStreamRecvError {}

async fn recv<T: Clone>(mut rx: Receiver<T>) -> (Result<T, RecvError>, Receiver<T>) {
    let value = rx.recv().await;
    (value, rx)
}

impl<T: 'static + Clone + Send + Sync> BroadcastStream<T> {
    /// The stream of what `rx` receives.
    pub fn new(rx: Receiver<T>) -> Self {
        Self { recv: ReusableBoxFuture::new(recv(rx)) }
    }
}

impl<T: 'static + Clone + Send + Sync> Stream for BroadcastStream<T> {
    type Item = Result<T, BroadcastStreamRecvError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let (value, rx) = ready!(self.recv.poll(cx));
        // The next `recv` goes in the same allocation.
        self.recv.set(recv(rx));
        Poll::Ready(match value {
            Ok(v) => Some(Ok(v)),
            Err(RecvError::Lagged(n)) => Some(Err(BroadcastStreamRecvError::Lagged(n))),
            Err(RecvError::Closed) => None,
        })
    }
}

impl<T: 'static + Clone + Send + Sync> From<Receiver<T>> for BroadcastStream<T> {
    fn from(rx: Receiver<T>) -> Self {
        Self::new(rx)
    }
}

impl<T> fmt::Debug for BroadcastStream<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BroadcastStream").finish_non_exhaustive()
    }
}
