//! The header: the source, the connection's state and the headline figures on the first
//! line, then the warnings (at most four lines of them).

use super::fit::fit_words;
use super::format::si;
use crate::app::{App, Status};
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};
use ratatui::Frame;

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

/// Draw the header in `area`, with `warnings` (the first four).
pub(super) fn draw_header(f: &mut Frame, app: &App, warnings: &[String], area: Rect) {
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
