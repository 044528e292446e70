//! Flushing the wakes the cooperative budget held back on a worker (see "Deferred wakes"
//! in `run`). The list itself is `task::coop::Deferred`, in the worker's `Core`.

use super::handle::Handle;
use super::worker::Worker;

impl Handle {
    /// Wake every task whose wake `w` held back; true if there were any. The wakes queue
    /// the tasks here (the LIFO slot and the ring), and one decision for the batch wakes
    /// a parked worker if more than one task waits.
    pub(crate) fn flush_deferred(&self, w: &Worker) -> bool {
        let core = &w.core;
        if core.deferred.is_empty() {
            return false;
        }
        let was_dispatching = core.dispatching.replace(true);
        core.deferred.wake_all();
        core.dispatching.set(was_dispatching);
        if !was_dispatching {
            let queued_here = w.lifo.peek().is_some() as u32 + w.queue.len();
            self.idle.notify_after_batch(queued_here, core.is_searching.get(), |i| self.unpark_worker(i));
        }
        true
    }
}
