//! Tokio's `sync::broadcast` channel.
