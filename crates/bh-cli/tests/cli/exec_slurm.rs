//! The Slurm recipe for real: a single-host Slurm (munged, slurmctld,
//! slurmd from Debian's packages, started here with a generated slurm.conf
//! in a temp dir) runs `bh exec batch --emit slurm`'s script over 8 plans,
//! one of them tampered (permanent) and one refused by the mock model with
//! HTTP 503 (transient); then the resubmission of the failed indices.
//! Skips, saying why, when Slurm is not installed or this is not root
//! (`.ci/run` installs it).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::env;

use fs_err as fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use env::{KEY, World};

/// The daemons of one test cluster, stopped on drop.
struct Cluster {
    dir: PathBuf,
    conf: PathBuf,
    daemons: Vec<Child>,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for d in &mut self.daemons {
            let _ = d.kill();
            let _ = d.wait();
        }
    }
}

fn which(program: &str) -> Option<PathBuf> {
    [
        "/usr/sbin",
        "/usr/bin",
        "/sbin",
        "/bin",
        "/usr/local/sbin",
        "/usr/local/bin",
    ]
    .iter()
    .map(|d| Path::new(d).join(program))
    .find(|p| p.exists())
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Cluster {
    /// Starts munged, slurmctld and slurmd; `Err(why)` to skip.
    fn start(dir: &Path) -> Result<Cluster, String> {
        let tools = [
            "munged",
            "mungekey",
            "slurmctld",
            "slurmd",
            "sbatch",
            "sinfo",
        ];
        let missing: Vec<&str> = tools.into_iter().filter(|t| which(t).is_none()).collect();
        if !missing.is_empty() {
            return Err(format!("not installed: {}", missing.join(", ")));
        }
        if !nix::unistd::Uid::effective().is_root() {
            return Err("the single-host cluster runs its daemons as root".to_owned());
        }
        let host = fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
        let host = host.trim().split('.').next().unwrap().to_owned();
        let munge = dir.join("munge");
        fs::create_dir_all(&munge).unwrap();
        fs::create_dir_all(dir.join("state")).unwrap();
        fs::create_dir_all(dir.join("spool")).unwrap();
        let key = munge.join("munge.key");
        let st = Command::new(which("mungekey").unwrap())
            .arg("--create")
            .arg(format!("--keyfile={}", key.display()))
            .status()
            .unwrap();
        assert!(st.success());
        let socket = munge.join("munge.sock");
        let mut cluster = Cluster {
            dir: dir.to_path_buf(),
            conf: dir.join("slurm.conf"),
            daemons: Vec::new(),
        };
        let log = |name: &str| fs::File::create(dir.join(name)).unwrap().into_parts().0;
        cluster.daemons.push(
            Command::new(which("munged").unwrap())
                .args(["--foreground", "--force"])
                .arg(format!("--key-file={}", key.display()))
                .arg(format!("--socket={}", socket.display()))
                .arg(format!("--pid-file={}", munge.join("munged.pid").display()))
                .arg(format!("--log-file={}", munge.join("munged.log").display()))
                .arg(format!("--seed-file={}", munge.join("seed").display()))
                .stdout(Stdio::null())
                .stderr(log("munged.err"))
                .spawn()
                .unwrap(),
        );
        let d = dir.display();
        let conf = format!(
            "ClusterName=bhtest\nSlurmctldHost={host}(127.0.0.1)\nSlurmUser=root\nSlurmdUser=root\n\
             SlurmctldPort={}\nSlurmdPort={}\nAuthType=auth/munge\nAuthInfo=socket={}\n\
             CredType=cred/munge\nStateSaveLocation={d}/state\nSlurmdSpoolDir={d}/spool\n\
             SlurmctldPidFile={d}/slurmctld.pid\nSlurmdPidFile={d}/slurmd.pid\n\
             SlurmctldLogFile={d}/slurmctld.log\nSlurmdLogFile={d}/slurmd.log\n\
             ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n\
             JobAcctGatherType=jobacct_gather/none\nAccountingStorageType=accounting_storage/none\n\
             JobCompType=jobcomp/none\nSchedulerType=sched/backfill\nSelectType=select/cons_tres\n\
             SelectTypeParameters=CR_Core\nReturnToService=2\nMpiDefault=none\n\
             SlurmdParameters=config_overrides\nMaxArraySize=1001\n\
             NodeName=bhnode NodeHostname={host} NodeAddr=127.0.0.1 CPUs=2 State=UNKNOWN\n\
             PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n",
            free_port(),
            free_port(),
            socket.display()
        );
        fs::write(&cluster.conf, conf).unwrap();
        // munged makes its socket before the daemons authenticate with it.
        wait_for(|| socket.exists(), "munged's socket")?;
        for (daemon, extra) in [("slurmctld", &[][..]), ("slurmd", &["-N", "bhnode"][..])] {
            cluster.daemons.push(
                Command::new(which(daemon).unwrap())
                    .arg("-D")
                    .arg("-f")
                    .arg(&cluster.conf)
                    .args(extra)
                    .env("SLURM_CONF", &cluster.conf)
                    .stdout(Stdio::null())
                    .stderr(log(&format!("{daemon}.err")))
                    .spawn()
                    .unwrap(),
            );
        }
        let conf = cluster.conf.clone();
        wait_for(
            || {
                Command::new("sinfo")
                    .args(["-h", "-o", "%T"])
                    .env("SLURM_CONF", &conf)
                    .output()
                    .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "idle")
            },
            "the node to be idle",
        )?;
        Ok(cluster)
    }

    fn log(&self, name: &str) -> String {
        fs::read_to_string(self.dir.join(name)).unwrap_or_default()
    }
}

/// Polls `ready` (a start-up wait, not a timing claim).
fn wait_for(ready: impl Fn() -> bool, what: &str) -> Result<(), String> {
    let start = Instant::now();
    while !ready() {
        if start.elapsed() > Duration::from_secs(90) {
            return Err(format!("gave up waiting for {what}"));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    Ok(())
}

#[test]
fn a_slurm_job_array_runs_the_plans_and_resubmits_the_transient_one() {
    let w = World::new();
    let cluster_dir = w.root.join("slurm");
    let cluster = match Cluster::start(&cluster_dir) {
        Ok(c) => c,
        Err(why) => {
            eprintln!("skipped: no single-host Slurm here ({why})");
            return;
        }
    };
    let mut plans = Vec::new();
    for i in 0..8 {
        let name = format!("{i:02}.json");
        let file = format!("f{i}.txt");
        plans.push(match i {
            3 => w.mock_plan(&name, &file, true), // 503 while `fail`
            5 => w.mock_plan(&name, &file, false),
            _ => w.scripted_plan(&name, &file, 0),
        });
    }
    w.tamper(&plans[6]);
    let out = w
        .bh()
        .args(["exec", "batch", "plans", "--emit", "slurm", "--jobs", "3"])
        .args(["--max-retries", "0", "--base-url", &w.base_url])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let script = String::from_utf8(out.stdout).unwrap();
    assert!(script.contains("#SBATCH --array=0-7%3"), "{script}");
    assert!(!script.contains(KEY), "no provider key in the recipe");
    let job = w.root.join("job.sh");
    fs::write(&job, &script).unwrap();
    let sbatch = |extra: &[&str]| {
        // A clean environment: the key reaches the tasks through --export=ALL.
        // (The recipe names its state dir itself.)
        w.cli
            .command("sbatch")
            .arg("--wait")
            .args(extra)
            .arg(&job)
            .env_remove("BH_STATE_DIR")
            .env("OPENAI_API_KEY", KEY)
            .env("SLURM_CONF", &cluster.conf)
            .output()
            .unwrap()
    };
    let out = sbatch(&[]);
    // sbatch --wait exits with the highest exit code of the array's tasks.
    assert!(
        !out.status.success(),
        "{}{}{}",
        String::from_utf8_lossy(&out.stderr),
        cluster.log("slurmctld.log"),
        cluster.log("slurmd.log")
    );
    let receipts = w.plans.join("receipts");
    for (i, p) in plans.iter().enumerate() {
        let r = w.receipt(&receipts, i);
        match i {
            3 => {
                assert_eq!(r["exit_code"], 75, "{r}");
                assert!(w.read_ref(&w.plan_ref(p)).is_none());
            }
            6 => {
                assert_eq!(r["exit_code"], 20, "{r}");
                assert_eq!(r["state"], "permanent");
            }
            _ => {
                assert_eq!(r["state"], "committed", "{i}: {r}");
                let at = w.read_ref(&w.plan_ref(p)).unwrap();
                assert_eq!(r["commit"], at.as_str());
                let file = format!("f{i}.txt");
                assert_eq!(w.git(&["show", &format!("{at}:{file}")]), file);
            }
        }
    }
    // Resubmission: only the transient index, once the provider is back.
    let out = w
        .bh()
        .args(["exec", "batch", "plans", "--failed-indices"])
        .output()
        .unwrap();
    let ids = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    assert_eq!(ids, "3");
    w.fail.store(false, Ordering::SeqCst);
    let out = sbatch(&[&format!("--array={ids}")]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r = w.receipt(&receipts, 3);
    assert_eq!(r["state"], "committed", "{r}");
    assert_eq!(r["attempt"], 2);
    assert!(w.read_ref(&w.plan_ref(&plans[3])).is_some());
    let out = w
        .bh()
        .args(["exec", "batch", "plans", "--failed-indices"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "");
    // The task logs hold no key either.
    for e in fs::read_dir(&receipts).unwrap() {
        let p = e.unwrap().path();
        if p.is_file() {
            assert!(
                !fs::read_to_string(&p).unwrap().contains(KEY),
                "{}",
                p.display()
            );
        }
    }
}
