//! Keys to changes. A key changes the view state ([`Screen`]: the view, the selection,
//! the sort and filters, pause, help) and may ask for what only the app can do, as a
//! [`Command`]: quit, step a replay, open or close the detail view, note a resume. The
//! model is read (for the lists' lengths), never changed.

use crate::screen::{Screen, SortKey, View};
use crate::state::Model;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use volt_console_proto as proto;

/// What a key asks of the app, beyond the view state it changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Command {
    None,
    Quit,
    /// Replay: show the next recorded update (while paused).
    Step,
    /// Open the detail view of the selected task (closing the one open).
    OpenDetail,
    /// Close the detail view.
    CloseDetail,
    /// The display was paused and goes on again.
    Resume,
}

/// Handle a key press on `screen`, whose lists show `model`.
pub fn on_key(screen: &mut Screen, model: &Model, key: KeyEvent) -> Command {
    if key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c') {
        return Command::Quit;
    }
    if let Some(input) = &mut screen.filter_input {
        match key.code {
            KeyCode::Enter => {
                screen.name_filter = screen.filter_input.take().unwrap_or_default();
                screen.selected = 0;
            }
            KeyCode::Esc => screen.filter_input = None,
            KeyCode::Backspace => {
                input.pop();
            }
            KeyCode::Char(c) => input.push(c),
            _ => {}
        }
        return Command::None;
    }
    if screen.help {
        // Any key closes the help; `q` still quits.
        screen.help = false;
        return if key.code == KeyCode::Char('q') { Command::Quit } else { Command::None };
    }
    let last = |screen: &Screen| screen.visible_len(model).saturating_sub(1);
    match key.code {
        KeyCode::Char('q') => return Command::Quit,
        KeyCode::Esc => return Command::CloseDetail,
        KeyCode::Char('?') | KeyCode::Char('h') => screen.help = true,
        KeyCode::Tab => {
            return switch(
                screen,
                match screen.view {
                    View::Workers => View::Tasks,
                    View::Tasks => View::Groups,
                    View::Groups => View::Events,
                    View::Events => View::Stalls,
                    View::Stalls => View::Resources,
                    View::Resources => View::Workers,
                },
            )
        }
        KeyCode::BackTab => {
            return switch(
                screen,
                match screen.view {
                    View::Workers => View::Resources,
                    View::Resources => View::Stalls,
                    View::Tasks => View::Workers,
                    View::Groups => View::Tasks,
                    View::Events => View::Groups,
                    View::Stalls => View::Events,
                },
            )
        }
        KeyCode::Char('w') => return switch(screen, View::Workers),
        KeyCode::Char('t') => return switch(screen, View::Tasks),
        KeyCode::Char('o') => return switch(screen, View::Groups),
        KeyCode::Char('e') => return switch(screen, View::Events),
        KeyCode::Char('s') | KeyCode::Char('S') => return switch(screen, View::Stalls),
        KeyCode::Char('r') => return switch(screen, View::Resources),
        KeyCode::Down | KeyCode::Char('j') => screen.selected = (screen.selected + 1).min(last(screen)),
        KeyCode::Up | KeyCode::Char('k') => screen.selected = screen.selected.saturating_sub(1),
        KeyCode::Home | KeyCode::Char('g') => screen.selected = 0,
        KeyCode::End | KeyCode::Char('G') => screen.selected = last(screen),
        KeyCode::Enter if screen.view == View::Tasks => return Command::OpenDetail,
        KeyCode::PageDown => screen.selected = (screen.selected + 20).min(last(screen)),
        KeyCode::PageUp => screen.selected = screen.selected.saturating_sub(20),
        KeyCode::Char('b') => screen.sort = SortKey::Busy,
        KeyCode::Char('p') => screen.sort = SortKey::Polls,
        KeyCode::Char('n') if matches!(screen.view, View::Tasks | View::Groups) => screen.sort = SortKey::Name,
        KeyCode::Char('l') if screen.view == View::Tasks => screen.sort = SortKey::Wait,
        KeyCode::Char('/') if screen.view == View::Tasks => screen.filter_input = Some(screen.name_filter.clone()),
        KeyCode::Char('f') if screen.view == View::Stalls => screen.unfold_frames = !screen.unfold_frames,
        KeyCode::Char('f') if screen.view == View::Tasks => {
            use proto::TaskState as S;
            screen.state_filter = match screen.state_filter {
                None => Some(S::Running),
                Some(S::Running) => Some(S::Scheduled),
                Some(S::Scheduled) => Some(S::Idle),
                _ => None,
            };
            screen.selected = 0;
        }
        KeyCode::Char(' ') => {
            screen.paused = !screen.paused;
            if !screen.paused {
                return Command::Resume;
            }
        }
        KeyCode::Char('.') | KeyCode::Char('n') | KeyCode::Right => return Command::Step,
        _ => {}
    }
    Command::None
}

/// Show view `v`: the selection starts over, and the detail view closes.
fn switch(screen: &mut Screen, v: View) -> Command {
    if screen.view == v {
        return Command::None;
    }
    screen.view = v;
    screen.selected = 0;
    Command::CloseDetail
}
