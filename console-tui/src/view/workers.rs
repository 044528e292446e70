//! The workers view: the scheduler box (the parked bitmap, the searchers, the Tokio
//! bridge), the global queue's and the spawn rate's sparklines, a row per worker, and
//! the newest events below.

use super::events::draw_events;
use super::fit::fit_columns;
use super::format::{dur, si};
use crate::app::{App, View};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Row, Sparkline, Table};
use ratatui::Frame;
use volt_console_proto as proto;

/// Slots in a worker's local ring: the queue bar's full scale.
const LOCAL_QUEUE_CAPACITY: u64 = 256;
/// Draw the workers view in `area`.
pub(super) fn draw_workers_view(f: &mut Frame, app: &App, area: Rect) {
    let workers = app.model.snapshot.as_ref().map_or(0, |s| s.workers.len());
    let table_rows = u16::try_from(workers).unwrap_or(u16::MAX).saturating_add(3);
    let [sched, table, events] =
        Layout::vertical([Constraint::Length(5), Constraint::Length(table_rows), Constraint::Min(3)]).areas(area);
    // Below 90 columns the spawn-rate sparkline goes: three boxes would leave each too
    // narrow for its title.
    let right_width = if sched.width >= 90 { 1 } else { 0 };
    let [left, mid, right] =
        Layout::horizontal([Constraint::Length(38), Constraint::Fill(1), Constraint::Fill(right_width)]).areas(sched);
    draw_scheduler(f, app, left);
    let gq: Vec<u64> = app.model.global_queue_history.iter().copied().collect();
    let last_gq = gq.last().copied().unwrap_or(0);
    f.render_widget(
        Sparkline::default()
            .block(Block::default().borders(Borders::ALL).title(format!(" global queue {last_gq} ")))
            .data(&gq[gq.len().saturating_sub(mid.width.saturating_sub(2) as usize)..])
            .style(Style::new().fg(Color::Magenta)),
        mid,
    );
    let sp: Vec<u64> = app.model.spawn_rate_history.iter().copied().collect();
    if right.width > 0 {
        f.render_widget(
            Sparkline::default()
                .block(
                    Block::default().borders(Borders::ALL).title(format!(" spawns/s {} ", si(app.model.rates.spawns))),
                )
                .data(&sp[sp.len().saturating_sub(right.width.saturating_sub(2) as usize)..])
                .style(Style::new().fg(Color::Cyan)),
            right,
        );
    }
    draw_worker_table(f, app, table);
    let newest = app.model.events.len().saturating_sub(1);
    draw_events(f, app, events, newest);
}

/// The parked bitmap, one cell per worker, searchers against their cap, and the Tokio
/// bridge's line.
fn draw_scheduler(f: &mut Frame, app: &App, area: Rect) {
    let (bitmap, parked, searching, workers) = match &app.model.snapshot {
        Some(s) => (s.parked_bitmap, s.num_parked, s.num_searching, s.workers.len() as u32),
        None => (0, 0, 0, 0),
    };
    // Whatever the server (or a recording) says, no more searchers than workers, and no
    // more cells than the bitmap has.
    let cap = app.model.info.as_ref().map_or(workers.div_ceil(2), |i| i.max_searching).min(workers).min(64);
    let mut cells = vec![Span::styled("parked    ", Style::new().fg(Color::DarkGray))];
    for i in 0..workers.min(64) {
        cells.push(if bitmap >> i & 1 == 1 {
            Span::styled("■", Style::new().fg(Color::Blue))
        } else {
            Span::styled("□", Style::new().fg(Color::Green))
        });
    }
    cells.push(Span::raw(format!(" {parked}/{workers}")));
    let mut bar = vec![Span::styled("searching ", Style::new().fg(Color::DarkGray))];
    for i in 0..cap {
        bar.push(if i < searching { Span::styled("▰", Style::new().fg(Color::Yellow)) } else { Span::raw("▱") });
    }
    bar.push(Span::raw(format!(" {searching}/{cap}")));
    f.render_widget(
        Paragraph::new(vec![Line::from(cells), Line::from(bar), bridge_line(app)])
            .block(Block::default().borders(Borders::ALL).title(" scheduler ")),
        area,
    );
}

/// The Tokio bridge (`volt::bridge`): its threads, live tasks, global queue and busy
/// share, or "off" while the runtime reports none (never used, or the feature is off).
pub fn bridge_line(app: &App) -> Line<'static> {
    let label = Span::styled("bridge    ", Style::new().fg(Color::DarkGray));
    let Some(b) = app.model.snapshot.as_ref().and_then(|s| s.bridge.as_ref()) else {
        return Line::from(vec![label, Span::styled("off", Style::new().fg(Color::DarkGray))]);
    };
    let mut spans = vec![
        label,
        Span::raw(format!(
            "{} thr  {} tasks  q {}",
            b.workers,
            si(b.alive_tasks as f64),
            si(b.global_queue_depth as f64)
        )),
    ];
    if let Some(busy) = app.model.rates.bridge_busy {
        spans.push(Span::raw(format!("  {:.0}%", (busy * 100.0).clamp(0.0, 100.0))));
    }
    Line::from(spans)
}

fn state_cell(state: i32) -> Cell<'static> {
    match proto::WorkerState::try_from(state).unwrap_or(proto::WorkerState::Running) {
        proto::WorkerState::Running => Cell::from("running").style(Style::new().fg(Color::Green)),
        proto::WorkerState::Searching => Cell::from("searching").style(Style::new().fg(Color::Yellow)),
        proto::WorkerState::Parked => Cell::from("parked").style(Style::new().fg(Color::Blue)),
    }
}

/// `depth` as a 10-cell bar against the local ring's capacity, then the number.
pub fn queue_bar(depth: u64) -> String {
    let filled = (depth.min(LOCAL_QUEUE_CAPACITY) * 10).div_ceil(LOCAL_QUEUE_CAPACITY) as usize;
    format!("{}{} {depth:>4}", "█".repeat(filled), "░".repeat(10 - filled))
}

/// The worker table's columns: heading and width.
const WORKER_COLUMNS: [(&str, u16); 10] = [
    ("#", 3),
    ("state", 10),
    ("local queue", 16),
    ("LIFO", 5),
    ("polls/s", 9),
    ("busy", 5),
    ("steals/s", 9),
    ("parks/s", 8),
    ("EWMA task", 10),
    ("gq int", 6),
];
/// Which worker columns go first when the terminal is narrow: the global-queue interval,
/// the EWMA, parks, LIFO, steals, the queue bar, then busy; worker, state and polls stay.
const WORKER_DROP_ORDER: [usize; 7] = [9, 8, 7, 3, 6, 2, 5];

fn draw_worker_table(f: &mut Frame, app: &App, area: Rect) {
    let widths: Vec<u16> = WORKER_COLUMNS.iter().map(|c| c.1).collect();
    let shown = fit_columns(&widths, &WORKER_DROP_ORDER, area.width.saturating_sub(2));
    let keep = |cells: Vec<Cell<'static>>| -> Vec<Cell<'static>> {
        cells.into_iter().zip(&shown).filter(|(_, s)| **s).map(|(c, _)| c).collect()
    };
    let header = Row::new(keep(WORKER_COLUMNS.iter().map(|c| Cell::from(c.0)).collect()))
        .style(Style::new().add_modifier(Modifier::BOLD));
    let rows: Vec<Row> = app
        .model
        .snapshot
        .iter()
        .flat_map(|s| s.workers.iter().enumerate())
        .map(|(i, w)| {
            let (polls, steals, parks) = app.model.rates.workers.get(i).copied().unwrap_or_default();
            // The share of the time it spent in polls since the last update.
            let busy = app.model.rates.worker_busy.get(i).map_or("-".into(), |b| format!("{:.0}%", b * 100.0));
            Row::new(keep(vec![
                Cell::from(w.index.to_string()),
                state_cell(w.state),
                Cell::from(queue_bar(w.local_queue_depth)),
                Cell::from(if w.lifo_occupied { "●" } else { "○" }),
                Cell::from(si(polls)),
                Cell::from(busy),
                Cell::from(si(steals)),
                Cell::from(si(parks)),
                Cell::from(dur(w.ewma_task_ns)),
                Cell::from(w.global_queue_interval.to_string()),
            ]))
        })
        .collect();
    let widths: Vec<Constraint> =
        widths.iter().zip(&shown).filter(|(_, s)| **s).map(|(w, _)| Constraint::Length(*w)).collect();
    let selected = (app.screen.view == View::Workers).then_some(app.screen.selected);
    super::table::draw_table(f, area, Table::new(rows, widths).header(header), " workers ", selected);
}
