//! A tool as offered to a model — the one `ToolSpec` of the workspace:
//! `bh-tools` defines the built-in ones (static), `bh-llm` sends them to a
//! provider, `bh-core` passes them from one to the other.

use std::borrow::Cow;

use serde_json::Value;
use serde_json::value::RawValue;

/// One tool: Pi's name, description and JSON-schema parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolSpec {
    pub name: Cow<'static, str>,
    pub description: Cow<'static, str>,
    /// The parameter schema, byte for byte as Pi sends it (compact JSON, Pi's key order).
    pub parameters_json: Cow<'static, str>,
    /// Whether the tool can change files (the agent loop checkpoints first).
    pub mutating: bool,
}

impl ToolSpec {
    /// A built-in tool, usable in a `static`.
    pub const fn builtin(
        name: &'static str,
        description: &'static str,
        parameters_json: &'static str,
        mutating: bool,
    ) -> ToolSpec {
        ToolSpec {
            name: Cow::Borrowed(name),
            description: Cow::Borrowed(description),
            parameters_json: Cow::Borrowed(parameters_json),
            mutating,
        }
    }

    /// A tool whose schema is a JSON value (compacted, keys in the value's order).
    pub fn new(
        name: impl Into<Cow<'static, str>>,
        description: impl Into<Cow<'static, str>>,
        parameters: &Value,
        mutating: bool,
    ) -> ToolSpec {
        ToolSpec {
            name: name.into(),
            description: description.into(),
            parameters_json: Cow::Owned(parameters.to_string()),
            mutating,
        }
    }

    /// The schema as a JSON value (keys sorted; use [`Self::parameters_raw`]
    /// to keep Pi's order). A schema that is not JSON reads as `null`.
    pub fn parameters(&self) -> Value {
        serde_json::from_str(&self.parameters_json).unwrap_or(Value::Null)
    }

    /// The schema as raw JSON, keeping Pi's key order when serialised.
    pub fn parameters_raw(&self) -> Result<Box<RawValue>, serde_json::Error> {
        RawValue::from_string(self.parameters_json.clone().into_owned())
    }
}
