//! What the hook chain adds to a call when no hook runs: an empty chain, and
//! a chain of two hooks that do not match the call. The goal is well under
//! 1 µs for before + after.
//!
//! The chain's futures complete on their first poll when no hook matches, so
//! they are polled directly (no executor in the measurement).

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use criterion::{Criterion, criterion_group, criterion_main};
use toolhost_hooks::{
    BeforeDecision, FnHook, HookCall, HookChain, HookEntry, HookOutcome, Matcher,
};

fn poll_once<F: Future>(future: F) -> F::Output {
    let mut cx = Context::from_waker(Waker::noop());
    match pin!(future).poll(&mut cx) {
        Poll::Ready(output) => output,
        Poll::Pending => panic!("a chain without matching hooks must not wait"),
    }
}

fn chains(c: &mut Criterion) {
    let args = serde_json::json!({"expression": "1+2"});
    let call = HookCall::new("calculate", &args)
        .plugin("calc", "0.1.0")
        .call_id("call_1");
    let empty = HookChain::empty();
    let hook = || {
        Arc::new(
            FnHook::new("guard")
                .on_before(|_| BeforeDecision::block("no"))
                .on_after(|_, _| toolhost_hooks::AfterDecision::fail("no")),
        )
    };
    let non_matching = HookChain::new(vec![
        HookEntry::new(hook()).matcher(Matcher::tools(["read_*", "write_file"]).expect("glob")),
        HookEntry::new(hook()).matcher(Matcher::plugins(["fs", "http*"]).expect("glob")),
    ]);
    let outcome = HookOutcome::ok("3");
    for (name, chain) in [("empty", &empty), ("two-non-matching", &non_matching)] {
        c.bench_function(&format!("hooks/{name}/before+after"), |b| {
            b.iter_batched(
                || outcome.clone(),
                |outcome| {
                    let call = std::hint::black_box(&call);
                    let before = poll_once(chain.run_before(call));
                    let after = poll_once(chain.run_after(call, outcome));
                    (before, after)
                },
                criterion::BatchSize::SmallInput,
            );
        });
    }
}

criterion_group!(benches, chains);
criterion_main!(benches);
