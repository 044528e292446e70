//! The reader: [`EventCursor`] drains every ring from where it last stopped and merges
//! the records by timestamp (ties: by ring, then position, so one worker's records keep
//! their order), putting folded poll starts back just before the record that carries
//! them and expanding compound records (see the `events` module doc).
//!
//! # Merging, not sorting
//! The console's publisher reads every ring at each publish (four times a second by
//! default), up to a full ring per worker each time. A worker writes its ring in its own
//! clock order, so each ring's records come out already sorted, and the reader merges
//! the rings (a heap of one head per ring: n log k for n records in k rings, and the
//! heap is touched only where the rings take turns) instead of sorting everything,
//! which was most of the publisher's time under load. A ring whose records are not in
//! order (the shared ring, which several threads write, a worker's ring after a blocking
//! join handed it to another thread, or a leased ring that changed hands) is sorted on
//! its own first. Order across reads is by ring, not by time: a thread outside the
//! runtime that moves from the shared ring to a leased one (one came free) can have a
//! later record read before an earlier one that a stalled writer on the shared ring
//! held back, to come out in the next read. The scratch vectors stay with the cursor (at
//! most two entries per slot of its ring each), so a steady reader's allocations are its
//! output and a heap of one entry per ring.

use super::{Event, Raw, RingCursor};
use crate::telemetry::metrics::Metrics;
#[cfg(doc)]
use crate::telemetry::Telemetry;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;

/// A reader of the event ring; see [`Telemetry::events`].
pub struct EventCursor {
    metrics: Arc<Metrics>,
    rings: Vec<RingCursor>,
    buffered: std::collections::VecDeque<Event>,
    records: u64,
    /// Scratch for one ring's drain.
    raw: Vec<(Raw, u64)>,
    /// Scratch: each ring's records of this read, poll starts expanded, in merge order.
    runs: Vec<Vec<Tagged>>,
}

/// One record in a ring's run, with its merge key: timestamp, position in its ring, and
/// 0 for a poll start folded into the record at that position (it goes first), else 1.
#[derive(Clone, Copy)]
struct Tagged {
    ts: u64,
    pos: u64,
    sub: u8,
    raw: Raw,
}

impl Tagged {
    /// The merge key within one ring.
    fn key(&self) -> (u64, u64, u8) {
        (self.ts, self.pos, self.sub)
    }
}

impl EventCursor {
    /// A cursor starting at the oldest record each ring still holds (see
    /// [`Telemetry::events`]).
    pub(crate) fn new(metrics: Arc<Metrics>) -> EventCursor {
        let rings = match &metrics.recorder {
            Some(r) => r
                .rings
                .iter()
                .map(|ring| RingCursor { next: ring.written().saturating_sub(ring.capacity()), dropped: 0 })
                .collect(),
            None => Vec::new(),
        };
        let runs = rings.iter().map(|_| Vec::new()).collect();
        EventCursor { metrics, rings, buffered: Default::default(), records: 0, raw: Vec::new(), runs }
    }
}

impl EventCursor {
    /// The events recorded since the previous call (on the first call: everything the
    /// rings still hold), in timestamp order. Events from one worker keep their order.
    pub fn read(&mut self) -> Vec<Event> {
        let mut out: Vec<Event> = self.buffered.drain(..).collect();
        let Some(rec) = &self.metrics.recorder else { return out };
        let mut total = 0;
        for ((cur, ring), run) in self.rings.iter_mut().zip(rec.rings.iter()).zip(self.runs.iter_mut()) {
            self.raw.clear();
            run.clear();
            cur.drain(ring, &mut self.raw);
            self.records += self.raw.len() as u64;
            for &(r, pos) in self.raw.iter() {
                // A poll start folded into a record sorts just before that record.
                if let Some(start) = super::implicit_poll_start(&r) {
                    run.push(Tagged { ts: start.ts, pos, sub: 0, raw: start });
                }
                run.push(Tagged { ts: r.ts, pos, sub: 1, raw: r });
            }
            total += run.len();
        }
        out.reserve(total + total / 4);
        merge_runs(&mut self.runs, |t| super::decode(t.raw, rec.clock.since_start_ns(t.raw.ts), &mut out));
        out
    }

    /// Records this cursor missed: overwritten after it was created and before it read
    /// them (or, rarely, given up by a writer on the shared remote ring). Each cursor
    /// counts its own: a reader that keeps up misses nothing, however many records the
    /// ring overwrites after it has read them (`Snapshot::events_overwritten`).
    /// (A record is one ring slot; a spawn or a poll's end is one record that reads out as
    /// two or three events, so compare this with [`EventCursor::records_read`] and
    /// `Snapshot::events_recorded`, which count records too.)
    pub fn dropped(&self) -> u64 {
        self.rings.iter().map(|r| r.dropped).sum()
    }

    /// Records this cursor has read so far.
    pub fn records_read(&self) -> u64 {
        self.records
    }
}

/// Calls `emit` for every record of `runs` in the order of one sort of them all by
/// (timestamp, ring, position, start first), where a ring is its index in `runs`. A run
/// out of its own order is sorted first; the rest are merged (see "Merging, not
/// sorting"). The heap holds each unfinished run's next key; the run taken from the top
/// gives records until its next one would come after the new top, then goes back in.
fn merge_runs(runs: &mut [Vec<Tagged>], mut emit: impl FnMut(&Tagged)) {
    for run in runs.iter_mut() {
        if !run.is_sorted_by_key(Tagged::key) {
            run.sort_unstable_by_key(Tagged::key);
        }
    }
    let key = |i: usize, t: &Tagged| (t.ts, i, t.pos, t.sub);
    let mut next = vec![0usize; runs.len()];
    let mut heap: BinaryHeap<_> =
        runs.iter().enumerate().filter_map(|(i, r)| r.first().map(|t| Reverse(key(i, t)))).collect();
    while let Some(Reverse((_, i, _, _))) = heap.pop() {
        let limit = heap.peek().map(|r| r.0);
        let run = &runs[i];
        loop {
            emit(&run[next[i]]);
            next[i] += 1;
            let Some(n) = run.get(next[i]) else { break };
            if limit.is_some_and(|l| l < key(i, n)) {
                heap.push(Reverse(key(i, n)));
                break;
            }
        }
    }
}

/// Yields the events available now; after `None`, more may come later.
impl Iterator for EventCursor {
    type Item = Event;
    fn next(&mut self) -> Option<Event> {
        if self.buffered.is_empty() {
            let batch = self.read();
            self.buffered.extend(batch);
        }
        self.buffered.pop_front()
    }
}

impl std::fmt::Debug for EventCursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventCursor").field("dropped", &self.dropped()).finish()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::scheduler::rand::FastRand;
    use crate::telemetry::events::meta;
    use crate::telemetry::EventKind;

    /// The scheduler's seeded generator, so the cases repeat.
    struct Rng(FastRand);
    impl Rng {
        fn below(&mut self, n: u64) -> u64 {
            u64::from(self.0.fastrand_n(n as u32))
        }
    }

    /// `rings` runs of up to `len` records, timestamps from a range of `spread` (so ties
    /// across and within runs are common); each run in its own order unless `shuffled`
    /// picks it, and some poll starts folded in (sub 0 just before their record).
    fn runs(rng: &mut Rng, rings: usize, len: u64, spread: u64, shuffled: u64) -> Vec<Vec<Tagged>> {
        (0..rings)
            .map(|i| {
                let raw = |ts| Raw { ts, task: i as u64, arg: 0, meta: meta(EventKind::PollEnd, Some(i)) };
                let mut ts = rng.below(spread);
                let mut run = Vec::new();
                for pos in 0..rng.below(len + 1) {
                    ts += rng.below(spread / 8 + 1);
                    if rng.below(4) == 0 {
                        run.push(Tagged { ts: ts.saturating_sub(rng.below(3)), pos, sub: 0, raw: raw(ts) });
                    }
                    run.push(Tagged { ts, pos, sub: 1, raw: raw(ts) });
                }
                if rng.below(shuffled.max(1)) == 0 && shuffled > 0 {
                    for k in (1..run.len()).rev() {
                        run.swap(k, rng.below(k as u64 + 1) as usize);
                    }
                }
                run
            })
            .collect()
    }

    /// The merge gives exactly what one sort of everything gave (the reader's order
    /// before the merge), with nothing lost or repeated: for one ring and many (past a
    /// heap of three levels), empty runs, ties, and runs out of order (the shared ring).
    #[test]
    fn the_merge_gives_the_order_of_one_sort() {
        let mut rng = Rng(FastRand::new(0x9e37_79b9_7f4a_7c15));
        let cases: &[(usize, u64, u64, u64)] =
            &[(1, 50, 100, 0), (2, 200, 10, 0), (3, 300, 1_000, 3), (5, 40, 4, 2), (9, 80, 50, 0), (70, 20, 30, 5)];
        for &(rings, len, spread, shuffled) in cases {
            for _ in 0..if cfg!(miri) { 2 } else { 40 } {
                let mut runs = runs(&mut rng, rings, len, spread, shuffled);
                let mut expected: Vec<_> =
                    runs.iter().enumerate().flat_map(|(i, r)| r.iter().map(move |t| (t.ts, i, t.pos, t.sub))).collect();
                expected.sort_unstable();
                let mut got = Vec::new();
                merge_runs(&mut runs, |t| got.push((t.ts, (t.raw.meta >> 8 & 0xffff) as usize, t.pos, t.sub)));
                assert_eq!(got, expected, "{rings} rings of up to {len}, spread {spread}");
            }
        }
    }
}
