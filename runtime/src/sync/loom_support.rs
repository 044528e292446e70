//! What the loom models of `sync` share: a `block_on` that parks a loom thread on a
//! condvar between polls, so that a model's threads can wait on the primitives' futures.

use crate::loom::{lock, Condvar, Mutex};
use std::future::Future;
use std::task::{Context, Poll, Waker};

/// A waker that sets a flag under loom's mutex and signals its condvar.
struct Signal {
    woken: Mutex<bool>,
    cv: Condvar,
}

impl std::task::Wake for Signal {
    fn wake(self: std::sync::Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &std::sync::Arc<Self>) {
        *lock(&self.woken) = true;
        self.cv.notify_one();
    }
}

/// Poll `f` on this loom thread, sleeping on the condvar between wakes.
pub(super) fn block_on<F: Future>(f: F) -> F::Output {
    let signal = std::sync::Arc::new(Signal { woken: Mutex::new(false), cv: Condvar::new() });
    let waker = Waker::from(signal.clone());
    let mut cx = Context::from_waker(&waker);
    let mut f = std::pin::pin!(f);
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        let mut woken = lock(&signal.woken);
        while !*woken {
            woken = signal.cv.wait(woken).unwrap();
        }
        *woken = false;
    }
}
