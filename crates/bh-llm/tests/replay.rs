//! Replay suite (issue 16): real recorded provider streams (`tests/replay/streams`, sources
//! in `tests/replay/manifest.json`) served by a local HTTP server on 127.0.0.1 to `bh-llm`,
//! in three delivery patterns — one event per write, cut at random byte positions (always
//! also inside a UTF-8 character and inside a `\n\n`), one single write — and cut short (the
//! server closes the connection after half of the events). The expected assistant message
//! of each is the one the current Pi (1.6.0) produced against the same replay, recorded into
//! `tests/replay/pi-1.6.0/<name>.json` by running the real Pi:
//!
//! - `replays_match_pi` (always): every stream, every delivery, against the recordings.
//! - `live_pi_agrees_with_the_recordings` (always, skips without node/npm): runs the real
//!   Pi, installed from npm by `bh_test_support::pi`, on a representative subset (a tool
//!   call cut by Anthropic's `max_tokens`, one cut by OpenAI's `length`, Azure's empty first
//!   id, a reasoning model over an OpenAI-compatible server, Anthropic thinking and redacted
//!   thinking, OpenAI parallel tool calls) and checks
//!   Pi still writes what was recorded, so the recordings cannot drift from Pi.
//! - `record_pi_expectations` (`--ignored`): re-records every expectation from the real Pi:
//!   `cargo test -p bh-llm --test replay -- --ignored record_pi_expectations`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bh_llm::{
    Api, ChatRequest, HttpProvider, Message, ModelCost, ModelSpec, Provider, Quirks, RetryPolicy,
    collect,
};
use bh_test_support::pi::{PiRelease, RealPi, real_pi};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

const MODEL_ID: &str = "replay-model";

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/replay")
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Wire {
    Anthropic,
    OpenAi,
}

struct Case {
    name: String,
    wire: Wire,
    /// The SSE body and the byte offset after each event.
    body: Vec<u8>,
    event_ends: Vec<usize>,
}

impl Case {
    /// The body cut after half of its events: a clean end of the connection.
    fn cut_short(&self) -> Vec<u8> {
        let n = self.event_ends.len() / 2;
        self.body[..self.event_ends[n.max(1) - 1]].to_vec()
    }
}

fn cases() -> Vec<Case> {
    let manifest: Value =
        serde_json::from_str(&fs_err::read_to_string(dir().join("manifest.json")).unwrap())
            .unwrap();
    manifest["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let name = c["name"].as_str().unwrap().to_owned();
            let wire = match c["wire"].as_str().unwrap() {
                "anthropic" => Wire::Anthropic,
                _ => Wire::OpenAi,
            };
            let text =
                fs_err::read_to_string(dir().join(format!("streams/{name}.chunks.txt"))).unwrap();
            let (body, event_ends) = sse(wire, &text);
            Case {
                name,
                wire,
                body,
                event_ends,
            }
        })
        .collect()
}

/// The recording as the provider sent it: Anthropic names each event by its `type`;
/// OpenAI-compatible servers end with `data: [DONE]`.
fn sse(wire: Wire, chunks: &str) -> (Vec<u8>, Vec<usize>) {
    let mut body = Vec::new();
    let mut ends = Vec::new();
    for line in chunks.lines().filter(|l| !l.trim().is_empty()) {
        if wire == Wire::Anthropic {
            let v: Value = serde_json::from_str(line).unwrap();
            body.extend_from_slice(format!("event: {}\n", v["type"].as_str().unwrap()).as_bytes());
        }
        body.extend_from_slice(format!("data: {line}\n\n").as_bytes());
        ends.push(body.len());
    }
    if wire == Wire::OpenAi {
        body.extend_from_slice(b"data: [DONE]\n\n");
        ends.push(body.len());
    }
    (body, ends)
}

/// How the server writes a body.
#[derive(Clone, Debug)]
enum Delivery {
    /// Write boundaries at these byte offsets.
    At(Vec<usize>),
    Single,
}

/// A tiny deterministic generator (no wall clock, no global state).
struct XorShift(u64);
impl XorShift {
    fn next(&mut self, below: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % below.max(1) as u64) as usize
    }
}

/// Random cut positions, plus one inside a multi-byte UTF-8 character (when the body has
/// one) and one between the two newlines that end an event.
fn random_cuts(body: &[u8], seed: u64) -> Vec<usize> {
    let mut rng = XorShift(seed);
    let mut cuts: Vec<usize> = (0..24).map(|_| 1 + rng.next(body.len() - 1)).collect();
    if let Some(i) = body.iter().position(|&b| b >= 0xC0) {
        cuts.push(i + 1);
    }
    if let Some(i) = body.windows(2).position(|w| w == b"\n\n") {
        cuts.push(i + 1);
    }
    cuts.sort_unstable();
    cuts.dedup();
    cuts
}

fn deliveries(case: &Case) -> Vec<(String, Delivery)> {
    vec![
        (
            "one event per write".into(),
            Delivery::At(case.event_ends.clone()),
        ),
        (
            "random cuts (seed 1)".into(),
            Delivery::At(random_cuts(&case.body, 0x9E37_79B9_7F4A_7C15)),
        ),
        (
            "random cuts (seed 2)".into(),
            Delivery::At(random_cuts(&case.body, 0xD1B5_4A32_D192_ED03)),
        ),
        ("one single write".into(), Delivery::Single),
    ]
}

/// A local server: the scripted responses in order, then `fallback` for every further
/// request (Pi answers tool calls and asks again).
struct Server {
    base: String,
    requests: Arc<Mutex<usize>>,
}

fn serve(responses: Vec<(Vec<u8>, Delivery)>, fallback: Vec<u8>) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let requests = Arc::new(Mutex::new(0));
    let count = requests.clone();
    std::thread::spawn(move || {
        let mut queue = responses.into_iter();
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            *count.lock().unwrap() += 1;
            let (body, delivery) = queue
                .next()
                .unwrap_or_else(|| (fallback.clone(), Delivery::Single));
            respond(stream, &body, &delivery);
        }
    });
    Server { base, requests }
}

fn respond(stream: TcpStream, body: &[u8], delivery: &Delivery) {
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
            len = v.trim().parse().unwrap();
        }
    }
    let mut req = vec![0; len];
    let _ = reader.read_exact(&mut req);
    let mut stream = stream;
    let _ = stream.set_nodelay(true);
    // No length: the body ends when the connection closes.
    let _ = stream.write_all(
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\nconnection: close\r\n\r\n",
    );
    let _ = stream.flush();
    match delivery {
        Delivery::Single => {
            let _ = stream.write_all(body);
        }
        Delivery::At(cuts) => {
            let mut start = 0;
            for &c in cuts.iter().filter(|&&c| c > 0 && c < body.len()) {
                if stream.write_all(&body[start..c]).is_err() {
                    return;
                }
                let _ = stream.flush();
                // Let the client read this piece on its own.
                std::thread::sleep(Duration::from_millis(1));
                start = c;
            }
            let _ = stream.write_all(&body[start..]);
        }
    }
    let _ = stream.flush();
    let _ = stream.shutdown(std::net::Shutdown::Both);
}

/// A short complete answer, served after the replayed one.
fn fallback(wire: Wire) -> Vec<u8> {
    let chunks = match wire {
        Wire::Anthropic => [
            json!({"type":"message_start","message":{"id":"msg_fallback","type":"message","role":"assistant","model":MODEL_ID,"content":[],"stop_reason":null,"usage":{"input_tokens":1,"output_tokens":1}}}),
            json!({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}),
            json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"ok"}}),
            json!({"type":"content_block_stop","index":0}),
            json!({"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":1}}),
            json!({"type":"message_stop"}),
        ]
        .iter()
        .map(Value::to_string)
        .collect::<Vec<_>>(),
        Wire::OpenAi => vec![
            json!({"id":"fallback","object":"chat.completion.chunk","model":MODEL_ID,"choices":[{"index":0,"delta":{"content":"ok"},"finish_reason":null}]}).to_string(),
            json!({"id":"fallback","object":"chat.completion.chunk","model":MODEL_ID,"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}).to_string(),
        ],
    };
    sse(wire, &chunks.join("\n")).0
}

const COST: ModelCost = ModelCost {
    input: 3.0,
    output: 15.0,
    cache_read: 0.3,
    cache_write: 3.75,
};

fn bh_model(wire: Wire, base: &str) -> ModelSpec {
    let (api, url) = match wire {
        Wire::Anthropic => (Api::AnthropicMessages, base.to_owned()),
        Wire::OpenAi => (Api::OpenAiCompletions, format!("{base}/v1")),
    };
    let mut m = ModelSpec::new("replay", MODEL_ID, api);
    m.base_url = url;
    m.api_key = Some("replay-key".into());
    m.max_tokens = 4096;
    m.cost = COST;
    m.quirks = Quirks {
        supports_developer_role: false,
        supports_reasoning_effort: false,
        ..m.quirks.clone()
    };
    m
}

/// bh's assistant message for one delivery of `body` (no retries: Pi's are off too).
fn bh_message(wire: Wire, body: Vec<u8>, delivery: Delivery) -> Value {
    let server = serve(vec![(body, delivery)], fallback(wire));
    let retry = RetryPolicy {
        max_retries: 0,
        ..RetryPolicy::default()
    };
    let provider = HttpProvider::new(bh_model(wire, &server.base))
        .unwrap()
        .with_retry(retry);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let msg = rt.block_on(async {
        let req = ChatRequest {
            system_prompt: Some("You are a test.".into()),
            messages: vec![Message::user_text("hi", 1)].into(),
            ..ChatRequest::default()
        };
        collect(provider.stream(req, CancellationToken::new())).await
    });
    assert_eq!(*server.requests.lock().unwrap(), 1);
    serde_json::to_value(msg).unwrap()
}

/// The real Pi's first assistant message for `body`, served one event per write.
fn pi_message(pi: &RealPi, case: &Case, body: Vec<u8>) -> Value {
    let server = serve(
        vec![(body, Delivery::At(case.event_ends.clone()))],
        fallback(case.wire),
    );
    let scratch = tempfile::tempdir().unwrap();
    let mut cmd = pi.command(scratch.path());
    let agent = scratch.path().join("agent");
    let (api, url, compat) = match case.wire {
        Wire::Anthropic => ("anthropic-messages", server.base.clone(), json!({})),
        Wire::OpenAi => (
            "openai-completions",
            format!("{}/v1", server.base),
            json!({"supportsDeveloperRole": false, "supportsReasoningEffort": false}),
        ),
    };
    let models = json!({"providers": {"replay": {"baseUrl": url, "api": api, "apiKey": "replay-key",
        "compat": compat,
        "models": [{"id": MODEL_ID, "reasoning": false, "input": ["text"], "contextWindow": 128000,
            "maxTokens": 4096, "cost": {"input": COST.input, "output": COST.output,
            "cacheRead": COST.cache_read, "cacheWrite": COST.cache_write}}]}}});
    fs_err::write(agent.join("models.json"), models.to_string()).unwrap();
    // Pi's auto-retry off, as bh's is off here: the stream's own result is compared.
    fs_err::write(
        agent.join("settings.json"),
        json!({"retry": {"enabled": false}}).to_string(),
    )
    .unwrap();
    let out = cmd
        .args([
            "--mode",
            "json",
            "-p",
            "hi",
            "--provider",
            "replay",
            "--model",
            MODEL_ID,
            "--no-tools",
            "--no-extensions",
            "--no-session",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["type"] == "message_end" && v["message"]["role"] == "assistant")
        .map(|v| v["message"].clone())
        .unwrap_or_else(|| {
            panic!(
                "Pi printed no assistant message for {}: {stdout}\n{}",
                case.name,
                String::from_utf8_lossy(&out.stderr)
            )
        })
}

/// The fields compared. Excluded, each because it legitimately differs:
/// - `timestamp`: the clock when the request started;
/// - `durationMs`: the time the stream took (only its presence is compared);
/// - `thinkingLevel`: Pi 1.6's agent loop adds the session's thinking level to the message
///   after the provider returns it; bh's provider layer has no session (bh-core's concern);
/// - cost numbers are compared to 1e-12 relative, not bit for bit: serde_json reads
///   JavaScript's shortest float text back to a neighbouring f64 at times.
fn comparable(mut v: Value) -> (Value, Vec<f64>) {
    let o = v.as_object_mut().unwrap();
    for k in ["timestamp", "durationMs", "thinkingLevel"] {
        o.remove(k);
    }
    let mut costs = Vec::new();
    if let Some(cost) = v.pointer_mut("/usage/cost").and_then(Value::as_object_mut) {
        for k in ["input", "output", "cacheRead", "cacheWrite", "total"] {
            costs.push(cost.remove(k).and_then(|c| c.as_f64()).unwrap_or(f64::NAN));
        }
    }
    (v, costs)
}

fn differences(ours: &Value, pis: &Value) -> Option<String> {
    // The duration's value differs; its presence must not.
    if ours.get("durationMs").is_some() != pis.get("durationMs").is_some() {
        return Some("durationMs present in one message only".to_owned());
    }
    let (a, ac) = comparable(ours.clone());
    let (b, bc) = comparable(pis.clone());
    if a != b {
        return Some(format!(
            "bh:  {}\nPi:  {}",
            serde_json::to_string(&a).unwrap(),
            serde_json::to_string(&b).unwrap()
        ));
    }
    for (x, y) in ac.iter().zip(&bc) {
        if (x - y).abs() > 1e-12 * y.abs().max(1e-300) {
            return Some(format!("cost {ac:?} vs Pi's {bc:?}"));
        }
    }
    None
}

fn expectation_path(name: &str) -> PathBuf {
    dir().join(format!("pi-1.6.0/{name}.json"))
}

fn expectation(name: &str) -> Value {
    let path = expectation_path(name);
    serde_json::from_str(&fs_err::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; record it with `cargo test -p bh-llm --test replay -- --ignored record_pi_expectations`",
            path.display()
        )
    }))
    .unwrap()
}

#[test]
fn replays_match_pi() {
    let mut failures = Vec::new();
    let mut checked = 0;
    for case in cases() {
        let pi = expectation(&case.name);
        for (label, delivery) in deliveries(&case) {
            let ours = bh_message(case.wire, case.body.clone(), delivery);
            checked += 1;
            if let Some(d) = differences(&ours, &pi["full"]) {
                failures.push(format!("{} / {label}:\n{d}", case.name));
            }
        }
        let cut = case.cut_short();
        for (label, delivery) in [
            ("cut short, one single write", Delivery::Single),
            (
                "cut short, random cuts",
                Delivery::At(random_cuts(&cut, 0x2545_F491_4F6C_DD1D)),
            ),
        ] {
            let ours = bh_message(case.wire, cut.clone(), delivery);
            checked += 1;
            if let Some(d) = differences(&ours, &pi["cut"]) {
                failures.push(format!("{} / {label}:\n{d}", case.name));
            }
        }
    }
    assert!(checked >= 6 * 24, "the manifest lists the streams");
    assert!(
        failures.is_empty(),
        "{} of {checked} replays differ from Pi 1.6:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

/// A stream that ends early is retried as Pi's auto-retry retries it (also after content
/// arrived): the retry's message is the whole recording's, Pi's `full` message. The delays
/// are scaled down (Pi's are 2 s, 4 s, 8 s: `RetryPolicy::default`, checked in the unit
/// tests); nothing here measures time.
#[test]
fn early_ends_are_retried_into_pis_message() {
    for case in cases()
        .into_iter()
        .filter(|c| LIVE.contains(&c.name.as_str()))
    {
        let pi = expectation(&case.name);
        let server = serve(
            vec![
                (case.cut_short(), Delivery::Single),
                (case.cut_short(), Delivery::Single),
                (case.body.clone(), Delivery::At(case.event_ends.clone())),
            ],
            fallback(case.wire),
        );
        let retry = RetryPolicy {
            base_delay: Duration::from_millis(2),
            ..RetryPolicy::default()
        };
        let provider = HttpProvider::new(bh_model(case.wire, &server.base))
            .unwrap()
            .with_retry(retry);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let msg = rt.block_on(async {
            let req = ChatRequest {
                messages: vec![Message::user_text("hi", 1)].into(),
                ..ChatRequest::default()
            };
            collect(provider.stream(req, CancellationToken::new())).await
        });
        assert_eq!(*server.requests.lock().unwrap(), 3, "{}", case.name);
        if let Some(d) = differences(&serde_json::to_value(msg).unwrap(), &pi["full"]) {
            panic!("{} after two early ends:\n{d}", case.name);
        }
    }
}

/// The subset run against the live Pi in every test run.
const LIVE: [&str; 7] = [
    "anthropic-max-tokens-mid-tool",
    "anthropic-thinking",
    "anthropic-redacted-thinking",
    "deepseek-length-mid-tool",
    "azure-model-router",
    "xai-tool-call",
    "openai-parallel-tools",
];

#[test]
fn live_pi_agrees_with_the_recordings() {
    let Some(pi) = real_pi(PiRelease::Current) else {
        return;
    };
    let all = cases();
    for name in LIVE {
        let case = all.iter().find(|c| c.name == name).unwrap();
        let recorded = expectation(name);
        let full = pi_message(&pi, case, case.body.clone());
        if let Some(d) = differences(&full, &recorded["full"]) {
            panic!("Pi 1.6 no longer writes the recorded message for {name}:\n{d}");
        }
        let cut = pi_message(&pi, case, case.cut_short());
        if let Some(d) = differences(&cut, &recorded["cut"]) {
            panic!("Pi 1.6 no longer writes the recorded message for {name} cut short:\n{d}");
        }
    }
}

#[test]
#[ignore = "re-records the expectations from the real Pi; run explicitly"]
fn record_pi_expectations() {
    let pi = real_pi(PiRelease::Current).expect("node and npm are needed to record");
    fs_err::create_dir_all(dir().join("pi-1.6.0")).unwrap();
    for case in cases() {
        let full = pi_message(&pi, &case, case.body.clone());
        let cut = pi_message(&pi, &case, case.cut_short());
        let v = json!({"pi": "@earendil-works/pi-coding-agent@1.6.0", "full": full, "cut": cut});
        fs_err::write(
            expectation_path(&case.name),
            serde_json::to_string_pretty(&v).unwrap() + "\n",
        )
        .unwrap();
    }
}
