//! [`OutsideCache`]: the cell cache of the threads outside the runtime.

use super::*;

/// The cache for cells spawned from threads outside the runtime (a main thread, a
/// thread of the caller's own, a worker of another runtime). A worker's cache has one
/// owner, its thread; here the owner is whichever such thread holds `owner`, which a
/// spawner only tries to take: if another spawner has it, this spawn takes its memory
/// from the global allocator instead (and frees it there), so no spawner ever waits on
/// another for memory. Every free, from any thread, goes to the remote stacks.
pub(crate) struct OutsideCache {
    pub(super) owner: crate::loom::Mutex<SpawnClock>,
    pub(super) cache: CellCache,
}

/// The outside cache's spawns so far, and the spawn at which each size class was last
/// asked for: a class not asked for in [`STALE_AFTER_SPAWNS`] spawns is stale.
pub(super) struct SpawnClock {
    pub(super) spawns: u64,
    pub(super) last_use: [u64; CLASSES],
}

/// Spawns from outside after which a size class nobody asked for counts as stale.
#[cfg(all(not(loom), not(miri)))]
pub(super) const STALE_AFTER_SPAWNS: u64 = 1024;
/// Under Miri, fewer, so that its run of the staleness test stays short.
#[cfg(all(not(loom), miri))]
pub(super) const STALE_AFTER_SPAWNS: u64 = 128;
#[cfg(loom)]
pub(super) const STALE_AFTER_SPAWNS: u64 = 1;

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
