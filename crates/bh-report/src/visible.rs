//! Every character of a text a person is asked to trust, shown: what a
//! terminal or browser would hide or obey is written `\u{…}` instead.

use std::borrow::Cow;
use std::fmt::Write as _;

/// Whether `c` would be invisible, reorder text, or act instead of showing:
/// control characters (tab and newline included — callers keep them where
/// they are layout), Unicode format characters (soft hyphen, zero-width
/// space/joiners, word joiner and invisible operators U+2060–U+206F, bidi
/// embeddings/overrides/isolates, U+FEFF, interlinear annotations), TAG
/// characters U+E0000–U+E007F, variation selectors, line/paragraph
/// separators U+2028/U+2029, fillers that render blank, private-use and
/// non-characters.
pub fn hidden(c: char) -> bool {
    let u = c as u32;
    c.is_control()
        || matches!(
            u,
            0x00AD
                | 0x034F
                | 0x061C
                | 0x115F
                | 0x1160
                | 0x17B4
                | 0x17B5
                | 0x180B..=0x180F
                | 0x200B..=0x200F
                | 0x2028..=0x202E
                | 0x2060..=0x206F
                | 0x3164
                | 0xFE00..=0xFE0F
                | 0xFEFF
                | 0xFFA0
                | 0xFFF0..=0xFFFB
                | 0x1BCA0..=0x1BCA3
                | 0x1D173..=0x1D17A
                | 0xE0000..=0xE0FFF
                | 0xE000..=0xF8FF
                | 0xF0000..=0x10FFFF
        )
        || (u & 0xFFFE) == 0xFFFE
        || (0xFDD0..=0xFDEF).contains(&u)
}

/// `text` with every [`hidden`] character but newline and tab written
/// `\u{hex}` (a backslash itself is left alone: this is for eyes, not for
/// parsing back). Borrowed when nothing needed escaping.
pub fn reveal(text: &str) -> Cow<'_, str> {
    if !text.chars().any(|c| c != '\n' && c != '\t' && hidden(c)) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if c != '\n' && c != '\t' && hidden(c) {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// How many characters of `text` [`reveal`] escapes (newline and tab not
/// counted): non-zero means the text holds something a person cannot see.
pub fn hidden_count(text: &str) -> usize {
    text.chars()
        .filter(|&c| c != '\n' && c != '\t' && hidden(c))
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tag_characters_and_zero_width_are_shown() {
        let tagged: String = "ignore"
            .chars()
            .map(|c| char::from_u32(0xE0000 + c as u32).unwrap_or('?'))
            .collect();
        let text = format!("Fix the bug.{tagged}\u{200b}\u{2060}\u{feff}\u{ad}\u{2028}\u{202e}");
        let shown = reveal(&text);
        assert_eq!(
            shown,
            "Fix the bug.\\u{e0069}\\u{e0067}\\u{e006e}\\u{e006f}\\u{e0072}\\u{e0065}\\u{200b}\\u{2060}\\u{feff}\\u{ad}\\u{2028}\\u{202e}"
        );
        assert_eq!(hidden_count(&text), 12);
        assert!(matches!(reveal("plain\n\ttext é ü 日本"), Cow::Borrowed(_)));
        assert_eq!(reveal("a\u{1b}[31m"), "a\\u{1b}[31m");
    }
}
