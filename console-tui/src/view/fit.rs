//! Fitting text and tables to the room there is: words cut whole, table columns
//! dropped whole, a box centred. No value is ever cut halfway.

use ratatui::layout::Rect;

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

/// A box of `pct_x`% by `pct_y`% of `r`, centred in it.
pub(super) fn centered(r: Rect, pct_x: u16, pct_y: u16) -> Rect {
    // In u32: a terminal wider than 655 columns would overflow `width * pct` in u16.
    let w = (r.width as u32 * pct_x.min(100) as u32 / 100) as u16;
    let h = (r.height as u32 * pct_y.min(100) as u32 / 100) as u16;
    Rect { x: r.x + (r.width - w) / 2, y: r.y + (r.height - h) / 2, width: w, height: h }
}
