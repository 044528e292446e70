//! The waiter queue of the sync primitives: a doubly linked FIFO list threaded through a
//! slab of slots, kept behind the primitive's mutex.
//!
//! A waiter holds a [`Key`] (a slot and its generation), never a pointer, so the list
//! needs no `unsafe`: a waiter that was served leaves the order (`unlink`) but keeps its
//! slot, with the outcome in it, until its future takes it (`take`). Freed slots are
//! reused, so a busy lock's queue stops allocating once it has grown to its peak.

const NIL: u32 = u32::MAX;

/// A waiter's place: its slot and the slot's generation when it was given out (a stale
/// key never reaches a later waiter's slot).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Key {
    idx: u32,
    gen: u32,
}

struct Slot<T> {
    val: Option<T>,
    gen: u32,
    prev: u32,
    next: u32,
    linked: bool,
}

/// A FIFO of waiters (see the module doc).
pub(crate) struct List<T> {
    slots: Vec<Slot<T>>,
    free: Vec<u32>,
    head: u32,
    tail: u32,
    linked: usize,
}

impl<T> List<T> {
    /// An empty list; allocates nothing until the first push.
    pub(crate) const fn new() -> List<T> {
        List { slots: Vec::new(), free: Vec::new(), head: NIL, tail: NIL, linked: 0 }
    }

    fn slot(&self, k: Key) -> Option<&Slot<T>> {
        self.slots.get(k.idx as usize).filter(|s| s.gen == k.gen && s.val.is_some())
    }

    /// Add a waiter at the back of the order.
    pub(crate) fn push_back(&mut self, val: T) -> Key {
        let idx = match self.free.pop() {
            Some(i) => i,
            None => {
                self.slots.push(Slot { val: None, gen: 0, prev: NIL, next: NIL, linked: false });
                (self.slots.len() - 1) as u32
            }
        };
        let tail = self.tail;
        let s = &mut self.slots[idx as usize];
        s.val = Some(val);
        s.prev = tail;
        s.next = NIL;
        s.linked = true;
        let gen = s.gen;
        if tail == NIL {
            self.head = idx;
        } else {
            self.slots[tail as usize].next = idx;
        }
        self.tail = idx;
        self.linked += 1;
        Key { idx, gen }
    }

    /// Take a waiter out of the order; its slot and value stay until [`List::take`].
    pub(crate) fn unlink(&mut self, k: Key) {
        let Some(s) = self.slot(k) else { return };
        if !s.linked {
            return;
        }
        let (prev, next) = (s.prev, s.next);
        if prev == NIL {
            self.head = next;
        } else {
            self.slots[prev as usize].next = next;
        }
        if next == NIL {
            self.tail = prev;
        } else {
            self.slots[next as usize].prev = prev;
        }
        let s = &mut self.slots[k.idx as usize];
        s.linked = false;
        s.prev = NIL;
        s.next = NIL;
        self.linked -= 1;
    }

    /// Remove a waiter for good (unlinking it if it is still in the order), freeing its
    /// slot.
    pub(crate) fn take(&mut self, k: Key) -> Option<T> {
        self.slot(k)?;
        self.unlink(k);
        let s = &mut self.slots[k.idx as usize];
        s.gen = s.gen.wrapping_add(1);
        let v = s.val.take();
        self.free.push(k.idx);
        v
    }

    /// The waiter at `k`, in the order or not.
    pub(crate) fn get(&self, k: Key) -> Option<&T> {
        self.slot(k)?.val.as_ref()
    }

    /// The waiter at `k`, in the order or not.
    pub(crate) fn get_mut(&mut self, k: Key) -> Option<&mut T> {
        self.slot(k)?;
        self.slots[k.idx as usize].val.as_mut()
    }

    /// Whether `k` is still in the order.
    #[cfg(test)]
    pub(crate) fn is_linked(&self, k: Key) -> bool {
        self.slot(k).is_some_and(|s| s.linked)
    }

    /// The first waiter in the order.
    pub(crate) fn front(&self) -> Option<Key> {
        (self.head != NIL).then(|| Key { idx: self.head, gen: self.slots[self.head as usize].gen })
    }

    /// The last waiter in the order.
    pub(crate) fn back(&self) -> Option<Key> {
        (self.tail != NIL).then(|| Key { idx: self.tail, gen: self.slots[self.tail as usize].gen })
    }

    /// The waiter after `k` in the order.
    #[cfg(test)]
    pub(crate) fn next(&self, k: Key) -> Option<Key> {
        let n = self.slot(k).filter(|s| s.linked)?.next;
        (n != NIL).then(|| Key { idx: n, gen: self.slots[n as usize].gen })
    }

    /// Whether no waiter is in the order (served ones may still hold slots).
    pub(crate) fn is_empty(&self) -> bool {
        self.linked == 0
    }

    /// Waiters in the order.
    pub(crate) fn len(&self) -> usize {
        self.linked
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn fifo_order_with_removal_from_the_middle_and_slot_reuse() {
        let mut l = List::new();
        let a = l.push_back('a');
        let b = l.push_back('b');
        let c = l.push_back('c');
        assert_eq!(l.len(), 3);
        assert_eq!(l.take(b), Some('b'));
        assert_eq!(l.take(b), None, "a stale key finds nothing");
        assert_eq!(l.front(), Some(a));
        assert_eq!(l.next(a), Some(c));
        l.unlink(a);
        assert!(!l.is_linked(a));
        assert_eq!(l.get_mut(a), Some(&mut 'a'), "an unlinked waiter keeps its value");
        assert_eq!(l.front(), Some(c));
        let d = l.push_back('d');
        assert_eq!(d.idx, b.idx, "the freed slot is reused");
        assert_ne!(d, b, "with a new generation");
        assert_eq!(l.get_mut(b), None);
        assert_eq!(l.next(c), Some(d));
        assert_eq!(l.take(c), Some('c'));
        assert_eq!(l.take(d), Some('d'));
        assert!(l.is_empty());
        assert_eq!(l.front(), None);
        assert_eq!(l.take(a), Some('a'));
    }
}
