//! A connection that drops in the middle of the body ends the message with Pi 1.6's text,
//! which is undici's "terminated" plus the cause (Pi's `withCauseDetail`). The texts are the
//! ones the real Pi 1.6.0 wrote against the same three servers (a chunked body closed before
//! its last chunk, a body shorter than its `content-length`, a reset after the first event),
//! on both wires.

use std::time::Duration;

use bh_llm::{Api, ModelSpec};
use pretty_assertions::assert_eq;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::mock::{an, oa};
use crate::{fake_model, fast_retry, http, request, run};

#[derive(Clone, Copy)]
enum Drop {
    /// `transfer-encoding: chunked`, closed before the last (empty) chunk.
    ChunkedCut,
    /// `content-length` larger than what is sent, then closed.
    ShortLength,
    /// A TCP reset after the first event.
    Reset,
}

/// A server that answers once with `event` and then drops the connection as `how` says.
async fn serve_once(event: String, how: Drop) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let (mut sock, _) = listener.accept().await.unwrap();
        // Read the whole request (head and body) so that closing sends no reset of its own.
        let mut buf = Vec::new();
        let mut tmp = [0u8; 8192];
        let head_end = loop {
            let n = sock.read(&mut tmp).await.unwrap();
            buf.extend_from_slice(&tmp[..n]);
            if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break p + 4;
            }
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
        let len: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .map_or(0, |v| v.trim().parse().unwrap());
        while buf.len() < head_end + len {
            let n = sock.read(&mut tmp).await.unwrap();
            buf.extend_from_slice(&tmp[..n]);
        }
        let out = match how {
            Drop::ChunkedCut | Drop::Reset => format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n{:x}\r\n{event}\r\n",
                event.len()
            ),
            Drop::ShortLength => format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: 100000\r\n\r\n{event}"
            ),
        };
        sock.write_all(out.as_bytes()).await.unwrap();
        sock.flush().await.unwrap();
        // Let the client read the event before the connection goes.
        tokio::time::sleep(Duration::from_millis(100)).await;
        if matches!(how, Drop::Reset) {
            sock.set_zero_linger().unwrap();
        }
        drop(sock);
    });
    base
}

async fn error_of(api: Api, how: Drop) -> (String, serde_json::Value) {
    let event = match api {
        Api::AnthropicMessages => an(
            "message_start",
            json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
                "role": "assistant", "model": "m", "content": [], "stop_reason": null,
                "usage": {"input_tokens": 5, "output_tokens": 1}}}),
        ),
        _ => oa(json!({"role": "assistant", "content": "Half an ans"}), None),
    };
    let base = serve_once(event, how).await;
    let model = if api == Api::AnthropicMessages {
        let mut m = ModelSpec::new("anthropic", "claude-sonnet-4-5", Api::AnthropicMessages);
        m.base_url = base;
        m.api_key = Some("sk-ant-test".into());
        m
    } else {
        fake_model(&base)
    };
    let (_, msg) = run(&http(model, fast_retry(0)), request("x")).await;
    assert_eq!(msg.stop_reason, "error");
    let content = serde_json::to_value(&msg.content).unwrap();
    (msg.error_message.unwrap_or_default(), content)
}

#[tokio::test]
async fn a_dropped_connection_ends_with_pis_text() {
    for api in [Api::OpenAiCompletions, Api::AnthropicMessages] {
        for (how, pi) in [
            (
                Drop::ChunkedCut,
                "terminated: other side closed (UND_ERR_SOCKET)",
            ),
            (
                Drop::ShortLength,
                "terminated: other side closed (UND_ERR_SOCKET)",
            ),
            (Drop::Reset, "terminated: read ECONNRESET"),
        ] {
            let (text, content) = error_of(api.clone(), how).await;
            assert_eq!(text, pi, "{api:?}");
            if api == Api::OpenAiCompletions && !matches!(how, Drop::Reset) {
                // What streamed before the drop is kept, as Pi keeps it.
                assert_eq!(content[0]["text"], "Half an ans");
            }
        }
    }
}
