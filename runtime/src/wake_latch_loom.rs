//! Loom model of the io_uring reactor's wake latch (`wake_latch.rs`): two wakers, each
//! after a change of state, and a holder that reaps and waits until it has seen both
//! changes. A lost wake leaves the holder waiting for good, which loom reports.

use crate::loom::{lock, thread, Arc, AtomicUsize, Condvar, Mutex};
use crate::loom_tests::model_bounded;
use crate::wake_latch::WakeLatch;
use std::sync::atomic::Ordering::{Acquire, Release};

/// A stand-in for the ring's completion queue: the wakes' completions not yet reaped.
struct ModelQueue {
    wakes: Mutex<usize>,
    posted: Condvar,
}

impl ModelQueue {
    fn post(&self) {
        *lock(&self.wakes) += 1;
        self.posted.notify_one();
    }
    fn reap(&self) -> usize {
        std::mem::take(&mut *lock(&self.wakes))
    }
    /// `io_uring_enter` waiting for one completion: returns at once if one is there.
    fn wait(&self) {
        let mut w = lock(&self.wakes);
        while *w == 0 {
            w = self.posted.wait(w).unwrap();
        }
    }
}

#[test]
fn loom_wake_latch_loses_no_wake() {
    // Two preemptions cover each waker landing before, during and after a reap.
    model_bounded(2, || {
        let latch = Arc::new(WakeLatch::new());
        let queue = Arc::new(ModelQueue { wakes: Mutex::new(0), posted: Condvar::new() });
        let changes = Arc::new(AtomicUsize::new(0));
        let wakers: Vec<_> = (0..2)
            .map(|_| {
                let (latch, queue, changes) = (latch.clone(), queue.clone(), changes.clone());
                thread::spawn(move || {
                    changes.fetch_add(1, Release);
                    if latch.close() {
                        queue.post();
                    }
                })
            })
            .collect();
        loop {
            for _ in 0..queue.reap() {
                latch.reopen();
            }
            if changes.load(Acquire) == 2 {
                break;
            }
            queue.wait();
        }
        for w in wakers {
            w.join().unwrap();
        }
    });
}
