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

use crate::loom::{AtomicPtr, AtomicU32};
use std::alloc::Layout;
use std::cell::UnsafeCell;
use std::ptr::{self, NonNull};
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};

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
        // SAFETY: owner only (the caller's contract).
        let local = unsafe { &mut *self.local[c].get() };
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
        // SAFETY: owner only.
        let local = unsafe { &mut *self.local[c].get() };
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
            let local = self.local[c].get_mut().head;
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
    fn a_full_local_list_frees_to_the_global_allocator() {
        let cache = CellCache::new();
        let blocks: Vec<_> = (0..LOCAL_CAP + 10).map(|_| alloc(&cache, 0)).collect();
        for b in blocks {
            free_local(&cache, 0, b);
        }
        // SAFETY: this thread is the owner and nothing else touches the cache.
        let local = unsafe { &*cache.local[0].get() };
        assert_eq!(local.len, LOCAL_CAP);
    }
}
