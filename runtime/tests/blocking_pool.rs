//! The blocking pool on a real runtime: results and panics, its thread cap and keep-alive,
//! shutdown with blocking work running, host-name lookups on it, and thread hooks.

mod common;

use common::*;
use futures::{AsyncReadExt, AsyncWriteExt};
use std::io::ErrorKind;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};
use volt::net::{TcpListener, TcpStream, UdpSocket};

#[test]
fn spawn_blocking_returns_values_and_panics_as_join_errors() {
    let rt = rt(2);
    rt.block_on(async {
        assert_eq!(volt::task::spawn_blocking(|| 6 * 7).await.unwrap(), 42);
        let e = volt::task::spawn_blocking(|| -> u32 { panic!("blocking boom") }).await.unwrap_err();
        assert!(e.is_panic());
        assert!(e.to_string().contains("blocking boom"));
        // volt::spawn works on a blocking thread (it is inside the runtime).
        let inner = volt::task::spawn_blocking(|| volt::spawn(async { 5 }).join().unwrap()).await.unwrap();
        assert_eq!(inner, 5);
    });
}

#[test]
fn blocking_calls_do_not_delay_async_tasks() {
    // 64 blocking calls that cannot return until the async side has finished its timers:
    // if a blocking call held a worker, the sleeps below could not complete and the
    // calls would give up on the gate (after a bound far past any real delay).
    let rt = volt::runtime::Builder::new().worker_threads(2).max_blocking_threads(64).build().unwrap();
    let gate = Arc::new((std::sync::Mutex::new(false), std::sync::Condvar::new()));
    let opened = rt.block_on(async {
        let blockers: Vec<_> = (0..64)
            .map(|_| {
                let gate = Arc::clone(&gate);
                volt::task::spawn_blocking(move || {
                    let (open, cv) = &*gate;
                    let g = open.lock().unwrap();
                    let (g, _) = cv.wait_timeout_while(g, Duration::from_secs(60), |open| !*open).unwrap();
                    *g
                })
            })
            .collect();
        // Meanwhile, async tasks keep running: 20 timers fire one after another.
        for _ in 0..20 {
            volt::time::sleep(Duration::from_millis(5)).await;
        }
        let s = volt::runtime::Handle::current().telemetry().snapshot();
        assert!(s.blocking_threads >= 32, "the pool grew for the blocking calls: {}", s.blocking_threads);
        let (open, cv) = &*gate;
        *open.lock().unwrap() = true;
        cv.notify_all();
        let mut opened = 0;
        for b in blockers {
            opened += b.await.unwrap() as usize;
        }
        opened
    });
    assert_eq!(opened, 64, "every blocking call saw the gate opened by the async side, none gave up");
}

#[test]
fn blocking_pool_caps_threads_and_queues_the_rest() {
    let rt = volt::runtime::Builder::new().worker_threads(1).max_blocking_threads(2).build().unwrap();
    let running = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    rt.block_on(async {
        let hs: Vec<_> = (0..8)
            .map(|_| {
                let (r, p) = (running.clone(), peak.clone());
                volt::task::spawn_blocking(move || {
                    let now = r.fetch_add(1, SeqCst) + 1;
                    p.fetch_max(now, SeqCst);
                    std::thread::sleep(Duration::from_millis(20));
                    r.fetch_sub(1, SeqCst);
                })
            })
            .collect();
        for h in hs {
            h.await.unwrap();
        }
    });
    assert_eq!(peak.load(SeqCst), 2, "at most max_blocking_threads at once");
    assert!(rt.handle().telemetry().snapshot().blocking_threads <= 2);
}

#[test]
fn shutdown_with_blocked_io_pending_timers_and_running_blocking_tasks() {
    let drops = DropCount::default();
    let rt = volt::runtime::Builder::new().worker_threads(2).thread_name("shutio").build().unwrap();
    let started = Arc::new(AtomicUsize::new(0));
    let listener_addr = rt.block_on(async {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let g = drops.guard();
        // Blocked in accept forever.
        volt::spawn(async move {
            let _g = g;
            let _ = l.accept().await;
        });
        // Blocked reading a connection that never sends.
        let c = TcpStream::connect(addr).await.unwrap();
        let g = drops.guard();
        volt::spawn(async move {
            let _g = g;
            let mut c = c;
            let mut b = [0u8; 1];
            let _ = c.read(&mut b).await;
        });
        // Pending timers.
        for _ in 0..10 {
            let g = drops.guard();
            volt::spawn(async move {
                let _g = g;
                volt::time::sleep(Duration::from_secs(3600)).await;
            });
        }
        // Running blocking calls.
        for _ in 0..4 {
            let s = started.clone();
            drop(volt::task::spawn_blocking(move || {
                s.fetch_add(1, SeqCst);
                std::thread::sleep(Duration::from_millis(200));
            }));
        }
        addr
    });
    assert!(wait_until(Duration::from_secs(30), || started.load(SeqCst) == 4));
    // Two workers and four pool threads (which idle for 10 s after their call).
    assert!(wait_until(Duration::from_secs(30), || threads_named("shutio") >= 6));
    let t = Instant::now();
    drop(rt);
    assert_eq!(drops.get(), 12, "every future was dropped");
    // See `dropping_a_runtime_joins_its_threads`: /proc lags `join` by a moment.
    assert!(
        wait_until(Duration::from_secs(30), || threads_named("shutio") == 0),
        "every worker and blocking thread was joined"
    );
    // Not a timing target: a bound on a hang (the blocking calls take 200 ms).
    assert!(t.elapsed() < Duration::from_secs(60));
    let _ = listener_addr;
}

#[test]
fn idle_blocking_threads_exit_after_the_keep_alive() {
    let rt =
        volt::runtime::Builder::new().worker_threads(1).thread_keep_alive(Duration::from_millis(50)).build().unwrap();
    rt.block_on(async {
        let hs: Vec<_> =
            (0..4).map(|_| volt::task::spawn_blocking(|| std::thread::sleep(Duration::from_millis(20)))).collect();
        for h in hs {
            h.await.unwrap();
        }
    });
    assert!(rt.handle().telemetry().snapshot().blocking_threads >= 1);
    assert!(
        wait_until(Duration::from_secs(30), || rt.handle().telemetry().snapshot().blocking_threads == 0),
        "idle blocking threads did not exit"
    );
    // And the pool starts threads again when needed.
    assert_eq!(rt.handle().spawn_blocking(|| 3).join().unwrap(), 3);
    assert_eq!(rt.block_on(async { volt::task::spawn_blocking(|| 4).await }).unwrap(), 4);
}

/// Counts the threads a hook ran on whose name contains `-blocking`: the blocking pool's.
fn count_blocking_thread_starts(b: &mut volt::runtime::Builder) -> Arc<AtomicUsize> {
    let started = Arc::new(AtomicUsize::new(0));
    let s = started.clone();
    b.on_thread_start(move || {
        if std::thread::current().name().is_some_and(|n| n.contains("-blocking")) {
            s.fetch_add(1, SeqCst);
        }
    });
    started
}

#[test]
fn host_names_are_resolved_on_the_blocking_pool_and_numeric_addresses_are_not() {
    // One worker. A lookup on the worker would start no blocking thread; on the pool it
    // must start one, and nothing else in this test uses the pool.
    let mut b = volt::runtime::Builder::new();
    b.worker_threads(1).thread_name("resolve");
    let blocking_starts = count_blocking_thread_starts(&mut b);
    let rt = b.build().unwrap();
    rt.block_on(async {
        // Numeric forms: no lookup, so no pool thread.
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        let accepting = volt::spawn(async move {
            for _ in 0..3 {
                let (mut s, _) = l.accept().await.unwrap();
                s.write_all(b"ok").await.unwrap();
            }
        });
        let _c = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        let _c = TcpStream::connect(std::net::SocketAddr::from(([127, 0, 0, 1], port))).await.unwrap();
        let u = UdpSocket::bind((std::net::Ipv4Addr::LOCALHOST, 0)).await.unwrap();
        u.send_to(b"x", format!("127.0.0.1:{port}")).await.unwrap();
        assert_eq!(blocking_starts.load(SeqCst), 0, "a numeric address went to the blocking pool");
        assert_eq!(rt_blocking_threads(), 0);

        // A host name: resolved on a pool thread, and the connection works.
        let mut c = TcpStream::connect(format!("localhost:{port}")).await.unwrap();
        let mut buf = [0u8; 2];
        c.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"ok");
        assert!(blocking_starts.load(SeqCst) >= 1, "the host name was not resolved on the blocking pool");
        assert!(rt_blocking_threads() >= 1);
        accepting.abort();

        // Other host-name forms and malformed input.
        let l2 = TcpListener::bind(("localhost", 0)).await.unwrap();
        assert!(l2.local_addr().unwrap().ip().is_loopback());
        let u2 = UdpSocket::bind("localhost:0").await.unwrap();
        u2.connect(format!("localhost:{}", u.local_addr().unwrap().port())).await.unwrap();
        let e = TcpStream::connect("localhost").await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidInput);
        let e = TcpStream::connect("localhost:notaport").await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidInput);
    });
    // Outside a runtime a host name is an error, not a panic.
    let e = futures::executor::block_on(TcpStream::connect("localhost:1")).unwrap_err();
    assert!(e.to_string().contains("inside a Volt runtime"), "{e}");
}

/// The current runtime's blocking-pool threads.
fn rt_blocking_threads() -> u64 {
    volt::runtime::Handle::current().telemetry().snapshot().blocking_threads
}

#[test]
fn a_host_name_lookup_does_not_stop_the_worker() {
    // One worker, running a task that binds to a host name and a counting task that
    // starts only once the lookup has begun. The pool thread that runs the lookup first
    // waits until the count is complete, so the bind can only finish if the worker went on
    // running the counter while the lookup was in flight: the binding task then sees the
    // full count. A lookup on the worker would finish the bind within the poll that began
    // it, before the counter could take a single step: it would see 0.
    let mut b = volt::runtime::Builder::new();
    b.worker_threads(1);
    let progress = Arc::new(AtomicUsize::new(0));
    let p = progress.clone();
    b.on_thread_start(move || {
        if std::thread::current().name().is_some_and(|n| n.contains("-blocking")) {
            wait_until(Duration::from_secs(10), || p.load(SeqCst) >= 100);
        }
    });
    let rt = b.build().unwrap();
    let lookup_began = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let seen = rt.block_on(async {
        let counter = {
            let (p, began) = (progress.clone(), lookup_began.clone());
            volt::spawn(async move {
                while !began.load(SeqCst) {
                    volt::task::yield_now().await;
                }
                for _ in 0..100 {
                    p.fetch_add(1, SeqCst);
                    volt::task::yield_now().await;
                }
            })
        };
        let (p, began) = (progress.clone(), lookup_began.clone());
        let lookup = volt::spawn(async move {
            began.store(true, SeqCst);
            let u = UdpSocket::bind("localhost:0").await.unwrap();
            assert!(u.local_addr().unwrap().ip().is_loopback());
            p.load(SeqCst)
        });
        let seen = lookup.await.unwrap();
        counter.await.unwrap();
        seen
    });
    assert_eq!(seen, 100, "the counting task ran to the end while the lookup was in flight");
}

#[test]
fn thread_hooks_run_once_per_worker_and_blocking_thread() {
    let starts = Arc::new(AtomicUsize::new(0));
    let stops = Arc::new(AtomicUsize::new(0));
    let in_runtime = Arc::new(AtomicUsize::new(0));
    let rt = {
        let (s, t, r) = (starts.clone(), stops.clone(), in_runtime.clone());
        volt::runtime::Builder::new()
            .worker_threads(2)
            .on_thread_start(move || {
                s.fetch_add(1, SeqCst);
                if volt::runtime::Handle::try_current().is_ok() {
                    r.fetch_add(1, SeqCst);
                }
            })
            .on_thread_stop(move || {
                t.fetch_add(1, SeqCst);
            })
            .build()
            .unwrap()
    };
    let on_pool = rt.block_on(async {
        let worker_side = volt::spawn(async { 1 }).await.unwrap();
        worker_side + volt::task::spawn_blocking(|| 2).await.unwrap()
    });
    assert_eq!(on_pool, 3);
    // Two workers and one blocking thread started (the workers may still be starting).
    assert!(wait_until(Duration::from_secs(10), || starts.load(SeqCst) >= 3));
    drop(rt);
    let (starts, stops) = (starts.load(SeqCst), stops.load(SeqCst));
    assert!(starts >= 3, "{starts} thread starts");
    assert_eq!(starts, stops, "every thread that started ran the stop hook before the runtime dropped");
    assert_eq!(in_runtime.load(SeqCst), starts, "every start hook ran inside the runtime");
}

#[test]
fn a_panicking_thread_hook_does_not_hang_the_runtime() {
    // Run it all on a helper thread so a hang fails the test instead of stalling it.
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let stops = Arc::new(AtomicUsize::new(0));
        let t = stops.clone();
        let rt = volt::runtime::Builder::new()
            .worker_threads(2)
            .on_thread_start(|| panic!("start hook panics"))
            .on_thread_stop(move || {
                t.fetch_add(1, SeqCst);
                panic!("stop hook panics")
            })
            .build()
            .unwrap();
        let out = rt.block_on(async {
            let a = volt::spawn(async { 20 });
            let b = volt::task::spawn_blocking(|| 22);
            a.await.unwrap() + b.await.unwrap()
        });
        drop(rt);
        done_tx.send((out, stops.load(SeqCst))).unwrap();
    });
    let (out, stops) = done_rx.recv_timeout(Duration::from_secs(60)).expect("the runtime hung");
    assert_eq!(out, 42);
    assert!(stops >= 3, "each thread still ran its stop hook: {stops}");
}

/// Waits up to 30 s for `h`; a blocking closure still running then is spinning, and the
/// runtime is leaked rather than dropped (its drop would wait for that thread for good).
fn finished_or_leak(rt: impl Sized, h: &volt::task::JoinHandle<u32>, what: &str) {
    if !wait_until(Duration::from_secs(30), || h.is_finished()) {
        std::mem::forget(rt);
        panic!("{what}: not done within 30 s");
    }
}

/// A blocking closure may drive Volt futures itself, with `Runtime::block_on` or another
/// executor's: its one long poll has no cooperative budget, which it would spend once
/// and then be answered `Pending` for good (200 elapsed sleeps, 200 UDP sends: more than
/// a task's poll may complete).
#[test]
fn a_blocking_closure_that_drives_futures_itself_is_never_made_to_yield() {
    let rt = Arc::new(rt(1));
    let inner = Arc::clone(&rt);
    let sleeps = rt.handle().spawn_blocking(move || {
        inner.block_on(async {
            let mut n = 0;
            for _ in 0..200 {
                volt::time::sleep(Duration::ZERO).await;
                n += 1;
            }
            n
        })
    });
    let receiver = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let target = receiver.local_addr().unwrap();
    let sends = rt.handle().spawn_blocking(move || {
        let sock = futures::executor::block_on(volt::net::UdpSocket::bind("127.0.0.1:0")).unwrap();
        let mut n = 0;
        for _ in 0..200 {
            futures::executor::block_on(sock.send_to(&[0u8; 8], target)).unwrap();
            n += 1;
        }
        n
    });
    finished_or_leak(Arc::clone(&rt), &sleeps, "Runtime::block_on in a blocking closure");
    finished_or_leak(Arc::clone(&rt), &sends, "futures' block_on in a blocking closure");
    assert_eq!(rt.block_on(sleeps).unwrap(), 200);
    assert_eq!(rt.block_on(sends).unwrap(), 200);
}

/// `shutdown_timeout` gives the workers' threads what is left of its time to finish
/// exiting: it returns after each worker thread's stop hook ran (the first form counted a
/// worker as gone once it left its loop, and returned before the hooks ran).
#[test]
fn shutdown_timeout_returns_after_the_workers_stop_hooks_ran() {
    let stops = Arc::new(AtomicUsize::new(0));
    let t = stops.clone();
    let rt = volt::runtime::Builder::new()
        .worker_threads(2)
        .thread_name("hooked")
        .on_thread_stop(move || {
            if matches!(std::thread::current().name(), Some("hooked-0" | "hooked-1")) {
                std::thread::sleep(Duration::from_millis(100));
                t.fetch_add(1, SeqCst);
            }
        })
        .build()
        .unwrap();
    rt.block_on(async {});
    rt.shutdown_timeout(Duration::from_secs(60));
    assert_eq!(stops.load(SeqCst), 2, "shutdown_timeout returned before the workers' stop hooks ran");
}

/// A blocking-pool thread still exiting (its stop hook blocked) when the time given to
/// `shutdown_timeout` runs out is left to finish on its own: the call returns while the
/// hook is still blocked (the first form joined it with no deadline once it had left the
/// pool's count).
#[test]
fn shutdown_timeout_does_not_wait_past_it_for_a_blocking_thread_to_exit() {
    let (release, released) = std::sync::mpsc::channel::<()>();
    let released = Arc::new(std::sync::Mutex::new(released));
    let hook_done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let rt = {
        let (r, d) = (released.clone(), hook_done.clone());
        volt::runtime::Builder::new()
            .worker_threads(1)
            .stall_threshold(None)
            .on_thread_stop(move || {
                if std::thread::current().name() == Some("volt-worker-blocking") {
                    let _ = r.lock().unwrap().recv_timeout(Duration::from_secs(60));
                    d.store(true, SeqCst);
                }
            })
            .build()
            .unwrap()
    };
    assert_eq!(rt.handle().spawn_blocking(|| 7).join().unwrap(), 7);
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        rt.shutdown_timeout(Duration::from_millis(100));
        let _ = done_tx.send(());
    });
    assert!(
        done_rx.recv_timeout(Duration::from_secs(30)).is_ok(),
        "shutdown_timeout(100 ms) waited for a blocking thread's stop hook"
    );
    // An order, not a time: only this thread can release the hook.
    assert!(!hook_done.load(SeqCst));
    release.send(()).unwrap();
}
