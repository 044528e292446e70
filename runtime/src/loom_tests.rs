//! Loom models of the concurrency protocols, run with
//! `RUSTFLAGS="--cfg loom" cargo test -p volt --lib --release loom`.
//!
//! Each model runs the crate's real code (queue, task cell and state word, idle state,
//! park word) with loom's atomics, and explores every interleaving of the threads it
//! spawns. Under loom the local queue has 4 slots (overflow moves 2).

use crate::loom::{lock, thread, Arc, AtomicUsize, Mutex};
use crate::scheduler::idle::Idle;
use crate::scheduler::inject::Inject;
use crate::scheduler::park::ParkState;
use crate::scheduler::queue::WorkStealQueue;
use crate::task::test_util::{counted_task, spawn, DropCounter, MockScheduler};
use crate::task::{JoinHandle, Notified};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering::SeqCst;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

type Entry = Notified<Arc<MockScheduler>>;

/// `loom::model`, plus a check that loom explored more than one execution: a model whose
/// threads never interleave on shared state checks nothing, and would still pass.
pub(crate) fn model(f: impl Fn() + Sync + Send + 'static) {
    check_model(None, f)
}

/// `model` with at most `bound` preemptions per execution, for a model too large to
/// explore whole in CI's time.
pub(crate) fn model_bounded(bound: usize, f: impl Fn() + Sync + Send + 'static) {
    check_model(Some(bound), f)
}

fn check_model(preemption_bound: Option<usize>, f: impl Fn() + Sync + Send + 'static) {
    let executions = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = executions.clone();
    let mut b = loom::model::Builder::new();
    if preemption_bound.is_some() {
        b.preemption_bound = preemption_bound;
    }
    b.check(move || {
        counter.fetch_add(1, SeqCst);
        f();
    });
    let n = executions.load(SeqCst);
    assert!(n > 1, "loom explored only {n} execution(s)");
}

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

fn assert_each_once(mut got: Vec<u64>, mut want: Vec<u64>) {
    got.sort();
    want.sort();
    assert_eq!(got, want, "a task was lost or duplicated");
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
    model(|| {
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

/// A future that is ready once `ready` is set; otherwise it parks its waker in `slot`.
struct WaitReady {
    ready: Arc<AtomicUsize>,
    slot: Arc<Mutex<Option<Waker>>>,
    polls: Arc<AtomicUsize>,
}

impl Future for WaitReady {
    type Output = usize;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<usize> {
        self.polls.fetch_add(1, SeqCst);
        if self.ready.load(SeqCst) == 1 {
            return Poll::Ready(7);
        }
        *lock(&self.slot) = Some(cx.waker().clone());
        if self.ready.load(SeqCst) == 1 {
            return Poll::Ready(7);
        }
        Poll::Pending
    }
}

fn wait_ready() -> (WaitReady, Arc<AtomicUsize>, Arc<Mutex<Option<Waker>>>) {
    let ready = Arc::new(AtomicUsize::new(0));
    let slot = Arc::new(Mutex::new(None));
    let polls = Arc::new(AtomicUsize::new(0));
    (WaitReady { ready: ready.clone(), slot: slot.clone(), polls }, ready, slot)
}

fn set_and_wake(ready: &AtomicUsize, slot: &Mutex<Option<Waker>>) {
    ready.store(1, SeqCst);
    let w = lock(slot).take();
    if let Some(w) = w {
        w.wake();
    }
}

/// Read a finished handle's output without blocking.
fn output<T>(mut h: JoinHandle<T>) -> Option<Result<T, crate::task::JoinError>> {
    match Pin::new(&mut h).poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(v) => Some(v),
        Poll::Pending => None,
    }
}

#[test]
fn loom_task_wake_during_poll_is_not_lost() {
    model(|| {
        let sched = MockScheduler::new();
        let (fut, ready, slot) = wait_ready();
        let h = spawn(&sched, fut);
        let s2 = sched.clone();
        // The worker polls while another thread wakes: RUNNING, IDLE or SCHEDULED.
        let worker = thread::spawn(move || {
            s2.run_all();
        });
        set_and_wake(&ready, &slot);
        worker.join().unwrap();
        sched.run_all();
        assert_eq!(sched.completed.load(SeqCst), 1, "the wake was lost");
        assert_eq!(output(h).unwrap().unwrap(), 7);
        drop(slot);
        // The cell was freed: only our `sched` holds the scheduler now.
        assert_eq!(Arc::strong_count(&sched), 1);
    });
}

#[test]
fn loom_task_two_wakers_schedule_it_once() {
    model(|| {
        let sched = MockScheduler::new();
        let (fut, ready, slot) = wait_ready();
        let h = spawn(&sched, fut);
        sched.run_all();
        // Idle now, with its waker in `slot`; two threads wake clones of it.
        let w = lock(&slot).take().expect("registered");
        let w2 = w.clone();
        ready.store(1, SeqCst);
        let t = thread::spawn(move || w2.wake());
        w.wake_by_ref();
        t.join().unwrap();
        drop(w);
        // Exactly one queue entry: one more run completes it, nothing else is queued.
        assert_eq!(sched.run_all(), 1);
        assert_eq!(sched.completed.load(SeqCst), 1);
        assert_eq!(output(h).unwrap().unwrap(), 7);
    });
}

#[test]
fn loom_task_abort_against_completion() {
    model(|| {
        let sched = MockScheduler::new();
        let drops = Arc::new(AtomicUsize::new(0));
        let d = DropCounter(drops.clone());
        let (fut, ready, slot) = wait_ready();
        let h = Arc::new(spawn(&sched, async move {
            let _d = d;
            fut.await
        }));
        sched.run_all();
        let h2 = h.clone();
        let aborter = thread::spawn(move || h2.abort());
        set_and_wake(&ready, &slot);
        sched.run_all();
        aborter.join().unwrap();
        sched.run_all();
        assert_eq!(drops.load(SeqCst), 1, "the future was dropped exactly once");
        assert_eq!(sched.finished(), 1);
        let h = Arc::try_unwrap(h).ok().unwrap();
        match output(h).expect("finished") {
            Ok(v) => assert_eq!(v, 7),
            Err(e) => assert!(e.is_cancelled()),
        }
    });
}

#[test]
fn loom_task_join_handle_drop_against_completion() {
    model(|| {
        let sched = MockScheduler::new();
        let out_drops = Arc::new(AtomicUsize::new(0));
        let od = out_drops.clone();
        let h = spawn(&sched, async move { DropCounter(od) });
        let s2 = sched.clone();
        let worker = thread::spawn(move || {
            s2.run_all();
        });
        drop(h);
        worker.join().unwrap();
        assert_eq!(out_drops.load(SeqCst), 1, "the output was dropped exactly once");
        assert_eq!(Arc::strong_count(&sched), 1, "the task was freed");
    });
}

/// Reference counting in the state word's top bits: one thread clones the task's waker
/// and drops both clones while this one wakes it and another thread completes it. The
/// count never loses or gains a reference: the task completes once and its cell is freed
/// exactly once, after the last of them (the scheduler `Arc` in the cell says when).
#[test]
fn loom_task_waker_clones_against_wake_and_completion() {
    model(|| {
        let sched = MockScheduler::new();
        let (fut, ready, slot) = wait_ready();
        let h = spawn(&sched, fut);
        sched.run_all();
        let w = lock(&slot).take().expect("registered");
        let w2 = w.clone();
        let cloner = thread::spawn(move || {
            let w3 = w2.clone();
            drop(w2);
            drop(w3);
        });
        ready.store(1, SeqCst);
        w.wake();
        let s2 = sched.clone();
        let worker = thread::spawn(move || {
            s2.run_all();
        });
        cloner.join().unwrap();
        worker.join().unwrap();
        sched.run_all();
        assert_eq!(sched.completed.load(SeqCst), 1);
        assert_eq!(output(h).unwrap().unwrap(), 7);
        drop(slot);
        assert_eq!(Arc::strong_count(&sched), 1, "the cell was not freed (or freed early)");
    });
}

struct FlagWaker(std::sync::atomic::AtomicBool);

impl Wake for FlagWaker {
    fn wake(self: std::sync::Arc<Self>) {
        self.0.store(true, SeqCst);
    }
}

#[test]
fn loom_task_join_waker_against_completion() {
    model(|| {
        let sched = MockScheduler::new();
        let mut h = spawn(&sched, async { 3 });
        let s2 = sched.clone();
        let worker = thread::spawn(move || {
            s2.run_all();
        });
        let flag = std::sync::Arc::new(FlagWaker(std::sync::atomic::AtomicBool::new(false)));
        let waker = Waker::from(flag.clone());
        let first = Pin::new(&mut h).poll(&mut Context::from_waker(&waker));
        worker.join().unwrap();
        match first {
            Poll::Ready(v) => assert_eq!(v.unwrap(), 3),
            Poll::Pending => {
                // Registered before completion: the completion must have woken us.
                assert!(flag.0.load(SeqCst), "join waker not woken");
                assert_eq!(output(h).unwrap().unwrap(), 3);
            }
        }
    });
}

#[test]
fn loom_park_unpark_is_never_lost() {
    model(|| {
        let p = Arc::new(ParkState::new());
        let p2 = p.clone();
        let t = thread::spawn(move || p2.unpark(|| unreachable!()));
        // Under loom `park` has no timeout: a lost unpark deadlocks the model.
        let _ = p.park(None);
        t.join().unwrap();
    });
}

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

    /// The worker's park sequence from `worker.rs`: mark parked, re-check when nobody is
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

/// A stand-in for the reactor's eventfd waker: a sticky flag, as `mio::Waker` is.
struct ModelReactor {
    woken: Mutex<bool>,
    cond: crate::loom::Condvar,
}

impl ModelReactor {
    fn block(&self) {
        let mut w = lock(&self.woken);
        while !*w {
            w = self.cond.wait(w).unwrap();
        }
        *w = false;
    }
    fn wake(&self) {
        *lock(&self.woken) = true;
        self.cond.notify_one();
    }
}

#[test]
fn loom_park_in_reactor_against_unpark() {
    // The "wake while parking in the reactor" race: the unpark may land before the CAS to
    // PARKED_DRIVER, between it and the block, or during the block. The reactor has no
    // timeout here, so a lost wake deadlocks the model.
    model(|| {
        let p = Arc::new(ParkState::new());
        let r = Arc::new(ModelReactor { woken: Mutex::new(false), cond: crate::loom::Condvar::new() });
        let (p2, r2) = (p.clone(), r.clone());
        let t = thread::spawn(move || p2.unpark(|| r2.wake()));
        let _ = p.park_in_driver(|| r.block());
        t.join().unwrap();
    });
}

/// The LIFO slot: the owner pushes two tasks (the second displaces the first) and pops,
/// while another worker steals whatever it sees there, twice. Every task ends up with
/// exactly one of them (or is still in the slot), and a thief sees what the owner wrote
/// into a task before publishing it (loom checks the cell's accesses).
#[test]
fn loom_lifo_slot_owner_against_a_thief() {
    use crate::loom::UnsafeCell;
    use crate::scheduler::lifo::LifoSlot;
    use std::ptr::NonNull;
    type Item = UnsafeCell<u64>;
    fn take(p: NonNull<Item>) -> u64 {
        // SAFETY: every item is a leaked box, and whoever takes it from the slot owns it.
        let b = unsafe { Box::from_raw(p.as_ptr()) };
        // SAFETY: the taker owns the item now; nobody else touches it.
        b.with(|v| unsafe { *v })
    }
    model(|| {
        let slot = Arc::new(LifoSlot::<Item>::new());
        let thief = {
            let slot = slot.clone();
            thread::spawn(move || {
                let mut got = vec![];
                for _ in 0..2 {
                    if let Some(t) = slot.peek().and_then(|p| slot.steal(p)) {
                        got.push(take(t));
                    }
                }
                got
            })
        };
        let item = |v: u64| {
            let p = NonNull::from(Box::leak(Box::new(UnsafeCell::new(0))));
            // SAFETY: not yet published: only this thread knows the item.
            unsafe { p.as_ref() }.with_mut(|x| unsafe { *x = v });
            p
        };
        let mut got = vec![];
        assert!(slot.push(item(1)).is_none(), "the slot starts empty");
        got.extend(slot.push(item(2)).map(take));
        got.extend(slot.pop().map(take));
        got.extend(thief.join().unwrap());
        got.extend(slot.pop().map(take));
        assert_each_once(got, vec![1, 2]);
    });
}

/// What the batch model shares: the dispatching worker's LIFO slot and ring, the idle
/// state, and both workers' park words.
struct BatchModel {
    idle: Idle,
    parks: [ParkState; 2],
    lifo: crate::scheduler::lifo::LifoSlot<crate::task::raw::Header>,
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
            // Worker 1's park sequence from `worker.rs`.
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

/// The shutdown hand-off: worker 0 drops the runtime from one of its tasks (so it can't
/// wait for the workers) and then leaves its loop, while worker 1 leaves its own. Exactly
/// one of them finishes the shutdown, and only once both have left.
#[test]
fn loom_shutdown_begun_inside_is_finished_once_after_every_worker() {
    use crate::scheduler::exits::Exits;
    fn finish(exits: &Mutex<Exits>, finished: &AtomicUsize) {
        assert_eq!(lock(exits).count, 2, "finished before every worker left");
        finished.fetch_add(1, SeqCst);
    }
    model(|| {
        let exits = Arc::new(Mutex::new(Exits::default()));
        let finished = Arc::new(AtomicUsize::new(0));
        let other = {
            let (exits, finished) = (exits.clone(), finished.clone());
            thread::spawn(move || {
                let last = lock(&exits).worker_left(2);
                if last {
                    finish(&exits, &finished);
                }
            })
        };
        let now = lock(&exits).shut_down_inside(2);
        if now {
            finish(&exits, &finished);
        }
        let last = lock(&exits).worker_left(2);
        if last {
            finish(&exits, &finished);
        }
        other.join().unwrap();
        assert_eq!(finished.load(SeqCst), 1);
    });
}

/// The same begun on a thread that is no worker (a blocking-pool thread, or one that
/// handed its worker off), racing both workers' exits.
#[test]
fn loom_shutdown_begun_off_the_workers_is_finished_once_after_every_worker() {
    use crate::scheduler::exits::Exits;
    model(|| {
        let exits = Arc::new(Mutex::new(Exits::default()));
        let finished = Arc::new(AtomicUsize::new(0));
        let workers: Vec<_> = (0..2)
            .map(|_| {
                let (exits, finished) = (exits.clone(), finished.clone());
                thread::spawn(move || {
                    let mut e = lock(&exits);
                    if e.worker_left(2) {
                        assert_eq!(e.count, 2);
                        finished.fetch_add(1, SeqCst);
                    }
                })
            })
            .collect();
        {
            let mut e = lock(&exits);
            if e.shut_down_inside(2) {
                assert_eq!(e.count, 2);
                finished.fetch_add(1, SeqCst);
            }
        }
        for w in workers {
            w.join().unwrap();
        }
        assert_eq!(finished.load(SeqCst), 1);
    });
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
    use crate::scheduler::lifo::LifoSlot;
    use std::ptr::NonNull;
    model(|| {
        let m = IdleModel::new();
        assert!(!m.idle.transition_worker_to_parked(0, false));
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
        // Worker 0 wakes (its own bit), then the slot-only push of `schedule_local`.
        assert!(m.idle.unpark_self(0));
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
    });
}
