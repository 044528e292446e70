//! The poll a worker is in, as other threads read it, and the count of stalls: the
//! protocol of "A poll still running" in the module above, on `crate::loom`'s atomics so
//! that the same code is model-checked (`loom_*` below; under loom `lib.rs` builds this
//! file alone).
//!
//! # The running poll
//! A sequence word says where the worker is: `2n + 1` while in its poll (or stretch of a
//! poll, see `StallMonitor::interrupt_poll`) number `n`, `2n + 2` once that returned. The
//! worker fences (release), writes the poll's start and task id, then the odd word
//! (release); at the end, the even word (release). A reader loads the word (acquire); if
//! it is odd, it loads the id and the start, fences, and keeps them only if the word did
//! not move: the id and the start are then those of poll `n`, never a mix of two polls
//! (the next poll's are written only after the even word).
//!
//! # Counting a stall once, with its report
//! `claimed` holds a poll number and a bit: `n << 1` once someone saw poll `n` running
//! past the threshold, `n << 1 | 1` once it is counted. A reader that sees the poll
//! stuck marks it, then looks again: if the poll still runs, the worker has yet to reach
//! its end, where it looks at the mark and writes the report, and the reader counts it
//! (a compare-and-swap from marked to counted, which only one thread wins). If the poll
//! has ended meanwhile, the reader leaves the count to the worker, which looks at the
//! mark after its end and writes the report and counts then. A poll the worker itself
//! finds long at its end is reported, marked and counted by the worker. So no stall is
//! counted twice, and none is counted without its report but in one window: a reader's
//! mark that lands just as the worker's end leaves its store buffer (tens of
//! nanoseconds, which no preemption widens, since both sides' steps are adjacent
//! instructions).

use crate::loom::{fence, AtomicU64};
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};

/// A poll a reader saw running: its number, task and start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Running {
    pub(crate) poll: u64,
    pub(crate) task: u64,
    pub(crate) start: u64,
}

/// `claimed`'s bit: the marked poll is counted.
const COUNTED: u64 = 1;

/// One worker's poll, and the last of its polls seen (and counted) as a stall.
pub(crate) struct PollSlot {
    /// `2n + 1` while in poll `n`, `2n + 2` after it (2 before the first).
    seq: AtomicU64,
    /// The task of the poll (task ids start at 1).
    task: AtomicU64,
    /// The clock reading at the poll's start.
    start: AtomicU64,
    /// `n << 1` once poll `n` was seen stuck, `| COUNTED` once counted (see the module doc).
    claimed: AtomicU64,
}

impl PollSlot {
    pub(crate) fn new() -> PollSlot {
        PollSlot {
            seq: AtomicU64::new(2),
            task: AtomicU64::new(0),
            start: AtomicU64::new(0),
            claimed: AtomicU64::new(0),
        }
    }

    /// The worker: a poll of task `id` begins at clock reading `start`. Returns its
    /// number (1 and up, one more than the last's).
    #[inline(always)]
    pub(crate) fn begin(&self, id: u64, start: u64) -> u64 {
        let s = self.seq.load(Relaxed);
        debug_assert!(s & 1 == 0, "a poll begins while another runs");
        // A reader that sees the stores below sees the last poll's end too, and so does
        // not take them for that poll's (no instruction on x86).
        fence(Release);
        self.start.store(start, Relaxed);
        self.task.store(id, Relaxed);
        self.seq.store(s | 1, Release);
        s / 2
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

    /// Any thread: mark poll `poll` as seen stuck (unless a later poll was). True if it
    /// is marked now (by this call or an earlier one).
    pub(crate) fn mark(&self, poll: u64) -> bool {
        let mut cur = self.claimed.load(Relaxed);
        while cur >> 1 < poll {
            match self.claimed.compare_exchange_weak(cur, poll << 1, AcqRel, Relaxed) {
                Ok(_) => return true,
                Err(now) => cur = now,
            }
        }
        cur >> 1 == poll
    }

    /// Any thread: count poll `poll`, which is marked. True for the one caller that
    /// counts it.
    pub(crate) fn count(&self, poll: u64) -> bool {
        self.claimed.compare_exchange(poll << 1, poll << 1 | COUNTED, AcqRel, Relaxed).is_ok()
    }

    /// A reader that saw poll `poll` stuck: mark it, and count it if the worker is still
    /// in it (else the worker counts it at its end). True if this call counted it.
    pub(crate) fn claim_running(&self, poll: u64) -> bool {
        self.mark(poll) && self.running().is_some_and(|r| r.poll == poll) && self.count(poll)
    }

    /// Whether poll `poll` was marked (seen stuck), counted or not.
    #[inline(always)]
    pub(crate) fn is_marked(&self, poll: u64) -> bool {
        self.claimed.load(Acquire) >> 1 == poll
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
            let reader = {
                let slot = Arc::clone(&slot);
                thread::spawn(move || slot.running())
            };
            assert_eq!(slot.begin(7, 100), 1);
            slot.end();
            assert_eq!(slot.begin(8, 200), 2);
            slot.end();
            if let Some(r) = reader.join().unwrap() {
                let whole = [Running { poll: 1, task: 7, start: 100 }, Running { poll: 2, task: 8, start: 200 }];
                assert!(whole.contains(&r), "{r:?}");
            }
            assert_eq!(slot.running(), None, "no poll runs once the worker is done");
        });
    }

    /// A reader that sees the worker's poll stuck and the worker ending it count it at
    /// most once between them; a poll the worker finds long itself is counted once
    /// whatever a reader does.
    #[test]
    fn loom_a_stall_is_counted_at_most_once() {
        model(|| {
            let slot = Arc::new(PollSlot::new());
            let reader = {
                let slot = Arc::clone(&slot);
                thread::spawn(move || slot.running().is_some_and(|r| slot.claim_running(r.poll)) as u32)
            };
            let p = slot.begin(7, 100);
            slot.end();
            // The worker's end: a marked poll is reported and counted here.
            let here = (slot.is_marked(p) && slot.count(p)) as u32;
            assert!(here + reader.join().unwrap() <= 1);
        });
    }

    /// Two readers and the worker, which finds the poll long: counted exactly once.
    #[test]
    fn loom_a_long_poll_is_counted_once() {
        model(|| {
            let slot = Arc::new(PollSlot::new());
            let p = slot.begin(7, 100);
            let reader = {
                let slot = Arc::clone(&slot);
                thread::spawn(move || slot.running().is_some_and(|r| slot.claim_running(r.poll)) as u32)
            };
            slot.end();
            let here = (slot.mark(p) && slot.count(p)) as u32;
            assert_eq!(here + reader.join().unwrap(), 1);
        });
    }
}
