//! `bh agent`'s command line, and what it means for the runtime.

use std::path::PathBuf;

use bh_core::Limits;
use bh_runtime::{RuntimeOptions, SessionChoice, SessionRequest, SystemPrompt};
use bh_tools::{BashSandbox, Profile, SandboxMode, ToolSpec};
use clap::Args;

use crate::context::Ctx;
use crate::error::CliError;
use crate::units::parse_duration;

#[derive(Args, Debug)]
pub struct AgentArgs {
    /// Open this session (a path, or a session id prefix as Pi takes it), or
    /// create a new session at exactly this path.
    #[arg(long, value_name = "FILE|ID", conflicts_with_all = ["continue_session", "fork"])]
    pub(super) session: Option<PathBuf>,
    /// Continue the most recent session of the working directory.
    #[arg(short = 'c', long = "continue", conflicts_with = "fork")]
    pub(super) continue_session: bool,
    /// Fork this session (a path or an id prefix) into a new session and continue there.
    #[arg(long, value_name = "FILE|ID")]
    pub(super) fork: Option<PathBuf>,
    /// Run headless with this prompt (more prompts may follow as arguments).
    #[arg(short = 'p', long = "print", value_name = "PROMPT")]
    pub(super) prompt: Option<String>,
    /// Interactive session even when stdin is not a terminal (commands read line by line).
    #[arg(short = 'i', long, conflicts_with = "prompt")]
    pub(super) interactive: bool,
    /// Further prompts, one user turn each.
    #[arg(value_name = "PROMPT")]
    pub(super) prompts: Vec<String>,
    /// Working directory the tools are confined to (default: the current one;
    /// needed to resume a session recorded in another directory).
    #[arg(long, value_name = "DIR")]
    pub(super) cwd: Option<PathBuf>,
    /// PROVIDER/MODEL (e.g. anthropic/claude-sonnet-4-5, openai/gpt-4.1, scripted/FILE).
    #[arg(long, value_name = "PROVIDER/MODEL")]
    pub(super) model: Option<String>,
    /// Base URL of the provider (any OpenAI-compatible server for unknown providers).
    #[arg(long, value_name = "URL")]
    pub(super) base_url: Option<String>,
    /// Retries of a model call after a connection error or a retryable HTTP
    /// status (default 3, at 2 s, 4 s, 8 s, as Pi).
    #[arg(long, value_name = "N")]
    pub(super) max_retries: Option<u32>,
    /// Replay a scripted-provider file instead of calling a model (its format
    /// ends `bh agent --help`).
    #[arg(long, value_name = "FILE", conflicts_with = "model")]
    pub(super) script: Option<PathBuf>,
    /// Comma-separated tools to offer (default: read,ls,edit,write,bash,grep,find).
    #[arg(long, value_name = "LIST")]
    pub(super) tools: Option<String>,
    /// Stop after this many tool calls.
    #[arg(long, value_name = "N")]
    pub(super) max_tool_calls: Option<u64>,
    /// Stop after this many model calls (turns).
    #[arg(long, value_name = "N")]
    pub(super) max_turns: Option<u64>,
    /// Stop after this much wall-clock time (e.g. 90s, 15m).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub(super) timeout: Option<std::time::Duration>,
    /// Do not checkpoint before mutating tool calls.
    #[arg(long)]
    pub(super) no_checkpoints: bool,
    /// Replace the default system prompt.
    #[arg(long, value_name = "TEXT")]
    pub(super) system_prompt: Option<String>,
    /// How the bash tool is sandboxed: workspace-write (the project, minus its
    /// git dir and common dir, and a private /tmp), read-only, or off.
    #[arg(long, value_name = "MODE", value_enum, default_value_t = SandboxArg::WorkspaceWrite)]
    pub(super) sandbox: SandboxArg,
    /// Also let the bash tool write here (repeatable; e.g. a build cache).
    #[arg(long = "allow-write", value_name = "DIR")]
    pub(super) allow_write: Vec<PathBuf>,
    /// Hide this file or folder from the bash tool too, beyond the built-in
    /// list of credential stores (repeatable): inside, a folder is empty and
    /// a file reads as empty.
    #[arg(long = "deny-read", value_name = "PATH")]
    pub(super) deny_read: Vec<PathBuf>,
    /// Let the bash tool connect to this host Unix socket (repeatable): by
    /// default every socket the host's servers have bound is covered (an
    /// ssh agent, docker, an editor would act for it).
    #[arg(long = "allow-unix-socket", value_name = "PATH")]
    pub(super) allow_unix_socket: Vec<PathBuf>,
    /// Let the bash tool make no Unix socket at all (`socket(AF_UNIX)`
    /// fails with EACCES; socketpair works): no host server is reached, even
    /// one that binds after the command started, but the command's own Unix
    /// sockets fail too.
    #[arg(long, conflicts_with = "allow_unix_socket")]
    pub(super) no_unix_sockets: bool,
    /// Cut the bash tool off the network (a network namespace of its own).
    #[arg(long)]
    pub(super) no_network: bool,
    /// Give the bash tool this provider-key variable after all (repeatable):
    /// by default bash gets none of bh's provider keys (`ANTHROPIC_API_KEY`,
    /// `OPENAI_API_KEY`, every `api_key_env` of the config).
    #[arg(long = "pass-env", value_name = "NAME")]
    pub(super) pass_env: Vec<String>,
}

/// `--sandbox` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum SandboxArg {
    Off,
    WorkspaceWrite,
    ReadOnly,
}

impl From<SandboxArg> for SandboxMode {
    fn from(a: SandboxArg) -> SandboxMode {
        match a {
            SandboxArg::Off => SandboxMode::Off,
            SandboxArg::WorkspaceWrite => SandboxMode::WorkspaceWrite,
            SandboxArg::ReadOnly => SandboxMode::ReadOnly,
        }
    }
}

impl AgentArgs {
    /// The prompts given on the command line, in order.
    pub(super) fn prompts(&self) -> Vec<String> {
        let mut prompts: Vec<String> = self.prompt.iter().cloned().collect();
        prompts.extend(self.prompts.iter().cloned());
        prompts
    }

    /// The tools of `--tools` (default: every interactive tool), in Pi's order.
    fn tool_list(&self) -> Result<Vec<&'static ToolSpec>, CliError> {
        let all = Profile::Interactive.specs();
        let Some(list) = &self.tools else {
            return Ok(all.to_vec());
        };
        let mut out = Vec::new();
        for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            let spec = all
                .iter()
                .find(|s| s.name == name)
                .ok_or_else(|| CliError::usage(format!("unknown tool {name:?}")))?;
            if !out.contains(spec) {
                out.push(*spec);
            }
        }
        Ok(out)
    }

    /// bh's environment minus the provider keys not passed (`--pass-env`).
    pub(super) fn bash_env(&self, ctx: &Ctx) -> bh_tools::BashEnv {
        crate::provider::bash_env(ctx, &self.pass_env)
    }

    pub(super) fn runtime_options(&self, ctx: &Ctx) -> Result<RuntimeOptions, CliError> {
        let allow_sockets = crate::sandbox_policy::allowed_sockets(ctx, &self.allow_unix_socket)?;
        let mut opts = RuntimeOptions::new(&ctx.state_dir, Profile::Interactive);
        opts.bash_env = Some(self.bash_env(ctx));
        opts.tools = Some(self.tool_list()?);
        opts.checkpoints = !self.no_checkpoints;
        if let Some(text) = &self.system_prompt {
            opts.system_prompt = SystemPrompt::Text(text.clone());
        }
        opts.limits = Limits {
            max_tool_calls: self.max_tool_calls,
            timeout: self.timeout,
            max_turns: self.max_turns,
        };
        opts.sandbox = BashSandbox {
            mode: self.sandbox.into(),
            allow_write: self.allow_write.iter().map(|d| ctx.abs(d)).collect(),
            protected: crate::sandbox_policy::protected_paths(ctx),
            network: !self.no_network,
            hidden: crate::sandbox_policy::hidden_paths(ctx)
                .into_iter()
                .chain(self.deny_read.iter().map(|d| ctx.abs(d)))
                .collect(),
            allow_sockets,
            deny_unix_sockets: self.no_unix_sockets,
            // Commits from the sandbox: the git dir overlaid, the broker
            // carries over what the agent may change (bh-tools git_broker).
            git_overlays: Some(ctx.state_dir.join("bash-git")),
        };
        Ok(opts)
    }

    pub(super) fn session_request(&self, ctx: &Ctx) -> SessionRequest {
        let choice = match (&self.session, &self.fork) {
            (Some(s), _) => SessionChoice::Open(s.clone()),
            (None, Some(f)) => SessionChoice::Fork(f.clone()),
            (None, None) if self.continue_session => SessionChoice::Continue,
            (None, None) => SessionChoice::New,
        };
        SessionRequest {
            choice,
            agent_dir: ctx.pi_agent_dir().ok(),
            run_dir: ctx.cwd.clone(),
            cwd: self.cwd.clone(),
            state_dir: ctx.state_dir.clone(),
        }
    }
}
