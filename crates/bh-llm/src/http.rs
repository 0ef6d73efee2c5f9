//! The HTTP driver shared by both wires: request, retries with backoff, SSE parsing,
//! cancellation and idle timeout. A wire only builds the request body and interprets
//! SSE events.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use eventsource_stream::{Event, Eventsource};
use futures::StreamExt;
use reqwest::StatusCode;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::turn::{ABORTED_MESSAGE, Turn};
use crate::types::{ChatRequest, ModelSpec, StopReason, StreamEvent};

/// Retries as data. Retried: connection failures, HTTP 408/409/429/5xx (incl. 529
/// "overloaded"), a stream error event marked retryable (Anthropic
/// `overloaded_error`), and a stream that ended early (connection dropped, no stop
/// reason / `finish_reason`) — also after content arrived, as Pi 1.6's auto-retry does.
/// Defaults are Pi's: 3 retries, 2 s, 4 s, 8 s. Tests inject a tiny `base_delay`.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    /// Retries after the first attempt (so `max_retries + 1` attempts in all).
    pub max_retries: u32,
    /// Backoff `base_delay * 2^(attempt-1)`, capped at `max_delay`, when the server
    /// gives no `retry-after`.
    pub base_delay: Duration,
    pub max_delay: Duration,
    /// A `retry-after` longer than this is not waited for: the error is returned.
    pub max_retry_after: Duration,
    /// No SSE event for this long ends the turn with an error.
    pub idle_timeout: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_retries: 3,
            // Pi's auto-retry: 2 s, 4 s, 8 s.
            base_delay: Duration::from_millis(2000),
            max_delay: Duration::from_secs(30),
            max_retry_after: Duration::from_secs(60),
            idle_timeout: Duration::from_secs(300),
        }
    }
}

/// An error and every source under it, `a: b: c`, each said once (reqwest's
/// "error sending request" hides the "connection refused" that explains it).
pub(crate) fn cause_chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut out = err.to_string();
    let mut source = err.source();
    while let Some(e) = source {
        let text = e.to_string();
        if !text.is_empty() && !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = e.source();
    }
    out
}

impl RetryPolicy {
    pub fn backoff(&self, attempt: u32) -> Duration {
        let factor = 2u32.saturating_pow(attempt.saturating_sub(1));
        self.base_delay.saturating_mul(factor).min(self.max_delay)
    }
}

/// Parse `retry-after-ms`, then `retry-after` (seconds or an HTTP date).
pub fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let get = |k: &str| headers.get(k).and_then(|v| v.to_str().ok()).map(str::trim);
    if let Some(ms) = get("retry-after-ms").and_then(|v| v.parse::<f64>().ok())
        && ms.is_finite()
        && ms >= 0.0
    {
        return Some(Duration::from_millis(ms as u64));
    }
    let v = get("retry-after")?;
    if let Ok(secs) = v.parse::<f64>() {
        if secs.is_finite() && secs >= 0.0 {
            return Some(Duration::from_millis((secs * 1000.0) as u64));
        }
        return None;
    }
    // HTTP date, e.g. "Wed, 21 Oct 2015 07:28:00 GMT"
    let when = jiff::fmt::rfc2822::parse(v).ok()?.timestamp();
    let now = jiff::Timestamp::now();
    let ms = when.as_millisecond() - now.as_millisecond();
    Some(Duration::from_millis(ms.max(0) as u64))
}

pub(crate) fn is_retryable_status(s: StatusCode) -> bool {
    matches!(s.as_u16(), 408 | 409 | 429) || s.is_server_error()
}

/// What a wire returns for an SSE event.
pub(crate) enum Flow {
    Continue,
    /// The response is complete (`[DONE]`, `message_stop`).
    Done,
}

/// What [`Wire::build`] returns: URL, extra headers and the JSON body.
pub(crate) type Built = (
    String,
    Vec<(String, String)>,
    Result<Vec<u8>, serde_json::Error>,
);

/// A request ready to be sent (and re-sent on retries): everything the
/// history contributed is already serialised, so the caller's history is not
/// needed (nor copied) while the response streams.
pub(crate) struct Prepared {
    request: reqwest::RequestBuilder,
    body_error: Option<String>,
}

/// Serialise the request now, synchronously, from the borrowed history.
/// `last_body` is the size of the previous body, updated here: the next
/// body starts with room for a little more (a conversation only grows).
pub(crate) fn prepare<W: Wire>(
    client: &reqwest::Client,
    model: &ModelSpec,
    wire: &W,
    req: &ChatRequest,
    last_body: &AtomicUsize,
) -> Prepared {
    let last = last_body.load(Ordering::Relaxed);
    let (url, wire_headers, body) = wire.build(model, req, last + last / 8 + 4096);
    if let Ok(b) = &body {
        last_body.store(b.len(), Ordering::Relaxed);
    }
    let mut headers = HeaderMap::new();
    for (k, v) in wire_headers
        .iter()
        .map(|(k, v)| (k, v))
        .chain(model.headers.iter())
    {
        if let (Ok(k), Ok(v)) = (
            HeaderName::from_bytes(k.as_bytes()),
            HeaderValue::from_str(v),
        ) {
            headers.insert(k, v);
        }
    }
    let (body, body_error) = match body {
        Ok(b) => (b, None),
        Err(e) => (
            Vec::new(),
            Some(format!("Could not serialise the request: {e}")),
        ),
    };
    let request = client
        .post(url)
        .headers(headers)
        .header("content-type", "application/json")
        .header("accept", "text/event-stream")
        .body(body);
    Prepared {
        request,
        body_error,
    }
}

/// A failure reported inside the stream.
pub(crate) struct StreamFailure {
    pub message: String,
    pub retryable: bool,
}

pub(crate) trait Wire: Send {
    /// URL, extra headers and the JSON body's bytes (`capacity`: the
    /// expected body size).
    fn build(&self, model: &ModelSpec, req: &ChatRequest, capacity: usize) -> Built;
    /// Reset parser state before an attempt.
    fn reset(&mut self);
    fn on_event(&mut self, ev: &Event, turn: &mut Turn) -> Result<Flow, StreamFailure>;
    /// The body ended (cleanly, without a `Done`).
    fn on_eof(&mut self, turn: &mut Turn) -> Result<(), StreamFailure>;
    /// A successful response that is plain JSON instead of SSE (a server that ignored
    /// `stream: true`).
    fn on_json_body(&mut self, _body: &Value, _turn: &mut Turn) -> Result<(), StreamFailure> {
        Err(StreamFailure {
            message: "Expected an event stream, got a JSON response".to_owned(),
            retryable: false,
        })
    }
    /// Pi's error message for an HTTP error status.
    fn http_error_message(&self, status: StatusCode, body: &str) -> String;
}

enum Attempt {
    Finished,
    Retry { delay: Duration, reason: String },
}

pub(crate) async fn run<W: Wire>(
    retry: RetryPolicy,
    prepared: Prepared,
    cancel: CancellationToken,
    mut wire: W,
    mut turn: Turn,
) {
    if let Some(message) = prepared.body_error {
        turn.fail(StopReason::Error, message);
        turn.end_all();
        turn.finish();
        return;
    }
    let request = prepared.request;
    let mut attempt: u32 = 0;
    loop {
        let outcome = one_attempt(&request, &retry, &cancel, &mut wire, &mut turn, attempt).await;
        match outcome {
            Attempt::Finished => break,
            Attempt::Retry { delay, reason } => {
                attempt += 1;
                let failed = Box::new(turn.failed_attempt(reason.clone()));
                turn.emit(StreamEvent::Retry {
                    attempt,
                    max_retries: retry.max_retries,
                    delay,
                    reason,
                    failed,
                });
                tokio::select! {
                    _ = cancel.cancelled() => {
                        turn.fail(StopReason::Aborted, ABORTED_MESSAGE.to_owned());
                        break;
                    }
                    _ = tokio::time::sleep(delay) => {}
                }
                turn.reset();
            }
        }
    }
    turn.end_all();
    turn.finish();
}

/// One attempt: the request sent and its status checked, then its body read;
/// how it ended is then written on the turn, or a retry is asked for.
async fn one_attempt<W: Wire>(
    request: &reqwest::RequestBuilder,
    retry: &RetryPolicy,
    cancel: &CancellationToken,
    wire: &mut W,
    turn: &mut Turn,
    attempt: u32,
) -> Attempt {
    let tries = Tries { retry, attempt };
    wire.reset();
    let end = match respond(request, &tries, cancel, wire).await {
        Ok(resp) => read_body(resp, &tries, cancel, wire, turn).await,
        Err(end) => end,
    };
    end.conclude(turn)
}

/// How an attempt ended, before it is written on the turn.
enum End {
    /// The turn holds its outcome (the stream completed, or the wire recorded it).
    Finished,
    /// Cancelled: the turn ends aborted.
    Aborted,
    /// Failed for good: the turn ends with this error.
    Failed(String),
    /// Worth another attempt after `delay`.
    Retry { delay: Duration, reason: String },
}

impl End {
    /// The attempt's outcome, with a failure or an abort recorded on the turn.
    fn conclude(self, turn: &mut Turn) -> Attempt {
        match self {
            End::Finished => {}
            End::Aborted => turn.fail(StopReason::Aborted, ABORTED_MESSAGE.to_owned()),
            End::Failed(message) => turn.fail(StopReason::Error, message),
            End::Retry { delay, reason } => return Attempt::Retry { delay, reason },
        }
        Attempt::Finished
    }
}

/// Which attempt this is, under which retry policy.
struct Tries<'a> {
    retry: &'a RetryPolicy,
    attempt: u32,
}

impl Tries<'_> {
    /// Another attempt may follow this one.
    fn can_retry(&self) -> bool {
        self.attempt < self.retry.max_retries
    }

    /// The wait before the next attempt when the server names none.
    fn backoff(&self) -> Duration {
        self.retry.backoff(self.attempt + 1)
    }

    /// A retry after the backoff when the failure is retryable and retries are
    /// left; otherwise the failure ends the turn.
    fn retry_or_fail(&self, retryable: bool, message: String) -> End {
        if retryable && self.can_retry() {
            End::Retry {
                delay: self.backoff(),
                reason: message,
            }
        } else {
            End::Failed(message)
        }
    }
}

/// The request sent, and its status checked: a successful response, or how
/// the attempt ends.
async fn respond<W: Wire>(
    request: &reqwest::RequestBuilder,
    tries: &Tries<'_>,
    cancel: &CancellationToken,
    wire: &mut W,
) -> Result<reqwest::Response, End> {
    let resp = send(request, tries, cancel).await?;
    check_status(resp, tries, cancel, wire).await
}

/// The request sent (a copy of it: retries re-send it); a connection error is
/// retried while retries are left.
async fn send(
    request: &reqwest::RequestBuilder,
    tries: &Tries<'_>,
    cancel: &CancellationToken,
) -> Result<reqwest::Response, End> {
    // A byte body clones by reference count: retries do not copy it.
    let Some(request) = request.try_clone() else {
        return Err(End::Failed("the request cannot be re-sent".to_owned()));
    };
    let send = request.send();
    let resp = tokio::select! {
        _ = cancel.cancelled() => return Err(End::Aborted),
        r = send => r,
    };
    resp.map_err(|e| tries.retry_or_fail(true, format!("Connection error: {}", cause_chain(&e))))
}

/// A successful response passed on; an error status read into the wire's
/// message, and retried (after the server's `retry-after` when it gives a
/// short enough one) when the status is retryable and retries are left.
async fn check_status<W: Wire>(
    resp: reqwest::Response,
    tries: &Tries<'_>,
    cancel: &CancellationToken,
    wire: &mut W,
) -> Result<reqwest::Response, End> {
    let status = resp.status();
    if status.is_success() {
        return Ok(resp);
    }
    let after = retry_after(resp.headers());
    let text = tokio::select! {
        _ = cancel.cancelled() => return Err(End::Aborted),
        t = resp.text() => t.unwrap_or_default(),
    };
    let msg = wire.http_error_message(status, &text);
    if tries.can_retry() && is_retryable_status(status) {
        match after {
            Some(d) if d > tries.retry.max_retry_after => {}
            Some(d) => {
                return Err(End::Retry {
                    delay: d,
                    reason: msg,
                });
            }
            None => {
                return Err(End::Retry {
                    delay: tries.backoff(),
                    reason: msg,
                });
            }
        }
    }
    Err(End::Failed(msg))
}

/// The turn started, and the successful response's body read: plain JSON
/// when it says so, an event stream otherwise.
async fn read_body<W: Wire>(
    resp: reqwest::Response,
    tries: &Tries<'_>,
    cancel: &CancellationToken,
    wire: &mut W,
    turn: &mut Turn,
) -> End {
    turn.start();
    let is_json = resp
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("application/json"));
    if is_json {
        read_json_body(resp, cancel, wire, turn).await
    } else {
        read_events(resp, tries, cancel, wire, turn).await
    }
}

/// A JSON body (a server that ignored `stream: true`) read whole into the
/// wire; it is never retried.
async fn read_json_body<W: Wire>(
    resp: reqwest::Response,
    cancel: &CancellationToken,
    wire: &mut W,
    turn: &mut Turn,
) -> End {
    let text = tokio::select! {
        _ = cancel.cancelled() => return End::Aborted,
        t = resp.text() => t,
    };
    let result = match text {
        Ok(t) => match serde_json::from_str::<Value>(&t) {
            Ok(v) => wire.on_json_body(&v, turn),
            Err(e) => Err(StreamFailure {
                message: format!("Could not parse response: {e}"),
                retryable: false,
            }),
        },
        Err(e) => Err(StreamFailure {
            message: dropped_message(&e),
            retryable: false,
        }),
    };
    match result {
        Ok(()) => End::Finished,
        Err(f) => End::Failed(f.message),
    }
}

/// The event stream read into the wire, event by event, until it completes,
/// fails, stalls past the idle timeout, or is cancelled.
async fn read_events<W: Wire>(
    resp: reqwest::Response,
    tries: &Tries<'_>,
    cancel: &CancellationToken,
    wire: &mut W,
    turn: &mut Turn,
) -> End {
    let idle_timeout = tries.retry.idle_timeout;
    let mut events = resp.bytes_stream().eventsource();
    loop {
        let next = tokio::select! {
            _ = cancel.cancelled() => return End::Aborted,
            n = tokio::time::timeout(idle_timeout, events.next()) => n,
        };
        if turn.consumer_gone() {
            return End::Aborted;
        }
        let failure = match next {
            // A stalled stream is an early end too (Pi retries transport timeouts).
            Err(_) => StreamFailure {
                message: format!("Stream idle for more than {} s", idle_timeout.as_secs_f64()),
                retryable: true,
            },
            Ok(None) => match wire.on_eof(turn) {
                Ok(()) => return End::Finished,
                Err(f) => f,
            },
            // The connection dropped mid-stream.
            Ok(Some(Err(eventsource_stream::EventStreamError::Transport(e)))) => StreamFailure {
                message: dropped_message(&e),
                retryable: true,
            },
            Ok(Some(Err(e))) => StreamFailure {
                message: format!("Stream error: {e}"),
                retryable: true,
            },
            Ok(Some(Ok(ev))) => match wire.on_event(&ev, turn) {
                Ok(Flow::Continue) => continue,
                Ok(Flow::Done) => return End::Finished,
                Err(f) => f,
            },
        };
        // A stream that ended early is retried even after content streamed, as Pi's
        // auto-retry does; the consumer drops the partial message on `Retry`.
        return tries.retry_or_fail(failure.retryable, failure.message);
    }
}

/// Pi 1.6's text for a connection that dropped in the middle of the body: undici's
/// "terminated" with the deepest cause appended as Pi's `withCauseDetail` appends it. A
/// reset is Node's "read ECONNRESET"; a body the server closed before its end (hyper's
/// incomplete message / early EOF) is undici's "other side closed (UND_ERR_SOCKET)"; any
/// other transport failure keeps its own deepest cause.
fn dropped_message(e: &reqwest::Error) -> String {
    let mut deepest: &dyn std::error::Error = e;
    let mut closed = false;
    let mut current: Option<&dyn std::error::Error> = Some(e);
    while let Some(err) = current {
        if let Some(io) = err.downcast_ref::<std::io::Error>() {
            match io.kind() {
                std::io::ErrorKind::ConnectionReset => return "terminated: read ECONNRESET".into(),
                std::io::ErrorKind::UnexpectedEof | std::io::ErrorKind::ConnectionAborted => {
                    closed = true;
                }
                _ => {}
            }
        }
        let text = err.to_string();
        if text.contains("connection closed before message completed")
            || text.contains("end of file before message length reached")
        {
            closed = true;
        }
        deepest = err;
        current = err.source();
    }
    if closed {
        "terminated: other side closed (UND_ERR_SOCKET)".into()
    } else {
        format!("terminated: {deepest}")
    }
}

#[cfg(test)]
mod backoff_tests {
    use super::*;

    /// Pi 1.6's auto-retry (`settings.retry`: 3 retries, `baseDelayMs` 2000, doubling).
    #[test]
    fn default_backoff_is_pis() {
        let p = RetryPolicy::default();
        assert_eq!(p.max_retries, 3);
        let delays: Vec<u64> = (1..=3).map(|a| p.backoff(a).as_millis() as u64).collect();
        assert_eq!(delays, [2000, 4000, 8000]);
    }
}
