//! The event log: the events view, and the pane under the workers.

use crate::app::{App, View};
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Paragraph};
use ratatui::Frame;

/// One event as a log line (the client library's formatter).
pub use volt_console_client::event_line;

/// The event log, scrolled so that event `focus` is in view (the newest at the bottom).
pub(super) fn draw_events(f: &mut Frame, app: &App, area: Rect, focus: usize) {
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
