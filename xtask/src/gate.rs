//! `cargo xtask bench-gate`: the performance gate. A few minutes of
//! benchmarks that measure ratios which hold on a noisy machine — each
//! against its baseline in the same run (`crates/toolhost-runtime/benches/gate.rs`,
//! `crates/toolhost-cli/benches/mcp.rs -- --gate`) — and compare them with
//! the values recorded in `benches/gate.toml`. A ratio worse than its
//! recorded value times its margin fails the gate (after one more
//! measurement, so one slow moment of the machine does not).
//!
//! - `cargo xtask bench-gate`: measure and check (what `cargo xtask test` runs).
//! - `cargo xtask bench-gate --record`: measure several times, record the
//!   median of each ratio in `benches/gate.toml`, and write the generated
//!   figures table into the book's benchmarks page, `docs/benchmarks.md`
//!   (between the `<!-- gate:begin -->` and `<!-- gate:end -->` lines).
//! - `cargo xtask bench-gate --record --with-recorded`: the same, kept
//!   with what the file holds (recorded on another machine, or in a fresh
//!   clone): each ratio's value is the larger median of the two, its range
//!   covers both, so the gate holds on either.
//! - `cargo xtask bench-gate --table`: only write the table again from
//!   `benches/gate.toml` (after a margin was changed there).
//! - `cargo xtask bench-gate --slower FIGURE,…`: the gate with those
//!   figures made 1.5× slower on purpose (a busy wait inside the
//!   benchmark); it must fail every gated ratio they are the numerator of.
//!
//! A failed ratio is printed with both of its sides, measured and as
//! recorded, so that a reader can tell a slower machine (both sides moved)
//! from a regression (one side moved).

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};

use crate::cargo;

const GATE_FILE: &str = "benches/gate.toml";
/// The page that shows the generated table, between [`BEGIN`] and [`END`].
const TABLE_FILE: &str = "docs/benchmarks.md";
const BEGIN: &str = "<!-- gate:begin -->";
const END: &str = "<!-- gate:end -->";

/// `benches/gate.toml`.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct GateFile {
    /// When, on which commit and machine the values were recorded.
    recorded: String,
    ratios: BTreeMap<String, Ratio>,
    /// The machine's figures of the recording runs, µs per call:
    /// `[median, min, max]` (shown in the table, never gated).
    #[serde(default)]
    figures: BTreeMap<String, [f64; 3]>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Ratio {
    /// What it measures, for the table.
    about: String,
    /// The median of the recording runs.
    value: f64,
    /// The gate fails above `value * margin`.
    margin: f64,
    /// The issue's goal, when there is one (shown, not gated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    goal: Option<f64>,
    /// The range over the recording runs.
    #[serde(default)]
    range: (f64, f64),
    /// Shown in the table but never fails the gate (the machine's own figure).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    info: bool,
}

/// What one measurement printed: `FIGURE name µs` and `RATIO name value
/// numerator denominator` (a denominator of several figures is their sum,
/// `a+b`).
#[derive(Debug, Default)]
struct Measured {
    figures: BTreeMap<String, f64>,
    ratios: BTreeMap<String, f64>,
    /// Each ratio's figures: the numerator, and those summed below it.
    sides: BTreeMap<String, (String, Vec<String>)>,
}

impl Measured {
    fn parse(&mut self, out: &str) {
        for line in out.lines() {
            let mut words = line.split_whitespace();
            let (Some(kind), Some(name), Some(value)) = (words.next(), words.next(), words.next())
            else {
                continue;
            };
            let Ok(value) = value.parse::<f64>() else {
                continue;
            };
            match kind {
                "FIGURE" => {
                    self.figures.insert(name.to_owned(), value);
                }
                "RATIO" => {
                    self.ratios.insert(name.to_owned(), value);
                    if let (Some(above), Some(below)) = (words.next(), words.next()) {
                        self.sides.insert(
                            name.to_owned(),
                            (
                                above.to_owned(),
                                below.split('+').map(str::to_owned).collect(),
                            ),
                        );
                    }
                }
                _ => {}
            }
        }
    }
}

/// Runs both gate benchmarks once (with `slower` figures made 1.5× slower
/// on purpose). One cargo command for both packages, so that their
/// dependencies are built once, with the same features.
fn measure(root: &Path, slower: &[String]) -> anyhow::Result<Measured> {
    let mut cmd = cargo();
    cmd.current_dir(root).args([
        "bench",
        "--quiet",
        "-p",
        "toolhost-runtime",
        "-p",
        "toolhost-cli",
        "--bench",
        "gate",
        "--bench",
        "mcp",
        "--",
        "--gate",
    ]);
    if !slower.is_empty() {
        cmd.args(["--slower", &slower.join(",")]);
    }
    eprintln!("xtask: running {cmd:?}");
    let out = cmd
        .output()
        .with_context(|| format!("cannot start {cmd:?}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        bail!(
            "{cmd:?} failed with {}:\n{stdout}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let mut measured = Measured::default();
    measured.parse(&stdout);
    if let Some(missing) = slower.iter().find(|s| !measured.figures.contains_key(*s)) {
        bail!("--slower {missing}: no benchmark measures a figure of that name");
    }
    Ok(measured)
}

pub(crate) fn bench_gate(root: &Path, extra: &[String]) -> anyhow::Result<()> {
    let record = extra.iter().any(|a| a == "--record");
    let slower: Vec<String> = extra
        .iter()
        .position(|a| a == "--slower")
        .and_then(|i| extra.get(i + 1))
        .map(|v| v.split(',').map(str::to_owned).collect())
        .unwrap_or_default();
    let path = root.join(GATE_FILE);
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {GATE_FILE}"))?;
    let mut gate: GateFile =
        toml::from_str(&text).with_context(|| format!("parsing {GATE_FILE}"))?;
    if record {
        let keep = extra.iter().any(|a| a == "--with-recorded");
        return record_runs(root, &mut gate, keep);
    }
    if extra.iter().any(|a| a == "--table") {
        return write_tables(root, &gate);
    }
    let first = measure(root, &slower)?;
    let mut failed = check(&gate, &first);
    print_table(&gate, &first);
    if !failed.is_empty() {
        eprintln!(
            "xtask: bench-gate: {} over the limit; measuring once more",
            failed.join(", ")
        );
        let second = measure(root, &slower)?;
        print_table(&gate, &second);
        let again = check(&gate, &second);
        failed.retain(|name| again.contains(name));
        if !failed.is_empty() {
            eprintln!("{}", explain(&gate, &[&first, &second], &failed));
        }
    }
    if !failed.is_empty() {
        bail!(
            "the performance gate failed: {} worse than recorded in {GATE_FILE} by more than the margin, twice",
            failed.join(", ")
        );
    }
    eprintln!("xtask: bench-gate: every ratio within its margin");
    Ok(())
}

/// Each failed ratio with both of its sides, as measured in each
/// measurement and as recorded: a slower machine moves both sides, a
/// regression one.
fn explain(gate: &GateFile, measurements: &[&Measured], failed: &[String]) -> String {
    let mut out = String::from("xtask: bench-gate: what failed, side by side (µs per call):\n");
    for name in failed {
        let Some(r) = gate.ratios.get(name) else {
            continue;
        };
        let measured: Vec<String> = measurements
            .iter()
            .map(|m| {
                m.ratios
                    .get(name)
                    .map_or_else(|| "not measured".to_owned(), |v| format!("{v:.3}"))
            })
            .collect();
        out.push_str(&format!(
            "  {name}: measured {}, recorded {:.3}, limit {:.3}\n",
            measured.join(" and "),
            r.value,
            r.value * r.margin
        ));
        let Some((above, below)) = measurements.iter().find_map(|m| m.sides.get(name)) else {
            continue;
        };
        for (role, figure) in
            std::iter::once(("numerator", above)).chain(below.iter().map(|b| ("denominator", b)))
        {
            let now: Vec<String> = measurements
                .iter()
                .map(|m| {
                    m.figures
                        .get(figure)
                        .map_or_else(|| "?".to_owned(), |v| format!("{v:.2}"))
                })
                .collect();
            let then = gate.figures.get(figure).map_or_else(
                || "not recorded".to_owned(),
                |[m, lo, hi]| format!("{m:.2} ({lo:.2}–{hi:.2})"),
            );
            out.push_str(&format!(
                "    {role} {figure}: measured {}, recorded {then}\n",
                now.join(" and ")
            ));
        }
    }
    out
}

/// The names of the gated ratios over their limit (or missing).
fn check(gate: &GateFile, measured: &Measured) -> Vec<String> {
    gate.ratios
        .iter()
        .filter(|(_, r)| !r.info)
        .filter(|(name, r)| {
            measured
                .ratios
                .get(*name)
                .is_none_or(|v| !v.is_finite() || *v > r.value * r.margin)
        })
        .map(|(name, _)| name.clone())
        .collect()
}

fn print_table(gate: &GateFile, measured: &Measured) {
    eprintln!(
        "{:<30} {:>9} {:>9} {:>9}",
        "ratio", "measured", "limit", "goal"
    );
    for (name, r) in &gate.ratios {
        let v = measured.ratios.get(name).copied().unwrap_or(f64::NAN);
        let limit = if r.info {
            "-".to_owned()
        } else {
            format!("{:.2}", r.value * r.margin)
        };
        let goal = r.goal.map_or_else(|| "-".to_owned(), |g| format!("{g:.2}"));
        eprintln!("{name:<30} {v:>9.3} {limit:>9} {goal:>9}");
    }
}

/// `--record`: five measurements; each ratio's median becomes its recorded
/// value; the table goes into the benchmarks page. With `keep`, kept with
/// what was recorded before (see the module's text).
fn record_runs(root: &Path, gate: &mut GateFile, keep: bool) -> anyhow::Result<()> {
    let runs: usize = 5;
    let mut all: Vec<Measured> = Vec::new();
    for i in 0..runs {
        eprintln!("xtask: bench-gate --record: run {} of {runs}", i + 1);
        let m = measure(root, &[])?;
        print_table(gate, &m);
        all.push(m);
    }
    let median_of = |values: Vec<f64>| -> (f64, f64, f64) {
        let mut v: Vec<f64> = values.into_iter().filter(|x| x.is_finite()).collect();
        v.sort_by(f64::total_cmp);
        if v.is_empty() {
            return (f64::NAN, f64::NAN, f64::NAN);
        }
        (v[v.len() / 2], v[0], v[v.len() - 1])
    };
    for (name, r) in &mut gate.ratios {
        let (median, lo, hi) = median_of(
            all.iter()
                .filter_map(|m| m.ratios.get(name).copied())
                .collect(),
        );
        if !median.is_finite() {
            bail!("ratio {name} was not measured");
        }
        if keep && r.value.is_finite() && r.value > 0.0 {
            r.value = round(median.max(r.value));
            r.range = (round(lo.min(r.range.0)), round(hi.max(r.range.1)));
        } else {
            r.value = round(median);
            r.range = (round(lo), round(hi));
        }
    }
    let before = std::mem::take(&mut gate.figures);
    let names: Vec<String> = all.iter().flat_map(|m| m.figures.keys().cloned()).collect();
    for name in names {
        let v = all
            .iter()
            .filter_map(|m| m.figures.get(&name).copied())
            .collect();
        let (median, lo, hi) = median_of(v);
        let mut figure = [round(median), round(lo), round(hi)];
        if keep && let Some([m, l, h]) = before.get(&name) {
            figure = [round(median.max(*m)), round(lo.min(*l)), round(hi.max(*h))];
        }
        gate.figures.insert(name, figure);
    }
    let this = format!(
        "{} on commit {} ({}), {runs} runs",
        today(),
        commit(root),
        machine()
    );
    gate.recorded = if keep {
        format!("{this}; kept with {}", gate.recorded)
    } else {
        this
    };
    let header = "# The performance gate's recorded ratios: written by\n\
                  # `cargo xtask bench-gate --record`, read by `cargo xtask bench-gate`\n\
                  # (run by `cargo xtask test`), which fails when a ratio is above\n\
                  # value x margin twice in a row. See docs/benchmarks.md, \"The gate\".\n\n";
    std::fs::write(
        root.join(GATE_FILE),
        format!("{header}{}", toml::to_string(gate)?),
    )?;
    eprintln!("xtask: recorded {GATE_FILE}");
    write_tables(root, gate)
}

/// Writes the table of `gate` into the benchmarks page.
fn write_tables(root: &Path, gate: &GateFile) -> anyhow::Result<()> {
    splice(&root.join(TABLE_FILE), &table(gate))?;
    eprintln!("xtask: the figures of {GATE_FILE} written into {TABLE_FILE}");
    Ok(())
}

fn round(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

/// The generated figures: the machine's floors, then every ratio.
fn table(gate: &GateFile) -> String {
    let mut t = format!(
        "{BEGIN}\n_Generated by `cargo xtask bench-gate --record` on {}; do not edit by hand._\n\n",
        gate.recorded
    );
    t.push_str("| figure on this machine (median of runs; min–max) | µs per call (`_ready`: to the first answer; `_mb`: megabytes) |\n|---|---:|\n");
    for (name, [m, lo, hi]) in &gate.figures {
        t.push_str(&format!("| `{name}` | {m:.2} ({lo:.2}–{hi:.2}) |\n"));
    }
    t.push_str(
        "\n| ratio | what it is | recorded (min–max) | gate fails above | goal |\n|---|---|---:|---:|---:|\n",
    );
    for (name, r) in &gate.ratios {
        let limit = if r.info {
            "not gated".to_owned()
        } else {
            format!("{:.2}", r.value * r.margin)
        };
        let goal = r.goal.map_or_else(|| "–".to_owned(), |g| format!("≤ {g}"));
        t.push_str(&format!(
            "| `{name}` | {} | {:.2} ({:.2}–{:.2}) | {limit} | {goal} |\n",
            r.about, r.value, r.range.0, r.range.1
        ));
    }
    t.push_str(END);
    t
}

/// Replaces what stands between the markers in `file` with `table`.
fn splice(file: &Path, table: &str) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(file)?;
    let (Some(b), Some(e)) = (text.find(BEGIN), text.find(END)) else {
        bail!("{} has no {BEGIN} … {END} lines", file.display());
    };
    let new = format!("{}{table}{}", &text[..b], &text[e + END.len()..]);
    std::fs::write(file, new)?;
    Ok(())
}

fn today() -> String {
    output(Command::new("date").arg("-u").arg("+%Y-%m-%d")).unwrap_or_else(|| "?".into())
}

fn commit(root: &Path) -> String {
    output(
        Command::new("git")
            .current_dir(root)
            .args(["rev-parse", "--short", "HEAD"]),
    )
    .unwrap_or_else(|| "?".into())
}

fn machine() -> String {
    let cores = std::thread::available_parallelism().map_or(0, std::num::NonZero::get);
    let kernel = output(Command::new("uname").arg("-r")).unwrap_or_else(|| "?".into());
    format!("{cores} cores, Linux {kernel}")
}

fn output(cmd: &mut Command) -> Option<String> {
    let out = cmd.output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gate() -> GateFile {
        let ratio = |value, margin, info| Ratio {
            about: String::new(),
            value,
            margin,
            goal: None,
            range: (value, value),
            info,
        };
        GateFile {
            recorded: String::new(),
            ratios: [
                ("fresh".to_owned(), ratio(1.5, 1.3, false)),
                ("machine".to_owned(), ratio(10.0, 1.0, true)),
            ]
            .into(),
            figures: BTreeMap::new(),
        }
    }

    fn measured(text: &str) -> Measured {
        let mut m = Measured::default();
        m.parse(text);
        m
    }

    #[test]
    fn a_ratio_past_value_times_margin_fails_and_one_within_passes() {
        let g = gate();
        assert!(check(&g, &measured("RATIO fresh 1.9\nRATIO machine 30")).is_empty());
        assert_eq!(
            check(&g, &measured("RATIO fresh 1.96\nRATIO machine 1")),
            ["fresh"]
        );
    }

    #[test]
    fn a_failed_ratio_is_explained_by_both_sides_measured_and_recorded() {
        let mut g = gate();
        g.figures.insert("a".into(), [10.0, 9.0, 11.0]);
        g.figures.insert("b".into(), [5.0, 4.0, 6.0]);
        let first = measured("FIGURE a 30\nFIGURE b 6\nFIGURE c 4\nRATIO fresh 3.0 a b+c");
        let second = measured("FIGURE a 31\nFIGURE b 6.5\nRATIO fresh 3.1 a b+c");
        assert_eq!(
            first.sides["fresh"],
            ("a".to_owned(), vec!["b".to_owned(), "c".to_owned()])
        );
        let text = explain(&g, &[&first, &second], &["fresh".to_owned()]);
        assert!(
            text.contains("fresh: measured 3.000 and 3.100, recorded 1.500, limit 1.950"),
            "{text}"
        );
        assert!(
            text.contains("numerator a: measured 30.00 and 31.00, recorded 10.00 (9.00–11.00)"),
            "{text}"
        );
        assert!(
            text.contains("denominator b: measured 6.00 and 6.50, recorded 5.00 (4.00–6.00)"),
            "{text}"
        );
        assert!(
            text.contains("denominator c: measured 4.00 and ?, recorded not recorded"),
            "{text}"
        );
    }

    #[test]
    fn a_ratio_that_was_not_measured_or_is_not_a_number_fails() {
        let g = gate();
        assert_eq!(check(&g, &measured("FIGURE fresh 1.0")), ["fresh"]);
        assert_eq!(check(&g, &measured("RATIO fresh NaN")), ["fresh"]);
    }

    #[test]
    fn the_table_is_spliced_between_the_markers_only() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("benchmarks.md");
        std::fs::write(&file, format!("before\n{BEGIN}\nold\n{END}\nafter\n")).unwrap();
        splice(&file, &table(&gate())).unwrap();
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(text.starts_with("before\n<!-- gate:begin -->"));
        assert!(text.ends_with("<!-- gate:end -->\nafter\n"));
        assert!(!text.contains("old"));
        assert!(text.contains("| `fresh` |"), "{text}");
        std::fs::write(&file, "no markers").unwrap();
        assert!(splice(&file, "t").is_err());
    }

    #[test]
    fn the_benchmarks_page_holds_the_one_generated_table() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let page = std::fs::read_to_string(root.join(TABLE_FILE)).unwrap();
        assert_eq!(page.matches(BEGIN).count(), 1, "{TABLE_FILE}");
        assert_eq!(page.matches(END).count(), 1, "{TABLE_FILE}");
        assert!(page.find(BEGIN) < page.find(END), "{TABLE_FILE}");
        for other in ["README.md", "benches/README.md"] {
            let text = std::fs::read_to_string(root.join(other)).unwrap();
            assert!(
                !text.contains(BEGIN),
                "{other} still has the generated table"
            );
        }
    }
}
