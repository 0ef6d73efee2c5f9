//! `bh exec batch --emit slurm|k8s`: the recipes as generated, the
//! Kubernetes Indexed Job validated offline against the Kubernetes schema
//! (PyPI's `kubernetes-validate`, installed by this test into a venv under
//! the target dir; skips, saying why, when it cannot be installed), and no
//! provider key in either.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::env;

use fs_err as fs;
use std::path::PathBuf;
use std::process::Command;

use env::{KEY, World};
use serde_json::Value;

/// `kubernetes-validate` in `<target>/kubernetes-validate-venv`, installed
/// on first use; `Err(why)` to skip.
fn validator() -> Result<PathBuf, String> {
    let exe = std::env::current_exe().unwrap();
    // <target>/debug/deps/exec_emit-…
    let target = exe.ancestors().nth(3).unwrap().to_path_buf();
    let venv = target.join("kubernetes-validate-venv");
    let bin = venv.join("bin/kubernetes-validate");
    if bin.exists() {
        return Ok(bin);
    }
    let ok = |c: &mut Command| c.status().is_ok_and(|s| s.success());
    if !ok(Command::new("python3").arg("-m").arg("venv").arg(&venv)) {
        return Err("python3 -m venv failed".to_owned());
    }
    if !ok(Command::new(venv.join("bin/pip")).args(["install", "-q", "kubernetes-validate"])) {
        return Err("pip install kubernetes-validate failed".to_owned());
    }
    Ok(bin)
}

#[test]
fn the_k8s_indexed_job_is_valid_and_maps_the_exit_codes() {
    let w = World::new();
    for i in 0..3 {
        w.scripted_plan(&format!("{i:02}.json"), &format!("f{i}.txt"), 0);
    }
    let out = w
        .bh()
        .args(["exec", "batch", "plans", "--emit", "k8s", "--jobs", "2"])
        .args([
            "--publish",
            "https://git.example.invalid/central.git",
            "--image",
            "registry.invalid/bh:1",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(!text.contains(KEY), "no provider key in the recipe");
    let job: Value = serde_json::from_str(&text).unwrap();
    let spec = &job["spec"];
    assert_eq!(job["kind"], "Job");
    assert_eq!(spec["completionMode"], "Indexed");
    assert_eq!(spec["completions"], 3);
    assert_eq!(spec["parallelism"], 2);
    assert_eq!(spec["backoffLimitPerIndex"], 2);
    let rules = spec["podFailurePolicy"]["rules"].as_array().unwrap();
    assert_eq!(rules[0]["action"], "FailIndex");
    let codes: Vec<u64> = rules[0]["onExitCodes"]["values"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    for permanent in [2, 20, 26, 28, 29, 30] {
        assert!(codes.contains(&permanent), "{permanent}");
    }
    assert!(
        !codes.contains(&75) && !codes.contains(&1),
        "transient codes are retried"
    );
    assert_eq!(rules[1]["action"], "Ignore");
    assert_eq!(rules[1]["onPodConditions"][0]["type"], "DisruptionTarget");
    let pod = &spec["template"]["spec"];
    assert_eq!(pod["restartPolicy"], "Never");
    let c = &pod["containers"][0];
    assert_eq!(c["image"], "registry.invalid/bh:1");
    assert_eq!(c["envFrom"][0]["secretRef"]["name"], "bh-provider-keys");
    assert!(
        c["command"][2]
            .as_str()
            .unwrap()
            .contains("$JOB_COMPLETION_INDEX")
    );
    // The claim is mounted where the plans' paths (repo, session, plans) live.
    let mount = c["volumeMounts"][0]["mountPath"].as_str().unwrap();
    assert_eq!(mount, w.root.to_str().unwrap());
    let file = w.root.join("job.json");
    fs::write(&file, &text).unwrap();
    let bin = match validator() {
        Ok(b) => b,
        Err(why) => {
            eprintln!("skipped the schema validation: {why}");
            return;
        }
    };
    for version in ["1.33", "1.37"] {
        let out = Command::new(&bin)
            .args(["--strict", "-k", version])
            .arg(&file)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{version}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // The validator is live: a field the schema does not know fails.
    let mut bad = job.clone();
    bad["spec"]["completionsPerIndex"] = Value::from(1);
    fs::write(&file, bad.to_string()).unwrap();
    let out = Command::new(&bin)
        .args(["--strict", "-k", "1.33"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        !out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn the_slurm_script_quotes_its_paths_and_holds_no_key() {
    let w = World::new();
    let odd = w.root.join("my plans 'x'");
    fs::create_dir_all(&odd).unwrap();
    let p = w.scripted_plan("00.json", "f0.txt", 0);
    fs::rename(&p, odd.join("00.json")).unwrap();
    let out = w
        .bh()
        .arg("exec")
        .arg("batch")
        .arg(&odd)
        .args(["--emit", "slurm", "--jobs", "4", "--publish", "central"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let script = String::from_utf8(out.stdout).unwrap();
    assert!(!script.contains(KEY));
    assert!(script.contains("#SBATCH --array=0-0%4"), "{script}");
    assert!(script.contains("#SBATCH --export=ALL"));
    assert!(script.contains("--index \"$SLURM_ARRAY_TASK_ID\" --yes"));
    assert!(
        script.contains("--failed-indices"),
        "the resubmission is documented"
    );
    // The run line, with the variable set, is one command with the odd path as one word.
    let run = script.lines().find(|l| l.starts_with("exec ")).unwrap();
    let echo = run.replacen("exec ", "printf '%s\\n' ", 1);
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!("SLURM_ARRAY_TASK_ID=7; {echo}"))
        .output()
        .unwrap();
    let words: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect();
    assert!(words.contains(&odd.display().to_string()), "{words:?}");
    assert!(words.contains(&"7".to_owned()));
}

#[test]
fn run_help_states_the_exit_code_contract() {
    let w = World::new();
    let out = w.bh().args(["exec", "run", "--help"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    for needle in [
        "--plans",
        "--index",
        "exit 75",
        "28 index out of range",
        "receipts/<I>.json",
    ] {
        assert!(text.contains(needle), "{needle}: {text}");
    }
}
