//! Start-up cost of the sandbox: `true` spawned and waited for, bare and
//! sandboxed (Landlock + mount/PID namespaces + private /tmp + the init),
//! medians of N runs in one process; and sandboxed again with 500 host Unix
//! sockets listening in the project (a busy desktop: with the init's
//! connect check nothing is done per socket; the fallback read each from
//! `/proc/net/unix` and covered it).
//!
//! `cargo bench -p bh-sandbox --bench startup -- --runs 200`

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;
use std::time::Instant;

use bh_sandbox::{Policy, Sandbox};

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let runs: usize = args
        .iter()
        .position(|a| a == "--runs")
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(200);
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("project");
    fs_err::create_dir_all(project.join(".git")).unwrap();
    let policy = Policy {
        writable: vec![project.clone()],
        read_only: vec![project.join(".git")],
        visible: vec![],
        private_tmp: true,
        network: true,
        hidden: Vec::new(),
        allow_sockets: Vec::new(),
        deny_unix_sockets: false,
        overlays: Vec::new(),
    };
    let no_net = Policy {
        network: false,
        ..policy.clone()
    };
    let (mut bare, mut sandboxed, mut offline) = (Vec::new(), Vec::new(), Vec::new());
    let mut crowded = Vec::new();
    for _ in 0..runs {
        let t = Instant::now();
        let mut c = Command::new("true");
        c.current_dir(&project);
        assert!(c.status().unwrap().success());
        bare.push(t.elapsed().as_secs_f64() * 1e3);
        for (p, out) in [(&policy, &mut sandboxed), (&no_net, &mut offline)] {
            let t = Instant::now();
            let mut c = Command::new("true");
            c.current_dir(&project);
            let mut child = Sandbox::new(p, &project).unwrap().spawn(c).unwrap();
            assert!(child.wait().unwrap().success());
            out.push(t.elapsed().as_secs_f64() * 1e3);
        }
    }
    // In the project, so that every one is there inside.
    let crowd = project.join("crowd");
    fs_err::create_dir_all(&crowd).unwrap();
    let _listeners: Vec<_> = (0..500)
        .map(|i| std::os::unix::net::UnixListener::bind(crowd.join(format!("s{i}.sock"))).unwrap())
        .collect();
    let report = Sandbox::new(&policy, &project).unwrap().report().clone();
    let how = match report.unix_sockets {
        bh_sandbox::UnixSockets::Covered => format!("{} covered", report.sockets_covered),
        _ => "checked at connect, none covered".to_owned(),
    };
    for _ in 0..runs {
        let t = Instant::now();
        let mut c = Command::new("true");
        c.current_dir(&project);
        let mut child = Sandbox::new(&policy, &project).unwrap().spawn(c).unwrap();
        assert!(child.wait().unwrap().success());
        crowded.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let (b, s, o) = (median(bare), median(sandboxed), median(offline));
    let k = median(crowded);
    println!("| operation | median | overhead | limit |\n|---|---:|---:|---:|");
    println!("| spawn + wait `true`, bare | {b:.2} ms | | |");
    println!(
        "| spawn + wait `true`, sandboxed (network on) | {s:.2} ms | {:.2} ms | ≤ 20 ms |",
        s - b
    );
    println!(
        "| spawn + wait `true`, sandboxed, `--no-network` | {o:.2} ms | {:.2} ms | ≤ 20 ms |",
        o - b
    );
    println!(
        "| spawn + wait `true`, sandboxed, 500 host sockets in the project ({how}) | {k:.2} ms | {:.2} ms | ≤ 20 ms |",
        k - b
    );
}
