//! The Tokio bridge (feature `tokio-bridge`): a small Tokio runtime that a Volt runtime
//! owns, for crates wired to Tokio's runtime (reqwest, tonic's `Channel`, sqlx, ...),
//! which panic with "there is no reactor running" anywhere else.
//!
//! ```
//! # async fn fetch() -> u16 { 200 }
//! let rt = volt::runtime::Builder::new().tokio_bridge_threads(1).build()?;
//! let status = rt.block_on(volt::bridge::with_tokio(async {
//!     // Inside: `tokio::spawn`, Tokio sockets and Tokio timers all work.
//!     fetch().await
//! }));
//! # let _ = status;
//! # Ok::<_, std::io::Error>(())
//! ```
//!
//! # What runs where
//! * [`with_tokio`] wraps a future that stays on Volt: a Volt worker (or `block_on`)
//!   polls it, and around each poll, and around its drop, the bridge's Tokio context is
//!   entered (`tokio::runtime::Handle::enter`). Whatever the future registers while it
//!   runs therefore lands on the bridge: its Tokio sockets on the bridge's reactor, its
//!   Tokio timers on the bridge's timer wheel, and anything it `tokio::spawn`s (hyper's
//!   connection tasks inside reqwest, tonic's channel worker) on the bridge's threads.
//!   While it waits on those, the task's `TaskInfo::waiting_on` is the label
//!   [`BRIDGE_WAIT`] ("tokio (bridge)"), unless a Volt future inside named its own wait.
//! * [`spawn`] runs a whole future on the bridge's threads, as `tokio::spawn` would; its
//!   `tokio::task::JoinHandle` can be awaited from a Volt task.
//! * [`Handle::tokio_bridge`](crate::runtime::Handle::tokio_bridge) hands out the bridge's
//!   `tokio::runtime::Handle` for anything else.
//!
//! The Tokio runtime starts on first use (until then the bridge costs nothing: no
//! threads), with every driver on (`enable_all`), and
//! [`Builder::tokio_bridge_threads`](crate::runtime::Builder::tokio_bridge_threads)
//! worker threads (one by default) named `<thread_name>-bridge-N`. Its blocking-pool
//! threads (Tokio's `spawn_blocking`, which reqwest uses to resolve names) carry the same
//! names. It is not hidden: `Snapshot::bridge` reports its workers, live tasks, queue
//! depth and busy time, and the console and the exporter show them.
//!
//! # Shutdown
//! Shutting the Volt runtime down (dropping it, or `shutdown_timeout`) shuts the bridge
//! down last, after the Volt tasks are cancelled (so a bridged future is dropped while
//! its Tokio context still exists) and after the blocking pool:
//! * from a plain thread, it waits for the bridge's threads: up to what is left of the
//!   deadline with `shutdown_timeout`, or until they are gone when there is none;
//! * on a Volt worker, inside a Volt `block_on` or blocking-pool call, or inside any Tokio
//!   context, it must not wait (dropping a Tokio runtime there panics), so it only tells
//!   the bridge to stop (`shutdown_background`); its threads exit on their own.
//!
//! Then the bridge never starts again: `Handle::tokio_bridge` panics, and a
//! [`WithTokio`] polled later panics with a message that says so. Tasks still on the
//! bridge are dropped, and their `JoinHandle`s report cancellation.
//!
//! # Limits
//! * Readiness for a bridged future's Tokio sockets comes from the bridge's reactor
//!   thread, so every I/O event costs one cross-thread wake of the Volt task. Volt's own
//!   sockets (`volt::net`) do not pay that; use them where a crate lets you choose.
//! * The bridge's threads are not Volt workers: they do not appear in the worker rows of
//!   the telemetry, the console or the exporter, only in the bridge's own figures.
//! * `tokio::task::block_in_place` panics inside [`with_tokio`] (a Volt worker is not a
//!   Tokio worker); `tokio::task::spawn_local` and `LocalSet` are not supported either.
//!   Use `volt::task::spawn_blocking`, or run the code with [`spawn`].
//! * Tokio's cooperative budget does not apply to a future polled by Volt; Volt's own
//!   budget does.

use crate::runtime::Handle;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

pub(crate) mod state;
use state::SHUT_DOWN;

/// The wait a task shows while a bridged future is pending on Tokio's sockets, timers or
/// tasks (which record no wait of their own), as `TaskInfo::waiting_on`.
pub const BRIDGE_WAIT: &str = "tokio (bridge)";

/// Run `future` on Volt with the current Volt runtime's Tokio bridge entered around each
/// poll (and around its drop), so Tokio-only crates work inside it. The runtime is the
/// one current at the first poll, so `rt.block_on(with_tokio(fut))` works, and the bridge
/// starts then if it has not yet. See the [module doc](self) for what runs where.
///
/// # Panics
/// When first polled outside a Volt runtime (a task, or inside `Runtime::block_on`); use
/// [`WithTokio::new_in`] there. The returned future panics when polled after its Volt
/// runtime has shut down.
pub fn with_tokio<F: Future>(future: F) -> WithTokio<F> {
    WithTokio::new(future)
}

/// Run `future` on the current Volt runtime's Tokio bridge (its own threads, like
/// `tokio::spawn`), starting the bridge if needed. Awaiting the handle from a Volt task
/// works: Tokio's `JoinHandle` needs no Tokio context to be awaited. From outside a
/// runtime, use `handle.tokio_bridge().spawn(future)`.
///
/// # Panics
/// Outside a Volt runtime, after it has shut down, or if the bridge's threads cannot be
/// started.
pub fn spawn<F>(future: F) -> tokio::task::JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    current("volt::bridge::spawn").tokio_bridge().spawn(future)
}

fn current(what: &str) -> Handle {
    Handle::try_current().ok().unwrap_or_else(|| {
        panic!(
            "{what} called outside a Volt runtime: call it from a task or inside `Runtime::block_on`, \
             or go through a `volt::runtime::Handle` (`WithTokio::new_in`, `Handle::tokio_bridge`)"
        )
    })
}

pin_project_lite::pin_project! {
    /// A future run on Volt with its runtime's Tokio bridge entered around each poll and
    /// around its drop; made by [`with_tokio`] or [`WithTokio::new_in`].
    #[must_use = "futures do nothing unless you `.await` or poll them"]
    pub struct WithTokio<F> {
        // `None` once it has completed (dropped then, inside the context).
        #[pin]
        future: Option<F>,
        // `None` until the first poll for `with_tokio`, which takes the current runtime.
        runtime: Option<Handle>,
        // The bridge's handle, taken on the first poll.
        tokio: Option<tokio::runtime::Handle>,
    }

    impl<F> PinnedDrop for WithTokio<F> {
        fn drop(this: Pin<&mut Self>) {
            let mut this = this.project();
            if this.future.is_none() {
                return;
            }
            // The future may deregister Tokio sockets or spawn cleanup tasks as it goes.
            let _enter = this.tokio.as_ref().map(|h| h.enter());
            this.future.set(None);
        }
    }
}

impl<F: Future> WithTokio<F> {
    /// Bridge `future` to the Tokio bridge of the Volt runtime current at its first
    /// poll; same as [`with_tokio`].
    ///
    /// # Panics
    /// When first polled outside a Volt runtime.
    pub fn new(future: F) -> WithTokio<F> {
        WithTokio { future: Some(future), runtime: None, tokio: None }
    }

    /// Bridge `future` to `runtime`'s Tokio bridge, from any thread. It may be polled
    /// anywhere; a Volt worker of `runtime` is where it belongs.
    pub fn new_in(future: F, runtime: &Handle) -> WithTokio<F> {
        WithTokio { future: Some(future), runtime: Some(runtime.clone()), tokio: None }
    }
}

impl<F: Future> Future for WithTokio<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let mut this = self.project();
        let runtime = this.runtime.get_or_insert_with(|| current("volt::bridge::with_tokio"));
        let bridge = &runtime.shared.bridge;
        if this.tokio.is_none() {
            *this.tokio = Some(bridge.handle().unwrap_or_else(|e| panic!("{e}")));
        } else if bridge.is_closed() {
            panic!("{SHUT_DOWN}; a `WithTokio` future was polled after that");
        }
        let _enter = this.tokio.as_ref().map(|h| h.enter());
        let mark = crate::task::wait::Mark::now();
        let out = this.future.as_mut().as_pin_mut().expect("`WithTokio` polled after it completed").poll(cx);
        if out.is_ready() {
            // Drop the finished future while the context is still entered.
            this.future.set(None);
        } else if mark.unchanged() {
            // Tokio's leaf futures name no wait: what the task waits on sits on the bridge.
            crate::task::wait::record_label(BRIDGE_WAIT);
        }
        out
    }
}

impl<F> std::fmt::Debug for WithTokio<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WithTokio").field("bridge_started", &self.tokio.is_some()).finish_non_exhaustive()
    }
}
