//! toolhost plugin `calc`: evaluates arithmetic expressions.

mod expr;

use toolhost_sdk::prelude::*;

/// Evaluates an arithmetic expression and returns the number. Supports the
/// operators `+ - * /` and `^` (power, right-associative), unary minus,
/// parentheses, the functions sqrt, abs, sin, cos, tan, ln, log10, exp,
/// floor, ceil, round, min and max (angles in radians), and the constants
/// pi and e.
#[derive(Deserialize, JsonSchema)]
struct Calculate {
    // No example numbers in this description: small models copy them into
    // their calls instead of the user's numbers.
    /// The arithmetic expression to evaluate, written with the numbers the
    /// user gave.
    expression: String,
}

/// The result of a calculation.
#[derive(Serialize, JsonSchema)]
struct Calculation {
    /// The value of the expression.
    value: f64,
}

fn calculate(_cx: &Context, args: Calculate) -> Result<Structured<Calculation>, ToolError> {
    let value = expr::evaluate(&args.expression).map_err(|e| {
        if e.is_syntax() {
            ToolError::invalid_arguments(e)
        } else {
            ToolError::failed(e)
        }
    })?;
    let output = Output::new(expr::format_number(value))
        .with_details(json!({ "expression": args.expression, "value": value }));
    Ok(Structured::new(output, Calculation { value }))
}

toolhost_sdk::plugin! {
    tools: [
        calculate(Calculate) read_only idempotent,
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(args: &str) -> Result<Output, ToolError> {
        plugin().call(&Context::default(), "calculate", args)
    }

    #[test]
    fn plugin_is_valid() {
        plugin().validate().unwrap();
        let specs = plugin().specs();
        assert_eq!(specs.len(), 1);
        assert_eq!(specs[0].name, "calculate");
        assert!(
            specs[0]
                .description
                .starts_with("Evaluates an arithmetic expression")
        );
        assert!(specs[0].annotations.read_only && specs[0].annotations.idempotent);
        assert_eq!(specs[0].input_schema["required"], json!(["expression"]));
        let output_schema = specs[0].output_schema.as_ref().unwrap();
        assert_eq!(output_schema["properties"]["value"]["type"], "number");
        assert_eq!(output_schema["required"], json!(["value"]));
    }

    #[test]
    fn evaluates() {
        let out = call(r#"{"expression":"2*(3+4)"}"#).unwrap();
        assert_eq!(out.output(), "14");
        assert_eq!(
            out.details_json(),
            Some(json!({"expression": "2*(3+4)", "value": 14.0}))
        );
        assert_eq!(out.structured_json(), Some(json!({"value": 14.0})));
        assert_eq!(call(r#"{"expression":"1/4"}"#).unwrap().output(), "0.25");
    }

    #[test]
    fn errors_map_to_the_right_kind() {
        assert_eq!(
            call(r#"{"expression":"1+2)"}"#).unwrap_err(),
            ToolError::InvalidArguments("unexpected ')' at position 4".into())
        );
        assert_eq!(
            call(r#"{"expression":"1/0"}"#).unwrap_err(),
            ToolError::Failed("division by zero".into())
        );
        assert!(call(r#"{"expr":"1"}"#).unwrap_err().is_invalid_arguments());
    }
}
