//! The fair semaphore every lock is built on (as Tokio builds its locks on its batch
//! semaphore): `Semaphore`, `Mutex` (one permit), `RwLock` (a reader takes one permit, a
//! writer all of them) and `OnceCell` (one permit for the initializer).
//!
//! # The state word
//! One atomic word holds the free permits (shifted by two), `CLOSED` and `QUEUED`.
//! `QUEUED` is set, under the waiter mutex, while any waiter is in the queue, and while
//! it is set no permit is ever free: a release hands its permits to the queue's head
//! (a part of what the head needs, if not all of it) and only the rest, once the queue
//! is empty, goes back into the word. So:
//! * the uncontended paths are one compare-and-swap on the word: an acquire with no
//!   waiter queued and permits enough, a release with no waiter queued;
//! * a newcomer never overtakes a waiter (it sees `QUEUED`, or no free permit), and the
//!   queue is served in order: a head that needs many permits holds up smaller requests
//!   behind it, collecting permits as they are released;
//! * a waiter that gives up (its future dropped) leaves the queue and hands the permits
//!   it had collected to the waiters after it, or back to the word.
//!
//! # Who holds it
//! An exclusive acquisition (a mutex, a write lock, a cell's initializer) stores the
//! holder's task id (a plain store beside the compare-and-swap), and its release clears
//! it. A hand-off to a waiter stores the waiter's task id at once, under the waiter mutex,
//! before that task is even polled: the holder a reader sees is the task that holds the
//! permits now.
//!
//! A reader reads it, with the free permits, through the probe (`track`), which exists
//! once a watched task waited here (`tracked` is then set for good). Every refresh of
//! the probe copies the current figures from the semaphore under the waiter mutex, so
//! the refreshes are ordered, and the last one sees every change made before it. The
//! slow paths refresh as they go; on a tracked semaphore the fast paths do too: an
//! uncontended acquire (after its compare-and-swap and holder store) and an uncontended
//! release (after its compare-and-swap) take the waiter mutex, which nobody else wants
//! then, and refresh. So a lock released with no waiter left shows no holder, and the
//! next uncontended holder shows at once. An untracked semaphore pays one relaxed load of
//! `tracked` on each fast path, and nothing else.
//!
//! The one race left open is the very first probe's: a fast path that loaded `tracked`
//! just before the enqueue which created the probe set it may show up only at the
//! probe's next refresh (the waiter's next poll, the next release). Closing it would cost
//! every untracked fast path a fence.

use super::list::{Key, List};
use super::track::{self, CreatedAt, Tracked};
use super::waiters::WakeList;
use crate::loom::{lock, AtomicBool, AtomicU64, AtomicUsize, Mutex};
use crate::task::coop;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering::{self, AcqRel, Relaxed};

// `Acquire` names the future below.
const ACQ: Ordering = Ordering::Acquire;
use std::task::{Context, Poll, Waker};

const CLOSED: usize = 1;
const QUEUED: usize = 2;
const SHIFT: u32 = 2;
/// The most permits a semaphore holds (Tokio's limit).
pub(crate) const MAX_PERMITS: usize = usize::MAX >> 3;

/// Why a `try_acquire` failed.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum TryErr {
    Closed,
    NoPermits,
}

/// The semaphore was closed.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Closed;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum NodeState {
    Waiting,
    Done,
    Closed,
}

struct Node {
    waker: Option<Waker>,
    /// Permits still needed.
    need: usize,
    /// Permits assigned so far (all of them once `Done`).
    got: usize,
    /// The waiting task (the holder once served, for an exclusive acquisition).
    task: u64,
    exclusive: bool,
    state: NodeState,
}

struct Waiters {
    list: List<Node>,
    /// The probe readers see, once a watched task has waited here.
    tracked: Option<Tracked>,
}

/// The semaphore (see the module doc).
pub(crate) struct Sem {
    state: AtomicUsize,
    /// The exclusive holder's task id (`track::OUTSIDE` outside a task), 0 for none.
    holder: AtomicU64,
    /// All permits, for the console: the initial ones, plus those added, minus those
    /// forgotten.
    total: AtomicUsize,
    /// Set (for good) once a probe exists: only then do the fast paths refresh it.
    tracked: AtomicBool,
    /// Where the primitive built on it was created, for its probe.
    created_at: CreatedAt,
    waiters: Mutex<Waiters>,
}

impl std::fmt::Debug for Sem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Semaphore").field("permits", &self.available()).field("closed", &self.is_closed()).finish()
    }
}

impl Sem {
    /// A semaphore with `permits`, for a primitive created at `created_at`.
    pub(crate) fn new(permits: usize, created_at: CreatedAt) -> Sem {
        assert!(permits <= MAX_PERMITS, "a semaphore may not have more than MAX_PERMITS permits ({MAX_PERMITS})");
        Sem {
            state: AtomicUsize::new(permits << SHIFT),
            holder: AtomicU64::new(0),
            total: AtomicUsize::new(permits),
            tracked: AtomicBool::new(false),
            created_at,
            waiters: Mutex::new(Waiters { list: List::new(), tracked: None }),
        }
    }

    #[cfg(not(loom))]
    pub(crate) const fn const_new(permits: usize) -> Sem {
        assert!(permits <= MAX_PERMITS, "a semaphore may not have more than MAX_PERMITS permits");
        Sem {
            state: AtomicUsize::new(permits << SHIFT),
            holder: AtomicU64::new(0),
            total: AtomicUsize::new(permits),
            tracked: AtomicBool::new(false),
            created_at: None,
            waiters: Mutex::new(Waiters { list: List::new(), tracked: None }),
        }
    }

    /// A semaphore with no permit, closed already (a cell created with its value).
    #[cfg(not(loom))]
    pub(crate) const fn const_closed() -> Sem {
        Sem {
            state: AtomicUsize::new(CLOSED),
            holder: AtomicU64::new(0),
            total: AtomicUsize::new(0),
            tracked: AtomicBool::new(false),
            created_at: None,
            waiters: Mutex::new(Waiters { list: List::new(), tracked: None }),
        }
    }

    /// Where the primitive built on it was created.
    pub(crate) fn created_at(&self) -> CreatedAt {
        self.created_at
    }

    pub(crate) fn available(&self) -> usize {
        self.state.load(ACQ) >> SHIFT
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.state.load(ACQ) & CLOSED != 0
    }

    /// Take `n` permits now, or fail: never past a queued waiter.
    pub(crate) fn try_acquire(&self, n: usize, exclusive: bool) -> Result<(), TryErr> {
        let mut s = self.state.load(ACQ);
        loop {
            if s & CLOSED != 0 {
                return Err(TryErr::Closed);
            }
            if s & QUEUED != 0 || s >> SHIFT < n {
                return Err(TryErr::NoPermits);
            }
            match self.state.compare_exchange_weak(s, s - (n << SHIFT), AcqRel, ACQ) {
                Ok(_) => break,
                Err(now) => s = now,
            }
        }
        if exclusive {
            self.holder.store(track::current_task_id(), Relaxed);
        }
        self.refresh_fast();
        Ok(())
    }

    /// After a fast path changed the figures: refresh the probe, if there is one (module
    /// doc). An untracked semaphore pays the load of `tracked` only.
    #[inline]
    fn refresh_fast(&self) {
        if self.tracked.load(Relaxed) {
            let w = lock(&self.waiters);
            self.refresh(&w);
        }
    }

    /// Clear the holder: called by an exclusive guard before it releases.
    pub(crate) fn clear_holder(&self) {
        // The release after it orders it for the next holder, and refreshes the probe
        // (under the waiter mutex) if there is one.
        self.holder.store(0, Relaxed);
    }

    /// Give `n` permits back (a guard's drop, `add_permits`).
    pub(crate) fn release(&self, n: usize) {
        if n == 0 {
            return;
        }
        let mut s = self.state.load(ACQ);
        while s & QUEUED == 0 {
            let new = s + (n << SHIFT);
            match self.state.compare_exchange_weak(s, new, AcqRel, ACQ) {
                Ok(_) => {
                    self.refresh_fast();
                    return;
                }
                Err(now) => s = now,
            }
        }
        let mut wakers = WakeList::new();
        let mut w = lock(&self.waiters);
        self.release_locked(&mut w, n, &mut wakers);
        drop(w);
        wakers.wake_all();
    }

    /// Add `n` permits (`Semaphore::add_permits`).
    pub(crate) fn add_permits(&self, n: usize) {
        let free = self.available();
        assert!(
            n <= MAX_PERMITS - free.min(MAX_PERMITS),
            "number of added permits ({n}) would overflow MAX_PERMITS ({MAX_PERMITS})"
        );
        self.total.fetch_add(n, Relaxed);
        self.release(n);
    }

    /// Take up to `n` free permits away for good; returns how many.
    pub(crate) fn forget_permits(&self, n: usize) -> usize {
        let mut s = self.state.load(ACQ);
        loop {
            let take = (s >> SHIFT).min(n);
            match self.state.compare_exchange_weak(s, s - (take << SHIFT), AcqRel, ACQ) {
                Ok(_) => {
                    self.forgotten(take);
                    self.refresh_fast();
                    return take;
                }
                Err(now) => s = now,
            }
        }
    }

    /// `n` held permits were forgotten (a permit's `forget`): they leave the total.
    pub(crate) fn forgotten(&self, n: usize) {
        let _ = self.total.fetch_update(Relaxed, Relaxed, |t| Some(t.saturating_sub(n)));
        self.refresh_fast();
    }

    /// Close: every waiter wakes with an error, and every acquire from now on fails.
    pub(crate) fn close(&self) {
        self.state.fetch_or(CLOSED, AcqRel);
        let mut wakers = WakeList::new();
        let mut w = lock(&self.waiters);
        while let Some(k) = w.list.front() {
            if let Some(node) = w.list.get_mut(k) {
                node.state = NodeState::Closed;
                if let Some(wk) = node.waker.take() {
                    wakers.push(wk);
                }
            }
            w.list.unlink(k);
        }
        // The permits the closed waiters collected stay theirs until their futures
        // take them and give them back (`Acquire`'s poll or drop).
        self.state.fetch_and(!QUEUED, AcqRel);
        self.refresh(&w);
        drop(w);
        wakers.wake_all();
    }

    /// Hand `n` permits to the queue in order, then what is left to the word once the
    /// queue is empty (under the waiter mutex).
    fn release_locked(&self, w: &mut Waiters, n: usize, wakers: &mut WakeList) {
        let mut rem = n;
        while rem > 0 {
            let Some(k) = w.list.front() else { break };
            let Some(node) = w.list.get_mut(k) else { break };
            let give = rem.min(node.need);
            node.need -= give;
            node.got += give;
            rem -= give;
            if node.need == 0 {
                node.state = NodeState::Done;
                if node.exclusive {
                    // The waiter holds it from now on, polled or not.
                    self.holder.store(node.task, Relaxed);
                }
                if let Some(wk) = node.waker.take() {
                    wakers.push(wk);
                }
                w.list.unlink(k);
            }
        }
        if w.list.is_empty() {
            let mut s = self.state.load(ACQ);
            loop {
                let new = (s & CLOSED) | (((s >> SHIFT) + rem) << SHIFT);
                match self.state.compare_exchange_weak(s, new, AcqRel, ACQ) {
                    Ok(_) => break,
                    Err(now) => s = now,
                }
            }
        } else {
            debug_assert_eq!(rem, 0, "the head takes every permit while waiters queue");
        }
        self.refresh(w);
    }

    /// Register a probe as a watched waiter would (loom models, which have no tasks).
    #[cfg(all(test, loom))]
    pub(crate) fn track_for_test(&self) -> std::sync::Arc<track::Probe> {
        let mut w = lock(&self.waiters);
        let at = self.created_at;
        let p = w.tracked.get_or_insert_with(|| Tracked::new(track::T_MUTEX_LOCK, at)).probe.clone();
        self.tracked.store(true, Relaxed);
        self.refresh(&w);
        p
    }

    /// Waiters queued, and whether a probe exists (tests).
    #[cfg(all(test, not(loom)))]
    pub(crate) fn queue_and_probe(&self) -> (usize, bool) {
        let w = lock(&self.waiters);
        (w.list.len(), w.tracked.is_some())
    }

    /// Bring the probe up to date (under the waiter mutex, which orders the refreshes:
    /// see the module doc).
    fn refresh(&self, w: &Waiters) {
        let Some(t) = &w.tracked else { return };
        let free = self.available();
        let total = self.total.load(Relaxed);
        let head_got = w.list.front().and_then(|k| w.list.get(k)).map_or(0, |n| n.got);
        let p = &t.probe;
        p.holder.store(self.holder.load(Relaxed), Relaxed);
        p.free.store(free as u64, Relaxed);
        p.total.store(total as u64, Relaxed);
        p.aux.store(total.saturating_sub(free + head_got) as u64, Relaxed);
        p.waiters.store(w.list.len() as u64, Relaxed);
    }
}

/// Acquiring `n` permits: a place in the queue once the first poll found too few. Drop
/// it to give the place up, with any permits it collected.
pub(crate) struct Acquire<'a> {
    sem: &'a Sem,
    n: usize,
    tag: u8,
    key: Option<Key>,
    /// The permits are taken (this future holds them), but the poll that took them had
    /// spent its cooperative budget: the next poll hands them over, and a drop before
    /// that gives them back.
    held: bool,
}

impl<'a> Acquire<'a> {
    /// `tag` names the wait (`track::T_*`), and says whether the acquisition is
    /// exclusive.
    pub(crate) fn new(sem: &'a Sem, n: usize, tag: u8) -> Acquire<'a> {
        Acquire { sem, n, tag, key: None, held: false }
    }

    /// Bring the probe up to date, and name the wait for the console (under the waiter
    /// mutex, before `Pending`). The refresh runs for every waiter of a tracked
    /// semaphore, watched or not: the queue changed.
    fn name_wait(&self, w: &mut Waiters) {
        if w.tracked.is_none() && track::watching() {
            w.tracked = Some(Tracked::new(self.tag, self.sem.created_at));
            self.sem.tracked.store(true, Relaxed);
        }
        self.sem.refresh(w);
        if let Some(t) = &w.tracked {
            track::record(self.tag, t.id);
        }
    }
}

impl Future for Acquire<'_> {
    type Output = Result<(), Closed>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), Closed>> {
        let this = self.get_mut();
        let sem = this.sem;
        let exclusive = track::is_exclusive(this.tag);
        if this.held {
            return this.hand_over(cx);
        }
        if let Some(key) = this.key {
            let mut w = lock(&sem.waiters);
            let Some(node) = w.list.get_mut(key) else {
                this.key = None;
                return Poll::Ready(Err(Closed));
            };
            match node.state {
                NodeState::Waiting => {
                    if !node.waker.as_ref().is_some_and(|wk| wk.will_wake(cx.waker())) {
                        node.waker = Some(cx.waker().clone());
                    }
                    this.name_wait(&mut w);
                    return Poll::Pending;
                }
                NodeState::Done => {
                    w.list.take(key);
                    this.key = None;
                    drop(w);
                    this.held = true;
                    return this.hand_over(cx);
                }
                NodeState::Closed => {
                    let got = w.list.take(key).map_or(0, |n| n.got);
                    this.key = None;
                    let mut wakers = WakeList::new();
                    sem.release_locked(&mut w, got, &mut wakers);
                    drop(w);
                    wakers.wake_all();
                    return Poll::Ready(Err(Closed));
                }
            }
        }
        if this.n == 0 {
            return Poll::Ready(if sem.is_closed() { Err(Closed) } else { Ok(()) });
        }
        // The permits are taken (or the place in line) before the budget is looked at,
        // so a task whose poll has spent its budget still keeps its turn: it yields
        // holding what it took (`hand_over`), as Tokio's semaphore does.
        match sem.try_acquire(this.n, exclusive) {
            Ok(()) => {
                this.held = true;
                return this.hand_over(cx);
            }
            Err(TryErr::Closed) => return Poll::Ready(Err(Closed)),
            Err(TryErr::NoPermits) => {}
        }
        let me = track::current_task_id();
        let mut w = lock(&sem.waiters);
        let mut s = sem.state.load(ACQ);
        let took = loop {
            if s & CLOSED != 0 {
                return Poll::Ready(Err(Closed));
            }
            let free = s >> SHIFT;
            if s & QUEUED == 0 && free >= this.n {
                match sem.state.compare_exchange_weak(s, s - (this.n << SHIFT), AcqRel, ACQ) {
                    Ok(_) => {
                        if exclusive {
                            sem.holder.store(me, Relaxed);
                        }
                        sem.refresh(&w);
                        drop(w);
                        this.held = true;
                        return this.hand_over(cx);
                    }
                    Err(now) => s = now,
                }
                continue;
            }
            // Queue up, taking whatever is free (less than needed) as a first part.
            match sem.state.compare_exchange_weak(s, QUEUED, AcqRel, ACQ) {
                Ok(_) => break free,
                Err(now) => s = now,
            }
        };
        let key = w.list.push_back(Node {
            waker: Some(cx.waker().clone()),
            need: this.n - took,
            got: took,
            task: me,
            exclusive,
            state: NodeState::Waiting,
        });
        this.key = Some(key);
        this.name_wait(&mut w);
        Poll::Pending
    }
}

impl Acquire<'_> {
    /// The permits are this future's (`held`): hand them to the caller, unless this poll
    /// has spent its cooperative budget. Then the task yields and keeps them (and its
    /// turn) until its next poll, so a task that takes a free lock in a loop still
    /// yields, and one that queued is not overtaken for having run long.
    fn hand_over(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Closed>> {
        debug_assert!(self.held && self.key.is_none());
        std::task::ready!(coop::poll_budget(cx));
        self.held = false;
        coop::spend();
        Poll::Ready(Ok(()))
    }
}

impl Drop for Acquire<'_> {
    fn drop(&mut self) {
        if self.held {
            // Taken but never handed over: back to the semaphore (the next waiter in
            // line), and an exclusive holder is nobody again.
            if track::is_exclusive(self.tag) {
                self.sem.clear_holder();
            }
            self.sem.release(self.n);
            return;
        }
        let Some(key) = self.key.take() else { return };
        let mut wakers = WakeList::new();
        let mut w = lock(&self.sem.waiters);
        if let Some(node) = w.list.take(key) {
            if node.state == NodeState::Done && node.exclusive {
                // Handed over but never taken up: it was this task's for a moment only.
                self.sem.holder.store(0, Relaxed);
            }
            // Partial permits go on to the waiters behind it (or back to the word); an
            // emptied queue clears `QUEUED` either way.
            self.sem.release_locked(&mut w, node.got, &mut wakers);
        }
        drop(w);
        wakers.wake_all();
    }
}
