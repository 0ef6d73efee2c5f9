use std::ffi::{OsStr, OsString};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;

/// Where a repository's configuration may come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The user's repository: their system, global and repository config apply
    /// (so their ignore rules and identity are seen), but hooks and fsmonitor are
    /// off and, unless a command asks for it, git takes no optional locks.
    User,
    /// A repository the harness owns: no system or global config, no system
    /// attributes; only the repository's own config and `-c` overrides apply.
    Isolated,
}

/// Failure of one git invocation. Each variant carries the argv it ran.
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    #[error("could not run `{argv}`: {source}")]
    Spawn {
        argv: String,
        #[source]
        source: std::io::Error,
    },
    #[error("`{argv}` failed ({status}): {stderr}")]
    Failed {
        argv: String,
        /// Exit code, `None` when killed by a signal.
        code: Option<i32>,
        status: String,
        stderr: String,
    },
    #[error("unexpected output from `{argv}`: {detail}")]
    Parse { argv: String, detail: String },
}

impl GitError {
    /// The exit code of a failed git, if it exited normally.
    pub fn exit_code(&self) -> Option<i32> {
        match self {
            GitError::Failed { code, .. } => *code,
            _ => None,
        }
    }

    /// Standard error of a failed git (empty for other variants).
    pub fn stderr(&self) -> &str {
        match self {
            GitError::Failed { stderr, .. } => stderr,
            _ => "",
        }
    }
}

/// Configuration forced on every invocation, whatever the scope.
const HARDENING: &[(&str, &str)] = &[
    ("core.hooksPath", "/dev/null"),
    ("core.fsmonitor", "false"),
    ("core.quotepath", "false"),
    ("core.pager", "cat"),
    ("gc.auto", "0"),
    ("maintenance.auto", "false"),
    ("commit.gpgSign", "false"),
    ("tag.gpgSign", "false"),
    ("credential.helper", ""),
    ("protocol.ext.allow", "never"),
];

/// Spawns `git` with a scrubbed environment. Cheap to clone.
#[derive(Debug, Clone)]
pub struct GitRunner {
    inner: Arc<RunnerInner>,
}

#[derive(Debug)]
struct RunnerInner {
    program: OsString,
    env: Vec<(OsString, OsString)>,
}

impl GitRunner {
    /// `program` is the git executable (`"git"` looks it up on the given `PATH`).
    /// `env` is the base environment for children; any `GIT_*` variable in it is
    /// dropped, and nothing else is inherited from this process.
    pub fn new(program: impl Into<OsString>, env: Vec<(OsString, OsString)>) -> GitRunner {
        let env = env
            .into_iter()
            .filter(|(k, _)| !is_git_var(k))
            .collect::<Vec<_>>();
        GitRunner {
            inner: Arc::new(RunnerInner {
                program: program.into(),
                env,
            }),
        }
    }

    /// A handle on the repository (or plain directory) at `cwd`.
    pub fn repo(&self, cwd: impl Into<PathBuf>, scope: Scope) -> Repo {
        Repo {
            runner: self.clone(),
            cwd: cwd.into(),
            scope,
            git_dir: None,
            work_tree: None,
            config: Vec::new(),
        }
    }

    /// A variable of the environment this runner was given (never of this
    /// process), e.g. `HOME` to find where git looks for global files.
    pub fn env_var(&self, key: &str) -> Option<&OsStr> {
        self.inner
            .env
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_os_str())
    }

    /// The environment children get (for tests and diagnostics).
    pub fn base_env(&self) -> &[(OsString, OsString)] {
        &self.inner.env
    }
}

fn is_git_var(key: &OsStr) -> bool {
    key.as_encoded_bytes().starts_with(b"GIT_")
}

/// A repository as seen by the runner: working directory, scope, and optionally
/// an explicit git dir and work tree (passed as `--git-dir`/`--work-tree`, never
/// through the environment).
#[derive(Debug, Clone)]
pub struct Repo {
    runner: GitRunner,
    cwd: PathBuf,
    scope: Scope,
    git_dir: Option<PathBuf>,
    work_tree: Option<PathBuf>,
    config: Vec<(String, OsString)>,
}

impl Repo {
    pub fn with_git_dir(mut self, git_dir: impl Into<PathBuf>) -> Repo {
        self.git_dir = Some(git_dir.into());
        self
    }

    pub fn with_work_tree(mut self, work_tree: impl Into<PathBuf>) -> Repo {
        self.work_tree = Some(work_tree.into());
        self
    }

    /// Adds a `-c key=value` to every command of this handle.
    pub fn with_config(mut self, key: &str, value: impl Into<OsString>) -> Repo {
        self.config.push((key.to_owned(), value.into()));
        self
    }

    pub fn cwd(&self) -> &Path {
        &self.cwd
    }

    /// The runner behind this handle.
    pub fn runner(&self) -> &GitRunner {
        &self.runner
    }

    pub fn scope(&self) -> Scope {
        self.scope
    }

    pub fn git_dir(&self) -> Option<&Path> {
        self.git_dir.as_deref()
    }

    pub fn work_tree(&self) -> Option<&Path> {
        self.work_tree.as_deref()
    }

    /// Starts a command: `git <hardening> <args>`.
    pub fn cmd<I, S>(&self, args: I) -> GitCommand
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut cmd = GitCommand {
            repo: self.clone(),
            args: Vec::new(),
            stdin: None,
            env: Vec::new(),
            ok_codes: vec![0],
            optional_locks: self.scope == Scope::Isolated,
        };
        cmd.args
            .extend(args.into_iter().map(|a| a.as_ref().to_os_string()));
        cmd
    }

    /// Runs `args` and returns stdout; fails on any non-zero exit.
    pub fn run<I, S>(&self, args: I) -> Result<Vec<u8>, GitError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        Ok(self.cmd(args).run()?.stdout)
    }

    /// Runs `args` and returns stdout as one trimmed UTF-8 line (ids, paths of
    /// git's own files).
    pub fn run_line<I, S>(&self, args: I) -> Result<String, GitError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let cmd = self.cmd(args);
        let argv = cmd.display_argv();
        let out = cmd.run()?;
        let text = String::from_utf8(out.stdout).map_err(|_| GitError::Parse {
            argv,
            detail: "output is not UTF-8".into(),
        })?;
        Ok(text.trim_end_matches(['\n', '\r']).to_owned())
    }
}

/// The result of a finished git.
#[derive(Debug, Clone)]
pub struct GitOutput {
    pub code: i32,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

/// One invocation being built.
#[derive(Debug)]
pub struct GitCommand {
    repo: Repo,
    args: Vec<OsString>,
    stdin: Option<Vec<u8>>,
    env: Vec<(OsString, OsString)>,
    ok_codes: Vec<i32>,
    optional_locks: bool,
}

impl GitCommand {
    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Self {
        self.args.push(arg.as_ref().to_os_string());
        self
    }

    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_os_string()));
        self
    }

    /// Bytes fed to git's standard input (written from a separate thread, so
    /// large inputs and outputs cannot deadlock).
    pub fn stdin(mut self, input: Vec<u8>) -> Self {
        self.stdin = Some(input);
        self
    }

    /// An explicit variable for this child (for example `GIT_INDEX_FILE` of a
    /// harness-made temporary index, or a fixed identity).
    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// Exit codes that count as success (default: only 0).
    pub fn ok_codes(mut self, codes: &[i32]) -> Self {
        self.ok_codes = codes.to_vec();
        self
    }

    /// Whether git may take optional locks (e.g. `status` refreshing the index).
    /// Off by default for the user's repositories, on for harness-owned ones.
    pub fn optional_locks(mut self, allow: bool) -> Self {
        self.optional_locks = allow;
        self
    }

    /// The full argv as it will be run, for messages.
    pub fn display_argv(&self) -> String {
        let argv = self.argv();
        let mut text = String::from("git");
        for a in &argv {
            text.push(' ');
            let s = a.to_string_lossy();
            if s.is_empty() || s.contains([' ', '\t', '\n', '"', '\'']) {
                text.push_str(&format!("{s:?}"));
            } else {
                text.push_str(&s);
            }
        }
        text
    }

    fn argv(&self) -> Vec<OsString> {
        let mut argv: Vec<OsString> = Vec::new();
        for (k, v) in HARDENING {
            argv.push("-c".into());
            argv.push(format!("{k}={v}").into());
        }
        for (k, v) in &self.repo.config {
            let mut kv = OsString::from(format!("{k}="));
            kv.push(v);
            argv.push("-c".into());
            argv.push(kv);
        }
        if let Some(dir) = &self.repo.git_dir {
            let mut a = OsString::from("--git-dir=");
            a.push(dir);
            argv.push(a);
        }
        if let Some(wt) = &self.repo.work_tree {
            let mut a = OsString::from("--work-tree=");
            a.push(wt);
            argv.push(a);
        }
        argv.push("--no-pager".into());
        argv.extend(self.args.iter().cloned());
        argv
    }

    fn build(&self) -> Command {
        let mut cmd = Command::new(&self.repo.runner.inner.program);
        cmd.env_clear();
        cmd.envs(self.repo.runner.inner.env.iter().map(|(k, v)| (k, v)));
        cmd.env("LC_ALL", "C")
            .env("LANGUAGE", "C")
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_NO_REPLACE_OBJECTS", "1")
            .env("GIT_ADVICE", "0")
            .env("GIT_PAGER", "cat")
            .env("GIT_EDITOR", "false")
            .env("GIT_ASKPASS", "false")
            .env("SSH_ASKPASS", "false")
            .env(
                "GIT_OPTIONAL_LOCKS",
                if self.optional_locks { "1" } else { "0" },
            );
        if self.repo.scope == Scope::Isolated {
            cmd.env("GIT_CONFIG_NOSYSTEM", "1")
                .env("GIT_CONFIG_GLOBAL", "/dev/null")
                .env("GIT_ATTR_NOSYSTEM", "1");
        }
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        cmd.args(self.argv());
        cmd.current_dir(&self.repo.cwd);
        die_with_parent(&mut cmd);
        cmd
    }

    /// Runs to completion while `feed` streams standard input from another
    /// thread (for inputs too large to hold in memory, e.g. `fast-import`).
    /// Errors from `feed` end the input early; git's exit status decides.
    pub fn run_streaming<F>(mut self, feed: F) -> Result<GitOutput, GitError>
    where
        F: FnOnce(&mut dyn Write) -> std::io::Result<()> + Send + 'static,
    {
        self.stdin = None;
        self.run_inner(Some(Box::new(feed)))
    }

    /// Starts a long-lived git (`cat-file --batch`, `hash-object --stdin-paths`,
    /// `update-ref --stdin` …) that is fed requests and answers them one by one.
    /// Its standard error is discarded (a request it cannot serve makes it exit,
    /// which the caller sees as end of output). The child is killed and reaped
    /// when the [`GitProcess`] is dropped; like every git child it also dies
    /// with the thread that started it, so start it from a thread that lives as
    /// long as it is needed.
    pub fn spawn_process(self) -> Result<GitProcess, GitError> {
        let argv = self.display_argv();
        let mut cmd = self.build();
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut child = cmd.spawn().map_err(|source| GitError::Spawn {
            argv: argv.clone(),
            source,
        })?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(GitError::Spawn {
                argv,
                source: std::io::Error::other("no pipes to the child"),
            });
        };
        Ok(GitProcess {
            child,
            stdin,
            stdout: std::io::BufReader::new(stdout),
            argv,
        })
    }

    /// Runs to completion; a code outside `ok_codes` is an error carrying the
    /// argv, exit code and stderr.
    pub fn run(self) -> Result<GitOutput, GitError> {
        self.run_inner(None)
    }

    #[allow(clippy::type_complexity)]
    fn run_inner(
        self,
        feed: Option<Box<dyn FnOnce(&mut dyn Write) -> std::io::Result<()> + Send>>,
    ) -> Result<GitOutput, GitError> {
        let argv = self.display_argv();
        let mut cmd = self.build();
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        cmd.stdin(if self.stdin.is_some() || feed.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        });
        let mut child = cmd.spawn().map_err(|source| GitError::Spawn {
            argv: argv.clone(),
            source,
        })?;
        let writer = match (self.stdin, feed, child.stdin.take()) {
            (Some(input), _, Some(mut pipe)) => Some(std::thread::spawn(move || {
                // A git that exits early closes the pipe: its exit status says why.
                let _ = pipe.write_all(&input);
            })),
            (None, Some(feed), Some(mut pipe)) => Some(std::thread::spawn(move || {
                let _ = feed(&mut pipe);
            })),
            _ => None,
        };
        let output = child.wait_with_output().map_err(|source| GitError::Spawn {
            argv: argv.clone(),
            source,
        })?;
        if let Some(w) = writer {
            let _ = w.join();
        }
        let code = output.status.code();
        match code {
            Some(c) if self.ok_codes.contains(&c) => Ok(GitOutput {
                code: c,
                stdout: output.stdout,
                stderr: output.stderr,
            }),
            _ => Err(GitError::Failed {
                argv,
                code,
                status: output.status.to_string(),
                stderr: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
            }),
        }
    }
}

/// A long-lived git child with piped standard input and output.
#[derive(Debug)]
pub struct GitProcess {
    child: std::process::Child,
    /// Requests go here (flush after each one).
    pub stdin: std::process::ChildStdin,
    /// Answers come from here.
    pub stdout: std::io::BufReader<std::process::ChildStdout>,
    argv: String,
}

impl GitProcess {
    /// The argv it was started with, for messages.
    pub fn argv(&self) -> &str {
        &self.argv
    }

    /// Waits for the child to exit, once its output was read to the end
    /// (dropping the process instead kills it).
    pub fn wait(&mut self) -> std::io::Result<std::process::ExitStatus> {
        self.child.wait()
    }
}

impl Drop for GitProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Asks the kernel to kill a git child when the harness dies, so that an
/// orphaned git can never hold a lock (`index.lock`, a ref lock) that the next
/// harness process, holding the store lock, then treats as stale.
fn die_with_parent(cmd: &mut Command) {
    bh_proc::die_with_parent(cmd);
}
