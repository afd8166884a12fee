//! Fitting the human views into a terminal: the width to fit, tables whose columns
//! never split a word, and paragraphs wrapped with a hanging indent.

use comfy_table::presets::UTF8_BORDERS_ONLY;
use comfy_table::{ColumnConstraint, ContentArrangement, Table, Width};

/// The width every table view fits when nothing says otherwise, columns.
pub const DEFAULT_WIDTH: usize = 100;

/// Longest word a column is widened for; longer ones (rare: a very long volume name) may be
/// split rather than push the table past the width.
const MAX_UNSPLIT_WORD: usize = 40;

/// The width to fit, columns: `$COLUMNS` when it is a number of at least 40, else the
/// terminal's width when stdout is one, else [`DEFAULT_WIDTH`] (a pipe, a file, a test).
pub fn width() -> usize {
    if let Some(w) = std::env::var("COLUMNS")
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|w| *w >= 40)
    {
        return w;
    }
    // comfy-table reads the terminal's size when stdout is one.
    if std::io::IsTerminal::is_terminal(&std::io::stdout())
        && let Some(w) = Table::new().width()
        && w >= 40
    {
        return usize::from(w);
    }
    DEFAULT_WIDTH
}

/// A table with `header`, borders only, fitting `width` columns: cells wrap at spaces, and each
/// column is at least as wide as the longest word in it (up to 40), so that an id or a name is
/// never split in the middle. Add rows with [`fill`].
pub fn table(header: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_BORDERS_ONLY)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_header(header.to_vec());
    t.set_width(u16::try_from(width()).unwrap_or(u16::MAX));
    t
}

/// A table with `header`, borders only, each column as wide as its widest cell: for the views
/// that fit the width themselves (`decisions list` shortens its ids, `clusters` is narrow).
pub fn bordered(header: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_BORDERS_ONLY).set_header(header.to_vec());
    t
}

/// Adds `rows` to `t`, then sets each column's lower bound to its longest word.
pub fn fill(t: &mut Table, header: &[&str], rows: Vec<Vec<String>>) {
    let mut longest: Vec<usize> = header.iter().map(|h| longest_word(h)).collect();
    for row in &rows {
        for (i, cell) in row.iter().enumerate() {
            if let Some(l) = longest.get_mut(i) {
                *l = (*l).max(longest_word(cell));
            }
        }
    }
    for row in rows {
        t.add_row(row);
    }
    // Bounds count the cell's padding, one space each side. When the bounds alone pass the
    // width (less the two outer borders and the one-character gap between columns), the widest
    // give way first: a very long word is then split rather than the table made wider than the
    // terminal.
    let mut bounds: Vec<usize> = longest.into_iter().map(|l| l.min(MAX_UNSPLIT_WORD) + 2).collect();
    let budget = width().saturating_sub(2 + bounds.len().saturating_sub(1));
    while bounds.iter().sum::<usize>() > budget {
        let Some(widest) = bounds.iter_mut().max() else { break };
        if *widest <= 5 {
            break;
        }
        *widest -= 1;
    }
    for (i, b) in bounds.into_iter().enumerate() {
        if let Some(c) = t.column_mut(i) {
            c.set_constraint(ColumnConstraint::LowerBoundary(Width::Fixed(
                u16::try_from(b).unwrap_or(u16::MAX),
            )));
        }
    }
}

fn longest_word(s: &str) -> usize {
    s.split_whitespace().map(|w| w.chars().count()).max().unwrap_or(0)
}

/// `text` wrapped to [`width`] columns, the first line after `first`, the others indented by
/// `rest`; lines break at spaces only, so a word, a path or a subject (`example.com/dirs`,
/// `deploy/examples/...`) is never split. Ends with a newline.
pub fn para(first: &str, rest: &str, text: &str) -> String {
    let opts = textwrap::Options::new(width())
        .initial_indent(first)
        .subsequent_indent(rest)
        .break_words(false)
        .word_separator(textwrap::WordSeparator::AsciiSpace)
        .word_splitter(textwrap::WordSplitter::NoHyphenation);
    let mut out = textwrap::fill(text, opts);
    out.push('\n');
    out
}

/// `s` cut to at most `max` characters, ending with `…` when cut.
pub fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncation_marks_the_cut() {
        assert_eq!(truncate("abcdef", 6), "abcdef");
        assert_eq!(truncate("abcdefg", 6), "abcde…");
    }

    #[test]
    fn tables_fit_the_width_even_when_the_words_alone_would_not() {
        let header = ["NAME", "DRIVER", "ANNOTATIONS", "ACCESS", "EPHEMERAL", "CREATE"];
        let long = "storageclass.kubernetes.io/is-default-class=true";
        let rows = vec![vec![
            "standard-tier".to_string(),
            "external".into(),
            long.into(),
            "groups [researchers]".into(),
            "all".into(),
            "nobody".into(),
        ]];
        let mut t = table(&header);
        fill(&mut t, &header, rows);
        let text = t.to_string();
        let w = width();
        assert!(text.lines().all(|l| l.chars().count() <= w), "{text}");
        assert!(text.contains("standard-tier"), "short ids stay whole: {text}");
    }

    #[test]
    fn paragraphs_never_split_words_and_hang() {
        let long = "word ".repeat(60);
        let p = para("  - ", "      ", &long);
        assert!(p.lines().all(|l| l.chars().count() <= DEFAULT_WIDTH));
        assert!(p.lines().skip(1).all(|l| l.starts_with("      word")));
    }
}
