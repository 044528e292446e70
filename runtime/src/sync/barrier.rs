//! `Barrier`: tasks wait until a set number of them have arrived, Volt's own with
//! Tokio's API and semantics.

use super::list::{Key, List};
use super::track::{self, CreatedAt, Tracked, T_BARRIER};
use crate::loom::{lock, Mutex};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering::Relaxed;
use std::task::{Context, Poll, Waker};

/// Lets `n` tasks wait for each other: the first `n - 1` calls to [`Barrier::wait`] wait
/// until the `n`-th, which is the leader of that generation and wakes them all; then the
/// barrier is ready for the next `n`.
///
/// While a task waits, `Telemetry::tasks()` names the wait `wait Barrier (2 of 5)`.
///
/// ```
/// # let rt = volt::runtime::Builder::new().worker_threads(2).build().unwrap();
/// # rt.block_on(async {
/// use std::sync::Arc;
/// let b = Arc::new(volt::sync::Barrier::new(3));
/// let hs: Vec<_> = (0..3).map(|_| { let b = b.clone(); volt::spawn(async move { b.wait().await.is_leader() }) }).collect();
/// let mut leaders = 0;
/// for h in hs { leaders += h.await.unwrap() as usize; }
/// assert_eq!(leaders, 1);
/// # });
/// ```
pub struct Barrier {
    n: usize,
    /// Where it was created, for its probe.
    created_at: CreatedAt,
    state: Mutex<State>,
}

struct State {
    arrived: usize,
    generation: u64,
    waiters: List<Option<Waker>>,
    tracked: Option<Tracked>,
}

/// What [`Barrier::wait`] returns: whether this task was the generation's leader.
#[derive(Debug, Clone)]
pub struct BarrierWaitResult(bool);

impl BarrierWaitResult {
    /// Whether this task was the one (exactly one per generation) whose arrival released
    /// the others.
    pub fn is_leader(&self) -> bool {
        self.0
    }
}

impl fmt::Debug for Barrier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Barrier").field("n", &self.n).finish()
    }
}

impl Barrier {
    /// A barrier for `n` tasks (0 counts as 1: every `wait` returns at once, as leader).
    /// Where it is called is recorded for the console's resources view.
    #[track_caller]
    pub fn new(n: usize) -> Barrier {
        Barrier {
            n: n.max(1),
            created_at: Some(std::panic::Location::caller()),
            state: Mutex::new(State { arrived: 0, generation: 0, waiters: List::new(), tracked: None }),
        }
    }

    /// Arrive, and wait until `n` tasks have arrived in this generation.
    ///
    /// A wait dropped before the generation is complete still counts as arrived (as
    /// Tokio's).
    pub async fn wait(&self) -> BarrierWaitResult {
        let generation = {
            let mut s = lock(&self.state);
            s.arrived += 1;
            if s.arrived == self.n {
                s.arrived = 0;
                s.generation += 1;
                let mut wakers = super::waiters::WakeList::new();
                while let Some(k) = s.waiters.front() {
                    if let Some(w) = s.waiters.get_mut(k).and_then(Option::take) {
                        wakers.push(w);
                    }
                    s.waiters.unlink(k);
                }
                self.refresh(&s);
                drop(s);
                wakers.wake_all();
                return BarrierWaitResult(true);
            }
            // The arrival counts at once, whether this task's wait is watched or not.
            self.refresh(&s);
            s.generation
        };
        BarrierWait { b: self, generation, key: None }.await;
        BarrierWaitResult(false)
    }

    fn refresh(&self, s: &State) {
        if let Some(t) = &s.tracked {
            t.probe.aux.store(s.arrived as u64, Relaxed);
            t.probe.total.store(self.n as u64, Relaxed);
            t.probe.waiters.store(s.waiters.len() as u64, Relaxed);
        }
    }
}

struct BarrierWait<'a> {
    b: &'a Barrier,
    generation: u64,
    key: Option<Key>,
}

impl Future for BarrierWait<'_> {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        let mut s = lock(&this.b.state);
        if s.generation != this.generation {
            if let Some(k) = this.key.take() {
                s.waiters.take(k);
            }
            return Poll::Ready(());
        }
        match this.key.and_then(|k| s.waiters.get_mut(k)) {
            Some(slot) => {
                if !slot.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                    *slot = Some(cx.waker().clone());
                }
            }
            None => this.key = Some(s.waiters.push_back(Some(cx.waker().clone()))),
        }
        if track::watching() {
            let at = this.b.created_at;
            let id = s.tracked.get_or_insert_with(|| Tracked::new(T_BARRIER, at)).id;
            this.b.refresh(&s);
            track::record(T_BARRIER, id);
        }
        Poll::Pending
    }
}

impl Drop for BarrierWait<'_> {
    fn drop(&mut self) {
        if let Some(k) = self.key.take() {
            lock(&self.b.state).waiters.take(k);
        }
    }
}
