//! The data model: what the update stream says about the runtime, kept for the screen.
//! An update brings the runtime's info (first on a stream), a snapshot of every worker's
//! counters, the events read since the last update and the changes to the task window;
//! [`App::apply`] folds it in: the snapshot and its rates, the sparkline histories, the
//! event log (bounded), the task rows, and what the warnings follow (open polls, slow
//! polls, self-wakes in a row, parked workers with queued work).

mod rates;

use rates::{group_rates, push, rates};
pub use rates::{GroupRates, Rates};

use crate::app::App;
use crate::warnings::SLOW_POLL_NS;
use volt_console_proto as proto;

/// Samples kept for the sparklines.
pub const HISTORY: usize = 120;

/// Events kept for the event pane and the task detail view.
pub const EVENT_LOG: usize = 20_000;
/// Stalls kept for the stalls view, as many as the server's history.
pub const STALL_LOG: usize = 64;

/// Rows of the task list the console asks the server for: a window around the selected
/// row, larger than any screen, so scrolling asks again only every `TASK_WINDOW / 4`
/// rows. The console never holds more task rows than this (plus the detail view's).
pub const TASK_WINDOW: u32 = 200;

/// Tasks followed for self-wakes. When a new task finds the map full, those with none in
/// a row are forgotten; if that frees less than a quarter, new tasks are turned away
/// until another quarter of the map's size has been, so the sweep (a pass over the whole
/// map) runs at most once per that many events.
pub(crate) const MAX_TRACKS: usize = 65_536;

/// What the server said about the task in the detail view.
#[derive(Clone, Debug, PartialEq)]
pub enum TaskHistory {
    /// Asked, no answer yet.
    Pending,
    /// Its events from the server's history, oldest first.
    Events(Vec<proto::Event>),
    /// Why there is none (the task ended, no connection, a replay).
    Unavailable(String),
}

/// What we know about one task.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskRow {
    pub task: proto::Task,
    /// Uptime when this row was last refreshed (to age `since_last_poll_ns`).
    pub seen_at_ns: u64,
}

#[derive(Default, Clone, Debug)]
pub(crate) struct TaskTrack {
    pub(crate) self_wakes_in_a_row: u64,
}

impl App {
    /// Take in one update from the stream (or a recording).
    pub fn apply(&mut self, u: proto::Update) {
        self.take_in(u, true);
    }

    /// Take in an update while the live display is paused: the figures, the task list
    /// and the event log stay as they were, but nothing the server sends only once is
    /// lost. New stalls and the counts of what was missed are kept, the events still
    /// feed the warnings (a slow poll in a pause is still flagged), and a new runtime
    /// behind the address is noticed. On resuming, the task window is asked for again
    /// (see `input`), since the rows that changed in the pause came only then.
    pub fn hold(&mut self, u: proto::Update) {
        self.take_in(u, false);
    }

    fn take_in(&mut self, mut u: proto::Update, show: bool) {
        self.updates += 1;
        // A full update (a stream's first, a snapshot) carries the newest stalls; later
        // ones carry those reported since.
        let full = u.runtime.is_some();
        if let Some(info) = u.runtime.take() {
            self.set_info(info);
        }
        self.events_missed += u.events_missed;
        // A server older than the split reports only the sum: count it as the ring's.
        let split = u.events_missed_ring + u.events_missed_cap;
        self.events_missed_ring += if split == 0 { u.events_missed } else { u.events_missed_ring };
        self.events_missed_cap += u.events_missed_cap;
        self.updates_missed += u.updates_missed;
        if show {
            self.uptime_ns = u.uptime_ns;
        }
        for e in &u.events {
            self.track_event(e, u.uptime_ns);
        }
        if show {
            for e in u.events {
                if self.events.len() == EVENT_LOG {
                    self.events.pop_front();
                }
                self.events.push_back(e);
            }
            if let Some(t) = u.tasks {
                self.apply_tasks(t, u.uptime_ns);
            }
            self.apply_groups(u.task_groups, u.uptime_ns);
            // Each update of a stream that asked carries the list whole (empty: none).
            self.resources = u.resources;
            self.resources_total = u.resources_total;
        }
        if let Some(mut s) = u.snapshot {
            if full {
                self.stalls.clear();
            }
            if !s.recent_stalls.is_empty() {
                self.stall_arrived_ns = Some(u.uptime_ns);
            }
            for st in std::mem::take(&mut s.recent_stalls) {
                // The same stall again (a stream's first update after a reconnect): keep one.
                self.stalls.retain(|o| (o.worker, o.poll, o.task_id) != (st.worker, st.poll, st.task_id));
                if self.stalls.len() == STALL_LOG {
                    self.stalls.pop_front();
                }
                self.stalls.push_back(st);
            }
            if show {
                if let Some((t0, p)) = &self.prev {
                    let dt = (u.uptime_ns.saturating_sub(*t0)) as f64 / 1e9;
                    if dt > 0.0 {
                        self.rates = rates(p, &s, dt);
                    }
                }
                push(&mut self.global_queue_history, s.global_queue_depth);
                push(&mut self.spawn_rate_history, self.rates.spawns.round() as u64);
                let parked_with_work = s.num_parked > 0 && s.global_queue_depth > 0;
                self.parked_with_work = if parked_with_work { self.parked_with_work + 1 } else { 0 };
                self.prev = Some((u.uptime_ns, s.clone()));
                self.snapshot = Some(s);
            }
        }
        let n = self.visible_len();
        if self.selected >= n {
            self.selected = n.saturating_sub(1);
        }
    }

    /// The runtime's info, from a stream's first update. Another process behind the
    /// address (a restarted server: its pid or start time differ) starts over what
    /// was kept of the old one, whose counters, clock and task ids mean nothing for
    /// the new one: the rates, the sparklines, the event log, the open and slow polls,
    /// the tasks followed for self-wakes, the task rows and the detail view.
    fn set_info(&mut self, info: proto::RuntimeInfo) {
        let another =
            self.info.as_ref().is_some_and(|old| (old.pid, old.started_unix_ns) != (info.pid, info.started_unix_ns));
        if another {
            self.prev = None;
            self.rates = Rates::default();
            self.global_queue_history.clear();
            self.spawn_rate_history.clear();
            self.events.clear();
            self.open_polls.clear();
            self.slow_polls.clear();
            self.slow_poll_arrived_ns = None;
            self.tracks.clear();
            self.tracks_refused = 0;
            self.parked_with_work = 0;
            self.tasks.clear();
            self.task_groups.clear();
            self.group_rates.clear();
            self.groups_at = None;
            self.resources.clear();
            self.resources_total = 0;
            self.detail_holds.clear();
            self.stall_arrived_ns = None;
            self.detail = None;
            self.detail_row = None;
            self.history = None;
            self.detail_histograms = None;
            self.uptime_ns = 0;
        }
        self.info = Some(info);
    }

    /// Take in the task groups (each update carries them whole; none from a runtime
    /// without task statistics), with their rates since the last update that had them.
    fn apply_groups(&mut self, groups: Vec<proto::TaskGroup>, uptime_ns: u64) {
        if groups.is_empty() {
            return;
        }
        if let Some(at) = self.groups_at {
            let dt = uptime_ns.saturating_sub(at) as f64 / 1e9;
            if dt > 0.0 {
                self.group_rates = group_rates(&self.task_groups, &groups, dt);
            }
        }
        self.groups_at = Some(uptime_ns);
        self.task_groups = groups;
    }

    /// Take in the task window's changes.
    fn apply_tasks(&mut self, t: proto::TaskChanges, uptime_ns: u64) {
        if t.full {
            self.tasks.clear();
        }
        for task in t.changed {
            if self.detail == Some(task.id) {
                self.detail_row = Some(TaskRow { task: task.clone(), seen_at_ns: uptime_ns });
            }
            self.tasks.insert(task.id, TaskRow { task, seen_at_ns: uptime_ns });
        }
        for id in t.removed {
            self.tasks.remove(&id);
        }
        if let Some(c) = t.counts {
            // A server with windows: the rows held are exactly the window.
            let view: std::collections::HashSet<u64> = t.view.iter().copied().collect();
            self.tasks.retain(|id, _| view.contains(id));
            self.task_counts = Some(c);
            self.task_matching = t.matching;
        }
    }

    /// Take in a page the server sent for a new query (`SetTaskQuery`).
    pub fn apply_page(&mut self, page: proto::TaskPage) {
        self.awaiting_page = false;
        let counts = page.counts;
        let matching = page.matching;
        let view = page.tasks.iter().map(|t| t.id).collect();
        self.apply_tasks(
            proto::TaskChanges { changed: page.tasks, full: true, counts, view, matching, ..Default::default() },
            self.uptime_ns,
        );
        self.clamp_selection();
    }

    /// Follow one event for the warnings; `now_ns` is its update's uptime.
    fn track_event(&mut self, e: &proto::Event, now_ns: u64) {
        use proto::EventKind as K;
        let worker = e.worker.unwrap_or(u32::MAX);
        match K::try_from(e.kind).unwrap_or(K::Unspecified) {
            K::PollStart => {
                self.open_polls.insert(worker, (e.task_id, e.timestamp_ns));
            }
            K::PollEnd => {
                if let Some((task, start)) = self.open_polls.remove(&worker) {
                    let took = e.timestamp_ns.saturating_sub(start);
                    if task == e.task_id && took > SLOW_POLL_NS {
                        if self.slow_polls.len() == 16 {
                            self.slow_polls.pop_front();
                        }
                        self.slow_polls.push_back((task, took));
                        self.slow_poll_arrived_ns = Some(now_ns);
                    }
                }
            }
            K::Transition => {
                if self.tracks.len() < MAX_TRACKS {
                    // Room again (tasks ended): the next time it fills, sweep first.
                    self.tracks_refused = 0;
                } else if !self.tracks.contains_key(&e.task_id) {
                    if self.tracks_refused < MAX_TRACKS / 4 && self.tracks_refused > 0 {
                        self.tracks_refused += 1;
                        return;
                    }
                    self.tracks.retain(|_, t| t.self_wakes_in_a_row > 0);
                    self.tracks_refused = 0;
                    if self.tracks.len() > MAX_TRACKS * 3 / 4 {
                        self.tracks_refused = 1;
                        return;
                    }
                }
                // RUNNING -> SCHEDULED: woken during its own poll (a yield, or a self-wake).
                let t = self.tracks.entry(e.task_id).or_default();
                if e.arg == (2 << 8 | 1) {
                    t.self_wakes_in_a_row += 1;
                } else if e.arg == (2 << 8) {
                    t.self_wakes_in_a_row = 0;
                }
            }
            K::Complete | K::Cancel | K::Panic => {
                self.tracks.remove(&e.task_id);
            }
            _ => {}
        }
    }

    /// Take in the server's answer about task `id` (ignored once its view is closed).
    pub fn apply_task(&mut self, id: u64, details: Result<proto::TaskDetails, String>) {
        if self.detail != Some(id) {
            return;
        }
        self.history = Some(match details {
            Ok(d) => {
                self.detail_histograms =
                    Some((d.poll_histogram.unwrap_or_default(), d.schedule_histogram.unwrap_or_default()));
                self.detail_holds = d.holds;
                if let Some(task) = d.task {
                    self.detail_row = Some(TaskRow { task, seen_at_ns: self.uptime_ns });
                }
                TaskHistory::Events(d.recent_events)
            }
            Err(why) => TaskHistory::Unavailable(why),
        });
    }
}

/// One task's events from the server's history (`server`, oldest first) and from this
/// console's log (`log`, oldest first), each event once: the log's events before the
/// history starts, the history, then the log's events after it. Both lists are cuts of
/// one ordered stream, so at the history's last timestamp the log's first events there
/// are the ones the history already holds (events of one worker often share a timestamp).
pub(crate) fn merge_history<'a>(
    server: &'a [proto::Event],
    log: impl Iterator<Item = &'a proto::Event>,
) -> Vec<&'a proto::Event> {
    let (first, last) = (server[0].timestamp_ns, server[server.len() - 1].timestamp_ns);
    let mut at_last = server.iter().rev().take_while(|e| e.timestamp_ns == last).count();
    let (mut before, mut after) = (Vec::new(), Vec::new());
    for e in log {
        if e.timestamp_ns < first {
            before.push(e);
        } else if e.timestamp_ns > last {
            after.push(e);
        } else if e.timestamp_ns == last {
            if at_last > 0 {
                at_last -= 1;
            } else {
                after.push(e);
            }
        }
    }
    before.extend(server);
    before.append(&mut after);
    before
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

    /// A full map of tasks that all keep waking themselves frees nothing when swept: new
    /// tasks are turned away (the map never passes its cap), and the sweep, a pass over
    /// the whole map, is not repeated for each of them.
    #[test]
    fn self_wake_tracking_stays_within_its_cap() {
        let mut app = App::new(String::from("test"));
        let events: Vec<_> = (1..=(MAX_TRACKS as u64 + 50_000)).map(self_wake).collect();
        app.apply(proto::Update { events, ..Default::default() });
        assert_eq!(app.tracks.len(), MAX_TRACKS);
        assert!(app.tracks.contains_key(&1) && !app.tracks.contains_key(&(MAX_TRACKS as u64 + 1)));
        // Once some end, new tasks find room again, and the refusals start over.
        let ends: Vec<_> = (1..=MAX_TRACKS as u64 / 2)
            .map(|id| proto::Event { kind: proto::EventKind::Complete as i32, arg: 0, ..self_wake(id) })
            .collect();
        app.apply(proto::Update { events: ends, ..Default::default() });
        let late = u64::MAX / 2;
        app.apply(proto::Update { events: vec![self_wake(late)], ..Default::default() });
        assert!(app.tracks.contains_key(&late));
        assert_eq!(app.tracks_refused, 0);
        // Filled again with tasks that have stopped waking themselves: the first new task
        // past the cap sweeps them out and gets in.
        let room = (MAX_TRACKS - app.tracks.len()) as u64;
        let calm: Vec<_> = (0..room).map(|i| proto::Event { arg: 2 << 8, ..self_wake(late + 1 + i) }).collect();
        app.apply(proto::Update { events: calm, ..Default::default() });
        assert_eq!(app.tracks.len(), MAX_TRACKS);
        let newcomer = late + 10 * MAX_TRACKS as u64;
        app.apply(proto::Update { events: vec![self_wake(newcomer)], ..Default::default() });
        assert!(app.tracks.contains_key(&newcomer), "a sweep would have made room");
        assert!(app.tracks.len() <= MAX_TRACKS);
    }
}
