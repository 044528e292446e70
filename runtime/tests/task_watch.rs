//! The telemetry's incremental readers, as a program outside the runtime uses them: a
//! `TaskWatch` that follows the task list (one at a time per runtime, each change
//! handed over, a panicking reader leaving the watch usable), a `StallCursor` that gives
//! each ended stall once, and the worker counters by name. The bounds below are generous
//! waits for something that must happen, never timings asserted.

use std::collections::HashMap;
use std::time::{Duration, Instant};
use volt::telemetry::{TaskChanges, TaskRow, TaskState, Telemetry, WaitReason, WORKER_COUNTERS};

fn runtime() -> volt::Runtime {
    volt::runtime::Builder::new().worker_threads(2).event_ring(1024).build().unwrap()
}

/// Read `watch` into `rows` (id -> latest row) until `done` holds, walking the whole list
/// again when the watch says it lost changes.
fn follow_until(
    t: &Telemetry,
    watch: &mut volt::telemetry::TaskWatch,
    rows: &mut HashMap<u64, (TaskRow, Option<String>)>,
    done: impl Fn(&HashMap<u64, (TaskRow, Option<String>)>) -> bool,
) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let read = watch.read_changes(|row, name| {
            rows.insert(row.id(), (row, name.map(String::from)));
        });
        if read == TaskChanges::Resync {
            t.for_each_task(|row, name| {
                rows.insert(row.id(), (row, name.map(String::from)));
            });
        }
        if done(rows) {
            return;
        }
        assert!(Instant::now() < deadline, "the watch never showed it: {rows:#?}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A watch started before a task is spawned sees it appear, wait (named, with its wait),
/// wake and finish, through changes alone.
#[test]
fn a_watch_follows_a_task_from_spawn_to_completion() {
    let rt = runtime();
    let t = rt.handle().telemetry();
    let mut watch = t.watch_tasks().expect("the runtime records tasks");
    let mut rows = HashMap::new();
    t.for_each_task(|row, name| {
        rows.insert(row.id(), (row, name.map(String::from)));
    });
    let (tx, rx) = volt::sync::oneshot::channel::<()>();
    let h = volt::task::Builder::new().name("watched").spawn_on(
        async move {
            let _ = rx.await;
        },
        rt.handle(),
    );
    let id = h.id().as_u64();
    follow_until(&t, &mut watch, &mut rows, |rows| {
        rows.get(&id).is_some_and(|(r, _)| r.state() == TaskState::Idle && r.polls() > 0)
    });
    let (row, name) = &rows[&id];
    assert_eq!(name.as_deref(), Some("watched"));
    assert!(row.last_poll_end_ns().is_some_and(|at| at <= t.now_ns()), "{row:?}");
    let (waits, _) = row.waits().decode();
    assert!(matches!(waits.first(), Some(w) if !matches!(w, WaitReason::Unknown)), "a named wait: {waits:?}");
    tx.send(()).unwrap();
    follow_until(&t, &mut watch, &mut rows, |rows| {
        rows.get(&id).is_some_and(|(r, _)| r.state() == TaskState::Complete)
    });
    rt.block_on(h).unwrap();
}

/// A runtime has one watch at a time; it is free again once dropped. Without the event
/// ring there is none.
#[test]
fn one_watch_at_a_time() {
    let rt = runtime();
    let t = rt.handle().telemetry();
    let first = t.watch_tasks().expect("the runtime records tasks");
    assert!(t.watch_tasks().is_none(), "a second watch while the first exists");
    drop(first);
    assert!(t.watch_tasks().is_some(), "the watch is free again");
    let plain = volt::runtime::Builder::new().worker_threads(1).build().unwrap();
    assert!(plain.handle().telemetry().watch_tasks().is_none());
}

/// A reader that panics while reading loses what that read had (its panic comes back to
/// it once the read is done), and the watch goes on handing over later changes.
#[test]
fn a_panicking_reader_leaves_the_watch_usable() {
    let rt = runtime();
    let t = rt.handle().telemetry();
    let mut watch = t.watch_tasks().unwrap();
    for _ in 0..8 {
        rt.block_on(rt.spawn(async {})).unwrap();
    }
    let read = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        watch.read_changes(|_, _| panic!("the reader fails"));
    }));
    assert!(read.is_err(), "the reader's panic comes back");
    let h = rt.spawn(std::future::pending::<()>());
    let id = h.id().as_u64();
    let mut rows = HashMap::new();
    follow_until(&t, &mut watch, &mut rows, |rows| rows.contains_key(&id));
    h.abort();
}

/// Each ended stall comes out of a cursor once, and a cursor with nothing new says so.
#[test]
fn a_stall_cursor_gives_each_stall_once() {
    let rt = volt::runtime::Builder::new()
        .worker_threads(2)
        .event_ring(1024)
        .stall_threshold(Some(Duration::from_millis(10)))
        .build()
        .unwrap();
    let t = rt.handle().telemetry();
    let mut cursor = t.stall_cursor();
    assert!(cursor.read(16).is_empty());
    let h = rt.spawn(async { std::thread::sleep(Duration::from_millis(60)) });
    let id = h.id().as_u64();
    rt.block_on(h).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut seen = Vec::new();
    while seen.is_empty() {
        assert!(Instant::now() < deadline, "the stall never came");
        if cursor.pending() {
            seen = cursor.read(16);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(seen.len(), 1, "{seen:#?}");
    assert_eq!((seen[0].task_id, seen[0].ongoing), (id, false));
    assert!(cursor.read(16).is_empty(), "a stall read twice");
    assert!(!cursor.pending());
}

/// The counters by name are the snapshot's fields, in the list's order.
#[test]
fn worker_counters_by_name() {
    let rt = runtime();
    for _ in 0..10 {
        rt.block_on(rt.spawn(async {})).unwrap();
    }
    let snap = rt.handle().telemetry().snapshot();
    let polls: u64 = snap
        .workers
        .iter()
        .map(|w| {
            let by_name: Vec<_> = w.counters().collect();
            assert_eq!(by_name.len(), WORKER_COUNTERS.len());
            assert!(by_name.iter().zip(WORKER_COUNTERS).all(|((c, _), l)| *c == l));
            by_name.iter().find(|(c, _)| c.name == "tasks_polled").map(|(_, v)| *v).unwrap()
        })
        .sum();
    assert_eq!(polls, snap.workers.iter().map(|w| w.tasks_polled).sum::<u64>());
    assert!(polls >= 10);
    let parked_ns = WORKER_COUNTERS.iter().find(|c| c.name == "parked_ns").unwrap();
    assert_eq!(parked_ns.family, None, "published in seconds, by hand");
    let polled = WORKER_COUNTERS.iter().find(|c| c.name == "tasks_polled").unwrap();
    assert_eq!(polled.family.map(|f| f.0), Some("volt_worker_polls_total"));
}
