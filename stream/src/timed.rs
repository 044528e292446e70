//! The timed combinators of [`StreamExt`](crate::StreamExt) (`timeout`,
//! `timeout_repeating`, `throttle`, `chunks_timeout`), on Volt's timer.

use futures_core::Stream;
use pin_project_lite::pin_project;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;
use tokio_stream::adapters::Fuse;
use volt::time::{Instant, Interval, Sleep};

/// A deadline passed before the stream's next item: the error of [`Timeout`] and
/// [`TimeoutRepeating`].
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub struct Elapsed(());

impl fmt::Display for Elapsed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("deadline has elapsed")
    }
}

impl std::error::Error for Elapsed {}

impl From<Elapsed> for std::io::Error {
    fn from(_: Elapsed) -> std::io::Error {
        std::io::ErrorKind::TimedOut.into()
    }
}

/// `now + d`, or as far ahead as the clock goes for a `d` too large to add.
fn after(d: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(d).unwrap_or_else(|| now + Duration::from_secs(86_400 * 365 * 30))
}

pin_project! {
    /// The stream of [`StreamExt::timeout`](crate::StreamExt::timeout).
    #[must_use = "streams do nothing unless polled"]
    #[derive(Debug)]
    pub struct Timeout<S> {
        // Fused: polled again after its end, it stays ended.
        #[pin]
        stream: Fuse<S>,
        #[pin]
        deadline: Sleep,
        duration: Duration,
        // Whether the deadline still counts: once it has given its `Elapsed`, not until
        // the next item.
        armed: bool,
    }
}

impl<S: Stream> Timeout<S> {
    pub(crate) fn new(stream: S, duration: Duration) -> Self {
        Timeout {
            stream: tokio_stream::StreamExt::fuse(stream),
            deadline: volt::time::sleep_until(after(duration)),
            duration,
            armed: true,
        }
    }
}

impl<S: Stream> Stream for Timeout<S> {
    type Item = Result<S::Item, Elapsed>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let mut me = self.project();
        if let Poll::Ready(item) = me.stream.poll_next(cx) {
            if item.is_some() {
                me.deadline.as_mut().reset(after(*me.duration));
                *me.armed = true;
            }
            return Poll::Ready(item.map(Ok));
        }
        if *me.armed {
            ready!(me.deadline.poll(cx));
            *me.armed = false;
            return Poll::Ready(Some(Err(Elapsed(()))));
        }
        Poll::Pending
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        // At most one `Elapsed` before each item and one after the last.
        let (lower, upper) = self.stream.size_hint();
        (lower, upper.and_then(|n| n.checked_mul(2)?.checked_add(1)))
    }
}

pin_project! {
    /// The stream of [`StreamExt::timeout_repeating`](crate::StreamExt::timeout_repeating).
    #[must_use = "streams do nothing unless polled"]
    #[derive(Debug)]
    pub struct TimeoutRepeating<S> {
        // Fused: polled again after its end, it stays ended.
        #[pin]
        stream: Fuse<S>,
        interval: Interval,
    }
}

impl<S: Stream> TimeoutRepeating<S> {
    pub(crate) fn new(stream: S, interval: Interval) -> Self {
        // The interval as given: a fresh one's first tick is immediate, so an `Elapsed`
        // comes at once unless an item is ready (as tokio-stream's).
        TimeoutRepeating { stream: tokio_stream::StreamExt::fuse(stream), interval }
    }
}

impl<S: Stream> Stream for TimeoutRepeating<S> {
    type Item = Result<S::Item, Elapsed>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let me = self.project();
        if let Poll::Ready(item) = me.stream.poll_next(cx) {
            if item.is_some() {
                me.interval.reset();
            }
            return Poll::Ready(item.map(Ok));
        }
        ready!(me.interval.poll_tick(cx));
        Poll::Ready(Some(Err(Elapsed(()))))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        // Any number of `Elapsed` may come between items.
        (self.stream.size_hint().0, None)
    }
}

pin_project! {
    /// The stream of [`StreamExt::throttle`](crate::StreamExt::throttle).
    #[must_use = "streams do nothing unless polled"]
    #[derive(Debug)]
    pub struct Throttle<S> {
        #[pin]
        stream: S,
        #[pin]
        delay: Sleep,
        duration: Duration,
        // Whether the wait since the last item is over (true before the first item).
        waited: bool,
    }
}

impl<S: Stream> Throttle<S> {
    pub(crate) fn new(stream: S, duration: Duration) -> Self {
        Throttle { stream, delay: volt::time::sleep_until(Instant::now()), duration, waited: true }
    }

    /// The stream throttled.
    pub fn get_ref(&self) -> &S {
        &self.stream
    }

    /// The stream throttled, to change it.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.stream
    }

    /// The stream back.
    pub fn into_inner(self) -> S {
        self.stream
    }
}

impl<S: Stream> Stream for Throttle<S> {
    type Item = S::Item;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<S::Item>> {
        let mut me = self.project();
        if !*me.waited {
            ready!(me.delay.as_mut().poll(cx));
            *me.waited = true;
        }
        let item = ready!(me.stream.poll_next(cx));
        if item.is_some() && !me.duration.is_zero() {
            me.delay.reset(after(*me.duration));
            *me.waited = false;
        }
        Poll::Ready(item)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.stream.size_hint()
    }
}

pin_project! {
    /// The stream of [`StreamExt::chunks_timeout`](crate::StreamExt::chunks_timeout).
    #[must_use = "streams do nothing unless polled"]
    pub struct ChunksTimeout<S: Stream> {
        #[pin]
        stream: S,
        #[pin]
        deadline: Option<Sleep>,
        duration: Duration,
        items: Vec<S::Item>,
        cap: usize,
        done: bool,
    }
}

impl<S: Stream + fmt::Debug> fmt::Debug for ChunksTimeout<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChunksTimeout")
            .field("stream", &self.stream)
            .field("held", &self.items.len())
            .field("max_size", &self.cap)
            .field("duration", &self.duration)
            .finish_non_exhaustive()
    }
}

impl<S: Stream> ChunksTimeout<S> {
    #[track_caller]
    pub(crate) fn new(stream: S, max_size: usize, duration: Duration) -> Self {
        assert!(max_size > 0, "chunks_timeout: max_size must be above zero");
        ChunksTimeout {
            stream,
            deadline: None,
            duration,
            items: Vec::with_capacity(max_size),
            cap: max_size,
            done: false,
        }
    }

    /// The items held for the chunk being filled, taken out (the chunk starts again
    /// empty).
    pub fn into_remainder(self: Pin<&mut Self>) -> Vec<S::Item> {
        let mut me = self.project();
        me.deadline.set(None);
        std::mem::take(me.items)
    }
}

impl<S: Stream> Stream for ChunksTimeout<S> {
    type Item = Vec<S::Item>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Vec<S::Item>>> {
        let mut me = self.project();
        let cap = *me.cap;
        while !*me.done {
            match me.stream.as_mut().poll_next(cx) {
                Poll::Ready(Some(item)) => {
                    if me.items.is_empty() {
                        // The chunk's time runs from its first item.
                        me.deadline.set(Some(volt::time::sleep_until(after(*me.duration))));
                    }
                    me.items.push(item);
                    if me.items.len() >= cap {
                        me.deadline.set(None);
                        return Poll::Ready(Some(std::mem::replace(me.items, Vec::with_capacity(cap))));
                    }
                }
                Poll::Ready(None) => *me.done = true,
                Poll::Pending => {
                    if let Some(deadline) = me.deadline.as_mut().as_pin_mut() {
                        ready!(deadline.poll(cx));
                        me.deadline.set(None);
                        return Poll::Ready(Some(std::mem::replace(me.items, Vec::with_capacity(cap))));
                    }
                    return Poll::Pending;
                }
            }
        }
        // The stream ended: what is left, then the end.
        if me.items.is_empty() {
            Poll::Ready(None)
        } else {
            me.deadline.set(None);
            Poll::Ready(Some(std::mem::take(me.items)))
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let held = self.items.len();
        let (lower, upper) = self.stream.size_hint();
        let lower = (lower.saturating_add(held)).div_ceil(self.cap);
        (lower, upper.and_then(|u| u.checked_add(held)))
    }
}
