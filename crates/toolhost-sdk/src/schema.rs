//! JSON Schemas of a tool's arguments and structured results, shaped for
//! LLM providers.

use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde_json::Value;

/// The input schema for argument type `A`, and the description taken out of
/// it (the type's doc comment).
///
/// The schema is draft 2020-12 with nested types inlined (several providers
/// reject `$ref`), without `$schema` and `title`, and without the top-level
/// `description`, which is returned separately because it describes the tool.
pub(crate) fn for_args<A: JsonSchema>() -> (Value, Option<String>) {
    let settings = SchemaSettings::draft2020_12().with(|s| {
        s.inline_subschemas = true;
        s.meta_schema = None;
    });
    let schema = settings.into_generator().into_root_schema_for::<A>();
    let mut value = schema.to_value();
    let description = take_description(&mut value, &A::schema_name()).map(|d| unwrap_lines(&d));
    unwrap_descriptions(&mut value);
    if let Some(obj) = value.as_object_mut()
        && obj.get("type") == Some(&Value::from("object"))
    {
        // Some providers insist on `properties`, even when it is empty.
        obj.entry("properties")
            .or_insert_with(|| Value::Object(Default::default()));
    }
    (value, description)
}

/// The output schema for structured results of type `T`: shaped like an
/// input schema, but the type's doc comment stays as its `description`.
pub(crate) fn for_output<T: JsonSchema>() -> Value {
    let (mut value, description) = for_args::<T>();
    if let (Some(obj), Some(description)) = (value.as_object_mut(), description) {
        obj.insert("description".into(), Value::String(description));
    }
    value
}

/// Removes `$schema`, `title` and `description` from the top level of
/// `schema` and returns the description.
///
/// schemars puts the first line of a multi-paragraph doc comment into
/// `title` and the rest into `description`; both are joined back. A `title`
/// that is just the type's name says nothing and is dropped.
fn take_description(schema: &mut Value, type_name: &str) -> Option<String> {
    let obj = schema.as_object_mut()?;
    obj.remove("$schema");
    let title = match obj.remove("title") {
        Some(Value::String(t)) if t != type_name && !t.trim().is_empty() => Some(t),
        _ => None,
    };
    let description = match obj.remove("description") {
        Some(Value::String(d)) if !d.trim().is_empty() => Some(d),
        _ => None,
    };
    match (title, description) {
        (Some(t), Some(d)) => Some(format!("{t}\n\n{d}")),
        (t, d) => t.or(d),
    }
}

/// Joins the lines that doc comments wrap, so that `/// Reads a\n/// file.`
/// becomes "Reads a file.". Blank lines (paragraphs), list items, headings,
/// quotes, tables, indented and fenced code keep their line breaks.
pub(crate) fn unwrap_lines(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_fence = false;
    // Whether the previous line may be continued by the next one.
    let mut open = false;
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim();
        let fence = trimmed.starts_with("```") || trimmed.starts_with("~~~");
        let verbatim = in_fence || fence || line.starts_with("    ") || line.starts_with('\t');
        if open && !verbatim && !trimmed.is_empty() && !starts_block(trimmed) {
            out.push(' ');
            out.push_str(trimmed);
            continue;
        }
        if i > 0 {
            out.push('\n');
        }
        if verbatim {
            out.push_str(line.trim_end());
        } else {
            out.push_str(trimmed);
        }
        if fence {
            in_fence = !in_fence;
        }
        open = !verbatim
            && !trimmed.is_empty()
            && !trimmed.starts_with('#')
            && !trimmed.starts_with('|');
    }
    out
}

/// Whether a (trimmed) line starts a Markdown block of its own.
fn starts_block(line: &str) -> bool {
    let bullet = ["- ", "* ", "+ ", "> ", "#", "|"]
        .iter()
        .any(|p| line.starts_with(p));
    let digits = line.bytes().take_while(u8::is_ascii_digit).count();
    let numbered = digits > 0 && matches!(line.as_bytes().get(digits), Some(b'.' | b')'));
    bullet || numbered || line == "-" || line == "*"
}

/// Applies [`unwrap_lines`] to every `description` in a schema.
fn unwrap_descriptions(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (key, v) in map.iter_mut() {
                match v {
                    Value::String(s) if key == "description" => *s = unwrap_lines(s),
                    _ => unwrap_descriptions(v),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(unwrap_descriptions),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use serde_json::json;

    /// Evaluates an arithmetic expression and returns the number.
    #[derive(Deserialize, JsonSchema)]
    #[allow(dead_code)]
    struct Calculate {
        /// The expression, e.g. `2*(3+4)`.
        expression: String,
    }

    /// Reads a file.
    ///
    /// Returns at most `limit` lines starting at line `offset`,
    /// with line endings kept.
    #[derive(Deserialize, JsonSchema)]
    #[allow(dead_code)]
    struct ReadFile {
        /// Path of the file, absolute or
        /// relative.
        path: String,
        /// First line to return (1-based).
        #[schemars(range(min = 1))]
        offset: Option<u64>,
        /// How many lines to return.
        #[serde(default)]
        limit: Option<u32>,
    }

    /// Target case.
    #[derive(Deserialize, JsonSchema)]
    #[serde(rename_all = "lowercase")]
    #[allow(dead_code)]
    enum Case {
        /// UPPER CASE.
        Upper,
        /// lower case.
        Lower,
    }

    /// Converts case.
    #[derive(Deserialize, JsonSchema)]
    #[allow(dead_code)]
    struct Convert {
        /// Text to convert.
        text: String,
        /// The case to convert to.
        to: Case,
    }

    #[derive(Deserialize, JsonSchema)]
    #[allow(dead_code)]
    struct NoDocs {
        x: i32,
    }

    #[derive(Deserialize, JsonSchema)]
    #[allow(dead_code)]
    struct Empty {}

    #[test]
    fn description_moves_out_of_schema() {
        let (schema, desc) = for_args::<Calculate>();
        assert_eq!(
            desc.as_deref(),
            Some("Evaluates an arithmetic expression and returns the number.")
        );
        assert_eq!(
            schema,
            json!({
                "type": "object",
                "properties": {
                    "expression": {
                        "type": "string",
                        "description": "The expression, e.g. `2*(3+4)`."
                    }
                },
                "required": ["expression"]
            })
        );
    }

    #[test]
    fn multi_paragraph_doc_is_joined() {
        let (schema, desc) = for_args::<ReadFile>();
        assert_eq!(
            desc.as_deref(),
            Some(
                "Reads a file.\n\nReturns at most `limit` lines starting at line `offset`, with line endings kept."
            )
        );
        assert_eq!(
            schema["properties"]["path"]["description"],
            "Path of the file, absolute or relative."
        );
        let obj = schema.as_object().unwrap();
        assert!(!obj.contains_key("title"));
        assert!(!obj.contains_key("$schema"));
        assert!(!obj.contains_key("description"));
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["required"], json!(["path"]));
        assert_eq!(schema["properties"]["offset"]["minimum"], 1);
        assert_eq!(
            schema["properties"]["limit"]["description"],
            "How many lines to return."
        );
        // Properties keep declaration order.
        let keys: Vec<&String> = schema["properties"].as_object().unwrap().keys().collect();
        assert_eq!(keys, ["path", "offset", "limit"]);
    }

    #[test]
    fn nested_types_are_inlined() {
        let (schema, desc) = for_args::<Convert>();
        assert_eq!(desc.as_deref(), Some("Converts case."));
        let text = schema.to_string();
        assert!(!text.contains("$ref"), "{text}");
        assert!(!text.contains("$defs"), "{text}");
        let to = &schema["properties"]["to"];
        assert!(to.to_string().contains("upper"), "{to}");
        assert!(to.to_string().contains("lower"), "{to}");
    }

    #[test]
    fn undocumented_types_have_no_description() {
        let (schema, desc) = for_args::<NoDocs>();
        assert_eq!(desc, None);
        assert!(schema.get("title").is_none());
        let (schema, desc) = for_args::<Empty>();
        assert_eq!(desc, None);
        assert_eq!(schema, json!({"type": "object", "properties": {}}));
    }

    #[test]
    fn take_description_rules() {
        let mut v = json!({"$schema": "x", "title": "T", "description": "D", "type": "object"});
        assert_eq!(take_description(&mut v, "T"), Some("D".into()));
        assert_eq!(v, json!({"type": "object"}));

        let mut v = json!({"title": "Line one.", "description": "More."});
        assert_eq!(
            take_description(&mut v, "T"),
            Some("Line one.\n\nMore.".into())
        );

        let mut v = json!({"title": "Only title."});
        assert_eq!(take_description(&mut v, "T"), Some("Only title.".into()));

        let mut v = json!(true);
        assert_eq!(take_description(&mut v, "T"), None);
    }

    #[test]
    fn unwrapping_keeps_markdown_blocks() {
        assert_eq!(unwrap_lines("a\nb\n c"), "a b c");
        assert_eq!(
            unwrap_lines("para one\nwraps\n\npara two"),
            "para one wraps\n\npara two"
        );
        assert_eq!(
            unwrap_lines("Modes:\n- fast\n  and loose\n- slow\n1. one\n2) two"),
            "Modes:\n- fast and loose\n- slow\n1. one\n2) two"
        );
        assert_eq!(
            unwrap_lines("Example:\n```\nlet x =\n    1;\n```\nafter"),
            "Example:\n```\nlet x =\n    1;\n```\nafter"
        );
        assert_eq!(
            unwrap_lines("# Title\ntext\n| a |\n| b |"),
            "# Title\ntext\n| a |\n| b |"
        );
        assert_eq!(
            unwrap_lines("code:\n\n    indented\n    more"),
            "code:\n\n    indented\n    more"
        );
        assert_eq!(unwrap_lines(""), "");
        assert_eq!(unwrap_lines("1+1\nis 2"), "1+1 is 2");
    }

    #[test]
    fn nested_descriptions_are_unwrapped() {
        let mut v = json!({"properties": {"a": {"description": "x\ny"}, "b": {"oneOf": [{"description": "p\nq"}]}}});
        unwrap_descriptions(&mut v);
        assert_eq!(v["properties"]["a"]["description"], "x y");
        assert_eq!(v["properties"]["b"]["oneOf"][0]["description"], "p q");
    }
}
