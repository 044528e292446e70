//! `ReceiverStream` and `UnboundedReceiverStream`: the receivers of Volt's `mpsc`
//! channels as streams.

use futures_core::Stream;
use std::pin::Pin;
use std::task::{Context, Poll};
use volt::sync::mpsc::{Receiver, UnboundedReceiver};

/// A stream of the messages of a channel's receiver: `$name` over `$rx`.
macro_rules! receiver_stream {
    ($(#[$doc:meta])* $name:ident, $rx:ident) => {
        $(#[$doc])*
        #[derive(Debug)]
        pub struct $name<T> {
            inner: $rx<T>,
        }

        impl<T> $name<T> {
            /// The stream of `recv`'s messages.
            pub fn new(recv: $rx<T>) -> Self {
                Self { inner: recv }
            }

            /// The receiver back.
            pub fn into_inner(self) -> $rx<T> {
                self.inner
            }

            /// Close the channel to senders without dropping the messages it holds: the
            /// stream gives those, then ends.
            pub fn close(&mut self) {
                self.inner.close();
            }
        }

        impl<T> Stream for $name<T> {
            type Item = T;

            fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
                self.inner.poll_recv(cx)
            }

            fn size_hint(&self) -> (usize, Option<usize>) {
                receiver_stream!(@hint self.inner, $rx)
            }
        }

        impl<T> AsRef<$rx<T>> for $name<T> {
            fn as_ref(&self) -> &$rx<T> {
                &self.inner
            }
        }

        impl<T> AsMut<$rx<T>> for $name<T> {
            fn as_mut(&mut self) -> &mut $rx<T> {
                &mut self.inner
            }
        }

        impl<T> From<$rx<T>> for $name<T> {
            fn from(recv: $rx<T>) -> Self {
                Self::new(recv)
            }
        }
    };
    // What is queued now; once the channel is closed, at most that plus what senders
    // holding permits may still send.
    (@hint $rx:expr, Receiver) => {
        if $rx.is_closed() {
            ($rx.len(), Some($rx.max_capacity() - $rx.capacity()))
        } else {
            ($rx.len(), None)
        }
    };
    // Unbounded: once closed, nothing more comes than what is queued.
    (@hint $rx:expr, UnboundedReceiver) => {
        if $rx.is_closed() {
            ($rx.len(), Some($rx.len()))
        } else {
            ($rx.len(), None)
        }
    };
}

receiver_stream!(
    /// The messages of a bounded channel's [`Receiver`], as a stream that ends once every
    /// sender is gone and the channel is empty.
    ReceiverStream,
    Receiver
);

receiver_stream!(
    /// The messages of an unbounded channel's [`UnboundedReceiver`], as a stream that ends
    /// once every sender is gone and the channel is empty.
    UnboundedReceiverStream,
    UnboundedReceiver
);
