//! The list views' tables, drawn alike.

use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Table, TableState};
use ratatui::Frame;

/// One of the list views' tables: bordered, titled, the row `selected` (if any) shown
/// reversed.
pub(super) fn draw_table<'a>(
    f: &mut Frame,
    area: Rect,
    table: Table<'a>,
    title: impl Into<Line<'a>>,
    selected: Option<usize>,
) {
    let mut state = TableState::default().with_selected(selected);
    let table = table
        .row_highlight_style(Style::new().add_modifier(Modifier::REVERSED))
        .block(Block::default().borders(Borders::ALL).title(title));
    f.render_stateful_widget(table, area, &mut state);
}
