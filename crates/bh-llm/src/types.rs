//! Provider-neutral request, model and event types.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::pin::Pin;
use std::time::Duration;

use bh_protocol::message::{
    AssistantMessage, Content, ContentBlock, Cost, KnownBlock, ToolResultMessage, Usage,
    UserMessage,
};
use futures::Stream;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::LlmError;
use crate::quirks::Quirks;

/// The wire API, spelled as Pi writes it in `assistant.api`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Api {
    #[serde(rename = "anthropic-messages")]
    AnthropicMessages,
    #[serde(rename = "openai-completions")]
    OpenAiCompletions,
    /// The deterministic [`crate::ScriptedProvider`].
    #[serde(rename = "scripted")]
    Scripted,
}

impl Api {
    pub fn as_str(&self) -> &'static str {
        match self {
            Api::AnthropicMessages => "anthropic-messages",
            Api::OpenAiCompletions => "openai-completions",
            Api::Scripted => "scripted",
        }
    }

    pub fn parse(s: &str) -> Result<Api, LlmError> {
        match s {
            "anthropic-messages" | "anthropic" => Ok(Api::AnthropicMessages),
            "openai-completions" | "openai" | "openai-chat" => Ok(Api::OpenAiCompletions),
            "scripted" => Ok(Api::Scripted),
            other => Err(LlmError::Config(format!("unsupported api {other:?}"))),
        }
    }
}

/// Prices in USD per million tokens (Pi's `model.cost`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelCost {
    #[serde(default)]
    pub input: f64,
    #[serde(default)]
    pub output: f64,
    #[serde(default, alias = "cache_read")]
    pub cache_read: f64,
    #[serde(default, alias = "cache_write")]
    pub cache_write: f64,
}

impl ModelCost {
    /// Fill `usage.cost` exactly as Pi 1.6's `calculateCost` does (same float operations,
    /// so the stored numbers are bit-identical): 1-hour cache writes (`usage.cacheWrite1h`)
    /// cost twice the input rate, and `totalFromProvider` is `false`.
    pub fn apply(&self, usage: &mut Usage) {
        let long_write = usage
            .extra
            .get("cacheWrite1h")
            .and_then(serde_json::Value::as_u64)
            .unwrap_or(0) as f64;
        let short_write = usage.cache_write as f64 - long_write;
        usage.cost.input = (self.input / 1_000_000.0) * usage.input as f64;
        usage.cost.output = (self.output / 1_000_000.0) * usage.output as f64;
        usage.cost.cache_read = (self.cache_read / 1_000_000.0) * usage.cache_read as f64;
        usage.cost.cache_write =
            (self.cache_write * short_write + self.input * 2.0 * long_write) / 1_000_000.0;
        usage.cost.total =
            usage.cost.input + usage.cost.output + usage.cost.cache_read + usage.cost.cache_write;
        usage.cost.total_from_provider = Some(serde_json::Value::Bool(false));
    }
}

/// Everything a provider needs to know about one model.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelSpec {
    /// Provider key written to `assistant.provider` (e.g. `anthropic`, `openai`, `fake`).
    pub provider: String,
    /// Model id sent on the wire and written to `assistant.model`.
    pub id: String,
    pub api: Api,
    /// For OpenAI-compatible servers this includes `/v1` (as in Pi's `models.json`);
    /// for Anthropic it is the host root (`https://api.anthropic.com`).
    pub base_url: String,
    /// The resolved key (the library never reads the environment).
    pub api_key: Option<String>,
    pub headers: BTreeMap<String, String>,
    /// The model can think/reason (Pi's `reasoning`).
    pub reasoning: bool,
    /// The model accepts images (Pi's `input` contains `"image"`).
    pub input_images: bool,
    pub context_window: u64,
    pub max_tokens: u64,
    pub cost: ModelCost,
    /// OpenAI-compatible server differences; ignored by the Anthropic wire.
    pub quirks: Quirks,
}

impl ModelSpec {
    /// A model with Pi's defaults for custom models (128k context, 16384 max tokens,
    /// no cost, text and images).
    pub fn new(provider: impl Into<String>, id: impl Into<String>, api: Api) -> ModelSpec {
        let provider = provider.into();
        let base_url = match api {
            Api::AnthropicMessages => "https://api.anthropic.com".to_owned(),
            Api::OpenAiCompletions => "https://api.openai.com/v1".to_owned(),
            Api::Scripted => String::new(),
        };
        let quirks = Quirks::detect(&provider, &base_url);
        ModelSpec {
            provider,
            id: id.into(),
            api,
            base_url,
            api_key: None,
            headers: BTreeMap::new(),
            reasoning: false,
            input_images: true,
            context_window: 128_000,
            max_tokens: 16_384,
            cost: ModelCost::default(),
            quirks,
        }
    }

    /// True when an assistant message was produced by this very model (Pi's `isSameModel`).
    pub fn is_same_model(&self, m: &AssistantMessage) -> bool {
        m.provider == self.provider && m.api == self.api.as_str() && m.model == self.id
    }
}

/// A tool the model may call (the workspace's one `ToolSpec`, from `bh-protocol`).
pub use bh_protocol::ToolSpec;

/// Pi's thinking levels.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ThinkingLevel {
    #[default]
    Off,
    Minimal,
    Low,
    Medium,
    High,
    Xhigh,
}

impl ThinkingLevel {
    pub fn as_str(&self) -> &'static str {
        match self {
            ThinkingLevel::Off => "off",
            ThinkingLevel::Minimal => "minimal",
            ThinkingLevel::Low => "low",
            ThinkingLevel::Medium => "medium",
            ThinkingLevel::High => "high",
            ThinkingLevel::Xhigh => "xhigh",
        }
    }
}

/// One message of the conversation as the model sees it. The loop converts Pi's other
/// roles (`custom`, `branchSummary`, `compactionSummary`, `bashExecution`) into user
/// messages with [`Message::from_agent_message`].
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    User(UserMessage),
    /// Boxed: an assistant message is three times the size of the others, and the
    /// history holds one slot per message.
    Assistant(Box<AssistantMessage>),
    ToolResult(ToolResultMessage),
}

/// Pi's `COMPACTION_SUMMARY_PREFIX` (pi-coding-agent 0.73.1 `dist/core/messages.js`).
pub const COMPACTION_SUMMARY_PREFIX: &str = "The conversation history before this point was compacted into the following summary:\n\n<summary>\n";
pub const COMPACTION_SUMMARY_SUFFIX: &str = "\n</summary>";
/// Pi's `BRANCH_SUMMARY_PREFIX`.
pub const BRANCH_SUMMARY_PREFIX: &str =
    "The following is a summary of a branch that this conversation came back from:\n\n<summary>\n";
pub const BRANCH_SUMMARY_SUFFIX: &str = "</summary>";

impl Message {
    pub fn user_text(text: impl Into<String>, timestamp_ms: i64) -> Message {
        Message::User(UserMessage::new(
            Content::Blocks(vec![ContentBlock::text(text)]),
            timestamp_ms,
        ))
    }

    /// Convert one Pi agent message (the JSON of `message` entries, or the synthetic
    /// `custom` / `branchSummary` / `compactionSummary` messages built from
    /// `custom_message`, `branch_summary` and `compaction` entries) into what the
    /// model sees, exactly as Pi's `convertToLlm`. Returns `Ok(None)` for messages Pi
    /// leaves out of the context (unknown roles, `bashExecution` with
    /// `excludeFromContext`).
    pub fn from_agent_message(v: &Value) -> Result<Option<Message>, LlmError> {
        let role = v.get("role").and_then(Value::as_str).unwrap_or_default();
        let ts = v.get("timestamp").and_then(Value::as_i64).unwrap_or(0);
        let text_user = |text: String| Some(Message::user_text(text, ts));
        Ok(match role {
            "user" => Some(Message::User(de(v)?)),
            "assistant" => Some(Message::Assistant(de(v)?)),
            "toolResult" => Some(Message::ToolResult(de(v)?)),
            "custom" | "hookMessage" => {
                let content = match v.get("content") {
                    Some(Value::String(s)) => Content::Blocks(vec![ContentBlock::text(s.clone())]),
                    Some(other @ Value::Array(_)) => Content::Blocks(de(other)?),
                    _ => Content::Blocks(vec![]),
                };
                Some(Message::User(UserMessage::new(content, ts)))
            }
            "branchSummary" => {
                let s = v.get("summary").and_then(Value::as_str).unwrap_or_default();
                text_user(format!("{BRANCH_SUMMARY_PREFIX}{s}{BRANCH_SUMMARY_SUFFIX}"))
            }
            "compactionSummary" => {
                let s = v.get("summary").and_then(Value::as_str).unwrap_or_default();
                text_user(format!(
                    "{COMPACTION_SUMMARY_PREFIX}{s}{COMPACTION_SUMMARY_SUFFIX}"
                ))
            }
            "bashExecution" => {
                if v.get("excludeFromContext").and_then(Value::as_bool) == Some(true) {
                    return Ok(None);
                }
                text_user(bash_execution_to_text(v))
            }
            _ => None,
        })
    }
}

fn de<T: serde::de::DeserializeOwned>(v: &Value) -> Result<T, LlmError> {
    serde_json::from_value(v.clone()).map_err(|e| LlmError::Message(e.to_string()))
}

/// Pi's `bashExecutionToText`.
fn bash_execution_to_text(v: &Value) -> String {
    let s = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or_default();
    let mut text = format!("Ran `{}`\n", s("command"));
    let output = s("output");
    if output.is_empty() {
        text.push_str("(no output)");
    } else {
        text.push_str(&format!("```\n{output}\n```"));
    }
    let exit = v.get("exitCode").and_then(Value::as_i64);
    if v.get("cancelled").and_then(Value::as_bool) == Some(true) {
        text.push_str("\n\n(command cancelled)");
    } else if let Some(code) = exit.filter(|c| *c != 0) {
        text.push_str(&format!("\n\nCommand exited with code {code}"));
    }
    let full = s("fullOutputPath");
    if v.get("truncated").and_then(Value::as_bool) == Some(true) && !full.is_empty() {
        text.push_str(&format!("\n\n[Output truncated. Full output: {full}]"));
    }
    text
}

/// One model call. The history and tools are borrowed from the caller
/// (`Cow::Borrowed(&history)`), so a request costs no copy of the
/// conversation: a provider serialises what it needs before
/// [`crate::Provider::stream`] returns. Tests can own them
/// (`vec![…].into()`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChatRequest<'a> {
    pub system_prompt: Option<String>,
    pub messages: Cow<'a, [Message]>,
    pub tools: Cow<'a, [ToolSpec]>,
    /// Defaults to `min(model.max_tokens, 32000)` as Pi does.
    pub max_tokens: Option<u64>,
    pub temperature: Option<f64>,
    pub thinking: ThinkingLevel,
}

/// `stopReason` values of Pi 0.73.1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum StopReason {
    Stop,
    Length,
    ToolUse,
    Error,
    Aborted,
}

impl StopReason {
    pub fn as_str(&self) -> &'static str {
        match self {
            StopReason::Stop => "stop",
            StopReason::Length => "length",
            StopReason::ToolUse => "toolUse",
            StopReason::Error => "error",
            StopReason::Aborted => "aborted",
        }
    }
}

/// What a provider streams. `index` is the position of the block in the final
/// `content` array. Every stream ends with exactly one [`StreamEvent::Done`], also for
/// errors (`stopReason: "error"`) and cancellation (`stopReason: "aborted"`).
#[derive(Debug, Clone, PartialEq)]
pub enum StreamEvent {
    /// The provider accepted the request (first successful response).
    Start,
    TextStart {
        index: usize,
    },
    TextDelta {
        index: usize,
        delta: String,
    },
    TextEnd {
        index: usize,
        text: String,
    },
    ThinkingStart {
        index: usize,
    },
    ThinkingDelta {
        index: usize,
        delta: String,
    },
    ThinkingEnd {
        index: usize,
        thinking: String,
        signature: Option<String>,
    },
    /// `id` may be empty if the server sends it later or never (see `ToolCallEnd`).
    ToolCallStart {
        index: usize,
        id: String,
        name: String,
    },
    ToolCallDelta {
        index: usize,
        delta: String,
    },
    ToolCallEnd {
        index: usize,
        id: String,
        name: String,
        arguments: Value,
        /// Pi 1.6's `argumentsError`: the finished text was not a JSON object
        /// (`arguments` is then `{}`); such a call must not be executed.
        arguments_error: Option<String>,
    },
    /// A retryable failure; the request is sent again after `delay`. `attempt` counts
    /// from 1 up to `max_retries` (the policy's, Pi's `maxAttempts`).
    Retry {
        attempt: u32,
        max_retries: u32,
        delay: Duration,
        reason: String,
        /// The failed attempt as the message it ended with (`stopReason: "error"`,
        /// `errorMessage` = `reason`, what it streamed so far): Pi 1.6 keeps it in the
        /// session, hidden from the model by a `context_edit`.
        failed: Box<AssistantMessage>,
    },
    /// The complete assistant message, in Pi's shape.
    Done(Box<AssistantMessage>),
}

/// The stream returned by [`crate::Provider::stream`].
pub type EventStream = Pin<Box<dyn Stream<Item = StreamEvent> + Send>>;

/// An empty usage in Pi's shape (all zeros).
pub fn zero_usage() -> Usage {
    Usage {
        input: 0,
        output: 0,
        cache_read: 0,
        cache_write: 0,
        total_tokens: 0,
        cost: Cost::default(),
        extra: BTreeMap::new(),
    }
}

/// Helpers to read Pi content blocks.
pub(crate) fn block_extra_str<'a>(
    extra: &'a BTreeMap<String, Value>,
    key: &str,
) -> Option<&'a str> {
    extra.get(key).and_then(Value::as_str)
}

pub(crate) fn is_redacted(extra: &BTreeMap<String, Value>) -> bool {
    extra.get("redacted").and_then(Value::as_bool) == Some(true)
}

pub(crate) fn known(b: &ContentBlock) -> Option<&KnownBlock> {
    match b {
        ContentBlock::Known(k) => Some(k),
        ContentBlock::Unknown(_) => None,
    }
}
