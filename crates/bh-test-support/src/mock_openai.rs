//! A scripted OpenAI-compatible server on 127.0.0.1 for tests: it serves
//! prepared SSE bodies in order and records each request's authorization
//! header and JSON body.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

/// (authorization header, request body) of each request.
pub type Seen = Arc<Mutex<Vec<(String, Value)>>>;

/// Serves `responses` (SSE bodies) in order; returns the base URL (`…/v1`).
/// A response made by [`status`] is answered with that HTTP status instead.
pub fn serve(responses: Vec<String>) -> (String, Seen) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}/v1", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let rec = seen.clone();
    std::thread::spawn(move || {
        for body in responses {
            let Ok((stream, _)) = listener.accept() else {
                return;
            };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut len = 0;
            let mut auth = String::new();
            loop {
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                let l = line.trim_end().to_owned();
                if l.is_empty() {
                    break;
                }
                let lower = l.to_ascii_lowercase();
                if let Some(v) = lower.strip_prefix("content-length:") {
                    len = v.trim().parse().unwrap();
                }
                if lower.starts_with("authorization:") {
                    auth = l["authorization:".len()..].trim().to_owned();
                }
            }
            let mut buf = vec![0; len];
            reader.read_exact(&mut buf).unwrap();
            rec.lock()
                .unwrap()
                .push((auth, serde_json::from_slice(&buf).unwrap_or(Value::Null)));
            let mut stream = stream;
            let (head, body) = match body.strip_prefix(STATUS) {
                Some(rest) => {
                    let (code, text) = rest.split_once('\n').unwrap_or((rest, ""));
                    (
                        format!("HTTP/1.1 {code} Error\r\ncontent-type: application/json"),
                        text.to_owned(),
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
    });
    (base, seen)
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
pub fn serve_by(respond: impl Fn(&Value) -> String + Send + Sync + 'static) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}/v1", listener.local_addr().unwrap());
    let respond = Arc::new(respond);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            let respond = respond.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut len = 0;
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    let l = line.trim_end().to_ascii_lowercase();
                    if l.is_empty() {
                        break;
                    }
                    if let Some(v) = l.strip_prefix("content-length:") {
                        len = v.trim().parse().unwrap_or(0);
                    }
                }
                let mut buf = vec![0; len];
                if reader.read_exact(&mut buf).is_err() {
                    return;
                }
                let body = respond(&serde_json::from_slice(&buf).unwrap_or(Value::Null));
                let (head, body) = match body.strip_prefix(STATUS) {
                    Some(rest) => {
                        let (code, text) = rest.split_once('\n').unwrap_or((rest, ""));
                        (
                            format!("HTTP/1.1 {code} Error\r\ncontent-type: application/json"),
                            text.to_owned(),
                        )
                    }
                    None => (
                        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream".to_owned(),
                        body,
                    ),
                };
                let mut stream = stream;
                let _ = write!(
                    stream,
                    "{head}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.flush();
            });
        }
    });
    base
}
