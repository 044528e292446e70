//! The dashboard's state as one value, [`App`]: the data model the update stream builds
//! (see [`crate::state`]) next to the view state the keys move (the screen, the
//! selection, the sort and filters, the detail view, pause and help). The pieces that act
//! on it live in their own modules: [`crate::state`] takes in updates, [`crate::input`]
//! turns keys into changes and [`Action`]s for the main loop, [`crate::warnings`] says
//! what is worth a look, and [`crate::view`] draws it. No terminal and no connection
//! here, so tests drive it directly.

use std::collections::{BTreeMap, HashMap, VecDeque};
use volt_console_proto as proto;

pub use crate::input::Action;
pub(crate) use crate::state::{merge_history, TaskTrack};
pub use crate::state::{GroupRates, Rates, TaskHistory, TaskRow, EVENT_LOG, HISTORY, STALL_LOG, TASK_WINDOW};
pub use crate::view::format::{dur, si};
pub use crate::warnings::{SELF_WAKE_LIMIT, SLOW_POLL_NS, STALL_WARNING_NS};
/// Where updates come from, and how that is going (the connection reports it).
pub use volt_console_client::Status;

/// Which screen is up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum View {
    Workers,
    Tasks,
    Events,
    /// The polls stalled now and the stalls that ended, newest first, with the picked
    /// one's stack.
    Stalls,
    /// The task groups: the tasks of each name (or spawn location) added up.
    Groups,
    /// The sync primitives tasks have waited on: their kind, holder, waiters, permits.
    Resources,
}

/// The task list's order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SortKey {
    Busy,
    Polls,
    Name,
    /// Idle tasks by how long they have waited, longest first.
    Wait,
}

/// The whole dashboard state.
pub struct App {
    pub source: String,
    pub status: Status,
    pub recording: Option<String>,
    pub info: Option<proto::RuntimeInfo>,
    pub snapshot: Option<proto::Snapshot>,
    pub(crate) prev: Option<(u64, proto::Snapshot)>,
    pub uptime_ns: u64,
    pub rates: Rates,
    pub global_queue_history: VecDeque<u64>,
    pub spawn_rate_history: VecDeque<u64>,
    pub events: VecDeque<proto::Event>,
    /// The stalls that ended, as the server sent them, oldest first (at most
    /// [`STALL_LOG`]). The polls stalled now are in `snapshot.ongoing_stalls`.
    pub stalls: VecDeque<proto::Stall>,
    /// The stalls view shows every frame of a stack, the runtime's and std's plumbing
    /// included (`f` toggles; folded by default).
    pub unfold_frames: bool,
    /// The runtime's uptime when the newest of them arrived: the header warns about it
    /// for [`STALL_WARNING_NS`] after.
    pub stall_arrived_ns: Option<u64>,
    /// Events this console missed (the sum of the next two), since it started.
    pub events_missed: u64,
    /// Records the event ring overwrote before the server read them.
    pub events_missed_ring: u64,
    /// Events the server left out of this console's updates for its per-update cap.
    pub events_missed_cap: u64,
    pub updates_missed: u64,
    pub updates: u64,
    /// The rows of the task window the server sent (at most [`TASK_WINDOW`]).
    pub tasks: BTreeMap<u64, TaskRow>,
    /// The task groups, as the last update had them (the server sends them all each
    /// time; none without task statistics).
    pub task_groups: Vec<proto::TaskGroup>,
    /// Each group's rates since the update before, by name.
    pub group_rates: HashMap<String, GroupRates>,
    /// The uptime of the update the groups came in.
    pub(crate) groups_at: Option<u64>,
    /// The sync primitives tasks have waited on, by id, as the last update had them (at
    /// most the server's 500), and how many there are.
    pub resources: Vec<proto::Resource>,
    pub resources_total: u64,
    /// What the detail view's task holds, from the server's answer about it.
    pub detail_holds: Vec<proto::Resource>,
    /// All live tasks by state, from the server (`None` from a server without windows).
    pub task_counts: Option<proto::TaskCounts>,
    /// Tasks that pass the filters, from the server: the list's length.
    pub task_matching: u64,
    /// The window's first row, as a position in the whole sorted list.
    pub task_offset: u64,
    /// The query last asked for (live), to ask again only when it changes.
    pub(crate) last_query: Option<proto::TaskQuery>,
    /// A query was sent and its page has not come yet (the main loop then looks for it
    /// often, so a key's effect shows at once).
    pub awaiting_page: bool,
    /// Show only tasks whose name contains this.
    pub name_filter: String,
    /// Show only tasks in this state.
    pub state_filter: Option<proto::TaskState>,
    /// Typing a name filter: the text so far.
    pub filter_input: Option<String>,
    /// The detail view's task, as last seen.
    pub(crate) detail_row: Option<TaskRow>,
    pub(crate) tracks: HashMap<u64, TaskTrack>,
    /// New tasks turned away from a full `tracks` since its last sweep (see
    /// `state::MAX_TRACKS`).
    pub(crate) tracks_refused: usize,
    /// Open polls per worker: (task, start).
    pub(crate) open_polls: HashMap<u32, (u64, u64)>,
    /// Slow polls seen: (task, duration ns), newest last.
    pub slow_polls: VecDeque<(u64, u64)>,
    /// The runtime's uptime when the newest of them was seen: the header warns about it
    /// for [`STALL_WARNING_NS`] after, as about a stall.
    pub slow_poll_arrived_ns: Option<u64>,
    /// Updates in a row with a parked worker and a non-empty global queue.
    pub(crate) parked_with_work: u32,
    pub view: View,
    pub selected: usize,
    pub sort: SortKey,
    pub detail: Option<u64>,
    /// The server's history of the task in the detail view, once asked for.
    pub history: Option<TaskHistory>,
    /// That task's poll-time and schedule-latency histograms, from the same answer.
    pub detail_histograms: Option<(proto::Histogram, proto::Histogram)>,
    pub help: bool,
    /// Display frozen (live) or playback paused (replay).
    pub paused: bool,
    /// What is wrong with the recording being replayed (damaged updates skipped, a
    /// cut-off end), shown with the warnings.
    pub replay_problems: Vec<String>,
}

impl App {
    pub fn new(source: impl Into<String>) -> App {
        App {
            source: source.into(),
            status: Status::Connecting { attempt: 1 },
            recording: None,
            info: None,
            snapshot: None,
            prev: None,
            uptime_ns: 0,
            rates: Rates::default(),
            global_queue_history: VecDeque::new(),
            spawn_rate_history: VecDeque::new(),
            events: VecDeque::new(),
            stalls: VecDeque::new(),
            unfold_frames: false,
            stall_arrived_ns: None,
            events_missed: 0,
            events_missed_ring: 0,
            events_missed_cap: 0,
            updates_missed: 0,
            updates: 0,
            tasks: BTreeMap::new(),
            task_groups: Vec::new(),
            group_rates: HashMap::new(),
            groups_at: None,
            resources: Vec::new(),
            resources_total: 0,
            detail_holds: Vec::new(),
            task_counts: None,
            task_matching: 0,
            task_offset: 0,
            last_query: None,
            awaiting_page: false,
            name_filter: String::new(),
            state_filter: None,
            filter_input: None,
            detail_row: None,
            tracks: HashMap::new(),
            tracks_refused: 0,
            open_polls: HashMap::new(),
            slow_polls: VecDeque::new(),
            slow_poll_arrived_ns: None,
            parked_with_work: 0,
            view: View::Workers,
            selected: 0,
            sort: SortKey::Busy,
            detail: None,
            history: None,
            detail_histograms: None,
            help: false,
            paused: false,
            replay_problems: Vec::new(),
        }
    }

    /// The query for what the task list shows now: its sort and filters, and a window
    /// around the selected row.
    pub fn task_query(&self) -> proto::TaskQuery {
        let step = (TASK_WINDOW / 4) as u64;
        let offset = (self.selected as u64).saturating_sub(TASK_WINDOW as u64 / 2) / step * step;
        proto::TaskQuery {
            sort: match self.sort {
                SortKey::Busy => proto::TaskSort::Busy,
                SortKey::Polls => proto::TaskSort::Polls,
                SortKey::Name => proto::TaskSort::Name,
                SortKey::Wait => proto::TaskSort::Wait,
            } as i32,
            name_contains: self.name_filter.clone(),
            states: self.state_filter.map(|s| vec![s as i32]).unwrap_or_default(),
            offset,
            limit: TASK_WINDOW,
            after_id: 0,
        }
    }

    /// The query to send, if what the task list shows changed since the last one (after
    /// a key, or once the first update says the server has windows).
    pub fn requery(&mut self) -> Action {
        if self.task_counts.is_none() || self.is_replay() {
            // A server without windows, or a replay: everything is here already.
            return Action::None;
        }
        let q = self.task_query();
        if self.last_query.as_ref() == Some(&q) {
            return Action::None;
        }
        self.task_offset = q.offset;
        self.last_query = Some(q.clone());
        // Only a live stream answers with a page; while disconnected the watcher keeps
        // the query for the next stream, whose first update brings the window.
        self.awaiting_page = self.status == Status::Live;
        Action::QueryTasks(q)
    }

    /// The updates come from a recording, not a server.
    pub fn is_replay(&self) -> bool {
        matches!(self.status, Status::Replay { .. } | Status::Ended)
    }

    pub(crate) fn clamp_selection(&mut self) {
        let n = self.visible_len();
        if self.selected >= n {
            self.selected = n.saturating_sub(1);
        }
    }

    pub(crate) fn task_name(&self, id: u64) -> String {
        match self
            .tasks
            .get(&id)
            .or(self.detail_row.as_ref().filter(|r| r.task.id == id))
            .and_then(|r| r.task.name.as_deref())
        {
            Some(n) => format!(" ({n})"),
            None => String::new(),
        }
    }

    /// The task rows held (the server's window, or everything from a server without
    /// windows), filtered and in the chosen order.
    pub fn sorted_tasks(&self) -> Vec<&TaskRow> {
        let mut v: Vec<&TaskRow> = self
            .tasks
            .values()
            .filter(|r| self.state_filter.is_none_or(|s| r.task.state == s as i32))
            .filter(|r| r.task.name.as_deref().unwrap_or("").contains(&self.name_filter))
            .collect();
        match self.sort {
            SortKey::Busy => v.sort_by(|a, b| b.task.busy_ns.cmp(&a.task.busy_ns).then(a.task.id.cmp(&b.task.id))),
            SortKey::Polls => v.sort_by(|a, b| b.task.polls.cmp(&a.task.polls).then(a.task.id.cmp(&b.task.id))),
            SortKey::Name => v.sort_by(|a, b| {
                a.task
                    .name
                    .as_deref()
                    .unwrap_or("\u{10ffff}")
                    .cmp(b.task.name.as_deref().unwrap_or("\u{10ffff}"))
                    .then(a.task.id.cmp(&b.task.id))
            }),
            SortKey::Wait => {
                // When each wait began, on this console's clock; no wait sorts last.
                let began = |r: &TaskRow| r.task.waiting_since_ns.map_or(u64::MAX, |w| r.seen_at_ns.saturating_sub(w));
                v.sort_by(|a, b| began(a).cmp(&began(b)).then(a.task.id.cmp(&b.task.id)))
            }
        }
        v
    }

    pub(crate) fn visible_len(&self) -> usize {
        match self.view {
            View::Workers => self.snapshot.as_ref().map_or(0, |s| s.workers.len()),
            View::Tasks => match self.task_counts {
                Some(_) => self.task_matching as usize,
                None => self.sorted_tasks().len(),
            },
            View::Events => self.events.len(),
            View::Stalls => self.ongoing_stalls().len() + self.stalls.len(),
            View::Groups => self.task_groups.len(),
            View::Resources => self.resources.len(),
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

    /// The task groups in the chosen order: by busy time (also for the longest-wait
    /// order, which groups do not have), by polls, or by name; `other` sorts as a name.
    pub fn sorted_groups(&self) -> Vec<&proto::TaskGroup> {
        let mut v: Vec<&proto::TaskGroup> = self.task_groups.iter().collect();
        match self.sort {
            SortKey::Busy | SortKey::Wait => v.sort_by(|a, b| b.busy_ns.cmp(&a.busy_ns).then(a.name.cmp(&b.name))),
            SortKey::Polls => v.sort_by(|a, b| b.polls.cmp(&a.polls).then(a.name.cmp(&b.name))),
            SortKey::Name => v.sort_by(|a, b| a.name.cmp(&b.name)),
        }
        v
    }

    /// The row at position `selected` of the whole sorted list, if it is held.
    pub fn selected_task(&self) -> Option<&TaskRow> {
        let offset = if self.task_counts.is_some() { self.task_offset as usize } else { 0 };
        self.sorted_tasks().get(self.selected.checked_sub(offset)?).copied()
    }

    /// Note that the server was asked for the detail view's task (`Action::FetchTask`),
    /// or, with `Err`, that it cannot be (a replay has no server).
    pub fn history_requested(&mut self, id: u64, can_ask: Result<(), String>) {
        if self.detail == Some(id) {
            self.history = Some(match can_ask {
                Ok(()) => TaskHistory::Pending,
                Err(why) => TaskHistory::Unavailable(why),
            });
        }
    }

    /// The task shown in the detail view, with its events: the server's history of it
    /// (which reaches back before this console connected), then the newer ones from
    /// this console's log, each once, oldest first.
    pub fn detail_task(&self) -> Option<(&TaskRow, Vec<&proto::Event>)> {
        let id = self.detail?;
        // The freshest copy: the window's updates and the server's answer both refresh it.
        let row = self.detail_row.as_ref().filter(|r| r.task.id == id).or(self.tasks.get(&id))?;
        let log = self.events.iter().filter(|e| e.task_id == id);
        let server = match &self.history {
            Some(TaskHistory::Events(h)) if !h.is_empty() => h,
            _ => return Some((row, log.collect())),
        };
        Some((row, merge_history(server, log)))
    }
}
