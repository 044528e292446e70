//! Timers: ordering, never early, timeout, interval, dropped sleeps, many concurrent
//! sleeps, and "never" written as a huge duration. No test asserts how late a timer fires:
//! that is a latency, measured by the benchmarks; a test bounds only a hang (tens of
//! seconds), so a loaded machine cannot fail it.

mod common;

use common::*;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use volt::time::Instant;
use volt::time::{interval, sleep, sleep_until, timeout};

#[test]
fn sleep_never_ends_early() {
    let rt = rt(2);
    for _ in 0..5 {
        let t = rt.block_on(async {
            let start = Instant::now();
            // The bound only turns a timer that never fires into a failure.
            timeout(Duration::from_secs(30), sleep(Duration::from_millis(20))).await.expect("the sleep never ended");
            start.elapsed()
        });
        assert!(t >= Duration::from_millis(20), "woke early: {t:?}");
    }
}

/// The wheel fires timers in deadline order, seen through one task that owns 60 sleeps and
/// polls them all on every wake, latest deadline first: if a later sleep is ready, every
/// earlier one polled after it must be ready too (a timer fired stays fired, so this holds
/// however the threads are preempted). Each completes at or after its deadline.
#[test]
fn timers_fire_in_deadline_order() {
    let rt = rt(2);
    let (violations, rounds) = rt.block_on(async {
        let base = Instant::now() + Duration::from_millis(5);
        // Deadlines 0..=118 ms after `base`, created out of order, then sorted latest first.
        let mut sleeps: Vec<(u64, std::pin::Pin<Box<volt::time::Sleep>>, bool)> = (0..60u64)
            .map(|i| (i * 37) % 60 * 2)
            .map(|ms| (ms, Box::pin(sleep_until(base + Duration::from_millis(ms))), false))
            .collect();
        sleeps.sort_by_key(|s| std::cmp::Reverse(s.0));
        let mut violations = vec![];
        let mut rounds = 0;
        let all = std::future::poll_fn(|cx| {
            rounds += 1;
            let mut later_ready: Option<u64> = None;
            for (ms, s, done) in sleeps.iter_mut() {
                if !*done && s.as_mut().poll(cx).is_ready() {
                    assert!(Instant::now() >= base + Duration::from_millis(*ms), "{ms} ms fired early");
                    *done = true;
                }
                match (*done, later_ready) {
                    (true, None) => later_ready = Some(*ms),
                    (false, Some(later)) => violations.push((later, *ms)),
                    _ => {}
                }
            }
            if sleeps.iter().all(|s| s.2) {
                std::task::Poll::Ready(())
            } else {
                std::task::Poll::Pending
            }
        });
        timeout(Duration::from_secs(60), all).await.expect("the timers never all fired");
        (violations, rounds)
    });
    assert!(violations.is_empty(), "a later timer fired before an earlier one (later, earlier): {violations:?}");
    assert!(rounds >= 2, "the sleeps were never pending");
}

/// Sleeps in 60 tasks, spawned out of deadline order: every one completes, none early.
#[test]
fn timers_in_many_tasks_all_fire_never_early() {
    let rt = rt(2);
    let order = Arc::new(Mutex::new(vec![]));
    let base = Instant::now() + Duration::from_millis(5);
    let hs: Vec<_> = (0..60u64)
        .map(|i| {
            let order = order.clone();
            // Deadlines 0..=118 ms after `base`, spawned out of order.
            let ms = (i * 37) % 60 * 2;
            rt.spawn(async move {
                sleep_until(base + Duration::from_millis(ms)).await;
                assert!(Instant::now() >= base + Duration::from_millis(ms));
                order.lock().unwrap().push(ms);
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    let mut order = order.lock().unwrap().clone();
    assert_eq!(order.len(), 60);
    // Which task runs first after its timer fires is the scheduler's (and the OS's) call,
    // so only the set is checked here; the order is checked in one task above.
    order.sort();
    assert_eq!(order, (0..60u64).map(|i| i * 2).collect::<Vec<_>>());
}

#[test]
fn timeout_fires_and_does_not_fire() {
    let rt = rt(2);
    rt.block_on(async {
        let slow = timeout(Duration::from_millis(10), sleep(Duration::from_secs(5))).await;
        assert!(slow.is_err());
        assert_eq!(slow.unwrap_err().to_string(), "deadline has elapsed");
        let fast = timeout(Duration::from_secs(5), async { 7 }).await;
        assert_eq!(fast, Ok(7));
        let task = timeout(
            Duration::from_secs(5),
            volt::spawn(async {
                sleep(Duration::from_millis(5)).await;
                8
            }),
        )
        .await;
        assert_eq!(task.unwrap().unwrap(), 8);
    });
}

#[test]
fn dropped_sleep_never_fires() {
    let rt = rt(2);
    let before = rt.handle().telemetry().snapshot();
    let woken = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let w2 = woken.clone();
    rt.block_on(async move {
        // Poll a sleep once (arming it), then drop it: the timeout's own timer ends the
        // wait. (An hour: a sleep of a few milliseconds may be due by the time a loaded
        // machine polls it, and a timeout polls its future first.)
        let r = timeout(Duration::from_millis(1), sleep(Duration::from_secs(3600))).await;
        assert!(r.is_err());
        // A task that counts its polls: its first poll arms a 30 ms sleep and drops it. If
        // the dropped timer still fired its waker, the task would be polled again after the
        // deadline and finish.
        let armed_at = Arc::new(Mutex::new(None));
        let a2 = armed_at.clone();
        let h = volt::spawn(async move {
            let mut first = true;
            std::future::poll_fn(|cx| {
                w2.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                if std::mem::take(&mut first) {
                    let mut sl = Box::pin(sleep(Duration::from_millis(30)));
                    *a2.lock().unwrap() = Some(Instant::now());
                    let _ = sl.as_mut().poll(cx);
                    drop(sl);
                    return std::task::Poll::Pending;
                }
                std::task::Poll::Ready(())
            })
            .await
        });
        // Its first poll, however late it comes, then well past the dropped deadline.
        let armed = loop {
            if let Some(t) = *armed_at.lock().unwrap() {
                break t;
            }
            sleep(Duration::from_millis(1)).await;
        };
        sleep((armed + Duration::from_millis(80)).saturating_duration_since(Instant::now())).await;
        assert!(!h.is_finished(), "a dropped timer woke its task");
        h.abort();
    });
    assert_eq!(woken.load(std::sync::atomic::Ordering::SeqCst), 1);
    let after = rt.handle().telemetry().snapshot();
    assert!(after.timers_cancelled >= before.timers_cancelled + 2, "{after:?}");
    assert_eq!(after.timers_pending, 0, "{after:?}");
}

#[test]
fn ten_thousand_concurrent_sleeps_all_complete() {
    let rt = rt(2);
    let start = Instant::now();
    let n = rt.block_on(async {
        let hs: Vec<_> = (0..10_000u64)
            .map(|i| {
                volt::spawn(async move {
                    let d = Duration::from_millis(1 + i % 20);
                    let t = Instant::now();
                    sleep(d).await;
                    assert!(t.elapsed() >= d);
                })
            })
            .collect();
        let n = hs.len();
        for h in hs {
            h.await.unwrap();
        }
        n
    });
    let took = start.elapsed();
    assert_eq!(n, 10_000);
    // Only a hang fails this (about 200 ms unloaded: the speed is the benchmark's).
    assert!(took < Duration::from_secs(60), "10,000 sleeps of 1-20 ms took {took:?}");
    let s = rt.handle().telemetry().snapshot();
    assert_eq!(s.timers_pending, 0);
    assert!(s.timers_fired > 0 && s.timers_armed >= s.timers_fired);
}

#[test]
fn interval_keeps_its_schedule() {
    let rt = rt(2);
    let ticks = rt.block_on(async {
        let mut iv = interval(Duration::from_millis(10));
        let mut ticks = vec![];
        for _ in 0..6 {
            ticks.push(iv.tick().await);
        }
        ticks
    });
    for pair in ticks.windows(2) {
        assert_eq!(pair[1] - pair[0], Duration::from_millis(10), "ticks drift: {ticks:?}");
    }
    assert!(ticks[5] > ticks[0]);
}

#[test]
fn sleep_outside_a_runtime_panics_clearly() {
    let e = std::panic::catch_unwind(|| drop(sleep(Duration::from_millis(1)))).unwrap_err();
    let msg = e.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| e.downcast_ref::<String>().cloned()).unwrap();
    assert!(msg.contains("outside a Volt runtime"), "{msg}");
}

#[test]
fn timers_wake_an_idle_runtime() {
    // Every worker parked (one in the reactor), nothing else to wake them: the timer alone
    // must wake the runtime, never early. (How promptly is a latency, for the benchmarks;
    // the bound below only turns a timer that never fires into a failure.)
    let rt = rt(2);
    for _ in 0..7 {
        assert!(wait_until(Duration::from_secs(30), || rt.handle().telemetry().snapshot().num_parked == 2));
        let (tx, rx) = std::sync::mpsc::channel();
        rt.spawn(async move {
            let t = Instant::now();
            sleep(Duration::from_millis(15)).await;
            let _ = tx.send(t.elapsed());
        });
        let took = rx.recv_timeout(Duration::from_secs(30)).expect("the timer never woke the idle runtime");
        assert!(took >= Duration::from_millis(15), "woke early: {took:?}");
    }
}

/// The latest `Instant` this platform holds (found by halving), for deadlines "as far as
/// it goes".
fn latest_instant() -> Instant {
    let now = Instant::now();
    let mut d = Duration::MAX;
    loop {
        if let Some(at) = now.checked_add(d) {
            return at;
        }
        d /= 2;
    }
}

/// Polls `a` and `b` together; returns which completed first (a minimal `select`).
async fn first_of<A: Future, B: Future>(a: A, b: B) -> &'static str {
    let (mut a, mut b) = (std::pin::pin!(a), std::pin::pin!(b));
    std::future::poll_fn(|cx| {
        if a.as_mut().poll(cx).is_ready() {
            return std::task::Poll::Ready("a");
        }
        if b.as_mut().poll(cx).is_ready() {
            return std::task::Poll::Ready("b");
        }
        std::task::Poll::Pending
    })
    .await
}

/// `Duration::MAX`, a deadline centuries away and an `Instant` at the platform's limit all
/// mean "never": no overflow panic, the sleep stays pending, and dropping it (after it was
/// armed) unlinks its timer.
#[test]
fn huge_durations_and_deadlines_mean_never() {
    let rt = rt(2);
    let before = rt.handle().telemetry().snapshot();
    rt.block_on(async {
        let now = Instant::now();
        let s = sleep(Duration::MAX);
        assert!(s.deadline() > now + Duration::from_secs(50 * 365 * 24 * 3600), "{:?}", s.deadline());
        assert!(!s.is_elapsed());
        // Armed by the first poll, then dropped by `timeout`.
        assert!(timeout(Duration::from_millis(20), s).await.is_err());
        let centuries = Instant::now() + Duration::from_secs(1_000 * 365 * 24 * 3600);
        assert!(timeout(Duration::from_millis(20), sleep_until(centuries)).await.is_err());
        assert!(timeout(Duration::from_millis(20), sleep_until(latest_instant())).await.is_err());
        // Huge but representable durations too (past the wheel's 2.2-year span).
        for d in [Duration::from_secs(u64::MAX / 4), Duration::from_secs(3 * 365 * 24 * 3600)] {
            assert!(timeout(Duration::from_millis(20), sleep(d)).await.is_err(), "{d:?}");
        }
        // A `select` of a never-sleep against one that ends: the short one wins, and the
        // never-sleep is dropped with the select.
        assert_eq!(first_of(sleep(Duration::MAX), sleep(Duration::from_millis(10))).await, "b");
        // `reset` to an unreachable deadline.
        let mut s = Box::pin(sleep(Duration::from_millis(1)));
        s.as_mut().reset(latest_instant());
        assert!(timeout(Duration::from_millis(20), s.as_mut()).await.is_err());
    });
    let after = rt.handle().telemetry().snapshot();
    assert_eq!(after.timers_pending, 0, "a never-timer stayed in the wheel after its drop: {after:?}");
    assert!(after.timers_cancelled >= before.timers_cancelled + 7, "{after:?}");
}

/// `timeout(Duration::MAX, f)` is "no time limit": it returns the future's value, whether
/// the future is ready at once or takes a while.
#[test]
fn timeout_with_duration_max_returns_the_value() {
    let rt = rt(2);
    rt.block_on(async {
        assert_eq!(timeout(Duration::MAX, async { 7 }).await, Ok(7));
        assert_eq!(timeout(Duration::MAX, std::future::ready("ready")).await, Ok("ready"));
        let later = timeout(Duration::MAX, async {
            sleep(Duration::from_millis(10)).await;
            8
        });
        assert_eq!(later.await, Ok(8));
        let task = timeout(Duration::MAX, volt::spawn(async { 9 })).await;
        assert_eq!(task.unwrap().unwrap(), 9);
    });
    assert_eq!(rt.handle().telemetry().snapshot().timers_pending, 0);
}

/// An interval with a period too large for `Instant` ticks once at once, then never, and
/// a huge representable period behaves the same; neither panics on the second tick.
#[test]
fn interval_with_a_huge_period_ticks_once_then_never() {
    let rt = rt(2);
    rt.block_on(async {
        for period in [Duration::MAX, Duration::from_secs(u64::MAX / 4), Duration::from_secs(10 * 365 * 24 * 3600)] {
            let mut iv = interval(period);
            assert_eq!(iv.period(), period);
            let first = timeout(Duration::from_secs(30), iv.tick()).await;
            assert!(first.is_ok(), "the first tick of {period:?} did not complete");
            assert!(timeout(Duration::from_millis(20), iv.tick()).await.is_err(), "{period:?} ticked twice");
            // Still pending on a later try: the schedule saturated, it did not wrap.
            assert!(timeout(Duration::from_millis(5), iv.tick()).await.is_err());
        }
    });
}

/// A runtime dropped while tasks wait on never-sleeps shuts down (within a generous bound)
/// and drops every one of those futures, timers included.
#[test]
fn runtime_shuts_down_with_never_sleeps_pending() {
    let rt = rt(2);
    let drops = DropCount::default();
    let n = 8;
    for i in 0..n {
        let guard = drops.guard();
        rt.spawn(async move {
            let _guard = guard;
            match i % 4 {
                0 => sleep(Duration::MAX).await,
                1 => sleep_until(latest_instant()).await,
                2 => {
                    let _ = timeout(Duration::MAX, std::future::pending::<()>()).await;
                }
                _ => {
                    let mut iv = interval(Duration::MAX);
                    iv.tick().await;
                    iv.tick().await;
                }
            }
            unreachable!("a never-sleep completed");
        });
    }
    assert!(
        wait_until(Duration::from_secs(30), || rt.handle().telemetry().snapshot().timers_pending == n),
        "the never-sleeps were not all armed: {:?}",
        rt.handle().telemetry().snapshot()
    );
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        drop(rt);
        let _ = tx.send(());
    });
    rx.recv_timeout(Duration::from_secs(60)).expect("the runtime did not shut down with never-sleeps pending");
    assert_eq!(drops.get(), n as usize, "a pending future was not dropped at shutdown");
}

/// A timer still armed when the runtime shuts down (here a sleep held outside any task,
/// so no cancelled task drops it) is fired by the shutdown and counted as fired: none is
/// left pending in the telemetry (the first form fired it without counting it).
#[test]
fn a_timer_fired_by_shutdown_is_counted() {
    use std::task::Poll;
    let rt = rt(2);
    let telemetry = rt.handle().telemetry();
    // Made inside the runtime (a sleep needs its timer), kept outside it.
    let mut s = rt.block_on(async { Some(Box::pin(sleep(Duration::from_secs(3600)))) }).unwrap();
    let first = rt.block_on(std::future::poll_fn(|cx| Poll::Ready(s.as_mut().poll(cx).is_ready())));
    assert!(!first, "a sleep of an hour was ready at once");
    assert_eq!(telemetry.snapshot().timers_pending, 1);
    drop(rt);
    let snap = telemetry.snapshot();
    assert_eq!((snap.timers_armed, snap.timers_fired, snap.timers_cancelled, snap.timers_pending), (1, 1, 0, 0));
    // And the sleep itself is over.
    assert!(futures::executor::block_on(std::future::poll_fn(|cx| Poll::Ready(s.as_mut().poll(cx).is_ready()))));
}

/// `shutdown_timeout(Duration::MAX)` waits as long as it takes (here: not long) instead of
/// panicking on the deadline's overflow.
#[test]
fn shutdown_timeout_with_duration_max() {
    let rt = rt(2);
    let h = rt.spawn(async { 5 });
    assert_eq!(h.join().unwrap(), 5);
    rt.shutdown_timeout(Duration::MAX);
}

/// A waker whose drop drops an armed sleep: the wheel must not hold its lock while it
/// lets go of a waker it replaces, or that drop, which takes the same lock, deadlocks.
#[test]
fn a_replaced_waker_is_dropped_outside_the_wheels_lock() {
    use std::task::{Context, Wake, Waker};
    /// Held only to be dropped with the waker.
    struct Holder(#[allow(dead_code)] Mutex<Option<Pin<Box<volt::time::Sleep>>>>);
    impl Wake for Holder {
        fn wake(self: Arc<Self>) {}
    }
    let rt = rt(1);
    let (tx, rx) = std::sync::mpsc::channel();
    rt.spawn(async move {
        let noop = Waker::noop();
        // The sleep the first waker holds, armed (polled once) so its drop disarms it.
        let mut held = Box::pin(sleep(Duration::from_secs(3600)));
        assert!(held.as_mut().poll(&mut Context::from_waker(noop)).is_pending());
        let first = Waker::from(Arc::new(Holder(Mutex::new(Some(held)))));
        let mut s = Box::pin(sleep(Duration::from_secs(3600)));
        assert!(s.as_mut().poll(&mut Context::from_waker(&first)).is_pending());
        // The wheel now holds the last reference to the first waker.
        drop(first);
        // A different waker replaces it: the old one, and the sleep inside, drop.
        assert!(s.as_mut().poll(&mut Context::from_waker(noop)).is_pending());
        drop(s);
        let _ = tx.send(());
    });
    if rx.recv_timeout(Duration::from_secs(30)).is_err() {
        std::mem::forget(rt);
        panic!("replacing a sleep's waker deadlocked on the wheel's lock");
    }
}

/// A blocking task waiting on one of the runtime's timers through another executor: at
/// shutdown nothing fires timers any more, so the sleep ends there (and a timeout
/// elapses) instead of holding up the runtime's drop, which joins the blocking pool.
#[test]
fn a_timer_awaited_on_a_blocking_thread_ends_at_shutdown() {
    let rt = rt(1);
    let (started_tx, started_rx) = std::sync::mpsc::channel();
    let waits = rt.handle().spawn_blocking(move || {
        let _ = started_tx.send(());
        futures::executor::block_on(sleep(Duration::from_secs(3600)));
        let timed = futures::executor::block_on(timeout(Duration::from_secs(3600), std::future::pending::<()>()));
        timed.is_err()
    });
    started_rx.recv().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        drop(rt);
        let _ = tx.send(());
    });
    assert!(rx.recv_timeout(Duration::from_secs(30)).is_ok(), "the runtime's drop waited on the blocked timer");
    // The blocking task ran to its end: both waits returned.
    assert_eq!(waits.join().ok(), Some(true), "the timeout did not elapse");
}

/// A sleep polled once and then reset wakes its task at the new deadline without being
/// polled again (hyper's `Timer::reset`, and Tokio's `Sleep::reset`, work that way); a
/// reset to a deadline already past wakes it at once. Each sleep completes at its next
/// poll, and the timer counts add up: every armed timer fired or was cancelled.
#[test]
fn a_reset_sleep_wakes_its_task_without_another_poll() {
    let rt = rt(1);
    let before = rt.handle().telemetry().snapshot();
    let (tx, rx) = std::sync::mpsc::channel();
    rt.spawn(async move {
        let now = Instant::now();
        for new_deadline in [now + Duration::from_millis(20), now - Duration::from_millis(1)] {
            let mut s = Box::pin(sleep(Duration::from_secs(3600)));
            let mut polls = 0;
            std::future::poll_fn(|cx| {
                polls += 1;
                if polls == 1 {
                    assert!(s.as_mut().poll(cx).is_pending());
                    s.as_mut().reset(new_deadline);
                    // Waits for a wake without polling the sleep again.
                    return std::task::Poll::Pending;
                }
                std::task::Poll::Ready(())
            })
            .await;
            assert!(Instant::now() >= new_deadline, "woken before the new deadline");
            // Due at the wake: a sleep left pending here would hang the test's bound.
            s.as_mut().await;
        }
        let _ = tx.send(());
    });
    if rx.recv_timeout(Duration::from_secs(30)).is_err() {
        std::mem::forget(rt);
        panic!("a reset sleep never woke its task");
    }
    let after = rt.handle().telemetry().snapshot();
    let armed = after.timers_armed - before.timers_armed;
    let ended = (after.timers_fired - before.timers_fired) + (after.timers_cancelled - before.timers_cancelled);
    // Two arms of the first sleep (the reset re-arms it), one of the second.
    assert_eq!((armed, ended), (3, 3), "{after:?}");
}
