//! The scheduler's side of a task's life (`task::Schedule`): where a woken task goes,
//! what a poll reports, where a task's cell comes from and goes back to, and what its
//! end counts.
//!
//! The poll hooks only pass through to the telemetry seam (`metrics`), which explains
//! why their stores are split as they are. A cell comes from the cache of the worker the
//! task is spawned on, tagged with that worker's index plus one; a task spawned from a
//! thread outside the runtime takes its cell from the runtime's outside cache, tagged
//! [`OUTSIDE_OWNER`] (0: from the global allocator, when that cache is busy with another
//! spawner or the cell is too large for a size class). Whoever frees it later gives it
//! back to that cache: locally on a worker's own thread, through the cache's remote
//! stack from any other.

use crate::scheduler::handle::Handle;
use crate::task::cellcache;
use crate::task::header::Header;
use crate::task::notified::Notified;
use crate::task::schedule::{Outcome, PollOutcome, PollToken, Schedule};
use crate::telemetry::groups::GroupId;
use crate::telemetry::metrics::Metrics;
use std::ptr::{self, NonNull};
use std::sync::Arc;

/// The owner tag of a cell from the outside cache (`Handle::outside_cells`); workers are
/// tagged with their index plus one, and there are at most 64 of them.
const OUTSIDE_OWNER: u8 = u8::MAX;
const _: () = assert!(crate::scheduler::idle::MAX_WORKERS < OUTSIDE_OWNER as usize);

impl Schedule for Arc<Handle> {
    fn schedule(&self, task: Notified<Self>) {
        self.schedule_task(task, false);
    }

    fn yield_now(&self, task: Notified<Self>) {
        self.schedule_task(task, true);
    }

    fn release(&self, task: NonNull<Header>) -> bool {
        self.metrics.on_release(task, self.current_rec());
        self.owned.remove(task)
    }

    #[inline(always)]
    fn poll_start(&self, ptr: NonNull<Header>, cx: *const (), sampled: bool) -> PollToken {
        self.metrics.on_poll_start(ptr, cx, sampled)
    }

    #[inline(always)]
    fn poll_end(&self, ptr: NonNull<Header>, token: &mut PollToken) {
        if !token.cx.is_null() {
            let w = crate::scheduler::handle::current_worker_ptr();
            // SAFETY: a non-null worker pointer in the context is this thread's worker,
            // alive while the thread owns it; only the address of its recorder is taken.
            let still_ours = !w.is_null() && ptr::eq(unsafe { ptr::addr_of!((*w).rec) }, token.cx.cast());
            if !still_ours {
                // A blocking join in this poll handed the worker to another thread, which
                // owns its ring and clock cell now: record nothing of this poll there.
                token.cx = ptr::null();
                token.ring = ptr::null();
                return;
            }
        }
        self.metrics.on_poll_end(ptr, token)
    }

    #[inline(always)]
    fn poll_outcome(token: &PollToken, id: u64, outcome: PollOutcome) {
        Metrics::on_poll_outcome(token, id, outcome)
    }

    #[inline(always)]
    fn alloc_cell(&self, layout: std::alloc::Layout) -> (NonNull<u8>, u8) {
        if let (Some(w), Some(c)) = (self.current_worker(), cellcache::class_of(layout)) {
            // SAFETY: this is worker `w`'s own thread (`current_worker` checked the context).
            return (unsafe { w.cache.alloc(c) }, w.index as u8 + 1);
        }
        if let Some(c) = cellcache::class_of(layout) {
            if let Some(p) = self.outside_cells.try_alloc(c) {
                return (p, OUTSIDE_OWNER);
            }
        }
        (crate::task::schedule::alloc_global(layout), 0)
    }

    #[inline(always)]
    unsafe fn free_cell(&self, p: NonNull<u8>, layout: std::alloc::Layout, owner: u8) {
        if owner == 0 {
            // SAFETY: untagged cells come from the global allocator with `layout`.
            unsafe { std::alloc::dealloc(p.as_ptr(), layout) };
            return;
        }
        let c = cellcache::class_of(layout).expect("a cached cell has a size class");
        if owner == OUTSIDE_OWNER {
            // SAFETY: the tag says the outside cache gave it, with class `c`; unused from
            // here on.
            unsafe { self.outside_cells.free(c, p) };
            return;
        }
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

    fn on_complete(&self, task: NonNull<Header>, outcome: Outcome) {
        // SAFETY: the caller holds the task.
        let id = unsafe { task.as_ref() }.id;
        // SAFETY: the caller holds the task.
        let h = unsafe { task.as_ref() };
        let group = h.state.has_stats().then(|| GroupId::from_index(h.group));
        self.metrics.on_complete(self.current_rec(), id, outcome, group);
    }

    fn is_shut_down(&self) -> bool {
        self.is_shutdown()
    }

    fn in_context(&self, f: &mut dyn FnMut()) {
        let _enter = crate::scheduler::handle::enter(self);
        f()
    }
}
