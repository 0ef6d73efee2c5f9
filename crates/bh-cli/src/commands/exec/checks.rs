//! What `bh exec plan` refuses before anything is written (an empty prompt,
//! a missing or malformed model, an unknown provider, a script that cannot
//! be read), and what `bh exec run` without `--yes` says it would do.

use std::path::Path;

use bh_exec::Plan;
use bh_llm::{Config, ModelRef};
use serde_json::json;

use crate::context::Ctx;
use crate::error::{CliError, ErrorKind, print_json};
use crate::ui::{errln, outln};

/// The providers every configuration knows (`bh-llm`'s built-ins) and the
/// scripted replay.
const BUILTIN: [&str; 3] = ["anthropic", "openai", "scripted"];

const MODEL_HELP: &str = "PROVIDER/MODEL, e.g. anthropic/claude-sonnet-4-5, openai/gpt-4o, \
                          scripted/FILE, or a provider of your config.toml or Pi's models.json";

/// A prompt with something in it.
pub(crate) fn prompt(text: &str, from: Option<&Path>) -> Result<(), CliError> {
    if text.trim().is_empty() {
        return Err(CliError::usage(match from {
            Some(f) => format!("the prompt file {} is empty", f.display()),
            None => {
                "--prompt is empty: a plan needs a prompt to continue the session with".to_owned()
            }
        }));
    }
    let hidden = bh_report::hidden_count(text);
    if hidden > 0 {
        errln!(
            "bh: warning: the prompt holds {hidden} invisible character(s) (shown as \\u{{…}} by `bh exec run` without --yes); a plan holding them is refused elsewhere unless --allow-invisible: {}",
            crate::display::escape(text)
        );
    }
    Ok(())
}

/// A plan sealed by another state directory whose prompt holds characters a
/// person cannot see is refused unless `allow` (`--allow-invisible`): what
/// was shown for trust may not be what runs.
pub(crate) fn foreign_invisible(plan: &Plan, own: bool, allow: bool) -> Result<(), CliError> {
    let hidden = bh_report::hidden_count(&plan.prompt.text);
    if own || allow || hidden == 0 {
        return Ok(());
    }
    Err(CliError::new(
        ErrorKind::Refused,
        format!(
            "the plan was sealed by another state directory and its prompt holds {hidden} invisible character(s): {}; pass --allow-invisible after reading it",
            crate::display::escape(&plan.prompt.text)
        ),
    ))
}

/// The prompt's length in characters and its SHA-256 (hex), as a person
/// compares it with what they were sent.
pub(crate) fn prompt_digest(text: &str) -> (usize, String) {
    use sha2::Digest as _;
    (
        text.chars().count(),
        hex::encode(sha2::Sha256::digest(text.as_bytes())),
    )
}

/// The planned model: present, `PROVIDER/MODEL`, a provider this machine
/// knows (built-in or configured), and for `scripted/FILE` a script that
/// reads and parses. Returns the model string as it goes into the plan.
pub(crate) fn model(ctx: &Ctx, model: Option<&str>) -> Result<String, CliError> {
    let Some(model) = model.map(str::trim).filter(|m| !m.is_empty()) else {
        return Err(CliError::usage(format!(
            "exec plan needs --model ({MODEL_HELP}): a plan without a model cannot run"
        )));
    };
    let r: ModelRef = model.parse().map_err(|_| {
        let hint = match model.split_once(':') {
            Some((p, m)) if !model.contains('/') => format!(" (did you mean {p}/{m}?)"),
            _ => String::new(),
        };
        CliError::usage(format!(
            "--model {model:?} is not of the form {MODEL_HELP}{hint}"
        ))
    })?;
    if r.provider == "scripted" {
        let file = ctx.abs(Path::new(&r.model));
        let src = fs_err::read_to_string(&file).map_err(|e| {
            let kind = if e.kind() == std::io::ErrorKind::NotFound {
                ErrorKind::NotFound
            } else {
                ErrorKind::Usage
            };
            CliError::new(kind, format!("--model {model}: {e}"))
        })?;
        let spec = bh_llm::ModelSpec::new("scripted", "scripted", bh_llm::Api::Scripted);
        bh_llm::ScriptedProvider::from_str(&src, spec).map_err(|e| {
            CliError::usage(format!(
                "--model {model}: {} is not a script: {e}",
                file.display()
            ))
        })?;
        return Ok(model.to_owned());
    }
    let known = known_providers(ctx)?;
    if !known.contains(&r.provider) {
        return Err(CliError::usage(format!(
            "--model {model}: unknown provider {:?} (known here: {}; add one as a [providers.NAME] table in {} or in Pi's models.json)",
            r.provider,
            known.join(", "),
            crate::provider::config_file(ctx).map_or_else(
                || "bh's config.toml".to_owned(),
                |p| p.display().to_string()
            )
        )));
    }
    Ok(model.to_owned())
}

/// The built-in providers plus those of the TOML config and Pi's
/// `models.json` (the same files `bh agent` reads).
fn known_providers(ctx: &Ctx) -> Result<Vec<String>, CliError> {
    let mut config = Config::default();
    if let Some(path) = crate::provider::config_file(ctx) {
        match fs_err::read_to_string(&path) {
            Ok(src) => {
                config = Config::from_toml(&src).map_err(|e| {
                    CliError::new(ErrorKind::Invalid, format!("{}: {e}", path.display()))
                })?;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(CliError::new(ErrorKind::Invalid, e.to_string())),
        }
    }
    if let Ok(dir) = ctx.pi_agent_dir() {
        let models = dir.join("models.json");
        if let Ok(src) = fs_err::read_to_string(&models) {
            config.add_pi_models_json(&src).map_err(|e| {
                CliError::new(ErrorKind::Invalid, format!("{}: {e}", models.display()))
            })?;
        }
    }
    let mut out: Vec<String> = BUILTIN.iter().map(|p| (*p).to_owned()).collect();
    out.extend(
        config
            .providers
            .into_keys()
            .filter(|p| !BUILTIN.contains(&p.as_str())),
    );
    Ok(out)
}

/// `bh exec run` without `--yes`: the plan holds (it was just verified);
/// say what a run would do, change nothing, exit 0.
/// `checkout`: the run was asked for a checkout (`--checkout`,
/// `--keep-worktree`); a plan that allows filters gets one anyway.
pub(crate) fn dry_run(ctx: &Ctx, path: &Path, plan: &Plan, checkout: bool) -> Result<(), CliError> {
    let mode = if checkout || plan.allow_filters {
        bh_exec::WorkMode::Checkout
    } else {
        bh_exec::WorkMode::Virtual
    };
    let (chars, sha) = prompt_digest(&plan.prompt.text);
    let hidden = bh_report::hidden_count(&plan.prompt.text);
    if ctx.json {
        return print_json(&json!({
            "dry_run": true,
            "prompt_chars": chars,
            "prompt_bytes": plan.prompt.text.len(),
            "prompt_sha256": sha,
            "prompt_invisible": hidden,
            "plan_file": path,
            "would": {
                "session": plan.session.id,
                "entry": plan.session.entry,
                "base": plan.base.commit,
                "model": plan.model,
                "tools": plan.tools,
                "max_tool_calls": plan.limits.max_tool_calls,
                "timeout_secs": plan.limits.timeout_secs,
                "ref": plan.output_ref,
                "allow_filters": plan.allow_filters,
                "files": mode,
                "repo": plan.repo.top_level,
                "prompt": plan.prompt.text,
            },
            "key_id": plan.mac.key_id,
        }));
    }
    outln!(
        "dry run: the plan {} holds; nothing was changed",
        path.display()
    )?;
    outln!(
        "  would continue session {} from entry {}",
        plan.session.id,
        plan.session.entry
    )?;
    outln!(
        "  at commit {} of {} {}",
        plan.base.commit,
        crate::display::escape(&plan.repo.top_level.display().to_string()),
        match mode {
            bh_exec::WorkMode::Virtual => "over its tree (no checkout)",
            bh_exec::WorkMode::Checkout => "in a detached worktree",
        }
    )?;
    outln!(
        "  with the prompt: {}",
        crate::display::escape(&plan.prompt.text)
    )?;
    outln!(
        "  prompt: {chars} characters, {} bytes, sha256 {sha}{}",
        plan.prompt.text.len(),
        if hidden > 0 {
            format!("; {hidden} invisible character(s), shown as \\u{{…}}")
        } else {
            String::new()
        }
    )?;
    outln!(
        "  with model {}, tools {}, at most {} tool calls and {}s",
        plan.model.as_deref().unwrap_or("(none)"),
        plan.tools.join(", "),
        plan.limits.max_tool_calls,
        plan.limits.timeout_secs
    )?;
    outln!(
        "  filter drivers: {}",
        if plan.allow_filters {
            "the repository's run (--allow-filters)"
        } else {
            "none run"
        }
    )?;
    outln!("  committing under {}", plan.output_ref)?;
    outln!("pass --yes to run it")?;
    Ok(())
}
