//! [`StackBuf`]: the buffer a stuck worker's signal handler writes its stack into, and
//! readers copy it out of.

use super::{MAX_FRAMES, WALK_FRAMES};
use std::sync::atomic::Ordering::{Acquire, Relaxed};
use std::sync::atomic::{fence, AtomicU64, AtomicUsize};

/// `StackBuf::poll` while the handler writes the buffer.
pub(super) const WRITING: u64 = u64::MAX;

/// A stuck worker's stack, as its own signal handler took it: written on the worker's
/// thread only, read by any (a sequence lock on `poll`, which is [`WRITING`] while the
/// handler writes and the poll's number once done).
pub(crate) struct StackBuf {
    pub(super) poll: AtomicU64,
    pub(super) taken_at: AtomicU64,
    /// The frame the signal interrupted, and the frames stored.
    pub(super) from: AtomicUsize,
    pub(super) len: AtomicUsize,
    pub(super) ips: [AtomicUsize; WALK_FRAMES],
}

impl StackBuf {
    pub(super) fn new() -> StackBuf {
        StackBuf {
            poll: AtomicU64::new(0),
            taken_at: AtomicU64::new(0),
            from: AtomicUsize::new(0),
            len: AtomicUsize::new(0),
            ips: [const { AtomicUsize::new(0) }; WALK_FRAMES],
        }
    }

    /// The stack of poll `poll`, if the buffer holds it: its report's addresses (from the
    /// interrupted frame outwards) and when it was taken.
    pub(super) fn read(&self, poll: u64, out: &mut [usize; MAX_FRAMES]) -> Option<(usize, u64)> {
        if poll == 0 || self.poll.load(Acquire) != poll {
            return None;
        }
        let len = self.len.load(Relaxed).min(WALK_FRAMES);
        let from = self.from.load(Relaxed).min(len);
        let n = (len - from).min(MAX_FRAMES);
        for (o, ip) in out.iter_mut().zip(&self.ips[from..from + n]) {
            *o = ip.load(Relaxed);
        }
        let at = self.taken_at.load(Relaxed);
        fence(Acquire);
        (self.poll.load(Relaxed) == poll).then_some((n, at))
    }
}
