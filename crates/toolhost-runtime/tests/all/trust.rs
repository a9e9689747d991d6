//! What a plugin may claim for itself and what only the user may give it
//! (the trust model; `docs/security.md`).

use std::time::Duration;

use toolhost_runtime::{
    Limits, PluginInfo, PluginSettings, Runtime, RuntimeBuilder, lockfile::GrantState,
};

use crate::support::*;

/// `calc` with a manifest asking for far more than the host gives.
fn greedy_calc(dir: &std::path::Path) {
    copy_plugin(&plugins_dir(), "calc", dir);
    std::fs::write(
        dir.join("calc.toml"),
        r#"name = "calc"
version = "0.1.0"

[limits]
timeout-ms = 31536000000
memory-mb = 1000000
table-elements = 100000000
max-output-bytes = 10000000000
max-args-bytes = 10000000000
max-log-lines = 100000000
max-instances = 100000
"#,
    )
    .unwrap();
}

/// A runtime over `dir`, with the tests' shared compile cache.
fn builder(dir: &std::path::Path) -> RuntimeBuilder {
    Runtime::builder()
        .cache_dir(Some(root().join("target/test-cache")))
        .plugin_dir(dir)
}

/// The loaded plugin `name`, as users see it.
fn info(rt: &Runtime, name: &str) -> PluginInfo {
    rt.plugins()
        .into_iter()
        .find(|p| p.name == name)
        .unwrap_or_else(|| panic!("{name} is loaded"))
}

fn ceilings() -> Limits {
    Limits {
        timeout: Duration::from_secs(2),
        memory_bytes: 32 * 1024 * 1024,
        table_elements: 50_000,
        max_output_bytes: 64 * 1024,
        max_args_bytes: 16 * 1024,
        max_log_lines: 100,
        max_instances: 4,
    }
}

/// The limits `calc` in `dir` gets under [`ceilings`], with `user`'s settings.
async fn calc_limits(dir: &std::path::Path, user: PluginSettings) -> Limits {
    let rt = builder(dir)
        .limits(ceilings())
        .plugin_settings("calc", user)
        .build()
        .await
        .unwrap();
    info(&rt, "calc").limits
}

#[tokio::test]
async fn a_manifest_cannot_raise_its_limits_above_the_hosts() {
    let tmp = tempfile::tempdir().unwrap();
    greedy_calc(tmp.path());
    let limits = calc_limits(tmp.path(), PluginSettings::default()).await;
    assert_eq!(limits, ceilings(), "every limit is held at the host's");
}

#[tokio::test]
async fn a_manifest_can_lower_its_limits_and_the_user_can_raise_them() {
    let tmp = tempfile::tempdir().unwrap();
    copy_plugin(&plugins_dir(), "calc", tmp.path());
    // calc's own manifest asks for 1 s and 16 MiB, below the ceilings.
    let limits = calc_limits(tmp.path(), PluginSettings::default()).await;
    assert_eq!(limits.timeout, Duration::from_secs(1));
    assert_eq!(limits.memory_bytes, 16 * 1024 * 1024);

    // The user's per-plugin settings are not a manifest: they may go above.
    let tmp = tempfile::tempdir().unwrap();
    greedy_calc(tmp.path());
    let mut user = PluginSettings::default();
    user.limits.timeout_ms = Some(60_000);
    user.limits.max_instances = Some(8);
    let limits = calc_limits(tmp.path(), user).await;
    assert_eq!(limits.timeout, Duration::from_secs(60));
    assert_eq!(limits.max_instances, 8);
    assert_eq!(limits.max_output_bytes, 64 * 1024, "the rest held");
}

#[tokio::test]
async fn a_plugin_cannot_take_a_tool_name_reserved_for_the_host() {
    let tmp = tempfile::tempdir().unwrap();
    copy_plugin(&fixtures_dir(), "hostile-squatter", tmp.path());
    let rt = builder(tmp.path()).build().await.unwrap();
    let names: Vec<String> = rt.tools().into_iter().map(|t| t.name).collect();
    assert!(
        !names.iter().any(|n| n == "read_var"),
        "the built-in's name stays the host's: {names:?}"
    );
    assert!(
        names.iter().any(|n| n == "hostile-squatter__read_var"),
        "the plugin's tool is still reachable, renamed: {names:?}"
    );
    assert!(
        toolhost_runtime::contract::RESERVED_TOOL_NAMES.contains(&"read_var"),
        "the reserved names are public, for hosts that add built-ins"
    );
    let warnings = rt.load_report().warnings.join("\n");
    assert!(
        warnings.contains("read_var") && warnings.contains("reserved"),
        "{warnings}"
    );
}

/// Whether `hostile-env` (which answers `env {"name": …}` with the
/// variable's value) sees the granted secret.
async fn has_secret(rt: &Runtime) -> bool {
    rt.call(
        "env",
        serde_json::json!({ "name": "TOOLHOST_TEST_SECRET" }),
        toolhost_runtime::CallContext::new(),
    )
    .await
    .is_ok_and(|r| r.output.contains("hunter2"))
}

/// Puts fixture `code`'s component in `dir` as `hostile-env.wasm` (the
/// manifest, and so the name, stay `hostile-env`'s).
fn serve_as_hostile_env(dir: &std::path::Path, code: &str) {
    std::fs::copy(
        fixtures_dir().join(format!("{code}.wasm")),
        dir.join("hostile-env.wasm"),
    )
    .unwrap();
}

async fn with_lock(dir: &std::path::Path, lock: &std::path::Path, accept_new: bool) -> Runtime {
    let mut grants = PluginSettings::default();
    grants.env.push("TOOLHOST_TEST_SECRET=hunter2".to_owned());
    builder(dir)
        .plugin_settings("hostile-env", grants)
        .lock_file(lock)
        .accept_new_digests(accept_new)
        .build()
        .await
        .unwrap()
}

#[tokio::test]
async fn grants_stay_with_the_code_they_were_given_to() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, lock) = (tmp.path().join("plugins"), tmp.path().join("toolhost.lock"));
    copy_plugin(&fixtures_dir(), "hostile-env", &dir);

    // First use: the digest is recorded and the grant applies.
    let rt = with_lock(&dir, &lock, false).await;
    let env = info(&rt, "hostile-env");
    assert_eq!(env.grants, GrantState::FirstUse);
    assert!(env.digest.starts_with("sha256:"), "{}", env.digest);
    assert!(has_secret(&rt).await);
    let locked = std::fs::read_to_string(&lock).unwrap();
    assert!(locked.contains(&env.digest), "{locked}");
    drop(rt);

    // Other code under the same name (another component claiming
    // `hostile-env`): it loads, without the grant, and says so.
    serve_as_hostile_env(&dir, "hostile");
    let rt = with_lock(&dir, &lock, false).await;
    let env = info(&rt, "hostile-env");
    assert!(
        matches!(env.grants, GrantState::Withheld { .. }),
        "{:?}",
        env.grants
    );
    assert!(env.granted.env.is_empty(), "{:?}", env.granted);
    assert!(!has_secret(&rt).await);
    let warnings = rt.load_report().warnings.join("\n");
    assert!(
        warnings.contains("hostile-env") && warnings.contains("host trust"),
        "{warnings}"
    );

    // The user accepts it: the lock trusts the new digest, and the next
    // load has the grant.
    let accepted = rt.trust("hostile-env").unwrap();
    assert_eq!(accepted, env.digest);
    drop(rt);
    let rt = with_lock(&dir, &lock, false).await;
    assert!(has_secret(&rt).await);
    drop(rt);

    // Dev mode accepts a rebuilt plugin at once.
    serve_as_hostile_env(&dir, "hostile-env");
    let rt = with_lock(&dir, &lock, true).await;
    let env = info(&rt, "hostile-env");
    assert_eq!(env.grants, GrantState::FirstUse);
    assert!(has_secret(&rt).await);
}

/// `hostile-env`'s component copied as `FILE.wasm` with a manifest that
/// claims the name `hostile-env` at `version`.
fn impostor(dir: &std::path::Path, file: &str, version: &str) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::copy(
        fixtures_dir().join("hostile-env.wasm"),
        dir.join(format!("{file}.wasm")),
    )
    .unwrap();
    std::fs::write(
        dir.join(format!("{file}.toml")),
        format!("name = \"hostile-env\"\nversion = \"{version}\"\n"),
    )
    .unwrap();
}

#[tokio::test]
async fn on_first_use_a_file_named_otherwise_neither_displaces_the_named_plugin_nor_gets_its_grants()
 {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, lock) = (tmp.path().join("plugins"), tmp.path().join("toolhost.lock"));
    // The user's plugin, `hostile-env.wasm` at 0.1.0, granted the secret;
    // beside it `weather.wasm`, whose manifest says `hostile-env` 99.0.0.
    // No lock entry yet: a new directory.
    std::fs::create_dir_all(&dir).unwrap();
    serve_as_hostile_env(&dir, "hostile-env");
    std::fs::write(
        dir.join("hostile-env.toml"),
        "name = \"hostile-env\"\nversion = \"0.1.0\"\n",
    )
    .unwrap();
    impostor(&dir, "weather", "99.0.0");
    let rt = with_lock(&dir, &lock, false).await;
    let env = info(&rt, "hostile-env");
    assert!(
        env.path.ends_with("hostile-env.wasm"),
        "the file named for the plugin keeps its name, whatever the other's version: {}",
        env.path.display()
    );
    assert_eq!(env.version.to_string(), "0.1.0");
    assert_eq!(env.grants, GrantState::FirstUse);
    assert!(
        env.selection
            .as_deref()
            .unwrap_or_default()
            .contains("named"),
        "{:?}",
        env.selection
    );
    assert!(has_secret(&rt).await);
    drop(rt);

    // Only the impostor: it loads under the name it claims, but without the
    // grants, and it is never recorded in the lock file as that name.
    let tmp = tempfile::tempdir().unwrap();
    let (dir, lock) = (tmp.path().join("plugins"), tmp.path().join("toolhost.lock"));
    impostor(&dir, "weather", "99.0.0");
    let rt = with_lock(&dir, &lock, false).await;
    let env = info(&rt, "hostile-env");
    assert_eq!(
        env.grants,
        GrantState::NotItsFile {
            file: "weather".into()
        }
    );
    assert!(env.granted.env.is_empty(), "{:?}", env.granted);
    assert!(!has_secret(&rt).await, "the impostor read the secret");
    assert!(!lock.exists(), "the impostor was recorded in the lock file");
    let warnings = rt.load_report().warnings.join("\n");
    assert!(
        warnings.contains("weather.wasm") && warnings.contains("hostile-env.wasm"),
        "{warnings}"
    );
    // Nor does `host trust` record it: the way is to name the file.
    let refused = rt.trust("hostile-env");
    assert!(
        matches!(
            refused,
            Err(toolhost_runtime::lockfile::LockError::NotItsFile { .. })
        ),
        "{refused:?}"
    );
    assert!(!lock.exists());
}

#[tokio::test]
async fn a_plugin_without_grants_is_not_recorded_and_a_broken_lock_file_is_an_error() {
    let tmp = tempfile::tempdir().unwrap();
    let lock = tmp.path().join("toolhost.lock");
    let dir = tmp.path().join("plugins");
    copy_plugin(&plugins_dir(), "calc", &dir);
    let rt = builder(&dir).lock_file(&lock).build().await.unwrap();
    let calc = info(&rt, "calc");
    assert_eq!(calc.grants, GrantState::NoGrants);
    assert!(!lock.exists(), "nothing to bind, nothing written");

    std::fs::write(&lock, "this is = [not toml").unwrap();
    let Err(err) = builder(&dir).lock_file(&lock).build().await else {
        panic!("a malformed lock file stops the start");
    };
    assert!(err.to_string().contains("toolhost.lock"), "{err}");
}

/// `fs`, and `a-tools` (the squatter fixture, whose name sorts first) both
/// declaring `read_file` at start-up: neither gets the plain name, fs's is
/// `fs__read_file` and the squatter's `a-tools__read_file`; fs is granted
/// the scene's directory.
fn clash() -> (tempfile::TempDir, FsScene, PluginSettings) {
    let scene = fs_scene();
    let tmp = tempfile::tempdir().unwrap();
    copy_plugin(&plugins_dir(), "fs", tmp.path());
    std::fs::copy(
        fixtures_dir().join("hostile-squatter.wasm"),
        tmp.path().join("a-tools.wasm"),
    )
    .unwrap();
    std::fs::write(tmp.path().join("a-tools.toml"), "name = \"a-tools\"\n").unwrap();
    let mut fs = PluginSettings::default();
    fs.dirs
        .push(toolhost_runtime::DirGrant::read_only(&scene.granted));
    (tmp, scene, fs)
}

/// Calls fs's renamed `fs__read_file` on the scene's `hello.txt`, expecting
/// it to be refused.
async fn read_renamed(rt: &Runtime, scene: &FsScene) -> toolhost_runtime::CallError {
    let path = scene.granted.join("hello.txt").display().to_string();
    rt.call(
        "fs__read_file",
        serde_json::json!({ "path": path }),
        toolhost_runtime::CallContext::new(),
    )
    .await
    .expect_err("the call is refused")
}

#[tokio::test]
async fn a_rule_still_holds_when_a_clash_renames_the_tool() {
    let (tmp, scene, fs) = clash();
    let policy = toolhost_runtime::policy::Policy::builder()
        .rule(toolhost_runtime::policy::Rule::ask("read_file").reason("reading files needs a nod"))
        .rule(toolhost_runtime::policy::Rule::deny("fs:list_dir").reason("no listing"))
        .build()
        .unwrap();
    let rt = builder(tmp.path())
        .plugin_settings("fs", fs)
        .policy(policy)
        .build()
        .await
        .unwrap();
    assert_eq!(info(&rt, "fs").name, "fs");
    let names: Vec<String> = rt.tools().into_iter().map(|t| t.name).collect();
    assert!(names.iter().any(|n| n == "fs__read_file"), "{names:?}");

    let err = read_renamed(&rt, &scene).await;
    assert_eq!(
        err.kind(),
        toolhost_runtime::error::ErrorKind::PermissionDenied,
        "the ask rule for `read_file` still applies to fs's renamed tool: {err}"
    );
    assert!(err.to_string().contains("needs a nod"), "{err}");

    // `plugin:tool` names one plugin's tool: fs's list_dir is hidden and
    // denied.
    assert!(
        !rt.offered_tools(None, None)
            .iter()
            .any(|t| t.plugin == "fs" && t.declared_name == "list_dir")
    );
}

#[tokio::test]
async fn a_newcomer_never_takes_a_tool_name_another_plugin_holds() {
    let scene = fs_scene();
    let tmp = tempfile::tempdir().unwrap();
    copy_plugin(&plugins_dir(), "fs", tmp.path());
    let mut fs = PluginSettings::default();
    fs.dirs
        .push(toolhost_runtime::DirGrant::read_only(&scene.granted));
    let rt = builder(tmp.path())
        .plugin_settings("fs", fs)
        .build()
        .await
        .unwrap();
    let path = scene.granted.join("hello.txt").display().to_string();
    let read = || async {
        rt.call(
            "read_file",
            serde_json::json!({ "path": path }),
            toolhost_runtime::CallContext::new(),
        )
        .await
        .unwrap()
        .output
    };
    let before = read().await;

    // A plugin whose name sorts first arrives while fs holds `read_file`.
    std::fs::copy(
        fixtures_dir().join("hostile-squatter.wasm"),
        tmp.path().join("a-tools.wasm"),
    )
    .unwrap();
    std::fs::write(tmp.path().join("a-tools.toml"), "name = \"a-tools\"\n").unwrap();
    rt.rescan().await;
    assert_eq!(info(&rt, "a-tools").name, "a-tools", "the newcomer loaded");
    assert_eq!(read().await, before, "`read_file` is still fs's");
    let names: Vec<String> = rt.tools().into_iter().map(|t| t.name).collect();
    assert!(names.iter().any(|n| n == "a-tools__read_file"), "{names:?}");

    // fs away for a moment (being rebuilt): the newcomer does not get the
    // name meanwhile, and fs has it back when it returns.
    let fs_file = tmp.path().join("fs.wasm");
    let bytes = std::fs::read(&fs_file).unwrap();
    std::fs::remove_file(&fs_file).unwrap();
    rt.rescan().await;
    let names: Vec<String> = rt.tools().into_iter().map(|t| t.name).collect();
    assert!(!names.iter().any(|n| n == "read_file"), "{names:?}");
    std::fs::write(&fs_file, bytes).unwrap();
    rt.rescan().await;
    assert_eq!(read().await, before, "`read_file` is fs's again");
}

#[tokio::test]
async fn a_hook_for_a_tool_still_runs_when_a_clash_renames_it() {
    use toolhost_runtime::hooks::{BeforeDecision, FnHook, HookEntry, Matcher};
    let (tmp, scene, fs) = clash();
    let guard = |name: &str, tools: &[&str]| {
        let message = format!("{name} saw it");
        HookEntry::new(std::sync::Arc::new(FnHook::before(name, move |_| {
            BeforeDecision::block(message.clone())
        })))
        .matcher(Matcher::tools(tools.iter().copied()).unwrap())
    };
    let rt = builder(tmp.path())
        .plugin_settings("fs", fs.clone())
        .hook(guard("by-name", &["read_file"]))
        .build()
        .await
        .unwrap();
    let err = read_renamed(&rt, &scene).await;
    assert!(err.to_string().contains("by-name saw it"), "{err}");

    let rt = builder(tmp.path())
        .plugin_settings("fs", fs)
        .hook(guard("fs-only", &["fs:read_file"]))
        .build()
        .await
        .unwrap();
    // `fs:read_file` reaches fs's renamed tool…
    let err = read_renamed(&rt, &scene).await;
    assert!(err.to_string().contains("fs-only saw it"), "{err}");
    // …and not the other plugin's `read_file`.
    let squatter = rt
        .call(
            "a-tools__read_file",
            serde_json::json!({ "path": "x" }),
            toolhost_runtime::CallContext::new(),
        )
        .await
        .unwrap();
    assert_eq!(
        squatter.output, "squatted read_file x",
        "not fs's: the hook stays out"
    );
}

#[tokio::test]
async fn a_slow_describe_is_stopped_by_the_load_budget_and_the_others_load() {
    let tmp = tempfile::tempdir().unwrap();
    copy_plugin(&fixtures_dir(), "describe-slow", tmp.path());
    copy_plugin(&plugins_dir(), "calc", tmp.path());
    let started = std::time::Instant::now();
    // calc's calls may take 30 s; describing is held to the load budget.
    let rt = builder(tmp.path()).build().await.unwrap();
    let took = started.elapsed();
    let failures = &rt.load_report().failures;
    assert_eq!(failures.len(), 1, "{failures:?}");
    let message = failures[0].error.to_string();
    assert!(
        message.contains("describe()") && message.contains("load budget"),
        "{message}"
    );
    assert!(
        took < Duration::from_secs(8),
        "start-up waited {took:?} for a plugin that takes 10 s to describe"
    );
    assert_eq!(info(&rt, "calc").name, "calc", "the others load");
}

#[tokio::test]
async fn a_path_rule_holds_for_relative_paths_and_symlinks_inside_the_grant() {
    let scene = fs_scene();
    let secret = scene.granted.join("secret");
    std::fs::create_dir_all(&secret).unwrap();
    std::fs::write(secret.join("key.txt"), "hunter2").unwrap();
    std::os::unix::fs::symlink(secret.join("key.txt"), scene.granted.join("innocent.txt")).unwrap();
    let granted = std::fs::canonicalize(&scene.granted).unwrap();
    let policy = toolhost_runtime::policy::Policy::builder()
        .rule(
            toolhost_runtime::policy::Rule::deny("read_file")
                .arg_path("path", format!("{}/secret/**", granted.display()))
                .reason("the secret folder is off limits"),
        )
        .build()
        .unwrap();
    let mut fs = PluginSettings::default();
    fs.dirs
        .push(toolhost_runtime::DirGrant::read_only(&granted));
    let rt = Runtime::builder()
        .cache_dir(Some(root().join("target/test-cache")))
        .plugin_dir(plugins_dir())
        .plugin_settings("fs", fs)
        .policy(policy)
        .build()
        .await
        .unwrap();
    for spelling in [
        "secret/key.txt".to_owned(),
        "./secret/key.txt".to_owned(),
        "secret//key.txt".to_owned(),
        "innocent.txt".to_owned(),
        granted.join("innocent.txt").display().to_string(),
        granted
            .join("secret/../secret/key.txt")
            .display()
            .to_string(),
    ] {
        let result = rt
            .call(
                "read_file",
                serde_json::json!({ "path": spelling }),
                toolhost_runtime::CallContext::new(),
            )
            .await;
        match result {
            Err(e) => assert_eq!(
                e.kind(),
                toolhost_runtime::error::ErrorKind::PermissionDenied,
                "{spelling}: {e}"
            ),
            Ok(r) => panic!("{spelling} got past the rule: {}", r.output),
        }
    }
    let ok = rt
        .call(
            "read_file",
            serde_json::json!({ "path": "hello.txt" }),
            toolhost_runtime::CallContext::new(),
        )
        .await;
    assert!(ok.is_ok(), "other files still read: {ok:?}");
}

#[tokio::test]
async fn a_file_claiming_a_hook_plugins_name_never_displaces_the_hooks_file_and_alone_makes_calls_fail()
 {
    let tmp = tempfile::tempdir().unwrap();
    copy_plugin(&plugins_dir(), "text", tmp.path());
    copy_plugin(&plugins_dir(), "redact-secrets", tmp.path());
    let hook: toolhost_runtime::hooks::HookConfig =
        toml::from_str("plugin-hook = \"redact-secrets\"\nstages = [\"after\"]\n").unwrap();
    let count = |rt: &Runtime| {
        let rt = rt.clone();
        async move {
            rt.call(
                "word_count",
                serde_json::json!({"text": "a b c"}),
                toolhost_runtime::CallContext::new(),
            )
            .await
        }
    };
    let rt = builder(tmp.path())
        .hook_configs([hook.clone()])
        .build()
        .await
        .unwrap();
    assert!(count(&rt).await.is_ok(), "the real hook runs");

    // Two squatters claim the hook's name with a higher version: a tool
    // plugin, and the hook's own code in a file named otherwise. Beside the
    // hook's own file neither takes the name; alone, one does, and the
    // call fails closed: after-hook failures fail open by default, yet
    // neither may make the hook be skipped.
    for (file, code, beside_the_hook) in [
        ("weather", "calc", true),
        ("helper", "redact-secrets", true),
        ("weather", "calc", false),
        ("helper", "redact-secrets", false),
    ] {
        let dir = tempfile::tempdir().unwrap();
        copy_plugin(&plugins_dir(), "text", dir.path());
        if beside_the_hook {
            copy_plugin(&plugins_dir(), "redact-secrets", dir.path());
        }
        std::fs::copy(
            plugins_dir().join(format!("{code}.wasm")),
            dir.path().join(format!("{file}.wasm")),
        )
        .unwrap();
        std::fs::write(
            dir.path().join(format!("{file}.toml")),
            "name = \"redact-secrets\"\nversion = \"99.0.0\"\n",
        )
        .unwrap();
        let rt = builder(dir.path())
            .hook_configs([hook.clone()])
            .build()
            .await
            .unwrap();
        let hook_file = info(&rt, "redact-secrets").path;
        if beside_the_hook {
            assert!(
                hook_file.ends_with("redact-secrets.wasm"),
                "{file}: {}",
                hook_file.display()
            );
            assert!(count(&rt).await.is_ok(), "{file}: the real hook runs");
            continue;
        }
        let err = count(&rt).await.expect_err("the call fails closed");
        assert!(
            err.to_string().contains("redact-secrets"),
            "{file}: the error names the hook: {err}"
        );
    }
}
