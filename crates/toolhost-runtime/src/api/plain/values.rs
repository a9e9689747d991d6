//! WIT values and JSON: the JSON Schema of a WIT type ([`schema_of`]),
//! a JSON argument as a checked WIT value ([`value_of`]) and a WIT value
//! as JSON ([`json_of`]).

use serde_json::{Map, Value, json};
use wasmtime::component::Val;
use wasmtime::component::types::{ComponentFunc, Type};

/// How deep a WIT type may nest for its schema and its values (records in
/// lists in variants …): deeper ones are not tools.
const MAX_DEPTH: usize = 32;

/// The most elements of one list a call's arguments may carry into the
/// sandbox (the request's own byte limit bounds it first).
const MAX_LIST: usize = 1 << 20;

/// Why `ty` cannot cross as JSON, if it cannot.
pub(crate) fn unsupported(ty: &Type, depth: usize) -> Option<String> {
    if depth > MAX_DEPTH {
        return Some(format!("its types nest deeper than {MAX_DEPTH}"));
    }
    let inner = |t: &Type| unsupported(t, depth + 1);
    match ty {
        Type::Own(_) | Type::Borrow(_) => Some("it takes or returns a resource".into()),
        Type::Future(_) | Type::Stream(_) | Type::ErrorContext => {
            Some("it takes or returns a future, stream or error context".into())
        }
        Type::List(l) => inner(&l.ty()),
        Type::FixedLengthList(l) => inner(&l.ty()),
        Type::Map(m) => inner(&m.key()).or_else(|| inner(&m.value())),
        Type::Option(o) => inner(&o.ty()),
        Type::Record(r) => r.fields().find_map(|f| inner(&f.ty)),
        Type::Tuple(t) => t.types().find_map(|t| inner(&t)),
        Type::Variant(v) => v.cases().find_map(|c| c.ty.as_ref().and_then(inner)),
        Type::Result(r) => r
            .ok()
            .as_ref()
            .and_then(inner)
            .or_else(|| r.err().as_ref().and_then(inner)),
        _ => None,
    }
}

/// The arguments' schema: one property per parameter, all required but
/// the `option`s.
pub(crate) fn params_schema(func: &ComponentFunc) -> Result<Value, String> {
    let mut properties = Map::new();
    let mut required = Vec::new();
    for (name, ty) in func.params() {
        if let Some(why) = unsupported(&ty, 0) {
            return Err(why);
        }
        if !matches!(ty, Type::Option(_)) {
            required.push(Value::from(name));
        }
        properties.insert(name.to_owned(), schema_of(&ty));
    }
    Ok(json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    }))
}

/// The JSON Schema of a WIT type (for a type [`unsupported`] passed).
pub(crate) fn schema_of(ty: &Type) -> Value {
    let int = |min: i128, max: i128| json!({"type": "integer", "minimum": min, "maximum": max});
    match ty {
        Type::Bool => json!({"type": "boolean"}),
        Type::S8 => int(i8::MIN.into(), i8::MAX.into()),
        Type::U8 => int(0, u8::MAX.into()),
        Type::S16 => int(i16::MIN.into(), i16::MAX.into()),
        Type::U16 => int(0, u16::MAX.into()),
        Type::S32 => int(i32::MIN.into(), i32::MAX.into()),
        Type::U32 => int(0, u32::MAX.into()),
        Type::S64 => int(i64::MIN.into(), i64::MAX.into()),
        Type::U64 => int(0, u64::MAX.into()),
        Type::Float32 | Type::Float64 => json!({"type": "number"}),
        Type::Char => json!({"type": "string", "minLength": 1, "maxLength": 1}),
        Type::String => json!({"type": "string"}),
        Type::List(l) => json!({"type": "array", "items": schema_of(&l.ty())}),
        Type::FixedLengthList(l) => {
            json!({"type": "array", "items": schema_of(&l.ty()), "minItems": l.len(), "maxItems": l.len()})
        }
        Type::Map(m) => json!({
            "type": "array",
            "items": {"type": "array", "prefixItems": [schema_of(&m.key()), schema_of(&m.value())], "minItems": 2, "maxItems": 2},
        }),
        Type::Record(r) => {
            let mut properties = Map::new();
            let mut required = Vec::new();
            for field in r.fields() {
                if !matches!(field.ty, Type::Option(_)) {
                    required.push(Value::from(field.name));
                }
                properties.insert(field.name.to_owned(), schema_of(&field.ty));
            }
            json!({"type": "object", "properties": properties, "required": required, "additionalProperties": false})
        }
        Type::Tuple(t) => {
            let items: Vec<Value> = t.types().map(|t| schema_of(&t)).collect();
            let n = items.len();
            json!({"type": "array", "prefixItems": items, "minItems": n, "maxItems": n})
        }
        Type::Variant(v) => {
            let cases: Vec<Value> = v
                .cases()
                .map(|case| match &case.ty {
                    Some(payload) => json!({
                        "type": "object",
                        "properties": {case.name: schema_of(payload)},
                        "required": [case.name],
                        "additionalProperties": false,
                    }),
                    None => json!({"const": case.name}),
                })
                .collect();
            json!({"oneOf": cases})
        }
        Type::Enum(e) => json!({"type": "string", "enum": e.names().collect::<Vec<_>>()}),
        Type::Option(o) => json!({"anyOf": [schema_of(&o.ty()), {"type": "null"}]}),
        Type::Result(r) => {
            let side = |name: &str, ty: Option<Type>| {
                json!({
                    "type": "object",
                    "properties": {name: ty.as_ref().map_or(json!({"type": "null"}), schema_of)},
                    "required": [name],
                    "additionalProperties": false,
                })
            };
            json!({"oneOf": [side("ok", r.ok()), side("err", r.err())]})
        }
        Type::Flags(f) => json!({
            "type": "array",
            "items": {"type": "string", "enum": f.names().collect::<Vec<_>>()},
            "uniqueItems": true,
        }),
        _ => json!(false),
    }
}

/// A JSON argument as the WIT value of `ty`, checked (integers in range,
/// one character for a `char`, known cases and flags).
pub(crate) fn value_of(ty: &Type, value: &Value, depth: usize) -> Result<Val, String> {
    if depth > MAX_DEPTH {
        return Err(format!("nested deeper than {MAX_DEPTH}"));
    }
    let int = |value: &Value| -> Result<i128, String> {
        value
            .as_i64()
            .map(i128::from)
            .or_else(|| value.as_u64().map(i128::from))
            .ok_or_else(|| format!("expected an integer, got {value}"))
    };
    macro_rules! ranged {
        ($variant:ident, $t:ty) => {{
            let n = int(value)?;
            <$t>::try_from(n)
                .map(Val::$variant)
                .map_err(|_| format!("{n} is out of range for {}", stringify!($t)))
        }};
    }
    let next = |ty: &Type, value: &Value| value_of(ty, value, depth + 1);
    match ty {
        Type::Bool => value
            .as_bool()
            .map(Val::Bool)
            .ok_or_else(|| format!("expected true or false, got {value}")),
        Type::S8 => ranged!(S8, i8),
        Type::U8 => ranged!(U8, u8),
        Type::S16 => ranged!(S16, i16),
        Type::U16 => ranged!(U16, u16),
        Type::S32 => ranged!(S32, i32),
        Type::U32 => ranged!(U32, u32),
        Type::S64 => ranged!(S64, i64),
        Type::U64 => ranged!(U64, u64),
        #[allow(clippy::cast_possible_truncation)]
        Type::Float32 => value
            .as_f64()
            .map(|f| Val::Float32(f as f32))
            .ok_or_else(|| format!("expected a number, got {value}")),
        Type::Float64 => value
            .as_f64()
            .map(Val::Float64)
            .ok_or_else(|| format!("expected a number, got {value}")),
        Type::Char => {
            let text = value
                .as_str()
                .ok_or_else(|| format!("expected one character, got {value}"))?;
            let mut chars = text.chars();
            match (chars.next(), chars.next()) {
                (Some(c), None) => Ok(Val::Char(c)),
                _ => Err(format!("expected one character, got {value}")),
            }
        }
        Type::String => value
            .as_str()
            .map(|s| Val::String(s.to_owned()))
            .ok_or_else(|| format!("expected a string, got {value}")),
        Type::List(l) => {
            let ty = l.ty();
            array(value)?
                .iter()
                .map(|v| next(&ty, v))
                .collect::<Result<_, _>>()
                .map(Val::List)
        }
        Type::FixedLengthList(l) => {
            let ty = l.ty();
            let items = array(value)?;
            if u32::try_from(items.len()).ok() != Some(l.len()) {
                return Err(format!("expected {} elements", l.len()));
            }
            items
                .iter()
                .map(|v| next(&ty, v))
                .collect::<Result<_, _>>()
                .map(Val::FixedLengthList)
        }
        Type::Map(m) => {
            let (k, v) = (m.key(), m.value());
            array(value)?
                .iter()
                .map(|pair| match pair.as_array().map(Vec::as_slice) {
                    Some([key, val]) => Ok((next(&k, key)?, next(&v, val)?)),
                    _ => Err(format!("expected a [key, value] pair, got {pair}")),
                })
                .collect::<Result<_, _>>()
                .map(Val::Map)
        }
        Type::Record(r) => {
            let object = value
                .as_object()
                .ok_or_else(|| format!("expected an object, got {value}"))?;
            if let Some(extra) = object.keys().find(|k| !r.fields().any(|f| f.name == *k)) {
                return Err(format!("no field `{extra}`"));
            }
            r.fields()
                .map(|f| {
                    let given = object.get(f.name).unwrap_or(&Value::Null);
                    next(&f.ty, given)
                        .map(|v| (f.name.to_owned(), v))
                        .map_err(|why| format!("`{}`: {why}", f.name))
                })
                .collect::<Result<_, _>>()
                .map(Val::Record)
        }
        Type::Tuple(t) => {
            let items = array(value)?;
            if items.len() != t.types().len() {
                return Err(format!("expected {} elements", t.types().len()));
            }
            t.types()
                .zip(items)
                .map(|(ty, v)| next(&ty, v))
                .collect::<Result<_, _>>()
                .map(Val::Tuple)
        }
        Type::Variant(v) => {
            let (name, payload) = one_case(value)?;
            let case = v
                .cases()
                .find(|c| c.name == name)
                .ok_or_else(|| format!("no case `{name}`"))?;
            let payload = match (&case.ty, payload) {
                (Some(ty), Some(p)) => Some(Box::new(next(ty, p)?)),
                (None, None | Some(Value::Null)) => None,
                (Some(_), None) => return Err(format!("case `{name}` needs a value")),
                (None, Some(_)) => return Err(format!("case `{name}` takes no value")),
            };
            Ok(Val::Variant(name.to_owned(), payload))
        }
        Type::Enum(e) => {
            let name = value
                .as_str()
                .ok_or_else(|| format!("expected a string, got {value}"))?;
            if e.names().any(|n| n == name) {
                Ok(Val::Enum(name.to_owned()))
            } else {
                Err(format!(
                    "`{name}` is none of {}",
                    e.names().collect::<Vec<_>>().join(", ")
                ))
            }
        }
        Type::Option(o) => match value {
            Value::Null => Ok(Val::Option(None)),
            v => Ok(Val::Option(Some(Box::new(next(&o.ty(), v)?)))),
        },
        Type::Result(r) => {
            let (name, payload) = one_case(value)?;
            let side = |ty: Option<Type>| -> Result<Option<Box<Val>>, String> {
                match (ty, payload) {
                    (Some(ty), Some(p)) => Ok(Some(Box::new(next(&ty, p)?))),
                    (None, None | Some(Value::Null)) => Ok(None),
                    (Some(_), None) => Err(format!("`{name}` needs a value")),
                    (None, Some(_)) => Err(format!("`{name}` takes no value")),
                }
            };
            match name {
                "ok" => Ok(Val::Result(Ok(side(r.ok())?))),
                "err" => Ok(Val::Result(Err(side(r.err())?))),
                other => Err(format!("expected `ok` or `err`, got `{other}`")),
            }
        }
        Type::Flags(f) => {
            let mut set = Vec::new();
            for flag in array(value)? {
                let name = flag
                    .as_str()
                    .ok_or_else(|| format!("expected a flag's name, got {flag}"))?;
                if !f.names().any(|n| n == name) {
                    return Err(format!("no flag `{name}`"));
                }
                if !set.iter().any(|s: &String| s == name) {
                    set.push(name.to_owned());
                }
            }
            Ok(Val::Flags(set))
        }
        _ => Err("a resource, future or stream has no JSON form".to_owned()),
    }
}

/// `value` as an array of at most [`MAX_LIST`] elements.
fn array(value: &Value) -> Result<&Vec<Value>, String> {
    let items = value
        .as_array()
        .ok_or_else(|| format!("expected an array, got {value}"))?;
    if items.len() > MAX_LIST {
        return Err(format!("more than {MAX_LIST} elements"));
    }
    Ok(items)
}

/// `{"case": payload}` or `"case"`: the case's name and its payload.
fn one_case(value: &Value) -> Result<(&str, Option<&Value>), String> {
    match value {
        Value::String(name) => Ok((name, None)),
        Value::Object(object) if object.len() == 1 => {
            let (name, payload) = object.iter().next().ok_or("an empty object")?;
            Ok((name, Some(payload)))
        }
        other => Err(format!(
            "expected {{\"CASE\": value}} or \"CASE\", got {other}"
        )),
    }
}

/// A WIT value as JSON (the inverse of [`value_of`]; a float that is not a
/// number is `null`).
pub(crate) fn json_of(value: &Val) -> Value {
    match value {
        Val::Bool(b) => json!(b),
        Val::S8(n) => json!(n),
        Val::U8(n) => json!(n),
        Val::S16(n) => json!(n),
        Val::U16(n) => json!(n),
        Val::S32(n) => json!(n),
        Val::U32(n) => json!(n),
        Val::S64(n) => json!(n),
        Val::U64(n) => json!(n),
        Val::Float32(f) => {
            serde_json::Number::from_f64(f64::from(*f)).map_or(Value::Null, Value::Number)
        }
        Val::Float64(f) => serde_json::Number::from_f64(*f).map_or(Value::Null, Value::Number),
        Val::Char(c) => json!(c.to_string()),
        Val::String(s) => json!(s),
        Val::List(items) | Val::Tuple(items) | Val::FixedLengthList(items) => {
            Value::Array(items.iter().map(json_of).collect())
        }
        Val::Map(pairs) => Value::Array(
            pairs
                .iter()
                .map(|(k, v)| json!([json_of(k), json_of(v)]))
                .collect(),
        ),
        Val::Record(fields) => Value::Object(
            fields
                .iter()
                .map(|(name, v)| (name.clone(), json_of(v)))
                .collect(),
        ),
        Val::Variant(name, None) | Val::Enum(name) => json!(name),
        Val::Variant(name, Some(payload)) => json!({name: json_of(payload)}),
        Val::Option(None) => Value::Null,
        Val::Option(Some(v)) => json_of(v),
        Val::Result(Ok(v)) => json!({"ok": v.as_ref().map_or(Value::Null, |v| json_of(v))}),
        Val::Result(Err(v)) => json!({"err": v.as_ref().map_or(Value::Null, |v| json_of(v))}),
        Val::Flags(names) => json!(names),
        Val::Resource(_) | Val::Future(_) | Val::Stream(_) | Val::ErrorContext(_) => Value::Null,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_map_to_json_and_floats_that_are_not_numbers_to_null() {
        assert_eq!(json_of(&Val::Float64(f64::NAN)), Value::Null);
        assert_eq!(json_of(&Val::Char('é')), json!("é"));
        assert_eq!(
            json_of(&Val::Variant(
                "celsius".into(),
                Some(Box::new(Val::Float32(1.5)))
            )),
            json!({"celsius": 1.5})
        );
        assert_eq!(json_of(&Val::Option(None)), Value::Null);
        assert_eq!(json_of(&Val::Flags(vec!["bold".into()])), json!(["bold"]));
    }
}
