//! For benchmarks: a large, deterministic, Pi-shaped session (user turns,
//! assistant messages with thinking and tool calls, 2–30 KB tool results,
//! labels, compactions), the file the session benchmarks measure.

use std::io::Write;
use std::path::Path;

/// xorshift: deterministic filler.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

const WORDS: &[&str] = &[
    "fn",
    "let",
    "mut",
    "impl",
    "struct",
    "return",
    "match",
    "Some(x)",
    "None",
    "=>",
    "{",
    "}",
    "self.index",
    "Result<(), Error>",
    "// comment",
    "\"quoted\"",
    "path/to/file.rs",
    "\\t",
    "unsafe",
    "ok",
    "error[E0382]:",
    "warning:",
    "-->",
    "src/lib.rs:42:7",
    "|",
    "^^^^",
    "é",
    "→",
];

fn text(rng: &mut Rng, lines: usize) -> String {
    let mut s = String::new();
    for i in 0..lines {
        let n = 4 + rng.below(12);
        s.push_str(&format!("{:>5}\t", i + 1));
        for _ in 0..n {
            s.push_str(WORDS[rng.below(WORDS.len() as u64) as usize]);
            s.push(' ');
        }
        s.push('\n');
    }
    s
}

fn usage(rng: &mut Rng) -> serde_json::Value {
    let input = 1000 + rng.below(50_000);
    let output = 50 + rng.below(2000);
    let cache = rng.below(40_000);
    serde_json::json!({
        "input": input, "output": output, "cacheRead": cache, "cacheWrite": 0,
        "totalTokens": input + output + cache,
        "cost": {"input": input as f64 * 3e-6, "output": output as f64 * 1.5e-5, "cacheRead": cache as f64 * 3e-7, "cacheWrite": 0, "total": input as f64 * 3e-6 + output as f64 * 1.5e-5 + cache as f64 * 3e-7}
    })
}

/// Write a Pi-shaped session of about `target` bytes.
#[allow(
    clippy::too_many_lines,
    reason = "one end-to-end scenario, read top to bottom"
)]
pub fn generate(path: &Path, target: u64) -> std::io::Result<()> {
    if let Some(d) = path.parent() {
        fs_err::create_dir_all(d)?;
    }
    let mut f = std::io::BufWriter::new(fs_err::File::create(path)?);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut written = 0u64;
    let mut n = 0u64;
    let mut parent: Option<String> = None;
    let mut ms: i64 = 1_767_225_600_000;
    let line = |f: &mut std::io::BufWriter<fs_err::File>,
                written: &mut u64,
                v: serde_json::Value|
     -> std::io::Result<()> {
        let s = serde_json::to_string(&v).map_err(std::io::Error::other)?;
        f.write_all(s.as_bytes())?;
        f.write_all(b"\n")?;
        *written += s.len() as u64 + 1;
        Ok(())
    };
    line(
        &mut f,
        &mut written,
        serde_json::json!({"type":"session","version":3,"id":"01a22bee-0000-7000-8000-000000000000","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/home/dev/project"}),
    )?;
    let next_id = |n: &mut u64| {
        *n += 1;
        format!("{:08x}", (*n).wrapping_mul(0x9e37_79b1) as u32)
    };
    let ts = |ms: i64| {
        jiff::Timestamp::from_millisecond(ms)
            .map(|t| t.strftime("%Y-%m-%dT%H:%M:%S.000Z").to_string())
            .unwrap_or_default()
    };
    let mut turn = 0u64;
    while written < target {
        turn += 1;
        let entry = |kind: serde_json::Value,
                     parent: &mut Option<String>,
                     n: &mut u64,
                     ms: &mut i64|
         -> serde_json::Value {
            let id = next_id(n);
            *ms += 1000 + (id.len() as i64);
            let mut v = kind;
            v["id"] = serde_json::json!(id);
            v["parentId"] = serde_json::json!(parent.clone());
            v["timestamp"] = serde_json::json!(ts(*ms));
            *parent = Some(id);
            v
        };
        if turn % 500 == 1 {
            let v = entry(
                serde_json::json!({"type":"model_change","provider":"anthropic","modelId": if turn % 1000 == 1 {"claude-sonnet-4-5"} else {"claude-opus-4-1"}}),
                &mut parent,
                &mut n,
                &mut ms,
            );
            line(&mut f, &mut written, v)?;
        }
        let prompt = {
            let k = 1 + rng.below(4) as usize;
            text(&mut rng, k)
        };
        let v = entry(
            serde_json::json!({"type":"message","message":{"role":"user","content":[{"type":"text","text":prompt}],"timestamp":ms}}),
            &mut parent,
            &mut n,
            &mut ms,
        );
        line(&mut f, &mut written, v)?;
        for call in 0..(1 + rng.below(3)) {
            let call_id = format!("toolu_{turn:06}_{call}");
            let tool = ["read", "bash", "edit", "grep"][rng.below(4) as usize];
            let thinking = {
                let k = 2 + rng.below(6) as usize;
                text(&mut rng, k)
            };
            let v = entry(
                serde_json::json!({"type":"message","message":{"role":"assistant","content":[
                    {"type":"thinking","thinking":thinking,"thinkingSignature":"sig"},
                    {"type":"toolCall","id":call_id,"name":tool,"arguments":{"path":"src/lib.rs","command":"cargo test 2>&1 | tail -50"}}],
                    "api":"anthropic-messages","provider":"anthropic","model":"claude-sonnet-4-5","usage":usage(&mut rng),"stopReason":"toolUse","timestamp":ms}}),
                &mut parent,
                &mut n,
                &mut ms,
            );
            line(&mut f, &mut written, v)?;
            // Large tool results: 2–30 KB.
            let out = {
                let k = 30 + rng.below(350) as usize;
                text(&mut rng, k)
            };
            let v = entry(
                serde_json::json!({"type":"message","message":{"role":"toolResult","toolCallId":call_id,"toolName":tool,
                    "content":[{"type":"text","text":out}],"details":{"truncation":null,"exitCode":0},"isError": rng.below(10) == 0,"timestamp":ms}}),
                &mut parent,
                &mut n,
                &mut ms,
            );
            line(&mut f, &mut written, v)?;
        }
        let answer = {
            let k = 2 + rng.below(10) as usize;
            text(&mut rng, k)
        };
        let v = entry(
            serde_json::json!({"type":"message","message":{"role":"assistant","content":[{"type":"text","text":answer}],
                "api":"anthropic-messages","provider":"anthropic","model":"claude-sonnet-4-5","usage":usage(&mut rng),"stopReason":"stop","timestamp":ms}}),
            &mut parent,
            &mut n,
            &mut ms,
        );
        let answer_id = parent.clone();
        line(&mut f, &mut written, v)?;
        if turn.is_multiple_of(97)
            && let Some(a) = &answer_id
        {
            let v = entry(
                serde_json::json!({"type":"label","targetId":a,"label":format!("turn-{turn}")}),
                &mut parent,
                &mut n,
                &mut ms,
            );
            line(&mut f, &mut written, v)?;
        }
        if turn.is_multiple_of(400) {
            let keep = answer_id.clone();
            let v = entry(
                serde_json::json!({"type":"compaction","summary":text(&mut rng, 40),"firstKeptEntryId":keep,"tokensBefore":150_000,"details":{"readFiles":["src/lib.rs"],"modifiedFiles":[]}}),
                &mut parent,
                &mut n,
                &mut ms,
            );
            line(&mut f, &mut written, v)?;
        }
    }
    f.flush()?;
    Ok(())
}
