//! Drawing the dashboard with ratatui. Pure: it reads an [`App`] and draws a frame, so
//! tests render it on a `TestBackend`.
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

pub mod format;
mod groups;
mod resources;

use crate::app::{App, SortKey, Status, TaskHistory, View};
use format::{dur, si};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Clear, Paragraph, Row, Sparkline, Table, TableState, Wrap};
use ratatui::Frame;
use volt_console_proto as proto;

/// Slots in a worker's local ring: the queue bar's full scale.
const LOCAL_QUEUE_CAPACITY: u64 = 256;

/// Draw the whole screen.
pub fn draw(f: &mut Frame, app: &App) {
    let warnings = app.warnings();
    let header_h = 3 + warnings.len().min(4) as u16;
    let [header, body, footer] =
        Layout::vertical([Constraint::Length(header_h), Constraint::Min(5), Constraint::Length(1)]).areas(f.area());
    draw_header(f, app, &warnings, header);
    match app.screen.view {
        View::Workers => draw_workers_view(f, app, body),
        View::Tasks => draw_tasks(f, app, body),
        View::Events => draw_events(f, app, body, app.screen.selected),
        View::Stalls => draw_stalls(f, app, body),
        View::Groups => groups::draw_groups(f, app, body),
        View::Resources => resources::draw_resources(f, app, body),
    }
    draw_footer(f, app, footer);
    if app.model.detail.is_some() {
        draw_detail(f, app, centered(f.area(), 80, 70));
    }
    if app.screen.help {
        draw_help(f, f.area());
    }
}

fn status_span(app: &App) -> Span<'static> {
    match &app.status {
        Status::Live if app.screen.paused => Span::styled("❚❚ paused", Style::new().fg(Color::Yellow)),
        Status::Live => Span::styled("● live", Style::new().fg(Color::Green)),
        Status::Connecting { attempt } => {
            Span::styled(format!("… connecting (attempt {attempt})"), Style::new().fg(Color::Yellow))
        }
        Status::Disconnected { reason, retry_in_ms } => Span::styled(
            format!("✖ disconnected: {reason}; retrying in {:.1}s", *retry_in_ms as f64 / 1e3),
            Style::new().fg(Color::Red),
        ),
        Status::Replay { position, total, paused, skipped } => Span::styled(
            format!(
                "{} replay {position}/{total}{}",
                if *paused { "❚❚" } else { "▶" },
                if *skipped > 0 { format!(" ({skipped} skipped)") } else { String::new() }
            ),
            Style::new().fg(Color::Cyan),
        ),
        Status::Ended => Span::styled("■ end of recording", Style::new().fg(Color::Cyan)),
    }
}

fn uptime(ns: u64) -> String {
    let s = ns / 1_000_000_000;
    format!("{:02}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}

fn draw_header(f: &mut Frame, app: &App, warnings: &[String], area: Rect) {
    let workers = app.model.snapshot.as_ref().map_or(0, |s| s.workers.len());
    let label = Style::new().fg(Color::DarkGray);
    let mut first = vec![
        Span::styled(app.source.clone(), Style::new().add_modifier(Modifier::BOLD)),
        Span::raw(" "),
        status_span(app),
    ];
    if let Some(r) = &app.recording {
        first.push(Span::styled(format!("  ● REC {r}"), Style::new().fg(Color::Red)));
    }
    // Each figure goes in whole or not at all: on a narrow terminal the last ones are left
    // out, never cut mid-number.
    let inner = area.width.saturating_sub(2) as usize;
    let mut used: usize = first.iter().map(|s| s.width()).sum();
    let items = [
        ("  uptime ", uptime(app.model.uptime_ns)),
        ("  workers ", workers.to_string()),
        ("  spawn ", format!("{}/s", si(app.model.rates.spawns))),
        ("  poll ", format!("{}/s", si(app.model.rates.polls))),
        ("  steal ", format!("{}/s", si(app.model.rates.steals))),
        ("  park ", format!("{}/s", si(app.model.rates.parks))),
        ("  missed ", si(app.model.missed.events as f64)),
    ];
    for (name, value) in items {
        let w = name.chars().count() + value.chars().count();
        if used + w > inner {
            break;
        }
        used += w;
        first.extend([Span::styled(name, label), Span::raw(value)]);
    }
    let mut lines = vec![Line::from(first)];
    if warnings.is_empty() {
        lines.push(Line::from(Span::styled("no warnings", label)));
    }
    for w in warnings.iter().take(4) {
        lines.push(Line::from(Span::styled(fit_words(&format!("⚠ {w}"), inner), Style::new().fg(Color::Yellow))));
    }
    let block = Block::default().borders(Borders::ALL).title(" volt-console ");
    f.render_widget(Paragraph::new(lines).block(block), area);
}

/// `text` cut at a word boundary to fit `width` columns, with "…" when cut: a warning
/// never ends halfway through a number.
pub fn fit_words(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_string();
    }
    let mut out = String::new();
    for word in text.split(' ') {
        let extra = usize::from(!out.is_empty()) + word.chars().count();
        if out.chars().count() + extra + 1 > width {
            break;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
    out.push('…');
    out
}

/// Which of a table's columns to show in `width` cells: all that fit, dropping whole
/// columns in `drop_order` (indices, first dropped first) until the rest fit with one
/// cell between columns. A column is never narrowed, so no value is cut.
pub fn fit_columns(widths: &[u16], drop_order: &[usize], width: u16) -> Vec<bool> {
    let mut shown = vec![true; widths.len()];
    let need = |shown: &[bool]| {
        let cols: Vec<u16> = widths.iter().zip(shown).filter(|(_, s)| **s).map(|(w, _)| *w).collect();
        cols.iter().sum::<u16>() + cols.len().saturating_sub(1) as u16
    };
    for &i in drop_order {
        if need(&shown) <= width {
            break;
        }
        shown[i] = false;
    }
    shown
}

fn draw_workers_view(f: &mut Frame, app: &App, area: Rect) {
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
    let mut state = TableState::default();
    if app.screen.view == View::Workers {
        state.select(Some(app.screen.selected));
    }
    f.render_stateful_widget(
        Table::new(rows, widths)
            .header(header)
            .row_highlight_style(Style::new().add_modifier(Modifier::REVERSED))
            .block(Block::default().borders(Borders::ALL).title(" workers ")),
        area,
        &mut state,
    );
}

/// One event as a log line (the client library's formatter).
pub use volt_console_client::event_line;

/// The event log, scrolled so that event `focus` is in view (the newest at the bottom).
fn draw_events(f: &mut Frame, app: &App, area: Rect, focus: usize) {
    let h = area.height.saturating_sub(2) as usize;
    let end = (focus + 1).min(app.model.events.len()).max(h.min(app.model.events.len()));
    let start = end.saturating_sub(h);
    let lines: Vec<Line> = app
        .model
        .events
        .iter()
        .enumerate()
        .skip(start)
        .take(end - start)
        .map(|(i, e)| {
            let l = Line::from(event_line(e));
            if app.screen.view == View::Events && i == focus {
                l.style(Style::new().add_modifier(Modifier::REVERSED))
            } else {
                l
            }
        })
        .collect();
    let title = if app.model.info.as_ref().is_some_and(|i| i.event_ring_capacity == 0) {
        " events (the event ring is off: Builder::event_ring) ".to_string()
    } else {
        format!(" events ({} kept, {} missed) ", app.model.events.len(), app.model.missed.events)
    };
    f.render_widget(Paragraph::new(lines).block(Block::default().borders(Borders::ALL).title(title)), area);
}

fn draw_tasks(f: &mut Frame, app: &App, area: Rect) {
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
    let mut state = TableState::default().with_selected(app.screen.selected.checked_sub(offset));
    f.render_stateful_widget(
        Table::new(rows, widths)
            .header(header)
            .row_highlight_style(Style::new().add_modifier(Modifier::REVERSED))
            .block(Block::default().borders(Borders::ALL).title(title)),
        area,
        &mut state,
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

/// The details' lines for what a task waits on: every wait its latest poll recorded,
/// the first with how long it has waited, then how many more there were.
fn waiting_lines(t: &proto::Task, waited: String) -> Vec<Line<'static>> {
    if t.lost_waker {
        return vec![Line::styled(
            "waiting on  nothing can wake it: every waker was dropped",
            Style::new().fg(Color::Red).add_modifier(Modifier::BOLD),
        )];
    }
    let Some(first) = &t.waiting_on else { return Vec::new() };
    let mut lines = vec![Line::from(format!("waiting on  {first}, for {waited}"))];
    lines.extend(t.waits.iter().skip(1).map(|w| Line::from(format!("            {}", w.description))));
    if t.more_waits > 0 {
        lines.push(Line::from(format!("            +{} more", t.more_waits)));
    }
    if t.waiting_kind.as_deref() == Some("unknown") {
        lines.push(Line::from("            (a future that names no wait: wrap it with .waiting_on(label))"));
    }
    lines
}

/// A log2 histogram on one line: its populated range as bars, `1µs ▁▃█▂ 1ms`, and
/// the p50 and p99 bounds.
fn histogram_line(h: &proto::Histogram) -> String {
    const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    let total: u64 = h.buckets.iter().sum();
    let (Some(lo), Some(hi)) = (h.buckets.iter().position(|&c| c > 0), h.buckets.iter().rposition(|&c| c > 0)) else {
        return "-".into();
    };
    let max = h.buckets[lo..=hi].iter().copied().max().unwrap_or(1).max(1);
    let bars: String = h.buckets[lo..=hi]
        .iter()
        .map(|&c| if c == 0 { ' ' } else { BARS[((c * 7).div_ceil(max) as usize).min(7)] })
        .collect();
    let quantile = |q: f64| {
        let want = ((total as f64) * q).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, c) in h.buckets.iter().enumerate() {
            seen += c;
            if seen >= want {
                return dur(1u64 << (i + 1).min(63));
            }
        }
        "-".into()
    };
    format!(
        "{} {bars} {}  p50 < {}, p99 < {} ({total})",
        dur(1u64 << lo),
        dur(1u64 << (hi + 1).min(63)),
        quantile(0.5),
        quantile(0.99)
    )
}

/// The stalls view: the polls stalled now and the stalls that ended (newest first),
/// and the picked one's stack, the program's own frames first (the plumbing folded
/// unless `f` unfolded it).
fn draw_stalls(f: &mut Frame, app: &App, area: Rect) {
    let rows = app.model.stall_rows();
    let total = app.model.snapshot.as_ref().map_or(0, |s| s.stalls_total);
    let block = Block::default()
        .borders(Borders::ALL)
        .title(format!(" stalls: {total} (polls past the threshold; j/k pick one, newest first; f folds frames) "));
    if rows.is_empty() {
        let text = "no stall yet: a poll that runs past Builder::stall_threshold (10 ms by default) shows here, with its stack";
        f.render_widget(Paragraph::new(text).wrap(Wrap { trim: true }).block(block), area);
        return;
    }
    let pick = app.screen.selected.min(rows.len() - 1);
    let mut lines: Vec<Line> = rows
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let text = format!(
                "{} worker {}  task {}{}  {:.1} ms{}",
                if i == pick { "▶" } else { " " },
                s.worker,
                s.task_id,
                s.task_name.as_deref().map(|n| format!(" ({n})")).unwrap_or_default(),
                s.duration_ns as f64 / 1e6,
                if s.ongoing { " so far, still running" } else { "" }
            );
            if s.ongoing {
                Line::styled(text, Style::new().fg(Color::Red))
            } else {
                Line::from(text)
            }
        })
        .collect();
    lines.push(Line::from(""));
    lines.extend(stack_lines(rows[pick], app.screen.unfold_frames));
    f.render_widget(Paragraph::new(lines).block(block), area);
}

/// A stall's stack, innermost first: with `unfold`, every frame (the plumbing dimmed);
/// without, the program's own frames, and a line saying how many were folded away.
fn stack_lines(s: &proto::Stall, unfold: bool) -> Vec<Line<'static>> {
    let mut lines = vec![Line::styled("stack, innermost first", Style::new().add_modifier(Modifier::BOLD))];
    if s.stack.is_empty() {
        let why = s.missing_stack.as_deref().unwrap_or("none was taken");
        lines.push(Line::from(format!("  (no stack: {why})")));
        return lines;
    }
    if let Some(after) = s.stack_taken_after_ns {
        lines.push(Line::styled(
            format!("  taken {:.1} ms into the poll", after as f64 / 1e6),
            Style::new().fg(Color::DarkGray),
        ));
    }
    let frame = |fr: &proto::StackFrame| match &fr.location {
        Some(l) => format!("  {} at {l}", fr.function),
        None => format!("  {}", fr.function),
    };
    let folded = s.stack.iter().filter(|fr| fr.plumbing).count();
    if unfold || folded == s.stack.len() {
        lines.extend(s.stack.iter().map(|fr| {
            if fr.plumbing {
                Line::styled(frame(fr), Style::new().fg(Color::DarkGray))
            } else {
                Line::from(frame(fr))
            }
        }));
    } else {
        lines.extend(s.stack.iter().filter(|fr| !fr.plumbing).map(|fr| Line::from(frame(fr))));
        lines.push(Line::styled(
            format!("  ({folded} frames of the runtime, std and the C library folded: f shows them)"),
            Style::new().fg(Color::DarkGray),
        ));
    }
    lines
}

fn draw_detail(f: &mut Frame, app: &App, area: Rect) {
    f.render_widget(Clear, area);
    let block = Block::default().borders(Borders::ALL).title(" task (Esc closes) ");
    let (Some(detail), Some((row, events))) = (&app.model.detail, app.model.detail_task()) else {
        f.render_widget(Paragraph::new("this task has finished").block(block), area);
        return;
    };
    let t = &row.task;
    let mut lines = vec![
        Line::from(format!("id          {}", t.id)),
        Line::from(format!("name        {}", t.name.as_deref().unwrap_or("-"))),
        Line::from(format!("spawned at  {}", t.spawned_at.as_deref().unwrap_or("-"))),
        Line::from(format!("polls       {}", t.polls)),
        Line::from(format!("busy        {}", dur(t.busy_ns))),
        Line::from(format!("scheduled   {}", dur(t.scheduled_ns))),
        Line::from(format!("mean poll   {}", t.busy_ns.checked_div(t.polls).map_or("-".into(), dur))),
    ];
    let aged = |ns: u64| dur(ns + app.model.uptime_ns.saturating_sub(row.seen_at_ns));
    lines.extend(waiting_lines(t, t.waiting_since_ns.map_or("-".into(), aged)));
    if let Some(by) = &t.last_woken_by {
        let name = t.last_woken_by_task.map(|id| app.model.task_name(id)).unwrap_or_default();
        lines.push(Line::from(format!("last woken by {by}{name}, {} ago", t.last_woken_ns.map_or("-".into(), aged))));
    }
    if !detail.holds.is_empty() {
        let held: Vec<String> = detail.holds.iter().map(resources::short).collect();
        lines.push(Line::from(format!("holds       {}", held.join(", "))));
    }
    if let Some((polls, sched)) = &detail.histograms {
        lines.push(Line::from(format!("poll times  {}", histogram_line(polls))));
        lines.push(Line::from(format!("queued      {}", histogram_line(sched))));
    }
    lines.extend([
        Line::from(""),
        Line::from(vec![
            Span::styled("recent events", Style::new().add_modifier(Modifier::BOLD)),
            Span::raw(match &detail.history {
                None => String::new(),
                Some(TaskHistory::Pending) => "  (asking the server for older ones...)".into(),
                Some(TaskHistory::Events(h)) => {
                    format!("  ({} from the server's history, then this console's)", h.len())
                }
                Some(TaskHistory::Unavailable(why)) => format!("  (this console's only: {why})"),
            }),
        ]),
    ]);
    let room = area.height.saturating_sub(lines.len() as u16 + 2) as usize;
    lines.extend(events.iter().rev().take(room).rev().map(|e| Line::from(event_line(e))));
    f.render_widget(Paragraph::new(lines).block(block), area);
}

/// The help text: at most 56 columns a line, so the box fits a 60-column terminal.
const HELP: &str = "\
q, Ctrl-C     quit
Tab, S-Tab    next / previous view
w t o e s r   workers, tasks, groups, events, stalls,
              resources (locks: holders, waiters)
↑ ↓, j k      move        g G   first / last
Enter         task details (tasks view); Esc closes
b p n l       sort by busy, polls, name, longest wait
              (groups: b p n)
/ f           filter tasks by name, by state
f             stalls view: unfold / fold plumbing frames
space         pause this display (replay: playback)
. or →        replay: step one update while paused
?             this help (any key closes it)

Header warnings: a deadlock, a poll over 10 ms, a
worker parked while the global queue has work, missed
events or updates, a task waking itself endlessly, a
stall (s: its stack), a task that can never be woken.";

/// The help box, sized to its text and centred in `screen` (never bigger than it).
fn draw_help(f: &mut Frame, screen: Rect) {
    let text_w = HELP.lines().map(|l| l.chars().count()).max().unwrap_or(0) as u16;
    let (w, h) = ((text_w + 2).min(screen.width), (HELP.lines().count() as u16 + 2).min(screen.height));
    let area =
        Rect { x: screen.x + (screen.width - w) / 2, y: screen.y + (screen.height - h) / 2, width: w, height: h };
    f.render_widget(Clear, area);
    f.render_widget(
        Paragraph::new(HELP).wrap(Wrap { trim: false }).block(Block::default().borders(Borders::ALL).title(" help ")),
        area,
    );
}

fn draw_footer(f: &mut Frame, app: &App, area: Rect) {
    let tab = |v: View, s: &'static str| {
        if app.screen.view == v {
            Span::styled(s, Style::new().add_modifier(Modifier::REVERSED))
        } else {
            Span::raw(s)
        }
    };
    // "? help" and "q quit" always show; the other hints go, last first, when the line
    // is too narrow for them.
    let mut hints = vec!["Tab switch", "j/k move", "Enter details", "space pause"];
    let kept = ["? help", "q quit"];
    let tabs = [" w workers ", " t tasks ", " o groups ", " e events ", " s stalls ", " r resources "];
    let width = |hints: &[&str]| {
        tabs.iter().map(|t| t.chars().count()).sum::<usize>()
            + hints.iter().chain(kept.iter()).map(|h| h.chars().count() + 2).sum::<usize>()
    };
    while !hints.is_empty() && width(&hints) > area.width as usize {
        hints.pop();
    }
    let keys: String = hints.iter().chain(kept.iter()).map(|h| format!("  {h}")).collect();
    f.render_widget(
        Paragraph::new(Line::from(vec![
            tab(View::Workers, tabs[0]),
            tab(View::Tasks, tabs[1]),
            tab(View::Groups, tabs[2]),
            tab(View::Events, tabs[3]),
            tab(View::Stalls, tabs[4]),
            tab(View::Resources, tabs[5]),
            Span::styled(keys, Style::new().fg(Color::DarkGray)),
        ])),
        area,
    );
}

fn centered(r: Rect, pct_x: u16, pct_y: u16) -> Rect {
    // In u32: a terminal wider than 655 columns would overflow `width * pct` in u16.
    let w = (r.width as u32 * pct_x.min(100) as u32 / 100) as u16;
    let h = (r.height as u32 * pct_y.min(100) as u32 / 100) as u16;
    Rect { x: r.x + (r.width - w) / 2, y: r.y + (r.height - h) / 2, width: w, height: h }
}
