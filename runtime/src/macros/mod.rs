//! The crate-root macros Tokio applications use: `select!`, `join!`, `try_join!` and `pin!`
//! (feature `macros`), and `task_local!` (always).
//!
//! `select!`, `join!`, `try_join!` and `pin!` are Tokio's own, re-exported: they only poll
//! futures in place and need no runtime (Tokio is a dependency with its `macros` feature
//! and none of its runtime). `select!`'s random start comes from Tokio's thread-local
//! generator, and its cooperative-budget check is Tokio's, which without Tokio's runtime
//! always lets the poll go on; Volt's own budget still makes a task that loops on ready
//! branches yield through the leaf futures it polls.
//!
//! `task_local!` is Volt's (`task_local.rs`): Tokio's needs Tokio's `rt` feature.

pub(crate) mod task_local;
