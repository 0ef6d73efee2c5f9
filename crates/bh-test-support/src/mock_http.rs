//! The one scripted HTTP/1.1 model server of the workspace's tests, on
//! 127.0.0.1: it serves prepared responses in order, records every request
//! (method, path, headers, JSON body), and checks each request body against
//! the tool-call [`invariants`](crate::invariants) of its wire. A request that
//! breaks them is answered `400` with what is wrong (so a `bh` child process
//! fails visibly) and, for a [`MockServer`], fails the test when it is dropped.
//!
//! Responses use chunked transfer encoding, so a "cut" response (closed
//! without the final chunk) is a transport error for the client.
//! [`crate::mock_openai`] serves SSE bodies through the same request reader.

use std::collections::{BTreeMap, VecDeque};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use crate::invariants;

/// A scripted response.
#[derive(Debug, Clone)]
pub struct MockResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub chunks: Vec<String>,
    pub chunk_delay: Duration,
    /// Close the connection without the terminating chunk after `chunks`.
    pub cut: bool,
    /// Keep the connection open (send nothing more) after `chunks`.
    pub hang: bool,
}

impl MockResponse {
    /// A `200` event stream of `chunks`.
    pub fn sse(chunks: Vec<String>) -> MockResponse {
        MockResponse {
            status: 200,
            headers: vec![("content-type".into(), "text/event-stream".into())],
            chunks,
            chunk_delay: Duration::ZERO,
            cut: false,
            hang: false,
        }
    }

    /// A JSON document with `status`.
    pub fn json(status: u16, body: Value) -> MockResponse {
        MockResponse {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            chunks: vec![body.to_string()],
            chunk_delay: Duration::ZERO,
            cut: false,
            hang: false,
        }
    }

    pub fn header(mut self, k: &str, v: &str) -> MockResponse {
        self.headers.push((k.into(), v.into()));
        self
    }

    pub fn cut(mut self) -> MockResponse {
        self.cut = true;
        self
    }

    pub fn hang(mut self) -> MockResponse {
        self.hang = true;
        self
    }
}

/// One request as the server read it.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    /// Header names lower-cased.
    pub headers: BTreeMap<String, String>,
    /// The body as JSON (`null` when it is not JSON).
    pub body: Value,
}

/// Reads one request (head and `content-length` body); `None` when the peer
/// closed before a whole head.
pub fn read_request(stream: &TcpStream) -> Option<Recorded> {
    let mut reader = BufReader::new(stream);
    let mut first = String::new();
    if reader.read_line(&mut first).ok()? == 0 {
        return None;
    }
    let mut parts = first.split_whitespace();
    let method = parts.next().unwrap_or_default().to_owned();
    let path = parts.next().unwrap_or_default().to_owned();
    let mut headers = BTreeMap::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_owned());
        }
    }
    let len = headers
        .get("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut buf = vec![0; len];
    reader.read_exact(&mut buf).ok()?;
    Some(Recorded {
        method,
        path,
        headers,
        body: serde_json::from_slice(&buf).unwrap_or(Value::Null),
    })
}

/// Panics with the first request of `reqs` that breaks the tool-call
/// invariants.
pub fn check_all(reqs: &[Recorded]) {
    for r in reqs {
        if let Some(v) = invariants::violation(&r.path, &r.body) {
            panic!(
                "{} {} breaks the tool-call invariants: {v}",
                r.method, r.path
            );
        }
    }
}

/// The `400` a request that breaks the invariants gets.
pub fn invariant_response(violation: &str) -> MockResponse {
    MockResponse::json(
        400,
        json!({"error": {"message": format!("mock server: request breaks the tool-call invariants: {violation}")}}),
    )
}

/// Writes `resp` (chunked) and then ends, cuts or holds the connection.
pub fn write_response(mut stream: TcpStream, resp: &MockResponse) -> std::io::Result<()> {
    let mut out = format!("HTTP/1.1 {} X\r\n", resp.status);
    for (k, v) in &resp.headers {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    out.push_str("transfer-encoding: chunked\r\nconnection: close\r\n\r\n");
    stream.write_all(out.as_bytes())?;
    for c in &resp.chunks {
        if !resp.chunk_delay.is_zero() {
            std::thread::sleep(resp.chunk_delay);
        }
        stream.write_all(format!("{:x}\r\n{c}\r\n", c.len()).as_bytes())?;
        stream.flush()?;
    }
    if resp.hang {
        std::thread::sleep(Duration::from_secs(60));
        return Ok(());
    }
    if resp.cut {
        return stream.shutdown(std::net::Shutdown::Both);
    }
    stream.write_all(b"0\r\n\r\n")?;
    stream.flush()
}

/// A server answering with scripted responses in order (a `500` once they
/// run out). Dropping it stops it and, unless the test is already failing,
/// panics if any request broke the tool-call invariants.
pub struct MockServer {
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    addr: SocketAddr,
    requests: Arc<Mutex<Vec<Recorded>>>,
    violations: Arc<Mutex<Vec<String>>>,
    stopped: Arc<AtomicBool>,
}

impl MockServer {
    /// Starts serving `responses` on a free port.
    pub fn start(responses: Vec<MockResponse>) -> MockServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = MockServer {
            base: format!("http://{addr}"),
            addr,
            requests: Arc::default(),
            violations: Arc::default(),
            stopped: Arc::default(),
        };
        let queue = Arc::new(Mutex::new(VecDeque::from(responses)));
        let (requests, violations, stopped) = (
            server.requests.clone(),
            server.violations.clone(),
            server.stopped.clone(),
        );
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stopped.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(stream) = stream else { return };
                let (requests, violations, queue) =
                    (requests.clone(), violations.clone(), queue.clone());
                std::thread::spawn(move || {
                    let Some(req) = read_request(&stream) else {
                        return;
                    };
                    let broken = invariants::violation(&req.path, &req.body);
                    requests.lock().unwrap().push(req);
                    let resp = match broken {
                        Some(v) => {
                            violations.lock().unwrap().push(v.clone());
                            invariant_response(&v)
                        }
                        None => queue.lock().unwrap().pop_front().unwrap_or_else(|| {
                            MockResponse::json(
                                500,
                                json!({"error": {"message": "mock: no response left"}}),
                            )
                        }),
                    };
                    let _ = write_response(stream, &resp);
                });
            }
        });
        server
    }

    /// Every request so far, in arrival order.
    pub fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().unwrap().clone()
    }
}

impl Drop for MockServer {
    fn drop(&mut self) {
        self.stopped.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect(self.addr);
        let violations = self
            .violations
            .lock()
            .map(|v| v.clone())
            .unwrap_or_default();
        if !std::thread::panicking() && !violations.is_empty() {
            panic!(
                "mock server: {} request(s) broke the tool-call invariants: {}",
                violations.len(),
                violations.join("; ")
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::TcpStream;

    use serde_json::json;

    use super::*;

    /// Posts `body` to `path` of `base`; the response's status line.
    fn post(base: &str, path: &str, body: &Value) -> String {
        let mut s = TcpStream::connect(base.trim_start_matches("http://")).unwrap();
        let body = body.to_string();
        write!(
            s,
            "POST {path} HTTP/1.1\r\nhost: x\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out.lines().next().unwrap_or_default().to_owned()
    }

    #[test]
    fn a_request_breaking_the_invariants_is_refused_and_fails_the_test() {
        let server = MockServer::start(vec![MockResponse::sse(vec!["data: [DONE]\n\n".into()])]);
        let orphan = json!({"messages": [
            {"role": "user", "content": "x"},
            {"role": "tool", "content": "r", "tool_call_id": "zz"},
        ]});
        assert!(post(&server.base, "/v1/chat/completions", &orphan).contains(" 400 "));
        // The scripted response is still there for a good request.
        let good = json!({"messages": [{"role": "user", "content": "x"}]});
        assert!(post(&server.base, "/v1/chat/completions", &good).contains(" 200 "));
        assert_eq!(server.requests().len(), 2);
        let dropped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(server)));
        let message = dropped.expect_err("dropping the server must fail the test");
        let text = message
            .downcast_ref::<String>()
            .cloned()
            .unwrap_or_default();
        assert!(
            text.contains("tool result without a preceding assistant"),
            "{text}"
        );
    }
}
