//! Executor benchmark, side by side with the raw baselines in one run:
//! (1) `plan` on a ~100 MB Pi session and a large repository against hashing
//! the session file plus `git rev-parse`; (2) `run` excluding the model (a
//! scripted model that reads a file, edits it, writes a new one and stops),
//! with no checkout (the default) and with `--checkout`, against a bare
//! `git worktree add --detach` + `git worktree remove`; the process's peak
//! memory is read before and after the runs without a checkout.
//!
//! ```text
//! cargo bench -p bh-exec --bench exec -- [--files 100000] [--mb 100] [--rounds 5] [--only-plan]
//! ```

use fs_err as fs;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use bh_exec::{Limits, PlanRequest, RunSetup, make_plan, run_plan, write_plan};
use bh_llm::{Api, ModelSpec, ScriptedProvider};
use bh_test_support::{git_isolated, process_runner as runner};
use sha2::Digest;

fn git(dir: &Path, args: &[&str]) -> Result<String> {
    Ok(git_isolated(dir, args)?)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// A valid Pi session of about `mb` megabytes: a chain of user/assistant
/// messages with large texts. Returns the last entry id.
fn write_session(path: &Path, cwd: &Path, mb: usize) -> Result<String> {
    let mut f = std::io::BufWriter::new(fs::File::create(path)?);
    writeln!(
        f,
        "{}",
        serde_json::json!({"type": "session", "version": 3, "id": "01a22bee-0000-7000-8000-00000000bench",
            "timestamp": "2026-11-30T10:00:00.000Z", "cwd": cwd})
    )?;
    let filler = "lorem ipsum dolor sit amet ".repeat(1200); // ~32 KB
    let zero = serde_json::json!({"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2,
        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}});
    let mut parent = serde_json::Value::Null;
    let mut written = 0usize;
    let mut i = 0u64;
    while written < mb * 1_000_000 {
        let id = format!("{i:08x}");
        let message = if i.is_multiple_of(2) {
            serde_json::json!({"role": "user", "content": [{"type": "text", "text": filler}], "timestamp": 1})
        } else {
            serde_json::json!({"role": "assistant", "content": [{"type": "text", "text": filler}],
                "api": "scripted", "provider": "scripted", "model": "scripted", "usage": zero,
                "stopReason": "stop", "timestamp": 1})
        };
        let line = serde_json::json!({"type": "message", "id": id, "parentId": parent,
            "timestamp": "2026-11-30T10:00:00.000Z", "message": message})
        .to_string();
        written += line.len() + 1;
        writeln!(f, "{line}")?;
        parent = serde_json::Value::String(id);
        i += 1;
    }
    f.flush()?;
    Ok(parent.as_str().unwrap_or_default().to_owned())
}

#[tokio::main]
#[allow(
    clippy::too_many_lines,
    reason = "one end-to-end scenario, read top to bottom"
)]
async fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (mut files, mut mb, mut rounds) = (100_000usize, 100usize, 5usize);
    let mut only_plan = false;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--files" => files = it.next().context("value")?.parse()?,
            "--mb" => mb = it.next().context("value")?.parse()?,
            "--rounds" => rounds = it.next().context("value")?.parse()?,
            "--only-plan" => only_plan = true,
            "--bench" => {}
            other => bail!("unknown option {other}"),
        }
    }
    let tmp = tempfile::tempdir()?;
    let root = fs::canonicalize(tmp.path())?;
    let repo = root.join("repo");
    fs::create_dir_all(&repo)?;
    git(&repo, &["init", "-q", "-b", "main"])?;
    for i in 0..files {
        let dir = repo.join(format!("src/d{:04}", i % 2000));
        if i < 2000 {
            fs::create_dir_all(&dir)?;
        }
        fs::write(
            dir.join(format!("f{i}.rs")),
            format!("pub fn f{i}() {{}}\n"),
        )?;
    }
    git(&repo, &["add", "-A"])?;
    git(&repo, &["commit", "-q", "-m", "base"])?;
    let session = root.join("session.jsonl");
    let entry = write_session(&session, &repo, mb)?;
    let size = fs::metadata(&session)?.len();
    eprintln!(
        "repository: {files} files; session: {:.1} MB",
        size as f64 / 1e6
    );

    // (1) plan vs sha256 of the session + git rev-parse
    let key = bh_exec::PlanKey::open_or_create(&root.join("state"))?;
    let (mut base_ms, mut plan_ms) = (Vec::new(), Vec::new());
    for r in 0..rounds {
        let t = Instant::now();
        let bytes = fs::read(&session)?;
        let _ = hex::encode(sha2::Sha256::digest(&bytes));
        git(&repo, &["rev-parse", "--verify", "HEAD^{commit}"])?;
        base_ms.push(t.elapsed().as_secs_f64() * 1000.0);
        let t = Instant::now();
        let plan = make_plan(
            &runner(),
            &PlanRequest {
                repo: repo.clone(),
                base: "HEAD".into(),
                session: session.clone(),
                entry: entry.clone(),
                prompt: "continue".into(),
                model: Some("scripted/bench".into()),
                limits: Limits::default(),
                allow_filters: false,
            },
            &key,
        )?;
        write_plan(&root.join(format!("plan-{r}.json")), &plan, true)?;
        plan_ms.push(t.elapsed().as_secs_f64() * 1000.0);
    }

    if only_plan {
        let (b, p) = (median(base_ms), median(plan_ms));
        println!("| sha256 of the session + `git rev-parse` | {b:.0} ms | | |");
        println!("| `plan` | {p:.0} ms | {:.2}× | < 2× |", p / b);
        return Ok(());
    }
    // (2) run overhead (scripted answer, no tools) vs bare worktree add + remove
    let small = root.join("small-session.jsonl");
    let small_entry = write_session(&small, &repo, 1)?;
    let (mut bare_ms, mut run_ms, mut checkout_ms) = (Vec::new(), Vec::new(), Vec::new());
    let script = "{\"toolCalls\": [{\"name\": \"read\", \"arguments\": {\"path\": \"src/d0001/f1.rs\"}}]}\n\
        {\"toolCalls\": [{\"name\": \"edit\", \"arguments\": {\"path\": \"src/d0001/f1.rs\", \"edits\": [{\"oldText\": \"f1()\", \"newText\": \"f1_renamed()\"}]}}, \
        {\"name\": \"write\", \"arguments\": {\"path\": \"src/new/module.rs\", \"content\": \"pub fn new() {}\\n\"}}]}\n\
        {\"text\": \"Done.\"}\n";
    // The plan half read a 100 MB session: reset the peak (Linux's
    // `clear_refs` 5) so the runs' own peak shows.
    let _ = fs::write("/proc/self/clear_refs", "5");
    let hwm_before = peak_rss_kib();
    let mut hwm_virtual = 0;
    for r in 0..rounds {
        let wt = root.join(format!("bare-{r}"));
        let t = Instant::now();
        git(
            &repo,
            &[
                "worktree",
                "add",
                "-q",
                "--detach",
                wt.to_str().context("utf8")?,
                "HEAD",
            ],
        )?;
        git(
            &repo,
            &[
                "worktree",
                "remove",
                "--force",
                wt.to_str().context("utf8")?,
            ],
        )?;
        bare_ms.push(t.elapsed().as_secs_f64() * 1000.0);
        for checkout in [false, true] {
            let plan_path = root.join(format!("run-plan-{r}-{checkout}.json"));
            let plan = make_plan(
                &runner(),
                &PlanRequest {
                    repo: repo.clone(),
                    base: "HEAD".into(),
                    session: small.clone(),
                    entry: small_entry.clone(),
                    prompt: format!("round {r} checkout {checkout}"),
                    model: Some("scripted/bench".into()),
                    limits: Limits::default(),
                    allow_filters: false,
                },
                &key,
            )?;
            write_plan(&plan_path, &plan, true)?;
            let provider = ScriptedProvider::from_str(
                script,
                ModelSpec::new("scripted", "bench", Api::Scripted),
            )
            .map_err(|e| anyhow::anyhow!("{e}"))?;
            let mut setup =
                RunSetup::new(root.join("state"), Arc::new(provider), Default::default())?;
            setup.checkout = checkout;
            let t = Instant::now();
            let result = run_plan(&runner(), &plan_path, &setup).await?;
            let ms = t.elapsed().as_secs_f64() * 1000.0;
            if result.state != bh_exec::RunState::Committed || result.changed_paths.len() != 2 {
                bail!(
                    "unexpected run result {} {:?}",
                    result.state,
                    result.changed_paths
                );
            }
            if checkout {
                checkout_ms.push(ms);
            } else {
                run_ms.push(ms);
                hwm_virtual = hwm_virtual.max(peak_rss_kib());
            }
        }
    }
    let (b, p, w, r, c) = (
        median(base_ms),
        median(plan_ms),
        median(bare_ms),
        median(run_ms),
        median(checkout_ms),
    );
    println!("| operation | median | ratio | limit |\n|---|---:|---:|---:|");
    println!(
        "| sha256 of the {:.0} MB session + `git rev-parse` | {b:.0} ms | | |",
        size as f64 / 1e6
    );
    println!(
        "| `plan` (parse, path digest, ids, write) | {p:.0} ms | {:.2}× | < 2× |",
        p / b
    );
    println!(
        "| `git worktree add --detach` + `git worktree remove` ({files} files) | {w:.0} ms | | |"
    );
    println!(
        "| `run` (no checkout), scripted read + edit + write (no model time) | {r:.0} ms | {:.3}× | ≤ 1/20 |",
        r / w
    );
    println!(
        "| `run --checkout`, the same script | {c:.0} ms | {:.2}× | < 1.5× |",
        c / w
    );
    println!(
        "\npeak RSS of the bench process: {:.1} MB before the runs (peak reset), {:.1} MB after the runs without a checkout",
        hwm_before as f64 / 1024.0,
        hwm_virtual as f64 / 1024.0
    );
    Ok(())
}

/// The process's peak resident memory (`VmHWM`), in KiB.
fn peak_rss_kib() -> u64 {
    fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}
