//! Tokio's `sync::mpsc` channel.
