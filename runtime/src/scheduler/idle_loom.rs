//! Loom models of the idle protocol (`idle.rs`) with the park words: a worker parking
//! against a producer (as the last searcher, as a non-searcher, as the last worker with no
//! timeout), a notify claiming one worker, a driver batch's single notify, and the watch
//! that covers a task left in a busy worker's LIFO slot. No model has a timeout, so a lost
//! wake deadlocks it.

use crate::loom::{thread, Arc, AtomicUsize};
use crate::loom_tests::model;
use crate::scheduler::idle::Idle;
use crate::scheduler::inject::Inject;
use crate::scheduler::park::ParkState;
use crate::scheduler::queue::WorkStealQueue;
use crate::task::notified::Notified;
use crate::task::test_util::{counted_task, MockScheduler};
use std::sync::atomic::Ordering::SeqCst;

/// The pieces of the idle protocol one model needs: two workers' park words, the idle
/// state, and a count of queued tasks standing in for the queues.
struct IdleModel {
    idle: Idle,
    parks: [ParkState; 2],
    queued: AtomicUsize,
}

impl IdleModel {
    fn new() -> Arc<IdleModel> {
        IdleModel::with_workers(2)
    }

    fn with_workers(n: usize) -> Arc<IdleModel> {
        Arc::new(IdleModel {
            idle: Idle::new(n),
            parks: [ParkState::new(), ParkState::new()],
            queued: AtomicUsize::new(0),
        })
    }

    /// The worker's park sequence from `run.rs` and `worker_park.rs`: mark parked, re-check when nobody is
    /// searching, sleep, then learn why it woke. Returns true if it saw work.
    fn park_worker(&self, index: usize, searching: bool) -> bool {
        let last = self.idle.transition_worker_to_parked(index, searching);
        let recheck = last || self.idle.num_searching_seqcst() == 0;
        if recheck && self.queued.load(SeqCst) > 0 {
            // Cancel the park. If a producer claimed us meanwhile we are a searcher that
            // found work: rule 2.
            if !self.idle.unpark_self(index) && self.idle.transition_worker_from_searching() {
                self.idle.notify_parked(|i| self.parks[i].unpark(|| unreachable!()));
            }
            return true;
        }
        // The watch (rule 7) decides whether a real worker keeps a timeout; the model
        // sleeps with none either way, so a lost wake deadlocks it whatever was decided.
        let watching = !self.idle.all_parked() && self.idle.claim_watch(index);
        let _ = self.parks[index].park(None);
        if watching {
            self.idle.release_watch(index);
        }
        if !self.idle.unpark_self(index) {
            // Claimed by a producer: it is now a searcher and will find the task.
            let _ = self.idle.transition_worker_from_searching();
        }
        true
    }

    fn produce(&self) {
        self.queued.fetch_add(1, SeqCst);
        self.idle.notify_parked(|i| self.parks[i].unpark(|| unreachable!()));
    }
}

#[test]
fn loom_idle_last_searcher_parks_against_a_producer() {
    // Worker 0 is the only searcher and found nothing; a producer pushes meanwhile.
    // Either the re-check sees the work or the producer wakes the worker; otherwise the
    // worker sleeps forever (no timeout under loom) and the model deadlocks.
    model(|| park_against_a_producer(0, true));
}

/// Worker `index` (a searcher or not) parks while a producer pushes; the model
/// deadlocks if the wake is lost.
fn park_against_a_producer(index: usize, searching: bool) {
    let m = IdleModel::new();
    if searching {
        assert!(m.idle.transition_worker_to_searching());
    }
    let m2 = m.clone();
    let producer = thread::spawn(move || m2.produce());
    assert!(m.park_worker(index, searching));
    producer.join().unwrap();
}

#[test]
fn loom_idle_non_searcher_parks_against_a_producer() {
    // A worker that never became a searcher parks while a producer pushes: the re-check
    // "when nobody is searching" closes the window a last-searcher-only re-check leaves
    // open.
    model(|| park_against_a_producer(1, false));
}

#[test]
fn loom_idle_notify_claims_one_parked_worker() {
    // Two producers against one parked worker: exactly one claims it (as a searcher),
    // and the counts return to zero.
    model(|| {
        let m = IdleModel::new();
        let _ = m.idle.transition_worker_to_parked(0, false);
        let m2 = m.clone();
        let p = thread::spawn(move || m2.produce());
        m.produce();
        p.join().unwrap();
        assert_eq!(m.idle.parked_bitmap(), 0);
        assert_eq!(m.idle.num_searching(), 1, "one claim, counted as one searcher");
        assert_eq!(m.idle.num_parked(), 0);
    });
}

/// What the batch model shares: the dispatching worker's LIFO slot and ring, the idle
/// state, and both workers' park words.
struct BatchModel {
    idle: Idle,
    parks: [ParkState; 2],
    lifo: crate::scheduler::lifo::LifoSlot<crate::task::header::Header>,
    ring: WorkStealQueue<Arc<MockScheduler>>,
    inject: Inject<Arc<MockScheduler>>,
}

impl BatchModel {
    fn unpark(&self, i: usize) {
        self.parks[i].unpark(|| unreachable!("no reactor in this model"));
    }
}

/// Worker 0 delivers a batch of two driver wakes onto its own queues with the per-task
/// notify held back (the first fills the LIFO slot, the second pushes it into the ring),
/// decides once (`Idle::notify_after_batch`), then takes the slot's task and stays in
/// that poll for good. Worker 1 has found nothing (as a searcher or not) and parks
/// meanwhile, with no timeout under loom. The task in the ring must reach worker 1:
/// either its pre-sleep re-check sees it, or the batch's wake does; a lost wake
/// deadlocks the model.
fn dispatch_batch_against_a_parking_worker(searching: bool) {
    let sched = MockScheduler::new();
    let m = Arc::new(BatchModel {
        idle: Idle::new(2),
        parks: [ParkState::new(), ParkState::new()],
        lifo: crate::scheduler::lifo::LifoSlot::new(),
        ring: WorkStealQueue::new(),
        inject: Inject::new(),
    });
    if searching {
        assert!(m.idle.transition_worker_to_searching());
    }
    let thief = {
        let m = m.clone();
        thread::spawn(move || {
            // Worker 1's park sequence from `run.rs` and `worker_park.rs`.
            let last = m.idle.transition_worker_to_parked(1, searching);
            let recheck = last || m.idle.num_searching_seqcst() == 0;
            if !(recheck && m.ring.is_stealable()) {
                let _ = m.parks[1].park(None);
            }
            let claimed = !m.idle.unpark_self(1);
            let mine = WorkStealQueue::new();
            let got = m.ring.steal_into(&mine).map(|(t, _)| t.header().id);
            if claimed && m.idle.transition_worker_from_searching() {
                m.idle.notify_parked(|i| m.unpark(i));
            }
            got
        })
    };
    let (first, second) = (counted_task(&sched), counted_task(&sched));
    let first_id = first.header().id;
    assert!(m.lifo.push(first.into_raw()).is_none(), "the slot starts empty");
    let displaced = m.lifo.push(second.into_raw()).expect("the second task displaces the first");
    // SAFETY: the slot held a queue reference, now ours.
    let _ = m.ring.push_back_or_overflow(unsafe { Notified::from_raw(displaced) }, &m.inject);
    let queued_here = m.lifo.peek().is_some() as u32 + m.ring.len();
    m.idle.notify_after_batch(queued_here, false, |i| m.unpark(i));
    // Worker 0 runs the slot's task and never comes back for the ring.
    let own = m.lifo.pop().expect("the owner takes its slot");
    assert_eq!(thief.join().unwrap(), Some(first_id), "the task in the ring reached the other worker");
    // SAFETY: the slot held a queue reference, now ours.
    drop(unsafe { Notified::<Arc<MockScheduler>>::from_raw(own) });
}

#[test]
fn loom_dispatch_batch_wakes_a_parking_worker() {
    model(|| dispatch_batch_against_a_parking_worker(false));
}

#[test]
fn loom_dispatch_batch_wakes_the_last_searcher_as_it_parks() {
    model(|| dispatch_batch_against_a_parking_worker(true));
}

#[test]
fn loom_idle_the_last_worker_parks_with_no_timeout_against_a_producer() {
    // One worker, so it is the last to park: every worker parked, nobody holds the watch,
    // and it sleeps with no timeout at all (as an idle runtime does). Work pushed while it
    // parks must still reach it: its re-check sees the push or the producer wakes it.
    model(|| {
        let m = IdleModel::with_workers(1);
        let m2 = m.clone();
        let producer = thread::spawn(move || m2.produce());
        assert!(m.park_worker(0, false));
        producer.join().unwrap();
        assert_eq!(m.idle.num_parked(), 0);
    });
}

/// How the watcher's round ended in `loom_watch_*`.
#[derive(Debug, PartialEq)]
enum WatchRound {
    /// It saw the task in worker 0's LIFO slot before parking again.
    Saw,
    /// It parked again holding the watch: a real worker has a timeout and looks again.
    Watching,
    /// It parked with no timeout and was woken by the push's notify.
    Woken,
}

#[test]
fn loom_watch_a_lifo_push_is_seen_or_a_watcher_is_woken() {
    // Worker 1 is the watcher and its timeout just fired; worker 0 is running, fills its
    // empty LIFO slot (a slot-only push wakes nobody while someone watches) and then stays
    // in that poll for good. Worker 1 gives the watch back, looks at the slot and parks
    // again. The task must not be forgotten: worker 1 sees it, or parks again as the
    // watcher (so it will look again), or the push found nobody watching and woke it.
    // A park with neither deadlocks the model (no timeout under loom).
    use crate::scheduler::lifo::LifoSlot;
    use std::ptr::NonNull;
    model(|| {
        let m = IdleModel::new();
        assert!(!m.idle.transition_worker_to_parked(1, false));
        assert!(m.idle.claim_watch(1));
        let slot = Arc::new(LifoSlot::<u64>::new());
        let watcher = {
            let (m, slot) = (m.clone(), slot.clone());
            thread::spawn(move || {
                // Woken by its timeout: out of the parked state, then the watch is returned.
                assert!(m.idle.unpark_self(1));
                m.idle.release_watch(1);
                // `check_stuck_lifo`, before parking.
                if slot.peek().is_some() {
                    return WatchRound::Saw;
                }
                let _ = m.idle.transition_worker_to_parked(1, false);
                if !m.idle.all_parked() && m.idle.claim_watch(1) {
                    return WatchRound::Watching;
                }
                let _ = m.parks[1].park(None);
                // Woken by the push's notify: it was claimed as a searcher.
                assert!(!m.idle.unpark_self(1));
                assert!(m.idle.transition_worker_from_searching());
                assert!(slot.peek().is_some(), "woken, yet the slot looks empty");
                WatchRound::Woken
            })
        };
        // Worker 0's slot-only push (`schedule_local`).
        let task = NonNull::from(Box::leak(Box::new(7u64)));
        assert!(slot.push(task).is_none());
        if m.idle.watch_missing() {
            m.idle.notify_parked(|i| m.parks[i].unpark(|| unreachable!()));
        }
        let round = watcher.join().unwrap();
        assert!(matches!(round, WatchRound::Saw | WatchRound::Watching | WatchRound::Woken));
        let t = slot.pop().expect("nobody took the task");
        // SAFETY: the leaked box from above, taken back once.
        drop(unsafe { Box::from_raw(t.as_ptr()) });
    });
}

#[test]
fn loom_watch_a_lifo_push_after_every_worker_parked_wakes_a_worker() {
    // Every worker was parked, so nobody holds the watch. Worker 0 leaves the parked state
    // (woken for work), fills its empty LIFO slot and stays in that poll for good, while
    // worker 1 parks: as the last to park (no watch, no timeout) if it still sees worker 0
    // parked, or else as the watcher. The push must not leave the task unseen: the push
    // finds nobody watching and wakes worker 1, or worker 1 holds the watch. Without the
    // push's check, worker 1 sleeps forever and the model deadlocks.
    model(|| {
        let m = IdleModel::new();
        assert!(!m.idle.transition_worker_to_parked(0, false));
        // Worker 0 wakes (its own bit) before its push.
        park_against_a_lifo_push(m, |m| assert!(m.idle.unpark_self(0)));
    });
}

#[test]
fn loom_watch_a_lifo_push_by_a_worker_just_started_wakes_a_worker() {
    // Worker 0's thread has not started yet, so it counts as parked for the watch (rule
    // 7): worker 1, parking, may sleep with no watch and no timeout. Then worker 0 starts,
    // fills its empty LIFO slot and stays in that poll for good. The task must not go
    // unseen: worker 1 holds the watch (it saw worker 0 running), or the push finds nobody
    // watching and wakes it. Without the push's check, or if the push could miss worker
    // 1's parked bit (`Idle::worker_started` without its fence), worker 1 sleeps forever
    // and the model deadlocks.
    model(|| {
        let m = IdleModel::new();
        m.idle.expect_starts();
        m.idle.worker_started(1);
        park_against_a_lifo_push(m, |m| m.idle.worker_started(0));
    });
}

/// Worker 1 parks (as the watcher if it sees worker 0 out, else with no timeout) while
/// worker 0 comes out (`come_out`), makes the slot-only push of `schedule_local` into its
/// empty LIFO slot and stays in that poll for good. Worker 1 must hold the watch or be
/// woken by the push; a park with neither deadlocks the model.
fn park_against_a_lifo_push(m: Arc<IdleModel>, come_out: impl FnOnce(&IdleModel)) {
    use crate::scheduler::lifo::LifoSlot;
    use std::ptr::NonNull;
    let slot = Arc::new(LifoSlot::<u64>::new());
    let parker = {
        let (m, slot) = (m.clone(), slot.clone());
        thread::spawn(move || {
            let _ = m.idle.transition_worker_to_parked(1, false);
            if !m.idle.all_parked() && m.idle.claim_watch(1) {
                return WatchRound::Watching;
            }
            let _ = m.parks[1].park(None);
            assert!(!m.idle.unpark_self(1), "only the push's notify wakes it");
            assert!(m.idle.transition_worker_from_searching());
            assert!(slot.peek().is_some(), "woken, yet the slot looks empty");
            WatchRound::Woken
        })
    };
    come_out(&m);
    let task = NonNull::from(Box::leak(Box::new(7u64)));
    assert!(slot.push(task).is_none());
    if m.idle.watch_missing() {
        m.idle.notify_parked(|i| m.parks[i].unpark(|| unreachable!()));
    }
    let round = parker.join().unwrap();
    assert!(matches!(round, WatchRound::Watching | WatchRound::Woken));
    let t = slot.pop().expect("nobody took the task");
    // SAFETY: the leaked box from above, taken back once.
    drop(unsafe { Box::from_raw(t.as_ptr()) });
}
