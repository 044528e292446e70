//! The per-worker local queue: `WorkStealQueue`, a 256-slot Chase-Lev style ring with a
//! packed dual head, so a steal can claim, copy and release in three steps without a lock.
//!
//! ```text
//! head: AtomicU64 = [ steal_head: u32 | real_head: u32 ]     tail: AtomicU32 (owner writes)
//! ```
//!
//! * `real_head` is where the owner pops (FIFO) and where a steal claims from.
//! * `steal_head` trails `real_head` while a steal is copying; the slots
//!   `[steal_head, real_head)` belong to that stealer, so the owner must not overwrite them:
//!   a push has room while `tail - steal_head < CAPACITY`.
//!
//! The halves are 32 bits, not 16. With 16-bit indices a stealer that stalls between
//! loading the head and its CAS can see the head wrap all the way round (65,536 pushes)
//! and succeed with a stale value, the ABA of Tokio #5041. With 32-bit halves the wrap
//! takes 2^32 operations, which a stalled thread cannot plausibly span.
//!
//! Operations:
//! * [`WorkStealQueue::push_back_or_overflow`] (owner): store the slot, publish with a Release
//!   store of `tail`. If full and no steal is running, CAS both heads forward by 128 and
//!   move those 128 tasks plus the new one to the global queue under one lock. If a steal
//!   is running, send just the new task to the global queue.
//! * [`WorkStealQueue::pop`] (owner): CAS `real_head` forward (and `steal_head` with it when no
//!   steal is running), then read the slot.
//! * [`WorkStealQueue::steal_into`] (any thread, into its own queue) in three phases:
//!   1. **claim**: CAS `real_head` forward by half of what is there (at most 128),
//!      leaving `steal_head`; this also fails if another steal is running, so at most one
//!      steal per victim runs at a time;
//!   2. **copy** the claimed slots into the stealer's own ring;
//!   3. **release**: CAS `steal_head` up to `real_head`, retrying until it succeeds.
//!      (Abandoning the steal when this CAS fails would leave the victim's head stuck in
//!      "steal running" and the copied tasks queued twice. Retrying is correct: only the
//!      owner's pops can move the head meanwhile, and they never touch `steal_head`.)
//!
//! Slots are `AtomicPtr`s accessed with Relaxed ordering; the Release store of `tail` and
//! the Acquire loads of `tail`/`head` carry the happens-before: a reader that sees a
//! `tail` or `head` value also sees every slot written before it was published.

use crate::loom::{AtomicPtr, AtomicU32, AtomicU64};
use crate::padded::CachePadded;
use crate::task::header::Header;
use crate::task::notified::Notified;
use std::marker::PhantomData;
use std::ptr::{self, NonNull};
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};

use super::inject::{Batch, Inject};

/// Slots per local queue (4 under loom, so overflow is reachable in a model).
#[cfg(not(loom))]
pub(crate) const CAPACITY: u32 = 256;
#[cfg(loom)]
pub(crate) const CAPACITY: u32 = 4;
const MASK: u32 = CAPACITY - 1;
/// Tasks moved to the global queue by one overflow, and the most one steal takes.
pub(crate) const HALF: u32 = CAPACITY / 2;

fn pack(steal: u32, real: u32) -> u64 {
    ((steal as u64) << 32) | real as u64
}

fn unpack(v: u64) -> (u32, u32) {
    ((v >> 32) as u32, v as u32)
}

/// What a push did, for the `overflows` counter.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Pushed {
    /// Stored in the ring.
    Local,
    /// The ring was full: half of it (plus the task) went to the global queue.
    Overflowed,
    /// The ring was full while a steal ran: the task alone went to the global queue.
    ToGlobal,
}

pub(crate) struct WorkStealQueue<S: 'static> {
    head: CachePadded<AtomicU64>,
    tail: CachePadded<AtomicU32>,
    buffer: CachePadded<Box<[AtomicPtr<Header>]>>,
    _scheduler: PhantomData<S>,
}

impl<S: 'static> WorkStealQueue<S> {
    pub(crate) fn new() -> WorkStealQueue<S> {
        let buffer = (0..CAPACITY).map(|_| AtomicPtr::new(ptr::null_mut())).collect();
        WorkStealQueue {
            head: CachePadded(AtomicU64::new(0)),
            tail: CachePadded(AtomicU32::new(0)),
            buffer: CachePadded(buffer),
            _scheduler: PhantomData,
        }
    }

    /// Tasks in the ring (a telemetry reading from any thread; may be slightly stale).
    pub(crate) fn len(&self) -> u32 {
        let (_, real) = unpack(self.head.0.load(Acquire));
        let tail = self.tail.0.load(Acquire);
        tail.wrapping_sub(real).min(CAPACITY)
    }

    /// Whether there is anything a stealer could take.
    pub(crate) fn is_stealable(&self) -> bool {
        let (_, real) = unpack(self.head.0.load(Acquire));
        self.tail.0.load(Acquire) != real
    }

    /// Owner only: push to the back; on overflow, move half to `inject`. Returns what
    /// happened. If `inject` is closed (shutdown), refused entries are dropped.
    pub(crate) fn push_back_or_overflow(&self, task: Notified<S>, inject: &Inject<S>) -> Pushed {
        // Only the owner writes `tail`, so a Relaxed load sees our own last store.
        let tail = self.tail.0.load(Relaxed);
        loop {
            let head = self.head.0.load(Acquire);
            let (steal, real) = unpack(head);
            if tail.wrapping_sub(steal) < CAPACITY {
                self.buffer.0[(tail & MASK) as usize].store(task.into_raw().as_ptr(), Relaxed);
                self.tail.0.store(tail.wrapping_add(1), Release);
                return Pushed::Local;
            }
            if steal != real {
                // A stealer owns [steal, real); it will free room soon. Don't wait for it.
                let _ = inject.push(task);
                return Pushed::ToGlobal;
            }
            // Full and no steal running: claim the oldest half for the global queue.
            let new_head = pack(real.wrapping_add(HALF), real.wrapping_add(HALF));
            if self.head.0.compare_exchange(head, new_head, Release, Relaxed).is_err() {
                // A stealer claimed first; there is room now, or a steal is running.
                continue;
            }
            let mut batch = Batch::new();
            for i in 0..HALF {
                let slot = &self.buffer.0[(real.wrapping_add(i) & MASK) as usize];
                // SAFETY: the CAS above made these slots ours: stealers can no longer claim
                // them and only the owner writes slots. Each holds a queue reference.
                batch.push(unsafe { Notified::<S>::from_raw(NonNull::new_unchecked(slot.load(Relaxed))) });
            }
            batch.push(task);
            let _ = inject.push_batch(batch);
            return Pushed::Overflowed;
        }
    }

    /// Owner only: pop from the front (FIFO).
    pub(crate) fn pop(&self) -> Option<Notified<S>> {
        let mut head = self.head.0.load(Acquire);
        let idx = loop {
            let (steal, real) = unpack(head);
            let tail = self.tail.0.load(Relaxed);
            if real == tail {
                return None;
            }
            let next_real = real.wrapping_add(1);
            // With no steal running both halves move; otherwise only `real`.
            let next = if steal == real { pack(next_real, next_real) } else { pack(steal, next_real) };
            match self.head.0.compare_exchange_weak(head, next, AcqRel, Acquire) {
                Ok(_) => break real & MASK,
                Err(actual) => head = actual,
            }
        };
        let p = self.buffer.0[idx as usize].load(Relaxed);
        // SAFETY: the CAS gave us this slot; it holds a queue reference put there by push.
        Some(unsafe { Notified::from_raw(NonNull::new_unchecked(p)) })
    }

    /// Steal about half of `self` into `dst` (the caller's own queue) and return one of the
    /// stolen tasks to run now, plus how many were taken in all.
    pub(crate) fn steal_into(&self, dst: &WorkStealQueue<S>) -> Option<(Notified<S>, u32)> {
        // The caller owns `dst`.
        let dst_tail = dst.tail.0.load(Relaxed);
        let (dst_steal, _) = unpack(dst.head.0.load(Acquire));
        if dst_tail.wrapping_sub(dst_steal) > CAPACITY - HALF {
            // Not enough room for a half; we have work anyway.
            return None;
        }
        let n = self.steal_into2(dst, dst_tail);
        if n == 0 {
            return None;
        }
        // Run the last one copied; publish the others.
        let ret_idx = dst_tail.wrapping_add(n - 1) & MASK;
        let p = dst.buffer.0[ret_idx as usize].load(Relaxed);
        if n > 1 {
            dst.tail.0.store(dst_tail.wrapping_add(n - 1), Release);
        }
        // SAFETY: we copied this queue reference into our own slot and never published it.
        Some((unsafe { Notified::from_raw(NonNull::new_unchecked(p)) }, n))
    }

    fn steal_into2(&self, dst: &WorkStealQueue<S>, dst_tail: u32) -> u32 {
        // Phase 1: claim.
        let mut prev = self.head.0.load(Acquire);
        let (first, n, claimed) = loop {
            let (steal, real) = unpack(prev);
            if steal != real {
                // Another stealer is mid-copy.
                return 0;
            }
            let tail = self.tail.0.load(Acquire);
            let available = tail.wrapping_sub(real);
            let n = (available - available / 2).min(HALF);
            if n == 0 {
                return 0;
            }
            let next = pack(steal, real.wrapping_add(n));
            match self.head.0.compare_exchange_weak(prev, next, AcqRel, Acquire) {
                Ok(_) => break (real, n, next),
                Err(actual) => prev = actual,
            }
        };
        // Phase 2: copy. The claimed slots can't be overwritten: pushes stop at steal_head.
        for i in 0..n {
            let p = self.buffer.0[(first.wrapping_add(i) & MASK) as usize].load(Relaxed);
            dst.buffer.0[(dst_tail.wrapping_add(i) & MASK) as usize].store(p, Relaxed);
        }
        // Phase 3: release. Only the owner's pops (which move `real`) can race us here.
        let mut prev = claimed;
        loop {
            let (steal, real) = unpack(prev);
            debug_assert_eq!(steal, first);
            match self.head.0.compare_exchange_weak(prev, pack(real, real), AcqRel, Acquire) {
                Ok(_) => return n,
                Err(actual) => prev = actual,
            }
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    //! Single-threaded checks of the ring's arithmetic; the concurrent properties are in
    //! the loom models and in `tests/queue_stress.rs`-style runtime tests.
    use super::*;
    use crate::task::test_util::{counted_task, MockScheduler};

    #[test]
    fn fifo_order_and_overflow_moves_half_plus_one() {
        let sched = MockScheduler::new();
        let q = WorkStealQueue::new();
        let inject = Inject::new();
        let mut ids = vec![];
        for _ in 0..CAPACITY {
            let t = counted_task(&sched);
            ids.push(t.header().id);
            assert_eq!(q.push_back_or_overflow(t, &inject), Pushed::Local);
        }
        assert_eq!(q.len(), CAPACITY);
        let t = counted_task(&sched);
        assert_eq!(q.push_back_or_overflow(t, &inject), Pushed::Overflowed);
        assert_eq!(inject.len(), HALF as usize + 1);
        assert_eq!(q.len(), CAPACITY - HALF);
        // The oldest half went to the global queue, in order.
        let first = inject.pop().unwrap();
        assert_eq!(first.header().id, ids[0]);
        // The ring pops the rest in FIFO order.
        let next = q.pop().unwrap();
        assert_eq!(next.header().id, ids[HALF as usize]);
        drop((first, next));
        while q.pop().is_some() {}
        while inject.pop().is_some() {}
    }

    /// Nothing is lost or duplicated under concurrent push (with overflow), pop and two
    /// stealers: every task id comes out exactly once, from the owner, a stealer or the
    /// global queue. Bounded: 200,000 tasks.
    #[test]
    fn concurrent_push_pop_steal_overflow_loses_nothing() {
        use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
        use std::sync::Arc;
        const N: usize = 200_000;
        let sched = MockScheduler::new();
        let q = Arc::new(WorkStealQueue::new());
        let inject = Arc::new(Inject::new());
        let done = Arc::new(AtomicBool::new(false));
        // Each thread notes the ids it took in its own list (only this test's tasks pass
        // through `q` and `inject`, whatever other tests spawn meanwhile).
        let take = |t: Notified<Arc<MockScheduler>>, got: &mut Vec<u64>| got.push(t.header().id);
        let stealers: Vec<_> = (0..2)
            .map(|_| {
                let (q, done) = (q.clone(), done.clone());
                std::thread::spawn(move || {
                    let mine = WorkStealQueue::new();
                    let (mut steals, mut got) = (0, vec![]);
                    loop {
                        let finished = done.load(SeqCst);
                        if let Some((t, _)) = q.steal_into(&mine) {
                            steals += 1;
                            take(t, &mut got);
                            while let Some(t) = mine.pop() {
                                take(t, &mut got);
                            }
                        } else if finished {
                            return (steals, got);
                        }
                    }
                })
            })
            .collect();
        let (mut ids, mut got) = (vec![], vec![]);
        for i in 0..N {
            let t = counted_task(&sched);
            ids.push(t.header().id);
            let _ = q.push_back_or_overflow(t, &inject);
            if i % 3 == 0 {
                if let Some(t) = q.pop() {
                    take(t, &mut got);
                }
            }
        }
        done.store(true, SeqCst);
        let mut steals = 0;
        for h in stealers {
            let (n, theirs) = h.join().unwrap();
            steals += n;
            got.extend(theirs);
        }
        while let Some(t) = q.pop() {
            take(t, &mut got);
        }
        while let Some(t) = inject.pop() {
            take(t, &mut got);
        }
        // Every id exactly once: the same multiset as the ids pushed.
        got.sort_unstable();
        ids.sort_unstable();
        assert_eq!(got.len(), ids.len(), "{} tasks came out for {} pushed", got.len(), ids.len());
        if let Some(i) = (0..ids.len()).find(|&i| got[i] != ids[i]) {
            panic!("task {} was lost or came out twice (first difference at {i})", ids[i]);
        }
        assert!(steals > 0, "the stealers never got anything");
    }

    #[test]
    fn steal_takes_half_rounded_up() {
        let sched = MockScheduler::new();
        let a = WorkStealQueue::new();
        let b = WorkStealQueue::new();
        let inject = Inject::new();
        for _ in 0..7 {
            let _ = a.push_back_or_overflow(counted_task(&sched), &inject);
        }
        let (t, n) = a.steal_into(&b).unwrap();
        assert_eq!(n, 4);
        assert_eq!(a.len(), 3);
        assert_eq!(b.len(), 3);
        drop(t);
        while a.pop().is_some() {}
        while b.pop().is_some() {}
    }
}
