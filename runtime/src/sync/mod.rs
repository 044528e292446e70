//! Tokio's `sync`, Volt's own: locks, a semaphore, `Notify`, `Barrier`, `OnceCell`, and
//! the channels `mpsc`, `oneshot`, `broadcast` and `watch`. Each wait names itself in the
//! console with what it waits for.

pub mod broadcast;
pub mod mpsc;
pub mod oneshot;
pub mod watch;
