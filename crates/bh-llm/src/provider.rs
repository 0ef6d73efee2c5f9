//! The provider trait and the HTTP provider for both wires.

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;

use bh_protocol::message::AssistantMessage;
use futures::StreamExt;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::anthropic::AnthropicWire;
use crate::error::LlmError;
use crate::http::{RetryPolicy, prepare, run};
use crate::openai::OpenAiWire;
use crate::turn::Turn;
use crate::types::{Api, ChatRequest, EventStream, ModelSpec, StopReason, StreamEvent};

/// A model endpoint that streams one assistant turn.
///
/// Contract: the stream always ends with exactly one [`StreamEvent::Done`] carrying the
/// complete assistant message in Pi's shape; provider failures end it with
/// `stopReason: "error"` and `errorMessage`, cancellation with `stopReason: "aborted"`,
/// `errorMessage: "Request was aborted"` and whatever content had arrived. Dropping
/// the stream stops the request.
pub trait Provider: Send + Sync {
    /// The model this provider talks to.
    fn model(&self) -> &ModelSpec;
    fn stream(&self, request: ChatRequest, cancel: CancellationToken) -> EventStream;
}

/// Drain a stream and return its final message. A stream that ends without `Done`
/// (which the providers of this crate never do) gives an `error` message.
pub async fn collect(mut stream: EventStream) -> AssistantMessage {
    let mut last = None;
    while let Some(ev) = stream.next().await {
        if let StreamEvent::Done(m) = ev {
            last = Some(*m);
        }
    }
    last.unwrap_or_else(|| AssistantMessage {
        role: "assistant".into(),
        content: vec![],
        api: String::new(),
        provider: String::new(),
        model: String::new(),
        usage: crate::types::zero_usage(),
        stop_reason: StopReason::Error.as_str().into(),
        timestamp: crate::turn::now_ms(),
        error_message: Some("stream ended without a message".into()),
        response_id: None,
        response_model: None,
        raw_stop_reason: None,
        duration_ms: None,
        thinking_level: None,
        extra: Default::default(),
    })
}

/// A child of `cancel` that is also cancelled when the consumer drops the stream, so
/// the request stops at once (not only at the next SSE event).
pub(crate) fn link_consumer(
    cancel: &CancellationToken,
    tx: &mpsc::UnboundedSender<StreamEvent>,
) -> CancellationToken {
    let child = cancel.child_token();
    let watch = child.clone();
    let tx = tx.clone();
    tokio::spawn(async move {
        tokio::select! {
            _ = tx.closed() => watch.cancel(),
            _ = watch.cancelled() => {}
        }
    });
    child
}

pub(crate) fn channel_stream(mut rx: mpsc::UnboundedReceiver<StreamEvent>) -> EventStream {
    Box::pin(futures::stream::poll_fn(move |cx| rx.poll_recv(cx)))
}

/// Anthropic Messages or OpenAI Chat Completions over HTTP (SSE).
#[derive(Debug, Clone)]
pub struct HttpProvider {
    client: reqwest::Client,
    model: ModelSpec,
    retry: RetryPolicy,
    /// Size of the last request body, to size the next one.
    last_body: Arc<AtomicUsize>,
}

impl HttpProvider {
    pub fn new(model: ModelSpec) -> Result<HttpProvider, LlmError> {
        if model.api == Api::Scripted {
            return Err(LlmError::Config(
                "the scripted api has no HTTP provider; use ScriptedProvider".into(),
            ));
        }
        let client = reqwest::Client::builder()
            .connect_timeout(std::time::Duration::from_secs(30))
            .build()?;
        Ok(HttpProvider {
            client,
            model,
            retry: RetryPolicy::default(),
            last_body: Arc::new(AtomicUsize::new(0)),
        })
    }

    pub fn with_retry(mut self, retry: RetryPolicy) -> HttpProvider {
        self.retry = retry;
        self
    }

    pub fn with_client(mut self, client: reqwest::Client) -> HttpProvider {
        self.client = client;
        self
    }
}

impl Provider for HttpProvider {
    fn model(&self) -> &ModelSpec {
        &self.model
    }

    fn stream(&self, request: ChatRequest, cancel: CancellationToken) -> EventStream {
        let (tx, rx) = mpsc::unbounded_channel();
        let cancel = link_consumer(&cancel, &tx);
        let turn = Turn::new(&self.model, tx);
        let retry = self.retry.clone();
        let done = cancel.clone();
        // The body is written here, from the borrowed history; the task only
        // holds its bytes.
        match self.model.api {
            Api::AnthropicMessages => {
                let wire = AnthropicWire::new(&self.model);
                let prepared = prepare(&self.client, &self.model, &wire, &request, &self.last_body);
                drop(request);
                tokio::spawn(async move {
                    run(retry, prepared, cancel, wire, turn).await;
                    done.cancel();
                });
            }
            Api::OpenAiCompletions | Api::Scripted => {
                let wire = OpenAiWire::new(&self.model);
                let prepared = prepare(&self.client, &self.model, &wire, &request, &self.last_body);
                drop(request);
                tokio::spawn(async move {
                    run(retry, prepared, cancel, wire, turn).await;
                    done.cancel();
                });
            }
        }
        channel_stream(rx)
    }
}
