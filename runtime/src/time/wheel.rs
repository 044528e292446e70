//! A hierarchical timing wheel: 6 levels of 64 slots, 1 ms per level-0 slot, so level `l`
//! slots are `64^l` ms wide and the wheel spans 64^6 ms (about 2.2 years). A later deadline
//! is filed in the top level and re-filed each time its slot comes round, until it is due:
//! it never fires early.
//!
//! # Where a timer's memory is
//! Each slot is an intrusive doubly-linked list of [`Entry`]s, and an entry lives inside
//! the future that owns the timer (a `Sleep`, pinned while it is armed), not in the
//! wheel: insert, remove and fire are O(1) pointer updates, and the wheel allocates
//! nothing. So a timer costs only its future's own bytes, and a dropped sleep gives its
//! memory back with it. (Entries kept in a slab owned by the wheel cost a second copy of
//! each timer's state, and the slab never shrank: with half of 500,000 armed sleeps
//! dropped, it still held 81% of its peak, against 50% for Tokio, whose timers are
//! intrusive too.)
//!
//! The price is `unsafe`: the wheel holds raw pointers to entries it does not own. The
//! contract, on every method that takes a [`TimerKey`]: the entry is pinned (it never
//! moves while linked), it is only touched through the wheel it is armed on, with that
//! wheel's lock held, and its owner removes it (`remove`) before the entry is dropped.
//! `Sleep` keeps it: it arms only from a pinned poll or `reset`, and its `Drop` removes the entry
//! under the lock. The wheel itself never outlives an armed entry's need for it: each
//! `Sleep` holds its runtime's driver (and so the wheel) alive.
//!
//! An entry sits at the level given by the highest bit in which its deadline differs
//! from `elapsed` (the wheel's current time): level 0 holds the deadlines in the current
//! 64 ms window, level 1 those in the current 4,096 ms window, and so on. So the lowest
//! occupied level holds the earliest deadline. [`Wheel::poll`] repeatedly takes the
//! earliest occupied slot whose start has passed, fires the entries due by then, and
//! re-files the rest one level down ("cascading"), until the next slot is in the future.

use std::cell::UnsafeCell;
use std::marker::PhantomPinned;
use std::ptr::NonNull;
use std::task::Waker;

const LEVELS: usize = 6;
const SLOTS: usize = 64;
const SLOT_BITS: u32 = 6;
const SLOT_MASK: u64 = SLOTS as u64 - 1;
/// The furthest deadline the wheel represents, in ms past `elapsed`.
pub(crate) const MAX_DURATION: u64 = (1 << (SLOT_BITS * LEVELS as u32)) - 1;

/// A timer as the wheel sees it: a pointer to its entry (see the module doc's contract).
pub(crate) type TimerKey = NonNull<Entry>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum EntryState {
    /// Not in the wheel (never armed, or removed).
    Idle,
    /// Linked into `levels[level].heads[slot]`.
    Pending { level: u8, slot: u8 },
    /// Its deadline passed; unlinked; waits for its owner to look (and remove it).
    Fired,
}

/// One timer's place in the wheel, embedded in the future that owns the timer.
pub(crate) struct Entry {
    node: UnsafeCell<Node>,
    /// Linked entries are found through raw pointers: they must never move.
    _pinned: PhantomPinned,
}

struct Node {
    deadline: u64,
    waker: Option<Waker>,
    state: EntryState,
    prev: Option<TimerKey>,
    next: Option<TimerKey>,
}

// SAFETY: the node is only read or written through the wheel it is armed on, with that
// wheel's lock held (the module doc's contract), so moving the owner to another thread or
// sharing references to it lets no two threads touch the node at once; the waker inside
// is `Send + Sync`.
unsafe impl Send for Entry {}
// SAFETY: as above: `&Entry` gives no access to the node without the wheel's lock.
unsafe impl Sync for Entry {}

impl Entry {
    pub(crate) const fn new() -> Entry {
        Entry {
            node: UnsafeCell::new(Node { deadline: 0, waker: None, state: EntryState::Idle, prev: None, next: None }),
            _pinned: PhantomPinned,
        }
    }

    /// This entry as the wheel's key. The caller keeps the module doc's contract for it
    /// from the first time it passes it to the wheel.
    pub(crate) fn key(&self) -> TimerKey {
        NonNull::from(self)
    }
}

impl Default for Entry {
    fn default() -> Entry {
        Entry::new()
    }
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
    pending: usize,
}

// SAFETY: the wheel's pointers lead to entries that are `Send` and, by the contract, are
// only touched through this wheel, which its lock guards.
unsafe impl Send for Wheel {}

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

/// The node behind `key`.
///
/// # Safety
/// The module doc's contract holds for `key`, and the caller holds the wheel's lock (a
/// `&mut Wheel`); no other reference to this node is alive.
#[allow(clippy::mut_from_ref)]
unsafe fn node<'a>(key: TimerKey) -> &'a mut Node {
    // SAFETY: the caller's contract: the entry is alive and pinned, and only the holder of
    // the wheel's lock touches its node, through one reference at a time.
    unsafe { &mut *key.as_ref().node.get() }
}

impl Wheel {
    pub(crate) fn new() -> Wheel {
        Wheel { elapsed: 0, levels: Default::default(), pending: 0 }
    }

    /// Timers linked in the wheel (not fired, not removed).
    #[cfg(test)]
    pub(crate) fn pending(&self) -> usize {
        self.pending
    }

    /// Arm the timer at `key` for `deadline` (ms, any `u64`). Returns `false` if that
    /// time has already been reached: the caller completes at once.
    ///
    /// # Safety
    /// The module doc's contract, from now until the entry is removed; the entry is not
    /// in a wheel now (never armed, or removed since).
    pub(crate) unsafe fn insert(&mut self, key: TimerKey, deadline: u64, waker: Waker) -> bool {
        if deadline <= self.elapsed {
            return false;
        }
        {
            // SAFETY: the caller's contract; the reference ends before `link`.
            let n = unsafe { node(key) };
            debug_assert_eq!(n.state, EntryState::Idle, "a timer armed twice");
            n.deadline = deadline;
            n.waker = Some(waker);
        }
        // SAFETY: the caller's contract.
        unsafe { self.link(key) };
        self.pending += 1;
        true
    }

    /// Whether the timer has fired.
    ///
    /// # Safety
    /// The module doc's contract holds for `key`.
    pub(crate) unsafe fn is_fired(&self, key: TimerKey) -> bool {
        // SAFETY: the caller's contract (`&self` is the lock's guard here too).
        unsafe { (*key.as_ref().node.get()).state == EntryState::Fired }
    }

    /// Replace the waker of a pending timer (unless it would wake the same task). Returns
    /// the waker it replaced, which the caller must drop outside the lock guarding the
    /// wheel (as with [`remove`](Self::remove)).
    ///
    /// # Safety
    /// The module doc's contract holds for `key`.
    #[must_use = "drop the old waker after unlocking the wheel"]
    pub(crate) unsafe fn set_waker(&mut self, key: TimerKey, waker: &Waker) -> Option<Waker> {
        // SAFETY: the caller's contract.
        let n = unsafe { node(key) };
        if n.waker.as_ref().is_some_and(|w| w.will_wake(waker)) {
            return None;
        }
        n.waker.replace(waker.clone())
    }

    /// Take a timer out, fired or not; after this the wheel holds no pointer to it.
    /// Returns its waker, which the caller must drop outside the lock guarding the wheel
    /// (dropping a waker runs arbitrary code), and whether it was still pending (a
    /// cancellation).
    ///
    /// # Safety
    /// The module doc's contract holds for `key` (until this returns).
    pub(crate) unsafe fn remove(&mut self, key: TimerKey) -> (Option<Waker>, bool) {
        // SAFETY: the caller's contract.
        let was_pending = matches!(unsafe { node(key) }.state, EntryState::Pending { .. });
        if was_pending {
            // SAFETY: the caller's contract.
            unsafe { self.unlink(key) };
            self.pending -= 1;
        }
        // SAFETY: the caller's contract.
        let n = unsafe { node(key) };
        n.state = EntryState::Idle;
        (n.waker.take(), was_pending)
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
                // SAFETY: every linked entry keeps the contract (its owner removes it
                // before it is dropped), and `&mut self` is the lock's guard.
                let n = unsafe { node(key) };
                cur = n.next;
                n.prev = None;
                n.next = None;
                if n.deadline <= exp.deadline {
                    n.state = EntryState::Fired;
                    self.pending -= 1;
                    count += 1;
                    if let Some(w) = n.waker.take() {
                        fired.push(w);
                    }
                } else {
                    // Cascade: file it again relative to the new `elapsed`, a level lower.
                    // SAFETY: as above.
                    unsafe { self.link(key) };
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
        for level in &mut self.levels {
            for head in &mut level.heads {
                let mut cur = head.take();
                while let Some(key) = cur {
                    // SAFETY: as in `poll`.
                    let n = unsafe { node(key) };
                    cur = n.next;
                    n.prev = None;
                    n.next = None;
                    n.state = EntryState::Fired;
                    count += 1;
                    fired.extend(n.waker.take());
                }
            }
            level.occupied = 0;
        }
        self.pending -= count;
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

    /// # Safety
    /// The contract holds for `key`, which is not linked now.
    unsafe fn link(&mut self, key: TimerKey) {
        // SAFETY: the caller's contract.
        let deadline = unsafe { node(key) }.deadline;
        let level = level_for(self.elapsed, deadline);
        let slot = ((deadline >> (SLOT_BITS * level as u32)) & SLOT_MASK) as usize;
        let head = self.levels[level].heads[slot];
        if let Some(h) = head {
            // SAFETY: a linked entry (the contract), not `key` (which is not linked).
            unsafe { node(h) }.prev = Some(key);
        }
        // SAFETY: the caller's contract.
        let n = unsafe { node(key) };
        n.prev = None;
        n.next = head;
        n.state = EntryState::Pending { level: level as u8, slot: slot as u8 };
        self.levels[level].heads[slot] = Some(key);
        self.levels[level].occupied |= 1 << slot;
    }

    /// # Safety
    /// The contract holds for `key`.
    unsafe fn unlink(&mut self, key: TimerKey) {
        let (prev, next, state) = {
            // SAFETY: the caller's contract.
            let n = unsafe { node(key) };
            (n.prev, n.next, n.state)
        };
        let EntryState::Pending { level, slot } = state else { return };
        let (level, slot) = (level as usize, slot as usize);
        match prev {
            // SAFETY: linked neighbours keep the contract; each reference is the only one.
            Some(p) => unsafe { node(p) }.next = next,
            None => self.levels[level].heads[slot] = next,
        }
        if let Some(nx) = next {
            // SAFETY: as above.
            unsafe { node(nx) }.prev = prev;
        }
        if self.levels[level].heads[slot].is_none() {
            self.levels[level].occupied &= !(1 << slot);
        }
        // SAFETY: the caller's contract.
        let n = unsafe { node(key) };
        n.prev = None;
        n.next = None;
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::pin::Pin;

    fn fire_until(w: &mut Wheel, now: u64) -> usize {
        let mut v = vec![];
        w.poll(now, &mut v)
    }

    /// The tests' timers: entries pinned in boxes. Each test declares its `Timers` before
    /// its wheel, so the entries outlive the wheel (the contract asks no more of them
    /// then: a wheel that is gone touches nothing).
    #[derive(Default)]
    struct Timers(Vec<Pin<Box<Entry>>>);

    impl Timers {
        fn insert(&mut self, w: &mut Wheel, deadline: u64) -> Option<TimerKey> {
            let e = Box::pin(Entry::new());
            let key = e.key();
            self.0.push(e);
            // SAFETY: boxed and pinned, never touched but through `w`, and kept until the
            // end of the test, after `w` is gone.
            unsafe { w.insert(key, deadline, Waker::noop().clone()) }.then_some(key)
        }
    }

    fn is_fired(w: &Wheel, k: TimerKey) -> bool {
        // SAFETY: every key here is from `Timers::insert`.
        unsafe { w.is_fired(k) }
    }

    fn remove(w: &mut Wheel, k: TimerKey) -> bool {
        // SAFETY: every key here is from `Timers::insert`.
        unsafe { w.remove(k) }.1
    }

    #[test]
    fn fires_in_deadline_order_across_levels() {
        let mut t = Timers::default();
        let mut w = Wheel::new();
        let deadlines = [1u64, 5, 63, 64, 65, 100, 4_095, 4_096, 5_000, 300_000, 20_000_000];
        let keys: Vec<_> = deadlines.iter().map(|&d| (d, t.insert(&mut w, d).unwrap())).collect();
        // Poll at one ms before and at each deadline, with big jumps between.
        let mut times: Vec<u64> = deadlines.iter().flat_map(|&d| [d - 1, d]).collect();
        times.sort();
        let mut fired_at: Vec<(u64, u64)> = vec![];
        for now in times {
            fire_until(&mut w, now);
            for (d, k) in &keys {
                if is_fired(&w, *k) && !fired_at.iter().any(|(dd, _)| dd == d) {
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
        let mut t = Timers::default();
        let mut w = Wheel::new();
        let end = if cfg!(miri) { 300 } else { 3_000 };
        let ds: Vec<u64> = (1..end).step_by(37).collect();
        let keys: Vec<_> = ds.iter().map(|&d| t.insert(&mut w, d).unwrap()).collect();
        for now in 1..end + 100 {
            fire_until(&mut w, now);
            for (d, k) in ds.iter().zip(&keys) {
                assert_eq!(is_fired(&w, *k), *d <= now, "deadline {d} at {now}");
            }
        }
    }

    #[test]
    fn fire_all_fires_every_pending_timer_and_only_those() {
        let mut t = Timers::default();
        let mut w = Wheel::new();
        let keys: Vec<_> = [3u64, 70, 5_000, 300_000, MAX_DURATION - 1, MAX_DURATION + 5]
            .iter()
            .map(|&d| t.insert(&mut w, d).unwrap())
            .collect();
        assert!(remove(&mut w, keys[1]));
        fire_until(&mut w, 10); // fires the first
        let mut fired = vec![];
        assert_eq!(w.fire_all(&mut fired), 4);
        assert_eq!(fired.len(), 4);
        assert_eq!(w.pending(), 0);
        assert!(w.next_deadline().is_none());
        assert!(keys.iter().enumerate().filter(|(i, _)| *i != 1).all(|(_, k)| is_fired(&w, *k)));
        // The wheel goes on working: a new timer fires at its deadline.
        let k = t.insert(&mut w, 20_000).unwrap();
        assert_eq!(fire_until(&mut w, 20_000), 1);
        assert!(is_fired(&w, k));
    }

    #[test]
    fn removed_timers_never_fire_and_their_entries_can_go() {
        let mut w = Wheel::new();
        // Smaller under Miri, which runs it about a thousand times slower.
        let (rounds, per_round) = if cfg!(miri) { (2, 100) } else { (10, 1_000) };
        for round in 0..rounds {
            let mut t = Timers::default();
            let keys: Vec<_> = (0..per_round).map(|i| t.insert(&mut w, round * 200 + 5 + i % 50).unwrap()).collect();
            // Every other one is removed and its entry freed at once; the rest are removed
            // last, in reverse, so unlinking meets both ends and the middle of the lists.
            for k in keys.iter().step_by(2) {
                assert!(remove(&mut w, *k));
            }
            let mut i = 0;
            t.0.retain(|_| {
                i += 1;
                i % 2 == 0
            });
            assert_eq!(w.pending(), per_round as usize / 2);
            for k in keys.iter().skip(1).step_by(2).rev() {
                assert!(remove(&mut w, *k));
            }
            assert_eq!(w.pending(), 0);
            assert_eq!(w.next_deadline(), None);
            drop(t);
            assert_eq!(fire_until(&mut w, round * 200 + 100), 0);
        }
    }

    /// A fired timer's entry can be armed again once removed, and one removed while
    /// pending can too: the entry carries nothing over.
    #[test]
    fn an_entry_is_armed_again_after_remove() {
        let mut t = Timers::default();
        let mut w = Wheel::new();
        let k = t.insert(&mut w, 5).unwrap();
        assert_eq!(fire_until(&mut w, 5), 1);
        assert!(is_fired(&w, k));
        assert!(!remove(&mut w, k), "a fired timer is not a cancellation");
        // SAFETY: `k` is from `Timers::insert`, removed above.
        assert!(unsafe { w.insert(k, 9, Waker::noop().clone()) });
        assert!(!is_fired(&w, k));
        assert!(remove(&mut w, k));
        // SAFETY: as above.
        assert!(unsafe { w.insert(k, 12, Waker::noop().clone()) });
        assert_eq!(fire_until(&mut w, 11), 0);
        assert_eq!(fire_until(&mut w, 12), 1);
        assert!(is_fired(&w, k));
        assert!(!remove(&mut w, k));
    }

    /// Deadlines past the wheel's span (and `u64::MAX`) are re-filed at the top level each
    /// rotation and fire exactly when due, never at the end of the first rotation.
    #[test]
    fn deadlines_beyond_the_span_fire_when_due_not_early() {
        let mut t = Timers::default();
        let mut w = Wheel::new();
        let span = MAX_DURATION + 1;
        let deadlines = [span - 1, span + 5, 2 * span + 123, 3 * span + 7 * 4_096 + 9];
        let keys: Vec<_> = deadlines.iter().map(|&d| t.insert(&mut w, d).unwrap()).collect();
        let never = t.insert(&mut w, u64::MAX - 1).unwrap();
        for (d, k) in deadlines.iter().zip(&keys) {
            // Jump straight to one ms before, then to the deadline.
            fire_until(&mut w, d - 1);
            assert!(!is_fired(&w, *k), "{d} fired early");
            fire_until(&mut w, *d);
            assert!(is_fired(&w, *k), "{d} did not fire on time");
        }
        // Poll step by step through a few rotations of the top level too.
        let end = 6 * span;
        let mut now = deadlines[3];
        while now < end {
            now += span / 7;
            fire_until(&mut w, now);
            assert!(!is_fired(&w, never), "a never-timer fired at {now}");
        }
        assert_eq!(w.pending(), 1);
        assert!(w.next_deadline().is_some_and(|d| d > now && d <= now + span));
        assert!(remove(&mut w, never));
        assert_eq!(w.next_deadline(), None);
    }

    #[test]
    fn past_deadline_is_refused_and_far_deadline_is_pending() {
        let mut t = Timers::default();
        let mut w = Wheel::new();
        fire_until(&mut w, 10);
        assert!(t.insert(&mut w, 10).is_none());
        let k = t.insert(&mut w, u64::MAX).unwrap();
        assert_eq!(w.next_deadline().map(|d| d > 10), Some(true));
        assert!(remove(&mut w, k));
        assert_eq!(w.next_deadline(), None);
    }
}
