//! Tokio's `process`: child processes with piped stdio.
