//! The senders' side: [`Sender`] and [`WeakSender`].

use super::error::SendError;
use super::{channel, Receiver, Sender, WeakSender};
use crate::loom::Arc;
use crate::sync::waiters::{wake_all_of, Closed, WakeList};
use std::fmt;

impl<T: Clone> Sender<T> {
    /// A sender of a new channel with no receiver yet ([`subscribe`](Sender::subscribe)
    /// makes them).
    ///
    /// # Panics
    /// As [`channel`] does, for the capacity.
    #[track_caller]
    pub fn new(capacity: usize) -> Self {
        let (tx, _) = channel(capacity);
        tx
    }
}

impl<T> Sender<T> {
    /// Send `value` to every receiver; returns how many there are. With none, the value
    /// comes back in `Err` and is not kept.
    pub fn send(&self, value: T) -> Result<usize, SendError<T>> {
        let mut tail = self.shared.lock();
        if tail.rx_count == 0 {
            return Err(SendError(value));
        }
        let rx = tail.rx_count;
        let pos = tail.pos;
        // The slot is written with the tail lock held, so senders take positions in
        // order and a receiver that finds the tail past its position finds the value.
        // SAFETY: the tail lock is held.
        let slot = unsafe { self.shared.slot(pos).write() };
        self.shared.before_overwrite(&mut tail, slot.pos(), slot.remaining());
        let old = slot.put(pos, value, rx);
        tail.pos = pos + 1;
        // Waiters are taken under the same lock (no second lock per send), and only
        // when some receiver waits.
        let mut list = WakeList::new();
        let more = tail.waiters.drain_into(&mut list);
        drop(tail);
        // An overwritten value is dropped without the lock.
        drop(old);
        list.wake_all();
        if more {
            wake_all_of(&*self.shared.tail, |t| &mut t.waiters);
        }
        Ok(rx)
    }

    /// A new receiver, which sees the values sent from now on.
    ///
    /// # Panics
    /// When the channel already has `u32::MAX` receivers.
    pub fn subscribe(&self) -> Receiver<T> {
        let mut tail = self.shared.lock();
        let next = tail.pos;
        super::add_receiver(&self.shared, &mut tail, next)
    }

    /// How many receivers live.
    pub fn receiver_count(&self) -> usize {
        self.shared.lock().rx_count
    }

    /// Values held: sent, and not yet seen by every receiver alive when they were sent
    /// (at most the capacity).
    pub fn len(&self) -> usize {
        let tail = self.shared.lock();
        let from = tail.pos.saturating_sub(self.shared.capacity());
        (from..tail.pos)
            .filter(|&pos| {
                // SAFETY: the tail lock is held.
                let (at, remaining) = unsafe { self.shared.slot(pos).peek_locked() };
                at == pos && remaining > 0
            })
            .count()
    }

    /// Whether no value is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether `other` sends on the same channel.
    pub fn same_channel(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.shared, &other.shared)
    }

    /// Wait until no receiver lives.
    pub async fn closed(&self) {
        Closed::new(&*self.shared.tail).await
    }

    /// How many senders the channel has.
    pub fn strong_count(&self) -> usize {
        self.shared.lock().tx_count
    }

    /// How many weak senders the channel has.
    pub fn weak_count(&self) -> usize {
        self.shared.lock().weak_count
    }

    /// A [`WeakSender`] of this channel.
    pub fn downgrade(&self) -> WeakSender<T> {
        self.shared.lock().weak_count += 1;
        WeakSender { shared: self.shared.clone() }
    }
}

impl<T> WeakSender<T> {
    /// A [`Sender`], if any sender still lives.
    pub fn upgrade(&self) -> Option<Sender<T>> {
        let mut tail = self.shared.lock();
        if tail.tx_count == 0 {
            return None;
        }
        tail.tx_count += 1;
        Some(Sender { shared: self.shared.clone() })
    }

    /// How many senders the channel has.
    pub fn strong_count(&self) -> usize {
        self.shared.lock().tx_count
    }

    /// How many weak senders the channel has.
    pub fn weak_count(&self) -> usize {
        self.shared.lock().weak_count
    }
}

impl<T> Clone for WeakSender<T> {
    fn clone(&self) -> Self {
        self.shared.lock().weak_count += 1;
        WeakSender { shared: self.shared.clone() }
    }
}

impl<T> Drop for WeakSender<T> {
    fn drop(&mut self) {
        self.shared.lock().weak_count -= 1;
    }
}

impl<T> fmt::Debug for WeakSender<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WeakSender").finish_non_exhaustive()
    }
}

impl<T> Clone for Sender<T> {
    fn clone(&self) -> Self {
        self.shared.lock().tx_count += 1;
        Sender { shared: self.shared.clone() }
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        let last = {
            let mut tail = self.shared.lock();
            tail.tx_count -= 1;
            tail.tx_count == 0
        };
        if last {
            // Receivers that wait learn that the channel is closed.
            wake_all_of(&*self.shared.tail, |t| &mut t.waiters);
        }
    }
}

impl<T> fmt::Debug for Sender<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sender").field("receivers", &self.receiver_count()).finish_non_exhaustive()
    }
}
