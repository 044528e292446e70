//! # Volt: an async runtime you can watch while it runs
//!
//! A multi-thread work-stealing scheduler built after the design of Tokio's, whose workers
//! count what they do in lock-free counters that any thread can read while it runs, and
//! which can say what every task waits on and which poll holds a worker.
//!
//! ```
//! let rt = volt::runtime::Builder::new().worker_threads(2).build().unwrap();
//! let out = rt.block_on(async {
//!     let h = volt::spawn(async { 40 + 2 });
//!     volt::task::yield_now().await;
//!     h.await.unwrap()
//! });
//! assert_eq!(out, 42);
//! let snap = rt.handle().telemetry().snapshot();
//! assert!(snap.tasks_spawned >= 1);
//! ```
//!
//! Where things are (one module per scheduler concept):
//! * `runtime/`: `Runtime`, `Builder` and `Handle` (`mod.rs`); the runtime's shared state,
//!   which owns the driver, the blocking pool, the recorder and the clock, and spawns
//!   (`handle.rs`); the thread-local context: the current runtime and worker (`context.rs`);
//!   the current-thread flavor, whose one worker runs inside `block_on` (`current.rs`);
//! * `macros/`: `task_local!` (`task_local.rs`), and the notes on `select!`, `join!`,
//!   `try_join!` and `pin!` (Tokio's, re-exported with feature `macros`); `#[volt::main]`
//!   and `#[volt::test]` come from the `volt-macros` crate;
//! * `task/`: the 64-bit packed state word (`state.rs`), the one-allocation cell and vtable
//!   (`raw.rs`), the per-worker cell cache it allocates from (`cellcache.rs`),
//!   `JoinHandle`/`JoinError` (`join.rs`), the owned-task list (`list.rs`), what a task
//!   waits on (`wait.rs`) and naming it (`waiting_on.rs`: `WaitingOnExt`), shields and
//!   `yield_now` (`mod.rs`);
//! * `scheduler/`: the local ring `WorkStealQueue` (`queue.rs`), the global injection queue
//!   (`inject.rs`), the idle state with the parked bitmap and "last searcher must notify"
//!   (`idle.rs`), futex parking (`park.rs`), the run loop (`worker.rs`), where a task is
//!   queued (`schedule.rs`), the worker's driver pass (`driver.rs`), the EWMA and the
//!   global-queue interval (`stats.rs`), the `Schedule` hooks (`hooks.rs`), the blocking
//!   join (`join.rs`), one method per telemetry event (`metrics.rs`), the PRNG (`rand.rs`);
//! * `time/`: the timing wheel and `sleep`/`timeout`/`interval`; `reactor/`: the mio
//!   reactor and the driver protocol; `net/`: `TcpListener`, `TcpStream`, `UdpSocket`;
//! * Tokio's modules, for applications that name Volt as `tokio`: `io/` (Tokio's I/O
//!   traits and utilities, and stdin/stdout/stderr), `sync/` (Volt's own locks and
//!   channels, each wait named), `fs/`, `signal/` and `process/`;
//!   `blocking/`: the `spawn_blocking` pool;
//! * `telemetry/`: counters, gauges and `Snapshot`, the event ring, histograms, wait
//!   reasons and wake sources (`wait.rs`, with the records in `task/wait.rs`), stalls
//!   (`stall/`), the live-task change log (`tasks.rs`);
//! * `console/` (feature `console`): the gRPC console server;
//! * `bridge.rs` (feature `tokio-bridge`): a small Tokio runtime the Volt runtime owns and
//!   shuts down, entered around the polls of `bridge::with_tokio` futures, for Tokio-only
//!   crates;
//! * `hyper/` (feature `hyper`): hyper's runtime traits, `serve` for tower services
//!   (axum, tonic), and a client connector;
//! * `loom.rs`: the shim that model-checks the concurrency code under `--cfg loom`.

#![warn(missing_docs)]
#![warn(clippy::undocumented_unsafe_blocks)]
#![deny(unsafe_op_in_unsafe_fn)]
// Under loom only the primitives and their models are built, not the runtime using them.
#![cfg_attr(loom, allow(dead_code, unused_imports))]

pub(crate) mod loom;
mod padded;
pub(crate) mod scheduler;
pub mod task;

#[cfg(not(loom))]
pub(crate) mod blocking;
#[cfg(all(feature = "tokio-bridge", not(loom)))]
pub mod bridge;
#[cfg(all(feature = "console", not(loom)))]
pub mod console;
#[cfg(all(feature = "fs", not(loom)))]
pub mod fs;
#[cfg(all(feature = "hyper", not(loom)))]
pub mod hyper;
#[cfg(not(loom))]
pub mod io;
#[cfg(not(loom))]
mod macros;
#[cfg(not(loom))]
pub mod net;
#[cfg(all(feature = "process", not(loom)))]
pub mod process;
#[cfg(not(loom))]
pub(crate) mod reactor;
#[cfg(not(loom))]
pub mod runtime;
#[cfg(all(feature = "signal", not(loom)))]
pub mod signal;
pub mod sync;
#[cfg(not(loom))]
pub mod telemetry;
#[cfg(not(loom))]
pub mod time;

#[cfg(all(loom, test))]
mod loom_tests;
// Under loom the telemetry module is not built, but its event ring is model-checked.
#[cfg(loom)]
#[path = "telemetry/events/mod.rs"]
#[allow(missing_docs, unreachable_pub)]
pub(crate) mod events_loom;
// The same for the live-task change log.
#[cfg(loom)]
#[path = "telemetry/tasks.rs"]
pub(crate) mod tasks_loom;
// And for the stall machinery's running-poll slot and its ring of ended stalls.
#[cfg(loom)]
#[allow(dead_code)]
#[path = "telemetry/stall/record.rs"]
pub(crate) mod stall_record_loom;
#[cfg(loom)]
#[path = "telemetry/stall/slot.rs"]
pub(crate) mod stall_slot_loom;

#[cfg(not(loom))]
pub use runtime::Runtime;
#[cfg(not(loom))]
pub use task::JoinHandle;

/// Start a runtime around `async fn main` (Tokio's `#[tokio::main]`; see `volt-macros`).
#[cfg(all(feature = "macros", not(loom)))]
pub use volt_macros::main;
/// Run an `async fn` test on a fresh runtime (Tokio's `#[tokio::test]`; see `volt-macros`).
#[cfg(all(feature = "macros", not(loom)))]
pub use volt_macros::test;
// Tokio's runtime-independent macros (see `macros/mod.rs`); they document themselves.
#[cfg(all(feature = "macros", not(loom)))]
pub use tokio::{join, pin, select, try_join};

/// Spawn a future onto the runtime this thread is in: a worker's task, or inside
/// `Runtime::block_on`. From a worker it goes into that worker's LIFO slot.
///
/// The caller's location is kept as the task's spawn location (`TaskInfo::spawned_at`,
/// and the task group of unnamed tasks), when the runtime records events.
///
/// # Panics
/// When called outside a Volt runtime. Use [`runtime::Handle::spawn`] there.
#[cfg(not(loom))]
#[track_caller]
pub fn spawn<F>(future: F) -> JoinHandle<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    match scheduler::handle::spawn_current(future, std::panic::Location::caller()) {
        Some(h) => h,
        None => panic!(
            "volt::spawn called outside a Volt runtime: call it from a task or inside `Runtime::block_on`, \
             or use `Handle::spawn`"
        ),
    }
}
