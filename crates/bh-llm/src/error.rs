//! Errors of the library. Provider failures during a call are *not* errors: they end
//! the stream with an assistant message whose `stopReason` is `"error"`.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum LlmError {
    /// Invalid configuration (provider table, models.json, `provider/model`).
    #[error("configuration: {0}")]
    Config(String),
    /// A `provider/model` whose provider no configuration names.
    #[error(
        "unknown provider {provider:?}: configure it (a [providers.{provider}] table of bh's config.toml, or a provider in Pi's models.json), or pass a base URL"
    )]
    UnknownProvider { provider: String },
    /// A Pi message that could not be read.
    #[error("message: {0}")]
    Message(String),
    /// The scripted provider's file is invalid.
    #[error("script: {0}")]
    Script(String),
    #[error("TOML: {0}")]
    Toml(#[from] toml::de::Error),
    #[error("JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("HTTP client: {0}")]
    Http(#[from] reqwest::Error),
}
