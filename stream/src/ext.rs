//! [`StreamExt`]: tokio-stream's combinators, with the timed ones on Volt's timer.

use crate::timed::{ChunksTimeout, Throttle, Timeout, TimeoutRepeating};
use futures_core::Stream;
use std::future::Future;
use std::time::Duration;
use tokio_stream::adapters::{
    Chain, Filter, FilterMap, Fuse, Map, MapWhile, Merge, Peekable, Skip, SkipWhile, Take, TakeWhile, Then,
};
use tokio_stream::FromStream;
use volt::time::Interval;

/// Methods for every [`Stream`], as tokio-stream's `StreamExt` has them. The untimed ones
/// are tokio-stream's own (they return its adapters); `timeout`, `timeout_repeating`,
/// `throttle` and `chunks_timeout` wait on Volt's timer.
pub trait StreamExt: Stream {
    /// The next item, or `None` once the stream has ended.
    fn next(&mut self) -> impl Future<Output = Option<Self::Item>> + '_
    where
        Self: Unpin,
    {
        tokio_stream::StreamExt::next(self)
    }

    /// The next item of a stream of `Result`s, with the `Result` on the outside.
    fn try_next<T, E>(&mut self) -> impl Future<Output = Result<Option<T>, E>> + '_
    where
        Self: Stream<Item = Result<T, E>> + Unpin,
    {
        tokio_stream::StreamExt::try_next(self)
    }

    /// Each item through `f`.
    fn map<T, F>(self, f: F) -> Map<Self, F>
    where
        F: FnMut(Self::Item) -> T,
        Self: Sized,
    {
        tokio_stream::StreamExt::map(self, f)
    }

    /// Each item through `f`, until `f` gives `None`.
    fn map_while<T, F>(self, f: F) -> MapWhile<Self, F>
    where
        F: FnMut(Self::Item) -> Option<T>,
        Self: Sized,
    {
        tokio_stream::StreamExt::map_while(self, f)
    }

    /// Each item through the asynchronous `f`, one at a time.
    fn then<F, Fut>(self, f: F) -> Then<Self, Fut, F>
    where
        F: FnMut(Self::Item) -> Fut,
        Fut: Future,
        Self: Sized,
    {
        tokio_stream::StreamExt::then(self, f)
    }

    /// The items of both streams as they come, ending when both have ended.
    fn merge<U>(self, other: U) -> Merge<Self, U>
    where
        U: Stream<Item = Self::Item>,
        Self: Sized,
    {
        tokio_stream::StreamExt::merge(self, other)
    }

    /// The items `f` keeps.
    fn filter<F>(self, f: F) -> Filter<Self, F>
    where
        F: FnMut(&Self::Item) -> bool,
        Self: Sized,
    {
        tokio_stream::StreamExt::filter(self, f)
    }

    /// The items `f` maps to `Some`.
    fn filter_map<T, F>(self, f: F) -> FilterMap<Self, F>
    where
        F: FnMut(Self::Item) -> Option<T>,
        Self: Sized,
    {
        tokio_stream::StreamExt::filter_map(self, f)
    }

    /// Ends for good at the first `None`.
    fn fuse(self) -> Fuse<Self>
    where
        Self: Sized,
    {
        tokio_stream::StreamExt::fuse(self)
    }

    /// The first `n` items.
    fn take(self, n: usize) -> Take<Self>
    where
        Self: Sized,
    {
        tokio_stream::StreamExt::take(self, n)
    }

    /// Items while `f` holds for them.
    fn take_while<F>(self, f: F) -> TakeWhile<Self, F>
    where
        F: FnMut(&Self::Item) -> bool,
        Self: Sized,
    {
        tokio_stream::StreamExt::take_while(self, f)
    }

    /// All but the first `n` items.
    fn skip(self, n: usize) -> Skip<Self>
    where
        Self: Sized,
    {
        tokio_stream::StreamExt::skip(self, n)
    }

    /// The items from the first one `f` does not hold for.
    fn skip_while<F>(self, f: F) -> SkipWhile<Self, F>
    where
        F: FnMut(&Self::Item) -> bool,
        Self: Sized,
    {
        tokio_stream::StreamExt::skip_while(self, f)
    }

    /// Whether `f` holds for every item (stops at the first it does not).
    fn all<F>(&mut self, f: F) -> impl Future<Output = bool>
    where
        Self: Unpin,
        F: FnMut(Self::Item) -> bool,
    {
        tokio_stream::StreamExt::all(self, f)
    }

    /// Whether `f` holds for some item (stops at the first it does).
    fn any<F>(&mut self, f: F) -> impl Future<Output = bool>
    where
        Self: Unpin,
        F: FnMut(Self::Item) -> bool,
    {
        tokio_stream::StreamExt::any(self, f)
    }

    /// This stream's items, then `other`'s.
    fn chain<U>(self, other: U) -> Chain<Self, U>
    where
        U: Stream<Item = Self::Item>,
        Self: Sized,
    {
        tokio_stream::StreamExt::chain(self, other)
    }

    /// Every item folded into `init` with `f`.
    fn fold<B, F>(self, init: B, f: F) -> impl Future<Output = B>
    where
        Self: Sized,
        F: FnMut(B, Self::Item) -> B,
    {
        tokio_stream::StreamExt::fold(self, init, f)
    }

    /// Every item, collected (a `Vec`, a `String`, a `Result` of them, ...).
    fn collect<T>(self) -> impl Future<Output = T>
    where
        T: FromStream<Self::Item>,
        Self: Sized,
    {
        tokio_stream::StreamExt::collect(self)
    }

    /// Each item as `Ok`, and an [`Elapsed`](crate::Elapsed) error when `duration`
    /// passes without one (once, until the next item; the stream goes on).
    fn timeout(self, duration: Duration) -> Timeout<Self>
    where
        Self: Sized,
    {
        Timeout::new(self, duration)
    }

    /// Each item as `Ok`, and an [`Elapsed`](crate::Elapsed) error at each tick of
    /// `interval` that comes without one (the interval restarts at each item).
    fn timeout_repeating(self, interval: Interval) -> TimeoutRepeating<Self>
    where
        Self: Sized,
    {
        TimeoutRepeating::new(self, interval)
    }

    /// The items, at least `duration` apart (the first at once).
    fn throttle(self, duration: Duration) -> Throttle<Self>
    where
        Self: Sized,
    {
        Throttle::new(self, duration)
    }

    /// The items in `Vec`s of at most `max_size`, each given when full or `duration`
    /// after its first item, whichever comes first.
    ///
    /// # Panics
    /// If `max_size` is zero.
    #[track_caller]
    fn chunks_timeout(self, max_size: usize, duration: Duration) -> ChunksTimeout<Self>
    where
        Self: Sized,
    {
        ChunksTimeout::new(self, max_size, duration)
    }

    /// The items, with a look at the next one before taking it.
    fn peekable(self) -> Peekable<Self>
    where
        Self: Sized,
    {
        tokio_stream::StreamExt::peekable(self)
    }
}

impl<S: Stream + ?Sized> StreamExt for S {}
