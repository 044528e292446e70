//! Per-worker recycling of task cells: a worker's spawns take memory from its own cache,
//! and a task's memory goes back to the cache of the worker that allocated it, wherever
//! the task ends.
//!
//! # Why
//! A task is often spawned on one worker and freed on another (it was stolen, or its last
//! reference was a waker held elsewhere). glibc's `free` from a thread other than the
//! allocating one is cheap only for chunks of at most 128 bytes (its fastbins); above that
//! it takes the owning arena's lock, contending with the allocating thread. A tiny task's
//! cell sits right at that line, so a few bytes more (the event ring's per-task stats)
//! doubled the cost of spawning. Recycling cells makes the allocator's size classes and
//! cross-thread path irrelevant to the hot path.
//!
//! # How
//! Cells up to [`MAX_BYTES`] with alignment up to 16 are rounded up to a size class of 16
//! bytes. Each worker has, per class:
//! * a **local** free list, touched only by the worker itself (no atomics), of at most
//!   [`LOCAL_CAP`] blocks; beyond that, frees go to the global allocator;
//! * a **remote** stack that any thread pushes to (a CAS loop) when it frees a block this
//!   worker allocated. Only the owner takes from it, and it takes the whole stack at once
//!   (`swap` with null), so there is no ABA: no node is ever popped individually from a
//!   shared stack.
//!
//! The allocating worker's index is kept in the task's state word (bits 8..16, set at
//! creation, never changed), so the free path knows where a block goes home to. Blocks on a
//! remote stack wait there until their owner next runs short. They add up to at most the
//! blocks that worker once had out, and the cache frees them all when the runtime's
//! shared state drops.
//!
//! # Spawns from other threads
//! `Handle::spawn` from a thread that is not a worker has no cache of its own, and its
//! tasks are nearly always freed on a worker, which is the cross-thread case above. So the
//! runtime keeps one more cache, a [`SharedCellCache`], for all such threads. Its owner
//! side belongs to whichever thread holds its `busy` flag (one compare-exchange to take,
//! one store to give back); a thread that finds the flag taken uses the global allocator
//! for that cell instead, so no spawning thread ever waits for another. Every block of it
//! comes back through the remote stack, whoever frees it. Measured: with the event ring's
//! per-task stats, a tiny task's cell grows from 112 to 168 bytes, past glibc's fastbins,
//! and a remote spawn loop ran 1.4 to 1.8 times slower with the ring on than off while its
//! cells came from the global allocator.

use crate::loom::{AtomicBool, AtomicPtr, AtomicU32, UnsafeCell};
use std::alloc::Layout;
use std::ptr::{self, NonNull};
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};

/// The runtime's cache for threads that are not workers (see "Spawns from other
/// threads"): a [`CellCache`] whose owner side is guarded by a try-lock.
pub(crate) struct SharedCellCache {
    busy: AtomicBool,
    cache: CellCache,
}

impl SharedCellCache {
    pub(crate) fn new() -> SharedCellCache {
        SharedCellCache { busy: AtomicBool::new(false), cache: CellCache::new() }
    }

    /// Any thread: a block of class `c`, or `None` if another thread holds the owner side
    /// right now (the caller then uses the global allocator).
    #[inline]
    pub(crate) fn try_alloc(&self, c: usize) -> Option<NonNull<u8>> {
        // Acquire: the previous holder's list updates (its Release below) come first.
        if self.busy.compare_exchange(false, true, Acquire, Relaxed).is_err() {
            return None;
        }
        // SAFETY: holding `busy` makes this thread the cache's only owner-side user until
        // the store below.
        let p = unsafe { self.cache.alloc(c) };
        self.busy.store(false, Release);
        Some(p)
    }

    /// Any thread: give back a block of class `c`.
    ///
    /// # Safety
    /// `p` must be an unused block of class `c` that [`SharedCellCache::try_alloc`] gave.
    #[inline]
    pub(crate) unsafe fn free(&self, c: usize, p: NonNull<u8>) {
        // SAFETY: the caller's contract; the remote stack takes blocks from any thread.
        unsafe { self.cache.free_remote(c, p) }
    }

    /// Blocks this cache took from the global allocator so far.
    #[cfg(test)]
    pub(crate) fn fresh_allocations(&self) -> u32 {
        self.cache.fresh_allocations()
    }
}

/// Size-class granularity, and the largest alignment served.
pub(crate) const CLASS_BYTES: usize = 16;
/// Size classes: 16, 32, ..., `MAX_BYTES`.
pub(crate) const CLASSES: usize = 48;
/// The largest cell served from the cache; bigger ones use the global allocator.
pub(crate) const MAX_BYTES: usize = CLASSES * CLASS_BYTES;
/// Blocks a worker keeps per class in its local list.
pub(crate) const LOCAL_CAP: u32 = 1024;

/// The size class of `layout`, if the cache serves it.
#[inline]
pub(crate) fn class_of(layout: Layout) -> Option<usize> {
    if layout.align() > CLASS_BYTES || layout.size() > MAX_BYTES || layout.size() == 0 {
        return None;
    }
    Some(layout.size().div_ceil(CLASS_BYTES) - 1)
}

/// The layout every block of class `c` is allocated with.
#[inline]
pub(crate) fn class_layout(c: usize) -> Layout {
    // SAFETY: a non-zero multiple of 16 with alignment 16 is a valid layout.
    unsafe { Layout::from_size_align_unchecked((c + 1) * CLASS_BYTES, CLASS_BYTES) }
}

/// A free block: its first word links to the next.
struct Block {
    next: *mut Block,
}

struct Local {
    head: *mut Block,
    len: u32,
}

/// One worker's cache.
pub(crate) struct CellCache {
    local: [UnsafeCell<Local>; CLASSES],
    remote: [AtomicPtr<Block>; CLASSES],
    /// Blocks allocated from the global allocator by this cache (for tests and telemetry).
    fresh: AtomicU32,
}

// SAFETY: `local` is only touched by the owning worker thread (the callers of the
// owner-only methods guarantee it); `remote` is atomics; the blocks are plain memory.
unsafe impl Sync for CellCache {}
// SAFETY: as above; the raw pointers are to memory the cache owns.
unsafe impl Send for CellCache {}

impl CellCache {
    pub(crate) fn new() -> CellCache {
        CellCache {
            local: std::array::from_fn(|_| UnsafeCell::new(Local { head: ptr::null_mut(), len: 0 })),
            remote: std::array::from_fn(|_| AtomicPtr::new(ptr::null_mut())),
            fresh: AtomicU32::new(0),
        }
    }

    /// Owner only: a block of class `c`, from the local list, else from what other threads
    /// gave back, else from the global allocator.
    ///
    /// # Safety
    /// Only the owning worker thread may call this.
    #[inline]
    pub(crate) unsafe fn alloc(&self, c: usize) -> NonNull<u8> {
        // SAFETY: owner only (the caller's contract), so nothing else touches the list.
        let local = self.local[c].with_mut(|l| unsafe { &mut *l });
        if local.head.is_null() {
            // Take everything other threads returned, in one swap.
            local.head = self.remote[c].swap(ptr::null_mut(), Acquire);
            local.len = 0; // unknown length; counted again as blocks come back
        }
        if let Some(b) = NonNull::new(local.head) {
            // SAFETY: every block on a list is a live, unused block of this class whose
            // first word is the link (written by `free_local` or `free_remote`).
            local.head = unsafe { (*b.as_ptr()).next };
            local.len = local.len.saturating_sub(1);
            return b.cast();
        }
        self.fresh.store(self.fresh.load(Relaxed).wrapping_add(1), Relaxed);
        let layout = class_layout(c);
        // SAFETY: non-zero size.
        let p = unsafe { std::alloc::alloc(layout) };
        match NonNull::new(p) {
            Some(p) => p,
            None => std::alloc::handle_alloc_error(layout),
        }
    }

    /// Owner only: keep a block of class `c` for reuse (or free it, if the list is full).
    ///
    /// # Safety
    /// Only the owning worker thread may call this; `p` must be an unused block of class
    /// `c` allocated by this cache.
    #[inline]
    pub(crate) unsafe fn free_local(&self, c: usize, p: NonNull<u8>) {
        // SAFETY: owner only, so nothing else touches the list.
        let local = self.local[c].with_mut(|l| unsafe { &mut *l });
        if local.len >= LOCAL_CAP {
            // SAFETY: the block was allocated with this class's layout.
            unsafe { std::alloc::dealloc(p.as_ptr(), class_layout(c)) };
            return;
        }
        let b = p.cast::<Block>().as_ptr();
        // SAFETY: the block is unused and at least 16 bytes, aligned for a pointer.
        unsafe { b.write(Block { next: local.head }) };
        local.head = b;
        local.len += 1;
    }

    /// Any thread: give a block of class `c` back to this cache's owner.
    ///
    /// # Safety
    /// `p` must be an unused block of class `c` allocated by this cache.
    #[inline]
    pub(crate) unsafe fn free_remote(&self, c: usize, p: NonNull<u8>) {
        let b = p.cast::<Block>().as_ptr();
        let mut head = self.remote[c].load(Relaxed);
        loop {
            // SAFETY: the block is ours until the CAS publishes it.
            unsafe { b.write(Block { next: head }) };
            // Release: the owner's Acquire swap sees the link (and nothing else in the
            // block matters).
            match self.remote[c].compare_exchange_weak(head, b, Release, Relaxed) {
                Ok(_) => return,
                Err(h) => head = h,
            }
        }
    }

    /// Blocks this cache took from the global allocator so far.
    #[cfg(test)]
    pub(crate) fn fresh_allocations(&self) -> u32 {
        self.fresh.load(Relaxed)
    }
}

impl Drop for CellCache {
    fn drop(&mut self) {
        for c in 0..CLASSES {
            // SAFETY: `drop` has exclusive access.
            let local = self.local[c].with_mut(|l| unsafe { (*l).head });
            let remote = self.remote[c].swap(ptr::null_mut(), AcqRel);
            for mut b in [local, remote] {
                while !b.is_null() {
                    // SAFETY: blocks on the lists are ours, allocated with the class layout;
                    // `drop` has exclusive access.
                    unsafe {
                        let next = (*b).next;
                        std::alloc::dealloc(b.cast(), class_layout(c));
                        b = next;
                    }
                }
            }
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn classes_round_up_to_16_bytes() {
        let l = |s, a| Layout::from_size_align(s, a).unwrap();
        assert_eq!(class_of(l(1, 1)), Some(0));
        assert_eq!(class_of(l(16, 8)), Some(0));
        assert_eq!(class_of(l(17, 8)), Some(1));
        assert_eq!(class_of(l(MAX_BYTES, 16)), Some(CLASSES - 1));
        assert_eq!(class_of(l(MAX_BYTES + 1, 8)), None);
        assert_eq!(class_of(l(64, 32)), None);
        for s in [1usize, 100, 120, 184, 700] {
            assert!(class_layout(class_of(l(s, 8)).unwrap()).size() >= s);
        }
    }

    /// The test thread acts as the owner; every block goes back to the class it came from.
    fn alloc(cache: &CellCache, c: usize) -> NonNull<u8> {
        // SAFETY: the calling test thread is the cache's only owner-side user.
        unsafe { cache.alloc(c) }
    }

    fn free_local(cache: &CellCache, c: usize, p: NonNull<u8>) {
        // SAFETY: owner thread; `p` is an unused block of class `c` from this cache.
        unsafe { cache.free_local(c, p) }
    }

    fn free_remote(cache: &CellCache, c: usize, p: NonNull<u8>) {
        // SAFETY: `p` is an unused block of class `c` from this cache.
        unsafe { cache.free_remote(c, p) }
    }

    #[test]
    fn blocks_are_reused_locally_and_come_home_from_other_threads() {
        let cache = std::sync::Arc::new(CellCache::new());
        let a = alloc(&cache, 3);
        let b = alloc(&cache, 3);
        assert_ne!(a, b);
        assert_eq!(cache.fresh_allocations(), 2);
        free_local(&cache, 3, a);
        assert_eq!(alloc(&cache, 3), a, "the local list is LIFO");
        // Freed on another thread: back to the owner through the remote stack.
        struct SendPtr(NonNull<u8>);
        // SAFETY: the block is plain memory handed over to the other thread.
        unsafe impl Send for SendPtr {}
        let (c2, bp) = (cache.clone(), SendPtr(b));
        std::thread::spawn(move || {
            let bp = bp;
            free_remote(&c2, 3, bp.0)
        })
        .join()
        .unwrap();
        assert_eq!(alloc(&cache, 3), b);
        assert_eq!(cache.fresh_allocations(), 2, "no new memory while blocks come back");
        free_local(&cache, 3, a);
        free_remote(&cache, 3, b);
        // Dropping the cache frees both (Miri checks for leaks).
    }

    #[test]
    fn the_shared_cache_serves_one_thread_at_a_time_and_takes_blocks_back_from_any() {
        let shared = std::sync::Arc::new(SharedCellCache::new());
        let a = shared.try_alloc(2).expect("an idle shared cache serves");
        // Another thread holds the owner side: the caller is told to go elsewhere, and the
        // cache is untouched.
        shared.busy.store(true, Relaxed);
        assert!(shared.try_alloc(2).is_none(), "a held cache must not serve");
        shared.busy.store(false, Relaxed);
        assert_eq!(shared.fresh_allocations(), 1);
        // Freed on another thread, the block is the next one handed out.
        struct SendPtr(NonNull<u8>);
        // SAFETY: the block is plain memory handed over to the other thread.
        unsafe impl Send for SendPtr {}
        let (s2, ap) = (shared.clone(), SendPtr(a));
        std::thread::spawn(move || {
            let ap = ap;
            // SAFETY: an unused class-2 block from this shared cache.
            unsafe { s2.free(2, ap.0) }
        })
        .join()
        .unwrap();
        let b = shared.try_alloc(2).unwrap();
        assert_eq!(b, a, "the returned block is reused");
        assert_eq!(shared.fresh_allocations(), 1, "no new memory while blocks come back");
        // Freed on this thread too it goes through the remote stack; dropping the cache
        // frees it (Miri checks for leaks).
        // SAFETY: as above.
        unsafe { shared.free(2, b) };
    }

    #[test]
    fn a_full_local_list_frees_to_the_global_allocator() {
        let cache = CellCache::new();
        let blocks: Vec<_> = (0..LOCAL_CAP + 10).map(|_| alloc(&cache, 0)).collect();
        for b in blocks {
            free_local(&cache, 0, b);
        }
        // SAFETY: this thread is the owner and nothing else touches the cache.
        let len = cache.local[0].with(|l| unsafe { (*l).len });
        assert_eq!(len, LOCAL_CAP);
    }
}
