//! Load benchmark: bh-session vs bare `serde_json::Value` vs the real Pi.
//!
//! ```text
//! cargo bench -p bh-session --bench load
//! ```
//!
//! Generates a ~100 MB session (`BH_BENCH_MB` to change) under `<workspace>/.bench/`,
//! then runs each phase in its own child process (so peak RSS, read from
//! `/proc/self/status` `VmHWM`, belongs to that phase alone), best of
//! `BH_BENCH_RUNS` (default 3):
//! * `serde`: read the file, parse every line into a `serde_json::Value`.
//! * `bh`: `Session::load` (read + index + in-memory migration) + `is_valid`
//!   (validation: ids, parents, cycles) + leaf + stats.
//! * `pi`: Node running Pi's `SessionManager.open(file)` (time of that call;
//!   peak RSS of the whole Node process), when Node and Pi are found.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use bh_session::Session;

fn vm_hwm_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

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
fn generate(path: &Path, target: u64) -> std::io::Result<()> {
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d)?;
    }
    let mut f = std::io::BufWriter::new(std::fs::File::create(path)?);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut written = 0u64;
    let mut n = 0u64;
    let mut parent: Option<String> = None;
    let mut ms: i64 = 1_767_225_600_000;
    let line = |f: &mut std::io::BufWriter<std::fs::File>,
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

fn phase(name: &str, file: &Path) -> Result<(), String> {
    match name {
        "serde" => {
            let t = Instant::now();
            let data = std::fs::read(file).map_err(|e| e.to_string())?;
            let mut objects = 0usize;
            for line in data.split(|&b| b == b'\n') {
                if line.is_empty() {
                    continue;
                }
                let v: serde_json::Value =
                    serde_json::from_slice(line).map_err(|e| e.to_string())?;
                if v.is_object() {
                    objects += 1;
                }
            }
            let secs = t.elapsed().as_secs_f64();
            println!(
                "{}",
                serde_json::json!({"secs": secs, "hwm_kb": vm_hwm_kb(), "count": objects})
            );
        }
        "bh" => {
            let t = Instant::now();
            let s = Session::load(file).map_err(|e| e.to_string())?;
            let valid = s.is_valid();
            let leaf = s.leaf().map(|e| e.id.clone());
            let stats = s.stats();
            let secs = t.elapsed().as_secs_f64();
            println!(
                "{}",
                serde_json::json!({"secs": secs, "hwm_kb": vm_hwm_kb(), "count": s.entries().len() + 1,
                                   "valid": valid, "leaf": leaf, "tokens": stats.totals.total_tokens})
            );
        }
        other => return Err(format!("unknown phase {other}")),
    }
    Ok(())
}

/// The real Pi 0.73.1 as `(node, dist/cli.js)`, installed from npm into the
/// target directory on first use (`None` when Node or npm is missing).
fn real_pi() -> Option<(PathBuf, PathBuf)> {
    bh_test_support::pi::real_pi(bh_test_support::pi::PiRelease::Legacy).map(|p| (p.node, p.cli))
}

const PI_SCRIPT: &str = r#"
import { readFileSync } from "fs";
const [, , smPath, file] = process.argv;
const { SessionManager } = await import(smPath);
const hwm = () => Number((readFileSync("/proc/self/status", "utf8").match(/VmHWM:\s+(\d+)/) || [0, 0])[1]);
const t = process.hrtime.bigint();
const sm = SessionManager.open(file);
const leaf = sm.getLeafId();
const n = sm.getEntries().length + 1;
const secs = Number(process.hrtime.bigint() - t) / 1e9;
console.log(JSON.stringify({ secs, hwm_kb: hwm(), count: n, leaf }));
"#;

#[derive(Debug, Clone, Copy)]
struct Run {
    secs: f64,
    hwm_kb: u64,
}

fn best(runs: &[Run]) -> Run {
    Run {
        secs: runs.iter().map(|r| r.secs).fold(f64::INFINITY, f64::min),
        hwm_kb: runs.iter().map(|r| r.hwm_kb).min().unwrap_or(0),
    }
}

fn parse_run(out: &std::process::Output, what: &str) -> Result<(Run, serde_json::Value), String> {
    if !out.status.success() {
        return Err(format!(
            "{what} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let last = text.lines().last().unwrap_or("");
    let v: serde_json::Value =
        serde_json::from_str(last).map_err(|e| format!("{what}: bad output {last:?}: {e}"))?;
    Ok((
        Run {
            secs: v["secs"].as_f64().unwrap_or(f64::NAN),
            hwm_kb: v["hwm_kb"].as_u64().unwrap_or(0),
        },
        v,
    ))
}

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--phase") {
        let name = args.get(i + 1).ok_or("--phase NAME FILE")?;
        let file = args.get(i + 2).ok_or("--phase NAME FILE")?;
        return phase(name, Path::new(file));
    }
    let mb: u64 = std::env::var("BH_BENCH_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let runs: usize = std::env::var("BH_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.bench/pi-sessions");
    let file = root.join(format!("bench-{mb}mb.jsonl"));
    if !file.exists() {
        eprintln!("generating {} ...", file.display());
        generate(&file, mb * 1_000_000).map_err(|e| e.to_string())?;
    }
    let size = std::fs::metadata(&file).map_err(|e| e.to_string())?.len();
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    eprintln!("file: {} ({:.1} MB)", file.display(), size as f64 / 1e6);

    let mut results: Vec<(&str, Run, serde_json::Value)> = Vec::new();
    for name in ["serde", "bh"] {
        let mut rs = Vec::new();
        let mut last = serde_json::Value::Null;
        for _ in 0..runs {
            let out = Command::new(&exe)
                .args(["--phase", name])
                .arg(&file)
                .output()
                .map_err(|e| e.to_string())?;
            let (r, v) = parse_run(&out, name)?;
            rs.push(r);
            last = v;
        }
        results.push((name, best(&rs), last));
    }
    match real_pi() {
        Some((node, cli)) => {
            let sm = cli
                .parent()
                .map(|d| d.join("core/session-manager.js"))
                .ok_or("bad pi path")?;
            let script = root.join("pi-open.mjs");
            std::fs::write(&script, PI_SCRIPT).map_err(|e| e.to_string())?;
            let copy = root.join("pi-copy.jsonl");
            let mut rs = Vec::new();
            let mut last = serde_json::Value::Null;
            for _ in 0..runs {
                std::fs::copy(&file, &copy).map_err(|e| e.to_string())?;
                let out = Command::new(&node)
                    .arg(&script)
                    .arg(format!("file://{}", sm.display()))
                    .arg(&copy)
                    .env("PI_OFFLINE", "1")
                    .env("PI_TELEMETRY", "0")
                    .output()
                    .map_err(|e| e.to_string())?;
                let (r, v) = parse_run(&out, "pi")?;
                rs.push(r);
                last = v;
            }
            let _ = std::fs::remove_file(&copy);
            results.push(("pi", best(&rs), last));
        }
        None => eprintln!("Node or npm not found: skipping the Pi phase"),
    }

    let mbs = |r: &Run| size as f64 / 1e6 / r.secs;
    println!(
        "\n{:<8} {:>9} {:>10} {:>12} {:>12}",
        "phase", "time s", "MB/s", "peak RSS MB", "RSS / file"
    );
    for (name, r, _) in &results {
        println!(
            "{:<8} {:>9.3} {:>10.1} {:>12.1} {:>12.2}",
            name,
            r.secs,
            mbs(r),
            r.hwm_kb as f64 / 1024.0,
            r.hwm_kb as f64 * 1024.0 / size as f64
        );
    }
    let get = |n: &str| {
        results
            .iter()
            .find(|(x, _, _)| *x == n)
            .map(|(_, r, v)| (*r, v.clone()))
    };
    let (serde, _) = get("serde").ok_or("no serde result")?;
    let (bh, bhv) = get("bh").ok_or("no bh result")?;
    println!();
    println!(
        "bh throughput vs serde_json::Value: {:.2}x (target >= 0.8)",
        serde.secs / bh.secs
    );
    println!(
        "bh peak RSS / file size: {:.2} (target <= 1.5)",
        bh.hwm_kb as f64 * 1024.0 / size as f64
    );
    if let Some((pi, piv)) = get("pi") {
        println!("Pi faster by: {:.1}x (target >= 5)", pi.secs / bh.secs);
        println!(
            "Pi uses {:.1}x the memory (target >= 3)",
            pi.hwm_kb as f64 / bh.hwm_kb as f64
        );
        println!(
            "same leaf: bh {} / Pi {}; entries bh {} / Pi {}",
            bhv["leaf"], piv["leaf"], bhv["count"], piv["count"]
        );
    }
    println!("valid: {}", bhv["valid"]);
    Ok(())
}
