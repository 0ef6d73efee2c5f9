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

/// The policy line's words for how the host's Unix sockets are kept out
/// of reach (bash's sandbox, a task's worker).
pub fn unix_sockets_words(mode: bh_tools::UnixSockets) -> &'static str {
    match mode {
        bh_tools::UnixSockets::Checked => "host Unix sockets refused (each connect checked)",
        bh_tools::UnixSockets::Covered => {
            "host Unix sockets bound at the start covered (this kernel cannot check connects)"
        }
        bh_tools::UnixSockets::Denied => "no Unix socket at all (--no-unix-sockets)",
    }
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

/// `--color` (global): when output is coloured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ColorWhen {
    /// When the stream is a terminal, `NO_COLOR` is unset and `TERM` is not `dumb`.
    Auto,
    Always,
    Never,
}

/// The process's `--color`, set once by `main` before any command runs.
static COLOR: std::sync::OnceLock<ColorWhen> = std::sync::OnceLock::new();

/// Records `--color` for the whole process (the first call wins).
pub fn set_color(when: ColorWhen) {
    let _ = COLOR.set(when);
}

fn color_when() -> ColorWhen {
    COLOR.get().copied().unwrap_or(ColorWhen::Auto)
}

/// `auto`'s answer for a stream that is (or is not) a terminal.
fn auto_color(terminal: bool) -> bool {
    terminal
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
        && std::env::var_os("TERM").is_none_or(|t| t != "dumb")
}

/// Whether to colour stdout (never with `--json`).
pub fn color_stdout(json: bool) -> bool {
    use std::io::IsTerminal;
    match color_when() {
        _ if json => false,
        ColorWhen::Always => true,
        ColorWhen::Never => false,
        ColorWhen::Auto => auto_color(std::io::stdout().is_terminal()),
    }
}

/// Whether to colour stderr (diagnostics, progress, the agent's tool lines).
pub fn color_stderr() -> bool {
    use std::io::IsTerminal;
    match color_when() {
        ColorWhen::Always => true,
        ColorWhen::Never => false,
        ColorWhen::Auto => auto_color(std::io::stderr().is_terminal()),
    }
}

/// `text` in SGR `code` when `on`, else unchanged.
pub fn paint(on: bool, code: &str, text: &str) -> String {
    if on && !text.is_empty() {
        format!("\x1b[{code}m{text}\x1b[m")
    } else {
        text.to_owned()
    }
}

/// SGR codes of the views (git's choices where git has one).
pub mod style {
    pub const DIM: &str = "2";
    pub const BOLD: &str = "1";
    pub const RED: &str = "31";
    pub const GREEN: &str = "32";
    pub const YELLOW: &str = "33";
    pub const MAGENTA: &str = "35";
    pub const CYAN: &str = "36";
    pub const BOLD_GREEN: &str = "1;32";
    pub const BOLD_RED: &str = "1;31";
}

/// One line built from styled parts: each part escaped ([`escape`]), the
/// whole cut to a width by characters (as [`fit`]), then painted part by
/// part, so a colour never counts as width and a cut never splits a code.
/// Parts pushed with [`Styled::tail`] are kept whole: the cut falls before
/// them (a marker such as `← leaf` stays visible on a long line).
#[derive(Debug, Default)]
pub struct Styled {
    parts: Vec<(Option<&'static str>, String)>,
    tail: Vec<(Option<&'static str>, String)>,
}

type Parts = Vec<(Option<&'static str>, String)>;

impl Styled {
    pub fn new() -> Styled {
        Styled::default()
    }

    /// Appends `text` (escaped) in `style` (none: plain).
    pub fn push(&mut self, style: Option<&'static str>, text: &str) -> &mut Styled {
        self.parts.push((style, escape(text).into_owned()));
        self
    }

    /// Appends `text` (escaped) to the part that is never cut.
    pub fn tail(&mut self, style: Option<&'static str>, text: &str) -> &mut Styled {
        self.tail.push((style, escape(text).into_owned()));
        self
    }

    /// The line, trailing spaces dropped, cut to `width` columns when given
    /// (the last kept column of the body `…`, the tail whole), coloured when
    /// `color`.
    pub fn render(&self, width: Option<usize>, color: bool) -> String {
        let mut body = self.parts.clone();
        let mut tail = self.tail.clone();
        if tail.is_empty() {
            trim_end(&mut body);
        } else {
            trim_end(&mut tail);
        }
        let chars = |p: &Parts| p.iter().map(|(_, t)| t.chars().count()).sum::<usize>();
        let (body_len, tail_len) = (chars(&body), chars(&tail));
        let mut budget = match width {
            // Too narrow to keep the tail whole: cut the line as one.
            Some(w) if w > 0 && tail_len + 1 >= w && body_len + tail_len > w => {
                body.append(&mut tail);
                Some(w - 1)
            }
            Some(w) if w > 0 && body_len + tail_len > w => Some(w - 1 - tail_len),
            _ => None,
        };
        let cut = budget.is_some();
        let mut out = String::new();
        for (style, text) in &body {
            let taken: Cow<'_, str> = match budget.as_mut() {
                Some(0) => break,
                Some(b) => {
                    let t: String = text.chars().take(*b).collect();
                    *b -= t.chars().count();
                    Cow::Owned(t)
                }
                None => Cow::Borrowed(text.as_str()),
            };
            match style {
                Some(code) => out.push_str(&paint(color, code, &taken)),
                None => out.push_str(&taken),
            }
        }
        if cut {
            out.push('…');
        }
        for (style, text) in &tail {
            match style {
                Some(code) => out.push_str(&paint(color, code, text)),
                None => out.push_str(text),
            }
        }
        out
    }
}

/// Drops trailing spaces of the last parts (and parts left empty).
fn trim_end(parts: &mut Parts) {
    while let Some((_, last)) = parts.last_mut() {
        let kept = last.trim_end().len();
        last.truncate(kept);
        if !last.is_empty() {
            break;
        }
        parts.pop();
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
    fn styled_lines_cut_by_text_and_never_split_a_colour() {
        let mut l = Styled::new();
        l.push(None, "* ")
            .push(Some(style::YELLOW), "abcd1234")
            .push(None, " user: hi\u{1b}  ");
        assert_eq!(l.render(None, false), "* abcd1234 user: hi\\e");
        assert_eq!(l.render(None, true), "* \x1b[33mabcd1234\x1b[m user: hi\\e");
        // Cut inside the coloured part: the code is closed, the mark after it.
        assert_eq!(l.render(Some(6), true), "* \x1b[33mabc\x1b[m…");
        assert_eq!(l.render(Some(6), false), "* abc…");
        assert_eq!(l.render(Some(22), false), "* abcd1234 user: hi\\e");
        // The tail stays whole; the body is cut before it.
        l.tail(Some(style::BOLD_GREEN), "  ← leaf");
        assert_eq!(l.render(Some(16), false), "* abcd1…  ← leaf");
        assert_eq!(
            l.render(Some(16), true),
            "* \x1b[33mabcd1\x1b[m…\x1b[1;32m  ← leaf\x1b[m"
        );
        assert_eq!(l.render(None, false), "* abcd1234 user: hi\\e    ← leaf");
        // Narrower than the tail: cut as one line.
        assert_eq!(l.render(Some(5), false), "* ab…");
    }

    #[test]
    fn fit_cuts_by_characters() {
        assert_eq!(fit("ééééé", 3), "éé…");
        assert_eq!(fit("abc", 3), "abc");
    }
}
