//! Sampled schedule latency without the event ring.
//!
//! With the event ring on, every task's wake time is in its statistics, and every poll
//! feeds the schedule-latency histogram. Without it there is nowhere per task to keep a
//! wake time (a header field would cost every task), so one wake in
//! [`SCHEDULE_SAMPLE_EVERY`] (counted per thread) is sampled: the waker stores the task's
//! id and the time in a small table ([`ScheduleSamples`], slot `id % 64`), and marks the
//! task's state word (`State::set_sampled`) before it queues the task. The poll that
//! follows sees the mark in the transition to RUNNING it does anyway, so an unsampled
//! poll pays nothing; a sampled one looks its slot up and records the wait unless another
//! sampled wake took the slot meanwhile (that sample is dropped).

use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;

/// One wake in this many is sampled for the schedule-latency histogram when the event
/// ring is off (as Go's runtime samples one in eight).
pub(crate) const SCHEDULE_SAMPLE_EVERY: u32 = 8;

/// The sampled wakes waiting for their poll (see "Sampled schedule latency").
pub(crate) struct ScheduleSamples {
    slots: Box<[SampleSlot]>,
}

/// One sampled wake: a task id (0: none, or being rewritten) and its wake time. The id
/// brackets the time as a sequence lock: a writer clears it, writes the time, then sets
/// it; a reader keeps the time only if it saw the same id before and after.
#[derive(Default)]
struct SampleSlot {
    id: AtomicU64,
    ts: AtomicU64,
}

impl ScheduleSamples {
    const SLOTS: usize = 64;

    pub(crate) fn new() -> ScheduleSamples {
        ScheduleSamples { slots: (0..Self::SLOTS).map(|_| SampleSlot::default()).collect() }
    }

    pub(crate) fn put(&self, id: u64, ts: u64) {
        let s = &self.slots[id as usize % Self::SLOTS];
        s.id.store(0, Relaxed);
        std::sync::atomic::fence(std::sync::atomic::Ordering::Release);
        s.ts.store(ts, Relaxed);
        s.id.store(id, std::sync::atomic::Ordering::Release);
    }

    /// The wake time stored for `id`, if its slot still holds it.
    pub(crate) fn take(&self, id: u64) -> Option<u64> {
        let s = &self.slots[id as usize % Self::SLOTS];
        if s.id.load(std::sync::atomic::Ordering::Acquire) != id {
            return None;
        }
        let ts = s.ts.load(Relaxed);
        std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
        (s.id.load(Relaxed) == id).then_some(ts)
    }
}

thread_local! {
    /// Wakes made on this thread, for sampling one in [`SCHEDULE_SAMPLE_EVERY`].
    pub(crate) static WAKES: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}
