//! Shutdown with work in flight: every future is dropped, every thread joined, no task
//! memory is left behind, and late wakes and spawns are harmless.
//!
//! This binary installs a counting global allocator, so its tests run one at a time
//! through a lock (the leak check compares live allocations before and after).

mod common;

use common::*;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::task::Waker;
use std::time::Duration;

struct Counting;

/// Allocations less frees made on counted threads (see [`counted_rt`]).
static LIVE_ALLOCS: AtomicI64 = AtomicI64::new(0);

thread_local! {
    /// Whether this thread's allocations count: the leak tests' own thread and their
    /// runtimes' threads do; threads an earlier test left to exit on their own, which
    /// may still allocate meanwhile, do not.
    static COUNTED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

fn counted() -> bool {
    COUNTED.try_with(|c| c.get()).unwrap_or(false)
}

/// A runtime of two workers whose threads' allocations count (the blocking pool's too).
fn counted_rt() -> volt::Runtime {
    COUNTED.with(|c| c.set(true));
    volt::runtime::Builder::new()
        .worker_threads(2)
        .on_thread_start(|| COUNTED.with(|c| c.set(true)))
        .build()
        .expect("build runtime")
}

// SAFETY: forwards to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if counted() {
            LIVE_ALLOCS.fetch_add(1, SeqCst);
        }
        // SAFETY: same contract as our caller's.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        if counted() {
            LIVE_ALLOCS.fetch_sub(1, SeqCst);
        }
        // SAFETY: same contract as our caller's.
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Spawn a mix of tasks in every state, then drop the runtime.
fn busy_runtime_dropped(drops: &DropCount) -> (usize, Vec<volt::JoinHandle<()>>) {
    let rt = counted_rt();
    let mut handles = vec![];
    let mut n = 0;
    // Idle forever: nobody holds a waker.
    for _ in 0..200 {
        let g = drops.guard();
        handles.push(rt.spawn(async move {
            let _g = g;
            Never.await
        }));
        n += 1;
    }
    // Waiting on flags nobody sets (wakers held by the flags).
    let flags: Vec<Flag> = (0..200).map(|_| Flag::default()).collect();
    for f in &flags {
        let (g, f) = (drops.guard(), f.clone());
        handles.push(rt.spawn(async move {
            let _g = g;
            f.wait().await
        }));
        n += 1;
    }
    // Busy: always scheduled, yielding forever.
    for _ in 0..50 {
        let g = drops.guard();
        handles.push(rt.spawn(async move {
            let _g = g;
            loop {
                volt::task::yield_now().await;
            }
        }));
        n += 1;
    }
    // Shielded: shutdown is not deferred by shields.
    for _ in 0..10 {
        let g = drops.guard();
        handles.push(rt.spawn(async move {
            let _g = g;
            let _s = volt::task::shield();
            Never.await
        }));
        n += 1;
    }
    // Tasks awaiting other tasks' handles, and a burst still queued when the drop starts.
    for _ in 0..100 {
        let (g1, g2) = (drops.guard(), drops.guard());
        handles.push(rt.spawn(async move {
            let _g = g1;
            let inner = volt::spawn(async move {
                let _g = g2;
                Never.await
            });
            let _ = inner.await;
        }));
        n += 2;
    }
    for _ in 0..2_000 {
        let g = drops.guard();
        handles.push(rt.spawn(async move {
            let _g = g;
            volt::task::yield_now().await;
        }));
        n += 1;
    }
    drop(rt);
    drop(flags);
    (n, handles)
}

#[test]
fn every_future_is_dropped_on_shutdown() {
    let _s = serial();
    let drops = DropCount::default();
    let (n, handles) = busy_runtime_dropped(&drops);
    assert_eq!(drops.get(), n, "every future was dropped by the time drop(runtime) returned");
    let mut cancelled = 0;
    for h in handles {
        assert!(h.is_finished());
        match h.join() {
            Ok(()) => {}
            Err(e) => {
                assert!(e.is_cancelled());
                cancelled += 1;
            }
        }
    }
    assert!(cancelled >= 560, "the never-finishing tasks report cancelled: {cancelled}");
}

#[test]
fn no_task_memory_leaks() {
    let _s = serial();
    // Warm up lazily initialised process state (thread names, TLS) first.
    {
        let drops = DropCount::default();
        let (_, handles) = busy_runtime_dropped(&drops);
        drop(handles);
    }
    let before = LIVE_ALLOCS.load(SeqCst);
    for _ in 0..3 {
        let drops = DropCount::default();
        let (n, handles) = busy_runtime_dropped(&drops);
        assert_eq!(drops.get(), n);
        drop(handles);
    }
    let after = LIVE_ALLOCS.load(SeqCst);
    // Three rounds of ~3,000 tasks each: a leak of task cells would be thousands.
    assert!(after - before < 50, "live allocations grew by {} across three runtimes", after - before);
}

#[test]
fn late_wakes_and_spawns_after_shutdown_are_harmless() {
    let _s = serial();
    let rt = rt(2);
    let handle = rt.handle().clone();
    let stash: Arc<Mutex<Option<Waker>>> = Arc::default();
    let s2 = stash.clone();
    let h = rt.spawn(std::future::poll_fn(move |cx| {
        *s2.lock().unwrap() = Some(cx.waker().clone());
        std::task::Poll::<()>::Pending
    }));
    assert!(wait_until(Duration::from_secs(30), || stash.lock().unwrap().is_some()));
    drop(rt);
    // The waker outlives the runtime: waking it must do nothing.
    stash.lock().unwrap().take().unwrap().wake();
    assert!(h.join().unwrap_err().is_cancelled());
    // Spawning through a handle of a dead runtime: the task is cancelled, not lost or run.
    let ran = Arc::new(AtomicBool::new(false));
    let r2 = ran.clone();
    let h = handle.spawn(async move { r2.store(true, SeqCst) });
    assert!(h.is_finished());
    assert!(h.join().unwrap_err().is_cancelled());
    assert!(!ran.load(SeqCst));
}

#[test]
fn a_future_whose_drop_spawns_during_shutdown() {
    let _s = serial();
    struct SpawnOnDrop(DropCount);
    impl Drop for SpawnOnDrop {
        fn drop(&mut self) {
            let g = self.0.guard();
            // The runtime is shutting down: this task is cancelled at once.
            let h = volt::spawn(async move {
                let _g = g;
            });
            assert!(h.is_finished());
        }
    }
    let drops = DropCount::default();
    let rt = rt(2);
    let d = drops.clone();
    let started = Flag::default();
    let s2 = started.clone();
    let _h = rt.spawn(async move {
        let _x = SpawnOnDrop(d);
        s2.set();
        Never.await
    });
    assert!(wait_until(Duration::from_secs(30), || started.is_set()));
    drop(rt);
    assert_eq!(drops.get(), 1, "the task spawned from drop was dropped too");
}

#[test]
fn shutdown_timeout_returns_despite_a_blocking_task() {
    let _s = serial();
    let drops = DropCount::default();
    let rt = rt(2);
    let started = Flag::default();
    let s2 = started.clone();
    let (release, released) = std::sync::mpsc::channel::<()>();
    let blocker_done = Arc::new(AtomicBool::new(false));
    let done = blocker_done.clone();
    let blocker = rt.spawn(async move {
        s2.set();
        // Blocks its worker inside a poll until the test lets it go (60 s at most).
        let _ = released.recv_timeout(Duration::from_secs(60));
        done.store(true, SeqCst);
    });
    for _ in 0..100 {
        let g = drops.guard();
        rt.spawn(async move {
            let _g = g;
            Never.await
        });
    }
    assert!(wait_until(Duration::from_secs(30), || started.is_set()));
    rt.shutdown_timeout(Duration::from_millis(100));
    // An order, not a time: shutdown_timeout returned while the blocker was still blocked
    // (only this thread can release it), so it did not wait for it.
    assert!(!blocker_done.load(SeqCst), "shutdown_timeout waited for the blocked worker");
    assert_eq!(drops.get(), 100, "the idle tasks were cancelled while the blocker ran");
    release.send(()).unwrap();
    // The blocker finishes its poll and completes on its own.
    assert!(blocker.join().is_ok());
}

#[test]
fn dropping_a_runtime_joins_its_threads() {
    let _s = serial();
    // Its own thread name: another test leaves a deliberately stuck worker behind.
    let rt = volt::runtime::Builder::new().worker_threads(3).thread_name("joincheck").build().unwrap();
    rt.block_on(async { volt::spawn(async {}).await.unwrap() });
    // Three workers and the stall monitor (`joincheck-stall-monitor`). A thread takes its
    // name once it starts running; under load that can lag.
    assert!(wait_until(Duration::from_secs(30), || threads_named("joincheck") == 4));
    drop(rt);
    // `join` returns when the kernel clears the thread id, a moment before the thread's
    // /proc entry goes. The monitor, woken by the drop, leaves within that wait too (the
    // drop waits a second for it, then lets it finish on its own); a worker or a monitor
    // that never ended would stay.
    assert!(
        wait_until(Duration::from_secs(30), || threads_named("joincheck") == 0),
        "the runtime's threads still alive 30 s after its drop"
    );
}

#[test]
fn armed_and_dropped_sleeps_do_not_leak() {
    let _s = serial();
    let rt = counted_rt();
    let churn = |rt: &volt::Runtime| {
        rt.block_on(async {
            volt::spawn(async {
                for _ in 0..10_000 {
                    let s = volt::time::sleep(Duration::from_secs(3600));
                    // One poll arms it in the wheel; the drop must take it out again.
                    assert!(futures::future::poll_immediate(s).await.is_none());
                }
            })
            .await
            .unwrap()
        })
    };
    churn(&rt);
    let before = LIVE_ALLOCS.load(SeqCst);
    for _ in 0..5 {
        churn(&rt);
    }
    let after = LIVE_ALLOCS.load(SeqCst);
    assert!(after - before < 50, "live allocations grew by {} over 50,000 armed-and-dropped sleeps", after - before);
    let snap = rt.handle().telemetry().snapshot();
    assert_eq!(snap.timers_pending, 0);
    assert_eq!(snap.timers_cancelled, 60_000);
}

#[test]
fn memory_stays_fixed_while_the_event_ring_runs_full() {
    let _s = serial();
    let rt = volt::runtime::Builder::new().worker_threads(2).event_ring(1024).build().unwrap();
    let mut cursor = rt.handle().telemetry().events();
    let round = |rt: &volt::Runtime| {
        rt.block_on(async {
            let hs: Vec<_> = (0..5_000).map(|_| volt::spawn(async { volt::task::yield_now().await })).collect();
            for h in hs {
                h.await.unwrap();
            }
        })
    };
    round(&rt);
    let _ = cursor.read();
    let before = LIVE_ALLOCS.load(SeqCst);
    for _ in 0..10 {
        round(&rt);
    }
    let after = LIVE_ALLOCS.load(SeqCst);
    let s = rt.handle().telemetry().snapshot();
    assert!(s.events_overwritten > 100_000, "the ring wrapped many times: {}", s.events_overwritten);
    assert!(after - before < 50, "live allocations grew by {} while the ring ran full", after - before);
    // The reader that fell behind still gets the newest events, and an exact miss count.
    let got = cursor.read();
    assert!(!got.is_empty() && cursor.dropped() > 100_000);
}

/// A runtime whose last owner drops it from inside one of its own tasks: 100 tasks wait
/// forever, each holding a drop counter, and a `Handle` is kept. Dropping there cannot
/// wait for the workers (one of them is the caller), so the last worker to leave its loop
/// finishes the shutdown: every pending future is dropped, every thread of the runtime
/// exits, nothing is left allocated, and a spawn through the kept handle is cancelled at
/// once.
fn drop_runtime_from_its_own_task(drops: &DropCount) {
    let starts = Arc::new(AtomicI64::new(0));
    let stops = Arc::new(AtomicI64::new(0));
    let (s1, s2) = (starts.clone(), stops.clone());
    let rt = volt::runtime::Builder::new()
        .worker_threads(2)
        .on_thread_start(move || {
            s1.fetch_add(1, SeqCst);
        })
        .on_thread_stop(move || {
            s2.fetch_add(1, SeqCst);
        })
        .build()
        .unwrap();
    let handle = rt.handle().clone();
    let mut pending = vec![];
    for _ in 0..100 {
        let g = drops.guard();
        pending.push(rt.spawn(async move {
            let _g = g;
            Never.await
        }));
    }
    // Also one on the blocking pool's side, so its threads must wind down too.
    rt.handle().spawn_blocking(|| ()).join().unwrap();
    let slot = Arc::new(Mutex::new(Some(rt)));
    let s = slot.clone();
    let dropper = handle.spawn(async move {
        let rt = s.lock().unwrap().take().unwrap();
        drop(rt);
        // The drop returned without waiting on ourselves; this poll still finishes.
        "returned"
    });
    assert_eq!(dropper.join().unwrap(), "returned");
    assert!(slot.lock().unwrap().is_none());
    assert!(
        wait_until(Duration::from_secs(30), || drops.get() == 100),
        "{} of 100 pending futures dropped",
        drops.get()
    );
    for h in pending {
        assert!(h.join().unwrap_err().is_cancelled());
    }
    // A spawn after that is cancelled at once: it never runs and its join never waits.
    let ran = Arc::new(AtomicBool::new(false));
    let r2 = ran.clone();
    let late = handle.spawn(async move { r2.store(true, SeqCst) });
    assert!(late.is_finished(), "a spawn after shutdown is cancelled at once");
    assert!(late.join().unwrap_err().is_cancelled());
    assert!(!ran.load(SeqCst));
    assert!(
        wait_until(Duration::from_secs(30), || starts.load(SeqCst) == stops.load(SeqCst)),
        "{} threads started, {} stopped",
        starts.load(SeqCst),
        stops.load(SeqCst)
    );
}

#[test]
fn dropping_the_runtime_from_its_own_task_drops_everything_and_leaks_nothing() {
    let _s = serial();
    // Warm up lazily initialised process state first.
    drop_runtime_from_its_own_task(&DropCount::default());
    let before = LIVE_ALLOCS.load(SeqCst);
    for _ in 0..3 {
        drop_runtime_from_its_own_task(&DropCount::default());
    }
    // The threads run their stop hook just before they exit: give their last frees (the
    // runtime's state goes with the last thread's reference) a moment.
    let freed = wait_until(Duration::from_secs(30), || LIVE_ALLOCS.load(SeqCst) - before < 50);
    let after = LIVE_ALLOCS.load(SeqCst);
    assert!(freed, "live allocations grew by {} across three runtimes dropped from a task", after - before);
}

/// `shutdown_timeout` from inside a task takes the same path as a drop there.
#[test]
fn shutdown_timeout_from_its_own_task_returns_and_cancels() {
    let _s = serial();
    let drops = DropCount::default();
    let rt = rt(2);
    let handle = rt.handle().clone();
    for _ in 0..10 {
        let g = drops.guard();
        rt.spawn(async move {
            let _g = g;
            Never.await
        });
    }
    let h = handle.spawn(async move { rt.shutdown_timeout(Duration::from_secs(1)) });
    h.join().unwrap();
    assert!(wait_until(Duration::from_secs(30), || drops.get() == 10), "{} of 10 dropped", drops.get());
    assert!(handle.spawn(async {}).join().unwrap_err().is_cancelled());
}

/// A shielded task that is being polled when shutdown reaches it is cancelled when that
/// poll returns `Pending`: shields defer `abort`, not shutdown. (It used to go idle after
/// the poll, with nothing left to cancel it: its future was never dropped and its handle
/// never finished.)
#[test]
fn a_shielded_task_in_a_poll_at_shutdown_is_dropped() {
    let _s = serial();
    let drops = DropCount::default();
    let rt = rt(2);
    let (started_tx, started_rx) = std::sync::mpsc::channel();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let g = drops.guard();
    let h = rt.spawn(async move {
        let _g = g;
        let _s = volt::task::shield();
        started_tx.send(()).unwrap();
        // Holds this poll (and its worker) until the test lets go, after shutdown.
        let _ = release_rx.recv();
        Never.await
    });
    started_rx.recv_timeout(Duration::from_secs(60)).expect("the task started within 60 s");
    // Returns at once with the worker still in that poll, whose task gets the flag.
    let stopper = std::thread::spawn(move || rt.shutdown_timeout(Duration::ZERO));
    stopper.join().unwrap();
    release_tx.send(()).unwrap();
    assert!(wait_until(Duration::from_secs(60), || drops.get() == 1), "the shielded future was never dropped");
    assert!(wait_until(Duration::from_secs(60), || h.is_finished()));
    assert!(h.join().unwrap_err().is_cancelled());
}

/// The same through a plain drop: a shielded task whose worker it handed off (a blocking
/// join on a task that never ends) is still in its poll when the drop cancels tasks; the
/// join then ends (its target is cancelled), the poll returns `Pending`, and the task is
/// cancelled and dropped.
#[test]
fn a_shielded_blocking_joiner_at_drop_is_dropped() {
    let _s = serial();
    let drops = DropCount::default();
    let rt = rt(2);
    let (started_tx, started_rx) = std::sync::mpsc::channel();
    let g = drops.guard();
    let h = rt.spawn(async move {
        let _g = g;
        let _s = volt::task::shield();
        let target = volt::spawn(Never);
        started_tx.send(()).unwrap();
        let _ = target.join();
        Never.await
    });
    started_rx.recv_timeout(Duration::from_secs(60)).expect("the task started within 60 s");
    drop(rt);
    assert!(wait_until(Duration::from_secs(60), || drops.get() == 1), "the shielded future was never dropped");
    assert!(wait_until(Duration::from_secs(60), || h.is_finished()));
    assert!(h.join().unwrap_err().is_cancelled());
}
