#![cfg(feature = "test-util")]
//! `volt::time` against Tokio's documented behaviour: `Instant`, intervals and their
//! missed-tick behaviours, `timeout_at`, `Sleep::reset` through `Pin`, and the paused
//! clock (`pause`, `advance`, `resume`, auto-advance). Under a paused clock the time is
//! virtual, so the times asserted here are exact; nothing asserts how long anything took
//! in real time, only that each test finishes (within a generous bound).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;
use volt::time::{self, Instant, MissedTickBehavior};

// Tokio's `time` module re-exports `Duration`: code that names it from there builds.
const _: volt::time::Duration = Duration::ZERO;

const BOUND: Duration = Duration::from_secs(10);

fn runtime(workers: usize) -> volt::Runtime {
    volt::runtime::Builder::new().worker_threads(workers).event_ring(1024).build().unwrap()
}

/// Run `f` on a thread of its own and wait at most [`BOUND`] for it: a hang fails the
/// test instead of stalling the suite. A panic in `f` is the test's panic.
fn bounded<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let t = std::thread::spawn(f);
    let until = std::time::Instant::now() + BOUND;
    while !t.is_finished() {
        assert!(std::time::Instant::now() < until, "the test did not finish within {BOUND:?}");
        std::thread::sleep(Duration::from_millis(2));
    }
    match t.join() {
        Ok(v) => v,
        Err(p) => std::panic::resume_unwind(p),
    }
}

/// On 1 and on 2 workers: a paused clock must behave the same on both.
fn on_each_runtime<F, Fut>(f: F)
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()>,
{
    let f = Arc::new(f);
    for workers in [1, 2] {
        let f = f.clone();
        bounded(move || runtime(workers).block_on(f()));
    }
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Pushes its id to a shared list when woken.
struct Recorder {
    id: u32,
    log: Arc<Mutex<Vec<u32>>>,
}

impl Wake for Recorder {
    fn wake(self: Arc<Self>) {
        self.log.lock().unwrap().push(self.id);
    }
}

fn poll_once<F: Future + Unpin>(f: &mut F, waker: &Waker) -> Poll<F::Output> {
    Pin::new(f).poll(&mut Context::from_waker(waker))
}

#[test]
fn instant_arithmetic_and_conversions() {
    let std_now = std::time::Instant::now();
    let a = Instant::from_std(std_now);
    assert_eq!(a.into_std(), std_now);
    assert_eq!(Instant::from(std_now), a);
    assert_eq!(std::time::Instant::from(a), std_now);
    let b = a + ms(1500);
    assert_eq!(b - a, ms(1500));
    assert_eq!(a - b, Duration::ZERO, "Sub<Instant> saturates, as Tokio's");
    assert_eq!(b.duration_since(a), ms(1500));
    assert_eq!(a.duration_since(b), Duration::ZERO);
    assert_eq!(b.checked_duration_since(a), Some(ms(1500)));
    assert_eq!(a.checked_duration_since(b), None);
    assert_eq!(a.saturating_duration_since(b), Duration::ZERO);
    assert_eq!(a.checked_add(ms(1500)), Some(b));
    assert_eq!(b.checked_sub(ms(1500)), Some(a));
    assert_eq!(a.checked_add(Duration::MAX), None);
    assert_eq!(b - ms(1500), a);
    let mut c = a;
    c += ms(10);
    c -= ms(4);
    assert_eq!(c, a + ms(6));
    assert!(a < b && b > c && c > a);
    assert_eq!(a.max(b), b);
    let set: std::collections::HashSet<Instant> = [a, b, a].into_iter().collect();
    assert_eq!(set.len(), 2);
    assert_eq!(format!("{a:?}"), format!("{std_now:?}"));
    // Outside a runtime `now` is std's clock: it never runs behind a reading taken
    // before it.
    let before = std::time::Instant::now();
    assert!(Instant::now().into_std() >= before);
    assert!(a.elapsed() >= Duration::ZERO);
}

#[test]
fn elapsed_error_is_tokios() {
    let rt = runtime(1);
    let e =
        bounded(move || rt.block_on(async { time::timeout(ms(0), std::future::pending::<()>()).await.unwrap_err() }));
    assert_eq!(e.to_string(), "deadline has elapsed");
    assert_eq!(e, e.clone());
    let io: std::io::Error = e.into();
    assert_eq!(io.kind(), std::io::ErrorKind::TimedOut);
    let _: &dyn std::error::Error = &e;
    // Tokio's timer error type, for code that names it.
    use time::error::Error;
    assert!(Error::shutdown().is_shutdown() && !Error::shutdown().is_invalid());
    assert!(Error::at_capacity().is_at_capacity() && Error::invalid().is_invalid());
    assert!(!Error::invalid().to_string().is_empty());
}

#[test]
fn interval_first_tick_completes_at_once() {
    on_each_runtime(|| async {
        time::pause();
        let start = Instant::now();
        let mut i = time::interval(ms(10));
        assert_eq!(i.period(), ms(10));
        assert_eq!(i.missed_tick_behavior(), MissedTickBehavior::Burst, "Burst is the default");
        // Ready on the first poll, at the start, with no time passing.
        let first = futures::poll!(std::pin::pin!(i.tick()));
        assert_eq!(first, Poll::Ready(start));
        assert_eq!(Instant::now(), start);
        assert_eq!(i.tick().await, start + ms(10));
        assert_eq!(Instant::now(), start + ms(10));
        assert_eq!(i.tick().await, start + ms(20));
        // interval_at: the first tick at the given start, later than now.
        let mut j = time::interval_at(start + ms(100), ms(7));
        assert_eq!(j.tick().await, start + ms(100));
        assert_eq!(Instant::now(), start + ms(100));
        assert_eq!(j.tick().await, start + ms(107));
    });
}

#[test]
#[should_panic(expected = "`period` must be non-zero.")]
fn interval_of_zero_panics() {
    let rt = runtime(1);
    rt.block_on(async {
        let _ = time::interval(Duration::ZERO);
    });
}

/// Period 100 ms from `start`, then the task "busy" for 350 ms (the paused clock jumps
/// while the interval is not polled): the ticks each behaviour gives, with the clock's
/// reading at each.
async fn ticks_after_a_stall(behavior: MissedTickBehavior) -> Vec<(Duration, Duration)> {
    time::pause();
    let start = Instant::now();
    let mut i = time::interval(ms(100));
    i.set_missed_tick_behavior(behavior);
    assert_eq!(i.missed_tick_behavior(), behavior);
    assert_eq!(i.tick().await, start);
    time::advance(ms(350)).await;
    let mut out = vec![];
    for _ in 0..5 {
        let at = i.tick().await;
        out.push((at - start, Instant::now() - start));
    }
    out
}

#[test]
fn missed_ticks_burst() {
    on_each_runtime(|| async {
        let got = ticks_after_a_stall(MissedTickBehavior::Burst).await;
        // The missed ticks at once (the clock still at 350), then on the old schedule.
        assert_eq!(
            got,
            vec![(ms(100), ms(350)), (ms(200), ms(350)), (ms(300), ms(350)), (ms(400), ms(400)), (ms(500), ms(500))]
        );
    });
}

#[test]
fn missed_ticks_delay() {
    on_each_runtime(|| async {
        let got = ticks_after_a_stall(MissedTickBehavior::Delay).await;
        // One late tick, then a period after it each time.
        assert_eq!(
            got,
            vec![(ms(100), ms(350)), (ms(450), ms(450)), (ms(550), ms(550)), (ms(650), ms(650)), (ms(750), ms(750))]
        );
    });
}

#[test]
fn missed_ticks_skip() {
    on_each_runtime(|| async {
        let got = ticks_after_a_stall(MissedTickBehavior::Skip).await;
        // One late tick, then the next ones of the original schedule.
        assert_eq!(
            got,
            vec![(ms(100), ms(350)), (ms(400), ms(400)), (ms(500), ms(500)), (ms(600), ms(600)), (ms(700), ms(700))]
        );
    });
}

#[test]
fn a_tick_within_a_few_ms_of_its_time_is_not_missed() {
    on_each_runtime(|| async {
        // 3 ms late is the ordinary delay of a wake: the schedule goes on whatever the
        // behaviour (Tokio counts a tick as missed only past 5 ms).
        time::pause();
        let start = Instant::now();
        let mut i = time::interval(ms(100));
        i.set_missed_tick_behavior(MissedTickBehavior::Delay);
        i.tick().await;
        time::advance(ms(103)).await;
        assert_eq!(i.tick().await, start + ms(100));
        assert_eq!(i.tick().await, start + ms(200));
        assert_eq!(Instant::now(), start + ms(200));
    });
}

#[test]
fn interval_resets() {
    on_each_runtime(|| async {
        time::pause();
        let start = Instant::now();
        let mut i = time::interval(ms(100));
        i.tick().await;
        time::advance(ms(30)).await;
        i.reset();
        assert_eq!(i.tick().await, start + ms(130), "reset: a period from now");
        i.reset_immediately();
        assert_eq!(i.tick().await, start + ms(130), "reset_immediately: now");
        assert_eq!(Instant::now(), start + ms(130));
        i.reset_after(ms(45));
        assert_eq!(i.tick().await, start + ms(175));
        i.reset_at(start + ms(1000));
        assert_eq!(i.tick().await, start + ms(1000));
        assert_eq!(i.tick().await, start + ms(1100), "the schedule goes on from the reset");
        assert_eq!(Instant::now(), start + ms(1100));
    });
}

#[test]
fn timeout_at_elapses_at_its_deadline() {
    on_each_runtime(|| async {
        time::pause();
        let start = Instant::now();
        let r = time::timeout_at(start + Duration::from_secs(90), std::future::pending::<()>()).await;
        assert!(r.is_err());
        assert_eq!(Instant::now(), start + Duration::from_secs(90));
        // A future that is ready completes, even with its deadline passed already.
        assert_eq!(time::timeout_at(start, async { 7 }).await, Ok(7));
        // One that finishes before the deadline: its output, the clock where it finished.
        let t0 = Instant::now();
        let r = time::timeout_at(t0 + ms(500), time::sleep(ms(200))).await;
        assert_eq!(r, Ok(()));
        assert_eq!(Instant::now(), t0 + ms(200));
    });
}

/// A future that completes at once with the number it holds.
struct Number(u32);

impl Future for Number {
    type Output = u32;
    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<u32> {
        Poll::Ready(self.0)
    }
}

#[test]
fn timeout_accessors() {
    on_each_runtime(|| async {
        let mut t = time::timeout(ms(10), Number(5));
        assert_eq!(t.get_ref().0, 5);
        t.get_mut().0 = 9;
        assert_eq!(t.get_ref().0, 9);
        let inner = t.into_inner();
        assert_eq!(inner.0, 9);
        assert_eq!(time::timeout(ms(10), inner).await, Ok(9));
    });
}

/// `Sleep::is_elapsed` as Tokio's: not before the first poll, whatever the deadline;
/// not while waiting until the timers fire it; then yes, and after a poll completes it;
/// a waiting sleep reset to a passed deadline is elapsed at once.
#[test]
fn is_elapsed_follows_polls_and_fired_timers_not_the_clock() {
    on_each_runtime(|| async {
        time::pause();
        let start = Instant::now();
        let mut due = Box::pin(time::sleep(Duration::ZERO));
        let mut past = Box::pin(time::sleep_until(start - Duration::from_secs(1)));
        time::advance(Duration::from_secs(1)).await;
        assert!(!due.is_elapsed() && !past.is_elapsed(), "elapsed before any poll");
        assert_eq!(poll_once(&mut due, Waker::noop()), Poll::Ready(()));
        assert!(due.is_elapsed());
        past.as_mut().await;
        assert!(past.is_elapsed());

        let mut waiting = Box::pin(time::sleep(Duration::from_secs(10)));
        assert!(poll_once(&mut waiting, Waker::noop()).is_pending());
        assert!(!waiting.is_elapsed());
        time::advance(Duration::from_secs(10)).await;
        assert!(waiting.is_elapsed(), "fired by the timers, not yet polled");
        assert_eq!(poll_once(&mut waiting, Waker::noop()), Poll::Ready(()));
        assert!(waiting.is_elapsed());

        let mut moved = Box::pin(time::sleep(Duration::from_secs(60)));
        assert!(poll_once(&mut moved, Waker::noop()).is_pending());
        moved.as_mut().reset(Instant::now() - Duration::from_millis(1));
        assert!(moved.is_elapsed(), "reset to a passed deadline while waiting");
        assert_eq!(poll_once(&mut moved, Waker::noop()), Poll::Ready(()));
    });
}

#[test]
fn sleep_reset_through_pin() {
    on_each_runtime(|| async {
        time::pause();
        let start = Instant::now();
        // On the stack with `pin!`: armed by a first poll, then moved later.
        let mut s = std::pin::pin!(time::sleep(Duration::from_secs(10)));
        assert_eq!(s.deadline(), start + Duration::from_secs(10));
        assert!(futures::poll!(s.as_mut()).is_pending());
        s.as_mut().reset(start + Duration::from_secs(30));
        assert_eq!(s.deadline(), start + Duration::from_secs(30));
        s.as_mut().await;
        assert_eq!(Instant::now(), start + Duration::from_secs(30), "the old deadline did not end it");
        assert!(s.is_elapsed());
        // A completed sleep reset waits again.
        s.as_mut().reset(start + Duration::from_secs(31));
        assert!(!s.is_elapsed());
        s.as_mut().await;
        assert_eq!(Instant::now(), start + Duration::from_secs(31));
        // Boxed: moved earlier.
        let mut b = Box::pin(time::sleep(Duration::from_secs(3600)));
        assert!(futures::poll!(b.as_mut()).is_pending());
        b.as_mut().reset(start + Duration::from_secs(40));
        b.await;
        assert_eq!(Instant::now(), start + Duration::from_secs(40));
        // Pinned on the stack; a deadline passed already completes at once.
        let mut u = std::pin::pin!(time::sleep(Duration::from_secs(5)));
        u.as_mut().reset(start);
        u.as_mut().await;
        assert_eq!(Instant::now(), start + Duration::from_secs(40));
    });
}

#[test]
fn a_paused_sleep_of_60s_moves_the_clock_exactly_60s() {
    on_each_runtime(|| async {
        time::pause();
        let start = Instant::now();
        time::sleep(Duration::from_secs(60)).await;
        assert_eq!(Instant::now() - start, Duration::from_secs(60));
        assert_eq!(start.elapsed(), Duration::from_secs(60));
        // The same from a spawned task, read on a worker.
        let t0 = Instant::now();
        let h = volt::spawn(async move {
            time::sleep(Duration::from_secs(60)).await;
            Instant::now() - t0
        });
        assert_eq!(h.await.unwrap(), Duration::from_secs(60));
    });
}

#[test]
fn sleeping_tasks_each_wake_at_their_own_virtual_time() {
    on_each_runtime(|| async {
        time::pause();
        let start = Instant::now();
        let handles: Vec<_> = (1..=20u64)
            .rev()
            .map(|i| {
                volt::spawn(async move {
                    time::sleep(Duration::from_secs(i * 7)).await;
                    (i, Instant::now() - start)
                })
            })
            .collect();
        for h in handles {
            let (i, woke) = h.await.unwrap();
            assert_eq!(woke, Duration::from_secs(i * 7), "task {i}");
        }
        assert_eq!(Instant::now() - start, Duration::from_secs(140));
    });
}

#[test]
fn advance_fires_due_timers_in_deadline_order() {
    on_each_runtime(|| async {
        time::pause();
        let start = Instant::now();
        let log = Arc::new(Mutex::new(Vec::new()));
        let mut sleeps: Vec<(u32, Pin<Box<time::Sleep>>)> = [3u32, 1, 5, 2]
            .into_iter()
            .map(|id| (id, Box::pin(time::sleep_until(start + Duration::from_secs(id as u64)))))
            .collect();
        for (id, s) in &mut sleeps {
            let w = Waker::from(Arc::new(Recorder { id: *id, log: log.clone() }));
            assert!(poll_once(s, &w).is_pending());
        }
        time::advance(Duration::from_secs(4)).await;
        assert_eq!(Instant::now(), start + Duration::from_secs(4));
        assert_eq!(*log.lock().unwrap(), vec![1, 2, 3], "the due ones, earliest first");
        for (id, s) in &sleeps {
            assert_eq!(s.is_elapsed(), *id <= 4, "sleep {id}");
        }
        time::advance(Duration::from_secs(1)).await;
        assert_eq!(*log.lock().unwrap(), vec![1, 2, 3, 5]);
        for (_, s) in &mut sleeps {
            assert_eq!(poll_once(s, Waker::noop()), Poll::Ready(()));
        }
        // A sleep awaited across an advance completes too.
        let t = Instant::now();
        let h = volt::spawn(time::sleep(Duration::from_secs(2)));
        volt::task::yield_now().await;
        time::advance(Duration::from_secs(3)).await;
        h.await.unwrap();
        assert_eq!(Instant::now(), t + Duration::from_secs(3), "the advance, not auto-advance");
    });
}

#[test]
fn a_timeout_of_minutes_around_a_never_ready_future_elapses_exactly() {
    on_each_runtime(|| async {
        time::pause();
        let start = Instant::now();
        let r = time::timeout(Duration::from_secs(5 * 60), std::future::pending::<()>()).await;
        assert!(r.is_err());
        assert_eq!(Instant::now() - start, Duration::from_secs(5 * 60));
    });
}

#[test]
fn a_blocking_task_holds_the_paused_clock() {
    on_each_runtime(|| async {
        time::pause();
        let start = Instant::now();
        // While the closure runs, the runtime is not idle: the hour-long timeout must not
        // auto-advance under it.
        let h = volt::task::spawn_blocking(|| {
            std::thread::sleep(ms(50));
            Instant::now()
        });
        let r = time::timeout(Duration::from_secs(3600), h).await;
        let seen = r.expect("the clock advanced while a blocking task ran").unwrap();
        assert_eq!(seen, start, "a blocking-pool thread reads the paused clock");
        assert_eq!(Instant::now(), start);
    });
}

#[test]
fn block_on_work_holds_the_paused_clock() {
    on_each_runtime(|| async {
        time::pause();
        let start = Instant::now();
        // A timer pending in another task while this future computes (and blocks its
        // thread) for real time: the clock stays put.
        let h = volt::spawn(time::sleep(Duration::from_secs(1)));
        volt::task::yield_now().await;
        std::thread::sleep(ms(50));
        assert_eq!(Instant::now(), start);
        h.await.unwrap();
        assert_eq!(Instant::now(), start + Duration::from_secs(1));
    });
}

#[test]
fn real_io_works_while_paused() {
    on_each_runtime(|| async {
        use futures::{AsyncReadExt, AsyncWriteExt};
        time::pause();
        let start = Instant::now();
        let listener = volt::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = volt::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 5];
            s.read_exact(&mut buf).await.unwrap();
            s.write_all(&buf).await.unwrap();
        });
        let mut c = volt::net::TcpStream::connect(addr).await.unwrap();
        c.write_all(b"hello").await.unwrap();
        let mut buf = [0u8; 5];
        c.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"hello");
        server.await.unwrap();
        assert_eq!(Instant::now(), start, "no timer: nothing to advance to");
    });
}

#[test]
fn a_cancelled_timer_never_moves_the_paused_clock() {
    on_each_runtime(|| async {
        use futures::AsyncReadExt;
        use std::io::Write;
        time::pause();
        let start = Instant::now();
        // A timeout whose future is ready at once: its timer is armed, then cancelled.
        assert_eq!(time::timeout(Duration::from_secs(10), async { 1 }).await, Ok(1));
        let mut armed = Box::pin(time::timeout(Duration::from_secs(20), std::future::pending::<()>()));
        assert!(futures::poll!(armed.as_mut()).is_pending());
        drop(armed);
        // Then wait for real I/O from a peer outside the runtime, which answers a while
        // later: the runtime sits idle meanwhile with no timer pending, so the clock
        // has nowhere to go.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let peer = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            std::thread::sleep(ms(30));
            s.write_all(b"x").unwrap();
        });
        let mut c = volt::net::TcpStream::connect(addr).await.unwrap();
        let mut b = [0u8; 1];
        c.read_exact(&mut b).await.unwrap();
        peer.join().unwrap();
        assert_eq!(Instant::now(), start, "the clock jumped to a cancelled timer's deadline");
    });
}

#[test]
fn resume_runs_the_clock_from_where_it_stood() {
    on_each_runtime(|| async {
        time::pause();
        let start = Instant::now();
        time::advance(Duration::from_secs(3600)).await;
        time::resume();
        let after = Instant::now();
        assert!(after >= start + Duration::from_secs(3600));
        // The real clock drives it again: a short sleep ends.
        time::sleep(ms(5)).await;
        assert!(Instant::now() >= after + ms(5));
        // And it can be paused again.
        time::pause();
        let p = Instant::now();
        time::sleep(Duration::from_secs(100)).await;
        assert_eq!(Instant::now() - p, Duration::from_secs(100));
    });
}

#[test]
fn pause_resume_and_advance_misuse_panics_with_tokios_messages() {
    let rt = runtime(1);
    let caught = |f: fn()| {
        let rt = &rt;
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| rt.block_on(async { f() })))
            .map_err(|p| p.downcast_ref::<String>().cloned().or(p.downcast_ref::<&str>().map(|s| s.to_string())))
            .unwrap_err()
            .unwrap()
    };
    assert_eq!(caught(time::resume), "time is not frozen");
    assert_eq!(
        caught(|| {
            time::pause();
            time::pause()
        }),
        "time is already frozen"
    );
    // Still paused from the call above: resume works once.
    rt.block_on(async { time::resume() });
    let advance = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        rt.block_on(time::advance(ms(1)));
    }));
    assert!(advance.is_err());
    let outside = std::panic::catch_unwind(time::pause);
    assert!(outside.is_err(), "pause outside a runtime");
}

#[test]
fn an_interval_in_a_task_ticks_on_virtual_time() {
    on_each_runtime(|| async {
        time::pause();
        let start = Instant::now();
        let h = volt::spawn(async move {
            let mut i = time::interval(Duration::from_secs(1));
            let mut at = vec![];
            for _ in 0..5 {
                at.push(i.tick().await - start);
            }
            at
        });
        let at = h.await.unwrap();
        assert_eq!(at, (0..5).map(Duration::from_secs).collect::<Vec<_>>());
        assert_eq!(Instant::now() - start, Duration::from_secs(4));
    });
}

#[test]
fn a_paused_sleep_names_its_wait() {
    let rt = runtime(2);
    let rt = Arc::new(rt);
    let r = rt.clone();
    bounded(move || {
        r.block_on(async {
            time::pause();
            // The paused clock ahead of the real one: the time left shown is still the
            // runtime clock's distance to the deadline.
            time::advance(Duration::from_secs(1800)).await;
            // A task waits on a sleep while this future holds the runtime busy (a block_on
            // that polls keeps the clock from auto-advancing), so it stays pending.
            let h = volt::task::Builder::new().name("paused sleeper").spawn(time::sleep(Duration::from_secs(3600)));
            let until = std::time::Instant::now() + BOUND;
            loop {
                let tasks = volt::runtime::Handle::current().telemetry().tasks();
                let t = tasks.iter().find(|t| t.name.as_deref() == Some("paused sleeper"));
                if let Some(w) = t.and_then(|t| t.waiting_on.clone()) {
                    match w {
                        volt::telemetry::WaitReason::Sleep { remaining: Some(d) } => {
                            assert!(d <= Duration::from_secs(3600) && d > Duration::from_secs(3000), "{d:?}")
                        }
                        other => panic!("{other:?}"),
                    }
                    break;
                }
                assert!(std::time::Instant::now() < until, "the sleeper never showed its wait");
                std::thread::sleep(ms(2));
            }
            h.abort();
        })
    });
}

#[test]
fn advance_moves_the_clock_by_exactly_the_duration_even_below_a_millisecond() {
    on_each_runtime(|| async {
        time::pause();
        for d in [Duration::from_micros(51_592), Duration::from_micros(1), ms(1), Duration::from_micros(3_141_592)] {
            let before = Instant::now();
            time::advance(d).await;
            assert_eq!(before.elapsed(), d);
        }
    });
}

#[test]
fn quarter_millisecond_advances_fire_a_1ms_sleep_on_the_fourth() {
    on_each_runtime(|| async {
        time::pause();
        let log = Arc::new(Mutex::new(Vec::new()));
        let w = Waker::from(Arc::new(Recorder { id: 1, log: log.clone() }));
        let mut s = Box::pin(time::sleep(ms(1)));
        assert!(poll_once(&mut s, &w).is_pending());
        for step in 1..=3 {
            time::advance(Duration::from_micros(250)).await;
            assert!(log.lock().unwrap().is_empty(), "woken early, at step {step}");
            assert!(poll_once(&mut s, &w).is_pending(), "ready early, at step {step}");
        }
        time::advance(Duration::from_micros(250)).await;
        assert_eq!(*log.lock().unwrap(), vec![1], "woken when its deadline came");
        assert_eq!(poll_once(&mut s, &w), Poll::Ready(()));
    });
}

#[test]
fn an_interval_polled_across_manual_advances() {
    on_each_runtime(|| async {
        time::pause();
        let start = Instant::now();
        time::advance(ms(1)).await;
        let mut i = time::interval_at(start, ms(300));
        let w = Waker::noop();
        let poll = |i: &mut time::Interval| i.poll_tick(&mut Context::from_waker(w));
        assert_eq!(poll(&mut i), Poll::Ready(start));
        assert!(poll(&mut i).is_pending());
        time::advance(ms(100)).await;
        assert!(poll(&mut i).is_pending());
        time::advance(ms(200)).await;
        // 1 ms late: on schedule.
        assert_eq!(poll(&mut i), Poll::Ready(start + ms(300)));
        assert!(poll(&mut i).is_pending());
        time::advance(ms(400)).await;
        assert_eq!(poll(&mut i), Poll::Ready(start + ms(600)));
        assert!(poll(&mut i).is_pending(), "the 900 ms tick is still ahead");
        time::advance(ms(500)).await;
        // Burst: the missed tick and the one just due, back to back.
        assert_eq!(poll(&mut i), Poll::Ready(start + ms(900)));
        assert_eq!(poll(&mut i), Poll::Ready(start + ms(1200)));
        assert!(poll(&mut i).is_pending());
    });
}

/// Many sleeps of pseudo-random lengths (some below a millisecond) one after another on
/// a paused clock: the times each one ends at.
fn paused_sleep_run(workers: usize) -> Vec<Duration> {
    runtime(workers).block_on(async {
        time::pause();
        let start = Instant::now();
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut times = vec![];
        for _ in 0..1_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            time::sleep(Duration::from_micros(x % 1_000_000)).await;
            times.push(start.elapsed());
        }
        times
    })
}

#[test]
fn paused_time_is_deterministic() {
    for workers in [1, 2] {
        let (a, b) = bounded(move || (paused_sleep_run(workers), paused_sleep_run(workers)));
        assert_eq!(a, b, "on {workers} workers");
        assert!(a.windows(2).all(|w| w[0] <= w[1]));
    }
}

/// Parks so far, over every worker.
fn parks(rt: &volt::runtime::Handle) -> u64 {
    rt.telemetry().snapshot().workers.iter().map(|w| w.times_parked).sum()
}

#[test]
fn a_paused_idle_runtime_sleeps_instead_of_spinning() {
    // Paused, with a cancelled timer left behind, a pending one held back by a busy
    // `block_on`, and then nothing but a wait on a thread outside: in none of these
    // may a worker go round its park loop without sleeping. A spinning worker parks
    // thousands of times in the 200 ms below; one that sleeps, a handful.
    bounded(|| {
        let rt = runtime(2);
        let h = rt.handle().clone();
        rt.block_on(async move {
            time::pause();
            drop(time::timeout(Duration::from_secs(5), std::future::pending::<()>()));
            let mut armed = Box::pin(time::sleep(Duration::from_secs(7)));
            assert!(futures::poll!(armed.as_mut()).is_pending());
            drop(armed);
            let _pending = volt::spawn(time::sleep(Duration::from_secs(3600)));
            volt::task::yield_now().await;
            let before = parks(&h);
            // Busy: the hour-long sleep must not fire, and the workers must not spin.
            std::thread::sleep(ms(100));
            let busy = parks(&h) - before;
            _pending.abort();
            let _ = _pending.await;
            // Idle, waiting on another thread, with only cancelled timers behind.
            let (tx, rx) = futures::channel::oneshot::channel();
            std::thread::spawn(move || {
                std::thread::sleep(ms(100));
                let _ = tx.send(());
            });
            let before = parks(&h);
            rx.await.unwrap();
            let idle = parks(&h) - before;
            assert!(busy < 200 && idle < 200, "parks while busy: {busy}, while idle: {idle}");
        });
    });
}

#[test]
fn a_blocking_join_on_a_worker_lets_the_paused_clock_advance() {
    // A task joins, blocking its worker, a task that sleeps a minute: the worker's loop
    // goes to another thread, and the joiner is waiting, not working, so the clock
    // advances to the sleep's end.
    on_each_runtime(|| async {
        time::pause();
        let start = Instant::now();
        let outer = volt::spawn(async move {
            let target = volt::spawn(async move {
                time::sleep(Duration::from_secs(60)).await;
                Instant::now() - start
            });
            target.join().unwrap()
        });
        assert_eq!(outer.await.unwrap(), Duration::from_secs(60));
        assert_eq!(Instant::now() - start, Duration::from_secs(60));
    });
}

/// Poll `i` once: `Some(offset from start)` for a tick, `None` for pending.
fn next_tick(i: &mut time::Interval, start: Instant) -> Option<u64> {
    match i.poll_tick(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(at) => Some((at - start).as_millis() as u64),
        Poll::Pending => None,
    }
}

/// Drive an interval of 300 ms from `start` through a series of manual advances; at
/// each step, the ticks (as offsets from `start`) a poll loop gets before `Pending`.
/// The clock starts 1 ms past `start`, as a timer's deadline must be passed to fire.
async fn interval_script(behavior: MissedTickBehavior, steps: &[u64], reset_at_step: Option<usize>) -> Vec<Vec<u64>> {
    let start = Instant::now();
    time::advance(ms(1)).await;
    let mut i = time::interval_at(start, ms(300));
    i.set_missed_tick_behavior(behavior);
    let mut out = vec![];
    let drain = |i: &mut time::Interval| std::iter::from_fn(|| next_tick(i, start)).collect::<Vec<_>>();
    out.push(drain(&mut i));
    for (n, &step) in steps.iter().enumerate() {
        if reset_at_step == Some(n) {
            i.reset();
        }
        time::advance(ms(step)).await;
        out.push(drain(&mut i));
    }
    out
}

#[test]
fn interval_schedules_under_manual_advances() {
    on_each_runtime(|| async {
        time::pause();
        let burst = interval_script(MissedTickBehavior::Burst, &[100, 200, 650, 200, 100, 250, 300], None).await;
        assert_eq!(burst, vec![vec![0], vec![], vec![300], vec![600, 900], vec![], vec![1200], vec![1500], vec![1800]]);
        // Delay: after the late tick at 951, a period from then (1251, 1551, ...).
        let delay = interval_script(MissedTickBehavior::Delay, &[100, 200, 650, 100, 201, 300, 300], None).await;
        assert_eq!(delay, vec![vec![0], vec![], vec![300], vec![600], vec![], vec![1251], vec![1551], vec![1851]]);
        // Skip: after the late tick at 951, the original schedule's next (1200, ...).
        let skip = interval_script(MissedTickBehavior::Skip, &[100, 200, 650, 250, 300, 300], None).await;
        assert_eq!(skip, vec![vec![0], vec![], vec![300], vec![600], vec![1200], vec![1500], vec![1800]]);
        // reset at 401: the next tick a period later (701), then on from there.
        let reset = interval_script(MissedTickBehavior::Burst, &[100, 200, 100, 250, 50, 300], Some(3)).await;
        assert_eq!(reset, vec![vec![0], vec![], vec![300], vec![], vec![], vec![701], vec![1001]]);
    });
}
