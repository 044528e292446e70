//! `volt-console`: a live terminal dashboard of a Volt runtime's scheduler.
//!
//! The binary connects to a runtime built with `Builder::enable_console()` (cargo feature
//! `console` of `volt`), or starts one in-process with `--demo`, and shows its workers,
//! queues, parked bitmap, searchers, EWMA intervals, events and tasks. The pieces are a
//! library so that tests can drive them, in layers that each know only the ones below:
//!
//! - [`conn`]: the connection. The client library's watcher thread ([`client`], the
//!   `volt-console-client` crate) talks to the server; [`conn::Conn`] takes its messages
//!   into the app once a frame and passes the app's requests back.
//! - [`state`]: the data model the update stream builds (workers, rates, histories,
//!   events, tasks); [`app::App`] holds it next to the view state.
//! - [`input`]: keys to changes of the view state and [`app::Action`]s for the main loop.
//! - [`warnings`]: what is worth a look, computed from the data model.
//! - [`view`] (also named [`ui`]): drawing only; it reads an `App` and does no I/O.
//! - [`record`]: recording the stream and playing it back ([`record::Player`]).
//! - [`perfetto`]: a recording (or a live console) as a Perfetto trace, a timeline of
//!   every worker's polls, parks, steals and stalls, with arrows from waker to woken.
//!
//! [`demo`] is the demo workload, the `volt-demo` crate under `examples/demo/`, shared with
//! the `demo` example.

pub mod app;
pub mod client;
pub mod conn;
pub mod input;
pub mod perfetto;
pub mod record;
pub mod state;
pub mod view;
pub mod warnings;

/// The views under their first name.
pub use view as ui;

/// The demo workload `--demo` runs (the `volt-demo` crate).
pub use volt_demo as demo;
