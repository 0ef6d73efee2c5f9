//! Text from sessions, tool output and file names on its way to a terminal:
//! control characters escaped, so a session cannot drive the user's terminal.

use std::borrow::Cow;
use std::fmt::Write as _;

/// `text` with every control character (C0 except none, DEL, C1) and the
/// Unicode bidirectional overrides written as visible escapes (`\e`, `\n`,
/// `\x07`, `\u{202e}`); everything else unchanged.
pub fn escape(text: &str) -> Cow<'_, str> {
    if !text.chars().any(needs_escape) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if !needs_escape(c) {
            out.push(c);
            continue;
        }
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{1b}' => out.push_str("\\e"),
            c if (c as u32) < 0x100 => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
        }
    }
    Cow::Owned(out)
}

fn needs_escape(c: char) -> bool {
    c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// Cuts `line` to `width` display columns (one per character), marking the cut.
pub fn fit(line: &str, width: usize) -> Cow<'_, str> {
    if width == 0 || line.chars().count() <= width {
        return Cow::Borrowed(line);
    }
    let mut out: String = line.chars().take(width.saturating_sub(1)).collect();
    out.push('…');
    Cow::Owned(out)
}

/// The terminal's width when stdout is one (`COLUMNS`, else 100), else `None`.
pub fn stdout_width() -> Option<usize> {
    use std::io::IsTerminal;
    if !std::io::stdout().is_terminal() {
        return None;
    }
    Some(
        std::env::var("COLUMNS")
            .ok()
            .and_then(|c| c.parse().ok())
            .filter(|&c: &usize| c >= 20)
            .unwrap_or(100),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_what_drives_a_terminal() {
        assert_eq!(escape("plain ✓"), "plain ✓");
        assert_eq!(escape("a\u{1b}[31mred\u{7}"), "a\\e[31mred\\x07");
        assert_eq!(escape("x\u{9b}2J"), "x\\x9b2J");
        assert_eq!(escape("ab\u{202e}cd"), "ab\\u{202e}cd");
        assert_eq!(escape("l1\nl2\t"), "l1\\nl2\\t");
    }

    #[test]
    fn fit_cuts_by_characters() {
        assert_eq!(fit("ééééé", 3), "éé…");
        assert_eq!(fit("abc", 3), "abc");
    }
}
