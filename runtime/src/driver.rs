//! The driver's handle: what the leaves that wait on I/O or time hold of their runtime.
//!
//! A socket's registration, a `Sleep`, a `Timeout`, the signal listener and the paused
//! clock's controls need the reactor and the timer wheel (`reactor::Driver`), and the
//! runtime's `Metrics` to count what they do; nothing of the scheduler. So they hold this
//! handle, one `Arc` shared with the scheduler's `Handle`, and find the current one
//! through the thread's context (`runtime::context`), never through the scheduler. The
//! scheduler holds the same handle, and polls the driver on its workers' way to park.

use crate::reactor::Driver;
use crate::runtime::context;
use crate::telemetry::metrics::Metrics;
use crate::telemetry::record::WorkerRecorder;
use std::mem::ManuallyDrop;
use std::ops::Deref;
use std::sync::Arc;

/// A runtime's reactor and timers, and the metrics they count in (cheap to clone).
#[derive(Clone)]
pub(crate) struct Handle {
    inner: Arc<Inner>,
}

struct Inner {
    driver: Driver,
    metrics: Arc<Metrics>,
}

impl Handle {
    pub(crate) fn new(metrics: Arc<Metrics>, io: crate::reactor::IoDriver) -> std::io::Result<Handle> {
        Ok(Handle { inner: Arc::new(Inner { driver: Driver::new(io)?, metrics }) })
    }

    /// The runtime's metrics, where the leaves count their events.
    #[inline(always)]
    pub(crate) fn metrics(&self) -> &Metrics {
        &self.inner.metrics
    }

    /// The current runtime's driver, if this thread is in one.
    pub(crate) fn current() -> Option<Handle> {
        Handle::borrowed(context::get().driver).map(|h| Handle::clone(&h))
    }

    /// Run `f` on the current runtime's driver without taking a reference to it.
    #[inline]
    pub(crate) fn with_current<R>(f: impl FnOnce(&Handle) -> R) -> Option<R> {
        Handle::borrowed(context::get().driver).map(|h| f(&h))
    }

    fn borrowed(p: *const ()) -> Option<ManuallyDrop<Handle>> {
        if p.is_null() {
            return None;
        }
        // SAFETY: only `context_ptr` below makes the pointers the context's driver slot
        // holds: `Arc::as_ptr` of a live handle's `Arc<Inner>`, which the thread that
        // entered keeps alive (through its runtime) while the context is set.
        // `ManuallyDrop` keeps this borrowed `Arc` from releasing a count it never took.
        Some(ManuallyDrop::new(Handle { inner: unsafe { Arc::from_raw(p.cast::<Inner>()) } }))
    }

    /// This handle as the context's driver slot stores it (see `runtime::context`).
    pub(crate) fn context_ptr(&self) -> *const () {
        Arc::as_ptr(&self.inner).cast()
    }

    /// The recorder of this thread's worker, if the thread is a worker of this driver's
    /// runtime (a leaf's event then counts on that worker; elsewhere it counts as
    /// remote).
    #[inline(always)]
    pub(crate) fn current_rec(&self) -> Option<&WorkerRecorder> {
        let ctx = context::get();
        if std::ptr::eq(ctx.driver, self.context_ptr()) && !ctx.rec.is_null() {
            // SAFETY: the scheduler sets the recorder slot to its worker's recorder,
            // together with its own driver in the driver slot; that worker lives as long
            // as the runtime, which `self` keeps alive.
            Some(unsafe { &*ctx.rec })
        } else {
            None
        }
    }
}

impl Deref for Handle {
    type Target = Driver;

    #[inline(always)]
    fn deref(&self) -> &Driver {
        &self.inner.driver
    }
}
