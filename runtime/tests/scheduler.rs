//! Scheduler properties on a real runtime: nothing lost, no lost wakeups, no starvation,
//! nested joins, telemetry that adds up.

mod common;

use common::*;
use std::collections::HashSet;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[test]
fn block_on_spawn_and_await() {
    let rt = rt(2);
    let out = rt.block_on(async {
        let h = volt::spawn(async { 40 + 2 });
        volt::task::yield_now().await;
        h.await.unwrap()
    });
    assert_eq!(out, 42);
}

#[test]
fn every_task_runs_exactly_once_local_and_remote() {
    // Remote spawns from 4 threads plus local spawns that overflow the 256-slot ring.
    const REMOTE: usize = 4 * 2_000;
    const LOCAL: usize = 5_000;
    let rt = rt(2);
    let seen = Arc::new(Mutex::new(HashSet::new()));
    let mut threads = vec![];
    let mut remote_handles = vec![];
    for t in 0..4 {
        let h = rt.handle().clone();
        let seen = seen.clone();
        threads.push(std::thread::spawn(move || {
            (0..REMOTE / 4)
                .map(|i| {
                    let seen = seen.clone();
                    h.spawn(async move {
                        assert!(seen.lock().unwrap().insert((t, i)), "task ran twice");
                    })
                })
                .collect::<Vec<_>>()
        }));
    }
    for t in threads {
        remote_handles.extend(t.join().unwrap());
    }
    let seen2 = seen.clone();
    rt.block_on(async move {
        // The ring only overflows if nobody drains it while the spawner fills it: an idle
        // worker steals half the ring at a time and can keep up with the spawn loop (CI saw
        // it). So a blocker task holds the other worker in one poll until the spawns are
        // done; after that it steals freely.
        let started = Arc::new(AtomicBool::new(false));
        let release = Arc::new(AtomicBool::new(false));
        let blocker = {
            let (started, release) = (started.clone(), release.clone());
            volt::spawn(async move {
                started.store(true, SeqCst);
                let deadline = Instant::now() + Duration::from_secs(10);
                while !release.load(SeqCst) && Instant::now() < deadline {
                    std::hint::spin_loop();
                }
            })
        };
        assert!(wait_until(Duration::from_secs(10), || started.load(SeqCst)), "the blocker task never started");
        let spawner = volt::spawn(async move {
            // Spawned from a worker: LIFO slot, ring, overflow to the global queue.
            let hs: Vec<_> = (0..LOCAL)
                .map(|i| {
                    let seen = seen2.clone();
                    volt::spawn(async move {
                        assert!(seen.lock().unwrap().insert((99, i)), "task ran twice");
                    })
                })
                .collect();
            release.store(true, SeqCst);
            for h in hs {
                h.await.unwrap();
            }
        });
        spawner.await.unwrap();
        blocker.await.unwrap();
        for h in remote_handles {
            h.await.unwrap();
        }
    });
    assert_eq!(seen.lock().unwrap().len(), REMOTE + LOCAL);
    let snap = rt.handle().telemetry().snapshot();
    let overflows: u64 = snap.workers.iter().map(|w| w.overflows).sum();
    assert!(overflows > 0, "5,000 local spawns must overflow the ring: {snap:?}");
}

#[test]
fn no_lost_wakeups_from_other_threads() {
    // Each round, tasks wait on flags that other threads set while the tasks are running,
    // scheduled or idle. A lost wake leaves a task pending forever and the round times out.
    let rt = rt(2);
    for round in 0..200 {
        let flags: Vec<Flag> = (0..8).map(|_| Flag::default()).collect();
        let done = Arc::new(AtomicUsize::new(0));
        let handles: Vec<_> = flags
            .iter()
            .map(|f| {
                let f = f.clone();
                let done = done.clone();
                rt.spawn(async move {
                    // Keep some tasks busy or queued when the wake lands.
                    volt::task::yield_now().await;
                    f.wait().await;
                    done.fetch_add(1, SeqCst);
                })
            })
            .collect();
        let setters: Vec<_> = flags
            .into_iter()
            .enumerate()
            .map(|(i, f)| {
                std::thread::spawn(move || {
                    if (i + round) % 3 == 0 {
                        std::thread::yield_now();
                    }
                    f.set();
                })
            })
            .collect();
        for s in setters {
            s.join().unwrap();
        }
        assert!(wait_until(Duration::from_secs(10), || done.load(SeqCst) == 8), "round {round}: a wake was lost");
        for h in handles {
            assert!(h.join().is_ok());
        }
    }
}

/// A burst of a million tasks spawned from a worker, all finished: each worker's cell
/// cache keeps at most its byte budget (512 KiB: 256 KiB on its local lists, 256 KiB that
/// other threads gave back), not the burst's million cells.
#[test]
fn cell_caches_keep_a_bounded_number_of_bytes_after_a_burst() {
    const TASKS: usize = 1_000_000;
    const BUDGET: u64 = 512 * 1024;
    let rt = rt(2);
    let done = Arc::new(AtomicUsize::new(0));
    let d = done.clone();
    let burst = rt.spawn(async move {
        for _ in 0..TASKS {
            let d = d.clone();
            drop(volt::spawn(async move {
                volt::task::yield_now().await;
                d.fetch_add(1, SeqCst);
            }));
        }
    });
    burst.join().unwrap();
    assert!(wait_until(Duration::from_secs(120), || done.load(SeqCst) == TASKS), "tasks were lost");
    assert!(wait_until(Duration::from_secs(30), || rt.handle().telemetry().snapshot().tasks_alive == 0));
    let snap = rt.handle().telemetry().snapshot();
    for w in &snap.workers {
        // A free racing another may overshoot by a block (at most 768 bytes) per thread.
        assert!(
            w.cell_cache_bytes <= BUDGET + 8 * 1024,
            "worker {} keeps {} bytes of task cells after the burst",
            w.index,
            w.cell_cache_bytes
        );
    }
    let kept: u64 = snap.workers.iter().map(|w| w.cell_cache_bytes).sum();
    assert!(kept > 0, "the cache recycled nothing at all");
}

/// 17 million live clones of one task's waker: the first state layout's 24-bit reference
/// count aborted the process here. Now the task completes while they live, its future is
/// dropped once, and its cell is freed exactly when the last clone goes (watched through
/// the join waker the cell keeps until it is freed).
#[test]
fn seventeen_million_waker_clones_then_complete_and_free() {
    use std::task::{Context, Poll, RawWakerVTable, Waker};
    const CLONES: usize = 17_000_000;

    /// A forgotten clone's data and vtable, to turn back into an owning `Waker`.
    struct RawCopy(*const (), &'static RawWakerVTable);
    // SAFETY: a task waker's data pointer and vtable are thread-safe.
    unsafe impl Send for RawCopy {}
    impl RawCopy {
        /// # Safety
        /// Each call adopts one forgotten clone's reference.
        unsafe fn revive(&self) -> Waker {
            // SAFETY: the caller's contract.
            unsafe { Waker::new(self.0, self.1) }
        }
    }
    struct Watch;
    impl std::task::Wake for Watch {
        fn wake(self: Arc<Self>) {}
    }

    let rt = rt(2);
    let drops = DropCount::default();
    let guard = drops.guard();
    let (tx, rx) = std::sync::mpsc::channel();
    let mut first = true;
    let mut h = rt.spawn(async move {
        let _guard = guard;
        std::future::poll_fn(|cx| {
            if !std::mem::replace(&mut first, false) {
                return Poll::Ready(7);
            }
            for _ in 0..CLONES {
                // Held without memory: each forgotten clone owns one reference.
                std::mem::forget(cx.waker().clone());
            }
            tx.send(RawCopy(cx.waker().data(), cx.waker().vtable())).unwrap();
            Poll::Pending
        })
        .await
    });
    let copy = rx.recv_timeout(Duration::from_secs(60)).expect("the task did not clone its waker");
    let watch = Arc::new(Watch);
    let join_waker = Waker::from(watch.clone());
    let mut cx = Context::from_waker(&join_waker);
    assert!(std::pin::Pin::new(&mut h).poll(&mut cx).is_pending(), "nothing woke the task yet");
    // SAFETY: one of the forgotten clones (a wake consumes its reference).
    unsafe { copy.revive() }.wake();
    let mut out = None;
    assert!(wait_until(Duration::from_secs(30), || {
        if let Poll::Ready(r) = std::pin::Pin::new(&mut h).poll(&mut cx) {
            out = Some(r);
        }
        out.is_some()
    }));
    assert_eq!(out.unwrap().unwrap(), 7);
    drop(h);
    // From here only the cell's join-waker slot holds a clone of `watch`.
    drop(join_waker);
    assert_eq!(drops.get(), 1, "the future was dropped once, at completion");
    for _ in 0..CLONES - 2 {
        // SAFETY: one of the forgotten clones.
        drop(unsafe { copy.revive() });
    }
    assert_eq!(Arc::strong_count(&watch), 2, "the cell was freed while a waker still held it");
    // SAFETY: the last forgotten clone.
    drop(unsafe { copy.revive() });
    assert_eq!(Arc::strong_count(&watch), 1, "the cell was not freed with the last waker");
}

#[test]
fn wake_reaches_a_parked_worker() {
    // With every worker parked, a remote spawn must wake one, 21 times over. Where parks
    // have no timeout, a lost notification is a hang, which the bound turns into a
    // failure; how fast the wake is (it should be microseconds, not a park timeout) is a
    // latency, measured by the benchmarks, not asserted here.
    let rt = rt(2);
    for _ in 0..21 {
        assert!(wait_until(Duration::from_secs(30), || rt.handle().telemetry().snapshot().num_parked == 2));
        let (tx, rx) = std::sync::mpsc::channel();
        rt.spawn(async move {
            let _ = tx.send(());
        });
        rx.recv_timeout(Duration::from_secs(30)).expect("a spawn never woke a parked worker");
    }
}

#[test]
fn panicking_task_gives_join_error_and_worker_survives() {
    let rt = rt(1);
    rt.block_on(async {
        let h = volt::spawn(async {
            panic!("boom");
        });
        let err = h.await.unwrap_err();
        assert!(err.is_panic() && !err.is_cancelled());
        assert!(err.to_string().contains("boom"), "{err}");
        let payload = err.into_panic();
        assert_eq!(payload.downcast_ref::<&str>(), Some(&"boom"));
        // The single worker is still there to run this.
        assert_eq!(volt::spawn(async { 7 }).await.unwrap(), 7);
    });
    let snap = rt.handle().telemetry().snapshot();
    assert_eq!(snap.tasks_panicked, 1);
}

#[test]
fn abort_cancels_and_drops_the_future() {
    let rt = rt(2);
    let drops = DropCount::default();
    let g = drops.guard();
    let started = Flag::default();
    let s2 = started.clone();
    let h = rt.spawn(async move {
        let _g = g;
        s2.set();
        Never.await;
    });
    assert!(wait_until(Duration::from_secs(30), || started.is_set()));
    assert!(!h.is_finished());
    h.abort();
    let err = rt.block_on(h).unwrap_err();
    assert!(err.is_cancelled() && !err.is_panic());
    assert_eq!(drops.get(), 1, "the aborted future was dropped");
    // Abort before the first poll, and on a completed task.
    let never_ran = Arc::new(AtomicBool::new(false));
    let n2 = never_ran.clone();
    let done = rt.spawn(async { 5 });
    assert_eq!(
        rt.block_on(async move {
            let h = volt::spawn(async move { n2.store(true, SeqCst) });
            h.abort();
            let r = h.await;
            // It may have run before the abort landed; if it was cancelled it never ran.
            if let Err(e) = r {
                assert!(e.is_cancelled());
            }
            done.await.unwrap()
        }),
        5
    );
}

#[test]
fn abort_after_completion_keeps_the_output() {
    let rt = rt(2);
    let h = rt.spawn(async { "done" });
    assert!(wait_until(Duration::from_secs(30), || h.is_finished()));
    h.abort();
    assert_eq!(h.join().unwrap(), "done");
}

#[test]
fn shield_defers_cancellation_until_the_last_guard_drops() {
    let rt = rt(2);
    let in_critical = Flag::default();
    let release = Flag::default();
    let after_shield = Arc::new(AtomicBool::new(false));
    let reached_end = Arc::new(AtomicBool::new(false));
    let (c, r, a, e) = (in_critical.clone(), release.clone(), after_shield.clone(), reached_end.clone());
    let h = rt.spawn(async move {
        {
            let _outer = volt::task::shield();
            let _inner = volt::task::shield();
            c.set();
            // Aborted while waiting here: the shield keeps the task alive.
            r.wait().await;
            volt::task::yield_now().await;
            a.store(true, SeqCst);
        }
        // The abort takes effect at this yield point.
        volt::task::yield_now().await;
        e.store(true, SeqCst);
    });
    assert!(wait_until(Duration::from_secs(30), || in_critical.is_set()));
    h.abort();
    std::thread::sleep(Duration::from_millis(20));
    assert!(!h.is_finished(), "cancelled through a shield");
    release.set();
    let err = h.join().unwrap_err();
    assert!(err.is_cancelled());
    assert!(after_shield.load(SeqCst), "the shielded section ran to its end");
    assert!(!reached_end.load(SeqCst), "the abort took effect at the next yield point");
}

#[test]
fn a_task_that_wakes_itself_forever_does_not_starve_others() {
    // One worker, so the spinner and the others must share it.
    let rt = rt(1);
    let stop = Arc::new(AtomicBool::new(false));
    let spins = Arc::new(AtomicU64::new(0));
    let (s2, sp2) = (stop.clone(), spins.clone());
    let spinner = rt.spawn(async move {
        while !s2.load(SeqCst) {
            sp2.fetch_add(1, SeqCst);
            volt::task::yield_now().await;
        }
    });
    assert!(wait_until(Duration::from_secs(30), || spins.load(SeqCst) > 1_000));
    // A remote spawn lands in the global queue; a local one in the worker's LIFO/ring.
    let remote = rt.spawn(async { 1 });
    assert_eq!(remote.join().unwrap(), 1, "global queue starved");
    let local = rt.spawn(async {
        let h = volt::spawn(async { 2 });
        h.await.unwrap()
    });
    assert_eq!(local.join().unwrap(), 2, "local queue starved");
    stop.store(true, SeqCst);
    spinner.join().unwrap();
    let snap = rt.handle().telemetry().snapshot();
    assert!(snap.workers[0].budget_yields > 0, "the spinner exhausted budgets: {snap:?}");
}

/// A worker stuck in one long poll must not sit on tasks it already took from the global
/// queue: an idle worker has to be able to take them. Each round spawns, from outside, a
/// task that blocks its worker until the quick tasks spawned right behind it have all run
/// (or 5 s pass), so those can only run on the other worker.
#[test]
fn tasks_fetched_by_a_worker_stuck_in_a_long_poll_still_run_elsewhere() {
    const QUICK: usize = 40;
    let rt = rt(2);
    for round in 0..20 {
        let ran = Arc::new(AtomicUsize::new(0));
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        let blocker = {
            let ran = ran.clone();
            rt.spawn(async move {
                let deadline = Instant::now() + Duration::from_secs(5);
                while ran.load(SeqCst) < QUICK && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_micros(100));
                }
                done_tx.send(ran.load(SeqCst)).unwrap();
            })
        };
        let quick: Vec<_> = (0..QUICK)
            .map(|_| {
                let ran = ran.clone();
                rt.spawn(async move {
                    ran.fetch_add(1, SeqCst);
                })
            })
            .collect();
        let seen = done_rx.recv().unwrap();
        assert_eq!(seen, QUICK, "round {round}: quick tasks waited behind the blocked worker");
        rt.block_on(async move {
            blocker.await.unwrap();
            for h in quick {
                h.await.unwrap();
            }
        });
    }
}

/// A task spawned (or woken) from a poll goes to that worker's LIFO slot. If the poll
/// then runs long, the task must not wait for it: the idle worker takes it from the slot.
/// Each round, a task spawns a child and then blocks its worker until the child has run
/// (or 5 s pass), so the child can only run on the other worker. A second child is woken
/// the same way, through a waker, to cover the wake path as well as spawn.
#[test]
fn a_task_in_the_lifo_slot_of_a_worker_stuck_in_a_long_poll_runs_elsewhere() {
    let rt = rt(2);
    for round in 0..20 {
        let h = rt.spawn(async move {
            let ran = Arc::new(AtomicUsize::new(0));
            let wait_for = |n: usize| {
                let deadline = Instant::now() + Duration::from_secs(5);
                while ran.load(SeqCst) < n && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_micros(100));
                }
                ran.load(SeqCst)
            };
            // Spawned from this poll: the LIFO slot of this worker.
            let r = ran.clone();
            let child = volt::spawn(async move {
                r.fetch_add(1, SeqCst);
            });
            let after_spawn = wait_for(1);
            // Woken from this poll: a task parked on a channel, woken into the slot.
            let (tx, mut rx) = futures::channel::oneshot::channel::<()>();
            let (r, waiting) = (ran.clone(), Arc::new(AtomicBool::new(false)));
            let w = waiting.clone();
            let waiter = volt::spawn(async move {
                std::future::poll_fn(|cx| {
                    let p = std::pin::Pin::new(&mut rx).poll(cx);
                    w.store(p.is_pending(), SeqCst);
                    p
                })
                .await
                .unwrap();
                r.fetch_add(1, SeqCst);
            });
            // Let the waiter run and wait on the channel (this poll is not blocked).
            while !waiting.load(SeqCst) {
                volt::task::yield_now().await;
            }
            tx.send(()).unwrap();
            let after_wake = wait_for(2);
            child.await.unwrap();
            waiter.await.unwrap();
            (after_spawn, after_wake)
        });
        let (after_spawn, after_wake) = rt.block_on(h).unwrap();
        assert_eq!(after_spawn, 1, "round {round}: a spawned child waited behind its blocked parent");
        assert_eq!(after_wake, 2, "round {round}: a woken task waited behind the blocked waker");
    }
}

fn join_chain(depth: u32) -> u32 {
    if depth == 0 {
        return 0;
    }
    // A blocking join inside a task: the worker runs the child inline meanwhile.
    volt::spawn(async move { join_chain(depth - 1) }).join().unwrap() + 1
}

#[test]
fn nested_blocking_join_chain_of_200_on_two_workers() {
    let rt = rt(2);
    let h = rt.spawn(async { join_chain(200) });
    assert_eq!(h.join().unwrap(), 200);
    // And several chains at once, so the workers also help each other.
    let hs: Vec<_> = (0..4).map(|_| rt.spawn(async { join_chain(200) })).collect();
    for h in hs {
        assert_eq!(h.join().unwrap(), 200);
    }
}

#[test]
fn blocking_join_from_a_plain_thread_and_from_block_on() {
    let rt = rt(2);
    let h = rt.spawn(async {
        volt::task::yield_now().await;
        11
    });
    let t = std::thread::spawn(move || h.join().unwrap());
    assert_eq!(t.join().unwrap(), 11);
    let v = rt.block_on(async { volt::spawn(async { 12 }).join().unwrap() });
    assert_eq!(v, 12);
}

#[test]
fn join_waits_for_a_task_woken_later() {
    // The target is idle when join starts and is woken from another thread: the joining
    // worker must park and be woken by the completion, not spin or miss it.
    let rt = rt(2);
    let flag = Flag::default();
    let f2 = flag.clone();
    let out = rt.spawn(async move {
        let target = volt::spawn(async move {
            f2.wait().await;
            5
        });
        target.join().unwrap()
    });
    std::thread::sleep(Duration::from_millis(30));
    flag.set();
    assert_eq!(out.join().unwrap(), 5);
}

#[test]
fn telemetry_counts_add_up() {
    let rt = rt(2);
    const N: u64 = 3_000;
    rt.block_on(async {
        let hs: Vec<_> = (0..N)
            .map(|i| {
                volt::spawn(async move {
                    if i % 2 == 0 {
                        volt::task::yield_now().await;
                    }
                    if i % 100 == 0 {
                        panic!("planned");
                    }
                })
            })
            .collect();
        for h in hs {
            let _ = h.await;
        }
    });
    let aborted = rt.spawn(Never);
    aborted.abort();
    assert!(rt.block_on(aborted).unwrap_err().is_cancelled());
    // Idle: every worker parks, and then the gauges must agree exactly. A worker sets its
    // parked bit a moment before its state, and a sleep is counted only when it ends (the
    // workers woke for this test's tasks, so some have); so take the first snapshot that
    // shows the whole idle picture and check everything on it.
    let mut idle = None;
    assert!(wait_until(Duration::from_secs(30), || {
        let s = rt.handle().telemetry().snapshot();
        let ok = s.num_parked == 2
            && s.workers.iter().all(|w| w.state == volt::telemetry::WorkerState::Parked)
            && s.workers.iter().map(|w| w.times_parked).sum::<u64>() > 0;
        idle = ok.then_some(s);
        ok
    }));
    let s = idle.unwrap();
    assert_eq!(s.tasks_spawned, N + 1);
    assert_eq!(s.tasks_panicked, N / 100);
    assert_eq!(s.tasks_cancelled, 1);
    assert_eq!(s.tasks_completed, N - N / 100);
    assert_eq!(s.tasks_alive, 0);
    assert_eq!(s.tasks_completed + s.tasks_cancelled + s.tasks_panicked, s.tasks_spawned);
    let polled: u64 = s.workers.iter().map(|w| w.tasks_polled).sum();
    // Every task polled once, half of them twice (the yield); the aborted one possibly zero.
    assert!(polled >= N + N / 2, "polled {polled}");
    assert_eq!(s.num_parked, s.parked_bitmap.count_ones());
    assert_eq!(s.parked_bitmap, 0b11);
    assert_eq!(s.num_searching, 0);
    assert_eq!(s.global_queue_depth, 0);
    assert!(s.workers.iter().all(|w| w.local_queue_depth == 0 && !w.lifo_occupied));
    assert!(s.workers.iter().all(|w| (8..=255).contains(&w.global_queue_interval)));
}

#[test]
fn lifo_slot_serves_local_spawns_and_steals_happen() {
    let rt = rt(2);
    rt.block_on(async {
        volt::spawn(async {
            for _ in 0..200 {
                // Serial spawn + await from a worker goes through the LIFO slot.
                volt::spawn(async {}).await.unwrap();
            }
            // A burst of slow-ish tasks on one worker gives the other something to steal.
            let hs: Vec<_> =
                (0..200).map(|_| volt::spawn(async { std::thread::sleep(Duration::from_micros(50)) })).collect();
            for h in hs {
                h.await.unwrap();
            }
        })
        .await
        .unwrap();
    });
    let s = rt.handle().telemetry().snapshot();
    let lifo: u64 = s.workers.iter().map(|w| w.lifo_hits).sum();
    let stolen: u64 = s.workers.iter().map(|w| w.tasks_stolen).sum();
    let steals: u64 = s.workers.iter().map(|w| w.steal_operations).sum();
    // 400 polls of alternating parent and child: 3 of every 4 come from the slot.
    assert!(lifo >= 200, "lifo hits {lifo}");
    assert!(steals > 0 && stolen >= steals, "steals {steals}, stolen {stolen}");
}

#[test]
fn spawn_outside_a_runtime_panics_with_a_clear_message() {
    let err = std::panic::catch_unwind(|| {
        drop(volt::spawn(async {}));
    })
    .unwrap_err();
    let msg =
        err.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| err.downcast_ref::<String>().cloned()).unwrap();
    assert!(msg.contains("outside a Volt runtime"), "{msg}");
}

#[test]
fn block_on_inside_a_worker_panics_instead_of_blocking_it() {
    let rt = Arc::new(rt(1));
    let rt2 = rt.clone();
    let h = rt.spawn(async move {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| rt2.block_on(async {})));
        r.is_err()
    });
    assert!(h.join().unwrap());
}

#[test]
fn builder_refuses_zero_and_more_than_64_workers() {
    let e = volt::runtime::Builder::new().worker_threads(0).build().unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    let e = volt::runtime::Builder::new().worker_threads(65).build().unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    assert!(e.to_string().contains("64"), "{e}");
    let rt = volt::runtime::Builder::new().worker_threads(64).build().unwrap();
    assert_eq!(rt.handle().telemetry().snapshot().workers.len(), 64);
    assert_eq!(rt.block_on(async { volt::spawn(async { 3 }).await.unwrap() }), 3);
}

#[test]
fn join_error_formats() {
    let rt = rt(1);
    let h = rt.spawn(Never);
    let id = h.id();
    h.abort();
    let e = h.join().unwrap_err();
    assert_eq!(e.id(), id);
    assert_eq!(e.to_string(), format!("task {id} was cancelled"));
    assert!(format!("{e:?}").contains("Cancelled"));
    let e: Box<dyn std::error::Error> = Box::new(e);
    assert!(!e.to_string().is_empty());
}

/// Run `f` on a plain thread and wait at most `bound` for it. A deadlock fails the test
/// instead of hanging the suite; the stuck runtime is leaked (dropping it would wait on
/// the stuck workers).
fn within<T: Send + 'static>(bound: Duration, what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(bound) {
        Ok(v) => v,
        Err(_) => panic!("{what}: no answer within {bound:?} (deadlock)"),
    }
}

/// A task holding a `std::sync::Mutex` joins a target that is not in its worker's queues
/// (here on the blocking pool) while tasks that need the same mutex wait in that worker's
/// LIFO slot and ring. A join that ran those tasks on its stack would block in `lock()`
/// under its own caller, which holds the lock: a deadlock on every run with one worker.
/// The join must hand the worker's queue to another thread and block instead.
#[test]
fn blocking_join_under_a_mutex_does_not_run_the_tasks_that_need_it() {
    for workers in [1, 2] {
        for round in 0..3 {
            let (total, target) = within(Duration::from_secs(30), "join under a lock", move || {
                let rt = rt(workers);
                let m = Arc::new(Mutex::new(0u32));
                let m2 = m.clone();
                let h = rt.spawn(async move {
                    let mut g = m2.lock().unwrap();
                    let others: Vec<_> = (0..4)
                        .map(|_| {
                            let m = m2.clone();
                            volt::spawn(async move { *m.lock().unwrap() += 1 })
                        })
                        .collect();
                    let target = volt::task::spawn_blocking(|| {
                        std::thread::sleep(Duration::from_millis(20));
                        7
                    });
                    let v = target.join().unwrap();
                    *g += 100;
                    drop(g);
                    for o in others {
                        o.join().unwrap();
                    }
                    v
                });
                let v = h.join().unwrap();
                let total = *m.lock().unwrap();
                (total, v)
            });
            assert_eq!(target, 7, "{workers} worker(s), round {round}");
            assert_eq!(total, 104, "{workers} worker(s), round {round}: every task that needed the lock ran");
        }
    }
}

/// The same, with a target that needs a worker (a timer) and one task that needs the
/// lock: the join must not run that task, and the worker it hands off must keep firing
/// timers and running tasks while the joining task blocks.
#[test]
fn blocking_join_under_a_mutex_with_a_timer_target_completes() {
    for round in 0..3 {
        let total = within(Duration::from_secs(30), "join under a lock (timer target)", move || {
            let rt = rt(2);
            let m = Arc::new(Mutex::new(0u32));
            let m2 = m.clone();
            let h = rt.spawn(async move {
                let g = m2.lock().unwrap();
                let m3 = m2.clone();
                let other = volt::spawn(async move { *m3.lock().unwrap() += 1 });
                let target = volt::spawn(async {
                    volt::time::sleep(Duration::from_millis(10)).await;
                    5
                });
                assert_eq!(target.join().unwrap(), 5);
                drop(g);
                other.join().unwrap();
            });
            h.join().unwrap();
            let total = *m.lock().unwrap();
            total
        });
        assert_eq!(total, 1, "round {round}");
    }
}

/// Helping is kept for the target itself: a target waiting in the joining worker's LIFO
/// slot or ring runs inline, on the joining thread, and other queued tasks do not.
#[test]
fn blocking_join_runs_a_local_target_inline_and_nothing_else() {
    let rt = rt(1);
    let out = rt.spawn(async {
        let me = std::thread::current().id();
        let ran_other = Arc::new(AtomicBool::new(false));
        let r2 = ran_other.clone();
        // Each spawn evicts the LIFO slot's task to the ring: the ring ends up holding
        // `other` and then `in_ring`, so a join that ran the ring in order would run
        // `other` first...
        let other = volt::spawn(async move { r2.store(true, SeqCst) });
        let in_ring = volt::spawn(async { std::thread::current().id() });
        // ...and the slot holds the last one.
        let in_slot = volt::spawn(async { std::thread::current().id() });
        let a = in_slot.join().unwrap();
        let b = in_ring.join().unwrap();
        let ran = ran_other.load(SeqCst);
        drop(other);
        (a == me, b == me, ran)
    });
    assert_eq!(out.join().unwrap(), (true, true, false));
}

/// A chain of 10,000 nested blocking joins: each level's task spawns the next and joins
/// it. Helping runs each target inline on the worker's stack only while the stack has
/// room; past that the join hands its worker to another thread and blocks. Any depth
/// completes with the right value instead of overflowing the stack and aborting.
#[test]
// Under Miri a chain this deep takes far longer than the bound; the 200-deep chain covers it there.
#[cfg_attr(miri, ignore)]
fn nested_blocking_join_chain_of_10_000_completes() {
    let v = within(Duration::from_secs(60), "join chain of 10,000", || {
        let rt = rt(2);
        let h = rt.spawn(async { join_chain(10_000) });
        h.join().unwrap()
    });
    assert_eq!(v, 10_000);
}

/// The help bound follows the worker's stack size: a chain of 3,000 on 256 KiB stacks.
#[test]
// Under Miri a chain this deep takes far longer than the bound; the 200-deep chain covers it there.
#[cfg_attr(miri, ignore)]
fn nested_blocking_join_chain_on_small_stacks() {
    let v = within(Duration::from_secs(60), "join chain on 256 KiB stacks", || {
        let rt = volt::runtime::Builder::new().worker_threads(2).thread_stack_size(256 << 10).build().unwrap();
        let hs: Vec<_> = (0..2).map(|_| rt.spawn(async { join_chain(3_000) })).collect();
        hs.into_iter().map(|h| h.join().unwrap()).sum::<u32>()
    });
    assert_eq!(v, 6_000);
}

/// On one worker, a target that yields until a task queued behind it on the same worker
/// has run: helping polls the target inline a bounded number of times, then hands the
/// worker off, so the other task runs and the join completes.
#[test]
fn blocking_join_on_a_target_that_waits_for_a_local_task_completes() {
    let v = within(Duration::from_secs(30), "join on a yielding target", || {
        let rt = rt(1);
        let h = rt.spawn(async {
            let flag = Arc::new(AtomicBool::new(false));
            let f2 = flag.clone();
            let setter = volt::spawn(async move { f2.store(true, SeqCst) });
            let target = volt::spawn(async move {
                let mut yields = 0u32;
                while !flag.load(SeqCst) {
                    volt::task::yield_now().await;
                    yields += 1;
                }
                yields
            });
            let yields = target.join().unwrap();
            setter.join().unwrap();
            yields
        });
        h.join().unwrap()
    });
    assert!(v >= 1);
}

/// Dropping the runtime while a task is blocked in a join that handed its worker off:
/// the drop cancels the join's target, the join returns a cancelled error, and the drop
/// returns with every thread joined.
#[test]
fn dropping_the_runtime_releases_a_handed_off_join() {
    let got = within(Duration::from_secs(30), "drop during a handed-off join", || {
        let rt = rt(2);
        let (tx, rx) = std::sync::mpsc::channel();
        let started = Flag::default();
        let s2 = started.clone();
        rt.spawn(async move {
            let target = volt::spawn(Never);
            s2.set();
            let _ = tx.send(target.join().map_err(|e| e.is_cancelled()));
        });
        assert!(wait_until(Duration::from_secs(10), || started.is_set()));
        std::thread::sleep(Duration::from_millis(20));
        drop(rt);
        rx.recv_timeout(Duration::from_secs(10)).ok()
    });
    assert_eq!(got, Some(Err(true)), "the join's target was cancelled and the join saw it");
}

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
