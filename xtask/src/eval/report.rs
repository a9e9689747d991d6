//! The eval's report: one row per protocol ([`Summary`]) and the Markdown
//! of the run (the settings, a table per protocol, the task matrix).

use std::collections::BTreeMap;

use super::{Cell, Options, Outcome, Task};

/// One protocol's row.
pub(super) struct Summary {
    tasks: usize,
    ok: usize,
    answered: usize,
    words: usize,
    completed: usize,
    compacted: usize,
    calls: usize,
    valid: usize,
    rounds: f64,
    /// Mean input tokens per task.
    input_tokens: f64,
    tokens: (u64, u64),
    median_secs: f64,
}

pub(super) fn summary(outcomes: &[Outcome]) -> Summary {
    let mut secs: Vec<f64> = outcomes.iter().map(|o| o.secs).collect();
    secs.sort_by(f64::total_cmp);
    let n = outcomes.len().max(1);
    #[allow(clippy::cast_precision_loss)]
    let rounds = outcomes.iter().map(|o| o.rounds).sum::<u64>() as f64 / n as f64;
    #[allow(clippy::cast_precision_loss)]
    let input_tokens = outcomes.iter().map(|o| o.tokens.0).sum::<u64>() as f64 / n as f64;
    Summary {
        input_tokens,
        tasks: outcomes.len(),
        ok: outcomes.iter().filter(|o| o.ok).count(),
        answered: outcomes.iter().filter(|o| o.answered).count(),
        words: outcomes.iter().filter(|o| o.words).count(),
        completed: outcomes.iter().filter(|o| o.completed).count(),
        compacted: outcomes.iter().filter(|o| o.compacted).count(),
        calls: outcomes.iter().map(|o| o.calls).sum(),
        valid: outcomes.iter().map(|o| o.valid_calls).sum(),
        rounds,
        tokens: outcomes
            .iter()
            .fold((0, 0), |(i, o), x| (i + x.tokens.0, o + x.tokens.1)),
        median_secs: secs.get(secs.len() / 2).copied().unwrap_or(0.0),
    }
}

fn percent(part: usize, whole: usize) -> String {
    if whole == 0 {
        return "–".into();
    }
    #[allow(clippy::cast_precision_loss)]
    let p = part as f64 * 100.0 / whole as f64;
    format!("{p:.0}% ({part}/{whole})")
}

/// What the report's header says of the catalog tasks.
fn catalog_note(opts: &Options, tasks: &[Task]) -> String {
    if !tasks.iter().any(|t| t.catalog.is_some()) {
        return String::new();
    }
    format!(
        ", catalog tasks with {}, tool search {}",
        if opts.catalog_needed {
            "only the tool they need"
        } else {
            "300 look-alike tools"
        },
        opts.tool_search.as_deref().unwrap_or("auto")
    )
}

/// The report as Markdown: the settings, a table per protocol, the matrix.
pub(super) fn render(
    opts: &Options,
    tasks: &[Task],
    tables: &[(String, Summary)],
    matrix: &BTreeMap<String, Vec<(String, Cell)>>,
) -> String {
    let mut s = format!(
        "### {} ({})\n\nprovider `{}`, base URL `{}`, max rounds {}{}{}{}{}{}\n\n",
        opts.model,
        opts.label.as_deref().unwrap_or("local model"),
        opts.provider,
        opts.base_url,
        opts.max_rounds,
        opts.constrain
            .as_ref()
            .map(|c| format!(", constrain {c}"))
            .unwrap_or_default(),
        opts.context_window
            .map(|w| format!(", context window {w}"))
            .unwrap_or_default(),
        catalog_note(opts, tasks),
        opts.code_mode
            .as_ref()
            .map(|m| format!(", code mode {m}"))
            .unwrap_or_default(),
        if opts.only.is_empty() {
            String::new()
        } else {
            format!(", tasks {}", opts.only.join(","))
        }
    );
    s.push_str("| protocol | task success | answered with a status | ended in words | ended `completed` | compacted | valid tool calls | mean model requests | mean input tokens | tokens in / out | median time |\n");
    s.push_str("|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (protocol, t) in tables {
        s.push_str(&format!(
            "| {protocol} | {} | {} | {} | {} | {} | {} | {:.1} | {:.0} | {} / {} | {:.1} s |\n",
            percent(t.ok, t.tasks),
            percent(t.answered, t.tasks),
            percent(t.words, t.tasks),
            percent(t.completed, t.tasks),
            percent(t.compacted, t.tasks),
            percent(t.valid, t.calls),
            t.rounds,
            t.input_tokens,
            t.tokens.0,
            t.tokens.1,
            t.median_secs
        ));
    }
    s.push_str("\n| task | kind |");
    for (protocol, _) in tables {
        s.push_str(&format!(" {protocol} |"));
    }
    s.push_str("\n|---|---|");
    for _ in tables {
        s.push_str("---|");
    }
    s.push('\n');
    for task in tasks {
        s.push_str(&format!("| {} | {} |", task.id, task.kind));
        for (_, cell) in matrix.get(&task.id).map(Vec::as_slice).unwrap_or_default() {
            s.push_str(&format!(
                " {} {} req, {} in{} |",
                if cell.ok { "✓" } else { "✗" },
                cell.requests,
                cell.input_tokens,
                if cell.program { ", program" } else { "" }
            ));
        }
        s.push('\n');
    }
    s
}
