//! [`yield_now`].

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// Yield to the scheduler once: the task goes to the back of its worker's queue.
pub async fn yield_now() {
    struct YieldNow(bool);
    impl Future for YieldNow {
        type Output = ();
        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            if self.0 {
                return Poll::Ready(());
            }
            self.0 = true;
            // No wait is recorded: the task is queued again at once and never idles here.
            // A reader tells a yield from the task's statistics instead (its poll's end
            // queued it, and nothing woke it since: `telemetry::read_task`).
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }
    YieldNow(false).await
}
