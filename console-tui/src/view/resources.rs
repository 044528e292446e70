//! The resources view: the sync primitives tasks have waited on (a `Mutex`, a
//! `Semaphore`, an `RwLock`, ...), as the server lists them (`Update.resources`), one row
//! each: who holds it, how many tasks wait, its permits, where it was created. A lock in
//! a deadlock is marked.
//!
//! ```text
//! ┌ resources: 3 (sync primitives tasks have waited on) ──────────────────────────────────────────┐
//! │id     kind        holder                 waiting  permits    detail      created at          │
//! │12     Mutex       task 7 (writer)              2  -          deadlock    src/db.rs:40:17     │
//! │15     Semaphore   -                            4  0/10                   src/main.rs:12:9    │
//! ```

use super::fit::fit_columns;
use crate::app::{App, View};
use ratatui::layout::{Constraint, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::widgets::{Cell, Row, Table};
use ratatui::Frame;
use volt_console_proto as proto;

const COLUMNS: [(&str, u16); 7] =
    [("id", 8), ("kind", 10), ("holder", 24), ("waiting", 8), ("permits", 10), ("detail", 10), ("created at", 32)];
/// Which go first on a narrow terminal: where it was created, the detail, the permits.
const DROP_ORDER: [usize; 3] = [6, 5, 4];

/// A resource in a few words: `Mutex #3 (2 waiting)`.
pub(super) fn short(r: &proto::Resource) -> String {
    let kind = r.kind.as_deref().unwrap_or("resource");
    match r.waiters {
        0 => format!("{kind} #{}", r.id),
        n => format!("{kind} #{} ({n} waiting)", r.id),
    }
}

fn holder(app: &App, r: &proto::Resource) -> String {
    match r.holder_task {
        Some(id) => format!("task {id}{}", app.model.task_name(id)),
        None if r.held_outside => "outside a task".into(),
        None => "-".into(),
    }
}

fn permits(r: &proto::Resource) -> String {
    match r.kind.as_deref() {
        Some("Semaphore") => format!("{}/{} free", r.free, r.total),
        Some("RwLock") if r.aux > 0 => format!("{} reader{}", r.aux, if r.aux == 1 { "" } else { "s" }),
        Some("Barrier") => format!("{}/{} in", r.aux, r.total),
        _ => "-".into(),
    }
}

/// Draw the resources view in `area`.
pub(super) fn draw_resources(f: &mut Frame, app: &App, area: Rect) {
    let widths: Vec<u16> = COLUMNS.iter().map(|c| c.1).collect();
    let shown = fit_columns(&widths, &DROP_ORDER, area.width.saturating_sub(2));
    let keep = |cells: Vec<Cell<'static>>| -> Vec<Cell<'static>> {
        cells.into_iter().zip(&shown).filter(|(_, s)| **s).map(|(c, _)| c).collect()
    };
    let header = Row::new(keep(COLUMNS.iter().map(|c| Cell::from(c.0)).collect()))
        .style(Style::new().add_modifier(Modifier::BOLD));
    let in_deadlock =
        |id: u64| app.model.deadlocks().iter().flat_map(|d| &d.tasks).any(|t| t.wants_resource == Some(id));
    let rows: Vec<Row> = app
        .model
        .resources
        .iter()
        .map(|r| {
            let stuck = in_deadlock(r.id);
            let row = Row::new(keep(vec![
                Cell::from(r.id.to_string()),
                Cell::from(r.kind.clone().unwrap_or_else(|| "?".into())),
                Cell::from(holder(app, r)),
                Cell::from(r.waiters.to_string()),
                Cell::from(permits(r)),
                Cell::from(if stuck { "deadlock" } else { "" }),
                Cell::from(r.created_at.clone().unwrap_or_else(|| "-".into())),
            ]));
            if stuck {
                row.style(Style::new().fg(Color::Red))
            } else {
                row
            }
        })
        .collect();
    let more = app.model.resources_total.saturating_sub(app.model.resources.len() as u64);
    let title = if app.model.info.as_ref().is_some_and(|i| i.event_ring_capacity == 0) {
        " resources (listed only when the runtime records: Builder::event_ring) ".to_string()
    } else if more > 0 {
        format!(
            " resources: the first {} of {} (sync primitives tasks have waited on) ",
            app.model.resources.len(),
            app.model.resources_total
        )
    } else {
        format!(" resources: {} (sync primitives tasks have waited on) ", app.model.resources.len())
    };
    let widths: Vec<Constraint> = COLUMNS
        .iter()
        .zip(&shown)
        .filter(|(_, s)| **s)
        .map(|((name, w), _)| if *name == "holder" { Constraint::Fill(1) } else { Constraint::Length(*w) })
        .collect();
    let selected = (app.screen.view == View::Resources).then_some(app.screen.selected);
    super::table::draw_table(f, area, Table::new(rows, widths).header(header), title, selected);
}
