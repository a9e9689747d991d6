//! Model options in layers, the system prompt and request hooks, from the
//! config file and the flags, onto the agent's options.
//!
//! Layers, later ones winning field by field (`extra` key by key):
//! `[model.options]` → `[agents.NAME.options]` (`--agent NAME`) →
//! `[variants.NAME]` (`--variant NAME`) → `--temperature`, `--top-p`,
//! `--max-tokens`. Each layer is checked on its own, so an error names it.

use std::io::Read;
use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, bail};
use toolhost_agent::AgentOptions;
use toolhost_agent::provider::options::ModelOptions;

use crate::settings::ConfigFile;
use crate::shared_flags::Global;

/// Largest system prompt file: 1 MiB.
const MAX_SYSTEM_PROMPT_BYTES: usize = 1024 * 1024;

/// The merged model options for these flags and this file.
pub fn merged(global: &Global, file: &ConfigFile) -> anyhow::Result<ModelOptions> {
    let mut layers: Vec<(String, ModelOptions)> = Vec::new();
    if let Some(model) = &file.model {
        layers.push(("[model.options]".into(), model.options.clone()));
    }
    if let Some(name) = &global.agent
        && let Some(profile) = file.agents.get(name)
    {
        layers.push((format!("[agents.{name}.options]"), profile.options.clone()));
    }
    if let Some(name) = &global.variant {
        let Some(variant) = file.variants.get(name) else {
            let known: Vec<&str> = file.variants.keys().map(String::as_str).collect();
            bail!(
                "--variant {name}: the config file has no [variants.{name}] (known: {})",
                if known.is_empty() {
                    "none".to_owned()
                } else {
                    known.join(", ")
                }
            );
        };
        layers.push((format!("[variants.{name}]"), variant.clone()));
    }
    layers.push((
        "the flags".into(),
        ModelOptions {
            temperature: global.temperature,
            top_p: global.top_p,
            max_tokens: global.max_tokens,
            ..ModelOptions::default()
        },
    ));
    let mut merged = ModelOptions::default();
    for (name, layer) in &layers {
        layer.validate().with_context(|| name.clone())?;
        merged = merged.merge(layer);
    }
    Ok(merged)
}

/// The base prompt that replaces the default: `--system-prompt FILE`, else
/// the config's `system-prompt` or `system-prompt-file` (not both).
pub fn base_prompt(global: &Global, file: &ConfigFile) -> anyhow::Result<Option<String>> {
    if let Some(path) = &global.system_prompt {
        return read_prompt(path).map(Some);
    }
    match (&file.system_prompt, &file.system_prompt_file) {
        (Some(_), Some(_)) => {
            bail!("the config file sets both system-prompt and system-prompt-file; keep one")
        }
        (Some(text), None) => Ok(Some(text.clone())),
        (None, Some(path)) => read_prompt(path).map(Some),
        (None, None) => Ok(None),
    }
}

fn read_prompt(path: &Path) -> anyhow::Result<String> {
    let f = std::fs::File::open(path)
        .with_context(|| format!("cannot read the system prompt {}", path.display()))?;
    let mut bytes = Vec::new();
    let limit = u64::try_from(MAX_SYSTEM_PROMPT_BYTES).unwrap_or(u64::MAX);
    f.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .with_context(|| format!("cannot read the system prompt {}", path.display()))?;
    if bytes.len() > MAX_SYSTEM_PROMPT_BYTES {
        bail!(
            "the system prompt {} is larger than {MAX_SYSTEM_PROMPT_BYTES} bytes",
            path.display()
        );
    }
    let text = String::from_utf8(bytes)
        .map_err(|_| anyhow::anyhow!("the system prompt {} is not UTF-8", path.display()))?;
    if text.trim().is_empty() {
        bail!("the system prompt {} is empty", path.display());
    }
    Ok(text)
}

/// `options` with the merged model options, the base prompt and the
/// request hooks of these flags and this file.
pub fn apply(
    global: &Global,
    file: &ConfigFile,
    mut options: AgentOptions,
) -> anyhow::Result<AgentOptions> {
    options.model_options = merged(global, file)?;
    if let Some(prompt) = base_prompt(global, file)? {
        options.base_prompt = prompt;
    }
    for (i, cfg) in file.request_hooks.iter().enumerate() {
        let hook = cfg.build(i.saturating_add(1))?;
        options.request_hooks.push(Arc::new(hook));
    }
    Ok(options)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn global(args: &[&str]) -> Global {
        crate::commands::global_of(args)
    }

    fn file(toml_text: &str) -> ConfigFile {
        toml::from_str(toml_text).unwrap()
    }

    const LAYERS: &str = r#"
        [model]
        kind = "openai"
        [model.options]
        temperature = 0.1
        top-p = 0.5
        max-tokens = 100
        extra = { seed = 1, top_k = 10 }
        [agents.reviewer.options]
        top-p = 0.6
        extra = { seed = 2 }
        [variants.long]
        max-tokens = 900
        stop = ["END"]
    "#;

    #[test]
    fn layers_merge_model_then_agent_then_variant_then_flags() {
        let f = file(LAYERS);
        let m = merged(&global(&[]), &f).unwrap();
        assert_eq!(
            (m.temperature, m.top_p, m.max_tokens),
            (Some(0.1), Some(0.5), Some(100))
        );
        let m = merged(&global(&["--agent", "reviewer"]), &f).unwrap();
        assert_eq!(m.top_p, Some(0.6));
        assert_eq!(m.extra["seed"], 2);
        assert_eq!(m.extra["top_k"], 10);
        let m = merged(
            &global(&[
                "--agent",
                "reviewer",
                "--variant",
                "long",
                "--temperature",
                "0.9",
            ]),
            &f,
        )
        .unwrap();
        assert_eq!(m.temperature, Some(0.9));
        assert_eq!(m.top_p, Some(0.6));
        assert_eq!(m.max_tokens, Some(900));
        assert_eq!(m.stop, Some(vec!["END".to_owned()]));
        // A flag wins over the variant.
        let m = merged(&global(&["--variant", "long", "--max-tokens", "5"]), &f).unwrap();
        assert_eq!(m.max_tokens, Some(5));
        // An agent with no [agents.NAME] is a policy profile only.
        assert!(merged(&global(&["--agent", "other"]), &f).is_ok());
    }

    #[test]
    fn unknown_variants_bad_layers_and_unknown_keys_are_errors() {
        let f = file(LAYERS);
        let e = merged(&global(&["--variant", "nope"]), &f).unwrap_err();
        assert!(e.to_string().contains("known: long"), "{e}");
        let e = merged(&global(&["--temperature", "7"]), &f).unwrap_err();
        assert!(format!("{e:#}").contains("the flags"), "{e:#}");
        let bad = file("[variants.x]\nextra = { stream = false }\n");
        let e = merged(&global(&["--variant", "x"]), &bad).unwrap_err();
        assert!(format!("{e:#}").contains("[variants.x]"), "{e:#}");
        assert!(toml::from_str::<ConfigFile>("[agents.a]\ntemperature = 1\n").is_err());
        assert!(toml::from_str::<ConfigFile>("[variants.a]\ntemprature = 1\n").is_err());
    }

    #[test]
    fn host_run_takes_timeout_as_the_run_timeout() {
        let global = crate::commands::global_of(&["run", "--timeout", "7", "go"]);
        assert_eq!(global.run_timeout, 7);
    }

    #[test]
    fn the_system_prompt_comes_from_the_flag_then_the_config() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.md");
        std::fs::write(&path, "You are a pirate.").unwrap();
        let f = file("system-prompt = \"From config.\"\n");
        assert_eq!(
            base_prompt(&global(&[]), &f).unwrap().as_deref(),
            Some("From config.")
        );
        let flag = global(&["--system-prompt", path.to_str().unwrap()]);
        assert_eq!(
            base_prompt(&flag, &f).unwrap().as_deref(),
            Some("You are a pirate.")
        );
        let both = ConfigFile {
            system_prompt: Some("a".into()),
            system_prompt_file: Some(path.clone()),
            ..ConfigFile::default()
        };
        assert!(base_prompt(&global(&[]), &both).is_err());
        let big = dir.path().join("big.md");
        std::fs::write(&big, vec![b'x'; MAX_SYSTEM_PROMPT_BYTES + 1]).unwrap();
        let flag = global(&["--system-prompt", big.to_str().unwrap()]);
        assert!(base_prompt(&flag, &f).is_err());
        assert_eq!(
            base_prompt(&global(&[]), &ConfigFile::default()).unwrap(),
            None
        );
    }
}
