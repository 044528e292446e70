//! `RuntimeMetrics`: Tokio's stable runtime metrics, read from Volt's telemetry.
//!
//! Each method takes one reading of the counters it needs (a `Telemetry::snapshot`), so
//! two calls may see different moments; Volt's own [`Telemetry`](crate::telemetry) has
//! everything in one `Snapshot`, and much more.

use super::Handle;
use std::time::Duration;

/// A runtime's metrics, as Tokio's `RuntimeMetrics` names them ([`Handle::metrics`]).
#[derive(Clone, Debug)]
pub struct RuntimeMetrics {
    handle: Handle,
}

impl RuntimeMetrics {
    pub(crate) fn new(handle: Handle) -> RuntimeMetrics {
        RuntimeMetrics { handle }
    }

    /// The number of workers (1 on a current-thread runtime).
    pub fn num_workers(&self) -> usize {
        self.handle.num_workers()
    }

    /// Tasks spawned and not yet finished (completed, cancelled or panicked).
    pub fn num_alive_tasks(&self) -> usize {
        self.handle.telemetry().snapshot().tasks_alive as usize
    }

    /// Tasks waiting in the global (injection) queue.
    pub fn global_queue_depth(&self) -> usize {
        self.handle.telemetry().snapshot().global_queue_depth as usize
    }

    /// How many times worker `worker` has parked (each park counted as it ends).
    ///
    /// # Panics
    /// When `worker` is not below [`RuntimeMetrics::num_workers`].
    pub fn worker_park_count(&self, worker: usize) -> u64 {
        self.worker(worker, |w| w.times_parked)
    }

    /// How many times worker `worker` has begun or ended a sleep: odd while it sleeps,
    /// even while it works. It only grows.
    ///
    /// # Panics
    /// When `worker` is not below [`RuntimeMetrics::num_workers`].
    #[track_caller]
    pub fn worker_park_unpark_count(&self, worker: usize) -> u64 {
        let n = self.num_workers();
        match self.handle.telemetry().worker_park_unpark_count(worker) {
            Some(count) if worker < n => count,
            _ => panic!("volt: worker index {worker} is out of range: the runtime has {n} workers"),
        }
    }

    /// The time worker `worker` has spent polling tasks (needs the poll-time histogram,
    /// on by default; zero without it).
    ///
    /// # Panics
    /// When `worker` is not below [`RuntimeMetrics::num_workers`].
    pub fn worker_total_busy_duration(&self, worker: usize) -> Duration {
        Duration::from_nanos(self.worker(worker, |w| w.busy_ns))
    }

    /// How many task polls worker `worker` has made.
    ///
    /// # Panics
    /// When `worker` is not below [`RuntimeMetrics::num_workers`].
    pub fn worker_poll_count(&self, worker: usize) -> u64 {
        self.worker(worker, |w| w.tasks_polled)
    }

    /// Tasks spawned on the runtime so far.
    pub fn spawned_tasks_count(&self) -> u64 {
        self.handle.telemetry().snapshot().tasks_spawned
    }

    /// Threads of the blocking pool now.
    pub fn num_blocking_threads(&self) -> usize {
        self.handle.telemetry().snapshot().blocking_threads as usize
    }

    /// `spawn_blocking` calls waiting for a thread.
    pub fn blocking_queue_depth(&self) -> usize {
        self.handle.telemetry().snapshot().blocking_queue_depth as usize
    }

    #[track_caller]
    fn worker(&self, worker: usize, f: impl Fn(&crate::telemetry::WorkerSnapshot) -> u64) -> u64 {
        let n = self.num_workers();
        assert!(worker < n, "volt: worker index {worker} is out of range: the runtime has {n} workers");
        f(&self.handle.telemetry().snapshot().workers[worker])
    }
}
