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

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use bh_session::Session;
use bh_test_support::bench_session::generate;

fn vm_hwm_kb() -> u64 {
    fs_err::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

fn phase(name: &str, file: &Path) -> Result<(), String> {
    match name {
        "serde" => {
            let t = Instant::now();
            let data = fs_err::read(file).map_err(|e| e.to_string())?;
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
    let size = fs_err::metadata(&file).map_err(|e| e.to_string())?.len();
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
            fs_err::write(&script, PI_SCRIPT).map_err(|e| e.to_string())?;
            let copy = root.join("pi-copy.jsonl");
            let mut rs = Vec::new();
            let mut last = serde_json::Value::Null;
            for _ in 0..runs {
                fs_err::copy(&file, &copy).map_err(|e| e.to_string())?;
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
            let _ = fs_err::remove_file(&copy);
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
