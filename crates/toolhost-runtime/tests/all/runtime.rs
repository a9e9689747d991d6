//! End-to-end behaviour of the runtime through its public API, with the real
//! example and fixture plugins built by `cargo xtask plugins`: listing and
//! calling tools, argument errors, directory and host grants, load failures,
//! the compile cache and tool-name clashes.

use std::path::Path;

use serde_json::json;
use toolhost_runtime::{
    CallContext, CallError, DirGrant, LoadError, PluginSettings, Runtime, error::ToolErrorKind,
};

use crate::support::*;

pub(crate) async fn runtime_with(dirs: &[&Path], settings: Vec<(&str, PluginSettings)>) -> Runtime {
    let mut b = Runtime::builder().cache_dir(Some(root().join("target/test-cache")));
    for d in dirs {
        b = b.plugin_dir(*d);
    }
    for (name, s) in settings {
        b = b.plugin_settings(name, s);
    }
    b.build().await.expect("runtime builds")
}

pub(crate) async fn examples() -> Runtime {
    runtime_with(&[&plugins_dir()], vec![]).await
}

pub(crate) async fn assert_calc_still_works(rt: &Runtime) {
    let r = rt
        .call(
            "calculate",
            json!({"expression": "6*7"}),
            CallContext::new(),
        )
        .await
        .expect("a well-behaved plugin still works");
    assert_eq!(r.output, "42");
}

#[tokio::test]
async fn every_example_tool_is_listed_with_its_plugin_and_version() {
    let rt = examples().await;
    assert!(
        rt.load_report().failures.is_empty(),
        "{:?}",
        rt.load_report().failures
    );
    let tools = rt.tools();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    for expected in [
        "calculate",
        "word_count",
        "regex_find",
        "read_file",
        "list_dir",
        "http_get",
    ] {
        assert!(
            names.contains(&expected),
            "{expected} missing from {names:?}"
        );
    }
    let calc = tools.iter().find(|t| t.name == "calculate").unwrap();
    assert_eq!(calc.plugin, "calc");
    assert_eq!(calc.plugin_version.to_string(), "0.1.0");
    assert!(calc.annotations.read_only);
    assert_eq!(calc.input_schema["type"], "object");
    assert!(!calc.description.is_empty());
}

#[tokio::test]
async fn calculate_returns_the_number_with_details() {
    let rt = examples().await;
    let r = rt
        .call(
            "calculate",
            json!({"expression": "2*(3+4)"}),
            CallContext::new(),
        )
        .await
        .unwrap();
    assert_eq!(r.output, "14");
    assert_eq!(r.plugin, "calc");
    assert_eq!(r.details.as_ref().unwrap()["value"], json!(14.0));
    let r = rt
        .call(
            "calculate",
            json!({"expression": "sqrt(16) + 2^3^2 / 512"}),
            CallContext::new(),
        )
        .await
        .unwrap();
    assert_eq!(r.output, "5");
}

#[tokio::test]
async fn tool_errors_separate_bad_arguments_from_failures() {
    let rt = examples().await;
    match rt
        .call(
            "calculate",
            json!({"expression": "1/0"}),
            CallContext::new(),
        )
        .await
    {
        Err(CallError::Tool {
            kind: ToolErrorKind::Failed,
            message,
            ..
        }) => {
            assert!(
                message.to_lowercase().contains("division by zero"),
                "{message}"
            );
        }
        other => panic!("{other:?}"),
    }
    match rt
        .call(
            "calculate",
            json!({"expression": "2*(3+"}),
            CallContext::new(),
        )
        .await
    {
        Err(CallError::Tool {
            kind: ToolErrorKind::InvalidArguments,
            message,
            ..
        }) => {
            assert!(message.contains("position"), "{message}");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn text_tools_count_words_and_find_regex_matches() {
    let rt = examples().await;
    let r = rt
        .call(
            "word_count",
            json!({"text": "one two three\nfour"}),
            CallContext::new(),
        )
        .await
        .unwrap();
    assert_eq!(r.details.as_ref().unwrap()["words"], 4);
    assert_eq!(r.details.as_ref().unwrap()["lines"], 2);
    let r = rt
        .call(
            "regex_find",
            json!({"pattern": "t\\w+", "text": "two three four"}),
            CallContext::new(),
        )
        .await
        .unwrap();
    assert!(
        r.output.contains("two") && r.output.contains("three"),
        "{}",
        r.output
    );
    match rt
        .call(
            "regex_find",
            json!({"pattern": "(", "text": "x"}),
            CallContext::new(),
        )
        .await
    {
        Err(CallError::Tool {
            kind: ToolErrorKind::InvalidArguments,
            ..
        }) => {}
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn an_unknown_tool_names_the_closest_available_tools() {
    let rt = examples().await;
    match rt.call("Calculate", json!({}), CallContext::new()).await {
        Err(CallError::NotFound {
            suggestions,
            available,
            ..
        }) => {
            assert_eq!(suggestions[0], "calculate");
            assert!(available.contains(&"read_file".to_owned()));
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn schema_violations_are_all_reported_with_their_paths() {
    let rt = examples().await;
    match rt
        .call(
            "regex_find",
            json!({"pattern": 3, "max_matches": "many"}),
            CallContext::new(),
        )
        .await
    {
        Err(CallError::InvalidArguments { issues, .. }) => {
            let paths: Vec<&str> = issues.iter().map(|i| i.path.as_str()).collect();
            assert!(paths.contains(&"/pattern"), "{issues:?}");
            assert!(paths.contains(&"/max_matches"), "{issues:?}");
            assert!(
                issues
                    .iter()
                    .any(|i| i.path.is_empty() && i.message.contains("text")),
                "missing `text` is reported at the root: {issues:?}"
            );
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn malformed_json_arguments_are_an_error_with_position() {
    let rt = examples().await;
    match rt
        .call_json("calculate", "{\"expression\": ", CallContext::new())
        .await
    {
        Err(CallError::InvalidArguments { issues, .. }) => {
            assert!(issues[0].message.contains("line 1"), "{issues:?}");
        }
        other => panic!("{other:?}"),
    }
}

fn fs_grant(dir: &Path) -> PluginSettings {
    let mut s = PluginSettings::default();
    s.dirs.push(DirGrant::read_only(dir));
    s
}

#[tokio::test]
async fn fs_reads_and_lists_inside_its_grant() {
    let scene = fs_scene();
    let rt = runtime_with(&[&plugins_dir()], vec![("fs", fs_grant(&scene.granted))]).await;
    let r = rt
        .call(
            "read_file",
            json!({"path": "hello.txt", "offset": 2, "limit": 1}),
            CallContext::new(),
        )
        .await
        .unwrap();
    assert!(r.output.contains("line two"), "{}", r.output);
    assert!(!r.output.contains("line one"), "{}", r.output);
    let abs = scene.granted.join("sub/inner.txt");
    let r = rt
        .call(
            "read_file",
            json!({"path": abs.to_str().unwrap()}),
            CallContext::new(),
        )
        .await
        .unwrap();
    assert!(r.output.contains("inner"), "{}", r.output);
    let r = rt
        .call("list_dir", json!({"path": "."}), CallContext::new())
        .await
        .unwrap();
    assert!(
        r.output.contains("hello.txt") && r.output.contains("sub/"),
        "{}",
        r.output
    );
}

#[tokio::test]
async fn fs_cannot_read_outside_its_grant() {
    let scene = fs_scene();
    let rt = runtime_with(&[&plugins_dir()], vec![("fs", fs_grant(&scene.granted))]).await;
    let secret = scene.secret.to_str().unwrap();
    // `read_file` names its path argument (`path-arg`): the host refuses a
    // path outside the grant, by name or through a link, before the guest
    // runs.
    for path in [
        "../secret.txt",
        secret,
        "link-out",
        "/etc/passwd",
        "sub/../../secret.txt",
    ] {
        match rt
            .call("read_file", json!({"path": path}), CallContext::new())
            .await
        {
            Err(CallError::Denied { reason, .. }) => {
                assert!(
                    reason.contains("outside the directories granted to fs"),
                    "{path}: {reason}"
                );
            }
            Ok(r) => panic!("read {path} outside the grant: {}", r.output),
            Err(other) => panic!("{path}: unexpected {other:?}"),
        }
    }
}

#[tokio::test]
async fn fs_without_a_grant_reads_nothing() {
    let rt = examples().await;
    match rt
        .call(
            "read_file",
            json!({"path": "/etc/passwd"}),
            CallContext::new(),
        )
        .await
    {
        Err(CallError::Tool {
            kind: ToolErrorKind::Failed,
            message,
            ..
        }) => {
            assert!(message.contains("no directory is granted"), "{message}");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn http_reaches_a_granted_host_and_is_refused_elsewhere() {
    let granted = TestServer::start("hello from the granted server");
    let other = TestServer::start("you should not see this");
    let mut s = PluginSettings::default();
    s.hosts
        .push(format!("127.0.0.1:{}", granted.port).parse().unwrap());
    let rt = runtime_with(&[&plugins_dir()], vec![("http", s)]).await;

    let r = rt
        .call(
            "http_get",
            json!({"url": granted.url("/hi")}),
            CallContext::new(),
        )
        .await
        .unwrap();
    assert!(
        r.output.contains("hello from the granted server"),
        "{}",
        r.output
    );
    assert_eq!(granted.request_count(), 1);

    // `http_get` names its URL argument (`url-arg`): a URL on a host that
    // is not granted is refused before the guest runs.
    match rt
        .call(
            "http_get",
            json!({"url": other.url("/")}),
            CallContext::new(),
        )
        .await
    {
        Err(e @ CallError::Denied { .. }) => {
            assert!(e.to_string().contains("not a URL on a host granted"), "{e}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        other.request_count(),
        0,
        "the ungranted server saw no request"
    );
}

#[tokio::test]
async fn a_hostname_that_resolves_to_loopback_is_refused_unless_loopback_is_granted() {
    let server = TestServer::start("internal service");
    let url = format!("http://localhost:{}/", server.port);
    let by_name = || {
        let mut s = PluginSettings::default();
        s.hosts
            .push(format!("localhost:{}", server.port).parse().unwrap());
        s
    };
    let rt = runtime_with(&[&plugins_dir()], vec![("http", by_name())]).await;
    match rt
        .call("http_get", json!({"url": url}), CallContext::new())
        .await
    {
        Err(CallError::Tool { message, .. }) => {
            assert!(message.to_lowercase().contains("denied"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(server.request_count(), 0, "the request never left the host");

    let mut explicit = by_name();
    explicit.hosts.push("127.0.0.1".parse().unwrap());
    explicit.hosts.push("[::1]".parse().unwrap());
    let rt = runtime_with(&[&plugins_dir()], vec![("http", explicit)]).await;
    let r = rt
        .call("http_get", json!({"url": url}), CallContext::new())
        .await
        .unwrap();
    assert!(r.output.contains("internal service"), "{}", r.output);
}

#[tokio::test]
async fn broken_plugin_files_are_reported_while_the_others_load() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    copy_plugin(&plugins_dir(), "calc", dir);
    std::fs::write(dir.join("garbage.wasm"), b"this is not wasm at all").unwrap();
    std::fs::write(dir.join("core.wasm"), b"\0asm\x01\0\0\0").unwrap();
    for name in ["future-abi", "describe-trap", "bad-schema"] {
        copy_plugin(&fixtures_dir(), name, dir);
    }
    std::fs::write(dir.join("badmanifest.wasm"), b"\0asm\x0d\0\x01\0").unwrap();
    std::fs::write(dir.join("badmanifest.toml"), "version = \"not semver\"\n").unwrap();

    let rt = runtime_with(&[dir], vec![]).await;
    assert_calc_still_works(&rt).await;
    let report = rt.load_report();
    let reason = |file: &str| -> LoadError {
        report
            .failures
            .iter()
            .find(|f| f.path.file_name().unwrap() == file)
            .unwrap_or_else(|| panic!("{file} not reported: {:?}", report.failures))
            .error
            .clone()
    };
    assert!(matches!(
        reason("garbage.wasm"),
        LoadError::NotAComponent(_)
    ));
    assert!(matches!(reason("core.wasm"), LoadError::NotAComponent(m) if m.contains("core")));
    match reason("future-abi.wasm") {
        LoadError::UnsupportedVersion { found, supported } => {
            assert_eq!(found, "9.0.0");
            assert!(supported.contains("0.1.0"));
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        reason("describe-trap.wasm"),
        LoadError::Describe(_)
    ));
    assert!(matches!(
        reason("bad-schema.wasm"),
        LoadError::InvalidTool { .. }
    ));
    assert!(matches!(
        reason("badmanifest.wasm"),
        LoadError::Manifest { .. }
    ));
    assert_eq!(report.failures.len(), 6, "{:?}", report.failures);
}

#[tokio::test]
async fn a_second_start_compiles_nothing_and_a_corrupt_entry_is_recompiled() {
    let cache = tempfile::tempdir().unwrap();
    let build = || {
        Runtime::builder()
            .plugin_dir(plugins_dir())
            .cache_dir(Some(cache.path().to_owned()))
            .build()
    };
    let first = build().await.unwrap().load_report();
    assert_eq!(first.compiled, 6, "{first:?}");
    let second = build().await.unwrap().load_report();
    assert_eq!((second.compiled, second.cache_hits), (0, 6), "{second:?}");

    // Corrupt one entry: it is recompiled, the others still come from the cache.
    let entry = std::fs::read_dir(cache.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "cwasm"))
        .unwrap();
    let mut bytes = std::fs::read(&entry).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xff;
    std::fs::write(&entry, &bytes).unwrap();
    let rt = build().await.unwrap();
    let third = rt.load_report();
    assert_eq!((third.compiled, third.cache_hits), (1, 5), "{third:?}");
    assert!(third.failures.is_empty());
    assert_calc_still_works(&rt).await;
}

/// Issue 59: loading a cache entry runs the native code in it, so an
/// entry someone else could have written is never loaded. With a key, only
/// entries sealed with it load (a foreign key's or a rewritten entry with
/// a fresh checksum is recompiled); without one, a directory others may
/// write is not read.
#[tokio::test]
async fn a_cache_entry_not_sealed_with_the_deployments_key_or_in_a_directory_others_write_is_never_loaded()
 {
    use sha2::{Digest, Sha256};
    use std::os::unix::fs::PermissionsExt;
    use toolhost_runtime::cache::CacheKey;
    let cache = tempfile::tempdir().unwrap();
    let key = |byte: u8| CacheKey::new(vec![byte; 32]).unwrap();
    let build = |k: Option<CacheKey>| {
        Runtime::builder()
            .plugin_dir(plugins_dir())
            .cache_dir(Some(cache.path().to_owned()))
            .cache_key(k)
            .build()
    };
    let report = |rt: Runtime| {
        let r = rt.load_report();
        (r.compiled, r.cache_hits)
    };
    assert_eq!(report(build(Some(key(1))).await.unwrap()), (6, 0));
    assert_eq!(
        report(build(Some(key(1))).await.unwrap()),
        (0, 6),
        "sealed with the key: loaded"
    );
    assert_eq!(
        report(build(Some(key(2))).await.unwrap()),
        (6, 0),
        "another key: recompiled"
    );

    // An entry rewritten by whoever can write the volume, with a checksum
    // that matches its new payload (what the unkeyed format would accept).
    assert_eq!(report(build(Some(key(1))).await.unwrap()), (6, 0));
    let entry = std::fs::read_dir(cache.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "cwasm"))
        .unwrap();
    let bytes = std::fs::read(&entry).unwrap();
    let payload = &bytes[32..];
    let mut forged = Sha256::digest(payload).to_vec();
    forged.extend_from_slice(payload);
    std::fs::write(&entry, &forged).unwrap();
    let rt = build(Some(key(1))).await.unwrap();
    assert_eq!(report(rt), (1, 5), "the forged entry is recompiled");

    // No key: the user's own directory is read, one others may write is not.
    let unkeyed = tempfile::tempdir().unwrap();
    let build = |dir: &std::path::Path| {
        Runtime::builder()
            .plugin_dir(plugins_dir())
            .cache_dir(Some(dir.to_owned()))
            .build()
    };
    assert_eq!(report(build(unkeyed.path()).await.unwrap()), (6, 0));
    assert_eq!(report(build(unkeyed.path()).await.unwrap()), (0, 6));
    std::fs::set_permissions(unkeyed.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let rt = build(unkeyed.path()).await.unwrap();
    assert_eq!(
        report(rt),
        (6, 0),
        "a directory anyone may write is not trusted"
    );
}

/// Issue 59: replicas ship their trust; `locked` never takes it at start.
#[tokio::test]
async fn a_locked_runtime_needs_its_lock_file_grants_only_what_it_names_and_never_writes_it() {
    use toolhost_runtime::{
        PluginSettings, RuntimeError, lockfile::GrantState, lockfile::LockError,
    };
    let dir = tempfile::tempdir().unwrap();
    let lock = dir.path().join("toolhost.lock");
    let mut grant = PluginSettings::default();
    grant.env.push("CALC_MODE=exact".into());
    let build = |locked: bool| {
        Runtime::builder()
            .plugin_dir(plugins_dir())
            .cache_dir(Some(root().join("target/test-cache")))
            .plugin_settings("calc", grant.clone())
            .lock_file(&lock)
            .locked(locked)
            .build()
    };
    match build(true).await {
        Err(RuntimeError::Lock(LockError::Missing(path))) => assert_eq!(path, lock),
        other => panic!(
            "a locked runtime without its lock file: {:?}",
            other.map(|_| ())
        ),
    }
    assert!(!lock.exists(), "nothing written");

    std::fs::write(&lock, "# prepared ahead, naming nothing\n").unwrap();
    let rt = build(true).await.unwrap();
    let calc = rt.plugins().into_iter().find(|p| p.name == "calc").unwrap();
    assert_eq!(calc.grants, GrantState::NotInLock, "no trust on first use");
    assert!(calc.granted.env.is_empty());
    assert!(matches!(rt.trust("calc"), Err(LockError::Locked(_))));
    assert_eq!(
        std::fs::read_to_string(&lock).unwrap(),
        "# prepared ahead, naming nothing\n"
    );
    drop(rt);

    // Prepared ahead (here by an unlocked runtime's trust): granted.
    build(false).await.unwrap().trust("calc").unwrap();
    let rt = build(true).await.unwrap();
    let calc = rt.plugins().into_iter().find(|p| p.name == "calc").unwrap();
    assert_eq!(calc.grants, GrantState::Active);
    assert!(!calc.granted.env.is_empty());
}

/// Calls `name` with `1` and returns the output.
async fn calculate_as(rt: &Runtime, name: &str) -> String {
    rt.call(name, json!({"expression": "1"}), CallContext::new())
        .await
        .unwrap_or_else(|e| panic!("{name}: {e}"))
        .output
}

#[tokio::test]
async fn a_tool_name_two_plugins_declare_at_start_goes_to_neither_and_is_reported() {
    let tmp = tempfile::tempdir().unwrap();
    copy_plugin(&plugins_dir(), "calc", tmp.path());
    copy_plugin(&fixtures_dir(), "dup-calc", tmp.path());
    let rt = runtime_with(&[tmp.path()], vec![]).await;
    let names: Vec<String> = rt.tools().into_iter().map(|t| t.name).collect();
    assert!(
        !names.iter().any(|n| n == "calculate"),
        "neither plugin gets the plain name by how its name sorts: {names:?}"
    );
    assert_eq!(calculate_as(&rt, "calc__calculate").await, "1");
    assert_eq!(calculate_as(&rt, "dup-calc__calculate").await, "dup");
    let warnings = rt.load_report().warnings.join("\n");
    assert!(
        warnings.contains("dup-calc__calculate") && warnings.contains("tool-owners"),
        "the warning says how to settle it: {warnings}"
    );
}

#[tokio::test]
async fn a_configured_owner_settles_a_tool_name_clash() {
    let tmp = tempfile::tempdir().unwrap();
    copy_plugin(&plugins_dir(), "calc", tmp.path());
    copy_plugin(&fixtures_dir(), "dup-calc", tmp.path());
    for (owner, plain, other) in [("calc", "1", "dup-calc"), ("dup-calc", "dup", "calc")] {
        let rt = Runtime::builder()
            .plugin_dir(tmp.path())
            .cache_dir(Some(root().join("target/test-cache")))
            .tool_owner("calculate", owner)
            .build()
            .await
            .unwrap();
        assert_eq!(
            calculate_as(&rt, "calculate").await,
            plain,
            "{owner} owns it"
        );
        assert!(
            rt.tools()
                .iter()
                .any(|t| t.name == format!("{other}__calculate")),
            "the other is renamed"
        );
    }
}

/// The `fs` plugin checks paths itself before it opens them; this proves the
/// sandbox underneath holds for a plugin that does not: `read_path` hands any
/// path straight to `std::fs`.
#[tokio::test]
async fn wasi_refuses_paths_outside_a_grant_even_without_a_check_in_the_plugin() {
    let scene = fs_scene();
    let tmp = tempfile::tempdir().unwrap();
    copy_plugin(&fixtures_dir(), "hostile", tmp.path());
    let rt = runtime_with(&[tmp.path()], vec![("hostile", fs_grant(&scene.granted))]).await;
    let inside = scene.granted.join("hello.txt");
    let r = rt
        .call(
            "read_path",
            json!({"path": inside.to_str().unwrap()}),
            CallContext::new(),
        )
        .await
        .expect("a file inside the grant is readable");
    assert!(r.output.contains("line one"));
    let escapes = [
        format!("{}/../secret.txt", scene.granted.display()),
        format!("{}/sub/../../secret.txt", scene.granted.display()),
        scene.secret.display().to_string(),
        format!("{}/link-out", scene.granted.display()),
        "/etc/passwd".to_owned(),
    ];
    for path in escapes {
        match rt
            .call("read_path", json!({"path": path}), CallContext::new())
            .await
        {
            Err(CallError::Tool {
                kind: ToolErrorKind::Failed,
                ..
            }) => {}
            Ok(r) => panic!("read {path} outside the grant: {}", r.output),
            Err(other) => panic!("{path}: unexpected {other:?}"),
        }
    }
}

#[tokio::test]
async fn a_start_up_error_keeps_its_cause_as_a_typed_source() {
    // A hook entry that names no command, script or plugin.
    let config: toolhost_runtime::hooks::HookConfig = toml::from_str("tools = [\"*\"]").unwrap();
    let e = Runtime::builder()
        .hook_configs([config])
        .build()
        .await
        .unwrap_err();
    assert!(
        matches!(e, toolhost_runtime::RuntimeError::Hooks(_)),
        "{e:?}"
    );
    let cause = std::error::Error::source(&e).expect("the configuration error is its source");
    assert!(
        cause
            .downcast_ref::<toolhost_runtime::hooks::ConfigError>()
            .is_some(),
        "{cause:?}"
    );
    assert_eq!(e.to_string(), "invalid hook configuration");
}
