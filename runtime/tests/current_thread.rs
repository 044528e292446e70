#![cfg(all(feature = "rt", feature = "net", feature = "time", feature = "io-util"))]
//! `Builder::new_current_thread`: a runtime with no worker threads, whose tasks all run on
//! the thread inside `block_on`.

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::thread::ThreadId;
use std::time::Duration;
use volt::io::{AsyncReadExt, AsyncWriteExt};
use volt::runtime::{Builder, Handle, RuntimeFlavor};

fn rt() -> volt::Runtime {
    Builder::new_current_thread().enable_all().build().unwrap()
}

/// Every task, spawned from inside or before `block_on`, runs on the `block_on` thread.
#[test]
fn every_task_runs_on_the_block_on_thread() {
    let rt = rt();
    assert_eq!(rt.handle().runtime_flavor(), RuntimeFlavor::CurrentThread);
    let seen: Arc<Mutex<Vec<ThreadId>>> = Arc::default();
    // Spawned before anyone is in `block_on`: it waits for it.
    let before = {
        let seen = Arc::clone(&seen);
        rt.spawn(async move { seen.lock().unwrap().push(std::thread::current().id()) })
    };
    let me = std::thread::current().id();
    rt.block_on(async {
        let mut handles = Vec::new();
        for i in 0..100 {
            let seen = Arc::clone(&seen);
            handles.push(volt::spawn(async move {
                if i % 3 == 0 {
                    volt::task::yield_now().await;
                }
                // A task spawned from a task.
                let inner = volt::spawn(async { std::thread::current().id() });
                let id = inner.await.unwrap();
                seen.lock().unwrap().push(id);
                seen.lock().unwrap().push(std::thread::current().id());
            }));
        }
        for h in handles {
            h.await.unwrap();
        }
        before.await.unwrap();
    });
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 201);
    assert!(seen.iter().all(|&id| id == me), "a task ran on another thread");
    // No worker thread: the one worker shows in telemetry.
    assert_eq!(rt.handle().num_workers(), 1);
    let snap = rt.handle().telemetry().snapshot();
    assert_eq!(snap.workers.len(), 1);
    assert!(snap.tasks_spawned >= 201, "{}", snap.tasks_spawned);
}

/// A task spawned through the handle runs only while some thread is inside `block_on`.
#[test]
fn tasks_wait_for_block_on() {
    let rt = rt();
    let ran = Arc::new(AtomicUsize::new(0));
    let r = Arc::clone(&ran);
    let h = rt.spawn(async move {
        r.fetch_add(1, SeqCst);
    });
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(ran.load(SeqCst), 0, "a task ran with nobody in block_on");
    rt.block_on(h).unwrap();
    assert_eq!(ran.load(SeqCst), 1);
}

/// Timers fire for tasks and for the `block_on` future itself.
#[test]
fn timers_fire() {
    let rt = rt();
    let out = rt.block_on(async {
        let t = volt::spawn(async {
            volt::time::sleep(Duration::from_millis(20)).await;
            1
        });
        volt::time::sleep(Duration::from_millis(10)).await;
        let timed_out = volt::time::timeout(Duration::from_millis(5), std::future::pending::<()>()).await;
        assert!(timed_out.is_err());
        t.await.unwrap() + 1
    });
    assert_eq!(out, 2);
}

/// A TCP echo between two tasks of one current-thread runtime.
#[test]
fn tcp_echo() {
    let rt = rt();
    let me = std::thread::current().id();
    rt.block_on(async move {
        let listener = volt::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = volt::spawn(async move {
            assert_eq!(std::thread::current().id(), me);
            let (mut s, _) = listener.accept().await.unwrap();
            let mut buf = vec![0u8; 1 << 16];
            let mut total = 0;
            loop {
                let n = s.read(&mut buf).await.unwrap();
                if n == 0 {
                    break;
                }
                s.write_all(&buf[..n]).await.unwrap();
                total += n;
            }
            total
        });
        let mut c = volt::net::TcpStream::connect(addr).await.unwrap();
        // Larger than the socket buffers, so both sides wait on the reactor.
        let data: Vec<u8> = (0..1_000_000u32).map(|i| i as u8).collect();
        let (mut r, mut w) = c.split();
        let send = async {
            w.write_all(&data).await.unwrap();
            w.shutdown().await.unwrap();
        };
        let recv = async {
            let mut back = Vec::new();
            r.read_to_end(&mut back).await.unwrap();
            back
        };
        let ((), back) = volt::join!(send, recv);
        assert_eq!(back, data);
        assert_eq!(server.await.unwrap(), data.len());
    });
}

/// `spawn_blocking` runs on the pool, and its result wakes the task.
#[test]
fn spawn_blocking_works() {
    let rt = rt();
    let me = std::thread::current().id();
    let (other, n) = rt.block_on(async {
        volt::spawn(async {
            volt::task::spawn_blocking(|| {
                std::thread::sleep(Duration::from_millis(10));
                (std::thread::current().id(), 7)
            })
            .await
            .unwrap()
        })
        .await
        .unwrap()
    });
    assert_ne!(other, me);
    assert_eq!(n, 7);
    assert_eq!(rt.spawn_blocking(|| 3).join().unwrap(), 3);
}

struct CountDrop(Arc<AtomicUsize>);
impl Drop for CountDrop {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
    }
}

/// A runtime dropped with pending tasks (some never polled, some waiting on a timer or a
/// channel) drops every future, and their handles report cancelled.
#[test]
fn drop_with_pending_tasks_drops_every_future() {
    let dropped = Arc::new(AtomicUsize::new(0));
    let rt = rt();
    let mut handles = Vec::new();
    // Never polled: nobody enters block_on for them.
    for _ in 0..10 {
        let d = CountDrop(Arc::clone(&dropped));
        handles.push(rt.spawn(async move {
            let _d = d;
            std::future::pending::<()>().await;
        }));
    }
    // Polled once, then waiting.
    rt.block_on(async {
        for i in 0..10 {
            let d = CountDrop(Arc::clone(&dropped));
            handles.push(volt::spawn(async move {
                let _d = d;
                if i % 2 == 0 {
                    volt::time::sleep(Duration::from_secs(3600)).await;
                } else {
                    std::future::pending::<()>().await;
                }
            }));
        }
        // Let them all get their first poll.
        for _ in 0..5 {
            volt::task::yield_now().await;
        }
    });
    assert_eq!(dropped.load(SeqCst), 0);
    drop(rt);
    assert_eq!(dropped.load(SeqCst), 20);
    for h in handles {
        let err = h.join().unwrap_err();
        assert!(err.is_cancelled());
    }
}

/// `shutdown_timeout` and `shutdown_background` drop pending tasks too.
#[test]
fn shutdown_background_and_timeout() {
    for background in [false, true] {
        let dropped = Arc::new(AtomicUsize::new(0));
        let rt = rt();
        let d = CountDrop(Arc::clone(&dropped));
        rt.block_on(async move {
            volt::spawn(async move {
                let _d = d;
                volt::time::sleep(Duration::from_secs(3600)).await;
            });
            volt::task::yield_now().await;
        });
        if background {
            rt.shutdown_background();
        } else {
            rt.shutdown_timeout(Duration::from_secs(10));
        }
        assert_eq!(dropped.load(SeqCst), 1);
    }
}

/// Two threads in `block_on` at once: both futures finish, the tasks run on one of the
/// two threads, and the second takes the worker over when the first leaves.
#[test]
fn two_threads_in_block_on() {
    let rt = Arc::new(rt());
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let ids: Arc<Mutex<Vec<ThreadId>>> = Arc::default();
    let t = {
        let rt = Arc::clone(&rt);
        let ids = Arc::clone(&ids);
        std::thread::spawn(move || {
            rt.block_on(async move {
                let _ = rx;
                for _ in 0..20 {
                    let ids = Arc::clone(&ids);
                    volt::spawn(async move { ids.lock().unwrap().push(std::thread::current().id()) }).await.unwrap();
                    volt::time::sleep(Duration::from_millis(2)).await;
                }
                std::thread::current().id()
            })
        })
    };
    let main_id = rt.block_on(async {
        for _ in 0..20 {
            volt::time::sleep(Duration::from_millis(2)).await;
        }
        std::thread::current().id()
    });
    let other_id = t.join().unwrap();
    drop(tx);
    let ids = ids.lock().unwrap();
    assert_eq!(ids.len(), 20);
    assert!(ids.iter().all(|&id| id == main_id || id == other_id));
}

/// `Handle::block_on` from a plain thread drives the runtime too.
#[test]
fn handle_block_on_drives_timers() {
    let rt = rt();
    let handle = rt.handle().clone();
    let out = std::thread::spawn(move || {
        handle.block_on(async {
            let h = volt::spawn(async {
                volt::time::sleep(Duration::from_millis(5)).await;
                std::thread::current().id()
            });
            (h.await.unwrap(), std::thread::current().id())
        })
    })
    .join()
    .unwrap();
    assert_eq!(out.0, out.1);
}

/// `Handle::current`, `try_current` and `enter`.
#[test]
fn handle_current_and_enter() {
    let err = Handle::try_current().unwrap_err();
    assert!(err.is_missing_context());
    assert!(!err.to_string().is_empty());
    let rt = rt();
    {
        let _g = rt.enter();
        let h = Handle::current();
        assert_eq!(h.runtime_flavor(), RuntimeFlavor::CurrentThread);
        // Spawned in the entered context, run inside block_on.
        let j = volt::spawn(async { 5 });
        drop(_g);
        assert!(Handle::try_current().is_err());
        assert_eq!(rt.block_on(j).unwrap(), 5);
    }
    rt.block_on(async {
        assert!(Handle::try_current().is_ok());
    });
}

/// A task waiting on a timer names its wait, and the `block_on` thread's worker shows in
/// telemetry.
#[test]
fn telemetry_names_waits() {
    let rt = Builder::new_current_thread().event_ring(1024).build().unwrap();
    rt.block_on(async {
        let h = volt::spawn(async { volt::time::sleep(Duration::from_secs(3600)).await });
        volt::task::yield_now().await;
        volt::task::yield_now().await;
        let tasks = volt::runtime::Handle::current().telemetry().tasks();
        let t = tasks.iter().find(|t| t.id == h.id().as_u64()).expect("the task is listed");
        assert!(matches!(t.waiting_on, Some(volt::telemetry::WaitReason::Sleep { .. })), "{:?}", t.waiting_on);
        h.abort();
    });
    let snap = rt.handle().telemetry().snapshot();
    assert_eq!(snap.workers.len(), 1);
    assert!(snap.workers[0].tasks_polled >= 1);
}

/// `block_on` inside a task panics rather than deadlock.
#[test]
fn block_on_inside_a_task_panics() {
    let rt = Arc::new(rt());
    let rt2 = Arc::clone(&rt);
    let r = rt.block_on(async move { volt::spawn(async move { rt2.block_on(async { 1 }) }).await });
    assert!(r.unwrap_err().is_panic());
}

/// A blocking join inside a current-thread task: fine on a `spawn_blocking` target or one
/// that finishes inline; a clear panic (not a hang) on a task that waits on a timer.
#[test]
fn blocking_join_inside_a_task() {
    let rt = rt();
    rt.block_on(async {
        let ok = volt::spawn(async {
            let b = volt::task::spawn_blocking(|| {
                std::thread::sleep(Duration::from_millis(5));
                1
            });
            let inline = volt::spawn(async { 2 });
            b.join().unwrap() + inline.join().unwrap()
        });
        assert_eq!(ok.await.unwrap(), 3);
        let stuck = volt::spawn(async {
            let t = volt::spawn(async { volt::time::sleep(Duration::from_millis(20)).await });
            t.join().unwrap();
        });
        let err = stuck.await.unwrap_err();
        assert!(err.is_panic());
        let msg = err.into_panic();
        let msg = msg
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| msg.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        assert!(msg.contains("current-thread runtime"), "{msg}");
    });
}

/// A `block_on` whose future panics gives the worker back: the next `block_on` runs the
/// tasks left behind.
#[test]
fn a_panicking_block_on_releases_the_worker() {
    let rt = rt();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        rt.block_on(async {
            volt::spawn(async { 1 });
            panic!("main future panics");
        })
    }));
    assert!(r.is_err());
    let h = rt.spawn(async {
        volt::time::sleep(Duration::from_millis(1)).await;
        2
    });
    assert_eq!(rt.block_on(h).unwrap(), 2);
}

/// Dropping the runtime from inside its own `block_on` (moved into the future): every
/// task is still cancelled and the future goes on to finish.
#[test]
fn dropped_inside_its_own_block_on() {
    let dropped = Arc::new(AtomicUsize::new(0));
    let rt = rt();
    let handle = rt.handle().clone();
    let d = CountDrop(Arc::clone(&dropped));
    let pending = rt.spawn(async move {
        let _d = d;
        std::future::pending::<()>().await;
    });
    let out = handle.block_on(async move {
        volt::task::yield_now().await;
        drop(rt);
        5
    });
    assert_eq!(out, 5);
    let start = std::time::Instant::now();
    while dropped.load(SeqCst) == 0 && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(dropped.load(SeqCst), 1);
    assert!(pending.join().unwrap_err().is_cancelled());
}

/// Tokio's builder knobs: accepted, and `thread_name_fn` names the worker threads.
#[test]
fn builder_knobs() {
    let n = Arc::new(AtomicUsize::new(0));
    let n2 = Arc::clone(&n);
    let rt = Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name_fn(move || format!("app-worker-{}", n2.fetch_add(1, SeqCst)))
        .global_queue_interval(31)
        .event_interval(61)
        .max_io_events_per_tick(1024)
        .enable_io()
        .enable_time()
        .build()
        .unwrap();
    assert_eq!(n.load(SeqCst), 2);
    let name = rt.block_on(async { volt::spawn(async { std::thread::current().name().map(String::from) }).await });
    let name = name.unwrap().unwrap();
    assert!(name.starts_with("app-worker-"), "{name}");
    let bad = Builder::new_multi_thread().worker_threads(1).thread_name_fn(|| "a\0b".into()).build();
    assert_eq!(bad.unwrap_err().kind(), std::io::ErrorKind::InvalidInput);
}

/// Outside `block_on` the worker shows as parked; inside, as running.
#[test]
fn worker_state_between_calls() {
    use volt::telemetry::WorkerState;
    let rt = rt();
    let state = |rt: &volt::Runtime| rt.handle().telemetry().snapshot().workers[0].state;
    assert_eq!(state(&rt), WorkerState::Parked);
    let inside = rt.block_on(async { Handle::current().telemetry().snapshot().workers[0].state });
    assert_ne!(inside, WorkerState::Parked);
    assert_eq!(state(&rt), WorkerState::Parked);
    // A spawn from outside claims the parked worker; the next block_on still runs it, and
    // several rounds keep the idle counts straight.
    for i in 0..20 {
        let h = rt.spawn(async move { i * 2 });
        assert_eq!(rt.block_on(h).unwrap(), i * 2);
        assert_eq!(state(&rt), WorkerState::Parked);
    }
    let snap = rt.handle().telemetry().snapshot();
    assert_eq!(snap.num_searching, 0, "{snap:?}");
}

/// Context switches so far of this process's thread named `name` (Linux).
#[cfg(target_os = "linux")]
fn thread_switches(name: &str) -> Option<u64> {
    // Other tests' threads come and go meanwhile: an entry that fails to read is skipped.
    for entry in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        let dir = entry.path();
        let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        if comm.trim() == name {
            let Ok(status) = std::fs::read_to_string(dir.join("status")) else { continue };
            let n = |key: &str| -> u64 {
                status.lines().find_map(|l| l.strip_prefix(key)).and_then(|v| v.trim().parse().ok()).unwrap_or(0)
            };
            return Some(n("voluntary_ctxt_switches:") + n("nonvoluntary_ctxt_switches:"));
        }
    }
    None
}

/// A current-thread runtime that nobody is inside makes no wakeups: its stall monitor
/// sleeps (the worker counts as parked), where it would sample every few milliseconds.
#[cfg(target_os = "linux")]
#[test]
fn an_idle_current_thread_runtime_does_not_wake() {
    let rt = Builder::new_current_thread().thread_name("ctidle").build().unwrap();
    rt.block_on(async { volt::time::sleep(Duration::from_millis(5)).await });
    // The monitor's name is cut to 15 bytes by the kernel.
    let name = "ctidle-stall-mo";
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    // The monitor's thread names itself once it runs, which on a loaded machine may be
    // after `build` returns: until then `/proc` shows the name it inherited.
    while thread_switches(name).is_none() {
        assert!(std::time::Instant::now() < deadline, "no thread named {name}: the stall monitor never started");
        std::thread::sleep(Duration::from_millis(10));
    }
    // Let it settle into its sleep, then count its wakeups over half a second.
    loop {
        let before = thread_switches(name).expect("the stall monitor's thread");
        std::thread::sleep(Duration::from_millis(500));
        let after = thread_switches(name).expect("the stall monitor's thread");
        // Sampling every half threshold would be about 100 in 500 ms.
        if after - before <= 3 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the stall monitor keeps waking: {} in 500 ms", after - before);
    }
}

/// Tokio's `RuntimeMetrics` names, on Volt's counters.
#[test]
fn runtime_metrics() {
    let rt = rt();
    let m = rt.metrics();
    assert_eq!(m.num_workers(), 1);
    let pending = rt.spawn(std::future::pending::<()>());
    assert_eq!(m.num_alive_tasks(), 1);
    assert_eq!(m.global_queue_depth(), 1);
    rt.block_on(async {
        for _ in 0..10 {
            volt::spawn(async {}).await.unwrap();
        }
    });
    assert_eq!(m.global_queue_depth(), 0);
    assert_eq!(m.num_alive_tasks(), 1);
    assert!(m.worker_poll_count(0) >= 11);
    assert!(m.spawned_tasks_count() >= 11);
    pending.abort();
    rt.block_on(async { volt::task::yield_now().await });
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| m.worker_park_count(1)));
    assert!(r.is_err(), "worker 1 does not exist");
    // The `block_on` thread sleeps and wakes for a timer: two more, and even once it
    // is back.
    let before = m.worker_park_unpark_count(0);
    rt.block_on(async { volt::time::sleep(Duration::from_millis(5)).await });
    let after = m.worker_park_unpark_count(0);
    assert!(after >= before + 2 && after % 2 == 0, "{before} then {after}");
    drop(rt);
    assert_eq!(m.worker_park_unpark_count(0) % 2, 0);
}

/// A task spawned from another thread while the `block_on` thread sleeps (nothing else to
/// run) wakes it, and its wake of the `block_on` future is seen.
#[test]
fn spawn_from_another_thread_wakes_an_idle_block_on() {
    use std::task::{Poll, Waker};
    let rt = rt();
    let handle = rt.handle().clone();
    let slot: Arc<Mutex<(Option<u32>, Option<Waker>)>> = Arc::default();
    let s2 = Arc::clone(&slot);
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        handle.spawn(async move {
            let mut g = s2.lock().unwrap();
            g.0 = Some(9);
            if let Some(w) = g.1.take() {
                w.wake();
            }
        });
    });
    let v = rt.block_on(std::future::poll_fn(|cx| {
        let mut g = slot.lock().unwrap();
        match g.0 {
            Some(v) => Poll::Ready(v),
            None => {
                g.1 = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }));
    assert_eq!(v, 9);
    t.join().unwrap();
}

/// A task that is always ready (it yields in a loop) does not keep the `block_on` future,
/// timers or the reactor from running.
#[test]
fn an_always_ready_task_does_not_starve_the_rest() {
    use std::sync::atomic::AtomicBool;
    let rt = rt();
    let stop = Arc::new(AtomicBool::new(false));
    let spins = Arc::new(AtomicUsize::new(0));
    rt.block_on(async {
        let (stop2, spins2) = (Arc::clone(&stop), Arc::clone(&spins));
        let spinner = volt::spawn(async move {
            while !stop2.load(SeqCst) {
                spins2.fetch_add(1, SeqCst);
                volt::task::yield_now().await;
            }
        });
        // A timer, then a socket round trip, while the spinner runs.
        volt::time::sleep(Duration::from_millis(20)).await;
        let listener = volt::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = volt::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            s.write_all(b"hi").await.unwrap();
        });
        let mut c = volt::net::TcpStream::connect(addr).await.unwrap();
        let mut buf = [0u8; 2];
        c.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"hi");
        server.await.unwrap();
        stop.store(true, SeqCst);
        spinner.await.unwrap();
    });
    assert!(spins.load(SeqCst) > 0);
}

/// A current-thread runtime kept in a thread-local is dropped as the thread exits.
#[test]
fn runtime_in_a_thread_local() {
    use std::cell::RefCell;
    thread_local! {
        static RT: RefCell<Option<volt::Runtime>> = const { RefCell::new(None) };
    }
    let dropped = Arc::new(AtomicUsize::new(0));
    let d2 = Arc::clone(&dropped);
    std::thread::spawn(move || {
        let rt = rt();
        rt.block_on(async {
            volt::time::sleep(Duration::from_millis(1)).await;
        });
        let d = CountDrop(d2);
        rt.spawn(async move {
            let _d = d;
            std::future::pending::<()>().await
        });
        RT.with(|c| *c.borrow_mut() = Some(rt));
    })
    .join()
    .unwrap();
    assert_eq!(dropped.load(SeqCst), 1);
}

/// `Handle::block_on` inside `spawn_blocking`, while the `block_on` thread runs the worker
/// (Tokio's pattern for calling async code from a blocking closure): its tasks and its
/// timers still run.
#[test]
fn handle_block_on_inside_spawn_blocking() {
    let rt = rt();
    let me = std::thread::current().id();
    let (v, task_thread) = rt.block_on(async {
        let h = Handle::current();
        volt::task::spawn_blocking(move || {
            h.block_on(async {
                volt::time::sleep(Duration::from_millis(5)).await;
                volt::spawn(async { (4, std::thread::current().id()) }).await.unwrap()
            })
        })
        .await
        .unwrap()
    });
    assert_eq!(v, 4);
    // The worker stayed with the outer `block_on` thread, which ran the task.
    assert_eq!(task_thread, me);
}

/// `block_in_place` on a current-thread runtime panics, as Tokio's does: there is no
/// other thread to run the runtime's tasks while the closure blocks. The panic ends only
/// the task that called it.
#[test]
fn block_in_place_panics_on_a_current_thread_runtime() {
    let rt = rt();
    let out = rt.block_on(async {
        let failed = volt::spawn(async { volt::task::block_in_place(|| 1) }).await;
        let fine = volt::spawn(async { 2 }).await;
        (failed, fine)
    });
    let err = out.0.expect_err("block_in_place panicked");
    assert!(err.is_panic());
    let msg = err.into_panic();
    let msg = msg.downcast_ref::<&str>().copied().or(msg.downcast_ref::<String>().map(|s| s.as_str()));
    assert_eq!(msg, Some("can call blocking only when running on the multi-threaded runtime"));
    assert_eq!(out.1.unwrap(), 2, "the runtime goes on");
}

/// Tasks run in the order they were spawned, and woken tasks in the order they were
/// woken, as on Tokio's current-thread runtime (which has no LIFO slot): `#[volt::test]`
/// runs on this flavor, and tests written for Tokio expect that order.
#[test]
#[cfg(feature = "sync")]
fn tasks_run_in_the_order_they_were_spawned_or_woken() {
    let rt = volt::runtime::Builder::new_current_thread().build().unwrap();
    let order = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let got = rt.block_on(async {
        let spawned: Vec<_> = (0..5)
            .map(|i| {
                let order = order.clone();
                volt::spawn(async move { order.lock().unwrap().push(i) })
            })
            .collect();
        for h in spawned {
            h.await.unwrap();
        }
        let first = std::mem::take(&mut *order.lock().unwrap());
        // Five tasks waiting on a notify each, woken in reverse order of their spawn.
        let notifies: Vec<_> = (0..5).map(|_| std::sync::Arc::new(volt::sync::Notify::new())).collect();
        let waiting: Vec<_> = (0..5)
            .map(|i| {
                let (order, n) = (order.clone(), notifies[i].clone());
                volt::spawn(async move {
                    n.notified().await;
                    order.lock().unwrap().push(i)
                })
            })
            .collect();
        volt::task::yield_now().await;
        for n in notifies.iter().rev() {
            n.notify_one();
        }
        for h in waiting {
            h.await.unwrap();
        }
        (first, std::mem::take(&mut *order.lock().unwrap()))
    });
    assert_eq!(got.0, [0, 1, 2, 3, 4], "spawn order");
    assert_eq!(got.1, [4, 3, 2, 1, 0], "wake order");
}

/// A `block_on` future that only yields, waiting for a flag a task sets once its socket
/// is readable, still lets the reactor's events in (Tokio's `try_read_buf` test waits so):
/// its own polls count toward the worker's reactor polls. Before, with no task ready to
/// run, the reactor was never polled and the loop spun for good.
#[test]
fn a_block_on_future_that_only_yields_lets_io_events_in() {
    let rt = rt();
    rt.block_on(async {
        let listener = volt::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut client = volt::net::TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
        let (server, _) = listener.accept().await.unwrap();
        // An accepted stream starts out assumed readable: find out it is not.
        assert!(server.try_read(&mut [0u8; 1]).is_err());
        let seen = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let reader = {
            let seen = seen.clone();
            volt::spawn(async move {
                server.readable().await.unwrap();
                seen.store(true, SeqCst);
            })
        };
        // Let the reader wait first, then write.
        volt::task::yield_now().await;
        client.write_all(b"x").await.unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !seen.load(SeqCst) {
            assert!(std::time::Instant::now() < deadline, "the reader was never woken");
            volt::task::yield_now().await;
        }
        reader.await.unwrap();
    });
}
