//! The event ring on a real runtime: order, drops, task lifecycles, steals.

mod common;

use common::*;
use std::time::Duration;
use volt::telemetry::{Event, EventDetail, EventKind, ScheduleTarget, WakeSource};

/// A runtime with the ring and no stall threshold: these tests check the exact events of
/// a task's life, and a poll the OS took off its CPU for 10 ms on a loaded machine (or
/// any poll under Miri) would add a `Stall` record to them.
fn rt_with_ring(workers: usize, capacity: usize) -> volt::Runtime {
    volt::runtime::Builder::new().worker_threads(workers).event_ring(capacity).stall_threshold(None).build().unwrap()
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
    // Polls nest properly: each end closes the latest open start, of the same task, and
    // a spawn happens inside the poll of the task that spawned it. (Most starts are
    // folded into their poll's end when recorded and put back by the reader.)
    let mut open: Vec<u64> = Vec::new();
    for e in &w0 {
        match e.kind {
            EventKind::PollStart => open.push(e.task_id),
            EventKind::PollEnd => assert_eq!(open.pop(), Some(e.task_id), "poll end without its start: {e:?}"),
            EventKind::Spawn => assert!(!open.is_empty(), "spawn outside any poll: {e:?}"),
            _ => {}
        }
    }
    assert!(open.len() <= 1, "polls left open: {open:?}");
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
        let id = h.id().as_u64();
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
    assert_eq!(mine[0].detail(), EventDetail::Spawn { remote: true }, "spawned from block_on: remote");
    assert_eq!(mine[0].worker, None);
    assert_eq!(mine[1].detail(), EventDetail::Schedule { target: ScheduleTarget::Global, source: WakeSource::Spawn });
    assert_eq!(mine[3].detail(), EventDetail::PollEnd { ready: true }, "the poll was ready");
    let panicked = rt.spawn(async { panic!("x") });
    let pid = panicked.id().as_u64();
    assert!(panicked.join().unwrap_err().is_panic());
    let aborted = rt.spawn(Never);
    let aid = aborted.id().as_u64();
    aborted.abort();
    assert!(aborted.join().unwrap_err().is_cancelled());
    let events = rt.handle().telemetry().events().read();
    assert!(events.iter().any(|e| e.task_id == pid && e.kind == EventKind::Panic));
    assert!(events.iter().any(|e| e.task_id == aid && e.kind == EventKind::Cancel));
}

/// Spawns from five threads outside the runtime at once: two of them get rings of their
/// own, the rest share one, and threads give theirs back as they exit. Whichever ring a
/// record went to, a reader that keeps up gets every spawn exactly once, marked remote,
/// and each thread's spawns stamped in the order it made them. (Not read in that order:
/// a thread that moves from the shared ring to a leased one can have a later spawn read
/// before an earlier one a stalled writer on the shared ring held back.)
#[test]
fn spawns_from_many_outside_threads_all_come_out_once_in_each_threads_order() {
    const THREADS: usize = 5;
    const EACH: usize = if cfg!(miri) { 20 } else { 400 };
    let rt = rt_with_ring(2, if cfg!(miri) { 1024 } else { 1 << 14 });
    let mut cursor = rt.handle().telemetry().events();
    let mut events = Vec::new();
    let ids: Vec<Vec<u64>> = std::thread::scope(|s| {
        let spawners: Vec<_> = (0..THREADS)
            .map(|_| {
                let h = rt.handle().clone();
                s.spawn(move || {
                    let handles: Vec<_> = (0..EACH).map(|_| h.spawn(async {})).collect();
                    let ids = handles.iter().map(|j| j.id().as_u64()).collect::<Vec<_>>();
                    for j in handles {
                        j.join().unwrap();
                    }
                    ids
                })
            })
            .collect();
        // Read while they spawn, so records from threads that come and go meet a reader.
        while !spawners.iter().all(|t| t.is_finished()) {
            events.extend(cursor.read());
            std::thread::yield_now();
        }
        spawners.into_iter().map(|t| t.join().unwrap()).collect()
    });
    events.extend(cursor.read());
    assert_eq!(cursor.dropped(), 0, "a reader that keeps up missed records");
    let spawns: Vec<&Event> = events.iter().filter(|e| e.kind == EventKind::Spawn).collect();
    assert_eq!(spawns.len(), THREADS * EACH, "spawn events");
    assert!(spawns.iter().all(|e| e.detail() == EventDetail::Spawn { remote: true } && e.worker.is_none()));
    let at: std::collections::HashMap<u64, u64> = spawns.iter().map(|e| (e.task_id, e.timestamp_ns)).collect();
    assert_eq!(at.len(), THREADS * EACH, "a spawn came out twice");
    for (t, ids) in ids.iter().enumerate() {
        let ts: Vec<u64> = ids.iter().map(|id| *at.get(id).expect("a spawn missing")).collect();
        assert!(ts.windows(2).all(|w| w[0] <= w[1]), "thread {t}'s spawns stamped out of order");
    }
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
    let seen = cursor.records_read() + cursor.dropped();
    // Every record written up to the read was either returned or counted as missed.
    assert!(
        before.events_recorded <= seen && seen <= after.events_recorded,
        "read {} + dropped {} vs recorded {}..{}",
        cursor.records_read(),
        cursor.dropped(),
        before.events_recorded,
        after.events_recorded
    );
    assert!(got.len() as u64 >= cursor.records_read());
    assert!(cursor.dropped() > 5_000, "dropped {}", cursor.dropped());
    // The ring holds at most 64 records per worker, plus 64 in the ring the block_on
    // thread leased (the only thread outside that recorded).
    assert!(cursor.records_read() <= 3 * 64);
    // The ring overwrote at least what this reader missed.
    assert!(after.events_overwritten >= cursor.dropped(), "{} < {}", after.events_overwritten, cursor.dropped());
    // A second read right away returns only what came since (nothing or a few parks).
    let again = cursor.read();
    assert!(again.iter().all(|e| matches!(e.kind, EventKind::Park | EventKind::Unpark)), "{again:?}");
}

/// `events_overwritten` is the ring's churn, not a loss: a reader that keeps up misses
/// nothing while the ring overwrites thousands of records it has already read, and a
/// cursor made late starts at the oldest record still held, missing nothing either.
#[test]
fn overwritten_is_not_missed_a_reader_that_keeps_up_misses_nothing() {
    let rt = rt_with_ring(1, 64);
    let mut keeping_up = rt.handle().telemetry().events();
    let mut read = 0u64;
    for _ in 0..200 {
        // 10 spawns and their polls per round: well under 64 records between reads.
        rt.block_on(async {
            for _ in 0..10 {
                volt::spawn(async {}).await.unwrap();
            }
        });
        read += keeping_up.read().len() as u64;
    }
    let s = rt.handle().telemetry().snapshot();
    assert!(s.events_overwritten > 1_000, "the ring wrapped many times: {}", s.events_overwritten);
    assert_eq!(keeping_up.dropped(), 0, "a reader that kept up missed records");
    assert!(read > 4_000, "read {read} events");
    assert_eq!(keeping_up.records_read(), s.events_recorded, "every record was read once");
    let mut late = rt.handle().telemetry().events();
    let held = late.read();
    assert!(!held.is_empty() && late.records_read() <= 2 * 64, "{} records", late.records_read());
    assert_eq!(late.dropped(), 0, "records overwritten before the cursor existed count as missed");
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
        let EventDetail::Steal { from: victim, count } = s.detail() else { panic!("{s:?}") };
        let thief = s.worker.expect("steals happen on workers");
        assert_ne!(victim, thief);
        assert!(victim < 2 && (1..=128).contains(&count), "{s:?}");
        assert!(s.task_id > 0);
        assert!(events
            .iter()
            .any(|e| e.task_id == s.task_id && e.kind == EventKind::PollStart && e.worker == Some(thief)));
    }
    let stolen: u64 = steals
        .iter()
        .map(|s| match s.detail() {
            EventDetail::Steal { count, .. } => count,
            _ => unreachable!(),
        })
        .sum();
    assert_eq!(stolen, snap.workers.iter().map(|w| w.tasks_stolen).sum::<u64>());
}

#[test]
fn without_the_ring_nothing_is_recorded() {
    let rt = rt(2);
    rt.block_on(async { volt::spawn(async {}).await.unwrap() });
    assert!(rt.handle().telemetry().events().read().is_empty());
    let s = rt.handle().telemetry().snapshot();
    assert_eq!((s.events_recorded, s.events_overwritten), (0, 0));
}

#[test]
fn park_and_unpark_are_recorded_and_display_reads_well() {
    let rt = rt_with_ring(2, 1024);
    assert!(wait_until(Duration::from_secs(30), || rt.handle().telemetry().snapshot().num_parked == 2));
    rt.block_on(async { volt::spawn(async {}).await.unwrap() });
    let events = rt.handle().telemetry().events().read();
    assert!(events.iter().any(|e| e.kind == EventKind::Park));
    assert!(events.iter().any(|e| e.kind == EventKind::Unpark));
    let line = events.iter().find(|e| e.kind == EventKind::Spawn).unwrap().to_string();
    assert!(line.contains("spawn") && line.contains("remote"), "{line}");
}

#[test]
fn histograms_sum_to_their_counters() {
    check_histograms(rt_with_ring(2, 1024), true);
}

/// The poll-time histogram does not need the ring: a default runtime times every poll.
#[test]
fn histograms_sum_to_their_counters_without_the_ring() {
    check_histograms(volt::runtime::Builder::new().worker_threads(2).build().unwrap(), false);
}

#[test]
fn poll_time_histogram_off_times_nothing() {
    // The stall threshold times polls too (a poll's end compares its length with it).
    let rt = volt::runtime::Builder::new()
        .worker_threads(2)
        .poll_time_histogram(false)
        .stall_threshold(None)
        .build()
        .unwrap();
    rt.block_on(async {
        for _ in 0..50 {
            volt::spawn(async { volt::task::yield_now().await }).await.unwrap();
        }
    });
    let s = rt.handle().telemetry().snapshot();
    assert!(s.workers.iter().map(|w| w.tasks_polled).sum::<u64>() >= 100);
    assert!(s.workers.iter().all(|w| w.poll_time_histogram.count() == 0 && w.poll_time_histogram.sum == 0));
    // The ring times polls anyway, so with it on the histogram is kept regardless.
    let rt =
        volt::runtime::Builder::new().worker_threads(1).poll_time_histogram(false).event_ring(256).build().unwrap();
    rt.block_on(async { volt::spawn(async {}).await.unwrap() });
    let s = rt.handle().telemetry().snapshot();
    assert_eq!(s.workers[0].poll_time_histogram.count(), s.workers[0].tasks_polled);
}

fn check_histograms(rt: volt::Runtime, ring: bool) {
    rt.block_on(async {
        volt::spawn(async {
            let hs: Vec<_> = (0..300)
                .map(|i| {
                    volt::spawn(async move {
                        if i % 3 == 0 {
                            std::thread::sleep(Duration::from_micros(100));
                        }
                        volt::task::yield_now().await;
                    })
                })
                .collect();
            for h in hs {
                h.await.unwrap();
            }
        })
        .await
        .unwrap();
    });
    assert!(wait_until(Duration::from_secs(30), || rt.handle().telemetry().snapshot().num_parked == 2));
    let s = rt.handle().telemetry().snapshot();
    for w in &s.workers {
        // Every poll (no task was aborted, so every run polled) lands in one bucket.
        assert_eq!(w.poll_time_histogram.count(), w.tasks_polled, "worker {}", w.index);
    }
    let polls: u64 = s.workers.iter().map(|w| w.tasks_polled).sum();
    assert!(polls >= 601);
    assert_eq!(s.steal_batch_histogram.count(), s.workers.iter().map(|w| w.steal_operations).sum::<u64>());
    // Parks go on while we read, and relaxed counters may be seen a little apart (a torn
    // snapshot); between two parks they agree, so some snapshot must show them equal.
    assert!(
        wait_until(Duration::from_secs(10), || {
            let s = rt.handle().telemetry().snapshot();
            s.park_duration_histogram.count() == s.workers.iter().map(|w| w.times_parked).sum::<u64>()
        }),
        "the park histogram never matched the park counter"
    );
    // Each queueing is followed by one poll, measured as schedule latency: every one with
    // the ring, one wake in eight (per waking thread) without it.
    let lat = s.schedule_latency_histogram.count();
    assert!(lat <= polls, "{lat} of {polls}");
    if ring {
        assert!(lat > 0, "{lat} of {polls}");
    }
    // The 100 µs polls show up above 64 µs.
    let slow: u64 = s.workers.iter().map(|w| w.poll_time_histogram.buckets[16..].iter().sum::<u64>()).sum();
    assert!(slow >= 100, "{slow} polls of 100 µs or more");
}

#[test]
fn tasks_lists_live_named_tasks_with_their_statistics() {
    let rt = rt_with_ring(2, 1024);
    let flag = Flag::default();
    let f2 = flag.clone();
    let h = volt::task::Builder::new().name("waiter").spawn_on(
        async move {
            volt::task::yield_now().await;
            f2.wait().await;
        },
        rt.handle(),
    );
    let id = h.id().as_u64();
    // Polls are counted as they start: wait for the second one to have ended too.
    assert!(wait_until(Duration::from_secs(30), || {
        rt.handle()
            .telemetry()
            .tasks()
            .iter()
            .any(|t| t.id == id && t.polls >= 2 && t.state == volt::telemetry::TaskState::Idle)
    }));
    let tasks = rt.handle().telemetry().tasks();
    let t = tasks.iter().find(|t| t.id == id).unwrap();
    assert_eq!(t.name.as_deref(), Some("waiter"));
    assert_eq!(t.state, volt::telemetry::TaskState::Idle);
    assert_eq!(t.polls, 2);
    assert!(t.busy > Duration::ZERO && t.since_last_poll.is_some());
    flag.set();
    h.join().unwrap();
    assert!(wait_until(Duration::from_secs(30), || rt.handle().telemetry().tasks().iter().all(|t| t.id != id)));
    // Without the ring: nothing per task is kept, so nothing is listed.
    let plain = rt_plain();
    let _g = plain.spawn(Never);
    assert!(plain.handle().telemetry().tasks().is_empty());
}

fn rt_plain() -> volt::Runtime {
    rt(1)
}

/// Without the event ring, one wake in eight (counted per waking thread) is sampled for
/// the schedule-latency histogram: 800 wakes give about 100 samples, never more than
/// one in eight of them plus one per thread, and some even if a few are dropped.
#[test]
fn without_the_ring_one_wake_in_eight_is_sampled() {
    let rt = volt::runtime::Builder::new().worker_threads(2).build().unwrap();
    let before = rt.handle().telemetry().snapshot().schedule_latency_histogram.count();
    rt.block_on(async {
        volt::spawn(async {
            // Each join completes after a yield, waking its parent: 800 wakes on workers.
            for _ in 0..800 {
                volt::spawn(async { volt::task::yield_now().await }).await.unwrap();
            }
        })
        .await
        .unwrap();
    });
    let s = rt.handle().telemetry().snapshot();
    let sampled = s.schedule_latency_histogram.count() - before;
    let wakes = 800 + 16; // the joins, and a few more from outside (block_on's join)
    assert!(sampled >= 1, "nothing sampled");
    assert!(sampled <= wakes / 8 + 3, "{sampled} samples of at most {wakes} wakes");
}
