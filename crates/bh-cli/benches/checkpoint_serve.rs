//! Hook-path checkpoint benchmark (issue 14): `bh checkpoint hook
//! claude-code` as Claude Code runs it — a new `bh` process per call — talking
//! to a warm `bh checkpoint serve --socket`, side by side with `git status
//! --porcelain=v2 -uall` on the same tree in the same run.
//!
//! ```text
//! cargo bench -p bh-cli --bench checkpoint_serve -- [--files 100000] [--mib 1024]
//!     [--deps 50000] [--rounds 11] [--dir DIR]
//! ```
//!
//! The tree is the checkpoint bench's (`crates/bh-checkpoint/benches/
//! checkpoint.rs`, generator copied verbatim): `--files` files of
//! pseudo-source in `files/50` folders plus an ignored `node_modules/` of
//! `--deps` files, committed as a Git repository. Each round rewrites ten
//! files in ten folders, then times, interleaved: the hook through the warm
//! server, `git status` (ten changed files); the hook again (nothing
//! changed), `git status`; and the hook with `--no-server` (an ordinary
//! snapshot in a new process) for reference. Every timed command is a fresh
//! process (spawn to exit, stdin fed from a file), bh and git alike.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use fs_err as fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use bh_test_support::bench_tree::Gen;
use serde_json::{Value, json};

struct Opts {
    files: usize,
    mib: u64,
    deps: usize,
    rounds: usize,
    dir: Option<PathBuf>,
}

fn parse_opts() -> Result<Opts> {
    let mut o = Opts {
        files: 100_000,
        mib: 1024,
        deps: 50_000,
        rounds: 11,
        dir: None,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut val = || it.next().context("missing value");
        match a.as_str() {
            "--files" => o.files = val()?.parse()?,
            "--mib" => o.mib = val()?.parse()?,
            "--deps" => o.deps = val()?.parse()?,
            "--rounds" => o.rounds = val()?.parse()?,
            "--dir" => o.dir = Some(PathBuf::from(val()?)),
            "--bench" => {}
            other => bail!("unknown option {other}"),
        }
    }
    Ok(o)
}

/// The checkpoint bench's tree generator (shared in bh-test-support).
fn generate(project: &Path, files: usize, total_mib: u64, deps: usize) -> Result<u64> {
    Ok(bh_test_support::bench_tree::generate(
        project, files, total_mib, deps,
    )?)
}

fn git(dir: &Path, args: &[&str]) -> Result<()> {
    let st = bh_test_support::git_command()
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", "b")
        .env("GIT_AUTHOR_EMAIL", "b@b")
        .env("GIT_COMMITTER_NAME", "b")
        .env("GIT_COMMITTER_EMAIL", "b@b")
        .stdout(Stdio::null())
        .status()?;
    if !st.success() {
        bail!("git {args:?} failed");
    }
    Ok(())
}

/// Wall time of one process, spawn to exit, stdin from `input`.
fn time(cmd: &mut Command, input: Option<&Path>) -> Result<(f64, Vec<u8>)> {
    let stdin = match input {
        Some(p) => Stdio::from(fs::File::open(p)?.into_file()),
        None => Stdio::null(),
    };
    let start = Instant::now();
    let out = cmd.stdin(stdin).stderr(Stdio::piped()).output()?;
    let ms = start.elapsed().as_secs_f64() * 1000.0;
    if !out.status.success() {
        bail!("{cmd:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok((ms, out.stdout))
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    if v.is_empty() { 0.0 } else { v[v.len() / 2] }
}

#[allow(
    clippy::too_many_lines,
    reason = "one end-to-end scenario, read top to bottom"
)]
fn main() -> Result<()> {
    let o = parse_opts()?;
    let bh = PathBuf::from(env!("CARGO_BIN_EXE_bh"));
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target");
    let mut _tmp = None;
    let root = match &o.dir {
        Some(d) => {
            fs::create_dir_all(d)?;
            fs::canonicalize(d)?
        }
        None => {
            fs::create_dir_all(&target)?;
            let t = tempfile::Builder::new()
                .prefix("bh-serve-bench-")
                .tempdir_in(&target)?;
            let p = t.path().to_path_buf();
            _tmp = Some(t);
            p
        }
    };
    let project = root.join("project");
    let state = root.join("state");
    let _ = fs::remove_dir_all(&project);
    let _ = fs::remove_dir_all(&state);
    fs::create_dir_all(&project)?;
    eprintln!("generating {} files in {}", o.files, project.display());
    let t = Instant::now();
    let bytes = generate(&project, o.files, o.mib, o.deps)?;
    eprintln!(
        "generated {:.1} MiB in {:.1}s; committing",
        bytes as f64 / 1048576.0,
        t.elapsed().as_secs_f64()
    );
    git(&project, &["init", "-q"])?;
    git(&project, &["add", "-A"])?;
    git(&project, &["commit", "-q", "-m", "tree"])?;
    let event = root.join("event.json");
    fs::write(
        &event,
        json!({"hook_event_name": "PreToolUse", "tool_name": "Edit",
               "session_id": "bench", "tool_use_id": "t", "cwd": project})
        .to_string(),
    )?;
    let hook = |extra: &[&str]| {
        let mut c = Command::new(&bh);
        c.arg("--state-dir")
            .arg(&state)
            .args([
                "--json",
                "checkpoint",
                "hook",
                "claude-code",
                "--server-idle",
                "0s",
            ])
            .args(extra)
            .current_dir(&project);
        c
    };
    let status = || {
        let mut c = bh_test_support::git_command();
        c.args(["status", "--porcelain=v2", "-uall"])
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .current_dir(&project);
        c
    };
    // First (seeding) snapshot, then the server.
    let (first, _) = time(&mut hook(&["--no-server"]), Some(&event))?;
    eprintln!("first snapshot (seeded): {first:.0} ms; starting the server");
    let mut server = Command::new(&bh)
        .arg("--state-dir")
        .arg(&state)
        .args(["--json", "checkpoint", "serve", "--socket", "--idle", "1h"])
        .current_dir(&project)
        .stdout(Stdio::piped())
        .spawn()?;
    let mut hello = String::new();
    BufReader::new(server.stdout.take().context("stdout")?).read_line(&mut hello)?;
    eprintln!("server: {}", hello.trim());
    // The server's first two snapshots are ordinary (the second arms the
    // watch); take them before the timed rounds.
    for _ in 0..2 {
        time(&mut hook(&[]), Some(&event))?;
    }
    let mut rows: [Vec<f64>; 5] = Default::default();
    let mut via_server = 0;
    let mut g = Gen(42);
    let mut buf = Vec::new();
    let dirs = (o.files / 50).max(1);
    for round in 0..o.rounds {
        for k in 0..10 {
            let i = (round * 10 + k) * 7919 % o.files;
            let d = i % dirs;
            g.text(8192, &mut buf);
            fs::write(
                project.join(format!("src/m{:02}/d{:04}/f{i}.rs", d % 40, d)),
                &buf,
            )?;
        }
        let (ms, out) = time(&mut hook(&[]), Some(&event))?;
        let v: Value = serde_json::from_slice(&out)?;
        if v["server"] == true {
            via_server += 1;
        }
        rows[0].push(ms);
        rows[1].push(time(&mut status(), None)?.0);
        let (ms, out) = time(&mut hook(&[]), Some(&event))?;
        let v: Value = serde_json::from_slice(&out)?;
        if v["server"] == true && v["snapshot"]["created"] == false {
            via_server += 1;
        }
        rows[2].push(ms);
        rows[3].push(time(&mut status(), None)?.0);
        rows[4].push(time(&mut hook(&["--no-server"]), Some(&event))?.0);
    }
    let _ = server.kill();
    let _ = server.wait();
    let m: Vec<f64> = rows.iter_mut().map(|r| median(r)).collect();
    println!("| operation | median | runs |\n|---|---:|---:|");
    let names = [
        "hook via warm server, ten changed files",
        "git status --porcelain=v2 -uall (ten changed files)",
        "hook via warm server, nothing changed",
        "git status --porcelain=v2 -uall (nothing changed)",
        "hook without server (ordinary snapshot), nothing changed",
    ];
    for (n, v) in names.iter().zip(&m) {
        println!("| {n} | {v:.1} ms | {} |", o.rounds);
    }
    println!(
        "\nratios: ten changed {:.3}x (target <= 0.1x), nothing changed {:.3}x (target <= 0.05x); \
         {via_server}/{} hook calls answered by the server",
        m[0] / m[1],
        m[2] / m[3],
        2 * o.rounds
    );
    let out = target.join("bench-results");
    fs::create_dir_all(&out)?;
    fs::write(
        out.join("checkpoint_serve.json"),
        serde_json::to_vec_pretty(&json!({
            "files": o.files, "rounds": o.rounds,
            "rows": names.iter().zip(&m).map(|(n, v)| json!({"op": n, "median_ms": v})).collect::<Vec<_>>(),
            "ratio_ten_changed": m[0] / m[1], "ratio_nothing_changed": m[2] / m[3],
            "via_server": via_server,
        }))?,
    )?;
    Ok(())
}
