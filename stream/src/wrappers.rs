//! Streams over Volt's channels, timers, listeners, signals, directories and join sets,
//! with tokio-stream's names and methods.

/// The wrappers' errors.
pub mod errors {
    pub use super::broadcast::BroadcastStreamRecvError;
}

mod broadcast;
mod mpsc;
mod polled;
mod watch;

pub use broadcast::BroadcastStream;
pub use mpsc::{ReceiverStream, UnboundedReceiverStream};
pub use polled::{IntervalStream, JoinSetStream, ReadDirStream, SignalStream, TcpListenerStream, UnixListenerStream};
pub use watch::WatchStream;

/// Tokio's `Lines` and `Split` are Tokio's own types on Volt too (its I/O utilities are
/// re-exported), so tokio-stream's wrappers of them serve as they are.
pub use tokio_stream::wrappers::{LinesStream, SplitStream};
