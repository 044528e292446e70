//! Deadlocks and the resources list over the wire, from a real console server on
//! loopback: the snapshot carries `deadlocks_total` and the deadlock itself, an update
//! the primitives tasks wait on (for a stream that asks), and `GetTask` what a task
//! holds.

mod common;

use common::*;
use std::sync::Arc;
use std::time::{Duration, Instant};
use volt_console_proto as proto;

/// Two named tasks that lock `a` then `b` and `b` then `a`: a deadlock.
fn lock_order_deadlock(rt: &volt::Runtime) -> Vec<volt::task::JoinHandle<()>> {
    let (a, b) = (Arc::new(volt::sync::Mutex::new(())), Arc::new(volt::sync::Mutex::new(())));
    let both = Arc::new(volt::sync::Barrier::new(2));
    [(a.clone(), b.clone(), "ab"), (b, a, "ba")]
        .into_iter()
        .map(|(first, second, name)| {
            let both = both.clone();
            volt::task::Builder::new().name(name).spawn_on(
                async move {
                    let _g = first.lock().await;
                    both.wait().await;
                    let _h = second.lock().await;
                },
                rt.handle(),
            )
        })
        .collect()
}

#[test]
fn the_stream_carries_the_deadlock_its_count_and_the_locks() {
    let rt = runtime(2, true);
    let t = tokio_rt();
    let tasks = lock_order_deadlock(&rt);
    let ids: Vec<u64> = tasks.iter().map(|h| h.id().as_u64()).collect();
    t.block_on(async {
        let mut c = client(&rt).await;
        let req = proto::WatchRequest { omit_tasks: true, want_resources: true, ..Default::default() };
        let mut stream = c.watch_updates(req).await.unwrap().into_inner();
        let deadline = Instant::now() + Duration::from_secs(10);
        let (snap, resources) = loop {
            let u = tokio::time::timeout(Duration::from_secs(10), stream.message()).await.unwrap().unwrap().unwrap();
            let s = u.snapshot.clone().unwrap();
            let contended = u.resources.iter().filter(|r| r.kind.as_deref() == Some("Mutex") && r.waiters == 1).count();
            if s.deadlocks_total == 1 && s.deadlocks.len() == 1 && contended == 2 {
                assert!(u.resources_total >= 2);
                break (s, u.resources);
            }
            assert!(Instant::now() < deadline, "no deadlock on the wire: {s:?} {:?}", u.resources);
        };
        let d = &snap.deadlocks[0];
        let mut got: Vec<u64> = d.tasks.iter().map(|t| t.id).collect();
        got.sort();
        let mut want = ids.clone();
        want.sort();
        assert_eq!(got, want);
        for dt in &d.tasks {
            assert!(["ab", "ba"].contains(&dt.name.as_deref().unwrap()), "{dt:?}");
            assert_eq!(dt.holds.len(), 1, "{dt:?}");
            assert_eq!(dt.holds[0].primitive, "Mutex");
            assert!(dt.wants.starts_with("lock Mutex #"), "{}", dt.wants);
            let other = d.tasks.iter().find(|o| o.id != dt.id).unwrap();
            assert_eq!(dt.wants_task, other.id);
            assert_eq!(dt.wants_resource, Some(other.holds[0].resource));
            // The resources list shows the lock it wants, held by the other task.
            let r = resources.iter().find(|r| r.id == other.holds[0].resource).expect("the wanted lock is listed");
            assert_eq!((r.holder_task, r.waiters), (Some(other.id), 1), "{r:?}");
            // And where it was created (`lock_order_deadlock`, in this file).
            assert!(r.created_at.as_deref().is_some_and(|at| at.starts_with(concat!(file!(), ":"))), "{r:?}");
        }
        // A task's details show what it holds.
        let details = c.get_task(proto::TaskRequest { id: ids[0] }).await.unwrap().into_inner();
        let mine = d.tasks.iter().find(|t| t.id == ids[0]).unwrap();
        let held: Vec<u64> = details.holds.iter().map(|r| r.id).collect();
        assert_eq!(held, vec![mine.holds[0].resource]);
        // It stays one deadlock, counted once.
        for _ in 0..20 {
            let u = tokio::time::timeout(Duration::from_secs(10), stream.message()).await.unwrap().unwrap().unwrap();
            let s = u.snapshot.unwrap();
            assert_eq!((s.deadlocks_total, s.deadlocks.len()), (1, 1));
        }
        // A stream that did not ask for resources gets none; GetSnapshot has them.
        let req = proto::WatchRequest { omit_tasks: true, ..Default::default() };
        let mut plain = c.watch_updates(req).await.unwrap().into_inner();
        for _ in 0..3 {
            let u = plain.message().await.unwrap().unwrap();
            assert!(u.resources.is_empty() && u.resources_total == 0);
        }
        let snap = c.get_snapshot(proto::SnapshotRequest::default()).await.unwrap().into_inner();
        assert!(snap.resources.len() >= 2, "{:?}", snap.resources);
    });
    for h in tasks {
        h.abort();
    }
}

#[test]
fn without_a_deadlock_the_count_stays_zero() {
    let rt = runtime(2, true);
    let t = tokio_rt();
    t.block_on(async {
        let mut c = client(&rt).await;
        let mut stream = c.watch_updates(proto::WatchRequest::default()).await.unwrap().into_inner();
        spawn_work(&rt, 200);
        for _ in 0..30 {
            let u = stream.message().await.unwrap().unwrap();
            let s = u.snapshot.unwrap();
            assert_eq!(s.deadlocks_total, 0);
            assert!(s.deadlocks.is_empty());
        }
    });
}

/// A task waiting on a lock shows, on the wire, the holder by id and by name: the line a
/// person reads in the task list (`lock Mutex (held by task 17 "writer")`).
#[test]
fn a_lock_wait_on_the_wire_names_its_holder() {
    let rt = runtime(2, true);
    let t = tokio_rt();
    let lock = Arc::new(volt::sync::Mutex::new(()));
    let (held_tx, held_rx) = std::sync::mpsc::channel();
    let (release_tx, release_rx) = volt::sync::oneshot::channel::<()>();
    let writer = {
        let lock = lock.clone();
        volt::task::Builder::new().name("writer").spawn_on(
            async move {
                let _g = lock.lock().await;
                held_tx.send(()).unwrap();
                let _ = release_rx.await;
            },
            rt.handle(),
        )
    };
    held_rx.recv_timeout(Duration::from_secs(10)).unwrap();
    let reader = {
        let lock = lock.clone();
        volt::task::Builder::new().name("reader").spawn_on(
            async move {
                let _g = lock.lock().await;
            },
            rt.handle(),
        )
    };
    let (writer_id, reader_id) = (writer.id().as_u64(), reader.id().as_u64());
    let want = format!("lock Mutex (held by task {writer_id} \"writer\")");
    t.block_on(async {
        let mut c = client(&rt).await;
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let q = proto::TaskQuery { limit: 100, ..Default::default() };
            let page = c.list_tasks(q).await.unwrap().into_inner();
            let shown = page.tasks.iter().find(|t| t.id == reader_id).and_then(|t| t.waiting_on.clone());
            if shown.as_deref() == Some(want.as_str()) {
                break;
            }
            assert!(Instant::now() < deadline, "the reader shows {shown:?}, not {want:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    release_tx.send(()).unwrap();
    rt.block_on(async {
        writer.await.unwrap();
        reader.await.unwrap();
    });
}
