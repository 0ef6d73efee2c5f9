//! Running a worker with its whole process tree contained.
//!
//! Sandboxed (the default): the worker is spawned through `bh-sandbox`, as
//! PID 2 of its own PID namespace under a tiny init that reaps orphans while
//! it runs; when the worker ends (or is stopped: SIGTERM to its group, then
//! SIGKILL to the init after the grace), the kernel kills every process of
//! the namespace, and the wait returns only once they are gone. No `/proc`
//! scan, no reaping loop, no race with forking daemons.
//!
//! Without the sandbox (`--no-sandbox`, the degraded mode): the worker runs
//! in its own process group, and the calling process becomes
//! a *child subreaper* (`PR_SET_CHILD_SUBREAPER`), so descendants that
//! daemonise (`setsid`, double fork) are re-parented to it instead of to init.
//! When the worker exits, times out or is cancelled, every descendant —
//! its group first, then any process re-parented to the caller — is stopped,
//! killed and reaped before this returns. Requirement: the calling process has
//! no other children of its own while a worker runs (the `bh` CLI runs one
//! task per process); any such child would be treated as the worker's.

use fs_err::File;
use std::collections::VecDeque;
use std::ffi::OsString;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill, killpg};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;
use serde::Serialize;

/// What to run and where its output goes.
#[derive(Debug, Clone)]
pub struct RunSpec {
    pub argv: Vec<OsString>,
    pub cwd: PathBuf,
    /// The worker's whole environment (nothing is inherited).
    pub env: Vec<(OsString, OsString)>,
    pub timeout: Option<Duration>,
    pub stdout_log: PathBuf,
    pub stderr_log: PathBuf,
    /// Bytes kept from the start and from the end of each stream.
    pub keep_head: usize,
    pub keep_tail: usize,
    /// Grace between SIGTERM and SIGKILL on timeout or cancellation.
    pub grace: Duration,
    /// Where the worker's output is shown while it runs, besides the
    /// bounded logs (`None`: only the logs).
    pub echo: Option<Arc<dyn Echo>>,
}

/// Which of the worker's streams a chunk came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// Receives the worker's output as it is read (the caller decides where it
/// goes; the library never prints). Called from one thread per stream.
pub trait Echo: Send + Sync + std::fmt::Debug {
    /// A chunk of `stream`, exactly as read.
    fn chunk(&self, stream: Stream, bytes: &[u8]);
    /// `stream` reached its end.
    fn end(&self, _stream: Stream) {}
}

/// How the worker ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Ending {
    Exited { code: i32 },
    Signaled { signal: i32 },
    TimedOut,
    Interrupted,
}

#[derive(Debug, Clone, Serialize)]
pub struct RunOutcome {
    pub ending: Ending,
    pub duration_ms: u64,
    /// Descendants still alive after the worker's main process ended (or was
    /// stopped), all terminated before returning.
    pub strays_killed: usize,
    pub stdout: StreamLog,
    pub stderr: StreamLog,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct StreamLog {
    pub bytes: u64,
    pub truncated: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("cannot start {program}: {source}")]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
    },
    /// `source` is an `fs_err` error: it names the log's path.
    #[error("cannot write the worker's log: {source}")]
    Log {
        #[source]
        source: std::io::Error,
    },
    #[error("process control failed: {0}")]
    Control(#[from] nix::Error),
    #[error("the command is empty")]
    EmptyCommand,
    #[error(transparent)]
    Sandbox(#[from] bh_sandbox::SandboxError),
}

fn ending_of(status: std::process::ExitStatus) -> Ending {
    match (
        status.code(),
        std::os::unix::process::ExitStatusExt::signal(&status),
    ) {
        (Some(code), _) => Ending::Exited { code },
        (None, Some(signal)) => Ending::Signaled { signal },
        (None, None) => Ending::Signaled { signal: 0 },
    }
}

/// Runs the worker inside `sandbox` (see the module docs).
pub fn run_sandboxed(
    spec: &RunSpec,
    sandbox: bh_sandbox::Sandbox,
    cancel: &AtomicBool,
) -> Result<RunOutcome, RunError> {
    let (program, args) = spec.argv.split_first().ok_or(RunError::EmptyCommand)?;
    let log = |path: &PathBuf| File::create(path).map_err(|source| RunError::Log { source });
    let (out_file, err_file) = (log(&spec.stdout_log)?, log(&spec.stderr_log)?);
    let mut cmd = Command::new(program);
    cmd.args(args)
        .current_dir(&spec.cwd)
        .env_clear()
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let start = Instant::now();
    let mut child = sandbox.spawn(cmd).map_err(|e| match e {
        bh_sandbox::SandboxError::Spawn { program, source } => RunError::Spawn { program, source },
        e => RunError::Sandbox(e),
    })?;
    let (head, tail) = (spec.keep_head, spec.keep_tail);
    let out_thread = child.child_mut().stdout.take().map(|s| {
        let echo = spec.echo.clone().map(|e| (e, Stream::Stdout));
        std::thread::spawn(move || capture(s, out_file, head, tail, echo))
    });
    let err_thread = child.child_mut().stderr.take().map(|s| {
        let echo = spec.echo.clone().map(|e| (e, Stream::Stderr));
        std::thread::spawn(move || capture(s, err_file, head, tail, echo))
    });
    let mut stopping: Option<(Instant, Ending)> = None;
    let ending = loop {
        let status = child.try_wait().map_err(|source| RunError::Spawn {
            program: program.to_string_lossy().into_owned(),
            source,
        })?;
        if let Some(status) = status {
            break stopping.map_or_else(|| ending_of(status), |(_, why)| why);
        }
        match stopping {
            None => {
                let why = if cancel.load(Ordering::Relaxed) {
                    Some(Ending::Interrupted)
                } else if spec.timeout.is_some_and(|t| start.elapsed() >= t) {
                    Some(Ending::TimedOut)
                } else {
                    None
                };
                if let Some(why) = why {
                    child.terminate();
                    stopping = Some((Instant::now(), why));
                }
            }
            Some((since, _)) if since.elapsed() >= spec.grace => child.kill(),
            Some(_) => {}
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let stdout = out_thread.and_then(|t| t.join().ok()).unwrap_or_default();
    let stderr = err_thread.and_then(|t| t.join().ok()).unwrap_or_default();
    Ok(RunOutcome {
        ending,
        duration_ms: u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX),
        strays_killed: 0,
        stdout,
        stderr,
    })
}

/// Runs the worker without a sandbox and contains its process tree with a
/// process group and a subreaper (see the module docs).
pub fn run_contained(spec: &RunSpec, cancel: &AtomicBool) -> Result<RunOutcome, RunError> {
    let (program, args) = spec.argv.split_first().ok_or(RunError::EmptyCommand)?;
    nix::sys::prctl::set_child_subreaper(true)?;
    let log = |path: &PathBuf| File::create(path).map_err(|source| RunError::Log { source });
    let (out_file, err_file) = (log(&spec.stdout_log)?, log(&spec.stderr_log)?);
    let mut cmd = Command::new(program);
    cmd.args(args)
        .current_dir(&spec.cwd)
        .env_clear()
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    bh_proc::die_with_parent(&mut cmd);
    let start = Instant::now();
    let mut child = cmd.spawn().map_err(|source| RunError::Spawn {
        program: program.to_string_lossy().into_owned(),
        source,
    })?;
    let pgid = Pid::from_raw(i32::try_from(child.id()).unwrap_or(i32::MAX));
    let (head, tail) = (spec.keep_head, spec.keep_tail);
    let out_thread = child.stdout.take().map(|s| {
        let echo = spec.echo.clone().map(|e| (e, Stream::Stdout));
        std::thread::spawn(move || capture(s, out_file, head, tail, echo))
    });
    let err_thread = child.stderr.take().map(|s| {
        let echo = spec.echo.clone().map(|e| (e, Stream::Stderr));
        std::thread::spawn(move || capture(s, err_file, head, tail, echo))
    });

    let mut ending = None;
    let mut stopping: Option<(Instant, Ending)> = None;
    while ending.is_none() {
        if let Some(status) = child.try_wait().map_err(|e| RunError::Spawn {
            program: program.to_string_lossy().into_owned(),
            source: e,
        })? {
            ending = Some(match stopping {
                Some((_, why)) => why,
                None => match (
                    status.code(),
                    std::os::unix::process::ExitStatusExt::signal(&status),
                ) {
                    (Some(code), _) => Ending::Exited { code },
                    (None, Some(signal)) => Ending::Signaled { signal },
                    (None, None) => Ending::Signaled { signal: 0 },
                },
            });
            break;
        }
        match stopping {
            None => {
                let why = if cancel.load(Ordering::Relaxed) {
                    Some(Ending::Interrupted)
                } else if spec.timeout.is_some_and(|t| start.elapsed() >= t) {
                    Some(Ending::TimedOut)
                } else {
                    None
                };
                if let Some(why) = why {
                    let _ = killpg(pgid, Signal::SIGTERM);
                    stopping = Some((Instant::now(), why));
                }
            }
            Some((since, _)) if since.elapsed() >= spec.grace => {
                let _ = killpg(pgid, Signal::SIGKILL);
            }
            Some(_) => {}
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let strays = reap_everything(pgid, spec.grace);
    let stdout = out_thread.and_then(|t| t.join().ok()).unwrap_or_default();
    let stderr = err_thread.and_then(|t| t.join().ok()).unwrap_or_default();
    Ok(RunOutcome {
        ending: ending.unwrap_or(Ending::Interrupted),
        duration_ms: u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX),
        strays_killed: strays,
        stdout,
        stderr,
    })
}

/// Stops, kills and reaps the worker's group and every process re-parented to
/// this one, until none is left. Returns how many processes were found alive.
fn reap_everything(pgid: Pid, grace: Duration) -> usize {
    let me = nix::unistd::getpid();
    // Everything alive once the worker has ended is a stray: its group's
    // members (a double fork that stayed in the group; a child on its way
    // to `setsid` that has not got there yet) are counted before the group
    // is killed, re-parented ones as they are found below.
    let mut seen: std::collections::HashSet<Pid> = living(|pid| {
        bh_proc::process_group(pid) == Some(pgid.as_raw())
            || bh_proc::process_parent(pid) == Some(me.as_raw())
    })
    .into_iter()
    .collect();
    // The group first: polite, then not.
    if killpg(pgid, None).is_ok() {
        let _ = killpg(pgid, Signal::SIGTERM);
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline && killpg(pgid, None).is_ok() {
            reap_available();
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = killpg(pgid, Signal::SIGKILL);
    }
    for _ in 0..500 {
        reap_available();
        let children = children_of(me);
        if children.is_empty() && killpg(pgid, None).is_err() {
            break;
        }
        for pid in &children {
            seen.insert(*pid);
            // Freeze first so nothing forks between discovery and the kill.
            let _ = kill(*pid, Signal::SIGSTOP);
        }
        for pid in &children {
            let _ = kill(*pid, Signal::SIGKILL);
        }
        let _ = killpg(pgid, Signal::SIGKILL);
        std::thread::sleep(Duration::from_millis(5));
    }
    reap_available();
    seen.len()
}

fn reap_available() {
    loop {
        match waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) | Err(_) => break,
            Ok(_) => {}
        }
    }
}

/// Processes whose parent is `parent`, from `/proc`.
fn children_of(parent: Pid) -> Vec<Pid> {
    living(|pid| bh_proc::process_parent(pid) == Some(parent.as_raw()))
}

/// Processes, not zombies, that `pick` chooses, from `/proc`.
fn living(pick: impl Fn(u32) -> bool) -> Vec<Pid> {
    let Ok(entries) = fs_err::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| pick(pid) && bh_proc::process_state(pid) != Some('Z'))
        .filter_map(|pid| i32::try_from(pid).ok())
        .map(Pid::from_raw)
        .collect()
}

/// Copies a stream into `file`, keeping the first `head` and last `tail` bytes
/// and marking what was left out.
fn capture(
    mut stream: impl Read,
    file: File,
    head: usize,
    tail: usize,
    echo: Option<(Arc<dyn Echo>, Stream)>,
) -> StreamLog {
    let mut file = std::io::BufWriter::new(file);
    let mut buf = [0u8; 8192];
    let mut written_head = 0usize;
    let mut ring: VecDeque<u8> = VecDeque::new();
    let mut total: u64 = 0;
    let mut dropped: u64 = 0;
    loop {
        let n = match stream.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        total += n as u64;
        if let Some((echo, which)) = &echo {
            echo.chunk(*which, &buf[..n]);
        }
        let mut chunk = &buf[..n];
        if written_head < head {
            let take = chunk.len().min(head - written_head);
            let _ = file.write_all(&chunk[..take]);
            written_head += take;
            chunk = &chunk[take..];
        }
        ring.extend(chunk);
        let excess = ring.len().saturating_sub(tail);
        ring.drain(..excess);
        dropped += excess as u64;
    }
    if let Some((echo, which)) = &echo {
        echo.end(*which);
    }
    if dropped > 0 {
        let _ = write!(file, "\n[... bh: {dropped} bytes omitted ...]\n");
    }
    let (a, b) = ring.as_slices();
    let _ = file.write_all(a);
    let _ = file.write_all(b);
    let _ = file.flush();
    StreamLog {
        bytes: total,
        truncated: dropped > 0,
    }
}
