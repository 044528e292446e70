//! The task state word: one `AtomicU64` per task that holds the lifecycle, the flags,
//! the cancellation shield depth and the reference count.
//!
//! ```text
//!  63                  28 27       20 19      12 11                 2 1         0
//! +----------------------+-----------+----------+--------------------+-----------+
//! |   ref_count (36)     | shield (8)| owner (8)| flags (10, 2 free) | lifecycle |
//! +----------------------+-----------+----------+--------------------+-----------+
//! ```
//!
//! The lifecycle has four values, so it takes two bits. The flags (`notified`,
//! `cancelled`, `join_interest`, `detached`, `join_waker`, `has_stats`, `sampled`,
//! `shutdown`) sit right above it with two bits to spare, then the cell cache owner tag and the shield depth, and the
//! reference count takes all the rest: 36 bits, 68.7 billion references. A count of 24
//! bits would be reached by 16.8 million live clones of one task's waker, a few hundred MB
//! of wakers, which a program can hold. Holding 2^35
//! wakers would take 512 GiB of `Waker`s, so the limit is out of reach in practice; still,
//! [`State::ref_inc`] checks it and panics in the cloning thread (undoing its increment)
//! rather than letting the count run into the shield bits.
//!
//! Every lifecycle transition is a compare-and-swap loop over the whole word, so a
//! transition sees the flags and the reference count as of the same instant. The
//! reference count alone uses `fetch_add`/`fetch_sub`: taking or dropping a reference
//! never depends on the other fields, so it needs no loop.
//!
//! # The wake protocol ("notified")
//! A waker calls [`State::transition_to_scheduled_by_ref`] (or `_by_val`):
//!
//! | lifecycle  | action                         | caller                      |
//! |------------|--------------------------------|-----------------------------|
//! | IDLE       | -> SCHEDULED, +1 ref for queue | must push the task          |
//! | RUNNING    | set `notified`                 | nothing; the poller re-queues |
//! | SCHEDULED  | set `notified`                 | nothing; it is already queued |
//! | COMPLETE   | nothing                        | nothing                     |
//!
//! After a poll returns `Pending`, the worker calls [`State::transition_to_idle`], which
//! clears `notified` in the same CAS that leaves RUNNING and returns the previous state.
//! A wake that raced with the poll is therefore seen exactly once, and the task is
//! re-queued instead of going idle: no wake is lost.
//!
//! A wake on a SCHEDULED task sets `notified`; left set, it would cost a spurious second
//! poll. [`State::transition_to_running`] clears `notified`: the poll about to happen
//! observes everything that was published before the wake, so one poll answers both.
//!
//! # Who owns a reference
//! A task starts with three: the owned-task list (released at completion), the
//! `JoinHandle`, and the run-queue entry that spawning creates. A queue entry (a
//! [`Notified`](super::notified::Notified)) always owns one reference; a waker owns one; a shield
//! guard owns one. The memory is freed exactly when the count reaches zero.

use crate::loom::AtomicU64;
use std::fmt;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed};

/// The packed state word of one task.
pub(crate) struct State {
    word: AtomicU64,
}

/// A copy of the state word, decoded through methods.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct Snapshot(u64);

/// The four lifecycle values, stored in bits 0..2.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Lifecycle {
    /// Not queued and not running: waiting for a waker.
    Idle = 0,
    /// In a run queue (exactly one queue entry exists).
    Scheduled = 1,
    /// Being polled (or cancelled) by exactly one thread, which owns the future.
    Running = 2,
    /// The output (or the error) is stored; the future is gone.
    Complete = 3,
}

const LIFECYCLE_SHIFT: u32 = 0;
const LIFECYCLE_MASK: u64 = 0b11 << LIFECYCLE_SHIFT;

/// Set by a wake that arrives while the task is RUNNING or SCHEDULED. Cleared by
/// `transition_to_running` and `transition_to_idle`; only meaningful in those two states.
const NOTIFIED: u64 = 1 << 2;
/// Set by `abort` or shutdown; never cleared. An abort takes effect when
/// `shield_depth == 0`; a shutdown (`SHUTDOWN`) whatever the depth.
const CANCELLED: u64 = 1 << 3;
/// Set while a `JoinHandle` exists. Cleared (once) when the handle is dropped or
/// consumed. When it is clear at completion, the completing thread drops the output.
const JOIN_INTEREST: u64 = 1 << 4;
/// Set when the `JoinHandle` was dropped without taking the output. Informational.
const DETACHED: u64 = 1 << 5;
/// Set while the join waker slot holds a waker that the completing thread may read.
/// While it is set, only the completing thread touches the slot; while it is clear, only
/// the `JoinHandle` does.
const JOIN_WAKER: u64 = 1 << 6;
/// Set at creation, never changed: the task's allocation carries a `TaskStats` tail
/// (its runtime records events).
const HAS_STATS: u64 = 1 << 7;
/// Set by a wake the scheduler samples for its schedule-latency histogram, cleared by
/// the poll that follows (`transition_to_running` reports it).
const SAMPLED: u64 = 1 << 8;
/// Set (with `cancelled`) by runtime shutdown; never cleared. Makes the cancellation
/// effective whatever the shield depth: shields defer `abort`, not shutdown. Without it,
/// a shielded task that was being polled when shutdown reached it went idle after that
/// poll, with nothing left to cancel it, and its future was never dropped.
const SHUTDOWN: u64 = 1 << 9;
// Bits 10..12 are free for future flags.

/// Bits 12..20, set at creation and never changed: which worker's cell cache the task's
/// memory came from (index + 1), or 0 for the global allocator
/// (`task/cellcache.rs`).
const OWNER_SHIFT: u32 = 12;
const OWNER_MASK: u64 = 0xff << OWNER_SHIFT;

const SHIELD_SHIFT: u32 = 20;
const SHIELD_ONE: u64 = 1 << SHIELD_SHIFT;
const SHIELD_MASK: u64 = 0xff << SHIELD_SHIFT;
/// The deepest nesting of shields a task may have.
pub(crate) const MAX_SHIELD_DEPTH: u64 = 255;

const REF_SHIFT: u32 = 28;
/// One reference, as an increment of the word: the count is the top 36 bits.
const REF_ONE: u64 = 1 << REF_SHIFT;
const REF_MASK: u64 = !(REF_ONE - 1);
/// The most references `ref_inc` hands out: half the field, so that even many threads
/// racing past the check (each undoes its increment) cannot carry the count out of the
/// word.
pub(crate) const MAX_REFS: u64 = 1 << (63 - REF_SHIFT);

/// A new task: SCHEDULED (spawn queues it at once), a `JoinHandle`, three references.
const INITIAL: u64 = ((Lifecycle::Scheduled as u64) << LIFECYCLE_SHIFT) | JOIN_INTEREST | (3 * REF_ONE);

/// What the worker does with a task it popped from a queue.
#[must_use]
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum TransitionToRunning {
    /// Poll it; `sampled`: a sampled wake queued it (see [`State::set_sampled`]).
    Poll { sampled: bool },
    /// It was aborted and no shield is up: drop the future and complete it as cancelled.
    Cancel,
    /// It is no longer SCHEDULED (completed by shutdown meanwhile): drop the queue's ref.
    Failed,
}

/// What happens after a poll returned `Pending`.
#[must_use]
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum IdleAction {
    /// Now IDLE; the queue's reference was released in the same CAS.
    Idle,
    /// A wake arrived during the poll: now SCHEDULED again, the reference is kept, the
    /// caller must re-queue it.
    Notified,
    /// An abort or a shutdown is effective: still RUNNING; the caller cancels it.
    Cancel,
}

/// The previous state plus the action, as `transition_to_idle` returns them.
#[must_use]
#[derive(Debug)]
pub(crate) struct TransitionToIdle {
    /// The word before the transition: `prev.is_notified()` is the raced wake.
    pub(crate) prev: Snapshot,
    /// What the caller must do next.
    pub(crate) action: IdleAction,
}

/// What a waker (or an abort) must do after its transition.
#[must_use]
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum TransitionToScheduled {
    /// The task went IDLE -> SCHEDULED: push the new queue entry.
    Submit,
    /// Nothing to do.
    DoNothing,
    /// The caller's reference was the last: free the task.
    Dealloc,
}

impl Snapshot {
    pub(crate) fn lifecycle(self) -> Lifecycle {
        match (self.0 & LIFECYCLE_MASK) >> LIFECYCLE_SHIFT {
            0 => Lifecycle::Idle,
            1 => Lifecycle::Scheduled,
            2 => Lifecycle::Running,
            _ => Lifecycle::Complete,
        }
    }
    fn set_lifecycle(&mut self, l: Lifecycle) {
        self.0 = (self.0 & !LIFECYCLE_MASK) | ((l as u64) << LIFECYCLE_SHIFT);
    }
    pub(crate) fn is_complete(self) -> bool {
        self.lifecycle() == Lifecycle::Complete
    }
    pub(crate) fn is_notified(self) -> bool {
        self.0 & NOTIFIED != 0
    }
    pub(crate) fn is_cancelled(self) -> bool {
        self.0 & CANCELLED != 0
    }
    pub(crate) fn is_join_interested(self) -> bool {
        self.0 & JOIN_INTEREST != 0
    }
    pub(crate) fn is_detached(self) -> bool {
        self.0 & DETACHED != 0
    }
    pub(crate) fn is_join_waker_set(self) -> bool {
        self.0 & JOIN_WAKER != 0
    }
    pub(crate) fn shield_depth(self) -> u64 {
        (self.0 & SHIELD_MASK) >> SHIELD_SHIFT
    }
    pub(crate) fn ref_count(self) -> u64 {
        (self.0 & REF_MASK) >> REF_SHIFT
    }
    /// Whether a cancellation takes effect now: shutdown, or an abort with no shield up.
    pub(crate) fn is_cancellation_effective(self) -> bool {
        self.0 & SHUTDOWN != 0 || (self.is_cancelled() && self.shield_depth() == 0)
    }
}

impl fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Snapshot")
            .field("lifecycle", &self.lifecycle())
            .field("notified", &self.is_notified())
            .field("cancelled", &self.is_cancelled())
            .field("join_interest", &self.is_join_interested())
            .field("detached", &self.is_detached())
            .field("join_waker", &self.is_join_waker_set())
            .field("sampled", &(self.0 & SAMPLED != 0))
            .field("shutdown", &(self.0 & SHUTDOWN != 0))
            .field("shield_depth", &self.shield_depth())
            .field("ref_count", &self.ref_count())
            .finish()
    }
}

impl State {
    /// The state of a freshly spawned task: SCHEDULED, join interest, three references.
    #[cfg(test)]
    pub(crate) fn new() -> State {
        State::with_stats_and_owner(false, 0)
    }

    /// A new task's state: whether its allocation has a stats tail, and which cell cache
    /// it came from (0: the global allocator).
    pub(crate) fn with_stats_and_owner(has_stats: bool, owner: u8) -> State {
        let word = INITIAL | if has_stats { HAS_STATS } else { 0 } | (owner as u64) << OWNER_SHIFT;
        State { word: AtomicU64::new(word) }
    }

    /// The cell cache tag given at creation (immutable, so a relaxed load will do).
    pub(crate) fn owner(&self) -> u8 {
        ((self.word.load(Relaxed) & OWNER_MASK) >> OWNER_SHIFT) as u8
    }

    /// Whether the allocation has a stats tail (immutable, so a relaxed load will do).
    #[inline]
    pub(crate) fn has_stats(&self) -> bool {
        self.word.load(Relaxed) & HAS_STATS != 0
    }

    pub(crate) fn load(&self) -> Snapshot {
        Snapshot(self.word.load(Acquire))
    }

    /// The CAS loop every transition uses. `f` returns the new word and a result, or
    /// `None` to leave the word as it is.
    #[inline]
    fn fetch_update<R>(&self, mut f: impl FnMut(Snapshot) -> (Option<Snapshot>, R)) -> R {
        let mut curr = Snapshot(self.word.load(Acquire));
        loop {
            let (next, res) = f(curr);
            let Some(next) = next else { return res };
            match self.word.compare_exchange_weak(curr.0, next.0, AcqRel, Acquire) {
                Ok(_) => return res,
                Err(actual) => curr = Snapshot(actual),
            }
        }
    }

    /// SCHEDULED -> RUNNING, clearing `notified`. See [`TransitionToRunning`].
    #[inline]
    pub(crate) fn transition_to_running(&self) -> TransitionToRunning {
        self.fetch_update(|curr| {
            if curr.lifecycle() != Lifecycle::Scheduled {
                return (None, TransitionToRunning::Failed);
            }
            let mut next = curr;
            next.set_lifecycle(Lifecycle::Running);
            next.0 &= !(NOTIFIED | SAMPLED);
            let action = if curr.is_cancellation_effective() {
                TransitionToRunning::Cancel
            } else {
                TransitionToRunning::Poll { sampled: curr.0 & SAMPLED != 0 }
            };
            (Some(next), action)
        })
    }

    /// RUNNING -> IDLE after a `Pending` poll; atomically reads and clears `notified` and
    /// returns the previous state so a wake during the poll is never lost.
    #[inline]
    pub(crate) fn transition_to_idle(&self) -> TransitionToIdle {
        self.fetch_update(|curr| {
            debug_assert_eq!(curr.lifecycle(), Lifecycle::Running);
            if curr.is_cancellation_effective() {
                let out = TransitionToIdle { prev: curr, action: IdleAction::Cancel };
                return (None, out);
            }
            let mut next = curr;
            next.0 &= !NOTIFIED;
            let action = if curr.is_notified() {
                // Straight back to SCHEDULED: the queue reference is reused.
                next.set_lifecycle(Lifecycle::Scheduled);
                IdleAction::Notified
            } else {
                next.set_lifecycle(Lifecycle::Idle);
                // The owned list still holds a reference, so this never reaches zero.
                debug_assert!(curr.ref_count() >= 2);
                next.0 -= REF_ONE;
                IdleAction::Idle
            };
            (Some(next), TransitionToIdle { prev: curr, action })
        })
    }

    /// RUNNING -> COMPLETE. Returns the previous word: its `join_interest` decides who
    /// drops the output, and its `join_waker` whether to wake the handle.
    pub(crate) fn transition_to_complete(&self) -> Snapshot {
        self.fetch_update(|curr| {
            debug_assert_eq!(curr.lifecycle(), Lifecycle::Running);
            let mut next = curr;
            next.set_lifecycle(Lifecycle::Complete);
            next.0 &= !NOTIFIED;
            (Some(next), curr)
        })
    }

    /// A wake through a borrowed waker: on IDLE, schedule and take a reference for the
    /// queue entry; on RUNNING or SCHEDULED, set `notified`.
    pub(crate) fn transition_to_scheduled_by_ref(&self) -> TransitionToScheduled {
        self.fetch_update(|curr| match curr.lifecycle() {
            Lifecycle::Idle => {
                let mut next = curr;
                next.set_lifecycle(Lifecycle::Scheduled);
                next.0 += REF_ONE;
                (Some(next), TransitionToScheduled::Submit)
            }
            Lifecycle::Running | Lifecycle::Scheduled if !curr.is_notified() => {
                (Some(Snapshot(curr.0 | NOTIFIED)), TransitionToScheduled::DoNothing)
            }
            _ => (None, TransitionToScheduled::DoNothing),
        })
    }

    /// A wake that consumes the waker's reference: on IDLE the reference moves to the
    /// queue entry; otherwise it is released (and may be the last one).
    pub(crate) fn transition_to_scheduled_by_val(&self) -> TransitionToScheduled {
        self.fetch_update(|curr| {
            let mut next = curr;
            let action = match curr.lifecycle() {
                Lifecycle::Idle => {
                    next.set_lifecycle(Lifecycle::Scheduled);
                    TransitionToScheduled::Submit
                }
                l => {
                    if l != Lifecycle::Complete {
                        next.0 |= NOTIFIED;
                    }
                    next.0 -= REF_ONE;
                    if next.ref_count() == 0 {
                        TransitionToScheduled::Dealloc
                    } else {
                        TransitionToScheduled::DoNothing
                    }
                }
            };
            (Some(next), action)
        })
    }

    /// `JoinHandle::abort`: set `cancelled`. An IDLE task with no shield up is scheduled
    /// (with a new queue reference) so a worker cancels it; a RUNNING one is cancelled by
    /// its poller after the poll; a SCHEDULED one when it is popped; a shielded one when
    /// its last shield drops and it next yields.
    pub(crate) fn transition_to_cancelled_remote(&self) -> TransitionToScheduled {
        self.fetch_update(|curr| {
            if curr.is_complete() || curr.is_cancelled() {
                return (None, TransitionToScheduled::DoNothing);
            }
            let mut next = Snapshot(curr.0 | CANCELLED);
            if curr.lifecycle() == Lifecycle::Idle && curr.shield_depth() == 0 {
                next.set_lifecycle(Lifecycle::Scheduled);
                next.0 += REF_ONE;
                (Some(next), TransitionToScheduled::Submit)
            } else {
                (Some(next), TransitionToScheduled::DoNothing)
            }
        })
    }

    /// Runtime shutdown: set `cancelled` and, if nobody is polling the task, claim it
    /// (-> RUNNING, +1 reference for the claimer) so the caller can drop the future.
    /// Shields defer `abort`, not shutdown: the runtime is going away. Returns whether
    /// the caller claimed it.
    ///
    /// A task being polled gets `cancelled` and `shutdown`, and its poller cancels it when
    /// the poll returns `Pending`, shielded or not (see [`SHUTDOWN`]).
    pub(crate) fn transition_to_shutdown(&self) -> bool {
        self.fetch_update(|curr| match curr.lifecycle() {
            Lifecycle::Idle | Lifecycle::Scheduled => {
                let mut next = Snapshot(curr.0 | CANCELLED | SHUTDOWN);
                next.set_lifecycle(Lifecycle::Running);
                next.0 += REF_ONE;
                (Some(next), true)
            }
            Lifecycle::Running if curr.0 & SHUTDOWN == 0 => (Some(Snapshot(curr.0 | CANCELLED | SHUTDOWN)), false),
            _ => (None, false),
        })
    }

    /// The `JoinHandle` goes away: clear `join_interest`, set `detached`. Returns the
    /// previous word; if it was COMPLETE the handle must drop the output itself.
    pub(crate) fn unset_join_interest(&self) -> Snapshot {
        self.fetch_update(|curr| {
            debug_assert!(curr.is_join_interested());
            let next = Snapshot((curr.0 & !JOIN_INTEREST) | DETACHED);
            (Some(next), curr)
        })
    }

    /// Mark a SCHEDULED task's wake as sampled: its next `transition_to_running` says so
    /// and clears the mark. Called by the waker before it queues the task, so the poller
    /// sees the mark through the queue's hand-off.
    #[inline]
    pub(crate) fn set_sampled(&self) {
        self.word.fetch_or(SAMPLED, Relaxed);
    }

    /// The handle has written the join waker slot: publish it. Fails (returning the
    /// current word) if the task completed first.
    pub(crate) fn set_join_waker(&self) -> Result<Snapshot, Snapshot> {
        self.fetch_update(|curr| {
            debug_assert!(curr.is_join_interested() && !curr.is_join_waker_set());
            if curr.is_complete() {
                return (None, Err(curr));
            }
            let next = Snapshot(curr.0 | JOIN_WAKER);
            (Some(next), Ok(next))
        })
    }

    /// The handle wants to replace its waker: take the slot back. Fails if complete.
    pub(crate) fn unset_join_waker(&self) -> Result<Snapshot, Snapshot> {
        self.fetch_update(|curr| {
            debug_assert!(curr.is_join_interested() && curr.is_join_waker_set());
            if curr.is_complete() {
                return (None, Err(curr));
            }
            let next = Snapshot(curr.0 & !JOIN_WAKER);
            (Some(next), Ok(next))
        })
    }

    /// Raise the shield depth by one; an abort waits until the depth is back to zero.
    pub(crate) fn add_shield(&self) -> Snapshot {
        self.fetch_update(|curr| {
            assert!(curr.shield_depth() < MAX_SHIELD_DEPTH, "volt: more than 255 nested shields on one task");
            let next = Snapshot(curr.0 + SHIELD_ONE);
            (Some(next), next)
        })
    }

    /// Lower the shield depth by one. When that leaves an effective cancellation, the
    /// abort takes effect at the task's next yield point: a RUNNING task is cancelled by
    /// `transition_to_idle` after this poll; an IDLE one (a guard dropped outside a poll)
    /// is scheduled with a new queue reference, so a worker cancels it.
    pub(crate) fn remove_shield(&self) -> TransitionToScheduled {
        self.fetch_update(|curr| {
            debug_assert!(curr.shield_depth() > 0);
            let mut next = Snapshot(curr.0 - SHIELD_ONE);
            if next.is_cancellation_effective() && next.lifecycle() == Lifecycle::Idle {
                next.set_lifecycle(Lifecycle::Scheduled);
                next.0 += REF_ONE;
                (Some(next), TransitionToScheduled::Submit)
            } else {
                (Some(next), TransitionToScheduled::DoNothing)
            }
        })
    }

    /// Take one more reference (waker clone, shield guard).
    ///
    /// # Panics
    /// When the task already has [`MAX_REFS`] references (34 billion live wakers): the
    /// increment is undone first, so the task stays sound and only the caller (the task
    /// that clones, through its poll's `catch_unwind`) sees the error.
    pub(crate) fn ref_inc(&self) {
        let prev = Snapshot(self.word.fetch_add(REF_ONE, Relaxed));
        if prev.ref_count() >= MAX_REFS {
            self.word.fetch_sub(REF_ONE, Relaxed);
            ref_count_overflow(prev.ref_count());
        }
    }

    /// Release one reference. Returns true if it was the last: the caller frees the task.
    pub(crate) fn ref_dec(&self) -> bool {
        self.ref_dec_n(1)
    }

    /// Release `n` references at once (completion releases the poller's and the owned
    /// list's together).
    pub(crate) fn ref_dec_n(&self, n: u64) -> bool {
        let prev = Snapshot(self.word.fetch_sub(n * REF_ONE, AcqRel));
        debug_assert!(prev.ref_count() >= n, "task reference count underflow: {prev:?}");
        prev.ref_count() == n
    }
}

#[cold]
#[inline(never)]
fn ref_count_overflow(count: u64) -> ! {
    panic!("volt: a task's reference count would overflow ({count} live wakers or shields of one task)")
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn new_task_is_scheduled_with_three_refs() {
        let s = State::new().load();
        assert_eq!(s.lifecycle(), Lifecycle::Scheduled);
        assert_eq!(s.ref_count(), 3);
        assert!(s.is_join_interested() && !s.is_notified() && !s.is_cancelled());
    }

    #[test]
    fn wake_during_poll_is_returned_by_transition_to_idle() {
        let s = State::new();
        assert_eq!(s.transition_to_running(), TransitionToRunning::Poll { sampled: false });
        assert_eq!(s.transition_to_scheduled_by_ref(), TransitionToScheduled::DoNothing);
        let t = s.transition_to_idle();
        assert!(t.prev.is_notified());
        assert_eq!(t.action, IdleAction::Notified);
        assert_eq!(s.load().lifecycle(), Lifecycle::Scheduled);
        assert!(!s.load().is_notified());
        assert_eq!(s.load().ref_count(), 3, "requeue keeps the queue reference");
    }

    #[test]
    fn idle_wake_takes_a_reference() {
        let s = State::new();
        let _ = s.transition_to_running();
        let t = s.transition_to_idle();
        assert_eq!(t.action, IdleAction::Idle);
        assert_eq!(s.load().ref_count(), 2);
        assert_eq!(s.transition_to_scheduled_by_ref(), TransitionToScheduled::Submit);
        assert_eq!(s.load().ref_count(), 3);
    }

    #[test]
    fn shield_defers_cancel_until_removed() {
        let s = State::new();
        let _ = s.transition_to_running();
        let _ = s.add_shield();
        assert_eq!(s.transition_to_cancelled_remote(), TransitionToScheduled::DoNothing);
        // Shielded: the poll ends normally and the task goes idle.
        assert_eq!(s.transition_to_idle().action, IdleAction::Idle);
        assert_eq!(s.transition_to_scheduled_by_ref(), TransitionToScheduled::Submit);
        assert_eq!(s.transition_to_running(), TransitionToRunning::Poll { sampled: false });
        assert_eq!(s.remove_shield(), TransitionToScheduled::DoNothing);
        assert!(s.load().is_cancellation_effective());
        assert_eq!(s.transition_to_idle().action, IdleAction::Cancel);
    }

    /// Shutdown reaching a shielded task in a poll, aborted before or not, makes its
    /// cancellation effective: the poll's end cancels it instead of going idle.
    #[test]
    fn shutdown_of_a_polled_shielded_task_cancels_it_after_the_poll() {
        for aborted in [false, true] {
            let s = State::new();
            let _ = s.transition_to_running();
            let _ = s.add_shield();
            if aborted {
                assert_eq!(s.transition_to_cancelled_remote(), TransitionToScheduled::DoNothing);
                assert!(!s.load().is_cancellation_effective(), "an abort waits for the shield");
            }
            assert!(!s.transition_to_shutdown(), "its poller keeps it");
            assert!(s.load().is_cancellation_effective(), "aborted before: {aborted}");
            assert_eq!(s.transition_to_idle().action, IdleAction::Cancel, "aborted before: {aborted}");
        }
    }

    /// A state whose reference count starts at `refs` (the rest as a new task).
    fn with_refs(refs: u64) -> State {
        let s = State::new();
        s.word.store((s.word.load(Relaxed) & !REF_MASK) | (refs << REF_SHIFT), Relaxed);
        s
    }

    /// 17 million references, past what 24 bits would hold, leave every other field
    /// intact and count back down to the last one.
    #[test]
    #[cfg_attr(miri, ignore = "17 million atomic operations")]
    fn seventeen_million_references_fit() {
        let s = State::new();
        let _ = s.add_shield();
        let n = 17_000_000u64;
        for _ in 0..n {
            s.ref_inc();
        }
        let snap = s.load();
        assert_eq!(snap.ref_count(), n + 3);
        assert_eq!((snap.shield_depth(), snap.lifecycle()), (1, Lifecycle::Scheduled));
        assert!(snap.is_join_interested() && !snap.is_cancelled() && !snap.is_notified());
        for _ in 0..n {
            assert!(!s.ref_dec());
        }
        assert_eq!(s.load().ref_count(), 3);
        assert!(!s.ref_dec_n(2));
        assert!(s.ref_dec(), "the last reference");
    }

    /// At the limit, `ref_inc` panics with a message and leaves the word as it was.
    #[test]
    fn reference_overflow_is_a_clear_panic_not_an_abort() {
        let s = with_refs(MAX_REFS);
        let _ = s.add_shield();
        let before = s.load();
        let err = std::panic::catch_unwind(|| s.ref_inc()).unwrap_err();
        let msg = err.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(msg.contains("reference count would overflow"), "{msg}");
        assert_eq!(s.load(), before, "the failed increment was not undone");
        assert_eq!(s.load().shield_depth(), 1);
        // One below the limit still works.
        let s = with_refs(MAX_REFS - 1);
        s.ref_inc();
        assert_eq!(s.load().ref_count(), MAX_REFS);
    }

    #[test]
    fn fields_do_not_overlap() {
        let s = State::new();
        for _ in 0..255 {
            let _ = s.add_shield();
        }
        for _ in 0..1000 {
            s.ref_inc();
        }
        let snap = s.load();
        assert_eq!(snap.shield_depth(), 255);
        assert_eq!(snap.ref_count(), 1003);
        assert_eq!(snap.lifecycle(), Lifecycle::Scheduled);
        assert!(snap.is_join_interested() && !snap.is_cancelled());
        // Every field at its maximum, and each reads back alone.
        let t = State::with_stats_and_owner(true, 255);
        t.word.fetch_or(NOTIFIED | CANCELLED | DETACHED | JOIN_WAKER | (0b11 << LIFECYCLE_SHIFT), Relaxed);
        for _ in 0..255 {
            t.word.fetch_add(SHIELD_ONE, Relaxed);
        }
        t.word.fetch_add((MAX_REFS - 3) * REF_ONE, Relaxed);
        let snap = t.load();
        assert_eq!((snap.ref_count(), snap.shield_depth(), t.owner()), (MAX_REFS, 255, 255));
        assert_eq!(snap.lifecycle(), Lifecycle::Complete);
        assert!(t.has_stats() && snap.is_notified() && snap.is_cancelled() && snap.is_detached());
        assert!(snap.is_join_interested() && snap.is_join_waker_set());
    }
}
