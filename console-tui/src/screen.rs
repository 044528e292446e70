//! What the user is looking at: the view, the selected row, the sort and filters of the
//! lists, whether the display is paused and the help or the stalls' full stacks are up.
//! Keys change it ([`crate::input`]); the views draw the model through it. It reads the
//! model (for the lists' lengths and orders) and never changes it.

use crate::state::{Model, TaskRow, TASK_WINDOW};
use volt_console_proto as proto;

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

/// The view state.
#[derive(Clone, Debug, PartialEq)]
pub struct Screen {
    pub view: View,
    /// The selected row of the view's list (of the whole sorted task list, for tasks).
    pub selected: usize,
    pub sort: SortKey,
    /// Show only tasks whose name contains this.
    pub name_filter: String,
    /// Show only tasks in this state.
    pub state_filter: Option<proto::TaskState>,
    /// Typing a name filter: the text so far.
    pub filter_input: Option<String>,
    /// The stalls view shows every frame of a stack, the runtime's and std's plumbing
    /// included (`f` toggles; folded by default).
    pub unfold_frames: bool,
    pub help: bool,
    /// Display frozen (live) or playback paused (replay).
    pub paused: bool,
}

impl Default for Screen {
    fn default() -> Screen {
        Screen {
            view: View::Workers,
            selected: 0,
            sort: SortKey::Busy,
            name_filter: String::new(),
            state_filter: None,
            filter_input: None,
            unfold_frames: false,
            help: false,
            paused: false,
        }
    }
}

impl Screen {
    /// The task rows `model` holds (the server's window, or everything from a server
    /// without windows), filtered and in the chosen order.
    pub fn sorted_tasks<'m>(&self, model: &'m Model) -> Vec<&'m TaskRow> {
        let mut v: Vec<&TaskRow> = model
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

    /// The task groups in the chosen order: by busy time (also for the longest-wait
    /// order, which groups do not have), by polls, or by name; `other` sorts as a name.
    pub fn sorted_groups<'m>(&self, model: &'m Model) -> Vec<&'m proto::TaskGroup> {
        let mut v: Vec<&proto::TaskGroup> = model.task_groups.iter().collect();
        match self.sort {
            SortKey::Busy | SortKey::Wait => v.sort_by(|a, b| b.busy_ns.cmp(&a.busy_ns).then(a.name.cmp(&b.name))),
            SortKey::Polls => v.sort_by(|a, b| b.polls.cmp(&a.polls).then(a.name.cmp(&b.name))),
            SortKey::Name => v.sort_by(|a, b| a.name.cmp(&b.name)),
        }
        v
    }

    /// How many rows the view's list has.
    pub fn visible_len(&self, model: &Model) -> usize {
        match self.view {
            View::Workers => model.snapshot.as_ref().map_or(0, |s| s.workers.len()),
            View::Tasks => match model.task_counts {
                Some(_) => model.task_matching as usize,
                None => self.sorted_tasks(model).len(),
            },
            View::Events => model.events.len(),
            View::Stalls => model.ongoing_stalls().len() + model.stalls.len(),
            View::Groups => model.task_groups.len(),
            View::Resources => model.resources.len(),
        }
    }

    /// Keep the selection on a row of the list (after the list shrank).
    pub fn clamp_selection(&mut self, model: &Model) {
        let n = self.visible_len(model);
        if self.selected >= n {
            self.selected = n.saturating_sub(1);
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
}
