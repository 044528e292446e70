//! Tokio's `sync::watch` channel.
