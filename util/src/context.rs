//! [`TokioContext`]: a future that runs inside a given Volt runtime's context, wherever it
//! is polled (tokio-util's `context`).

use pin_project_lite::pin_project;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use volt::runtime::{Handle, Runtime};

pin_project! {
    /// `inner`, polled with `handle`'s runtime as the current one: the timers, sockets
    /// and spawns it makes belong to that runtime, even when another executor (or
    /// another Volt runtime) polls it.
    pub struct TokioContext<F> {
        #[pin]
        inner: F,
        handle: Handle,
    }
}

impl<F> TokioContext<F> {
    /// `future`, polled inside `handle`'s runtime.
    pub fn new(future: F, handle: Handle) -> TokioContext<F> {
        TokioContext { inner: future, handle }
    }

    /// The runtime it runs in.
    pub fn handle(&self) -> &Handle {
        &self.handle
    }

    /// The future back.
    pub fn into_inner(self) -> F {
        self.inner
    }
}

impl<F: Future> Future for TokioContext<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let me = self.project();
        let _entered = me.handle.enter();
        me.inner.poll(cx)
    }
}

impl<F: std::fmt::Debug> std::fmt::Debug for TokioContext<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokioContext").field("inner", &self.inner).finish_non_exhaustive()
    }
}

/// [`wrap`](RuntimeExt::wrap) for a Volt [`Runtime`].
pub trait RuntimeExt {
    /// `future`, polled inside this runtime wherever it is polled.
    fn wrap<F: Future>(&self, future: F) -> TokioContext<F>;
}

impl RuntimeExt for Runtime {
    fn wrap<F: Future>(&self, future: F) -> TokioContext<F> {
        TokioContext::new(future, self.handle().clone())
    }
}
