//! `bash` ([P73] `dist/core/tools/bash.js`): `bash -c COMMAND` in the root, in
//! its own process group, stdout and stderr through one pipe. The whole group
//! is killed on timeout, on cancellation and once the shell has exited (no
//! stray background processes). The last 2000 lines / 50 KB are returned; when
//! that truncates, the full output is saved in the caller's output directory.
//!
//! The command runs under the toolbox's [`BashSandbox`] (`bh-sandbox`): by
//! default writable = the root minus every git dir under it (the root's git
//! dir and common dir resolved by the harness's runner, nested repositories,
//! `gitdir:` targets, bare layouts: `bash_gitdirs.rs`; a `.git` that cannot be
//! resolved refuses the command) and the caller's protected paths,
//! plus the private `/tmp` and `--allow-write` folders. A denied write is the
//! shell's own `Permission denied` / `Read-only file system`, in the result.
//! With the sandbox, every process of the command — background jobs,
//! `setsid` daemons — ends with the shell (its PID namespace dies).

use fs_err::os::unix::fs::OpenOptionsExt;
use fs_err::{File, OpenOptions};
use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::io::Write;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use serde_json::{Value, json};

use crate::args::Args;
use crate::confine::Root;
use crate::file_tools::js_num;
use crate::truncate::{DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, Truncation, truncate_tail_bytes};
use crate::{
    BashSandbox, CancelToken, ContentBlock, OnUpdate, SandboxMode, ToolResult, ToolUpdate,
    ToolboxOptions,
};

mod result;

use result::Finished;

/// How long the reader keeps draining the pipe after the shell exited, if a
/// process that escaped the group still holds it open.
const DRAIN_GRACE: Duration = Duration::from_secs(2);

/// At most one partial-output update per this interval (Pi's
/// `BASH_UPDATE_THROTTLE_MS`).
const UPDATE_INTERVAL: Duration = Duration::from_millis(100);

/// How long the reader waits for output before looking at the clock again.
const POLL_INTERVAL: Duration = Duration::from_millis(50);

/// Collects output: everything in memory up to `4 × max_bytes`, then spilled
/// to the log file with only a tail kept in memory.
struct Acc {
    max_bytes: usize,
    out_dir: PathBuf,
    full: Vec<u8>,
    file: Option<(File, PathBuf)>,
    spill_error: Option<String>,
    total_bytes: usize,
    newlines: usize,
    last_line_bytes: usize,
}

impl Acc {
    fn new(out_dir: PathBuf, max_bytes: usize) -> Self {
        Acc {
            max_bytes,
            out_dir,
            full: Vec::new(),
            file: None,
            spill_error: None,
            total_bytes: 0,
            newlines: 0,
            last_line_bytes: 0,
        }
    }

    fn push(&mut self, data: &[u8]) {
        self.total_bytes += data.len();
        for &b in data {
            if b == b'\n' {
                self.newlines += 1;
                self.last_line_bytes = 0;
            } else {
                self.last_line_bytes += 1;
            }
        }
        if let Some((f, _)) = &mut self.file
            && let Err(e) = f.write_all(data)
        {
            self.spill_error.get_or_insert(e.to_string());
        }
        self.full.extend_from_slice(data);
        let cap = 4 * self.max_bytes;
        if self.full.len() > cap {
            if self.file.is_none() {
                self.spill();
            }
            if self.file.is_some() || self.spill_error.is_some() {
                let keep = 2 * self.max_bytes;
                let cut = self.full.len() - keep;
                self.full.drain(..cut);
            }
        }
    }

    /// Creates the log file and writes what is in memory (all output so far).
    fn spill(&mut self) {
        if self.file.is_some() || self.spill_error.is_some() {
            return;
        }
        let mut h = RandomState::new().build_hasher();
        h.write_u64(self.total_bytes as u64);
        let path = self
            .out_dir
            .join(format!("pi-bash-{:016x}.log", h.finish()));
        let made = fs_err::create_dir_all(&self.out_dir).and_then(|()| {
            OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&path)
        });
        match made.and_then(|mut f| f.write_all(&self.full).map(|()| f)) {
            Ok(f) => self.file = Some((f, path)),
            Err(e) => self.spill_error = Some(e.to_string()),
        }
    }

    /// The tail kept so far, truncated as the final result will be.
    fn truncation(&self) -> Truncation {
        truncate_tail_bytes(
            &self.full,
            self.newlines + 1,
            self.total_bytes,
            DEFAULT_MAX_LINES,
            self.max_bytes,
        )
    }

    /// Pi's partial result: the truncated tail as text; `details` has the
    /// truncation once the output is truncated, and the full output's path
    /// (saved as soon as it is truncated, as Pi does).
    fn snapshot(&mut self) -> ToolUpdate {
        let tr = self.truncation();
        let mut details = serde_json::Map::new();
        if tr.truncated {
            self.spill();
            details.insert("truncation".into(), tr.to_value());
        }
        if let Some((_, p)) = &self.file {
            details.insert("fullOutputPath".into(), json!(p.display().to_string()));
        }
        ToolUpdate {
            content: vec![ContentBlock::Text { text: tr.content }],
            details: Some(Value::Object(details)),
        }
    }

    fn finish(mut self) -> (Truncation, Option<PathBuf>, usize) {
        let tr = self.truncation();
        if tr.truncated {
            self.spill();
        }
        if let Some((f, _)) = &mut self.file {
            let _ = f.flush();
        }
        let last = self.last_line_bytes;
        (tr, self.file.map(|(_, p)| p), last)
    }
}

/// How the shell ended.
enum Outcome {
    Exited(Option<i32>),
    TimedOut,
    Aborted,
}

/// The shell, plain (process group, death signal) or sandboxed.
enum Shell {
    Plain(std::process::Child),
    Sandboxed(bh_sandbox::Confined),
}

impl Shell {
    fn try_wait(&mut self) -> std::io::Result<Option<std::process::ExitStatus>> {
        match self {
            Shell::Plain(c) => c.try_wait(),
            Shell::Sandboxed(c) => c.try_wait(),
        }
    }

    /// Kills every process of the command and waits for the shell.
    fn kill_all(&mut self) {
        match self {
            Shell::Plain(c) => {
                let _ = killpg(Pid::from_raw(c.id() as i32), Signal::SIGKILL);
                let _ = c.wait();
            }
            Shell::Sandboxed(c) => {
                c.kill();
                let _ = c.wait();
            }
        }
    }

    /// After the shell exited: background jobs die with it.
    fn kill_strays(&mut self, pgid: Pid) {
        if let Shell::Plain(_) = self {
            let _ = killpg(pgid, Signal::SIGKILL);
        }
    }
}

#[path = "bash_gitdirs.rs"]
mod gitdirs;

use crate::git_broker::GitOverlay;

/// Why a bash call did not give a result: a failure the model reads (Pi's
/// texts: bad arguments, a shell that cannot start), or one of the harness
/// (its sandbox cannot be built), which ends the turn instead
/// ([`crate::HarnessFailure`]).
pub(crate) enum Failure {
    Model(String),
    Harness(String),
}

impl From<String> for Failure {
    fn from(message: String) -> Self {
        Failure::Model(message)
    }
}

/// The policy for one command, or `None` when the sandbox is off; and the
/// git dir's overlay when commits from the sandbox are on.
fn sandbox_for(
    root: &std::path::Path,
    sb: &BashSandbox,
    runner: &bh_git::GitRunner,
) -> Result<Option<(bh_sandbox::Sandbox, Option<GitOverlay>)>, String> {
    let mut policy = bh_sandbox::Policy {
        writable: sb.allow_write.clone(),
        read_only: sb.protected.clone(),
        visible: vec![root.to_path_buf()],
        private_tmp: true,
        network: sb.network,
        hidden: sb.hidden.clone(),
        allow_sockets: sb.allow_sockets.clone(),
        deny_unix_sockets: sb.deny_unix_sockets,
        overlays: Vec::new(),
    };
    let cannot = |e: &dyn std::fmt::Display| format!("Cannot sandbox bash: {e}");
    let mut overlay = None;
    match sb.mode {
        SandboxMode::Off => return Ok(None),
        SandboxMode::ReadOnly => {}
        SandboxMode::WorkspaceWrite => {
            policy.writable.push(root.to_path_buf());
            if let Some(scratch) = &sb.git_overlays {
                overlay = GitOverlay::prepare(root, runner, scratch).map_err(|e| cannot(&e))?;
            }
        }
    }
    let known = overlay.as_ref().map(GitOverlay::dirs);
    let mut dirs = gitdirs::git_dirs(root, runner, known).map_err(|e| cannot(&e))?;
    if let Some(o) = &overlay {
        // The overlaid git dirs are kept unwritten by the overlay, and
        // everything inside them with it (a linked worktree's git dir
        // lies in its common dir).
        let targets = o.targets();
        dirs.retain(|d| {
            let real = fs_err::canonicalize(d).unwrap_or_else(|_| d.clone());
            !targets.iter().any(|t| real.starts_with(t))
        });
        policy.overlays = o.overlays();
    }
    policy.read_only.extend(dirs);
    bh_sandbox::Sandbox::new(&policy, root)
        .map(|s| Some((s, overlay)))
        .map_err(|e| cannot(&e))
}

/// Partial-output updates, throttled to one per [`UPDATE_INTERVAL`].
struct Updates<'a> {
    on_update: Option<OnUpdate<'a>>,
    last: Option<Instant>,
    dirty: bool,
}

impl Updates<'_> {
    /// Time until the pending update is due (`None`: nothing pending).
    fn due_in(&self) -> Option<Duration> {
        if !self.dirty || self.on_update.is_none() {
            return None;
        }
        Some(self.last.map_or(Duration::ZERO, |t| {
            UPDATE_INTERVAL.saturating_sub(t.elapsed())
        }))
    }

    /// Send the pending update if it is due (or `now`).
    fn flush(&mut self, acc: &mut Acc, now: bool) {
        let Some(on_update) = self.on_update else {
            return;
        };
        if self.dirty && (now || self.due_in() == Some(Duration::ZERO)) {
            self.dirty = false;
            self.last = Some(Instant::now());
            on_update(acc.snapshot());
        }
    }
}

fn read_loop(
    rd: OwnedFd,
    exited: &AtomicBool,
    mut acc: Acc,
    on_update: Option<OnUpdate<'_>>,
) -> Acc {
    let mut updates = Updates {
        on_update,
        last: None,
        dirty: false,
    };
    let mut buf = vec![0u8; 64 * 1024];
    let mut exited_at: Option<Instant> = None;
    loop {
        updates.flush(&mut acc, false);
        if exited.load(Ordering::SeqCst) {
            let t = *exited_at.get_or_insert_with(Instant::now);
            if t.elapsed() > DRAIN_GRACE {
                break;
            }
        }
        let wait = updates
            .due_in()
            .map_or(POLL_INTERVAL, |d| d.min(POLL_INTERVAL));
        let wait_ms = u16::try_from(wait.as_millis()).unwrap_or(u16::MAX);
        let mut fds = [PollFd::new(rd.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, PollTimeout::from(wait_ms)) {
            Ok(0) => {
                if exited.load(Ordering::SeqCst) && exited_at.is_some() {
                    // No data for a poll interval after the group was killed.
                    break;
                }
                continue;
            }
            Ok(_) => {}
            Err(Errno::EINTR) => continue,
            Err(_) => break,
        }
        match nix::unistd::read(rd.as_fd(), &mut buf) {
            Ok(0) => break,
            Ok(n) => {
                acc.push(&buf[..n]);
                updates.dirty = true;
            }
            Err(Errno::EINTR) | Err(Errno::EAGAIN) => continue,
            Err(_) => break,
        }
    }
    // The output as it ends, if not sent yet (Pi's `finishOutput`).
    updates.flush(&mut acc, true);
    acc
}

/// Runs one `bash` call: the arguments, the shell (sandboxed or in its own
/// process group), the wait (exit, timeout or cancel, then strays killed
/// and the pipe drained), the broker's git writes carried over, then what
/// the model is told ([`result::tool_result`]).
pub(crate) fn run(
    root: &Root,
    opts: &ToolboxOptions,
    args: &Value,
    cancel: &CancelToken,
    on_update: Option<OnUpdate<'_>>,
) -> Result<ToolResult, Failure> {
    let mut a = Args::new("bash", args);
    let command = a.str_req("command");
    let timeout_arg = a.num_opt("timeout");
    a.finish()?;
    let (timeout, timeout_label) = match timeout_arg {
        Some(t) if t > 0.0 && t.is_finite() => (Some(Duration::from_secs_f64(t)), js_num(t)),
        Some(_) => (None, String::new()),
        None => match opts.default_bash_timeout {
            Some(d) => (Some(d), js_num(d.as_secs_f64())),
            None => (None, String::new()),
        },
    };

    let (rd, wr) = nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(|e| format!("pipe: {e}"))?;
    let wr2 = wr.try_clone().map_err(|e| format!("pipe: {e}"))?;
    let mut cmd = Command::new(&opts.shell);
    cmd.arg("-c")
        .arg(&command)
        .current_dir(root.path())
        .stdin(Stdio::null())
        .stdout(Stdio::from(wr))
        .stderr(Stdio::from(wr2))
        .process_group(0);
    if let Some(env) = &opts.bash_env {
        cmd.env_clear();
        cmd.envs(env.vars.iter().map(|(k, v)| (k, v)));
    }
    // The harness's own runner (its HOME, its hardening), not the shell's
    // environment: a lookup that git refuses must not protect less.
    let fallback;
    let runner = match &opts.git {
        Some(r) => r,
        None => {
            fallback = bh_git::GitRunner::new("git", Vec::new());
            &fallback
        }
    };
    let (sandbox, overlay) =
        match sandbox_for(root.path(), &opts.sandbox, runner).map_err(Failure::Harness)? {
            Some((s, o)) => (Some(s), o),
            None => (None, None),
        };
    if overlay.is_some() {
        // No automatic gc inside: it would repack the whole store into the
        // overlay, for nothing the broker carries over.
        cmd.env("GIT_CONFIG_COUNT", "2")
            .env("GIT_CONFIG_KEY_0", "gc.auto")
            .env("GIT_CONFIG_VALUE_0", "0")
            .env("GIT_CONFIG_KEY_1", "maintenance.auto")
            .env("GIT_CONFIG_VALUE_1", "false");
    }
    if sandbox.is_some() {
        cmd.env("TMPDIR", "/tmp");
    } else {
        bh_proc::die_with_parent(&mut cmd);
    }
    if let Some(on_update) = on_update {
        // Pi's first update, before any output.
        on_update(ToolUpdate {
            content: vec![],
            details: None,
        });
    }
    let fail = |e: &dyn std::fmt::Display| {
        format!(
            "Failed to run {}: {e}\nCannot execute bash commands.",
            opts.shell.display()
        )
    };
    let mut child = match sandbox {
        // The shell itself not starting is Pi's failure text; a namespace
        // or mount step refused is the harness's.
        Some(sb) => Shell::Sandboxed(sb.spawn(cmd).map_err(|e| match e {
            bh_sandbox::SandboxError::Spawn { .. } => Failure::Model(fail(&e)),
            e => Failure::Harness(format!("Cannot sandbox bash: {e}")),
        })?),
        None => {
            let spawned = cmd.spawn();
            drop(cmd); // closes our copies of the pipe's write end
            Shell::Plain(spawned.map_err(|e| fail(&e))?)
        }
    };
    let pgid = match &child {
        Shell::Plain(c) => Pid::from_raw(c.id() as i32),
        Shell::Sandboxed(c) => Pid::from_raw(c.id() as i32),
    };

    let (outcome, acc) = wait(&mut child, pgid, rd, opts, cancel, timeout, on_update);
    let (tr, full_path, last_line_bytes) = acc.finish();
    // The command's git writes, carried over as the broker allows.
    let brokered = overlay
        .map(|o| o.finish(runner, root.path()))
        .filter(|b| !b.is_empty());

    let withheld = opts
        .bash_env
        .as_ref()
        .map(|e| e.withheld.as_slice())
        .unwrap_or_default();
    Ok(result::tool_result(
        &Finished {
            outcome,
            truncation: tr,
            full_path,
            last_line_bytes,
            brokered,
            timeout_label,
        },
        withheld,
    )?)
}

/// Waits for the shell while a reader thread collects its output: until it
/// exits, the call is cancelled or the timeout passes (then every process of
/// the command is killed); strays are killed and the pipe drained either way.
fn wait(
    child: &mut Shell,
    pgid: Pid,
    rd: OwnedFd,
    opts: &ToolboxOptions,
    cancel: &CancelToken,
    timeout: Option<Duration>,
    on_update: Option<OnUpdate<'_>>,
) -> (Outcome, Acc) {
    let exited = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let reader = {
            let acc = Acc::new(opts.output_dir.clone(), DEFAULT_MAX_BYTES);
            let exited = &exited;
            scope.spawn(move || read_loop(rd, exited, acc, on_update))
        };

        let start = Instant::now();
        let mut nap = Duration::from_micros(200);
        let outcome = loop {
            match child.try_wait() {
                Ok(Some(st)) => break Outcome::Exited(st.code()),
                Ok(None) => {}
                Err(_) => break Outcome::Exited(None),
            }
            if cancel.is_cancelled() {
                child.kill_all();
                break Outcome::Aborted;
            }
            if timeout.is_some_and(|t| start.elapsed() >= t) {
                child.kill_all();
                break Outcome::TimedOut;
            }
            std::thread::sleep(nap);
            nap = (nap * 2).min(Duration::from_millis(10));
        };
        // Background jobs die with the shell; this also lets the pipe reach EOF.
        child.kill_strays(pgid);
        exited.store(true, Ordering::SeqCst);
        let acc = reader
            .join()
            .unwrap_or_else(|_| Acc::new(opts.output_dir.clone(), DEFAULT_MAX_BYTES));
        (outcome, acc)
    })
}
