//! What the halves of a bounded and of an unbounded channel have in common, written once:
//! the receiver's methods, and the senders' bookkeeping (clones, weak senders, the
//! `closed()` wait). Each kind keeps its own public types; these macros fill them in.

/// The methods, `Drop` and `Debug` of a receiver (`$rx`, a struct with a `chan` field).
macro_rules! receiver {
    ($rx:ident) => {
        impl<T> $rx<T> {
            /// The next value; `None` once every sender is gone (or the channel is closed)
            /// and the buffer is drained. Cancel safe.
            pub async fn recv(&mut self) -> Option<T> {
                std::future::poll_fn(|cx| self.chan.poll_recv(cx)).await
            }

            /// Wait for at least one value, then move up to `limit` values into `buffer`.
            /// Returns how many moved: 0 when `limit` is 0, or when the channel is closed
            /// and drained. Cancel safe.
            pub async fn recv_many(&mut self, buffer: &mut Vec<T>, limit: usize) -> usize {
                std::future::poll_fn(|cx| self.chan.poll_recv_many(cx, buffer, limit)).await
            }

            /// The next value if one is buffered now.
            pub fn try_recv(&mut self) -> Result<T, $crate::sync::mpsc::error::TryRecvError> {
                self.chan.try_recv()
            }

            /// [`recv`](Self::recv) from synchronous code, blocking the thread.
            ///
            /// # Panics
            /// On a runtime's worker thread.
            #[cfg(not(loom))]
            #[track_caller]
            pub fn blocking_recv(&mut self) -> Option<T> {
                $crate::sync::blocking_wait(concat!(stringify!($rx), "::blocking_recv"), self.recv())
            }

            /// [`recv_many`](Self::recv_many) from synchronous code, blocking the thread.
            ///
            /// # Panics
            /// On a runtime's worker thread.
            #[cfg(not(loom))]
            #[track_caller]
            pub fn blocking_recv_many(&mut self, buffer: &mut Vec<T>, limit: usize) -> usize {
                $crate::sync::blocking_wait(
                    concat!(stringify!($rx), "::blocking_recv_many"),
                    self.recv_many(buffer, limit),
                )
            }

            /// Close the channel: sends fail from now on, while the values buffered (and,
            /// in a bounded channel, those sent through permits already out) can still be
            /// received.
            pub fn close(&mut self) {
                self.chan.close();
            }

            /// Poll for the next value, as [`recv`](Self::recv) does.
            pub fn poll_recv(&mut self, cx: &mut std::task::Context<'_>) -> std::task::Poll<Option<T>> {
                self.chan.poll_recv(cx)
            }

            /// Poll for values, as [`recv_many`](Self::recv_many) does.
            pub fn poll_recv_many(
                &mut self,
                cx: &mut std::task::Context<'_>,
                buffer: &mut Vec<T>,
                limit: usize,
            ) -> std::task::Poll<usize> {
                self.chan.poll_recv_many(cx, buffer, limit)
            }

            /// Whether the channel is closed: every sender is gone, or
            /// [`close`](Self::close) was called.
            pub fn is_closed(&self) -> bool {
                self.chan.is_closed_for_receiver()
            }

            /// Whether no value is buffered.
            pub fn is_empty(&self) -> bool {
                self.chan.len() == 0
            }

            /// Values buffered.
            pub fn len(&self) -> usize {
                self.chan.len()
            }

            /// How many senders the channel has.
            pub fn sender_strong_count(&self) -> usize {
                self.chan.strong_count()
            }

            /// How many weak senders the channel has.
            pub fn sender_weak_count(&self) -> usize {
                self.chan.weak_count()
            }
        }

        impl<T> Drop for $rx<T> {
            fn drop(&mut self) {
                self.chan.close_and_drain();
            }
        }

        impl<T> std::fmt::Debug for $rx<T> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($rx)).field("len", &self.len()).finish_non_exhaustive()
            }
        }
    };
}

/// What a sender (`$tx`) and its weak sender (`$weak`) share, both structs with a `chan`
/// field: clones and drops that count the senders, `closed()`, the counts, and the weak
/// sender's `upgrade`.
macro_rules! senders {
    ($tx:ident, $weak:ident) => {
        impl<T> $tx<T> {
            /// Wait until the receiver is dropped or closes the channel.
            pub async fn closed(&self) {
                $crate::sync::waiters::Closed::new(&self.chan.state).await
            }

            /// Whether the receiver is dropped or closed the channel.
            pub fn is_closed(&self) -> bool {
                self.chan.is_closed()
            }

            /// Whether `other` sends on the same channel.
            pub fn same_channel(&self, other: &Self) -> bool {
                $crate::loom::Arc::ptr_eq(&self.chan, &other.chan)
            }

            #[doc = concat!("A [`", stringify!($weak), "`] of this channel.")]
            pub fn downgrade(&self) -> $weak<T> {
                self.chan.add_weak();
                $weak { chan: self.chan.clone() }
            }

            /// How many senders the channel has.
            pub fn strong_count(&self) -> usize {
                self.chan.strong_count()
            }

            /// How many weak senders the channel has.
            pub fn weak_count(&self) -> usize {
                self.chan.weak_count()
            }
        }

        impl<T> Clone for $tx<T> {
            fn clone(&self) -> Self {
                self.chan.add_sender();
                $tx { chan: self.chan.clone() }
            }
        }

        impl<T> Drop for $tx<T> {
            fn drop(&mut self) {
                self.chan.drop_sender();
            }
        }

        impl<T> $weak<T> {
            #[doc = concat!("A [`", stringify!($tx), "`], if any sender still lives.")]
            pub fn upgrade(&self) -> Option<$tx<T>> {
                self.chan.upgrade().then(|| $tx { chan: self.chan.clone() })
            }

            /// How many senders the channel has.
            pub fn strong_count(&self) -> usize {
                self.chan.strong_count()
            }

            /// How many weak senders the channel has.
            pub fn weak_count(&self) -> usize {
                self.chan.weak_count()
            }
        }

        impl<T> Clone for $weak<T> {
            fn clone(&self) -> Self {
                self.chan.add_weak();
                $weak { chan: self.chan.clone() }
            }
        }

        impl<T> Drop for $weak<T> {
            fn drop(&mut self) {
                self.chan.drop_weak();
            }
        }

        impl<T> std::fmt::Debug for $weak<T> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($weak)).finish_non_exhaustive()
            }
        }
    };
}

pub(super) use {receiver, senders};
