#![cfg(feature = "sync")]
//! `volt::sync`'s locks, semaphore, `Notify`, `Barrier`, `OnceCell` and `SetOnce`, against Tokio's
//! documented behaviour: fairness, cancellation, closing, permit semantics, exactly-once
//! initialization, no lost update under contention, and each wait named in
//! `Telemetry::tasks()` with the holder at the time of reading.
//!
//! Ordering tests poll the futures by hand with a no-op waker, so the queue order is
//! the order of the first polls and nothing depends on scheduling. Waits on a runtime
//! are bounded (10 s) and assert nothing about time.

use std::future::Future;
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};
use volt::sync::{Barrier, Mutex, Notify, OnceCell, RwLock, Semaphore, SetOnce, SetOnceError, TryAcquireError};
use volt::telemetry::{Resource, ResourceHolder, SyncHolder, SyncWait, TaskInfo, WaitReason};

fn poll_once<F: Future + ?Sized>(f: Pin<&mut F>) -> Poll<F::Output> {
    f.poll(&mut Context::from_waker(Waker::noop()))
}

fn runtime() -> volt::Runtime {
    volt::runtime::Builder::new().worker_threads(2).event_ring(1024).build().unwrap()
}

/// Wait (at most 10 s) until `f` holds.
fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !f() {
        assert!(Instant::now() < deadline, "not within 10 s: {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn mutex_serves_waiters_in_the_order_they_first_waited() {
    let m = Mutex::new(0);
    let g = m.try_lock().unwrap();
    let mut fs: Vec<_> = (0..4).map(|_| Box::pin(m.lock())).collect();
    for f in fs.iter_mut() {
        assert!(poll_once(f.as_mut()).is_pending());
    }
    assert!(m.try_lock().is_err(), "a newcomer does not overtake the queue");
    drop(g);
    // Polled last to first: only the first waiter holds the lock.
    for i in (1..4).rev() {
        assert!(poll_once(fs[i].as_mut()).is_pending(), "waiter {i} overtook waiter 0");
    }
    let Poll::Ready(g0) = poll_once(fs[0].as_mut()) else { panic!("the first waiter was not served") };
    assert!(poll_once(fs[2].as_mut()).is_pending());
    drop(g0);
    for i in 1..4 {
        let Poll::Ready(mut g) = poll_once(fs[i].as_mut()) else { panic!("waiter {i} not served in turn") };
        *g += 1;
        if i < 3 {
            assert!(poll_once(fs[i + 1].as_mut()).is_pending());
        }
    }
    drop(fs);
    assert_eq!(*m.try_lock().unwrap(), 3);
}

#[test]
fn a_dropped_lock_future_gives_its_place_up() {
    let m = Mutex::new(());
    let g = m.try_lock().unwrap();
    let mut a = Box::pin(m.lock());
    let mut b = Box::pin(m.lock());
    let mut c = Box::pin(m.lock());
    for f in [&mut a, &mut b, &mut c] {
        assert!(poll_once(f.as_mut()).is_pending());
    }
    drop(b);
    drop(g);
    // The lock went to `a` at the release, before `a` was polled; dropping `a` now
    // passes it on to `c`.
    drop(a);
    let Poll::Ready(gc) = poll_once(c.as_mut()) else { panic!("c was not served after a and b gave up") };
    assert!(m.try_lock().is_err());
    drop(gc);
    drop(c);
    assert!(m.try_lock().is_ok(), "nothing left holding the lock");
}

#[test]
fn a_dropped_acquire_many_returns_its_partial_permits() {
    let s = Semaphore::new(5);
    let held = s.try_acquire_many(3).unwrap();
    let mut big = Box::pin(s.acquire_many(4));
    assert!(poll_once(big.as_mut()).is_pending());
    assert_eq!(s.available_permits(), 0, "the head collected the 2 free permits");
    let mut small = Box::pin(s.acquire());
    assert!(poll_once(small.as_mut()).is_pending(), "a small request waits behind a big head");
    assert_eq!(s.try_acquire().unwrap_err(), TryAcquireError::NoPermits);
    drop(big);
    let Poll::Ready(Ok(p)) = poll_once(small.as_mut()) else { panic!("the small request was not served") };
    assert_eq!(p.num_permits(), 1);
    assert_eq!(s.available_permits(), 1, "the other collected permit went back");
    drop(p);
    drop(held);
    assert_eq!(s.available_permits(), 5, "every permit is back");
}

#[test]
fn a_big_head_collects_released_permits_in_turn() {
    let s = Semaphore::new(2);
    let a = s.try_acquire().unwrap();
    let b = s.try_acquire().unwrap();
    let mut two = Box::pin(s.acquire_many(2));
    let mut one = Box::pin(s.acquire());
    assert!(poll_once(two.as_mut()).is_pending());
    assert!(poll_once(one.as_mut()).is_pending());
    drop(a);
    assert!(poll_once(one.as_mut()).is_pending(), "the released permit goes to the head");
    assert!(poll_once(two.as_mut()).is_pending());
    drop(b);
    let Poll::Ready(Ok(p2)) = poll_once(two.as_mut()) else { panic!("head not served") };
    assert_eq!(p2.num_permits(), 2);
    drop(p2);
    let Poll::Ready(Ok(_p1)) = poll_once(one.as_mut()) else { panic!("second not served") };
    assert_eq!(s.available_permits(), 1);
}

/// Permits of two `acquire_many` calls (a `u32` each) merge past `u32::MAX`, and all of
/// them come back (they wrapped at `u32::MAX` before).
#[test]
#[cfg(target_pointer_width = "64")]
fn merged_permits_count_past_u32_max() {
    for owned in [false, true] {
        let s = Arc::new(Semaphore::new(6_000_000_000));
        let half = 3_000_000_000;
        if owned {
            let mut a = s.clone().try_acquire_many_owned(half).unwrap();
            a.merge(s.clone().try_acquire_many_owned(half).unwrap());
            assert_eq!((a.num_permits(), s.available_permits()), (6_000_000_000, 0));
            let b = a.split(5_000_000_000).unwrap();
            assert_eq!((a.num_permits(), b.num_permits()), (1_000_000_000, 5_000_000_000));
        } else {
            let mut a = s.try_acquire_many(half).unwrap();
            a.merge(s.try_acquire_many(half).unwrap());
            assert_eq!((a.num_permits(), s.available_permits()), (6_000_000_000, 0));
        }
        assert_eq!(s.available_permits(), 6_000_000_000, "every permit back (owned: {owned})");
    }
}

#[test]
fn semaphore_permits_forget_merge_split_and_add() {
    let s = Arc::new(Semaphore::new(4));
    let mut p = s.try_acquire_many(2).unwrap();
    let q = s.try_acquire().unwrap();
    p.merge(q);
    assert_eq!(p.num_permits(), 3);
    let r = p.split(2).unwrap();
    assert!(p.split(5).is_none());
    assert_eq!((p.num_permits(), r.num_permits()), (1, 2));
    r.forget();
    drop(p);
    assert_eq!(s.available_permits(), 2, "the forgotten two never came back");
    s.add_permits(3);
    assert_eq!(s.forget_permits(10), 5);
    assert_eq!(s.available_permits(), 0);
    s.add_permits(1);
    let o = s.clone().try_acquire_owned().unwrap();
    assert!(Arc::ptr_eq(o.semaphore(), &s));
    assert_eq!(s.clone().try_acquire_many_owned(1).unwrap_err(), TryAcquireError::NoPermits);
}

#[test]
fn close_wakes_every_waiter_with_an_error() {
    let rt = runtime();
    let s = Arc::new(Semaphore::new(1));
    let held = s.clone().try_acquire_owned().unwrap();
    let woken = Arc::new(AtomicUsize::new(0));
    let hs: Vec<_> = (0..8)
        .map(|i| {
            let (s, woken) = (s.clone(), woken.clone());
            rt.spawn(async move {
                let r = if i % 2 == 0 { s.acquire().await.map(drop) } else { s.acquire_many(3).await.map(drop) };
                woken.fetch_add(1, SeqCst);
                r
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(woken.load(SeqCst), 0, "nobody got a permit while it was held");
    s.close();
    for h in hs {
        assert!(rt.block_on(h).unwrap().is_err(), "a waiter got a permit from a closed semaphore");
    }
    assert!(s.is_closed());
    assert_eq!(s.try_acquire().unwrap_err(), TryAcquireError::Closed);
    assert!(rt.block_on(s.acquire()).is_err());
    assert_eq!(held.num_permits(), 1, "a permit held stays valid");
}

#[test]
fn notify_one_stores_one_permit_and_notify_waiters_none() {
    let n = Notify::new();
    n.notify_one();
    n.notify_one();
    let mut a = pin!(n.notified());
    assert!(poll_once(a.as_mut()).is_ready(), "the stored permit");
    let mut b = pin!(n.notified());
    assert!(poll_once(b.as_mut()).is_pending(), "permits do not add up");
    n.notify_one();
    assert!(poll_once(b.as_mut()).is_ready(), "a queued waiter is woken");
    assert!(poll_once(b.as_mut()).is_ready(), "fused");

    n.notify_waiters();
    let mut c = pin!(n.notified());
    assert!(poll_once(c.as_mut()).is_pending(), "notify_waiters stores nothing");
    // A `Notified` created before `notify_waiters` is woken by it, polled or not.
    let d = n.notified();
    n.notify_waiters();
    let mut d = pin!(d);
    assert!(poll_once(d.as_mut()).is_ready());
    assert!(poll_once(c.as_mut()).is_ready());
}

#[test]
fn notify_one_wakes_in_fifo_order_and_enable_queues_without_polling() {
    let n = Notify::new();
    let mut a = pin!(n.notified());
    let mut b = pin!(n.notified());
    assert!(!a.as_mut().enable());
    assert!(!b.as_mut().enable());
    n.notify_one();
    assert!(poll_once(b.as_mut()).is_pending(), "b was queued after a");
    assert!(poll_once(a.as_mut()).is_ready());
    n.notify_last();
    assert!(poll_once(b.as_mut()).is_ready());
    // A notified waiter dropped before it saw the notification passes it on.
    let mut c = Box::pin(n.notified());
    let mut d = pin!(n.notified());
    assert!(poll_once(c.as_mut()).is_pending());
    assert!(poll_once(d.as_mut()).is_pending());
    n.notify_one();
    drop(c);
    assert!(poll_once(d.as_mut()).is_ready());
    let mut e = pin!(n.notified());
    assert!(poll_once(e.as_mut()).is_pending(), "the forwarded notification was used once");
}

/// A waiter that `notify_last` served, dropped before it saw it, passes it on to the
/// last waiter again, not to the first (as Tokio's `notified_multi_notify_last_drop`).
#[test]
fn a_dropped_waiter_passes_notify_last_on_to_the_last_waiter() {
    let n = Notify::new();
    let mut n1 = pin!(n.notified());
    let mut n2 = pin!(n.notified());
    let mut n3 = Box::pin(n.notified());
    assert!(poll_once(n1.as_mut()).is_pending());
    assert!(poll_once(n2.as_mut()).is_pending());
    assert!(poll_once(n3.as_mut()).is_pending());
    n.notify_last();
    drop(n3);
    assert!(poll_once(n1.as_mut()).is_pending(), "the first waiter took a notify_last");
    assert!(poll_once(n2.as_mut()).is_ready(), "the last waiter left did not get it");
    // And the same for notify_one: the first one.
    let mut n4 = pin!(n.notified());
    assert!(poll_once(n4.as_mut()).is_pending());
    n.notify_one();
    assert!(poll_once(n1.as_mut()).is_ready());
    assert!(poll_once(n4.as_mut()).is_pending());
}

#[test]
fn barrier_has_exactly_one_leader_per_generation() {
    let rt = runtime();
    const N: usize = 4;
    const GENERATIONS: usize = 25;
    let b = Arc::new(Barrier::new(N));
    let leaders = Arc::new(AtomicUsize::new(0));
    let hs: Vec<_> = (0..N)
        .map(|_| {
            let (b, leaders) = (b.clone(), leaders.clone());
            rt.spawn(async move {
                for _ in 0..GENERATIONS {
                    if b.wait().await.is_leader() {
                        leaders.fetch_add(1, SeqCst);
                    }
                }
            })
        })
        .collect();
    for h in hs {
        rt.block_on(h).unwrap();
    }
    assert_eq!(leaders.load(SeqCst), GENERATIONS);
    assert!(rt.block_on(Barrier::new(0).wait()).is_leader(), "a barrier for 0 acts as one for 1");
}

#[test]
fn once_cell_initializes_exactly_once_under_concurrent_get_or_init() {
    let rt = runtime();
    let cell = Arc::new(OnceCell::new());
    let inits = Arc::new(AtomicUsize::new(0));
    let hs: Vec<_> = (0..32)
        .map(|i| {
            let (cell, inits) = (cell.clone(), inits.clone());
            rt.spawn(async move {
                *cell
                    .get_or_init(|| async move {
                        inits.fetch_add(1, SeqCst);
                        volt::task::yield_now().await;
                        i
                    })
                    .await
            })
        })
        .collect();
    let values: Vec<usize> = hs.into_iter().map(|h| rt.block_on(h).unwrap()).collect();
    assert_eq!(inits.load(SeqCst), 1, "the initializer ran more than once");
    assert!(values.iter().all(|v| *v == values[0]), "{values:?}");
    assert_eq!(cell.get(), Some(&values[0]));
    assert!(cell.set(99).unwrap_err().is_already_init_err());
}

#[test]
fn once_cell_failed_or_dropped_initializer_lets_the_next_one_run() {
    let cell = OnceCell::<u32>::new();
    let mut first = Box::pin(cell.get_or_init(std::future::pending));
    assert!(poll_once(first.as_mut()).is_pending());
    assert!(cell.set(1).unwrap_err().is_initializing_err());
    let mut second = Box::pin(cell.get_or_try_init(|| async { Err::<u32, &str>("no") }));
    assert!(poll_once(second.as_mut()).is_pending(), "waits behind the first");
    drop(first);
    assert_eq!(poll_once(second.as_mut()), Poll::Ready(Err("no")));
    drop(second);
    let mut third = Box::pin(cell.get_or_init(|| async { 3 }));
    assert_eq!(poll_once(third.as_mut()), Poll::Ready(&3));
    drop(third);
    let mut cell = cell;
    assert_eq!(cell.take(), Some(3));
    assert!(!cell.initialized());
    assert!(cell.set(4).is_ok());
    assert_eq!(cell.into_inner(), Some(4));
    assert_eq!(OnceCell::new_with(Some(5)).get(), Some(&5));
}

/// `SetOnce`: every task waiting (on two workers, and one not yet polled) gets the value
/// of the one `set` that wins; the wait is named while it lasts; a second `set` gives its
/// value back.
#[test]
fn set_once_wakes_every_waiter_with_the_one_value_set() {
    let rt = runtime();
    let cell = Arc::new(SetOnce::new());
    let waiters: Vec<_> = (0..16)
        .map(|i| {
            let cell = cell.clone();
            spawn_named(&rt, &format!("waiter {i}"), async move { *cell.wait().await })
        })
        .collect();
    let (text, _) = wait_of(&rt, "waiter 15", |w| w.kind() == "wait");
    assert_eq!(text, "wait SetOnce");
    assert_eq!(cell.get(), None);
    assert!(!cell.initialized());
    assert_eq!(cell.set(7u32), Ok(()));
    assert_eq!(cell.set(8), Err(SetOnceError(8)), "set twice");
    assert_eq!(SetOnceError(8).to_string(), "SetOnceError");
    let got: Vec<u32> = waiters.into_iter().map(|h| rt.block_on(h).unwrap()).collect();
    assert_eq!(got, [7; 16], "a waiter missed the set or saw another value");
    // A wait after the set returns at once, without a waker.
    let mut late = Box::pin(cell.wait());
    assert_eq!(poll_once(late.as_mut()), Poll::Ready(&7));
    assert!(cell.initialized());
    eventually("no task left", || rt.handle().telemetry().tasks().is_empty());
}

/// Sets racing from plain threads: exactly one wins each round, and every loser, as soon
/// as its `set` fails, reads the winner's value (a failed `set` returns only once the
/// value is there).
#[test]
fn set_once_racing_sets_have_one_winner_that_every_loser_reads() {
    for round in 0..200 {
        let cell = Arc::new(SetOnce::new());
        let start = Arc::new(std::sync::Barrier::new(4));
        let threads: Vec<_> = (0..4u32)
            .map(|i| {
                let (cell, start) = (cell.clone(), start.clone());
                std::thread::spawn(move || {
                    start.wait();
                    match cell.set(i) {
                        Ok(()) => None,
                        Err(SetOnceError(back)) => {
                            assert_eq!(back, i, "a failed set gives its own value back");
                            Some(*cell.get().expect("a set failed while the cell read as empty"))
                        }
                    }
                })
            })
            .collect();
        let results: Vec<Option<u32>> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        let winners: Vec<u32> = (0..4).filter(|i| results[*i as usize].is_none()).collect();
        assert_eq!(winners.len(), 1, "round {round}: {results:?}");
        let value = *cell.get().unwrap();
        assert_eq!(value, winners[0]);
        assert!(results.iter().flatten().all(|v| *v == value), "round {round}: {results:?}");
    }
}

/// A wait dropped before the set loses nothing, and one polled before the set completes
/// at its next poll after it. Its constructors, `into_inner` and its traits are Tokio's;
/// the value is dropped exactly once, wherever the cell ends.
#[test]
fn set_once_waits_are_cancel_safe_and_the_value_is_dropped_once() {
    static ONCE: SetOnce<u32> = SetOnce::const_new();
    static READY: SetOnce<u32> = SetOnce::const_new_with(3);
    assert_eq!((ONCE.get(), READY.get()), (None, Some(&3)));

    let cell = SetOnce::new();
    let mut dropped = Box::pin(cell.wait());
    assert!(poll_once(dropped.as_mut()).is_pending());
    drop(dropped);
    let mut waiting = Box::pin(cell.wait());
    assert!(poll_once(waiting.as_mut()).is_pending());
    let value = Arc::new(5);
    assert!(cell.set(value.clone()).is_ok());
    assert_eq!(poll_once(waiting.as_mut()).map(|v| **v), Poll::Ready(5));
    drop(waiting);
    assert_eq!(Arc::strong_count(&value), 2);
    let cloned = cell.clone();
    assert_eq!(cloned, cell);
    assert_eq!(Arc::strong_count(&value), 3, "the clone holds its own");
    drop(cloned);
    let out = cell.into_inner().unwrap();
    assert_eq!(Arc::strong_count(&value), 2, "into_inner moves it out, and drops nothing");
    drop(out);
    let dropped_cell = SetOnce::from(value.clone());
    assert_eq!(format!("{:?}", SetOnce::from(1)), "SetOnce { value: Some(1) }");
    drop(dropped_cell);
    assert_eq!(Arc::strong_count(&value), 1, "a dropped cell drops its value");
    assert_eq!(SetOnce::<u8>::default().into_inner(), None);
    assert_eq!(SetOnce::new_with(Some(2)).get(), Some(&2));
    assert_ne!(SetOnce::new_with(Some(2)), SetOnce::new());
}

/// `Semaphore::blocking_acquire` and its three siblings, from threads outside the
/// runtime (a `spawn_blocking` closure, a plain thread): each waits in line behind the
/// tasks holding permits, gets its permits once they are released, and fails once the
/// semaphore closes. Inside a task they panic instead of blocking a worker.
#[test]
fn blocking_acquires_wait_in_line_outside_the_runtime_and_panic_inside_it() {
    let rt = runtime();
    let s = Arc::new(Semaphore::new(3));
    let held = s.clone().try_acquire_many_owned(3).unwrap();
    let got = Arc::new(AtomicUsize::new(0));
    let from_pool = {
        let (s, got) = (s.clone(), got.clone());
        rt.spawn_blocking(move || {
            let p = s.blocking_acquire().unwrap();
            assert!(std::ptr::eq(p.semaphore(), &*s), "the permit names its semaphore");
            got.fetch_add(p.num_permits(), SeqCst);
            drop(p);
            let p = s.blocking_acquire_many(2).unwrap();
            got.fetch_add(p.num_permits(), SeqCst);
        })
    };
    let from_thread = {
        let (s, got) = (s.clone(), got.clone());
        std::thread::spawn(move || {
            let p = s.clone().blocking_acquire_owned().unwrap();
            assert!(Arc::ptr_eq(p.semaphore(), &s));
            got.fetch_add(p.num_permits(), SeqCst);
            drop(p);
            let p = s.clone().blocking_acquire_many_owned(3).unwrap();
            got.fetch_add(p.num_permits(), SeqCst);
        })
    };
    assert_eq!(got.load(SeqCst), 0, "acquired while every permit was held");
    drop(held);
    rt.block_on(from_pool).unwrap();
    from_thread.join().unwrap();
    assert_eq!(got.load(SeqCst), 1 + 2 + 1 + 3, "every blocking acquire got its permits");
    assert_eq!(s.available_permits(), 3, "every permit came back");
    // Closed: they fail instead of waiting.
    let _all = s.try_acquire_many(3).unwrap();
    let waiter = {
        let s = s.clone();
        std::thread::spawn(move || s.blocking_acquire_many(2).map(|_| ()))
    };
    s.close();
    assert!(waiter.join().unwrap().is_err(), "a closed semaphore answered a blocking acquire");
    assert!(s.clone().blocking_acquire_owned().is_err());
    // Inside a task: a panic (caught by the task), not a blocked worker.
    let s2 = Arc::new(Semaphore::new(1));
    let r = rt.block_on(rt.spawn(async move { drop(s2.blocking_acquire()) }));
    assert!(r.unwrap_err().is_panic());
    // A `spawn_blocking` closure and a `block_in_place` one may block on a lock, as
    // Tokio's documentation shows: neither drives tasks.
    let m = Arc::new(Mutex::new(0));
    let m2 = m.clone();
    rt.block_on(rt.spawn_blocking(move || *m2.blocking_lock() += 1)).unwrap();
    let m3 = m.clone();
    rt.block_on(rt.spawn(async move { volt::task::block_in_place(|| *m3.blocking_lock() += 1) })).unwrap();
    assert_eq!(*m.try_lock().unwrap(), 2);
}

#[test]
fn many_tasks_on_two_workers_lose_no_increment() {
    let rt = runtime();
    const TASKS: usize = 32;
    const EACH: usize = 300;
    let m = Arc::new(Mutex::new(0usize));
    let hs: Vec<_> = (0..TASKS)
        .map(|i| {
            let m = m.clone();
            rt.spawn(async move {
                for k in 0..EACH {
                    if (i + k) % 3 == 0 {
                        let mut g = m.clone().lock_owned().await;
                        let v = *g;
                        volt::task::yield_now().await;
                        *g = v + 1;
                    } else {
                        *m.lock().await += 1;
                    }
                }
            })
        })
        .collect();
    for h in hs {
        rt.block_on(h).unwrap();
    }
    assert_eq!(*m.blocking_lock(), TASKS * EACH);
}

#[test]
fn rwlock_a_waiting_writer_blocks_new_readers() {
    let l = RwLock::new(1);
    let r1 = l.try_read().unwrap();
    let mut w = Box::pin(l.write());
    assert!(poll_once(w.as_mut()).is_pending());
    assert!(l.try_read().is_err(), "a reader overtook a waiting writer");
    let mut r2 = Box::pin(l.read());
    assert!(poll_once(r2.as_mut()).is_pending());
    drop(r1);
    assert!(poll_once(r2.as_mut()).is_pending());
    let Poll::Ready(mut g) = poll_once(w.as_mut()) else { panic!("writer not served") };
    *g = 2;
    let r = g.downgrade();
    let Poll::Ready(r2g) = poll_once(r2.as_mut()) else { panic!("reader behind a downgraded writer not served") };
    assert_eq!((*r, *r2g), (2, 2));
    drop((r, r2g));
    let wg = l.try_write().unwrap();
    let mut mapped = volt::sync::RwLockWriteGuard::map(wg, |v| v);
    *mapped = 3;
    drop(mapped);
    drop((w, r2));
    assert_eq!(l.into_inner(), 3);
}

#[test]
fn rwlock_downgrade_map_keeps_writers_out_and_lets_readers_in() {
    let l = Arc::new(RwLock::new((1u8, 2u8)));
    let w = l.try_write().unwrap();
    let w = match volt::sync::RwLockWriteGuard::try_downgrade_map(w, |_| None::<&u8>) {
        Err(w) => w,
        Ok(_) => panic!("mapped to nothing"),
    };
    assert!(l.try_read().is_err(), "a failed try_downgrade_map keeps the write lock");
    let r = volt::sync::RwLockWriteGuard::downgrade_map(w, |t| &t.1);
    assert_eq!(*r, 2);
    assert!(l.try_write().is_err());
    assert!(l.try_read().is_ok(), "other readers get in after a downgrade");
    drop(r);
    let w = l.clone().try_write_owned().unwrap();
    let r = volt::sync::OwnedRwLockWriteGuard::try_downgrade_map(w, |t| Some(&t.0)).unwrap();
    assert_eq!(*r, 1);
    assert!(l.try_write().is_err());
    drop(r);
    assert!(l.try_write().is_ok(), "every permit is back");
}

#[test]
fn rwlock_max_readers_and_owned_guards() {
    let l = Arc::new(RwLock::with_max_readers(0u8, 2));
    let a = l.clone().try_read_owned().unwrap();
    let b = l.clone().try_read_owned().unwrap();
    assert!(l.try_read().is_err(), "a third reader over max_readers");
    drop((a, b));
    let w = l.clone().try_write_owned().unwrap();
    assert!(l.clone().try_read_owned().is_err());
    drop(w);
    assert!(l.try_read().is_ok());
}

#[test]
fn mutex_guards_map_and_blocking_lock_from_a_plain_thread() {
    let m = Arc::new(Mutex::new((1, String::from("a"))));
    {
        let g = m.try_lock().unwrap();
        let mut s = volt::sync::MutexGuard::map(g, |t| &mut t.1);
        s.push('b');
        assert!(m.try_lock().is_err(), "a mapped guard holds the lock");
    }
    let g = m.clone().try_lock_owned().unwrap();
    let g = volt::sync::OwnedMutexGuard::try_map(g, |_| None::<&mut u8>).unwrap_err();
    drop(g);
    let m2 = m.clone();
    std::thread::spawn(move || m2.blocking_lock().0 += 1).join().unwrap();
    let mut m = Arc::try_unwrap(m).unwrap();
    assert_eq!(m.get_mut().0, 2);
    assert_eq!(m.into_inner().1, "ab");
}

// Named waits.

fn sync_wait(t: &TaskInfo) -> Option<&SyncWait> {
    match &t.waiting_on {
        Some(WaitReason::Sync(s)) => Some(s),
        _ => None,
    }
}

fn find<'a>(tasks: &'a [TaskInfo], name: &str) -> &'a TaskInfo {
    tasks.iter().find(|t| t.name.as_deref() == Some(name)).unwrap_or_else(|| panic!("no task {name}: {tasks:#?}"))
}

/// Read the tasks until task `name` waits on what `pred` accepts (at most 10 s); return
/// that wait's text and the reading.
fn wait_of(rt: &volt::Runtime, name: &str, pred: impl Fn(&WaitReason) -> bool) -> (String, Vec<TaskInfo>) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let tasks = rt.handle().telemetry().tasks();
        if let Some(w) = tasks.iter().find(|t| t.name.as_deref() == Some(name)).and_then(|t| t.waiting_on.as_ref()) {
            if pred(w) {
                return (w.to_string(), tasks);
            }
        }
        assert!(Instant::now() < deadline, "task {name} never showed the wait: {tasks:#?}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn spawn_named<F>(rt: &volt::Runtime, name: &str, f: F) -> volt::task::JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    volt::task::Builder::new().name(name).spawn_on(f, rt.handle())
}

#[test]
fn a_mutex_wait_names_the_holder_at_the_time_of_reading() {
    let rt = runtime();
    let m = Arc::new(Mutex::new(0));
    let (go1, go2) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let first = {
        let (m, go) = (m.clone(), go1.clone());
        spawn_named(&rt, "first", async move {
            let _g = m.lock().await;
            go.notified().await;
        })
    };
    let (text, tasks) = wait_of(&rt, "first", |w| w.to_string() == "notified");
    assert!(matches!(&find(&tasks, "first").waiting_on, Some(WaitReason::Sync(s)) if s.primitive == "Notify"));
    drop(text);
    let second = {
        let (m, go) = (m.clone(), go2.clone());
        spawn_named(&rt, "second", async move {
            let _g = m.lock().await;
            go.notified().await;
        })
    };
    wait_of(&rt, "second", |w| w.kind() == "lock");
    let third = {
        let m = m.clone();
        spawn_named(&rt, "third", async move {
            *m.lock().await += 1;
        })
    };
    let (text, tasks) = wait_of(&rt, "third", |w| w.kind() == "lock");
    let first_id = find(&tasks, "first").id;
    assert_eq!(text, format!("lock Mutex (held by task {first_id} \"first\")"));
    let s = sync_wait(find(&tasks, "third")).unwrap();
    assert_eq!(s.holder_task(), Some(first_id));
    assert_eq!(s.resource, sync_wait(find(&tasks, "second")).unwrap().resource, "one resource, one id");
    assert_eq!(s.waiters, Some(2));

    // The lock passes to `second`; `third` is not polled again, and its wait now names
    // the new holder.
    go1.notify_one();
    rt.block_on(first).unwrap();
    let (text, tasks) = wait_of(&rt, "third", |w| !w.to_string().contains("\"first\""));
    let second_id = find(&tasks, "second").id;
    assert_eq!(text, format!("lock Mutex (held by task {second_id} \"second\")"));
    assert_eq!(
        sync_wait(find(&tasks, "third")).unwrap().holder,
        Some(SyncHolder::Task { id: second_id, name: Some("second".into()) })
    );
    go2.notify_one();
    rt.block_on(second).unwrap();
    rt.block_on(third).unwrap();
    assert_eq!(*m.blocking_lock(), 1);
}

#[test]
fn semaphore_rwlock_barrier_and_once_cell_waits_are_named() {
    let rt = runtime();
    let stop = Arc::new(Notify::new());

    // Semaphore: both permits held, a third waits.
    let s = Arc::new(Semaphore::new(2));
    let permits = (s.clone().try_acquire_owned().unwrap(), s.clone().try_acquire_owned().unwrap());
    let sem_waiter = {
        let s = s.clone();
        spawn_named(&rt, "sem", async move { drop(s.acquire().await) })
    };
    let (text, _) = wait_of(&rt, "sem", |w| w.kind() == "acquire");
    assert_eq!(text, "acquire Semaphore (0 of 2 free)");

    // RwLock: a writer holds it, a reader waits; then readers hold it, a writer waits.
    let l = Arc::new(RwLock::new(()));
    let writer = {
        let (l, stop) = (l.clone(), stop.clone());
        spawn_named(&rt, "writer", async move {
            let _w = l.write().await;
            stop.notified().await;
        })
    };
    wait_of(&rt, "writer", |w| w.kind() == "notified");
    let reader = {
        let l = l.clone();
        spawn_named(&rt, "reader", async move { drop(l.read().await) })
    };
    let (text, tasks) = wait_of(&rt, "reader", |w| w.kind() == "read");
    assert_eq!(text, format!("read RwLock (held by task {} \"writer\")", find(&tasks, "writer").id));

    let l2 = Arc::new(RwLock::new(()));
    let r = l2.clone().try_read_owned().unwrap();
    let w2 = {
        let l2 = l2.clone();
        spawn_named(&rt, "writer2", async move { drop(l2.write().await) })
    };
    let (text, _) = wait_of(&rt, "writer2", |w| w.kind() == "write");
    assert_eq!(text, "write RwLock (held by 1 reader)");

    // Barrier: two of three arrived.
    let b = Arc::new(Barrier::new(3));
    let b1 = {
        let b = b.clone();
        spawn_named(&rt, "b1", async move { b.wait().await.is_leader() })
    };
    let b2 = {
        let b = b.clone();
        spawn_named(&rt, "b2", async move { b.wait().await.is_leader() })
    };
    let (text, _) = wait_of(&rt, "b2", |w| w.to_string() == "wait Barrier (2 of 3)");
    assert_eq!(text, "wait Barrier (2 of 3)");

    // OnceCell: one task initializes (and waits inside), another waits for it.
    let cell = Arc::new(OnceCell::new());
    let init = {
        let (cell, stop) = (cell.clone(), stop.clone());
        spawn_named(&rt, "init", async move {
            *cell
                .get_or_init(|| async move {
                    stop.notified().await;
                    7
                })
                .await
        })
    };
    wait_of(&rt, "init", |w| w.kind() == "notified");
    let reader2 = {
        let cell = cell.clone();
        spawn_named(&rt, "cell reader", async move { *cell.get_or_init(|| async { 8 }).await })
    };
    let (text, tasks) = wait_of(&rt, "cell reader", |w| w.kind() == "init");
    assert_eq!(text, format!("init OnceCell (held by task {} \"init\")", find(&tasks, "init").id));

    // Let everything finish: no task lost.
    drop(permits);
    rt.block_on(sem_waiter).unwrap();
    drop(r);
    rt.block_on(w2).unwrap();
    rt.block_on(b.wait());
    let leaders = rt.block_on(b1).unwrap() as u8 + rt.block_on(b2).unwrap() as u8;
    assert!(leaders <= 1);
    stop.notify_waiters();
    rt.block_on(writer).unwrap();
    rt.block_on(reader).unwrap();
    assert_eq!(rt.block_on(init).unwrap(), 7);
    assert_eq!(rt.block_on(reader2).unwrap(), 7);
    eventually("no task left", || rt.handle().telemetry().tasks().is_empty());
}

#[test]
fn a_task_taking_a_free_lock_in_a_loop_still_lets_others_run() {
    let rt = volt::runtime::Builder::new().worker_threads(1).build().unwrap();
    let m = Arc::new(Mutex::new(0u64));
    let flag = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let looping = {
        let (m, flag) = (m.clone(), flag.clone());
        rt.spawn(async move {
            // Bounded, so that a runtime that never yields fails instead of hanging.
            for _ in 0..5_000_000u32 {
                if flag.load(SeqCst) {
                    return true;
                }
                *m.lock().await += 1;
            }
            false
        })
    };
    let setter = {
        let flag = flag.clone();
        rt.spawn(async move { flag.store(true, SeqCst) })
    };
    assert!(rt.block_on(looping).unwrap(), "the other task never ran on the only worker");
    rt.block_on(setter).unwrap();
}

#[test]
fn cancelled_acquires_under_contention_lose_no_permit() {
    let rt = runtime();
    const PERMITS: u32 = 7;
    let s = Arc::new(Semaphore::new(PERMITS as usize));
    let rw = Arc::new(RwLock::with_max_readers(0u64, 4));
    let done = Arc::new(AtomicUsize::new(0));
    let hs: Vec<_> = (0..24u32)
        .map(|i| {
            let (s, rw, done) = (s.clone(), rw.clone(), done.clone());
            rt.spawn(async move {
                for k in 0..150u32 {
                    let n = 1 + (i + k) % PERMITS;
                    // Many of these time out while queued (some after collecting part of
                    // what they need): the future is dropped in every state.
                    let t = Duration::from_micros(((i * 7 + k * 13) % 200) as u64);
                    if let Ok(Ok(p)) = volt::time::timeout(t, s.acquire_many(n)).await {
                        assert_eq!(p.num_permits(), n as usize);
                        volt::time::sleep(Duration::from_micros(50)).await;
                    }
                    if k % 5 == 0 {
                        if let Ok(mut g) = volt::time::timeout(t, rw.write()).await {
                            *g += 1;
                        }
                    } else if let Ok(g) = volt::time::timeout(t, rw.read()).await {
                        let _ = *g;
                    }
                }
                done.fetch_add(1, SeqCst);
            })
        })
        .collect();
    for h in hs {
        rt.block_on(h).unwrap();
    }
    assert_eq!(done.load(SeqCst), 24, "a task was lost");
    assert_eq!(s.available_permits(), PERMITS as usize, "permits lost or made up");
    let _all = s.try_acquire_many(PERMITS).expect("the semaphore is whole again");
    assert!(rw.try_write().is_ok(), "the RwLock is free again");
}

/// The types cross threads and tasks as Tokio's do.
#[test]
fn types_are_send_and_sync_as_tokios() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>() {}
    send_sync::<Mutex<Vec<u8>>>();
    send_sync::<volt::sync::MutexGuard<'static, u8>>();
    send_sync::<volt::sync::OwnedMutexGuard<u8>>();
    send_sync::<volt::sync::MappedMutexGuard<'static, u8>>();
    send_sync::<volt::sync::OwnedMappedMutexGuard<u8, u8>>();
    send_sync::<RwLock<u8>>();
    send_sync::<volt::sync::RwLockReadGuard<'static, u8>>();
    send_sync::<volt::sync::RwLockWriteGuard<'static, u8>>();
    send_sync::<volt::sync::OwnedRwLockReadGuard<u8>>();
    send_sync::<volt::sync::OwnedRwLockWriteGuard<u8>>();
    send_sync::<Semaphore>();
    send_sync::<volt::sync::SemaphorePermit<'static>>();
    send_sync::<volt::sync::OwnedSemaphorePermit>();
    send_sync::<Notify>();
    send_sync::<volt::sync::futures::Notified<'static>>();
    send_sync::<volt::sync::futures::OwnedNotified>();
    send_sync::<Barrier>();
    send_sync::<OnceCell<u8>>();
    send_sync::<SetOnce<u8>>();
    send::<SetOnce<std::cell::Cell<u8>>>();
    // A `Cell` may be sent but not shared: so may a mutex holding it.
    send_sync::<Mutex<std::cell::Cell<u8>>>();
    send::<volt::sync::MutexGuard<'static, std::cell::Cell<u8>>>();
    // The futures of the async methods can be spawned.
    fn spawnable<F: std::future::Future + Send>(_: F) {}
    let (m, s, l, c) = (Mutex::new(0), Semaphore::new(1), RwLock::new(0), OnceCell::<u8>::new());
    spawnable(m.lock());
    spawnable(s.acquire_many(2));
    spawnable(l.write());
    spawnable(c.get_or_init(|| async { 1 }));
    let once = SetOnce::<u8>::new();
    spawnable(once.wait());
}

// The resources view (`Telemetry::resources`): each primitive's probe, kept current on
// the fast paths too, with its kind and creation place.

/// The resource task `name` waits on once its wait is a sync wait on `primitive`.
fn resource_of(rt: &volt::Runtime, name: &str, primitive: &str) -> u64 {
    let (_, tasks) = wait_of(rt, name, |w| matches!(w, WaitReason::Sync(s) if s.primitive == primitive));
    sync_wait(find(&tasks, name)).unwrap().resource
}

fn resource(rt: &volt::Runtime, id: u64) -> Resource {
    let all = rt.handle().telemetry().resources(0);
    all.iter().find(|r| r.id == id).cloned().unwrap_or_else(|| panic!("resource {id} not listed: {all:#?}"))
}

/// Whether `r` was created in this file at `line`.
fn created_here(r: &Resource, line: u32) -> bool {
    r.created_at.is_some_and(|at| at.file() == file!() && at.line() == line)
}

#[test]
fn a_lock_released_without_contention_shows_no_holder_and_the_next_holder_at_once() {
    let rt = runtime();
    let (m, line) = (Arc::new(Mutex::new(0)), line!());
    let (go1, go2, go3) = (Arc::new(Notify::new()), Arc::new(Notify::new()), Arc::new(Notify::new()));
    // Contention first, so the mutex has a probe: "first" holds it, "second" waits.
    let first = {
        let (m, go) = (m.clone(), go1.clone());
        spawn_named(&rt, "first", async move {
            let _g = m.lock().await;
            go.notified().await;
        })
    };
    wait_of(&rt, "first", |w| w.to_string() == "notified");
    let second = {
        let (m, go) = (m.clone(), go2.clone());
        spawn_named(&rt, "second", async move {
            let mut g = m.lock().await;
            *g += 1;
            go.notified().await;
        })
    };
    let id = resource_of(&rt, "second", "Mutex");
    let first_id = first.id().as_u64();
    let r = resource(&rt, id);
    assert_eq!((r.holder, r.waiters), (Some(ResourceHolder::Task(first_id)), 1), "{r:?}");
    assert_eq!(r.kind, Some("Mutex"));
    assert!(created_here(&r, line), "{r:?}");

    // The lock passes to "second" (the slow path), which then releases it with nobody
    // waiting (the fast path): the view must not keep showing it.
    go1.notify_one();
    rt.block_on(first).unwrap();
    go2.notify_one();
    rt.block_on(second).unwrap();
    let r = resource(&rt, id);
    assert_eq!((r.holder, r.waiters), (None, 0), "a holder that let go is still shown: {r:?}");
    assert_eq!(r.kind, Some("Mutex"), "the kind stays known with no waiter");

    // An uncontended lock by another task shows that task.
    let third = {
        let (m, go) = (m.clone(), go3.clone());
        spawn_named(&rt, "third", async move {
            let mut g = m.lock().await;
            *g += 1;
            go.notified().await;
        })
    };
    wait_of(&rt, "third", |w| w.to_string() == "notified");
    let r = resource(&rt, id);
    assert_eq!((r.holder, r.waiters), (Some(ResourceHolder::Task(third.id().as_u64())), 0), "{r:?}");
    // `try_lock` fails while it holds: the probe agrees with the lock.
    assert!(m.try_lock().is_err());
    go3.notify_one();
    rt.block_on(third).unwrap();
    assert_eq!(resource(&rt, id).holder, None);
    // A lock taken outside any task shows as such, and its release clears it.
    let g = m.try_lock().unwrap();
    assert_eq!(resource(&rt, id).holder, Some(ResourceHolder::Outside));
    drop(g);
    assert_eq!(resource(&rt, id).holder, None);
    assert_eq!(*m.blocking_lock(), 2);
}

#[test]
fn a_semaphores_free_permits_follow_uncontended_acquires_and_releases() {
    let rt = runtime();
    let sem = Arc::new(Semaphore::new(2));
    let held = sem.clone().try_acquire_many_owned(2).unwrap();
    let waiter = {
        let sem = sem.clone();
        spawn_named(&rt, "waiter", async move {
            sem.acquire().await.unwrap().forget();
        })
    };
    let id = resource_of(&rt, "waiter", "Semaphore");
    let r = resource(&rt, id);
    assert_eq!((r.free, r.total, r.waiters), (0, 2, 1), "{r:?}");
    drop(held);
    rt.block_on(waiter).unwrap();
    // One permit forgotten by the waiter, one free: no waiter left.
    let r = resource(&rt, id);
    assert_eq!((r.free, r.total, r.waiters), (1, 1, 0), "{r:?}");
    let p = sem.try_acquire().unwrap();
    assert_eq!(resource(&rt, id).free, 0, "an uncontended acquire is shown");
    drop(p);
    assert_eq!(resource(&rt, id).free, 1, "an uncontended release is shown");
    sem.add_permits(3);
    let r = resource(&rt, id);
    assert_eq!((r.free, r.total), (4, 4), "{r:?}");
    assert_eq!(sem.forget_permits(2), 2);
    let r = resource(&rt, id);
    assert_eq!((r.free, r.total), (2, 2), "{r:?}");
}

static STATIC_LOCK: Mutex<u8> = Mutex::const_new(0);

#[test]
fn every_primitive_is_listed_with_its_kind_and_creation_place_when_no_one_waits() {
    let rt = runtime();
    // (primitive, the resource id its waiter saw, the line it was created on)
    let mut seen: Vec<(&str, u64, Option<u32>)> = Vec::new();

    let (m, line) = (Arc::new(Mutex::new(())), line!());
    let g = m.try_lock().unwrap();
    let h = spawn_named(&rt, "m", {
        let m = m.clone();
        async move { drop(m.lock().await) }
    });
    seen.push(("Mutex", resource_of(&rt, "m", "Mutex"), Some(line)));
    drop(g);
    rt.block_on(h).unwrap();

    let (l, line) = (Arc::new(RwLock::new(())), line!());
    let g = l.try_write().unwrap();
    let h = spawn_named(&rt, "l", {
        let l = l.clone();
        async move { drop(l.read().await) }
    });
    seen.push(("RwLock", resource_of(&rt, "l", "RwLock"), Some(line)));
    drop(g);
    rt.block_on(h).unwrap();

    let (s, line) = (Arc::new(Semaphore::new(1)), line!());
    let p = s.try_acquire().unwrap();
    let h = spawn_named(&rt, "s", {
        let s = s.clone();
        async move { drop(s.acquire().await.unwrap()) }
    });
    seen.push(("Semaphore", resource_of(&rt, "s", "Semaphore"), Some(line)));
    drop(p);
    rt.block_on(h).unwrap();

    let (n, line) = (Arc::new(Notify::new()), line!());
    let h = spawn_named(&rt, "n", {
        let n = n.clone();
        async move { n.notified().await }
    });
    seen.push(("Notify", resource_of(&rt, "n", "Notify"), Some(line)));
    n.notify_one();
    rt.block_on(h).unwrap();

    let (b, line) = (Arc::new(Barrier::new(2)), line!());
    let h = spawn_named(&rt, "b", {
        let b = b.clone();
        async move { b.wait().await.is_leader() }
    });
    let barrier_id = resource_of(&rt, "b", "Barrier");
    seen.push(("Barrier", barrier_id, Some(line)));
    let leader_here = rt.block_on(b.wait()).is_leader();
    assert!(leader_here ^ rt.block_on(h).unwrap(), "one leader");

    let (c, line) = (Arc::new(OnceCell::<u8>::new()), line!());
    let init = Arc::new(Notify::new());
    let h1 = spawn_named(&rt, "init", {
        let (c, init) = (c.clone(), init.clone());
        async move {
            *c.get_or_init(|| async move {
                init.notified().await;
                7
            })
            .await
        }
    });
    wait_of(&rt, "init", |w| w.to_string() == "notified");
    let h2 = spawn_named(&rt, "c", {
        let c = c.clone();
        async move { *c.get_or_init(|| async { 8 }).await }
    });
    seen.push(("OnceCell", resource_of(&rt, "c", "OnceCell"), Some(line)));
    init.notify_one();
    assert_eq!((rt.block_on(h1).unwrap(), rt.block_on(h2).unwrap()), (7, 7));

    let (so, line) = (Arc::new(SetOnce::<u8>::new()), line!());
    let h = spawn_named(&rt, "so", {
        let so = so.clone();
        async move { *so.wait().await }
    });
    seen.push(("SetOnce", resource_of(&rt, "so", "SetOnce"), Some(line)));
    so.set(9).unwrap();
    assert_eq!(rt.block_on(h).unwrap(), 9);

    // A `const_new` lock in a static: listed with its kind, created nowhere known.
    let g = STATIC_LOCK.try_lock().unwrap();
    let h = spawn_named(&rt, "static", async { drop(STATIC_LOCK.lock().await) });
    seen.push(("Mutex", resource_of(&rt, "static", "Mutex"), None));
    drop(g);
    rt.block_on(h).unwrap();

    // Nobody waits on any of them now, and no deadlock reading ever ran: the kinds come
    // from the primitives themselves.
    for (kind, id, line) in seen {
        let r = resource(&rt, id);
        assert_eq!((r.kind, r.waiters, r.holder), (Some(kind), 0, None), "{r:?}");
        match line {
            Some(line) => assert!(created_here(&r, line), "{kind} created at line {line}: {r:?}"),
            None => assert_eq!(r.created_at, None, "{r:?}"),
        }
    }
    // Dropped (its last `Arc`), a primitive leaves the list.
    drop(b);
    assert!(rt.handle().telemetry().resources(0).iter().all(|r| r.id != barrier_id));
}

/// `downgrade_map`'s closure runs while the access is still exclusive, as Tokio's
/// documents: no reader gets in before it returns; after it, readers do.
#[test]
fn downgrade_map_keeps_the_lock_exclusive_while_its_closure_runs() {
    let lock = std::sync::Arc::new(volt::sync::RwLock::new((1u32, 2u32)));
    let w = lock.try_write().unwrap();
    let r = volt::sync::RwLockWriteGuard::downgrade_map(w, |v| {
        assert!(lock.try_read().is_err(), "a reader got in while the closure ran");
        &v.1
    });
    assert_eq!(*r, 2);
    assert!(lock.try_read().is_ok(), "a reader is kept out after the downgrade");
    drop(r);
    let w = lock.clone().try_write_owned().unwrap();
    let r = volt::sync::OwnedRwLockWriteGuard::downgrade_map(w, |v| {
        assert!(lock.try_read().is_err(), "a reader got in while the closure ran");
        &v.0
    });
    assert_eq!(*r, 1);
    assert!(lock.try_read().is_ok());
}

/// The `blocking_*` methods panic inside `block_on`, as Tokio's do ("Cannot block the
/// current thread from within a runtime"), instead of parking the thread that drives the
/// future: on a current-thread runtime, a contended `blocking_lock` there parked the only
/// thread that could run the holder, for good.
#[test]
fn blocking_methods_panic_inside_block_on_instead_of_hanging() {
    use std::panic::{catch_unwind, AssertUnwindSafe};
    let message = |r: Result<(), Box<dyn std::any::Any + Send>>| {
        let e = r.expect_err("no panic");
        e.downcast_ref::<String>().cloned().or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string())).unwrap()
    };
    // Contended, on a current-thread runtime: the holder is a task of the same runtime.
    let rt = volt::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let m = std::sync::Arc::new(volt::sync::Mutex::new(0));
    let r = catch_unwind(AssertUnwindSafe(|| {
        rt.block_on(async {
            let m2 = m.clone();
            volt::spawn(async move {
                let _g = m2.lock().await;
                volt::time::sleep(std::time::Duration::from_millis(50)).await;
            });
            volt::task::yield_now().await;
            volt::task::yield_now().await;
            let _g = m.blocking_lock();
        })
    }));
    assert!(message(r).contains("Cannot block the current thread"));
    // A channel's and a lock's on a multi-thread runtime's `block_on`.
    let rt = volt::runtime::Builder::new_multi_thread().worker_threads(1).build().unwrap();
    let (tx, mut rx) = volt::sync::mpsc::channel::<u32>(1);
    tx.try_send(1).unwrap();
    let r = catch_unwind(AssertUnwindSafe(|| {
        rt.block_on(async {
            let _ = rx.blocking_recv();
        })
    }));
    assert!(message(r).contains("inside `block_on`"));
    let lock = volt::sync::RwLock::new(0);
    let r = catch_unwind(AssertUnwindSafe(|| rt.block_on(async { drop(lock.blocking_write()) })));
    assert!(message(r).contains("Cannot block the current thread"));
    // Nothing was lost: the message is still there for an async receive.
    assert_eq!(rt.block_on(rx.recv()), Some(1));
    // A `block_in_place` closure is outside the `block_on`: it may block.
    tx.try_send(2).unwrap();
    let got = rt.block_on(async { volt::task::block_in_place(|| rx.blocking_recv()) });
    assert_eq!(got, Some(2));
}

/// A `block_on` inside another's future panics, as Tokio's does, on either flavor.
#[test]
fn block_on_inside_block_on_panics() {
    for outer in [
        volt::runtime::Builder::new_multi_thread().worker_threads(1).build().unwrap(),
        volt::runtime::Builder::new_current_thread().build().unwrap(),
    ] {
        let inner = volt::runtime::Builder::new_current_thread().build().unwrap();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            outer.block_on(async { inner.block_on(async { 1 }) })
        }));
        let e = r.expect_err("no panic");
        let text = e.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| e.downcast_ref::<String>().cloned());
        assert!(text.unwrap_or_default().contains("Cannot start a runtime from within a runtime"));
        // Both still work after.
        assert_eq!(outer.block_on(async { 2 }), 2);
        assert_eq!(inner.block_on(async { 3 }), 3);
    }
}

/// Tokio's message for a lock that would admit no reader, which tests written for it
/// match.
#[test]
#[should_panic(expected = "a RwLock may not be created with 0 readers")]
fn a_lock_with_no_reader_is_refused_with_tokios_message() {
    let _ = volt::sync::RwLock::with_max_readers(0u8, 0);
}

/// Spend the rest of this poll's cooperative budget (inside a task).
fn spend_budget() {
    let mut spent = 0u32;
    while poll_once(pin!(volt::task::consume_budget())).is_ready() {
        spent += 1;
        assert!(spent < 100_000, "the budget never ran out inside a task");
    }
}

/// A task whose poll has spent its cooperative budget still takes its place in line (it
/// yields after, as Tokio's locks do): a waiter that queues behind it while it yields is
/// served after it, and the lock it was handed stays its own until its next poll.
#[test]
fn a_lock_waited_for_with_a_spent_budget_keeps_its_turn() {
    let rt = runtime();
    rt.block_on(async {
        volt::spawn(async {
            let m = Mutex::new(0u32);
            let g0 = m.lock().await;
            let mut a = pin!(m.lock());
            let mut b = pin!(m.lock());
            spend_budget();
            assert!(poll_once(a.as_mut()).is_pending(), "the lock is held");
            // A fresh poll, with a fresh budget.
            volt::task::yield_now().await;
            assert!(poll_once(b.as_mut()).is_pending(), "the lock is held");
            drop(g0);
            // `b` is polled first: it must not overtake `a`, which queued first.
            assert!(poll_once(b.as_mut()).is_pending(), "a later waiter overtook one that had spent its budget");
            let Poll::Ready(mut ga) = poll_once(a.as_mut()) else { panic!("the first waiter was not served") };
            *ga += 1;
            drop(ga);
            let Poll::Ready(mut gb) = poll_once(b.as_mut()) else { panic!("the second waiter was not served") };
            *gb += 1;
            drop(gb);
            assert_eq!(*m.try_lock().unwrap(), 2);
        })
        .await
        .unwrap()
    });
}

/// A free lock taken by a poll that had spent its budget is the future's until its next
/// poll hands it over (nobody else takes it meanwhile), and dropping the future before
/// then gives it back: for the mutex, a semaphore's many permits and a write lock.
#[test]
fn permits_taken_with_a_spent_budget_are_kept_until_handed_over_or_dropped() {
    let rt = runtime();
    rt.block_on(async {
        volt::spawn(async {
            let m = Mutex::new(());
            let s = Semaphore::new(5);
            let rw = RwLock::new(());
            {
                spend_budget();
                let mut lock = pin!(m.lock());
                assert!(poll_once(lock.as_mut()).is_pending(), "a spent budget yields");
                assert!(m.try_lock().is_err(), "the yielding future keeps the lock it took");
                let mut acquire = pin!(s.acquire_many(3));
                assert!(poll_once(acquire.as_mut()).is_pending(), "a spent budget yields");
                assert_eq!(s.available_permits(), 2, "the yielding future keeps the permits it took");
                let mut write = pin!(rw.write());
                assert!(poll_once(write.as_mut()).is_pending(), "a spent budget yields");
                assert!(rw.try_read().is_err(), "the yielding future keeps the write lock it took");
            }
            // Dropped without being polled again: everything is free again.
            assert!(m.try_lock().is_ok(), "a dropped lock future kept the lock");
            assert_eq!(s.available_permits(), 5, "a dropped acquire kept its permits");
            assert!(rw.try_write().is_ok(), "a dropped write future kept the lock");

            // Polled again with a fresh budget, each hands over what it took.
            spend_budget();
            let mut lock = pin!(m.lock());
            let mut acquire = pin!(s.acquire_many(3));
            assert!(poll_once(lock.as_mut()).is_pending());
            assert!(poll_once(acquire.as_mut()).is_pending());
            volt::task::yield_now().await;
            let Poll::Ready(g) = poll_once(lock.as_mut()) else { panic!("the lock was not handed over") };
            let Poll::Ready(Ok(p)) = poll_once(acquire.as_mut()) else { panic!("the permits were not handed over") };
            assert_eq!(p.num_permits(), 3);
            assert_eq!(s.available_permits(), 2);
            drop((g, p));
            assert_eq!(s.available_permits(), 5);
            assert!(m.try_lock().is_ok());
        })
        .await
        .unwrap()
    });
}
