//! Many plans: `bh exec run --plans … --index I` (the exit-code contract,
//! receipts, publishing) and `bh exec batch` (pool, resume, races, kill -9),
//! through the CLI with real git and a mock model on 127.0.0.1.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::env;

use fs_err as fs;
use std::process::Stdio;
use std::time::Duration;

use env::{KEY, World};
use serde_json::Value;

fn code(out: &std::process::Output) -> i32 {
    out.status.code().unwrap_or(-1)
}

fn json_of(out: &std::process::Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

#[test]
fn batch_commits_classifies_and_resumes() {
    let w = World::new();
    let p0 = w.scripted_plan("00.json", "f0.txt", 0);
    let p1 = w.mock_plan("01.json", "f1.txt", false);
    let p2 = w.mock_plan("02.json", "f2.txt", true); // 503 while `fail`
    let p3 = w.scripted_plan("03.json", "f3.txt", 0);
    w.tamper(&p3);
    let p4 = w.scripted_plan("04.json", "f4.txt", 0);
    for p in [&p0, &p1, &p2, &p3, &p4] {
        assert!(
            !fs::read_to_string(p).unwrap().contains(KEY),
            "no key in a plan"
        );
    }
    let batch = |extra: &[&str]| {
        w.bh()
            .args([
                "--json",
                "exec",
                "batch",
                "plans",
                "--jobs",
                "3",
                "--attempts",
                "2",
            ])
            .args(["--max-retries", "0", "--base-url", &w.base_url])
            .args(extra)
            .output()
            .unwrap()
    };
    let out = batch(&[]);
    assert_eq!(
        code(&out),
        9,
        "a permanent failure: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc = json_of(&out);
    let states: Vec<&str> = doc["plans"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["state"].as_str().unwrap())
        .collect();
    assert_eq!(
        states,
        [
            "committed",
            "committed",
            "transient",
            "permanent",
            "committed"
        ]
    );
    assert_eq!(
        doc["plans"][2]["tries"], 2,
        "a transient failure is retried"
    );
    let receipts = w.plans.join("receipts");
    let r2 = w.receipt(&receipts, 2);
    assert_eq!(r2["exit_code"], 75);
    assert_eq!(r2["attempt"], 2);
    assert!(r2["message"].as_str().unwrap().contains("503"));
    let r3 = w.receipt(&receipts, 3);
    assert_eq!(r3["exit_code"], 20, "tampered: {r3}");
    assert!(w.read_ref(&w.plan_ref(&p3)).is_none());
    assert!(
        w.read_ref(&w.plan_ref(&p2)).is_none(),
        "a failed run leaves no ref"
    );
    let mut commits = Vec::new();
    for (i, p) in [(0, &p0), (1, &p1), (4, &p4)] {
        let r = w.receipt(&receipts, i);
        assert_eq!(r["state"], "committed");
        assert_eq!(r["plan_sha256"].as_str().unwrap().len(), 64);
        assert!(r["host"].as_str().is_some_and(|h| !h.is_empty()));
        let at = w.read_ref(&w.plan_ref(p)).unwrap();
        assert_eq!(r["commit"], at.as_str());
        let file = format!("f{i}.txt");
        assert_eq!(w.git(&["show", &format!("{at}:{file}")]), file);
        commits.push(at);
    }
    // Resume: the provider recovers; what is done is not run again.
    w.fail.store(false, std::sync::atomic::Ordering::SeqCst);
    let runs = w.executions();
    w.git(&["checkout", "-q", "-b", "other"]); // the user's state moves on
    let out = batch(&[]);
    assert_eq!(code(&out), 9, "the tampered plan stays permanent");
    let doc = json_of(&out);
    let states: Vec<&str> = doc["plans"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["state"].as_str().unwrap())
        .collect();
    assert_eq!(states, ["done", "done", "committed", "permanent", "done"]);
    assert_eq!(w.executions(), runs + 1, "only plan 2 ran");
    for (c, p) in commits.iter().zip([&p0, &p1, &p4]) {
        assert_eq!(
            w.read_ref(&w.plan_ref(p)).as_ref(),
            Some(c),
            "never run twice"
        );
    }
    // The resubmission list: only the permanent one is left, and it is not on it.
    let out = w
        .bh()
        .args(["exec", "batch", "plans", "--failed-indices"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "");
    // The human summary is a table.
    let out = w
        .bh()
        .args(["exec", "batch", "plans", "--base-url", &w.base_url])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("INDEX") && text.contains("4 done, 1 permanent"),
        "{text}"
    );
}

#[test]
fn index_contract_out_of_range_taken_done_and_manifest_file() {
    let w = World::new();
    let p0 = w.scripted_plan("00.json", "f0.txt", 0);
    let p1 = w.scripted_plan("01.json", "f1.txt", 0);
    // A manifest file, relative to itself, in its own order.
    fs::write(
        w.root.join("list.txt"),
        "# plans\nplans/01.json\n\nplans/00.json\n",
    )
    .unwrap();
    let run = |i: &str| {
        w.bh()
            .args([
                "--json", "exec", "run", "--yes", "--plans", "list.txt", "--index", i,
            ])
            .output()
            .unwrap()
    };
    let out = run("2");
    assert_eq!(code(&out), 28, "{}", String::from_utf8_lossy(&out.stdout));
    let receipts = w.root.join("receipts");
    assert_eq!(w.receipt(&receipts, 2)["state"], "permanent");
    let out = run("0");
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stderr));
    let doc = json_of(&out);
    assert_eq!(doc["receipt"]["state"], "committed");
    assert_eq!(doc["receipt"]["plan"], p1.to_str().unwrap());
    let c1 = w.read_ref(&w.plan_ref(&p1)).unwrap();
    // Again: done, nothing runs.
    let runs = w.executions();
    let out = run("0");
    assert_eq!(code(&out), 0);
    let doc = json_of(&out);
    assert_eq!(doc["receipt"]["state"], "done");
    assert_eq!(doc["receipt"]["commit"], c1.as_str());
    assert_eq!(doc["receipt"]["attempt"], 2);
    assert_eq!(w.executions(), runs);
    // A ref holding another commit (here: the user's base) is taken: 29.
    let base = w.git(&["rev-parse", "main"]);
    w.git(&["update-ref", &w.plan_ref(&p0), &base]);
    let out = run("1");
    assert_eq!(code(&out), 29, "{}", String::from_utf8_lossy(&out.stdout));
    assert_eq!(
        w.read_ref(&w.plan_ref(&p0)).unwrap(),
        base,
        "left as it was"
    );
    // A missing manifest: 30; without --yes: a dry run, no receipt.
    let out = w
        .bh()
        .args(["exec", "run", "--yes", "--plans", "nope", "--index", "0"])
        .output()
        .unwrap();
    assert_eq!(code(&out), 30);
    fs::remove_dir_all(&receipts).unwrap();
    let out = w
        .bh()
        .args(["exec", "run", "--plans", "list.txt", "--index", "0"])
        .output()
        .unwrap();
    assert_eq!(code(&out), 0);
    assert!(!receipts.exists());
}

#[test]
fn publish_is_create_only_and_a_retry_finds_its_commit() {
    let w = World::new();
    let central = w.root.join("central.git");
    w.git(&["init", "-q", "--bare", central.to_str().unwrap()]);
    let p0 = w.scripted_plan("00.json", "f0.txt", 0);
    let p1 = w.scripted_plan("01.json", "f1.txt", 0);
    let run = |i: &str| {
        w.bh()
            .args([
                "--json", "exec", "run", "--yes", "--plans", "plans", "--index", i,
            ])
            .args(["--publish", central.to_str().unwrap()])
            .output()
            .unwrap()
    };
    let out = run("0");
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stderr));
    let doc = json_of(&out);
    let commit = doc["receipt"]["commit"].as_str().unwrap().to_owned();
    assert_eq!(doc["receipt"]["published"], central.to_str().unwrap());
    let r0 = w.plan_ref(&p0);
    assert_eq!(w.git_in(&central, &["rev-parse", &r0]), commit);
    // The reply was lost and this worker's ref is gone (another machine):
    // the retry finds its own commit on the remote and reports done.
    w.git(&["update-ref", "-d", &r0]);
    let runs = w.executions();
    let out = run("0");
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(json_of(&out)["receipt"]["state"], "done");
    assert_eq!(w.executions(), runs, "nothing ran");
    // A different commit on the remote: permanent, the remote untouched.
    let base = w.git(&["rev-parse", "main"]);
    w.git(&[
        "push",
        "-q",
        central.to_str().unwrap(),
        &format!("{base}:{}", w.plan_ref(&p1)),
    ]);
    let out = run("1");
    assert_eq!(code(&out), 29, "{}", String::from_utf8_lossy(&out.stdout));
    assert_eq!(w.git_in(&central, &["rev-parse", &w.plan_ref(&p1)]), base);
    assert!(
        w.read_ref(&w.plan_ref(&p1)).is_none(),
        "not run when taken there"
    );
    // A remote that cannot be reached: transient.
    let p2 = w.scripted_plan("02.json", "f2.txt", 0);
    let out = w
        .bh()
        .args(["exec", "run", "--yes", "--plans", "plans", "--index", "2"])
        .args(["--publish", w.root.join("missing.git").to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(code(&out), 75, "{}", String::from_utf8_lossy(&out.stderr));
    let _ = p2;
    // A remote that looks like an option is refused.
    let out = w
        .bh()
        .args([
            "exec",
            "run",
            "--yes",
            "--plans",
            "plans",
            "--index",
            "0",
            "--publish",
            "--upload-pack=x",
        ])
        .output()
        .unwrap();
    assert_ne!(code(&out), 0);
}

#[test]
fn two_batches_at_once_make_one_result_per_plan() {
    let w = World::new();
    let plans: Vec<_> = (0..4)
        .map(|i| w.scripted_plan(&format!("{i:02}.json"), &format!("f{i}.txt"), 100))
        .collect();
    let spawn = |receipts: &str| {
        w.bh()
            .args([
                "--json",
                "exec",
                "batch",
                "plans",
                "--jobs",
                "4",
                "--receipts",
                receipts,
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let a = spawn("ra");
    let b = spawn("rb");
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    assert_eq!(code(&a), 0, "{}", String::from_utf8_lossy(&a.stdout));
    assert_eq!(code(&b), 0, "{}", String::from_utf8_lossy(&b.stdout));
    for (i, p) in plans.iter().enumerate() {
        let at = w.read_ref(&w.plan_ref(p)).unwrap();
        let ra = w.receipt(&w.root.join("ra"), i);
        let rb = w.receipt(&w.root.join("rb"), i);
        // Both report the one commit the ref holds; at most one committed it.
        assert_eq!(ra["commit"], at.as_str());
        assert_eq!(rb["commit"], at.as_str());
        let committed = [&ra, &rb]
            .iter()
            .filter(|r| r["state"] == "committed")
            .count();
        assert!(committed <= 1, "{ra} {rb}");
    }
    // No worktree left behind by a loser.
    let list = w.git(&["worktree", "list", "--porcelain"]);
    assert_eq!(list.matches("worktree ").count(), 1, "{list}");
}

#[test]
fn kill_9_of_a_batch_then_a_rerun_finishes_the_rest() {
    let w = World::new();
    let plans: Vec<_> = (0..4)
        .map(|i| w.scripted_plan(&format!("{i:02}.json"), &format!("f{i}.txt"), 300))
        .collect();
    let mut child = w
        .bh()
        .args(["exec", "batch", "plans", "--jobs", "1"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let first = w.plans.join("receipts/0.json");
    while !first.exists() {
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let out = w
        .bh()
        .args(["--json", "exec", "batch", "plans", "--jobs", "2"])
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stdout));
    let doc = json_of(&out);
    assert_eq!(doc["plans"][0]["state"], "done");
    for p in &plans {
        assert!(w.read_ref(&w.plan_ref(p)).is_some());
    }
}

#[test]
fn a_worker_killed_mid_run_leaves_no_ref_and_is_retried() {
    let w = World::new();
    let p0 = w.scripted_plan("00.json", "f0.txt", 5_000);
    let mut child = w
        .bh()
        .args(["exec", "run", "--yes", "--plans", "plans", "--index", "0"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Wait until the agent runs (its forked session exists).
    let execs = w.root.join("state/executions");
    'wait: loop {
        if let Ok(d) = fs::read_dir(&execs) {
            for e in d {
                if e.unwrap().path().join("session.jsonl").exists() {
                    break 'wait;
                }
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        w.read_ref(&w.plan_ref(&p0)).is_none(),
        "no ref from a killed worker"
    );
    // Another machine's execution (a shared state dir) is never collected here.
    let exec_dir = fs::read_dir(&execs)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let owner = fs::read_to_string(exec_dir.join("owner")).unwrap();
    assert_eq!(owner.split_whitespace().count(), 3, "{owner}");
    fs::write(exec_dir.join("owner"), "1 0 another-host").unwrap();
    let out = w
        .bh()
        .args(["--json", "exec", "gc", "--repo", "repo"])
        .output()
        .unwrap();
    assert_eq!(json_of(&out)["removed"], serde_json::json!([]));
    fs::write(exec_dir.join("owner"), "1 0").unwrap(); // a dead owner of this host
    // The batch retries it (a fresh script: no delay now).
    w.scripted_plan("00.json.script-again", "f0.txt", 0);
    fs::remove_file(w.plans.join("00.json.script-again")).unwrap();
    fs::copy(
        w.root.join("00.json.script-again.script"),
        w.root.join("00.json.script"),
    )
    .unwrap();
    let out = w
        .bh()
        .args(["--json", "exec", "batch", "plans"])
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stdout));
    assert_eq!(json_of(&out)["plans"][0]["state"], "committed");
    assert!(w.read_ref(&w.plan_ref(&p0)).is_some());
    let list = w.git(&["worktree", "list", "--porcelain"]);
    assert_eq!(
        list.matches("worktree ").count(),
        1,
        "the killed run's worktree is gone: {list}"
    );
}

#[test]
fn a_key_quoted_by_the_provider_never_reaches_a_receipt_or_the_output() {
    let w = World::new();
    w.plan("00.json", "write f0.txt echokey", "openai/gpt-test");
    let out = w
        .bh()
        .args([
            "--json", "exec", "run", "--yes", "--plans", "plans", "--index", "0",
        ])
        .args(["--base-url", &w.base_url, "--max-retries", "0"])
        .output()
        .unwrap();
    assert_eq!(
        code(&out),
        9,
        "a 401 is permanent: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!all.contains(KEY), "{all}");
    let r = w.receipt(&w.plans.join("receipts"), 0); // asserts no key
    assert!(
        r["message"]
            .as_str()
            .unwrap()
            .contains("401 Incorrect API key provided: [redacted]"),
        "{r}"
    );
    assert_eq!(r["state"], "permanent");
}

/// SIGTERM to the batch (a scheduler stopping it, `kill`): nothing new
/// starts, the running workers end their runs aborted (a transient receipt,
/// no ref, no worktree left), the batch exits 8 naming what is unsettled,
/// and running it again finishes every plan once.
#[test]
fn sigterm_stops_the_batch_and_its_workers_and_a_rerun_resumes() {
    let w = World::new();
    let plans: Vec<_> = (0..4)
        .map(|i| w.scripted_plan(&format!("{i:02}.json"), &format!("f{i}.txt"), 30_000))
        .collect();
    let child = w
        .bh()
        .args(["--json", "exec", "batch", "plans", "--jobs", "2"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until both workers' agents run (two forked sessions exist).
    wait_for_running(&w, 2);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap()),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    // It ends long before the scripted 30 s delay would.
    let out = child.wait_with_output().unwrap();
    assert_eq!(code(&out), 8, "{}", String::from_utf8_lossy(&out.stderr));
    let doc = json_of(&out);
    assert_eq!(doc["error"]["kind"], "interrupted", "{doc}");
    let said = doc["error"]["message"].as_str().unwrap();
    assert!(said.contains("stopped by a signal"), "{said}");
    assert!(said.contains("2 not; run the batch again"), "{said}");
    assert_eq!(doc["stopped"], true);
    assert_eq!(doc["unsettled"], 2);
    for i in 0..2 {
        let r = w.receipt(&w.plans.join("receipts"), i);
        assert_eq!(r["state"], "transient", "receipt {i}: {r}");
        assert_eq!(r["exit_code"], 75, "receipt {i}: {r}");
    }
    for i in 2..4 {
        assert!(
            !w.plans.join(format!("receipts/{i}.json")).exists(),
            "plan {i} never started"
        );
    }
    for p in &plans {
        assert!(
            w.read_ref(&w.plan_ref(p)).is_none(),
            "no ref from a stopped run"
        );
    }
    let list = w.git(&["worktree", "list", "--porcelain"]);
    assert_eq!(list.matches("worktree ").count(), 1, "{list}");
    // Resume with a script that does not wait.
    for (i, _) in plans.iter().enumerate() {
        let name = format!("{i:02}.json");
        w.scripted_plan(&format!("{name}.again"), &format!("f{i}.txt"), 0);
        fs::remove_file(w.plans.join(format!("{name}.again"))).unwrap();
        fs::copy(
            w.root.join(format!("{name}.again.script")),
            w.root.join(format!("{name}.script")),
        )
        .unwrap();
    }
    let out = w
        .bh()
        .args(["--json", "exec", "batch", "plans", "--jobs", "2"])
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stderr));
    let doc = json_of(&out);
    for (i, p) in plans.iter().enumerate() {
        assert_eq!(doc["plans"][i]["state"], "committed", "{doc}");
        assert!(w.read_ref(&w.plan_ref(p)).is_some());
    }
}

/// Processes whose command line names `needle` (the workers of a batch
/// over this world's plans).
fn processes_naming(needle: &str) -> usize {
    fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| {
            let e = e.ok()?;
            e.file_name().to_str()?.parse::<u32>().ok()?;
            let cmd = fs::read(e.path().join("cmdline")).ok()?;
            String::from_utf8_lossy(&cmd).contains(needle).then_some(())
        })
        .count()
}

/// A batch killed with SIGKILL cannot forward a stop: its workers are told
/// by the kernel (SIGTERM when their parent dies), end their runs aborted
/// with transient receipts and leave no ref, instead of running on.
#[test]
fn workers_of_a_batch_killed_with_sigkill_end_their_runs() {
    let w = World::new();
    let plans: Vec<_> = (0..2)
        .map(|i| w.scripted_plan(&format!("{i:02}.json"), &format!("f{i}.txt"), 30_000))
        .collect();
    let mut child = w
        .bh()
        .args(["exec", "batch", "plans", "--jobs", "2"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for_running(&w, 2);
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let needle = w.plans.display().to_string();
    let started = std::time::Instant::now();
    while processes_naming(&needle) > 0 {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "workers still run after their batch was killed"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    for i in 0..2 {
        let r = w.receipt(&w.plans.join("receipts"), i);
        assert_eq!(r["exit_code"], 75, "receipt {i}: {r}");
    }
    for p in &plans {
        assert!(w.read_ref(&w.plan_ref(p)).is_none());
    }
}

/// A plan whose run changes nothing leaves no ref; its receipt is the
/// record (for the same plan digest), so running the batch again does not
/// run it a second time (no new execution).
#[test]
fn a_plan_that_changed_nothing_is_not_run_again_on_resume() {
    let w = World::new();
    let script = w.root.join("nothing.script");
    fs::write(&script, "{\"text\": \"Nothing to do.\"}\n").unwrap();
    w.plan(
        "00.json",
        "change nothing",
        &format!("scripted/{}", script.display()),
    );
    let batch = || {
        w.bh()
            .args(["--json", "exec", "batch", "plans"])
            .output()
            .unwrap()
    };
    let out = batch();
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stdout));
    assert_eq!(json_of(&out)["plans"][0]["state"], "no-changes");
    let runs = w.executions();
    assert_eq!(runs, 1);
    let out = batch();
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stdout));
    assert_eq!(json_of(&out)["plans"][0]["state"], "no-changes");
    assert_eq!(w.executions(), runs, "the plan ran again");
    assert_eq!(w.receipt(&w.plans.join("receipts"), 0)["attempt"], 2);
}

/// Waits (at most a minute) until `n` executions' agents run: their forked
/// sessions exist.
fn wait_for_running(w: &World, n: usize) {
    let execs = w.root.join("state/executions");
    let running = || {
        fs::read_dir(&execs).map_or(0, |d| {
            d.filter(|e| e.as_ref().unwrap().path().join("session.jsonl").exists())
                .count()
        })
    };
    let started = std::time::Instant::now();
    while running() < n {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "workers never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}
