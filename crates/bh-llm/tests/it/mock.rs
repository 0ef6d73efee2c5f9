//! A minimal HTTP/1.1 server on 127.0.0.1 that serves scripted responses in order and
//! records every request. Responses use chunked transfer encoding, so a "cut" response
//! (closed without the final chunk) is a transport error for the client.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

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

#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    pub headers: BTreeMap<String, String>,
    pub body: Value,
}

pub struct MockServer {
    pub base: String,
    requests: Arc<Mutex<Vec<Recorded>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for MockServer {
    /// Every request any test sent is checked against the tool-call/result invariants
    /// (like codex's mock server does on each captured request).
    fn drop(&mut self) {
        self.task.abort();
        if !std::thread::panicking() {
            crate::invariants::check_all(&self.requests());
        }
    }
}

impl MockServer {
    pub async fn start(responses: Vec<MockResponse>) -> MockServer {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let queue = Arc::new(Mutex::new(std::collections::VecDeque::from(responses)));
        let reqs = requests.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((sock, _)) = listener.accept().await else {
                    return;
                };
                let reqs = reqs.clone();
                let queue = queue.clone();
                tokio::spawn(async move {
                    let _ = serve(sock, reqs, queue).await;
                });
            }
        });
        MockServer {
            base: format!("http://{addr}"),
            requests,
            task,
        }
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().unwrap().clone()
    }
}

async fn serve(
    mut sock: TcpStream,
    reqs: Arc<Mutex<Vec<Recorded>>>,
    queue: Arc<Mutex<std::collections::VecDeque<MockResponse>>>,
) -> std::io::Result<()> {
    let mut buf = Vec::new();
    let mut tmp = [0u8; 8192];
    let head_end = loop {
        let n = sock.read(&mut tmp).await?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&tmp[..n]);
        if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break p + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let mut lines = head.split("\r\n");
    let first = lines.next().unwrap_or_default();
    let mut parts = first.split(' ');
    let method = parts.next().unwrap_or_default().to_owned();
    let path = parts.next().unwrap_or_default().to_owned();
    let mut headers = BTreeMap::new();
    for l in lines {
        if let Some((k, v)) = l.split_once(':') {
            headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_owned());
        }
    }
    let len: usize = headers
        .get("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    while buf.len() < head_end + len {
        let n = sock.read(&mut tmp).await?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&tmp[..n]);
    }
    let body: Value = serde_json::from_slice(&buf[head_end..]).unwrap_or(Value::Null);
    reqs.lock().unwrap().push(Recorded {
        method,
        path,
        headers,
        body,
    });
    let resp = queue.lock().unwrap().pop_front().unwrap_or_else(|| {
        MockResponse::json(500, json!({"error": {"message": "mock: no response left"}}))
    });
    let mut out = format!("HTTP/1.1 {} X\r\n", resp.status);
    for (k, v) in &resp.headers {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    out.push_str("transfer-encoding: chunked\r\nconnection: close\r\n\r\n");
    sock.write_all(out.as_bytes()).await?;
    for c in &resp.chunks {
        if !resp.chunk_delay.is_zero() {
            tokio::time::sleep(resp.chunk_delay).await;
        }
        sock.write_all(format!("{:x}\r\n{c}\r\n", c.len()).as_bytes())
            .await?;
        sock.flush().await?;
    }
    if resp.hang {
        tokio::time::sleep(Duration::from_secs(60)).await;
        return Ok(());
    }
    if resp.cut {
        sock.shutdown().await?;
        return Ok(());
    }
    sock.write_all(b"0\r\n\r\n").await?;
    sock.flush().await?;
    Ok(())
}

// ---- SSE builders ------------------------------------------------------------------

/// An OpenAI chunk in the shape the fake server (and OpenAI) sends.
pub fn oa(delta: Value, finish: Option<&str>) -> String {
    let c = json!({"id": "chatcmpl-mock-1", "object": "chat.completion.chunk", "created": 1,
        "model": "fake-model", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
    format!("data: {c}\n\n")
}

pub fn oa_raw(v: Value) -> String {
    format!("data: {v}\n\n")
}

pub fn oa_usage(prompt: u64, completion: u64, cached: u64) -> String {
    let c = json!({"id": "chatcmpl-mock-1", "object": "chat.completion.chunk", "created": 1,
        "model": "fake-model", "choices": [],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
            "total_tokens": prompt + completion, "prompt_tokens_details": {"cached_tokens": cached}}});
    format!("data: {c}\n\n")
}

pub fn oa_done() -> String {
    "data: [DONE]\n\n".to_owned()
}

/// An Anthropic SSE event.
pub fn an(event: &str, data: Value) -> String {
    format!("event: {event}\ndata: {data}\n\n")
}
