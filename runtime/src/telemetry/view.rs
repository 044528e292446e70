//! What telemetry reads of the runtime's own state, through a trait the runtime
//! implements: telemetry sits below the scheduler and never imports it.

use super::Snapshot;
use crate::task::list::OwnedTasks;

/// The runtime as telemetry sees it (implemented by the scheduler's handle).
pub(crate) trait RuntimeView: Send + Sync + 'static {
    /// Whether the runtime has begun to shut down.
    fn is_shutdown(&self) -> bool;

    /// Whether every worker is parked (the stall monitor's thread may then sleep).
    fn all_parked(&self) -> bool;

    /// Fill in the scheduler's gauges of a snapshot: the global queue, the idle state,
    /// the blocking pool, the outside cell cache and the Tokio bridge.
    fn fill_gauges(&self, snap: &mut Snapshot);

    /// Worker `i`'s queue gauges: its ring's depth, whether its LIFO slot holds a task,
    /// and the bytes of its cell cache.
    fn worker_gauges(&self, i: usize) -> WorkerGauges;

    /// The runtime's list of live tasks.
    fn tasks(&self) -> &OwnedTasks;
}

/// One worker's queue gauges ([`RuntimeView::worker_gauges`]).
pub(crate) struct WorkerGauges {
    pub(crate) queue_depth: u64,
    pub(crate) lifo_occupied: bool,
    pub(crate) cell_cache_bytes: u64,
}
