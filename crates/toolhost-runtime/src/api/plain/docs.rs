//! A plain component's WIT doc comments, from the WIT beside it
//! (`NAME.wit` next to `NAME.wasm`): a component binary keeps its types but
//! not its docs, so the descriptions come from the source its author
//! ships. Parsed with `wit-parser` (the WIT tools' own parser); bounded in
//! size; a file that does not parse leaves the signatures as descriptions
//! and says why.

use std::collections::HashMap;
use std::path::Path;

/// The largest WIT file read for docs.
const MAX_WIT_BYTES: u64 = 1 << 20;

/// The docs of each exported function, by its export path (`["convert"]`,
/// `["example:units/units@0.1.0", "to-celsius"]`).
#[derive(Debug, Default)]
pub(crate) struct WitDocs {
    by_path: HashMap<Vec<String>, String>,
}

impl WitDocs {
    /// The docs in `wit` (a WIT file), for its one world (or the world
    /// named like the component's file, when there are several). `Ok`
    /// with no docs when there is no such file.
    pub(crate) fn beside(wasm: &Path) -> Result<WitDocs, String> {
        let wit = wasm.with_extension("wit");
        let Ok(meta) = std::fs::metadata(&wit) else {
            return Ok(WitDocs::default());
        };
        if meta.len() > MAX_WIT_BYTES {
            return Err(format!(
                "{} is over {MAX_WIT_BYTES} bytes; its docs are not read",
                wit.display()
            ));
        }
        let text = std::fs::read_to_string(&wit).map_err(|e| format!("{}: {e}", wit.display()))?;
        let stem = wasm.file_stem().and_then(|s| s.to_str()).unwrap_or("");
        WitDocs::parse(&wit, &text, stem).map_err(|e| format!("{}: {e}", wit.display()))
    }

    fn parse(path: &Path, text: &str, stem: &str) -> Result<WitDocs, String> {
        use wit_parser::{Resolve, WorldItem};
        let mut resolve = Resolve::default();
        let package = resolve.push_str(path, text).map_err(|e| format!("{e:#}"))?;
        let world = resolve
            .select_world(&[package], None)
            .or_else(|_| resolve.select_world(&[package], Some(stem)))
            .map_err(|e| format!("{e:#}"))?;
        let mut by_path = HashMap::new();
        for (key, item) in &resolve.worlds[world].exports {
            let name = resolve.name_world_key(key);
            match item {
                WorldItem::Function(func) => {
                    if let Some(docs) = &func.docs.contents {
                        by_path.insert(vec![name], docs.trim().to_owned());
                    }
                }
                WorldItem::Interface { id, .. } => {
                    for (func_name, func) in &resolve.interfaces[*id].functions {
                        if let Some(docs) = &func.docs.contents {
                            by_path.insert(
                                vec![name.clone(), func_name.clone()],
                                docs.trim().to_owned(),
                            );
                        }
                    }
                }
                WorldItem::Type { .. } => {}
            }
        }
        Ok(WitDocs { by_path })
    }

    /// The docs of the function at `path`.
    pub(crate) fn of(&self, path: &[String]) -> Option<String> {
        self.by_path.get(path).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn docs_are_found_for_world_and_interface_functions_by_export_path() {
        let wit = r#"
package example:units@0.1.0;

interface units {
    /// Degrees Fahrenheit as Celsius.
    to-celsius: func(f: f64) -> f64;
}

world converter {
    /// Adds two numbers.
    export add: func(a: s32, b: s32) -> s32;
    export units;
}
"#;
        let docs = WitDocs::parse(Path::new("x.wit"), wit, "x").unwrap();
        assert_eq!(
            docs.of(&["add".into()]).as_deref(),
            Some("Adds two numbers.")
        );
        assert_eq!(
            docs.of(&["example:units/units@0.1.0".into(), "to-celsius".into()])
                .as_deref(),
            Some("Degrees Fahrenheit as Celsius.")
        );
        assert!(WitDocs::parse(Path::new("x.wit"), "not wit", "x").is_err());
    }
}
