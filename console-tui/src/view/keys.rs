//! What the keys do, on screen: the footer (the views' tabs and the main keys) and the
//! help box.

use crate::app::{App, View};
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Wrap};
use ratatui::Frame;

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
pub(super) fn draw_help(f: &mut Frame, screen: Rect) {
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

/// Draw the footer in `area`: the views' tabs, the current one marked, and the keys.
pub(super) fn draw_footer(f: &mut Frame, app: &App, area: Rect) {
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
