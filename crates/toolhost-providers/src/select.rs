//! Choosing a provider: from an explicit [`ProviderConfig`] (config file or
//! flags), else from the environment, else a local Ollama server.
//!
//! ```
//! use toolhost_providers::select::{ProviderConfig, ProviderKind, ToolProtocol};
//!
//! // As the CLI reads it from a TOML/JSON config file (kebab-case keys):
//! let cfg: ProviderConfig = serde_json::from_str(
//!     r#"{"kind": "ollama", "model": "gemma3:4b", "protocol": "xml",
//!         "timeouts": {"idle-secs": 120}}"#,
//! ).unwrap();
//! assert_eq!(cfg.kind, ProviderKind::Ollama);
//! assert_eq!(cfg.protocol, ToolProtocol::Xml);
//! let selected = cfg.build().unwrap();
//! assert_eq!(selected.model, "gemma3:4b");
//! assert_eq!(selected.provider.name(), "ollama+xml");
//! ```

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::Provider;
use super::anthropic::Anthropic;
use super::openai::{MaxTokensField, OpenAiCompatible};
use super::options::ModelOptions;
use super::prompt::{Constrain, PromptProfile, PromptTools};
use super::transport::RetryPolicy;

/// The default OpenAI base URL.
pub const OPENAI_BASE_URL: &str = "https://api.openai.com/v1";
/// The model used with `OPENAI_API_KEY` when none is configured.
pub const OPENAI_DEFAULT_MODEL: &str = "gpt-4o-mini";
/// The model used with `ANTHROPIC_API_KEY` when none is configured.
pub const ANTHROPIC_DEFAULT_MODEL: &str = "claude-sonnet-4-5";
/// Where a local Ollama server listens.
pub const OLLAMA_BASE_URL: &str = "http://localhost:11434";
/// How long the Ollama probe waits.
pub const OLLAMA_PROBE_TIMEOUT: Duration = Duration::from_millis(300);

/// The words that say how to configure a model ([`MODEL_SETUP_HELP`]).
macro_rules! model_setup_help {
    () => {
        "To use a model, set OPENAI_API_KEY (and optionally OPENAI_MODEL, OPENAI_BASE_URL for a \
         compatible server), or ANTHROPIC_API_KEY (and optionally ANTHROPIC_MODEL), or start \
         Ollama on localhost:11434 with a model pulled (`ollama pull qwen3:8b`; OLLAMA_MODEL \
         picks one), or configure the provider explicitly (kind = \"openai\" | \"anthropic\" | \
         \"ollama\", model, base-url, api-key-env, protocol = \"native\" | \"json\" | \"xml\")."
    };
}

/// How to configure a model, for a host that needs one and has none.
pub const MODEL_SETUP_HELP: &str = model_setup_help!();

/// What to tell the user when no model could be found (an interactive
/// host goes on without one).
pub const NO_PROVIDER_HELP: &str = concat!(
    "No language model is configured: running in tools-only mode. ",
    model_setup_help!()
);

/// Which wire format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ProviderKind {
    /// OpenAI Chat Completions (or any compatible server, with `base-url`).
    Openai,
    /// Anthropic Messages.
    Anthropic,
    /// Ollama, through its OpenAI-compatible `/v1` API.
    Ollama,
}

impl fmt::Display for ProviderKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ProviderKind::Openai => "openai",
            ProviderKind::Anthropic => "anthropic",
            ProviderKind::Ollama => "ollama",
        })
    }
}

/// How tools reach the model.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ToolProtocol {
    /// The API's own tool calling.
    #[default]
    Native,
    /// Described in the prompt; calls as a JSON object ([`PromptProfile::Json`]).
    Json,
    /// Described in the prompt; calls in `<tool_code>` tags ([`PromptProfile::Xml`]).
    Xml,
}

impl fmt::Display for ToolProtocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ToolProtocol::Native => "native",
            ToolProtocol::Json => "json",
            ToolProtocol::Xml => "xml",
        })
    }
}

/// Timeouts in seconds; unset ones keep [`RetryPolicy`]'s defaults.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", default, deny_unknown_fields)]
pub struct TimeoutsConfig {
    /// Connecting to the server.
    pub connect_secs: Option<f64>,
    /// Until the response starts (the whole response when not streaming).
    pub request_secs: Option<f64>,
    /// The longest silence while streaming.
    pub idle_secs: Option<f64>,
}

/// An explicit provider choice, as read from a config file or flags.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct ProviderConfig {
    /// The wire format.
    pub kind: ProviderKind,
    /// The model (default: per kind, see [`select_from_env`]).
    #[serde(default)]
    pub model: Option<String>,
    /// The server (default: the kind's public API, or `OPENAI_BASE_URL` /
    /// `ANTHROPIC_BASE_URL` / `OLLAMA_HOST`).
    #[serde(default)]
    pub base_url: Option<String>,
    /// The environment variable holding the API key (default
    /// `OPENAI_API_KEY` / `ANTHROPIC_API_KEY`; Ollama needs none).
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// How tools reach the model.
    #[serde(default)]
    pub protocol: ToolProtocol,
    /// Timeouts.
    #[serde(default)]
    pub timeouts: TimeoutsConfig,
    /// Attempts per request, the first included (default 4).
    #[serde(default)]
    pub max_attempts: Option<u32>,
    /// Output token limit when the request sets none (Anthropic needs one; default 4096).
    #[serde(default)]
    pub max_tokens: Option<u32>,
    /// Stream responses (default true).
    #[serde(default)]
    pub stream: Option<bool>,
    /// Constrained decoding: `auto` (the default: asked for in the `json`
    /// and `xml` protocols, dropped for good if the server refuses it), `on`
    /// (also native calls, through strict tool schemas on the OpenAI wire
    /// format; a refusal is an error) or `off`.
    #[serde(default)]
    pub constrain: Constrain,
    /// The base layer of model options (`[model.options]`): temperature,
    /// top-p, max-tokens, stop, reasoning-effort, extra. Agent profiles,
    /// variants and flags are laid on top (see [`ModelOptions::merge`]).
    #[serde(default, skip_serializing_if = "ModelOptions::is_empty")]
    pub options: ModelOptions,
    /// The model's context window in tokens, for keeping long
    /// conversations inside it (the agent's `context` module); unset: known
    /// for common models, else learned from the server's refusals.
    #[serde(default)]
    pub context_window: Option<u32>,
    /// Whether the model reads images: the images tool results return go
    /// to it as images, else as a line of text each. Unset: yes for
    /// Anthropic and for OpenAI's own vision models ([`reads_images`]), no
    /// for other servers (a local model without vision would refuse them).
    #[serde(default)]
    pub images: Option<bool>,
}

/// Whether a model of `kind` reads images when the configuration does not
/// say: every Claude model since Claude 3; OpenAI's vision models on
/// OpenAI's own API (the GPT-4o, GPT-4.1 and GPT-5 families, o1, o3, o4-mini);
/// nothing else (a compatible or Ollama server may serve any model).
///
/// ```
/// use toolhost_providers::select::{ProviderKind, reads_images};
/// assert!(reads_images(ProviderKind::Anthropic, "claude-sonnet-4-5", true));
/// assert!(reads_images(ProviderKind::Openai, "gpt-4o-mini", true));
/// assert!(!reads_images(ProviderKind::Openai, "o3-mini", true));
/// assert!(!reads_images(ProviderKind::Openai, "gpt-4o-mini", false), "not OpenAI's API");
/// assert!(!reads_images(ProviderKind::Ollama, "llava", false));
/// ```
pub fn reads_images(kind: ProviderKind, model: &str, official: bool) -> bool {
    match kind {
        ProviderKind::Anthropic => true,
        ProviderKind::Openai if official => {
            let families = [
                "gpt-4o",
                "chatgpt-4o",
                "gpt-4.1",
                "gpt-4-turbo",
                "gpt-5",
                "o1",
                "o3",
                "o4-mini",
            ];
            let without = [
                "o1-mini",
                "o3-mini",
                "gpt-4o-audio",
                "gpt-4o-mini-audio",
                "gpt-4o-realtime",
                "gpt-4o-mini-realtime",
            ];
            families.iter().any(|f| model.starts_with(f))
                && !without.iter().any(|w| model.starts_with(w))
        }
        ProviderKind::Openai | ProviderKind::Ollama => false,
    }
}

/// A ready provider and what it is.
pub struct SelectedProvider {
    /// The provider (already wrapped in [`PromptTools`] for `json`/`xml`).
    pub provider: Box<dyn Provider>,
    /// Its kind.
    pub kind: ProviderKind,
    /// The model to put in [`super::CompletionRequest::model`] (the provider
    /// also uses it when the request leaves `model` empty).
    pub model: String,
    /// The server.
    pub base_url: String,
    /// How tools reach the model.
    pub protocol: ToolProtocol,
}

impl fmt::Debug for SelectedProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SelectedProvider")
            .field("provider", &self.provider.name())
            .field("kind", &self.kind)
            .field("model", &self.model)
            .field("base_url", &self.base_url)
            .field("protocol", &self.protocol)
            .finish()
    }
}

impl fmt::Display for SelectedProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} model {} at {}", self.kind, self.model, self.base_url)?;
        if self.protocol != ToolProtocol::Native {
            write!(f, " (prompt-based tools: {})", self.protocol)?;
        }
        Ok(())
    }
}

/// Why a configured provider cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectError {
    /// The API key variable is not set.
    #[error("{kind}: the API key variable {env} is not set")]
    MissingApiKey {
        /// The provider kind.
        kind: ProviderKind,
        /// The variable.
        env: String,
    },
    /// No model was configured and none could be found.
    #[error("{kind}: no model configured{hint}")]
    MissingModel {
        /// The provider kind.
        kind: ProviderKind,
        /// What to do.
        hint: String,
    },
    /// A setting is out of range.
    #[error("invalid provider setting: {0}")]
    Invalid(String),
}

/// Looks up an environment variable (a seam for tests).
pub type EnvLookup<'a> = &'a (dyn Fn(&str) -> Option<String> + Sync);

fn std_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

fn non_empty(v: Option<String>) -> Option<String> {
    v.map(|s| s.trim().to_owned()).filter(|s| !s.is_empty())
}

impl ProviderConfig {
    /// A config of `kind` with everything else default.
    pub fn new(kind: ProviderKind) -> Self {
        ProviderConfig {
            kind,
            model: None,
            base_url: None,
            api_key_env: None,
            protocol: ToolProtocol::Native,
            timeouts: TimeoutsConfig::default(),
            max_attempts: None,
            max_tokens: None,
            stream: None,
            constrain: Constrain::Auto,
            options: ModelOptions::default(),
            context_window: None,
            images: None,
        }
    }

    /// The retry policy these settings give.
    pub fn retry_policy(&self) -> Result<RetryPolicy, SelectError> {
        let mut p = RetryPolicy::default();
        let secs = |name: &str, v: Option<f64>, into: &mut Duration| match v {
            None => Ok(()),
            Some(s) if s.is_finite() && s > 0.0 && s < 1e9 => {
                *into = Duration::from_secs_f64(s);
                Ok(())
            }
            Some(s) => Err(SelectError::Invalid(format!(
                "timeouts.{name} must be a positive number of seconds, not {s}"
            ))),
        };
        secs(
            "connect-secs",
            self.timeouts.connect_secs,
            &mut p.connect_timeout,
        )?;
        secs(
            "request-secs",
            self.timeouts.request_secs,
            &mut p.request_timeout,
        )?;
        secs("idle-secs", self.timeouts.idle_secs, &mut p.idle_timeout)?;
        if let Some(n) = self.max_attempts {
            if n == 0 {
                return Err(SelectError::Invalid(
                    "max-attempts must be at least 1".into(),
                ));
            }
            p.max_attempts = n;
        }
        Ok(p)
    }

    /// Builds the provider, reading the API key and defaults from the process
    /// environment. An Ollama config without a model fails here; use
    /// [`select_from_env`] to pick the server's first model.
    pub fn build(&self) -> Result<SelectedProvider, SelectError> {
        self.build_with(&std_env)
    }

    /// Whether native tool calls are sent with strict schemas
    /// ([`crate::strict`]): `constrain = on` with the native protocol. Not
    /// `auto`: strict mode rewrites every tool's schema, and llama.cpp holds
    /// native calls to each tool's schema with a grammar of its own.
    fn strict_native(&self) -> bool {
        self.protocol == ToolProtocol::Native && self.constrain == Constrain::On
    }

    /// [`ProviderConfig::build`] with another environment.
    pub fn build_with(&self, env: EnvLookup<'_>) -> Result<SelectedProvider, SelectError> {
        let policy = self.retry_policy()?;
        self.options
            .validate()
            .map_err(|e| SelectError::Invalid(format!("options.{e}")))?;
        let stream = self.stream.unwrap_or(true);
        let (provider, model, base_url): (Box<dyn Provider>, String, String) = match self.kind {
            ProviderKind::Openai => {
                let base_url = non_empty(self.base_url.clone())
                    .or_else(|| non_empty(env("OPENAI_BASE_URL")))
                    .unwrap_or_else(|| OPENAI_BASE_URL.to_owned());
                let official = base_url.contains("api.openai.com");
                let key_env = self.api_key_env.as_deref().unwrap_or("OPENAI_API_KEY");
                let key = non_empty(env(key_env));
                // A compatible server of one's own may need no key.
                if key.is_none() && (official || self.api_key_env.is_some()) {
                    return Err(SelectError::MissingApiKey {
                        kind: self.kind,
                        env: key_env.to_owned(),
                    });
                }
                let model = non_empty(self.model.clone())
                    .or_else(|| non_empty(env("OPENAI_MODEL")))
                    .unwrap_or_else(|| OPENAI_DEFAULT_MODEL.to_owned());
                let p = OpenAiCompatible::new(&base_url, &model)
                    .with_api_key(key)
                    .with_streaming(stream)
                    .with_max_tokens_field(if official {
                        MaxTokensField::MaxCompletionTokens
                    } else {
                        MaxTokensField::MaxTokens
                    })
                    .with_retry(policy)
                    .with_strict_tools(self.strict_native())
                    .with_images(
                        self.images
                            .unwrap_or_else(|| reads_images(self.kind, &model, official)),
                    );
                (Box::new(p), model, base_url)
            }
            ProviderKind::Anthropic => {
                let key_env = self.api_key_env.as_deref().unwrap_or("ANTHROPIC_API_KEY");
                let key = non_empty(env(key_env)).ok_or_else(|| SelectError::MissingApiKey {
                    kind: self.kind,
                    env: key_env.to_owned(),
                })?;
                let model = non_empty(self.model.clone())
                    .or_else(|| non_empty(env("ANTHROPIC_MODEL")))
                    .unwrap_or_else(|| ANTHROPIC_DEFAULT_MODEL.to_owned());
                let base_url = non_empty(self.base_url.clone())
                    .or_else(|| non_empty(env("ANTHROPIC_BASE_URL")))
                    .unwrap_or_else(|| super::anthropic::DEFAULT_BASE_URL.to_owned());
                let mut p = Anthropic::new(key, &model)
                    .with_base_url(&base_url)
                    .with_streaming(stream)
                    .with_retry(policy)
                    .with_images(self.images.unwrap_or(true));
                if let Some(m) = self.max_tokens {
                    p = p.with_max_tokens(m);
                }
                (Box::new(p), model, base_url)
            }
            ProviderKind::Ollama => {
                let root = ollama_root(self.base_url.clone(), env);
                let model = non_empty(self.model.clone())
                    .or_else(|| non_empty(env("OLLAMA_MODEL")))
                    .ok_or_else(|| SelectError::MissingModel {
                        kind: self.kind,
                        hint: " (set model, or OLLAMA_MODEL)".to_owned(),
                    })?;
                let key = self.api_key_env.as_deref().and_then(|e| non_empty(env(e)));
                let base_url = format!("{root}/v1");
                let p = OpenAiCompatible::new(&base_url, &model)
                    .with_name("ollama")
                    .with_api_key(key)
                    .with_streaming(stream)
                    .with_retry(policy)
                    .with_strict_tools(self.strict_native())
                    .with_images(self.images.unwrap_or(false));
                (Box::new(p), model, base_url)
            }
        };
        let provider = match self.protocol {
            ToolProtocol::Native => provider,
            ToolProtocol::Json => Box::new(
                PromptTools::from_boxed(provider, PromptProfile::Json)
                    .with_constrain(self.constrain),
            ),
            ToolProtocol::Xml => Box::new(
                PromptTools::from_boxed(provider, PromptProfile::Xml)
                    .with_constrain(self.constrain),
            ),
        };
        Ok(SelectedProvider {
            provider,
            kind: self.kind,
            model,
            base_url,
            protocol: self.protocol,
        })
    }
}

/// The Ollama server root (no `/v1`), from the config, `OLLAMA_HOST` or the default.
fn ollama_root(configured: Option<String>, env: EnvLookup<'_>) -> String {
    let raw = non_empty(configured)
        .or_else(|| non_empty(env("OLLAMA_HOST")))
        .unwrap_or_else(|| OLLAMA_BASE_URL.to_owned());
    let mut url = raw.trim_end_matches('/').to_owned();
    if !url.contains("://") {
        url = format!("http://{url}");
    }
    let url = url.strip_suffix("/v1").unwrap_or(&url).to_owned();
    // `OLLAMA_HOST=0.0.0.0` is a server bind address; talk to localhost.
    url.replace("://0.0.0.0", "://localhost")
}

/// Asks the Ollama server at `root` for its models (`GET /api/tags`);
/// `None` when it does not answer within `timeout`.
pub async fn probe_ollama(root: &str, timeout: Duration) -> Option<Vec<String>> {
    #[derive(Deserialize)]
    struct Tags {
        #[serde(default)]
        models: Vec<Model>,
    }
    #[derive(Deserialize)]
    struct Model {
        #[serde(default)]
        name: String,
    }
    let client = reqwest::Client::builder().timeout(timeout).build().ok()?;
    let url = format!("{}/api/tags", root.trim_end_matches('/'));
    let resp = match client.get(&url).send().await {
        Ok(r) if r.status().is_success() => r,
        Ok(r) => {
            tracing::debug!(%url, status = %r.status(), "not an Ollama server");
            return None;
        }
        Err(e) => {
            tracing::debug!(%url, error = %e, "no Ollama server");
            return None;
        }
    };
    let bytes = resp.bytes().await.ok()?;
    let tags: Tags = serde_json::from_slice(&bytes).ok()?;
    Some(
        tags.models
            .into_iter()
            .map(|m| m.name)
            .filter(|n| !n.is_empty())
            .collect(),
    )
}

/// Picks a provider: `explicit` first; otherwise `OPENAI_API_KEY` → OpenAI,
/// `ANTHROPIC_API_KEY` → Anthropic, otherwise a local Ollama server that
/// answers `GET /api/tags` within 300 ms (its first model, or `OLLAMA_MODEL`).
/// `Ok(None)` means tools-only mode; [`NO_PROVIDER_HELP`] (also logged) tells
/// the user how to configure a model.
pub async fn select_from_env(
    explicit: Option<&ProviderConfig>,
) -> Result<Option<SelectedProvider>, SelectError> {
    select_with(explicit, &std_env, None).await
}

/// [`select_from_env`] with another environment and, optionally, another
/// Ollama root URL to probe (for tests).
pub async fn select_with(
    explicit: Option<&ProviderConfig>,
    env: EnvLookup<'_>,
    ollama_root_override: Option<&str>,
) -> Result<Option<SelectedProvider>, SelectError> {
    if let Some(cfg) = explicit {
        if cfg.kind == ProviderKind::Ollama
            && non_empty(cfg.model.clone()).is_none()
            && non_empty(env("OLLAMA_MODEL")).is_none()
        {
            let root = ollama_override_or(cfg.base_url.clone(), env, ollama_root_override);
            let models = probe_ollama(&root, Duration::from_secs(5)).await;
            let Some(first) = models.as_ref().and_then(|m| m.first()) else {
                return Err(SelectError::MissingModel {
                    kind: ProviderKind::Ollama,
                    hint: match models {
                        None => format!(" and no Ollama server answers at {root}"),
                        Some(_) => " and the Ollama server has no model (`ollama pull …`)".into(),
                    },
                });
            };
            let cfg = ProviderConfig {
                model: Some(first.clone()),
                base_url: Some(root),
                ..cfg.clone()
            };
            return cfg.build_with(env).map(Some);
        }
        return cfg.build_with(env).map(Some);
    }
    if non_empty(env("OPENAI_API_KEY")).is_some() {
        return ProviderConfig::new(ProviderKind::Openai)
            .build_with(env)
            .map(Some);
    }
    if non_empty(env("ANTHROPIC_API_KEY")).is_some() {
        return ProviderConfig::new(ProviderKind::Anthropic)
            .build_with(env)
            .map(Some);
    }
    let root = ollama_override_or(None, env, ollama_root_override);
    match probe_ollama(&root, OLLAMA_PROBE_TIMEOUT).await {
        Some(models) => {
            let model = non_empty(env("OLLAMA_MODEL")).or_else(|| models.first().cloned());
            match model {
                Some(model) => {
                    let cfg = ProviderConfig {
                        model: Some(model),
                        base_url: Some(root),
                        ..ProviderConfig::new(ProviderKind::Ollama)
                    };
                    cfg.build_with(env).map(Some)
                }
                None => {
                    tracing::info!(
                        "an Ollama server answers at {root} but has no model (`ollama pull qwen3:8b`). {NO_PROVIDER_HELP}"
                    );
                    Ok(None)
                }
            }
        }
        None => {
            tracing::info!("{NO_PROVIDER_HELP}");
            Ok(None)
        }
    }
}

fn ollama_override_or(
    configured: Option<String>,
    env: EnvLookup<'_>,
    over: Option<&str>,
) -> String {
    match (non_empty(configured), over) {
        (Some(c), _) => ollama_root(Some(c), env),
        (None, Some(o)) => ollama_root(Some(o.to_owned()), env),
        (None, None) => ollama_root(None, env),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(
        vars: &'static [(&'static str, &'static str)],
    ) -> impl Fn(&str) -> Option<String> + Sync {
        move |k| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn config_parses_kebab_case_and_rejects_typos() {
        let cfg: ProviderConfig = serde_json::from_str(
            r#"{"kind":"openai","model":"m","base-url":"http://x/v1","api-key-env":"K",
                "protocol":"json","timeouts":{"connect-secs":1,"request-secs":2.5,"idle-secs":3},
                "max-attempts":2,"max-tokens":10,"stream":false}"#,
        )
        .unwrap();
        assert_eq!(cfg.protocol, ToolProtocol::Json);
        let p = cfg.retry_policy().unwrap();
        assert_eq!(p.request_timeout, Duration::from_millis(2500));
        assert_eq!(p.max_attempts, 2);
        assert!(
            serde_json::from_str::<ProviderConfig>(r#"{"kind":"openai","modle":"m"}"#).is_err()
        );
        assert!(serde_json::from_str::<ProviderConfig>(r#"{"kind":"gemini"}"#).is_err());
    }

    #[test]
    fn model_options_parse_and_bad_ones_stop_the_build() {
        let cfg: ProviderConfig = serde_json::from_str(
            r#"{"kind":"openai","base-url":"http://127.0.0.1:1/v1",
                "options":{"temperature":0.3,"top-p":0.9,"stop":["END"],"extra":{"seed":1}}}"#,
        )
        .unwrap();
        assert_eq!(cfg.options.top_p, Some(0.9));
        let none = env_of(&[]);
        assert!(cfg.build_with(&none).is_ok());
        assert!(
            serde_json::from_str::<ProviderConfig>(r#"{"kind":"openai","options":{"topp":1}}"#)
                .is_err()
        );
        let mut bad = cfg.clone();
        bad.options
            .extra
            .insert("messages".into(), serde_json::json!([]));
        let e = bad.build_with(&none).unwrap_err();
        assert!(e.to_string().contains("extra.messages"), "{e}");
    }

    #[test]
    fn builds_from_env() {
        let env = env_of(&[("OPENAI_API_KEY", "sk"), ("OPENAI_BASE_URL", "http://h/v1")]);
        let s = ProviderConfig::new(ProviderKind::Openai)
            .build_with(&env)
            .unwrap();
        assert_eq!(s.model, OPENAI_DEFAULT_MODEL);
        assert_eq!(s.base_url, "http://h/v1");
        assert_eq!(s.provider.name(), "openai");

        let none = env_of(&[]);
        let e = ProviderConfig::new(ProviderKind::Anthropic)
            .build_with(&none)
            .unwrap_err();
        assert!(matches!(e, SelectError::MissingApiKey { .. }));
        let e = ProviderConfig::new(ProviderKind::Openai)
            .build_with(&none)
            .unwrap_err();
        assert!(e.to_string().contains("OPENAI_API_KEY"));
        // A compatible server of one's own needs no key.
        let local = ProviderConfig {
            base_url: Some("http://127.0.0.1:8000/v1".into()),
            ..ProviderConfig::new(ProviderKind::Openai)
        };
        assert!(local.build_with(&none).is_ok());
    }

    #[test]
    fn ollama_roots() {
        let none = env_of(&[]);
        assert_eq!(ollama_root(None, &none), "http://localhost:11434");
        assert_eq!(
            ollama_root(Some("http://h:1/v1/".into()), &none),
            "http://h:1"
        );
        let env = env_of(&[("OLLAMA_HOST", "0.0.0.0:11434")]);
        assert_eq!(ollama_root(None, &env), "http://localhost:11434");
    }
}
