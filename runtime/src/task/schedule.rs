//! What a task needs from the thing that runs it ([`Schedule`]), and what one poll
//! carries through it ([`PollToken`], [`PollOutcome`], [`Outcome`]).

use super::header::Header;
use super::notified::Notified;
use std::ptr::NonNull;

/// How a task ended, for the telemetry counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    Completed,
    Cancelled,
    Panicked,
}

/// How a poll ended, for the event ring (stored in a `PollEnd` record's argument).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum PollOutcome {
    /// Pending; RUNNING -> IDLE.
    Idle = 0,
    /// Ready; the task completes.
    Ready = 1,
    /// Pending, but woken during the poll: RUNNING -> SCHEDULED, re-queued locally.
    Requeued = 2,
    /// Pending, and an abort took effect: it is cancelled next.
    Cancelled = 3,
    /// The poll panicked; the task completes as panicked.
    Panicked = 4,
}

/// What a scheduler carries through one poll: `poll_start` makes it, `poll_end` fills
/// in the end, and `poll_outcome` records it without touching the task (which may be gone
/// by then). Plain data on the poller's stack: the poll's context is looked up once.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PollToken {
    /// Scheduler-defined (the worker scheduler: the polling worker); null when nothing
    /// records, and then the other hooks do nothing.
    pub(crate) cx: *const (),
    /// Scheduler-defined (the worker scheduler: that worker's event ring).
    pub(crate) ring: *const (),
    /// Clock readings at the poll's start and end.
    pub(crate) start: u64,
    pub(crate) end: u64,
    /// Scheduler-defined bits recorded with the outcome.
    pub(crate) extra: u64,
    /// How long the task waited in a queue before this poll, in nanoseconds
    /// ([`PollToken::NOT_QUEUED`] if it is not known).
    pub(crate) waited: u64,
    /// The poll's length in nanoseconds, once the poll's end has scaled it for the task's
    /// histogram (the worker scheduler does so whenever it records into a ring);
    /// [`PollToken::NOT_QUEUED`] before.
    pub(crate) busy_ns: u64,
    /// Scheduler-defined (the worker scheduler: the task's group and whether this was
    /// its first poll, `telemetry::groups::poll_tag`; `NO_GROUP` when not read).
    pub(crate) group: u32,
}

impl PollToken {
    /// Nothing records this poll.
    pub(crate) const NONE: PollToken = PollToken {
        cx: std::ptr::null(),
        ring: std::ptr::null(),
        start: 0,
        end: 0,
        extra: 0,
        waited: Self::NOT_QUEUED,
        busy_ns: Self::NOT_QUEUED,
        group: u32::MAX,
    };
    /// `waited` (or `busy_ns`) when the value is not known.
    pub(crate) const NOT_QUEUED: u64 = u64::MAX;
}

/// Memory for a task cell from the global allocator (a cell is never zero-sized).
#[inline(always)]
pub(crate) fn alloc_global(layout: std::alloc::Layout) -> NonNull<u8> {
    // SAFETY: a task cell is never zero-sized (it starts with a header).
    let p = unsafe { std::alloc::alloc(layout) };
    match NonNull::new(p) {
        Some(p) => p,
        None => std::alloc::handle_alloc_error(layout),
    }
}

/// What a task needs from the thing that runs it.
pub(crate) trait Schedule: Send + Sync + Sized + 'static {
    /// Whether this is the blocking pool (see `Vtable::blocking`).
    const BLOCKING: bool = false;
    /// A waker (or an abort) moved the task to SCHEDULED: queue it.
    fn schedule(&self, task: Notified<Self>);
    /// The task was woken during its own poll (`yield_now` is one case): queue it behind
    /// the work that is already waiting, so a task that wakes itself can't starve others.
    fn yield_now(&self, task: Notified<Self>);
    /// Unlink the task from the owned list; true if it was linked (its reference returns
    /// to the caller).
    fn release(&self, task: NonNull<Header>) -> bool;
    /// Count a finished task (the caller holds it; it is COMPLETE next).
    fn on_complete(&self, task: NonNull<Header>, outcome: Outcome);
    /// Whether the runtime behind this scheduler has begun to shut down (a blocking join
    /// then stops waiting for good: see `scheduler::join`).
    #[inline(always)]
    fn is_shut_down(&self) -> bool {
        false
    }
    /// Run `f` in this scheduler's runtime context, as its own shutdown pass runs the
    /// drops of the futures it cancels (so a `Drop` that spawns finds its runtime).
    fn in_context(&self, f: &mut dyn FnMut()) {
        f()
    }
    /// A poll begins (a no-op unless the scheduler records events). `sampled`: a
    /// sampled wake queued the task (see `State::set_sampled`).
    #[inline(always)]
    fn poll_start(&self, _task: NonNull<Header>, _cx: *const (), _sampled: bool) -> PollToken {
        PollToken::NONE
    }
    /// A poll returned: account it while the caller still owns the task.
    #[inline(always)]
    fn poll_end(&self, _task: NonNull<Header>, _token: &mut PollToken) {}
    /// Record how the poll ended. Called after the state transition, when another thread
    /// may already own (or have freed) the task, so it takes no `&self` and no header.
    #[inline(always)]
    fn poll_outcome(_token: &PollToken, _id: u64, _outcome: PollOutcome) {}

    /// Memory for a task cell of `layout`, and the tag to keep in its state word for
    /// [`Schedule::free_cell`] (0: the global allocator).
    #[inline(always)]
    fn alloc_cell(&self, layout: std::alloc::Layout) -> (NonNull<u8>, u8) {
        (alloc_global(layout), 0)
    }

    /// Free a cell's memory (its contents already dropped) that `alloc_cell` gave with
    /// `owner` for `layout`.
    ///
    /// # Safety
    /// `ptr`, `layout` and `owner` must be what `alloc_cell` returned and was given; the
    /// memory is not used again.
    #[inline(always)]
    unsafe fn free_cell(&self, ptr: NonNull<u8>, layout: std::alloc::Layout, owner: u8) {
        debug_assert_eq!(owner, 0);
        // SAFETY: the caller's contract: the global allocator gave it with `layout`.
        unsafe { std::alloc::dealloc(ptr.as_ptr(), layout) }
    }
}
