//! `WatchStream`: a receiver of Volt's `watch` channel as a stream of its values.

use futures_core::Stream;
use std::fmt;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use tokio_util::sync::ReusableBoxFuture;
use volt::sync::watch::error::RecvError;
use volt::sync::watch::Receiver;

/// A wait for the next change that hands the receiver back with its result.
type Changed<T> = ReusableBoxFuture<'static, (Result<(), RecvError>, Receiver<T>)>;

/// The values of a watch channel as a stream: the value it holds when the stream is made
/// ([`new`](WatchStream::new)) or only later ones ([`from_changes`](WatchStream::from_changes)),
/// then the latest value after each change (several changes between two reads give one
/// item), ending when the sender is gone.
pub struct WatchStream<T> {
    changed: Changed<T>,
}

async fn changed<T: Clone + Send + Sync>(mut rx: Receiver<T>) -> (Result<(), RecvError>, Receiver<T>) {
    let result = rx.changed().await;
    (result, rx)
}

/// Resolves at once with the receiver, so the first item is the value held now.
async fn now<T>(rx: Receiver<T>) -> (Result<(), RecvError>, Receiver<T>) {
    (Ok(()), rx)
}

impl<T: 'static + Clone + Send + Sync> WatchStream<T> {
    /// The value `rx` holds now, then each change.
    pub fn new(rx: Receiver<T>) -> Self {
        Self { changed: ReusableBoxFuture::new(now(rx)) }
    }

    /// Each change after now (the value `rx` holds now is not an item, unless `rx` has
    /// not seen it yet).
    pub fn from_changes(rx: Receiver<T>) -> Self {
        Self { changed: ReusableBoxFuture::new(changed(rx)) }
    }
}

impl<T: 'static + Clone + Send + Sync> Stream for WatchStream<T> {
    type Item = T;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        let (result, mut rx) = ready!(self.changed.poll(cx));
        let item = result.ok().map(|()| rx.borrow_and_update().clone());
        self.changed.set(changed(rx));
        Poll::Ready(item)
    }
}

impl<T: 'static + Clone + Send + Sync> From<Receiver<T>> for WatchStream<T> {
    fn from(rx: Receiver<T>) -> Self {
        Self::new(rx)
    }
}

impl<T> Unpin for WatchStream<T> {}

impl<T> fmt::Debug for WatchStream<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WatchStream").finish_non_exhaustive()
    }
}
