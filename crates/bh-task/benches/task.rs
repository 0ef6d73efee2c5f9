//! Task-session benchmark, side by side with raw git in one run:
//! (1) harness overhead of a trivial task against a bare
//! `git worktree add --detach` + `git worktree remove` on a 10,000-file
//! repository; (2) validating 100 commits of 10 files each against
//! `git log --name-status` over the same range.
//!
//! ```text
//! cargo bench -p bh-task --bench task -- [--files 10000] [--rounds 7]
//! ```

use fs_err as fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use bh_git::Scope;
use bh_task::run::{TaskOptions, new_task_id, run_task};
use bh_task::{FrozenScope, ScopeSpec, validate_candidate};
use bh_test_support::{git_isolated, process_runner as runner};

fn git(dir: &Path, args: &[&str]) -> Result<String> {
    Ok(git_isolated(dir, args)?)
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("op") {
        return op(&args[1..]);
    }
    let mut files = 10_000usize;
    let mut rounds = 7usize;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--files" => files = it.next().context("value")?.parse()?,
            "--rounds" => rounds = it.next().context("value")?.parse()?,
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
        let dir = repo.join(format!("src/d{:03}", i % 200));
        if i < 200 {
            fs::create_dir_all(&dir)?;
        }
        fs::write(
            dir.join(format!("f{i}.rs")),
            format!("pub fn f{i}() -> u32 {{ {i} }}\n"),
        )?;
    }
    git(&repo, &["add", "-A"])?;
    git(&repo, &["commit", "-q", "-m", "base"])?;
    let exe = std::env::current_exe()?;
    let time = |cmd: &mut Command| -> Result<f64> {
        let start = Instant::now();
        let out = cmd.output()?;
        if !out.status.success() {
            bail!("{cmd:?}: {}", String::from_utf8_lossy(&out.stderr));
        }
        Ok(start.elapsed().as_secs_f64() * 1000.0)
    };
    let median = |mut v: Vec<f64>| {
        v.sort_by(|a, b| a.total_cmp(b));
        v[v.len() / 2]
    };
    let (mut bare, mut task) = (Vec::new(), Vec::new());
    for r in 0..rounds {
        let wt = root.join(format!("bare-{r}"));
        let wt_s = wt.to_str().context("utf8")?.to_owned();
        bare.push(time(Command::new("sh").current_dir(&repo).args([
            "-c",
            &format!(
                "git worktree add -q --detach '{wt_s}' HEAD && git worktree remove --force '{wt_s}'"
            ),
        ]))?);
        task.push(time(Command::new(&exe).args([
            "op".as_ref(),
            "task".as_ref(),
            repo.as_os_str(),
            root.join(format!("state-{r}")).as_os_str(),
        ]))?);
    }
    // 100 commits of 10 files each, on a side branch
    git(&repo, &["checkout", "-q", "-b", "work"])?;
    let base = git(&repo, &["rev-parse", "HEAD"])?;
    for c in 0..100 {
        for k in 0..10 {
            let i = (c * 97 + k * 1009) % files;
            let path = repo.join(format!("src/d{:03}/f{i}.rs", i % 200));
            fs::write(&path, format!("pub fn changed{c}_{k}() {{}}\n"))?;
        }
        git(&repo, &["commit", "-q", "-am", &format!("c{c}")])?;
    }
    let head = git(&repo, &["rev-parse", "HEAD"])?;
    let (mut log, mut validate) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        log.push(time(
            bh_test_support::git_command().current_dir(&repo).args([
                "log",
                "--name-status",
                "--no-renames",
                &format!("{base}..{head}"),
            ]),
        )?);
        validate.push(time(Command::new(&exe).args([
            "op".as_ref(),
            "validate".as_ref(),
            repo.as_os_str(),
            base.as_ref(),
            head.as_ref(),
        ]))?);
    }
    let (b, t, l, v) = (median(bare), median(task), median(log), median(validate));
    println!("| operation | median | ratio | limit |\n|---|---:|---:|---:|");
    println!(
        "| `git worktree add --detach` + `git worktree remove` ({files} files) | {b:.0} ms | | |"
    );
    println!(
        "| `bh` task, trivial worker (`true`), same repository | {t:.0} ms | {:.2}× | ≤ 1.5× |",
        t / b
    );
    println!("| `git log --name-status` over 100 commits × 10 files | {l:.0} ms | | |");
    println!(
        "| bh validation of the same 100 commits | {v:.0} ms | {:.2}× | ≤ 2× |",
        v / l
    );
    Ok(())
}

/// One operation in a fresh process: `op task REPO STATE` or
/// `op validate REPO BASE HEAD`.
fn op(args: &[String]) -> Result<()> {
    match args {
        [what, repo, state] if what == "task" => {
            let state = PathBuf::from(state);
            let id = new_task_id();
            let opts = TaskOptions {
                source: PathBuf::from(repo),
                scope: ScopeSpec {
                    modules: vec![b"src".to_vec()],
                    ..Default::default()
                },
                promote: false,
                artifacts: state.join("tasks").join(&id),
                lock_dir: state.join("locks"),
                timeout: Some(Duration::from_secs(60)),
                argv: vec!["true".into()],
                env: vec![("PATH".into(), std::env::var_os("PATH").unwrap_or_default())],
                id,
                harness_digest: String::new(),
                inside_task_session: false,
                tasks_root: state.join("tasks"),
                grace: Duration::from_secs(1),
                commit: false,
                message: None,
                patch_limit: 16 << 20,
                sandbox: Some(bh_task::run::SandboxOptions {
                    network: true,
                    ..Default::default()
                }),
                config_files: Vec::new(),
                echo: None,
            };
            let report = run_task(&runner(), &opts, &AtomicBool::new(false))?;
            if report.outcome != bh_task::run::Outcome::Succeeded {
                bail!("task ended {:?}: {:?}", report.outcome, report.reasons);
            }
        }
        [what, repo, base, head] if what == "validate" => {
            let repo = runner().repo(repo, Scope::User);
            let scope = FrozenScope::freeze(
                &repo,
                base,
                &ScopeSpec {
                    modules: vec![b"src".to_vec()],
                    ..Default::default()
                },
                None,
            )?;
            let v = validate_candidate(&repo, &scope, head)?;
            if !v.is_empty() {
                bail!("unexpected violations: {v:?}");
            }
        }
        _ => bail!("op: usage"),
    }
    Ok(())
}
