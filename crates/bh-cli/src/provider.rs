//! The model: `--model`, `--script`, `--base-url`, our config file, Pi's
//! `models.json`, and API keys from the environment (the only place that
//! reads them).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bh_llm::{Api, Config, HttpProvider, ModelRef, ModelSpec, Provider, ResolveOptions};

use crate::context::Ctx;
use crate::error::{CliError, ErrorKind};

/// `BH_CONFIG`, else `$XDG_CONFIG_HOME/better-harness/config.toml`, else
/// `~/.config/better-harness/config.toml`.
pub(crate) fn config_file(ctx: &Ctx) -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("BH_CONFIG").filter(|p| !p.is_empty()) {
        return Some(ctx.abs(Path::new(&p)));
    }
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .filter(|d| d.is_absolute())
        .or_else(|| ctx.home.as_ref().map(|h| h.join(".config")))?;
    Some(base.join("better-harness").join("config.toml"))
}

/// Run a `!command` of a Pi config value; its trimmed stdout is the key.
fn run_key_command(cmd: &str) -> Option<String> {
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .stdin(std::process::Stdio::null())
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A provider for `--model`/`--script`/`--base-url` (also `/model` in the
/// REPL, and the executor's planned model).
pub(crate) fn build_provider(
    model: Option<&str>,
    script: Option<&Path>,
    base_url: Option<&str>,
    ctx: &Ctx,
) -> Result<Arc<dyn Provider>, CliError> {
    build_provider_with(model, script, base_url, None, ctx)
}

/// [`build_provider`] with `--max-retries` (default: Pi's three).
pub(crate) fn build_provider_with(
    model: Option<&str>,
    script: Option<&Path>,
    base_url: Option<&str>,
    max_retries: Option<u32>,
    ctx: &Ctx,
) -> Result<Arc<dyn Provider>, CliError> {
    let script = match (script, model) {
        (Some(s), _) => Some(ctx.abs(s)),
        (None, Some(m)) => m.strip_prefix("scripted/").map(|f| ctx.abs(Path::new(f))),
        (None, None) => None,
    };
    if let Some(file) = script {
        let src = fs_err::read_to_string(&file).map_err(|e| {
            CliError::new(
                ErrorKind::NotFound,
                format!("script {}: {e}", file.display()),
            )
        })?;
        let model = ModelSpec::new("scripted", "scripted", Api::Scripted);
        let p = bh_llm::ScriptedProvider::from_str(&src, model)
            .map_err(|e| CliError::usage(format!("script {}: {e}", file.display())))?;
        return Ok(Arc::new(p));
    }
    let Some(model) = model else {
        return Err(CliError::usage(
            "no model: pass --model PROVIDER/MODEL or --script FILE",
        ));
    };
    let r: ModelRef = model.parse().map_err(CliError::usage)?;
    let config = load_config(ctx)?;
    let env = |name: &str| std::env::var(name).ok();
    let source = config.key_source(&r.provider);
    let key = source
        .as_ref()
        .and_then(|k| k.resolve(&env, &run_key_command));
    // The hosted APIs need a key; a server at another base URL may not.
    if key.is_none()
        && base_url.is_none()
        && let Some(bh_llm::KeySource::Env(var)) = &source
    {
        return Err(CliError::usage(format!(
            "no API key for {}: set {var}",
            r.provider
        )));
    }
    let opts = ResolveOptions {
        base_url: base_url.map(str::to_owned),
        api_key: key,
    };
    let spec = config.resolve(&r, &opts).map_err(|e| match e {
        // Say where: the files this bh reads.
        bh_llm::LlmError::UnknownProvider { .. } => CliError::usage(format!(
            "{e} (bh reads {}; Pi's {}; --base-url)",
            config_file(ctx)
                .map_or_else(|| "no config.toml".to_owned(), |p| p.display().to_string()),
            ctx.pi_agent_dir().map_or_else(
                |_| "models.json".to_owned(),
                |d| d.join("models.json").display().to_string()
            ),
        )),
        other => CliError::usage(other),
    })?;
    let mut p = HttpProvider::new(spec).map_err(CliError::internal)?;
    if let Some(max_retries) = max_retries {
        p = p.with_retry(bh_llm::RetryPolicy {
            max_retries,
            ..bh_llm::RetryPolicy::default()
        });
    }
    Ok(Arc::new(p))
}

/// Our own TOML config first (its entries win), then Pi's models.json.
fn load_config(ctx: &Ctx) -> Result<Config, CliError> {
    let mut config = match config_file(ctx) {
        Some(path) => match fs_err::read_to_string(&path) {
            Ok(src) => Config::from_toml(&src).map_err(|e| {
                CliError::new(ErrorKind::Invalid, format!("{}: {e}", path.display()))
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Config::default(),
            // fs-err's error names the path.
            Err(e) => return Err(CliError::new(ErrorKind::Invalid, e.to_string())),
        },
        None => Config::default(),
    };
    if let Ok(dir) = ctx.pi_agent_dir() {
        let models = dir.join("models.json");
        if let Ok(src) = fs_err::read_to_string(&models) {
            config.add_pi_models_json(&src).map_err(|e| {
                CliError::new(ErrorKind::Invalid, format!("{}: {e}", models.display()))
            })?;
        }
    }
    Ok(config)
}

/// The environment variables that hold bh's provider keys: the built-in
/// `ANTHROPIC_API_KEY`, `OPENAI_API_KEY`, and every `api_key_env` the config
/// (and Pi's models.json) names. An unreadable config gives the built-ins.
/// bh's environment minus the provider keys ([`provider_key_vars`]) not
/// named in `pass` (`--pass-env`), with the names withheld (only those that
/// were set): what the agent's `bash` gets (the executor offers no bash).
pub(crate) fn bash_env(ctx: &Ctx, pass: &[String]) -> bh_tools::BashEnv {
    let keys = provider_key_vars(ctx);
    let mut withheld = Vec::new();
    let vars = std::env::vars_os()
        .filter(|(k, _)| {
            let name = k.to_string_lossy();
            let hold = keys.contains(name.as_ref()) && !pass.iter().any(|p| *p == name);
            if hold {
                withheld.push(name.into_owned());
            }
            !hold
        })
        .collect();
    withheld.sort();
    bh_tools::BashEnv { vars, withheld }
}

pub(crate) fn provider_key_vars(ctx: &Ctx) -> std::collections::BTreeSet<String> {
    let mut names: std::collections::BTreeSet<String> = ["ANTHROPIC_API_KEY", "OPENAI_API_KEY"]
        .into_iter()
        .map(str::to_owned)
        .collect();
    let config = load_config(ctx).unwrap_or_default();
    for name in config.providers.keys() {
        match config.key_source(name) {
            Some(bh_llm::KeySource::Env(var)) => {
                names.insert(var);
            }
            // A Pi `apiKey` that is not a command may name a variable.
            Some(bh_llm::KeySource::PiValue(v))
                if !v.starts_with('!')
                    && !v.is_empty()
                    && v.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') =>
            {
                names.insert(v);
            }
            _ => {}
        }
    }
    names
}
