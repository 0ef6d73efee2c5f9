//! `bh session tree` against `bh session show` on the large benchmark
//! session (the views must stay usable on sessions of any size).
//!
//! ```text
//! cargo bench -p bh-cli --bench session_view
//! ```
//!
//! Uses (or generates) the same ~100 MB session as `bh-session`'s load bench
//! (`<workspace>/.bench/pi-sessions/bench-100mb.jsonl`; `BH_BENCH_MB` to
//! change), then runs each command best of `BH_BENCH_RUNS` (default 5) with
//! stdout to `/dev/null`, reporting wall time and peak RSS of the process.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

fn main() -> Result<(), String> {
    let mb: u64 = std::env::var("BH_BENCH_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let runs: usize = std::env::var("BH_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.bench/pi-sessions");
    let file = root.join(format!("bench-{mb}mb.jsonl"));
    if !file.exists() {
        eprintln!("generating {} ...", file.display());
        bh_test_support::bench_session::generate(&file, mb * 1_000_000)
            .map_err(|e| e.to_string())?;
    }
    let size = fs_err::metadata(&file).map_err(|e| e.to_string())?.len();
    let bh = env!("CARGO_BIN_EXE_bh");
    println!(
        "file: {} ({:.1} MB), best of {runs}",
        file.display(),
        size as f64 / 1e6
    );
    let mut show_secs = None;
    for (name, args) in [
        ("session show", &["session", "show"][..]),
        ("session tree", &["session", "tree"]),
        ("session tree --full", &["session", "tree", "--full"]),
        ("session tree --json", &["--json", "session", "tree"]),
    ] {
        let mut best = f64::MAX;
        let mut rss = 0u64;
        for _ in 0..runs {
            let t = Instant::now();
            let out = Command::new("/usr/bin/time")
                .args(["-f", "%M"])
                .arg(bh)
                .args(args)
                .arg(&file)
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .output()
                .or_else(|_| {
                    Command::new(bh)
                        .args(args)
                        .arg(&file)
                        .stdout(Stdio::null())
                        .stderr(Stdio::piped())
                        .output()
                })
                .map_err(|e| e.to_string())?;
            let secs = t.elapsed().as_secs_f64();
            if !out.status.success() {
                return Err(format!(
                    "{name} failed: {}",
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
            best = best.min(secs);
            if let Some(kb) = String::from_utf8_lossy(&out.stderr)
                .lines()
                .last()
                .and_then(|l| l.trim().parse::<u64>().ok())
            {
                rss = rss.max(kb);
            }
        }
        let ratio = match show_secs {
            None => {
                show_secs = Some(best);
                "1.00×".to_owned()
            }
            Some(show) => format!("{:.2}×", best / show),
        };
        let rss = if rss > 0 {
            format!("{:.0} MiB", rss as f64 / 1024.0)
        } else {
            "n/a".to_owned()
        };
        println!(
            "{name:<22} {:>8.1} ms  {ratio:>6} of show  peak RSS {rss}",
            best * 1e3
        );
    }
    Ok(())
}
