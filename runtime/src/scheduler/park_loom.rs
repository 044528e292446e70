//! Loom models of the park word (`park.rs`): an unpark is never lost, whether the worker
//! sleeps on its futex or inside the reactor.

use crate::loom::{lock, thread, Arc, Mutex};
use crate::loom_tests::model;
use crate::scheduler::park::ParkState;

#[test]
fn loom_park_unpark_is_never_lost() {
    model(|| {
        let p = Arc::new(ParkState::new());
        let p2 = p.clone();
        let t = thread::spawn(move || p2.unpark(|| unreachable!()));
        // Under loom `park` has no timeout: a lost unpark deadlocks the model.
        let _ = p.park(None);
        t.join().unwrap();
    });
}

/// A stand-in for the reactor's eventfd waker: a sticky flag, as `mio::Waker` is.
struct ModelReactor {
    woken: Mutex<bool>,
    cond: crate::loom::Condvar,
}

impl ModelReactor {
    fn block(&self) {
        let mut w = lock(&self.woken);
        while !*w {
            w = self.cond.wait(w).unwrap();
        }
        *w = false;
    }
    fn wake(&self) {
        *lock(&self.woken) = true;
        self.cond.notify_one();
    }
}

#[test]
fn loom_park_in_reactor_against_unpark() {
    // The "wake while parking in the reactor" race: the unpark may land before the CAS to
    // PARKED_DRIVER, between it and the block, or during the block. The reactor has no
    // timeout here, so a lost wake deadlocks the model.
    model(|| {
        let p = Arc::new(ParkState::new());
        let r = Arc::new(ModelReactor { woken: Mutex::new(false), cond: crate::loom::Condvar::new() });
        let (p2, r2) = (p.clone(), r.clone());
        let t = thread::spawn(move || p2.unpark(|| r2.wake()));
        let _ = p.park_in_driver(|| r.block());
        t.join().unwrap();
    });
}
