//! Tasks: [`spawn`] a future and await its [`JoinHandle`] (or [`abort`](JoinHandle::abort)
//! it), run a group of tasks in a [`JoinSet`], run blocking code on the blocking pool with
//! [`spawn_blocking`], and name what a task waits on with [`WaitingOnExt`].
//!
//! ```
//! use std::time::Duration;
//!
//! let rt = volt::Runtime::new()?;
//! rt.block_on(async {
//!     let answer = volt::task::spawn(async { 6 * 7 });
//!     // Blocking or CPU-heavy code goes to the blocking pool, off the workers.
//!     let sum = volt::task::spawn_blocking(|| (1..=100u64).sum::<u64>());
//!     // An aborted task is dropped; awaiting its handle says it was cancelled.
//!     let sleeper = volt::spawn(volt::time::sleep(Duration::from_secs(60)));
//!     sleeper.abort();
//!     assert_eq!(answer.await.unwrap(), 42);
//!     assert_eq!(sum.await.unwrap(), 5050);
//!     assert!(sleeper.await.unwrap_err().is_cancelled());
//! });
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! Inside: the packed state word (`state`), the one-allocation cell and its vtable
//! (`raw`), `JoinHandle`/`AbortHandle`/`JoinError` (`join`), `JoinSet` (`join_set`),
//! `LocalSet` and `spawn_local` (`local`), the owned-task list (`list`), what a task
//! waits on (`wait`, and naming it: `waiting_on`), and the user-facing helpers `spawn`,
//! `spawn_blocking`, `block_in_place`, `yield_now`, `shield` and the task [`Id`]
//! (`id`, `try_id`).

pub(crate) mod cellcache;
pub mod coop;
pub(crate) mod header;
pub(crate) mod id;
pub(crate) mod join;
#[cfg(not(loom))]
pub(crate) mod join_set;
pub(crate) mod list;
#[cfg(not(loom))]
pub(crate) mod local;
pub(crate) mod notified;
pub(crate) mod raw;
pub(crate) mod schedule;
mod shield;
mod spawn;
pub(crate) mod state;
#[cfg(all(loom, test))]
mod state_loom;
pub(crate) mod stats;
#[cfg(test)]
pub(crate) mod test_util;
#[cfg(all(test, not(loom)))]
mod tests;
pub(crate) mod wait;
pub(crate) mod waiting_on;
mod yield_now;

pub use coop::{consume_budget, unconstrained, Unconstrained};
pub use id::{id, try_id, Id};
pub use join::AbortHandle;
pub use join::{JoinError, JoinHandle};
#[cfg(not(loom))]
pub use join_set::JoinSet;
#[cfg(not(loom))]
pub use local::{LocalEnterGuard, LocalSet};
pub use shield::{shield, ShieldGuard};
pub use spawn::block_in_place;
#[cfg(not(loom))]
pub use spawn::{spawn, spawn_blocking, spawn_local, Builder};
pub use waiting_on::{waiting_on, WaitingOn, WaitingOnExt};
pub use yield_now::yield_now;
// `task_local!`'s key and scope future (`macros/task_local.rs`), at Tokio's paths.
#[cfg(not(loom))]
pub use crate::macros::task_local::{AccessError, LocalKey, TaskLocalFuture};

/// The task module's futures, at Tokio's path (`tokio::task::futures`).
#[cfg(not(loom))]
pub mod futures {
    pub use crate::macros::task_local::TaskLocalFuture;
}
