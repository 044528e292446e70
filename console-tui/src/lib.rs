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
//!   events, tasks, what the warnings follow), [`state::Model`]. It knows nothing above.
//! - [`screen`]: the view state, [`screen::Screen`] (the view, the selection, the sort
//!   and filters, pause, help); it reads the model for the lists' lengths and orders.
//! - [`input`]: keys to changes of the view state, and [`input::Command`]s for the app.
//! - [`warnings`]: what is worth a look, a [`warnings::Warn`] for each kind of trouble
//!   over the model's items.
//! - [`app`]: [`app::App`] owns the model and the view state and composes them: updates
//!   and keys go through it, and what only the main loop can do comes back as an
//!   [`app::Action`].
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
pub mod screen;
pub mod state;
pub mod view;
pub mod warnings;

/// The views under their first name.
pub use view as ui;

/// The demo workload `--demo` runs (the `volt-demo` crate).
pub use volt_demo as demo;
