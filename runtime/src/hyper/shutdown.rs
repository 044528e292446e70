//! Graceful shutdown of a server: where it stands (running, graceful, forced), the
//! registry of its open connections that lets it reach and count them, each
//! connection's place in it, and a future that stops when the shutdown says so.

use std::future::Future;
use std::sync::atomic::Ordering::{Acquire, Release};
use std::sync::atomic::{AtomicU8, AtomicUsize};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

/// Where the server's shutdown stands, for its connections.
pub(super) const RUNNING: u8 = 0;
pub(super) const GRACEFUL: u8 = 1;
pub(super) const FORCED: u8 = 2;

/// The open connections of one server: how many, and how to reach each one's task.
pub(super) struct Registry {
    state: AtomicU8,
    open: AtomicUsize,
    inner: Mutex<RegistryInner>,
}

#[derive(Default)]
struct RegistryInner {
    /// The task of each open connection (its waker), by slot.
    conns: Vec<Option<Waker>>,
    free: Vec<usize>,
    /// The server's own task, waiting for the last connection to close.
    drained: Option<Waker>,
}

impl Registry {
    pub(super) fn new() -> Registry {
        Registry { state: AtomicU8::new(RUNNING), open: AtomicUsize::new(0), inner: Default::default() }
    }

    /// Where the server's shutdown stands: `RUNNING`, `GRACEFUL` or `FORCED`.
    pub(super) fn state(&self) -> u8 {
        self.state.load(Acquire)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, RegistryInner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Count a connection as open from its accept on, before its task first runs: a
    /// shutdown that begins in between must still wait for it (or force it). Its waker
    /// comes with that first poll ([`Registry::set_waker`]); until then the task needs no
    /// wake, as its first poll looks at the state.
    fn reserve(&self) -> usize {
        let mut g = self.lock();
        self.open.fetch_add(1, Release);
        match g.free.pop() {
            Some(i) => i,
            None => {
                g.conns.push(None);
                g.conns.len() - 1
            }
        }
    }

    fn set_waker(&self, slot: usize, waker: &Waker) {
        self.lock().conns[slot] = Some(waker.clone());
    }

    fn deregister(&self, slot: usize) {
        let drained = {
            let mut g = self.lock();
            g.conns[slot] = None;
            g.free.push(slot);
            let left = self.open.fetch_sub(1, Release) - 1;
            if left == 0 {
                g.drained.take()
            } else {
                None
            }
        };
        if let Some(w) = drained {
            w.wake();
        }
    }

    /// Move to `state` and wake every connection to see it.
    pub(super) fn signal(&self, state: u8) {
        self.state.store(state, Release);
        let wakers: Vec<Waker> = self.lock().conns.iter().flatten().cloned().collect();
        for w in wakers {
            w.wake();
        }
    }

    /// Ready once no connection is open.
    pub(super) fn poll_drained(&self, cx: &mut Context<'_>) -> Poll<()> {
        if self.open.load(Acquire) == 0 {
            return Poll::Ready(());
        }
        let mut g = self.lock();
        if self.open.load(Acquire) == 0 {
            return Poll::Ready(());
        }
        g.drained = Some(cx.waker().clone());
        Poll::Pending
    }
}

/// A connection's place in the registry: reserved at its accept, its waker stored on the
/// task's first poll (so it is the task's own), given back on drop, including when the
/// task is cancelled or dropped before it ever ran.
pub(super) struct ConnGuard {
    registry: Arc<Registry>,
    slot: usize,
}

impl ConnGuard {
    pub(super) fn reserve(registry: &Arc<Registry>) -> ConnGuard {
        ConnGuard { registry: Arc::clone(registry), slot: registry.reserve() }
    }

    pub(super) fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    pub(super) async fn register_task(&self) {
        std::future::poll_fn(|cx| {
            self.registry.set_waker(self.slot, cx.waker());
            Poll::Ready(())
        })
        .await
    }
}

impl Drop for ConnGuard {
    fn drop(&mut self) {
        self.registry.deregister(self.slot);
    }
}

/// Run `fut` unless a graceful shutdown begins and `give_up()` agrees (then `None`); a
/// forced one always ends it.
pub(super) async fn unless_shutdown<F: Future>(
    registry: &Registry,
    fut: F,
    give_up: impl Fn() -> bool,
) -> Option<F::Output> {
    let mut fut = std::pin::pin!(fut);
    std::future::poll_fn(|cx| {
        match registry.state() {
            RUNNING => {}
            GRACEFUL if !give_up() => {}
            _ => return Poll::Ready(None),
        }
        fut.as_mut().poll(cx).map(Some)
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A connection accepted but not yet polled when the shutdown begins still counts:
    /// the server waits for it (or forces it at the deadline) instead of returning while
    /// it goes on to serve a request nobody will cut.
    #[test]
    fn a_connection_not_yet_polled_keeps_the_server_draining() {
        let registry = Arc::new(Registry::new());
        let guard = ConnGuard::reserve(&registry);
        registry.signal(GRACEFUL);
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        assert!(registry.poll_drained(&mut cx).is_pending(), "an accepted connection is open before its first poll");
        drop(guard);
        assert!(registry.poll_drained(&mut cx).is_ready(), "dropping it, even unpolled, drains the server");
    }
}
