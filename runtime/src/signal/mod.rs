//! Tokio's `signal`: [`ctrl_c`] and Unix signals ([`unix::signal`]), on Volt's reactor.
//!
//! ```no_run
//! let rt = volt::Runtime::new()?;
//! rt.block_on(async {
//!     let work = volt::spawn(async {
//!         // The application: a server's accept loop, say.
//!         std::future::pending::<()>().await
//!     });
//!     volt::signal::ctrl_c().await?;
//!     println!("ctrl-c: shutting down");
//!     work.abort();
//!     Ok::<(), std::io::Error>(())
//! })?;
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! A signal's handler is installed once for the process, by its first listener, and does
//! nothing but count the delivery and write a byte to a socket pair; each runtime with a
//! listener reads that socket pair through its own reactor and wakes every listener of
//! each signal delivered. So a delivery reaches all listeners (in every runtime), a
//! delivery between a listener's creation and its `recv` is not lost, and several
//! deliveries before a `recv` make one notification, as with Tokio.
//!
//! A task waiting for a signal shows `signal SIGINT` (or `signal SIGTERM`, ...) as what
//! it waits on in the console and in `Telemetry::tasks()`. When the runtime a listener
//! was made in shuts down, its `recv` answers `None` rather than wait forever.

mod registry;
pub mod unix;

use std::io;

/// Wait for ctrl-c (`SIGINT`).
///
/// The listener is made when the returned future is first polled, and only deliveries
/// from then on complete it. From that first poll on, `SIGINT` no longer ends the
/// process, for the life of the process (see [`unix::signal`]).
///
/// # Errors
/// Outside a Volt runtime, if the handler cannot be installed, or when the runtime shuts
/// down while it waits.
pub async fn ctrl_c() -> io::Result<()> {
    let mut listener = unix::signal(unix::SignalKind::interrupt())?;
    match listener.recv().await {
        Some(()) => Ok(()),
        None => Err(crate::shutdown_error::shutdown_error("volt: the runtime shut down while waiting for ctrl-c")),
    }
}
