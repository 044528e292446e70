//! Drawing the dashboard with ratatui. Pure: it reads an [`App`] and draws a frame, so
//! tests render it on a `TestBackend`.
//!
//! Each view has a file of its own (`workers`, `tasks`, `groups`, `events`, `stalls`,
//! `resources`), as do the header, the task detail box, and the footer with the help
//! (`keys`). They share `fit` (text and columns fitted to the room) and `format`
//! (numbers); only this file draws them together, and none of them uses it.
//!
//! ```text
//! ┌ volt-console ───────────────────────────────────────────────────────────────┐
//! │127.0.0.1:6670 ● live  uptime 00:01:23  workers 4  spawn 12.3k/s ...         │
//! │⚠ task 42 (slow-task) polled for 15.0 ms: it blocks a worker                 │
//! └─────────────────────────────────────────────────────────────────────────────┘
//! ┌ scheduler ──────────┐┌ global queue ──────────────┐┌ spawns/s ───────────────┐
//! │parked ■□■□  2/4     ││▁▂▁▃█▂▁                     ││▃▄▅▄▃▆▇                  │
//! │searching ▰▱ 1/2     ││                            ││                         │
//! │bridge 1 thr  3 tasks│└────────────────────────────┘└─────────────────────────┘
//! ┌ workers ────────────────────────────────────────────────────────────────────┐
//! │ #  state      local queue        LIFO  polls/s  steals/s  parks/s  EWMA  int │
//! │ 0  running    ███░░░░░░░   77    ●     120.4k   1.2k      3        8.1µs 61  │
//! ┌ events ─────────────────────────────────────────────────────────────────────┐
//! ```

mod detail;
mod events;
mod fit;
pub mod format;
mod groups;
mod header;
mod keys;
mod resources;
mod stalls;
mod table;
mod tasks;
mod workers;

pub use events::event_line;
pub use fit::{fit_columns, fit_words};
pub use workers::{bridge_line, queue_bar};

use crate::app::{App, View};
use ratatui::layout::{Constraint, Layout};
use ratatui::Frame;

/// Draw the whole screen.
pub fn draw(f: &mut Frame, app: &App) {
    let warnings = app.warnings();
    let header_h = 3 + warnings.len().min(4) as u16;
    let [header, body, footer] =
        Layout::vertical([Constraint::Length(header_h), Constraint::Min(5), Constraint::Length(1)]).areas(f.area());
    header::draw_header(f, app, &warnings, header);
    match app.screen.view {
        View::Workers => workers::draw_workers_view(f, app, body),
        View::Tasks => tasks::draw_tasks(f, app, body),
        View::Events => events::draw_events(f, app, body, app.screen.selected),
        View::Stalls => stalls::draw_stalls(f, app, body),
        View::Groups => groups::draw_groups(f, app, body),
        View::Resources => resources::draw_resources(f, app, body),
    }
    keys::draw_footer(f, app, footer);
    if app.model.detail.is_some() {
        detail::draw_detail(f, app, fit::centered(f.area(), 80, 70));
    }
    if app.screen.help {
        keys::draw_help(f, f.area());
    }
}
