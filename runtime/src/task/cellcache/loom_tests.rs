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
