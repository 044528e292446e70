//! `JoinHandle` and `JoinError`.
//!
//! A `JoinHandle` owns one reference and the task's `join_interest`. Awaiting it uses the
//! join-waker protocol in `raw.rs`. Dropping the handle detaches the task; it keeps
//! running.
//!
//! # The blocking join
//! [`JoinHandle::join`] blocks the calling thread until the task finishes. Off the
//! workers it parks the thread until the completion wakes it (`block_until_complete` in
//! `scheduler/join.rs`). On a worker it follows one rule: **the join runs the target and nothing else.**
//! 1. *Help with the target.* If the target waits in this worker's LIFO slot or ring, the
//!    join takes it out and polls it right here, on the joining thread's stack, and
//!    looks again (at most 16 times per join, so a target that keeps yielding can't hold
//!    the worker's other tasks).
//! 2. *Otherwise hand the worker off and block.* The target is elsewhere: queued on
//!    another worker or the global queue, running, waiting for a wake, or on the
//!    blocking pool. The join gives this worker (its LIFO slot, ring and the rest of its
//!    state) to a blocking-pool thread, which runs the worker's loop from there on, and
//!    parks the joining thread until the target completes, like Tokio's
//!    `block_in_place`. The task that called `join` then finishes its poll on a thread
//!    that is no longer a worker; nothing is lost and no worker sits idle meanwhile.
//! 3. *Bounded nesting.* Helping nests: the target may itself join a task of its own.
//!    A worker helps only while its thread has used less than half its stack
//!    (`Builder::thread_stack_size`); deeper, step 2 applies, and the chain goes on on
//!    the new thread's stack. So a chain of joins of any depth completes, never
//!    overflowing a stack.
//!
//! Why not run any other task while waiting (a "work-stealing join", which this module
//! did first)? Every task run on the joining
//! thread's stack runs under whatever the joining task holds. A task that holds a
//! `std::sync::Mutex` and joins would run a task that needs the same mutex, which then
//! blocks in `lock()` on the very thread that holds it: a deadlock that no other thread
//! can break. Running only the target keeps that deadlock to a true cycle (the target
//! itself needs what its joiner holds), which deadlocks on any runtime.

use super::header;
use super::header::Header;
use super::id::Id;
use super::state::TransitionToScheduled;
use std::any::Any;
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::ptr::NonNull;
use std::task::{Context, Poll, Waker};

/// An owned permission to await (or block on) a spawned task's output.
///
/// Awaiting it yields `Ok(output)`, or a [`JoinError`] if the task panicked or was
/// cancelled. Dropping it detaches the task.
pub struct JoinHandle<T> {
    raw: NonNull<Header>,
    _output: PhantomData<T>,
}

// SAFETY: the handle only moves `T` (which is `Send`) out of the task; the header it
// points to is `Send + Sync`.
unsafe impl<T: Send> Send for JoinHandle<T> {}
// SAFETY: `&JoinHandle` only offers `abort`, `is_finished` and `id`, which touch the
// atomic state word only.
unsafe impl<T: Send> Sync for JoinHandle<T> {}

impl<T> Unpin for JoinHandle<T> {}

// A panic that unwinds past a handle leaves the task as it was: the handle only reads
// the task's state word and, once it completes, takes its output (both atomic steps).
// As Tokio's.
impl<T> std::panic::UnwindSafe for JoinHandle<T> {}
impl<T> std::panic::RefUnwindSafe for JoinHandle<T> {}

impl<T> JoinHandle<T> {
    /// Wrap the handle's reference.
    pub(crate) fn new(raw: NonNull<Header>) -> JoinHandle<T> {
        JoinHandle { raw, _output: PhantomData }
    }

    pub(crate) fn header(&self) -> &Header {
        // SAFETY: the handle's reference keeps the task alive.
        unsafe { self.raw.as_ref() }
    }

    /// Cancel the task. Its future is dropped at the next point where it is not being
    /// polled (right away if it is idle), unless a [`shield`](crate::task::shield) is up,
    /// in which case cancellation waits until the last shield drops. Awaiting the handle
    /// then gives a `JoinError` whose `is_cancelled()` is true, unless the task had
    /// already completed.
    pub fn abort(&self) {
        if self.header().state.transition_to_cancelled_remote() == TransitionToScheduled::Submit {
            // SAFETY: the transition took a queue reference, which `schedule` consumes.
            unsafe { (self.header().vtable.schedule)(self.raw) };
        }
    }

    /// Whether the task has finished (completed, panicked or been cancelled).
    pub fn is_finished(&self) -> bool {
        header::is_complete(self.raw)
    }

    /// The task's id: unique for the life of the process. The same value
    /// [`task::id`](crate::task::id::id) returns inside the task.
    pub fn id(&self) -> Id {
        Id::from_u64(self.header().id)
    }

    /// The task, for the blocking join (`scheduler::join`).
    pub(crate) fn raw(&self) -> NonNull<Header> {
        self.raw
    }

    /// A handle that can cancel the task (and ask whether it finished) without owning
    /// its output: it may outlive this handle, and be sent elsewhere.
    pub fn abort_handle(&self) -> AbortHandle {
        AbortHandle::new(self.raw)
    }
}

impl<T> JoinHandle<T> {
    /// Poll for the output, registering `waker`, without naming the caller's wait (a
    /// `JoinSet` names its own). With `spend`, taking the output spends a unit of the
    /// poll's budget, and a spent one leaves it (see `Vtable::try_read_output`).
    #[inline]
    pub(crate) fn poll_output(&mut self, waker: &Waker, spend: bool) -> Poll<Result<T, JoinError>> {
        let mut out: Poll<Result<T, JoinError>> = Poll::Pending;
        // SAFETY: `out` has the type the vtable writes; the handle's reference keeps the
        // task alive.
        unsafe { (self.header().vtable.try_read_output)(self.raw, &mut out as *mut _ as *mut (), waker, spend) };
        out
    }
}

impl<T> Future for JoinHandle<T> {
    type Output = Result<T, JoinError>;

    #[inline]
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // Taking a finished task's output spends a unit of the poll's budget, as Tokio's
        // does: a loop over handles of finished tasks gives its worker back in time.
        let out = self.poll_output(cx.waker(), true);
        if out.is_pending() {
            record_join_wait(self.header());
        }
        out
    }
}

/// Name the current task's wait: the joined task (or the blocking pool's job). Kept out
/// of `JoinHandle::poll`, which is then small enough to inline into the awaiting task's
/// poll, as it was before waits were recorded (measured: inlined, a join costs about 25
/// instructions less).
#[inline(never)]
fn record_join_wait(h: &super::header::Header) {
    let kind = if h.vtable.blocking { super::wait::W_BLOCKING } else { super::wait::W_JOIN };
    super::wait::record_task(kind, h.id);
}

impl<T> Drop for JoinHandle<T> {
    fn drop(&mut self) {
        // SAFETY: this releases the handle's reference, exactly once.
        unsafe { (self.header().vtable.drop_join_handle)(self.raw) };
    }
}

impl<T> fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinHandle").field("id", &self.id()).field("finished", &self.is_finished()).finish()
    }
}

/// Why a task did not produce its output.
pub struct JoinError {
    id: Id,
    repr: Repr,
}

enum Repr {
    Cancelled,
    Panic(Payload),
}

/// A panic's payload, kept so that a `JoinError` is `Sync` (as Tokio's is, so it goes
/// into `anyhow::Error` and other `Send + Sync` error boxes) although the payload need
/// only be `Send`. Through `&self` the payload is only ever downcast to a `Sync` type (a
/// message); anything else needs the payload by value ([`JoinError::into_panic`]).
struct Payload(Box<dyn Any + Send + 'static>);

// SAFETY: a shared `&Payload` gives access to the payload only through `message`, which
// calls `type_id` (it reads no data of the value, only its vtable) and hands out a
// reference to a `&'static str` or a `String`, both `Sync`; no `&dyn Any` of the payload
// itself ever reaches another thread. Moving it out takes it by value (`Send`).
unsafe impl Sync for Payload {}

impl Payload {
    /// The panic's message, when it is a string.
    fn message(&self) -> Option<&str> {
        self.0.downcast_ref::<&'static str>().copied().or_else(|| self.0.downcast_ref::<String>().map(String::as_str))
    }
}

impl JoinError {
    pub(crate) fn cancelled(id: u64) -> JoinError {
        JoinError { id: Id::from_u64(id), repr: Repr::Cancelled }
    }

    pub(crate) fn panic(id: u64, payload: Box<dyn Any + Send + 'static>) -> JoinError {
        JoinError { id: Id::from_u64(id), repr: Repr::Panic(Payload(payload)) }
    }

    /// The task was aborted, or dropped by runtime shutdown.
    pub fn is_cancelled(&self) -> bool {
        matches!(self.repr, Repr::Cancelled)
    }

    /// The task panicked (while being polled, or while its future was dropped).
    pub fn is_panic(&self) -> bool {
        matches!(self.repr, Repr::Panic(_))
    }

    /// The panic payload, to resume it with `std::panic::resume_unwind`.
    ///
    /// # Panics
    /// If the error is not a panic.
    #[track_caller]
    pub fn into_panic(self) -> Box<dyn Any + Send + 'static> {
        self.try_into_panic().expect("volt: `JoinError::into_panic` called on an error that is not a panic")
    }

    /// The panic payload, or the error back if it is not a panic.
    pub fn try_into_panic(self) -> Result<Box<dyn Any + Send + 'static>, JoinError> {
        match self.repr {
            Repr::Panic(p) => Ok(p.0),
            Repr::Cancelled => Err(self),
        }
    }

    /// The id of the task that failed.
    pub fn id(&self) -> Id {
        self.id
    }
}

impl fmt::Display for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.repr {
            Repr::Cancelled => write!(f, "task {} was cancelled", self.id),
            Repr::Panic(p) => match p.message() {
                Some(msg) => write!(f, "task {} panicked with message {msg:?}", self.id),
                None => write!(f, "task {} panicked", self.id),
            },
        }
    }
}

impl fmt::Debug for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.repr {
            Repr::Cancelled => write!(f, "JoinError::Cancelled({})", self.id),
            Repr::Panic(p) => match p.message() {
                Some(msg) => write!(f, "JoinError::Panic({}, {msg:?})", self.id),
                None => write!(f, "JoinError::Panic({}, ..)", self.id),
            },
        }
    }
}

impl std::error::Error for JoinError {}

impl From<JoinError> for std::io::Error {
    fn from(e: JoinError) -> std::io::Error {
        std::io::Error::other(e.to_string())
    }
}

/// Cancels a task without owning its output: see [`JoinHandle::abort_handle`].
///
/// Dropping it does nothing to the task. Unlike a `JoinHandle` it can be cloned and
/// kept by many owners.
pub struct AbortHandle {
    raw: NonNull<Header>,
}

// SAFETY: the handle only touches the task's atomic state word and its `Send + Sync`
// header, and owns a reference that keeps the task alive; it never touches the future
// or its output.
unsafe impl Send for AbortHandle {}
// SAFETY: as for `Send`: every method takes `&self` and touches atomics only.
unsafe impl Sync for AbortHandle {}

impl std::panic::UnwindSafe for AbortHandle {}
impl std::panic::RefUnwindSafe for AbortHandle {}

impl AbortHandle {
    /// Take a reference of its own on the task `raw`, which the caller keeps alive now.
    pub(crate) fn new(raw: NonNull<Header>) -> AbortHandle {
        // SAFETY: the caller's reference keeps the task alive while we add ours.
        unsafe { raw.as_ref() }.state.ref_inc();
        AbortHandle { raw }
    }

    fn header(&self) -> &Header {
        // SAFETY: the handle's reference keeps the task alive.
        unsafe { self.raw.as_ref() }
    }

    /// Cancel the task, as [`JoinHandle::abort`] does. Nothing happens if it already
    /// finished.
    pub fn abort(&self) {
        if self.header().state.transition_to_cancelled_remote() == TransitionToScheduled::Submit {
            // SAFETY: the transition took a queue reference, which `schedule` consumes.
            unsafe { (self.header().vtable.schedule)(self.raw) };
        }
    }

    /// Whether the task has finished (completed, panicked or been cancelled).
    pub fn is_finished(&self) -> bool {
        header::is_complete(self.raw)
    }

    /// The task's id, the same as its `JoinHandle::id`.
    pub fn id(&self) -> Id {
        Id::from_u64(self.header().id)
    }
}

impl Clone for AbortHandle {
    fn clone(&self) -> AbortHandle {
        AbortHandle::new(self.raw)
    }
}

impl Drop for AbortHandle {
    fn drop(&mut self) {
        if self.header().state.ref_dec() {
            // SAFETY: that was the last reference.
            unsafe { (self.header().vtable.dealloc)(self.raw) };
        }
    }
}

impl fmt::Debug for AbortHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AbortHandle").field("id", &self.id()).field("finished", &self.is_finished()).finish()
    }
}
