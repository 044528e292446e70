//! The harness (poll, complete, cancel, free) against the mock scheduler.
use super::join::{JoinError, JoinHandle};
use super::test_util::{spawn, DropCounter, MockScheduler};
use super::yield_now::yield_now;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

fn ready<T>(h: &mut JoinHandle<T>) -> Option<Result<T, JoinError>> {
    match Pin::new(h).poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(v) => Some(v),
        Poll::Pending => None,
    }
}

#[test]
fn spawn_run_complete_and_free() {
    let sched = MockScheduler::new();
    let mut h = spawn(&sched, async { 5 });
    assert!(ready(&mut h).is_none());
    assert_eq!(sched.run_all(), 1);
    assert_eq!(ready(&mut h).unwrap().unwrap(), 5);
    drop(h);
    assert_eq!(sched.completed.load(SeqCst), 1);
    assert_eq!(Arc::strong_count(&sched), 1, "the cell (holding a scheduler clone) was freed");
}

#[test]
fn a_self_wake_during_poll_requeues_as_a_yield() {
    let sched = MockScheduler::new();
    let mut h = spawn(&sched, async {
        yield_now().await;
        yield_now().await;
    });
    assert_eq!(sched.run_all(), 3);
    assert_eq!(sched.yields.load(SeqCst), 2);
    assert!(ready(&mut h).unwrap().is_ok());
}

/// A future that panics as it is dropped, after its poll returned `Ready`: the task
/// panicked, and its handle hears so instead of `Ok` (the first form discarded the
/// panic); the output it returned is dropped, once.
#[test]
fn a_panic_dropping_the_future_after_ready_reaches_the_handle() {
    struct PanicsOnDrop;
    impl Drop for PanicsOnDrop {
        fn drop(&mut self) {
            panic!("dropped after Ready");
        }
    }
    struct ReadyAtOnce(#[allow(dead_code)] PanicsOnDrop, Option<DropCounter>);
    impl Future for ReadyAtOnce {
        type Output = DropCounter;
        fn poll(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<DropCounter> {
            Poll::Ready(self.1.take().expect("polled once"))
        }
    }
    let sched = MockScheduler::new();
    let drops = Arc::new(AtomicUsize::new(0));
    let mut h = spawn(&sched, ReadyAtOnce(PanicsOnDrop, Some(DropCounter(drops.clone()))));
    assert_eq!(sched.run_all(), 1);
    let out = ready(&mut h).expect("the task finished");
    assert!(out.as_ref().is_err_and(|e| e.is_panic()), "the drop's panic was lost: {:?}", out.map(|_| ()));
    assert_eq!(drops.load(SeqCst), 1, "the output was not dropped once");
}

#[test]
fn panic_in_poll_and_abort_before_poll() {
    let sched = MockScheduler::new();
    let drops = Arc::new(AtomicUsize::new(0));
    let d = DropCounter(drops.clone());
    let mut p = spawn(&sched, async move {
        let _d = d;
        panic!("inside");
    });
    let d = DropCounter(drops.clone());
    let mut a = spawn(&sched, async move {
        let _d = d;
    });
    a.abort();
    sched.run_all();
    assert!(ready(&mut p).unwrap().unwrap_err().is_panic());
    assert!(ready(&mut a).unwrap().unwrap_err().is_cancelled());
    assert_eq!(drops.load(SeqCst), 2, "both futures were dropped");
    assert_eq!((sched.panicked.load(SeqCst), sched.cancelled.load(SeqCst)), (1, 1));
    assert_eq!(sched.finished(), 2);
    assert!(sched.pop().is_none());
}

/// A waker clone that was `mem::forget`-ed, turned back into an owning `Waker`.
struct RawWakerCopy(*const (), &'static std::task::RawWakerVTable);
// SAFETY: the copy is a task waker's data pointer and vtable (both thread-safe).
unsafe impl Send for RawWakerCopy {}

impl RawWakerCopy {
    fn of(w: &Waker) -> RawWakerCopy {
        RawWakerCopy(w.data(), w.vtable())
    }
    /// # Safety
    /// Each call must match one forgotten clone (it takes over that clone's reference).
    unsafe fn revive(&self) -> Waker {
        // SAFETY: the caller's contract: this adopts one forgotten clone's reference.
        unsafe { Waker::new(self.0, self.1) }
    }
}

/// 17 million live clones of one task's waker (past the first state layout's 24-bit
/// reference count, which aborted the process) are fine: the task completes while they
/// live, and its cell is freed exactly when the last one is dropped.
#[test]
#[cfg_attr(miri, ignore = "17 million waker clones")]
fn seventeen_million_waker_clones_then_complete_and_free() {
    const CLONES: usize = 17_000_000;
    let sched = MockScheduler::new();
    let drops = Arc::new(AtomicUsize::new(0));
    let d = DropCounter(drops.clone());
    let copy = Arc::new(std::sync::Mutex::new(None));
    let c2 = copy.clone();
    let mut first = true;
    let mut h = spawn(&sched, async move {
        let _d = d;
        std::future::poll_fn(|cx| {
            if !std::mem::replace(&mut first, false) {
                return Poll::Ready(7);
            }
            for _ in 0..CLONES {
                // Held without memory: each forgotten clone owns one reference.
                std::mem::forget(cx.waker().clone());
            }
            *c2.lock().unwrap() = Some(RawWakerCopy::of(cx.waker()));
            Poll::Pending
        })
        .await
    });
    assert_eq!(sched.run_all(), 1);
    let copy = copy.lock().unwrap().take().unwrap();
    let mut wakers_left = CLONES;
    // SAFETY: one of the forgotten clones.
    unsafe { copy.revive() }.wake();
    wakers_left -= 1;
    assert_eq!(sched.run_all(), 1);
    assert_eq!(ready(&mut h).unwrap().unwrap(), 7);
    drop(h);
    assert_eq!(drops.load(SeqCst), 1, "the future was dropped at completion");
    while wakers_left > 1 {
        // SAFETY: one of the forgotten clones.
        drop(unsafe { copy.revive() });
        wakers_left -= 1;
    }
    assert_eq!(Arc::strong_count(&sched), 2, "the cell was freed while a waker still held it");
    // SAFETY: the last forgotten clone.
    drop(unsafe { copy.revive() });
    assert_eq!(Arc::strong_count(&sched), 1, "the cell was not freed after the last waker");
    assert_eq!(sched.completed.load(SeqCst), 1);
}
