//! The result cache of read-only, idempotent tools (`src/result_cache.rs`):
//! a hit, a miss, what is never cached, bounds, opt-outs and invalidation,
//! through the public API with the real plugins. A hit is observable: the
//! file behind `read_file` changes between the calls, and the second call
//! still returns what the first one read, marked `cached`.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use toolhost_runtime::hooks::{AfterDecision, BeforeDecision, FnHook, HookEntry, HookOutcome};
use toolhost_runtime::policy::{Policy, Rule};
use toolhost_runtime::{
    Approver, CallContext, CallError, DirGrant, PluginSettings, Runtime, RuntimeBuilder,
    ToolResult, cache::CacheOptions, cache::ToolCacheSettings, error::ErrorKind,
    permission::ApprovalFuture, permission::CallApproval, permission::CallApprovalRequest,
    permission::CallStep, permission::ResultApproval, permission::ResultApprovalRequest,
};

use crate::support::*;

/// A plugin directory with copies of some plugins, and a data directory
/// (canonical) that `fs` and `hostile` are granted.
struct Scene {
    _tmp: tempfile::TempDir,
    plugins: PathBuf,
    data: PathBuf,
}

impl Scene {
    fn new(plugins: &[(PathBuf, &str)]) -> Scene {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("plugins");
        std::fs::create_dir_all(&dir).unwrap();
        for (from, name) in plugins {
            copy_plugin(from, name, &dir);
        }
        // The example `fs` plugin opts out of the cache (files change
        // outside the host); here it is the file reader whose changes make
        // a hit visible, so its copy loses the opt-out.
        let fs = dir.join("fs.toml");
        if let Ok(text) = std::fs::read_to_string(&fs)
            && let Some(at) = text.find("[cache]")
        {
            std::fs::write(&fs, &text[..at]).unwrap();
        }
        let data = tmp.path().join("data");
        std::fs::create_dir_all(&data).unwrap();
        let data = std::fs::canonicalize(data).unwrap();
        Scene {
            _tmp: tmp,
            plugins: dir,
            data,
        }
    }

    /// Only `fs`.
    fn fs() -> Scene {
        Scene::new(&[(plugins_dir(), "fs")])
    }

    fn write(&self, name: &str, text: &str) {
        std::fs::write(self.data.join(name), text).unwrap();
    }

    fn grant(&self) -> PluginSettings {
        let mut s = PluginSettings::default();
        s.dirs.push(DirGrant::read_only(&self.data));
        s
    }

    /// A builder over the plugins, with `fs` and `hostile` granted the data.
    fn builder(&self) -> RuntimeBuilder {
        self.builder_with(self.grant())
    }

    /// The same, with `fs_settings` for `fs`.
    fn builder_with(&self, fs_settings: PluginSettings) -> RuntimeBuilder {
        Runtime::builder()
            .cache_dir(Some(root().join("target/test-cache")))
            .plugin_dir(&self.plugins)
            .plugin_settings("fs", fs_settings)
            .plugin_settings("hostile", self.grant())
    }
}

async fn call(rt: &Runtime, tool: &str, args: Value) -> Result<ToolResult, CallError> {
    rt.call(tool, args, CallContext::new()).await
}

async fn read(rt: &Runtime, path: &str) -> ToolResult {
    call(rt, "read_file", json!({ "path": path }))
        .await
        .expect("read_file succeeds")
}

#[tokio::test]
async fn the_example_fs_plugin_as_shipped_always_reads_the_file_again() {
    let scene = Scene::fs();
    // Its own manifest, with the opt-out.
    copy_plugin(&plugins_dir(), "fs", &scene.plugins);
    scene.write("a.txt", "first version\n");
    let rt = scene.builder().build().await.unwrap();
    assert!(!read(&rt, "a.txt").await.cached);
    scene.write("a.txt", "second version\n");
    let second = read(&rt, "a.txt").await;
    assert!(!second.cached);
    assert!(
        second.output.contains("second version"),
        "{}",
        second.output
    );
}

#[tokio::test]
async fn a_repeated_read_only_idempotent_call_is_answered_from_the_cache() {
    let scene = Scene::fs();
    scene.write("a.txt", "first version\n");
    let rt = scene.builder().build().await.unwrap();

    let first = read(&rt, "a.txt").await;
    assert!(first.output.contains("first version"), "{}", first.output);
    assert!(!first.cached);

    scene.write("a.txt", "second version\n");
    let steps = Arc::new(Mutex::new(Vec::new()));
    let sink = steps.clone();
    let cx = CallContext::new().on_step(move |s| sink.lock().unwrap().push(s.clone()));
    let second = rt
        .call("read_file", json!({"path": "a.txt"}), cx)
        .await
        .unwrap();
    assert!(second.cached, "the tool did not run again");
    assert_eq!(second.output, first.output, "what the first call read");
    assert!(
        steps
            .lock()
            .unwrap()
            .iter()
            .any(|s| matches!(s, CallStep::Cached)),
        "the call's steps say it came from the cache"
    );
    let as_json = serde_json::to_value(&second).unwrap();
    assert_eq!(as_json["cached"], true);
    let stats = rt.result_cache_stats();
    assert_eq!((stats.hits, stats.misses, stats.entries), (1, 1, 1));

    // The same arguments in another order are the same call.
    let a = call(&rt, "read_file", json!({"path": "a.txt", "limit": 5}))
        .await
        .unwrap();
    let b = call(&rt, "read_file", json!({"limit": 5, "path": "a.txt"}))
        .await
        .unwrap();
    assert!(!a.cached && b.cached);
}

#[tokio::test]
async fn different_arguments_sessions_or_agents_miss_the_cache() {
    let scene = Scene::fs();
    scene.write("a.txt", "one\ntwo\n");
    let rt = scene.builder().build().await.unwrap();
    assert!(!read(&rt, "a.txt").await.cached);
    let other = call(&rt, "read_file", json!({"path": "a.txt", "offset": 2}))
        .await
        .unwrap();
    assert!(!other.cached, "other arguments, another call");
    assert!(other.output.contains("two") && !other.output.contains("one"));

    // The plugin sees the session and the agent: each has its own entries.
    let args = json!({"path": "a.txt"});
    let in_session = |s: &str| CallContext::new().session_id(s);
    let r = rt.call("read_file", args.clone(), in_session("s1")).await;
    assert!(!r.unwrap().cached);
    let r = rt.call("read_file", args.clone(), in_session("s1")).await;
    assert!(r.unwrap().cached);
    let r = rt.call("read_file", args.clone(), in_session("s2")).await;
    assert!(!r.unwrap().cached);
    let r = rt
        .call("read_file", args, CallContext::new().agent("reviewer"))
        .await;
    assert!(!r.unwrap().cached);
}

#[tokio::test]
async fn a_tool_without_both_annotations_always_runs() {
    // `read_path` is read-only but not idempotent.
    let scene = Scene::new(&[(fixtures_dir(), "hostile")]);
    scene.write("a.txt", "first version");
    let rt = scene.builder().build().await.unwrap();
    let path = scene.data.join("a.txt");
    let args = json!({ "path": path.to_str().unwrap() });
    let first = call(&rt, "read_path", args.clone()).await.unwrap();
    assert_eq!(first.output, "first version");
    scene.write("a.txt", "second version");
    let second = call(&rt, "read_path", args).await.unwrap();
    assert_eq!(second.output, "second version");
    assert!(!first.cached && !second.cached);
    assert_eq!(rt.result_cache_stats().entries, 0);
}

#[tokio::test]
async fn errors_are_never_cached() {
    let scene = Scene::fs();
    let rt = scene.builder().build().await.unwrap();
    let err = call(&rt, "read_file", json!({"path": "later.txt"}))
        .await
        .unwrap_err();
    assert!(matches!(err, CallError::Tool { .. }), "{err:?}");
    assert_eq!(rt.result_cache_stats().entries, 0);

    scene.write("later.txt", "here now\n");
    let r = read(&rt, "later.txt").await;
    assert!(r.output.contains("here now"), "{}", r.output);
    assert!(!r.cached);
}

#[tokio::test]
async fn an_entry_expires_after_its_ttl() {
    let scene = Scene::fs();
    scene.write("a.txt", "first version\n");
    let mut fs = scene.grant();
    fs.cache.ttl_ms = Some(300);
    let rt = scene.builder_with(fs).build().await.unwrap();
    assert!(!read(&rt, "a.txt").await.cached);
    scene.write("a.txt", "second version\n");
    assert!(read(&rt, "a.txt").await.cached, "within its TTL");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let r = read(&rt, "a.txt").await;
    assert!(!r.cached, "past its TTL the tool runs again");
    assert!(r.output.contains("second version"), "{}", r.output);
}

/// Which entry goes is the cache's own rule (the oldest of the new entry's
/// shard, else the oldest of all: `result_cache.rs`'s unit tests, with
/// keys chosen per shard); here the keys depend on the scene's paths, so
/// this holds for any of them: the bound, and the newest result stays.
#[tokio::test]
async fn the_entry_limit_holds_and_the_newest_result_stays() {
    let scene = Scene::fs();
    for name in ["a", "b", "c"] {
        scene.write(&format!("{name}.txt"), name);
    }
    let rt = scene
        .builder()
        .result_cache(CacheOptions {
            max_entries: 2,
            ..CacheOptions::default()
        })
        .build()
        .await
        .unwrap();
    read(&rt, "a.txt").await;
    read(&rt, "b.txt").await;
    assert!(read(&rt, "a.txt").await.cached);
    read(&rt, "c.txt").await;
    assert_eq!(rt.result_cache_stats().entries, 2);
    assert!(read(&rt, "c.txt").await.cached, "the newest stays");
    // One of a and b went: a hit on a means b is gone, and the other way.
    let a_kept = read(&rt, "a.txt").await.cached;
    if a_kept {
        assert!(!read(&rt, "b.txt").await.cached, "b was evicted");
    }
    assert_eq!(rt.result_cache_stats().entries, 2);
}

#[tokio::test]
async fn the_byte_limit_evicts_and_keeps_large_results_out() {
    let scene = Scene::fs();
    let budget = 8 * 1024;
    let rt = scene
        .builder()
        .result_cache(CacheOptions {
            max_bytes: budget,
            ..CacheOptions::default()
        })
        .build()
        .await
        .unwrap();

    // More than an eighth of the budget: never cached.
    scene.write("big.txt", &"x".repeat(budget / 8 + 1));
    assert!(!read(&rt, "big.txt").await.cached);
    assert!(!read(&rt, "big.txt").await.cached);
    assert_eq!(rt.result_cache_stats().entries, 0);

    // Small ones fill the budget; the oldest go first.
    for i in 0..40 {
        scene.write(&format!("{i}.txt"), &"y".repeat(200));
        read(&rt, &format!("{i}.txt")).await;
    }
    let stats = rt.result_cache_stats();
    assert!(stats.bytes <= budget, "{stats:?}");
    assert!(stats.entries > 1 && stats.entries < 40, "{stats:?}");
    assert!(read(&rt, "39.txt").await.cached);
    assert!(!read(&rt, "0.txt").await.cached, "the oldest was evicted");
}

#[tokio::test]
async fn the_host_settings_opt_a_plugin_or_one_tool_out() {
    let scene = Scene::fs();
    scene.write("a.txt", "a");

    let mut off = scene.grant();
    off.cache.enabled = Some(false);
    let rt = scene.builder_with(off).build().await.unwrap();
    read(&rt, "a.txt").await;
    assert!(!read(&rt, "a.txt").await.cached);

    let mut one_tool_off = scene.grant();
    one_tool_off.cache.tools.insert(
        "read_file".into(),
        ToolCacheSettings {
            enabled: Some(false),
            ttl_ms: None,
        },
    );
    let rt = scene.builder_with(one_tool_off).build().await.unwrap();
    read(&rt, "a.txt").await;
    assert!(!read(&rt, "a.txt").await.cached);
    let list = json!({"path": "."});
    assert!(!call(&rt, "list_dir", list.clone()).await.unwrap().cached);
    assert!(call(&rt, "list_dir", list).await.unwrap().cached);

    // The same, from a config file's `[plugins.fs]` table.
    let from_file: PluginSettings = toml::from_str(&format!(
        "dirs = [{{ path = {:?} }}]\n[cache]\ntools.read_file = {{ enabled = false }}\n",
        scene.data
    ))
    .unwrap();
    let rt = scene.builder_with(from_file).build().await.unwrap();
    read(&rt, "a.txt").await;
    assert!(!read(&rt, "a.txt").await.cached);
}

#[tokio::test]
async fn the_manifest_opts_a_tool_out_but_cannot_opt_one_in() {
    let scene = Scene::fs();
    scene.write("a.txt", "a");
    let manifest = scene.plugins.join("fs.toml");
    let original = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(
        &manifest,
        format!("{original}\n[cache]\ntools.read_file = {{ enabled = false }}\n"),
    )
    .unwrap();
    let rt = scene.builder().build().await.unwrap();
    read(&rt, "a.txt").await;
    assert!(!read(&rt, "a.txt").await.cached);
    let list = json!({"path": "."});
    call(&rt, "list_dir", list.clone()).await.unwrap();
    assert!(call(&rt, "list_dir", list).await.unwrap().cached);

    // A manifest saying `enabled = true` does not undo the host's `false`.
    std::fs::write(&manifest, format!("{original}\n[cache]\nenabled = true\n")).unwrap();
    let mut off = scene.grant();
    off.cache.enabled = Some(false);
    let rt = scene.builder_with(off).build().await.unwrap();
    read(&rt, "a.txt").await;
    assert!(!read(&rt, "a.txt").await.cached);
}

#[tokio::test]
async fn the_runtime_switch_turns_the_cache_off() {
    let scene = Scene::fs();
    scene.write("a.txt", "a");
    let rt = scene
        .builder()
        .result_cache(CacheOptions::disabled())
        .build()
        .await
        .unwrap();
    read(&rt, "a.txt").await;
    assert!(!read(&rt, "a.txt").await.cached);
    assert_eq!(rt.result_cache_stats(), Default::default());
}

#[tokio::test]
async fn a_policy_change_denies_a_cached_tool_and_clears_the_cache() {
    let scene = Scene::fs();
    scene.write("a.txt", "first version\n");
    let rt = scene.builder().build().await.unwrap();
    read(&rt, "a.txt").await;
    assert!(read(&rt, "a.txt").await.cached);

    let deny = Policy::builder()
        .rule(Rule::deny("read_file").reason("no reading now"))
        .build()
        .unwrap();
    rt.set_policy(deny);
    let err = call(&rt, "read_file", json!({"path": "a.txt"}))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::PermissionDenied, "{err}");

    scene.write("a.txt", "second version\n");
    rt.set_policy(Policy::allow_all());
    let r = read(&rt, "a.txt").await;
    assert!(!r.cached, "the policy change cleared the cache");
    assert!(r.output.contains("second version"), "{}", r.output);
}

/// Accepts every result after the first, counting the questions.
#[derive(Default)]
struct AcceptAfterFirst(AtomicUsize);

impl Approver for AcceptAfterFirst {
    fn approve_call<'a>(
        &'a self,
        _: &'a CallApprovalRequest<'a>,
    ) -> ApprovalFuture<'a, CallApproval> {
        Box::pin(async { CallApproval::AllowOnce })
    }
    fn approve_result<'a>(
        &'a self,
        _: &'a ResultApprovalRequest<'a>,
    ) -> ApprovalFuture<'a, ResultApproval> {
        let first = self.0.fetch_add(1, Ordering::SeqCst) == 0;
        Box::pin(async move {
            if first {
                ResultApproval::Reject { message: None }
            } else {
                ResultApproval::Accept
            }
        })
    }
}

#[tokio::test]
async fn hooks_and_result_approval_run_on_a_hit_with_the_raw_output() {
    let scene = Scene::fs();
    scene.write("a.txt", "text\n");
    let afters = Arc::new(AtomicUsize::new(0));
    let counted = afters.clone();
    let approver = Arc::new(AcceptAfterFirst::default());
    let rt = scene
        .builder()
        .policy(
            Policy::builder()
                .approve_results(["read_file"])
                .build()
                .unwrap(),
        )
        .approver(approver.clone())
        .hook(HookEntry::new(Arc::new(FnHook::before(
            "alias",
            |call| match call.args["path"].as_str() {
                Some("alias.txt") => BeforeDecision::Rewrite(json!({"path": "a.txt"})),
                _ => BeforeDecision::Continue,
            },
        ))))
        .hook(HookEntry::new(Arc::new(FnHook::after(
            "mark",
            move |_, outcome: &HookOutcome| {
                counted.fetch_add(1, Ordering::SeqCst);
                match outcome {
                    HookOutcome::Ok { output, .. } => {
                        AfterDecision::replace_output(format!("{output}[marked]"))
                    }
                    HookOutcome::Err { .. } => AfterDecision::Keep,
                }
            },
        ))))
        .build()
        .await
        .unwrap();
    // The user rejects the first result; the result is cached all the same
    // (the raw output, before the after-hooks and the approval)...
    let err = call(&rt, "read_file", json!({"path": "a.txt"}))
        .await
        .unwrap_err();
    assert!(matches!(err, CallError::Rejected { .. }), "{err:?}");
    let first = read(&rt, "a.txt").await;
    // ...and a call the before-hook rewrites into the same one hits it.
    let second = read(&rt, "alias.txt").await;
    assert!(first.cached && second.cached);
    assert_eq!(
        afters.load(Ordering::SeqCst),
        3,
        "the after-hook ran every time"
    );
    assert_eq!(
        approver.0.load(Ordering::SeqCst),
        3,
        "so did result approval"
    );
    assert_eq!(
        first.output, second.output,
        "the after-hook saw the raw output both times"
    );
    assert_eq!(second.output.matches("[marked]").count(), 1);
}

#[tokio::test]
async fn a_call_that_may_write_clears_the_cache() {
    // `sleep` is not read-only: after it ran, nothing cached is trusted.
    let scene = Scene::new(&[(plugins_dir(), "fs"), (fixtures_dir(), "hostile")]);
    scene.write("a.txt", "a");
    let rt = scene.builder().build().await.unwrap();
    read(&rt, "a.txt").await;
    assert!(read(&rt, "a.txt").await.cached);
    call(&rt, "sleep", json!({"ms": 1})).await.unwrap();
    assert!(!read(&rt, "a.txt").await.cached);

    // Unless the embedder says otherwise.
    let rt = scene
        .builder()
        .result_cache(CacheOptions {
            clear_after_writes: false,
            ..CacheOptions::default()
        })
        .build()
        .await
        .unwrap();
    read(&rt, "a.txt").await;
    call(&rt, "sleep", json!({"ms": 1})).await.unwrap();
    assert!(read(&rt, "a.txt").await.cached);
}

#[tokio::test]
async fn a_write_on_a_reused_instance_clears_the_cache_too() {
    let scene = Scene::new(&[(plugins_dir(), "fs"), (fixtures_dir(), "hostile")]);
    scene.write("a.txt", "a");
    let rt = scene.builder().build().await.unwrap();
    read(&rt, "a.txt").await;
    assert!(read(&rt, "a.txt").await.cached);
    let mut kept = rt.reused_instance("hostile").await.unwrap();
    kept.call(
        "sleep",
        json!({"ms": 1}),
        toolhost_runtime::CallContext::new(),
    )
    .await
    .unwrap();
    assert!(
        !read(&rt, "a.txt").await.cached,
        "a read after a write on a kept instance runs again"
    );
}

async fn calculate(rt: &Runtime) -> ToolResult {
    call(rt, "calculate", json!({"expression": "1+1"}))
        .await
        .unwrap()
}

#[tokio::test]
async fn a_reload_with_other_code_makes_old_entries_unreachable() {
    let scene = Scene::new(&[(plugins_dir(), "calc")]);
    let rt = scene.builder().build().await.unwrap();
    assert_eq!(calculate(&rt).await.output, "2");
    assert!(calculate(&rt).await.cached);

    // Other code under the same name and manifest: `dup-calc` answers "dup".
    std::fs::copy(
        fixtures_dir().join("dup-calc.wasm"),
        scene.plugins.join("calc.wasm"),
    )
    .unwrap();
    rt.rescan().await;
    let r = calculate(&rt).await;
    assert_eq!(r.output, "dup");
    assert!(!r.cached);
}

/// `calc`'s manifest, with `description` changed (a reload without other code).
fn redescribe(plugins: &Path, description: &str) {
    let manifest = plugins.join("calc.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    let kept: String = text
        .lines()
        .filter(|l| !l.starts_with("description"))
        .map(|l| format!("{l}\n"))
        .collect();
    let text = kept.replacen(
        "version = \"0.1.0\"\n",
        &format!("version = \"0.1.0\"\ndescription = {description:?}\n"),
        1,
    );
    std::fs::write(&manifest, text).unwrap();
}

#[tokio::test]
async fn a_grant_change_makes_old_entries_unreachable() {
    let scene = Scene::new(&[(plugins_dir(), "calc")]);
    // The lock file trusts other code under the name `calc`: its grant
    // (an environment variable) is withheld.
    let lock = scene.plugins.with_file_name("toolhost.lock");
    std::fs::write(&lock, "[plugins.calc]\ndigest = \"sha256:00\"\n").unwrap();
    let mut grant = PluginSettings::default();
    grant.env.push("CALC_MODE=exact".into());
    let rt = scene
        .builder()
        .plugin_settings("calc", grant)
        .lock_file(&lock)
        .build()
        .await
        .unwrap();
    let granted = |rt: &Runtime| {
        let calc = rt.plugins().into_iter().find(|p| p.name == "calc").unwrap();
        !calc.granted.env.is_empty()
    };
    assert!(!granted(&rt));
    calculate(&rt).await;
    assert!(calculate(&rt).await.cached);

    // A reload that changes neither code nor grants keeps the entries...
    redescribe(&scene.plugins, "reloaded once");
    rt.rescan().await;
    assert!(!granted(&rt));
    assert!(calculate(&rt).await.cached);

    // ...one that gives the grant (the user trusts this code) does not.
    rt.trust("calc").unwrap();
    redescribe(&scene.plugins, "reloaded twice");
    rt.rescan().await;
    assert!(granted(&rt));
    assert!(!calculate(&rt).await.cached);
}
