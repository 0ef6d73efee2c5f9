//! Configuration types: `provider/model` references, a TOML provider table, and Pi's
//! `models.json` custom providers. Nothing here reads the environment or files: the
//! caller passes text in and resolves keys with [`KeySource::resolve`].

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::LlmError;
use crate::json::strip_jsonc;
use crate::quirks::{Quirks, QuirksOverride};
use crate::types::{Api, ModelCost, ModelSpec};

/// `PROVIDER/MODEL`; the model part may itself contain `/` (`openrouter/anthropic/x`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ModelRef {
    pub provider: String,
    pub model: String,
}

impl FromStr for ModelRef {
    type Err = LlmError;
    fn from_str(s: &str) -> Result<ModelRef, LlmError> {
        match s.trim().split_once('/') {
            Some((p, m)) if !p.is_empty() && !m.is_empty() => Ok(ModelRef {
                provider: p.to_owned(),
                model: m.to_owned(),
            }),
            _ => Err(LlmError::Config(format!(
                "model {s:?} is not of the form PROVIDER/MODEL"
            ))),
        }
    }
}

impl fmt::Display for ModelRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.provider, self.model)
    }
}

/// Where an API key comes from; resolved by the caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySource {
    /// An environment variable (`api_key_env`, built-in `ANTHROPIC_API_KEY` /
    /// `OPENAI_API_KEY`).
    Env(String),
    /// A Pi config value (`apiKey` in models.json, `api_key` in TOML): `!command` runs
    /// the command and uses its trimmed stdout; otherwise the environment variable of
    /// that name if set, else the literal text.
    PiValue(String),
}

impl KeySource {
    /// `env` looks up a variable, `run` runs a shell command (both supplied by the CLI).
    pub fn resolve(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
        run: &dyn Fn(&str) -> Option<String>,
    ) -> Option<String> {
        match self {
            KeySource::Env(name) => env(name).filter(|v| !v.is_empty()),
            KeySource::PiValue(v) => {
                if let Some(cmd) = v.strip_prefix('!') {
                    run(cmd)
                        .map(|s| s.trim().to_owned())
                        .filter(|s| !s.is_empty())
                } else {
                    env(v).filter(|e| !e.is_empty()).or_else(|| Some(v.clone()))
                }
            }
        }
    }
}

/// One model entry (TOML snake_case or Pi camelCase keys).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelConfig {
    pub id: String,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub api: Option<String>,
    #[serde(default)]
    pub reasoning: Option<bool>,
    /// `["text"]` or `["text", "image"]` (Pi's default for custom models: text only).
    #[serde(default)]
    pub input: Option<Vec<String>>,
    #[serde(default, alias = "contextWindow")]
    pub context_window: Option<u64>,
    #[serde(default, alias = "maxTokens")]
    pub max_tokens: Option<u64>,
    #[serde(default)]
    pub cost: Option<ModelCost>,
    #[serde(default)]
    pub compat: Option<QuirksOverride>,
}

/// One provider entry (TOML `[providers.<id>]` or a Pi `models.json` provider).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProviderConfig {
    /// `openai-completions` or `anthropic-messages`.
    #[serde(default)]
    pub api: Option<String>,
    #[serde(default, alias = "baseUrl")]
    pub base_url: Option<String>,
    /// A Pi config value, see [`KeySource::PiValue`].
    #[serde(default, alias = "apiKey")]
    pub api_key: Option<String>,
    /// The name of an environment variable holding the key.
    #[serde(default, alias = "apiKeyEnv")]
    pub api_key_env: Option<String>,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// A quirks preset: `openai`, `ollama`, `llama.cpp`, `vllm`.
    #[serde(default)]
    pub quirks: Option<String>,
    #[serde(default)]
    pub compat: Option<QuirksOverride>,
    #[serde(default)]
    pub models: Vec<ModelConfig>,
}

impl ProviderConfig {
    /// Fill unset fields from `base` (models are appended when not already listed).
    fn merge_under(&mut self, base: &ProviderConfig) {
        macro_rules! fill {
            ($f:ident) => {
                if self.$f.is_none() {
                    self.$f = base.$f.clone();
                }
            };
        }
        fill!(api);
        fill!(base_url);
        fill!(api_key);
        fill!(api_key_env);
        fill!(quirks);
        fill!(compat);
        for (k, v) in &base.headers {
            self.headers.entry(k.clone()).or_insert_with(|| v.clone());
        }
        for m in &base.models {
            if !self.models.iter().any(|x| x.id == m.id) {
                self.models.push(m.clone());
            }
        }
    }
}

/// Overrides from the command line.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ResolveOptions {
    pub base_url: Option<String>,
    pub api_key: Option<String>,
}

/// The provider table.
///
/// ```toml
/// [providers.local]
/// api = "openai-completions"
/// base_url = "http://127.0.0.1:11434/v1"
/// quirks = "ollama"
/// [[providers.local.models]]
/// id = "qwen3:8b"
/// reasoning = true
/// context_window = 32768
/// cost = { input = 0, output = 0 }
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Config {
    #[serde(default)]
    pub providers: BTreeMap<String, ProviderConfig>,
}

#[derive(Deserialize)]
struct PiModelsJson {
    #[serde(default)]
    providers: BTreeMap<String, ProviderConfig>,
}

fn builtin(provider: &str) -> Option<ProviderConfig> {
    let (api, url, env) = match provider {
        "anthropic" => (
            "anthropic-messages",
            "https://api.anthropic.com",
            "ANTHROPIC_API_KEY",
        ),
        "openai" => (
            "openai-completions",
            "https://api.openai.com/v1",
            "OPENAI_API_KEY",
        ),
        _ => return None,
    };
    Some(ProviderConfig {
        api: Some(api.into()),
        base_url: Some(url.into()),
        api_key_env: Some(env.into()),
        ..ProviderConfig::default()
    })
}

impl Config {
    pub fn from_toml(src: &str) -> Result<Config, LlmError> {
        Ok(toml::from_str(src)?)
    }

    /// Add the custom providers of a Pi `models.json` (comments and trailing commas
    /// allowed). Entries already in `self` win field by field.
    pub fn add_pi_models_json(&mut self, src: &str) -> Result<(), LlmError> {
        let pi: PiModelsJson = serde_json::from_str(&strip_jsonc(src))?;
        for (id, p) in pi.providers {
            match self.providers.get_mut(&id) {
                Some(existing) => existing.merge_under(&p),
                None => {
                    self.providers.insert(id, p);
                }
            }
        }
        Ok(())
    }

    fn provider(&self, name: &str) -> Option<ProviderConfig> {
        match (self.providers.get(name), builtin(name)) {
            (Some(p), Some(b)) => {
                let mut p = p.clone();
                p.merge_under(&b);
                Some(p)
            }
            (Some(p), None) => Some(p.clone()),
            (None, b) => b,
        }
    }

    /// Where the key for `provider` comes from (`None`: no key configured).
    pub fn key_source(&self, provider: &str) -> Option<KeySource> {
        let p = self.provider(provider)?;
        if let Some(v) = p.api_key {
            return Some(KeySource::PiValue(v));
        }
        p.api_key_env.map(KeySource::Env)
    }

    /// `provider/model` pairs listed in the configuration.
    pub fn models(&self) -> Vec<ModelRef> {
        self.providers
            .iter()
            .flat_map(|(p, c)| {
                c.models.iter().map(move |m| ModelRef {
                    provider: p.clone(),
                    model: m.id.clone(),
                })
            })
            .collect()
    }

    /// Build the [`ModelSpec`] for `r`. Unknown models of a known provider get Pi's
    /// defaults; an unknown provider works only with a `base_url` override (then as
    /// an OpenAI-compatible server).
    pub fn resolve(&self, r: &ModelRef, opts: &ResolveOptions) -> Result<ModelSpec, LlmError> {
        let p = match self.provider(&r.provider) {
            Some(p) => p,
            None if opts.base_url.is_some() => ProviderConfig {
                api: Some("openai-completions".into()),
                ..ProviderConfig::default()
            },
            None => {
                return Err(LlmError::UnknownProvider {
                    provider: r.provider.clone(),
                });
            }
        };
        let m = p.models.iter().find(|m| m.id == r.model);
        let api_name = m
            .and_then(|m| m.api.clone())
            .or_else(|| p.api.clone())
            .unwrap_or_else(|| "openai-completions".into());
        let api = Api::parse(&api_name)?;
        let mut spec = ModelSpec::new(r.provider.clone(), r.model.clone(), api);
        if let Some(u) = opts.base_url.clone().or_else(|| p.base_url.clone()) {
            spec.base_url = u;
        }
        spec.api_key = opts.api_key.clone();
        spec.headers = p.headers.clone();
        if let Some(m) = m {
            spec.reasoning = m.reasoning.unwrap_or(false);
            spec.input_images = m
                .input
                .as_ref()
                .is_some_and(|i| i.iter().any(|x| x == "image"));
            spec.context_window = m.context_window.unwrap_or(128_000);
            spec.max_tokens = m.max_tokens.unwrap_or(16_384);
            spec.cost = m.cost.unwrap_or_default();
        }
        let mut quirks = match p.quirks.as_deref() {
            Some(name) => Quirks::preset(name)
                .ok_or_else(|| LlmError::Config(format!("unknown quirks preset {name:?}")))?,
            None => Quirks::detect(&r.provider, &spec.base_url),
        };
        if let Some(c) = &p.compat {
            quirks.apply(c);
        }
        if let Some(c) = m.and_then(|m| m.compat.as_ref()) {
            quirks.apply(c);
        }
        spec.quirks = quirks;
        Ok(spec)
    }
}
