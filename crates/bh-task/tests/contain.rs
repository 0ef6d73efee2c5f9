//! Process containment. Its own test binary: the runner reaps every process
//! re-parented to this one, so no other test may spawn children meanwhile;
//! the tests here take turns through a mutex.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use fs_err as fs;
use std::ffi::OsString;
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use bh_task::contain::{Ending, RunSpec, run_contained};

static TURN: Mutex<()> = Mutex::new(());

fn spec(dir: &Path, script: &str) -> RunSpec {
    RunSpec {
        argv: vec!["sh".into(), "-c".into(), script.into()],
        cwd: dir.to_path_buf(),
        env: vec![
            ("PATH".into(), std::env::var_os("PATH").unwrap_or_default()),
            (OsString::from("OUT"), dir.join("escaped").into_os_string()),
            ("BH_TASK_SESSION".into(), "1".into()),
        ],
        timeout: Some(Duration::from_secs(20)),
        stdout_log: dir.join("stdout.log"),
        stderr_log: dir.join("stderr.log"),
        keep_head: 1000,
        keep_tail: 1000,
        grace: Duration::from_millis(300),
        echo: None,
    }
}

fn run(dir: &Path, script: &str) -> bh_task::contain::RunOutcome {
    run_contained(&spec(dir, script), &AtomicBool::new(false)).unwrap()
}

#[test]
fn exit_codes_logs_and_environment() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = tempfile::tempdir().unwrap();
    let out = run(tmp.path(), "echo out; echo err >&2; env | sort; exit 3");
    assert_eq!(out.ending, Ending::Exited { code: 3 });
    let stdout = fs::read_to_string(tmp.path().join("stdout.log")).unwrap();
    assert!(stdout.starts_with("out\n"));
    assert!(stdout.contains("BH_TASK_SESSION=1"));
    assert!(
        !stdout.contains("HOME="),
        "the environment is exactly what was given"
    );
    assert_eq!(
        fs::read_to_string(tmp.path().join("stderr.log")).unwrap(),
        "err\n"
    );
    assert_eq!(out.strays_killed, 0);
}

#[test]
fn daemons_that_outlive_the_worker_are_killed() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = tempfile::tempdir().unwrap();
    // a new session (setsid) and a double fork, both writing after the worker exits
    let out = run(
        tmp.path(),
        r#"setsid sh -c 'sleep 1; echo setsid > "$OUT"' & (sh -c 'sleep 1; echo forked >> "$OUT"' &) ; exit 0"#,
    );
    assert_eq!(out.ending, Ending::Exited { code: 0 });
    assert!(out.strays_killed >= 2, "{out:?}");
    std::thread::sleep(Duration::from_millis(1500));
    assert!(
        !tmp.path().join("escaped").exists(),
        "a descendant wrote after the worker ended"
    );
}

#[test]
fn timeouts_and_cancellation_stop_the_whole_tree() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = tempfile::tempdir().unwrap();
    let mut s = spec(
        tmp.path(),
        r#"trap '' TERM; (sleep 30; echo late > "$OUT") & echo $$ > "$OUT.pid"; exec sleep 30"#,
    );
    s.timeout = Some(Duration::from_millis(300));
    let out = run_contained(&s, &AtomicBool::new(false)).unwrap();
    assert_eq!(out.ending, Ending::TimedOut);
    // The worker was killed, not waited for (if it got as far as starting).
    let pid_file = format!("{}.pid", tmp.path().join("escaped").display());
    if let Some(pid) = fs_err::read_to_string(&pid_file)
        .ok()
        .and_then(|t| t.trim().parse::<i32>().ok())
    {
        let alive = fs_err::read_to_string(format!("/proc/{pid}/stat"))
            .map(|st| !st.contains(") Z "))
            .unwrap_or(false);
        assert!(!alive, "worker {pid} outlived its timeout");
    }
    let cancelled = AtomicBool::new(true);
    let out = run_contained(&spec(tmp.path(), "sleep 30"), &cancelled).unwrap();
    assert_eq!(out.ending, Ending::Interrupted);
    std::thread::sleep(Duration::from_millis(200));
    assert!(!tmp.path().join("escaped").exists());
}

#[test]
fn logs_keep_head_and_tail() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = tempfile::tempdir().unwrap();
    let out = run(
        tmp.path(),
        "i=0; while [ $i -lt 5000 ]; do echo line$i; i=$((i+1)); done",
    );
    assert!(out.stdout.truncated);
    assert!(out.stdout.bytes > 30_000);
    let log = fs::read_to_string(tmp.path().join("stdout.log")).unwrap();
    assert!(log.starts_with("line0\n"));
    assert!(log.ends_with("line4999\n"));
    assert!(log.contains("bytes omitted"));
    assert!(log.len() < 2200);
}

/// Collects what the worker printed, per stream, with the end marks.
#[derive(Debug, Default)]
struct Collect {
    out: Mutex<Vec<u8>>,
    err: Mutex<Vec<u8>>,
    ends: Mutex<Vec<bh_task::contain::Stream>>,
}

impl bh_task::contain::Echo for Collect {
    fn chunk(&self, stream: bh_task::contain::Stream, bytes: &[u8]) {
        let buf = match stream {
            bh_task::contain::Stream::Stdout => &self.out,
            bh_task::contain::Stream::Stderr => &self.err,
        };
        buf.lock().unwrap().extend_from_slice(bytes);
    }
    fn end(&self, stream: bh_task::contain::Stream) {
        self.ends.lock().unwrap().push(stream);
    }
}

#[test]
fn the_echo_sees_everything_while_the_logs_stay_bounded() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = tempfile::tempdir().unwrap();
    let echo = std::sync::Arc::new(Collect::default());
    let mut s = spec(
        tmp.path(),
        "i=0; while [ $i -lt 5000 ]; do echo line$i; i=$((i+1)); done; echo oops >&2",
    );
    s.echo = Some(echo.clone());
    let out = run_contained(&s, &AtomicBool::new(false)).unwrap();
    assert_eq!(out.ending, Ending::Exited { code: 0 });
    assert!(out.stdout.truncated);
    let log = fs::read_to_string(tmp.path().join("stdout.log")).unwrap();
    assert!(log.len() < 2200 && log.contains("bytes omitted"));
    let seen = String::from_utf8(echo.out.lock().unwrap().clone()).unwrap();
    assert_eq!(seen.lines().count(), 5000);
    assert!(seen.starts_with("line0\nline1\n") && seen.ends_with("line4999\n"));
    assert_eq!(*echo.err.lock().unwrap(), b"oops\n");
    assert_eq!(echo.ends.lock().unwrap().len(), 2, "both streams ended");
}
