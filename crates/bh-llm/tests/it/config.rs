use bh_llm::{Api, Config, KeySource, MaxTokensField, ModelRef, Quirks, ResolveOptions};
use pretty_assertions::assert_eq;

#[test]
fn model_ref_parsing() {
    let r: ModelRef = "anthropic/claude-sonnet-4-5".parse().unwrap();
    assert_eq!(
        (r.provider.as_str(), r.model.as_str()),
        ("anthropic", "claude-sonnet-4-5")
    );
    let r: ModelRef = "openrouter/anthropic/claude".parse().unwrap();
    assert_eq!(r.model, "anthropic/claude");
    assert_eq!(r.to_string(), "openrouter/anthropic/claude");
    assert!("nomodel".parse::<ModelRef>().is_err());
    assert!("/x".parse::<ModelRef>().is_err());
    assert!("x/".parse::<ModelRef>().is_err());
}

#[test]
fn builtins_and_overrides() {
    let c = Config::default();
    let m = c
        .resolve(
            &"anthropic/claude-x".parse().unwrap(),
            &ResolveOptions::default(),
        )
        .unwrap();
    assert_eq!(m.api, Api::AnthropicMessages);
    assert_eq!(m.base_url, "https://api.anthropic.com");
    assert_eq!(
        c.key_source("anthropic"),
        Some(KeySource::Env("ANTHROPIC_API_KEY".into()))
    );
    assert_eq!(
        c.key_source("openai"),
        Some(KeySource::Env("OPENAI_API_KEY".into()))
    );
    let m = c
        .resolve(
            &"openai/gpt-x".parse().unwrap(),
            &ResolveOptions {
                base_url: Some("http://127.0.0.1:11434/v1".into()),
                api_key: Some("k".into()),
            },
        )
        .unwrap();
    assert_eq!(m.api, Api::OpenAiCompletions);
    assert_eq!(m.api_key.as_deref(), Some("k"));
    assert_eq!(m.quirks, Quirks::openai(), "provider name wins over URL");
    assert!(
        c.resolve(&"nope/x".parse().unwrap(), &ResolveOptions::default())
            .is_err()
    );
}

#[test]
fn toml_config() {
    let c = Config::from_toml(
        r#"
[providers.local]
api = "openai-completions"
base_url = "http://127.0.0.1:11434/v1"
quirks = "ollama"
api_key_env = "LOCAL_KEY"
[providers.local.compat]
supports_usage_in_streaming = false
[[providers.local.models]]
id = "qwen3:8b"
reasoning = true
input = ["text"]
context_window = 32768
max_tokens = 8192
cost = { input = 1, output = 2 }
"#,
    )
    .unwrap();
    let m = c
        .resolve(
            &"local/qwen3:8b".parse().unwrap(),
            &ResolveOptions::default(),
        )
        .unwrap();
    assert!(m.reasoning);
    assert!(!m.input_images);
    assert_eq!(m.context_window, 32768);
    assert_eq!(m.max_tokens, 8192);
    assert_eq!(m.cost.output, 2.0);
    assert_eq!(m.quirks.max_tokens_field, MaxTokensField::MaxTokens);
    assert!(!m.quirks.supports_usage_in_streaming);
    assert_eq!(
        c.key_source("local"),
        Some(KeySource::Env("LOCAL_KEY".into()))
    );
    assert_eq!(c.models().len(), 1);
    assert!(
        Config::from_toml("[providers.x]\nquirks = \"nope\"")
            .unwrap()
            .resolve(&"x/y".parse().unwrap(), &ResolveOptions::default())
            .is_err()
    );
}

#[test]
fn pi_models_json() {
    // The corpus configuration (pi-sessions.md §7), with a comment and trailing comma.
    let src = r#"{
      // Pi 0.73.1 accepts comments
      "providers": {"fake": {"baseUrl": "http://127.0.0.1:18081/v1", "api": "openai-completions", "apiKey": "fake-key",
        "compat": {"supportsDeveloperRole": false, "supportsReasoningEffort": false},
        "models": [{"id": "fake-model", "reasoning": true, "input": ["text", "image"], "contextWindow": 128000, "maxTokens": 4096,
                    "cost": {"input": 3, "output": 15, "cacheRead": 0.3, "cacheWrite": 3.75}},]}}
    }"#;
    let mut c = Config::default();
    c.add_pi_models_json(src).unwrap();
    let m = c
        .resolve(
            &"fake/fake-model".parse().unwrap(),
            &ResolveOptions::default(),
        )
        .unwrap();
    assert_eq!(m.base_url, "http://127.0.0.1:18081/v1");
    assert!(m.reasoning && m.input_images);
    assert_eq!(m.max_tokens, 4096);
    assert_eq!(m.cost.cache_write, 3.75);
    assert!(!m.quirks.supports_developer_role);
    assert!(!m.quirks.supports_reasoning_effort);
    assert!(m.quirks.supports_store);
    let ks = c.key_source("fake").unwrap();
    assert_eq!(ks, KeySource::PiValue("fake-key".into()));
    let no_env = |_: &str| None;
    let no_cmd = |_: &str| None;
    assert_eq!(ks.resolve(&no_env, &no_cmd).as_deref(), Some("fake-key"));
    let env = |n: &str| (n == "fake-key").then(|| "from-env".to_owned());
    assert_eq!(ks.resolve(&env, &no_cmd).as_deref(), Some("from-env"));
    let cmd = |c: &str| (c == "pass show k").then(|| "secret\n".to_owned());
    assert_eq!(
        KeySource::PiValue("!pass show k".into())
            .resolve(&no_env, &cmd)
            .as_deref(),
        Some("secret")
    );
}
