//! Keys to actions. A key changes the view state (the screen, the selection, the sort
//! and filters, the detail view, pause, help) and may ask the main loop for something
//! only it can do: quit, step a replay, ask the connection for a task's history or
//! another window of the task list ([`Action`]).

use crate::app::{App, SortKey, View};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use volt_console_proto as proto;

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

impl App {
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
                View::Tasks => View::Groups,
                View::Groups => View::Events,
                View::Events => View::Stalls,
                View::Stalls => View::Resources,
                View::Resources => View::Workers,
            }),
            KeyCode::BackTab => self.switch(match self.view {
                View::Workers => View::Resources,
                View::Resources => View::Stalls,
                View::Tasks => View::Workers,
                View::Groups => View::Tasks,
                View::Events => View::Groups,
                View::Stalls => View::Events,
            }),
            KeyCode::Char('w') => self.switch(View::Workers),
            KeyCode::Char('t') => self.switch(View::Tasks),
            KeyCode::Char('o') => self.switch(View::Groups),
            KeyCode::Char('e') => self.switch(View::Events),
            KeyCode::Char('s') | KeyCode::Char('S') => self.switch(View::Stalls),
            KeyCode::Char('r') => self.switch(View::Resources),
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
            KeyCode::Char('n') if matches!(self.view, View::Tasks | View::Groups) => self.sort = SortKey::Name,
            KeyCode::Char('l') if self.view == View::Tasks => self.sort = SortKey::Wait,
            KeyCode::Char('/') if self.view == View::Tasks => self.filter_input = Some(self.name_filter.clone()),
            KeyCode::Char('f') if self.view == View::Stalls => self.unfold_frames = !self.unfold_frames,
            KeyCode::Char('f') if self.view == View::Tasks => {
                use proto::TaskState as S;
                self.state_filter = match self.state_filter {
                    None => Some(S::Running),
                    Some(S::Running) => Some(S::Scheduled),
                    Some(S::Scheduled) => Some(S::Idle),
                    _ => None,
                };
                self.selected = 0;
            }
            KeyCode::Char(' ') => {
                self.paused = !self.paused;
                if !self.paused && !self.is_replay() {
                    // Rows that changed in the pause were sent only then: ask for the
                    // whole window again (`requery` sees a new query).
                    self.last_query = None;
                }
            }
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
        self.detail_histograms = None;
        self.detail_holds.clear();
    }
}
