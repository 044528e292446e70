//! [`shield`]: deferring a task's cancellation over a critical section.

use super::header::Header;
use super::id::current_task;
use super::state;
use std::ptr::NonNull;

/// Defer cancellation of the current task while the returned guard lives (it raises the
/// `shield_depth` field of the task's state word), so a critical section is not cut off
/// half way.
///
/// An `abort` that arrives while any guard of the task is alive is remembered; when the
/// last guard drops, it takes effect at the task's next yield point (the next time a poll
/// returns `Pending`). Guards nest, up to 255 deep. Outside a task (in `block_on`, say)
/// the guard does nothing. Shields defer `abort`, not runtime shutdown.
pub fn shield() -> ShieldGuard {
    let task = current_task();
    if let Some(t) = task {
        // SAFETY: the current task is alive while it is being polled.
        let h = unsafe { t.as_ref() };
        let _ = h.state.add_shield();
        // The guard holds a reference, so it stays sound even if it outlives the poll.
        h.state.ref_inc();
    }
    ShieldGuard { task }
}

/// Keeps the current task's cancellation deferred; see [`shield`].
#[must_use = "the shield is lowered as soon as the guard is dropped"]
pub struct ShieldGuard {
    task: Option<NonNull<Header>>,
}

// SAFETY: a guard lives inside its task's future, which may move between workers; it
// only touches the task's atomic state word and owns a reference that keeps it alive.
unsafe impl Send for ShieldGuard {}
// SAFETY: `&ShieldGuard` offers nothing.
unsafe impl Sync for ShieldGuard {}

impl Drop for ShieldGuard {
    fn drop(&mut self) {
        let Some(t) = self.task else { return };
        // SAFETY: the guard's reference keeps the task alive.
        let h = unsafe { t.as_ref() };
        if h.state.remove_shield() == state::TransitionToScheduled::Submit {
            // SAFETY: the transition took a queue reference for `schedule`.
            unsafe { (h.vtable.schedule)(t) };
        }
        if h.state.ref_dec() {
            // SAFETY: that was the last reference.
            unsafe { (h.vtable.dealloc)(t) };
        }
    }
}

impl std::fmt::Debug for ShieldGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShieldGuard").field("active", &self.task.is_some()).finish()
    }
}
