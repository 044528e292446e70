//! The errors of the channel's operations.

use std::fmt;

/// The value a [`send`](super::Sender::send) could not deliver: no receiver lives.
#[derive(PartialEq, Eq, Clone, Copy)]
pub struct SendError<T>(pub T);

impl<T> fmt::Debug for SendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SendError").finish_non_exhaustive()
    }
}

impl<T> fmt::Display for SendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("channel closed")
    }
}

impl<T> std::error::Error for SendError<T> {}

/// Why a [`recv`](super::Receiver::recv) returned no value.
#[derive(Debug, PartialEq, Eq, Clone)]
pub enum RecvError {
    /// Every sender is gone, and this receiver has seen every value.
    Closed,
    /// The receiver fell behind: this many values were overwritten before it read
    /// them. The next receive returns the oldest value still kept.
    Lagged(u64),
}

impl fmt::Display for RecvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecvError::Closed => f.write_str("channel closed"),
            RecvError::Lagged(n) => write!(f, "channel lagged by {n}"),
        }
    }
}

impl std::error::Error for RecvError {}

/// Why a [`try_recv`](super::Receiver::try_recv) returned no value.
#[derive(Debug, PartialEq, Eq, Clone)]
pub enum TryRecvError {
    /// Nothing new now, and a sender could still send.
    Empty,
    /// Every sender is gone, and this receiver has seen every value.
    Closed,
    /// The receiver fell behind by this many values (as [`RecvError::Lagged`]).
    Lagged(u64),
}

impl fmt::Display for TryRecvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TryRecvError::Empty => f.write_str("channel empty"),
            TryRecvError::Closed => f.write_str("channel closed"),
            TryRecvError::Lagged(n) => write!(f, "channel lagged by {n}"),
        }
    }
}

impl std::error::Error for TryRecvError {}
