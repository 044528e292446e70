//! The dashboard's state: everything the screen shows, built from the `Update` stream,
//! and what each key does. No terminal here, so tests drive it directly.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use std::collections::{BTreeMap, HashMap, VecDeque};
use volt_console_proto as proto;

/// Samples kept for the sparklines.
pub const HISTORY: usize = 120;
/// Events kept for the event pane and the task detail view.
pub const EVENT_LOG: usize = 20_000;
/// A poll longer than this blocks a worker: flagged in the header.
pub const SLOW_POLL_NS: u64 = 10_000_000;
/// Self-wakes in a row, without completing or waiting on anything, to call a task spinning.
pub const SELF_WAKE_LIMIT: u64 = 1_000;
/// Rows of the task list the console asks the server for: a window around the selected
/// row, larger than any screen, so scrolling asks again only every `TASK_WINDOW / 4`
/// rows. The console never holds more task rows than this (plus the detail view's).
pub const TASK_WINDOW: u32 = 200;
/// Tasks followed for self-wakes; past this, those with none are forgotten.
const MAX_TRACKS: usize = 65_536;

/// Which screen is up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum View {
    Workers,
    Tasks,
    Events,
}

/// The task list's order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SortKey {
    Busy,
    Polls,
    Name,
}

/// Where updates come from, and how that is going (the connection reports it).
pub use volt_console_client::Status;

/// What the main loop should do after a key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    None,
    Quit,
    /// Replay: show the next recorded update (while paused).
    Step,
    /// The detail view of this task opened: ask the server for its history (live only).
    FetchTask(u64),
    /// The task list's window, sort or filter changed: ask the server for it (live only).
    QueryTasks(proto::TaskQuery),
}

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

/// What we know about one task.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskRow {
    pub task: proto::Task,
    /// Uptime when this row was last refreshed (to age `since_last_poll_ns`).
    pub seen_at_ns: u64,
}

#[derive(Default, Clone, Debug)]
struct TaskTrack {
    self_wakes_in_a_row: u64,
}

/// The whole dashboard state.
pub struct App {
    pub source: String,
    pub status: Status,
    pub recording: Option<String>,
    pub info: Option<proto::RuntimeInfo>,
    pub snapshot: Option<proto::Snapshot>,
    prev: Option<(u64, proto::Snapshot)>,
    pub uptime_ns: u64,
    pub rates: Rates,
    pub global_queue_history: VecDeque<u64>,
    pub spawn_rate_history: VecDeque<u64>,
    pub events: VecDeque<proto::Event>,
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
    /// All live tasks by state, from the server (`None` from a server without windows).
    pub task_counts: Option<proto::TaskCounts>,
    /// Tasks that pass the filters, from the server: the list's length.
    pub task_matching: u64,
    /// The window's first row, as a position in the whole sorted list.
    pub task_offset: u64,
    /// The query last asked for (live), to ask again only when it changes.
    last_query: Option<proto::TaskQuery>,
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
    detail_row: Option<TaskRow>,
    tracks: HashMap<u64, TaskTrack>,
    /// Open polls per worker: (task, start).
    open_polls: HashMap<u32, (u64, u64)>,
    /// Slow polls seen: (task, duration ns), newest last.
    pub slow_polls: VecDeque<(u64, u64)>,
    /// Updates in a row with a parked worker and a non-empty global queue.
    parked_with_work: u32,
    pub view: View,
    pub selected: usize,
    pub sort: SortKey,
    pub detail: Option<u64>,
    /// The server's history of the task in the detail view, once asked for.
    pub history: Option<TaskHistory>,
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
            events_missed: 0,
            events_missed_ring: 0,
            events_missed_cap: 0,
            updates_missed: 0,
            updates: 0,
            tasks: BTreeMap::new(),
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
            open_polls: HashMap::new(),
            slow_polls: VecDeque::new(),
            parked_with_work: 0,
            view: View::Workers,
            selected: 0,
            sort: SortKey::Busy,
            detail: None,
            history: None,
            help: false,
            paused: false,
            replay_problems: Vec::new(),
        }
    }

    /// Take in one update from the stream (or a recording).
    pub fn apply(&mut self, u: proto::Update) {
        self.updates += 1;
        if let Some(info) = u.runtime {
            self.info = Some(info);
        }
        self.events_missed += u.events_missed;
        // A server older than the split reports only the sum: count it as the ring's.
        let split = u.events_missed_ring + u.events_missed_cap;
        self.events_missed_ring += if split == 0 { u.events_missed } else { u.events_missed_ring };
        self.events_missed_cap += u.events_missed_cap;
        self.updates_missed += u.updates_missed;
        self.uptime_ns = u.uptime_ns;
        for e in &u.events {
            self.track_event(e);
        }
        for e in u.events {
            if self.events.len() == EVENT_LOG {
                self.events.pop_front();
            }
            self.events.push_back(e);
        }
        if let Some(t) = u.tasks {
            self.apply_tasks(t, u.uptime_ns);
        }
        if let Some(s) = u.snapshot {
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
        let n = self.visible_len();
        if self.selected >= n {
            self.selected = n.saturating_sub(1);
        }
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
        if self.task_counts.is_none() {
            // A server without windows (or a replay): everything is here already.
            return Action::None;
        }
        let q = self.task_query();
        if self.last_query.as_ref() == Some(&q) {
            return Action::None;
        }
        self.task_offset = q.offset;
        self.last_query = Some(q.clone());
        self.awaiting_page = true;
        Action::QueryTasks(q)
    }

    fn clamp_selection(&mut self) {
        let n = self.visible_len();
        if self.selected >= n {
            self.selected = n.saturating_sub(1);
        }
    }

    fn track_event(&mut self, e: &proto::Event) {
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
                    }
                }
            }
            K::Transition => {
                if self.tracks.len() >= MAX_TRACKS && !self.tracks.contains_key(&e.task_id) {
                    self.tracks.retain(|_, t| t.self_wakes_in_a_row > 0);
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

    /// What is worth a look, worst first.
    pub fn warnings(&self) -> Vec<String> {
        let mut w = self.replay_problems.clone();
        if let Some(&(task, ns)) = self.slow_polls.back() {
            let name = self.task_name(task);
            w.push(format!("task {task}{name} polled for {:.1} ms: it blocks a worker", ns as f64 / 1e6));
        }
        // A poll still running for too long.
        if let Some(last) = self.events.back() {
            for (worker, (task, start)) in &self.open_polls {
                let running = last.timestamp_ns.saturating_sub(*start);
                if running > SLOW_POLL_NS && *worker != u32::MAX {
                    w.push(format!("worker {worker} has been polling task {task} for {:.1} ms", running as f64 / 1e6));
                }
            }
        }
        if self.parked_with_work >= 2 {
            if let Some(s) = &self.snapshot {
                w.push(format!(
                    "{} worker(s) parked while the global queue holds {} task(s)",
                    s.num_parked, s.global_queue_depth
                ));
            }
        }
        // Only what this console missed: the ring overwriting records that were read
        // already (`events_overwritten`) is no loss, and is not warned about.
        if self.events_missed_ring > 0 {
            w.push(format!(
                "{} events missed: the ring overwrote them before the server read them (a bigger \
                 Builder::event_ring or a shorter publish interval keeps them)",
                self.events_missed_ring
            ));
        }
        if self.events_missed_cap > 0 {
            w.push(format!(
                "{} events missed: over the per-update cap (volt-console --max-events raises it)",
                self.events_missed_cap
            ));
        }
        if self.updates_missed > 0 {
            w.push(format!("{} updates missed (this console read too slowly)", self.updates_missed));
        }
        let mut spinning: Vec<(&u64, &TaskTrack)> =
            self.tracks.iter().filter(|(_, t)| t.self_wakes_in_a_row >= SELF_WAKE_LIMIT).collect();
        spinning.sort_by_key(|(id, _)| **id);
        for (id, t) in spinning.into_iter().take(3) {
            w.push(format!(
                "task {id}{} woke itself {} times in a row without completing",
                self.task_name(*id),
                t.self_wakes_in_a_row
            ));
        }
        w
    }

    fn task_name(&self, id: u64) -> String {
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
        }
        v
    }

    fn visible_len(&self) -> usize {
        match self.view {
            View::Workers => self.snapshot.as_ref().map_or(0, |s| s.workers.len()),
            View::Tasks => match self.task_counts {
                Some(_) => self.task_matching as usize,
                None => self.sorted_tasks().len(),
            },
            View::Events => self.events.len(),
        }
    }

    /// Handle a key press.
    pub fn on_key(&mut self, key: KeyEvent) -> Action {
        if key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c') {
            return Action::Quit;
        }
        let action = self.on_key_inner(key);
        if action != Action::None || self.view != View::Tasks {
            return action;
        }
        self.requery()
    }

    /// The row at position `selected` of the whole sorted list, if it is held.
    pub fn selected_task(&self) -> Option<&TaskRow> {
        let offset = if self.task_counts.is_some() { self.task_offset as usize } else { 0 };
        self.sorted_tasks().get(self.selected.checked_sub(offset)?).copied()
    }

    fn on_key_inner(&mut self, key: KeyEvent) -> Action {
        if let Some(input) = &mut self.filter_input {
            match key.code {
                KeyCode::Enter => {
                    self.name_filter = self.filter_input.take().unwrap_or_default();
                    self.selected = 0;
                }
                KeyCode::Esc => self.filter_input = None,
                KeyCode::Backspace => {
                    input.pop();
                }
                KeyCode::Char(c) => input.push(c),
                _ => {}
            }
            return Action::None;
        }
        if self.help {
            // Any key closes the help; `q` still quits.
            self.help = false;
            return if key.code == KeyCode::Char('q') { Action::Quit } else { Action::None };
        }
        match key.code {
            KeyCode::Char('q') => return Action::Quit,
            KeyCode::Esc => self.close_detail(),
            KeyCode::Char('?') | KeyCode::Char('h') => self.help = true,
            KeyCode::Tab => self.switch(match self.view {
                View::Workers => View::Tasks,
                View::Tasks => View::Events,
                View::Events => View::Workers,
            }),
            KeyCode::BackTab => self.switch(match self.view {
                View::Workers => View::Events,
                View::Tasks => View::Workers,
                View::Events => View::Tasks,
            }),
            KeyCode::Char('w') => self.switch(View::Workers),
            KeyCode::Char('t') => self.switch(View::Tasks),
            KeyCode::Char('e') => self.switch(View::Events),
            KeyCode::Down | KeyCode::Char('j') => {
                self.selected = (self.selected + 1).min(self.visible_len().saturating_sub(1))
            }
            KeyCode::Up | KeyCode::Char('k') => self.selected = self.selected.saturating_sub(1),
            KeyCode::Home | KeyCode::Char('g') => self.selected = 0,
            KeyCode::End | KeyCode::Char('G') => self.selected = self.visible_len().saturating_sub(1),
            KeyCode::Enter if self.view == View::Tasks => {
                self.close_detail();
                if let Some(row) = self.selected_task().cloned() {
                    self.detail = Some(row.task.id);
                    self.detail_row = Some(row.clone());
                    return Action::FetchTask(row.task.id);
                }
            }
            KeyCode::PageDown => {
                self.selected = (self.selected + 20).min(self.visible_len().saturating_sub(1));
            }
            KeyCode::PageUp => self.selected = self.selected.saturating_sub(20),
            KeyCode::Char('b') => self.sort = SortKey::Busy,
            KeyCode::Char('p') => self.sort = SortKey::Polls,
            KeyCode::Char('n') if self.view == View::Tasks => self.sort = SortKey::Name,
            KeyCode::Char('/') if self.view == View::Tasks => self.filter_input = Some(self.name_filter.clone()),
            KeyCode::Char('s') if self.view == View::Tasks => {
                use proto::TaskState as S;
                self.state_filter = match self.state_filter {
                    None => Some(S::Running),
                    Some(S::Running) => Some(S::Scheduled),
                    Some(S::Scheduled) => Some(S::Idle),
                    _ => None,
                };
                self.selected = 0;
            }
            KeyCode::Char(' ') => self.paused = !self.paused,
            KeyCode::Char('.') | KeyCode::Char('n') | KeyCode::Right => return Action::Step,
            _ => {}
        }
        Action::None
    }

    fn switch(&mut self, v: View) {
        if self.view != v {
            self.view = v;
            self.selected = 0;
            self.close_detail();
        }
    }

    fn close_detail(&mut self) {
        self.detail = None;
        self.detail_row = None;
        self.history = None;
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

    /// Take in the server's answer about task `id` (ignored once its view is closed).
    pub fn apply_task(&mut self, id: u64, details: Result<proto::TaskDetails, String>) {
        if self.detail != Some(id) {
            return;
        }
        self.history = Some(match details {
            Ok(d) => {
                if let Some(task) = d.task {
                    self.detail_row = Some(TaskRow { task, seen_at_ns: self.uptime_ns });
                }
                TaskHistory::Events(d.recent_events)
            }
            Err(why) => TaskHistory::Unavailable(why),
        });
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

/// One task's events from the server's history (`server`, oldest first) and from this
/// console's log (`log`, oldest first), each event once: the log's events before the
/// history starts, the history, then the log's events after it. Both lists are cuts of
/// one ordered stream, so at the history's last timestamp the log's first events there
/// are the ones the history already holds (events of one worker often share a timestamp).
fn merge_history<'a>(server: &'a [proto::Event], log: impl Iterator<Item = &'a proto::Event>) -> Vec<&'a proto::Event> {
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

fn push(h: &mut VecDeque<u64>, v: u64) {
    if h.len() == HISTORY {
        h.pop_front();
    }
    h.push_back(v);
}

fn rates(p: &proto::Snapshot, s: &proto::Snapshot, dt: f64) -> Rates {
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

/// `1234567` -> `1.2M`.
pub fn si(v: f64) -> String {
    let a = v.abs();
    if a >= 1e9 {
        format!("{:.1}G", v / 1e9)
    } else if a >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.1}k", v / 1e3)
    } else if a >= 100.0 || v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// Nanoseconds, readably.
pub fn dur(ns: u64) -> String {
    if ns >= 1_000_000_000 {
        format!("{:.2}s", ns as f64 / 1e9)
    } else if ns >= 1_000_000 {
        format!("{:.2}ms", ns as f64 / 1e6)
    } else if ns >= 1_000 {
        format!("{:.1}µs", ns as f64 / 1e3)
    } else {
        format!("{ns}ns")
    }
}
