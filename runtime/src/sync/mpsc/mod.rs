//! Tokio's `sync::mpsc` channel: many senders, one receiver, bounded ([`channel`]) or
//! not ([`unbounded_channel`]).
//!
//! # How it works
//! A mutex guards what the senders share: a `VecDeque` of values (its ring is reused,
//! so a message costs no allocation once the channel has warmed up), the receiver's
//! waker, and the senders waiting for room. The receiver does not take it per value:
//! when the values it took last are gone, it swaps the whole buffer for its own empty
//! one under the lock and hands the values out from there, so with many senders it
//! meets them at the lock once per batch, not once per value. A bounded channel counts
//! its slots in use: a value not yet received or a permit handed out ([`Permit`],
//! [`OwnedPermit`]) holds one. A value's slot is freed when the value is received, as
//! in Tokio. The receiver counts freed slots without the lock while no sender waits;
//! while some do, it brings each slot to the lock and gives it to the first sender in
//! the queue, so senders that wait are served in the order they came, and a `try_send`
//! cannot take a slot from them. The waiting senders live in a slab of slots the
//! channel reuses, so a wait does not allocate either. Wakers are woken after the lock
//! is let go.
//!
//! # Cancel safety (as Tokio documents)
//! [`Receiver::recv`] is cancel safe: a value leaves the channel only in the poll that
//! returns it (one moved to the receiver's own batch is still the channel's). [`Sender::reserve`] is cancel safe apart from the place in the queue:
//! a slot granted to a dropped `reserve` goes to the next sender. [`Sender::send`] loses
//! its value and its place when dropped before it completes.
//!
//! # Named waits
//! A receive on an empty channel shows in the console as `recv mpsc (empty)`, a send on
//! a full channel as `send mpsc (full, N)` with N the capacity (`reserve mpsc (full, N)`
//! for a reservation), and [`Sender::closed`] as `closed mpsc`.
//!
//! # Where it lives
//! `chan` holds the channel itself (its state, the receive and send paths, a sender's
//! wait for room); `bounded` and `unbounded` hold the public halves of each kind, which
//! share their receiver's methods and their senders' bookkeeping through `halves`.

pub mod error;

mod bounded;
mod chan;
mod halves;
mod unbounded;

pub use bounded::{channel, OwnedPermit, Permit, PermitIterator, Receiver, Sender, WeakSender};
pub use unbounded::{unbounded_channel, UnboundedReceiver, UnboundedSender, WeakUnboundedSender};

#[cfg(all(loom, test))]
mod loom_tests;

#[cfg(all(test, not(loom)))]
mod tests;
