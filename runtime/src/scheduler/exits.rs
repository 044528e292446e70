//! Who finishes a shutdown ("the shutdown hand-off").
//!
//! A runtime dropped (or shut down) on one of its own threads can't wait for its workers:
//! one of them may be the caller. So it only marks the shutdown as begun here, and the
//! last worker to leave its loop finishes it (`Handle::finish_shutdown_here`). If every
//! worker has left already (the caller is a blocking-pool thread, or a thread whose
//! worker a blocking join handed off), the caller finishes it at once. Both sides decide
//! under the runtime's `exited` lock, so exactly one thread finishes, and only after
//! every worker has left. Each worker has one owner at a time (see "Handing the worker off" in
//! `join.rs`), so each worker's exit is counted once.

/// Workers that have left their loop for good (on shutdown), under the runtime's `exited` lock,
/// and who finishes a shutdown begun on one of the runtime's own threads ("the shutdown
/// hand-off"): exactly one thread, and only once every worker has left.
#[derive(Default)]
pub(crate) struct Exits {
    pub(crate) count: usize,
    /// Set when the runtime was dropped (or shut down) from one of its own threads, which
    /// can't wait for the workers: the last worker to leave then finishes the shutdown.
    finish_on_last: bool,
}

impl Exits {
    /// The owner of one of `workers` workers left its loop for good. Whether the caller
    /// must now finish the shutdown.
    #[must_use]
    pub(crate) fn worker_left(&mut self, workers: usize) -> bool {
        self.count += 1;
        self.count == workers && std::mem::take(&mut self.finish_on_last)
    }

    /// A shutdown begun on one of the runtime's own threads. Whether the caller must
    /// finish it now (every worker has left already); otherwise the last to leave will.
    #[must_use]
    pub(crate) fn shut_down_inside(&mut self, workers: usize) -> bool {
        if self.count < workers {
            self.finish_on_last = true;
            return false;
        }
        true
    }
}
