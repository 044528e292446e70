//! The bounded channel ([`channel`]): its sender, weak sender and receiver, and the
//! permits that reserve its slots.

use super::chan::{Acquire, Chan, WaitKind};
#[cfg(not(loom))]
use super::error::SendTimeoutError;
use super::error::{SendError, TrySendError};
use super::halves::{receiver, senders};
use crate::loom::Arc;
use std::fmt;

/// The largest buffer a bounded channel takes (as Tokio's).
const MAX_BUFFER: usize = usize::MAX >> 3;

/// A bounded channel with room for `buffer` values: a sender waits while it is full.
///
/// # Panics
/// When `buffer` is 0, or larger than `usize::MAX >> 3` (as Tokio's).
#[track_caller]
pub fn channel<T>(buffer: usize) -> (Sender<T>, Receiver<T>) {
    assert!(buffer > 0, "mpsc bounded channel requires buffer > 0");
    assert!(buffer <= MAX_BUFFER, "mpsc bounded channel requires buffer <= usize::MAX >> 3");
    let chan = Chan::new(Some(buffer));
    (Sender { chan: chan.clone() }, Receiver { chan })
}

/// The sending half of a bounded channel; clone it for more producers.
pub struct Sender<T> {
    chan: Arc<Chan<T>>,
}

/// A sender that does not keep the channel open: [`upgrade`](WeakSender::upgrade) it
/// while a [`Sender`] lives.
pub struct WeakSender<T> {
    chan: Arc<Chan<T>>,
}

/// The receiving half of a bounded channel.
pub struct Receiver<T> {
    chan: Arc<Chan<T>>,
}

/// A reserved slot of a bounded channel: [`send`](Permit::send) fills it without
/// waiting; dropping it gives the slot back.
pub struct Permit<'a, T> {
    chan: &'a Chan<T>,
}

/// A [`Permit`] that owns its [`Sender`], from [`Sender::reserve_owned`].
pub struct OwnedPermit<T> {
    chan: Option<Sender<T>>,
}

/// Permits of [`Sender::reserve_many`]: each one sends a value; those not taken are
/// given back when it drops.
pub struct PermitIterator<'a, T> {
    chan: &'a Chan<T>,
    n: usize,
}

impl<T> Sender<T> {
    /// Send `value`, waiting for a slot while the channel is full. Senders that wait
    /// are served in order. Fails, giving the value back, when the receiver is gone or
    /// closed the channel.
    ///
    /// Not cancel safe: dropped before it completes, the value is lost (use
    /// [`reserve`](Sender::reserve) to keep it).
    pub async fn send(&self, value: T) -> Result<(), SendError<T>> {
        let value = match self.chan.try_push(value) {
            Ok(()) => return Ok(()),
            Err(TrySendError::Closed(v)) => return Err(SendError(v)),
            Err(TrySendError::Full(v)) => v,
        };
        match Acquire::new(&self.chan, 1, WaitKind::Send).await {
            Ok(()) => {
                self.chan.push_reserved(value);
                Ok(())
            }
            Err(()) => Err(SendError(value)),
        }
    }

    /// Send `value` if a slot is free now.
    pub fn try_send(&self, value: T) -> Result<(), TrySendError<T>> {
        self.chan.try_push(value)
    }

    /// [`send`](Sender::send), giving up after `timeout`.
    #[cfg(not(loom))]
    pub async fn send_timeout(&self, value: T, timeout: std::time::Duration) -> Result<(), SendTimeoutError<T>> {
        let value = match self.chan.try_push(value) {
            Ok(()) => return Ok(()),
            Err(TrySendError::Closed(v)) => return Err(SendTimeoutError::Closed(v)),
            Err(TrySendError::Full(v)) => v,
        };
        let acquire = Acquire::new(&self.chan, 1, WaitKind::Send);
        match crate::time::timeout(timeout, acquire).await {
            Ok(Ok(())) => {
                self.chan.push_reserved(value);
                Ok(())
            }
            Ok(Err(())) => Err(SendTimeoutError::Closed(value)),
            Err(_) => Err(SendTimeoutError::Timeout(value)),
        }
    }

    /// [`send`](Sender::send) from synchronous code, blocking the thread.
    ///
    /// # Panics
    /// On a runtime's worker thread.
    #[cfg(not(loom))]
    #[track_caller]
    pub fn blocking_send(&self, value: T) -> Result<(), SendError<T>> {
        crate::sync::blocking_wait("Sender::blocking_send", self.send(value))
    }

    /// Wait for a slot and keep it: the returned [`Permit`] sends without waiting.
    /// Cancel safe, apart from the place in the queue.
    pub async fn reserve(&self) -> Result<Permit<'_, T>, SendError<()>> {
        match Acquire::new(&self.chan, 1, WaitKind::Reserve).await {
            Ok(()) => Ok(Permit { chan: &self.chan }),
            Err(()) => Err(SendError(())),
        }
    }

    /// [`reserve`](Sender::reserve), with a permit that owns the sender.
    pub async fn reserve_owned(self) -> Result<OwnedPermit<T>, SendError<()>> {
        match Acquire::new(&self.chan, 1, WaitKind::Reserve).await {
            Ok(()) => Ok(OwnedPermit { chan: Some(self) }),
            Err(()) => Err(SendError(())),
        }
    }

    /// Wait for `n` slots and keep them: the returned iterator gives `n` permits.
    /// Fails when the receiver is gone or closed, or when `n` is more than the capacity.
    /// Cancel safe, apart from the place in the queue.
    pub async fn reserve_many(&self, n: usize) -> Result<PermitIterator<'_, T>, SendError<()>> {
        if n > self.max_capacity() {
            return Err(SendError(()));
        }
        match Acquire::new(&self.chan, n, WaitKind::Reserve).await {
            Ok(()) => Ok(PermitIterator { chan: &self.chan, n }),
            Err(()) => Err(SendError(())),
        }
    }

    /// Keep `n` slots if they are free now (`Full` too when `n` is more than the
    /// capacity).
    pub fn try_reserve_many(&self, n: usize) -> Result<PermitIterator<'_, T>, TrySendError<()>> {
        if n > self.max_capacity() {
            return Err(TrySendError::Full(()));
        }
        self.chan.try_reserve(n)?;
        Ok(PermitIterator { chan: &self.chan, n })
    }

    /// Keep a slot if one is free now.
    pub fn try_reserve(&self) -> Result<Permit<'_, T>, TrySendError<()>> {
        self.chan.try_reserve(1)?;
        Ok(Permit { chan: &self.chan })
    }

    /// [`try_reserve`](Sender::try_reserve), with a permit that owns the sender; the
    /// sender comes back in the error.
    pub fn try_reserve_owned(self) -> Result<OwnedPermit<T>, TrySendError<Self>> {
        match self.chan.try_reserve(1) {
            Ok(()) => Ok(OwnedPermit { chan: Some(self) }),
            Err(TrySendError::Full(())) => Err(TrySendError::Full(self)),
            Err(TrySendError::Closed(())) => Err(TrySendError::Closed(self)),
        }
    }

    /// Slots free now: the capacity less the values buffered and the permits out.
    pub fn capacity(&self) -> usize {
        self.chan.capacity()
    }

    /// The channel's capacity, as given to [`channel`].
    pub fn max_capacity(&self) -> usize {
        self.chan.max_capacity()
    }
}

senders!(Sender, WeakSender);

impl<T> fmt::Debug for Sender<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sender").field("capacity", &self.capacity()).finish_non_exhaustive()
    }
}

impl<T> Permit<'_, T> {
    /// Send `value` in the reserved slot.
    pub fn send(self, value: T) {
        let chan = self.chan;
        // The slot is the value's from here on: the permit must not give it back, even if
        // the receiver's waker panics as the push wakes it.
        std::mem::forget(self);
        chan.push_reserved(value);
    }
}

impl<T> Drop for Permit<'_, T> {
    fn drop(&mut self) {
        self.chan.release_unlocked();
    }
}

impl<T> fmt::Debug for Permit<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Permit").finish_non_exhaustive()
    }
}

impl<'a, T> Iterator for PermitIterator<'a, T> {
    type Item = Permit<'a, T>;

    fn next(&mut self) -> Option<Permit<'a, T>> {
        if self.n == 0 {
            return None;
        }
        self.n -= 1;
        Some(Permit { chan: self.chan })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.n, Some(self.n))
    }
}

impl<T> ExactSizeIterator for PermitIterator<'_, T> {}

impl<T> std::iter::FusedIterator for PermitIterator<'_, T> {}

impl<T> Drop for PermitIterator<'_, T> {
    fn drop(&mut self) {
        if self.n > 0 {
            self.chan.release_many_unlocked(self.n);
        }
    }
}

impl<T> fmt::Debug for PermitIterator<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PermitIterator").field("remaining", &self.n).finish_non_exhaustive()
    }
}

impl<T> OwnedPermit<T> {
    /// Send `value` in the reserved slot; returns the sender.
    pub fn send(mut self, value: T) -> Sender<T> {
        let tx = self.chan.take().expect("an OwnedPermit holds its sender until consumed");
        tx.chan.push_reserved(value);
        tx
    }

    /// Give the slot back unused; returns the sender.
    pub fn release(mut self) -> Sender<T> {
        let tx = self.chan.take().expect("an OwnedPermit holds its sender until consumed");
        tx.chan.release_unlocked();
        tx
    }

    /// Whether `other` reserves a slot of the same channel.
    pub fn same_channel(&self, other: &Self) -> bool {
        self.sender().same_channel(other.sender())
    }

    /// Whether `sender` sends on the channel this reserves a slot of.
    pub fn same_channel_as_sender(&self, sender: &Sender<T>) -> bool {
        self.sender().same_channel(sender)
    }

    fn sender(&self) -> &Sender<T> {
        self.chan.as_ref().expect("an OwnedPermit holds its sender until consumed")
    }
}

impl<T> Drop for OwnedPermit<T> {
    fn drop(&mut self) {
        if let Some(tx) = self.chan.take() {
            tx.chan.release_unlocked();
        }
    }
}

impl<T> fmt::Debug for OwnedPermit<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OwnedPermit").finish_non_exhaustive()
    }
}

receiver!(Receiver);

impl<T> Receiver<T> {
    /// Slots free now.
    pub fn capacity(&self) -> usize {
        self.chan.capacity()
    }

    /// The channel's capacity, as given to [`channel`].
    pub fn max_capacity(&self) -> usize {
        self.chan.max_capacity()
    }
}
