//! The poll a worker is in, as other threads read it, and the count of stalls: the
//! protocol of "A poll still running" in the module above, on `crate::loom`'s atomics so
//! that the same code is model-checked (`loom_*` below; under loom `lib.rs` builds this
//! file alone).
//!
//! A sequence word says where the worker is: `2n + 1` while in its poll number `n`,
//! `2n + 2` once that poll returned. The worker fences (release), writes a poll's start
//! and task id, then the odd word (release); at the end, the even word (release). A reader loads the word
//! (acquire); if it is odd, it loads the id and the start, fences, and keeps them only if
//! the word did not move: the id and the start are then those of poll `n`, never a mix
//! of two polls (the next poll's are written only after the even word).

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
    /// `2n + 1` while in poll `n`, `2n + 2` after it (0: no poll yet).
    seq: AtomicU64,
    /// The task of the poll (task ids start at 1).
    task: AtomicU64,
    /// The clock reading at the poll's start.
    start: AtomicU64,
    /// The last poll number counted as a stall.
    claimed: AtomicU64,
}

impl PollSlot {
    pub(crate) fn new() -> PollSlot {
        PollSlot {
            seq: AtomicU64::new(0),
            task: AtomicU64::new(0),
            start: AtomicU64::new(0),
            claimed: AtomicU64::new(0),
        }
    }

    /// The worker: its poll number `poll` (1 and up) of task `id` begins at clock reading
    /// `start`.
    #[inline(always)]
    pub(crate) fn begin(&self, poll: u64, id: u64, start: u64) {
        // A reader that sees the stores below sees the last poll's end too, and so does
        // not take them for that poll's (no instruction on x86).
        fence(Release);
        self.start.store(start, Relaxed);
        self.task.store(id, Relaxed);
        self.seq.store(2 * poll + 1, Release);
    }

    /// The worker: the poll returned.
    #[inline(always)]
    pub(crate) fn end(&self) {
        let s = self.seq.load(Relaxed);
        self.seq.store(s + (s & 1), Release);
    }

    /// The worker (or its signal handler, which runs on its thread between two of its
    /// instructions, and so sees its stores in their order): the poll running now.
    #[inline]
    pub(crate) fn own(&self) -> Option<Running> {
        let s = self.seq.load(Acquire);
        (s & 1 == 1).then(|| Running { poll: s / 2, task: self.task.load(Relaxed), start: self.start.load(Relaxed) })
    }

    /// Any thread: the poll the worker is in now, if it is in one.
    pub(crate) fn running(&self) -> Option<Running> {
        let s = self.seq.load(Acquire);
        if s & 1 == 0 {
            return None;
        }
        let task = self.task.load(Relaxed);
        let start = self.start.load(Relaxed);
        fence(Acquire);
        (self.seq.load(Relaxed) == s).then_some(Running { poll: s / 2, task, start })
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
            let w = {
                let slot = Arc::clone(&slot);
                thread::spawn(move || {
                    slot.begin(1, 7, 100);
                    slot.end();
                    slot.begin(2, 8, 200);
                    slot.end();
                })
            };
            if let Some(r) = slot.running() {
                let whole = [Running { poll: 1, task: 7, start: 100 }, Running { poll: 2, task: 8, start: 200 }];
                assert!(whole.contains(&r), "{r:?}");
            }
            w.join().unwrap();
            assert_eq!(slot.running(), None, "no poll runs once the worker is done");
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
