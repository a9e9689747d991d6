//! The GBNF grammar of a constrained xml reply (llama.cpp's `grammar`
//! field): what the xml prompt protocol asks a server to hold the model to.
//!
//! A reply is one to [`MAX_CALLS`] `<tool_code>` blocks or a plain answer
//! that does not start with `<`. Each block is a call of an offered tool,
//! by name, whose arguments are an object of that tool's own properties:
//! each value of its declared type, an enum (or a `oneOf`/`anyOf` of
//! constants) one of its values, anything deeper any JSON. Every repetition
//! is bounded, so a model that starts repeating itself (Qwen2.5-Coder 1.5B
//! wrote `"offset":1,"limit":10000,…` until its context was full under a
//! grammar of free-form objects) reaches the end of what the grammar allows.
//! Which properties are required is left to the host's validation: its
//! error teaches the model better than a grammar would.
//!
//! ```
//! use serde_json::json;
//! use toolhost_providers::ToolDefinition;
//! use toolhost_providers::grammar::xml_reply_grammar;
//!
//! let tool = ToolDefinition {
//!     name: "case_convert".into(),
//!     description: String::new(),
//!     parameters: json!({"type": "object", "properties": {
//!         "text": {"type": "string"}, "to": {"enum": ["upper", "lower"]}}}).into(),
//! };
//! let grammar = xml_reply_grammar(&[tool]).unwrap();
//! assert!(grammar.contains(r#""\"upper\"" ws | "\"lower\"" ws"#));
//! ```

use serde_json::Value;

use crate::ToolDefinition;

/// Most calls one reply holds.
pub const MAX_CALLS: usize = 4;

/// Most members of an object the grammar describes: the declared
/// properties of a tool's arguments, at most this many; any deeper object.
const MAX_MEMBERS: usize = 16;

/// Most items of an array the grammar describes.
const MAX_ITEMS: usize = 64;

/// Most tools a grammar is made for; past this, the reply is not
/// constrained (a definition list is outside input).
pub const MAX_TOOLS: usize = 128;

/// Most properties per tool (and enum values per property) given rules of
/// their own; past this, arguments (or the value) are any JSON.
const MAX_PROPERTIES: usize = 64;

/// The grammar for a reply that calls `tools` (see the module docs), or
/// `None` when there is no tool, or more than [`MAX_TOOLS`] (no tool is
/// ever left out of a grammar: it could not be called at all).
///
/// After its calls the reply may go on to the start of a result: a small
/// model that wants to imitate one is stopped there by the stop sequence
/// the protocol sends, instead of writing calls until its context is full.
pub fn xml_reply_grammar(tools: &[ToolDefinition]) -> Option<String> {
    grammar(tools, true)
}

/// [`xml_reply_grammar`] without the answer: the grammar of a reply when a
/// call is required (`tool_choice: required`).
pub fn xml_call_grammar(tools: &[ToolDefinition]) -> Option<String> {
    grammar(tools, false)
}

fn grammar(tools: &[ToolDefinition], answer: bool) -> Option<String> {
    if tools.is_empty() || tools.len() > MAX_TOOLS {
        return None;
    }
    let mut rules = Vec::new();
    let mut calls = Vec::new();
    for (i, tool) in tools.iter().enumerate() {
        calls.push(format!("call-{i}"));
        rules.push(format!(
            r#"call-{i} ::= {} ws "," ws "\"arguments\"" ws ":" ws args-{i}"#,
            literal(&Value::String(tool.name.clone()).to_string())
        ));
        rules.push(arguments_rule(i, &tool.parameters));
    }
    let more = MAX_CALLS - 1;
    let members = MAX_MEMBERS - 1;
    let items = MAX_ITEMS - 1;
    Some(format!(
        r#"root ::= call ("\n" call){{0,{more}}} ("\n"{{0,2}} "<tool_result")?{or_answer}
call ::= "<tool_code>{{" ws "\"name\"" ws ":" ws ({calls}) "}}</tool_code>"
{rules}
{answer_rule}value ::= object | array | string | number | boolean | null
object ::= "{{" ws ( string ":" ws value ("," ws string ":" ws value){{0,{members}}} )? "}}" ws
array ::= "[" ws ( value ("," ws value){{0,{items}}} )? "]" ws
string ::= "\"" ( [^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{{4}}) )* "\"" ws
number ::= "-"? ([0-9] | [1-9] [0-9]{{0,15}}) ("." [0-9]{{1,16}})? ([eE] [-+]? [0-9]{{1,4}})? ws
integer ::= "-"? ([0-9] | [1-9] [0-9]{{0,15}}) ws
boolean ::= ("true" | "false") ws
null ::= "null" ws
ws ::= | " " | "\n" [ \t]{{0,20}}
"#,
        calls = calls.join(" | "),
        or_answer = if answer { " | answer" } else { "" },
        answer_rule = if answer {
            "answer ::= [^<] [^\\x00]*\n"
        } else {
            ""
        },
        rules = rules.join("\n"),
    ))
}

/// `args-{i}`: an object of the declared properties of `schema`, each with
/// its own value rule; any object when it declares none (or too many).
fn arguments_rule(i: usize, schema: &Value) -> String {
    let props = schema
        .get("properties")
        .and_then(Value::as_object)
        .filter(|p| !p.is_empty() && p.len() <= MAX_PROPERTIES);
    let Some(props) = props else {
        return format!("args-{i} ::= object");
    };
    let members: Vec<String> = props
        .iter()
        .map(|(name, prop)| {
            format!(
                r#"{} ws ":" ws {}"#,
                literal(&Value::String(name.clone()).to_string()),
                value_rule(prop)
            )
        })
        .collect();
    let more = props.len().min(MAX_MEMBERS) - 1;
    format!(
        "args-{i} ::= \"{{\" ws ( member-{i} (\",\" ws member-{i}){{0,{more}}} )? \"}}\" ws\nmember-{i} ::= {}",
        members.join(" | ")
    )
}

/// The rule a property's value follows: its constants, its type(s), or any value.
fn value_rule(prop: &Value) -> String {
    if let Some(values) = constants(prop) {
        return format!("({})", values.join(" | "));
    }
    let types: Vec<&str> = match prop.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let rules: Vec<&str> = types
        .iter()
        .filter_map(|t| match *t {
            "string" => Some("string"),
            "integer" => Some("integer"),
            "number" => Some("number"),
            "boolean" => Some("boolean"),
            "null" => Some("null"),
            "object" => Some("object"),
            "array" => Some("array"),
            _ => None,
        })
        .collect();
    if rules.is_empty() || rules.len() != types.len() {
        "value".to_owned()
    } else {
        format!("({})", rules.join(" | "))
    }
}

/// The grammar literals of a property's allowed values: its `enum`, or a
/// `oneOf`/`anyOf` whose every branch is a `const`; each as JSON text.
fn constants(prop: &Value) -> Option<Vec<String>> {
    let values: Vec<&Value> = if let Some(Value::Array(e)) = prop.get("enum") {
        e.iter().collect()
    } else {
        let branches = prop
            .get("oneOf")
            .or_else(|| prop.get("anyOf"))
            .and_then(Value::as_array)?;
        branches
            .iter()
            .map(|b| b.get("const"))
            .collect::<Option<Vec<_>>>()?
    };
    if values.is_empty() || values.len() > MAX_PROPERTIES {
        return None;
    }
    Some(
        values
            .iter()
            .map(|v| format!("{} ws", literal(&v.to_string())))
            .collect(),
    )
}

/// `text` as a GBNF string literal.
fn literal(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\x{:02X}", u32::from(c) & 0xFF)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn tool(name: &str, parameters: Value) -> ToolDefinition {
        ToolDefinition {
            name: name.into(),
            description: String::new(),
            parameters: parameters.into(),
        }
    }

    #[test]
    fn each_tool_gets_its_own_properties_types_and_constants() {
        let g = xml_reply_grammar(&[
            tool(
                "read_file",
                json!({"type": "object", "properties": {
                    "path": {"type": "string"},
                    "offset": {"type": ["integer", "null"], "format": "uint64"},
                }}),
            ),
            tool(
                "case_convert",
                json!({"type": "object", "properties": {
                    "text": {"type": "string"},
                    "to": {"oneOf": [{"const": "upper"}, {"const": "snake"}]},
                }}),
            ),
            tool("anything", json!({"type": "object"})),
            tool("bad\"name", json!({})),
        ])
        .expect("a grammar");
        assert!(g.contains(r#"call ::= "<tool_code>{" ws "\"name\"" ws ":" ws (call-0 | call-1 | call-2 | call-3) "}</tool_code>""#), "{g}");
        assert!(
            g.contains(r#"call-0 ::= "\"read_file\"" ws "," ws "\"arguments\"" ws ":" ws args-0"#),
            "{g}"
        );
        assert!(
            g.contains(r#"args-0 ::= "{" ws ( member-0 ("," ws member-0){0,1} )? "}" ws"#),
            "{g}"
        );
        assert!(g.contains(r#"member-0 ::= "\"offset\"" ws ":" ws (integer | null) | "\"path\"" ws ":" ws (string)"#), "{g}");
        assert!(
            g.contains(r#""\"to\"" ws ":" ws ("\"upper\"" ws | "\"snake\"" ws)"#),
            "{g}"
        );
        assert!(g.contains("args-2 ::= object"), "{g}");
        // A name with a quote is escaped, not left out (it could not be
        // called at all).
        assert!(g.contains(r#"call-3 ::= "\"bad\\\"name\"" ws"#), "{g}");
    }

    #[test]
    fn every_repetition_is_bounded() {
        let g = xml_reply_grammar(&[tool("t", json!({}))]).unwrap();
        assert!(
            g.starts_with(r#"root ::= call ("\n" call){0,3} ("\n"{0,2} "<tool_result")? | answer"#),
            "{g}"
        );
        assert!(g.contains(r#"("," ws string ":" ws value){0,15}"#), "{g}");
        assert!(g.contains(r#"("," ws value){0,63}"#), "{g}");
    }

    #[test]
    fn odd_schemas_fall_back_to_any_value_and_too_many_tools_to_no_grammar() {
        assert_eq!(xml_reply_grammar(&[]), None);
        let many: Vec<ToolDefinition> = (0..=MAX_TOOLS)
            .map(|i| tool(&format!("t{i}"), json!({})))
            .collect();
        assert_eq!(xml_reply_grammar(&many), None, "none left out: no grammar");
        assert!(xml_reply_grammar(&many[..MAX_TOOLS]).is_some());
        assert!(
            xml_reply_grammar(&[tool("a b", json!({}))])
                .unwrap()
                .contains(r#""\"a b\"" ws"#)
        );
        // An unknown type, a mixed oneOf, quotes and newlines in names and values.
        let g = xml_reply_grammar(&[tool(
            "t",
            json!({"properties": {
                "x": {"type": "strange"},
                "y": {"oneOf": [{"const": 1}, {"type": "string"}]},
                "q\"\n": {"enum": ["a\"b\\c", 2, null]},
            }}),
        )])
        .unwrap();
        assert!(g.contains(r#""\"x\"" ws ":" ws value"#), "{g}");
        assert!(g.contains(r#""\"y\"" ws ":" ws value"#), "{g}");
        assert!(
            g.contains(r#""\"q\\\"\\n\"" ws ":" ws ("\"a\\\"b\\\\c\"" ws | "2" ws | "null" ws)"#),
            "{g}"
        );
    }
}
