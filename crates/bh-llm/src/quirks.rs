//! Differences between OpenAI-compatible servers, as data (Pi's `compat` object).

use serde::{Deserialize, Serialize};

/// Which field carries the output-token limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MaxTokensField {
    MaxCompletionTokens,
    MaxTokens,
}

/// The quirks table. The field names follow Pi's `models.json` `compat` keys.
///
/// Parsing is always tolerant, whatever the flags say: tool-call ids that never arrive
/// are generated (`call_<uuid>`), arguments sent whole (as one string, as a JSON object,
/// or re-sent complete in every chunk) are accepted, `index` may be missing, a missing
/// `usage` leaves Pi's zero usage, and reasoning is read from `reasoning_content`,
/// `reasoning` or `reasoning_text`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Quirks {
    /// Send `store: false`.
    pub supports_store: bool,
    /// Send the system prompt as `developer` for reasoning models.
    pub supports_developer_role: bool,
    /// Send `reasoning_effort` for reasoning models when thinking is on.
    pub supports_reasoning_effort: bool,
    /// Send `stream_options: {include_usage: true}`.
    pub supports_usage_in_streaming: bool,
    pub max_tokens_field: MaxTokensField,
    /// Send `strict: false` in tool definitions.
    pub supports_strict_mode: bool,
    /// Add `name` to `role: "tool"` messages.
    pub requires_tool_result_name: bool,
    /// Insert an assistant message between tool results and a following user message.
    pub requires_assistant_after_tool_result: bool,
    /// Send earlier thinking as plain assistant text instead of `reasoning_content`.
    pub requires_thinking_as_text: bool,
}

impl Default for Quirks {
    fn default() -> Self {
        Quirks::openai()
    }
}

impl Quirks {
    /// api.openai.com and unknown servers (Pi's defaults).
    pub fn openai() -> Quirks {
        Quirks {
            supports_store: true,
            supports_developer_role: true,
            supports_reasoning_effort: true,
            supports_usage_in_streaming: true,
            max_tokens_field: MaxTokensField::MaxCompletionTokens,
            supports_strict_mode: true,
            requires_tool_result_name: false,
            requires_assistant_after_tool_result: false,
            requires_thinking_as_text: false,
        }
    }

    /// Ollama's `/v1` endpoint: no `developer` role, no `store`, `max_tokens`,
    /// arguments arrive whole, usage only with `stream_options`.
    pub fn ollama() -> Quirks {
        Quirks {
            supports_store: false,
            supports_developer_role: false,
            supports_reasoning_effort: false,
            max_tokens_field: MaxTokensField::MaxTokens,
            supports_strict_mode: false,
            ..Quirks::openai()
        }
    }

    /// llama.cpp `llama-server`: `reasoning_content`, `max_tokens`, no `developer`.
    pub fn llama_cpp() -> Quirks {
        Quirks {
            supports_store: false,
            supports_developer_role: false,
            supports_reasoning_effort: false,
            max_tokens_field: MaxTokensField::MaxTokens,
            supports_strict_mode: false,
            ..Quirks::openai()
        }
    }

    /// vLLM's OpenAI server: `max_tokens`, no `store`/`developer`.
    pub fn vllm() -> Quirks {
        Quirks {
            supports_store: false,
            supports_developer_role: false,
            max_tokens_field: MaxTokensField::MaxTokens,
            ..Quirks::openai()
        }
    }

    /// A named preset: `openai`, `ollama`, `llama.cpp` / `llamacpp` / `llama-cpp`, `vllm`.
    pub fn preset(name: &str) -> Option<Quirks> {
        match name.to_ascii_lowercase().as_str() {
            "openai" | "default" => Some(Quirks::openai()),
            "ollama" => Some(Quirks::ollama()),
            "llama.cpp" | "llamacpp" | "llama-cpp" | "llama-server" => Some(Quirks::llama_cpp()),
            "vllm" => Some(Quirks::vllm()),
            _ => None,
        }
    }

    /// Guess from the provider key and base URL (provider name first, then well-known
    /// ports/hosts), like Pi's `detectCompat`.
    pub fn detect(provider: &str, base_url: &str) -> Quirks {
        if let Some(q) = Quirks::preset(provider) {
            return q;
        }
        if base_url.contains(":11434") {
            return Quirks::ollama();
        }
        let non_standard = ["deepseek.com", "api.x.ai", "cerebras.ai", "chutes.ai"]
            .iter()
            .any(|h| base_url.contains(h));
        if non_standard {
            return Quirks {
                supports_store: false,
                supports_developer_role: false,
                ..Quirks::openai()
            };
        }
        Quirks::openai()
    }

    /// Apply Pi `compat` overrides (a `models.json` `compat` object or the TOML table).
    pub fn apply(&mut self, o: &QuirksOverride) {
        macro_rules! set {
            ($f:ident) => {
                if let Some(v) = o.$f {
                    self.$f = v;
                }
            };
        }
        set!(supports_store);
        set!(supports_developer_role);
        set!(supports_reasoning_effort);
        set!(supports_usage_in_streaming);
        set!(max_tokens_field);
        set!(supports_strict_mode);
        set!(requires_tool_result_name);
        set!(requires_assistant_after_tool_result);
        set!(requires_thinking_as_text);
    }
}

/// Optional overrides of [`Quirks`]; accepts Pi's camelCase keys and snake_case.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QuirksOverride {
    #[serde(default, alias = "supports_store")]
    pub supports_store: Option<bool>,
    #[serde(default, alias = "supports_developer_role")]
    pub supports_developer_role: Option<bool>,
    #[serde(default, alias = "supports_reasoning_effort")]
    pub supports_reasoning_effort: Option<bool>,
    #[serde(default, alias = "supports_usage_in_streaming")]
    pub supports_usage_in_streaming: Option<bool>,
    #[serde(default, alias = "max_tokens_field")]
    pub max_tokens_field: Option<MaxTokensField>,
    #[serde(default, alias = "supports_strict_mode")]
    pub supports_strict_mode: Option<bool>,
    #[serde(default, alias = "requires_tool_result_name")]
    pub requires_tool_result_name: Option<bool>,
    #[serde(default, alias = "requires_assistant_after_tool_result")]
    pub requires_assistant_after_tool_result: Option<bool>,
    #[serde(default, alias = "requires_thinking_as_text")]
    pub requires_thinking_as_text: Option<bool>,
}
