//! Tokio's `fs`: files and directories, on Volt's blocking pool.
