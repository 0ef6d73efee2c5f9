//! A scripted OpenAI-compatible server on 127.0.0.1 for tests: it serves
//! prepared SSE bodies in order and records each request's authorization
//! header and JSON body.

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use crate::invariants;
use crate::mock_http::read_request;

/// (authorization header, request body) of each request.
pub type Seen = Arc<Mutex<Vec<(String, Value)>>>;

/// Serves `responses` (SSE bodies) in order; returns the base URL (`…/v1`).
/// A response made by [`status`] is answered with that HTTP status instead.
/// A request whose history breaks the tool-call
/// [`invariants`](crate::invariants) is answered `400`, saying what is
/// wrong, and takes no response of the script.
pub fn serve(responses: Vec<String>) -> (String, Seen) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}/v1", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let rec = seen.clone();
    std::thread::spawn(move || {
        let mut responses = responses.into_iter().peekable();
        // Once the script is spent the listener closes: a further call is
        // refused, as before any request was checked.
        while responses.peek().is_some() {
            let Ok((stream, _)) = listener.accept() else {
                return;
            };
            let Some(req) = read_request(&stream) else {
                continue;
            };
            let auth = req
                .headers
                .get("authorization")
                .cloned()
                .unwrap_or_default();
            let broken = invariants::violation(&req.path, &req.body);
            rec.lock().unwrap().push((auth, req.body));
            let body = match broken {
                Some(v) => invariant_status(&v),
                None => responses.next().unwrap_or_default(),
            };
            answer(stream, &body);
        }
    });
    (base, seen)
}

/// The [`status`] response a request breaking the invariants gets.
fn invariant_status(violation: &str) -> String {
    status(
        400,
        &format!("mock server: request breaks the tool-call invariants: {violation}"),
    )
}

/// Writes `body` (an SSE body, or a [`status`] response) with its length.
fn answer(mut stream: TcpStream, body: &str) {
    let (head, body) = match body.strip_prefix(STATUS) {
        Some(rest) => {
            let (code, text) = rest.split_once('\n').unwrap_or((rest, ""));
            (
                format!("HTTP/1.1 {code} Error\r\ncontent-type: application/json"),
                text,
            )
        }
        None => (
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream".to_owned(),
            body,
        ),
    };
    let _ = write!(
        stream,
        "{head}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.flush();
}

const STATUS: &str = "\u{0}status ";

/// A response of HTTP status `code` with a JSON error body saying `message`.
pub fn status(code: u16, message: &str) -> String {
    format!(
        "{STATUS}{code}\n{}",
        serde_json::json!({"error": {"message": message}})
    )
}

/// One `chat.completion.chunk` SSE event.
pub fn chunk(delta: Value, finish: Option<&str>) -> String {
    let v = json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "gpt-test",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
    format!("data: {v}\n\n")
}

/// The final usage chunk and `[DONE]`.
pub fn usage(input: u64, output: u64) -> String {
    let v = json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "gpt-test",
        "choices": [], "usage": {"prompt_tokens": input, "completion_tokens": output, "total_tokens": input + output}});
    format!("data: {v}\n\ndata: [DONE]\n\n")
}

/// A server that answers every request with `respond(body)` (an SSE body,
/// or a [`status`] response), concurrently and without end, for runs that
/// call it in any order (a batch of plans). Returns the base URL (`…/v1`).
/// A request breaking the tool-call invariants is answered `400` instead.
pub fn serve_by(respond: impl Fn(&Value) -> String + Send + Sync + 'static) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}/v1", listener.local_addr().unwrap());
    let respond = Arc::new(respond);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            let respond = respond.clone();
            std::thread::spawn(move || {
                let Some(req) = read_request(&stream) else {
                    return;
                };
                let body = match invariants::violation(&req.path, &req.body) {
                    Some(v) => invariant_status(&v),
                    None => respond(&req.body),
                };
                answer(stream, &body);
            });
        }
    });
    base
}
