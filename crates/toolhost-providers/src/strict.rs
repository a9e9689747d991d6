//! Strict tool schemas: constrained decoding for native tool calls.
//!
//! OpenAI's Structured Outputs hold a function call's arguments to its JSON
//! Schema when the function is sent with `"strict": true`, but only for a
//! subset of JSON Schema: every object closed (`additionalProperties:
//! false`) with all its properties required, `anyOf` rather than `oneOf`,
//! a short list of string formats, no value limits. [`strict_schema`] rewrites a tool's
//! schema into that subset without narrowing what a valid call may say: an
//! optional property becomes required but nullable, and
//! [`drop_strict_nulls`] removes those nulls from the arguments again, so
//! the tool (and the host's own validation against the original schema)
//! sees the call it would have seen without strict mode.
//!
//! ```
//! use serde_json::json;
//! use toolhost_providers::strict::{drop_strict_nulls, strict_schema};
//!
//! let schema = json!({"type": "object", "properties": {
//!     "path": {"type": "string"}, "limit": {"type": "integer"}}, "required": ["path"]});
//! let strict = strict_schema(&schema);
//! assert_eq!(strict["required"], json!(["limit", "path"]));
//! assert_eq!(strict["properties"]["limit"]["type"], json!(["integer", "null"]));
//! assert_eq!(drop_strict_nulls(r#"{"path": "a", "limit": null}"#, &schema), r#"{"path":"a"}"#);
//! ```

use serde_json::{Map, Value, json};

/// String formats strict mode accepts; others are dropped (the host still
/// checks them against the original schema).
const FORMATS: &[&str] = &[
    "date-time",
    "time",
    "date",
    "duration",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "uuid",
];

/// Keywords left out of a strict schema: a default, and the value limits
/// that strict implementations refuse or ignore (the strictest common
/// subset). They only narrow what a valid call may say, and the host
/// still checks every call against the original schema, so a value out of
/// range comes back to the model as a schema error.
const DROPPED: &[&str] = &[
    "default",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "pattern",
    "minItems",
    "maxItems",
    "uniqueItems",
    "minProperties",
    "maxProperties",
];

/// Deepest schema rewritten; deeper parts are kept as they are (a schema
/// from a plugin or an MCP server is outside input).
const MAX_DEPTH: usize = 32;

/// `schema` in the subset strict mode accepts (see the module docs).
pub fn strict_schema(schema: &Value) -> Value {
    rewrite(schema, 0)
}

fn rewrite(schema: &Value, depth: usize) -> Value {
    let Value::Object(map) = schema else {
        return schema.clone();
    };
    if depth >= MAX_DEPTH {
        return schema.clone();
    }
    let mut out = Map::new();
    for (key, value) in map {
        match key.as_str() {
            "oneOf" => {
                out.insert("anyOf".into(), rewrite_list(value, depth));
            }
            "anyOf" | "allOf" | "prefixItems" => {
                out.insert(key.clone(), rewrite_list(value, depth));
            }
            "items" | "not" => {
                out.insert(key.clone(), rewrite(value, depth + 1));
            }
            "$defs" | "definitions" => {
                out.insert(key.clone(), rewrite_map(value, depth));
            }
            "format" if !value.as_str().is_some_and(|f| FORMATS.contains(&f)) => {}
            k if DROPPED.contains(&k) => {}
            "properties" | "required" | "additionalProperties" => {}
            _ => {
                out.insert(key.clone(), value.clone());
            }
        }
    }
    if let Some(Value::Object(props)) = map.get("properties") {
        let required: Vec<&str> = map
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let mut strict_props = Map::new();
        for (name, prop) in props {
            let prop = rewrite(prop, depth + 1);
            let prop = if required.contains(&name.as_str()) {
                prop
            } else {
                nullable(prop)
            };
            strict_props.insert(name.clone(), prop);
        }
        let names: Vec<Value> = strict_props.keys().cloned().map(Value::String).collect();
        out.insert("properties".into(), Value::Object(strict_props));
        out.insert("required".into(), Value::Array(names));
    }
    if map.contains_key("properties") || map.get("type").and_then(Value::as_str) == Some("object") {
        out.insert("additionalProperties".into(), Value::Bool(false));
        if !out.contains_key("properties") {
            out.insert("properties".into(), json!({}));
            out.insert("required".into(), json!([]));
        }
    }
    Value::Object(out)
}

fn rewrite_list(list: &Value, depth: usize) -> Value {
    match list {
        Value::Array(items) => Value::Array(items.iter().map(|s| rewrite(s, depth + 1)).collect()),
        other => other.clone(),
    }
}

fn rewrite_map(defs: &Value, depth: usize) -> Value {
    match defs {
        Value::Object(defs) => Value::Object(
            defs.iter()
                .map(|(k, s)| (k.clone(), rewrite(s, depth + 1)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// `schema` that also accepts `null`.
fn nullable(mut schema: Value) -> Value {
    let Value::Object(map) = &mut schema else {
        return json!({"anyOf": [schema, {"type": "null"}]});
    };
    match map.get_mut("type") {
        Some(Value::String(t)) if t == "null" => {}
        Some(Value::String(t)) => {
            let t = std::mem::take(t);
            map.insert("type".into(), json!([t, "null"]));
        }
        Some(Value::Array(types)) => {
            if !types.iter().any(|t| t == "null") {
                types.push(json!("null"));
            }
        }
        _ => return json!({"anyOf": [schema, {"type": "null"}]}),
    }
    // An enum must list null too, or no null passes it.
    if let Some(Value::Array(values)) = map.get_mut("enum")
        && !values.iter().any(Value::is_null)
    {
        values.push(Value::Null);
    }
    schema
}

/// `arguments` (JSON text) without the nulls strict mode made the model
/// write for properties `original` (the schema before [`strict_schema`])
/// does not require. Anything that is not a JSON object comes back as it
/// was.
pub fn drop_strict_nulls(arguments: &str, original: &Value) -> String {
    match serde_json::from_str::<Value>(arguments) {
        Ok(mut value @ Value::Object(_)) => {
            if drop_nulls(&mut value, original, 0) {
                value.to_string()
            } else {
                arguments.to_owned()
            }
        }
        _ => arguments.to_owned(),
    }
}

/// Removes the nulls of optional properties in `value`; whether any went.
fn drop_nulls(value: &mut Value, schema: &Value, depth: usize) -> bool {
    if depth >= MAX_DEPTH {
        return false;
    }
    let (Value::Object(obj), Some(Value::Object(props))) = (value, schema.get("properties")) else {
        return false;
    };
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let before = obj.len();
    obj.retain(|k, v| !(v.is_null() && props.contains_key(k) && !required.contains(&k.as_str())));
    let mut changed = obj.len() != before;
    for (k, v) in obj.iter_mut() {
        if let Some(prop) = props.get(k) {
            changed |= drop_nulls(v, prop, depth + 1);
        }
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_object_is_closed_and_optional_properties_become_nullable() {
        // read_file's schema, as schemars writes it, with a nested object.
        let schema = json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "The file."},
                "offset": {"type": ["integer", "null"], "format": "uint64", "minimum": 1},
                "mode": {"enum": ["a", "b"], "type": "string"},
                "opts": {"type": "object", "properties": {"deep": {"type": "boolean"}}},
                "to": {"oneOf": [{"const": "x", "type": "string"}, {"const": "y", "type": "string"}]},
                "when": {"type": "string", "format": "date-time", "default": "now"},
            },
            "required": ["path", "to"],
        });
        let s = strict_schema(&schema);
        assert_eq!(s["additionalProperties"], false);
        assert_eq!(
            s["required"],
            json!(["mode", "offset", "opts", "path", "to", "when"])
        );
        let p = &s["properties"];
        assert_eq!(
            p["path"],
            json!({"type": "string", "description": "The file."})
        );
        assert_eq!(
            p["offset"],
            json!({"type": ["integer", "null"]}),
            "value limits go; the host still checks them"
        );
        assert_eq!(
            p["mode"],
            json!({"enum": ["a", "b", null], "type": ["string", "null"]})
        );
        assert_eq!(p["opts"]["additionalProperties"], false);
        assert_eq!(p["opts"]["required"], json!(["deep"]));
        assert_eq!(
            p["opts"]["properties"]["deep"]["type"],
            json!(["boolean", "null"])
        );
        assert_eq!(p["to"]["anyOf"][1]["const"], "y");
        assert!(p["to"].get("oneOf").is_none());
        assert_eq!(
            p["when"],
            json!({"type": ["string", "null"], "format": "date-time"})
        );
    }

    #[test]
    fn an_untyped_optional_property_is_wrapped_and_a_bare_object_gets_properties() {
        let schema = json!({"type": "object", "properties": {"any": {"description": "x"}}});
        let s = strict_schema(&schema);
        assert_eq!(
            s["properties"]["any"],
            json!({"anyOf": [{"description": "x"}, {"type": "null"}]})
        );
        let s = strict_schema(&json!({"type": "object"}));
        assert_eq!(
            s,
            json!({"type": "object", "properties": {}, "required": [], "additionalProperties": false})
        );
    }

    #[test]
    fn only_the_nulls_of_optional_properties_are_dropped() {
        let schema = json!({
            "type": "object",
            "properties": {
                "a": {"type": "string"},
                "b": {"type": ["string", "null"]},
                "nested": {"type": "object", "properties": {"c": {"type": "integer"}}},
            },
            "required": ["b"],
        });
        assert_eq!(
            drop_strict_nulls(
                r#"{"a":null,"b":null,"nested":{"c":null},"extra":null}"#,
                &schema
            ),
            r#"{"b":null,"extra":null,"nested":{}}"#
        );
        // Untouched when nothing is dropped, or not an object.
        assert_eq!(drop_strict_nulls(r#"{"a": "x"}"#, &schema), r#"{"a": "x"}"#);
        assert_eq!(drop_strict_nulls("[1, 2", &schema), "[1, 2");
        assert_eq!(drop_strict_nulls("null", &schema), "null");
    }

    #[test]
    fn a_schema_nested_past_the_depth_limit_is_kept_as_it_is() {
        let mut schema = json!({"type": "string"});
        for _ in 0..100 {
            schema = json!({"type": "object", "properties": {"x": schema}});
        }
        // No stack overflow; the top is rewritten.
        let s = strict_schema(&schema);
        assert_eq!(s["additionalProperties"], false);
        let args = (0..100).fold("null".to_owned(), |inner, _| format!("{{\"x\":{inner}}}"));
        let _ = drop_strict_nulls(&args, &schema);
    }
}
