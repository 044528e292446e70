//! The task groups view: the tasks of each name, or of each spawn location when
//! unnamed, added up by the runtime (`Telemetry::task_groups`), one row a group.
//!
//! ```text
//! ┌ task groups: 4 (b p n sort) ────────────────────────────────────────────────────────┐
//! │group                    alive  done   polls/s  busy  busy total slow  p50   p99 ... │
//! │echo-conn                   50  1.2k     30.1k   41%     1.20s      3  8µs  65µs      │
//! │src/main.rs:40:9             0  200k      1.1k    2%    35.0ms      0  2µs   4µs      │
//! ```

use super::fit::fit_columns;
use super::format::{dur, si};
use crate::app::{App, SortKey, View};
use ratatui::layout::{Constraint, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::widgets::{Cell, Row, Table};
use ratatui::Frame;
use volt_console_proto as proto;

/// The columns: heading and width (the name's is what it counts as when columns must go).
const COLUMNS: [(&str, u16); 12] = [
    ("group", 16),
    ("alive", 7),
    ("done", 7),
    ("polls/s", 8),
    ("busy", 5),
    ("busy total", 10),
    ("slow", 6),
    ("p50", 8),
    ("p99", 8),
    ("first poll", 10),
    ("queued", 9),
    ("failed", 6),
];
/// Which go first on a narrow terminal: failed, the mean queued time, the mean first-poll
/// delay, p50, the busy total, slow polls, p99; the name, alive, done, polls/s and busy stay.
const DROP_ORDER: [usize; 7] = [11, 10, 9, 7, 5, 6, 8];

/// One group's cells, in [`COLUMNS`]' order.
fn cells(app: &App, g: &proto::TaskGroup) -> Vec<Cell<'static>> {
    let rates = app.model.group_rates.get(&g.name).copied().unwrap_or_default();
    let mean = |total: u64, n: u64| total.checked_div(n).map_or("-".into(), dur);
    let failed = g.cancelled + g.panicked;
    let name = match proto::TaskGroupKind::try_from(g.kind) {
        Ok(proto::TaskGroupKind::Named) => Cell::from(g.name.clone()),
        // A spawn location, or the rest: not a name the program gave.
        _ => Cell::from(g.name.clone()).style(Style::new().fg(Color::Cyan)),
    };
    vec![
        name,
        Cell::from(si(g.alive as f64)),
        Cell::from(si(g.completed as f64)),
        Cell::from(si(rates.polls)),
        Cell::from(format!("{:.0}%", rates.busy * 100.0)),
        Cell::from(dur(g.busy_ns)),
        Cell::from(si(g.slow_polls as f64)),
        Cell::from(g.poll_p50_ns.map_or("-".into(), |n| format!("<{}", dur(n)))),
        Cell::from(g.poll_p99_ns.map_or("-".into(), |n| format!("<{}", dur(n)))),
        Cell::from(mean(g.first_poll_delay_ns, g.first_polls)),
        Cell::from(mean(g.schedule_delay_ns, g.scheduled)),
        Cell::from(si(failed as f64)).style(if g.panicked > 0 { Style::new().fg(Color::Red) } else { Style::new() }),
    ]
}

/// Draw the groups view in `area`.
pub(super) fn draw_groups(f: &mut Frame, app: &App, area: Rect) {
    let widths: Vec<u16> = COLUMNS.iter().map(|c| c.1).collect();
    let shown = fit_columns(&widths, &DROP_ORDER, area.width.saturating_sub(2));
    let keep = |cells: Vec<Cell<'static>>| -> Vec<Cell<'static>> {
        cells.into_iter().zip(&shown).filter(|(_, s)| **s).map(|(c, _)| c).collect()
    };
    let header = Row::new(keep(COLUMNS.iter().map(|c| Cell::from(c.0)).collect()))
        .style(Style::new().add_modifier(Modifier::BOLD));
    let rows: Vec<Row> =
        app.screen.sorted_groups(&app.model).into_iter().map(|g| Row::new(keep(cells(app, g)))).collect();
    let title = if app.model.info.as_ref().is_some_and(|i| i.event_ring_capacity == 0) {
        " task groups (kept only when the runtime records: Builder::event_ring) ".to_string()
    } else {
        let sort = match app.screen.sort {
            SortKey::Busy | SortKey::Wait => "busy",
            SortKey::Polls => "polls",
            SortKey::Name => "name",
        };
        format!(
            " task groups: {}, by name or spawn location, sorted by {sort} (b p n sort; p50 p99 poll time, mean first-poll and queued delay) ",
            app.model.task_groups.len()
        )
    };
    // The name takes the room the others leave.
    let widths: Vec<Constraint> = COLUMNS
        .iter()
        .zip(&shown)
        .filter(|(_, s)| **s)
        .map(|((name, w), _)| if *name == "group" { Constraint::Fill(1) } else { Constraint::Length(*w) })
        .collect();
    let selected = (app.screen.view == View::Groups).then_some(app.screen.selected);
    super::table::draw_table(f, area, Table::new(rows, widths).header(header), title, selected);
}
