//! tokio-util's API over Volt's runtime.
//!
//! tokio-util depends on Tokio itself, and the parts of it that spawn tasks, wait on a
//! timer or wrap a channel reach for Tokio's runtime and types: under Volt,
//! `TaskTracker::spawn` panics for want of a Tokio runtime, and `PollSender::new` does not
//! accept Volt's `mpsc::Sender`. An application that renames this crate as well,
//!
//! ```toml
//! tokio = { package = "volt", version = "0.1", features = ["full"] }
//! tokio-util = { package = "volt-util", version = "0.1", features = ["full"] }
//! ```
//!
//! gets those parts on Volt, with tokio-util's names and methods: [`task::TaskTracker`]
//! (its `spawn_*` methods), [`task::AbortOnDropHandle`], [`task::AbortOnDrop`],
//! [`task::JoinQueue`], [`task::JoinMap`], [`sync::PollSender`], [`sync::PollSemaphore`],
//! [`io::SyncIoBridge`], [`time::DelayQueue`], [`udp::UdpFramed`], [`net::Listener`],
//! [`context::TokioContext`], and [`future::FutureExt`]'s timeouts. Everything that needs no
//! runtime is tokio-util's own, re-exported: the codecs, `CancellationToken`,
//! `ReusableBoxFuture`, the I/O adapters, `compat`, `either`.

#![warn(missing_docs)]

pub use tokio_util::{bytes, codec, compat, either};

pub mod context;
pub mod future;
pub mod io;
mod join_map;
pub mod net;
pub mod sync;
pub mod task;
pub mod udp {
    //! Framed UDP sockets.
    pub use crate::udp_framed::UdpFramed;
}
mod udp_framed;

mod delay_queue;

/// Timers (tokio-util's `time` module), on Volt's timer: [`DelayQueue`](time::DelayQueue)
/// and [`FutureExt`](crate::future::FutureExt)'s timeouts.
pub mod time {
    pub use crate::delay_queue::DelayQueue;
    pub use crate::future::FutureExt;

    /// [`DelayQueue`]'s keys and the values it gives back.
    pub mod delay_queue {
        pub use crate::delay_queue::{DelayQueue, Expired, Key};
    }
}
