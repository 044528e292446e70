//! The idle state: who is searching, who is parked, and the "last searcher must notify"
//! protocol that keeps queued work from being stranded while every worker sleeps.
//!
//! `num_searching` counts workers looking for work; `parked_bitmap` has bit `i` set while
//! worker `i` is parked, and its popcount is the parked gauge readers see. (A separate
//! counter, raised after the bit was set, could be lowered first by a producer claiming
//! the bit, and read as four billion parked workers for a moment.)
//!
//! # Protocol
//! 1. **Enqueue.** After pushing work, a producer calls [`Idle::notify_parked`]. It issues a
//!    SeqCst fence, and if nobody is searching and some worker is parked it claims one
//!    searcher slot (CAS `num_searching` 0 -> 1, so concurrent producers wake one worker,
//!    not a herd), claims the lowest parked bit with `ctz`, and unparks that worker, which
//!    wakes as a searcher. If somebody is already searching, it does nothing: rule 3 below
//!    guarantees a searcher will see the work.
//! 2. **Searcher finds work.** [`Idle::transition_worker_from_searching`] decrements
//!    `num_searching`; the **last searcher** (the decrement reached zero) calls
//!    `notify_parked`, so the chain of searchers continues while work remains.
//! 3. **Searcher parks.** [`Idle::transition_worker_to_parked`] sets the worker's bit and
//!    decrements `num_searching` (SeqCst), then fences. If this worker was the last searcher
//!    (or, more generally, nobody is searching now) it must re-check every queue *after*
//!    that point (the worker does it) and cancel the park if it sees work. A producer either saw `num_searching > 0` before that decrement
//!    (and the re-check sees its push), or sees the bit and wakes the worker: the fences
//!    on both sides make the two orders the only ones.
//! 4. **Limit.** [`Idle::transition_worker_to_searching`] refuses when
//!    `2 * num_searching >= num_workers`: at most about half the workers search at once.
//! 5. **Wake reason.** A woken worker calls [`Idle::unpark_self`]. If its bit was still set
//!    it clears it itself (timeout, or a targeted unpark such as a join waker) and is not
//!    a searcher; if a producer had cleared it, the producer counted it as a searcher.
//! 6. **Batches.** A worker that queues a batch of tasks on itself (the driver's wakes)
//!    holds rule 1 back while it pushes, then calls [`Idle::notify_after_batch`] once with
//!    the number of tasks it has queued: rule 1 runs if that is more than one and the
//!    worker is not searching. The worker runs one task itself; any other is in its ring,
//!    so it is the work rule 1's wake exists for. Its push came before the call, so the
//!    fence pairing of rule 3 still holds.
//! 7. **The watch.** A parked worker sleeps with no timeout, except the **watcher**: while
//!    some worker is not parked (it may be inside a long poll, with a task in its LIFO slot
//!    that nobody is woken for, or away from a driver nobody else holds), one parked worker
//!    keeps a timeout to look again. A parking worker checks [`Idle::all_parked`] after
//!    rule 3; if another worker is still out, it tries [`Idle::claim_watch`] (one CAS on
//!    `watcher`: at most one watcher at a time). A watcher gives the role back
//!    ([`Idle::release_watch`]) as soon as it wakes and claims it again at its next park if
//!    a worker is still out. When every worker is parked nobody claims it, so an idle
//!    runtime has no timer at all (the driver holder sleeps until the next timer, if any).
//!    A worker that fills its LIFO slot checks [`Idle::watch_missing`] (nobody watching while
//!    some worker is parked) and then runs rule 1, so the woken worker parks again as the
//!    watcher. The window between a watcher's release and its next claim needs no more:
//!    the watcher looks at every LIFO slot after its release, before it parks again.
//!    A worker whose thread has not started yet counts as parked for the watch
//!    ([`Idle::expect_starts`], [`Idle::worker_started`]): it holds no task and runs no
//!    poll, so there is nothing to watch it for. Counted as out, it gave a fresh runtime's
//!    first worker to park the watch, which woke 10 ms later to find nothing and parked
//!    again: two parks where Tokio's workers make one
//!    (`RuntimeMetrics::worker_park_unpark_count`). It is not in the parked bitmap, so no
//!    producer claims it: it searches every queue as it starts anyway.
//! 8. **Who to wake.** Rule 1 prefers a worker that is not parked in the reactor
//!    (`in_reactor`): the reactor's holder keeps firing timers and collecting I/O while the
//!    one woken runs the work, which matters when that work turns into a long poll.
//!
//! The bitmap is one `u64`, so `Builder::build` refuses more than 64 workers.

use crate::loom::{fence, AtomicU32, AtomicU64};
use std::sync::atomic::Ordering::{Relaxed, SeqCst};

/// The most workers one runtime may have (one bit each in `parked_bitmap`).
pub(crate) const MAX_WORKERS: usize = 64;

/// `watcher` when no worker holds the watch (rule 7).
const NO_WATCHER: u32 = u32::MAX;

pub(crate) struct Idle {
    num_searching: AtomicU32,
    parked_bitmap: AtomicU64,
    /// The parked worker that keeps a timeout while another worker is out (rule 7).
    watcher: AtomicU32,
    /// The bit of the worker parked in the reactor, if any (rule 8).
    in_reactor: AtomicU64,
    /// Workers whose thread has not started yet (rule 7).
    unstarted: AtomicU64,
    num_workers: u32,
}

impl Idle {
    pub(crate) fn new(num_workers: usize) -> Idle {
        assert!(num_workers <= MAX_WORKERS && num_workers > 0);
        Idle {
            num_searching: AtomicU32::new(0),
            parked_bitmap: AtomicU64::new(0),
            watcher: AtomicU32::new(NO_WATCHER),
            in_reactor: AtomicU64::new(0),
            unstarted: AtomicU64::new(0),
            num_workers: num_workers as u32,
        }
    }

    /// Rule 7: every worker's thread is about to be started; until each says it has
    /// ([`worker_started`](Self::worker_started)), it counts as parked for the watch.
    pub(crate) fn expect_starts(&self) {
        self.unstarted.store(self.all_workers_mask(), SeqCst);
    }

    /// Rule 7: worker `index`'s thread runs it now (again, after a hand-off: no change).
    ///
    /// The fence: a worker parking sets its bit and then reads `unstarted` (both
    /// sequentially consistent); if it still saw this worker unstarted (and so slept
    /// without the watch), this worker's later reads of the bitmap
    /// (`watch_missing`, a relaxed load) see that bit, and its first slot-only push wakes
    /// the sleeper (`loom_watch_a_lifo_push_by_a_worker_just_started_wakes_a_worker`
    /// deadlocks without the fence).
    pub(crate) fn worker_started(&self, index: usize) {
        self.unstarted.fetch_and(!(1u64 << index), SeqCst);
        fence(SeqCst);
    }

    fn all_workers_mask(&self) -> u64 {
        u64::MAX >> (64 - self.num_workers)
    }

    /// Rule 7: after `transition_worker_to_parked`, whether every worker is parked or not
    /// started yet (none is running, so nothing can get stuck and nobody needs to watch).
    pub(crate) fn all_parked(&self) -> bool {
        (self.parked_bitmap.load(SeqCst) | self.unstarted.load(SeqCst)) == self.all_workers_mask()
    }

    /// Rule 7: become the watcher unless another worker is one. True if `index` holds it.
    pub(crate) fn claim_watch(&self, index: usize) -> bool {
        let me = index as u32;
        match self.watcher.compare_exchange(NO_WATCHER, me, SeqCst, SeqCst) {
            Ok(_) => true,
            Err(holder) => holder == me,
        }
    }

    /// Rule 7: the watcher woke; give the role back (a no-op for anyone else).
    pub(crate) fn release_watch(&self, index: usize) {
        let _ = self.watcher.compare_exchange(index as u32, NO_WATCHER, SeqCst, SeqCst);
    }

    /// Rule 7: nobody watches while some worker is parked, so a task left in a LIFO slot
    /// now would go unseen if its owner's poll turned long. Two loads of lines that change
    /// only when workers park.
    #[inline]
    pub(crate) fn watch_missing(&self) -> bool {
        self.watcher.load(SeqCst) == NO_WATCHER && self.parked_bitmap.load(Relaxed) != 0
    }

    /// Rule 8: worker `index` is about to park in the reactor (`true`) or has left it.
    pub(crate) fn set_in_reactor(&self, index: usize, parked: bool) {
        self.in_reactor.store(if parked { 1 << index } else { 0 }, Relaxed);
    }

    /// Rule 4: become a searcher unless about half the workers already are.
    pub(crate) fn transition_worker_to_searching(&self) -> bool {
        let n = self.num_searching.load(SeqCst);
        if 2 * n >= self.num_workers {
            return false;
        }
        self.num_searching.fetch_add(1, SeqCst);
        true
    }

    /// Rule 2: a searcher found work. Returns true if it was the last searcher: the
    /// caller must then call `notify_parked`.
    #[must_use]
    pub(crate) fn transition_worker_from_searching(&self) -> bool {
        self.num_searching.fetch_sub(1, SeqCst) == 1
    }

    /// Rule 3: mark worker `index` parked. Returns true if it was the last searcher, in
    /// which case it must re-check every queue before sleeping.
    #[must_use]
    pub(crate) fn transition_worker_to_parked(&self, index: usize, is_searching: bool) -> bool {
        self.parked_bitmap.fetch_or(1 << index, SeqCst);
        let last = is_searching && self.num_searching.fetch_sub(1, SeqCst) == 1;
        fence(SeqCst);
        last
    }

    /// Rule 5: a parked worker woke (or cancelled its park). Returns true if it removed
    /// its own bit (not a searcher); false if a producer claimed it (now a searcher).
    #[must_use]
    pub(crate) fn unpark_self(&self, index: usize) -> bool {
        let bit = 1u64 << index;
        let prev = self.parked_bitmap.fetch_and(!bit, SeqCst);
        prev & bit != 0
    }

    /// Rule 1: wake one parked worker if nobody is searching. `unpark(i)` wakes worker i.
    ///
    /// Every spawn and wake on a worker comes here, and nearly always a worker searches
    /// already or none is parked: that check is inlined into the caller, the rest is not.
    #[inline(always)]
    pub(crate) fn notify_parked(&self, unpark: impl Fn(usize)) {
        fence(SeqCst);
        if self.nobody_to_notify() {
            return;
        }
        self.notify_parked_slow(unpark);
    }

    #[inline(always)]
    fn nobody_to_notify(&self) -> bool {
        self.num_searching.load(SeqCst) != 0 || self.parked_bitmap.load(SeqCst) == 0
    }

    /// `notify_parked` once its first check found a parked worker and no searcher.
    #[inline(never)]
    fn notify_parked_slow(&self, unpark: impl Fn(usize)) {
        loop {
            // Claim the searcher slot for the worker we are about to wake.
            if self.num_searching.compare_exchange(0, 1, SeqCst, SeqCst).is_err() {
                return;
            }
            let mut bitmap = self.parked_bitmap.load(SeqCst);
            while bitmap != 0 {
                // Rule 8: leave the reactor's holder asleep if anyone else is parked.
                let others = bitmap & !self.in_reactor.load(Relaxed);
                let index = if others != 0 { others } else { bitmap }.trailing_zeros() as usize;
                match self.parked_bitmap.compare_exchange(bitmap, bitmap & !(1 << index), SeqCst, SeqCst) {
                    Ok(_) => {
                        unpark(index);
                        return;
                    }
                    Err(actual) => bitmap = actual,
                }
            }
            // Every parked worker woke by itself meanwhile. Give the slot back; if that
            // makes us the last searcher and somebody parked in between (seeing our slot,
            // so skipping its re-check), go round again and wake them.
            if self.num_searching.fetch_sub(1, SeqCst) != 1 {
                return;
            }
            fence(SeqCst);
            if self.nobody_to_notify() {
                return;
            }
        }
    }

    /// Rule 6: after queueing a batch on itself with rule 1 held back, a worker that now
    /// has `queued_here` tasks (its LIFO slot and ring) wakes one parked worker if more
    /// than one waits and it is not searching itself.
    pub(crate) fn notify_after_batch(&self, queued_here: u32, is_searching: bool, unpark: impl Fn(usize)) {
        if queued_here > 1 && !is_searching {
            self.notify_parked(unpark);
        }
    }

    /// `num_searching` as the pre-sleep re-check reads it (after the fence in
    /// `transition_worker_to_parked`).
    pub(crate) fn num_searching_seqcst(&self) -> u32 {
        self.num_searching.load(SeqCst)
    }

    pub(crate) fn num_searching(&self) -> u32 {
        self.num_searching.load(Relaxed)
    }

    /// How many workers are parked (the snapshot reads the bitmap itself, once).
    #[cfg(any(test, loom))]
    pub(crate) fn num_parked(&self) -> u32 {
        self.parked_bitmap.load(Relaxed).count_ones()
    }

    pub(crate) fn parked_bitmap(&self) -> u64 {
        self.parked_bitmap.load(Relaxed)
    }

    /// The worker holding the watch (rule 7), if any.
    #[cfg(test)]
    pub(crate) fn watcher(&self) -> Option<usize> {
        let w = self.watcher.load(Relaxed);
        (w != NO_WATCHER).then_some(w as usize)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::cell::RefCell;

    #[test]
    fn notify_wakes_lowest_parked_worker_as_searcher() {
        let idle = Idle::new(4);
        assert!(!idle.transition_worker_to_parked(2, false));
        assert!(!idle.transition_worker_to_parked(1, false));
        let woken = RefCell::new(vec![]);
        idle.notify_parked(|i| woken.borrow_mut().push(i));
        assert_eq!(*woken.borrow(), vec![1]);
        assert_eq!(idle.num_searching(), 1);
        assert_eq!(idle.parked_bitmap(), 1 << 2);
        // A second notify sees a searcher and wakes nobody.
        idle.notify_parked(|i| woken.borrow_mut().push(i));
        assert_eq!(woken.borrow().len(), 1);
        // Worker 1 was claimed, so it is a searcher.
        assert!(!idle.unpark_self(1));
        assert!(idle.transition_worker_from_searching(), "it was the last searcher");
    }

    #[test]
    fn a_batch_wakes_one_parked_worker_only_when_more_than_one_task_waits() {
        let idle = Idle::new(3);
        assert!(!idle.transition_worker_to_parked(1, false));
        assert!(!idle.transition_worker_to_parked(2, false));
        let woken = RefCell::new(vec![]);
        // One task: its owner runs it next.
        idle.notify_after_batch(1, false, |i| woken.borrow_mut().push(i));
        assert!(woken.borrow().is_empty());
        // A searching owner leaves the wake to the last searcher's rule.
        idle.notify_after_batch(5, true, |i| woken.borrow_mut().push(i));
        assert!(woken.borrow().is_empty());
        // Two or more: one parked worker, claimed as a searcher.
        idle.notify_after_batch(2, false, |i| woken.borrow_mut().push(i));
        assert_eq!(*woken.borrow(), vec![1]);
        assert_eq!(idle.num_searching(), 1);
        assert_eq!(idle.parked_bitmap(), 1 << 2);
    }

    #[test]
    fn searcher_limit_is_half() {
        let idle = Idle::new(4);
        assert!(idle.transition_worker_to_searching());
        assert!(idle.transition_worker_to_searching());
        assert!(!idle.transition_worker_to_searching());
        assert_eq!(idle.num_searching(), 2);
    }

    #[test]
    fn timeout_wake_clears_own_bit() {
        let idle = Idle::new(2);
        assert!(!idle.transition_worker_to_parked(0, false));
        assert_eq!(idle.num_parked(), 1);
        assert!(idle.unpark_self(0));
        assert_eq!(idle.num_parked(), 0);
        assert_eq!(idle.parked_bitmap(), 0);
    }

    #[test]
    fn the_watch_is_claimed_by_one_worker_while_another_runs_and_by_nobody_when_all_park() {
        let idle = Idle::new(3);
        // Worker 0 parks while 1 and 2 run: it becomes the watcher; worker 1 can't.
        assert!(!idle.transition_worker_to_parked(0, false));
        assert!(!idle.all_parked());
        assert!(idle.claim_watch(0));
        assert!(idle.claim_watch(0), "claiming again keeps it");
        assert!(!idle.transition_worker_to_parked(1, false));
        assert!(!idle.claim_watch(1));
        assert!(!idle.watch_missing());
        // The watcher wakes and gives it back: with workers parked, it is missing.
        assert!(idle.unpark_self(0));
        idle.release_watch(0);
        idle.release_watch(1); // not the holder: no effect
        assert_eq!(idle.watcher(), None);
        assert!(idle.watch_missing());
        // Everyone parked: nobody needs to claim it.
        assert!(!idle.transition_worker_to_parked(0, false));
        assert!(!idle.transition_worker_to_parked(2, false));
        assert!(idle.all_parked());
    }

    /// A worker not started yet needs no watch, and no producer claims it.
    #[test]
    fn workers_not_started_count_as_parked_for_the_watch_only() {
        let idle = Idle::new(2);
        idle.expect_starts();
        idle.worker_started(0);
        assert!(!idle.transition_worker_to_parked(0, false));
        assert!(idle.all_parked(), "worker 1 has not started: nothing to watch");
        let woken = RefCell::new(vec![]);
        idle.notify_parked(|i| woken.borrow_mut().push(i));
        assert_eq!(*woken.borrow(), vec![0], "the parked worker is woken, not the one starting");
        assert!(!idle.unpark_self(0));
        assert!(idle.transition_worker_from_searching());
        assert!(!idle.transition_worker_to_parked(0, false));
        idle.worker_started(1);
        assert!(!idle.all_parked(), "worker 1 runs now");
        idle.worker_started(1);
        assert!(!idle.transition_worker_to_parked(1, false));
        assert!(idle.all_parked());
    }

    #[test]
    fn notify_leaves_the_reactor_holder_asleep_when_another_worker_is_parked() {
        let idle = Idle::new(3);
        assert!(!idle.transition_worker_to_parked(0, false));
        assert!(!idle.transition_worker_to_parked(2, false));
        idle.set_in_reactor(0, true);
        let woken = RefCell::new(vec![]);
        idle.notify_parked(|i| woken.borrow_mut().push(i));
        assert_eq!(*woken.borrow(), vec![2]);
        // Only the reactor's holder is left: it is woken.
        assert!(idle.transition_worker_from_searching());
        idle.notify_parked(|i| woken.borrow_mut().push(i));
        assert_eq!(*woken.borrow(), vec![2, 0]);
    }
}
