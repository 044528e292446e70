//! The multi-thread work-stealing scheduler. One file per concept; this file only
//! declares and re-exports.
//!
//! A worker's state is `worker.rs`, its run loop `run.rs`; where a task is queued, `schedule.rs`; the worker's driver
//! pass, `driver.rs`; the EWMA and the
//! global-queue interval, `stats.rs`; the `Schedule` hooks, `hooks.rs`; the blocking join,
//! `join.rs`; what each event counts and records, `metrics.rs`. The queues (`queue.rs`,
//! `inject.rs`, `lifo.rs`), the idle protocol (`idle.rs`), parking (`park.rs`), the exit
//! count (`exits.rs`) and the PRNG (`rand.rs`) are the leaves, model-checked under loom.
//! The runtime's state the scheduler works in is its `Handle` (`handle`).

// Under loom only its model uses it (the worker is not compiled there).
#[cfg(not(loom))]
pub(crate) mod defer;
#[cfg(not(loom))]
mod driver;
#[cfg_attr(loom, allow(dead_code))]
pub(crate) mod exits;
#[cfg(all(loom, test))]
mod exits_loom;
#[cfg(not(loom))]
pub(crate) mod handle;
#[cfg(not(loom))]
mod hooks;
pub(crate) mod idle;
#[cfg(all(loom, test))]
mod idle_loom;
pub(crate) mod inject;
#[cfg(not(loom))]
pub(crate) mod join;
#[cfg(all(loom, test))]
mod join_loom;
pub(crate) mod lifo;
#[cfg(all(loom, test))]
mod lifo_loom;
pub(crate) mod park;
#[cfg(all(loom, test))]
mod park_loom;
pub(crate) mod queue;
#[cfg(all(loom, test))]
mod queue_loom;
pub(crate) mod rand;
#[cfg(not(loom))]
mod run;
#[cfg(not(loom))]
mod schedule;
#[cfg(not(loom))]
pub(crate) mod stats;
#[cfg(not(loom))]
pub(crate) mod worker;
#[cfg(not(loom))]
mod worker_park;
