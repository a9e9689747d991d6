//! Every command in the documentation that needs no model and no network
//! still works: each shell block marked ```` ```sh run ```` in `README.md`
//! and `docs/**/*.md` runs with bash (`set -euo pipefail`) and must exit 0.
//!
//! Each block runs in a fresh temporary directory (nothing it writes lands
//! elsewhere), with `HOME` set to another temporary directory, `host` on the
//! `PATH` (a symlink to the binary under test) and the repository's built
//! example plugins reachable as `target/plugins` (a symlink in the block's
//! directory; `$TOOLHOST_PLUGINS` holds the same path), and the Python,
//! JavaScript and Go ones as `target/plugins-py`, `target/plugins-js` and
//! `target/plugins-go` (`cargo xtask test` builds them), and code mode's
//! program runner as `target/code`. No model is
//! configured and no API key is passed. A failure names the file, the line of
//! the block and what it printed. A block that cannot run there (it needs a
//! model, a registry, a network service) is a plain `sh` block that says
//! so.
//!
//! The book's every mention of a file of this repository (`crates/…`,
//! `docs/…` in backticks) names one that exists, and every relative link
//! (`[text](../guide/cli.md#flags)`) leads to a file that exists and, with
//! an `#anchor`, to a heading of that page (mdBook's ids): a file or a
//! heading that moves is found here, not by a reader.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::*;

/// The info string that marks a block to run. Its first word stays `sh`, so
/// GitHub and mdBook highlight the block as shell.
const MARK: &str = "sh run";

/// The longest one block may take (`timeout`, from coreutils).
const BLOCK_TIMEOUT_SECS: u32 = 120;

/// One marked block: where it is and its text.
struct Block {
    file: PathBuf,
    /// The line of its opening fence (1-based).
    line: usize,
    text: String,
}

/// The markdown files the test reads: `README.md` and every `docs/**/*.md`.
fn markdown_files(root: &Path) -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        for path in entries {
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "md") {
                out.push(path);
            }
        }
    }
    let mut files = vec![root.join("README.md")];
    walk(&root.join("docs"), &mut files);
    files
}

/// The marked blocks of one file. A fence may be indented (inside a list
/// item): the block's lines lose that indentation.
fn marked_blocks(file: &Path) -> Vec<Block> {
    let text = std::fs::read_to_string(file)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", file.display()));
    let mut blocks = Vec::new();
    let mut lines = text.lines().enumerate();
    while let Some((n, line)) = lines.next() {
        let trimmed = line.trim_start();
        let Some(info) = trimmed.strip_prefix("```") else {
            continue;
        };
        let indent = line.len() - trimmed.len();
        let mut body = String::new();
        for (_, inner) in lines.by_ref() {
            if inner.trim() == "```" {
                break;
            }
            let strip = inner.len() - inner.trim_start().len();
            body.push_str(&inner[strip.min(indent)..]);
            body.push('\n');
        }
        if info.trim() == MARK {
            blocks.push(Block {
                file: file.to_path_buf(),
                line: n + 1,
                text: body,
            });
        }
    }
    blocks
}

/// Runs one block; `Err` says where it is and what it printed.
fn run_block(block: &Block, root: &Path, bin_dir: &Path, cache: &Path) -> Result<(), String> {
    let work = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let plugins = plugins_dir();
    std::fs::create_dir(work.path().join("target")).unwrap();
    std::os::unix::fs::symlink(&plugins, work.path().join("target/plugins")).unwrap();
    for other in ["plugins-py", "plugins-js", "plugins-go", "code"] {
        let built = plugins.with_file_name(other);
        if built.is_dir() {
            std::os::unix::fs::symlink(&built, work.path().join("target").join(other)).unwrap();
        }
    }
    let script = home.path().join("block.sh");
    std::fs::write(&script, format!("set -euo pipefail\n{}", block.text)).unwrap();
    let path = std::env::join_paths(std::iter::once(bin_dir.to_path_buf()).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))
    .unwrap();
    let mut cmd = Command::new("timeout");
    cmd.arg(BLOCK_TIMEOUT_SECS.to_string())
        .arg("bash")
        .arg(&script)
        .current_dir(work.path())
        .env("HOME", home.path())
        .env("PATH", path)
        .env("TOOLHOST_PLUGINS", &plugins)
        .env("TOOLHOST_REPO", root)
        .env("TOOLHOST_CACHE_DIR", cache)
        .env_remove("XDG_STATE_HOME")
        .env_remove("XDG_DATA_HOME")
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("TOOLHOST_LOCK")
        .env_remove("TOOLHOST_CONFIG")
        .env_remove("TOOLHOST_POLICY")
        .env_remove("TOOLHOST_SESSIONS_DIR")
        .env_remove("RUST_LOG")
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .env_remove("ANTHROPIC_API_KEY")
        .env("OLLAMA_HOST", "http://127.0.0.1:9");
    let out = cmd
        .output()
        .map_err(|e| format!("cannot start bash for the block: {e}"))?;
    if out.status.success() {
        return Ok(());
    }
    let file = block.file.strip_prefix(root).unwrap_or(&block.file);
    Err(format!(
        "{}:{}: the block exited with {}{}\n--- block\n{}--- stdout\n{}--- stderr\n{}",
        file.display(),
        block.line,
        out.status,
        if out.status.code() == Some(124) {
            format!(" (killed after {BLOCK_TIMEOUT_SECS} s)")
        } else {
            String::new()
        },
        block.text,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    ))
}

#[test]
fn every_runnable_shell_block_in_the_docs_exits_zero() {
    let root = root().canonicalize().unwrap();
    let blocks: Vec<Block> = markdown_files(&root)
        .iter()
        .flat_map(|f| marked_blocks(f))
        .collect();
    let in_readme = blocks
        .iter()
        .filter(|b| b.file == root.join("README.md"))
        .count();
    assert!(
        in_readme > 0 && blocks.len() > in_readme,
        "expected marked blocks (```{MARK}) in README.md and in docs/: found {in_readme} and {}",
        blocks.len() - in_readme
    );

    let bin_dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_host"), bin_dir.path().join("host")).unwrap();
    let cache = tempfile::tempdir().unwrap();

    let failures: Vec<String> = blocks
        .iter()
        .filter_map(|b| run_block(b, &root, bin_dir.path(), cache.path()).err())
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} marked shell blocks failed:\n\n{}",
        failures.len(),
        blocks.len(),
        failures.join("\n\n")
    );
}

/// The repository paths the book names in backticks (`crates/…`, `docs/…`,
/// `plugins/…`, …), with the file and line that name each.
fn cited_paths(file: &Path) -> Vec<(String, usize)> {
    const ROOTS: [&str; 10] = [
        "crates/",
        "docs/",
        "plugins/",
        "examples/",
        "sdk/",
        "wit/",
        "xtask/",
        "deploy/",
        "benches/",
        "fuzz/",
    ];
    let text = std::fs::read_to_string(file).unwrap();
    let mut cited = Vec::new();
    for (n, line) in text.lines().enumerate() {
        for (i, quoted) in line.split('`').enumerate() {
            let is_path = i % 2 == 1
                && ROOTS.iter().any(|r| quoted.starts_with(r))
                && quoted
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_./@-".contains(c));
            if is_path {
                cited.push((quoted.to_owned(), n + 1));
            }
        }
    }
    cited
}

#[test]
fn every_repository_path_the_book_names_exists() {
    let root = root().canonicalize().unwrap();
    let missing: Vec<String> = markdown_files(&root)
        .iter()
        .flat_map(|f| {
            let shown = f.strip_prefix(&root).unwrap_or(f).display().to_string();
            cited_paths(f)
                .into_iter()
                .filter(|(p, _)| !root.join(p).exists())
                .map(move |(p, line)| format!("{shown}:{line}: {p}"))
        })
        .collect();
    assert!(
        missing.is_empty(),
        "the book names files that do not exist (moved?):\n{}",
        missing.join("\n")
    );
}

/// The lines of a markdown file outside its fenced blocks (a link in
/// a code block is an example, not a link), numbered from 1.
fn prose_lines(text: &str) -> Vec<(usize, &str)> {
    let mut lines = Vec::new();
    let mut in_fence = false;
    for (n, line) in text.lines().enumerate() {
        if in_fence {
            in_fence = line.trim() != "```";
        } else if line.trim_start().starts_with("```") {
            in_fence = true;
        } else {
            lines.push((n + 1, line));
        }
    }
    lines
}

/// `line` with its code spans left out (CommonMark: a run of backticks up
/// to the next run of as many).
fn without_code_spans(line: &str) -> String {
    let bytes = line.as_bytes();
    let run_at = |i: usize| bytes[i..].iter().take_while(|&&b| b == b'`').count();
    let mut out = String::new();
    let mut i = 0;
    while let Some(ch) = line[i..].chars().next() {
        if ch != '`' {
            out.push(ch);
            i += ch.len_utf8();
            continue;
        }
        let run = run_at(i);
        let mut j = i + run;
        let mut end = None;
        while j < bytes.len() {
            if bytes[j] == b'`' {
                let close = run_at(j);
                if close == run {
                    end = Some(j + close);
                    break;
                }
                j += close;
            } else {
                j += 1;
            }
        }
        match end {
            Some(end) => {
                out.push(' ');
                i = end;
            }
            None => {
                out.push_str(&line[i..i + run]);
                i += run;
            }
        }
    }
    out
}

/// The targets of the inline links of one line (`[text](target)`, images
/// too), code spans left out.
fn link_targets(line: &str) -> Vec<String> {
    let line = without_code_spans(line);
    let mut targets = Vec::new();
    let mut rest = line.as_str();
    while let Some(at) = rest.find("](") {
        rest = &rest[at + 2..];
        let end = rest.find(')').unwrap_or(rest.len());
        let target = rest[..end].split_whitespace().next().unwrap_or("");
        targets.push(target.trim_matches(|c| c == '<' || c == '>').to_owned());
        rest = &rest[end..];
    }
    targets
}

/// The id mdBook (and GitHub, for these pages) gives a heading: its text
/// without markup, lower-cased, spaces to `-`, other punctuation dropped.
fn heading_id(heading: &str) -> String {
    let mut text = String::new();
    let mut rest = heading;
    // A link in a heading keeps its text, not its target.
    while let Some(at) = rest.find("](") {
        text.push_str(&rest[..at]);
        rest = rest[at..].split_once(')').map_or("", |(_, after)| after);
    }
    text.push_str(rest);
    text.trim()
        .chars()
        .filter_map(|c| {
            if c.is_alphanumeric() || c == '_' || c == '-' {
                Some(c.to_ascii_lowercase())
            } else if c.is_whitespace() {
                Some('-')
            } else {
                None
            }
        })
        .collect()
}

/// The anchors of a markdown file: one per heading, a repeated one with
/// `-1`, `-2`, … as mdBook numbers them.
fn anchors(file: &Path) -> std::collections::HashSet<String> {
    let text = std::fs::read_to_string(file).unwrap();
    let mut seen = std::collections::HashMap::<String, usize>::new();
    let mut ids = std::collections::HashSet::new();
    for (_, line) in prose_lines(&text) {
        let level = line.bytes().take_while(|&b| b == b'#').count();
        let Some(heading) = line.get(level..).filter(|h| h.starts_with(' ')) else {
            continue;
        };
        if !(1..=6).contains(&level) {
            continue;
        }
        let id = heading_id(heading.trim_end().trim_end_matches('#'));
        let count = seen.entry(id.clone()).or_insert(0);
        ids.insert(match *count {
            0 => id,
            n => format!("{id}-{n}"),
        });
        *count += 1;
    }
    ids
}

#[test]
fn every_relative_link_and_anchor_in_the_book_resolves() {
    let root = root().canonicalize().unwrap();
    let mut anchors_of = std::collections::HashMap::new();
    let mut broken = Vec::new();
    let mut checked = 0;
    for file in markdown_files(&root) {
        let text = std::fs::read_to_string(&file).unwrap();
        let shown = file
            .strip_prefix(&root)
            .unwrap_or(&file)
            .display()
            .to_string();
        for (n, line) in prose_lines(&text) {
            for target in link_targets(line) {
                let external = target.contains("://") || target.starts_with("mailto:");
                if external || target.is_empty() {
                    continue;
                }
                checked += 1;
                let (path, fragment) = target.split_once('#').unwrap_or((target.as_str(), ""));
                let dest = if path.is_empty() {
                    file.clone()
                } else {
                    file.parent().unwrap().join(path)
                };
                if !dest.exists() {
                    broken.push(format!("{shown}:{n}: {target}: no such file"));
                } else if !fragment.is_empty() {
                    let page = dest.is_file() && dest.extension().is_some_and(|e| e == "md");
                    let found = page
                        && anchors_of
                            .entry(dest.clone())
                            .or_insert_with(|| anchors(&dest))
                            .contains(fragment);
                    if !found {
                        broken.push(format!(
                            "{shown}:{n}: {target}: no heading with that anchor"
                        ));
                    }
                }
            }
        }
    }
    assert!(checked > 100, "expected the book's links, found {checked}");
    assert!(
        broken.is_empty(),
        "links in the book that lead nowhere (a page or a heading moved?):\n{}",
        broken.join("\n")
    );
}
