//! A worker: the parts other threads touch (its ring, LIFO slot, park state, telemetry
//! recorder, task-cell cache) and the state only its own thread touches (`Core`), with
//! the constants of its loop. The loop itself is `run.rs`; parking, `worker_park.rs`.

use super::lifo::LifoSlot;
use super::park::ParkState;
use super::queue::WorkStealQueue;
use super::rand::FastRand;
use super::stats::Stats;
use crate::scheduler::handle::Handle;
use crate::task::cellcache::CellCache;
use crate::task::coop::Deferred;
use crate::task::header::Header;
use crate::telemetry::metrics::Metrics;
use crate::telemetry::record::WorkerRecorder;
use crate::telemetry::WorkerCounters;
use std::cell::Cell;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Polls per budget tick: between ticks the worker fires due timers and refreshes its
/// global-queue interval, so no run of ready tasks can put those off for long.
pub(crate) const BUDGET_PER_TICK: u32 = 128;
/// LIFO-slot polls allowed per budget tick.
pub(crate) const MAX_LIFO_POLLS_PER_TICK: u32 = 3;
/// Bounds of a global-queue batch: `clamp(len / workers, MIN, MAX)`.
pub(crate) const MIN_GLOBAL_BATCH: usize = 4;
pub(crate) const MAX_GLOBAL_BATCH: usize = 64;
/// Polls between two of a worker's offers to sample for stalls (see "Who samples" in
/// `telemetry::stall`): a busy worker makes one every few hundred microseconds, far more
/// often than a sample is due.
pub(super) const STALL_CHECK_POLLS: u32 = 64;

/// The longest the watcher (the one parked worker that keeps a timeout while another
/// worker is out; see "Parking" in `run.rs`) sleeps before looking again.
pub(crate) const PARK_TIMEOUT: Duration = Duration::from_millis(10);
/// How long a task may sit in the LIFO slot of a worker that stays in one poll before an
/// idle worker takes it (see "Stealing from the LIFO slot" in `run.rs`).
pub(crate) const LIFO_STEAL_AFTER: Duration = Duration::from_micros(100);

/// One worker: the parts other threads touch, plus owner-only `core`.
#[repr(align(128))]
pub(crate) struct Worker {
    pub(crate) index: usize,
    pub(crate) queue: WorkStealQueue<Arc<Handle>>,
    /// The LIFO slot: filled by the owner; emptied by the owner, or by another worker
    /// when the owner is stuck in a poll (see "Stealing from the LIFO slot" in `run.rs`).
    pub(crate) lifo: LifoSlot<Header>,
    pub(crate) park: ParkState,
    /// Set while the owner parks; `schedule_local` then sends tasks to the global queue.
    pub(crate) transitioning_to_park: AtomicBool,
    /// This worker's part of telemetry: its counters (in the runtime's `Metrics`), its
    /// clock reading, its event ring.
    pub(crate) rec: WorkerRecorder,
    /// Recycled task cells (`task/cellcache.rs`); in its own allocation, away from the
    /// hot fields.
    pub(crate) cache: Box<CellCache>,
    pub(crate) core: Core,
}

impl Worker {
    /// Worker `index` of a runtime counting in `metrics`.
    pub(crate) fn new(index: usize, metrics: &Metrics) -> Worker {
        let core = Core::new(index);
        Worker {
            index,
            queue: WorkStealQueue::new(),
            lifo: LifoSlot::new(),
            park: ParkState::new(),
            transitioning_to_park: AtomicBool::new(false),
            rec: WorkerRecorder::new(index, metrics),
            cache: Box::new(CellCache::new()),
            core,
        }
    }
}

impl Worker {
    /// This worker's counters (written by its owner, read by anyone).
    #[inline(always)]
    pub(crate) fn counters(&self) -> &WorkerCounters {
        self.rec.counters()
    }
}

/// State only the owning worker thread touches (see the `Sync` impl below).
pub(crate) struct Core {
    /// Polls so far; the periodic global check runs when `tick % interval == 0`.
    pub(crate) tick: Cell<u32>,
    pub(super) lifo_polls: Cell<u32>,
    pub(crate) is_searching: Cell<bool>,
    pub(super) rng: Cell<FastRand>,
    /// The EWMA of task time and the global-queue interval (`stats`).
    pub(crate) stats: Stats,
    /// A task this worker, about to park, saw in another worker's LIFO slot.
    pub(crate) lifo_watch: Cell<Option<LifoWatch>>,
    /// `tick` when this worker last polled the reactor (see `maintain_driver`).
    pub(crate) last_io_poll: Cell<u32>,
    /// `tick` when this worker last offered to sample for stalls (see `run_tick`).
    pub(super) last_stall_check: Cell<u32>,
    /// Set while this worker delivers the driver's wakes: `schedule_local` then leaves
    /// waking other workers to `dispatch_driver`, which decides once for the whole batch.
    pub(crate) dispatching: Cell<bool>,
    /// The last poll ended in a requeue of its own task (`yield_now`, a self-wake): the
    /// next `find_work` looks at the global queue first (see `run.rs`, "Yielded tasks and the
    /// global queue").
    pub(crate) yielded: Cell<bool>,
    /// Wakes the cooperative budget held back until this worker runs out of other work
    /// (see `run.rs`, "Deferred wakes").
    pub(crate) deferred: Deferred,
}

// SAFETY: `Core` is only accessed from the worker thread that owns it (through
// `current_worker`, which checks the thread-local context), including the final drain,
// which that thread does itself as it exits; never by two threads at once.
unsafe impl Sync for Core {}

impl Core {
    fn new(index: usize) -> Core {
        Core {
            tick: Cell::new(0),
            lifo_polls: Cell::new(0),
            is_searching: Cell::new(false),
            rng: Cell::new(FastRand::new(FastRand::seed_for(index))),
            stats: Stats::new(),
            lifo_watch: Cell::new(None),
            last_io_poll: Cell::new(0),
            last_stall_check: Cell::new(0),
            dispatching: Cell::new(false),
            yielded: Cell::new(false),
            deferred: Deferred::default(),
        }
    }
}

/// What a worker about to park saw in another worker's LIFO slot.
#[derive(Clone, Copy)]
pub(crate) struct LifoWatch {
    pub(super) victim: usize,
    /// The task's address: only compared, never followed.
    pub(super) task: usize,
    /// The victim's poll count then; the same count later means the same poll.
    pub(super) polls: u64,
    pub(super) since: Instant,
}
