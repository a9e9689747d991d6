//! TypeScript-style declarations of the tools a program may call, from
//! their JSON Schemas and descriptions: what a model reads to write a
//! program (`tools.read_file({ path })`).
//!
//! Bounded: a schema is followed at most [`MAX_DEPTH`] levels deep (deeper
//! is `any`), and an enum lists at most [`MAX_ENUM`] values.

use serde_json::Value;
use toolhost_sdk::tools::ToolInfo;

/// How deep a schema is followed.
pub const MAX_DEPTH: usize = 6;
/// How many values of an enum are listed.
pub const MAX_ENUM: usize = 20;

/// The declarations of `tools`: one `declare namespace tools` block with a
/// doc-commented function per tool.
///
/// ```
/// use serde_json::json;
/// use toolhost_sdk::tools::ToolInfo;
///
/// let add = ToolInfo {
///     name: "add".into(),
///     description: "Adds two numbers.".into(),
///     input_schema: json!({"type": "object", "required": ["a", "b"],
///         "properties": {"a": {"type": "number"}, "b": {"type": "number"}}}),
///     output_schema: None,
///     read_only: true,
/// };
/// let text = code_declarations::declarations(&[add]);
/// assert!(text.starts_with("declare namespace tools {"));
/// assert!(text.contains("function add(args: {"));
/// assert!(text.contains("}): Promise<string>;"));
/// ```
pub fn declarations(tools: &[ToolInfo]) -> String {
    let mut out = String::from("declare namespace tools {\n");
    for tool in tools {
        out.push_str(&function(tool));
    }
    out.push_str(
        "  /** Finds tools by what they do (names, descriptions, parameters): the best matches first. */\n  \
         function search(query: string, limit?: number): Promise<{ name: string; description: string; declaration: string }[]>;\n}\n",
    );
    out
}

/// One tool's declaration, with its description as a doc comment.
pub fn function(tool: &ToolInfo) -> String {
    let mut out = String::new();
    out.push_str(&doc_comment(&tool.description, "  "));
    let args = ts_type(&tool.input_schema, 1, 1);
    let optional = tool
        .input_schema
        .get("required")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty);
    let result = match &tool.output_schema {
        Some(schema) => ts_type(schema, 1, 1),
        None => "string".to_owned(),
    };
    let name = if is_identifier(&tool.name) {
        format!("function {}", tool.name)
    } else {
        // Reached as tools.call("name", args) or tools["name"](args).
        format!("/* tools[\"{}\"] */ function _", tool.name)
    };
    out.push_str(&format!(
        "  {name}(args{}: {args}): Promise<{result}>;\n",
        if optional { "?" } else { "" }
    ));
    out
}

fn doc_comment(text: &str, indent: &str) -> String {
    let text = text.trim().replace("*/", "* /");
    if text.is_empty() {
        return String::new();
    }
    let mut out = format!("{indent}/**\n");
    for line in text.lines() {
        out.push_str(&format!("{indent} * {}\n", line.trim_end()));
    }
    out.push_str(&format!("{indent} */\n"));
    out
}

fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
}

/// The TypeScript type of `schema`, `depth` levels deep, indented by
/// `level` steps.
fn ts_type(schema: &Value, depth: usize, level: usize) -> String {
    if depth > MAX_DEPTH {
        return "any".into();
    }
    let Some(obj) = schema.as_object() else {
        return "any".into();
    };
    if let Some(values) = obj.get("enum").and_then(Value::as_array) {
        let mut shown: Vec<String> = values.iter().take(MAX_ENUM).map(Value::to_string).collect();
        if values.len() > MAX_ENUM {
            shown.push("any".into());
        }
        return shown.join(" | ");
    }
    if let Some(value) = obj.get("const") {
        return value.to_string();
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(options) = obj.get(key).and_then(Value::as_array) {
            let types: Vec<String> = options
                .iter()
                .map(|o| ts_type(o, depth + 1, level))
                .collect();
            return if types.is_empty() {
                "any".into()
            } else {
                types.join(" | ")
            };
        }
    }
    match obj.get("type") {
        Some(Value::Array(types)) => types
            .iter()
            .map(|t| {
                let mut one = obj.clone();
                one.insert("type".into(), t.clone());
                ts_type(&Value::Object(one), depth, level)
            })
            .collect::<Vec<_>>()
            .join(" | "),
        Some(Value::String(t)) => match t.as_str() {
            "string" => "string".into(),
            "integer" | "number" => "number".into(),
            "boolean" => "boolean".into(),
            "null" => "null".into(),
            "array" => {
                let items = obj
                    .get("items")
                    .map_or_else(|| "any".to_owned(), |i| ts_type(i, depth + 1, level));
                if items.contains(' ') {
                    format!("({items})[]")
                } else {
                    format!("{items}[]")
                }
            }
            "object" => object_type(obj, depth, level),
            _ => "any".into(),
        },
        _ if obj.contains_key("properties") => object_type(obj, depth, level),
        _ => "any".into(),
    }
}

fn object_type(obj: &serde_json::Map<String, Value>, depth: usize, level: usize) -> String {
    let Some(properties) = obj.get("properties").and_then(Value::as_object) else {
        return "Record<string, any>".into();
    };
    if properties.is_empty() {
        return "{}".into();
    }
    let required: Vec<&str> = obj
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let indent = "  ".repeat(level + 1);
    let mut out = String::from("{\n");
    for (name, schema) in properties {
        if let Some(description) = schema.get("description").and_then(Value::as_str) {
            out.push_str(&doc_comment(description, &indent));
        }
        let key = if is_identifier(name) {
            name.clone()
        } else {
            Value::String(name.clone()).to_string()
        };
        let optional = if required.iter().any(|r| r == name) {
            ""
        } else {
            "?"
        };
        out.push_str(&format!(
            "{indent}{key}{optional}: {};\n",
            ts_type(schema, depth + 1, level + 1)
        ));
    }
    out.push_str(&"  ".repeat(level));
    out.push('}');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(name: &str, schema: Value) -> ToolInfo {
        ToolInfo {
            name: name.into(),
            description: "Reads a file.".into(),
            input_schema: schema,
            output_schema: None,
            read_only: true,
        }
    }

    #[test]
    fn a_tool_is_a_function_with_its_description_and_typed_arguments() {
        let t = tool(
            "read_file",
            json!({"type": "object", "required": ["path"], "properties": {
                "path": {"type": "string", "description": "The file."},
                "lines": {"type": ["integer", "null"]},
                "mode": {"enum": ["text", "bytes"]},
                "tags": {"type": "array", "items": {"type": "string"}}
            }}),
        );
        let text = function(&t);
        assert!(text.contains("/**\n   * Reads a file.\n   */"), "{text}");
        assert!(text.contains("function read_file(args: {"), "{text}");
        assert!(
            text.contains("    /**\n     * The file.\n     */\n    path: string;"),
            "{text}"
        );
        assert!(text.contains("lines?: number | null;"), "{text}");
        assert!(text.contains("mode?: \"text\" | \"bytes\";"), "{text}");
        assert!(text.contains("tags?: string[];"), "{text}");
        assert!(text.ends_with("}): Promise<string>;\n"), "{text}");
    }

    #[test]
    fn deep_or_odd_schemas_end_in_any_and_odd_names_are_reached_by_call() {
        let mut schema = json!({"type": "string"});
        for _ in 0..20 {
            schema = json!({"type": "object", "properties": {"a": schema}});
        }
        let text = function(&tool("deep", schema));
        assert!(text.contains("a?: any;"), "{text}");
        let odd = function(&tool("my-tool", json!({"type": "object"})));
        assert!(odd.contains("tools[\"my-tool\"]"), "{odd}");
        assert!(odd.contains("(args?: Record<string, any>)"), "{odd}");
    }
}
