//! The cooperative budget: how many operations on Volt's resources one poll of a task
//! may complete before they make it yield.
//!
//! A socket that is always ready (a UDP send loop, a read loop against a fast peer, an
//! accept loop in a connection flood) and a sleep that has already elapsed answer
//! `Ready` at once, so a task looping on them would never return `Pending`: its worker
//! would run no other task, fire no timer and poll no I/O, and the runtime's shutdown
//! would wait for the loop to end. So each poll of a task gets `BUDGET` (128) operations;
//! once they are spent, a socket's readiness and a `Sleep` answer `Pending`, and the task
//! is woken again without waiting for anything. On a worker that wake is held in a list
//! of the worker's own until the worker has run its other ready tasks, or at most until its
//! next budget tick starts (then the task goes first, through the LIFO slot), out of reach of other workers meanwhile: see "Deferred wakes" in the
//! scheduler's `run` for why. Elsewhere it is woken at once. Its next poll has a new
//! budget. Only operations that complete count; one that answers `Pending` costs
//! nothing.
//!
//! Each poll `Runtime::block_on` makes of its future has a budget of its own too, as
//! Tokio's does: once it is spent, the future is woken (at once off the workers; on a
//! current-thread runtime's worker, at the start of its next tick) and polled again
//! with a new one. Outside a poll (a thread of the caller's) the budget is unlimited,
//! and so it is for a `spawn_blocking` closure: a closure that drives Volt futures with
//! its own loop would otherwise spend the budget once and then be answered `Pending`
//! for good. A
//! `Timeout`'s own deadline is not charged, so a timeout still fires when the future
//! inside spent the budget. (As with Tokio's budget, a foreign executor's `block_on`
//! run inside a task's poll, such as `futures::executor::block_on`, shares that poll's
//! budget, and once it is spent it waits for good: the refused future's wake is held by
//! the worker, which is inside that very poll. Await the future instead.)

use std::cell::{Cell, RefCell};
use std::task::{Context, Poll, Waker};

/// Operations a task's poll may complete before it is made to yield (as Tokio does).
pub(crate) const BUDGET: u8 = 128;

/// No budget: not in a task's poll.
const UNLIMITED: u8 = u8::MAX;

thread_local! {
    /// What the poll running on this thread has left.
    static LEFT: Cell<u8> = const { Cell::new(UNLIMITED) };
}

/// A fresh budget for one poll of a task; the previous one (a poll this one is nested
/// in, under a helping join) comes back on drop.
pub(crate) struct Budget(u8);

impl Budget {
    #[inline(always)]
    pub(crate) fn enter() -> Budget {
        Budget(LEFT.with(|l| l.replace(BUDGET)))
    }

    /// No budget until dropped: for polls that no scheduler makes yield (a
    /// `spawn_blocking` closure, a `block_in_place` one).
    pub(crate) fn unlimited() -> Budget {
        Budget(LEFT.with(|l| l.replace(UNLIMITED)))
    }

    /// A budget spent already until dropped: for loom models of a poll that has run its
    /// course (they have no worker loop to give one).
    #[cfg(all(test, loom))]
    pub(crate) fn spent() -> Budget {
        Budget(LEFT.with(|l| l.replace(0)))
    }
}

impl Drop for Budget {
    #[inline(always)]
    fn drop(&mut self) {
        LEFT.with(|l| l.set(self.0));
    }
}

/// Before an operation: `Pending` (with the task woken to run again) when the poll has
/// spent its budget. After it completes, call [`spend`].
#[inline(always)]
pub(crate) fn poll_budget(cx: &mut Context<'_>) -> Poll<()> {
    if LEFT.with(|l| l.get()) == 0 {
        refuse(cx.waker());
        return Poll::Pending;
    }
    Poll::Ready(())
}

/// The task is refused for this poll: on a worker, its wake waits in the worker's
/// [`Deferred`] list until the worker has run its other tasks (see "Deferred wakes" in
/// the scheduler's `run`); elsewhere it is woken at once.
#[cold]
fn refuse(waker: &Waker) {
    // Under loom there is no worker loop (only the models of its parts).
    #[cfg(loom)]
    let list: *const () = std::ptr::null();
    #[cfg(not(loom))]
    let list = crate::runtime::context::get().defer;
    if list.is_null() {
        waker.wake_by_ref();
        return;
    }
    // SAFETY: only `Deferred::context_ptr` fills this slot, for the worker this thread
    // owns while the context is set; the worker (and so its list) outlives that, and
    // only the owning thread touches the list.
    unsafe { &*list.cast::<Deferred>() }.push(waker);
}

/// The wakes the budget refused on one worker, held until the worker flushes them.
///
/// Owner-only: the worker's thread pushes and flushes it. A refusal costs a clone of the
/// task's waker (one reference count) and a push onto a `Vec` whose capacity is kept
/// from one flush to the next, so a worker allocates for it only while the list grows
/// past its largest size so far. Two refusals in a row of the same task (a poll that
/// keeps asking a spent budget) are kept once.
#[derive(Default)]
pub(crate) struct Deferred(RefCell<Vec<Waker>>);

impl Deferred {
    fn push(&self, waker: &Waker) {
        let mut list = self.0.borrow_mut();
        if list.last().is_some_and(|last| last.will_wake(waker)) {
            return;
        }
        list.push(waker.clone());
    }

    /// What the owning worker puts in its context's `defer` slot.
    pub(crate) fn context_ptr(&self) -> *const () {
        std::ptr::from_ref(self).cast()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.borrow().is_empty()
    }

    /// Wake every held task, in the order they were refused; true if there were any.
    pub(crate) fn wake_all(&self) -> bool {
        if self.is_empty() {
            return false;
        }
        // Taken out of the cell, so a wake that defers again can't find it borrowed; the
        // emptied `Vec` goes back to keep its capacity.
        let mut list = self.0.take();
        for waker in list.drain(..) {
            waker.wake();
        }
        let mut cur = self.0.borrow_mut();
        if cur.is_empty() {
            *cur = list;
        }
        true
    }

    /// Drop the held wakes without running them (the worker is exiting).
    pub(crate) fn clear(&self) {
        // Taken out first: dropping a waker may free a task, which must not find the
        // list borrowed.
        drop(self.0.take());
    }
}

/// An operation that is ready to complete takes a unit of the poll's budget: `false`
/// (with `waker`'s task woken to run again, as [`poll_budget`] does) when none is left.
/// One look at the budget where `poll_budget` and [`spend`] take two.
#[inline(always)]
pub(crate) fn try_spend(waker: &Waker) -> bool {
    let spent = LEFT.with(|l| match l.get() {
        0 => false,
        UNLIMITED => true,
        left => {
            l.set(left - 1);
            true
        }
    });
    if !spent {
        refuse(waker);
    }
    spent
}

/// An operation completed: one unit of the poll's budget is gone.
#[inline(always)]
pub(crate) fn spend() {
    LEFT.with(|l| {
        let left = l.get();
        if left != UNLIMITED {
            l.set(left.saturating_sub(1));
        }
    });
}

/// Run `op`, an operation on a stream that may not answer to Volt's budget (one of
/// Tokio's in-memory pipes, a byte slice, a caller's own type): `Pending` without running
/// it when the budget is spent, and a unit spent when it completes, unless `op` spent one
/// itself (a Volt socket underneath does), so it is counted once either way.
#[inline]
#[cfg(feature = "io-util")]
pub(crate) fn budgeted<T>(cx: &mut Context<'_>, op: impl FnOnce(&mut Context<'_>) -> Poll<T>) -> Poll<T> {
    std::task::ready!(poll_budget(cx));
    let before = LEFT.with(|l| l.get());
    let out = op(cx);
    if out.is_ready() && LEFT.with(|l| l.get()) == before {
        spend();
    }
    out
}

// ---- Tokio's public API over the budget (`tokio::task::coop`) -----------------------

/// Whether the poll running on this thread may still complete an operation on Volt's
/// resources before it is made to yield. Always true outside a task's poll.
#[inline]
pub fn has_budget_remaining() -> bool {
    LEFT.with(|l| l.get()) != 0
}

/// From [`poll_proceed`]: a unit of the task's budget taken for an operation, given back
/// when this is dropped unless [`made_progress`](RestoreOnPending::made_progress) says the
/// operation completed.
#[must_use = "dropped at once, it gives the unit back"]
pub struct RestoreOnPending {
    /// What the budget held before the unit was taken; `None` once progress is made.
    before: Cell<Option<u8>>,
    /// The budget is the polling thread's: the guard stays on it.
    _thread: std::marker::PhantomData<*mut ()>,
}

impl RestoreOnPending {
    /// The operation completed: the unit stays spent.
    pub fn made_progress(&self) {
        self.before.set(None);
    }
}

impl Drop for RestoreOnPending {
    fn drop(&mut self) {
        if let Some(before) = self.before.get() {
            LEFT.with(|l| l.set(before));
        }
    }
}

impl std::fmt::Debug for RestoreOnPending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RestoreOnPending").field("progress", &self.before.get().is_none()).finish()
    }
}

/// Take a unit of the task's budget for an operation on a resource of your own (a
/// channel of another library, say), so that a loop on it yields as one on Volt's
/// resources does: `Pending`, with the task woken to run again, when the budget is spent.
/// Call [`RestoreOnPending::made_progress`] if the operation completes; if it does not,
/// dropping the guard gives the unit back. Outside a task's poll the budget is
/// unlimited and this is always `Ready`.
pub fn poll_proceed(cx: &mut Context<'_>) -> Poll<RestoreOnPending> {
    let before = LEFT.with(|l| l.get());
    match before {
        0 => {
            refuse(cx.waker());
            Poll::Pending
        }
        UNLIMITED => Poll::Ready(RestoreOnPending { before: Cell::new(None), _thread: std::marker::PhantomData }),
        left => {
            LEFT.with(|l| l.set(left - 1));
            Poll::Ready(RestoreOnPending { before: Cell::new(Some(before)), _thread: std::marker::PhantomData })
        }
    }
}

/// Spend one unit of the current task's budget, yielding to the scheduler first if the
/// budget is spent (the task runs again once its worker has run its other ready tasks,
/// or at its worker's next budget tick, whichever comes first; its next poll has a new
/// budget).
///
/// For a loop that does much work without touching Volt's resources (which spend the
/// budget themselves), so that it still lets the worker's other tasks run. Outside a
/// task's poll it returns at once.
pub async fn consume_budget() {
    std::future::poll_fn(|cx| {
        // No wait is recorded on `Pending`: the task is woken again without waiting
        // for anything (its worker holds the wake until its other tasks have run).
        std::task::ready!(poll_budget(cx));
        spend();
        Poll::Ready(())
    })
    .await
}

/// A future polled with no budget: see [`unconstrained`].
#[must_use = "futures do nothing unless you `.await` or poll them"]
#[derive(Debug)]
pub struct Unconstrained<F> {
    inner: F,
}

/// Poll `inner` without a cooperative budget: Volt's resources inside it never make it
/// yield. A future that is always ready then runs without letting the worker's other
/// tasks run, so use it with care.
pub fn unconstrained<F: std::future::Future>(inner: F) -> Unconstrained<F> {
    Unconstrained { inner }
}

impl<F: std::future::Future> std::future::Future for Unconstrained<F> {
    type Output = F::Output;

    fn poll(self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let _free = Budget::unlimited();
        // SAFETY: `inner` is structurally pinned: it is never moved out of `self`, and
        // `Unconstrained` is `Unpin` only when `F` is (the auto impl), with no `Drop`.
        unsafe { self.map_unchecked_mut(|s| &mut s.inner) }.poll(cx)
    }
}

/// A future that spends the task's budget as Volt's own resources do: see
/// [`cooperative`].
#[must_use = "futures do nothing unless you `.await` or poll them"]
#[derive(Debug)]
pub struct Coop<F> {
    inner: F,
}

/// Make `fut` cooperate with the scheduler like Volt's own resources: each poll first
/// checks the task's budget (yielding if it is spent), and its completion spends one
/// unit. For futures of other libraries that may be ready again and again.
pub fn cooperative<F: std::future::Future>(fut: F) -> Coop<F> {
    Coop { inner: fut }
}

impl<F: std::future::Future> std::future::Future for Coop<F> {
    type Output = F::Output;

    fn poll(self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        std::task::ready!(poll_budget(cx));
        // SAFETY: `inner` is structurally pinned, as in `Unconstrained::poll`.
        let out = std::task::ready!(unsafe { self.map_unchecked_mut(|s| &mut s.inner) }.poll(cx));
        spend();
        Poll::Ready(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
    use std::sync::Arc;
    use std::task::Wake;

    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Relaxed);
        }
    }

    #[test]
    fn a_poll_completes_its_budget_then_yields_and_a_nested_poll_gives_it_back() {
        let wakes = Arc::new(Count(AtomicUsize::new(0)));
        let waker = std::task::Waker::from(Arc::clone(&wakes));
        let mut cx = Context::from_waker(&waker);
        // Outside a task: never refused.
        for _ in 0..1000 {
            assert!(poll_budget(&mut cx).is_ready());
            spend();
        }
        let outer = Budget::enter();
        for _ in 0..BUDGET - 1 {
            assert!(poll_budget(&mut cx).is_ready());
            spend();
        }
        {
            // A nested poll has a budget of its own, and leaves the outer one as it was.
            let _inner = Budget::enter();
            for _ in 0..BUDGET {
                assert!(poll_budget(&mut cx).is_ready());
                spend();
            }
            assert!(poll_budget(&mut cx).is_pending());
        }
        assert!(poll_budget(&mut cx).is_ready());
        spend();
        assert!(poll_budget(&mut cx).is_pending());
        assert_eq!(wakes.0.load(Relaxed), 2, "each refusal wakes the task");
        drop(outer);
        assert!(poll_budget(&mut cx).is_ready(), "unlimited again outside the poll");
        // An unlimited stretch inside a poll (a blocking closure, `block_on`) is never
        // refused, and gives the poll its budget back after.
        let _outer = Budget::enter();
        {
            let _free = Budget::unlimited();
            for _ in 0..1000 {
                assert!(poll_budget(&mut cx).is_ready());
                spend();
            }
        }
        for _ in 0..BUDGET {
            assert!(poll_budget(&mut cx).is_ready());
            spend();
        }
        assert!(poll_budget(&mut cx).is_pending());
    }
}
