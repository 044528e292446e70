//! The loom model of the LIFO slot (`lifo.rs`): the owner against a thief.

use crate::loom::{thread, Arc};
use crate::loom_tests::{assert_each_once, model};

/// The LIFO slot: the owner pushes two tasks (the second displaces the first) and pops,
/// while another worker steals whatever it sees there, twice. Every task ends up with
/// exactly one of them (or is still in the slot), and a thief sees what the owner wrote
/// into a task before publishing it (loom checks the cell's accesses).
#[test]
fn loom_lifo_slot_owner_against_a_thief() {
    use crate::loom::UnsafeCell;
    use crate::scheduler::lifo::LifoSlot;
    use std::ptr::NonNull;
    type Item = UnsafeCell<u64>;
    fn take(p: NonNull<Item>) -> u64 {
        // SAFETY: every item is a leaked box, and whoever takes it from the slot owns it.
        let b = unsafe { Box::from_raw(p.as_ptr()) };
        // SAFETY: the taker owns the item now; nobody else touches it.
        b.with(|v| unsafe { *v })
    }
    model(|| {
        let slot = Arc::new(LifoSlot::<Item>::new());
        let thief = {
            let slot = slot.clone();
            thread::spawn(move || {
                let mut got = vec![];
                for _ in 0..2 {
                    if let Some(t) = slot.peek().and_then(|p| slot.steal(p)) {
                        got.push(take(t));
                    }
                }
                got
            })
        };
        let item = |v: u64| {
            let p = NonNull::from(Box::leak(Box::new(UnsafeCell::new(0))));
            // SAFETY: not yet published: only this thread knows the item.
            unsafe { p.as_ref() }.with_mut(|x| unsafe { *x = v });
            p
        };
        let mut got = vec![];
        assert!(slot.push(item(1)).is_none(), "the slot starts empty");
        got.extend(slot.push(item(2)).map(take));
        got.extend(slot.pop().map(take));
        got.extend(thief.join().unwrap());
        got.extend(slot.pop().map(take));
        assert_each_once(got, vec![1, 2]);
    });
}
