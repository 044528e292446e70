//! `TaskStatistics::WhileWatched`: a task's statistics are kept only while a watch lives,
//! and what every task keeps anyway (its waits, its group's counts, the deadlock
//! detector's view, tested in `deadlock.rs`) does not depend on them. Every figure is
//! read after the work that makes it has ended, waiting for it with a 10 s bound; nothing
//! asserts how long anything took.
#![cfg(feature = "sync")]

use std::time::{Duration, Instant};
use volt::runtime::{Builder, TaskStatistics};
use volt::telemetry::{TaskInfo, TaskState, Telemetry, WaitReason};

fn runtime(when: TaskStatistics) -> volt::Runtime {
    Builder::new().worker_threads(2).event_ring(1024).task_statistics(when).build().unwrap()
}

/// `f` until it gives `Some`, for at most 10 s.
fn wait_for<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A task that runs rounds: each message `n` it receives makes it yield `n` times and then
/// wait for the next. So a round is `n + 1` polls, and its first poll (waiting for the
/// first message) is one.
fn spawn_rounds(
    rt: &volt::Runtime,
    name: &str,
) -> (volt::task::JoinHandle<()>, volt::sync::mpsc::UnboundedSender<u32>) {
    let (tx, mut rx) = volt::sync::mpsc::unbounded_channel::<u32>();
    let h = volt::task::Builder::new().name(name).spawn_on(
        async move {
            while let Some(n) = rx.recv().await {
                for _ in 0..n {
                    volt::task::yield_now().await;
                }
            }
        },
        rt.handle(),
    );
    (h, tx)
}

/// The task's group's poll count, once it reaches `polls` (the group counts each poll
/// just after the poll's end, so a reader may see the task idle a moment before), and
/// then the task itself, idle and waiting on its channel again.
fn after_round(t: &Telemetry, id: u64, group: &str, polls: u64) -> TaskInfo {
    wait_for(&format!("group {group} to count {polls} polls"), || {
        let g = t.task_groups().into_iter().find(|g| g.name == group)?;
        assert!(g.polls <= polls, "the group counted {} polls, more than the {polls} made", g.polls);
        (g.polls == polls).then_some(())
    });
    wait_for("the task to wait on its channel", || {
        t.task(id).filter(|i| {
            i.state == TaskState::Idle
                && matches!(&i.waiting_on, Some(WaitReason::Label(l)) if l.starts_with("recv mpsc"))
        })
    })
}

#[test]
fn statistics_are_kept_while_a_watch_lives_and_the_rest_always() {
    let rt = runtime(TaskStatistics::WhileWatched);
    let t = rt.handle().telemetry();
    let (h, tx) = spawn_rounds(&rt, "rounds");
    let id = h.id().as_u64();

    // Unwatched: no statistics, but the wait is named and the group counts the poll.
    let info = after_round(&t, id, "rounds", 1);
    assert_eq!((info.polls, info.busy, info.scheduled), (0, Duration::ZERO, Duration::ZERO), "{info:#?}");
    assert_eq!(info.since_last_poll, None, "{info:#?}");
    tx.send(100).unwrap();
    let info = after_round(&t, id, "rounds", 1 + 101);
    assert_eq!((info.polls, info.busy), (0, Duration::ZERO), "{info:#?}");
    assert_eq!((info.since_last_poll, info.last_woken_by), (None, None), "{info:#?}");
    assert_eq!(info.poll_histogram.count(), 0, "{info:#?}");

    // Watched: the polls from now on, with their times.
    let watch = t.watch_task_statistics().expect("the ring is on");
    tx.send(50).unwrap();
    let info = after_round(&t, id, "rounds", 1 + 101 + 51);
    assert_eq!(info.polls, 51, "{info:#?}");
    assert!(info.busy > Duration::ZERO, "{info:#?}");
    assert!(info.since_last_poll.is_some() && info.last_woken_by.is_some(), "{info:#?}");
    assert_eq!(info.poll_histogram.count(), 51, "{info:#?}");

    // Unwatched again: the figures stay as the watch left them, and the moments they
    // describe are unknown, since the task ran after them.
    drop(watch);
    tx.send(30).unwrap();
    let info = after_round(&t, id, "rounds", 1 + 101 + 51 + 31);
    assert_eq!(info.polls, 51, "{info:#?}");
    assert_eq!((info.since_last_poll, info.last_woken_by), (None, None), "{info:#?}");

    // The group saw every poll and one first poll, watched or not.
    let g = t.task_groups().into_iter().find(|g| g.name == "rounds").unwrap();
    assert_eq!((g.polls, g.first_polls, g.spawned), (184, 1, 1), "{g:#?}");
    drop(tx);
    rt.block_on(h).unwrap();
}

/// A `TaskWatch` keeps them too (the console holds one while a client shows tasks), and
/// a runtime that keeps them always keeps them without one.
#[test]
fn a_task_watch_keeps_them_and_always_needs_no_watch() {
    for (when, watched) in [(TaskStatistics::WhileWatched, true), (TaskStatistics::Always, false)] {
        let rt = runtime(when);
        let t = rt.handle().telemetry();
        let watch = watched.then(|| t.watch_tasks().expect("no other watch"));
        let (h, tx) = spawn_rounds(&rt, "rounds");
        let id = h.id().as_u64();
        tx.send(20).unwrap();
        // The first poll may have taken the message already: 1 + 21 polls, or 21.
        let info = wait_for("the round's polls", || {
            let g = t.task_groups().into_iter().find(|g| g.name == "rounds")?;
            let info = t.task(id)?;
            (info.state == TaskState::Idle && info.polls == g.polls && (g.polls == 22 || g.polls == 21)).then_some(info)
        });
        assert!(info.busy > Duration::ZERO && info.since_last_poll.is_some(), "{when:?}: {info:#?}");
        drop(watch);
        drop(tx);
        rt.block_on(h).unwrap();
    }
}

/// Unwatched, the workers still measure how long woken tasks wait in a queue, on a sample
/// of the wakes (as without the ring), and record every wake in the ring.
#[test]
fn unwatched_wakes_are_sampled_for_the_schedule_latency() {
    let rt = runtime(TaskStatistics::WhileWatched);
    let t = rt.handle().telemetry();
    let (h, tx) = spawn_rounds(&rt, "rounds");
    let id = h.id().as_u64();
    after_round(&t, id, "rounds", 1);
    // One message at a time, each a wake from this thread: 200 of them, one in eight
    // sampled.
    for round in 1..=200u64 {
        tx.send(0).unwrap();
        after_round(&t, id, "rounds", 1 + round);
    }
    let sampled = t.snapshot().schedule_latency_histogram.count();
    assert!(sampled > 0 && sampled <= 200, "{sampled} samples of 200 wakes");
    drop(tx);
    rt.block_on(h).unwrap();
}
