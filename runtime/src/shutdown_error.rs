//! The error of an operation that its runtime's shutdown ended: made by the reactor, the
//! blocking I/O wrappers and `signal` (which sit below `runtime`), recognized by
//! `runtime::is_rt_shutdown_err`. A leaf: it imports nothing of the crate.

use std::io;

/// The inner error, whose type is what marks it. Its text says what ended.
#[derive(Debug)]
struct ShutDown(&'static str);

impl std::fmt::Display for ShutDown {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

impl std::error::Error for ShutDown {}

/// An `io::Error` (`ErrorKind::Other`) for an operation the runtime's shutdown ended,
/// saying `what`.
pub(crate) fn shutdown_error(what: &'static str) -> io::Error {
    io::Error::other(ShutDown(what))
}

/// Whether `err` was made by [`shutdown_error`].
pub(crate) fn is_shutdown_error(err: &io::Error) -> bool {
    err.get_ref().is_some_and(|e| e.is::<ShutDown>())
}
