//! Tokio's `sync::oneshot` channel.
