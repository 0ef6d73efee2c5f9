//! A deterministic provider that replays a file of assistant turns. See the crate docs
//! ("Scripted provider") for the file format.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bh_protocol::message::{ContentBlock, KnownBlock};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::error::LlmError;
use crate::provider::{Provider, channel_stream, link_consumer};
use crate::turn::{ABORTED_MESSAGE, Turn};
use crate::types::{Api, ChatRequest, EventStream, ModelSpec, StopReason, zero_usage};

/// One scripted tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScriptToolCall {
    /// Defaults to `call_<turn>_<i>` (turn and call numbered from 0).
    #[serde(default)]
    pub id: Option<String>,
    pub name: String,
    #[serde(default = "empty_object")]
    pub arguments: Value,
}

fn empty_object() -> Value {
    Value::Object(Default::default())
}

/// Token counts of a scripted turn (Pi's usage keys; cost is computed from the model).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScriptUsage {
    #[serde(default)]
    pub input: u64,
    #[serde(default)]
    pub output: u64,
    #[serde(default)]
    pub cache_read: u64,
    #[serde(default)]
    pub cache_write: u64,
}

/// One assistant turn of a script.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScriptTurn {
    #[serde(default)]
    pub thinking: Option<String>,
    #[serde(default)]
    pub thinking_signature: Option<String>,
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default)]
    pub tool_calls: Vec<ScriptToolCall>,
    /// Pi content blocks, used verbatim instead of `thinking`/`text`/`toolCalls`.
    #[serde(default)]
    pub content: Option<Vec<ContentBlock>>,
    #[serde(default)]
    pub usage: Option<ScriptUsage>,
    /// `stop`, `length`, `toolUse`, `error` or `aborted`; default `toolUse` when the
    /// turn has tool calls, else `stop`.
    #[serde(default)]
    pub stop_reason: Option<StopReason>,
    #[serde(default)]
    pub error_message: Option<String>,
    /// Pause before each streamed event, in milliseconds.
    #[serde(default)]
    pub delay_ms: u64,
    /// Split text and thinking into deltas of this many characters (default: one delta).
    #[serde(default)]
    pub chunk_chars: Option<usize>,
    /// A fixed `timestamp` (ms) for the message, for byte-stable output.
    #[serde(default)]
    pub timestamp: Option<i64>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ScriptFile {
    #[serde(default)]
    provider: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    api: Option<String>,
    turns: Vec<ScriptTurn>,
}

/// A parsed script: optional identity and the turns in order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Script {
    pub provider: Option<String>,
    pub model: Option<String>,
    pub api: Option<String>,
    pub turns: Vec<ScriptTurn>,
}

impl Script {
    /// Parse a script: a JSON object `{"turns": [...]}`, a JSON array of turns, or JSONL
    /// (one turn per line; blank lines and lines starting with `#` or `//` are skipped).
    pub fn parse(src: &str) -> Result<Script, LlmError> {
        let trimmed = src.trim_start();
        if trimmed.starts_with('[') {
            if let Ok(turns) = serde_json::from_str::<Vec<ScriptTurn>>(src) {
                return Ok(Script {
                    turns,
                    ..Script::default()
                });
            }
        } else if trimmed.starts_with('{')
            && let Ok(f) = serde_json::from_str::<ScriptFile>(src)
        {
            return Ok(Script {
                provider: f.provider,
                model: f.model,
                api: f.api,
                turns: f.turns,
            });
        }
        let mut turns = Vec::new();
        for (n, line) in src.lines().enumerate() {
            let l = line.trim();
            if l.is_empty() || l.starts_with('#') || l.starts_with("//") {
                continue;
            }
            let t: ScriptTurn = serde_json::from_str(l)
                .map_err(|e| LlmError::Script(format!("line {}: {e}", n + 1)))?;
            turns.push(t);
        }
        Ok(Script {
            turns,
            ..Script::default()
        })
    }
}

/// Replays a [`Script`], one turn per call, in order, whatever the request says. Past
/// the last turn every call ends with `stopReason: "error"`.
#[derive(Debug, Clone)]
pub struct ScriptedProvider {
    model: ModelSpec,
    turns: Arc<Vec<ScriptTurn>>,
    next: Arc<AtomicUsize>,
}

impl ScriptedProvider {
    /// `model` gives the defaults for `provider`/`model`/`api`/cost; the script's own
    /// `provider`/`model`/`api` take precedence.
    pub fn new(script: Script, mut model: ModelSpec) -> ScriptedProvider {
        if let Some(p) = script.provider {
            model.provider = p;
        }
        if let Some(m) = script.model {
            model.id = m;
        }
        if let Some(a) = script.api.as_deref().and_then(|a| Api::parse(a).ok()) {
            model.api = a;
        }
        ScriptedProvider {
            model,
            turns: Arc::new(script.turns),
            next: Arc::new(AtomicUsize::new(0)),
        }
    }

    pub fn from_str(src: &str, model: ModelSpec) -> Result<ScriptedProvider, LlmError> {
        Ok(ScriptedProvider::new(Script::parse(src)?, model))
    }

    /// Turns played so far.
    pub fn played(&self) -> usize {
        self.next.load(Ordering::SeqCst)
    }

    pub fn remaining(&self) -> usize {
        self.turns.len().saturating_sub(self.played())
    }
}

fn pieces(s: &str, n: Option<usize>) -> Vec<String> {
    match n {
        Some(n) if n > 0 => {
            let chars: Vec<char> = s.chars().collect();
            chars.chunks(n).map(|c| c.iter().collect()).collect()
        }
        _ => vec![s.to_owned()],
    }
}

async fn pause(ms: u64, cancel: &CancellationToken) -> bool {
    if ms == 0 {
        return !cancel.is_cancelled();
    }
    tokio::select! {
        _ = cancel.cancelled() => false,
        _ = tokio::time::sleep(Duration::from_millis(ms)) => true,
    }
}

async fn play(
    n: usize,
    turn_spec: Option<ScriptTurn>,
    model: ModelSpec,
    mut turn: Turn,
    cancel: CancellationToken,
) {
    let Some(t) = turn_spec else {
        turn.fail(
            StopReason::Error,
            format!("scripted provider: no turn left (script has {n} turns)"),
        );
        turn.finish();
        return;
    };
    if let Some(ts) = t.timestamp {
        turn.timestamp = ts;
    }
    let d = t.delay_ms;
    let chunk = t.chunk_chars;
    let blocks: Vec<ContentBlock> = match t.content.clone() {
        Some(c) => c,
        None => {
            let mut v = Vec::new();
            if let Some(th) = &t.thinking {
                let mut extra = std::collections::BTreeMap::new();
                if let Some(s) = &t.thinking_signature {
                    extra.insert("thinkingSignature".to_owned(), Value::String(s.clone()));
                }
                v.push(ContentBlock::Known(KnownBlock::Thinking {
                    thinking: th.clone(),
                    extra,
                }));
            }
            if let Some(tx) = &t.text {
                v.push(ContentBlock::text(tx.clone()));
            }
            for (i, c) in t.tool_calls.iter().enumerate() {
                v.push(ContentBlock::Known(KnownBlock::ToolCall {
                    id: c.id.clone().unwrap_or_else(|| format!("call_{n}_{i}")),
                    name: c.name.clone(),
                    arguments: c.arguments.clone(),
                    extra: Default::default(),
                }));
            }
            v
        }
    };
    let aborted = |mut turn: Turn| {
        turn.fail(StopReason::Aborted, ABORTED_MESSAGE.to_owned());
        turn.end_all();
        turn.finish();
    };
    if !pause(d, &cancel).await {
        return aborted(turn);
    }
    turn.start();
    for b in blocks {
        let ContentBlock::Known(k) = b else { continue };
        match k {
            KnownBlock::Text { text, .. } => {
                let i = turn.text_start();
                for p in pieces(&text, chunk) {
                    if !pause(d, &cancel).await {
                        return aborted(turn);
                    }
                    turn.delta(i, &p);
                }
                turn.end(i);
            }
            KnownBlock::Thinking { thinking, extra } => {
                let sig = extra
                    .get("thinkingSignature")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                let redacted = extra.get("redacted").and_then(Value::as_bool) == Some(true);
                let i = turn.thinking_start(sig, redacted);
                for p in pieces(&thinking, chunk) {
                    if !pause(d, &cancel).await {
                        return aborted(turn);
                    }
                    turn.delta(i, &p);
                }
                turn.end(i);
            }
            KnownBlock::ToolCall {
                id,
                name,
                arguments,
                ..
            } => {
                if !pause(d, &cancel).await {
                    return aborted(turn);
                }
                let i = turn.tool_call_start(id, name);
                turn.tool_args_whole(i, arguments);
                turn.end(i);
            }
            KnownBlock::Image { .. } => {}
        }
    }
    if let Some(u) = &t.usage {
        let mut usage = zero_usage();
        usage.input = u.input;
        usage.output = u.output;
        usage.cache_read = u.cache_read;
        usage.cache_write = u.cache_write;
        usage.total_tokens = u.input + u.output + u.cache_read + u.cache_write;
        model.cost.apply(&mut usage);
        turn.usage = usage;
    }
    turn.stop_reason = t.stop_reason.unwrap_or(if turn.has_tool_calls() {
        StopReason::ToolUse
    } else {
        StopReason::Stop
    });
    turn.error_message = t.error_message.clone();
    if turn.stop_reason == StopReason::Error && turn.error_message.is_none() {
        turn.error_message = Some("scripted error".to_owned());
    }
    turn.finish();
}

impl Provider for ScriptedProvider {
    fn model(&self) -> &ModelSpec {
        &self.model
    }

    fn stream(&self, _request: ChatRequest, cancel: CancellationToken) -> EventStream {
        let n = self.next.fetch_add(1, Ordering::SeqCst);
        let (tx, rx) = mpsc::unbounded_channel();
        let cancel = link_consumer(&cancel, &tx);
        let turn = Turn::new(&self.model, tx);
        let spec = self.turns.get(n).cloned();
        let model = self.model.clone();
        let total = self.turns.len();
        let idx = if spec.is_some() { n } else { total };
        let done = cancel.clone();
        tokio::spawn(async move {
            play(idx, spec, model, turn, cancel).await;
            done.cancel();
        });
        channel_stream(rx)
    }
}
