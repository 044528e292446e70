//! What the console follows in the event stream for the warnings, beyond what the
//! server reports: the poll open on each worker, the slow polls seen, each task's
//! self-wakes in a row, and how many updates in a row found a worker parked while the
//! global queue held work.

use std::collections::{HashMap, VecDeque};
use volt_console_proto as proto;

/// A poll longer than this blocks a worker: flagged in the header.
pub const SLOW_POLL_NS: u64 = 10_000_000;

/// Slow polls kept, newest last.
const SLOW_POLLS_KEPT: usize = 16;

/// Tasks followed for self-wakes. When a new task finds the map full, those with none in
/// a row are forgotten; if that frees less than a quarter, new tasks are turned away
/// until another quarter of the map's size has been, so the sweep (a pass over the whole
/// map) runs at most once per that many events.
pub(crate) const MAX_TRACKS: usize = 65_536;

/// A poll under way on a worker, as its start event said.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpenPoll {
    /// The worker (`u32::MAX`: the event named none).
    pub worker: u32,
    pub task: u64,
    pub start_ns: u64,
}

/// A poll that took longer than [`SLOW_POLL_NS`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlowPoll {
    pub task: u64,
    pub took_ns: u64,
    /// The runtime's uptime in the update that brought its end.
    pub seen_at_ns: u64,
}

/// How many times in a row a task was woken during its own poll.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SelfWakes {
    pub task: u64,
    pub in_a_row: u64,
}

/// What the event stream and the snapshots showed that the warnings look at.
#[derive(Clone, Debug, Default)]
pub struct Watch {
    /// The poll open on each worker.
    pub open_polls: HashMap<u32, OpenPoll>,
    /// Slow polls seen, newest last (at most 16).
    pub slow_polls: VecDeque<SlowPoll>,
    /// Self-wakes in a row, by task (at most [`MAX_TRACKS`] tasks).
    tracks: HashMap<u64, u64>,
    /// New tasks turned away from a full `tracks` since its last sweep.
    tracks_refused: usize,
    /// Updates in a row with a parked worker and a non-empty global queue.
    pub parked_with_work: u32,
}

impl Watch {
    /// Follow one event; `now_ns` is its update's uptime.
    pub fn event(&mut self, e: &proto::Event, now_ns: u64) {
        use proto::EventKind as K;
        let worker = e.worker.unwrap_or(u32::MAX);
        match K::try_from(e.kind).unwrap_or(K::Unspecified) {
            K::PollStart => {
                self.open_polls.insert(worker, OpenPoll { worker, task: e.task_id, start_ns: e.timestamp_ns });
            }
            K::PollEnd => {
                if let Some(open) = self.open_polls.remove(&worker) {
                    let took = e.timestamp_ns.saturating_sub(open.start_ns);
                    if open.task == e.task_id && took > SLOW_POLL_NS {
                        if self.slow_polls.len() == SLOW_POLLS_KEPT {
                            self.slow_polls.pop_front();
                        }
                        self.slow_polls.push_back(SlowPoll { task: open.task, took_ns: took, seen_at_ns: now_ns });
                    }
                }
            }
            K::Transition => self.transition(e),
            K::Complete | K::Cancel | K::Panic => {
                self.tracks.remove(&e.task_id);
            }
            _ => {}
        }
    }

    /// A task's state changed: RUNNING -> SCHEDULED is a wake during its own poll (a
    /// yield, or a self-wake); RUNNING -> IDLE ends the run of them.
    fn transition(&mut self, e: &proto::Event) {
        if self.tracks.len() < MAX_TRACKS {
            // Room again (tasks ended): the next time it fills, sweep first.
            self.tracks_refused = 0;
        } else if !self.tracks.contains_key(&e.task_id) {
            if self.tracks_refused < MAX_TRACKS / 4 && self.tracks_refused > 0 {
                self.tracks_refused += 1;
                return;
            }
            self.tracks.retain(|_, in_a_row| *in_a_row > 0);
            self.tracks_refused = 0;
            if self.tracks.len() > MAX_TRACKS * 3 / 4 {
                self.tracks_refused = 1;
                return;
            }
        }
        let in_a_row = self.tracks.entry(e.task_id).or_default();
        if e.arg == (2 << 8 | 1) {
            *in_a_row += 1;
        } else if e.arg == (2 << 8) {
            *in_a_row = 0;
        }
    }

    /// Take in a snapshot shown on screen: are workers parked while work waits?
    pub fn snapshot(&mut self, s: &proto::Snapshot) {
        let parked_with_work = s.num_parked > 0 && s.global_queue_depth > 0;
        self.parked_with_work = if parked_with_work { self.parked_with_work + 1 } else { 0 };
    }

    /// Each followed task's self-wakes in a row, in no particular order.
    pub fn self_wakes(&self) -> impl Iterator<Item = SelfWakes> + '_ {
        self.tracks.iter().map(|(&task, &in_a_row)| SelfWakes { task, in_a_row })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn self_wake(task_id: u64) -> proto::Event {
        proto::Event {
            timestamp_ns: task_id,
            worker: Some(0),
            kind: proto::EventKind::Transition as i32,
            task_id,
            arg: 2 << 8 | 1,
        }
    }

    fn take(w: &mut Watch, events: impl IntoIterator<Item = proto::Event>) {
        for e in events {
            w.event(&e, 0);
        }
    }

    /// A full map of tasks that all keep waking themselves frees nothing when swept: new
    /// tasks are turned away (the map never passes its cap), and the sweep, a pass over
    /// the whole map, is not repeated for each of them.
    #[test]
    fn self_wake_tracking_stays_within_its_cap() {
        let mut w = Watch::default();
        take(&mut w, (1..=(MAX_TRACKS as u64 + 50_000)).map(self_wake));
        assert_eq!(w.tracks.len(), MAX_TRACKS);
        assert!(w.tracks.contains_key(&1) && !w.tracks.contains_key(&(MAX_TRACKS as u64 + 1)));
        // Once some end, new tasks find room again, and the refusals start over.
        let ends = (1..=MAX_TRACKS as u64 / 2).map(|id| proto::Event {
            kind: proto::EventKind::Complete as i32,
            arg: 0,
            ..self_wake(id)
        });
        take(&mut w, ends);
        let late = u64::MAX / 2;
        take(&mut w, [self_wake(late)]);
        assert!(w.tracks.contains_key(&late));
        assert_eq!(w.tracks_refused, 0);
        // Filled again with tasks that have stopped waking themselves: the first new task
        // past the cap sweeps them out and gets in.
        let room = (MAX_TRACKS - w.tracks.len()) as u64;
        take(&mut w, (0..room).map(|i| proto::Event { arg: 2 << 8, ..self_wake(late + 1 + i) }));
        assert_eq!(w.tracks.len(), MAX_TRACKS);
        let newcomer = late + 10 * MAX_TRACKS as u64;
        take(&mut w, [self_wake(newcomer)]);
        assert!(w.tracks.contains_key(&newcomer), "a sweep would have made room");
        assert!(w.tracks.len() <= MAX_TRACKS);
    }
}
