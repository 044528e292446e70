//! The LIFO slot: one task a worker runs next, which other workers may take only when
//! the owner is stuck.
//!
//! An owner-only slot, as Tokio has, has a flaw: a task spawned or woken just
//! before its worker's poll turns long (a CPU-heavy loop, a blocking call) waits for that
//! poll to end, however long it takes, while the other workers park: a liveness bug
//! (Tokio's open issue #4941; Tokio 1.51 made its slot stealable and 1.52.2 reverted it
//! for its cost on short-handler workloads). Here the slot can be taken by another worker
//! with a compare-exchange, and the scheduler only does that when the owner has stayed in
//! one poll for a while (see "Stealing from the LIFO slot" in `run.rs`), so the common
//! hand-off keeps its locality and its cost.
//!
//! # Protocol
//! - The owner pushes with a plain load and, when the slot is empty, a Release store:
//!   other threads only ever change the slot from a task to empty, so nobody can fill an
//!   empty slot under the owner. When the slot is full, the owner swaps, and gets back
//!   the task it displaced, or nothing if a thief took it meanwhile.
//! - The owner pops with a load and, when the slot is full, a swap with empty: exactly one
//!   of the owner's swap and a thief's compare-exchange gets a given task.
//! - A thief compare-exchanges a task it saw (`peek`) for empty, with Acquire so that it
//!   sees what the owner wrote before publishing the task.
//!
//! The slot holds a queue reference (what `Notified::into_raw` gives), and whoever takes
//! it out owns that reference.

use crate::loom::AtomicPtr;
use std::ptr::{self, NonNull};
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};

pub(crate) struct LifoSlot<T> {
    slot: AtomicPtr<T>,
}

impl<T> LifoSlot<T> {
    pub(crate) fn new() -> LifoSlot<T> {
        LifoSlot { slot: AtomicPtr::new(ptr::null_mut()) }
    }

    /// Owner only: put `task` in the slot; returns the task it displaced, if any.
    #[inline]
    pub(crate) fn push(&self, task: NonNull<T>) -> Option<NonNull<T>> {
        if self.slot.load(Relaxed).is_null() {
            // Nobody but the owner fills the slot, so it is still empty.
            self.slot.store(task.as_ptr(), Release);
            None
        } else {
            NonNull::new(self.slot.swap(task.as_ptr(), AcqRel))
        }
    }

    /// Owner only (or any thread once the owner is gone): take the task, if any.
    #[inline]
    pub(crate) fn pop(&self) -> Option<NonNull<T>> {
        if self.slot.load(Relaxed).is_null() {
            return None;
        }
        NonNull::new(self.slot.swap(ptr::null_mut(), Acquire))
    }

    /// Any thread: the task in the slot now (only to look at: it may be gone at once).
    #[inline]
    pub(crate) fn peek(&self) -> Option<NonNull<T>> {
        NonNull::new(self.slot.load(Relaxed))
    }

    /// Another worker: take `task` if it is still in the slot.
    pub(crate) fn steal(&self, task: NonNull<T>) -> Option<NonNull<T>> {
        self.slot.compare_exchange(task.as_ptr(), ptr::null_mut(), Acquire, Relaxed).ok().and_then(NonNull::new)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn item(v: u32) -> NonNull<u32> {
        NonNull::from(Box::leak(Box::new(v)))
    }

    fn free(p: NonNull<u32>) -> u32 {
        // SAFETY: every pointer here came from `item` (a leaked box) and is freed once.
        *unsafe { Box::from_raw(p.as_ptr()) }
    }

    #[test]
    fn push_displaces_pop_empties_and_steal_takes_only_what_it_saw() {
        let s = LifoSlot::new();
        assert!(s.pop().is_none());
        let (a, b) = (item(1), item(2));
        assert!(s.push(a).is_none());
        assert_eq!(s.push(b), Some(a), "the displaced task comes back");
        assert_eq!(s.steal(a), None, "a task no longer in the slot can't be stolen");
        assert_eq!(s.peek(), Some(b));
        assert_eq!(s.steal(b), Some(b));
        assert!(s.pop().is_none() && s.peek().is_none(), "a stolen task leaves the slot empty");
        let c = item(3);
        assert!(s.push(c).is_none());
        assert_eq!(s.pop(), Some(c));
        assert_eq!(free(a) + free(b) + free(c), 6);
    }
}
