//! One way to assemble an agent for one directory: the tools confined to it,
//! its checkpoint store, the session writer, the provider, the system prompt
//! and the limits. `bh agent` and the executor both open their agents here.
//!
//! The one policy for a checkpoint store that cannot be opened: checkpoints
//! are off for this runtime, and [`Runtime::warnings`] says why, for the
//! front door to show (the agent: a `warning` event; the executor: its run
//! log and `result.json`). Tools that cannot be confined are an error.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bh_checkpoint::{Store, StoreOptions};
use bh_core::{Agent, AgentConfig, Limits};
use bh_git::GitRunner;
use bh_llm::{Provider, ThinkingLevel};
use bh_session::SessionWriter;
use bh_tools::{BashSandbox, Profile, ToolSpec, Toolbox, ToolboxOptions};

use crate::error::{Result, RuntimeError};

/// The default system prompt; [`SystemPrompt::Default`] adds the working directory.
pub const DEFAULT_SYSTEM_PROMPT: &str = "You are an expert coding assistant. You help users with \
coding tasks by reading files, executing commands, editing code, and writing new files. \
Use the tools to inspect and change the project; paths are relative to the working directory.";

/// The system prompt of a runtime.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SystemPrompt {
    /// [`DEFAULT_SYSTEM_PROMPT`] and a line naming the working directory.
    Default,
    /// Exactly this text.
    Text(String),
    /// No system prompt (the executor: the conversation carries its own).
    Omitted,
}

impl SystemPrompt {
    fn for_dir(&self, cwd: &Path) -> Option<String> {
        match self {
            SystemPrompt::Default => Some(format!(
                "{DEFAULT_SYSTEM_PROMPT}\nCurrent working directory: {}",
                cwd.display()
            )),
            SystemPrompt::Text(t) => Some(t.clone()),
            SystemPrompt::Omitted => None,
        }
    }
}

/// What stays the same whichever directory the runtime is opened for.
#[derive(Debug, Clone)]
pub struct RuntimeOptions {
    /// Better Harness's state dir (checkpoint stores live under it).
    pub state_dir: PathBuf,
    pub profile: Profile,
    /// The tools offered (default: the profile's).
    pub tools: Option<Vec<&'static ToolSpec>>,
    /// Where the bash tool keeps full outputs (default: `<state>/tool-output`).
    pub tool_output_dir: Option<PathBuf>,
    pub checkpoints: bool,
    pub system_prompt: SystemPrompt,
    pub thinking: ThinkingLevel,
    pub limits: Limits,
    /// How the bash tool is sandboxed (workspace-write by default).
    pub sandbox: BashSandbox,
    /// The bash tool's environment (`None`: the harness's own); the CLI
    /// passes its own minus the provider keys.
    pub bash_env: Option<bh_tools::BashEnv>,
}

impl RuntimeOptions {
    /// The interactive agent's defaults: every tool, checkpoints on, the
    /// default system prompt, no limits.
    pub fn new(state_dir: impl Into<PathBuf>, profile: Profile) -> RuntimeOptions {
        RuntimeOptions {
            state_dir: state_dir.into(),
            profile,
            tools: None,
            tool_output_dir: None,
            checkpoints: true,
            system_prompt: SystemPrompt::Default,
            thinking: ThinkingLevel::Off,
            limits: Limits::default(),
            sandbox: BashSandbox::default(),
            bash_env: None,
        }
    }
}

/// The parts of a runtime that belong to one directory.
pub struct Runtime {
    pub cwd: PathBuf,
    pub toolbox: Arc<Toolbox>,
    /// `None` when checkpoints are off (asked for, or the store cannot be opened).
    pub checkpoints: Option<Arc<Store>>,
    /// What the caller should tell the user (a store that could not be opened).
    pub warnings: Vec<String>,
}

impl Runtime {
    /// Opens the tools and the checkpoint store of `cwd` (canonical).
    pub fn open(runner: &GitRunner, cwd: &Path, opts: &RuntimeOptions) -> Result<Runtime> {
        let output_dir = opts
            .tool_output_dir
            .clone()
            .unwrap_or_else(|| opts.state_dir.join("tool-output"));
        let mut tools = ToolboxOptions::new(cwd, opts.profile, output_dir);
        tools.sandbox = opts.sandbox.clone();
        tools.bash_env = opts.bash_env.clone();
        tools.git = Some(runner.clone());
        let toolbox = Toolbox::new(tools).map_err(|source| RuntimeError::Tools {
            path: cwd.to_path_buf(),
            source: Box::new(source),
        })?;
        let mut warnings = Vec::new();
        let checkpoints = if opts.checkpoints {
            match Store::open_in(runner, cwd, &StoreOptions::new(&opts.state_dir)) {
                Ok(store) => Some(Arc::new(store)),
                Err(e) => {
                    warnings.push(format!(
                        "checkpoints are off in {}: cannot open the store: {e}",
                        cwd.display()
                    ));
                    None
                }
            }
        } else {
            None
        };
        Ok(Runtime {
            cwd: cwd.to_path_buf(),
            toolbox: Arc::new(toolbox),
            checkpoints,
            warnings,
        })
    }

    /// The executor's tools over `files` (a virtual worktree) shown as the
    /// directory `cwd`: no checkpoint store (nothing on disk can be
    /// damaged; the run's files are its session and its result).
    pub fn over(
        cwd: &Path,
        files: Box<dyn bh_tools::Workspace>,
        opts: &RuntimeOptions,
    ) -> Result<Runtime> {
        let output_dir = opts
            .tool_output_dir
            .clone()
            .unwrap_or_else(|| opts.state_dir.join("tool-output"));
        let toolbox = Toolbox::over(files, ToolboxOptions::new(cwd, opts.profile, output_dir))
            .map_err(|source| RuntimeError::Tools {
                path: cwd.to_path_buf(),
                source: Box::new(source),
            })?;
        Ok(Runtime {
            cwd: cwd.to_path_buf(),
            toolbox: Arc::new(toolbox),
            checkpoints: None,
            warnings: Vec::new(),
        })
    }

    /// The agent of this directory on `session`.
    pub fn agent(
        &self,
        opts: &RuntimeOptions,
        provider: Arc<dyn Provider>,
        session: SessionWriter,
    ) -> Result<Agent> {
        let file = session.path().to_path_buf();
        Agent::new(AgentConfig {
            provider,
            toolbox: self.toolbox.clone(),
            tools: opts.tools.clone(),
            session,
            checkpoints: self.checkpoints.clone(),
            system_prompt: opts.system_prompt.for_dir(&self.cwd),
            thinking: opts.thinking,
            max_tokens: None,
            limits: opts.limits,
        })
        .map_err(|source| RuntimeError::Agent {
            file,
            source: Box::new(source),
        })
    }
}
