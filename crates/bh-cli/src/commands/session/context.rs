//! `bh session context`: the messages a model would see, exactly as Pi builds them.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::{load, out};
use crate::command_error::session_error;
use crate::context::Ctx;
use crate::error::{CliError, ErrorKind, print_json};

// The variant's doc comment in `SessionCmd` is the command's help.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The session: a file, or a session id prefix as Pi takes it.
    file: PathBuf,
    /// Build the context for this entry (id or unique prefix of at least 4
    /// hex digits) instead of the active leaf.
    #[arg(long, value_name = "ID")]
    entry: Option<String>,
}

pub(super) fn run(ctx: &Ctx, args: Args) -> Result<(), CliError> {
    context(ctx, &args.file, args.entry.as_deref())
}

fn preview(v: &Value) -> String {
    fn content_text(c: &Value) -> String {
        match c {
            Value::String(s) => s.clone(),
            Value::Array(blocks) => blocks
                .iter()
                .map(|b| match b.get("type").and_then(Value::as_str) {
                    Some("text") => b
                        .get("text")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_owned(),
                    Some("thinking") => format!(
                        "(thinking) {}",
                        b.get("thinking").and_then(Value::as_str).unwrap_or("")
                    ),
                    Some("toolCall") => format!(
                        "(tool call {} {})",
                        b.get("name").and_then(Value::as_str).unwrap_or("?"),
                        b.get("arguments").map(Value::to_string).unwrap_or_default()
                    ),
                    Some("image") => "(image)".to_owned(),
                    Some(other) => format!("({other})"),
                    None => String::new(),
                })
                .collect::<Vec<_>>()
                .join(" "),
            _ => String::new(),
        }
    }
    let role = v.get("role").and_then(Value::as_str).unwrap_or("?");
    let text = match role {
        "branchSummary" | "compactionSummary" => v
            .get("summary")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned(),
        "bashExecution" => format!(
            "$ {}\n{}",
            v.get("command").and_then(Value::as_str).unwrap_or(""),
            v.get("output").and_then(Value::as_str).unwrap_or("")
        ),
        "system" => {
            let sections: Vec<String> = v
                .get("sections")
                .and_then(Value::as_object)
                .map(|m| m.keys().cloned().collect())
                .unwrap_or_default();
            format!("(sections: {})", sections.join(", "))
        }
        _ => v.get("content").map(content_text).unwrap_or_default(),
    };
    let mut one: String = text.replace('\n', " ⏎ ");
    if one.chars().count() > 200 {
        one = one.chars().take(200).collect::<String>() + "…";
    }
    one
}

fn context(ctx: &Ctx, file: &Path, entry: Option<&str>) -> Result<(), CliError> {
    let s = load(ctx, file)?;
    if s.header().is_none() {
        return Err(CliError::new(
            ErrorKind::Invalid,
            format!("{}: not a Pi session (no header)", file.display()),
        ));
    }
    let entry = entry.map(|q| crate::names::entry_id(&s, q)).transpose()?;
    let c = s.context(entry.as_deref()).map_err(session_error)?;
    if ctx.json {
        let messages: Vec<Value> = c
            .messages
            .iter()
            .map(|m| serde_json::from_str(m.message.get()).unwrap_or(Value::Null))
            .collect();
        return print_json(&json!({
            "file": file.display().to_string(),
            "leaf": c.leaf,
            "thinkingLevel": c.thinking_level,
            "model": c.model,
            "system": c.system,
            "entryIds": c.messages.iter().map(|m| m.entry_id.clone()).collect::<Vec<_>>(),
            "messages": messages,
        }));
    }
    let mut t = String::new();
    t.push_str(&format!(
        "leaf {}  thinking {}  model {}\n",
        c.leaf.as_deref().unwrap_or("(none)"),
        c.thinking_level,
        c.model
            .as_ref()
            .map(|m| format!(
                "{}/{}",
                m.provider.as_deref().unwrap_or("?"),
                m.model_id.as_deref().unwrap_or("?")
            ))
            .unwrap_or_else(|| "(none)".to_owned())
    ));
    if let Some(sys) = &c.system {
        let names: Vec<&str> = sys.sections.iter().map(|(n, _)| n.as_str()).collect();
        t.push_str(&format!(
            "system prompt: sections [{}]  tools [{}]\n",
            names.join(", "),
            sys.tools.join(", ")
        ));
    }
    for (i, m) in c.messages.iter().enumerate() {
        let v: Value = serde_json::from_str(m.message.get()).unwrap_or(Value::Null);
        let role = v.get("role").and_then(Value::as_str).unwrap_or("?");
        t.push_str(&format!(
            "[{}] {role} ({}): {}\n",
            i + 1,
            m.entry_id,
            preview(&v)
        ));
    }
    if c.messages.is_empty() {
        t.push_str("(no messages)\n");
    }
    out(&t)
}
