//! Text from sessions, tool output and file names on its way to a terminal:
//! control characters escaped, so a session cannot drive the user's terminal.

use std::borrow::Cow;
use std::fmt::Write as _;

/// `text` with every control character (C0 except none, DEL, C1) and every
/// invisible Unicode character ([`bh_report::hidden`]) written as visible escapes (`\e`, `\n`,
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

/// [`escape`] for streamed output: newlines and tabs stay as they are (the
/// output's own layout), every other control character is escaped.
pub fn escape_keep_newlines(text: &str) -> Cow<'_, str> {
    if !text
        .chars()
        .any(|c| needs_escape(c) && c != '\n' && c != '\t')
    {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        for (j, cell) in line.split('\t').enumerate() {
            if j > 0 {
                out.push('\t');
            }
            out.push_str(&escape(cell));
        }
    }
    Cow::Owned(out)
}

fn needs_escape(c: char) -> bool {
    // Controls, and everything a terminal would not show: format
    // characters (TAG, zero-width, bidi, U+2060…, U+FEFF, soft hyphen),
    // U+2028/9, variation selectors, private use (`bh_report::hidden`).
    c.is_control() || bh_report::hidden(c)
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

/// `--color`: when diffs are coloured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ColorWhen {
    /// When stdout is a terminal and `NO_COLOR` is unset.
    Auto,
    Always,
    Never,
}

/// Whether to colour stdout under `when` (never with `--json`).
pub fn use_color(when: ColorWhen, json: bool) -> bool {
    use std::io::IsTerminal;
    match when {
        _ if json => false,
        ColorWhen::Always => true,
        ColorWhen::Never => false,
        ColorWhen::Auto => {
            std::io::stdout().is_terminal()
                && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
        }
    }
}

/// A diffstat line (` path | 3 ++-`) with its `+` run green and its `-` run
/// red, as git colours it; any other line unchanged.
fn paint_stat_line(line: &str) -> Cow<'_, str> {
    let Some((head, tail)) = line.rsplit_once(" | ") else {
        return Cow::Borrowed(line);
    };
    let count = tail.trim_start();
    let digits = count.bytes().take_while(u8::is_ascii_digit).count();
    let Some(bars) = count.get(digits..).and_then(|r| r.strip_prefix(' ')) else {
        return Cow::Borrowed(line);
    };
    if digits == 0 || bars.is_empty() || !bars.bytes().all(|b| b == b'+' || b == b'-') {
        return Cow::Borrowed(line);
    }
    let plus = bars.bytes().take_while(|&b| b == b'+').count();
    let (adds, dels) = bars.split_at(plus);
    let pad = &tail[..tail.len() - count.len()];
    let mut out = format!("{head} | {pad}{} ", &count[..digits]);
    if !adds.is_empty() {
        out.push_str(&format!("\x1b[32m{adds}\x1b[m"));
    }
    if !dels.is_empty() {
        out.push_str(&format!("\x1b[31m{dels}\x1b[m"));
    }
    Cow::Owned(out)
}

/// A unified diff (or diffstat) for a person: on a terminal its lines with
/// control characters escaped; with `color`, `+`/`-` lines green/red, hunk
/// headers cyan and file headers bold. Elsewhere the bytes unchanged.
pub fn render_diff(text: &[u8], color: bool, terminal: bool) -> Vec<u8> {
    if !color && !terminal {
        return text.to_vec();
    }
    let mut out = Vec::with_capacity(text.len() + text.len() / 8);
    for line in text.split_inclusive(|&b| b == b'\n') {
        let body = line.strip_suffix(b"\n").unwrap_or(line);
        let shown = String::from_utf8_lossy(body);
        let shown = if terminal {
            // Tabs stay tabs (indentation); everything else that drives a
            // terminal is escaped.
            Cow::Owned(shown.split('\t').map(escape).collect::<Vec<_>>().join("\t"))
        } else {
            shown
        };
        let paint = if !color {
            None
        } else if body.starts_with(b"diff --git")
            || body.starts_with(b"+++ ")
            || body.starts_with(b"--- ")
            || body.starts_with(b"index ")
        {
            Some("1")
        } else if body.starts_with(b"@@") {
            Some("36")
        } else if body.starts_with(b"+") {
            Some("32")
        } else if body.starts_with(b"-") {
            Some("31")
        } else {
            None
        };
        match paint {
            Some(code) => {
                out.extend_from_slice(format!("\x1b[{code}m{shown}\x1b[m").as_bytes());
            }
            None if color => out.extend_from_slice(paint_stat_line(&shown).as_bytes()),
            None => out.extend_from_slice(shown.as_bytes()),
        }
        if line.ends_with(b"\n") {
            out.push(b'\n');
        }
    }
    out
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
    fn diffs_are_coloured_and_escaped_only_on_request() {
        let patch = b"--- a/x\n+++ b/x\n@@ -1 +1 @@\n-old\n+new \x1b[2J\n \tctx\n";
        assert_eq!(render_diff(patch, false, false), patch.to_vec());
        let plain = String::from_utf8(render_diff(patch, false, true)).unwrap();
        assert!(
            plain.contains("+new \\e[2J") && !plain.contains('\u{1b}'),
            "{plain}"
        );
        let coloured = String::from_utf8(render_diff(patch, true, true)).unwrap();
        assert!(coloured.contains("\x1b[31m-old\x1b[m\n"), "{coloured}");
        assert!(
            coloured.contains("\x1b[32m+new \\e[2J\x1b[m\n"),
            "{coloured}"
        );
        assert!(coloured.contains("\x1b[36m@@ -1 +1 @@\x1b[m"), "{coloured}");
        assert!(coloured.ends_with(" \tctx\n"), "{coloured}");
        // A diffstat is coloured as git colours it; its summary line is not.
        let stat = b" src/a.rs | 3 ++-\n b.txt    | 10 ----\n 2 files changed, 2 insertions(+), 5 deletions(-)\n";
        let coloured = String::from_utf8(render_diff(stat, true, true)).unwrap();
        assert!(
            coloured.contains(" src/a.rs | 3 \x1b[32m++\x1b[m\x1b[31m-\x1b[m\n"),
            "{coloured:?}"
        );
        assert!(
            coloured.contains(" b.txt    | 10 \x1b[31m----\x1b[m\n"),
            "{coloured:?}"
        );
        assert!(coloured.ends_with(" 2 files changed, 2 insertions(+), 5 deletions(-)\n"));
    }

    #[test]
    fn fit_cuts_by_characters() {
        assert_eq!(fit("ééééé", 3), "éé…");
        assert_eq!(fit("abc", 3), "abc");
    }
}
