//! The floor a sandboxed call is built on, for the benchmarks: bare
//! wasmtime, with none of toolhost's pipeline. [`BareWasmtime::call`] does
//! what any host of a component does for one call — a new [`Store`] with a
//! WASI context that grants nothing, `InstancePre::instantiate_async` of the
//! plugin's component (already linked, on the runtime's own engine and
//! pooling allocator), one `execute` export call, the store dropped — and
//! nothing else: no lookup, validation, policy, hooks, log capture or result
//! checks. The plugin's memory and time limits hold as wasmtime enforces
//! them (a limiter, an epoch deadline that traps), so even this way a
//! hostile guest cannot run or grow without end.
//!
//! The benchmarks report toolhost's fresh call as a ratio to this floor
//! (what toolhost adds) and the floor as a ratio to native code (what the
//! machine's memory system charges for a fresh sandbox), so that figures
//! travel between machines (`docs/benchmarks.md`).
//!
//! ```no_run
//! # async fn f(runtime: toolhost_runtime::Runtime) {
//! let floor = runtime.bare_wasmtime("calc").expect("calc is a component plugin");
//! let output = floor.call("calculate", r#"{"expression":"2*(3+4)"}"#).await.unwrap();
//! assert_eq!(output, "14");
//! # }
//! ```

use std::sync::Arc;

use wasmtime::Engine;

use crate::api::{Linked, RawContext, RawOutcome};
use crate::plugin::Plugin;
use crate::runtime::Runtime;
use crate::sandbox::bare_store;

/// One plugin's component on the runtime's engine, called the bare way
/// (see the module's documentation). Not part of the stable API: it exists
/// for the benchmarks' floor rows.
#[doc(hidden)]
pub struct BareWasmtime {
    engine: Engine,
    plugin: Arc<Plugin>,
}

impl BareWasmtime {
    /// Instantiates the component in a new store, calls `execute(tool,
    /// args)` and drops the store. Returns the tool's output, or the
    /// tool's error message as `Err`.
    pub async fn call(&self, tool: &str, args: &str) -> Result<String, String> {
        let Linked::Tool(pre) = &self.plugin.pre else {
            return Err("not a tool component".into());
        };
        let mut store = bare_store(&self.engine, self.plugin.sandbox.clone());
        let instance = pre
            .instantiate(&mut store)
            .await
            .map_err(|e| e.to_string())?;
        let cx = RawContext {
            call_id: "floor",
            session_id: None,
            agent: None,
        };
        match instance
            .execute(&mut store, cx, tool, args)
            .await
            .map_err(|e| e.to_string())?
        {
            RawOutcome::Ok { output, .. } => Ok(output),
            RawOutcome::InvalidArguments(m) | RawOutcome::Failed(m) => Err(m),
            RawOutcome::InvalidContent(e) => Err(e.to_string()),
        }
    }
}

impl Runtime {
    /// The bare-wasmtime floor for component plugin `plugin` (`None` when no
    /// such component plugin is loaded); see [`BareWasmtime`].
    #[doc(hidden)]
    pub fn bare_wasmtime(&self, plugin: &str) -> Option<BareWasmtime> {
        let registry = self.inner.catalog.registry();
        let plugin = registry.plugins.iter().find(|p| p.name == plugin)?.clone();
        matches!(plugin.pre, Linked::Tool(_)).then(|| BareWasmtime {
            engine: self.inner.pool.engine().clone(),
            plugin,
        })
    }
}
