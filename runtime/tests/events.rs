//! The event ring on a real runtime: order, drops, task lifecycles, steals.

mod common;

use common::*;
use std::time::Duration;
use volt::telemetry::{Event, EventKind};

fn rt_with_ring(workers: usize, capacity: usize) -> volt::Runtime {
    volt::runtime::Builder::new().worker_threads(workers).event_ring(capacity).build().unwrap()
}

#[test]
fn events_from_one_worker_come_out_in_order() {
    let rt = rt_with_ring(1, 4096);
    rt.block_on(async {
        // Spawned from a task, so each child's whole life is on worker 0.
        volt::spawn(async {
            for _ in 0..50 {
                volt::spawn(async {
                    volt::task::yield_now().await;
                })
                .await
                .unwrap();
            }
        })
        .await
        .unwrap();
    });
    let events: Vec<Event> = rt.handle().telemetry().events().read();
    let w0: Vec<&Event> = events.iter().filter(|e| e.worker == Some(0)).collect();
    assert!(w0.len() > 200, "{} events", w0.len());
    assert!(w0.windows(2).all(|p| p[0].timestamp_ns <= p[1].timestamp_ns), "timestamps go backwards");
    // Per task, its events keep the order of its life.
    let children: Vec<u64> = w0.iter().filter(|e| e.kind == EventKind::Spawn).map(|e| e.task_id).collect();
    assert_eq!(children.len(), 50);
    for id in children {
        let kinds: Vec<EventKind> =
            w0.iter().filter(|e| e.task_id == id).map(|e| e.kind).filter(|k| *k != EventKind::Schedule).collect();
        assert_eq!(
            kinds,
            [
                EventKind::Spawn,
                EventKind::PollStart,
                EventKind::PollEnd,
                EventKind::Transition,
                EventKind::PollStart,
                EventKind::PollEnd,
                EventKind::Complete
            ],
            "task {id}"
        );
    }
}

#[test]
fn spawn_poll_complete_share_the_task_id() {
    let rt = rt_with_ring(2, 1024);
    let id = rt.block_on(async {
        let h = volt::spawn(async { 5 });
        let id = h.id();
        assert_eq!(h.await.unwrap(), 5);
        id
    });
    let events = rt.handle().telemetry().events().read();
    let mine: Vec<&Event> = events.iter().filter(|e| e.task_id == id).collect();
    let kinds: Vec<EventKind> = mine.iter().map(|e| e.kind).collect();
    assert_eq!(
        kinds,
        [EventKind::Spawn, EventKind::Schedule, EventKind::PollStart, EventKind::PollEnd, EventKind::Complete],
        "{mine:?}"
    );
    assert_eq!(mine[0].arg, 1, "spawned from block_on: remote");
    assert_eq!(mine[0].worker, None);
    assert_eq!(mine[3].arg, 1, "the poll was ready");
    let panicked = rt.spawn(async { panic!("x") });
    let pid = panicked.id();
    assert!(panicked.join().unwrap_err().is_panic());
    let aborted = rt.spawn(Never);
    let aid = aborted.id();
    aborted.abort();
    assert!(aborted.join().unwrap_err().is_cancelled());
    let events = rt.handle().telemetry().events().read();
    assert!(events.iter().any(|e| e.task_id == pid && e.kind == EventKind::Panic));
    assert!(events.iter().any(|e| e.task_id == aid && e.kind == EventKind::Cancel));
}

#[test]
fn a_reader_that_falls_behind_sees_exactly_what_it_missed() {
    // A 64-slot ring and thousands of events: the workers never wait for the reader.
    let rt = rt_with_ring(2, 64);
    let mut cursor = rt.handle().telemetry().events();
    rt.block_on(async {
        let hs: Vec<_> = (0..2_000).map(|_| volt::spawn(async { volt::task::yield_now().await })).collect();
        for h in hs {
            h.await.unwrap();
        }
    });
    let before = rt.handle().telemetry().snapshot();
    let got = cursor.read();
    let after = rt.handle().telemetry().snapshot();
    let seen = got.len() as u64 + cursor.dropped();
    // Every event written up to the read was either returned or counted as missed.
    assert!(
        before.events_recorded <= seen && seen <= after.events_recorded,
        "read {} + dropped {} vs recorded {}..{}",
        got.len(),
        cursor.dropped(),
        before.events_recorded,
        after.events_recorded
    );
    assert!(cursor.dropped() > 10_000, "dropped {}", cursor.dropped());
    // The ring holds at most 64 per worker plus 64 remote.
    assert!(got.len() <= 3 * 64);
    assert!(after.events_dropped >= cursor.dropped().min(after.events_dropped));
    assert!(after.events_dropped > 0);
    // A second read right away returns only what came since (nothing or a few parks).
    let again = cursor.read();
    assert!(again.iter().all(|e| matches!(e.kind, EventKind::Park | EventKind::Unpark)), "{again:?}");
}

#[test]
fn a_steal_appears_with_its_victim_and_count() {
    let rt = rt_with_ring(2, 1 << 16);
    rt.block_on(async {
        volt::spawn(async {
            // A burst of slow tasks on one worker: the other steals half.
            let hs: Vec<_> =
                (0..64).map(|_| volt::spawn(async { std::thread::sleep(Duration::from_micros(200)) })).collect();
            for h in hs {
                h.await.unwrap();
            }
        })
        .await
        .unwrap();
    });
    let events = rt.handle().telemetry().events().read();
    let steals: Vec<&Event> = events.iter().filter(|e| e.kind == EventKind::Steal).collect();
    assert!(!steals.is_empty(), "no steal recorded");
    let snap = rt.handle().telemetry().snapshot();
    assert_eq!(steals.len() as u64, snap.workers.iter().map(|w| w.steal_operations).sum::<u64>());
    for s in &steals {
        let (victim, count) = ((s.arg >> 32) as usize, s.arg & 0xffff_ffff);
        let thief = s.worker.expect("steals happen on workers");
        assert_ne!(victim, thief);
        assert!(victim < 2 && (1..=128).contains(&count), "{s:?}");
        assert!(s.task_id > 0);
        assert!(events
            .iter()
            .any(|e| e.task_id == s.task_id && e.kind == EventKind::PollStart && e.worker == Some(thief)));
    }
    let stolen: u64 = steals.iter().map(|s| s.arg & 0xffff_ffff).sum();
    assert_eq!(stolen, snap.workers.iter().map(|w| w.tasks_stolen).sum::<u64>());
}

#[test]
fn without_the_ring_nothing_is_recorded() {
    let rt = rt(2);
    rt.block_on(async { volt::spawn(async {}).await.unwrap() });
    assert!(rt.handle().telemetry().events().read().is_empty());
    let s = rt.handle().telemetry().snapshot();
    assert_eq!((s.events_recorded, s.events_dropped), (0, 0));
}

#[test]
fn park_and_unpark_are_recorded_and_display_reads_well() {
    let rt = rt_with_ring(2, 1024);
    assert!(wait_until(Duration::from_secs(5), || rt.handle().telemetry().snapshot().num_parked == 2));
    rt.block_on(async { volt::spawn(async {}).await.unwrap() });
    let events = rt.handle().telemetry().events().read();
    assert!(events.iter().any(|e| e.kind == EventKind::Park));
    assert!(events.iter().any(|e| e.kind == EventKind::Unpark));
    let line = events.iter().find(|e| e.kind == EventKind::Spawn).unwrap().to_string();
    assert!(line.contains("spawn") && line.contains("remote"), "{line}");
}
