//! # Volt: an async runtime you can watch while it runs
//!
//! Volt runs async Rust on a multi-thread work-stealing scheduler built after the design
//! of Tokio's, with Tokio's API: timers, TCP, UDP and Unix sockets, a blocking pool,
//! locks and channels, files, signals and child processes; hyper, axum and tonic run on
//! it as they are. Its workers count what they do in lock-free counters that any thread
//! can read while it runs, and it can say what every task waits on and which poll holds a
//! worker. `volt-console` shows all of it live in a terminal, and `volt-exporter` serves
//! it to Prometheus.
//!
//! ```
//! use std::time::Duration;
//!
//! let rt = volt::runtime::Builder::new().worker_threads(2).build()?;
//! let total = rt.block_on(async {
//!     // Each task runs on the workers; its JoinHandle is a future of its output.
//!     let tasks: Vec<_> = (1..=10u64)
//!         .map(|i| volt::spawn(async move {
//!             volt::time::sleep(Duration::from_millis(i)).await;
//!             i * i
//!         }))
//!         .collect();
//!     let mut total = 0;
//!     for t in tasks {
//!         total += t.await.unwrap();
//!     }
//!     total
//! });
//! assert_eq!(total, 385);
//!
//! // What the scheduler did, read from any thread without stopping it.
//! let snap = rt.handle().telemetry().snapshot();
//! assert!(snap.tasks_spawned >= 10);
//! for w in &snap.workers {
//!     println!("worker {}: {} polls, {} stolen", w.index, w.tasks_polled, w.tasks_stolen);
//! }
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! ## Modules
//! * [`runtime`]: `Runtime`, `Builder` and `Handle`: start a runtime, spawn on it, shut
//!   it down. [`spawn`] and [`Runtime`] are at the crate's root too.
//! * [`task`]: spawning, `JoinHandle` and `JoinSet`, `spawn_blocking`, `yield_now`,
//!   task-locals, and naming what a task waits on.
//! * [`time`]: `sleep`, `timeout` and `interval` on the runtime's timing wheel.
//! * [`net`]: TCP, UDP and Unix sockets on the runtime's reactor.
//! * [`io`]: Tokio's I/O traits and utilities (feature `io-util`), and the process's
//!   standard streams (feature `io-std`).
//! * [`sync`]: locks, a semaphore, `Notify`, `Barrier`, `OnceCell`, and the `mpsc`,
//!   `oneshot`, `broadcast` and `watch` channels.
#![cfg_attr(feature = "fs", doc = " * [`fs`] (feature `fs`): files and directories, on the blocking pool.")]
#![cfg_attr(not(feature = "fs"), doc = " * `fs` (feature `fs`): files and directories, on the blocking pool.")]
#![cfg_attr(feature = "process", doc = " * [`process`] (feature `process`): child processes with piped stdio.")]
#![cfg_attr(not(feature = "process"), doc = " * `process` (feature `process`): child processes with piped stdio.")]
#![cfg_attr(feature = "signal", doc = " * [`signal`] (feature `signal`): ctrl-c and Unix signals.")]
#![cfg_attr(not(feature = "signal"), doc = " * `signal` (feature `signal`): ctrl-c and Unix signals.")]
//! * [`telemetry`]: counters, gauges and histograms, the event ring, live tasks and what
//!   they wait on, stalls and deadlocks.
#![cfg_attr(
    feature = "console",
    doc = " * [`console`] (feature `console`): the gRPC server that `volt-console` and `volt-exporter` read."
)]
#![cfg_attr(
    not(feature = "console"),
    doc = " * `console` (feature `console`): the gRPC server that `volt-console` and `volt-exporter` read."
)]
#![cfg_attr(
    feature = "hyper",
    doc = " * [`hyper`] (feature `hyper`): `serve` for tower services (axum, tonic) and hyper's runtime traits."
)]
#![cfg_attr(
    not(feature = "hyper"),
    doc = " * `hyper` (feature `hyper`): `serve` for tower services (axum, tonic) and hyper's runtime traits."
)]
#![cfg_attr(
    feature = "tokio-bridge",
    doc = " * [`bridge`] (feature `tokio-bridge`): a small Tokio runtime for crates that need Tokio's own."
)]
#![cfg_attr(
    not(feature = "tokio-bridge"),
    doc = " * `bridge` (feature `tokio-bridge`): a small Tokio runtime for crates that need Tokio's own."
)]
//!
//! ## Cargo features
//! Volt takes Tokio's feature names, so an application moving from Tokio keeps its list.
//! The scheduler, timers, sockets and `sync` are always built, so `rt`,
//! `rt-multi-thread`, `time` and `sync` are accepted and add nothing.
//! * `full`: all of Tokio's features listed here except `test-util`.
//! * `net`: Volt's sockets also implement Tokio's `AsyncRead`/`AsyncWrite`.
//! * `macros`: `#[volt::main]`, `#[volt::test]`, and `select!`, `join!`, `try_join!` and
//!   `pin!` at the crate's root (`task_local!` is always there).
//! * `io-util`: Tokio's I/O traits and utilities in [`io`]; `io-std`: stdin, stdout and
//!   stderr.
//! * `fs`, `process`, `signal`: the modules of those names.
//! * `test-util`: `time::pause`, `time::advance` and `time::resume`, a clock a test moves.
//!
//! And Volt's own:
//! * `console`: the console server (`Builder::enable_console`), which `#[volt::main]`
//!   starts on `127.0.0.1:6670` (`VOLT_CONSOLE_BIND` moves it, `VOLT_CONSOLE=0` turns it
//!   off).
//! * `hyper`: the `hyper` module; `tokio-bridge`: the `bridge` module.
//! * `tokio-io`: the same as `net`, under Volt's own name.
//! * `tracing`: `tracing` events from the scheduler (park, unpark, steal) and a span per
//!   task.
//!
//! ## Moving a Tokio application
//! Name Volt as `tokio` in Cargo.toml and keep the source as it is: `#[tokio::main]`,
//! `tokio::spawn`, `tokio::net::TcpListener`, `tokio::sync::mpsc` and the rest of the API
//! the two share resolve to Volt's.
//!
//! ```toml
//! [dependencies]
//! tokio = { package = "volt", version = "0.1", features = ["full"] }
//! ```
//!
//! A crate that needs Tokio's own runtime (reqwest, tonic's `Channel`, sqlx) runs its
//! futures inside `bridge::with_tokio` (feature `tokio-bridge`).
//!
//! ## The source
//!
//! Where things are (one module per scheduler concept):
//! * `runtime/`: `Runtime`, `Builder` and `Handle` (`mod.rs`); the runtime's shared state,
//!   which owns the driver, the blocking pool, the recorder and the clock, and spawns
//!   (`handle.rs`); the thread-local context: the current runtime and worker (`context.rs`);
//!   the current-thread flavor, whose one worker runs inside `block_on` (`current.rs`), and
//!   `LocalRuntime`, that flavor with a `LocalSet` every `block_on` drives (`local.rs`);
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
//!   (`idle.rs`), futex parking (`park.rs`), the run loop (`run.rs`), where a task is
//!   queued (`schedule.rs`), the worker's driver pass (`driver.rs`), the EWMA and the
//!   global-queue interval (`stats.rs`), the `Schedule` hooks (`hooks.rs`), the blocking
//!   join (`join.rs`), one method per telemetry event (`metrics.rs`), the PRNG (`rand.rs`);
//! * `time/`: the timing wheel and `sleep`/`timeout`/`interval`; `reactor/`: the
//!   reactor (epoll through mio, or io_uring in `uring.rs`) and the driver protocol; `net/`: `TcpListener`, `TcpStream`, `UdpSocket`;
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
#[cfg(not(loom))]
pub(crate) mod driver;
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
/// Under loom, only the sources slab of the reactor, for its models.
#[cfg(loom)]
pub(crate) mod reactor {
    pub(crate) mod sources;
}
#[cfg(not(loom))]
pub mod runtime;
#[cfg(not(loom))]
mod shutdown_error;
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
