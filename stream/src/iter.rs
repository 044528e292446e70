//! `iter`: an iterator as a stream, on Volt's cooperative budget.

use futures_core::Stream;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

/// A stream of an iterator's items, from [`iter`].
#[derive(Debug, Clone)]
#[must_use = "streams do nothing unless polled"]
pub struct Iter<I> {
    iter: I,
}

impl<I> Unpin for Iter<I> {}

/// The items of `i` as a stream. Each item spends a unit of the task's budget, so a loop
/// over an endless iterator still lets the worker's other tasks run (tokio-stream's spends
/// Tokio's budget, which never runs out on Volt).
pub fn iter<I: IntoIterator>(i: I) -> Iter<I::IntoIter> {
    Iter { iter: i.into_iter() }
}

impl<I: Iterator> Stream for Iter<I> {
    type Item = I::Item;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<I::Item>> {
        let coop = ready!(volt::task::coop::poll_proceed(cx));
        coop.made_progress();
        Poll::Ready(self.iter.next())
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.iter.size_hint()
    }
}
