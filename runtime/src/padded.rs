//! [`CachePadded`]: a value alone on its cache lines.

/// Pads to a cache line pair (the adjacent-line prefetcher moves lines in pairs), so what
/// one thread writes does not share a line with what others read: a run queue's head,
/// tail and slots; the global queue, the idle state and the remote counters, which
/// spawns and workers write; each shard of the task list.
#[repr(align(128))]
pub(crate) struct CachePadded<T>(pub(crate) T);

impl<T> std::ops::Deref for CachePadded<T> {
    type Target = T;

    #[inline(always)]
    fn deref(&self) -> &T {
        &self.0
    }
}
