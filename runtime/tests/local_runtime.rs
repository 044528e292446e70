#![cfg(all(feature = "macros", feature = "io-util", feature = "net", feature = "time"))]
//! `LocalRuntime` (`Builder::build_local`, `#[volt::test(flavor = "local")]`): `!Send`
//! tasks with no `LocalSet` of the program's own, as Tokio's. Each test checks a count:
//! every local task ran (wherever it was spawned from), every future was dropped on the
//! runtime's thread, and `spawn_local` refuses where Tokio's refuses, with its words.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;
use volt::runtime::{Builder, LocalOptions, LocalRuntime};
use volt::task;

fn local_rt() -> LocalRuntime {
    Builder::new_current_thread().enable_all().build_local(LocalOptions::default()).unwrap()
}

/// The panic message of `f`, which must panic.
fn panic_of(f: impl FnOnce() + std::panic::UnwindSafe) -> String {
    let e = std::panic::catch_unwind(f).expect_err("it should have panicked");
    e.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| e.downcast_ref::<String>().cloned()).unwrap_or_default()
}

#[test]
fn spawn_local_runs_wherever_the_local_runtime_is_current() {
    let rt = local_rt();
    let ran = Rc::new(RefCell::new(Vec::new()));
    // On the runtime object, before it is driven: runs at the next `block_on`.
    let r = Rc::clone(&ran);
    let early = rt.spawn_local(async move { r.borrow_mut().push("on the runtime") });
    // Under `enter`, outside `block_on`.
    let guard = rt.enter();
    let r = Rc::clone(&ran);
    let entered = task::spawn_local(async move { r.borrow_mut().push("under enter") });
    drop(guard);
    assert!(ran.borrow().is_empty(), "nothing runs before the runtime is driven");
    let r = Rc::clone(&ran);
    let from_send_task = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&from_send_task);
    let out = rt.block_on(async move {
        // Inside `block_on`'s future, an `Rc` held across awaits.
        let r2 = Rc::clone(&r);
        let inside = task::spawn_local(async move {
            task::yield_now().await;
            volt::time::sleep(Duration::from_millis(1)).await;
            r2.borrow_mut().push("inside block_on");
            7
        });
        // From a `Send` task of the same runtime: it runs on this thread too.
        volt::spawn(async move {
            let h = task::spawn_local(async {
                let here = Rc::new(Cell::new(1));
                task::yield_now().await;
                here.get()
            });
            seen.fetch_add(h.await.unwrap(), SeqCst);
        })
        .await
        .unwrap();
        early.await.unwrap();
        entered.await.unwrap();
        inside.await.unwrap()
    });
    assert_eq!(out, 7);
    assert_eq!(from_send_task.load(SeqCst), 1, "the local task spawned by a Send task ran");
    let mut ran = ran.borrow().clone();
    ran.sort();
    assert_eq!(ran, ["inside block_on", "on the runtime", "under enter"]);
}

#[test]
fn local_tasks_do_io_and_timers_and_join_sets_take_them() {
    let rt = local_rt();
    let total = rt.block_on(async {
        let listener = volt::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        // An `Rc` in the server task: a future that could not be `spawn`ed.
        let served = Rc::new(Cell::new(0usize));
        let s = Rc::clone(&served);
        let server = task::spawn_local(async move {
            use volt::io::{AsyncReadExt, AsyncWriteExt};
            for _ in 0..3 {
                let (mut c, _) = listener.accept().await.unwrap();
                let mut b = [0u8; 4];
                c.read_exact(&mut b).await.unwrap();
                c.write_all(&b).await.unwrap();
                s.set(s.get() + 1);
            }
        });
        let mut set = task::JoinSet::new();
        for i in 0..3u32 {
            set.spawn_local(async move {
                use volt::io::{AsyncReadExt, AsyncWriteExt};
                volt::time::sleep(Duration::from_millis(u64::from(i))).await;
                let mut c = volt::net::TcpStream::connect(addr).await.unwrap();
                c.write_all(&i.to_le_bytes()).await.unwrap();
                let mut b = [0u8; 4];
                c.read_exact(&mut b).await.unwrap();
                u32::from_le_bytes(b)
            });
        }
        let mut total = 0;
        while let Some(r) = set.join_next().await {
            total += r.unwrap();
        }
        server.await.unwrap();
        assert_eq!(served.get(), 3);
        total
    });
    assert_eq!(total, 3, "each client got its own number back");
}

/// Counts its drops, and the thread it was dropped on.
struct DropCount {
    drops: Arc<AtomicUsize>,
    elsewhere: Arc<AtomicUsize>,
    home: std::thread::ThreadId,
    _not_send: Rc<()>,
}

impl Drop for DropCount {
    fn drop(&mut self) {
        self.drops.fetch_add(1, SeqCst);
        if std::thread::current().id() != self.home {
            self.elsewhere.fetch_add(1, SeqCst);
        }
        // A future's `Drop` may spawn: refused quietly (cancelled), never a panic.
        drop(task::spawn_local(async {}));
        drop(volt::spawn(async {}));
    }
}

fn dropping_the_runtime_drops_every_future_here(shut_down: impl FnOnce(LocalRuntime)) {
    let drops = Arc::new(AtomicUsize::new(0));
    let elsewhere = Arc::new(AtomicUsize::new(0));
    let counter = || DropCount {
        drops: Arc::clone(&drops),
        elsewhere: Arc::clone(&elsewhere),
        home: std::thread::current().id(),
        _not_send: Rc::new(()),
    };
    let rt = local_rt();
    // Never driven: spawned after the last `block_on`.
    let late: Vec<_> = (0..5)
        .map(|_| {
            let c = counter();
            rt.spawn_local(async move {
                let _c = c;
                std::future::pending::<()>().await
            })
        })
        .collect();
    let parked = rt.block_on(async {
        // Started, then waiting for good.
        let parked: Vec<_> = (0..5)
            .map(|_| {
                let c = counter();
                task::spawn_local(async move {
                    let _c = c;
                    volt::time::sleep(Duration::from_secs(3600)).await
                })
            })
            .collect();
        for _ in 0..3 {
            task::yield_now().await;
        }
        parked
    });
    assert_eq!(drops.load(SeqCst), 0, "nothing dropped while the runtime lives");
    shut_down(rt);
    assert_eq!(drops.load(SeqCst), 10, "every local future dropped");
    assert_eq!(elsewhere.load(SeqCst), 0, "each on the runtime's thread");
    for h in late.into_iter().chain(parked) {
        assert!(h.is_finished());
    }
}

#[test]
fn dropping_a_local_runtime_drops_every_local_future_on_its_thread() {
    dropping_the_runtime_drops_every_future_here(drop);
}

#[test]
fn shutting_a_local_runtime_down_drops_every_local_future_on_its_thread() {
    dropping_the_runtime_drops_every_future_here(|rt| rt.shutdown_timeout(Duration::from_secs(5)));
    dropping_the_runtime_drops_every_future_here(LocalRuntime::shutdown_background);
}

#[test]
fn spawn_local_refuses_where_tokio_refuses_in_its_words() {
    const OUTSIDE: &str = "`spawn_local` called from outside of a `task::LocalSet` or `runtime::LocalRuntime`";
    // No runtime at all.
    assert_eq!(panic_of(|| drop(task::spawn_local(async {}))), OUTSIDE);
    // A current-thread runtime that is not local, and a multi-thread one.
    let plain = Builder::new_current_thread().build().unwrap();
    assert_eq!(panic_of(|| plain.block_on(async { drop(task::spawn_local(async {})) })), OUTSIDE);
    let multi = Builder::new_multi_thread().worker_threads(1).build().unwrap();
    assert_eq!(panic_of(|| multi.block_on(async { drop(task::spawn_local(async {})) })), OUTSIDE);
    // A local runtime's handle, entered on another thread.
    let rt = local_rt();
    let handle = rt.handle().clone();
    let msg = std::thread::spawn(move || {
        let _in = handle.enter();
        // `spawn` still works there.
        drop(volt::spawn(async {}));
        panic_of(|| drop(task::spawn_local(async {})))
    })
    .join()
    .unwrap();
    assert_eq!(msg, "Local tasks can only be spawned on a LocalRuntime from the thread the runtime was created on");
    // A multi-thread builder cannot build one.
    let msg = panic_of(|| drop(Builder::new_multi_thread().build_local(LocalOptions::default())));
    assert_eq!(msg, "multi_thread is not supported for LocalRuntime");
    // The local runtime itself is not disturbed by any of it.
    assert_eq!(rt.block_on(async { task::spawn_local(async { 5 }).await.unwrap() }), 5);
}

#[test]
fn a_local_runtime_dropped_on_another_thread_leaves_its_handle_usable() {
    // As Tokio's `test_spawn_from_guard_other_thread`: the handle outlives the runtime.
    let handle = std::thread::spawn(|| local_rt().handle().clone()).join().unwrap();
    let _in = handle.enter();
    let h = volt::spawn(async { 1 });
    // The runtime shut down with its thread: the task is cancelled, not run, not leaked.
    assert!(h.is_finished());
}

#[volt::test(flavor = "local")]
async fn the_local_flavor_runs_spawn_local_without_a_set() {
    let shared = Rc::new(RefCell::new(0));
    let mut handles = Vec::new();
    for i in 1..=10 {
        let s = Rc::clone(&shared);
        handles.push(task::spawn_local(async move {
            task::yield_now().await;
            *s.borrow_mut() += i;
        }));
    }
    for h in handles {
        h.await.unwrap();
    }
    assert_eq!(*shared.borrow(), 55);
    assert_eq!(volt::runtime::Handle::current().runtime_flavor(), volt::runtime::RuntimeFlavor::CurrentThread);
}

#[cfg(feature = "test-util")]
#[volt::test(flavor = "local", start_paused = true)]
async fn the_local_flavor_takes_start_paused() {
    let start = volt::time::Instant::now();
    let t = task::spawn_local(async { volt::time::sleep(Duration::from_secs(60)).await });
    t.await.unwrap();
    assert_eq!(start.elapsed(), Duration::from_secs(60), "the paused clock jumped exactly");
}
