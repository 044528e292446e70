//! The data model: what the update stream says about the runtime, kept for the screen.
//! An update brings the runtime's info (first on a stream), a snapshot of every worker's
//! counters, the events read since the last update and the changes to the task window;
//! [`Model::apply`] folds it in: the snapshot and its rates, the sparkline histories, the
//! event log (bounded), the task rows, and what the warnings follow ([`Watch`]). The
//! model knows nothing of the screen, the keys or the connection.

mod rates;
mod tasks;
mod watch;

use rates::{group_rates, push, rates};
pub use rates::{GroupRates, Rates, HISTORY};
use tasks::merge_history;
pub use tasks::{TaskDetail, TaskHistory, TaskRow, TASK_WINDOW};
pub use watch::{OpenPoll, SelfWakes, SlowPoll, Watch, SLOW_POLL_NS};

use std::collections::{BTreeMap, HashMap, VecDeque};
use volt_console_proto as proto;

/// Events kept for the event pane and the task detail view.
pub const EVENT_LOG: usize = 20_000;
/// Stalls kept for the stalls view, as many as the server's history.
pub const STALL_LOG: usize = 64;

/// What this console missed, since it started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Missed {
    /// Events missed (the sum of the next two).
    pub events: u64,
    /// Records the event ring overwrote before the server read them.
    pub events_ring: u64,
    /// Events the server left out of this console's updates for its per-update cap.
    pub events_cap: u64,
    /// Updates the server skipped because this console read too slowly.
    pub updates: u64,
}

/// Everything the update stream said that the console keeps.
#[derive(Clone, Debug, Default)]
pub struct Model {
    pub info: Option<proto::RuntimeInfo>,
    pub snapshot: Option<proto::Snapshot>,
    /// The snapshot before, with its uptime: the rates are the change since.
    prev: Option<(u64, proto::Snapshot)>,
    pub uptime_ns: u64,
    pub rates: Rates,
    pub global_queue_history: VecDeque<u64>,
    pub spawn_rate_history: VecDeque<u64>,
    pub events: VecDeque<proto::Event>,
    /// The stalls that ended, as the server sent them, oldest first (at most
    /// [`STALL_LOG`]). The polls stalled now are in `snapshot.ongoing_stalls`.
    pub stalls: VecDeque<proto::Stall>,
    /// The runtime's uptime when the newest of them arrived: the header warns about it
    /// for a while after.
    pub stall_arrived_ns: Option<u64>,
    pub missed: Missed,
    /// Updates taken in.
    pub updates: u64,
    /// The rows of the task window the server sent (at most [`TASK_WINDOW`]).
    pub tasks: BTreeMap<u64, TaskRow>,
    /// All live tasks by state, from the server (`None` from a server without windows).
    pub task_counts: Option<proto::TaskCounts>,
    /// Tasks that pass the filters, from the server: the list's length.
    pub task_matching: u64,
    /// The task groups, as the last update had them (the server sends them all each
    /// time; none without task statistics).
    pub task_groups: Vec<proto::TaskGroup>,
    /// Each group's rates since the update before, by name.
    pub group_rates: HashMap<String, GroupRates>,
    /// The uptime of the update the groups came in.
    groups_at: Option<u64>,
    /// The sync primitives tasks have waited on, by id, as the last update had them (at
    /// most the server's 500), and how many there are.
    pub resources: Vec<proto::Resource>,
    pub resources_total: u64,
    /// The task the detail view follows.
    pub detail: Option<TaskDetail>,
    /// What the warnings follow in the stream.
    pub watch: Watch,
}

impl Model {
    /// Take in one update from the stream (or a recording).
    pub fn apply(&mut self, u: proto::Update) {
        self.take_in(u, true);
    }

    /// Take in an update while the live display is paused: the figures, the task list
    /// and the event log stay as they were, but nothing the server sends only once is
    /// lost. New stalls and the counts of what was missed are kept, the events still
    /// feed the warnings (a slow poll in a pause is still flagged), and a new runtime
    /// behind the address is noticed. On resuming, the task window is asked for again,
    /// since the rows that changed in the pause came only then.
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
        self.missed.events += u.events_missed;
        // A server older than the split reports only the sum: count it as the ring's.
        let split = u.events_missed_ring + u.events_missed_cap;
        self.missed.events_ring += if split == 0 { u.events_missed } else { u.events_missed_ring };
        self.missed.events_cap += u.events_missed_cap;
        self.missed.updates += u.updates_missed;
        if show {
            self.uptime_ns = u.uptime_ns;
        }
        for e in &u.events {
            self.watch.event(e, u.uptime_ns);
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
                self.watch.snapshot(&s);
                self.prev = Some((u.uptime_ns, s.clone()));
                self.snapshot = Some(s);
            }
        }
    }

    /// The runtime's info, from a stream's first update. Another process behind the
    /// address (a restarted server: its pid or start time differ) starts over what
    /// was kept of the old one, whose counters, clock and task ids mean nothing for
    /// the new one: the rates, the sparklines, the event log, what the warnings follow,
    /// the task rows, the groups, the resources and the detail view.
    fn set_info(&mut self, info: proto::RuntimeInfo) {
        let another =
            self.info.as_ref().is_some_and(|old| (old.pid, old.started_unix_ns) != (info.pid, info.started_unix_ns));
        if another {
            self.prev = None;
            self.rates = Rates::default();
            self.global_queue_history.clear();
            self.spawn_rate_history.clear();
            self.events.clear();
            self.watch = Watch::default();
            self.tasks.clear();
            self.task_groups.clear();
            self.group_rates.clear();
            self.groups_at = None;
            self.resources.clear();
            self.resources_total = 0;
            self.stall_arrived_ns = None;
            self.detail = None;
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
            if let Some(d) = self.detail.as_mut().filter(|d| d.id == task.id) {
                d.row = Some(TaskRow { task: task.clone(), seen_at_ns: uptime_ns });
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
        let counts = page.counts;
        let matching = page.matching;
        let view = page.tasks.iter().map(|t| t.id).collect();
        self.apply_tasks(
            proto::TaskChanges { changed: page.tasks, full: true, counts, view, matching, ..Default::default() },
            self.uptime_ns,
        );
    }

    /// Follow task `id` in the detail view (its row from the window, if it is there),
    /// forgetting the one followed before.
    pub fn open_detail(&mut self, id: u64) {
        self.detail = Some(TaskDetail::new(id, self.tasks.get(&id).cloned()));
    }

    /// Stop following a task.
    pub fn close_detail(&mut self) {
        self.detail = None;
    }

    /// The task the detail view follows, if any.
    pub fn detail_id(&self) -> Option<u64> {
        self.detail.as_ref().map(|d| d.id)
    }

    /// Note that the server was asked about task `id` (or, with `Err`, that it cannot
    /// be), if the detail view still follows it.
    pub fn history_requested(&mut self, id: u64, can_ask: Result<(), String>) {
        if let Some(d) = self.detail.as_mut().filter(|d| d.id == id) {
            d.requested(can_ask);
        }
    }

    /// Take in the server's answer about task `id` (ignored once its view is closed).
    pub fn apply_task(&mut self, id: u64, details: Result<proto::TaskDetails, String>) {
        let uptime_ns = self.uptime_ns;
        if let Some(d) = self.detail.as_mut().filter(|d| d.id == id) {
            d.answer(details, uptime_ns);
        }
    }

    /// The task shown in the detail view, with its events: the server's history of it
    /// (which reaches back before this console connected), then the newer ones from
    /// this console's log, each once, oldest first.
    pub fn detail_task(&self) -> Option<(&TaskRow, Vec<&proto::Event>)> {
        let detail = self.detail.as_ref()?;
        let id = detail.id;
        // The freshest copy: the window's updates and the server's answer both refresh it.
        let row = detail.row.as_ref().filter(|r| r.task.id == id).or(self.tasks.get(&id))?;
        let log = self.events.iter().filter(|e| e.task_id == id);
        let server = match &detail.history {
            Some(TaskHistory::Events(h)) if !h.is_empty() => h,
            _ => return Some((row, log.collect())),
        };
        Some((row, merge_history(server, log)))
    }

    /// ` (name)` for task `id` if its name is known here, else nothing.
    pub fn task_name(&self, id: u64) -> String {
        let detail_row = self.detail.as_ref().and_then(|d| d.row.as_ref());
        match self.tasks.get(&id).or(detail_row.filter(|r| r.task.id == id)).and_then(|r| r.task.name.as_deref()) {
            Some(n) => format!(" ({n})"),
            None => String::new(),
        }
    }

    /// The deadlocks the server's latest reading found (from the last snapshot).
    pub fn deadlocks(&self) -> &[proto::Deadlock] {
        self.snapshot.as_ref().map_or(&[][..], |s| &s.deadlocks[..])
    }

    /// The polls stalled now (from the last snapshot).
    pub fn ongoing_stalls(&self) -> &[proto::Stall] {
        self.snapshot.as_ref().map_or(&[][..], |s| &s.ongoing_stalls[..])
    }

    /// The stalls view's rows: the polls stalled now, then the ended stalls, newest first.
    pub fn stall_rows(&self) -> Vec<&proto::Stall> {
        self.ongoing_stalls().iter().chain(self.stalls.iter().rev()).collect()
    }
}
