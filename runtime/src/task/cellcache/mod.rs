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
//! * a **local** free list, touched only by the worker itself (no atomics but a relaxed
//!   store of its byte total, so telemetry and tests can read it);
//! * a **remote** stack that any thread pushes to (a CAS loop) when it frees a block this
//!   worker allocated. Only the owner takes from it, and it takes the whole stack at once
//!   (`swap` with null), so there is no ABA: no node is ever popped individually from a
//!   shared stack.
//!
//! The allocating worker's index is kept in the task's state word (the owner byte, set at
//! creation, never changed), so the free path knows where a block goes home to.
//!
//! # How much it keeps
//! A burst of a million spawns from one worker puts a million cells out at once. Keeping
//! them all when they come back would pin the burst's peak for the runtime's life, so the
//! cache keeps at most [`LOCAL_CAP_BYTES`] on its local lists and [`REMOTE_CAP_BYTES`] on
//! its remote stacks (all classes together), and every block beyond that goes straight
//! back to the global allocator:
//! * a local free over the local budget is a `dealloc`;
//! * a remote free first adds the block's size to `remote_bytes` (one relaxed
//!   `fetch_add`, on a line of its own); if that passes the remote budget it subtracts it
//!   again and frees the block to the allocator instead of pushing it;
//! * the owner, taking a remote stack, subtracts the bytes it took, moves blocks to its
//!   local list while the local budget allows and frees the rest.
//!
//! A block's size is added before it is pushed and subtracted only after a swap took it,
//! so `remote_bytes` never underflows; racing frees can overshoot the budget by one block
//! each for as long as their `fetch_add` and `fetch_sub` are apart. The blocks left when
//! the runtime's shared state drops are freed with the cache.
//!
//! # Spawns from outside the runtime
//! A thread that is not one of the runtime's workers (a main thread handing out work, a
//! worker of another runtime) has no cache of its own, so the runtime keeps one more,
//! [`OutsideCache`], which whichever such thread holds its lock owns for one allocation.
//! It differs from a worker's in two ways:
//! * **Its budget covers a burst** ([`Caps::OUTSIDE`], 4 MiB for both sides together): a
//!   spawner outside the runtime often spawns thousands of tasks and waits for them all,
//!   and a budget below the burst would free the rest to glibc in one go, which merges
//!   them into its top chunk, returns the memory to the system and takes it back with a
//!   page fault per page on the next burst.
//! * **Its blocks start on a cache line and fill whole lines**: the next spawn reuses
//!   blocks in the order tasks ended, so neighbouring blocks go to tasks on different
//!   workers, and two of them sharing a line would make those workers fight over it on
//!   every poll (with 16-byte blocks, 200 tasks spawned from outside and yielding in a
//!   loop took 12 to 37% longer than with the allocator's own memory).
//!
//! The budget is shared by all size classes, and a class's blocks are taken back only by
//! spawns of that class, so the blocks of a class no longer spawned could hold it for
//! good and turn every other class away. So a spawn that finds none of its class kept
//! while the cache is more than half full gives back the blocks of every class not asked
//! for in the last [`STALE_AFTER_SPAWNS`] spawns from outside (a class still in use, a
//! burst's between two rounds, keeps its blocks).

use crate::loom::{AtomicPtr, AtomicU32, AtomicUsize};
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
/// The most bytes a worker's local free lists keep, all classes together (about 1,000
/// cells of a typical task).
#[cfg(all(not(loom), not(miri)))]
pub(crate) const LOCAL_CAP_BYTES: usize = 256 * 1024;
/// The most bytes other threads leave on a worker's remote stacks, all classes together.
#[cfg(all(not(loom), not(miri)))]
pub(crate) const REMOTE_CAP_BYTES: usize = 256 * 1024;
/// Under Miri, smaller budgets, so that its runs of the burst tests (which fill them
/// past the brim) stay short.
#[cfg(all(not(loom), miri))]
pub(crate) const LOCAL_CAP_BYTES: usize = 32 * 1024;
#[cfg(all(not(loom), miri))]
pub(crate) const REMOTE_CAP_BYTES: usize = 32 * 1024;
/// Under loom the budgets shrink to a block or two, so the models reach the paths that
/// give blocks back to the allocator.
#[cfg(loom)]
pub(crate) const LOCAL_CAP_BYTES: usize = 2 * CLASS_BYTES;
#[cfg(loom)]
pub(crate) const REMOTE_CAP_BYTES: usize = CLASS_BYTES;
/// The most bytes the cache for spawns from outside the runtime keeps, its local lists
/// and remote stacks together (see [`Caps::OUTSIDE`]).
#[cfg(all(not(loom), not(miri)))]
pub(crate) const OUTSIDE_CAP_BYTES: usize = 4 * 1024 * 1024;
/// Under Miri a smaller budget, as above.
#[cfg(all(not(loom), miri))]
pub(crate) const OUTSIDE_CAP_BYTES: usize = 32 * 1024;
#[cfg(loom)]
pub(crate) const OUTSIDE_CAP_BYTES: usize = 128;

/// A cache's byte budgets.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Caps {
    /// The most bytes on the local lists.
    pub(crate) local: usize,
    /// The most bytes on the remote stacks.
    pub(crate) remote: usize,
    /// The most bytes on both together.
    pub(crate) total: usize,
    /// Blocks start on a cache line and fill whole lines.
    pub(crate) line_aligned: bool,
}

impl Caps {
    /// A worker's cache: [`LOCAL_CAP_BYTES`] and [`REMOTE_CAP_BYTES`], so at most their sum.
    pub(crate) const WORKER: Caps =
        Caps { local: LOCAL_CAP_BYTES, remote: REMOTE_CAP_BYTES, total: usize::MAX, line_aligned: false };

    /// The cache for spawns from threads outside the runtime: [`OUTSIDE_CAP_BYTES`] in
    /// all, in line-aligned blocks (see "Spawns from outside the runtime" above).
    pub(crate) const OUTSIDE: Caps =
        Caps { local: OUTSIDE_CAP_BYTES, remote: OUTSIDE_CAP_BYTES, total: OUTSIDE_CAP_BYTES, line_aligned: true };
}

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
}

/// A counter alone on its cache line, so the frees that bump it do not contend with the
/// stack heads beside it.
#[repr(align(128))]
struct Padded<T>(T);

/// A cache of task cells: a worker's, or the runtime's one for spawns from outside it.
///
/// Its **owner** is the thread that may take blocks from it: the worker's own thread, or
/// for the outside cache whichever thread holds [`OutsideCache`]'s lock.
pub(crate) struct CellCache {
    local: [UnsafeCell<Local>; CLASSES],
    /// Bytes on the local lists. Written only by the owner (a load and a store, no
    /// read-modify-write), read by anyone.
    local_bytes: AtomicUsize,
    remote: [AtomicPtr<Block>; CLASSES],
    /// Bytes pushed to the remote stacks and not yet taken by the owner (see the module
    /// doc: it may briefly count a block a racing free is about to hand to the allocator).
    remote_bytes: Padded<AtomicUsize>,
    /// Blocks allocated from the global allocator by this cache (for tests and telemetry).
    fresh: AtomicU32,
    caps: Caps,
    /// Blocks this cache gave back to the global allocator (tests and models check that
    /// every block is on a list, in use, or counted here).
    #[cfg(any(test, loom))]
    released: AtomicU32,
}

// SAFETY: `local` is only touched by the owner, one thread at a time (the callers of the
// owner-only methods guarantee it); `remote` is atomics; the blocks are plain memory.
unsafe impl Sync for CellCache {}
// SAFETY: as above; the raw pointers are to memory the cache owns.
unsafe impl Send for CellCache {}

impl CellCache {
    /// The layout of this cache's blocks of class `c`.
    #[inline]
    fn layout(&self, c: usize) -> Layout {
        let l = class_layout(c);
        if self.caps.line_aligned {
            // SAFETY: a non-zero multiple of 64 with alignment 64 is a valid layout.
            unsafe { Layout::from_size_align_unchecked(l.size().next_multiple_of(64), 64) }
        } else {
            l
        }
    }

    /// A worker's cache.
    pub(crate) fn new() -> CellCache {
        CellCache::with_caps(Caps::WORKER)
    }

    /// A cache that keeps at most `caps`.
    pub(crate) fn with_caps(caps: Caps) -> CellCache {
        CellCache {
            caps,
            local: std::array::from_fn(|_| UnsafeCell::new(Local { head: ptr::null_mut() })),
            local_bytes: AtomicUsize::new(0),
            remote: std::array::from_fn(|_| AtomicPtr::new(ptr::null_mut())),
            remote_bytes: Padded(AtomicUsize::new(0)),
            fresh: AtomicU32::new(0),
            #[cfg(any(test, loom))]
            released: AtomicU32::new(0),
        }
    }

    /// Owner only: a block of class `c`, from the local list, else from what other threads
    /// gave back, else from the global allocator.
    ///
    /// # Safety
    /// Only the owner may call this.
    #[inline]
    pub(crate) unsafe fn alloc(&self, c: usize) -> NonNull<u8> {
        // SAFETY: owner only (the caller's contract); a read of the list head.
        if unsafe { (*self.local[c].get()).head.is_null() } {
            // SAFETY: owner only (the caller's contract).
            unsafe { self.take_remote(c) };
        }
        // SAFETY: owner only (the caller's contract).
        let local = unsafe { &mut *self.local[c].get() };
        if let Some(b) = NonNull::new(local.head) {
            // SAFETY: every block on a list is a live, unused block of this class whose
            // first word is the link (written by `free_local` or `free_remote`).
            local.head = unsafe { (*b.as_ptr()).next };
            self.set_local_bytes(self.local_bytes.load(Relaxed) - self.layout(c).size());
            return b.cast();
        }
        self.fresh.store(self.fresh.load(Relaxed).wrapping_add(1), Relaxed);
        let layout = self.layout(c);
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
    /// Only the owner may call this; `p` must be an unused block of class
    /// `c` allocated by this cache.
    #[inline]
    pub(crate) unsafe fn free_local(&self, c: usize, p: NonNull<u8>) {
        let size = self.layout(c).size();
        let bytes = self.local_bytes.load(Relaxed);
        if bytes + size > self.caps.local {
            // SAFETY: the block was allocated with this class's layout.
            unsafe { self.release(c, p.as_ptr()) };
            return;
        }
        // SAFETY: owner only.
        let local = unsafe { &mut *self.local[c].get() };
        let b = p.cast::<Block>().as_ptr();
        // SAFETY: the block is unused and at least 16 bytes, aligned for a pointer.
        unsafe { b.write(Block { next: local.head }) };
        local.head = b;
        self.set_local_bytes(bytes + size);
    }

    /// Give a block of class `c` back to the global allocator.
    ///
    /// # Safety
    /// `p` is an unused block of class `c` from this cache, on no list.
    #[inline]
    unsafe fn release(&self, c: usize, p: *mut u8) {
        #[cfg(any(test, loom))]
        self.released.fetch_add(1, Relaxed);
        // SAFETY: the caller's contract: allocated with this class's layout, unused.
        unsafe { std::alloc::dealloc(p, self.layout(c)) };
    }

    /// Owner only: the local byte total (a plain store: nobody else writes it).
    #[inline]
    fn set_local_bytes(&self, bytes: usize) {
        self.local_bytes.store(bytes, Relaxed);
    }

    /// Owner only: take class `c`'s remote stack in one swap; keep what fits in the local
    /// budget on the local list and give the rest back to the global allocator.
    ///
    /// # Safety
    /// Only the owner may call this.
    #[cold]
    unsafe fn take_remote(&self, c: usize) {
        let mut b = self.remote[c].swap(ptr::null_mut(), Acquire);
        if b.is_null() {
            return;
        }
        let layout = self.layout(c);
        // SAFETY: owner only (the caller's contract).
        let local = unsafe { &mut *self.local[c].get() };
        let mut bytes = self.local_bytes.load(Relaxed);
        let mut taken = 0;
        while !b.is_null() {
            // SAFETY: every block on the stack is an unused block of class `c` whose first
            // word is the link; the swap made the whole chain ours.
            let next = unsafe { (*b).next };
            taken += layout.size();
            if bytes + layout.size() <= self.caps.local {
                // SAFETY: as above; the block is ours to relink.
                unsafe { (*b).next = local.head };
                local.head = b;
                bytes += layout.size();
            } else {
                // SAFETY: as above; allocated with this class's layout.
                unsafe { self.release(c, b.cast()) };
            }
            b = next;
        }
        self.set_local_bytes(bytes);
        // Release, after the local total's store: a free whose `fetch_add` reads past this
        // (acquire) also sees that total, so a total cap counts the moved blocks at least
        // once. (A reader in between may count them twice; see `cached_bytes`.)
        self.remote_bytes.0.fetch_sub(taken, Release);
    }

    /// Owner only: whether class `c` has no block kept, on its list or its remote stack.
    ///
    /// # Safety
    /// Only the owner may call this.
    #[inline]
    unsafe fn class_is_empty(&self, c: usize) -> bool {
        // SAFETY: owner only (the caller's contract); a read of the list head.
        unsafe { (*self.local[c].get()).head.is_null() && self.remote[c].load(Relaxed).is_null() }
    }

    /// Owner only: give every block of each class `release(class)` picks back to the
    /// global allocator, from the local lists and the remote stacks.
    ///
    /// # Safety
    /// Only the owner may call this.
    #[cold]
    unsafe fn release_classes(&self, release: impl Fn(usize) -> bool) {
        for c in (0..CLASSES).filter(|&c| release(c)) {
            // SAFETY: owner only (the caller's contract).
            let local = unsafe { &mut *self.local[c].get() };
            // SAFETY: the owner's list, taken off it whole: unused blocks of class `c`.
            let freed = unsafe { self.release_chain(c, std::mem::replace(&mut local.head, ptr::null_mut())) };
            self.set_local_bytes(self.local_bytes.load(Relaxed) - freed);
            // SAFETY: the swap made the remote chain ours: unused blocks of class `c`.
            let taken = unsafe { self.release_chain(c, self.remote[c].swap(ptr::null_mut(), Acquire)) };
            self.remote_bytes.0.fetch_sub(taken, Release);
        }
    }

    /// Give every block of the chain from `b` back to the global allocator; the bytes
    /// they took.
    ///
    /// # Safety
    /// The chain is the caller's alone: unused blocks of class `c` from this cache, each
    /// linked to the next through its first word, on no list.
    unsafe fn release_chain(&self, c: usize, mut b: *mut Block) -> usize {
        let size = self.layout(c).size();
        let mut bytes = 0;
        while !b.is_null() {
            // SAFETY: the caller's contract: a block of the chain, its first word the link.
            let next = unsafe { (*b).next };
            // SAFETY: as above; unused, of class `c`.
            unsafe { self.release(c, b.cast()) };
            bytes += size;
            b = next;
        }
        bytes
    }

    /// Any thread: give a block of class `c` back to this cache's owner.
    ///
    /// # Safety
    /// `p` must be an unused block of class `c` allocated by this cache.
    #[inline]
    pub(crate) unsafe fn free_remote(&self, c: usize, p: NonNull<u8>) {
        let size = self.layout(c).size();
        // Acquire: see the owner's local total as of the last remote take it made (the
        // release `fetch_sub` in `take_remote`).
        let remote = self.remote_bytes.0.fetch_add(size, Acquire) + size;
        if remote > self.caps.remote
            || (self.caps.total != usize::MAX && remote + self.local_bytes.load(Relaxed) > self.caps.total)
        {
            // Over the budget: the owner has enough coming home; this one goes to the
            // global allocator (the cross-thread free the cache otherwise saves).
            self.remote_bytes.0.fetch_sub(size, Relaxed);
            // SAFETY: the block was allocated with this class's layout and is unused.
            unsafe { self.release(c, p.as_ptr()) };
            return;
        }
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

    /// Blocks given back to the global allocator so far.
    #[cfg(any(test, loom))]
    pub(crate) fn released(&self) -> u32 {
        self.released.load(Relaxed)
    }

    /// Bytes on the remote stacks (see `remote_bytes`).
    #[cfg(any(test, loom))]
    pub(crate) fn remote_bytes(&self) -> usize {
        self.remote_bytes.0.load(Relaxed)
    }

    /// Bytes the cache holds now (local lists plus remote stacks), from any thread. Within
    /// its caps, give or take a block per racing free; a reading taken while the owner
    /// moves blocks from a remote stack to its list may count them twice.
    pub(crate) fn cached_bytes(&self) -> usize {
        self.local_bytes.load(Relaxed) + self.remote_bytes.0.load(Relaxed)
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
                        std::alloc::dealloc(b.cast(), self.layout(c));
                        b = next;
                    }
                }
            }
        }
    }
}

mod outside;
pub(crate) use outside::OutsideCache;

#[cfg(all(test, not(loom)))]
mod tests;

#[cfg(all(loom, test))]
mod loom_tests;
