//! Loom models of the task state word and cell (`state.rs`, `raw.rs`): a wake during a
//! poll, two wakers at once, abort and join-handle drop against completion, waker
//! reference counting, and the join waker.

use crate::loom::{lock, thread, Arc, AtomicUsize, Mutex};
use crate::loom_tests::model;
use crate::task::join::JoinHandle;
use crate::task::test_util::{spawn, DropCounter, MockScheduler};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering::SeqCst;
use std::task::{Context, Poll, Wake, Waker};

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
fn output<T>(mut h: JoinHandle<T>) -> Option<Result<T, crate::task::join::JoinError>> {
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
