//! The unbounded channel ([`unbounded_channel`]): its sender, weak sender and receiver.

use super::chan::Chan;
use super::error::SendError;
use super::halves::{receiver, senders};
use crate::loom::Arc;
use std::fmt;

/// A channel without a bound: a send never waits.
pub fn unbounded_channel<T>() -> (UnboundedSender<T>, UnboundedReceiver<T>) {
    let chan = Chan::new(None);
    (UnboundedSender { chan: chan.clone() }, UnboundedReceiver { chan })
}

/// The sending half of an unbounded channel; clone it for more producers.
pub struct UnboundedSender<T> {
    chan: Arc<Chan<T>>,
}

/// A sender that does not keep the channel open: [`upgrade`](WeakUnboundedSender::upgrade)
/// it while an [`UnboundedSender`] lives.
pub struct WeakUnboundedSender<T> {
    chan: Arc<Chan<T>>,
}

/// The receiving half of an unbounded channel.
pub struct UnboundedReceiver<T> {
    chan: Arc<Chan<T>>,
}

impl<T> UnboundedSender<T> {
    /// Send `value` without waiting. Fails, giving it back, when the receiver is gone or
    /// closed the channel.
    pub fn send(&self, value: T) -> Result<(), SendError<T>> {
        self.chan.try_push(value).map_err(|e| SendError(e.into_inner()))
    }
}

senders!(UnboundedSender, WeakUnboundedSender);

impl<T> fmt::Debug for UnboundedSender<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UnboundedSender").finish_non_exhaustive()
    }
}

receiver!(UnboundedReceiver);
