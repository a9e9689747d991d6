//! The model provider: the config file's `[model]` with the model flags
//! laid over it.

use toolhost_agent::provider::select::ProviderConfig;

use super::ConfigFile;
use crate::shared_flags::Global;

/// The provider configuration from the config file's `[model]` and the flags
/// (flags win); `None` when neither says anything (auto-detect).
pub fn provider_config(
    global: &Global,
    file: &ConfigFile,
) -> anyhow::Result<Option<ProviderConfig>> {
    let from_str = |what: &str, v: &str| -> anyhow::Result<serde_json::Value> {
        let _ = what;
        Ok(serde_json::Value::String(v.to_owned()))
    };
    let mut config = file.model.clone();
    if let Some(kind) = &global.provider {
        let kind = serde_json::from_value(from_str("provider", kind)?).map_err(|_| {
            anyhow::anyhow!("--provider must be openai, anthropic or ollama, got `{kind}`")
        })?;
        config = Some(match config {
            Some(mut c) => {
                c.kind = kind;
                c
            }
            None => ProviderConfig::new(kind),
        });
    }
    let any_flag = global.model.is_some()
        || global.base_url.is_some()
        || global.api_key_env.is_some()
        || global.protocol.is_some();
    if config.is_none() && any_flag {
        anyhow::bail!(
            "--model, --base-url, --api-key-env and --protocol need --provider (or [model] in the config file)"
        );
    }
    if let Some(c) = config.as_mut() {
        if let Some(m) = &global.model {
            c.model = Some(m.clone());
        }
        if let Some(u) = &global.base_url {
            c.base_url = Some(u.clone());
        }
        if let Some(k) = &global.api_key_env {
            c.api_key_env = Some(k.clone());
        }
        if let Some(p) = &global.protocol {
            c.protocol = serde_json::from_value(from_str("protocol", p)?).map_err(|_| {
                anyhow::anyhow!("--protocol must be native, json or xml, got `{p}`")
            })?;
        }
    }
    Ok(config)
}
