//! The reader: [`EventCursor`] drains every ring from where it last stopped and merges
//! the records by timestamp (ties: by ring, then position, so one worker's records keep
//! their order), putting folded poll starts back just before the record that carries
//! them and expanding compound records (see the `events` module doc).

use super::{Event, RingCursor};
use crate::runtime::handle::Shared;
#[cfg(doc)]
use crate::telemetry::Telemetry;
use std::sync::Arc;

/// A reader of the event ring; see [`Telemetry::events`].
pub struct EventCursor {
    shared: Arc<Shared>,
    rings: Vec<RingCursor>,
    buffered: std::collections::VecDeque<Event>,
    records: u64,
}

impl EventCursor {
    /// A cursor starting at the oldest record each ring still holds (see
    /// [`Telemetry::events`]).
    pub(crate) fn new(shared: Arc<Shared>) -> EventCursor {
        let rings = match &shared.recorder {
            Some(r) => r
                .rings
                .iter()
                .map(|ring| RingCursor { next: ring.written().saturating_sub(ring.capacity()), dropped: 0 })
                .collect(),
            None => Vec::new(),
        };
        EventCursor { shared, rings, buffered: Default::default(), records: 0 }
    }
}

impl EventCursor {
    /// The events recorded since the previous call (on the first call: everything the
    /// rings still hold), in timestamp order. Events from one worker keep their order.
    pub fn read(&mut self) -> Vec<Event> {
        let mut out: Vec<Event> = self.buffered.drain(..).collect();
        let Some(rec) = &self.shared.recorder else { return out };
        let mut raw = Vec::new();
        let mut tagged = Vec::new();
        for (i, (cur, ring)) in self.rings.iter_mut().zip(rec.rings.iter()).enumerate() {
            raw.clear();
            cur.drain(ring, &mut raw);
            self.records += raw.len() as u64;
            for &(r, pos) in raw.iter() {
                // A poll start folded into a record sorts just before that record.
                if let Some(start) = super::implicit_poll_start(&r) {
                    tagged.push((start.ts, i, pos, 0, start));
                }
                tagged.push((r.ts, i, pos, 1, r));
            }
        }
        tagged.sort_unstable_by_key(|&(ts, ring, pos, sub, _)| (ts, ring, pos, sub));
        for (_, _, _, _, r) in tagged {
            super::decode(r, rec.clock.since_start_ns(r.ts), &mut out);
        }
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
