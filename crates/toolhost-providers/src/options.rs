//! Model options in layers: sampling and output settings that a config file,
//! an agent profile, a variant and the command line each may set, merged in
//! that order (later layers win field by field; `extra` is merged key by key).
//!
//! ```
//! use toolhost_providers::options::{ModelOptions, ReasoningEffort};
//!
//! // `[model.options]`, then `[agents.NAME.options]`, then `[variants.NAME]`
//! // (kebab-case keys, as the config file writes them).
//! let model: ModelOptions = serde_json::from_str(
//!     r#"{"temperature": 0.2, "stop": ["END"], "extra": {"seed": 7, "top_k": 40}}"#,
//! ).unwrap();
//! let agent: ModelOptions = serde_json::from_str(r#"{"top-p": 0.9, "extra": {"seed": 8}}"#).unwrap();
//! let variant: ModelOptions = serde_json::from_str(r#"{"reasoning-effort": "high"}"#).unwrap();
//! let merged = model.merge(&agent).merge(&variant);
//! merged.validate().unwrap();
//! assert_eq!(merged.temperature, Some(0.2));
//! assert_eq!(merged.top_p, Some(0.9));
//! assert_eq!(merged.reasoning_effort, Some(ReasoningEffort::High));
//! assert_eq!(merged.extra["seed"], 8);
//! assert_eq!(merged.extra["top_k"], 40);
//!
//! // `extra` never touches what the loop controls.
//! let bad: ModelOptions = serde_json::from_str(r#"{"extra": {"tools": []}}"#).unwrap();
//! assert!(bad.validate().is_err());
//! ```

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::CompletionRequest;

/// Request-body keys that `extra` may never set: the agent loop controls
/// them (`stream_options` and `parallel_tool_calls` go with `stream` and
/// `tools`).
pub const FORBIDDEN_EXTRA_KEYS: &[&str] = &[
    "model",
    "messages",
    "system",
    "tools",
    "tool_choice",
    "stream",
    "stream_options",
    "parallel_tool_calls",
    "response_format",
];

/// Largest `extra` table, serialized as JSON: 64 KiB.
pub const MAX_EXTRA_BYTES: usize = 64 * 1024;

/// Most stop sequences.
pub const MAX_STOP_SEQUENCES: usize = 16;

/// Longest stop sequence, in bytes.
pub const MAX_STOP_BYTES: usize = 1024;

/// How hard a reasoning model thinks before it answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReasoningEffort {
    /// Few reasoning tokens.
    Low,
    /// The usual.
    Medium,
    /// Many reasoning tokens.
    High,
}

impl ReasoningEffort {
    /// The wire value (`low`, `medium`, `high`), the same for OpenAI's
    /// `reasoning_effort` and Anthropic's `output_config.effort`.
    pub fn as_str(self) -> &'static str {
        match self {
            ReasoningEffort::Low => "low",
            ReasoningEffort::Medium => "medium",
            ReasoningEffort::High => "high",
        }
    }
}

impl fmt::Display for ReasoningEffort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One layer of model options; unset fields leave the previous layer's
/// value (or the provider's default) in place.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", default, deny_unknown_fields)]
pub struct ModelOptions {
    /// Sampling temperature (0 to 2).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    /// Nucleus sampling (0 to 1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f32>,
    /// Upper bound on output tokens per request (at least 1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// Sequences that end the output (at most [`MAX_STOP_SEQUENCES`], each
    /// non-empty and at most [`MAX_STOP_BYTES`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop: Option<Vec<String>>,
    /// Reasoning effort: OpenAI's `reasoning_effort`, Anthropic's
    /// `output_config.effort`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<ReasoningEffort>,
    /// Passed through into the provider's request body, key by key. Never
    /// one of [`FORBIDDEN_EXTRA_KEYS`], never more than [`MAX_EXTRA_BYTES`],
    /// and never replacing a field the request already has.
    #[serde(skip_serializing_if = "Map::is_empty")]
    pub extra: Map<String, Value>,
}

/// Why a [`ModelOptions`] layer is refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum OptionsError {
    /// `extra` names a field the agent loop controls.
    #[error("extra.{key}: the agent loop sets `{key}` itself; extra may not override it")]
    ForbiddenExtraKey {
        /// The key.
        key: String,
    },
    /// `extra` is too large.
    #[error("extra is {bytes} bytes of JSON; the limit is {max}")]
    ExtraTooLarge {
        /// Its serialized size (at least `max + 1`).
        bytes: usize,
        /// The limit.
        max: usize,
    },
    /// A value is out of range.
    #[error("{field}: {reason}")]
    OutOfRange {
        /// The option.
        field: &'static str,
        /// What is wrong.
        reason: String,
    },
}

impl ModelOptions {
    /// Whether no field is set.
    pub fn is_empty(&self) -> bool {
        *self == ModelOptions::default()
    }

    /// `self` with `over` laid on top: each field `over` sets wins; `extra`
    /// is merged key by key (`over`'s keys win).
    pub fn merge(&self, over: &ModelOptions) -> ModelOptions {
        let mut extra = self.extra.clone();
        for (k, v) in &over.extra {
            extra.insert(k.clone(), v.clone());
        }
        ModelOptions {
            temperature: over.temperature.or(self.temperature),
            top_p: over.top_p.or(self.top_p),
            max_tokens: over.max_tokens.or(self.max_tokens),
            stop: over.stop.clone().or_else(|| self.stop.clone()),
            reasoning_effort: over.reasoning_effort.or(self.reasoning_effort),
            extra,
        }
    }

    /// Checks ranges and `extra` (forbidden keys, size).
    pub fn validate(&self) -> Result<(), OptionsError> {
        let range = |field: &'static str, v: Option<f32>, max: f32| match v {
            Some(x) if !(x.is_finite() && (0.0..=max).contains(&x)) => {
                Err(OptionsError::OutOfRange {
                    field,
                    reason: format!("must be between 0 and {max}, not {x}"),
                })
            }
            _ => Ok(()),
        };
        range("temperature", self.temperature, 2.0)?;
        range("top-p", self.top_p, 1.0)?;
        if self.max_tokens == Some(0) {
            return Err(OptionsError::OutOfRange {
                field: "max-tokens",
                reason: "must be at least 1".into(),
            });
        }
        if let Some(stop) = &self.stop {
            if stop.len() > MAX_STOP_SEQUENCES {
                return Err(OptionsError::OutOfRange {
                    field: "stop",
                    reason: format!(
                        "{} sequences; at most {MAX_STOP_SEQUENCES} are allowed",
                        stop.len()
                    ),
                });
            }
            if let Some(s) = stop
                .iter()
                .find(|s| s.is_empty() || s.len() > MAX_STOP_BYTES)
            {
                return Err(OptionsError::OutOfRange {
                    field: "stop",
                    reason: format!(
                        "each sequence must be 1 to {MAX_STOP_BYTES} bytes, not {}",
                        s.len()
                    ),
                });
            }
        }
        check_extra(&self.extra)
    }

    /// Sets every field this layer sets on `request` (`extra` key by key).
    pub fn apply_to(&self, request: &mut CompletionRequest) {
        if let Some(t) = self.temperature {
            request.temperature = Some(t);
        }
        if let Some(p) = self.top_p {
            request.top_p = Some(p);
        }
        if let Some(m) = self.max_tokens {
            request.max_tokens = Some(m);
        }
        if let Some(s) = &self.stop {
            request.stop = s.clone();
        }
        if let Some(e) = self.reasoning_effort {
            request.reasoning_effort = Some(e);
        }
        for (k, v) in &self.extra {
            request.extra.insert(k.clone(), v.clone());
        }
    }

    /// The options `request` carries now.
    pub fn of_request(request: &CompletionRequest) -> ModelOptions {
        ModelOptions {
            temperature: request.temperature,
            top_p: request.top_p,
            max_tokens: request.max_tokens,
            stop: (!request.stop.is_empty()).then(|| request.stop.clone()),
            reasoning_effort: request.reasoning_effort,
            extra: request.extra.clone(),
        }
    }

    /// Replaces every option of `request` with this one's (an unset field
    /// unsets it).
    pub fn replace_in(&self, request: &mut CompletionRequest) {
        request.temperature = self.temperature;
        request.top_p = self.top_p;
        request.max_tokens = self.max_tokens;
        request.stop = self.stop.clone().unwrap_or_default();
        request.reasoning_effort = self.reasoning_effort;
        request.extra = self.extra.clone();
    }
}

/// Refuses forbidden keys and tables over [`MAX_EXTRA_BYTES`].
pub fn check_extra(extra: &Map<String, Value>) -> Result<(), OptionsError> {
    if let Some(key) = extra
        .keys()
        .find(|k| FORBIDDEN_EXTRA_KEYS.contains(&k.as_str()))
    {
        return Err(OptionsError::ForbiddenExtraKey { key: key.clone() });
    }
    let bytes = serde_json::to_vec(extra).map_or(usize::MAX, |v| v.len());
    if bytes > MAX_EXTRA_BYTES {
        return Err(OptionsError::ExtraTooLarge {
            bytes,
            max: MAX_EXTRA_BYTES,
        });
    }
    Ok(())
}

/// Adds `extra` to a provider's request `body`: keys the body already has
/// (set by the host) and forbidden keys are skipped, with a warning.
pub(crate) fn merge_extra(provider: &str, body: &mut Value, extra: &Map<String, Value>) {
    let Some(obj) = body.as_object_mut() else {
        return;
    };
    for (k, v) in extra {
        if FORBIDDEN_EXTRA_KEYS.contains(&k.as_str()) {
            tracing::warn!(provider, key = %k, "extra option ignored: the agent loop controls it");
        } else if obj.contains_key(k) {
            tracing::debug!(provider, key = %k, "extra option ignored: the request already sets it");
        } else {
            obj.insert(k.clone(), v.clone());
        }
    }
}

/// An `f32` option as JSON, by its shortest decimal form (`0.7`, not
/// `0.699999988079071`).
pub(crate) fn f32_json(v: f32) -> Value {
    v.to_string()
        .parse::<f64>()
        .ok()
        .and_then(serde_json::Number::from_f64)
        .map_or(Value::Null, Value::Number)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn layer(v: Value) -> ModelOptions {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn each_layer_wins_over_the_previous_field_by_field() {
        let base = layer(json!({"temperature": 0.1, "top-p": 0.5, "max-tokens": 10,
            "stop": ["a"], "reasoning-effort": "low"}));
        let model = layer(json!({"temperature": 0.2}));
        let agent = layer(json!({"top-p": 0.6, "stop": ["b", "c"]}));
        let variant = layer(json!({"max-tokens": 20, "reasoning-effort": "high"}));
        let flags = layer(json!({"temperature": 0.9}));
        let m = base
            .merge(&model)
            .merge(&agent)
            .merge(&variant)
            .merge(&flags);
        assert_eq!(m.temperature, Some(0.9));
        assert_eq!(m.top_p, Some(0.6));
        assert_eq!(m.max_tokens, Some(20));
        assert_eq!(m.stop, Some(vec!["b".to_owned(), "c".to_owned()]));
        assert_eq!(m.reasoning_effort, Some(ReasoningEffort::High));
        // An empty layer changes nothing.
        assert_eq!(m.merge(&ModelOptions::default()), m);
        assert_eq!(ModelOptions::default().merge(&m), m);
    }

    #[test]
    fn extra_is_merged_key_by_key_later_keys_winning() {
        let a = layer(json!({"extra": {"seed": 1, "top_k": 40, "nested": {"x": 1}}}));
        let b = layer(json!({"extra": {"seed": 2, "min_p": 0.1, "nested": {"y": 2}}}));
        let m = a.merge(&b);
        assert_eq!(
            Value::Object(m.extra),
            json!({"seed": 2, "top_k": 40, "min_p": 0.1, "nested": {"y": 2}})
        );
    }

    #[test]
    fn forbidden_extra_keys_are_refused_with_a_typed_error() {
        for key in FORBIDDEN_EXTRA_KEYS {
            let mut o = ModelOptions::default();
            o.extra.insert((*key).to_owned(), json!(1));
            assert_eq!(
                o.validate(),
                Err(OptionsError::ForbiddenExtraKey {
                    key: (*key).to_owned()
                }),
                "{key}"
            );
        }
        let ok = layer(json!({"extra": {"seed": 1, "max_completion_tokens": 5}}));
        assert_eq!(ok.validate(), Ok(()));
    }

    #[test]
    fn oversized_extra_and_out_of_range_values_are_refused() {
        let big = layer(json!({"extra": {"blob": "x".repeat(MAX_EXTRA_BYTES)}}));
        assert!(matches!(
            big.validate(),
            Err(OptionsError::ExtraTooLarge { bytes, max: MAX_EXTRA_BYTES }) if bytes > MAX_EXTRA_BYTES
        ));
        for bad in [
            json!({"temperature": 2.5}),
            json!({"temperature": -0.1}),
            json!({"top-p": 1.5}),
            json!({"max-tokens": 0}),
            json!({"stop": [""]}),
            json!({"stop": vec!["s"; MAX_STOP_SEQUENCES + 1]}),
        ] {
            assert!(
                matches!(
                    layer(bad.clone()).validate(),
                    Err(OptionsError::OutOfRange { .. })
                ),
                "{bad}"
            );
        }
        let nan = ModelOptions {
            temperature: Some(f32::NAN),
            ..Default::default()
        };
        assert!(nan.validate().is_err());
    }

    #[test]
    fn unknown_keys_and_bad_efforts_do_not_parse() {
        assert!(serde_json::from_value::<ModelOptions>(json!({"temprature": 1})).is_err());
        assert!(
            serde_json::from_value::<ModelOptions>(json!({"reasoning-effort": "max"})).is_err()
        );
    }

    #[test]
    fn apply_sets_only_what_the_layer_sets_and_replace_sets_everything() {
        let mut req = CompletionRequest {
            temperature: Some(0.5),
            max_tokens: Some(7),
            ..Default::default()
        };
        req.extra.insert("seed".into(), json!(1));
        layer(json!({"top-p": 0.3, "extra": {"top_k": 3}})).apply_to(&mut req);
        assert_eq!(req.temperature, Some(0.5));
        assert_eq!(req.top_p, Some(0.3));
        assert_eq!(req.max_tokens, Some(7));
        assert_eq!(
            Value::Object(req.extra.clone()),
            json!({"seed": 1, "top_k": 3})
        );
        let now = ModelOptions::of_request(&req);
        layer(json!({"stop": ["x"]})).replace_in(&mut req);
        assert_eq!(req.temperature, None);
        assert_eq!(req.stop, vec!["x".to_owned()]);
        assert!(req.extra.is_empty());
        now.replace_in(&mut req);
        assert_eq!(ModelOptions::of_request(&req), now);
    }

    #[test]
    fn f32_options_are_sent_in_their_shortest_decimal_form() {
        assert_eq!(f32_json(0.7).to_string(), "0.7");
        assert_eq!(f32_json(1.0).to_string(), "1.0");
        assert_eq!(f32_json(f32::NAN), Value::Null);
    }
}
