//! The scheduler's side of a task's life (`task::Schedule`): where a woken task goes,
//! what a poll reports, where a task's cell comes from and goes back to, and what its
//! end counts.
//!
//! The poll hooks only pass through to the telemetry seam (`metrics`), which explains
//! why their stores are split as they are. A cell comes from the cache of the worker the
//! task is spawned on, tagged with that worker's index plus one (0: from the global
//! allocator, off the workers or too large for a size class); whoever frees it later
//! gives it back to that worker's cache, locally on the owner's thread, through the
//! cache's remote stack from any other.

use crate::runtime::handle::Shared;
use crate::task::cellcache;
use crate::task::raw::Header;
use crate::task::{Notified, Outcome, PollOutcome, PollToken, Schedule};
use std::ptr::NonNull;
use std::sync::Arc;

impl Schedule for Arc<Shared> {
    fn schedule(&self, task: Notified<Self>) {
        self.schedule_task(task, false);
    }

    fn yield_now(&self, task: Notified<Self>) {
        self.schedule_task(task, true);
    }

    fn release(&self, task: NonNull<Header>) -> bool {
        self.on_release(task);
        self.owned.remove(task)
    }

    #[inline(always)]
    fn poll_start(&self, ptr: NonNull<Header>, cx: *const (), sampled: bool) -> PollToken {
        self.on_poll_start(ptr, cx, sampled)
    }

    #[inline(always)]
    fn poll_end(&self, ptr: NonNull<Header>, token: &mut PollToken) {
        self.on_poll_end(ptr, token)
    }

    #[inline(always)]
    fn poll_outcome(token: &PollToken, id: u64, outcome: PollOutcome) {
        Shared::on_poll_outcome(token, id, outcome)
    }

    #[inline(always)]
    fn alloc_cell(&self, layout: std::alloc::Layout) -> (NonNull<u8>, u8) {
        if let (Some(w), Some(c)) = (self.current_worker(), cellcache::class_of(layout)) {
            // SAFETY: this is worker `w`'s own thread (`current_worker` checked the context).
            return (unsafe { w.cache.alloc(c) }, w.index as u8 + 1);
        }
        (crate::task::alloc_global(layout), 0)
    }

    #[inline(always)]
    unsafe fn free_cell(&self, p: NonNull<u8>, layout: std::alloc::Layout, owner: u8) {
        if owner == 0 {
            // SAFETY: untagged cells come from the global allocator with `layout`.
            unsafe { std::alloc::dealloc(p.as_ptr(), layout) };
            return;
        }
        let c = cellcache::class_of(layout).expect("a cached cell has a size class");
        let home = owner as usize - 1;
        let cache = &self.workers[home].cache;
        if self.current_worker_index() == Some(home) {
            // SAFETY: we are the owning worker's thread; the block is of class `c` from its
            // cache (the tag says so) and unused from here on.
            unsafe { cache.free_local(c, p) }
        } else {
            // SAFETY: as above, from another thread: the remote stack takes it.
            unsafe { cache.free_remote(c, p) }
        }
    }

    fn on_complete(&self, id: u64, outcome: Outcome) {
        Shared::on_complete(self, id, outcome);
    }
}
