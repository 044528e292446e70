//! Wrappers whose stream is one of the wrapped type's own `poll_*` methods: an interval's
//! ticks, a listener's connections, a signal's deliveries, a directory's entries, a join
//! set's results.

use futures_core::Stream;
use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use volt::fs::{DirEntry, ReadDir};
use volt::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use volt::signal::unix::Signal;
use volt::task::{JoinError, JoinSet};
use volt::time::{Instant, Interval};

/// `$name`, a stream over `$inner` whose next item `$poll` gives, with tokio-stream's
/// `new`, `into_inner`, `AsRef` and `AsMut`.
macro_rules! polled_stream {
    ($(#[$doc:meta])* $name:ident $(<$t:ident>)?, $inner:ty, $item:ty, |$this:ident, $cx:ident| $poll:expr
     $(, size_hint: |$hint_of:ident| $hint:expr)?) => {
        $(#[$doc])*
        #[derive(Debug)]
        pub struct $name$(<$t>)? {
            inner: $inner,
        }

        impl$(<$t>)? $name$(<$t>)? {
            /// The stream over `inner`.
            pub fn new(inner: $inner) -> Self {
                Self { inner }
            }

            /// What the stream wraps, back.
            pub fn into_inner(self) -> $inner {
                self.inner
            }
        }

        impl$(<$t: 'static>)? Stream for $name$(<$t>)? {
            type Item = $item;

            fn poll_next(self: Pin<&mut Self>, $cx: &mut Context<'_>) -> Poll<Option<$item>> {
                let $this = &mut self.get_mut().inner;
                $poll
            }

            $(
                fn size_hint(&self) -> (usize, Option<usize>) {
                    let $hint_of = &self.inner;
                    $hint
                }
            )?
        }

        impl$(<$t>)? AsRef<$inner> for $name$(<$t>)? {
            fn as_ref(&self) -> &$inner {
                &self.inner
            }
        }

        impl$(<$t>)? AsMut<$inner> for $name$(<$t>)? {
            fn as_mut(&mut self) -> &mut $inner {
                &mut self.inner
            }
        }
    };
}

polled_stream!(
    /// An [`Interval`]'s ticks, for ever: each item is the instant the tick was due.
    IntervalStream, Interval, Instant, |interval, cx| interval.poll_tick(cx).map(Some),
    size_hint: |_interval| (usize::MAX, None)
);

impl futures_core::stream::FusedStream for IntervalStream {
    fn is_terminated(&self) -> bool {
        false
    }
}

polled_stream!(
    /// A [`TcpListener`]'s accepted connections, for ever (an accept that fails is an
    /// `Err` item, and the stream goes on).
    TcpListenerStream, TcpListener, io::Result<TcpStream>,
    |listener, cx| listener.poll_accept(cx).map(|r| Some(r.map(|(stream, _)| stream)))
);

polled_stream!(
    /// A [`UnixListener`]'s accepted connections, for ever (an accept that fails is an
    /// `Err` item, and the stream goes on).
    UnixListenerStream, UnixListener, io::Result<UnixStream>,
    |listener, cx| listener.poll_accept(cx).map(|r| Some(r.map(|(stream, _)| stream)))
);

polled_stream!(
    /// A [`Signal`]'s deliveries: an item for each time the signal is received.
    SignalStream, Signal, (), |signal, cx| signal.poll_recv(cx)
);

polled_stream!(
    /// A [`ReadDir`]'s entries, then the end (a failed read is an `Err` item).
    ReadDirStream, ReadDir, io::Result<DirEntry>,
    |dir, cx| Poll::Ready(ready!(dir.poll_next_entry(cx)).transpose())
);

polled_stream!(
    /// A [`JoinSet`]'s tasks' results in the order they finish; the stream ends when the
    /// set is empty. Dropping the stream aborts the tasks still in the set.
    JoinSetStream<T>, JoinSet<T>, Result<T, JoinError>, |set, cx| set.poll_join_next(cx),
    size_hint: |set| (set.len(), Some(set.len()))
);

impl<T> From<JoinSet<T>> for JoinSetStream<T> {
    fn from(set: JoinSet<T>) -> Self {
        Self::new(set)
    }
}
