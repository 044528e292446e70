#![cfg(feature = "rt-multi-thread")]
//! `volt::task`'s Tokio API as an application meets it: `JoinSet`, `AbortHandle`,
//! `task::Id`, `LocalSet`/`spawn_local`, `block_in_place` and `JoinError`. Every wait
//! below has a generous bound (10 s) and nothing asserts how long anything took.

use std::cell::RefCell;
use std::collections::HashSet;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};
use volt::task::{self, JoinSet, LocalSet};

const BOUND: Duration = Duration::from_secs(10);

fn rt(workers: usize) -> volt::Runtime {
    volt::runtime::Builder::new().worker_threads(workers).build().unwrap()
}

/// Adds one to its counter when dropped.
struct DropCount(Arc<AtomicUsize>);

impl Drop for DropCount {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
    }
}

/// Wait (sleeping, at most `BOUND`) until `f` holds.
fn eventually(what: &str, f: impl Fn() -> bool) {
    let deadline = Instant::now() + BOUND;
    while !f() {
        assert!(Instant::now() < deadline, "not within {BOUND:?}: {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn join_set_returns_every_output_once_in_any_order() {
    let rt = rt(2);
    let got = rt.block_on(async {
        let mut set = JoinSet::new();
        assert!(set.is_empty());
        for i in 0..300u64 {
            set.spawn(async move {
                // Finish in an order unrelated to the spawn order.
                if i % 3 == 0 {
                    volt::time::sleep(Duration::from_millis(i % 7)).await;
                } else if i % 3 == 1 {
                    task::yield_now().await;
                }
                i
            });
        }
        assert_eq!(set.len(), 300);
        let mut got = Vec::new();
        while let Some(res) = set.join_next().await {
            got.push(res.unwrap());
            assert_eq!(set.len(), 300 - got.len(), "len counts the tasks not yet taken out");
        }
        assert!(set.is_empty());
        assert!(set.join_next().await.is_none(), "an empty set gives None");
        assert!(set.try_join_next().is_none());
        got
    });
    assert_eq!(got.len(), 300);
    let distinct: HashSet<u64> = got.iter().copied().collect();
    assert_eq!(distinct, (0..300).collect::<HashSet<u64>>(), "every output once");
}

/// A waker whose `drop` drives a current-thread runtime: the set's task finishes inside
/// it, and its waker takes the set's lock.
struct DriveOnDrop(Option<volt::Runtime>);

impl std::task::Wake for DriveOnDrop {
    fn wake(self: Arc<Self>) {}
}

impl Drop for DriveOnDrop {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            rt.block_on(task::yield_now());
        }
    }
}

#[test]
fn a_join_set_drops_the_waker_it_replaces_after_its_lock() {
    use std::task::{Context, Poll, Waker};
    // Each way a set lets go of its waiter's waker: a poll with another waker, a detach
    // and the set's drop. Before, each dropped it under the set's lock, and the task's
    // finish (in the waker's `drop`) waited on that lock for good.
    for how in ["replace", "detach", "drop"] {
        let (done_tx, done_rx) = mpsc::channel();
        std::thread::spawn(move || {
            let rt = volt::runtime::Builder::new_current_thread().build().unwrap();
            let mut set = JoinSet::new();
            set.spawn_on(async { 42 }, rt.handle());
            let waker = Waker::from(Arc::new(DriveOnDrop(Some(rt))));
            assert!(set.poll_join_next(&mut Context::from_waker(&waker)).is_pending());
            drop(waker);
            match how {
                "replace" => {
                    let next = set.poll_join_next(&mut Context::from_waker(Waker::noop()));
                    // The task finished while the old waker dropped: it may be here now.
                    let out = match next {
                        Poll::Ready(out) => out,
                        Poll::Pending => set.try_join_next(),
                    };
                    assert_eq!(out.unwrap().unwrap(), 42);
                }
                "detach" => set.detach_all(),
                _ => drop(set),
            }
            done_tx.send(()).unwrap();
        });
        match done_rx.recv_timeout(Duration::from_secs(30)) {
            Ok(()) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => panic!("{how}: the thread panicked (see above)"),
            Err(mpsc::RecvTimeoutError::Timeout) => panic!("{how}: the set's lock was held for good"),
        }
    }
}

#[test]
fn join_next_on_an_empty_set_is_none() {
    let rt = rt(1);
    rt.block_on(async {
        let mut set: JoinSet<()> = JoinSet::new();
        assert!(set.join_next().await.is_none());
        assert!(set.join_next_with_id().await.is_none());
        assert!(set.try_join_next().is_none());
        set.shutdown().await;
        assert!(set.is_empty());
    });
}

#[test]
fn dropping_a_join_set_aborts_and_drops_every_task() {
    let rt = rt(2);
    let drops = Arc::new(AtomicUsize::new(0));
    let started = Arc::new(AtomicUsize::new(0));
    rt.block_on(async {
        let mut set = JoinSet::new();
        for _ in 0..50 {
            let d = DropCount(drops.clone());
            let s = started.clone();
            set.spawn(async move {
                let _d = d;
                s.fetch_add(1, SeqCst);
                std::future::pending::<()>().await
            });
        }
        // Some have started and some maybe not: both kinds must be dropped.
        task::yield_now().await;
        drop(set);
    });
    eventually("every future of the dropped set dropped", || drops.load(SeqCst) == 50);
    assert_eq!(drops.load(SeqCst), 50, "each future dropped exactly once");
}

#[test]
fn shutdown_aborts_and_waits_for_every_task() {
    let rt = rt(2);
    let drops = Arc::new(AtomicUsize::new(0));
    rt.block_on(async {
        let mut set = JoinSet::new();
        for _ in 0..40 {
            let d = DropCount(drops.clone());
            set.spawn(async move {
                let _d = d;
                std::future::pending::<()>().await
            });
        }
        set.shutdown().await;
        // No waiting here: `shutdown` returned only once all were gone.
        assert_eq!(drops.load(SeqCst), 40);
        assert!(set.is_empty());
    });
}

#[test]
fn abort_all_gives_cancelled_errors_with_the_tasks_ids() {
    let rt = rt(2);
    rt.block_on(async {
        let mut set = JoinSet::new();
        let mut ids = HashSet::new();
        for _ in 0..20 {
            let h = set.spawn(std::future::pending::<u32>());
            ids.insert(h.id());
        }
        let done = set.spawn(async { 7u32 });
        let done_id = done.id();
        ids.insert(done_id);
        // Let the finished one finish before the abort.
        let deadline = Instant::now() + BOUND;
        while !done.is_finished() {
            assert!(Instant::now() < deadline);
            task::yield_now().await;
        }
        set.abort_all();
        let mut seen = HashSet::new();
        let mut cancelled = 0;
        while let Some(res) = set.join_next_with_id().await {
            match res {
                Ok((id, v)) => {
                    assert_eq!((id, v), (done_id, 7), "only the finished task has an output");
                    seen.insert(id);
                }
                Err(e) => {
                    assert!(e.is_cancelled() && !e.is_panic(), "{e:?}");
                    cancelled += 1;
                    seen.insert(e.id());
                }
            }
        }
        assert_eq!(cancelled, 20);
        assert_eq!(seen, ids, "each task came back once, under its own id");
    });
}

#[test]
fn detach_all_lets_the_tasks_run_on() {
    let rt = rt(2);
    let (tx, rx) = mpsc::channel();
    let gate = Arc::new(std::sync::atomic::AtomicBool::new(false));
    rt.block_on(async {
        let mut set = JoinSet::new();
        for i in 0..10 {
            let tx = tx.clone();
            let gate = gate.clone();
            set.spawn(async move {
                // Hold on until the set has been dropped.
                while !gate.load(SeqCst) {
                    volt::time::sleep(Duration::from_millis(1)).await;
                }
                tx.send(i).unwrap();
            });
        }
        set.detach_all();
        assert!(set.is_empty());
        assert!(set.join_next().await.is_none());
        drop(set);
    });
    gate.store(true, SeqCst);
    let mut got: Vec<i32> = (0..10).map(|_| rx.recv_timeout(BOUND).expect("a detached task finished")).collect();
    got.sort();
    assert_eq!(got, (0..10).collect::<Vec<_>>());
}

#[test]
fn join_all_from_iter_spawn_blocking_and_panics() {
    let rt = rt(2);
    rt.block_on(async {
        let set: JoinSet<u64> = (0..25u64).map(|i| async move { i * 2 }).collect();
        let mut all = set.join_all().await;
        all.sort();
        assert_eq!(all, (0..25).map(|i| i * 2).collect::<Vec<u64>>());

        let mut set = JoinSet::new();
        set.spawn_blocking(|| 5);
        set.spawn_on(async { 6 }, &volt::runtime::Handle::current());
        set.extend([async { 7 }]);
        let mut outs = Vec::new();
        while let Some(r) = set.join_next().await {
            outs.push(r.unwrap());
        }
        outs.sort();
        assert_eq!(outs, [5, 6, 7]);

        let mut set = JoinSet::new();
        set.spawn(async { panic!("boom in a set") });
        let err = set.join_next().await.unwrap().unwrap_err();
        assert!(err.is_panic());
        assert_eq!(err.into_panic().downcast_ref::<&str>(), Some(&"boom in a set"));
    });
}

#[test]
fn abort_handle_aborts_and_shares_the_id() {
    let rt = rt(2);
    let drops = Arc::new(AtomicUsize::new(0));
    let d = DropCount(drops.clone());
    let h = rt.spawn(async move {
        let _d = d;
        std::future::pending::<()>().await
    });
    let abort = h.abort_handle();
    let other = abort.clone();
    assert_eq!(abort.id(), h.id());
    assert!(!abort.is_finished());
    // The abort handle works from another thread, after the join handle is gone.
    let t = std::thread::spawn(move || other.abort());
    t.join().unwrap();
    let err = rt.block_on(h).unwrap_err();
    assert!(err.is_cancelled());
    assert_eq!(err.id(), abort.id());
    assert!(abort.is_finished());
    assert_eq!(drops.load(SeqCst), 1);
    // Aborting a finished task does nothing.
    abort.abort();
}

#[test]
fn task_id_inside_equals_the_handles() {
    let rt = rt(2);
    let h = rt.spawn(async { task::id() });
    let id = h.id();
    assert_eq!(rt.block_on(h).unwrap(), id);
    let b = rt.handle().spawn_blocking(task::try_id);
    let bid = b.id();
    assert_eq!(rt.block_on(b).unwrap(), Some(bid), "a blocking closure is a task with an id");
    assert_eq!(rt.block_on(async { task::try_id() }), None, "block_on's future is not a task");
    assert!(task::try_id().is_none());
    assert!(std::panic::catch_unwind(task::id).is_err(), "task::id outside a task panics");
    // Display is the number telemetry uses; ids differ and order by spawn.
    assert_eq!(id.to_string(), id.as_u64().to_string());
    assert_ne!(id, bid);
    assert!(id < bid);
}

#[test]
fn join_error_display_and_kinds() {
    let rt = rt(1);
    let p = rt.spawn(async { panic!("the message") });
    let pid = p.id();
    let e = rt.block_on(p).unwrap_err();
    assert!(e.is_panic() && !e.is_cancelled());
    assert_eq!(e.to_string(), format!("task {pid} panicked with message \"the message\""));
    let payload = e.try_into_panic().unwrap();
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"the message"));

    let c = rt.spawn(std::future::pending::<()>());
    let cid = c.id();
    c.abort();
    let e = rt.block_on(c).unwrap_err();
    assert!(e.is_cancelled());
    assert_eq!(e.to_string(), format!("task {cid} was cancelled"));
    let e = e.try_into_panic().unwrap_err();
    assert!(e.is_cancelled());
    let io: std::io::Error = e.into();
    assert!(io.to_string().contains("cancelled"));
}

#[test]
fn a_join_error_is_send_and_sync_so_it_boxes_as_any_error() {
    // As Tokio's: `task.await?` in a function returning `anyhow::Result` or
    // `Result<_, Box<dyn Error + Send + Sync>>` needs the error to be `Sync`, though a
    // panic's payload is only `Send`.
    fn send_sync<T: Send + Sync + 'static>(_: &T) {}
    async fn boxed(h: volt::task::JoinHandle<()>) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        h.await?;
        Ok(())
    }
    let rt = rt(1);
    // A payload that is `Send` and not `Sync`.
    let h = rt.spawn(async { std::panic::panic_any(std::cell::Cell::new(5u8)) });
    let e = rt.block_on(boxed(h)).unwrap_err();
    assert!(e.to_string().ends_with("panicked"), "{e}");
    let h = rt.spawn(async { panic!("shared") });
    let e = rt.block_on(h).unwrap_err();
    send_sync(&e);
    // Read from two threads at once through `&JoinError`: only the message is reached.
    let texts = std::thread::scope(|s| {
        let a = s.spawn(|| format!("{e} {e:?}"));
        let b = s.spawn(|| format!("{e} {e:?}"));
        [a.join().unwrap(), b.join().unwrap()]
    });
    assert_eq!(texts[0], texts[1]);
    assert!(texts[0].contains("\"shared\""), "{}", texts[0]);
    // The payload comes back whole, by value.
    assert_eq!(e.into_panic().downcast_ref::<&str>(), Some(&"shared"));
}

#[test]
fn local_set_runs_not_send_futures_and_spawn_local_inside() {
    let rt = rt(2);
    let local = LocalSet::new();
    let counter = Rc::new(RefCell::new(0u32));
    let c = counter.clone();
    let out = local.block_on(&rt, async move {
        let mut handles = Vec::new();
        for i in 0..20u32 {
            let c = c.clone();
            handles.push(task::spawn_local(async move {
                // An `Rc` and a `RefCell` across awaits.
                task::yield_now().await;
                *c.borrow_mut() += 1;
                // A local task spawns another one.
                let c2 = c.clone();
                let inner = task::spawn_local(async move {
                    *c2.borrow_mut() += 1;
                    i
                });
                inner.await.unwrap()
            }));
        }
        let mut sum = 0;
        for h in handles {
            sum += h.await.unwrap();
        }
        sum
    });
    assert_eq!(out, (0..20).sum::<u32>());
    assert_eq!(*counter.borrow(), 40);
}

#[test]
fn local_task_woken_from_a_worker_and_the_set_awaited() {
    let rt = rt(2);
    let local = LocalSet::new();
    let seen = Rc::new(RefCell::new(Vec::new()));
    for i in 0..5u64 {
        let seen = seen.clone();
        local.spawn_local(async move {
            // Woken by a timer on the runtime's threads.
            volt::time::sleep(Duration::from_millis(i)).await;
            // And by a task on a worker.
            let v = volt::spawn(async move { i * 10 }).await.unwrap();
            seen.borrow_mut().push(v);
        });
    }
    // Awaiting the set runs it until every task is done.
    rt.block_on(async { volt::time::timeout(BOUND, local).await }).expect("the local set finished");
    let mut got = seen.borrow().clone();
    got.sort();
    assert_eq!(got, [0, 10, 20, 30, 40]);
}

#[test]
fn local_sets_and_runtimes_never_share_a_number() {
    let (one, two) = (rt(1), rt(1));
    let (a, b) = (LocalSet::new(), LocalSet::new());
    assert_eq!(a.id(), a.id());
    let ids: HashSet<_> = [a.id(), b.id(), one.handle().id(), two.handle().id(), LocalSet::new().id()].into();
    assert_eq!(ids.len(), 5, "{ids:?}");
}

#[test]
fn local_set_enter_and_spawn_local_outside_panics() {
    let rt = rt(1);
    assert!(std::panic::catch_unwind(|| task::spawn_local(async {})).is_err(), "spawn_local outside a LocalSet");
    let local = LocalSet::new();
    let h = {
        let _g = local.enter();
        task::spawn_local(async { Rc::new(3) })
    };
    // Spawned while entered; runs when driven.
    let v = local.block_on(&rt, h).unwrap();
    assert_eq!(*v, 3);
}

#[test]
fn dropping_a_local_set_drops_every_future_on_its_thread() {
    struct OnDrop(Rc<RefCell<Vec<std::thread::ThreadId>>>);
    impl Drop for OnDrop {
        fn drop(&mut self) {
            self.0.borrow_mut().push(std::thread::current().id());
        }
    }
    let rt = rt(2);
    let dropped = Rc::new(RefCell::new(Vec::new()));
    let local = LocalSet::new();
    let mut handles = Vec::new();
    for _ in 0..10 {
        let d = OnDrop(dropped.clone());
        handles.push(local.spawn_local(async move {
            let _d = d;
            std::future::pending::<()>().await
        }));
    }
    // Half of them ran once and wait; the other half never ran.
    local.block_on(&rt, async {
        for _ in 0..5 {
            let d = OnDrop(dropped.clone());
            handles.push(task::spawn_local(async move {
                let _d = d;
                std::future::pending::<()>().await
            }));
        }
        task::yield_now().await;
    });
    drop(local);
    assert_eq!(dropped.borrow().len(), 15, "every future dropped when the set dropped");
    let me = std::thread::current().id();
    assert!(dropped.borrow().iter().all(|t| *t == me), "dropped on the set's thread");
    for h in handles {
        assert!(rt.block_on(h).unwrap_err().is_cancelled());
    }
}

#[test]
fn join_set_of_local_tasks() {
    let rt = rt(1);
    let local = LocalSet::new();
    let n = local.block_on(&rt, async {
        let shared = Rc::new(RefCell::new(0));
        let mut set = JoinSet::new();
        for i in 0..10 {
            let s = shared.clone();
            set.spawn_local(async move {
                *s.borrow_mut() += i;
                i
            });
        }
        let mut total = 0;
        while let Some(r) = set.join_next().await {
            total += r.unwrap();
        }
        assert_eq!(*shared.borrow(), total);
        total
    });
    assert_eq!(n, 45);
}

/// `block_in_place` on a worker: while the closure blocks, the tasks queued on its worker
/// still run. The other worker is held by a task blocked on a std channel, so only the
/// hand-off can run them: without it, the closure would wait out its bound.
#[test]
fn block_in_place_lets_other_tasks_run_while_it_blocks() {
    let rt = rt(2);
    let (started_tx, started_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    // Holds one worker until the closure is done.
    let holder = rt.spawn(async move {
        started_tx.send(()).unwrap();
        let _ = release_rx.recv_timeout(BOUND * 2);
    });
    started_rx.recv_timeout(BOUND).expect("the holder started");
    let ran = Arc::new(AtomicUsize::new(0));
    let r = ran.clone();
    let main = rt.spawn(async move {
        let (tx, rx) = mpsc::channel();
        let mut helpers = Vec::new();
        for i in 0..100usize {
            let r = r.clone();
            let tx = tx.clone();
            // Queued on this worker (its LIFO slot and ring).
            helpers.push(volt::spawn(async move {
                r.fetch_add(1, SeqCst);
                let _ = tx.send(i);
                i
            }));
        }
        // The handshake: the closure waits for every helper through a std channel.
        let got = task::block_in_place(move || {
            let deadline = Instant::now() + BOUND;
            let mut got = Vec::new();
            while got.len() < 100 {
                let left = deadline.saturating_duration_since(Instant::now());
                match rx.recv_timeout(left) {
                    Ok(i) => got.push(i),
                    Err(_) => break,
                }
            }
            got
        });
        release_tx.send(()).unwrap();
        let mut sum = 0;
        for h in helpers {
            sum += h.await.unwrap();
        }
        (got.len(), sum)
    });
    let (handshakes, sum) = rt.block_on(main).unwrap();
    rt.block_on(holder).unwrap();
    assert_eq!(handshakes, 100, "the helpers ran while the closure blocked");
    assert_eq!(sum, (0..100).sum::<usize>());
    assert_eq!(ran.load(SeqCst), 100);
}

#[test]
fn block_in_place_off_a_worker_just_runs() {
    let rt = rt(1);
    let x = 5;
    assert_eq!(task::block_in_place(|| x + 1), 6, "outside a runtime");
    assert_eq!(rt.block_on(async { task::block_in_place(|| x + 2) }), 7, "inside block_on");
    let h = rt.spawn(async { task::spawn_blocking(|| task::block_in_place(|| 8)).await.unwrap() });
    assert_eq!(rt.block_on(h).unwrap(), 8, "inside spawn_blocking");
    // Twice in one poll: the second runs on the thread that already gave its worker away.
    let h = rt.spawn(async {
        let a = task::block_in_place(|| 1);
        let b = task::block_in_place(|| 2);
        task::yield_now().await;
        a + b + task::block_in_place(|| 3)
    });
    assert_eq!(rt.block_on(h).unwrap(), 6);
}

#[test]
fn a_task_in_join_next_names_its_wait() {
    let rt = volt::runtime::Builder::new().worker_threads(2).event_ring(1024).build().unwrap();
    let (tx, rx) = mpsc::channel();
    let waiter = rt.spawn(async move {
        let mut set = JoinSet::new();
        set.spawn(std::future::pending::<()>());
        set.spawn(std::future::pending::<()>());
        tx.send(()).unwrap();
        set.join_next().await
    });
    rx.recv_timeout(BOUND).unwrap();
    let id = waiter.id().as_u64();
    let want = volt::telemetry::WaitReason::Label("join set (2 tasks)".into());
    eventually("the join_next wait is named", || {
        rt.handle().telemetry().tasks().iter().any(|t| t.id == id && t.waiting_on.as_ref() == Some(&want))
    });
    waiter.abort();
}

/// As Tokio's: `block_in_place` refuses to run inside a running `LocalSet` (its tasks
/// could not move to another thread meanwhile), both in a local task and in
/// `run_until`'s own future; after the set, it runs again.
#[test]
fn block_in_place_panics_inside_a_local_set() {
    let rt = rt(2);
    let local = LocalSet::new();
    let h = local.spawn_local(async { task::block_in_place(|| 1) });
    let err = local.block_on(&rt, h).unwrap_err();
    assert!(err.is_panic());
    let msg = err.into_panic();
    let msg = msg.downcast_ref::<&str>().copied().or(msg.downcast_ref::<String>().map(String::as_str));
    assert_eq!(msg, Some("can call blocking only when running on the multi-threaded runtime"));
    let in_run_until = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        local.block_on(&rt, async { task::block_in_place(|| 2) })
    }));
    assert!(in_run_until.is_err());
    assert_eq!(task::block_in_place(|| 3), 3, "outside the set it runs");
}

/// A set's tasks spawned on a runtime that is then dropped come back cancelled through
/// another runtime (Tokio's `runtime_gone`).
#[test]
fn join_set_of_a_dropped_runtime_gives_cancelled() {
    let mut set = JoinSet::new();
    let drops = Arc::new(AtomicUsize::new(0));
    {
        let first = rt(1);
        let d = DropCount(drops.clone());
        set.spawn_on(
            async move {
                let _d = d;
                std::future::pending::<()>().await
            },
            first.handle(),
        );
        drop(first);
    }
    let second = rt(1);
    let res = second.block_on(async { volt::time::timeout(BOUND, set.join_next()).await }).expect("not within bound");
    assert!(res.unwrap().unwrap_err().is_cancelled());
    assert_eq!(drops.load(SeqCst), 1);
    assert!(set.is_empty());
}

/// A local task spawned while `run_until` waits on something else wakes the set (Tokio's
/// `spawn_wakes_localset`), and a local task's handle can be awaited on a worker.
#[test]
fn spawn_local_wakes_the_waiting_set_and_handles_travel() {
    let rt = rt(2);
    let local = LocalSet::new();
    let (tx, rx) = mpsc::channel();
    let out = local.block_on(&rt, async {
        // Spawned from inside `run_until`'s future: the set runs it while that future waits.
        let h = task::spawn_local(async move {
            let rc = Rc::new(5u32);
            volt::time::sleep(Duration::from_millis(1)).await;
            tx.send(()).unwrap();
            *rc
        });
        // The `Send` handle of a local task, awaited by a task on a worker.
        volt::spawn(async move { h.await.unwrap() * 2 }).await.unwrap()
    });
    assert_eq!(out, 10);
    rx.recv_timeout(BOUND).unwrap();
}

/// `consume_budget` makes a busy loop let the worker's other tasks run: on one worker, a
/// loop that waits for a flag another task sets finishes.
#[test]
fn consume_budget_lets_other_tasks_run() {
    let rt = rt(1);
    let out = rt.block_on(async {
        volt::spawn(async {
            let flag = Arc::new(std::sync::atomic::AtomicBool::new(false));
            let f = flag.clone();
            volt::spawn(async move { f.store(true, SeqCst) });
            let mut spins = 0u64;
            // Never waits on anything but the budget.
            while !flag.load(SeqCst) && spins < 50_000_000 {
                task::consume_budget().await;
                spins += 1;
            }
            flag.load(SeqCst)
        })
        .await
        .unwrap()
    });
    assert!(out, "the other task never ran");
}

/// The budget runs out after enough cooperative operations in one poll, comes back after
/// a yield, and `unconstrained` lifts it.
#[test]
fn cooperative_spends_the_budget_and_unconstrained_lifts_it() {
    use volt::task::coop::{cooperative, has_budget_remaining};
    let rt = rt(1);
    let h = rt.spawn(async {
        assert!(has_budget_remaining(), "a fresh poll has a budget");
        let mut ops = 0;
        while has_budget_remaining() && ops < 100_000 {
            cooperative(std::future::ready(())).await;
            ops += 1;
        }
        let ran_out = !has_budget_remaining();
        // Spent: the next cooperative operation yields, and the poll after has a budget.
        cooperative(std::future::ready(())).await;
        let refilled = has_budget_remaining();
        let free = task::unconstrained(async {
            for _ in 0..100_000 {
                cooperative(std::future::ready(())).await;
            }
            has_budget_remaining()
        })
        .await;
        (ran_out, ops, refilled, free)
    });
    let (ran_out, ops, refilled, free) = rt.block_on(h).unwrap();
    assert!(ran_out, "the budget never ran out in {ops} operations");
    assert!(ops > 0);
    assert!(refilled);
    assert!(free, "unconstrained spent a budget");
}

/// Tokio's `coop::poll_proceed`: a unit taken for each operation that makes progress, so
/// a fresh poll allows exactly the budget (128) of them and then answers `Pending` with
/// the task woken; a guard dropped without progress gives its unit back; outside a task
/// the budget is unlimited.
#[test]
fn poll_proceed_counts_progress_and_gives_back_the_rest() {
    use std::task::Poll;
    use volt::task::coop::{has_budget_remaining, poll_proceed};
    let rt = rt(1);
    let (progress, retries, woken) = rt
        .block_on(rt.spawn(async {
            // In one poll: how many operations go through before the budget refuses one.
            let progress = std::future::poll_fn(|cx| {
                let mut n = 0u32;
                loop {
                    match poll_proceed(cx) {
                        Poll::Ready(coop) => {
                            coop.made_progress();
                            n += 1;
                            if n > 10_000 {
                                return Poll::Ready(n);
                            }
                        }
                        Poll::Pending => return Poll::Ready(n),
                    }
                }
            })
            .await;
            // The refusal woke the task: yielding now brings a fresh budget.
            volt::task::yield_now().await;
            // Operations that never make progress keep giving their unit back.
            let retries = std::future::poll_fn(|cx| {
                for i in 0..10_000u32 {
                    match poll_proceed(cx) {
                        Poll::Ready(coop) => drop(coop),
                        Poll::Pending => return Poll::Ready(i),
                    }
                }
                Poll::Ready(10_000)
            })
            .await;
            (progress, retries, has_budget_remaining())
        }))
        .unwrap();
    assert_eq!(progress, 128, "one poll's budget");
    assert_eq!(retries, 10_000, "a guard without progress gave its unit back");
    assert!(woken);
    // Outside a task: unlimited.
    let waker = futures::task::noop_waker();
    let mut cx = std::task::Context::from_waker(&waker);
    for _ in 0..1000 {
        let Poll::Ready(coop) = poll_proceed(&mut cx) else { panic!("refused outside a task") };
        coop.made_progress();
    }
}

/// Taking finished tasks' outputs spends the budget, as Tokio's does (its
/// `join_set_coop` test): a loop over a thousand finished handles, or a `JoinSet` of a
/// thousand finished tasks, is made to yield before the end, and loses no output.
#[test]
fn joining_finished_tasks_spends_the_budget() {
    use futures::FutureExt;
    const TASKS: usize = 1000;
    let rt = rt(1);
    let (count, refused) = rt
        .block_on(rt.spawn(async {
            let done = Arc::new(AtomicUsize::new(0));
            let mut set = JoinSet::new();
            let mut handles = Vec::new();
            for i in 0..TASKS {
                let (d1, d2) = (done.clone(), done.clone());
                set.spawn(async move {
                    d1.fetch_add(1, SeqCst);
                });
                handles.push(volt::spawn(async move {
                    d2.fetch_add(1, SeqCst);
                    i
                }));
            }
            // Let every task finish.
            while done.load(SeqCst) < 2 * TASKS {
                task::yield_now().await;
            }
            let (mut count, mut refused) = (0, 0);
            loop {
                match set.join_next().now_or_never() {
                    Some(Some(r)) => {
                        r.unwrap();
                        count += 1;
                    }
                    Some(None) => break,
                    None => {
                        refused += 1;
                        task::yield_now().await;
                    }
                }
            }
            let (mut sum, mut handle_refused) = (0, 0);
            for mut h in handles {
                loop {
                    match (&mut h).now_or_never() {
                        Some(v) => {
                            sum += v.unwrap();
                            break;
                        }
                        None => {
                            handle_refused += 1;
                            task::yield_now().await;
                        }
                    }
                }
            }
            assert_eq!(sum, TASKS * (TASKS - 1) / 2, "an output was lost");
            (count, (refused, handle_refused))
        }))
        .unwrap();
    assert_eq!(count, TASKS, "a JoinSet output was lost");
    assert!(refused.0 >= 1, "the JoinSet never ran out of budget in {TASKS} joins");
    assert!(refused.1 >= 1, "the handles never ran out of budget in {TASKS} joins");
}

/// `Builder::on_thread_park`/`on_thread_unpark`: on each worker thread they alternate,
/// park first, on both flavors; the runtime idles between sleeps, so they run; and a task
/// spawned from the park hook of the only worker runs (the worker does not park over it).
#[test]
fn park_hooks_alternate_and_a_task_spawned_in_one_runs() {
    use std::cell::Cell;
    use std::sync::atomic::AtomicBool;
    thread_local! {
        static PARKED: Cell<bool> = const { Cell::new(false) };
    }
    for current in [false, true] {
        let (parks, unparks, bad) =
            (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let mut b = if current {
            volt::runtime::Builder::new_current_thread()
        } else {
            let mut b = volt::runtime::Builder::new_multi_thread();
            b.worker_threads(2);
            b
        };
        let (p, u, b1, b2) = (parks.clone(), unparks.clone(), bad.clone(), bad.clone());
        let rt = b
            .on_thread_park(move || {
                if PARKED.with(|c| c.replace(true)) {
                    b1.fetch_add(1, SeqCst);
                }
                p.fetch_add(1, SeqCst);
            })
            .on_thread_unpark(move || {
                if !PARKED.with(|c| c.replace(false)) {
                    b2.fetch_add(1, SeqCst);
                }
                u.fetch_add(1, SeqCst);
            })
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            for _ in 0..5 {
                volt::time::sleep(Duration::from_millis(2)).await;
            }
        });
        drop(rt);
        assert!(parks.load(SeqCst) >= 1, "no park hook ran (current thread: {current})");
        assert_eq!(bad.load(SeqCst), 0, "park and unpark hooks out of turn (current thread: {current})");
        let (p, u) = (parks.load(SeqCst), unparks.load(SeqCst));
        assert!(p == u || p == u + 1, "{p} parks, {u} unparks (current thread: {current})");
    }

    let spawned = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel();
    let tx = std::sync::Mutex::new(Some(tx));
    let s = spawned.clone();
    let rt = volt::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .on_thread_park(move || {
            if !s.swap(true, SeqCst) {
                let tx = tx.lock().unwrap().take().unwrap();
                volt::spawn(async move { tx.send(()).unwrap() });
            }
        })
        .build()
        .unwrap();
    // The worker starts with nothing to do and parks at once, spawning from its hook.
    rx.recv_timeout(Duration::from_secs(10)).expect("the task spawned in the park hook never ran");
    assert!(spawned.load(SeqCst));
    drop(rt);
}

/// Many tasks in `block_in_place` at once on two workers, each awaiting again after it:
/// every one finishes, and the runtime keeps running other tasks throughout.
#[test]
fn many_block_in_place_calls_at_once_all_finish() {
    let rt = rt(2);
    let done = Arc::new(AtomicUsize::new(0));
    let ticks = Arc::new(AtomicUsize::new(0));
    let t = ticks.clone();
    let ticker = rt.spawn(async move {
        for _ in 0..20 {
            volt::time::sleep(Duration::from_millis(1)).await;
            t.fetch_add(1, SeqCst);
        }
    });
    let handles: Vec<_> = (0..16)
        .map(|i| {
            let done = done.clone();
            rt.spawn(async move {
                let a = task::block_in_place(|| {
                    std::thread::sleep(Duration::from_millis(5));
                    i
                });
                // The task goes on as usual after the closure.
                volt::time::sleep(Duration::from_millis(1)).await;
                let b = volt::spawn(async move { i * 2 }).await.unwrap();
                let c = task::block_in_place(|| i * 3);
                done.fetch_add(1, SeqCst);
                a + b + c
            })
        })
        .collect();
    let sums: Vec<usize> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert_eq!(sums, (0..16).map(|i| i * 6).collect::<Vec<_>>());
    assert_eq!(done.load(SeqCst), 16);
    ticker.join().unwrap();
    assert_eq!(ticks.load(SeqCst), 20);
}

/// A `LocalSet` kept in a thread-local (Tokio's `localset_in_thread_local`) is dropped by
/// the thread's exit with a task still pending: the future is dropped then, on that
/// thread, and nothing panics (a panic there would abort the process).
#[test]
fn a_local_set_in_a_thread_local_drops_its_tasks_at_thread_exit() {
    thread_local! {
        static LOCAL: LocalSet = LocalSet::new();
    }
    struct OnDrop(mpsc::Sender<std::thread::ThreadId>);
    impl Drop for OnDrop {
        fn drop(&mut self) {
            let _ = self.0.send(std::thread::current().id());
        }
    }
    let rt = Arc::new(rt(1));
    let (tx, rx) = mpsc::channel();
    let r = rt.clone();
    let t = std::thread::spawn(move || {
        LOCAL.with(|local| {
            let d = OnDrop(tx);
            local.spawn_local(async move {
                let _d = d;
                std::future::pending::<()>().await
            });
            local.block_on(&r, task::yield_now());
        });
        std::thread::current().id()
    });
    let tid = t.join().expect("the thread exited cleanly");
    assert_eq!(rx.recv_timeout(BOUND).expect("the future was dropped"), tid);
}

/// A local task aborted from another thread is cancelled on the set's thread (its
/// `!Send` future dropped there), and awaiting the set then ends (Tokio's
/// `remote_abort_local_set_3929`).
#[test]
fn a_local_task_aborted_from_another_thread_is_dropped_on_the_sets_thread() {
    struct DropCheck(std::thread::ThreadId, Arc<AtomicUsize>, std::marker::PhantomData<*const ()>);
    impl Drop for DropCheck {
        fn drop(&mut self) {
            // Counted only when dropped on the thread it was made on.
            if std::thread::current().id() == self.0 {
                self.1.fetch_add(1, SeqCst);
            }
        }
    }
    let rt = rt(1);
    let local = LocalSet::new();
    let on_home = Arc::new(AtomicUsize::new(0));
    let check = DropCheck(std::thread::current().id(), on_home.clone(), std::marker::PhantomData);
    let jh = local.spawn_local(async move {
        std::future::pending::<()>().await;
        drop(check);
    });
    let aborter = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(10));
        jh.abort();
        jh
    });
    rt.block_on(async { volt::time::timeout(BOUND, local).await }).expect("the set ended after the abort");
    let jh = aborter.join().unwrap();
    assert!(jh.is_finished());
    assert_eq!(on_home.load(SeqCst), 1, "the future was dropped once, on the set's thread");
    assert!(rt.block_on(jh).unwrap_err().is_cancelled());
}

/// The task is the current one while its future or its output drops, whichever way it
/// goes (aborted, finished with nobody to take the output, the output dropped with its
/// handle): `task::try_id()` in a destructor names it, as with Tokio.
#[test]
#[cfg(feature = "sync")]
fn a_task_is_current_while_its_future_or_output_drops() {
    struct Tell(mpsc::Sender<Option<task::Id>>);
    impl Drop for Tell {
        fn drop(&mut self) {
            let _ = self.0.send(task::try_id());
        }
    }
    let rt = volt::runtime::Builder::new_multi_thread().worker_threads(2).build().unwrap();
    let (tx, rx) = mpsc::channel();

    // The future, dropped by an abort.
    let tell = Tell(tx.clone());
    let h = rt.spawn(async move {
        let _tell = tell;
        std::future::pending::<()>().await
    });
    let id = h.id();
    h.abort();
    assert_eq!(rx.recv_timeout(Duration::from_secs(10)).unwrap(), Some(id));

    // The output, dropped at completion because its handle went first.
    let (go_tx, go_rx) = volt::sync::oneshot::channel::<()>();
    let t = tx.clone();
    let h = rt.spawn(async move {
        let _ = go_rx.await;
        Tell(t)
    });
    let id = h.id();
    drop(h);
    go_tx.send(()).unwrap();
    assert_eq!(rx.recv_timeout(Duration::from_secs(10)).unwrap(), Some(id));

    // The output, dropped with its handle after completion.
    let t = tx.clone();
    let h = rt.spawn(async move { Tell(t) });
    let id = h.id();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !h.is_finished() {
        assert!(Instant::now() < deadline, "the task never finished");
        std::thread::yield_now();
    }
    drop(h);
    assert_eq!(rx.recv_timeout(Duration::from_secs(10)).unwrap(), Some(id));
}
