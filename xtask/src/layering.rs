//! `cargo xtask layering`: the house's layering, checked from the sources
//! (no build): no circle between the workspace's crates (their normal
//! dependencies), none between the modules of any one crate (their
//! `crate::`, `super::` and `self::` paths), and the seams that must stay
//! open ([`FORBIDDEN_CRATE_EDGES`], [`FORBIDDEN_MODULE_EDGES`]).
//!
//! A module's path into its own descendants (a `mod.rs` re-exporting its
//! children) is containment, not an import, and is not an edge; a child's
//! path up to its parent is. Test modules (`#[cfg(test)]` to the end of
//! the file) and comments are left out.
//!
//! `cargo xtask test` runs it before clippy: a circle fails the run with
//! the modules that form it.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

/// Crate dependencies that must never exist: `(from, to, why)`.
pub const FORBIDDEN_CRATE_EDGES: &[(&str, &str, &str)] = &[
    (
        "toolhost-runtime",
        "toolhost-agent",
        "the runtime knows nothing of models; toolhost-agent-runtime joins them",
    ),
    (
        "toolhost-agent",
        "toolhost-runtime",
        "the agent loop runs over a small tool trait; toolhost-agent-runtime joins them",
    ),
];

/// Module paths that must never exist within a crate: `(crate, from
/// module, to module, why)`; a module's descendants count as itself.
pub const FORBIDDEN_MODULE_EDGES: &[(&str, &str, &str, &str)] = &[
    (
        "toolhost-mcp",
        "client",
        "server",
        "the client and the server meet only in gateway.rs",
    ),
    (
        "toolhost-mcp",
        "server",
        "client",
        "the client and the server meet only in gateway.rs",
    ),
];

/// `cargo xtask layering`: every check over the workspace at `root`.
pub fn check(root: &Path) -> anyhow::Result<()> {
    let mut problems = crate_problems(root)?;
    for dir in crate_dirs(root)? {
        let name = crate_name(&dir)?;
        let graph = ModuleGraph::read(&dir.join("src"))?;
        for circle in graph.circles() {
            problems.push(format!(
                "{name}: the modules {} import each other in a circle",
                circle.join(", ")
            ));
        }
        for (krate, from, to, why) in FORBIDDEN_MODULE_EDGES {
            if *krate != name {
                continue;
            }
            for (a, b) in graph.edges_between(from, to) {
                problems.push(format!("{name}: `{a}` imports `{b}` ({why})"));
            }
        }
    }
    if problems.is_empty() {
        eprintln!("xtask: layering holds (no circle between crates or modules)");
        return Ok(());
    }
    for p in &problems {
        eprintln!("xtask: layering: {p}");
    }
    bail!("{} layering problem(s)", problems.len())
}

fn crate_dirs(root: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut dirs = Vec::new();
    for entry in fs::read_dir(root.join("crates")).context("reading crates/")? {
        let dir = entry?.path();
        if dir.join("Cargo.toml").is_file() && dir.join("src").is_dir() {
            dirs.push(dir);
        }
    }
    dirs.sort();
    Ok(dirs)
}

fn crate_name(dir: &Path) -> anyhow::Result<String> {
    let manifest: toml::Table = fs::read_to_string(dir.join("Cargo.toml"))?.parse()?;
    manifest
        .get("package")
        .and_then(|p| p.get("name"))
        .and_then(|n| n.as_str())
        .map(str::to_owned)
        .with_context(|| format!("{}: no package name", dir.display()))
}

/// The workspace crates a manifest depends on (normal dependencies, the
/// target-specific tables included; dev and build dependencies left out).
fn normal_dependencies(manifest: &toml::Table) -> BTreeSet<String> {
    let mut tables: Vec<&toml::Table> = manifest
        .get("dependencies")
        .and_then(|d| d.as_table())
        .into_iter()
        .collect();
    if let Some(targets) = manifest.get("target").and_then(|t| t.as_table()) {
        for target in targets.values() {
            if let Some(deps) = target.get("dependencies").and_then(|d| d.as_table()) {
                tables.push(deps);
            }
        }
    }
    tables
        .into_iter()
        .flat_map(|t| t.keys())
        .filter(|k| k.starts_with("toolhost-"))
        .cloned()
        .collect()
}

fn crate_problems(root: &Path) -> anyhow::Result<Vec<String>> {
    let mut deps = BTreeMap::new();
    for dir in crate_dirs(root)? {
        let manifest: toml::Table = fs::read_to_string(dir.join("Cargo.toml"))?.parse()?;
        deps.insert(crate_name(&dir)?, normal_dependencies(&manifest));
    }
    let mut problems = Vec::new();
    for (from, to, why) in FORBIDDEN_CRATE_EDGES {
        if deps.get(*from).is_some_and(|d| d.contains(*to)) {
            problems.push(format!("{from} depends on {to} ({why})"));
        }
    }
    for circle in circles(&deps) {
        problems.push(format!(
            "the crates {} depend on each other in a circle",
            circle.join(", ")
        ));
    }
    Ok(problems)
}

/// One crate's modules (`a::b`, the root as `crate`) and the modules each
/// one's paths reach.
#[derive(Debug, Default)]
pub struct ModuleGraph {
    edges: BTreeMap<String, BTreeSet<String>>,
}

const ROOT: &str = "crate";

impl ModuleGraph {
    /// Reads every `.rs` file under `src` (binaries under `src/bin` left out).
    pub fn read(src: &Path) -> anyhow::Result<Self> {
        let mut files = Vec::new();
        collect_rs(src, &mut files)?;
        let mut sources = BTreeMap::new();
        for file in files {
            let rel = file.strip_prefix(src)?.with_extension("");
            let mut segs: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if segs.first().is_some_and(|s| s == "bin") {
                continue;
            }
            if segs
                .last()
                .is_some_and(|s| s == "mod" || s == "lib" || s == "main")
            {
                segs.pop();
            }
            let module = if segs.is_empty() {
                ROOT.to_owned()
            } else {
                segs.join("::")
            };
            sources.insert(module, fs::read_to_string(&file)?);
        }
        Ok(Self::from_sources(&sources))
    }

    /// The graph of sources given by module path (`crate`, `a`, `a::b`).
    pub fn from_sources(sources: &BTreeMap<String, String>) -> Self {
        let modules: BTreeSet<&str> = sources.keys().map(String::as_str).collect();
        let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (module, text) in sources {
            let here: Vec<&str> = if module == ROOT {
                Vec::new()
            } else {
                module.split("::").collect()
            };
            let reached = edges.entry(module.clone()).or_default();
            for path in paths_in(&code_of(text)) {
                let Some(abs) = absolute(&here, &path) else {
                    continue;
                };
                let Some(target) = longest_module(&modules, &abs) else {
                    continue;
                };
                if target == *module || is_ancestor(module, &target) {
                    continue;
                }
                reached.insert(target);
            }
        }
        Self { edges }
    }

    /// The circles (strongly connected sets of more than one module).
    pub fn circles(&self) -> Vec<Vec<String>> {
        circles(&self.edges)
    }

    /// Edges from `from` (or below it) to `to` (or below it).
    pub fn edges_between(&self, from: &str, to: &str) -> Vec<(String, String)> {
        let within = |m: &str, top: &str| m == top || is_ancestor(top, m);
        self.edges
            .iter()
            .filter(|(a, _)| within(a, from))
            .flat_map(|(a, bs)| {
                bs.iter()
                    .filter(|b| within(b, to))
                    .map(move |b| (a.clone(), b.clone()))
            })
            .collect()
    }
}

fn collect_rs(dir: &Path, out: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    for entry in fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        if path.is_dir() {
            collect_rs(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    Ok(())
}

/// `ancestor` strictly contains `module` (`crate` contains everything).
fn is_ancestor(ancestor: &str, module: &str) -> bool {
    if ancestor == ROOT {
        return module != ROOT;
    }
    module
        .strip_prefix(ancestor)
        .is_some_and(|rest| rest.starts_with("::"))
}

/// The source without comments and without its test module (from a line
/// `#[cfg(test)]` followed by a `mod` to the end).
fn code_of(text: &str) -> String {
    let mut code = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        if line.starts_with("#[cfg(test)]") && lines.peek().is_some_and(|l| l.starts_with("mod ")) {
            break;
        }
        let line = match line.find("//") {
            Some(i) => &line[..i],
            None => line,
        };
        code.push_str(line);
        code.push('\n');
    }
    code
}

/// Every path that starts with `crate`, `super` or `self`, as its
/// segments; a `{…}` group gives one path per entry.
fn paths_in(code: &str) -> Vec<Vec<String>> {
    let chars: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let starts_word = i == 0 || !(chars[i - 1].is_alphanumeric() || chars[i - 1] == '_');
        if starts_word {
            for head in ["crate::", "super::", "self::"] {
                if matches_at(&chars, i, head) {
                    let (paths, end) = path_at(&chars, i);
                    out.extend(paths);
                    i = end;
                    break;
                }
            }
        }
        i += 1;
    }
    out
}

fn matches_at(chars: &[char], i: usize, s: &str) -> bool {
    s.chars()
        .enumerate()
        .all(|(k, c)| chars.get(i + k) == Some(&c))
}

/// The path (or group of paths) starting at `i`, and where it ends.
fn path_at(chars: &[char], mut i: usize) -> (Vec<Vec<String>>, usize) {
    let mut segs = Vec::new();
    loop {
        while chars.get(i).is_some_and(|c| c.is_whitespace()) {
            i += 1;
        }
        if chars.get(i) == Some(&'{') {
            let mut out = Vec::new();
            i += 1;
            loop {
                while chars.get(i).is_some_and(|c| c.is_whitespace() || *c == ',') {
                    i += 1;
                }
                match chars.get(i) {
                    None => return (out, i),
                    Some('}') => return (out, i + 1),
                    _ => {}
                }
                let (inner, end) = path_at(chars, i);
                for p in inner {
                    let mut full = segs.clone();
                    full.extend(p);
                    out.push(full);
                }
                if end == i {
                    i += 1;
                } else {
                    i = end;
                }
                // Skip `as name` and anything else up to the next entry.
                while chars.get(i).is_some_and(|c| *c != ',' && *c != '}') {
                    i += 1;
                }
            }
        }
        let start = i;
        while chars
            .get(i)
            .is_some_and(|c| c.is_alphanumeric() || *c == '_')
        {
            i += 1;
        }
        if i == start {
            return (vec![segs], i);
        }
        segs.push(chars[start..i].iter().collect());
        if matches_at(chars, i, "::") {
            i += 2;
        } else {
            return (vec![segs], i);
        }
    }
}

/// A path's segments made absolute from the module `here`.
fn absolute(here: &[&str], path: &[String]) -> Option<Vec<String>> {
    let mut at: Vec<String> = here.iter().map(|s| (*s).to_owned()).collect();
    let mut rest = path;
    match rest.first().map(String::as_str) {
        Some("crate") => {
            at.clear();
            rest = &rest[1..];
        }
        Some("self") => rest = &rest[1..],
        Some("super") => {
            while rest.first().is_some_and(|s| s == "super") {
                at.pop()?;
                rest = &rest[1..];
            }
        }
        _ => return None,
    }
    at.extend(rest.iter().filter(|s| *s != "self").cloned());
    Some(at)
}

fn longest_module(modules: &BTreeSet<&str>, abs: &[String]) -> Option<String> {
    (1..=abs.len())
        .rev()
        .map(|n| abs[..n].join("::"))
        .find(|m| modules.contains(m.as_str()))
        .or_else(|| modules.contains(ROOT).then(|| ROOT.to_owned()))
}

/// The strongly connected sets of more than one node (Tarjan's algorithm).
fn circles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct Walk<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        next: usize,
        found: Vec<Vec<String>>,
    }
    impl<'a> Walk<'a> {
        fn visit(&mut self, v: &'a str) {
            self.index.insert(v, self.next);
            self.low.insert(v, self.next);
            self.next += 1;
            self.stack.push(v);
            self.on_stack.insert(v);
            let edges = self.edges;
            for w in edges.get(v).into_iter().flatten() {
                let w = w.as_str();
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let lw = self.low[w];
                    let lv = self.low.get_mut(v).expect("visited");
                    *lv = (*lv).min(lw);
                } else if self.on_stack.contains(w) {
                    let iw = self.index[w];
                    let lv = self.low.get_mut(v).expect("visited");
                    *lv = (*lv).min(iw);
                }
            }
            if self.low[v] == self.index[v] {
                let mut set = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(w);
                    set.push(w.to_owned());
                    if w == v {
                        break;
                    }
                }
                if set.len() > 1 {
                    set.sort();
                    self.found.push(set);
                }
            }
        }
    }
    let mut walk = Walk {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        next: 0,
        found: Vec::new(),
    };
    for v in edges.keys() {
        if !walk.index.contains_key(v.as_str()) {
            walk.visit(v);
        }
    }
    walk.found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph(files: &[(&str, &str)]) -> ModuleGraph {
        let sources = files
            .iter()
            .map(|(m, t)| ((*m).to_owned(), (*t).to_owned()))
            .collect();
        ModuleGraph::from_sources(&sources)
    }

    #[test]
    fn two_sibling_modules_that_import_each_other_are_a_circle() {
        let g = graph(&[
            ("crate", "mod a; mod b;"),
            ("a", "use crate::b::Thing;"),
            ("b", "use super::a::{Other, deep::{X}};"),
        ]);
        assert_eq!(g.circles(), vec![vec!["a".to_owned(), "b".to_owned()]]);
    }

    #[test]
    fn a_parent_reexporting_its_child_is_containment_not_a_circle() {
        let g = graph(&[
            ("crate", "mod a; pub use a::Thing; use crate::a::b::X;"),
            ("a", "pub mod b; pub use self::b::X;"),
            ("a::b", "use crate::Thing; use super::Y;"),
        ]);
        assert!(g.circles().is_empty(), "{:?}", g.circles());
    }

    #[test]
    fn comments_and_the_test_module_add_no_edge() {
        let g = graph(&[
            ("a", "// use crate::b::X;\n/// [`crate::b::X`]\nfn f() {}\n"),
            (
                "b",
                "use crate::a::f;\n#[cfg(test)]\nmod tests { use crate::b::X; }\n",
            ),
        ]);
        assert!(g.circles().is_empty());
        assert_eq!(g.edges_between("b", "a").len(), 1);
        assert!(g.edges_between("a", "b").is_empty());
    }

    #[test]
    fn an_edge_between_two_rooms_is_found_below_both() {
        let g = graph(&[
            ("client", ""),
            ("client::call", "use crate::server::http::Gate;"),
            ("server", ""),
            ("server::http", ""),
        ]);
        assert_eq!(
            g.edges_between("client", "server"),
            vec![("client::call".to_owned(), "server::http".to_owned())]
        );
        assert!(g.edges_between("server", "client").is_empty());
    }

    #[test]
    fn three_crates_in_a_ring_are_one_circle() {
        let mut deps = BTreeMap::new();
        deps.insert("a".to_owned(), BTreeSet::from(["b".to_owned()]));
        deps.insert("b".to_owned(), BTreeSet::from(["c".to_owned()]));
        deps.insert("c".to_owned(), BTreeSet::from(["a".to_owned()]));
        deps.insert("d".to_owned(), BTreeSet::from(["a".to_owned()]));
        assert_eq!(circles(&deps), vec![vec!["a", "b", "c"]]);
    }

    #[test]
    fn the_workspace_itself_holds_its_layering() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .expect("xtask sits in the workspace")
            .to_path_buf();
        check(&root).unwrap();
    }
}
