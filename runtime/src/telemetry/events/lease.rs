//! Leases on the rings for threads outside the runtime.
//!
//! Records from a thread that is not one of the runtime's workers (a spawn from `main` or
//! from inside `block_on`, a wake from a plain thread or the blocking pool) used to go
//! into the shared remote ring, whose writers claim each position with locked
//! instructions. Most programs have one or two such threads that record often, so the
//! recorder keeps [`OUTSIDE_RINGS`](super::ring::OUTSIDE_RINGS) single-writer rings for
//! them: the first thread to record while one is free takes it, writes it as a worker
//! writes its own, and gives it back when it exits or records into another runtime.
//! Threads that record only now and then give it back as soon as they are done: a
//! blocking-pool thread before each job and when it goes idle. Threads beyond two share
//! the remote ring as before.
//!
//! A lease is one flag per ring. Taking it is a compare-exchange with Acquire; giving it
//! back is a store with Release. So the next holder sees everything the last one wrote
//! into the ring, including its sequence word, and continues from it. The thread keeps
//! its lease in a thread-local, with the flags' `Arc`: that `Arc` says which runtime the
//! lease is for, and keeps the flags alive for the thread's exit, whichever of the two
//! goes first.

use crate::loom::{Arc, AtomicBool};
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};

/// The lease flags of one recorder's outside rings (`true`: held).
pub(crate) struct Leases {
    held: Box<[AtomicBool]>,
}

impl Leases {
    pub(crate) fn new(rings: usize) -> Arc<Leases> {
        Arc::new(Leases { held: (0..rings).map(|_| AtomicBool::new(false)).collect() })
    }

    /// Take a free ring's lease: its index, or `None` when every one is held.
    pub(crate) fn try_take(&self) -> Option<usize> {
        self.held.iter().position(|h| {
            // A Relaxed look first, so a thread that finds every ring held (and looks again
            // at each of its records) does not write to the flags' cache line.
            // Acquire on success: see the module doc.
            !h.load(Relaxed) && h.compare_exchange(false, true, Acquire, Relaxed).is_ok()
        })
    }

    /// Give back the lease on ring `index` (taken by `try_take`), after the holder's last
    /// write into it.
    pub(crate) fn release(&self, index: usize) {
        debug_assert!(self.held[index].load(Relaxed), "released a lease nobody held");
        self.held[index].store(false, Release);
    }
}

#[cfg(not(loom))]
pub(crate) use held::{held_ring, release_current};

#[cfg(not(loom))]
mod held {
    use super::Leases;
    use std::cell::RefCell;
    use std::sync::Arc;

    /// A lease this thread holds: ring `index` of the recorder whose flags are `leases`.
    struct Lease {
        leases: Arc<Leases>,
        index: usize,
    }

    impl Drop for Lease {
        fn drop(&mut self) {
            self.leases.release(self.index);
        }
    }

    thread_local! {
        static LEASE: RefCell<Option<Lease>> = const { RefCell::new(None) };
    }

    /// The index of the outside ring this thread holds in the recorder with `leases`,
    /// taking a free one if it holds none there (and giving back one it held in another
    /// runtime's recorder). `None`: every ring is held by other threads, or this thread
    /// is exiting; the caller writes the shared ring.
    #[inline]
    pub(crate) fn held_ring(leases: &Arc<Leases>) -> Option<usize> {
        LEASE
            .try_with(|slot| {
                // Not reentrant: nothing this does records an event.
                let mut slot = slot.try_borrow_mut().ok()?;
                if let Some(l) = slot.as_ref() {
                    if Arc::ptr_eq(&l.leases, leases) {
                        return Some(l.index);
                    }
                }
                let index = leases.try_take()?;
                // Dropping the old lease (another runtime's) gives it back.
                *slot = Some(Lease { leases: Arc::clone(leases), index });
                Some(index)
            })
            .ok()
            .flatten()
    }

    /// Give back the lease this thread holds, if any: a thread that will record nothing
    /// for a while (a blocking-pool thread going idle) leaves its ring to another.
    pub(crate) fn release_current() {
        let _ = LEASE.try_with(|slot| {
            if let Ok(mut slot) = slot.try_borrow_mut() {
                slot.take();
            }
        });
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// Two leases for three threads: the first two that ask get one each and keep it, the
    /// third finds none until one of them gives its lease back (by exiting, or by
    /// `release_current`), and a thread that holds a lease in one recorder's flags trades
    /// it for one in another's.
    #[test]
    fn threads_take_free_leases_keep_them_and_give_them_back() {
        let leases = Leases::new(2);
        let (tx, rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
        let holder = {
            let leases = leases.clone();
            std::thread::spawn(move || {
                let i = held_ring(&leases);
                tx.send(i).unwrap();
                // The same lease on every later record.
                assert_eq!(held_ring(&leases), i);
                stop_rx.recv().unwrap();
            })
        };
        let first = rx.recv().unwrap().expect("a free lease");
        let mine = held_ring(&leases).expect("the second lease");
        assert_ne!(first, mine);
        let third = {
            let leases = leases.clone();
            std::thread::spawn(move || held_ring(&leases)).join().unwrap()
        };
        assert_eq!(third, None, "a third thread got a lease while two were held");
        // The holder exits: its lease is free again.
        stop_tx.send(()).unwrap();
        holder.join().unwrap();
        let after_exit = {
            let leases = leases.clone();
            std::thread::spawn(move || held_ring(&leases)).join().unwrap()
        };
        assert_eq!(after_exit, Some(first), "an exited thread's lease was not given back");
        // `release_current` gives this thread's back: both are free now.
        release_current();
        let (a, b) = (leases.try_take(), leases.try_take());
        assert_eq!((a, b), (Some(0), Some(1)), "this thread's lease was not given back");
        assert_eq!(leases.try_take(), None);
        leases.release(0);
        leases.release(1);
        // A lease in another recorder replaces this thread's.
        assert_eq!(held_ring(&leases), Some(0));
        let other = Leases::new(1);
        assert_eq!(held_ring(&other), Some(0));
        assert_eq!(leases.try_take(), Some(0), "the first recorder's lease was not given back");
        assert_eq!(other.try_take(), None, "this thread's lease in the second recorder was lost");
        release_current();
        assert_eq!(other.try_take(), Some(0));
    }
}
