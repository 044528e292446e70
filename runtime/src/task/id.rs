//! Task ids ([`Id`], [`id`], [`try_id`]) and the task this thread is polling.

use super::header::Header;
use std::cell::Cell;
use std::ptr::NonNull;

/// A task's id: unique among all tasks of the process (ids are never reused), and the
/// same for every handle of one task ([`JoinHandle::id`](super::join::JoinHandle::id), [`AbortHandle::id`](super::join::AbortHandle::id),
/// [`JoinError::id`](super::join::JoinError::id)) and inside it ([`id`]).
///
/// It displays as its number, which is also the `id` the telemetry shows
/// (`Id::as_u64`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Id(std::num::NonZeroU64);

impl Id {
    /// The id of a task whose header says `id` (ids start at 1).
    pub(crate) fn from_u64(id: u64) -> Id {
        Id(std::num::NonZeroU64::new(id).expect("volt: task ids start at 1"))
    }

    /// The id as a number, as telemetry (`TaskInfo::id`, the event ring, the console)
    /// names the task.
    pub fn as_u64(&self) -> u64 {
        self.0.get()
    }
}

impl std::fmt::Display for Id {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(&self.0, f)
    }
}

/// The id of the task being polled on this thread.
///
/// # Panics
/// Outside a task (in `Runtime::block_on`, say, or on a thread of one's own); use
/// [`try_id`] there.
#[track_caller]
pub fn id() -> Id {
    try_id().expect("volt::task::id called outside a task")
}

/// The id of the task being polled on this thread, or `None` outside a task. A closure of
/// `spawn_blocking` is a task with an id of its own.
pub fn try_id() -> Option<Id> {
    // SAFETY: the current task is alive while it is being polled on this thread.
    current_task().map(|t| Id::from_u64(unsafe { t.as_ref() }.id))
}

/// A process-wide task id, never reused.
pub(crate) fn next_task_id() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
    static NEXT_ID: AtomicU64 = AtomicU64::new(1);
    NEXT_ID.fetch_add(1, Relaxed)
}

/// A number no runtime or `LocalSet` of this process had (`runtime::Id`, from 1): the
/// runtimes' and the sets' numbers come from one count, as Tokio's do. Kept here, below
/// both, so neither reaches up to the other for it.
pub(crate) fn next_runtime_id() -> std::num::NonZeroU64 {
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    std::num::NonZeroU64::new(NEXT.fetch_add(1, Relaxed)).expect("runtime ids start at 1")
}

thread_local! {
    /// The task this thread is polling, saved and restored around every poll (nested
    /// polls happen under `JoinHandle::join`).
    static CURRENT_TASK: Cell<Option<NonNull<Header>>> = const { Cell::new(None) };
}

/// The task being polled on this thread, if any.
#[inline(always)]
pub(crate) fn current_task() -> Option<NonNull<Header>> {
    CURRENT_TASK.with(|c| c.get())
}

/// Marks a task as current for the duration of a poll.
pub(crate) struct CurrentTaskGuard(Option<NonNull<Header>>);

impl CurrentTaskGuard {
    #[inline]
    pub(crate) fn enter(task: NonNull<Header>) -> CurrentTaskGuard {
        CurrentTaskGuard(CURRENT_TASK.with(|c| c.replace(Some(task))))
    }

    /// No task is current until dropped: for work a poll does on behalf of no task (the
    /// signal driver arming itself with the reactor), whose waits are not the task's.
    #[cfg_attr(not(feature = "signal"), allow(dead_code))]
    pub(crate) fn none() -> CurrentTaskGuard {
        CurrentTaskGuard(CURRENT_TASK.with(|c| c.replace(None)))
    }
}

impl Drop for CurrentTaskGuard {
    #[inline]
    fn drop(&mut self) {
        CURRENT_TASK.with(|c| c.set(self.0));
    }
}
