//! The io_uring reactor's wake latch (`reactor/uring.rs`): a wake is a `NOP` whose
//! completion ends the holder's wait, and the latch keeps at most one in flight.
//!
//! A waker posts a `NOP` only if it finds the latch open, closing it; the holder opens it
//! again as it reaps the `NOP`'s completion, with a read-modify-write. A waker that finds
//! the latch closed either comes before that reap (its wake is the completion still to be
//! read, which ends the holder's next wait at once) or between the reap and the reopening,
//! and then the reopening reads its write, so the holder sees whatever it did before
//! waking (queued a task, armed a timer) once the reap is over. `wake_latch_loom.rs`
//! checks that no wake is lost.

use crate::loom::AtomicBool;
use std::sync::atomic::Ordering::AcqRel;

pub(crate) struct WakeLatch(AtomicBool);

impl WakeLatch {
    pub(crate) fn new() -> WakeLatch {
        WakeLatch(AtomicBool::new(false))
    }

    /// A waker's turn: whether it must post a wake (none is in flight).
    pub(crate) fn close(&self) -> bool {
        !self.0.swap(true, AcqRel)
    }

    /// The holder reaped a wake's completion: the next waker posts another.
    pub(crate) fn reopen(&self) {
        self.0.swap(false, AcqRel);
    }

    #[cfg(all(test, not(loom)))]
    pub(crate) fn is_closed(&self) -> bool {
        self.0.load(std::sync::atomic::Ordering::SeqCst)
    }
}
