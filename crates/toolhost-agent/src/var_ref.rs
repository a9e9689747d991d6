//! Variable references in tool arguments: a stored result passed to another
//! tool without going through the model.
//!
//! Every successful tool result is stored as a variable (`result_1`, …; see
//! [`vars`](crate::vars)). In a call's arguments the model may write, in
//! place of any value:
//!
//! - `{"$var": "result_3"}`: the variable's text, as a JSON string;
//! - `{"$var": "result_3", "as": "json"}`: the variable's text parsed as JSON
//!   (an error when it is not JSON);
//! - inside a string, `$VAR_REF{{result_3}}`: the text spliced in there.
//!
//! The loop substitutes references after parsing the arguments and before
//! anything else sees them (the runtime's validation, policy and hooks see
//! the substituted arguments; the call's record keeps what the model wrote).
//! Bounded: at most [`MAX_REFS`] references per call and [`MAX_SUBSTITUTED_BYTES`]
//! substituted in all.
//!
//! ```
//! use serde_json::json;
//! use toolhost_agent::VarStore;
//! use toolhost_agent::var_ref::substitute;
//!
//! let vars = VarStore::new();
//! let name = vars.insert("one\ntwo".to_owned());
//! let args = json!({"text": {"$var": name}, "title": "Lines of $VAR_REF{{result_1}}!"});
//! let args = substitute(args, &vars).unwrap();
//! assert_eq!(args, json!({"text": "one\ntwo", "title": "Lines of one\ntwo!"}));
//! ```

use serde_json::{Map, Value};

use crate::vars::{VarError, VarStore};

/// Most references in one call's arguments.
pub const MAX_REFS: usize = 32;
/// Most bytes substituted into one call's arguments (4 MiB, the runtime's
/// default ceiling for a call's arguments).
pub const MAX_SUBSTITUTED_BYTES: usize = 4 * 1024 * 1024;

const OPEN: &str = "$VAR_REF{{";
const CLOSE: &str = "}}";

/// Why references could not be substituted; the text goes to the model.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VarRefError {
    /// The variable does not exist (or is gone).
    #[error("variable reference: {0}")]
    Var(#[from] VarError),
    /// `{"$var": …}` with something other than a name, or another key.
    #[error(
        "variable reference: write {{\"$var\": \"result_N\"}} or {{\"$var\": \"result_N\", \"as\": \"json\"}} ({0})"
    )]
    Malformed(String),
    /// `"as": "json"` on a variable whose text is not JSON.
    #[error("variable reference: `{name}` is not JSON ({message}); pass it as text instead")]
    NotJson {
        /// The variable.
        name: String,
        /// The parser's message.
        message: String,
    },
    /// Too many references.
    #[error("variable reference: more than {MAX_REFS} references in one call")]
    TooMany,
    /// Too much text substituted.
    #[error(
        "variable reference: the substituted arguments would exceed {MAX_SUBSTITUTED_BYTES} bytes"
    )]
    TooLarge,
}

/// Whether `args` holds any reference (cheap: no substitution).
pub fn has_refs(args: &Value) -> bool {
    match args {
        Value::String(s) => s.contains(OPEN),
        Value::Array(a) => a.iter().any(has_refs),
        Value::Object(o) => o.contains_key("$var") || o.values().any(has_refs),
        _ => false,
    }
}

/// `args` with every reference replaced (see the [module](self)).
pub fn substitute(args: Value, vars: &VarStore) -> Result<Value, VarRefError> {
    if !has_refs(&args) {
        return Ok(args);
    }
    let mut budget = Budget { refs: 0, bytes: 0 };
    walk(args, vars, &mut budget)
}

struct Budget {
    refs: usize,
    bytes: usize,
}

impl Budget {
    fn take(&mut self, bytes: usize) -> Result<(), VarRefError> {
        self.refs += 1;
        if self.refs > MAX_REFS {
            return Err(VarRefError::TooMany);
        }
        self.bytes = self.bytes.saturating_add(bytes);
        if self.bytes > MAX_SUBSTITUTED_BYTES {
            return Err(VarRefError::TooLarge);
        }
        Ok(())
    }
}

fn lookup(name: &str, vars: &VarStore, budget: &mut Budget) -> Result<String, VarRefError> {
    let Some(text) = vars.get(name) else {
        // `read` says why: unknown, or dropped from the store, and what exists.
        return Err(match vars.read(name, 0, Some(1), 1) {
            Err(e) => e.into(),
            Ok(_) => VarRefError::Malformed(format!("`{name}` could not be read")),
        });
    };
    budget.take(text.len())?;
    Ok(text)
}

fn walk(value: Value, vars: &VarStore, budget: &mut Budget) -> Result<Value, VarRefError> {
    match value {
        Value::Object(o) if o.contains_key("$var") => reference(o, vars, budget),
        Value::Object(o) => {
            let mut out = Map::with_capacity(o.len());
            for (k, v) in o {
                out.insert(k, walk(v, vars, budget)?);
            }
            Ok(Value::Object(out))
        }
        Value::Array(a) => a
            .into_iter()
            .map(|v| walk(v, vars, budget))
            .collect::<Result<Vec<_>, _>>()
            .map(Value::Array),
        Value::String(s) if s.contains(OPEN) => splice(&s, vars, budget).map(Value::String),
        other => Ok(other),
    }
}

fn reference(
    o: Map<String, Value>,
    vars: &VarStore,
    budget: &mut Budget,
) -> Result<Value, VarRefError> {
    let Some(Value::String(name)) = o.get("$var") else {
        return Err(VarRefError::Malformed("`$var` must be a name".into()));
    };
    if let Some(key) = o.keys().find(|k| *k != "$var" && *k != "as") {
        return Err(VarRefError::Malformed(format!("unexpected key `{key}`")));
    }
    let text = lookup(name, vars, budget)?;
    match o.get("as").map(Value::as_str) {
        None | Some(Some("text")) => Ok(Value::String(text)),
        Some(Some("json")) => serde_json::from_str(&text).map_err(|e| VarRefError::NotJson {
            name: name.clone(),
            message: e.to_string(),
        }),
        Some(_) => Err(VarRefError::Malformed(
            "`as` must be \"text\" or \"json\"".into(),
        )),
    }
}

fn splice(s: &str, vars: &VarStore, budget: &mut Budget) -> Result<String, VarRefError> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(at) = rest.find(OPEN) {
        out.push_str(&rest[..at]);
        let after = &rest[at + OPEN.len()..];
        let Some(end) = after.find(CLOSE) else {
            return Err(VarRefError::Malformed(format!(
                "`{OPEN}` without `{CLOSE}`"
            )));
        };
        out.push_str(&lookup(after[..end].trim(), vars, budget)?);
        rest = &after[end + CLOSE.len()..];
    }
    out.push_str(rest);
    Ok(out)
}

/// What the system prompt says about references when variables exist.
pub const PROMPT: &str = "Tool results are stored as variables (result_1, result_2, …). \
To pass a stored result to another tool without copying it, write {\"$var\": \"result_N\"} \
in place of an argument's value (add \"as\": \"json\" to pass it as JSON), or \
$VAR_REF{{result_N}} inside a string.";

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn store() -> VarStore {
        let vars = VarStore::new();
        vars.insert("plain text".to_owned());
        vars.insert(r#"{"n": [1, 2]}"#.to_owned());
        vars
    }

    #[test]
    fn references_are_replaced_at_any_depth_as_text_or_json() {
        let vars = store();
        let args = json!({
            "a": {"$var": "result_1"},
            "b": [{"$var": "result_2", "as": "json"}],
            "c": {"d": "x $VAR_REF{{result_1}} y $VAR_REF{{ result_1 }}"},
            "e": 3,
        });
        assert_eq!(
            substitute(args, &vars).unwrap(),
            json!({
                "a": "plain text",
                "b": [{"n": [1, 2]}],
                "c": {"d": "x plain text y plain text"},
                "e": 3,
            })
        );
    }

    #[test]
    fn arguments_without_references_are_returned_as_they_are() {
        let args = json!({"a": "$VAR", "b": {"var": 1}});
        assert_eq!(substitute(args.clone(), &store()).unwrap(), args);
    }

    #[test]
    fn an_unknown_variable_names_the_ones_that_exist() {
        let err = substitute(json!({"a": {"$var": "result_9"}}), &store()).unwrap_err();
        let text = err.to_string();
        assert!(
            matches!(err, VarRefError::Var(VarError::Unknown { .. })),
            "{err:?}"
        );
        assert!(
            text.contains("result_9") && text.contains("result_1"),
            "{text}"
        );
    }

    #[test]
    fn malformed_references_are_refused() {
        let vars = store();
        for args in [
            json!({"a": {"$var": 3}}),
            json!({"a": {"$var": "result_1", "extra": 1}}),
            json!({"a": {"$var": "result_1", "as": "yaml"}}),
            json!({"a": "$VAR_REF{{result_1"}),
        ] {
            assert!(
                matches!(
                    substitute(args.clone(), &vars),
                    Err(VarRefError::Malformed(_))
                ),
                "{args}"
            );
        }
        assert!(matches!(
            substitute(json!({"a": {"$var": "result_1", "as": "json"}}), &vars),
            Err(VarRefError::NotJson { .. })
        ));
    }

    #[test]
    fn references_are_bounded_in_number_and_bytes() {
        let vars = store();
        let many: Vec<Value> = (0..=MAX_REFS)
            .map(|_| json!({"$var": "result_1"}))
            .collect();
        assert_eq!(substitute(json!(many), &vars), Err(VarRefError::TooMany));

        let big = VarStore::with_bounds(10, 8 * 1024 * 1024);
        let name = big.insert("x".repeat(MAX_SUBSTITUTED_BYTES / 2 + 1));
        let twice = json!([{"$var": name.clone()}, {"$var": name}]);
        assert_eq!(substitute(twice, &big), Err(VarRefError::TooLarge));
    }
}
