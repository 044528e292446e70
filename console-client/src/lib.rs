//! The client side of a Volt runtime's console, written once for the two programs that
//! read it: `volt-console` (the terminal dashboard) and `volt-exporter` (the Prometheus
//! sidecar).
//!
//! - [`addr`]: what a user may type as an address (`host:port`, `http://host:port`), and
//!   the one error that says what is wrong with it.
//! - [`token`]: the console token (`--token` or `$VOLT_CONSOLE_TOKEN`) and the
//!   `authorization` metadata every call carries.
//! - [`backoff`]: the reconnection schedule, 100 ms doubling to 5 s, reset once a stream
//!   proves healthy.
//! - [`connect`](mod@connect) and [`watch`]: a channel to the server, the `WatchUpdates`
//!   subscription, and a watcher thread that reconnects and answers the dashboard's
//!   requests.
//! - [`event`]: one event as a log line.
//! - [`error`]: an error and its causes as one line.
//!
//! It speaks the gRPC types of `volt-console-proto` only, so it holds nothing of the
//! runtime's in-process model, does not depend on the runtime crate, and neither program
//! depends on the other.

pub mod addr;
pub mod backoff;
pub mod connect;
pub mod error;
pub mod event;
pub mod token;
pub mod watch;

pub use addr::{endpoint_uri, resolve_addr, resolve_addrs, AddrError};
pub use backoff::{Backoff, BACKOFF_CAP, BACKOFF_START};
pub use connect::{connect, endpoint, open, status_text, subscribe, Client, CALL_TIMEOUT};
pub use event::{event_line, EventLine};
pub use token::{request, token_from, TOKEN_ENV};
pub use watch::{
    fetch_once, silence_limit, spawn_watcher, spawn_watcher_with, Msg, Status, WatchOptions, Watcher,
    DEFAULT_MAX_EVENTS, ONCE_TIMEOUT, WATCH_BACKLOG,
};

pub use error::{error_chain, with_causes};

/// The address a console client connects to by default.
pub const DEFAULT_ADDR: &str = "127.0.0.1:6670";
