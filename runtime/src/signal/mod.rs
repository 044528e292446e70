//! Tokio's `signal`: `ctrl_c` and Unix signals, on Volt's reactor.
