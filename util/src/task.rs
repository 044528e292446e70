//! Task utilities on Volt's runtime: [`TaskTracker`], [`AbortOnDropHandle`],
//! [`AbortOnDrop`], [`JoinQueue`].

use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use volt::runtime::Handle;
use volt::task::{AbortHandle, Id, JoinError, JoinHandle, LocalSet};

pub use crate::join_map::{JoinMap, JoinMapKeys};
/// tokio-util's futures of a tracker, and `LocalPoolHandle` (which runs its tasks on
/// single-threaded Tokio runtimes of its own, not on Volt).
pub use tokio_util::task::task_tracker::{TaskTrackerWaitFuture, TrackedFuture};
pub use tokio_util::task::LocalPoolHandle;

/// The task tracker's types where tokio-util has them.
pub mod task_tracker {
    pub use super::{TaskTracker, TaskTrackerToken, TaskTrackerWaitFuture, TrackedFuture};
}

/// Counts the tasks spawned through it (or futures tracked with it) until each finishes,
/// and lets a shutdown [`close`](TaskTracker::close) it and [`wait`](TaskTracker::wait)
/// for them: tokio-util's `TaskTracker`, whose `spawn_*` methods spawn on Volt. Clones
/// share one count.
#[derive(Clone, Default)]
#[repr(transparent)]
pub struct TaskTracker(tokio_util::task::TaskTracker);

/// Held by a tracked task: the tracker counts it until the token is dropped.
#[derive(Clone)]
pub struct TaskTrackerToken {
    token: tokio_util::task::task_tracker::TaskTrackerToken,
    /// The tracker, for `task_tracker` (a clone: one reference count).
    tracker: TaskTracker,
}

impl TaskTracker {
    /// An open tracker with nothing in it.
    pub fn new() -> Self {
        Self::default()
    }

    /// Resolves once the tracker is closed and every tracked task has finished.
    pub fn wait(&self) -> TaskTrackerWaitFuture<'_> {
        self.0.wait()
    }

    /// Close it, so that `wait` can finish once its tasks do (more can still be
    /// spawned); false if it was closed already.
    pub fn close(&self) -> bool {
        self.0.close()
    }

    /// Open it again; false if it was open.
    pub fn reopen(&self) -> bool {
        self.0.reopen()
    }

    /// Whether it is closed.
    pub fn is_closed(&self) -> bool {
        self.0.is_closed()
    }

    /// The tasks it tracks now.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether it tracks no task now.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Spawn `task` on the current Volt runtime, tracked.
    #[track_caller]
    pub fn spawn<F>(&self, task: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        volt::spawn(self.track_future(task))
    }

    /// Spawn `task` on the runtime of `handle`, tracked.
    #[track_caller]
    pub fn spawn_on<F>(&self, task: F, handle: &Handle) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        handle.spawn(self.track_future(task))
    }

    /// Spawn `task` on the current `LocalSet`, tracked.
    #[track_caller]
    pub fn spawn_local<F>(&self, task: F) -> JoinHandle<F::Output>
    where
        F: Future + 'static,
        F::Output: 'static,
    {
        volt::task::spawn_local(self.track_future(task))
    }

    /// Spawn `task` on `local_set`, tracked.
    #[track_caller]
    pub fn spawn_local_on<F>(&self, task: F, local_set: &LocalSet) -> JoinHandle<F::Output>
    where
        F: Future + 'static,
        F::Output: 'static,
    {
        local_set.spawn_local(self.track_future(task))
    }

    /// Run `task` on the current runtime's blocking pool, tracked until it returns.
    #[track_caller]
    pub fn spawn_blocking<F, T>(&self, task: F) -> JoinHandle<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let token = self.token();
        volt::task::spawn_blocking(move || {
            let _token = token;
            task()
        })
    }

    /// Run `task` on the blocking pool of `handle`'s runtime, tracked until it returns.
    #[track_caller]
    pub fn spawn_blocking_on<F, T>(&self, task: F, handle: &Handle) -> JoinHandle<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let token = self.token();
        handle.spawn_blocking(move || {
            let _token = token;
            task()
        })
    }

    /// `future`, counted by the tracker until it completes or is dropped.
    pub fn track_future<F: Future>(&self, future: F) -> TrackedFuture<F> {
        self.0.track_future(future)
    }

    /// A token the tracker counts until it is dropped.
    pub fn token(&self) -> TaskTrackerToken {
        TaskTrackerToken { token: self.0.token(), tracker: self.clone() }
    }

    /// Whether both are the same tracker (clones of one another).
    pub fn ptr_eq(left: &TaskTracker, right: &TaskTracker) -> bool {
        tokio_util::task::TaskTracker::ptr_eq(&left.0, &right.0)
    }
}

impl fmt::Debug for TaskTracker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl TaskTrackerToken {
    /// The tracker that counts this token.
    pub fn task_tracker(&self) -> &TaskTracker {
        &self.tracker
    }
}

impl fmt::Debug for TaskTrackerToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.token.fmt(f)
    }
}

/// A [`JoinHandle`] that aborts its task when dropped (tokio-util's
/// `AbortOnDropHandle`): awaiting it gives the task's result.
#[must_use = "dropped at once, it aborts the task"]
pub struct AbortOnDropHandle<T>(Option<JoinHandle<T>>);

impl<T> AbortOnDropHandle<T> {
    /// Abort `handle`'s task when this is dropped.
    pub fn new(handle: JoinHandle<T>) -> Self {
        Self(Some(handle))
    }

    /// The handle (taken out only by `detach`, which consumes `self`).
    fn handle(&self) -> &JoinHandle<T> {
        self.0.as_ref().expect("an AbortOnDropHandle keeps its handle until detached")
    }

    /// Abort the task now.
    pub fn abort(&self) {
        self.handle().abort();
    }

    /// Whether the task has finished.
    pub fn is_finished(&self) -> bool {
        self.handle().is_finished()
    }

    /// A handle that can abort the task, and does not on drop.
    pub fn abort_handle(&self) -> AbortHandle {
        self.handle().abort_handle()
    }

    /// The handle back, which no longer aborts the task on drop.
    pub fn detach(mut self) -> JoinHandle<T> {
        self.0.take().expect("an AbortOnDropHandle keeps its handle until detached")
    }
}

impl<T> Drop for AbortOnDropHandle<T> {
    fn drop(&mut self) {
        if let Some(handle) = &self.0 {
            handle.abort();
        }
    }
}

impl<T> Future for AbortOnDropHandle<T> {
    type Output = Result<T, JoinError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let handle = self.0.as_mut().expect("an AbortOnDropHandle keeps its handle until detached");
        Pin::new(handle).poll(cx)
    }
}

impl<T> AsRef<JoinHandle<T>> for AbortOnDropHandle<T> {
    fn as_ref(&self) -> &JoinHandle<T> {
        self.handle()
    }
}

impl<T> fmt::Debug for AbortOnDropHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AbortOnDropHandle").field("id", &self.handle().id()).finish()
    }
}

/// An [`AbortHandle`] that aborts its task when dropped (tokio-util's `AbortOnDrop`).
#[must_use = "dropped at once, it aborts the task"]
pub struct AbortOnDrop(Option<AbortHandle>);

impl AbortOnDrop {
    /// Abort `handle`'s task when this is dropped.
    pub fn new(handle: AbortHandle) -> Self {
        Self(Some(handle))
    }

    fn handle(&self) -> &AbortHandle {
        self.0.as_ref().expect("an AbortOnDrop keeps its handle until detached")
    }

    /// Abort the task now.
    pub fn abort(&self) {
        self.handle().abort();
    }

    /// Whether the task has finished.
    pub fn is_finished(&self) -> bool {
        self.handle().is_finished()
    }

    /// The handle back, which no longer aborts the task on drop.
    pub fn detach(mut self) -> AbortHandle {
        self.0.take().expect("an AbortOnDrop keeps its handle until detached")
    }
}

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        if let Some(handle) = &self.0 {
            handle.abort();
        }
    }
}

impl fmt::Debug for AbortOnDrop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AbortOnDrop").field("id", &self.handle().id()).finish()
    }
}

/// Tasks joined in the order they were spawned (tokio-util's `JoinQueue`, a first-in,
/// first-out `JoinSet`); dropping it aborts the tasks still in it.
pub struct JoinQueue<T>(VecDeque<AbortOnDropHandle<T>>);

impl<T> JoinQueue<T> {
    /// An empty queue.
    pub const fn new() -> Self {
        Self(VecDeque::new())
    }

    /// An empty queue with room for `capacity` tasks.
    pub fn with_capacity(capacity: usize) -> Self {
        Self(VecDeque::with_capacity(capacity))
    }

    /// Tasks in the queue (finished or not, until joined).
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the queue is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Spawn `task` on the current runtime, at the back of the queue.
    #[track_caller]
    pub fn spawn<F>(&mut self, task: F) -> AbortHandle
    where
        F: Future<Output = T> + Send + 'static,
        T: Send + 'static,
    {
        self.push_back(volt::spawn(task))
    }

    /// Spawn `task` on `handle`'s runtime, at the back of the queue.
    #[track_caller]
    pub fn spawn_on<F>(&mut self, task: F, handle: &Handle) -> AbortHandle
    where
        F: Future<Output = T> + Send + 'static,
        T: Send + 'static,
    {
        self.push_back(handle.spawn(task))
    }

    /// Spawn `task` on the current `LocalSet`, at the back of the queue.
    #[track_caller]
    pub fn spawn_local<F>(&mut self, task: F) -> AbortHandle
    where
        F: Future<Output = T> + 'static,
        T: 'static,
    {
        self.push_back(volt::task::spawn_local(task))
    }

    /// Run `f` on the current runtime's blocking pool, at the back of the queue.
    #[track_caller]
    pub fn spawn_blocking<F>(&mut self, f: F) -> AbortHandle
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.push_back(volt::task::spawn_blocking(f))
    }

    /// Run `f` on the blocking pool of `handle`'s runtime, at the back of the queue.
    #[track_caller]
    pub fn spawn_blocking_on<F>(&mut self, f: F, handle: &Handle) -> AbortHandle
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.push_back(handle.spawn_blocking(f))
    }

    fn push_back(&mut self, handle: JoinHandle<T>) -> AbortHandle {
        let handle = AbortOnDropHandle::new(handle);
        let abort = handle.abort_handle();
        self.0.push_back(handle);
        abort
    }

    /// The result of the task at the front, once it finishes; `None` when the queue is
    /// empty.
    pub async fn join_next(&mut self) -> Option<Result<T, JoinError>> {
        std::future::poll_fn(|cx| self.poll_join_next(cx)).await
    }

    /// [`join_next`](JoinQueue::join_next), with the task's id.
    pub async fn join_next_with_id(&mut self) -> Option<Result<(Id, T), JoinError>> {
        std::future::poll_fn(|cx| self.poll_join_next_with_id(cx)).await
    }

    /// The front task's result if it has finished, without waiting.
    pub fn try_join_next(&mut self) -> Option<Result<T, JoinError>> {
        self.try_join_next_with_id().map(|r| r.map(|(_, output)| output))
    }

    /// [`try_join_next`](JoinQueue::try_join_next), with the task's id.
    pub fn try_join_next_with_id(&mut self) -> Option<Result<(Id, T), JoinError>> {
        if !self.0.front()?.is_finished() {
            return None;
        }
        // Finished, so one poll gives its result; unconstrained, so a spent budget of
        // the caller's cannot refuse it.
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        let front = self.0.front_mut()?;
        match Pin::new(&mut volt::task::unconstrained(front)).poll(&mut cx) {
            Poll::Ready(result) => Some(self.pop_front_with(result)),
            Poll::Pending => None,
        }
    }

    /// Abort every task, then wait for all of them to end.
    pub async fn shutdown(&mut self) {
        self.abort_all();
        while self.join_next().await.is_some() {}
    }

    /// Every task's output, in the order they were spawned; a task that panicked panics
    /// here with its payload, and one that was cancelled panics with its error.
    pub async fn join_all(mut self) -> Vec<T> {
        let mut out = Vec::with_capacity(self.len());
        while let Some(result) = self.join_next().await {
            match result {
                Ok(output) => out.push(output),
                Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                Err(e) => panic!("{e}"),
            }
        }
        out
    }

    /// Abort every task (they stay in the queue until joined).
    pub fn abort_all(&mut self) {
        self.0.iter().for_each(AbortOnDropHandle::abort);
    }

    /// Empty the queue without aborting anything: the tasks run on, unjoined.
    pub fn detach_all(&mut self) {
        self.0.drain(..).for_each(|h| drop(h.detach()));
    }

    /// Poll for the front task's result; `Ready(None)` when the queue is empty.
    pub fn poll_join_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<T, JoinError>>> {
        self.poll_join_next_with_id(cx).map(|r| r.map(|r| r.map(|(_, output)| output)))
    }

    /// [`poll_join_next`](JoinQueue::poll_join_next), with the task's id.
    pub fn poll_join_next_with_id(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<(Id, T), JoinError>>> {
        let Some(front) = self.0.front_mut() else { return Poll::Ready(None) };
        Pin::new(front).poll(cx).map(|result| Some(self.pop_front_with(result)))
    }

    /// Take the front task out, now that `result` is its result.
    fn pop_front_with(&mut self, result: Result<T, JoinError>) -> Result<(Id, T), JoinError> {
        let handle = self.0.pop_front().expect("the front task was just polled").detach();
        let id = handle.id();
        result.map(|output| (id, output))
    }
}

impl<T> Default for JoinQueue<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> fmt::Debug for JoinQueue<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.0.iter().map(|h| h.as_ref().id())).finish()
    }
}

impl<T, F> FromIterator<F> for JoinQueue<T>
where
    F: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    fn from_iter<I: IntoIterator<Item = F>>(iter: I) -> Self {
        let mut queue = Self::new();
        for task in iter {
            queue.spawn(task);
        }
        queue
    }
}
