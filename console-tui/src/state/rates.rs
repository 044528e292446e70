//! Per-second rates between two snapshots, and the bounded sample histories of the
//! sparklines.

use std::collections::{HashMap, VecDeque};
use volt_console_proto as proto;

/// Samples kept for the sparklines.
pub const HISTORY: usize = 120;

/// Per-second rates between the last two snapshots.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Rates {
    pub spawns: f64,
    pub polls: f64,
    pub steals: f64,
    pub parks: f64,
    /// Per worker: polls/s, steals/s, parks/s.
    pub workers: Vec<(f64, f64, f64)>,
    /// Per worker: the share of the time it spent polling tasks (0..=1).
    pub worker_busy: Vec<f64>,
    /// The Tokio bridge's workers' busy share (0..=1, over all of them), when both
    /// snapshots have the bridge.
    pub bridge_busy: Option<f64>,
}

/// One task group's rates between two updates: polls/s, and the share of one worker's
/// time its polls took (above 1 when they took more than one worker's time).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GroupRates {
    pub polls: f64,
    pub busy: f64,
}

/// Each group's rates between the groups `p` and `s`, `dt` seconds apart, by name (a
/// group new in `s` has none yet).
pub(super) fn group_rates(p: &[proto::TaskGroup], s: &[proto::TaskGroup], dt: f64) -> HashMap<String, GroupRates> {
    let before: HashMap<&str, &proto::TaskGroup> = p.iter().map(|g| (g.name.as_str(), g)).collect();
    s.iter()
        .filter_map(|g| {
            let o = before.get(g.name.as_str())?;
            let d = |a: u64, b: u64| b.saturating_sub(a) as f64 / dt;
            Some((g.name.clone(), GroupRates { polls: d(o.polls, g.polls), busy: d(o.busy_ns, g.busy_ns) / 1e9 }))
        })
        .collect()
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
        worker_busy: s
            .workers
            .iter()
            .map(|w| match p.workers.iter().find(|o| o.index == w.index) {
                Some(o) => (d(o.busy_ns, w.busy_ns) / 1e9).clamp(0.0, 1.0),
                None => 0.0,
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
