//! A hierarchical timing wheel: 6 levels of 64 slots, 1 ms per level-0 slot, so level `l`
//! slots are `64^l` ms wide and the wheel spans 64^6 ms (about 2.2 years). A later deadline
//! is filed in the top level and re-filed each time its slot comes round, until it is due:
//! it never fires early.
//!
//! Entries live in a slab (a `Vec` with a free list) and each slot is an intrusive
//! doubly-linked list of slab indices, so insert, remove and fire are O(1), a dropped
//! sleep is unlinked at once (nothing waits in the wheel for a deadline that no longer
//! matters), and memory is the peak number of live timers, reused after that.
//!
//! An entry sits at the level given by the highest bit in which its deadline differs
//! from `elapsed` (the wheel's current time): level 0 holds the deadlines in the current
//! 64 ms window, level 1 those in the current 4,096 ms window, and so on. So the lowest
//! occupied level holds the earliest deadline. [`Wheel::poll`] repeatedly takes the
//! earliest occupied slot whose start has passed, fires the entries due by then, and
//! re-files the rest one level down ("cascading"), until the next slot is in the future.

use std::task::Waker;

const LEVELS: usize = 6;
const SLOTS: usize = 64;
const SLOT_BITS: u32 = 6;
const SLOT_MASK: u64 = SLOTS as u64 - 1;
/// The furthest deadline the wheel represents, in ms past `elapsed`.
pub(crate) const MAX_DURATION: u64 = (1 << (SLOT_BITS * LEVELS as u32)) - 1;

/// A timer's index in the slab.
pub(crate) type TimerKey = usize;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum EntryState {
    /// Linked into `levels[level].slots[slot]`.
    Pending { level: usize, slot: usize },
    /// Its deadline passed; unlinked; waits for its owner to look (and remove it).
    Fired,
    /// In the free list.
    Free,
}

struct Entry {
    deadline: u64,
    waker: Option<Waker>,
    state: EntryState,
    prev: Option<TimerKey>,
    next: Option<TimerKey>,
}

struct Level {
    /// Bit `s` set when slot `s` is non-empty.
    occupied: u64,
    heads: [Option<TimerKey>; SLOTS],
}

impl Default for Level {
    fn default() -> Level {
        Level { occupied: 0, heads: [None; SLOTS] }
    }
}

pub(crate) struct Wheel {
    elapsed: u64,
    levels: [Level; LEVELS],
    entries: Vec<Entry>,
    free: Vec<TimerKey>,
    pending: usize,
}

/// The earliest occupied slot.
#[derive(Debug, Clone, Copy)]
struct Expiration {
    level: usize,
    slot: usize,
    /// When the slot starts (ms).
    deadline: u64,
}

fn slot_range(level: usize) -> u64 {
    1 << (SLOT_BITS * level as u32)
}

fn level_range(level: usize) -> u64 {
    slot_range(level + 1)
}

fn level_for(elapsed: u64, when: u64) -> usize {
    let mut masked = (elapsed ^ when) | SLOT_MASK;
    if masked >= MAX_DURATION {
        masked = MAX_DURATION - 1;
    }
    let significant = 63 - masked.leading_zeros() as usize;
    significant / SLOT_BITS as usize
}

impl Wheel {
    pub(crate) fn new() -> Wheel {
        Wheel { elapsed: 0, levels: Default::default(), entries: Vec::new(), free: Vec::new(), pending: 0 }
    }

    /// Timers linked in the wheel (not fired, not removed).
    #[cfg(test)]
    pub(crate) fn pending(&self) -> usize {
        self.pending
    }

    /// Slab size (live plus free entries): the memory high-water mark.
    #[cfg(test)]
    pub(crate) fn capacity(&self) -> usize {
        self.entries.len()
    }

    /// Arm a timer for `deadline` (ms, any `u64`). Returns `None` if that time has already
    /// been reached: the caller completes at once.
    pub(crate) fn insert(&mut self, deadline: u64, waker: Waker) -> Option<TimerKey> {
        if deadline <= self.elapsed {
            return None;
        }
        let entry = Entry { deadline, waker: Some(waker), state: EntryState::Free, prev: None, next: None };
        let key = match self.free.pop() {
            Some(k) => {
                self.entries[k] = entry;
                k
            }
            None => {
                self.entries.push(entry);
                self.entries.len() - 1
            }
        };
        self.link(key);
        self.pending += 1;
        Some(key)
    }

    /// Whether the timer has fired.
    pub(crate) fn is_fired(&self, key: TimerKey) -> bool {
        self.entries[key].state == EntryState::Fired
    }

    /// Replace the waker of a pending timer (unless it would wake the same task). Returns
    /// the waker it replaced, which the caller must drop outside the lock guarding the
    /// wheel (as with [`remove`](Self::remove)).
    #[must_use = "drop the old waker after unlocking the wheel"]
    pub(crate) fn set_waker(&mut self, key: TimerKey, waker: &Waker) -> Option<Waker> {
        let e = &mut self.entries[key];
        if e.waker.as_ref().is_some_and(|w| w.will_wake(waker)) {
            return None;
        }
        e.waker.replace(waker.clone())
    }

    /// Forget a timer, fired or not. Returns its waker, which the caller must drop
    /// outside the lock guarding the wheel (dropping a waker runs arbitrary code), and
    /// whether it was still pending (a cancellation).
    pub(crate) fn remove(&mut self, key: TimerKey) -> (Option<Waker>, bool) {
        let was_pending = matches!(self.entries[key].state, EntryState::Pending { .. });
        if was_pending {
            self.unlink(key);
            self.pending -= 1;
        }
        let e = &mut self.entries[key];
        debug_assert_ne!(e.state, EntryState::Free, "timer removed twice");
        e.state = EntryState::Free;
        self.free.push(key);
        (e.waker.take(), was_pending)
    }

    /// The earliest deadline (ms) of a pending timer's slot, if any: when `poll` next has
    /// something to do.
    pub(crate) fn next_deadline(&self) -> Option<u64> {
        self.next_expiration().map(|e| e.deadline)
    }

    /// Advance to `now` (ms), firing every timer due by then: each fired waker is pushed to
    /// `fired` (the caller wakes them outside the lock). Returns how many fired.
    pub(crate) fn poll(&mut self, now: u64, fired: &mut Vec<Waker>) -> usize {
        let mut count = 0;
        while let Some(exp) = self.next_expiration() {
            if exp.deadline > now {
                break;
            }
            let level = &mut self.levels[exp.level];
            let mut cur = level.heads[exp.slot].take();
            level.occupied &= !(1 << exp.slot);
            self.elapsed = exp.deadline;
            while let Some(key) = cur {
                let e = &mut self.entries[key];
                cur = e.next;
                e.prev = None;
                e.next = None;
                if e.deadline <= exp.deadline {
                    e.state = EntryState::Fired;
                    self.pending -= 1;
                    count += 1;
                    if let Some(w) = e.waker.take() {
                        fired.push(w);
                    }
                } else {
                    // Cascade: file it again relative to the new `elapsed`, a level lower.
                    self.link(key);
                }
            }
        }
        self.elapsed = self.elapsed.max(now);
        count
    }

    /// Fire every pending timer whatever its deadline (the runtime is shutting down):
    /// each waker goes to `fired`. Returns how many fired.
    pub(crate) fn fire_all(&mut self, fired: &mut Vec<Waker>) -> usize {
        let mut count = 0;
        for key in 0..self.entries.len() {
            if let EntryState::Pending { .. } = self.entries[key].state {
                self.unlink(key);
                let e = &mut self.entries[key];
                e.state = EntryState::Fired;
                self.pending -= 1;
                count += 1;
                fired.extend(e.waker.take());
            }
        }
        count
    }

    fn next_expiration(&self) -> Option<Expiration> {
        if self.pending == 0 {
            return None;
        }
        for (level, l) in self.levels.iter().enumerate() {
            if l.occupied == 0 {
                continue;
            }
            let now_slot = (self.elapsed / slot_range(level)) & SLOT_MASK;
            // Only the top level wraps. Its current slot holds nothing due in this rotation
            // (a deadline there would differ from `elapsed` only below the top level's
            // bits, so it is filed lower down), only deadlines a rotation or more away:
            // search from the next slot, so the current one comes last, a rotation on.
            let first = if level == LEVELS - 1 { (now_slot + 1) & SLOT_MASK } else { now_slot };
            let rotated = l.occupied.rotate_right(first as u32);
            let slot = ((rotated.trailing_zeros() as u64 + first) & SLOT_MASK) as usize;
            let level_start = self.elapsed & !(level_range(level) - 1);
            let mut deadline = level_start + slot as u64 * slot_range(level);
            if level == LEVELS - 1 && slot as u64 <= now_slot {
                deadline += level_range(level);
            }
            return Some(Expiration { level, slot, deadline: deadline.max(self.elapsed) });
        }
        None
    }

    fn link(&mut self, key: TimerKey) {
        let deadline = self.entries[key].deadline;
        let level = level_for(self.elapsed, deadline);
        let slot = ((deadline >> (SLOT_BITS * level as u32)) & SLOT_MASK) as usize;
        let head = self.levels[level].heads[slot];
        if let Some(h) = head {
            self.entries[h].prev = Some(key);
        }
        let e = &mut self.entries[key];
        e.prev = None;
        e.next = head;
        e.state = EntryState::Pending { level, slot };
        self.levels[level].heads[slot] = Some(key);
        self.levels[level].occupied |= 1 << slot;
    }

    fn unlink(&mut self, key: TimerKey) {
        let (prev, next, state) = {
            let e = &self.entries[key];
            (e.prev, e.next, e.state)
        };
        let EntryState::Pending { level, slot } = state else { return };
        match prev {
            Some(p) => self.entries[p].next = next,
            None => self.levels[level].heads[slot] = next,
        }
        if let Some(n) = next {
            self.entries[n].prev = prev;
        }
        if self.levels[level].heads[slot].is_none() {
            self.levels[level].occupied &= !(1 << slot);
        }
        let e = &mut self.entries[key];
        e.prev = None;
        e.next = None;
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn fire_until(w: &mut Wheel, now: u64) -> usize {
        let mut v = vec![];
        w.poll(now, &mut v)
    }

    #[test]
    fn fires_in_deadline_order_across_levels() {
        let mut w = Wheel::new();
        let deadlines = [1u64, 5, 63, 64, 65, 100, 4_095, 4_096, 5_000, 300_000, 20_000_000];
        let keys: Vec<_> = deadlines.iter().map(|&d| (d, w.insert(d, Waker::noop().clone()).unwrap())).collect();
        // Poll at one ms before and at each deadline, with big jumps between.
        let mut times: Vec<u64> = deadlines.iter().flat_map(|&d| [d - 1, d]).collect();
        times.sort();
        let mut fired_at: Vec<(u64, u64)> = vec![];
        for now in times {
            fire_until(&mut w, now);
            for (d, k) in &keys {
                if w.is_fired(*k) && !fired_at.iter().any(|(dd, _)| dd == d) {
                    fired_at.push((*d, now));
                }
            }
        }
        // Each fired exactly at its deadline (not early, not late), in order.
        assert_eq!(fired_at, deadlines.iter().map(|&d| (d, d)).collect::<Vec<_>>());
        assert_eq!(w.pending(), 0);
    }

    #[test]
    fn fires_exactly_at_the_deadline_when_polled_every_ms() {
        let mut w = Wheel::new();
        let ds: Vec<u64> = (1..3_000).step_by(37).collect();
        let keys: Vec<_> = ds.iter().map(|&d| w.insert(d, Waker::noop().clone()).unwrap()).collect();
        for now in 1..3_100 {
            fire_until(&mut w, now);
            for (d, k) in ds.iter().zip(&keys) {
                assert_eq!(w.is_fired(*k), *d <= now, "deadline {d} at {now}");
            }
        }
    }

    #[test]
    fn fire_all_fires_every_pending_timer_and_only_those() {
        let mut w = Wheel::new();
        let keys: Vec<_> = [3u64, 70, 5_000, 300_000, MAX_DURATION - 1, MAX_DURATION + 5]
            .iter()
            .map(|&d| w.insert(d, Waker::noop().clone()).unwrap())
            .collect();
        drop(w.remove(keys[1]).0);
        fire_until(&mut w, 10); // fires the first
        let mut fired = vec![];
        assert_eq!(w.fire_all(&mut fired), 4);
        assert_eq!(fired.len(), 4);
        assert_eq!(w.pending(), 0);
        assert!(w.next_deadline().is_none());
        assert!(keys.iter().enumerate().filter(|(i, _)| *i != 1).all(|(_, k)| w.is_fired(*k)));
        // The wheel goes on working: a new timer fires at its deadline.
        let k = w.insert(20_000, Waker::noop().clone()).unwrap();
        assert_eq!(fire_until(&mut w, 20_000), 1);
        assert!(w.is_fired(k));
    }

    #[test]
    fn removed_timers_never_fire_and_slots_are_reused() {
        let mut w = Wheel::new();
        for round in 0..10u64 {
            let keys: Vec<_> =
                (0..1_000).map(|i| w.insert(round * 200 + 5 + i % 50, Waker::noop().clone()).unwrap()).collect();
            for k in keys {
                drop(w.remove(k).0);
            }
            assert_eq!(w.pending(), 0);
            assert_eq!(fire_until(&mut w, round * 200 + 100), 0);
        }
        assert_eq!(w.capacity(), 1_000, "the slab did not grow past the peak");
    }

    /// Deadlines past the wheel's span (and `u64::MAX`) are re-filed at the top level each
    /// rotation and fire exactly when due, never at the end of the first rotation.
    #[test]
    fn deadlines_beyond_the_span_fire_when_due_not_early() {
        let mut w = Wheel::new();
        let span = MAX_DURATION + 1;
        let deadlines = [span - 1, span + 5, 2 * span + 123, 3 * span + 7 * 4_096 + 9];
        let keys: Vec<_> = deadlines.iter().map(|&d| w.insert(d, Waker::noop().clone()).unwrap()).collect();
        let never = w.insert(u64::MAX - 1, Waker::noop().clone()).unwrap();
        for (d, k) in deadlines.iter().zip(&keys) {
            // Jump straight to one ms before, then to the deadline.
            fire_until(&mut w, d - 1);
            assert!(!w.is_fired(*k), "{d} fired early");
            fire_until(&mut w, *d);
            assert!(w.is_fired(*k), "{d} did not fire on time");
        }
        // Poll step by step through a few rotations of the top level too.
        let end = 6 * span;
        let mut now = deadlines[3];
        while now < end {
            now += span / 7;
            fire_until(&mut w, now);
            assert!(!w.is_fired(never), "a never-timer fired at {now}");
        }
        assert_eq!(w.pending(), 1);
        assert!(w.next_deadline().is_some_and(|d| d > now && d <= now + span));
        drop(w.remove(never).0);
        assert_eq!(w.next_deadline(), None);
    }

    #[test]
    fn past_deadline_is_refused_and_far_deadline_is_pending() {
        let mut w = Wheel::new();
        fire_until(&mut w, 10);
        assert!(w.insert(10, Waker::noop().clone()).is_none());
        let k = w.insert(u64::MAX, Waker::noop().clone()).unwrap();
        assert_eq!(w.next_deadline().map(|d| d > 10), Some(true));
        drop(w.remove(k).0);
        assert_eq!(w.next_deadline(), None);
    }
}
