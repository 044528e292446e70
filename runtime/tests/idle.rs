//! An idle runtime on a real one: no wakeups without work, and tasks and timers that still
//! run when a worker is stuck after the rest went to sleep; yielders and a remote flood
//! both progress.

mod common;

use common::*;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Parks completed so far, over all workers (a park is counted when it ends: one count per
/// wakeup).
fn total_parks(rt: &volt::Runtime) -> u64 {
    rt.handle().telemetry().snapshot().workers.iter().map(|w| w.times_parked).sum()
}

/// Wait (at most 30 s) until every worker is parked and no park has ended for 200 ms: the
/// runtime is idle, and whoever kept a timeout while some worker was busy has used it.
fn wait_for_quiet(rt: &volt::Runtime, workers: usize) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let before = total_parks(rt);
        std::thread::sleep(Duration::from_millis(200));
        let s = rt.handle().telemetry().snapshot();
        let parks: u64 = s.workers.iter().map(|w| w.times_parked).sum();
        if s.num_parked as usize == workers && parks == before {
            return;
        }
        assert!(Instant::now() < deadline, "the runtime never went quiet: {s:?}");
    }
}

/// An idle runtime sleeps: no worker wakes while there is no work, no timer and no I/O,
/// whatever the number of workers. Counted by the runtime's own park counters (every
/// wakeup ends a park), after some work so that the workers have parked and woken before.
#[test]
fn an_idle_runtime_has_no_wakeups_with_2_16_and_64_workers() {
    for workers in [2, 16, 64] {
        let rt = rt(workers);
        rt.block_on(async {
            let hs: Vec<_> = (0..1_000).map(|_| volt::spawn(async { volt::task::yield_now().await })).collect();
            for h in hs {
                h.await.unwrap();
            }
            volt::time::sleep(Duration::from_millis(5)).await;
        });
        wait_for_quiet(&rt, workers);
        let before = total_parks(&rt);
        std::thread::sleep(Duration::from_millis(1_500));
        let after = total_parks(&rt);
        assert_eq!(after - before, 0, "{workers} idle workers woke {} times in 1.5 s", after - before);
        // Still a working runtime: a remote spawn wakes a worker.
        assert_eq!(rt.spawn(async { 7 }).join().unwrap(), 7);
    }
}

/// The LIFO rescue needs no periodic wake: on a runtime whose workers all sleep with no
/// timeout, a task spawned into the LIFO slot of a worker that then blocks still runs on
/// another worker while the first is blocked (the blocked task waits at most 30 s for it).
#[test]
fn a_lifo_task_of_a_stuck_worker_runs_elsewhere_after_the_runtime_was_idle() {
    for workers in [2, 16] {
        let rt = rt(workers);
        for round in 0..5 {
            wait_for_quiet(&rt, workers);
            let h = rt.spawn(async move {
                let ran = Arc::new(AtomicBool::new(false));
                let r = ran.clone();
                // Spawned from this poll: this worker's LIFO slot, and nobody is watching.
                let child = volt::spawn(async move { r.store(true, SeqCst) });
                let deadline = Instant::now() + Duration::from_secs(30);
                while !ran.load(SeqCst) && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_micros(200));
                }
                let seen = ran.load(SeqCst);
                child.await.unwrap();
                seen
            });
            assert!(h.join().unwrap(), "{workers} workers, round {round}: the child waited behind its blocked parent");
        }
    }
}

/// Timers keep firing while one worker is stuck in a long poll and the others were idle
/// with no timeout: the blocked task waits (at most 30 s) for a flag that only a 1.5 s
/// sleep, armed before the runtime went quiet, sets on another worker.
#[test]
fn a_timer_fires_while_a_worker_is_stuck_and_the_rest_were_idle() {
    for workers in [2, 16] {
        let rt = rt(workers);
        let fired = Arc::new(AtomicBool::new(false));
        let armed = Arc::new(AtomicBool::new(false));
        let (f, a) = (fired.clone(), armed.clone());
        let sleeper = rt.spawn(async move {
            let sleep = volt::time::sleep(Duration::from_millis(1_500));
            a.store(true, SeqCst);
            sleep.await;
            f.store(true, SeqCst);
        });
        assert!(wait_until(Duration::from_secs(30), || armed.load(SeqCst)));
        wait_for_quiet(&rt, workers);
        let f = fired.clone();
        let blocker = rt.spawn(async move {
            let deadline = Instant::now() + Duration::from_secs(30);
            while !f.load(SeqCst) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_micros(200));
            }
            f.load(SeqCst)
        });
        assert!(blocker.join().unwrap(), "{workers} workers: the timer waited for the stuck worker");
        sleeper.join().unwrap();
    }
}

/// A worker takes a global batch right after a poll that yielded, if the global queue has
/// work. Neither side may starve the other: on one worker, a task that yields forever
/// keeps running while a thread outside floods the global queue with tasks that yield
/// too, and the flood's tasks keep completing while the yielder spins. Bounded: each side
/// must reach 2,000 within 60 s.
#[test]
fn yielders_and_a_flood_of_remote_tasks_both_progress() {
    let rt = rt(1);
    let stop = Arc::new(AtomicBool::new(false));
    let spins = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicU64::new(0));
    let (s2, sp2) = (stop.clone(), spins.clone());
    let spinner = rt.spawn(async move {
        while !s2.load(SeqCst) {
            sp2.fetch_add(1, SeqCst);
            volt::task::yield_now().await;
        }
    });
    let flood = {
        let (h, stop, done) = (rt.handle().clone(), stop.clone(), done.clone());
        std::thread::spawn(move || {
            let mut n = 0u64;
            while !stop.load(SeqCst) {
                let done = done.clone();
                h.spawn(async move {
                    volt::task::yield_now().await;
                    done.fetch_add(1, SeqCst);
                });
                n += 1;
                if n % 64 == 0 {
                    std::thread::yield_now();
                }
            }
        })
    };
    let start_spins = spins.load(SeqCst);
    let both =
        wait_until(Duration::from_secs(60), || spins.load(SeqCst) - start_spins >= 2_000 && done.load(SeqCst) >= 2_000);
    let (s, d) = (spins.load(SeqCst) - start_spins, done.load(SeqCst));
    stop.store(true, SeqCst);
    flood.join().unwrap();
    spinner.join().unwrap();
    assert!(both, "the yielder ran {s} times and the flood completed {d} tasks");
}
