//! What the broker did with one command's git writes: the lines the tool
//! result carries for the model, and `details.git`.

use serde_json::{Value, json};

/// What the broker did with one command's git writes.
#[derive(Debug, Default)]
pub(crate) struct Brokered {
    /// `(ref, before, after)` carried over.
    pub applied: Vec<(String, Option<String>, Option<String>)>,
    /// `(what, why)` not carried over.
    pub refused: Vec<(String, String)>,
    pub index: bool,
    pub objects: usize,
    pub stash: Vec<String>,
}

impl Brokered {
    pub(crate) fn is_empty(&self) -> bool {
        self.applied.is_empty() && self.refused.is_empty() && !self.index && self.stash.is_empty()
    }

    /// The lines the tool result carries (the model reads them).
    pub(crate) fn note(&self) -> String {
        let short = |o: &Option<String>| match o.as_deref() {
            None => "(none)".to_owned(),
            Some(s) if s.starts_with("ref: ") => s.to_owned(),
            Some(s) => s.chars().take(12).collect(),
        };
        let mut lines = Vec::new();
        for (name, before, after) in &self.applied {
            lines.push(format!(
                "[git: {name} {} -> {}]",
                short(before),
                short(after)
            ));
        }
        for s in &self.stash {
            lines.push(format!("[git: stash {s}]"));
        }
        if self.index {
            lines.push("[git: index updated]".to_owned());
        }
        for (what, why) in &self.refused {
            lines.push(format!("[git: refused {what}: {why}]"));
        }
        lines.join("\n")
    }

    pub(crate) fn to_value(&self) -> Value {
        json!({
            "applied": self.applied.iter().map(|(n, b, a)| json!({"ref": n, "before": b, "after": a})).collect::<Vec<_>>(),
            "refused": self.refused.iter().map(|(w, y)| json!({"what": w, "why": y})).collect::<Vec<_>>(),
            "index": self.index,
            "objects": self.objects,
            "stash": self.stash,
        })
    }
}
