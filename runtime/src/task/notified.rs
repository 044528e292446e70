//! References to a task: [`Task`] (owning one reference) and [`Notified`] (a queue
//! entry), and making a new task ([`new_task`], [`new_local_task`]).

use super::header::Header;
use std::marker::PhantomData;
use std::ptr::NonNull;

/// A reference-owning pointer to a task.
pub(crate) struct Task<S: 'static> {
    raw: NonNull<Header>,
    _scheduler: PhantomData<S>,
}

// SAFETY: tasks are `Send` (their futures and outputs are), and the header is `Sync`.
unsafe impl<S> Send for Task<S> {}
// SAFETY: see above.
unsafe impl<S> Sync for Task<S> {}

impl<S: 'static> Task<S> {
    /// Adopt a reference the caller owns.
    pub(crate) fn from_raw(raw: NonNull<Header>) -> Task<S> {
        Task { raw, _scheduler: PhantomData }
    }

    pub(crate) fn header(&self) -> &Header {
        // SAFETY: the reference we own keeps the task alive.
        unsafe { self.raw.as_ref() }
    }

    /// The task's pointer as allocated (full provenance over the cell).
    pub(crate) fn raw(&self) -> NonNull<Header> {
        self.raw
    }

    /// Give up ownership of the reference without releasing it.
    pub(crate) fn into_raw(self) -> NonNull<Header> {
        let raw = self.raw;
        std::mem::forget(self);
        raw
    }

    /// Runtime shutdown: cancel the task if no thread is polling it.
    pub(crate) fn shutdown(&self) {
        // SAFETY: we hold a reference.
        unsafe { (self.header().vtable.shutdown)(self.raw) }
    }
}

impl<S: 'static> Drop for Task<S> {
    fn drop(&mut self) {
        if self.header().state.ref_dec() {
            // SAFETY: that was the last reference.
            unsafe { (self.header().vtable.dealloc)(self.raw) }
        }
    }
}

/// A queue entry: a task in SCHEDULED, owning the queue's reference.
pub(crate) struct Notified<S: 'static>(pub(crate) Task<S>);

impl<S: 'static> Notified<S> {
    pub(crate) fn into_raw(self) -> NonNull<Header> {
        self.0.into_raw()
    }

    /// # Safety
    /// `raw` must carry a queue reference (it came from `into_raw`).
    pub(crate) unsafe fn from_raw(raw: NonNull<Header>) -> Notified<S> {
        Notified(Task::from_raw(raw))
    }

    pub(crate) fn header(&self) -> &Header {
        self.0.header()
    }

    /// Run the task once; consumes the queue reference.
    pub(crate) fn run(self) {
        self.run_on(std::ptr::null());
    }

    /// `run`, passing the scheduler's poll context `cx` (the worker scheduler: the
    /// polling worker) to [`Schedule::poll_start`], so a poll need not look it up.
    #[inline(always)]
    pub(crate) fn run_on(self, cx: *const ()) {
        let raw = self.into_raw();
        // SAFETY: we pass on the queue reference we own.
        unsafe { (raw.as_ref().vtable.poll)(raw, cx) }
    }
}
