//! Who woke a task: the wake source this thread's wakes carry ([`SourceGuard`]).

use super::*;

pub(crate) const SRC_OUTSIDE: u8 = 0;
pub(crate) const SRC_TIMER: u8 = 1;
pub(crate) const SRC_IO: u8 = 2;
pub(crate) const SRC_TASK: u8 = 3;
pub(crate) const SRC_BLOCKING: u8 = 4;
/// Not a wake: a spawn's first queueing (the event ring's `Schedule` after a `Spawn`).
pub(crate) const SRC_SPAWN: u8 = 5;
/// Bits of a packed source below the waking task's id.
pub(crate) const SRC_BITS: u32 = 3;

/// Marks this thread's wakes as coming from `source` until dropped.
pub(crate) struct SourceGuard(u8);

impl SourceGuard {
    #[inline]
    pub(crate) fn new(source: u8) -> SourceGuard {
        SourceGuard(SOURCE.with(|s| s.replace(source)))
    }
}

impl Drop for SourceGuard {
    #[inline]
    fn drop(&mut self) {
        SOURCE.with(|s| s.set(self.0));
    }
}

/// Mark this thread (a blocking-pool thread) for its whole life.
pub(crate) fn mark_thread(source: u8) {
    SOURCE.with(|s| s.set(source));
}

/// Who is waking a task on this thread now, packed: the source kind in the low
/// [`SRC_BITS`] bits and, for a task, its id above them. The reactor's and the timer
/// wheel's wake loops name themselves; otherwise the task being polled here (a blocking
/// task counts as the pool); otherwise the thread's own mark (a pool thread), or outside.
#[inline]
pub(crate) fn wake_source() -> u64 {
    let s = SOURCE.with(|s| s.get());
    if s == SRC_TIMER || s == SRC_IO {
        return s as u64;
    }
    if let Some(t) = crate::task::id::current_task() {
        // SAFETY: the task being polled here is alive for its poll.
        let h = unsafe { t.as_ref() };
        if h.vtable.blocking {
            return SRC_BLOCKING as u64;
        }
        return SRC_TASK as u64 | h.id << SRC_BITS;
    }
    s as u64
}

// ---- The wait-for graph (read by `telemetry::deadlock`) ---------------------------------

/// Where one listed wait points in the wait-for graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum GraphWait {
    /// Another task's `JoinHandle`: the joined task's id.
    Join(u64),
    /// A sync primitive: the tag and the resource id (`sync::track`).
    Sync { tag: u8, resource: u64 },
    /// Anything else (a sleep, a socket, a label, `unknown`): something that may wake the
    /// task without any other task's help.
    Other,
}

impl WaitWords {
    /// Each listed wait's place in the wait-for graph, in order, without decoding labels
    /// or addresses (a spill slot is skipped); a wait that did not fit the list counts as
    /// [`GraphWait::Other`], since nothing says what it was.
    pub(crate) fn graph_waits(&self, mut f: impl FnMut(GraphWait)) {
        let p = PollWord::unpack(self.poll);
        for i in 0..p.used.min(SLOTS) {
            let head = self.heads[i];
            f(match head as u8 {
                W_SPILL => continue,
                W_JOIN => GraphWait::Join(self.payloads[i]),
                W_SYNC => GraphWait::Sync { tag: (head >> SYNC_TAG_SHIFT) as u8, resource: self.payloads[i] },
                _ => GraphWait::Other,
            });
        }
        if p.more > 0 {
            f(GraphWait::Other);
        }
    }
}
