use super::outside::STALE_AFTER_SPAWNS;
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
    let n = if cfg!(miri) { 100 } else { 10_000 };
    assert!(n * cache.cache.layout(c).size() <= OUTSIDE_CAP_BYTES, "the burst is not under the cap");
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
    let n = OUTSIDE_CAP_BYTES / size + if cfg!(miri) { 50 } else { 500 };
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
