//! Loom models of the local queue (`queue.rs`): the owner's pushes, pops and overflow
//! against one or two stealers. Every task ends up exactly once with the owner, a
//! stealer or the global queue.

use crate::loom::{thread, Arc};
use crate::loom_tests::{assert_each_once, model, model_bounded};
use crate::scheduler::inject::Inject;
use crate::scheduler::queue::WorkStealQueue;
use crate::task::notified::Notified;
use crate::task::test_util::{counted_task, MockScheduler};

type Entry = Notified<Arc<MockScheduler>>;

/// Drain a queue into a list of ids.
fn drain_ids(q: &WorkStealQueue<Arc<MockScheduler>>, out: &mut Vec<u64>) {
    while let Some(t) = q.pop() {
        out.push(t.header().id);
    }
}

/// A thread that steals once from `q` into a queue of its own and returns the ids it got.
fn spawn_stealer(q: &SharedQueue) -> thread::JoinHandle<Vec<u64>> {
    let q = q.clone();
    thread::spawn(move || {
        let mine = WorkStealQueue::new();
        let mut got = vec![];
        if let Some((t, _)) = q.steal_into(&mine) {
            got.push(t.header().id);
            drain_ids(&mine, &mut got);
        }
        got
    })
}

/// A queue of the mock scheduler's tasks, shared with stealer threads.
type SharedQueue = Arc<WorkStealQueue<Arc<MockScheduler>>>;

/// A queue holding `n` fresh counted tasks, its (empty) global queue, and the tasks' ids.
fn filled_queue(sched: &Arc<MockScheduler>, n: usize) -> (SharedQueue, Inject<Arc<MockScheduler>>, Vec<u64>) {
    let q = Arc::new(WorkStealQueue::new());
    let inject = Inject::new();
    let mut ids = vec![];
    for _ in 0..n {
        let t = counted_task(sched);
        ids.push(t.header().id);
        let _ = q.push_back_or_overflow(t, &inject);
    }
    (q, inject, ids)
}

fn drain_inject(i: &Inject<Arc<MockScheduler>>, out: &mut Vec<u64>) {
    while let Some(t) = i.pop() {
        out.push(t.header().id);
    }
}

#[test]
fn loom_queue_push_pop_and_steal() {
    model(|| {
        let sched = MockScheduler::new();
        let (q, inject, ids) = filled_queue(&sched, 3);
        let stealer = spawn_stealer(&q);
        let mut got = vec![];
        if let Some(t) = q.pop() {
            got.push(t.header().id);
        }
        got.extend(stealer.join().unwrap());
        drain_ids(&q, &mut got);
        drain_inject(&inject, &mut got);
        assert_each_once(got, ids);
    });
}

#[test]
fn loom_queue_overflow_against_a_stealer() {
    model(|| {
        let sched = MockScheduler::new();
        let q = Arc::new(WorkStealQueue::new());
        let inject = Arc::new(Inject::new());
        let mut ids = vec![];
        let mut entries: Vec<Entry> = (0..5).map(|_| counted_task(&sched)).collect();
        for t in &entries {
            ids.push(t.header().id);
        }
        for t in entries.drain(..4) {
            let _ = q.push_back_or_overflow(t, &inject);
        }
        let fifth = entries.pop().unwrap();
        let stealer = spawn_stealer(&q);
        // The ring is full (4 of 4): this push overflows half, or goes to the global
        // queue alone if the steal is mid-copy.
        let _ = q.push_back_or_overflow(fifth, &inject);
        let mut got = stealer.join().unwrap();
        drain_ids(&q, &mut got);
        drain_inject(&inject, &mut got);
        assert_each_once(got, ids);
    });
}

#[test]
fn loom_queue_two_stealers_and_the_owner() {
    // Three threads on one queue: the whole space took 100 s or more; at most five
    // preemptions per execution (still more than the two or three that ordering bugs
    // need to show) take seconds.
    model_bounded(5, || {
        let sched = MockScheduler::new();
        let (q, _inject, ids) = filled_queue(&sched, 4);
        let stealers: Vec<_> = (0..2).map(|_| spawn_stealer(&q)).collect();
        let mut got = vec![];
        if let Some(t) = q.pop() {
            got.push(t.header().id);
        }
        for s in stealers {
            got.extend(s.join().unwrap());
        }
        drain_ids(&q, &mut got);
        assert_each_once(got, ids);
    });
}

#[test]
fn loom_queue_two_stealers_against_the_owners_pushes() {
    // The owner pushes while two stealers run: a push may reuse a slot only once no steal
    // is copying it, so a second stealer must leave the queue alone while a first one
    // copies. The other models push nothing during steals, so they pass with that check
    // taken out of `steal_into2`; this one then fails at once. At most four preemptions
    // per execution: 6 s.
    model_bounded(4, || {
        let sched = MockScheduler::new();
        let (q, inject, mut ids) = filled_queue(&sched, 4);
        let more: Vec<Entry> = (0..2).map(|_| counted_task(&sched)).collect();
        ids.extend(more.iter().map(|t| t.header().id));
        let stealers: Vec<_> = (0..2).map(|_| spawn_stealer(&q)).collect();
        for t in more {
            let _ = q.push_back_or_overflow(t, &inject);
        }
        let mut got = vec![];
        for s in stealers {
            got.extend(s.join().unwrap());
        }
        drain_ids(&q, &mut got);
        drain_inject(&inject, &mut got);
        assert_each_once(got, ids);
    });
}
