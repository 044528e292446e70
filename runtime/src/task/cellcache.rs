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
#[cfg(not(loom))]
pub(crate) const LOCAL_CAP_BYTES: usize = 256 * 1024;
/// The most bytes other threads leave on a worker's remote stacks, all classes together.
#[cfg(not(loom))]
pub(crate) const REMOTE_CAP_BYTES: usize = 256 * 1024;
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
/// Under Miri a smaller budget, so that its runs of the burst tests stay short.
#[cfg(all(not(loom), miri))]
pub(crate) const OUTSIDE_CAP_BYTES: usize = 256 * 1024;
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

/// The cache for cells spawned from threads outside the runtime (a main thread, a
/// thread of the caller's own, a worker of another runtime). A worker's cache has one
/// owner, its thread; here the owner is whichever such thread holds `owner`, which a
/// spawner only tries to take: if another spawner has it, this spawn takes its memory
/// from the global allocator instead (and frees it there), so no spawner ever waits on
/// another for memory. Every free, from any thread, goes to the remote stacks.
pub(crate) struct OutsideCache {
    owner: crate::loom::Mutex<SpawnClock>,
    cache: CellCache,
}

/// The outside cache's spawns so far, and the spawn at which each size class was last
/// asked for: a class not asked for in [`STALE_AFTER_SPAWNS`] spawns is stale.
struct SpawnClock {
    spawns: u64,
    last_use: [u64; CLASSES],
}

/// Spawns from outside after which a size class nobody asked for counts as stale.
#[cfg(not(loom))]
const STALE_AFTER_SPAWNS: u64 = 1024;
#[cfg(loom)]
const STALE_AFTER_SPAWNS: u64 = 1;

impl OutsideCache {
    pub(crate) fn new() -> OutsideCache {
        OutsideCache {
            owner: crate::loom::Mutex::new(SpawnClock { spawns: 0, last_use: [0; CLASSES] }),
            cache: CellCache::with_caps(Caps::OUTSIDE),
        }
    }

    /// A block of class `c`, or `None` while another spawner holds the cache.
    #[inline]
    pub(crate) fn try_alloc(&self, c: usize) -> Option<NonNull<u8>> {
        // Only a panicking global allocator could poison it; every spawn from outside
        // would then use the global allocator, which is all the cache saves it from.
        let mut clock = self.owner.try_lock().ok()?;
        clock.spawns += 1;
        clock.last_use[c] = clock.spawns;
        // SAFETY: (both) holding `owner` makes this thread the cache's only owner until it
        // drops.
        unsafe {
            // More than half full, and none of this class: if what fills it is of classes
            // not asked for in a while (maybe never again), a burst of this class would
            // find room for only part of itself when it is freed, and the rest would go
            // back to the global allocator, for good. Make room by giving those back.
            if self.cache.class_is_empty(c) && self.cache.cached_bytes() > self.cache.caps.total / 2 {
                let now = clock.spawns;
                self.cache.release_classes(|k| now - clock.last_use[k] > STALE_AFTER_SPAWNS);
            }
            Some(self.cache.alloc(c))
        }
    }

    /// Give back a block of class `c` that [`try_alloc`](Self::try_alloc) gave, from any
    /// thread.
    ///
    /// # Safety
    /// `p` is an unused block of class `c` from this cache.
    #[inline]
    pub(crate) unsafe fn free(&self, c: usize, p: NonNull<u8>) {
        // SAFETY: the caller's contract.
        unsafe { self.cache.free_remote(c, p) }
    }

    /// Bytes the cache holds now (see [`CellCache::cached_bytes`]).
    pub(crate) fn cached_bytes(&self) -> usize {
        self.cache.cached_bytes()
    }

    #[cfg(any(test, loom))]
    pub(crate) fn released(&self) -> u32 {
        self.cache.released()
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
        // Two classes share the byte budget (512-byte blocks fill it in 512 frees, few
        // enough for Miri).
        let (small, big) = (31, 7);
        let n = LOCAL_CAP_BYTES / class_layout(small).size() + 10;
        let blocks: Vec<_> = (0..n).map(|_| alloc(&cache, small)).collect();
        let bigs: Vec<_> = (0..100).map(|_| alloc(&cache, big)).collect();
        for b in bigs {
            free_local(&cache, big, b);
        }
        assert_eq!(cache.cached_bytes(), 100 * class_layout(big).size());
        for b in blocks {
            free_local(&cache, small, b);
        }
        assert_eq!(cache.cached_bytes(), LOCAL_CAP_BYTES, "the local lists kept more than their budget");
        // Everything kept is handed out again before anything new is allocated.
        let fresh = cache.fresh_allocations();
        let again: Vec<_> = (0..(LOCAL_CAP_BYTES - 100 * class_layout(big).size()) / class_layout(small).size())
            .map(|_| alloc(&cache, small))
            .collect();
        assert_eq!(cache.fresh_allocations(), fresh);
        assert_eq!(cache.cached_bytes(), 100 * class_layout(big).size());
        for b in again {
            free_local(&cache, small, b);
        }
    }

    /// A burst: far more blocks than the budgets come back from another thread (past the
    /// remote budget) and locally; the cache keeps at most its budgets and the rest went to
    /// the allocator (Miri checks that nothing leaked and nothing was freed twice).
    #[test]
    fn a_burst_coming_home_is_capped_in_bytes() {
        let cache = std::sync::Arc::new(CellCache::new());
        let c = 5;
        let size = class_layout(c).size();
        let n = if cfg!(miri) { 2 * LOCAL_CAP_BYTES.max(REMOTE_CAP_BYTES) / size + 200 } else { 200_000 };
        let blocks: Vec<_> = (0..n).map(|_| alloc(&cache, c)).collect();
        assert_eq!(cache.fresh_allocations() as usize, n);
        let (home, away) = blocks.split_at(n / 2);
        struct SendPtrs(Vec<NonNull<u8>>);
        // SAFETY: the blocks are plain memory handed over to the other thread.
        unsafe impl Send for SendPtrs {}
        let (c2, away) = (cache.clone(), SendPtrs(away.to_vec()));
        std::thread::spawn(move || {
            let away = away;
            for p in away.0 {
                free_remote(&c2, c, p);
            }
        })
        .join()
        .unwrap();
        assert!(cache.cached_bytes() <= REMOTE_CAP_BYTES, "remote stacks over budget: {}", cache.cached_bytes());
        for &p in home {
            free_local(&cache, c, p);
        }
        assert!(cache.cached_bytes() <= LOCAL_CAP_BYTES + REMOTE_CAP_BYTES, "{}", cache.cached_bytes());
        // The owner drains its list, then takes the remote stack: still within budget, and
        // the remote count goes back to zero.
        let mut out = vec![];
        // SAFETY: owner; reading its own list.
        while !unsafe { &*cache.local[c].get() }.head.is_null() {
            out.push(alloc(&cache, c));
        }
        out.push(alloc(&cache, c));
        assert_eq!(cache.remote_bytes(), 0);
        assert!(cache.local_bytes.load(Relaxed) <= LOCAL_CAP_BYTES);
        let kept = cache.cached_bytes() / size;
        assert_eq!(cache.released() as usize + kept + out.len(), n, "a block was lost or freed twice");
        for p in out {
            free_local(&cache, c, p);
        }
        assert!(cache.cached_bytes() <= LOCAL_CAP_BYTES);
    }

    struct SendPtrs(Vec<NonNull<u8>>);
    // SAFETY: the blocks are plain memory handed over to another thread.
    unsafe impl Send for SendPtrs {}

    /// Free `blocks` of class `c` to `cache` from a thread of their own.
    fn free_outside_elsewhere(cache: &std::sync::Arc<OutsideCache>, c: usize, blocks: Vec<NonNull<u8>>) {
        let (cache, blocks) = (cache.clone(), SendPtrs(blocks));
        std::thread::spawn(move || {
            let blocks = blocks;
            for p in blocks.0 {
                // SAFETY: each is an unused block of class `c` from this cache, freed once.
                unsafe { cache.free(c, p) };
            }
        })
        .join()
        .unwrap();
    }

    /// The outside cache's blocks start on a cache line; a block freed on one thread is
    /// the next spawner's, on any thread; and a spawner that finds the cache held by
    /// another gets `None` (and uses the global allocator) instead of waiting.
    #[test]
    fn outside_blocks_are_line_aligned_come_back_to_any_spawner_and_never_wait() {
        let cache = std::sync::Arc::new(OutsideCache::new());
        let c = class_of(Layout::from_size_align(300, 8).unwrap()).unwrap();
        let a = cache.try_alloc(c).unwrap();
        assert_eq!(a.as_ptr() as usize % 64, 0, "a block not on a cache line");
        assert_eq!(cache.cache.fresh_allocations(), 1);
        free_outside_elsewhere(&cache, c, vec![a]);
        let c2 = cache.clone();
        let again = std::thread::spawn(move || c2.try_alloc(c).map(|p| p.as_ptr() as usize)).join().unwrap();
        assert_eq!(again, Some(a.as_ptr() as usize), "the freed block was not reused");
        assert_eq!(cache.cache.fresh_allocations(), 1);
        let held = cache.owner.lock().unwrap();
        let c2 = cache.clone();
        let busy = std::thread::spawn(move || c2.try_alloc(c).is_none()).join().unwrap();
        assert!(busy, "a spawner got a block while another held the cache");
        drop(held);
        free_outside_elsewhere(&cache, c, vec![a]);
        // Dropping the cache frees the block (Miri checks for leaks).
    }

    /// A burst of spawns from outside (10,000 cells of the event ring's size, 3.2 MB) comes
    /// back whole, and the next burst takes no new memory: nothing went back to the
    /// allocator to be taken again page by page.
    #[test]
    fn an_outside_burst_under_the_cap_is_reused_whole() {
        let cache = std::sync::Arc::new(OutsideCache::new());
        let c = class_of(Layout::from_size_align(300, 8).unwrap()).unwrap();
        let n = if cfg!(miri) { 500 } else { 10_000 };
        for round in 0..3 {
            let blocks: Vec<_> = (0..n).map(|_| cache.try_alloc(c).unwrap()).collect();
            assert_eq!(cache.cache.fresh_allocations() as usize, n, "round {round} took new memory");
            free_outside_elsewhere(&cache, c, blocks);
            assert_eq!(cache.cached_bytes(), n * cache.cache.layout(c).size());
            assert_eq!(cache.released(), 0);
        }
    }

    /// A burst past the cap: the cache keeps at most `OUTSIDE_CAP_BYTES` in all, and every
    /// block is kept, handed out again or counted as given back to the allocator.
    #[test]
    fn an_outside_burst_over_the_cap_keeps_at_most_the_cap() {
        let cache = std::sync::Arc::new(OutsideCache::new());
        let c = CLASSES - 1;
        let size = cache.cache.layout(c).size();
        let n = OUTSIDE_CAP_BYTES / size + 500;
        let blocks: Vec<_> = (0..n).map(|_| cache.try_alloc(c).unwrap()).collect();
        free_outside_elsewhere(&cache, c, blocks);
        assert!(cache.cached_bytes() <= OUTSIDE_CAP_BYTES, "{} bytes kept", cache.cached_bytes());
        assert_eq!(cache.cached_bytes() / size + cache.released() as usize, n, "a block was lost");
        // The next burst takes the remote stacks whole into the local lists (within the
        // cap) and reuses every block before allocating.
        let again: Vec<_> = (0..n).map(|_| cache.try_alloc(c).unwrap()).collect();
        assert_eq!(cache.cache.fresh_allocations() as usize, n + cache.released() as usize);
        assert_eq!(cache.cached_bytes(), 0);
        free_outside_elsewhere(&cache, c, again);
        assert!(cache.cached_bytes() <= OUTSIDE_CAP_BYTES);
    }

    /// The total cap counts the local lists too: with most of the cap moved to the
    /// owner's lists by a take, frees past the total go back to the allocator although
    /// the remote stacks alone are far under their own cap.
    #[test]
    fn the_outside_total_cap_counts_the_local_lists() {
        let cache = std::sync::Arc::new(OutsideCache::new());
        let c = CLASSES - 1;
        let size = cache.cache.layout(c).size();
        let n = OUTSIDE_CAP_BYTES / size;
        let blocks: Vec<_> = (0..n + 3).map(|_| cache.try_alloc(c).unwrap()).collect();
        let (first, rest) = blocks.split_at(n);
        free_outside_elsewhere(&cache, c, first.to_vec());
        assert_eq!(cache.cached_bytes(), n * size, "a burst within the cap was not kept whole");
        // One allocation moves the whole remote stack to the local list.
        let one = cache.try_alloc(c).unwrap();
        assert_eq!(cache.cache.local_bytes.load(Relaxed), (n - 1) * size);
        free_outside_elsewhere(&cache, c, rest.to_vec());
        assert_eq!(cache.released(), 2, "frees past the total cap were kept");
        assert!(cache.cached_bytes() <= OUTSIDE_CAP_BYTES);
        free_outside_elsewhere(&cache, c, vec![one]);
    }

    /// A size class no longer spawned does not hold the cap for good: once a spawn of
    /// another class finds the cache full and nothing of its own kept, the stale blocks
    /// go back to the allocator, and bursts of the new class are reused as before.
    #[test]
    fn a_class_no_longer_spawned_gives_way_to_the_one_spawned_now() {
        let cache = std::sync::Arc::new(OutsideCache::new());
        let (old, new) = (CLASSES - 1, 5);
        let n_old = OUTSIDE_CAP_BYTES / cache.cache.layout(old).size();
        let blocks: Vec<_> = (0..n_old).map(|_| cache.try_alloc(old).unwrap()).collect();
        free_outside_elsewhere(&cache, old, blocks);
        let burst = if cfg!(miri) { 100 } else { 1_000 };
        // Until the old class has gone unasked for `STALE_AFTER_SPAWNS` spawns it stays,
        // and the new class's blocks go back to the allocator as they come home.
        let stale_rounds = (STALE_AFTER_SPAWNS as usize).div_ceil(burst) + 1;
        let mut fresh_before = 0;
        for round in 0..stale_rounds + 5 {
            if round == stale_rounds {
                assert!(cache.released() as usize >= n_old, "the stale class was kept");
                fresh_before = cache.cache.fresh_allocations() as usize;
            }
            let blocks: Vec<_> = (0..burst).map(|_| cache.try_alloc(new).unwrap()).collect();
            free_outside_elsewhere(&cache, new, blocks);
        }
        assert_eq!(
            cache.cache.fresh_allocations() as usize - fresh_before,
            0,
            "once the stale class was gone, the new class's bursts took fresh memory again"
        );
        assert_eq!(cache.cached_bytes(), burst * cache.cache.layout(new).size());
    }

    /// A class still in use keeps its blocks: a burst class between two rounds, while a
    /// spawn of another class (one long-lived task per round, say) finds none of its own.
    #[test]
    fn a_class_still_in_use_keeps_its_blocks() {
        let cache = std::sync::Arc::new(OutsideCache::new());
        let (burst_class, other) = (CLASSES - 1, 5);
        let n = 3 * OUTSIDE_CAP_BYTES / 4 / cache.cache.layout(burst_class).size();
        let mut held = vec![];
        for _ in 0..3 {
            let blocks: Vec<_> = (0..n).map(|_| cache.try_alloc(burst_class).unwrap()).collect();
            free_outside_elsewhere(&cache, burst_class, blocks);
            // One of another class, kept alive: its class is empty at the next round's.
            held.push(cache.try_alloc(other).unwrap());
        }
        assert_eq!(cache.released(), 0, "a burst class in use was given back");
        assert_eq!(cache.cache.fresh_allocations() as usize, n + 3, "the bursts took fresh memory again");
        free_outside_elsewhere(&cache, other, held);
    }
}

#[cfg(all(loom, test))]
mod loom_tests {
    use super::{CellCache, OutsideCache, CLASS_BYTES};
    use crate::loom::{thread, Arc};
    use crate::loom_tests::model;

    /// Task-cell recycling: two threads give blocks back (the remote stack's CAS push, under
    /// a remote budget of one block, so one of them may have to free its block to the
    /// allocator) while the owner allocates (its swap of the whole stack). No block is handed
    /// out twice, none is lost: each is in use, on a list, or counted as released, and the
    /// byte counts match the lists.
    #[test]
    fn loom_cell_cache_remote_frees_against_owner() {
        use std::ptr::NonNull;
        model(|| {
            let cache = Arc::new(CellCache::new());
            // SAFETY: (for the whole model) the model's main thread is the owner; every block
            // is of class 0 from this cache, and each is given back once.
            let (a, b) = unsafe { (cache.alloc(0), cache.alloc(0)) };
            let give_back = |p: NonNull<u8>| {
                let (cache, p) = (cache.clone(), p.as_ptr() as usize);
                thread::spawn(move || {
                    // SAFETY: as above.
                    unsafe { cache.free_remote(0, NonNull::new(p as *mut u8).unwrap()) }
                })
            };
            let (ta, tb) = (give_back(a), give_back(b));
            // SAFETY: owner.
            let x = unsafe { cache.alloc(0) };
            ta.join().unwrap();
            tb.join().unwrap();
            // SAFETY: owner.
            let (y, z) = unsafe { (cache.alloc(0), cache.alloc(0)) };
            assert!(x != y && y != z && x != z, "a block was handed out twice");
            let got = [x, y, z];
            // `a` and `b` each came back once: handed out again, still kept (on the local list
            // or the remote stack), or released because the remote budget was full. Counted,
            // not compared by address: a released block's address may come back fresh.
            let from_cache = 3 - (cache.fresh_allocations() - 2);
            let kept = (cache.cached_bytes() / CLASS_BYTES) as u32;
            assert_eq!(from_cache + kept + cache.released(), 2, "a returned block was lost or doubled");
            for p in got {
                // SAFETY: owner; unused blocks of class 0.
                unsafe { cache.free_local(0, p) };
            }
            assert!(cache.cached_bytes() <= 3 * CLASS_BYTES);
        });
    }

    /// The outside cache: a block freed on one thread while two spawners race for the
    /// cache (each only tries its lock). The two never get the same block, and the freed
    /// block is handed out again, kept, or released, exactly once.
    #[test]
    fn loom_outside_cache_spawners_race_a_free() {
        use std::ptr::NonNull;
        model(|| {
            let cache = Arc::new(OutsideCache::new());
            let a = cache.try_alloc(0).expect("nobody else holds the cache yet");
            let freer = {
                let (cache, p) = (cache.clone(), a.as_ptr() as usize);
                thread::spawn(move || {
                    // SAFETY: an unused block of class 0 from this cache, freed once.
                    unsafe { cache.free(0, NonNull::new(p as *mut u8).unwrap()) }
                })
            };
            let spawner = {
                let cache = cache.clone();
                thread::spawn(move || cache.try_alloc(0).map(|p| p.as_ptr() as usize))
            };
            let mine = cache.try_alloc(0).map(|p| p.as_ptr() as usize);
            freer.join().unwrap();
            let theirs = spawner.join().unwrap();
            if let (Some(x), Some(y)) = (mine, theirs) {
                assert_ne!(x, y, "a block was handed out twice");
            }
            let got: Vec<usize> = [mine, theirs].into_iter().flatten().collect();
            // Counted, not compared by address: a released block's address may come back
            // fresh from the allocator.
            let from_cache = got.len() as u32 + 1 - cache.cache.fresh_allocations();
            let kept = (cache.cached_bytes() / cache.cache.layout(0).size()) as u32;
            assert_eq!(from_cache + kept + cache.released(), 1, "the freed block was lost or doubled");
            for p in got {
                // SAFETY: unused blocks of class 0 from this cache, each freed once.
                unsafe { cache.free(0, NonNull::new(p as *mut u8).unwrap()) };
            }
        });
    }
}
