//! The stalls view: the polls stalled now and the stalls that ended, and the picked
//! one's stack.

use crate::app::App;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Paragraph, Wrap};
use ratatui::Frame;
use volt_console_proto as proto;

/// The stalls view: the polls stalled now and the stalls that ended (newest first),
/// and the picked one's stack, the program's own frames first (the plumbing folded
/// unless `f` unfolded it).
pub(super) fn draw_stalls(f: &mut Frame, app: &App, area: Rect) {
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
