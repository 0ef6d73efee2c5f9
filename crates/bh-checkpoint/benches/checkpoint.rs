//! Checkpoint benchmark: bh against the naive shadow-git method and against
//! `git status`, side by side in one run, on a generated tree.
//!
//! ```text
//! cargo bench -p bh-checkpoint --bench checkpoint -- [--files 100000] [--mib 1024]
//!     [--deps 50000] [--rounds 7] [--first-runs 1] [--dir DIR] [--keep]
//! ```
//!
//! Every measured operation runs as its own process (through `measure`, which
//! reports wall time and the peak RSS of the process tree), so bh and git are
//! timed the same way. Results: a Markdown table on stdout and JSON in
//! `target/bench-results/checkpoint.json`.
//!
//! Over 600 lines: one benchmark binary (tree generator, three methods, report) kept whole so a run is read top to bottom.

use fs_err as fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use bh_checkpoint::{LiveStore, RestoreMode, SnapshotRequest, Store, StoreOptions};
use bh_test_support::bench_tree::Gen;
use bh_test_support::{git_isolated, process_runner as runner};
use serde_json::{Value, json};

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("measure") => measure(&args[1..]),
        Some("op") => op(&args[1..]),
        _ => orchestrate(&args),
    }
}

/// `measure -- CMD ARGS…`: run, wait, print `{"wall_ms":…,"maxrss_kib":…}`.
fn measure(args: &[String]) -> Result<()> {
    let cmd = args
        .iter()
        .skip_while(|a| *a != "--")
        .skip(1)
        .collect::<Vec<_>>();
    let (prog, rest) = cmd.split_first().context("measure: no command")?;
    let start = Instant::now();
    let out = Command::new(prog)
        .args(rest)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()?;
    let wall = start.elapsed().as_secs_f64() * 1000.0;
    let usage = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN)?;
    if !out.status.success() {
        bail!("{prog} failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    println!(
        "{}",
        json!({ "wall_ms": wall, "maxrss_kib": usage.max_rss() })
    );
    Ok(())
}

/// `op snapshot PROJECT STATE` / `op restore PROJECT STATE ID PATH`: one
/// library call in a fresh process, as the CLI or the agent runtime makes it.
fn op(args: &[String]) -> Result<()> {
    let [what, project, state, rest @ ..] = args else {
        bail!("op: usage: op snapshot|restore PROJECT STATE [ID PATH]");
    };
    let store = Store::open(&runner(), Path::new(project), &StoreOptions::new(state))?;
    match what.as_str() {
        "snapshot" => {
            let out = store.snapshot(&SnapshotRequest {
                tool: "bench".into(),
                ..Default::default()
            })?;
            eprintln!(
                "{} created={} seeded={}",
                out.checkpoint.id, out.created, out.seeded
            );
        }
        "restore" => {
            let [id, path] = rest else {
                bail!("op restore: ID PATH")
            };
            store.restore(id, &[path.as_bytes().to_vec()], RestoreMode::Additive)?;
        }
        other => bail!("op: unknown {other}"),
    }
    Ok(())
}

struct Opts {
    files: usize,
    mib: u64,
    deps: usize,
    rounds: usize,
    first_runs: usize,
    dir: Option<PathBuf>,
    keep: bool,
}

fn parse_opts(args: &[String]) -> Result<Opts> {
    let mut o = Opts {
        files: 100_000,
        mib: 1024,
        deps: 50_000,
        rounds: 7,
        first_runs: 1,
        dir: None,
        keep: false,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut val = || it.next().cloned().context("missing value");
        match a.as_str() {
            "--files" => o.files = val()?.parse()?,
            "--mib" => o.mib = val()?.parse()?,
            "--deps" => o.deps = val()?.parse()?,
            "--rounds" => o.rounds = val()?.parse()?,
            "--first-runs" => o.first_runs = val()?.parse()?,
            "--dir" => o.dir = Some(PathBuf::from(val()?)),
            "--keep" => o.keep = true,
            "--bench" => {}
            other => bail!("unknown option {other}"),
        }
    }
    Ok(o)
}

struct Bench {
    exe: PathBuf,
    root: PathBuf,
    project: PathBuf,
}

#[derive(Clone, Copy)]
struct Sample {
    wall_ms: f64,
    maxrss_kib: i64,
}

impl Bench {
    fn run(
        &self,
        cmd: &[&std::ffi::OsStr],
        env: &[(&str, &std::ffi::OsStr)],
        cwd: &Path,
    ) -> Result<Sample> {
        let mut c = Command::new(&self.exe);
        c.arg("measure").arg("--").args(cmd).current_dir(cwd);
        for (k, v) in env {
            c.env(k, v);
        }
        let out = c.output()?;
        if !out.status.success() {
            bail!("{:?}: {}", cmd, String::from_utf8_lossy(&out.stderr));
        }
        let v: Value = serde_json::from_slice(&out.stdout)?;
        Ok(Sample {
            wall_ms: v["wall_ms"].as_f64().unwrap_or(0.0),
            maxrss_kib: v["maxrss_kib"].as_i64().unwrap_or(0),
        })
    }

    fn bh_snapshot(&self, state: &Path) -> Result<Sample> {
        let exe = self.exe.clone();
        self.run(
            &[
                exe.as_os_str(),
                "op".as_ref(),
                "snapshot".as_ref(),
                self.project.as_os_str(),
                state.as_os_str(),
            ],
            &[],
            &self.root,
        )
    }

    /// The naive method: GIT_DIR/GIT_WORK_TREE + add -A + write-tree + commit-tree.
    fn naive_snapshot(&self, git_dir: &Path) -> Result<Sample> {
        let script =
            "git add -A && t=$(git write-tree) && git commit-tree $t -m snapshot >/dev/null";
        self.run(
            &["sh".as_ref(), "-c".as_ref(), script.as_ref()],
            &[
                ("GIT_DIR", git_dir.as_os_str()),
                ("GIT_WORK_TREE", self.project.as_os_str()),
                ("GIT_CONFIG_NOSYSTEM", "1".as_ref()),
                ("GIT_CONFIG_GLOBAL", "/dev/null".as_ref()),
                ("GIT_AUTHOR_NAME", "b".as_ref()),
                ("GIT_AUTHOR_EMAIL", "b@b".as_ref()),
                ("GIT_COMMITTER_NAME", "b".as_ref()),
                ("GIT_COMMITTER_EMAIL", "b@b".as_ref()),
            ],
            &self.project,
        )
    }

    fn git_status(&self) -> Result<Sample> {
        self.run(
            &[
                "git".as_ref(),
                "status".as_ref(),
                "--porcelain=v2".as_ref(),
                "-uall".as_ref(),
            ],
            &[
                ("GIT_CONFIG_NOSYSTEM", "1".as_ref()),
                ("GIT_CONFIG_GLOBAL", "/dev/null".as_ref()),
            ],
            &self.project,
        )
    }
}

fn git(dir: &Path, args: &[&str]) -> Result<String> {
    Ok(git_isolated(dir, args)?)
}

fn generate(project: &Path, files: usize, total_mib: u64, deps: usize) -> Result<u64> {
    Ok(bh_test_support::bench_tree::generate(
        project, files, total_mib, deps,
    )?)
}

fn median(xs: &[Sample]) -> f64 {
    let mut v: Vec<f64> = xs.iter().map(|s| s.wall_ms).collect();
    v.sort_by(|a, b| a.total_cmp(b));
    if v.is_empty() { 0.0 } else { v[v.len() / 2] }
}

fn max_rss(xs: &[Sample]) -> i64 {
    xs.iter().map(|s| s.maxrss_kib).max().unwrap_or(0)
}

#[allow(
    clippy::too_many_lines,
    reason = "one end-to-end scenario, read top to bottom"
)]
fn orchestrate(args: &[String]) -> Result<()> {
    let o = parse_opts(args)?;
    let exe = std::env::current_exe()?;
    let mut tmp = None;
    let root = match &o.dir {
        Some(d) => {
            fs::create_dir_all(d)?;
            fs::canonicalize(d)?
        }
        None => {
            let t = tempfile::Builder::new()
                .prefix("bh-bench-")
                .tempdir_in(workspace_target()?)?;
            let p = t.path().to_path_buf();
            tmp = Some(t);
            p
        }
    };
    let project = root.join("project");
    let _ = fs::remove_dir_all(&project);
    fs::create_dir_all(&project)?;
    let b = Bench {
        exe,
        root: root.clone(),
        project: project.clone(),
    };
    eprintln!(
        "generating {} files (~{} MiB) + {} ignored deps in {}",
        o.files,
        o.mib,
        o.deps,
        project.display()
    );
    let t = Instant::now();
    let bytes = generate(&project, o.files, o.mib, o.deps)?;
    eprintln!(
        "generated {:.1} MiB in {:.1}s",
        bytes as f64 / 1048576.0,
        t.elapsed().as_secs_f64()
    );

    let mut rows: Vec<(String, String, f64, i64, usize)> = Vec::new();
    let mut record = |what: &str, who: &str, xs: &[Sample]| {
        eprintln!(
            "  {what:<44} {who:<28} {:>10.1} ms  (max RSS {} KiB, n={})",
            median(xs),
            max_rss(xs),
            xs.len()
        );
        rows.push((what.into(), who.into(), median(xs), max_rss(xs), xs.len()));
    };

    // (1) first snapshot of a non-git tree
    let naive_dir = root.join("naive.git");
    let mut naive_first = Vec::new();
    for _ in 0..o.first_runs {
        let _ = fs::remove_dir_all(&naive_dir);
        git(
            &root,
            &[
                "init",
                "-q",
                "--bare",
                "--template=",
                naive_dir.to_str().context("utf8")?,
            ],
        )?;
        naive_first.push(b.naive_snapshot(&naive_dir)?);
    }
    record(
        "first snapshot, non-git project",
        "naive add -A",
        &naive_first,
    );
    let mut bh_first = Vec::new();
    for i in 0..o.first_runs {
        let state = root.join(format!("state-nongit-{i}"));
        let _ = fs::remove_dir_all(&state);
        bh_first.push(b.bh_snapshot(&state)?);
        let _ = fs::remove_dir_all(&state);
    }
    record("first snapshot, non-git project", "bh", &bh_first);

    // Make the project a clean checkout: the naive shadow becomes its .git.
    let commit = {
        let tree = bh_test_support::git_command()
            .args(["write-tree"])
            .env("GIT_DIR", &naive_dir)
            .env("GIT_WORK_TREE", &project)
            .output()?;
        let tree = String::from_utf8_lossy(&tree.stdout).trim().to_owned();
        let c = bh_test_support::git_command()
            .args(["commit-tree", &tree, "-m", "initial"])
            .env("GIT_DIR", &naive_dir)
            .env("GIT_AUTHOR_NAME", "b")
            .env("GIT_AUTHOR_EMAIL", "b@b")
            .env("GIT_COMMITTER_NAME", "b")
            .env("GIT_COMMITTER_EMAIL", "b@b")
            .output()?;
        String::from_utf8_lossy(&c.stdout).trim().to_owned()
    };
    git(
        &root,
        &[
            "--git-dir",
            naive_dir.to_str().context("utf8")?,
            "config",
            "core.bare",
            "false",
        ],
    )?;
    git(
        &root,
        &[
            "--git-dir",
            naive_dir.to_str().context("utf8")?,
            "update-ref",
            "refs/heads/main",
            &commit,
        ],
    )?;
    git(
        &root,
        &[
            "--git-dir",
            naive_dir.to_str().context("utf8")?,
            "symbolic-ref",
            "HEAD",
            "refs/heads/main",
        ],
    )?;
    fs::rename(&naive_dir, project.join(".git"))?;
    git(&project, &["status", "--porcelain"])?;

    // (2) git status on the same tree
    let mut status = Vec::new();
    for _ in 0..o.rounds {
        status.push(b.git_status()?);
    }
    record("git status --porcelain=v2 -uall (clean)", "git", &status);

    // (3) first snapshot of a clean git checkout (seeded)
    let mut seeded = Vec::new();
    let state = root.join("state-git");
    for _ in 0..o.first_runs.max(3) {
        let _ = fs::remove_dir_all(&state);
        seeded.push(b.bh_snapshot(&state)?);
    }
    record("first snapshot, clean git checkout", "bh (seeded)", &seeded);

    // (4) steady state: no change, then ten changed files, interleaved
    let user_git = project.join(".git");
    let (mut bh_nc, mut st_nc, mut nv_nc) = (Vec::new(), Vec::new(), Vec::new());
    let (mut bh_ten, mut st_ten, mut nv_ten) = (Vec::new(), Vec::new(), Vec::new());
    let mut g = Gen(42);
    let mut buf = Vec::new();
    let dirs = (o.files / 50).max(1);
    for r in 0..o.rounds {
        bh_nc.push(b.bh_snapshot(&state)?);
        st_nc.push(b.git_status()?);
        nv_nc.push(b.naive_snapshot(&user_git)?);
        for k in 0..10 {
            let i = (r * 7919 + k * 104_729) % o.files;
            let d = i % dirs;
            let path = project.join(format!("src/m{:02}/d{:04}/f{i}.rs", d % 40, d));
            g.text(8000, &mut buf);
            fs::write(&path, &buf)?;
        }
        st_ten.push(b.git_status()?);
        bh_ten.push(b.bh_snapshot(&state)?);
        nv_ten.push(b.naive_snapshot(&user_git)?);
    }
    record("no-change snapshot", "bh", &bh_nc);
    record("no-change snapshot", "naive add -A", &nv_nc);
    record("git status (no change)", "git", &st_nc);
    record("ten changed files snapshot", "bh", &bh_ten);
    record("ten changed files snapshot", "naive add -A", &nv_ten);
    record("git status (ten changed files)", "git", &st_ten);

    // (4b) the same in-process through a LiveStore, as the agent takes them
    // (watched: no git process starts; wall time only, no separate RSS).
    {
        let live = LiveStore::new(std::sync::Arc::new(Store::open(
            &runner(),
            &project,
            &StoreOptions::new(&state),
        )?));
        let timed = |live: &LiveStore| -> Result<Sample> {
            let t = Instant::now();
            live.snapshot(&SnapshotRequest {
                tool: "bench".into(),
                ..Default::default()
            })?;
            Ok(Sample {
                wall_ms: t.elapsed().as_secs_f64() * 1000.0,
                maxrss_kib: -1,
            })
        };
        // A live store's first snapshot is ordinary and unarmed; the second
        // arms (walk, watches, `ls-files`) and is ordinary too.
        timed(&live)?;
        let arm = timed(&live)?;
        let (mut live_nc, mut live_ten) = (Vec::new(), Vec::new());
        for r in 0..o.rounds {
            live_nc.push(timed(&live)?);
            for k in 0..10 {
                let i = (r * 7919 + k * 104_729 + 17) % o.files;
                let d = i % dirs;
                let path = project.join(format!("src/m{:02}/d{:04}/f{i}.rs", d % 40, d));
                g.text(8000, &mut buf);
                fs::write(&path, &buf)?;
            }
            live_ten.push(timed(&live)?);
        }
        let stats = live.stats();
        eprintln!("live store: {stats:?}");
        record(
            "arming a live store (watch + ordinary snapshot)",
            "bh live",
            &[arm],
        );
        record(
            "no-change snapshot",
            "bh live (agent, in-process)",
            &live_nc,
        );
        record(
            "ten changed files snapshot",
            "bh live (agent, in-process)",
            &live_ten,
        );
    }

    // (5) restore one path
    let target = {
        let store = Store::open(&runner(), &project, &StoreOptions::new(&state))?;
        store
            .list()?
            .last()
            .context("no checkpoint")?
            .commit
            .clone()
    };
    let one = "src/m00/d0000/f0.rs";
    let (mut bh_rs, mut git_rs) = (Vec::new(), Vec::new());
    for _ in 0..o.rounds {
        fs::write(project.join(one), b"damaged\n")?;
        let exe = b.exe.clone();
        bh_rs.push(b.run(
            &[
                exe.as_os_str(),
                "op".as_ref(),
                "restore".as_ref(),
                project.as_os_str(),
                state.as_os_str(),
                target.as_ref(),
                one.as_ref(),
            ],
            &[],
            &root,
        )?);
        fs::write(project.join(one), b"damaged\n")?;
        git_rs.push(b.run(
            &[
                "git".as_ref(),
                "restore".as_ref(),
                format!("--source={commit}").as_ref(),
                "--worktree".as_ref(),
                "--".as_ref(),
                one.as_ref(),
            ],
            &[
                ("GIT_CONFIG_NOSYSTEM", "1".as_ref()),
                ("GIT_CONFIG_GLOBAL", "/dev/null".as_ref()),
            ],
            &project,
        )?);
    }
    record("restore one path (incl. safety snapshot)", "bh", &bh_rs);
    record("restore one path", "git restore --source", &git_rs);

    // (6) peak memory against file size: one new file of 1, 16, 48 MiB
    for mib in [1usize, 16, 48] {
        let small = root.join(format!("mem-{mib}"));
        let _ = fs::remove_dir_all(&small);
        fs::create_dir_all(&small)?;
        let mut data = Vec::new();
        g.text(mib << 20, &mut data);
        fs::write(small.join("big.txt"), &data)?;
        let st = root.join(format!("state-mem-{mib}"));
        let exe = b.exe.clone();
        let s = b.run(
            &[
                exe.as_os_str(),
                "op".as_ref(),
                "snapshot".as_ref(),
                small.as_os_str(),
                st.as_os_str(),
            ],
            &[],
            &root,
        )?;
        record(
            &format!("snapshot of one new {mib} MiB file (peak RSS)"),
            "bh",
            &[s],
        );
        let _ = fs::remove_dir_all(&small);
        let _ = fs::remove_dir_all(&st);
    }

    let table: Vec<Value> = rows
        .iter()
        .map(|(w, who, ms, rss, n)| json!({"operation": w, "tool": who, "median_ms": ms, "max_rss_kib": rss, "runs": n}))
        .collect();
    let doc = json!({
        "files": o.files, "bytes": bytes, "ignored_deps": o.deps, "rounds": o.rounds,
        "git": git(&root, &["--version"])?, "nproc": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        "results": table,
    });
    let out_dir = workspace_target()?.join("bench-results");
    fs::create_dir_all(&out_dir)?;
    fs::write(
        out_dir.join("checkpoint.json"),
        serde_json::to_vec_pretty(&doc)?,
    )?;
    println!("| operation | tool | median | peak RSS | runs |\n|---|---|---:|---:|---:|");
    for (w, who, ms, rss, n) in &rows {
        let rss = if *rss < 0 {
            "—".to_owned()
        } else {
            format!("{:.1} MiB", *rss as f64 / 1024.0)
        };
        println!("| {w} | {who} | {ms:.1} ms | {rss} | {n} |");
    }
    let ms = |what: &str, who: &str| {
        rows.iter()
            .find(|r| r.0 == what && r.1 == who)
            .map_or(f64::NAN, |r| r.2)
    };
    let naive_first = ms("first snapshot, non-git project", "naive add -A");
    println!("\n| target | measured | limit |\n|---|---:|---:|");
    println!(
        "| first snapshot, non-git: bh / naive | {:.2}× | ≤ 0.6× |",
        ms("first snapshot, non-git project", "bh") / naive_first
    );
    println!(
        "| first snapshot, clean checkout: bh / naive | 1/{:.0} | ≤ 1/20 |",
        naive_first / ms("first snapshot, clean git checkout", "bh (seeded)")
    );
    println!(
        "| no-change snapshot: bh / git status | {:.2}× | ≤ 1.2× |",
        ms("no-change snapshot", "bh") / ms("git status (no change)", "git")
    );
    println!(
        "| ten changed files: bh / git status | {:.2}× | ≤ 1.2× |",
        ms("ten changed files snapshot", "bh") / ms("git status (ten changed files)", "git")
    );
    println!(
        "| ten changed files, live (agent): bh / git status | {:.2}× | — |",
        ms("ten changed files snapshot", "bh live (agent, in-process)")
            / ms("git status (ten changed files)", "git")
    );
    if o.keep {
        eprintln!("kept {}", root.display());
        if let Some(t) = tmp {
            let _ = t.keep();
        }
    } else if o.dir.is_some() {
        let _ = fs::remove_dir_all(&project);
    }
    Ok(())
}

fn workspace_target() -> Result<PathBuf> {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let target = manifest.join("../../target");
    fs::create_dir_all(&target)?;
    Ok(fs::canonicalize(target)?)
}
