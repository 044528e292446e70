//! Per-second rates between two snapshots, and the bounded sample histories of the
//! sparklines.

use super::HISTORY;
use std::collections::VecDeque;
use volt_console_proto as proto;

/// Per-second rates between the last two snapshots.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Rates {
    pub spawns: f64,
    pub polls: f64,
    pub steals: f64,
    pub parks: f64,
    /// Per worker: polls/s, steals/s, parks/s.
    pub workers: Vec<(f64, f64, f64)>,
    /// The Tokio bridge's workers' busy share (0..=1, over all of them), when both
    /// snapshots have the bridge.
    pub bridge_busy: Option<f64>,
}

pub(super) fn push(h: &mut VecDeque<u64>, v: u64) {
    if h.len() == HISTORY {
        h.pop_front();
    }
    h.push_back(v);
}

pub(super) fn rates(p: &proto::Snapshot, s: &proto::Snapshot, dt: f64) -> Rates {
    let d = |a: u64, b: u64| b.saturating_sub(a) as f64 / dt;
    let sum = |s: &proto::Snapshot, f: fn(&proto::WorkerSnapshot) -> u64| s.workers.iter().map(f).sum::<u64>();
    Rates {
        spawns: d(p.tasks_spawned, s.tasks_spawned),
        polls: d(sum(p, |w| w.tasks_polled), sum(s, |w| w.tasks_polled)),
        steals: d(sum(p, |w| w.tasks_stolen), sum(s, |w| w.tasks_stolen)),
        parks: d(sum(p, |w| w.times_parked), sum(s, |w| w.times_parked)),
        workers: s
            .workers
            .iter()
            .map(|w| match p.workers.iter().find(|o| o.index == w.index) {
                Some(o) => (
                    d(o.tasks_polled, w.tasks_polled),
                    d(o.tasks_stolen, w.tasks_stolen),
                    d(o.times_parked, w.times_parked),
                ),
                None => (0.0, 0.0, 0.0),
            })
            .collect(),
        bridge_busy: match (&p.bridge, &s.bridge) {
            (Some(a), Some(b)) if b.workers > 0 => {
                Some(b.busy_ns.saturating_sub(a.busy_ns) as f64 / 1e9 / dt / b.workers as f64)
            }
            _ => None,
        },
    }
}
