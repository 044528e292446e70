//! One place of the ring and the word that guards it.
//!
//! # Two ways to read
//! Every receiver reads every slot, so whatever a read writes bounces between the cores
//! the receivers run on. A standard read-write lock plus a count of the receivers yet to
//! see the value costs three contended atomic operations per receive (lock, count down,
//! unlock). Here a receive costs one: counting the value as seen. It is safe to clone a
//! value without entering the slot because no writer changes a value that some receiver
//! still has to see, with one exception, a sender overwriting a value a lagging receiver
//! has not read. For that one case the receivers mark each read, with its position, in a
//! word of their own (`Mark`, in `mod`), and such a sender first makes the channel
//! *careful*: it sets a flag, runs the heavy side of an asymmetric fence (`fence`), and
//! notes the reads in flight. From then on receivers enter the slot (the *counted read*
//! below, two operations), and the sender keeps them out as it writes; before
//! overwriting a position, a sender also waits for the noted reads of that position, as
//! a per-slot read-write lock would make it wait (and no longer: waiting for every read
//! in flight, under the tail lock, would deadlock with a `Clone` that takes it). After enough sends that overwrite no unseen value, the channel stops being
//! careful. Where the fence is missing, it is careful for good.
//!
//! # The word
//! `[remaining: 32 bits][WRITER: 1 bit][readers: 31 bits]`
//! - *readers*: receivers in the slot by a counted read. A reader adds one; if it finds
//!   `WRITER` set it takes its one back and goes the slow way (the tail lock), so a
//!   reader never waits on a writer here. Nor does a reader turned away try again
//!   at once: it takes the tail lock (which a sender holds while it writes), so
//!   readers cannot keep a writer waiting by coming and going.
//! - *WRITER*: someone has the slot to itself, or is waiting for the readers in it to
//!   leave (no new counted reader stays). Writers are senders, which hold the tail
//!   lock, and whoever drops a value nobody needs any more.
//! - *remaining*: receivers, alive when the value was sent, that have yet to see it.
//!   Whoever leaves the word at zero (no readers, no writer, nobody left to see the
//!   value) drops the value.
//!
//! `val` changes only under `WRITER`, with no counted reader in and, as above, no
//! receiver left to see it or none reading it without entering. A sender publishes a
//! value by storing its position (`Release`) after the value and its remaining count; a
//! reader that loads that position (`Acquire`) sees both. While the value changes the
//! position is `REWRITING`, which no receiver reads, so a counted reader let in between
//! the count and the position does not take the new value for the old. A reader counts
//! the value as seen (`Release`) after its clone, and whoever drops the value or
//! overwrites it has seen the count at zero (`Acquire`) or waited out the reader's mark,
//! so no clone is in progress when the value goes.
//!
//! A sender overwriting a value some receiver had yet to see reads the remaining count
//! again after the wait: receivers reading without entering may have counted the old
//! value down since it took the slot.

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
    /// position no receiver reads; `REWRITING` while a sender writes it.
    pos: AtomicU64,
    val: UnsafeCell<Option<T>>,
}

/// The position while a sender writes the slot: no receiver reads it.
const REWRITING: u64 = u64::MAX;

// SAFETY: a slot hands out `&T` to several threads at once (readers clone side by side),
// so sharing it needs `T: Sync`, and a value written on one thread is dropped on
// another, so both need `T: Send`: the bounds a read-write lock of the value would have.
// Every access to `val` follows the protocol in the module's docs.
unsafe impl<T: Send + Sync> Sync for Slot<T> {}
// SAFETY: moving a slot moves its value.
unsafe impl<T: Send> Send for Slot<T> {}

impl<T> Slot<T> {
    pub(super) fn new(pos: u64) -> Self {
        debug_assert_ne!(pos, REWRITING);
        Slot { state: AtomicU64::new(0), pos: AtomicU64::new(pos), val: UnsafeCell::new(None) }
    }

    /// Look at the slot, unless a writer has it (then `None`: the caller goes the slow
    /// way, where the writer, if it is a sender, is done).
    #[inline]
    pub(super) fn read(&self) -> Option<ReadGuard<'_, T>> {
        let prev = self.state.fetch_add(READER, Acquire);
        if prev & WRITER != 0 {
            drop(self.leave(0));
            return None;
        }
        Some(ReadGuard { slot: self, seen: false })
    }

    /// The value at position `*next`, cloned without entering the slot and counted as
    /// seen, with `*next` moved past it; `None` when the slot holds another position
    /// (the caller goes the slow way). Either way
    /// the read's `mark` is set to 0 (`Release`: a sender that sees it knows the
    /// clone is done), after the count and before a value nobody needs any more is
    /// dropped here: a value's `Drop` may take the tail lock, under which a careful
    /// sender may wait for this mark.
    ///
    /// # Safety
    /// The caller's read is marked, and it found the channel not careful after the
    /// mark (see the module's docs): so no writer changes a value it is counted in.
    #[inline]
    pub(super) unsafe fn read_marked(&self, next: &mut u64, mark: &AtomicU64) -> Option<T>
    where
        T: Clone,
    {
        let pos = *next;
        if self.pos.load(Acquire) != pos {
            mark.store(0, Release);
            return None;
        }
        // The receiver moves past the value before cloning: a clone that panics leaves
        // it counted as seen, so a receiver used again must not count it twice.
        *next = pos + 1;
        // The value counts this receiver (it lived when the value was sent), so it stays
        // until this count, which the guard makes even if the clone panics (the value
        // then counts as seen, as Tokio has it).
        struct Reading<'a, T> {
            slot: &'a Slot<T>,
            mark: &'a AtomicU64,
        }
        impl<T> Drop for Reading<'_, T> {
            #[inline]
            fn drop(&mut self) {
                let unneeded = self.slot.count_off(REM_ONE);
                self.mark.store(0, Release);
                drop(unneeded);
            }
        }
        let reading = Reading { slot: self, mark };
        // SAFETY: the receiver is counted in this value, so no sender overwrites it
        // (one that would waits for the mark), and nobody drops it before the count.
        let v = self.val.with(|v| unsafe { (*v).clone() });
        drop(reading);
        Some(v.expect("a value is kept until every receiver has seen it"))
    }

    /// Leave a counted read, with `rem` counted off the remaining.
    #[inline]
    fn leave(&self, rem: u64) -> Option<T> {
        self.count_off(READER + rem)
    }

    /// Take `sub` off the word; whoever leaves it at zero takes a value nobody needs any
    /// more, for the caller to drop.
    #[inline]
    fn count_off(&self, sub: u64) -> Option<T> {
        let prev = self.state.fetch_sub(sub, AcqRel);
        if prev == sub {
            return self.take_unneeded();
        }
        None
    }

    /// The value, if nobody is left to see it and the slot is free to take.
    #[cold]
    fn take_unneeded(&self) -> Option<T> {
        if self.state.compare_exchange(0, WRITER, Acquire, Relaxed).is_err() {
            // A reader or a writer came in; whoever leaves last tries again, and a
            // sender overwrites the value anyway.
            return None;
        }
        // SAFETY: `WRITER` is ours, no counted reader is in and nobody has the value
        // to see (the word was zero).
        let old = self.val.with_mut(|v| unsafe { (*v).take() });
        // Not a store: a reader turned away meanwhile has yet to take its one back.
        self.state.fetch_sub(WRITER, Release);
        old
    }

    /// Count a dropped receiver off the value at `pos`, which it never saw; the value
    /// when it was the last to see it, for the caller to drop after the tail lock.
    ///
    /// # Safety
    /// The caller holds the channel's tail lock (so no sender rewrites the slot), and its
    /// receiver is counted in the value at `pos` if the slot still holds it.
    pub(super) unsafe fn count_off_locked(&self, pos: u64) -> Option<T> {
        if self.pos.load(Acquire) != pos {
            return None;
        }
        self.count_off(REM_ONE)
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
        (self.pos.load(Relaxed), rem)
    }

    /// Have the slot to oneself: wait for the writer before (at most one dropping a value,
    /// as senders hold the tail lock), then for the counted readers in it to leave.
    /// Readers are in only to compare and clone, so the wait is short; it spins, then
    /// yields the thread, and never sleeps, so a reader whose thread is descheduled
    /// mid-clone (or a slow `Clone`) costs the writer's core that long.
    ///
    /// # Safety
    /// The caller holds the channel's tail lock.
    pub(super) unsafe fn write(&self) -> WriteGuard<'_, T> {
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
                return WriteGuard { slot: self, held: cur >> REM_SHIFT };
            }
            backoff(&mut spins);
        }
    }
}

/// Spin a little, then give the thread up: the one this waits for may be preempted.
pub(super) fn backoff(spins: &mut u32) {
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

/// A counted reader in a slot. Dropping it leaves, counting the value as seen if
/// [`seen`](ReadGuard::seen) was called (so a clone that panics still counts); a value
/// nobody needs any more is dropped then, after leaving.
pub(super) struct ReadGuard<'a, T> {
    slot: &'a Slot<T>,
    seen: bool,
}

impl<T> ReadGuard<'_, T> {
    pub(super) fn pos(&self) -> u64 {
        self.slot.pos.load(Acquire)
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
        // SAFETY: a counted reader is in, so no writer changes it during the clone.
        self.slot.val.with(|v| unsafe { (*v).clone() })
    }
}

impl<T> Drop for ReadGuard<'_, T> {
    fn drop(&mut self) {
        drop(self.slot.leave(if self.seen { REM_ONE } else { 0 }));
    }
}

/// The slot to oneself, to put a new value in. Dropped without [`put`](WriteGuard::put)
/// (a panic), it lets the slot go unchanged.
pub(super) struct WriteGuard<'a, T> {
    slot: &'a Slot<T>,
    /// The remaining count when the slot was taken.
    held: u64,
}

impl<T> WriteGuard<'_, T> {
    /// How many receivers had yet to see the value it holds when the slot was taken
    /// (lagging receivers, if the value is overwritten). Receivers reading it without
    /// entering may count it down since; once it is zero, nobody changes it.
    pub(super) fn remaining(&self) -> u64 {
        self.held
    }

    /// The position of the value it holds.
    pub(super) fn pos(&self) -> u64 {
        self.slot.pos.load(Relaxed)
    }

    /// Put a value for position `pos`, to be seen by `receivers`, and let the slot go;
    /// returns the old value.
    pub(super) fn put(self, pos: u64, val: T, receivers: usize) -> Option<T> {
        debug_assert!(receivers <= MAX_RECEIVERS && pos != REWRITING);
        let this = std::mem::ManuallyDrop::new(self);
        let slot = this.slot;
        // A count that was not zero is read again: receivers reading without entering
        // may have counted it down since the slot was taken (before the caller waited
        // for them). Zero stays zero.
        let held = if this.held > 0 { slot.state.load(Acquire) >> REM_SHIFT } else { 0 };
        // Receivers may read without entering: they take the value once they load its
        // position, so the count is set before the position is. A counted reader let in
        // between finds `REWRITING`, not the old position with the new value.
        slot.pos.store(REWRITING, Relaxed);
        // SAFETY: the writer has the slot to itself: no counted reader is in, and no
        // receiver reads the old value without entering (none is left to see it, or the
        // caller waited for those reading it after making the channel careful).
        let old = slot.val.with_mut(|v| unsafe { (*v).replace(val) });
        // The new count, and the slot let go: not a store, as a reader turned away
        // meanwhile may have yet to take its one back.
        let delta = ((receivers as u64) << REM_SHIFT).wrapping_sub(held << REM_SHIFT).wrapping_sub(WRITER);
        slot.state.fetch_add(delta, Release);
        // Published: a reader that loads this position sees the value and its count.
        slot.pos.store(pos, Release);
        old
    }
}

impl<T> Drop for WriteGuard<'_, T> {
    fn drop(&mut self) {
        self.slot.state.fetch_sub(WRITER, Release);
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
        let slot = Arc::new(Slot::<(u64, Arc<()>)>::new(u64::MAX - 1));
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
                        if at >= u64::MAX - 1 || at < pos {
                            drop(g);
                            std::thread::yield_now();
                            continue; // not written yet, or being written
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
            // SAFETY: this thread is the only writer, as a tail lock would make it.
            let old = unsafe { slot.write() }.put(pos, (pos, live.clone()), 2);
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
