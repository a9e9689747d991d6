//! Plain components: a component written for another host, exporting
//! functions in a WIT world of its own (no `toolhost:plugin` contract, no
//! SDK), loaded as a set of tools. Each exported function (at the top of
//! the world, or in an exported interface) is one tool:
//!
//! - its **name** is the function's (`convert`), or `INTERFACE_FUNCTION`
//!   for a function of an exported interface (`units_to-celsius`);
//! - its **arguments** are an object with one property per parameter,
//!   whose JSON Schema is derived from the WIT type ([`schema_of`]):
//!   records are objects, variants `{"case": payload}` (or the case's
//!   name alone when it has none), enums and flags strings, options a
//!   value or `null`, lists and tuples arrays, results `{"ok": …}` or
//!   `{"err": …}`;
//! - its **result** maps back the same way ([`json_of`]); a function
//!   returning `result<T, E>` fails the call with `E` when it is `err`;
//! - its **description** is the WIT doc comment of the function, when the
//!   WIT is beside the component (`NAME.wit`, see `docs.rs`), else its
//!   signature.
//!
//! A function whose parameters or results hold a resource, a future or a
//! stream is not a tool (there is no JSON for a handle); the load says so.
//! Every call passes the same gate as a plugin's: the component is
//! instantiated fresh in a sandbox with WASI and its grants, nothing else.

use std::sync::Arc;

mod docs;
mod values;

use serde_json::Value;
use wasmtime::Engine;
use wasmtime::component::types::{ComponentFunc, ComponentItem, Type};
use wasmtime::component::{Component, ComponentExportIndex, Instance, InstancePre, Val};

pub(crate) use docs::WitDocs;
use values::{json_of, params_schema, unsupported, value_of};

use super::types::{Annotations, RawOutcome, RawToolSpec};
use crate::error::LoadError;
use crate::sandbox::SandboxState;

/// The most functions a load reports as not tools (a component may
/// export any number).
const MAX_SKIPPED: usize = 32;

/// Notes a function that is not a tool, up to [`MAX_SKIPPED`] of them.
fn skip(skipped: &mut Vec<(String, String)>, one: (String, String)) {
    if skipped.len() < MAX_SKIPPED {
        skipped.push(one);
    }
}

/// One exported function, as a tool.
pub(crate) struct PlainFunc {
    /// The tool's name.
    pub(crate) tool: String,
    /// Where it is exported: `["convert"]` or `["example:units/units@0.1.0", "to-celsius"]`.
    pub(crate) path: Vec<String>,
    index: ComponentExportIndex,
    ty: ComponentFunc,
    /// The tool's description (the WIT docs, or the signature).
    pub(crate) description: String,
    schema: Value,
}

/// Every function of a plain component that can be a tool, and the ones
/// that cannot (with why).
pub(crate) struct PlainExports {
    pub(crate) funcs: Vec<PlainFunc>,
    pub(crate) skipped: Vec<(String, String)>,
}

/// Whether an export is one of WASI's worlds' (`wasi:cli/run`,
/// `wasi:http/incoming-handler`): a command or a proxy, not the
/// component's own functions.
fn is_wasi(name: &str) -> bool {
    name.starts_with("wasi:")
}

/// Whether `component` is plain: it exports functions (other than WASI's)
/// and no `toolhost:plugin` interface.
pub(crate) fn is_plain(engine: &Engine, component: &Component) -> bool {
    let ty = component.component_type();
    let mut functions = false;
    for (name, export) in ty.exports(engine) {
        if name.starts_with(&format!("{}/", super::PACKAGE)) {
            return false;
        }
        if is_wasi(name) {
            continue;
        }
        match export.ty {
            ComponentItem::ComponentFunc(_) => functions = true,
            ComponentItem::ComponentInstance(instance) => {
                functions |= instance
                    .exports(engine)
                    .any(|(_, e)| matches!(e.ty, ComponentItem::ComponentFunc(_)));
            }
            _ => {}
        }
    }
    functions
}

impl PlainExports {
    /// Reads the functions `component` exports; `docs` gives a function's
    /// documentation by its export path, when the WIT is known.
    pub(crate) fn read(
        engine: &Engine,
        component: &Component,
        docs: &dyn Fn(&[String]) -> Option<String>,
    ) -> Result<PlainExports, LoadError> {
        let ty = component.component_type();
        let mut found: Vec<(Vec<String>, ComponentFunc)> = Vec::new();
        for (name, export) in ty.exports(engine) {
            if is_wasi(name) {
                continue;
            }
            match export.ty {
                ComponentItem::ComponentFunc(func) => found.push((vec![name.to_owned()], func)),
                ComponentItem::ComponentInstance(instance) => {
                    for (inner, export) in instance.exports(engine) {
                        if let ComponentItem::ComponentFunc(func) = export.ty {
                            found.push((vec![name.to_owned(), inner.to_owned()], func));
                        }
                    }
                }
                _ => {}
            }
        }
        let mut funcs: Vec<PlainFunc> = Vec::new();
        let mut skipped = Vec::new();
        for (path, func) in found {
            let shown = path.join("#");
            if funcs.len() >= crate::plugin::MAX_TOOLS {
                skip(
                    &mut skipped,
                    (shown, "past the most tools one plugin may have".to_owned()),
                );
                continue;
            }
            let schema = match params_schema(&func) {
                Ok(schema) => schema,
                Err(why) => {
                    skip(&mut skipped, (shown, why));
                    continue;
                }
            };
            if let Some(why) = func.results().find_map(|t| unsupported(&t, 0)) {
                skip(&mut skipped, (shown, why));
                continue;
            }
            let mut index: Option<ComponentExportIndex> = None;
            let mut missing = false;
            for name in &path {
                index = component.get_export_index(index.as_ref(), name.as_str());
                missing |= index.is_none();
            }
            let (Some(index), false) = (index, missing) else {
                skip(
                    &mut skipped,
                    (shown, "its export cannot be found".to_owned()),
                );
                continue;
            };
            let mut tool = tool_name(&path);
            let mut n = 2;
            while funcs.iter().any(|f| f.tool == tool) {
                tool = format!("{}_{n}", tool_name(&path));
                n += 1;
            }
            let description = docs(&path).unwrap_or_else(|| signature(&path, &func));
            funcs.push(PlainFunc {
                tool,
                path,
                index,
                ty: func,
                description,
                schema,
            });
        }
        if funcs.is_empty() {
            let why = skipped
                .iter()
                .map(|(f, why)| format!("`{f}`: {why}"))
                .collect::<Vec<_>>()
                .join("; ");
            return Err(LoadError::NotAPlugin(format!(
                "a plain component with no function that can be a tool ({why})"
            )));
        }
        Ok(PlainExports { funcs, skipped })
    }

    /// The tools, as a plugin's `describe()` would give them.
    pub(crate) fn specs(&self) -> Vec<RawToolSpec> {
        self.funcs
            .iter()
            .map(|f| RawToolSpec {
                name: f.tool.clone(),
                description: f.description.clone(),
                input_schema: f.schema.to_string(),
                output_schema: None,
                annotations: Annotations::default(),
            })
            .collect()
    }
}

/// A plain component linked with WASI only, ready to instantiate.
pub(crate) struct PlainPre {
    pre: InstancePre<SandboxState>,
    pub(crate) exports: Arc<PlainExports>,
}

/// An instantiated plain component.
pub(crate) struct PlainInstance {
    instance: Instance,
    exports: Arc<PlainExports>,
}

impl PlainPre {
    /// Links `component` with WASI and wasi:http (nothing of toolhost's),
    /// and an empty instance for each interface it imports for its types
    /// alone (`use types.{…}` makes one); any other import it needs and
    /// the host has not refuses the load, naming it.
    pub(crate) fn new(
        engine: &Engine,
        component: &Component,
        exports: PlainExports,
    ) -> Result<PlainPre, LoadError> {
        let link = |e: wasmtime::Error| LoadError::Link(format!("{e:#}"));
        let mut linker = super::wasi_linker(engine).map_err(link)?;
        let ty = component.component_type();
        for (name, import) in ty.imports(engine) {
            if let ComponentItem::ComponentInstance(instance) = import.ty {
                let types_only = instance
                    .exports(engine)
                    .all(|(_, e)| matches!(e.ty, ComponentItem::Type(_)));
                if types_only {
                    linker.instance(name).map_err(link)?;
                }
            }
        }
        let pre = linker.instantiate_pre(component).map_err(link)?;
        Ok(PlainPre {
            pre,
            exports: Arc::new(exports),
        })
    }

    pub(crate) async fn instantiate(
        &self,
        store: &mut wasmtime::Store<SandboxState>,
    ) -> wasmtime::Result<PlainInstance> {
        Ok(PlainInstance {
            instance: self.pre.instantiate_async(store).await?,
            exports: self.exports.clone(),
        })
    }
}

impl PlainInstance {
    pub(crate) fn describe(&self) -> Vec<RawToolSpec> {
        self.exports.specs()
    }

    /// Calls the function behind `tool` with `args` (a JSON object).
    pub(crate) async fn execute(
        &self,
        store: &mut wasmtime::Store<SandboxState>,
        tool: &str,
        args: &str,
    ) -> wasmtime::Result<RawOutcome> {
        let Some(func) = self.exports.funcs.iter().find(|f| f.tool == tool) else {
            return Ok(RawOutcome::Failed(format!(
                "no function is the tool `{tool}`"
            )));
        };
        let args: Value = match serde_json::from_str(args) {
            Ok(args) => args,
            Err(e) => return Ok(RawOutcome::InvalidArguments(format!("not JSON: {e}"))),
        };
        let mut params = Vec::new();
        for (name, ty) in func.ty.params() {
            let given = args.get(name).unwrap_or(&Value::Null);
            match value_of(&ty, given, 0) {
                Ok(v) => params.push(v),
                Err(why) => {
                    return Ok(RawOutcome::InvalidArguments(format!("`{name}`: {why}")));
                }
            }
        }
        let Some(callee) = self.instance.get_func(&mut *store, func.index) else {
            return Ok(RawOutcome::Failed(format!(
                "the component has no function `{}`",
                func.path.join("#")
            )));
        };
        let mut results = vec![Val::Bool(false); func.ty.results().len()];
        callee
            .call_async(&mut *store, &params, &mut results)
            .await?;
        Ok(outcome(results))
    }
}

/// What the results say: one `result<T, E>` is the call's success or
/// failure; anything else is the output.
fn outcome(results: Vec<Val>) -> RawOutcome {
    let value = match <[Val; 1]>::try_from(results) {
        Ok([Val::Result(Err(error))]) => {
            let message = match error.map(|e| json_of(&e)) {
                Some(Value::String(s)) => s,
                Some(other) => other.to_string(),
                None => "the function returned an error".to_owned(),
            };
            return RawOutcome::Failed(message);
        }
        Ok([Val::Result(Ok(value))]) => value.map_or(Value::Null, |v| json_of(&v)),
        Ok([one]) => json_of(&one),
        Err(none) if none.is_empty() => Value::Null,
        Err(many) => Value::Array(many.iter().map(json_of).collect()),
    };
    let output = match &value {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    };
    let structured = matches!(value, Value::Object(_)).then(|| value.to_string());
    RawOutcome::Ok {
        output,
        details: None,
        structured,
        content: Vec::new(),
    }
}

/// `units_to-celsius` for `["example:units/units@0.1.0", "to-celsius"]`,
/// `convert` for `["convert"]`, kept to the tool name's characters.
fn tool_name(path: &[String]) -> String {
    let short = |name: &str| -> String {
        let name = name.rsplit('/').next().unwrap_or(name);
        name.split('@').next().unwrap_or(name).to_owned()
    };
    let joined = match path {
        [func] => short(func),
        [interface, func] => format!("{}_{}", short(interface), func),
        _ => path.join("_"),
    };
    let mut name: String = joined
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    // Room for a `_N` suffix within the 64 characters of a tool's name.
    name.truncate(58);
    if name.is_empty() {
        name.push_str("function");
    }
    name
}

/// `convert(value: f64, unit: enum) -> result`, when no docs are known.
fn signature(path: &[String], func: &ComponentFunc) -> String {
    let params: Vec<String> = func
        .params()
        .map(|(name, ty)| format!("{name}: {}", type_name(&ty)))
        .collect();
    let results: Vec<String> = func.results().map(|t| type_name(&t)).collect();
    let arrow = if results.is_empty() {
        String::new()
    } else {
        format!(" -> {}", results.join(", "))
    };
    format!(
        "`{}({}){arrow}`, exported by a plain WebAssembly component",
        path.last().map_or("", String::as_str),
        params.join(", ")
    )
}

fn type_name(ty: &Type) -> String {
    match ty {
        Type::Bool => "bool".into(),
        Type::S8 => "s8".into(),
        Type::U8 => "u8".into(),
        Type::S16 => "s16".into(),
        Type::U16 => "u16".into(),
        Type::S32 => "s32".into(),
        Type::U32 => "u32".into(),
        Type::S64 => "s64".into(),
        Type::U64 => "u64".into(),
        Type::Float32 => "f32".into(),
        Type::Float64 => "f64".into(),
        Type::Char => "char".into(),
        Type::String => "string".into(),
        Type::List(l) => format!("list<{}>", type_name(&l.ty())),
        Type::Option(o) => format!("option<{}>", type_name(&o.ty())),
        Type::Record(_) => "record".into(),
        Type::Tuple(_) => "tuple".into(),
        Type::Variant(_) => "variant".into(),
        Type::Enum(_) => "enum".into(),
        Type::Result(_) => "result".into(),
        Type::Flags(_) => "flags".into(),
        _ => "resource".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_is_named_for_its_function_and_interface_within_the_name_rules() {
        assert_eq!(tool_name(&["convert".into()]), "convert");
        assert_eq!(
            tool_name(&["example:units/units@0.1.0".into(), "to-celsius".into()]),
            "units_to-celsius"
        );
        assert_eq!(tool_name(&["a.b c".into()]), "a_b_c");
        assert!(tool_name(&["x".repeat(200)]).len() <= 64);
    }

    #[test]
    fn a_result_err_fails_the_call_and_an_ok_is_its_output() {
        match outcome(vec![Val::Result(Err(Some(Box::new(Val::String(
            "no".into(),
        )))))]) {
            RawOutcome::Failed(m) => assert_eq!(m, "no"),
            other => panic!("{other:?}"),
        }
        match outcome(vec![Val::Result(Ok(Some(Box::new(Val::Float64(2.5)))))]) {
            RawOutcome::Ok { output, .. } => assert_eq!(output, "2.5"),
            other => panic!("{other:?}"),
        }
        match outcome(vec![Val::Record(vec![("a".into(), Val::U8(1))])]) {
            RawOutcome::Ok {
                output, structured, ..
            } => {
                assert_eq!(output, r#"{"a":1}"#);
                assert_eq!(structured.as_deref(), Some(r#"{"a":1}"#));
            }
            other => panic!("{other:?}"),
        }
    }
}
