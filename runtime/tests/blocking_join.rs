//! Blocking joins on a real runtime: nested join chains, joins under a lock, joins that
//! hand their worker off, and the runtime dropped under one.

mod common;

use common::*;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::Duration;

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
        // The sender dropped unsent: `f` panicked (its message is above).
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => panic!("{what}: panicked"),
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => panic!("{what}: no answer within {bound:?} (deadlock)"),
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

/// A join that hands its worker off moves the worker's loop onto a blocking-pool thread,
/// where it stays until shutdown. Those threads must not count against
/// `max_blocking_threads`: with a limit of one and both workers handed off, blocking calls
/// made afterwards still get a thread and complete, and never run more than one at a
/// time.
#[test]
fn handed_off_workers_do_not_use_up_the_blocking_thread_limit() {
    let rt = volt::runtime::Builder::new().worker_threads(2).max_blocking_threads(1).build().unwrap();
    // One flag per target (a `Flag` keeps one waker).
    let releases = [Flag::default(), Flag::default()];
    // Two joins on targets that wait for their flag: each join finds its target pending
    // and hands its worker off (one pool thread per hand-off, whichever worker runs them).
    let joins: Vec<_> = (0..2u32)
        .map(|i| {
            let r = releases[i as usize].clone();
            rt.spawn(async move {
                let target = volt::spawn(async move {
                    r.wait().await;
                    i
                });
                target.join().unwrap()
            })
        })
        .collect();
    let handle = rt.handle().clone();
    // Nothing else uses the pool, so its first two threads are the hand-offs.
    assert!(
        wait_until(Duration::from_secs(30), || handle.telemetry().snapshot().blocking_threads >= 2),
        "both joins handed their workers off to the pool"
    );
    let running = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let peak = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let calls: Vec<_> = (0..4)
        .map(|i| {
            let (running, peak) = (running.clone(), peak.clone());
            handle.spawn_blocking(move || {
                let now = running.fetch_add(1, SeqCst) + 1;
                peak.fetch_max(now, SeqCst);
                // Long enough for an overlap to show if the limit were not kept.
                std::thread::sleep(Duration::from_millis(5));
                running.fetch_sub(1, SeqCst);
                i * 10
            })
        })
        .collect();
    let results = within(Duration::from_secs(30), "blocking calls after two hand-offs", move || {
        calls.into_iter().map(|c| c.join().unwrap()).collect::<Vec<_>>()
    });
    assert_eq!(results, [0, 10, 20, 30]);
    assert_eq!(peak.load(SeqCst), 1, "blocking calls still run one at a time");
    // A host-name lookup runs on the pool too.
    let bound = within(Duration::from_secs(30), "a host-name lookup after two hand-offs", move || {
        let bind = handle.spawn(async { volt::net::TcpListener::bind("localhost:0").await.map(|_| ()) });
        bind.join().unwrap()
    });
    bound.expect("a listener bound on localhost");
    for r in &releases {
        r.set();
    }
    let got = within(Duration::from_secs(30), "the joins after their targets are released", move || {
        joins.into_iter().map(|j| j.join().unwrap()).collect::<Vec<u32>>()
    });
    assert_eq!(got, [0, 1]);
}

/// A task that joins its own handle gets a panic that says so (the join could never
/// return), and the runtime still drops: the first form waited for good, and so did the
/// runtime's drop after it.
#[test]
fn a_task_joining_its_own_handle_panics_and_the_runtime_still_drops() {
    let got = within(Duration::from_secs(30), "a self-join", || {
        // No stall monitor: a panic's backtrace (RUST_BACKTRACE=1) can hold the worker
        // past its threshold, and symbolizing that stall on a loaded machine takes long.
        let rt = volt::runtime::Builder::new().worker_threads(2).stall_threshold(None).build().unwrap();
        let slot: Arc<Mutex<Option<volt::JoinHandle<()>>>> = Default::default();
        let (s2, gate) = (slot.clone(), Flag::default());
        let g2 = gate.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        let h = rt.spawn(async move {
            g2.wait().await;
            let me = s2.lock().unwrap().take().unwrap();
            let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| me.join()));
            let msg = caught.err().and_then(|p| p.downcast_ref::<String>().cloned());
            let _ = tx.send(msg);
        });
        *slot.lock().unwrap() = Some(h);
        gate.set();
        let msg = rx.recv_timeout(Duration::from_secs(10)).ok().flatten();
        drop(rt);
        msg
    });
    let msg = got.expect("the self-join neither panicked nor returned");
    assert!(msg.contains("its own JoinHandle"), "{msg}");
}

/// Joins the task it holds when dropped.
struct JoinOnDrop(Option<volt::JoinHandle<()>>, Arc<std::sync::atomic::AtomicUsize>);

impl Drop for JoinOnDrop {
    fn drop(&mut self) {
        if let Some(h) = self.0.take() {
            if h.join().is_err_and(|e| e.is_cancelled()) {
                self.1.fetch_add(1, SeqCst);
            }
        }
    }
}

/// The runtime's drop cancels tasks one at a time on the dropping thread; a task whose
/// future joins another task when dropped (a guard over its children) must not wait
/// there for a child that only that same thread would cancel. Each such join returns a
/// cancelled error and the drop returns (the first form hung).
#[test]
fn a_future_that_joins_a_task_when_dropped_does_not_hang_the_runtimes_drop() {
    let cancelled = within(Duration::from_secs(30), "the runtime's drop", || {
        let rt = rt(1);
        let cancelled = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let started = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        for _ in 0..8 {
            let child = rt.spawn(Never);
            let (c, s) = (cancelled.clone(), started.clone());
            rt.spawn(async move {
                let _guard = JoinOnDrop(Some(child), c);
                s.fetch_add(1, SeqCst);
                Never.await
            });
        }
        assert!(wait_until(Duration::from_secs(10), || started.load(SeqCst) == 8));
        drop(rt);
        cancelled.load(SeqCst)
    });
    assert_eq!(cancelled, 8, "every join in a drop saw its child cancelled");
}

/// Two tasks blocked in joins of each other (a cycle, which deadlocks while the runtime
/// runs): dropping the runtime ends the cycle and returns. A join gives up with a
/// cancelled error; the other then sees its target complete (or gives up too).
#[test]
fn dropping_the_runtime_ends_a_cycle_of_joins() {
    let got = within(Duration::from_secs(30), "the drop of a runtime with a join cycle", || {
        let rt = rt(2);
        type Slot = Arc<Mutex<Option<volt::JoinHandle<()>>>>;
        let (a_slot, b_slot): (Slot, Slot) = Default::default();
        let gate = Flag::default();
        let joining = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (tx, rx) = std::sync::mpsc::channel();
        let spawn_joiner = |other: Slot| {
            let (g, tx, j) = (gate.clone(), tx.clone(), joining.clone());
            rt.spawn(async move {
                g.wait().await;
                let h = other.lock().unwrap().take().unwrap();
                j.fetch_add(1, SeqCst);
                let _ = tx.send(h.join().map_err(|e| e.is_cancelled()));
            })
        };
        let a = spawn_joiner(b_slot.clone());
        let b = spawn_joiner(a_slot.clone());
        *a_slot.lock().unwrap() = Some(a);
        *b_slot.lock().unwrap() = Some(b);
        gate.set();
        // Both polls are in their joins (so the drop cannot cancel either before it
        // joins), which can only end in the drop.
        assert!(wait_until(Duration::from_secs(10), || joining.load(SeqCst) == 2));
        assert!(rx.recv_timeout(Duration::from_millis(100)).is_err(), "a join in a cycle returned");
        drop(rt);
        (rx.recv_timeout(Duration::from_secs(10)).ok(), rx.recv_timeout(Duration::from_secs(10)).ok())
    });
    let (first, second) = got;
    let (first, second) = (first.expect("a join never returned"), second.expect("a join never returned"));
    assert_eq!(first, Err(true), "the first join to return gave up on its target");
    assert!(matches!(second, Ok(()) | Err(true)), "{second:?}");
}
