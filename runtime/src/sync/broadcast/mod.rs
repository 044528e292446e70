//! Tokio's `sync::broadcast` channel: many senders, many receivers, and each receiver
//! sees every value sent while it lives, in order.
//!
//! # How it works
//! A ring of `capacity` slots (rounded up to a power of two, as Tokio does), each
//! guarded by one word of its own (`slot`), and one mutex for the tail (where the next
//! value goes, the counts, the waiters). A value takes the slot of its position, with a
//! count of the receivers that have yet to see it (those alive when it was sent); the
//! last of them drops it. A receiver keeps the position it reads next and clones the
//! value there while it is counted in the slot's word, so receivers that keep up read
//! side by side and never take the tail mutex; only a receiver that finds nothing for it
//! (nothing new, lag, close, a sender writing the slot) does, to learn which and to
//! register its waker. When senders get more than the capacity ahead of a receiver, its
//! oldest values are overwritten: its next `recv` returns
//! [`RecvError::Lagged`](error::RecvError::Lagged) with how many it missed, once, and
//! then goes on from the oldest value still kept. Receivers that wait keep one slot each
//! in a reusable slab; a send takes their wakers under the tail lock it already holds
//! and wakes them after letting it go.
//!
//! A receive that waits shows in the console as `recv broadcast`; [`Sender::closed`] as
//! `closed broadcast`.
//!
//! # Where it lives
//! This file holds the ring, the tail and the public types; `slot` the slot and its word;
//! `sender` and `receiver` the methods, and `error` the errors.

pub mod error;

mod receiver;
mod sender;
mod slot;

use crate::loom::{lock, Arc, Mutex, MutexGuard};
use crate::sync::waiters::{ClosedState, Waiters};
use slot::Slot;

struct Shared<T> {
    slots: Box<[Slot<T>]>,
    tail: Mutex<Tail>,
    mask: u64,
}

/// What the channel's mutex guards: where the next value goes, the counts, and the
/// waiters. Receivers take it only when the slot they read next holds no value for
/// them (nothing new, lag, close), so a receiver that keeps up never touches it.
struct Tail {
    /// The position of the next value sent.
    pos: u64,
    rx_count: usize,
    tx_count: usize,
    weak_count: usize,
    /// Receivers waiting for a value.
    waiters: Waiters,
    /// Waiters of `Sender::closed`.
    closed: Waiters,
}

impl<T> Shared<T> {
    fn lock(&self) -> MutexGuard<'_, Tail> {
        lock(&self.tail)
    }

    fn slot(&self, pos: u64) -> &Slot<T> {
        &self.slots[(pos & self.mask) as usize]
    }

    fn capacity(&self) -> u64 {
        self.mask + 1
    }
}

/// Count one more receiver (the tail lock held).
fn add_receiver(tail: &mut Tail) {
    assert!(tail.rx_count < slot::MAX_RECEIVERS, "broadcast channel: too many receivers");
    tail.rx_count += 1;
}

impl ClosedState for Tail {
    const CLOSED_LABEL: &'static str = "closed broadcast";

    fn rx_gone(&self) -> bool {
        self.rx_count == 0
    }

    fn closed_waiters(&mut self) -> &mut Waiters {
        &mut self.closed
    }
}

/// A channel that keeps the last `capacity` values (rounded up to a power of two) for
/// receivers that fall behind.
///
/// # Panics
/// When `capacity` is 0 or larger than `usize::MAX / 2`.
#[track_caller]
pub fn channel<T: Clone>(capacity: usize) -> (Sender<T>, Receiver<T>) {
    assert!(capacity > 0, "broadcast channel capacity cannot be zero");
    assert!(capacity <= usize::MAX >> 1, "broadcast channel capacity exceeded `usize::MAX / 2`");
    let cap = capacity.next_power_of_two();
    // A slot never written holds a position no receiver reads.
    let slots = (0..cap).map(|i| Slot::new((i as u64).wrapping_sub(cap as u64))).collect();
    let shared = Arc::new(Shared {
        slots,
        tail: Mutex::new(Tail {
            pos: 0,
            rx_count: 1,
            tx_count: 1,
            weak_count: 0,
            waiters: Waiters::default(),
            closed: Waiters::default(),
        }),
        mask: cap as u64 - 1,
    });
    let rx = Receiver { shared: shared.clone(), next: 0, key: None };
    (Sender { shared }, rx)
}

/// Sends values to every receiver; clone it for more producers.
pub struct Sender<T> {
    shared: Arc<Shared<T>>,
}

/// Receives every value sent while it lives, in order.
pub struct Receiver<T> {
    shared: Arc<Shared<T>>,
    /// The position it reads next.
    next: u64,
    /// Its slot among the waiters, once it has waited.
    key: Option<usize>,
}

/// A sender that does not keep the channel open: [`upgrade`](WeakSender::upgrade) it
/// while a [`Sender`] lives.
pub struct WeakSender<T> {
    shared: Arc<Shared<T>>,
}

#[cfg(all(loom, test))]
mod loom_tests;
