//! Pi's built-in tools (`read`, `ls`, `edit`, `write`, `grep`, `find`, `bash`)
//! executed in Rust and confined to one root directory.
//!
//! ```no_run
//! # use bh_tools::{Toolbox, ToolboxOptions, Profile};
//! let tb = Toolbox::new(ToolboxOptions::new("/repo", Profile::Executor, "/tmp/bh-out")).unwrap();
//! let result = tb.call("read", &serde_json::json!({"path": "README.md"}));
//! assert!(!result.is_error);
//! ```
//!
//! The API is synchronous: `call` blocks until the tool is done (`bash` until
//! the command ends, times out or is cancelled through a [`CancelToken`]); an
//! async agent loop runs it on a blocking thread. A `Toolbox` is `Send + Sync`.
//!
//! Results are shaped as Pi stores them in a `toolResult` message (content
//! blocks, optional `details`, `isError`), with Pi's texts and error messages.
//! Confinement (see [`confine`]) is enforced by the harness, not the model.

// Libraries never print: what they have to say is a value (an error, an
// event, a report) that the CLI shows. A guard, not a habit.
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod args;
mod bash;
// Files in `confine` come from descriptors (`openat2` beneath the root), not
// from paths; its errors name the relative path themselves.
#[allow(clippy::disallowed_types)]
pub mod confine;
pub mod diff;
pub mod edit_apply;
mod file_tools;
mod git_broker;
mod search;
pub mod specs;
pub mod truncate;
pub mod workspace;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use confine::{ConfineError, RelPath, Root};
pub use workspace::{FsError, Node, Workspace};

/// One tool as offered to a model (defined in `bh-protocol`, shared with `bh-llm`).
pub use bh_protocol::ToolSpec;
pub use bh_sandbox::UnixSockets;

/// A content block of a tool result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum ContentBlock {
    Text {
        text: String,
    },
    Image {
        data: String,
        #[serde(rename = "mimeType")]
        mime_type: String,
    },
}

/// A tool call the harness cannot run at all, whatever the model does: the
/// sandbox cannot be built, the project folder is gone. It ends the turn
/// (`bh_core`), instead of becoming a result the model reads and retries;
/// every other failure is a [`ToolResult`] with `is_error`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct HarnessFailure {
    pub tool: String,
    pub message: String,
}

/// A tool's result, as Pi stores it (`content`, `details?`, `isError`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolResult {
    pub content: Vec<ContentBlock>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
    pub is_error: bool,
}

impl ToolResult {
    /// A successful text result without details.
    pub fn text(text: impl Into<String>) -> Self {
        ToolResult {
            content: vec![ContentBlock::Text { text: text.into() }],
            details: None,
            is_error: false,
        }
    }
    /// A successful text result with details.
    pub fn text_with(text: impl Into<String>, details: Value) -> Self {
        ToolResult {
            content: vec![ContentBlock::Text { text: text.into() }],
            details: Some(details),
            is_error: false,
        }
    }
    /// An error as Pi stores it: the message as text, `details: {}`.
    pub fn error(message: impl Into<String>) -> Self {
        ToolResult {
            content: vec![ContentBlock::Text {
                text: message.into(),
            }],
            details: Some(Value::Object(serde_json::Map::new())),
            is_error: true,
        }
    }
    /// The text blocks joined with newlines.
    pub fn text_content(&self) -> String {
        text_of(&self.content)
    }
    /// The `toolResult` message Pi would store for this result.
    pub fn to_message(
        &self,
        tool_call_id: &str,
        tool_name: &str,
        timestamp: i64,
    ) -> bh_protocol::message::ToolResultMessage {
        let content = self
            .content
            .iter()
            .map(|b| match b {
                ContentBlock::Text { text } => bh_protocol::message::ContentBlock::text(text),
                ContentBlock::Image { data, mime_type } => {
                    bh_protocol::message::ContentBlock::Known(
                        bh_protocol::message::KnownBlock::Image {
                            data: data.clone(),
                            mime_type: mime_type.clone(),
                            extra: Default::default(),
                        },
                    )
                }
            })
            .collect();
        bh_protocol::message::ToolResultMessage {
            role: "toolResult".to_string(),
            tool_call_id: tool_call_id.to_string(),
            tool_name: tool_name.to_string(),
            content,
            details: self.details.clone(),
            is_error: self.is_error,
            timestamp,
            extra: Default::default(),
        }
    }
}

/// A partial result of a running tool, Pi's `onUpdate` payload (the
/// `partialResult` of `tool_execution_update`): `content` and `details` as Pi
/// shapes them. Only `bash` sends updates: first `{"content":[]}` when it
/// starts, then the output so far, truncated to its tail by the same limits
/// as the final result (2000 lines / 50 KB, without the final notice), with
/// `details` `{}` or `{truncation, fullOutputPath}` once truncated.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolUpdate {
    pub content: Vec<ContentBlock>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
}

/// The text blocks of `content` joined with newlines (images left out).
fn text_of(content: &[ContentBlock]) -> String {
    content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text { text } => Some(text.as_str()),
            ContentBlock::Image { .. } => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

impl ToolUpdate {
    /// The text blocks joined with newlines.
    pub fn text_content(&self) -> String {
        text_of(&self.content)
    }
}

/// Receives a running tool's [`ToolUpdate`]s, from the tool's own threads.
pub type OnUpdate<'a> = &'a (dyn Fn(ToolUpdate) + Send + Sync);

/// Which tools a toolbox offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    /// Exactly `read, ls, edit, write`.
    Executor,
    /// `read, ls, edit, write, bash, grep, find`.
    Interactive,
}

impl Profile {
    pub fn specs(self) -> &'static [&'static ToolSpec] {
        static EXECUTOR: [&ToolSpec; 4] = [&specs::READ, &specs::LS, &specs::EDIT, &specs::WRITE];
        static INTERACTIVE: [&ToolSpec; 7] = [
            &specs::READ,
            &specs::LS,
            &specs::EDIT,
            &specs::WRITE,
            &specs::BASH,
            &specs::GREP,
            &specs::FIND,
        ];
        match self {
            Profile::Executor => &EXECUTOR,
            Profile::Interactive => &INTERACTIVE,
        }
    }
}

/// All built-in specs in Pi's order.
pub fn all_specs() -> [&'static ToolSpec; 7] {
    [
        &specs::READ,
        &specs::BASH,
        &specs::EDIT,
        &specs::WRITE,
        &specs::GREP,
        &specs::FIND,
        &specs::LS,
    ]
}

/// Whether a built-in tool may change files (`edit`, `write`, `bash`).
pub fn is_mutating(name: &str) -> bool {
    all_specs().iter().any(|s| s.name == name && s.mutating)
}

/// The cancellation of a running tool call (the bash tool kills its process
/// group when it fires): the one token type of the workspace, shared with the
/// loop and the providers.
pub use tokio_util::sync::CancellationToken as CancelToken;

/// The bash tool's environment: every variable it gets, and the names of
/// those the harness held back (its provider keys). The names are recorded
/// in each bash result's `details.withheldEnv`, so the session says what the
/// command could not see.
#[derive(Debug, Clone, Default)]
pub struct BashEnv {
    pub vars: Vec<(OsString, OsString)>,
    pub withheld: Vec<String>,
}

/// Everything a toolbox needs; nothing is read from the environment.
#[derive(Debug, Clone)]
pub struct ToolboxOptions {
    /// The directory every tool is confined to (the bash tool's cwd).
    pub root: PathBuf,
    pub profile: Profile,
    /// Where the bash tool saves full outputs of truncated commands.
    pub output_dir: PathBuf,
    /// The bash tool's environment; `None` inherits the harness's.
    pub bash_env: Option<BashEnv>,
    /// The bash tool's timeout when the model gives none (Pi 0.73.1: none).
    pub default_bash_timeout: Option<Duration>,
    /// The shell to run (`bash`, found on the inherited PATH, by default).
    pub shell: PathBuf,
    /// How the bash tool is confined (workspace-write by default).
    pub sandbox: BashSandbox,
    /// The harness's git runner, used to find the root's git dir and common
    /// dir by identity (the user's `safe.directory` applies); `None` asks git
    /// with an empty environment.
    pub git: Option<bh_git::GitRunner>,
}

/// `bh agent --sandbox`: what the bash tool may write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxMode {
    /// No sandbox: the shell runs with the harness's authority.
    Off,
    /// Writable: the root (minus its git dir and common dir), the private
    /// `/tmp` and the `allow_write` folders.
    WorkspaceWrite,
    /// Writable: only the private `/tmp` and the `allow_write` folders.
    ReadOnly,
}

impl SandboxMode {
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxMode::Off => "off",
            SandboxMode::WorkspaceWrite => "workspace-write",
            SandboxMode::ReadOnly => "read-only",
        }
    }
}

/// The bash tool's sandbox policy; the caller supplies every path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BashSandbox {
    pub mode: SandboxMode,
    /// Extra writable folders (`--allow-write DIR`).
    pub allow_write: Vec<PathBuf>,
    /// Paths kept read-only even inside the root: `~/.gitconfig`,
    /// `$XDG_CONFIG_HOME`, the harness's state folder (the git dir and
    /// common dir are added by the tool itself).
    pub protected: Vec<PathBuf>,
    pub network: bool,
    /// Paths bash must not read at all (keys, credential stores, the
    /// checkpoint servers' sockets); see `bh_sandbox::Policy::hidden`.
    pub hidden: Vec<PathBuf>,
    /// Host Unix sockets bash may connect to (`--allow-unix-socket`); a
    /// connect to any other is refused (`bh_sandbox::Policy::allow_sockets`).
    pub allow_sockets: Vec<PathBuf>,
    /// `--no-unix-sockets`: bash may make no Unix socket at all
    /// (`bh_sandbox::Policy::deny_unix_sockets`).
    pub deny_unix_sockets: bool,
    /// Commits from the sandbox (`workspace-write` only): where each
    /// command's overlay of the root's git dir is made (a folder of the
    /// harness's, not under the root). The command then sees a writable git
    /// dir and the broker carries its commits, branches, stash and index
    /// over (`git_broker.rs`). `None`: the git dir stays read-only.
    pub git_overlays: Option<PathBuf>,
}

impl Default for BashSandbox {
    fn default() -> Self {
        BashSandbox {
            mode: SandboxMode::WorkspaceWrite,
            allow_write: Vec::new(),
            protected: Vec::new(),
            network: true,
            hidden: Vec::new(),
            allow_sockets: Vec::new(),
            deny_unix_sockets: false,
            git_overlays: None,
        }
    }
}

impl BashSandbox {
    /// How bash is kept from the host's Unix sockets on this kernel.
    pub fn unix_sockets(&self) -> bh_sandbox::UnixSockets {
        bh_sandbox::unix_sockets(self.deny_unix_sockets)
    }
}

impl ToolboxOptions {
    pub fn new(root: impl Into<PathBuf>, profile: Profile, output_dir: impl Into<PathBuf>) -> Self {
        ToolboxOptions {
            root: root.into(),
            profile,
            output_dir: output_dir.into(),
            bash_env: None,
            default_bash_timeout: None,
            shell: PathBuf::from("bash"),
            sandbox: BashSandbox::default(),
            git: None,
        }
    }
}

/// Errors creating a toolbox.
#[derive(Debug, thiserror::Error)]
pub enum ToolboxError {
    #[error("cannot open tool root {path}: {source}")]
    Root {
        path: PathBuf,
        #[source]
        source: ConfineError,
    },
    #[error("the {profile:?} tools need a directory on disk, not a virtual workspace")]
    NeedsDisk { profile: Profile },
}

/// The files a toolbox's tools work on.
#[derive(Debug)]
enum Files {
    /// A directory on disk: every tool.
    Disk(Root),
    /// Another workspace (the executor's virtual worktree): the file tools.
    Other(Box<dyn Workspace>),
}

/// The tools of one profile, confined to one root.
#[derive(Debug)]
pub struct Toolbox {
    files: Files,
    opts: ToolboxOptions,
}

impl Toolbox {
    pub fn new(opts: ToolboxOptions) -> Result<Self, ToolboxError> {
        let root = match &opts.git {
            Some(runner) => Root::open_with_git(&opts.root, runner),
            None => Root::open(&opts.root),
        }
        .map_err(|source| ToolboxError::Root {
            path: opts.root.clone(),
            source,
        })?;
        Ok(Toolbox {
            files: Files::Disk(root),
            opts,
        })
    }

    /// The executor's tools (`read`, `ls`, `edit`, `write`) over `files`
    /// (`opts.root` names the workspace's root in messages; nothing else of
    /// `opts` applies).
    pub fn over(files: Box<dyn Workspace>, opts: ToolboxOptions) -> Result<Self, ToolboxError> {
        if opts.profile != Profile::Executor {
            return Err(ToolboxError::NeedsDisk {
                profile: opts.profile,
            });
        }
        Ok(Toolbox {
            files: Files::Other(files),
            opts,
        })
    }

    /// The canonical root.
    pub fn root(&self) -> &Path {
        match &self.files {
            Files::Disk(root) => root.path(),
            Files::Other(_) => &self.opts.root,
        }
    }

    /// The confined directory the tools open files through (`None` for a
    /// virtual workspace).
    pub fn confined_root(&self) -> Option<&Root> {
        match &self.files {
            Files::Disk(root) => Some(root),
            Files::Other(_) => None,
        }
    }

    fn workspace(&self) -> &dyn Workspace {
        match &self.files {
            Files::Disk(root) => root,
            Files::Other(files) => files.as_ref(),
        }
    }

    /// The tools offered, in profile order.
    pub fn specs(&self) -> &'static [&'static ToolSpec] {
        self.opts.profile.specs()
    }

    /// Runs a tool. Never panics; every failure is an error result.
    pub fn call(&self, name: &str, args: &Value) -> ToolResult {
        self.call_with_cancel(name, args, &CancelToken::new())
    }

    /// Runs a tool that can be cancelled (only `bash` checks the token while
    /// running). A [`HarnessFailure`] comes back as an error result here;
    /// [`Toolbox::call_with_updates`] keeps it apart.
    pub fn call_with_cancel(&self, name: &str, args: &Value, cancel: &CancelToken) -> ToolResult {
        self.call_with_updates(name, args, cancel, None)
            .unwrap_or_else(|f| ToolResult::error(f.message))
    }

    /// [`Toolbox::call_with_cancel`] that also reports partial results while
    /// the tool runs (`bash`: its output so far, at most every 100 ms and
    /// once more before it returns if anything changed since). The result is
    /// the same as without `on_update`. `Err`: the harness cannot run the
    /// tool at all ([`HarnessFailure`]).
    pub fn call_with_updates(
        &self,
        name: &str,
        args: &Value,
        cancel: &CancelToken,
        on_update: Option<OnUpdate<'_>>,
    ) -> Result<ToolResult, HarnessFailure> {
        let Some(spec) = self.specs().iter().find(|s| s.name == name) else {
            return Ok(ToolResult::error(format!("Tool {name} not found")));
        };
        if cancel.is_cancelled() {
            return Ok(ToolResult::error("Operation aborted"));
        }
        let harness = |message: String| HarnessFailure {
            tool: name.to_owned(),
            message,
        };
        if let Files::Disk(root) = &self.files
            && root.is_gone()
        {
            return Err(harness(format!(
                "the project folder {} is gone (removed or replaced while the agent ran)",
                root.path().display()
            )));
        }
        let files = self.workspace();
        let result = match (spec.name.as_ref(), &self.files) {
            ("read", _) => file_tools::read(files, args),
            ("write", _) => file_tools::write(files, args),
            ("edit", _) => file_tools::edit(files, args),
            ("ls", _) => file_tools::ls(files, args),
            ("grep", Files::Disk(root)) => search::grep(root, args),
            ("find", Files::Disk(root)) => search::find(root, args),
            ("bash", Files::Disk(root)) => {
                match bash::run(root, &self.opts, args, cancel, on_update) {
                    Err(bash::Failure::Harness(message)) => return Err(harness(message)),
                    Err(bash::Failure::Model(message)) => Err(message),
                    Ok(result) => Ok(result),
                }
            }
            _ => Err(format!("Tool {name} not found")),
        };
        Ok(result.unwrap_or_else(ToolResult::error))
    }
}
