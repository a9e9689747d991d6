//! What a tool search costs, next to what it saves the model from reading.
//!
//! - `search/1000_tools`: one query against an index of 1,000 look-alike
//!   tools (`toolhost_test_support::catalog`), the cost of every
//!   `search_tools` call; the goal is well under 1 ms.
//! - `search/300_tools`: the same against 300, the size the tests use.
//! - `build/1000_tools`: indexing 1,000 tools, paid once per catalog (the
//!   agent loop and the MCP server keep the index until the catalog
//!   changes).
//! - `baseline/serialize_1000_definitions`: writing the 1,000 definitions as
//!   JSON, what offering them all to a model costs the host alone, before
//!   the model reads a byte of them.
//!
//! Run with `cargo bench -p toolhost-search`.

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::Value;
use toolhost_search::{ToolIndex, ToolText};
use toolhost_test_support::catalog::{QUESTIONS, look_alike_tools};

fn index(tools: &[Value]) -> ToolIndex {
    ToolIndex::build(tools.iter().map(|t| {
        ToolText::new(
            t["name"].as_str().unwrap_or_default(),
            t["description"].as_str().unwrap_or_default(),
            &t["inputSchema"],
        )
    }))
}

fn bench(c: &mut Criterion) {
    let thousand = look_alike_tools(1000);
    let three_hundred = look_alike_tools(300);
    let big = index(&thousand);
    let small = index(&three_hundred);
    let mut group = c.benchmark_group("search");
    let mut i = 0;
    group.bench_function("1000_tools", |b| {
        b.iter(|| {
            i = (i + 1) % QUESTIONS.len();
            big.search(QUESTIONS[i].0, 5)
        });
    });
    group.bench_function("300_tools", |b| {
        b.iter(|| {
            i = (i + 1) % QUESTIONS.len();
            small.search(QUESTIONS[i].0, 5)
        });
    });
    group.finish();
    c.bench_function("build/1000_tools", |b| b.iter(|| index(&thousand)));
    c.bench_function("baseline/serialize_1000_definitions", |b| {
        b.iter(|| serde_json::to_vec(&thousand).map(|v| v.len()));
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
