//! Naming a wait for the telemetry: [`waiting_on`] inside a leaf future of your own, and
//! [`WaitingOnExt::waiting_on`] around a future you do not own. How a wrapper's label
//! and the waits recorded inside it combine is on [`WaitingOnExt`]; the record itself is
//! `task::wait`.

use super::wait;
use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// Name what the current task waits on, for the telemetry (`TaskInfo::waits`, the
/// console's "waiting on" column): call it in a leaf future (a channel, a lock, a pool)
/// just before it returns `Pending`. The label joins the waits of this poll, after those
/// recorded before it; the task's next poll starts a new list. A future you do not own
/// is named with [`WaitingOnExt::waiting_on`] instead.
///
/// It costs one thread-local load and a branch when the runtime does not record tasks
/// (no `Builder::event_ring`), and a few stores into the task's own statistics when it
/// does; outside a task it does nothing.
///
/// ```no_run
/// use std::future::Future;
/// use std::pin::Pin;
/// use std::task::{Context, Poll};
///
/// struct Permit;
/// impl Future for Permit {
///     type Output = ();
///     fn poll(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<()> {
///         // ... store the waker where the pool will find it ...
///         volt::task::waiting_on("db pool permit");
///         Poll::Pending
///     }
/// }
/// ```
pub fn waiting_on(label: &'static str) {
    wait::record_label(label);
}

/// Names the wait of any future: `fut.waiting_on("db pool")`,
/// `fut.waiting_on(format!("GET {url}"))`.
///
/// A task's wait list (`TaskInfo::waits`, the console's "waiting on" column) holds what
/// Volt's leaf futures recorded in the task's latest poll. A future of another library
/// (a `futures` channel, a pool from a crate written for any runtime) records nothing,
/// and a task idle on one shows `unknown`. Wrapping it names the wait:
///
/// ```
/// use volt::task::WaitingOnExt;
///
/// let rt = volt::runtime::Builder::new().worker_threads(1).event_ring(1024).build().unwrap();
/// let (tx, rx) = futures::channel::oneshot::channel::<u32>();
/// let key = 42;
/// let h = rt.spawn(async move { rx.waiting_on(format!("cache fill for key {key}")).await });
/// // ... `Telemetry::tasks()` shows the task waiting on "cache fill for key 42" ...
/// tx.send(7).unwrap();
/// assert_eq!(rt.block_on(h).unwrap(), Ok(7));
/// ```
///
/// # How a label and the waits inside combine
/// The wrapper records its label only after its future returned `Pending` (a wrapper
/// whose future completed leaves nothing behind), and puts it in front of the waits that
/// Volt's leaf futures inside recorded in the same poll: the label is your name for the
/// whole operation, so it comes first (it is `TaskInfo::waiting_on`), and the waits
/// inside follow as its detail ("GET /users/7", then "read 10.0.0.5:443"). Nested
/// wrappers nest the same way, outer label first. A label already in the poll's list is
/// not listed again.
///
/// Labels are copied into the task's record, so a `String` label is readable after the
/// wrapper (or the task) is gone. The labels of one poll share 40 bytes; a label that
/// does not fit is cut at a character boundary and shown ending in `…`.
///
/// Without `Builder::event_ring` no task keeps statistics, and the wrapper only polls
/// its future (plus a thread-local load and a branch).
pub trait WaitingOnExt: Future + Sized {
    /// Wrap this future so that while it is pending, the task's wait list names `label`
    /// (a `&'static str` or a `String`: a URL, a key), in front of the waits the future
    /// itself recorded.
    fn waiting_on(self, label: impl Into<Cow<'static, str>>) -> WaitingOn<Self> {
        WaitingOn { future: self, label: label.into() }
    }
}

impl<F: Future> WaitingOnExt for F {}

/// A future whose wait has a name: see [`WaitingOnExt::waiting_on`].
#[must_use = "futures do nothing unless polled"]
pub struct WaitingOn<F> {
    future: F,
    label: Cow<'static, str>,
}

impl<F> WaitingOn<F> {
    /// The label.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// The wrapped future.
    pub fn into_inner(self) -> F {
        self.future
    }
}

impl<F: Future> Future for WaitingOn<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // SAFETY: `future` is structurally pinned: it is never moved out of the pinned
        // `WaitingOn` (`into_inner` takes it by value, unpinned), and `WaitingOn` has no
        // `Drop` of its own; `label` is never pinned.
        let this = unsafe { self.get_unchecked_mut() };
        // SAFETY: see above.
        let future = unsafe { Pin::new_unchecked(&mut this.future) };
        let mark = wait::Mark::now();
        let out = future.poll(cx);
        if out.is_pending() {
            wait::record_label_at(mark, &this.label);
        }
        out
    }
}

impl<F> std::fmt::Debug for WaitingOn<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WaitingOn").field("label", &self.label).finish_non_exhaustive()
    }
}
