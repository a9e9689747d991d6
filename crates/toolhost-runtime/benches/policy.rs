//! What the permission layer and the hooks add to a call, next to the call.
//!
//! - `call/plain`: a fresh-instance `calculate` with the default allow-all
//!   policy and no hooks (the baseline).
//! - `call/ten_rules_two_hooks`: the same call with a ten-rule policy (one of
//!   them with an argument pattern) and two Rust hooks that match `calculate`
//!   and do nothing.
//! - `call/ten_rules_two_other_tools_hooks`: the ten rules, and two hooks
//!   configured for other tools (`read_file`, `http_*`).
//! - `call/plain_again`: `plain` again, from a runtime built last: the
//!   difference between two identical runtimes, for scale.
//! - `call/redact_hook_plugin`: the same call with the `redact-secrets` hook
//!   plugin after it (`stages = ["after"]`: one sandboxed component instance
//!   per call; it finds nothing and keeps the result).
//! - `check/policy_evaluate`, `check/empty_chain`, `check/two_noop_hooks`:
//!   the permission check and the hook chains alone, without a call (the
//!   chains are polled once: they finish without waiting).
//!
//! Run with `cargo xtask bench` (it builds the plugins first).

#[path = "support.rs"]
mod support;

use std::sync::Arc;
use std::time::Duration;

use criterion::{Criterion, criterion_group};
use serde_json::json;
use support::*;
use toolhost_runtime::hooks::{
    AfterDecision, BeforeDecision, FnHook, HookCall, HookChain, HookConfig, HookEntry, HookOutcome,
    Matcher,
};
use toolhost_runtime::policy::{Policy, Rule, SessionToggles};
use toolhost_runtime::{CallContext, Runtime, RuntimeBuilder};

/// Ten rules of the kinds a project policy has; `calculate` is allowed by one.
fn ten_rules() -> Policy {
    Policy::builder()
        .rule(Rule::deny("http_get").reason("no network"))
        .rule(Rule::ask("read_file"))
        .rule(Rule::deny("read_file").arg_path("path", "/etc/**"))
        .rule(Rule::allow("list_dir"))
        .rule(Rule::ask("write_*"))
        .rule(Rule::deny("delete_*"))
        .rule(Rule::allow("word_count"))
        .rule(Rule::allow("regex_find"))
        .rule(Rule::ask("case_convert").plugin("text"))
        .rule(Rule::allow("calc*"))
        .build()
        .unwrap()
}

fn noop_hooks(builder: RuntimeBuilder) -> RuntimeBuilder {
    builder
        .hook(HookEntry::new(Arc::new(FnHook::before("audit", |_| {
            BeforeDecision::Continue
        }))))
        .hook(HookEntry::new(Arc::new(FnHook::after("check", |_, _| {
            AfterDecision::Keep
        }))))
}

fn calls(c: &mut Criterion) {
    let rt = tokio_rt();
    let cache = tempfile::tempdir().unwrap();
    let build = |f: &dyn Fn(RuntimeBuilder) -> RuntimeBuilder| {
        rt.block_on(
            f(Runtime::builder()
                // Fresh calls are measured, not the result cache.
                .result_cache(toolhost_runtime::cache::CacheOptions::disabled())
                .plugin_dir(
                    built("plugins", "redact-secrets.wasm")
                        .parent()
                        .map(std::path::Path::to_path_buf)
                        .unwrap_or_default(),
                )
                .cache_dir(Some(cache.path().to_owned())))
            .build(),
        )
        .unwrap()
    };
    let plain = build(&|b| b);
    let guarded = build(&|b| noop_hooks(b.policy(ten_rules())));
    let unrelated = build(&|b| {
        b.policy(ten_rules())
            .hook(
                HookEntry::new(Arc::new(FnHook::before("audit", |_| {
                    BeforeDecision::Continue
                })))
                .matcher(Matcher::tools(["read_file"]).unwrap()),
            )
            .hook(
                HookEntry::new(Arc::new(FnHook::after("check", |_, _| AfterDecision::Keep)))
                    .matcher(Matcher::tools(["http_*"]).unwrap()),
            )
    });
    let redacting = build(&|b| {
        b.hook_configs([toml::from_str::<HookConfig>(
            "plugin-hook = \"redact-secrets\"\ntools = [\"calculate\"]\nstages = [\"after\"]",
        )
        .unwrap()])
    });
    // The same as `plain`, built last: how much two identical runtimes differ.
    let plain_again = build(&|b| b);
    let args = json!({"expression": "2*(3+4)"});
    for r in [&plain, &guarded, &unrelated, &redacting, &plain_again] {
        let out = rt
            .block_on(r.call("calculate", args.clone(), CallContext::new()))
            .unwrap();
        assert_eq!(out.output, "14");
    }

    let mut g = c.benchmark_group("call");
    g.measurement_time(Duration::from_secs(10));
    for (name, runtime) in [
        ("plain", &plain),
        ("ten_rules_two_hooks", &guarded),
        ("ten_rules_two_other_tools_hooks", &unrelated),
        ("redact_hook_plugin", &redacting),
        ("plain_again", &plain_again),
    ] {
        g.bench_function(name, |b| {
            b.iter(|| {
                rt.block_on(runtime.call("calculate", args.clone(), CallContext::new()))
                    .unwrap()
            });
        });
    }
    g.finish();

    let policy = ten_rules();
    let toggles = SessionToggles::new();
    let empty = HookChain::empty();
    let two = HookChain::new(vec![
        HookEntry::new(Arc::new(FnHook::before("audit", |_| {
            BeforeDecision::Continue
        }))),
        HookEntry::new(Arc::new(FnHook::after("check", |_, _| AfterDecision::Keep))),
    ]);
    let mut g = c.benchmark_group("check");
    g.bench_function("policy_evaluate", |b| {
        b.iter(|| {
            let request =
                toolhost_runtime::policy::CallRequest::new("calculate", &args).plugin("calc");
            policy.evaluate(&request, &toggles)
        });
    });
    // A call the path rule applies to: its path argument is matched as
    // written, resolved against the plugin's grant, and canonicalised (one
    // `canonicalize` syscall).
    let base = std::env::temp_dir();
    let read = serde_json::json!({"path": "notes.txt"});
    g.bench_function("policy_evaluate_path_rule", |b| {
        b.iter(|| {
            let request = toolhost_runtime::policy::CallRequest::new("read_file", &read)
                .plugin("fs")
                .path_base(&base);
            policy.evaluate(&request, &toggles)
        });
    });
    // The chains finish without waiting: poll them once, no executor in the
    // figure (inside the runtime's context: each hook's timeout is a tokio timer).
    let _context = rt.enter();
    let outcome = HookOutcome::ok("14");
    for (name, chain) in [("empty_chain", &empty), ("two_noop_hooks", &two)] {
        g.bench_function(name, |b| {
            b.iter(|| {
                let call = HookCall::new("calculate", &args).plugin("calc", "0.1.0");
                let before = poll_once(chain.run_before(&call));
                let after = poll_once(chain.run_after(&call, outcome.clone()));
                (before, after)
            });
        });
    }
    g.finish();
}

/// Polls a future that is ready at once (the hook chains with Rust hooks are).
fn poll_once<F: std::future::Future>(f: F) -> Option<F::Output> {
    let mut f = std::pin::pin!(f);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match f.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(v) => Some(v),
        std::task::Poll::Pending => None,
    }
}

criterion_group!(benches, calls);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
}
