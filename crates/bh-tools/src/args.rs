//! Argument checks with Pi's validation message shape
//! ([AI73] `validateToolArguments`):
//! `Validation failed for tool "NAME":\n  - FIELD: MESSAGE\n\nReceived arguments:\nJSON`.

use serde_json::{Map, Value};

/// Collects validation problems for one call.
pub struct Args<'a> {
    tool: &'static str,
    raw: &'a Value,
    obj: Option<&'a Map<String, Value>>,
    errors: Vec<String>,
}

impl<'a> Args<'a> {
    pub fn new(tool: &'static str, raw: &'a Value) -> Self {
        let obj = raw.as_object();
        let mut errors = Vec::new();
        if obj.is_none() {
            errors.push("  - root: must be object".to_string());
        }
        Args {
            tool,
            raw,
            obj,
            errors,
        }
    }

    fn get(&self, key: &str) -> Option<&'a Value> {
        self.obj.and_then(|o| o.get(key)).filter(|v| !v.is_null())
    }

    pub fn str_req(&mut self, key: &str) -> String {
        match self.get(key) {
            Some(Value::String(s)) => s.clone(),
            Some(_) => {
                self.errors.push(format!("  - {key}: must be string"));
                String::new()
            }
            None => {
                if self.obj.is_some() {
                    self.errors
                        .push(format!("  - {key}: must have required property '{key}'"));
                }
                String::new()
            }
        }
    }

    pub fn str_opt(&mut self, key: &str) -> Option<String> {
        match self.get(key) {
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => {
                self.errors.push(format!("  - {key}: must be string"));
                None
            }
            None => None,
        }
    }

    pub fn num_opt(&mut self, key: &str) -> Option<f64> {
        match self.get(key) {
            Some(Value::Number(n)) => n.as_f64(),
            // AJV with type coercion accepts numeric strings.
            Some(Value::String(s)) if s.trim().parse::<f64>().is_ok() => s.trim().parse().ok(),
            Some(_) => {
                self.errors.push(format!("  - {key}: must be number"));
                None
            }
            None => None,
        }
    }

    pub fn bool_opt(&mut self, key: &str) -> Option<bool> {
        match self.get(key) {
            Some(Value::Bool(b)) => Some(*b),
            Some(Value::String(s)) if s == "true" => Some(true),
            Some(Value::String(s)) if s == "false" => Some(false),
            Some(_) => {
                self.errors.push(format!("  - {key}: must be boolean"));
                None
            }
            None => None,
        }
    }

    pub fn push_error(&mut self, line: String) {
        self.errors.push(line);
    }

    /// `Err(message)` if anything was wrong.
    pub fn finish(self) -> Result<(), String> {
        if self.errors.is_empty() {
            return Ok(());
        }
        let pretty = serde_json::to_string_pretty(self.raw).unwrap_or_default();
        Err(format!(
            "Validation failed for tool \"{}\":\n{}\n\nReceived arguments:\n{}",
            self.tool,
            self.errors.join("\n"),
            pretty
        ))
    }
}

/// A JS-style non-negative integer from a JSON number (NaN/negative → 0).
pub fn to_count(n: f64) -> usize {
    if n.is_finite() && n > 0.0 {
        n.floor() as usize
    } else {
        0
    }
}
