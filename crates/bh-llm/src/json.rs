//! Small JSON helpers: best-effort parsing of streamed (incomplete) tool arguments,
//! and JSON-with-comments for Pi's `models.json`.

use serde_json::{Map, Value};

/// Parse tool-call arguments that may be incomplete (a stream cut mid-way), like Pi's
/// `parseStreamingJson`: complete JSON parses as is; otherwise open strings, arrays
/// and objects are closed; anything unusable becomes `{}`.
pub fn parse_streaming_json(s: &str) -> Value {
    let t = s.trim();
    if t.is_empty() {
        return Value::Object(Map::new());
    }
    if let Ok(v) = serde_json::from_str::<Value>(t) {
        return v;
    }
    // Try progressively shorter prefixes, closing what is open.
    let mut end = t.len();
    for _ in 0..64 {
        if let Some(v) = close_and_parse(&t[..end]) {
            return v;
        }
        // drop the last character (on a char boundary) and retry
        let mut e = end.saturating_sub(1);
        while e > 0 && !t.is_char_boundary(e) {
            e -= 1;
        }
        if e == 0 {
            break;
        }
        end = e;
    }
    Value::Object(Map::new())
}

fn close_and_parse(prefix: &str) -> Option<Value> {
    let mut stack = Vec::new();
    let mut in_str = false;
    let mut escaped = false;
    for c in prefix.chars() {
        if in_str {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_str = false;
            }
            continue;
        }
        match c {
            '"' => in_str = true,
            '{' => stack.push('}'),
            '[' => stack.push(']'),
            '}' | ']' => {
                stack.pop();
            }
            _ => {}
        }
    }
    if escaped {
        return None;
    }
    let mut candidate = prefix.to_owned();
    if in_str {
        candidate.push('"');
    }
    let trimmed = candidate.trim_end();
    if trimmed.ends_with(',') || trimmed.ends_with(':') {
        return None;
    }
    let mut candidate = trimmed.to_owned();
    while let Some(c) = stack.pop() {
        candidate.push(c);
    }
    serde_json::from_str(&candidate).ok()
}

/// Remove `//` and `/* */` comments and trailing commas outside strings, so that
/// `serde_json` reads the JSONC Pi accepts in `models.json` (0.73.1+).
pub fn strip_jsonc(src: &str) -> String {
    let chars: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    let mut in_str = false;
    while i < chars.len() {
        let c = chars[i];
        if in_str {
            out.push(c);
            if c == '\\' {
                if let Some(n) = chars.get(i + 1) {
                    out.push(*n);
                    i += 1;
                }
            } else if c == '"' {
                in_str = false;
            }
            i += 1;
            continue;
        }
        match (c, chars.get(i + 1)) {
            ('"', _) => {
                in_str = true;
                out.push(c);
                i += 1;
            }
            ('/', Some('/')) => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            ('/', Some('*')) => {
                i += 2;
                while i < chars.len() && !(chars[i] == '*' && chars.get(i + 1) == Some(&'/')) {
                    i += 1;
                }
                i += 2;
            }
            _ => {
                out.push(c);
                i += 1;
            }
        }
    }
    // trailing commas
    let chars: Vec<char> = out.chars().collect();
    let mut res = String::with_capacity(out.len());
    let mut in_str = false;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if in_str {
            res.push(c);
            if c == '\\' {
                if let Some(n) = chars.get(i + 1) {
                    res.push(*n);
                    i += 1;
                }
            } else if c == '"' {
                in_str = false;
            }
        } else if c == '"' {
            in_str = true;
            res.push(c);
        } else if c == ',' {
            let next = chars[i + 1..].iter().find(|c| !c.is_whitespace());
            if !matches!(next, Some('}') | Some(']')) {
                res.push(c);
            }
        } else {
            res.push(c);
        }
        i += 1;
    }
    res
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn partial_json() {
        assert_eq!(parse_streaming_json(r#"{"a":1}"#), json!({"a":1}));
        assert_eq!(parse_streaming_json(r#"{"path":"no"#), json!({"path":"no"}));
        assert_eq!(parse_streaming_json(r#"{"a":[1,2"#), json!({"a":[1,2]}));
        assert_eq!(parse_streaming_json(r#"{"a":1,"b"#), json!({"a":1}));
        assert_eq!(parse_streaming_json(""), json!({}));
        assert_eq!(parse_streaming_json("garbage"), json!({}));
    }

    #[test]
    fn jsonc() {
        let src = "{\n // c\n \"a\": \"x//y\", /* b */ \"b\": [1,2,],\n}";
        let v: Value = serde_json::from_str(&strip_jsonc(src)).unwrap();
        assert_eq!(v, json!({"a":"x//y","b":[1,2]}));
    }
}
