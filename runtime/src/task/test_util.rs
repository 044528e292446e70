//! A scheduler for unit tests and loom models: `schedule` pushes into a queue the test
//! drains by hand, and completions are counted, so a model can check that every task
//! was run, completed and freed exactly once.

use super::header::Header;
use super::join::JoinHandle;
use super::list::OwnedTasks;
use super::notified::Notified;
use super::raw::new_task;
use super::schedule::{Outcome, Schedule};
use crate::loom::{lock, Arc, AtomicUsize, Mutex};
use std::collections::VecDeque;
use std::future::Future;
use std::ptr::NonNull;
use std::sync::atomic::Ordering::SeqCst;

pub(crate) struct MockScheduler {
    pub(crate) queue: Mutex<VecDeque<Notified<Arc<MockScheduler>>>>,
    pub(crate) owned: OwnedTasks,
    pub(crate) completed: AtomicUsize,
    pub(crate) cancelled: AtomicUsize,
    pub(crate) panicked: AtomicUsize,
    pub(crate) yields: AtomicUsize,
}

impl MockScheduler {
    pub(crate) fn new() -> Arc<MockScheduler> {
        Arc::new(MockScheduler {
            queue: Mutex::new(VecDeque::new()),
            owned: OwnedTasks::new(1),
            completed: AtomicUsize::new(0),
            cancelled: AtomicUsize::new(0),
            panicked: AtomicUsize::new(0),
            yields: AtomicUsize::new(0),
        })
    }

    /// Pop one scheduled task, if any.
    pub(crate) fn pop(&self) -> Option<Notified<Arc<MockScheduler>>> {
        lock(&self.queue).pop_front()
    }

    /// Run queued tasks until the queue is empty; returns how many runs happened.
    pub(crate) fn run_all(&self) -> usize {
        let mut n = 0;
        while let Some(t) = self.pop() {
            t.run();
            n += 1;
        }
        n
    }

    pub(crate) fn finished(&self) -> usize {
        self.completed.load(SeqCst) + self.cancelled.load(SeqCst) + self.panicked.load(SeqCst)
    }
}

impl Schedule for Arc<MockScheduler> {
    fn schedule(&self, task: Notified<Self>) {
        lock(&self.queue).push_back(task);
    }
    fn yield_now(&self, task: Notified<Self>) {
        self.yields.fetch_add(1, SeqCst);
        lock(&self.queue).push_back(task);
    }
    fn release(&self, task: NonNull<Header>) -> bool {
        self.owned.remove(task)
    }
    fn on_complete(&self, _task: NonNull<Header>, outcome: Outcome) {
        let c = match outcome {
            Outcome::Completed => &self.completed,
            Outcome::Cancelled => &self.cancelled,
            Outcome::Panicked => &self.panicked,
        };
        c.fetch_add(1, SeqCst);
    }
}

/// Adds one to its counter when dropped (put it in a future or an output).
pub(crate) struct DropCounter(pub(crate) Arc<AtomicUsize>);

impl Drop for DropCounter {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
    }
}

/// Spawn onto the mock: link into its owned list and queue the first run.
pub(crate) fn spawn<F>(sched: &Arc<MockScheduler>, future: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let (task, notified, join) = new_task(future, sched.clone(), super::id::next_task_id(), None);
    assert!(sched.owned.bind(task.raw()));
    let _ = task.into_raw();
    sched.schedule(notified);
    join
}

/// A bare queue entry (only the queue's reference is left), for queue tests: dropping
/// it frees the task.
pub(crate) fn counted_task(sched: &Arc<MockScheduler>) -> Notified<Arc<MockScheduler>> {
    let (task, notified, join) = new_task(async {}, sched.clone(), super::id::next_task_id(), None);
    drop(join);
    drop(task);
    notified
}
