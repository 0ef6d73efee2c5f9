//! Tool-call arguments of a finished call, as the current Pi (1.6) reads them: one full parse
//! of the complete text after Pi's `repairJson` (raw control characters inside strings escaped,
//! invalid escapes such as `\d` kept as literal text). Text that is still not a JSON object
//! gives `{}` plus an `argumentsError` naming the problem and quoting the text, so the call is
//! refused and the model is told why — never a salvaged prefix that looks valid.
//!
//! The error texts are those of V8's `JSON.parse` (Node 20, which Pi runs on), because Pi puts
//! them verbatim into the session file and into the tool result the model reads.

use serde_json::Value;

/// Pi's `parseToolCallArguments`: `(arguments, argumentsError)`.
pub fn parse_tool_call_arguments(text: &str) -> (Value, Option<String>) {
    if text.trim().is_empty() {
        return (Value::Object(Default::default()), None);
    }
    let outcome = match parse_json_with_repair(text) {
        Ok(Value::Object(map)) => return (Value::Object(map), None),
        Ok(_) => "Tool arguments must be a JSON object".to_owned(),
        Err(message) => message,
    };
    (
        Value::Object(Default::default()),
        Some(format!("{outcome}\n\nReceived arguments:\n{text}")),
    )
}

/// Pi's `parseJsonWithRepair`: parse as is; on failure parse the repaired text when the repair
/// changed anything. The error is V8's message for the text that was parsed last.
pub fn parse_json_with_repair(text: &str) -> Result<Value, String> {
    match serde_json::from_str::<Value>(text) {
        Ok(v) => Ok(v),
        Err(_) => {
            let repaired = repair_json(text);
            if repaired != text {
                serde_json::from_str::<Value>(&repaired).map_err(|e| v8_error(&repaired, &e))
            } else {
                Err(v8_error(text, &serde_error(text)))
            }
        }
    }
}

fn serde_error(text: &str) -> serde_json::Error {
    match serde_json::from_str::<Value>(text) {
        Err(e) => e,
        // Unreachable in practice: only called after a failed parse of the same text.
        Ok(_) => serde::de::Error::custom("invalid JSON"),
    }
}

fn v8_error(text: &str, fallback: &serde_json::Error) -> String {
    V8Check::new(text)
        .run()
        .err()
        .unwrap_or_else(|| fallback.to_string())
}

const VALID_ESCAPES: [char; 8] = ['"', '\\', '/', 'b', 'f', 'n', 'r', 't'];

/// Pi's `repairJson`.
pub fn repair_json(json: &str) -> String {
    let chars: Vec<char> = json.chars().collect();
    let mut out = String::with_capacity(json.len() + 8);
    let mut in_string = false;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if !in_string {
            out.push(c);
            in_string = c == '"';
            i += 1;
            continue;
        }
        if c == '"' {
            out.push(c);
            in_string = false;
            i += 1;
            continue;
        }
        if c == '\\' {
            let Some(&next) = chars.get(i + 1) else {
                out.push_str("\\\\");
                i += 1;
                continue;
            };
            if next == 'u' {
                let digits: String = chars.iter().skip(i + 2).take(4).collect();
                if digits.len() == 4 && digits.chars().all(|d| d.is_ascii_hexdigit()) {
                    out.push_str("\\u");
                    out.push_str(&digits);
                    i += 6;
                    continue;
                }
            }
            if VALID_ESCAPES.contains(&next) {
                out.push('\\');
                out.push(next);
                i += 2;
                continue;
            }
            out.push_str("\\\\");
            i += 1;
            continue;
        }
        match c {
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
        i += 1;
    }
    out
}

/// A validating scan that reports the first error the way V8's JSON parser words it.
/// Positions are UTF-16 code units, as in JavaScript.
struct V8Check<'a> {
    src: &'a str,
    chars: Vec<char>,
    /// UTF-16 offset of each char.
    offsets: Vec<usize>,
    i: usize,
}

impl<'a> V8Check<'a> {
    fn new(src: &'a str) -> Self {
        let chars: Vec<char> = src.chars().collect();
        let mut offsets = Vec::with_capacity(chars.len() + 1);
        let mut o = 0;
        for c in &chars {
            offsets.push(o);
            o += c.len_utf16();
        }
        offsets.push(o);
        V8Check {
            src,
            chars,
            offsets,
            i: 0,
        }
    }

    fn run(mut self) -> Result<(), String> {
        self.ws();
        self.value()?;
        self.ws();
        if self.i < self.chars.len() {
            return Err(format!(
                "Unexpected non-whitespace character after JSON at position {}",
                self.pos()
            ));
        }
        Ok(())
    }

    fn pos(&self) -> usize {
        self.offsets[self.i.min(self.chars.len())]
    }

    fn at(&self, what: &str) -> String {
        format!("{what} in JSON at position {}", self.pos())
    }

    fn peek(&self) -> Option<char> {
        self.chars.get(self.i).copied()
    }

    fn ws(&mut self) {
        while matches!(self.peek(), Some(' ' | '\t' | '\n' | '\r')) {
            self.i += 1;
        }
    }

    fn eos() -> String {
        "Unexpected end of JSON input".to_owned()
    }

    /// V8's "Unexpected token" message with its source context (10 characters each side
    /// once the text is longer than 21).
    fn unexpected(&self) -> String {
        let Some(c) = self.peek() else {
            return Self::eos();
        };
        let utf16: Vec<u16> = self.src.encode_utf16().collect();
        let len = utf16.len();
        let pos = self.pos();
        let slice = |a: usize, b: usize| String::from_utf16_lossy(&utf16[a..b.min(len)]);
        let context = if len <= 21 {
            format!("\"{}\"", self.src)
        } else if pos < 10 {
            format!("\"{}\"...", slice(0, pos + 10))
        } else if pos < len - 10 {
            format!("...\"{}\"...", slice(pos - 10, pos + 10))
        } else {
            format!("...\"{}\"", slice(pos - 10, len))
        };
        format!("Unexpected token '{c}', {context} is not valid JSON")
    }

    fn value(&mut self) -> Result<(), String> {
        match self.peek() {
            None => Err(Self::eos()),
            Some('{') => self.object(),
            Some('[') => self.array(),
            Some('"') => self.string(),
            Some('-' | '0'..='9') => self.number(),
            Some('t') => self.literal("true"),
            Some('f') => self.literal("false"),
            Some('n') => self.literal("null"),
            Some(_) => Err(self.unexpected()),
        }
    }

    fn literal(&mut self, word: &str) -> Result<(), String> {
        for w in word.chars() {
            match self.peek() {
                None => return Err(Self::eos()),
                Some(c) if c == w => self.i += 1,
                Some(_) => return Err(self.unexpected()),
            }
        }
        Ok(())
    }

    fn digits(&mut self) -> usize {
        let start = self.i;
        while matches!(self.peek(), Some('0'..='9')) {
            self.i += 1;
        }
        self.i - start
    }

    fn number(&mut self) -> Result<(), String> {
        if self.peek() == Some('-') {
            self.i += 1;
            if !matches!(self.peek(), Some('0'..='9')) {
                return Err(self.at("No number after minus sign"));
            }
        }
        if self.peek() == Some('0') {
            self.i += 1;
            if matches!(self.peek(), Some('0'..='9')) {
                return Err(self.at("Unexpected number"));
            }
        } else {
            self.digits();
        }
        if self.peek() == Some('.') {
            self.i += 1;
            if self.digits() == 0 {
                return Err(self.at("Unterminated fractional number"));
            }
        }
        if matches!(self.peek(), Some('e' | 'E')) {
            self.i += 1;
            if matches!(self.peek(), Some('+' | '-')) {
                self.i += 1;
            }
            if self.digits() == 0 {
                return Err(self.at("Exponent part is missing a number"));
            }
        }
        Ok(())
    }

    fn string(&mut self) -> Result<(), String> {
        let start = self.i;
        self.i += 1;
        loop {
            match self.peek() {
                None => {
                    self.i = start;
                    return Err(self.at_end_unterminated());
                }
                Some('"') => {
                    self.i += 1;
                    return Ok(());
                }
                Some('\\') => {
                    self.i += 1;
                    match self.peek() {
                        None => return Err(Self::eos()),
                        Some('u') => {
                            self.i += 1;
                            for _ in 0..4 {
                                match self.peek() {
                                    None => return Err(Self::eos()),
                                    Some(c) if c.is_ascii_hexdigit() => self.i += 1,
                                    Some(_) => return Err(self.at("Bad Unicode escape")),
                                }
                            }
                        }
                        Some(c) if VALID_ESCAPES.contains(&c) => self.i += 1,
                        Some(_) => return Err(self.at("Bad escaped character")),
                    }
                }
                Some(c) if (c as u32) < 0x20 => {
                    return Err(self.at("Bad control character in string literal"));
                }
                Some(_) => self.i += 1,
            }
        }
    }

    /// V8 reports an unterminated string at the end of the text.
    fn at_end_unterminated(&self) -> String {
        format!(
            "Unterminated string in JSON at position {}",
            self.offsets[self.chars.len()]
        )
    }

    fn array(&mut self) -> Result<(), String> {
        self.i += 1;
        self.ws();
        if self.peek() == Some(']') {
            self.i += 1;
            return Ok(());
        }
        loop {
            self.ws();
            self.value()?;
            self.ws();
            match self.peek() {
                None => return Err(Self::eos()),
                Some(',') => self.i += 1,
                Some(']') => {
                    self.i += 1;
                    return Ok(());
                }
                Some(_) => return Err(self.at("Expected ',' or ']' after array element")),
            }
        }
    }

    fn object(&mut self) -> Result<(), String> {
        self.i += 1;
        self.ws();
        match self.peek() {
            Some('}') => {
                self.i += 1;
                return Ok(());
            }
            Some('"') => {}
            _ => return Err(self.at("Expected property name or '}'")),
        }
        loop {
            self.ws();
            if self.peek() != Some('"') {
                return Err(self.at("Expected double-quoted property name"));
            }
            self.string()?;
            self.ws();
            if self.peek() != Some(':') {
                return Err(self.at("Expected ':' after property name"));
            }
            self.i += 1;
            self.ws();
            self.value()?;
            self.ws();
            match self.peek() {
                Some(',') => self.i += 1,
                Some('}') => {
                    self.i += 1;
                    return Ok(());
                }
                _ => return Err(self.at("Expected ',' or '}' after property value")),
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn err(s: &str) -> String {
        V8Check::new(s).run().unwrap_err()
    }

    /// Each expected text is what `JSON.parse` throws in Node 20 for the same input.
    #[test]
    fn v8_messages() {
        let cases = [
            (r#"{"a":"b"#, "Unterminated string in JSON at position 7"),
            (
                r#"{"a":1"#,
                "Expected ',' or '}' after property value in JSON at position 6",
            ),
            (r#"{"a":"#, "Unexpected end of JSON input"),
            (
                r#"{"a""#,
                "Expected ':' after property name in JSON at position 4",
            ),
            ("{", "Expected property name or '}' in JSON at position 1"),
            (
                r#"{"a":1,"#,
                "Expected double-quoted property name in JSON at position 7",
            ),
            (r#"{"a":tru"#, "Unexpected end of JSON input"),
            (
                r#"{"a":1}x"#,
                "Unexpected non-whitespace character after JSON at position 7",
            ),
            (
                r#"{"a":"\u12"}"#,
                "Bad Unicode escape in JSON at position 10",
            ),
            (
                "{a:1}",
                "Expected property name or '}' in JSON at position 1",
            ),
            (
                r#"{"a":-}"#,
                "No number after minus sign in JSON at position 6",
            ),
            (
                r#"{"a":1.}"#,
                "Unterminated fractional number in JSON at position 7",
            ),
            (r#"{"a":01}"#, "Unexpected number in JSON at position 6"),
            (r#"{"a":[1,"#, "Unexpected end of JSON input"),
            (
                r#"{"a":[1 2]}"#,
                "Expected ',' or ']' after array element in JSON at position 8",
            ),
            ("x", r#"Unexpected token 'x', "x" is not valid JSON"#),
            (
                r#"{"a":x}"#,
                r#"Unexpected token 'x', "{"a":x}" is not valid JSON"#,
            ),
            (
                r#"{"a":1,"b":[1,2,3],"c":x}"#,
                r#"Unexpected token 'x', ...",2,3],"c":x}" is not valid JSON"#,
            ),
            (
                r#"{"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa":x, "b":1}"#,
                r#"Unexpected token 'x', ..."aaaaaaaa":x, "b":1}" is not valid JSON"#,
            ),
            (
                r#"{"a":x11111111111111111111111111111111111111111111111111"#,
                r#"Unexpected token 'x', "{"a":x111111111"... is not valid JSON"#,
            ),
            (
                r#"{"a":1e}"#,
                "Exponent part is missing a number in JSON at position 7",
            ),
            (
                r#"{"a":"😀",x}"#,
                "Expected double-quoted property name in JSON at position 10",
            ),
        ];
        for (input, expected) in cases {
            assert_eq!(err(input), expected, "input {input:?}");
        }
    }

    #[test]
    fn repairs_what_pi_repairs() {
        assert_eq!(
            parse_json_with_repair("{\"a\":\"x\ty\nz\"}").unwrap(),
            json!({"a":"x\ty\nz"})
        );
        assert_eq!(
            parse_json_with_repair(r#"{"re":"\d+\.\w"}"#).unwrap(),
            json!({"re":"\\d+\\.\\w"})
        );
        assert_eq!(
            parse_json_with_repair(r#"{"a":"\u00e9\n"}"#).unwrap(),
            json!({"a":"é\n"})
        );
    }

    #[test]
    fn tool_arguments() {
        assert_eq!(parse_tool_call_arguments("  "), (json!({}), None));
        assert_eq!(
            parse_tool_call_arguments(r#"{"path":"a"}"#),
            (json!({"path":"a"}), None)
        );
        let (v, e) = parse_tool_call_arguments(r#"{"path":"a.txt","content":"hello wor"#);
        assert_eq!(v, json!({}));
        assert_eq!(
            e.unwrap(),
            "Unterminated string in JSON at position 36\n\nReceived arguments:\n{\"path\":\"a.txt\",\"content\":\"hello wor"
        );
        let (v, e) = parse_tool_call_arguments("[1]");
        assert_eq!(v, json!({}));
        assert_eq!(
            e.unwrap(),
            "Tool arguments must be a JSON object\n\nReceived arguments:\n[1]"
        );
    }
}
