//! Deadlocks among tasks, as `Telemetry::deadlocks` reports them: each cycle of the
//! wait-for graph (locks and joins) once, with its tasks, what each holds and wants; and
//! nothing for waits that end. Every deadlock here is read after it formed, polling with
//! a 10 s bound; nothing asserts how long anything took.
#![cfg(all(feature = "sync", feature = "time"))]

use std::sync::Arc;
use std::time::{Duration, Instant};
use volt::sync::{Barrier, Mutex};
use volt::telemetry::{Deadlock, DeadlockWant, Telemetry};

std::thread_local! {
    /// Set by the `while_watched` copies of the tests below: their runtime keeps task
    /// statistics only while watched, and nothing watches, so the detector works from
    /// what every task keeps (its waits and its poll number).
    static WHILE_WATCHED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

fn runtime() -> volt::Runtime {
    let mut b = volt::runtime::Builder::new();
    b.worker_threads(2).event_ring(1024);
    if WHILE_WATCHED.get() {
        b.task_statistics(volt::runtime::TaskStatistics::WhileWatched);
    }
    b.build().unwrap()
}

/// The tests named, again on a runtime with `TaskStatistics::WhileWatched` and no
/// watcher: a report, its confirmation (no task polled between two readings) and the
/// absence of false reports must not depend on the statistics.
macro_rules! while_watched {
    ($($name:ident),* $(,)?) => {
        mod while_watched {
            $(
                #[test]
                fn $name() {
                    super::WHILE_WATCHED.set(true);
                    super::$name();
                }
            )*

            /// The lock-order deadlock with both cores kept busy by other threads.
            #[test]
            fn a_lock_order_deadlock_is_reported_with_the_cores_saturated() {
                super::WHILE_WATCHED.set(true);
                let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
                let spinners: Vec<_> = (0..2)
                    .map(|_| {
                        let stop = stop.clone();
                        std::thread::spawn(move || {
                            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                                std::hint::spin_loop();
                            }
                        })
                    })
                    .collect();
                // The spinners stop however the test ends.
                struct Stop(std::sync::Arc<std::sync::atomic::AtomicBool>);
                impl Drop for Stop {
                    fn drop(&mut self) {
                        self.0.store(true, std::sync::atomic::Ordering::Relaxed);
                    }
                }
                let guard = Stop(stop);
                super::a_lock_order_deadlock_is_reported_once_with_both_tasks_and_locks();
                drop(guard);
                for s in spinners {
                    s.join().unwrap();
                }
            }
        }
    };
}

while_watched!(
    a_lock_order_deadlock_is_reported_once_with_both_tasks_and_locks,
    a_join_on_a_task_waiting_for_the_joiners_lock_is_reported_once,
    a_long_chain_of_waits_that_ends_is_no_deadlock,
    busy_locks_taken_in_one_order_are_never_reported,
    a_task_that_also_waits_on_a_timer_is_not_deadlocked,
);

/// `Telemetry::deadlocks` until `pred` holds, for at most 10 s.
fn wait_for(t: &Telemetry, what: &str, pred: impl Fn(&[Deadlock]) -> bool) -> Vec<Deadlock> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let d = t.deadlocks();
        if pred(&d) {
            return d;
        }
        assert!(Instant::now() < deadline, "{what}: {d:#?}\ntasks: {:#?}", t.tasks());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Call `Telemetry::deadlocks` for `how_long`, checking each answer.
fn keeps(t: &Telemetry, how_long: Duration, check: impl Fn(&[Deadlock])) {
    let end = Instant::now() + how_long;
    while Instant::now() < end {
        check(&t.deadlocks());
        std::thread::sleep(Duration::from_millis(30));
    }
}

fn spawn_named<F>(rt: &volt::Runtime, name: &str, f: F) -> volt::task::JoinHandle<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    volt::task::Builder::new().name(name).spawn_on(f, rt.handle())
}

/// Two tasks that lock `a` then `b` and `b` then `a`, each holding its first lock when it
/// asks for the second: a deadlock. Returns their handles.
fn lock_order_deadlock(rt: &volt::Runtime, names: [&str; 2]) -> Vec<volt::task::JoinHandle<()>> {
    let (a, b) = (Arc::new(Mutex::new(0u32)), Arc::new(Mutex::new(0u32)));
    let both = Arc::new(Barrier::new(2));
    [(a.clone(), b.clone(), names[0]), (b, a, names[1])]
        .into_iter()
        .map(|(first, second, name)| {
            let both = both.clone();
            spawn_named(rt, name, async move {
                let mut g = first.lock().await;
                // Both hold their first lock before either asks for its second.
                both.wait().await;
                let mut h = second.lock().await;
                *g += 1;
                *h += 1;
            })
        })
        .collect()
}

#[test]
fn a_lock_order_deadlock_is_reported_once_with_both_tasks_and_locks() {
    let rt = runtime();
    let t = rt.handle().telemetry();
    let handles = lock_order_deadlock(&rt, ["first", "second"]);
    let found = wait_for(&t, "the deadlock", |d| !d.is_empty());
    assert_eq!(found.len(), 1, "{found:#?}");
    let d = &found[0];
    assert_eq!(d.tasks.len(), 2, "{d:#?}");
    let mut names: Vec<_> = d.tasks.iter().map(|t| t.name.clone().unwrap()).collect();
    names.sort();
    assert_eq!(names, ["first", "second"]);
    // Each holds one lock and wants the lock the other holds.
    let mut held = Vec::new();
    for (me, other) in [(&d.tasks[0], &d.tasks[1]), (&d.tasks[1], &d.tasks[0])] {
        assert_eq!(me.holds.len(), 1, "{d:#?}");
        assert_eq!(me.holds[0].primitive, "Mutex");
        match me.wants {
            DeadlockWant::Sync { op, primitive, resource, holder } => {
                assert_eq!((op, primitive, holder), ("lock", "Mutex", other.id), "{d:#?}");
                assert_eq!(resource, other.holds[0].resource, "{d:#?}");
            }
            w => panic!("wants {w:?}"),
        }
        held.push(me.holds[0].resource);
    }
    assert_ne!(held[0], held[1]);
    let text = d.to_string();
    assert!(text.contains("wants lock Mutex"), "{text}");
    // It stays one report, counted once.
    keeps(&t, Duration::from_millis(1500), |d| assert_eq!(d, &found[..], "the report changed"));
    assert_eq!(t.snapshot().deadlocks_total, 1);
    for h in handles {
        h.abort();
    }
    wait_for(&t, "the report to go once the tasks are aborted", |d| d.is_empty());
    assert_eq!(t.snapshot().deadlocks_total, 1);
}

#[test]
fn a_join_on_a_task_waiting_for_the_joiners_lock_is_reported_once() {
    let rt = runtime();
    let t = rt.handle().telemetry();
    let child_id = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let child_id2 = child_id.clone();
    let joiner = spawn_named(&rt, "joiner", async move {
        let m = Arc::new(Mutex::new(()));
        let _g = m.lock().await;
        let m2 = m.clone();
        let child = volt::task::Builder::new().name("child").spawn(async move {
            let _g = m2.lock().await;
        });
        child_id2.store(child.id().as_u64(), std::sync::atomic::Ordering::SeqCst);
        let _ = child.await;
    });
    let found = wait_for(&t, "the join deadlock", |d| !d.is_empty());
    assert_eq!(found.len(), 1, "{found:#?}");
    let (jid, cid) = (joiner.id().as_u64(), child_id.load(std::sync::atomic::Ordering::SeqCst));
    let d = &found[0];
    let tids: Vec<u64> = d.tasks.iter().map(|t| t.id).collect();
    let mut want = vec![jid, cid];
    want.sort();
    assert_eq!(tids, want, "{d:#?}");
    let j = d.tasks.iter().find(|t| t.id == jid).unwrap();
    let c = d.tasks.iter().find(|t| t.id == cid).unwrap();
    assert_eq!(j.name.as_deref(), Some("joiner"));
    assert_eq!(c.name.as_deref(), Some("child"));
    assert_eq!(j.wants, DeadlockWant::Join { task_id: cid });
    assert_eq!(j.holds.len(), 1);
    assert!(c.holds.is_empty());
    match c.wants {
        DeadlockWant::Sync { resource, holder, .. } => assert_eq!((resource, holder), (j.holds[0].resource, jid)),
        w => panic!("the child wants {w:?}"),
    }
    keeps(&t, Duration::from_millis(1000), |d| assert_eq!(d, &found[..]));
    assert_eq!(t.snapshot().deadlocks_total, 1);
    joiner.abort();
}

#[test]
fn a_task_locking_a_mutex_it_holds_is_a_deadlock_of_one() {
    let rt = runtime();
    let t = rt.handle().telemetry();
    let _h = spawn_named(&rt, "twice", async {
        let m = Mutex::new(());
        let _g = m.lock().await;
        let _h = m.lock().await;
    });
    let found = wait_for(&t, "the self-deadlock", |d| !d.is_empty());
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].tasks.len(), 1);
    let me = &found[0].tasks[0];
    assert!(matches!(me.wants, DeadlockWant::Sync { holder, .. } if holder == me.id), "{me:?}");
}

#[test]
fn a_long_chain_of_waits_that_ends_is_no_deadlock() {
    let rt = runtime();
    let t = rt.handle().telemetry();
    // B holds the lock and sleeps; A waits for it; C joins A. Every wait ends.
    let m = Arc::new(Mutex::new(0u32));
    let held = Arc::new(Barrier::new(2));
    let (m1, h1) = (m.clone(), held.clone());
    let b = spawn_named(&rt, "b", async move {
        let mut g = m1.lock().await;
        h1.wait().await;
        volt::time::sleep(Duration::from_millis(1500)).await;
        *g += 1;
    });
    let a = spawn_named(&rt, "a", async move {
        held.wait().await;
        *m.lock().await += 1;
    });
    let c = spawn_named(&rt, "c", async move { a.await.unwrap() });
    // Read the graph all the while A waits (a reading every 250 ms at most).
    let start = Instant::now();
    while !c.is_finished() {
        assert!(t.deadlocks().is_empty(), "a wait that ends was reported: {:#?}", t.deadlocks());
        assert!(start.elapsed() < Duration::from_secs(10), "the chain never ended");
        std::thread::sleep(Duration::from_millis(20));
    }
    rt.block_on(async { b.await.unwrap() });
    assert!(t.deadlocks().is_empty());
    assert_eq!(t.snapshot().deadlocks_total, 0);
}

#[test]
fn busy_locks_taken_in_one_order_are_never_reported() {
    let rt = runtime();
    let t = rt.handle().telemetry();
    let (a, b) = (Arc::new(Mutex::new(0u64)), Arc::new(Mutex::new(0u64)));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let workers: Vec<_> = (0..8)
        .map(|i| {
            let (a, b, stop) = (a.clone(), b.clone(), stop.clone());
            spawn_named(&rt, &format!("w{i}"), async move {
                let mut n = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let mut g = a.lock().await;
                    let mut h = b.lock().await;
                    volt::task::yield_now().await;
                    *g += 1;
                    *h += 1;
                    n += 1;
                }
                n
            })
        })
        .collect();
    keeps(&t, Duration::from_millis(2000), |d| assert!(d.is_empty(), "reported: {d:#?}"));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let total: u64 = rt.block_on(async {
        let mut s = 0;
        for w in workers {
            s += w.await.unwrap();
        }
        s
    });
    assert_eq!(*rt.block_on(a.lock()), total, "every lock taken counted");
    assert_eq!(t.snapshot().deadlocks_total, 0);
}

#[test]
fn the_counter_adds_up_over_several_deadlocks() {
    let rt = runtime();
    let t = rt.handle().telemetry();
    let first = lock_order_deadlock(&rt, ["p1", "q1"]);
    wait_for(&t, "the first deadlock", |d| d.len() == 1);
    let _second = lock_order_deadlock(&rt, ["p2", "q2"]);
    let both = wait_for(&t, "both deadlocks", |d| d.len() == 2);
    let mut names: Vec<String> = both.iter().flat_map(|d| d.tasks.iter().map(|t| t.name.clone().unwrap())).collect();
    names.sort();
    assert_eq!(names, ["p1", "p2", "q1", "q2"]);
    assert_eq!(t.snapshot().deadlocks_total, 2);
    for h in first {
        h.abort();
    }
    wait_for(&t, "the first deadlock to go", |d| d.len() == 1);
    keeps(&t, Duration::from_millis(800), |d| assert_eq!(d.len(), 1));
    assert_eq!(t.snapshot().deadlocks_total, 2, "a deadlock counts once, however long it lasts");
}

#[test]
fn without_task_statistics_nothing_is_read() {
    let rt = volt::runtime::Builder::new().worker_threads(2).build().unwrap();
    let t = rt.handle().telemetry();
    let _h = lock_order_deadlock(&rt, ["x", "y"]);
    std::thread::sleep(Duration::from_millis(300));
    assert!(t.deadlocks().is_empty());
    assert_eq!(t.snapshot().deadlocks_total, 0);
}

#[test]
fn the_resources_list_names_a_contended_mutex_and_its_holder() {
    let rt = runtime();
    let t = rt.handle().telemetry();
    let (m, line) = (Arc::new(Mutex::new(())), line!());
    let held = Arc::new(Barrier::new(2));
    let (m1, h1) = (m.clone(), held.clone());
    let holder = spawn_named(&rt, "holder", async move {
        let _g = m1.lock().await;
        h1.wait().await;
        std::future::pending::<()>().await;
    });
    let _waiter = spawn_named(&rt, "waiter", async move {
        held.wait().await;
        let _g = m.lock().await;
    });
    let hid = holder.id().as_u64();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        // The list is the process's (other tests' locks are in it too): this test's
        // mutex is the one created on `line` of this file.
        let mine =
            |r: &volt::telemetry::Resource| r.created_at.is_some_and(|at| at.file() == file!() && at.line() == line);
        let found = t.resources(0).into_iter().find(|r| mine(r) && r.kind == Some("Mutex") && r.waiters == 1);
        if let Some(r) = found {
            assert_eq!(r.holder, Some(volt::telemetry::ResourceHolder::Task(hid)), "{r:?}");
            break;
        }
        assert!(Instant::now() < deadline, "no contended Mutex listed: {:#?}", t.resources(0));
        std::thread::sleep(Duration::from_millis(20));
    }
    holder.abort();
}

#[test]
fn a_task_that_also_waits_on_a_timer_is_not_deadlocked() {
    let rt = runtime();
    let t = rt.handle().telemetry();
    let (a, b) = (Arc::new(Mutex::new(())), Arc::new(Mutex::new(())));
    let both = Arc::new(Barrier::new(2));
    let (a1, b1, both1) = (a.clone(), b.clone(), both.clone());
    // "patient" holds `a` and waits for `b` or a timer, whichever comes first: the timer
    // frees it (and then `a`), so the cycle through `b` is no deadlock.
    let patient = spawn_named(&rt, "patient", async move {
        let _g = a1.lock().await;
        both1.wait().await;
        let lock = std::pin::pin!(b1.lock());
        let timer = std::pin::pin!(volt::time::sleep(Duration::from_millis(1500)));
        let _ = futures::future::select(lock, timer).await;
    });
    let other = spawn_named(&rt, "other", async move {
        let _g = b.lock().await;
        both.wait().await;
        let _h = a.lock().await;
    });
    let start = Instant::now();
    while !(patient.is_finished() && other.is_finished()) {
        assert!(t.deadlocks().is_empty(), "reported: {:#?}", t.deadlocks());
        assert!(start.elapsed() < Duration::from_secs(10), "the timer never freed them");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(t.snapshot().deadlocks_total, 0);
}
