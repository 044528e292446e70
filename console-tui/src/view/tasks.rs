//! The tasks view: the task list's window, one row a task, with the sort and the filters
//! in its title.

use super::fit::fit_columns;
use super::format::{dur, si};
use crate::app::{App, SortKey};
use ratatui::layout::{Constraint, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::widgets::{Row, Table};
use ratatui::Frame;
use volt_console_proto as proto;

/// Draw the tasks view in `area`.
pub(super) fn draw_tasks(f: &mut Frame, app: &App, area: Rect) {
    let sort = match app.screen.sort {
        SortKey::Busy => "busy",
        SortKey::Polls => "polls",
        SortKey::Name => "name",
        SortKey::Wait => "longest wait",
    };
    // Narrow terminals drop whole columns (scheduled, waiting on, for, state), never cut
    // values; the name and "waiting on" columns count as 8 and 16 cells for this.
    let shown = fit_columns(&[8, 8, 10, 8, 10, 10, 16, 10], &[5, 6, 7, 2], area.width.saturating_sub(2));
    let keep = |cells: Vec<String>| -> Vec<String> {
        cells.into_iter().zip(&shown).filter(|(_, s)| **s).map(|(c, _)| c).collect()
    };
    let header = Row::new(keep(
        ["id", "name", "state", "polls", "busy", "scheduled", "waiting on", "for"].map(String::from).to_vec(),
    ))
    .style(Style::new().add_modifier(Modifier::BOLD));
    let rows: Vec<Row> = app
        .sorted_tasks()
        .into_iter()
        .map(|r| {
            let t = &r.task;
            let state = match proto::TaskState::try_from(t.state).unwrap_or(proto::TaskState::Idle) {
                proto::TaskState::Idle => "idle",
                proto::TaskState::Scheduled => "scheduled",
                proto::TaskState::Running => "running",
                proto::TaskState::Complete => "complete",
            };
            let waited = t.waiting_since_ns.map(|n| dur(n + app.model.uptime_ns.saturating_sub(r.seen_at_ns)));
            // An unnamed task shows where it was spawned instead.
            let name = t.name.clone().or_else(|| t.spawned_at.as_ref().map(|at| format!("at {at}")));
            Row::new(keep(vec![
                t.id.to_string(),
                name.unwrap_or_default(),
                state.to_string(),
                si(t.polls as f64),
                dur(t.busy_ns),
                dur(t.scheduled_ns),
                waiting_cell(t),
                waited.unwrap_or_else(|| "-".into()),
            ]))
        })
        .collect();
    let title = if app.model.info.as_ref().is_some_and(|i| i.event_ring_capacity == 0) {
        " tasks (listed only when the runtime records: Builder::event_ring) ".to_string()
    } else {
        let mut filter = String::new();
        if let Some(s) = app.screen.state_filter {
            filter += &format!(", {} only", s.as_str_name().trim_start_matches("TASK_STATE_").to_lowercase());
        }
        match &app.screen.filter_input {
            Some(typed) => filter += &format!(", name contains: {typed}_ (Enter sets, Esc cancels)"),
            None if !app.screen.name_filter.is_empty() => {
                filter += &format!(", name contains {:?}", app.screen.name_filter)
            }
            None => {}
        }
        let live = match &app.model.task_counts {
            Some(c) if filter.is_empty() => format!("{} live", c.total),
            Some(c) => format!("{} of {} live", app.model.task_matching, c.total),
            None => format!("{} live", app.model.tasks.len()),
        };
        format!(" tasks: {live}, sorted by {sort}{filter} (b p n l sort, / name, f state; Enter details) ")
    };
    let widths = [
        Constraint::Length(8),
        Constraint::Fill(1),
        Constraint::Length(10),
        Constraint::Length(8),
        Constraint::Length(10),
        Constraint::Length(10),
        // Addresses are long: the wait gets two shares of the room to the name's one.
        Constraint::Fill(2),
        Constraint::Length(10),
    ];
    let widths: Vec<Constraint> = widths.iter().zip(&shown).filter(|(_, s)| **s).map(|(w, _)| *w).collect();
    // The rows held are a window of the whole list, starting at `task_offset`.
    let offset = if app.model.task_counts.is_some() { app.task_offset as usize } else { 0 };
    super::table::draw_table(
        f,
        area,
        Table::new(rows, widths).header(header),
        title,
        app.screen.selected.checked_sub(offset),
    );
}

/// What a task's row says it waits on: its first wait, and "+N" for the others its latest
/// poll recorded (the details list them).
fn waiting_cell(t: &proto::Task) -> String {
    if t.lost_waker {
        return "nothing (waker lost)".into();
    }
    match &t.waiting_on {
        Some(w) => match t.waits.len().saturating_sub(1) as u64 + t.more_waits as u64 {
            0 => w.clone(),
            others => format!("{w} +{others}"),
        },
        // A server from before "unknown" sent nothing for such a wait.
        None if t.state == proto::TaskState::Idle as i32 => "?".into(),
        None => "-".into(),
    }
}
