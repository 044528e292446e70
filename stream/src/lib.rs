//! tokio-stream's API over Volt's types.
//!
//! A Tokio application that uses `tokio-stream` moves to Volt with one more line in its
//! Cargo.toml, beside the one that names Volt `tokio`:
//!
//! ```toml
//! tokio = { package = "volt", version = "0.1", features = ["full"] }
//! tokio-stream = { package = "volt-stream", version = "0.1" }
//! ```
//!
//! Its `tokio_stream::wrappers::ReceiverStream::new(rx)` then takes the receiver of
//! Volt's channel that `tokio::sync::mpsc::channel` now makes, and so for the other
//! wrappers. The real tokio-stream's wrappers take Tokio's own types, so without this
//! line such code does not compile against Volt.
//!
//! `StreamMap`, `StreamNotifyClose`, the adapters, `once`, `empty` and `pending` are
//! tokio-stream's own, re-exported: they need no runtime. [`StreamExt`] has
//! tokio-stream's methods; the untimed ones are its own, and the timed ones (`timeout`,
//! `timeout_repeating`, `throttle`, `chunks_timeout`) are written here on Volt's timer,
//! since tokio-stream's wait on Tokio's, which no Tokio runtime drives under Volt.

#![warn(missing_docs)]

mod ext;
mod iter;
mod timed;
pub mod wrappers;

pub use ext::StreamExt;
pub use iter::{iter, Iter};
pub use timed::Elapsed;
pub use tokio_stream::{empty, once, pending, Empty, FromStream, Once, Pending, StreamMap};
pub use tokio_stream::{Stream, StreamNotifyClose};

/// Adapters for the streams [`StreamExt`]'s methods make (tokio-stream's own).
pub mod adapters {
    pub use crate::timed::{ChunksTimeout, Throttle, Timeout, TimeoutRepeating};
    pub use tokio_stream::adapters::{
        Chain, Filter, FilterMap, Fuse, Map, MapWhile, Merge, Peekable, Skip, SkipWhile, Take, TakeWhile, Then,
    };
}
