//! The task detail box, over the tasks view: the task's figures, what it waits on and
//! holds, its histograms, and its events (the server's history, then this console's).

use super::events::event_line;
use super::format::dur;
use super::resources;
use crate::app::{App, TaskHistory};
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph};
use ratatui::Frame;
use volt_console_proto as proto;

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

/// Draw the detail box of the task the model follows in `area`.
pub(super) fn draw_detail(f: &mut Frame, app: &App, area: Rect) {
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
