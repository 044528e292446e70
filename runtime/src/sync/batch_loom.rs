//! Loom models of the fair semaphore (`batch.rs`), `Notify` and `SetOnce` (built on it):
//! the lock-free fast paths racing the waiter queue. Mutual exclusion with no permit lost,
//! a cancelled partial acquire handing its permits on, a release racing the first
//! waiter's enqueue (no lost wake-up), close against a waiter, an acquire that yields on
//! a spent budget holding what it took, `notify_one` racing `notified`, and a set racing
//! a wait or another set.

use super::batch::{Acquire, Sem};
use super::notify::Notify;
use super::track::{T_MUTEX_LOCK, T_SEM_ACQUIRE};
use crate::loom::{thread, Arc, AtomicUsize};
use crate::loom_tests::model;
use std::future::Future;
use std::pin::pin;
use std::sync::atomic::Ordering::SeqCst;
use std::task::{Context, Poll};

/// Poll `f` to completion on this loom thread, parking between polls.
fn block_on<F: Future>(f: F) -> F::Output {
    struct Unpark(thread::Thread);
    impl std::task::Wake for Unpark {
        fn wake(self: std::sync::Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = std::task::Waker::from(std::sync::Arc::new(Unpark(thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut f = pin!(f);
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        thread::park();
    }
}

/// Two threads take a one-permit semaphore (one through the queue if it must): never
/// both inside, and the permit is back at the end.
#[test]
fn loom_mutual_exclusion_and_no_permit_lost() {
    model(|| {
        let s = Arc::new(Sem::new(1, None));
        let inside = Arc::new(AtomicUsize::new(0));
        let ths: Vec<_> = (0..2)
            .map(|_| {
                let (s, inside) = (s.clone(), inside.clone());
                thread::spawn(move || {
                    block_on(Acquire::new(&s, 1, T_MUTEX_LOCK)).unwrap();
                    assert_eq!(inside.fetch_add(1, SeqCst), 0, "two holders at once");
                    inside.fetch_sub(1, SeqCst);
                    s.clear_holder();
                    s.release(1);
                })
            })
            .collect();
        for t in ths {
            t.join().unwrap();
        }
        assert_eq!(s.available(), 1);
    });
}

/// A waiter for two permits collects one, then is dropped while the other is released:
/// every permit comes back.
#[test]
fn loom_a_dropped_partial_acquire_hands_its_permits_on() {
    model(|| {
        let s = Arc::new(Sem::new(2, None));
        s.try_acquire(1, false).unwrap();
        let s2 = s.clone();
        let t = thread::spawn(move || s2.release(1));
        {
            let mut a = pin!(Acquire::new(&s, 2, T_SEM_ACQUIRE));
            let mut cx = Context::from_waker(std::task::Waker::noop());
            if let Poll::Ready(r) = a.as_mut().poll(&mut cx) {
                r.unwrap();
                s.release(2);
            }
            // Dropped here, served or not.
        }
        t.join().unwrap();
        assert_eq!(s.available(), 2);
    });
}

/// An acquire polled with its task's budget spent takes the permit, or its place in
/// line, and yields: racing another thread that takes and gives back the permit, it is
/// handed the permit on its next poll, or gives back what it holds when dropped. No
/// permit is lost or made up either way.
#[test]
fn loom_an_acquire_yielding_on_a_spent_budget_keeps_or_gives_back_its_permit() {
    for poll_again in [false, true] {
        model(move || {
            let s = Arc::new(Sem::new(1, None));
            let s2 = s.clone();
            let t = thread::spawn(move || {
                let mut a = pin!(Acquire::new(&s2, 1, T_MUTEX_LOCK));
                let mut cx = Context::from_waker(std::task::Waker::noop());
                {
                    // Only this thread polls, so the budget (a thread-local, which loom's
                    // threads share) is this poll's alone.
                    let _spent = crate::task::coop::Budget::spent();
                    assert!(a.as_mut().poll(&mut cx).is_pending(), "a spent budget did not yield");
                }
                if poll_again {
                    if let Poll::Ready(r) = a.as_mut().poll(&mut cx) {
                        r.unwrap();
                        s2.clear_holder();
                        s2.release(1);
                    }
                }
                // Dropped here: held, queued, served or handed over.
            });
            if s.try_acquire(1, true).is_ok() {
                s.clear_holder();
                s.release(1);
            }
            t.join().unwrap();
            assert_eq!(s.available(), 1, "a permit was lost or made up");
        });
    }
}

/// `close` against a queued waiter: the waiter ends with an error (never hangs), and
/// the permit held comes back.
#[test]
fn loom_close_wakes_a_queued_waiter() {
    model(|| {
        let s = Arc::new(Sem::new(1, None));
        s.try_acquire(1, false).unwrap();
        let s2 = s.clone();
        let t = thread::spawn(move || block_on(Acquire::new(&s2, 1, T_SEM_ACQUIRE)));
        s.close();
        s.release(1);
        let r = t.join().unwrap();
        // Either it got the permit before the close, or it failed: it never waits on.
        if r.is_ok() {
            s.release(1);
        }
        assert_eq!(s.available(), 1);
    });
}

/// `notify_one` racing a `notified` on another thread: the waiter always completes.
#[test]
fn loom_notify_one_is_never_lost() {
    model(|| {
        let n = Arc::new(Notify::new());
        let n2 = n.clone();
        let t = thread::spawn(move || block_on(n2.notified()));
        n.notify_one();
        t.join().unwrap();
    });
}

/// A fast exclusive acquire racing the first waiter's enqueue: whenever the waiter ends
/// up queued, the probe a reader sees names the holder (the fast path's refresh).
#[test]
fn loom_the_probe_names_a_holder_that_raced_the_first_waiter() {
    model(|| {
        let s = Arc::new(Sem::new(1, None));
        let probe = s.track_for_test();
        let s2 = s.clone();
        let a = thread::spawn(move || s2.try_acquire(1, true).is_ok());
        let mut b = Box::pin(Acquire::new(&s, 1, T_MUTEX_LOCK));
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let b_ready = b.as_mut().poll(&mut cx).is_ready();
        let a_holds = a.join().unwrap();
        if !b_ready {
            assert!(a_holds);
            assert_eq!(probe.read().holder, super::track::OUTSIDE, "the queued waiter's probe lost the holder");
            s.clear_holder();
            s.release(1);
            assert!(b.as_mut().poll(&mut cx).is_ready(), "the release handed the lock on");
        }
        s.clear_holder();
        s.release(1);
        drop(b);
        assert_eq!(s.available(), 1);
    });
}

/// On a tracked semaphore, uncontended acquires and releases on two threads racing each
/// other and a waiter: once all are done, the probe agrees with the semaphore (no holder,
/// every permit free, nobody queued), whatever the interleaving of their refreshes.
#[test]
fn loom_the_probe_ends_current_after_uncontended_paths() {
    model(|| {
        let s = Arc::new(Sem::new(1, None));
        let probe = s.track_for_test();
        let s2 = s.clone();
        let a = thread::spawn(move || {
            if s2.try_acquire(1, true).is_ok() {
                s2.clear_holder();
                s2.release(1);
            }
        });
        block_on(Acquire::new(&s, 1, T_MUTEX_LOCK)).unwrap();
        assert_eq!(probe.read().holder, super::track::OUTSIDE, "the holder is shown while it holds");
        s.clear_holder();
        s.release(1);
        a.join().unwrap();
        let r = probe.read();
        assert_eq!((r.holder, r.free, r.waiters), (0, 1, 0), "a stale probe: {r:?}");
        assert_eq!(s.available(), 1);
    });
}

/// `SetOnce::set` racing a `wait` on another thread: the waiter always completes with
/// the value, whichever of its two looks the set lands between.
#[test]
fn loom_set_once_wait_never_misses_the_set() {
    model(|| {
        let cell = Arc::new(super::SetOnce::new());
        let c2 = cell.clone();
        let t = thread::spawn(move || *block_on(c2.wait()));
        assert!(cell.set(7).is_ok());
        assert_eq!(t.join().unwrap(), 7);
    });
}

/// Two sets race: one wins, and the loser's failure comes only once the winner's value
/// can be read.
#[test]
fn loom_set_once_a_failed_set_sees_the_winner() {
    model(|| {
        let cell = Arc::new(super::SetOnce::new());
        let c2 = cell.clone();
        let t = thread::spawn(move || match c2.set(1) {
            Ok(()) => None,
            Err(e) => Some((e.0, *c2.get().expect("failed, yet nothing to read"))),
        });
        let here = match cell.set(2) {
            Ok(()) => None,
            Err(e) => Some((e.0, *cell.get().expect("failed, yet nothing to read"))),
        };
        let there = t.join().unwrap();
        match (here, there) {
            (None, Some((1, 2))) | (Some((2, 1)), None) => {}
            other => panic!("not one winner read by the loser: {other:?}"),
        }
    });
}
