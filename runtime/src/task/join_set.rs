//! `JoinSet`: a collection of spawned tasks, awaited in the order they finish.
//!
//! Finding the next finished task must not look at every task in the set (a set of a
//! hundred thousand connections would be scanned on every completion). So each entry has
//! a waker of its own, registered as its task's join waker: when the task finishes, that
//! waker pushes the entry's slot number onto the set's ready list (once, however often it
//! is woken, thanks to its `queued` flag) and wakes whoever waits in `join_next`. A
//! `join_next` pops slot numbers from that list and polls only those handles. A new entry
//! starts on the ready list, so its handle is polled once and its waker registered.
//!
//! A slot number may outlive its entry (the entry was removed by `detach_all`, and the
//! slot reused): popping it then polls the slot's new handle once more than needed, which
//! is harmless (a pending handle just registers its waker again).

use super::id::Id;
use super::join::{AbortHandle, JoinError, JoinHandle};
use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};

/// A set of tasks spawned on a runtime, whose outputs come back in the order the tasks
/// finish, whatever the order they were spawned in.
///
/// All tasks must have the same output type `T`. Dropping the set aborts every task still
/// in it (use [`detach_all`](JoinSet::detach_all) first to let them run on).
///
/// ```
/// let rt = volt::Runtime::new().unwrap();
/// let sum = rt.block_on(async {
///     let mut set = volt::task::JoinSet::new();
///     for i in 0..10u64 {
///         set.spawn(async move { i });
///     }
///     let mut sum = 0;
///     while let Some(res) = set.join_next().await {
///         sum += res.unwrap();
///     }
///     sum
/// });
/// assert_eq!(sum, 45);
/// ```
pub struct JoinSet<T> {
    slots: Vec<Slot<T>>,
    /// Slot numbers without a handle, for reuse.
    free: Vec<usize>,
    len: usize,
    ready: Arc<ReadyList>,
}

struct Slot<T> {
    handle: Option<JoinHandle<T>>,
    /// This slot's waker (an `EntryWaker`), registered with the handle on each poll.
    waker: Waker,
    entry: Arc<EntryWaker>,
}

/// What the tasks' wakers share with the set.
struct ReadyList {
    inner: Mutex<ReadyInner>,
}

struct ReadyInner {
    /// Slots whose handles should be polled.
    slots: VecDeque<usize>,
    /// The task waiting in `join_next`, if any.
    waiter: Option<Waker>,
}

/// The waker of one slot: puts the slot on the ready list.
struct EntryWaker {
    index: usize,
    /// Set while the slot sits on the ready list, so it is queued once.
    queued: AtomicBool,
    list: Arc<ReadyList>,
}

impl Wake for EntryWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if self.queued.swap(true, Ordering::AcqRel) {
            return;
        }
        let waiter = {
            let mut inner = self.list.lock();
            inner.slots.push_back(self.index);
            inner.waiter.take()
        };
        // Woken outside the lock: the waiter may run at once and take it.
        if let Some(w) = waiter {
            w.wake();
        }
    }
}

impl ReadyList {
    fn lock(&self) -> std::sync::MutexGuard<'_, ReadyInner> {
        // The lock guards plain pushes and pops, which never panic half way.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl<T> JoinSet<T> {
    /// An empty set.
    pub fn new() -> JoinSet<T> {
        JoinSet {
            slots: Vec::new(),
            free: Vec::new(),
            len: 0,
            ready: Arc::new(ReadyList { inner: Mutex::new(ReadyInner { slots: VecDeque::new(), waiter: None }) }),
        }
    }

    /// How many tasks are in the set (finished ones not yet taken out included).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the set holds no task.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Put a spawned task's handle in the set; returns its abort handle.
    fn insert(&mut self, handle: JoinHandle<T>) -> AbortHandle {
        let abort = handle.abort_handle();
        let index = match self.free.pop() {
            Some(i) => i,
            None => {
                let entry = Arc::new(EntryWaker {
                    index: self.slots.len(),
                    queued: AtomicBool::new(false),
                    list: self.ready.clone(),
                });
                let waker = Waker::from(entry.clone());
                self.slots.push(Slot { handle: None, waker, entry });
                self.slots.len() - 1
            }
        };
        self.slots[index].handle = Some(handle);
        self.len += 1;
        // Polled once by the next `join_next`, which registers the slot's waker.
        self.slots[index].waker.wake_by_ref();
        abort
    }

    /// Spawn `task` on the current runtime and add it to the set. The task starts at
    /// once, whether or not the set is awaited.
    ///
    /// # Panics
    /// Outside a Volt runtime.
    #[track_caller]
    pub fn spawn<F>(&mut self, task: F) -> AbortHandle
    where
        F: Future<Output = T> + Send + 'static,
        T: Send + 'static,
    {
        self.insert(crate::spawn(task))
    }

    /// Spawn `task` on the runtime of `handle` and add it to the set.
    #[track_caller]
    pub fn spawn_on<F>(&mut self, task: F, handle: &crate::runtime::Handle) -> AbortHandle
    where
        F: Future<Output = T> + Send + 'static,
        T: Send + 'static,
    {
        self.insert(handle.spawn(task))
    }

    /// Run the blocking closure `f` on the current runtime's blocking pool, and add it to
    /// the set (see [`spawn_blocking`](crate::task::spawn_blocking)). Aborting it has
    /// effect only before it starts.
    ///
    /// # Panics
    /// Outside a Volt runtime.
    #[track_caller]
    pub fn spawn_blocking<F>(&mut self, f: F) -> AbortHandle
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.insert(crate::task::spawn_blocking(f))
    }

    /// Run the blocking closure `f` on the blocking pool of `handle`'s runtime, and add it
    /// to the set.
    pub fn spawn_blocking_on<F>(&mut self, f: F, handle: &crate::runtime::Handle) -> AbortHandle
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.insert(handle.spawn_blocking(f))
    }

    /// Spawn the `!Send` future `task` on the current [`LocalSet`](crate::task::local::LocalSet)
    /// and add it to the set.
    ///
    /// # Panics
    /// Outside a `LocalSet` or a `LocalRuntime` (see [`spawn_local`](crate::task::spawn_local)).
    #[track_caller]
    pub fn spawn_local<F>(&mut self, task: F) -> AbortHandle
    where
        F: Future<Output = T> + 'static,
        T: 'static,
    {
        self.insert(crate::task::spawn_local(task))
    }

    /// Spawn the `!Send` future `task` on `local_set` and add it to the set. It runs when
    /// the `LocalSet` is driven.
    pub fn spawn_local_on<F>(&mut self, task: F, local_set: &crate::task::local::LocalSet) -> AbortHandle
    where
        F: Future<Output = T> + 'static,
        T: 'static,
    {
        self.insert(local_set.spawn_local(task))
    }

    /// Wait for any task in the set to finish and take it out: `None` when the set is
    /// empty. Cancel safe: dropping the future before it is ready takes nothing out.
    ///
    /// A task that panicked or was aborted comes back as `Err`.
    pub async fn join_next(&mut self) -> Option<Result<T, JoinError>> {
        std::future::poll_fn(|cx| self.poll_join_next(cx)).await
    }

    /// [`join_next`](JoinSet::join_next), with the id of the task that finished (in the
    /// error too: [`JoinError::id`]).
    pub async fn join_next_with_id(&mut self) -> Option<Result<(Id, T), JoinError>> {
        std::future::poll_fn(|cx| self.poll_join_next_with_id(cx)).await
    }

    /// A finished task, taken out of the set, if one is ready now; never waits. `None`
    /// both when the set is empty and when no task has finished yet.
    pub fn try_join_next(&mut self) -> Option<Result<T, JoinError>> {
        self.try_join_next_with_id().map(|r| r.map(|(_, v)| v))
    }

    /// [`try_join_next`](JoinSet::try_join_next), with the task's id.
    pub fn try_join_next_with_id(&mut self) -> Option<Result<(Id, T), JoinError>> {
        loop {
            let index = self.ready.lock().slots.pop_front()?;
            if let Some(out) = self.poll_slot(index) {
                return Some(out);
            }
        }
    }

    /// Poll for the next finished task: `Ready(None)` when the set is empty, `Pending`
    /// (with `cx`'s waker kept, to be woken when a task finishes) when none has finished.
    pub fn poll_join_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<T, JoinError>>> {
        self.poll_join_next_with_id(cx).map(|o| o.map(|r| r.map(|(_, v)| v)))
    }

    /// [`poll_join_next`](JoinSet::poll_join_next), with the task's id.
    pub fn poll_join_next_with_id(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<(Id, T), JoinError>>> {
        if self.len == 0 {
            return Poll::Ready(None);
        }
        // Each task's output taken spends a unit of the poll's budget, as with Tokio's.
        std::task::ready!(super::coop::poll_budget(cx));
        loop {
            let index = {
                let mut inner = self.ready.lock();
                match inner.slots.pop_front() {
                    Some(i) => i,
                    None => {
                        // Kept under the lock that the wakers push under: no wake is
                        // lost between the look and the wait.
                        let replaced = match &mut inner.waiter {
                            Some(w) if w.will_wake(cx.waker()) => None,
                            w => w.replace(cx.waker().clone()),
                        };
                        drop(inner);
                        // The waker it replaces is dropped after the lock: its `drop` may
                        // be anyone's code, which may finish a task of this set (whose
                        // waker takes this lock).
                        drop(replaced);
                        break;
                    }
                }
            };
            if let Some(out) = self.poll_slot(index) {
                super::coop::spend();
                return Poll::Ready(Some(out));
            }
        }
        record_join_set_wait(self.len);
        Poll::Pending
    }

    /// Poll the handle in slot `index` (taken off the ready list) with the slot's waker;
    /// if its task finished, take it out of the set.
    fn poll_slot(&mut self, index: usize) -> Option<Result<(Id, T), JoinError>> {
        let slot = self.slots.get_mut(index)?;
        // Cleared before the poll: a wake from here on queues the slot again.
        slot.entry.queued.store(false, Ordering::Release);
        let handle = slot.handle.as_mut()?;
        // The set spends the budget itself, once per output (`poll_join_next_with_id`).
        let out = match handle.poll_output(&slot.waker, false) {
            Poll::Pending => return None,
            Poll::Ready(out) => out,
        };
        let id = handle.id();
        slot.handle = None;
        self.free.push(index);
        self.len -= 1;
        Some(out.map(|v| (id, v)))
    }

    /// Abort every task in the set. They stay in it: `join_next` returns each (as a
    /// cancelled `JoinError`, unless it finished first).
    pub fn abort_all(&mut self) {
        for h in self.slots.iter().filter_map(|s| s.handle.as_ref()) {
            h.abort();
        }
    }

    /// Take every task out of the set without aborting it: each runs on, detached.
    pub fn detach_all(&mut self) {
        for (i, slot) in self.slots.iter_mut().enumerate() {
            if slot.handle.take().is_some() {
                self.free.push(i);
            }
        }
        self.len = 0;
        // Detached tasks keep their wakers (pointing at this set's ready list) until they
        // finish: they must not keep the waiting task alive meanwhile. (Dropped after the
        // lock, as in `poll_join_next_with_id`.)
        let waiter = self.ready.lock().waiter.take();
        drop(waiter);
    }

    /// Abort every task, and wait until all have finished (their futures dropped). The
    /// set is empty after; outputs and errors are discarded.
    pub async fn shutdown(&mut self) {
        self.abort_all();
        while self.join_next().await.is_some() {}
    }

    /// Wait for every task and return their outputs, in the order they finished.
    ///
    /// # Panics
    /// If a task panicked (the panic goes on in the caller, and the other tasks are
    /// aborted as the set drops) or was cancelled.
    pub async fn join_all(mut self) -> Vec<T> {
        let mut out = Vec::with_capacity(self.len);
        while let Some(res) = self.join_next().await {
            match res {
                Ok(v) => out.push(v),
                Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                Err(e) => panic!("volt: JoinSet::join_all: {e}"),
            }
        }
        out
    }
}

/// Name the wait of a task in `join_next`: "join set (N tasks)", formatted on the stack.
#[inline(never)]
fn record_join_set_wait(len: usize) {
    let mut w = LabelBuf::new();
    let _ = fmt::Write::write_fmt(&mut w, format_args!("join set ({len} tasks)"));
    crate::task::wait::record_label(w.as_str());
}

/// A wait label formatted on the stack (the wait path never allocates); text beyond its
/// 40 bytes, the most a label keeps, is cut at a character boundary.
pub(crate) struct LabelBuf {
    buf: [u8; 40],
    len: usize,
}

impl LabelBuf {
    pub(crate) fn new() -> LabelBuf {
        LabelBuf { buf: [0; 40], len: 0 }
    }

    pub(crate) fn as_str(&self) -> &str {
        // Only whole characters are ever copied in.
        std::str::from_utf8(&self.buf[..self.len]).unwrap_or("")
    }
}

impl fmt::Write for LabelBuf {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let room = self.buf.len() - self.len;
        let mut n = s.len().min(room);
        while !s.is_char_boundary(n) {
            n -= 1;
        }
        self.buf[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        Ok(())
    }
}

impl<T> Default for JoinSet<T> {
    fn default() -> JoinSet<T> {
        JoinSet::new()
    }
}

impl<T> Drop for JoinSet<T> {
    fn drop(&mut self) {
        self.abort_all();
        // The wakers of the tasks may outlive the set (until each task is freed): let go
        // of the task that waited in `join_next` now, not with the last of them (after
        // the lock, as in `poll_join_next_with_id`).
        let waiter = self.ready.lock().waiter.take();
        drop(waiter);
    }
}

impl<T> fmt::Debug for JoinSet<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinSet").field("len", &self.len).finish()
    }
}

/// Spawns each future on the current runtime (as [`JoinSet::spawn`]).
///
/// # Panics
/// Outside a Volt runtime.
impl<T, F> Extend<F> for JoinSet<T>
where
    F: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    fn extend<I: IntoIterator<Item = F>>(&mut self, iter: I) {
        for f in iter {
            self.spawn(f);
        }
    }
}

/// Collects futures into a set, spawning each on the current runtime.
///
/// # Panics
/// Outside a Volt runtime.
impl<T, F> FromIterator<F> for JoinSet<T>
where
    F: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    fn from_iter<I: IntoIterator<Item = F>>(iter: I) -> JoinSet<T> {
        let mut set = JoinSet::new();
        set.extend(iter);
        set
    }
}

#[cfg(test)]
mod tests {
    //! The ready list against the mock scheduler: a finished task is found without
    //! looking at the others.
    use super::*;
    use crate::task::test_util::{spawn, MockScheduler};

    fn poll_next<T>(set: &mut JoinSet<T>) -> Poll<Option<Result<T, JoinError>>> {
        set.poll_join_next(&mut Context::from_waker(Waker::noop()))
    }

    #[test]
    fn join_next_polls_only_the_slots_that_were_woken() {
        let sched = MockScheduler::new();
        let mut set = JoinSet::new();
        let mut senders = Vec::new();
        // Fewer under Miri, where each task's spawn and poll are interpreted.
        let n = if cfg!(miri) { 100 } else { 1000 };
        for i in 0..n as u32 {
            let (tx, rx) = futures::channel::oneshot::channel::<()>();
            senders.push(tx);
            set.insert(spawn(&sched, async move {
                let _ = rx.await;
                i
            }));
        }
        assert_eq!(sched.run_all(), n);
        // The first poll registers each new entry's waker once.
        assert_eq!(set.ready.lock().slots.len(), n);
        assert!(poll_next(&mut set).is_pending());
        assert!(set.ready.lock().slots.is_empty());
        // One task finishes: only its slot is queued, and only it is polled.
        let mid = n / 2;
        senders.remove(mid).send(()).unwrap();
        assert_eq!(sched.run_all(), 1);
        assert_eq!(set.ready.lock().slots.iter().copied().collect::<Vec<_>>(), [mid]);
        match poll_next(&mut set) {
            Poll::Ready(Some(Ok(v))) => assert_eq!(v as usize, mid),
            other => panic!("expected the finished task: {:?}", other.map(|o| o.map(|r| r.is_ok()))),
        }
        assert_eq!(set.len(), n - 1);
        assert!(poll_next(&mut set).is_pending());
        // Two finish: each of their slots is queued once.
        senders.remove(0).send(()).unwrap();
        senders.remove(0).send(()).unwrap();
        assert_eq!(sched.run_all(), 2);
        assert_eq!(set.ready.lock().slots.len(), 2);
        let mut got = Vec::new();
        while let Some(r) = set.try_join_next() {
            got.push(r.unwrap());
        }
        got.sort();
        assert_eq!(got, [0, 1]);
        // The freed slots are reused; dropping the set aborts the rest.
        drop(senders);
        drop(set);
        sched.run_all();
        assert_eq!(sched.finished(), n);
    }
}
