//! One place of the ring and the word that guards it.
//!
//! # Why not a read-write lock and a counter
//! Every receiver reads every slot, so whatever a read touches bounces between the
//! cores the receivers run on. A standard read-write lock plus a count of the receivers
//! yet to see the value costs three contended atomic operations per receive (lock,
//! count down, unlock). Here the count lives in the lock's own word, so leaving the
//! slot and counting the value as seen are one operation: two per receive.
//!
//! # The word
//! `[remaining: 32 bits][WRITER: 1 bit][readers: 31 bits]`
//! - *readers*: receivers looking at the slot now. A reader adds one; if it finds
//!   `WRITER` set it takes its one back and goes the slow way (the tail lock), so a
//!   reader never waits on a writer here. Nor does a reader turned away try again
//!   at once: it takes the tail lock (which a sender holds while it writes), so
//!   readers cannot keep a writer waiting by coming and going.
//! - *WRITER*: someone has the slot to itself, or is waiting for the readers in it to
//!   leave (no new reader stays). Writers are senders and dropped receivers, which hold
//!   the tail lock, or the reader that leaves a slot whose value nobody needs any more.
//! - *remaining*: receivers, alive when the value was sent, that have yet to see it.
//!   The reader that leaves the word at zero (no readers, no writer, nobody left to see
//!   the value) drops the value.
//!
//! `pos` and `val` change only under `WRITER` with no reader in: a reader's `Acquire`
//! increment pairs with the writer's `Release` store that let go of the slot, and the
//! writer's `Acquire` look at a reader count of zero pairs with each reader's `Release`
//! decrement, so a clone in progress never sees its value change.

use crate::loom::{AtomicU64, UnsafeCell};
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};

const READER: u64 = 1;
const READERS: u64 = (1 << 31) - 1;
const WRITER: u64 = 1 << 31;
const REM_SHIFT: u32 = 32;
const REM_ONE: u64 = 1 << REM_SHIFT;

/// The most receivers a channel can have: the count of those yet to see a value has 32
/// bits.
pub(super) const MAX_RECEIVERS: usize = u32::MAX as usize;

pub(super) struct Slot<T> {
    state: AtomicU64,
    /// The position of the value it holds (or last held); for a slot never written, a
    /// position no receiver reads.
    pos: UnsafeCell<u64>,
    val: UnsafeCell<Option<T>>,
}

// SAFETY: a slot hands out `&T` to several threads at once (readers clone side by side),
// so sharing it needs `T: Sync`, and a value written on one thread is dropped on
// another, so both need `T: Send`: the bounds a read-write lock of the value would have.
// Every access to `pos` and `val` follows the protocol in the module's docs.
unsafe impl<T: Send + Sync> Sync for Slot<T> {}
// SAFETY: moving a slot moves its value.
unsafe impl<T: Send> Send for Slot<T> {}

impl<T> Slot<T> {
    pub(super) fn new(pos: u64) -> Self {
        Slot { state: AtomicU64::new(0), pos: UnsafeCell::new(pos), val: UnsafeCell::new(None) }
    }

    /// Look at the slot, unless a writer has it (then `None`: the caller goes the slow
    /// way, where the writer, if it is a sender or a dropped receiver, is done).
    #[inline]
    pub(super) fn read(&self) -> Option<ReadGuard<'_, T>> {
        let prev = self.state.fetch_add(READER, Acquire);
        if prev & WRITER != 0 {
            self.leave(0);
            return None;
        }
        Some(ReadGuard { slot: self, seen: false })
    }

    /// Leave after reading, with `rem` counted off the remaining; the one that leaves
    /// the word at zero drops a value nobody needs any more.
    #[inline]
    fn leave(&self, rem: u64) {
        let prev = self.state.fetch_sub(READER + rem, AcqRel);
        if prev == READER + rem {
            self.drop_unneeded();
        }
    }

    /// Drop the value if nobody is left to see it and the slot is free to take.
    #[cold]
    fn drop_unneeded(&self) {
        if self.state.compare_exchange(0, WRITER, Acquire, Relaxed).is_err() {
            // A reader or a writer came in; whoever leaves last tries again, and a
            // sender overwrites the value anyway.
            return;
        }
        // SAFETY: `WRITER` is ours and no reader is in (the word was zero).
        let old = self.val.with_mut(|v| unsafe { (*v).take() });
        // Not a store: a reader turned away meanwhile has yet to take its one back.
        self.state.fetch_sub(WRITER, Release);
        drop(old);
    }

    /// The position and the remaining count, without entering the slot: for a caller
    /// that holds the tail lock, which every writer of `pos` holds too. (Entering it
    /// could make the caller the last to leave, and so the one to drop a value, which
    /// runs user code under the tail lock.)
    ///
    /// # Safety
    /// The caller holds the channel's tail lock.
    pub(super) unsafe fn peek_locked(&self) -> (u64, u64) {
        let rem = self.state.load(Acquire) >> REM_SHIFT;
        // SAFETY: only senders and dropped receivers write `pos`, under the tail lock the
        // caller holds; a reader dropping a value touches `val` only.
        let pos = self.pos.with(|p| unsafe { *p });
        (pos, rem)
    }

    /// Have the slot to oneself: wait for the writer before (at most a dropping reader,
    /// as senders and dropped receivers hold the tail lock), then for the readers in it
    /// to leave. Readers are in only to compare and clone, so the wait is short; it
    /// spins, then yields the thread, and never sleeps, so a reader whose thread is
    /// descheduled mid-clone (or a slow `Clone`) costs the writer's core that long.
    pub(super) fn write(&self) -> WriteGuard<'_, T> {
        let mut spins = 0u32;
        let mut cur = self.state.load(Relaxed);
        loop {
            if cur & WRITER == 0 {
                match self.state.compare_exchange_weak(cur, cur | WRITER, Acquire, Relaxed) {
                    Ok(_) => break,
                    Err(actual) => {
                        cur = actual;
                        continue;
                    }
                }
            }
            backoff(&mut spins);
            cur = self.state.load(Relaxed);
        }
        loop {
            let cur = self.state.load(Acquire);
            if cur & READERS == 0 {
                let rem = cur >> REM_SHIFT;
                return WriteGuard { slot: self, rem, held: rem };
            }
            backoff(&mut spins);
        }
    }
}

/// Spin a little, then give the thread up: the one this waits for may be preempted.
fn backoff(spins: &mut u32) {
    *spins += 1;
    #[cfg(loom)]
    crate::loom::thread::yield_now();
    #[cfg(not(loom))]
    if *spins < 64 {
        std::hint::spin_loop();
    } else {
        std::thread::yield_now();
    }
}

/// A reader in a slot. Dropping it leaves, counting the value as seen if
/// [`seen`](ReadGuard::seen) was called (so a clone that panics still counts).
pub(super) struct ReadGuard<'a, T> {
    slot: &'a Slot<T>,
    seen: bool,
}

impl<T> ReadGuard<'_, T> {
    pub(super) fn pos(&self) -> u64 {
        // SAFETY: readers are in, so no writer changes it.
        self.slot.pos.with(|p| unsafe { *p })
    }

    /// How many receivers have yet to see the value (a snapshot).
    #[cfg(test)]
    pub(super) fn remaining(&self) -> u64 {
        self.slot.state.load(Acquire) >> REM_SHIFT
    }

    /// Count the value as seen by this receiver when the guard goes.
    pub(super) fn seen(&mut self) {
        self.seen = true;
    }

    /// A clone of the value, made inside the cell's access (so loom sees the clone
    /// race with any writer, were there one).
    pub(super) fn clone_val(&self) -> Option<T>
    where
        T: Clone,
    {
        // SAFETY: readers are in, so no writer changes it during the clone.
        self.slot.val.with(|v| unsafe { (*v).clone() })
    }
}

impl<T> Drop for ReadGuard<'_, T> {
    fn drop(&mut self) {
        self.slot.leave(if self.seen { REM_ONE } else { 0 });
    }
}

/// The slot to oneself.
pub(super) struct WriteGuard<'a, T> {
    slot: &'a Slot<T>,
    /// The remaining count, written back when the guard goes.
    rem: u64,
    /// The remaining count in the word while the guard lives.
    held: u64,
}

impl<T> WriteGuard<'_, T> {
    pub(super) fn pos(&self) -> u64 {
        // SAFETY: the writer has the slot to itself.
        self.slot.pos.with(|p| unsafe { *p })
    }

    /// Count one receiver off the remaining (none when none remain); `true` when
    /// none remain now.
    pub(super) fn count_off(&mut self) -> bool {
        self.rem = self.rem.saturating_sub(1);
        self.rem == 0
    }

    /// Put a value for position `pos`, to be seen by `receivers`; returns the old value.
    pub(super) fn put(&mut self, pos: u64, val: T, receivers: usize) -> Option<T> {
        debug_assert!(receivers <= MAX_RECEIVERS);
        self.rem = receivers as u64;
        // SAFETY: the writer has the slot to itself.
        self.slot.pos.with_mut(|p| unsafe { *p = pos });
        // SAFETY: as above.
        self.slot.val.with_mut(|v| unsafe { (*v).replace(val) })
    }

    pub(super) fn take(&mut self) -> Option<T> {
        // SAFETY: the writer has the slot to itself.
        self.slot.val.with_mut(|v| unsafe { (*v).take() })
    }
}

impl<T> Drop for WriteGuard<'_, T> {
    fn drop(&mut self) {
        // Not a store: a reader turned away meanwhile may have yet to take its one back.
        // Only the writer changes the remaining count while it holds the slot.
        let delta = (self.rem << REM_SHIFT).wrapping_sub(self.held << REM_SHIFT).wrapping_sub(WRITER);
        self.slot.state.fetch_add(delta, Release);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::Slot;
    use std::sync::Arc;

    /// Two reader threads follow a writer that does not wait for them (as a sender
    /// overwrites a slow receiver's values). Each reader sees the positions in order,
    /// each with its own value; the value of the last position goes once both saw it,
    /// and no value is dropped twice or kept.
    #[test]
    fn readers_follow_a_writer_and_each_value_goes_once() {
        const ROUNDS: u64 = if cfg!(miri) { 40 } else { 5_000 };
        let slot = Arc::new(Slot::<(u64, Arc<()>)>::new(u64::MAX));
        let live = Arc::new(());
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let slot = slot.clone();
                std::thread::spawn(move || {
                    let mut seen = 0u64;
                    let mut pos = 0;
                    while pos < ROUNDS {
                        // A receiver that finds nothing goes to the tail lock and
                        // waits; these give the writer the core instead.
                        let Some(mut g) = slot.read() else {
                            std::thread::yield_now();
                            continue;
                        };
                        let at = g.pos();
                        if at == u64::MAX || at < pos {
                            drop(g);
                            std::thread::yield_now();
                            continue; // not written yet
                        }
                        // At it, or past it (overwritten): read what is there, as a
                        // lagging receiver goes on from the oldest value kept.
                        g.seen();
                        assert_eq!(g.clone_val().expect("held until seen").0, at);
                        seen += 1;
                        pos = at + 1;
                    }
                    seen
                })
            })
            .collect();
        for pos in 0..ROUNDS {
            let old = slot.write().put(pos, (pos, live.clone()), 2);
            drop(old);
            std::thread::yield_now();
        }
        for r in readers {
            assert!(r.join().unwrap() >= 1, "each reader saw the last value at least");
        }
        let g = slot.read().expect("no writer left");
        assert_eq!(g.pos(), ROUNDS - 1);
        assert_eq!(g.remaining(), 0);
        assert!(g.clone_val().is_none(), "the last value went when both had seen it");
        drop(g);
        assert_eq!(Arc::strong_count(&live), 1, "every value was dropped, once");
    }
}
