//! The loom model of the blocking join's hand-off (`join.rs`): the worker's queue and
//! owner-only state pass from the thread blocked in the join to a blocking-pool thread,
//! and the target's completion wakes the joiner. `join.rs` itself needs the whole runtime,
//! which is not built under loom, so the model reduces it to its synchronization.

use crate::loom::{lock, thread, Arc, Mutex};
use crate::loom_tests::model;
use crate::scheduler::inject::Inject;
use crate::scheduler::queue::WorkStealQueue;
use crate::task::test_util::{counted_task, spawn, MockScheduler};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Wake, Waker};

/// A worker's queue and owner-only state, handed from a thread blocked in a join to a
/// blocking-pool thread (`Handle::hand_off` and `Pool::spawn_now`, reduced to their
/// synchronization).
struct HandOffModel {
    /// Stands for `Core`: loom reports any access not ordered after the last owner's.
    core: crate::loom::UnsafeCell<u64>,
    ring: WorkStealQueue<Arc<MockScheduler>>,
    inject: Inject<Arc<MockScheduler>>,
    /// The pool's queue (a handed-off worker's index) and its idle threads' condvar.
    pool: Mutex<Option<usize>>,
    work: crate::loom::Condvar,
}

struct UnparkWaker(thread::Thread);

impl Wake for UnparkWaker {
    fn wake(self: std::sync::Arc<Self>) {
        self.0.unpark();
    }
}

#[test]
fn loom_join_hands_the_worker_off_and_the_target_wakes_the_joiner() {
    model(|| {
        let sched = MockScheduler::new();
        let m = Arc::new(HandOffModel {
            core: crate::loom::UnsafeCell::new(0),
            ring: WorkStealQueue::new(),
            inject: Inject::new(),
            pool: Mutex::new(None),
            work: crate::loom::Condvar::new(),
        });
        // The worker's ring holds another task and the join's target, which is not in
        // this worker's LIFO slot: the join hands off.
        let other = counted_task(&sched);
        let _ = m.ring.push_back_or_overflow(other, &m.inject);
        let mut h = spawn(&sched, async { 5 });
        let target = sched.pop().expect("spawn queued it");
        let _ = m.ring.push_back_or_overflow(target, &m.inject);
        // An idle pool thread: takes the worker and runs its loop (here: its ring).
        let pool_thread = {
            let m = m.clone();
            thread::spawn(move || {
                let mut job = lock(&m.pool);
                while job.is_none() {
                    job = m.work.wait(job).unwrap();
                }
                assert_eq!(job.take(), Some(0));
                drop(job);
                // SAFETY: the new owner; the pool's lock ordered the old owner's accesses
                // before this one (loom checks it).
                m.core.with_mut(|c| unsafe { *c += 1 });
                let mut ran = 0;
                while let Some(t) = m.ring.pop() {
                    t.run();
                    ran += 1;
                }
                ran
            })
        };
        // The joining thread: last use of the worker, then the hand-off, then it parks
        // until the target's completion wakes it.
        // SAFETY: still the owner.
        m.core.with_mut(|c| unsafe { *c += 1 });
        *lock(&m.pool) = Some(0);
        m.work.notify_one();
        let waker = Waker::from(std::sync::Arc::new(UnparkWaker(thread::current())));
        let out = loop {
            if let Poll::Ready(v) = Pin::new(&mut h).poll(&mut Context::from_waker(&waker)) {
                break v;
            }
            thread::park();
        };
        assert_eq!(out.unwrap(), 5);
        assert_eq!(pool_thread.join().unwrap(), 2, "the new owner ran the worker's queue");
        // SAFETY: the pool thread is joined.
        assert_eq!(m.core.with(|c| unsafe { *c }), 2);
    });
}
