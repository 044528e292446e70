//! The type-erased part of every task ([`Header`]) and its functions ([`Vtable`]):
//! what queues, wakers, handles and the task list hold, whatever the future's type.

use super::state::{Lifecycle, State};
use crate::loom::UnsafeCell;
use std::ptr::NonNull;
use std::sync::atomic::AtomicU32;
use std::task::Waker;

/// The type-erased part of every task. Queues and wakers only ever see this.
#[repr(C)]
pub(crate) struct Header {
    /// The packed 64-bit state word.
    pub(crate) state: State,
    /// The per-(future, scheduler) functions.
    pub(crate) vtable: &'static Vtable,
    /// Never reused; assigned at spawn.
    pub(crate) id: u64,
    /// Intrusive link for the global injection queue; only touched under its lock.
    pub(crate) queue_next: UnsafeCell<Option<NonNull<Header>>>,
    /// Intrusive links for the owned-task list; only touched under its shard lock.
    pub(crate) owned: UnsafeCell<OwnedLinks>,
    /// Whether the task is in the owned-task list, so removal is idempotent; only touched
    /// under that list's shard lock.
    pub(crate) linked: UnsafeCell<bool>,
    /// The index of its task group (`telemetry::groups`), found once at its spawn and
    /// never changed; 0 for a task without statistics, which no group counts.
    pub(crate) group: u8,
    /// The number of the task's last poll to end (0: none yet; counted only for a task
    /// with statistics, see [`next_poll_number`]): the number that stamps the waits a
    /// poll records, that tells a deadlock reading whether a task ran, and whose 0 marks
    /// a first poll. Written only by the thread polling the task (RUNNING is exclusive),
    /// so a relaxed load and store; read by anyone.
    ///
    /// Here rather than in the statistics, which a poll need not touch: the header's
    /// line is the one the poll's state transition writes anyway. With `linked` and
    /// `group` it fills the eight bytes after the six words, so the header stays 56.
    pub(crate) polls: AtomicU32,
}

/// The poll number after `n` (`Header::polls`): one more, wrapping past `u32::MAX` to 1,
/// never back to 0, which means "never polled". Readers compare numbers only for
/// equality, so the wrap is harmless.
#[inline(always)]
pub(crate) fn next_poll_number(n: u32) -> u32 {
    n.wrapping_add(1).max(1)
}

/// The owned-task list's links, guarded by that list's shard lock.
#[derive(Default)]
pub(crate) struct OwnedLinks {
    pub(crate) prev: Option<NonNull<Header>>,
    pub(crate) next: Option<NonNull<Header>>,
}

// SAFETY: the header is shared between threads; its non-atomic fields are `queue_next`,
// `owned` and `linked`, each accessed only while holding the lock of the list it belongs
// to, and `group`, written before the task is shared and never after.
unsafe impl Send for Header {}
// SAFETY: see `Send` above.
unsafe impl Sync for Header {}

/// The functions a type-erased task needs, monomorphised per future and scheduler.
pub(crate) struct Vtable {
    /// Run the task once: transition to RUNNING, poll or cancel, transition out.
    pub(crate) poll: unsafe fn(NonNull<Header>, *const ()),
    /// Push a freshly SCHEDULED task to its scheduler (takes the queue reference).
    pub(crate) schedule: unsafe fn(NonNull<Header>),
    /// Free the cell. Only called when the reference count reached zero.
    pub(crate) dealloc: unsafe fn(NonNull<Header>),
    /// `JoinHandle::poll`: write the output to `dst` if complete, else register the waker.
    /// With `spend`, taking the output spends a unit of the poll's cooperative budget, and
    /// a spent budget leaves it there (the waker's task is woken to come back).
    pub(crate) try_read_output: unsafe fn(NonNull<Header>, *mut (), &Waker, bool),
    /// `JoinHandle::drop`: give up interest (dropping the output if it is there).
    pub(crate) drop_join_handle: unsafe fn(NonNull<Header>),
    /// Runtime shutdown: cancel the task if nobody is polling it.
    pub(crate) shutdown: unsafe fn(NonNull<Header>),
    /// Whether the task's runtime has begun to shut down (`Schedule::is_shut_down`).
    pub(crate) runtime_shut_down: unsafe fn(NonNull<Header>) -> bool,
    /// If the task's runtime has begun to shut down, cancel the task (if nobody polls
    /// it) in that runtime's context, as the shutdown's own pass would; whether it had.
    pub(crate) cancel_if_shut_down: unsafe fn(NonNull<Header>) -> bool,
    /// Where a `TaskStats` tail starts, for tasks that have one.
    pub(crate) stats_offset: usize,
    /// A blocking-pool task (`spawn_blocking`): its joiner waits on "blocking".
    pub(crate) blocking: bool,
}

/// Whether the task behind `ptr` has reached COMPLETE (used by `JoinHandle::join`).
pub(crate) fn is_complete(ptr: NonNull<Header>) -> bool {
    // SAFETY: callers hold a reference.
    unsafe { ptr.as_ref() }.state.load().lifecycle() == Lifecycle::Complete
}

/// Whether the task sits in a run queue now (a hint: it may be taken at once).
pub(crate) fn is_scheduled(ptr: NonNull<Header>) -> bool {
    // SAFETY: callers hold a reference.
    unsafe { ptr.as_ref() }.state.load().lifecycle() == Lifecycle::Scheduled
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// A poll number never comes back to 0 ("never polled"), however often it wraps.
    #[test]
    fn poll_numbers_wrap_past_zero() {
        assert_eq!(next_poll_number(0), 1);
        assert_eq!(next_poll_number(41), 42);
        assert_eq!(next_poll_number(u32::MAX), 1);
    }

    /// The poll number, the group and the owned list's flag fill the bytes after the six
    /// words: a task's header stays 56 bytes (its size is on every spawn's path).
    #[test]
    fn the_header_is_still_56_bytes() {
        assert_eq!(std::mem::size_of::<Header>(), 56);
    }
}
