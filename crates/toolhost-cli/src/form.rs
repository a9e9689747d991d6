//! A form an MCP server asks the person at the terminal to fill in during
//! a call (elicitation, form mode): the server's message, then one
//! question per field with its default in brackets, which an empty answer
//! takes (SEP-1034: the client fills in the defaults). A field left empty
//! without a default is left out, unless it is required (then it is asked
//! again, three times at most). What the server wrote is shown escaped.
//!
//! ```text
//! ? the MCP server `up` (during `up__book`) asks: Which table?
//!   fill it in? [y]es / [n]o (decline) / [c]ancel: y
//!   seats (integer, how many) [2]:
//!   terrace (yes/no) [no]: y
//! ```

use serde_json::{Map, Value};

use crate::shown::printable;

/// The most fields asked about (a longer form is declined).
pub const MAX_FIELDS: usize = 50;
/// How often a required field is asked again before the form is cancelled.
pub const MAX_TRIES: usize = 3;

/// One field of a form.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    /// Its key in the answer.
    pub name: String,
    /// `string`, `integer`, `number` or `boolean`.
    pub kind: String,
    /// The values it may take (an enum), if listed.
    pub choices: Vec<String>,
    /// Its default, if the form gives one.
    pub default: Option<Value>,
    /// Whether it must be filled in.
    pub required: bool,
    /// Its title or description, for the question.
    pub label: Option<String>,
}

/// The fields of a form's schema (flat properties, as elicitation
/// allows), in the schema's order; `None` when it is not such a schema.
pub fn fields(schema: &Value) -> Option<Vec<Field>> {
    let properties = schema.get("properties")?.as_object()?;
    if properties.len() > MAX_FIELDS {
        return None;
    }
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut out = Vec::new();
    for (name, property) in properties {
        let kind = property
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("string")
            .to_owned();
        if !matches!(
            kind.as_str(),
            "string" | "integer" | "number" | "boolean" | "array"
        ) {
            return None;
        }
        // A multiple choice: its items' choices.
        let choosing = if kind == "array" {
            property.get("items")?
        } else {
            property
        };
        // `enum`, or `oneOf`/`anyOf` of `const`s (titled enums).
        let consts = |key: &str| {
            choosing.get(key).and_then(Value::as_array).map(|items| {
                items
                    .iter()
                    .filter_map(|i| i.get("const").and_then(Value::as_str).map(str::to_owned))
                    .collect::<Vec<_>>()
            })
        };
        let choices: Vec<String> = choosing
            .get("enum")
            .and_then(Value::as_array)
            .map(|e| {
                e.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .or_else(|| consts("oneOf"))
            .or_else(|| consts("anyOf"))
            .unwrap_or_default();
        if kind == "array" && choices.is_empty() {
            return None;
        }
        let label = ["title", "description"]
            .iter()
            .filter_map(|k| property.get(*k).and_then(Value::as_str))
            .next()
            .map(str::to_owned);
        out.push(Field {
            name: name.clone(),
            kind,
            choices,
            default: property.get("default").cloned(),
            required: required.contains(&name.as_str()),
            label,
        });
    }
    Some(out)
}

/// The question for `field`, on one line.
pub fn question(field: &Field) -> String {
    let mut about = vec![if field.kind == "boolean" {
        "yes/no".to_owned()
    } else if field.kind == "array" {
        format!(
            "any of {}, separated by commas",
            field
                .choices
                .iter()
                .map(|c| printable(c))
                .collect::<Vec<_>>()
                .join(", ")
        )
    } else if field.choices.is_empty() {
        field.kind.clone()
    } else {
        format!(
            "one of {}",
            field
                .choices
                .iter()
                .map(|c| printable(c))
                .collect::<Vec<_>>()
                .join(", ")
        )
    }];
    if let Some(label) = &field.label {
        about.push(printable(label));
    }
    if field.required {
        about.push("required".to_owned());
    }
    let default = match &field.default {
        Some(Value::Bool(b)) => format!(" [{}]", if *b { "yes" } else { "no" }),
        Some(Value::String(s)) => format!(" [{}]", printable(s)),
        Some(Value::Array(items)) => format!(
            " [{}]",
            printable(
                &items
                    .iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        ),
        Some(v) => format!(" [{}]", printable(&v.to_string())),
        None => String::new(),
    };
    format!(
        "  {} ({}){default}: ",
        printable(&field.name),
        about.join(", ")
    )
}

/// What an answer to `field` gives: `Ok(Some(value))`, `Ok(None)` when
/// it is left out, or why the answer does not fit.
pub fn value(field: &Field, answer: &str) -> Result<Option<Value>, String> {
    let answer = answer.trim();
    if answer.is_empty() {
        return match &field.default {
            Some(default) => Ok(Some(default.clone())),
            None if field.required => Err("this field is required".to_owned()),
            None => Ok(None),
        };
    }
    let value = match field.kind.as_str() {
        "boolean" => match answer.to_ascii_lowercase().as_str() {
            "y" | "yes" | "true" => Value::Bool(true),
            "n" | "no" | "false" => Value::Bool(false),
            _ => return Err("answer yes or no".to_owned()),
        },
        "integer" => Value::from(
            answer
                .parse::<i64>()
                .map_err(|_| "a whole number, please".to_owned())?,
        ),
        "number" => {
            let n = answer
                .parse::<f64>()
                .ok()
                .and_then(serde_json::Number::from_f64)
                .ok_or_else(|| "a number, please".to_owned())?;
            Value::Number(n)
        }
        "array" => {
            let chosen: Vec<&str> = answer
                .split(',')
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .collect();
            if chosen.iter().any(|c| !field.choices.iter().any(|f| f == c)) {
                return Err("not among the choices".to_owned());
            }
            return Ok(Some(Value::from(chosen)));
        }
        _ => Value::String(answer.to_owned()),
    };
    if !field.choices.is_empty()
        && !value
            .as_str()
            .is_some_and(|v| field.choices.iter().any(|c| c == v))
    {
        return Err("not one of the choices".to_owned());
    }
    Ok(Some(value))
}

/// The answer's content: each field's value, fields left out absent.
pub fn content(values: Vec<(String, Option<Value>)>) -> Map<String, Value> {
    values
        .into_iter()
        .filter_map(|(k, v)| v.map(|v| (k, v)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "User name", "default": "John Doe"},
                "age": {"type": "integer", "default": 30},
                "score": {"type": "number", "default": 95.5},
                "status": {"type": "string", "enum": ["active", "inactive"], "default": "active"},
                "verified": {"type": "boolean", "default": true},
                "nick": {"type": "string"},
                "email": {"type": "string"},
            },
            "required": ["email"],
        })
    }

    #[test]
    fn empty_answers_take_the_defaults_and_leave_out_optional_fields_without_one() {
        let fields = fields(&schema()).unwrap();
        let answers: Vec<_> = fields
            .iter()
            .filter(|f| f.name != "email")
            .map(|f| (f.name.clone(), value(f, "").unwrap()))
            .collect();
        let content = content(answers);
        assert_eq!(
            Value::Object(content),
            json!({"name": "John Doe", "age": 30, "score": 95.5, "status": "active", "verified": true})
        );
        let email = fields.iter().find(|f| f.name == "email").unwrap();
        assert!(
            value(email, " ").is_err(),
            "a required field without a default"
        );
    }

    #[test]
    fn answers_are_typed_and_checked_against_the_field() {
        let fields = fields(&schema()).unwrap();
        let field = |n: &str| fields.iter().find(|f| f.name == n).unwrap().clone();
        assert_eq!(value(&field("age"), "41").unwrap(), Some(json!(41)));
        assert!(value(&field("age"), "4.5").is_err());
        assert_eq!(value(&field("score"), "1.5").unwrap(), Some(json!(1.5)));
        assert_eq!(value(&field("verified"), "n").unwrap(), Some(json!(false)));
        assert!(value(&field("status"), "gone").is_err());
        assert_eq!(
            value(&field("status"), "inactive").unwrap(),
            Some(json!("inactive"))
        );
        let many = json!({"properties": {"fish": {"type": "array", "default": ["tuna"],
            "items": {"anyOf": [{"const": "tuna"}, {"const": "trout"}]}}}});
        let fish = super::fields(&many).unwrap().remove(0);
        assert_eq!(value(&fish, "").unwrap(), Some(json!(["tuna"])));
        assert_eq!(
            value(&fish, "trout, tuna").unwrap(),
            Some(json!(["trout", "tuna"]))
        );
        assert!(value(&fish, "shark").is_err());
        let q = question(&field("name"));
        assert!(q.contains("[John Doe]") && q.contains("User name"), "{q}");
    }

    #[test]
    fn a_question_escapes_what_the_server_wrote() {
        let schema =
            json!({"properties": {"a\u{1b}[2J": {"type": "string", "default": "x\u{9b}y"}}});
        let q = question(&fields(&schema).unwrap()[0]);
        assert!(!q.contains('\u{1b}') && !q.contains('\u{9b}'), "{q:?}");
    }

    #[test]
    fn nested_or_unknown_fields_are_not_a_form() {
        assert!(fields(&json!({"properties": {"a": {"type": "object"}}})).is_none());
        assert!(fields(&json!({"properties": {"a": {"type": "array"}}})).is_none());
        assert!(fields(&json!({"type": "object"})).is_none());
    }
}
