//! The poll a worker is in, as other threads read it, and the count of stalls: the
//! protocol of "A poll still running" in the module above, on `crate::loom`'s atomics so
//! that the same code is model-checked (`loom_*` below; under loom `lib.rs` builds this
//! file alone).
//!
//! The worker writes a poll's start, then its task id (release), then its poll count
//! (release); at the poll's end it sets the id to 0 (release). A reader loads the count
//! (acquire), the id (acquire) and the start, fences, and keeps them only if the count
//! did not move: then the id and start are those of the poll the count numbers, and an
//! id other than 0 brings the start stored before it, never an older poll's.

use crate::loom::{fence, AtomicU64};
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};

/// A poll a reader saw running: its number, task and start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Running {
    pub(crate) poll: u64,
    pub(crate) task: u64,
    pub(crate) start: u64,
}

/// One worker's poll, and the last of its polls counted as a stall.
pub(crate) struct PollSlot {
    /// The task being polled (0: none; task ids start at 1).
    task: AtomicU64,
    /// The clock reading at the poll's start.
    start: AtomicU64,
    /// The last poll number counted as a stall.
    claimed: AtomicU64,
}

impl PollSlot {
    pub(crate) fn new() -> PollSlot {
        PollSlot { task: AtomicU64::new(0), start: AtomicU64::new(0), claimed: AtomicU64::new(0) }
    }

    /// The worker: a poll of task `id` begins at clock reading `start`; `polls`, its poll
    /// count, is advanced here and numbers the poll.
    #[inline(always)]
    pub(crate) fn begin(&self, id: u64, start: u64, polls: &AtomicU64) {
        self.start.store(start, Relaxed);
        self.task.store(id, Release);
        polls.store(polls.load(Relaxed).wrapping_add(1), Release);
    }

    /// The worker: the poll returned.
    #[inline(always)]
    pub(crate) fn end(&self) {
        self.task.store(0, Release);
    }

    /// The worker (or its signal handler, which runs on its thread between two of its
    /// instructions): the task of the poll running now (0: none) and its start.
    #[inline]
    pub(crate) fn own(&self) -> (u64, u64) {
        (self.task.load(Acquire), self.start.load(Relaxed))
    }

    /// Any thread: the poll the worker is in now, if it is in one.
    pub(crate) fn running(&self, polls: &AtomicU64) -> Option<Running> {
        let poll = polls.load(Acquire);
        let task = self.task.load(Acquire);
        let start = self.start.load(Relaxed);
        fence(Acquire);
        (task != 0 && polls.load(Relaxed) == poll).then_some(Running { poll, task, start })
    }

    /// Any thread: count poll `poll` as a stall, unless it (or a later poll) was counted
    /// already. True for the one caller that counts it.
    pub(crate) fn claim(&self, poll: u64) -> bool {
        let mut cur = self.claimed.load(Relaxed);
        while cur < poll {
            match self.claimed.compare_exchange_weak(cur, poll, AcqRel, Relaxed) {
                Ok(_) => return true,
                Err(now) => cur = now,
            }
        }
        false
    }

    /// Whether poll `poll` was counted as a stall.
    pub(crate) fn is_claimed(&self, poll: u64) -> bool {
        self.claimed.load(Acquire) == poll
    }
}

#[cfg(all(loom, test))]
mod loom_tests {
    use super::*;
    use crate::loom::{thread, Arc};
    use crate::loom_tests::model;

    /// A reader never pairs a poll's number or id with another poll's start: whatever it
    /// sees running is one of the polls the worker made, whole.
    #[test]
    fn loom_a_running_poll_is_read_whole() {
        model(|| {
            let slot = Arc::new(PollSlot::new());
            let polls = Arc::new(AtomicU64::new(0));
            let w = {
                let (slot, polls) = (Arc::clone(&slot), Arc::clone(&polls));
                thread::spawn(move || {
                    slot.begin(7, 100, &polls);
                    slot.end();
                    slot.begin(8, 200, &polls);
                    slot.end();
                })
            };
            if let Some(r) = slot.running(&polls) {
                assert!(
                    r == Running { poll: 1, task: 7, start: 100 } || r == Running { poll: 2, task: 8, start: 200 },
                    "{r:?}"
                );
            }
            w.join().unwrap();
            assert_eq!(slot.running(&polls), None, "no poll runs once the worker is done");
        });
    }

    /// Two threads that see the same poll stuck (a reader and the worker at its end)
    /// count it once between them.
    #[test]
    fn loom_a_poll_is_counted_once() {
        model(|| {
            let slot = Arc::new(PollSlot::new());
            let other = {
                let slot = Arc::clone(&slot);
                thread::spawn(move || slot.claim(3) as u32)
            };
            let here = slot.claim(3) as u32;
            assert_eq!(here + other.join().unwrap(), 1);
            assert!(slot.is_claimed(3) && !slot.claim(2));
        });
    }
}
