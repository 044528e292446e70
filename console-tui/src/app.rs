//! The dashboard as one value, [`App`]: it owns the data model the update stream builds
//! ([`Model`], in [`crate::state`]), the view state the keys move ([`Screen`], in
//! [`crate::screen`]), where the updates come from and the task list's paging, and
//! composes them: an update goes to the model and the selection is kept on a row, a key
//! goes to [`crate::input`] and the [`Command`] it returns is carried out here, the
//! warnings are [`crate::warnings`]' over the model. What only the main loop can do
//! comes back as an [`Action`]. No terminal and no connection here, so tests drive it
//! directly; [`crate::view`] draws it.

use crate::input::{self, Command};
use crossterm::event::KeyEvent;
use volt_console_proto as proto;

pub use crate::screen::{Screen, SortKey, View};
pub use crate::state::{
    GroupRates, Missed, Model, Rates, TaskDetail, TaskHistory, TaskRow, EVENT_LOG, HISTORY, SLOW_POLL_NS, STALL_LOG,
    TASK_WINDOW,
};
pub use crate::warnings::{SELF_WAKE_LIMIT, STALL_WARNING_NS};
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

/// The whole dashboard state.
pub struct App {
    pub source: String,
    pub status: Status,
    pub recording: Option<String>,
    /// What is wrong with the recording being replayed (damaged updates skipped, a
    /// cut-off end), shown with the warnings.
    pub replay_problems: Vec<String>,
    /// What the update stream said.
    pub model: Model,
    /// What the user is looking at.
    pub screen: Screen,
    /// The task window's first row, as a position in the whole sorted list.
    pub task_offset: u64,
    /// The query last asked for (live), to ask again only when it changes.
    last_query: Option<proto::TaskQuery>,
    /// A query was sent and its page has not come yet (the main loop then looks for it
    /// often, so a key's effect shows at once).
    pub awaiting_page: bool,
}

impl App {
    pub fn new(source: impl Into<String>) -> App {
        App {
            source: source.into(),
            status: Status::Connecting { attempt: 1 },
            recording: None,
            replay_problems: Vec::new(),
            model: Model::default(),
            screen: Screen::default(),
            task_offset: 0,
            last_query: None,
            awaiting_page: false,
        }
    }

    /// Take in one update from the stream (or a recording).
    pub fn apply(&mut self, u: proto::Update) {
        self.model.apply(u);
        self.screen.clamp_selection(&self.model);
    }

    /// Take in an update while the live display is paused (see [`Model::hold`]).
    pub fn hold(&mut self, u: proto::Update) {
        self.model.hold(u);
        self.screen.clamp_selection(&self.model);
    }

    /// Take in a page the server sent for a new query (`SetTaskQuery`).
    pub fn apply_page(&mut self, page: proto::TaskPage) {
        self.awaiting_page = false;
        self.model.apply_page(page);
        self.screen.clamp_selection(&self.model);
    }

    /// Take in the server's answer about task `id` (ignored once its view is closed).
    pub fn apply_task(&mut self, id: u64, details: Result<proto::TaskDetails, String>) {
        self.model.apply_task(id, details);
    }

    /// Note that the server was asked for the detail view's task (`Action::FetchTask`),
    /// or, with `Err`, that it cannot be (a replay has no server).
    pub fn history_requested(&mut self, id: u64, can_ask: Result<(), String>) {
        self.model.history_requested(id, can_ask);
    }

    /// Handle a key press.
    pub fn on_key(&mut self, key: KeyEvent) -> Action {
        let action = match input::on_key(&mut self.screen, &self.model, key) {
            Command::None => Action::None,
            Command::Quit => Action::Quit,
            Command::Step => Action::Step,
            Command::CloseDetail => {
                self.model.close_detail();
                Action::None
            }
            Command::OpenDetail => {
                self.model.close_detail();
                match self.selected_task().map(|r| r.task.id) {
                    Some(id) => {
                        self.model.open_detail(id);
                        Action::FetchTask(id)
                    }
                    None => Action::None,
                }
            }
            Command::Resume => {
                if !self.is_replay() {
                    // Rows that changed in the pause were sent only then: ask for the
                    // whole window again (`requery` sees a new query).
                    self.last_query = None;
                }
                Action::None
            }
        };
        if action != Action::None || self.screen.view != View::Tasks {
            return action;
        }
        self.requery()
    }

    /// The query for what the task list shows now: its sort and filters, and a window
    /// around the selected row.
    pub fn task_query(&self) -> proto::TaskQuery {
        self.screen.task_query()
    }

    /// The query to send, if what the task list shows changed since the last one (after
    /// a key, or once the first update says the server has windows).
    pub fn requery(&mut self) -> Action {
        if self.model.task_counts.is_none() || self.is_replay() {
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

    /// What is worth a look, worst first: what is wrong with a recording being
    /// replayed, then what the model shows.
    pub fn warnings(&self) -> Vec<String> {
        let mut w = self.replay_problems.clone();
        w.extend(crate::warnings::all(&self.model));
        w
    }

    /// The task rows held, filtered and in the chosen order.
    pub fn sorted_tasks(&self) -> Vec<&TaskRow> {
        self.screen.sorted_tasks(&self.model)
    }

    /// The row at position `selected` of the whole sorted list, if it is held.
    pub fn selected_task(&self) -> Option<&TaskRow> {
        let offset = if self.model.task_counts.is_some() { self.task_offset as usize } else { 0 };
        self.sorted_tasks().get(self.screen.selected.checked_sub(offset)?).copied()
    }
}
