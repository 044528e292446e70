//! `volt-console`: a live terminal dashboard of a Volt runtime's scheduler.
//!
//! The binary connects to a runtime built with `Builder::enable_console()` (cargo feature
//! `console` of `volt`), or starts one in-process with `--demo`, and shows its workers,
//! queues, parked bitmap, searchers, EWMA intervals, events and tasks. The pieces are a
//! library so that tests can drive them: [`app`] (state and keys), [`ui`] (drawing),
//! [`client`] (gRPC), [`record`] (record and replay); [`demo`] is the demo workload, a crate under
//! `examples/demo/` shared with the `demo` example.

pub mod app;
pub mod client;
pub mod record;
pub mod ui;

/// The demo workload `--demo` runs (the `volt-demo` crate).
pub use volt_demo as demo;
