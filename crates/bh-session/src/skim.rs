//! Finding fields in a JSON line without decoding it: raw value slices by
//! position, strings jumped over with `memchr` (tool outputs and thinking run
//! to many kilobytes, and a view needs a few fields of each line). Malformed
//! input yields `None`/fewer fields, never a panic.

use memchr::memchr;

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\n' | b'\r') {
        i += 1;
    }
    i
}

/// The end (exclusive) of the string starting at `i` (a `"`): the next quote
/// not escaped by an odd run of backslashes, so a long string with many
/// escapes is still crossed in one `memchr`.
fn string_end(b: &[u8], i: usize) -> Option<usize> {
    let mut j = i + 1;
    loop {
        let q = j + memchr(b'"', b.get(j..)?)?;
        let backslashes = b[i + 1..q]
            .iter()
            .rev()
            .take_while(|&&c| c == b'\\')
            .count();
        if backslashes % 2 == 0 {
            return Some(q + 1);
        }
        j = q + 1;
    }
}

/// The end (exclusive) of the value starting at `i`.
fn value_end(b: &[u8], i: usize) -> Option<usize> {
    match b.get(i)? {
        b'"' => string_end(b, i),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut j = i;
            while j < b.len() {
                match b[j] {
                    b'"' => {
                        j = string_end(b, j)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(j + 1);
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
            None
        }
        _ => {
            let mut j = i;
            while j < b.len() && !matches!(b[j], b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r')
            {
                j += 1;
            }
            (j > i).then_some(j)
        }
    }
}

/// A position in a JSON text, for walking a known structure in one pass:
/// the walker descends into the values it knows and skips the others.
pub(crate) struct Cursor<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(b: &'a [u8]) -> Cursor<'a> {
        Cursor { b, i: 0 }
    }

    fn ws(&mut self) {
        self.i = skip_ws(self.b, self.i);
    }

    /// The raw value here (skipped, not decoded).
    pub(crate) fn raw(&mut self) -> Option<&'a [u8]> {
        self.ws();
        let start = self.i;
        self.i = value_end(self.b, start)?;
        Some(&self.b[start..self.i])
    }

    /// Walks the object here: `f` gets each key and must consume its value
    /// (with [`Cursor::raw`], [`Cursor::object`] or [`Cursor::array`]).
    /// `None` when the text is not an object or is malformed.
    pub(crate) fn object(
        &mut self,
        mut f: impl FnMut(&'a [u8], &mut Cursor<'a>) -> Option<()>,
    ) -> Option<()> {
        self.ws();
        if self.b.get(self.i) != Some(&b'{') {
            self.raw()?;
            return None;
        }
        self.i += 1;
        loop {
            self.ws();
            match self.b.get(self.i)? {
                b'}' => {
                    self.i += 1;
                    return Some(());
                }
                b',' => {
                    self.i += 1;
                    continue;
                }
                b'"' => {}
                _ => return None,
            }
            let end = string_end(self.b, self.i)?;
            let key = &self.b[self.i + 1..end - 1];
            self.i = skip_ws(self.b, end);
            if self.b.get(self.i) != Some(&b':') {
                return None;
            }
            self.i += 1;
            f(key, self)?;
        }
    }

    /// Walks the array here: `f` must consume each element.
    pub(crate) fn array(&mut self, mut f: impl FnMut(&mut Cursor<'a>) -> Option<()>) -> Option<()> {
        self.ws();
        if self.b.get(self.i) != Some(&b'[') {
            self.raw()?;
            return None;
        }
        self.i += 1;
        loop {
            self.ws();
            match self.b.get(self.i)? {
                b']' => {
                    self.i += 1;
                    return Some(());
                }
                b',' => {
                    self.i += 1;
                    continue;
                }
                _ => f(self)?,
            }
        }
    }

    /// The first non-blank byte here.
    pub(crate) fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.b.get(self.i).copied()
    }
}

/// The value of field `key` of object `b` (the first one, as found).
pub(crate) fn field<'a>(b: &'a [u8], key: &str) -> Option<&'a [u8]> {
    let mut found = None;
    let _ = Cursor::new(b).object(|k, c| {
        let raw = c.raw()?;
        if found.is_none() && k == key.as_bytes() {
            found = Some(raw);
        }
        Some(())
    });
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `(key, raw value)` pairs of an object, through the cursor.
    fn fields(b: &[u8]) -> Vec<(&[u8], &[u8])> {
        let mut out = Vec::new();
        let _ = Cursor::new(b).object(|k, c| {
            out.push((k, c.raw()?));
            Some(())
        });
        out
    }

    /// The raw elements of an array, through the cursor.
    fn elements(b: &[u8]) -> Vec<&[u8]> {
        let mut out = Vec::new();
        let _ = Cursor::new(b).array(|c| {
            out.push(c.raw()?);
            Some(())
        });
        out
    }

    #[test]
    fn walks_objects_and_arrays_over_tricky_strings() {
        let line =
            br#" { "a" : "x\"}]\\" , "b":[1, {"c":"]"}, "d\\"], "e":true,"f":null,"g":-1.5e3 } "#;
        let got = fields(line);
        assert_eq!(got.len(), 5);
        assert_eq!(got[0], (&b"a"[..], &br#""x\"}]\\""#[..]));
        assert_eq!(got[1].1, &br#"[1, {"c":"]"}, "d\\"]"#[..]);
        assert_eq!(got[2].1, b"true");
        assert_eq!(got[4].1, b"-1.5e3");
        let elems = elements(got[1].1);
        assert_eq!(
            elems,
            vec![&b"1"[..], &br#"{"c":"]"}"#[..], &br#""d\\""#[..]]
        );
        assert_eq!(field(elems[1], "c"), Some(&br#""]""#[..]));
    }

    #[test]
    fn malformed_input_ends_the_walk() {
        assert!(fields(br#"{"a":"unterminated"#).is_empty());
        assert!(fields(b"[1,2]").is_empty());
        assert!(elements(b"{}").is_empty());
        assert_eq!(fields(br#"{"a":1,"b""#).len(), 1);
        assert_eq!(elements(b"[1,[2,"), vec![&b"1"[..]]);
    }

    /// Every line of every stored real-Pi fixture: the walk finds exactly the
    /// fields serde_json finds, and each raw value parses to the same value.
    #[test]
    fn agrees_with_serde_json_on_every_fixture_line() {
        fn check(raw: &[u8], depth: usize) {
            let v: serde_json::Value = serde_json::from_slice(raw).unwrap();
            match &v {
                serde_json::Value::Object(map) => {
                    let got = fields(raw);
                    assert_eq!(got.len(), map.len(), "{}", String::from_utf8_lossy(raw));
                    for (k, val) in got {
                        let key = std::str::from_utf8(k).unwrap();
                        let parsed: serde_json::Value = serde_json::from_slice(val).unwrap();
                        assert_eq!(map.get(key), Some(&parsed));
                        if depth < 4 {
                            check(val, depth + 1);
                        }
                    }
                }
                serde_json::Value::Array(items) => {
                    let got = elements(raw);
                    assert_eq!(got.len(), items.len());
                    for (raw_item, item) in got.iter().zip(items) {
                        let parsed: serde_json::Value = serde_json::from_slice(raw_item).unwrap();
                        assert_eq!(&parsed, item);
                        if depth < 4 {
                            check(raw_item, depth + 1);
                        }
                    }
                }
                _ => {}
            }
        }
        let root =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/pi-0.73.1");
        let mut lines = 0;
        let mut stack = vec![root];
        while let Some(dir) = stack.pop() {
            for e in fs_err::read_dir(&dir).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    stack.push(p);
                } else if p.extension().is_some_and(|x| x == "jsonl") {
                    for line in fs_err::read(&p).unwrap().split(|&b| b == b'\n') {
                        if serde_json::from_slice::<serde_json::Value>(line).is_ok() {
                            check(line, 0);
                            lines += 1;
                        }
                    }
                }
            }
        }
        assert!(lines > 300, "{lines}");
    }
}
