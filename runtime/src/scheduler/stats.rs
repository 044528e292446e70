//! A worker's own measure of its tasks, and the global-queue interval it derives from it.
//!
//! # The EWMA and the interval
//! At the end of each budget tick that ran tasks, the worker folds the tick's time per
//! task into an EWMA with alpha 0.1, so one odd tick moves it a little and a lasting
//! change in task length moves it within a few dozen ticks. From it comes the interval,
//! in polls, between two periodic looks at the global queue:
//! `clamp(1 ms / avg, 8, 255)`, so that a task waiting there waits about 1 ms.
//!
//! # The backlog cap
//! That keeps the 1 ms target for *one* task waiting in the global queue. With a backlog
//! of `L` tasks and batches of `b` per worker, the last one waits about `L / (b * workers)`
//! checks, so a busy runtime fed from outside would drain a deep global queue at 64 tasks
//! per ~1 ms per worker. So each global fetch that leaves tasks behind also caps the
//! interval at `1 ms * b * workers / (L * avg)`, within the same 8..=255 clamp, and a fetch
//! that finds the queue empty lifts the cap. The interval in use is the smaller of the two.
//!
//! These values are the scheduler's: the worker reads them to decide, and only publishes
//! them to its telemetry gauges (`Handle::on_interval_changed`). Only the owning worker
//! thread touches them.

use std::cell::Cell;
use std::time::Duration;

/// EWMA target: a task waiting in the global queue should wait about this long.
pub(crate) const TARGET_GLOBAL_QUEUE_LATENCY_NS: u64 = 1_000_000;
pub(crate) const MIN_GLOBAL_QUEUE_INTERVAL: u32 = 8;
pub(crate) const MAX_GLOBAL_QUEUE_INTERVAL: u32 = 255;
/// The starting estimate of a task's duration before any tick has been measured: a
/// middle value for mixed workloads (50 µs -> interval 20).
pub(crate) const INITIAL_AVG_TASK_NS: u64 = 50_000;

/// One worker's EWMA and intervals (owner-only).
pub(crate) struct Stats {
    /// EWMA of the time per task, in nanoseconds.
    ewma_task_ns: Cell<u64>,
    /// `clamp(TARGET / avg, 8, 255)` from the EWMA.
    ewma_interval: Cell<u32>,
    /// The backlog cap; 255 when the global queue is drained.
    backlog_interval: Cell<u32>,
    /// The interval in use: the smaller of the two.
    interval: Cell<u32>,
}

impl Stats {
    pub(crate) fn new() -> Stats {
        let ewma = interval_for(INITIAL_AVG_TASK_NS);
        Stats {
            ewma_task_ns: Cell::new(INITIAL_AVG_TASK_NS),
            ewma_interval: Cell::new(ewma),
            backlog_interval: Cell::new(MAX_GLOBAL_QUEUE_INTERVAL),
            interval: Cell::new(ewma.min(MAX_GLOBAL_QUEUE_INTERVAL)),
        }
    }

    /// Polls between two periodic global checks.
    #[inline(always)]
    pub(crate) fn interval(&self) -> u32 {
        self.interval.get()
    }

    pub(crate) fn ewma_task_ns(&self) -> u64 {
        self.ewma_task_ns.get()
    }

    /// A budget tick ran `ran` (> 0) tasks in `elapsed`.
    pub(crate) fn end_tick(&self, ran: u32, elapsed: Duration) {
        let sample = elapsed.as_nanos() as u64 / ran as u64;
        let avg = ((sample + 9 * self.ewma_task_ns.get()) / 10).max(1);
        self.ewma_task_ns.set(avg);
        self.ewma_interval.set(interval_for(avg));
        self.update_interval();
    }

    /// A global fetch takes `batch` tasks and leaves `backlog` behind (0: the queue is
    /// empty now or was). Returns whether the cap changed.
    pub(crate) fn global_fetch(&self, batch: usize, workers: usize, backlog: usize) -> bool {
        let cap = if backlog == 0 {
            MAX_GLOBAL_QUEUE_INTERVAL
        } else {
            backlog_interval_for(self.ewma_task_ns.get(), batch, workers, backlog)
        };
        if cap == self.backlog_interval.get() {
            return false;
        }
        self.backlog_interval.set(cap);
        self.update_interval();
        true
    }

    fn update_interval(&self) {
        self.interval.set(self.ewma_interval.get().min(self.backlog_interval.get()));
    }
}

/// `clamp(TARGET / avg, 8, 255)`.
pub(crate) fn interval_for(avg_task_ns: u64) -> u32 {
    clamp_interval(TARGET_GLOBAL_QUEUE_LATENCY_NS / avg_task_ns.max(1))
}

/// The backlog cap: `clamp(TARGET * batch * workers / (backlog * avg), 8, 255)`.
pub(crate) fn backlog_interval_for(avg_task_ns: u64, batch: usize, workers: usize, backlog: usize) -> u32 {
    let per_check = (batch * workers) as u64;
    clamp_interval(
        TARGET_GLOBAL_QUEUE_LATENCY_NS.saturating_mul(per_check)
            / (backlog as u64).saturating_mul(avg_task_ns.max(1)).max(1),
    )
}

fn clamp_interval(v: u64) -> u32 {
    v.clamp(MIN_GLOBAL_QUEUE_INTERVAL as u64, MAX_GLOBAL_QUEUE_INTERVAL as u64) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ewma_interval_matches_the_design_table() {
        // `clamp(1 ms / avg, 8, 255)`: 1 µs -> 255, 10 µs -> 100, 50 µs -> 20,
        // 100 µs -> 10, 1 ms+ -> 8.
        assert_eq!(interval_for(1_000), 255);
        assert_eq!(interval_for(10_000), 100);
        assert_eq!(interval_for(50_000), 20);
        assert_eq!(interval_for(100_000), 10);
        assert_eq!(interval_for(2_000_000), 8);
        assert_eq!(interval_for(0), 255);
    }

    #[test]
    fn backlog_cap_shrinks_with_a_deep_queue_and_stays_in_range() {
        // 10,000 queued, 64 per batch, 2 workers, 5 µs tasks: check as often as allowed.
        assert_eq!(backlog_interval_for(5_000, 64, 2, 10_000), 8);
        // A shallow backlog of fast tasks leaves the EWMA's interval in charge.
        assert_eq!(backlog_interval_for(1_000, 64, 2, 100), 255);
        // 2,000 queued of 1 µs tasks: 1 ms * 128 / (2,000 * 1 µs) = 64.
        assert_eq!(backlog_interval_for(1_000, 64, 2, 2_000), 64);
    }
}
