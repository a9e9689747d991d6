//! `[[hooks]]` entries: parsing, defaults, errors, and the chain they build.

use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde_json::json;
use toolhost_hooks::{
    AfterDecision, BeforeDecision, BeforeVerdict, ConfigError, FailurePolicy, FnHook, Hook,
    HookCall, HookChain, HookConfig, HookKind, HookOutcome, OnError, Stage, Stages, build_chain,
};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    hooks: Vec<HookConfig>,
}

fn parse(text: &str) -> Result<Vec<HookConfig>, toml::de::Error> {
    toml::from_str::<File>(text).map(|f| f.hooks)
}

fn no_plugins(_: &str) -> Option<Arc<dyn Hook>> {
    None
}

#[test]
fn the_documented_example_parses_with_its_values() {
    let hooks = parse(
        r#"
        [[hooks]]
        name = "audit"
        command = ["./examples/hooks/audit.sh"]
        tools = ["read_*", "http_get"]
        plugins = ["fs"]
        stages = ["before", "after"]
        timeout-ms = 2000
        on-error = "closed"
        cwd = "/tmp"
        env = { A = "1" }

        [[hooks]]
        plugin-hook = "redact-secrets"
        tools = ["*"]
        "#,
    )
    .unwrap();
    assert_eq!(hooks.len(), 2);
    let audit = &hooks[0];
    assert_eq!(audit.display_name(), "audit");
    assert_eq!(
        audit.kind().unwrap(),
        HookKind::Command(&["./examples/hooks/audit.sh".to_owned()])
    );
    assert_eq!(audit.tools, ["read_*", "http_get"]);
    assert_eq!(audit.plugins, ["fs"]);
    assert_eq!(audit.stages(), Stages::BOTH);
    assert_eq!(audit.timeout(), Duration::from_millis(2000));
    assert_eq!(audit.on_error(), OnError::both(FailurePolicy::Closed));
    assert_eq!(audit.env.get("A").map(String::as_str), Some("1"));

    let redact = &hooks[1];
    assert_eq!(redact.kind().unwrap(), HookKind::Plugin("redact-secrets"));
    assert_eq!(redact.plugin_hook.as_deref(), Some("redact-secrets"));
    assert_eq!(redact.display_name(), "redact-secrets");
}

#[test]
fn defaults_are_both_stages_five_seconds_closed_before_and_open_after() {
    let hooks = parse("[[hooks]]\nshell = \"true\"\n").unwrap();
    let hook = &hooks[0];
    assert_eq!(hook.display_name(), "true");
    assert_eq!(hook.kind().unwrap(), HookKind::Shell("true"));
    assert_eq!(hook.stages(), Stages::BOTH);
    assert_eq!(hook.timeout(), Duration::from_secs(5));
    assert_eq!(
        hook.on_error(),
        OnError {
            before: FailurePolicy::Closed,
            after: FailurePolicy::Open
        }
    );
    let chain = build_chain(&hooks, no_plugins).unwrap();
    let entry = &chain.entries()[0];
    assert!(entry.matcher.is_any());
    assert_eq!(entry.timeout, Duration::from_secs(5));
    assert_eq!(entry.on_error, OnError::default());
}

#[test]
fn the_name_defaults_to_the_command_line() {
    let hooks = parse("[[hooks]]\ncommand = [\"./x.sh\", \"--fast\"]\n").unwrap();
    assert_eq!(hooks[0].display_name(), "./x.sh --fast");
    let chain = build_chain(&hooks, no_plugins).unwrap();
    assert_eq!(chain.entries()[0].hook.name(), "./x.sh --fast");
}

#[test]
fn unknown_keys_are_rejected() {
    let err = parse("[[hooks]]\nshell = \"true\"\ntimeout = 5\n").unwrap_err();
    assert!(err.to_string().contains("timeout"), "{err}");
    assert!(parse("[[hooks]]\nshell = \"true\"\non-error = \"maybe\"\n").is_err());
    assert!(parse("[[hooks]]\nshell = \"true\"\nstages = [\"during\"]\n").is_err());
}

#[test]
fn exactly_one_of_command_shell_and_plugin_hook_is_required() {
    for text in [
        "[[hooks]]\nname = \"nothing\"\n",
        "[[hooks]]\nname = \"two\"\nshell = \"true\"\ncommand = [\"true\"]\n",
        "[[hooks]]\nname = \"three\"\nshell = \"true\"\nplugin-hook = \"p\"\n",
    ] {
        let hooks = parse(text).unwrap();
        let err = build_chain(&hooks, no_plugins).unwrap_err();
        assert!(matches!(err, ConfigError::Kind { index: 1, .. }), "{err}");
        assert!(err.to_string().contains("exactly one"), "{err}");
    }
    let hooks = parse("[[hooks]]\ncommand = []\n").unwrap();
    assert!(matches!(
        build_chain(&hooks, no_plugins).unwrap_err(),
        ConfigError::EmptyCommand { .. }
    ));
}

#[test]
fn bad_values_are_errors_that_name_the_entry() {
    let hooks = parse(
        "[[hooks]]\nname = \"ok\"\nshell = \"true\"\n\
         [[hooks]]\nname = \"bad-glob\"\nshell = \"true\"\ntools = [\"read_[\"]\n",
    )
    .unwrap();
    let err = build_chain(&hooks, no_plugins).unwrap_err();
    assert!(matches!(err, ConfigError::Glob { index: 2, .. }), "{err}");
    assert!(err.to_string().contains("bad-glob"), "{err}");
    assert!(err.to_string().contains("read_["), "{err}");

    let hooks = parse("[[hooks]]\nshell = \"true\"\ntimeout-ms = 0\n").unwrap();
    assert!(matches!(
        build_chain(&hooks, no_plugins).unwrap_err(),
        ConfigError::Invalid { .. }
    ));
    let hooks = parse("[[hooks]]\nshell = \"true\"\nstages = []\n").unwrap();
    assert!(matches!(
        build_chain(&hooks, no_plugins).unwrap_err(),
        ConfigError::Invalid { .. }
    ));
}

#[test]
fn plugin_hooks_are_resolved_by_the_callback_and_unknown_names_are_errors() {
    let hooks =
        parse("[[hooks]]\nplugin-hook = \"redact-secrets\"\nstages = [\"after\"]\n").unwrap();
    let err = build_chain(&hooks, no_plugins).unwrap_err();
    assert!(
        matches!(&err, ConfigError::UnknownPlugin { plugin, .. } if plugin == "redact-secrets"),
        "{err}"
    );
    assert!(
        err.to_string()
            .contains("no hook plugin named \"redact-secrets\""),
        "{err}"
    );

    let chain = build_chain(&hooks, |name| {
        (name == "redact-secrets").then(|| {
            Arc::new(FnHook::new("redact-secrets").on_after(|_, _| AfterDecision::Keep))
                as Arc<dyn Hook>
        })
    })
    .unwrap();
    assert_eq!(chain.len(), 1);
    assert_eq!(chain.entries()[0].hook.name(), "redact-secrets");
    assert_eq!(chain.entries()[0].stages, Stages::AFTER);
    assert!(!chain.entries()[0].stages.contains(Stage::Before));
}

#[tokio::test]
async fn a_configured_chain_runs_matching_hooks_in_order() {
    let hooks = parse(
        r#"
        [[hooks]]
        name = "fs-guard"
        shell = "cat >/dev/null; echo \"$REASON\" >&2; exit 2"
        tools = ["read_*"]
        plugins = ["fs"]
        stages = ["before"]
        env = { REASON = "reads are audited" }

        [[hooks]]
        name = "asker"
        plugin-hook = "ask"
        "#,
    )
    .unwrap();
    let chain = HookChain::from_config(&hooks, |name| {
        (name == "ask").then(|| {
            Arc::new(FnHook::before("asker", |_| {
                BeforeDecision::ask("are you sure?")
            })) as Arc<dyn Hook>
        })
    })
    .unwrap();
    let args = json!({"path": "a"});
    let read = HookCall::new("read_file", &args).plugin("fs", "0.1.0");
    assert_eq!(
        chain.run_before(&read).await.decision,
        BeforeVerdict::Block {
            hook: "fs-guard".into(),
            reason: "reads are audited".into()
        }
    );
    let list = HookCall::new("list_dir", &args).plugin("fs", "0.1.0");
    let report = chain.run_before(&list).await;
    assert_eq!(
        report.decision,
        BeforeVerdict::Ask {
            reasons: vec!["are you sure?".into()],
            args: None
        }
    );
    assert_eq!(report.trace.len(), 1);
    let after = chain.run_after(&read, HookOutcome::ok("x")).await;
    assert!(
        after.trace.is_empty(),
        "the guard runs before only, the asker has no after-hook"
    );
}

#[test]
fn a_config_round_trips_through_toml() {
    let hooks = parse(
        "[[hooks]]\nname = \"a\"\nshell = \"true\"\ntools = [\"x\"]\ntimeout-ms = 10\non-error = \"open\"\n",
    )
    .unwrap();
    #[derive(serde::Serialize)]
    struct Out<'a> {
        hooks: &'a [HookConfig],
    }
    let text = toml::to_string(&Out { hooks: &hooks }).unwrap();
    assert!(text.contains("timeout-ms = 10"), "{text}");
    assert_eq!(parse(&text).unwrap(), hooks);
}

#[tokio::test]
async fn the_configuration_in_the_examples_readme_builds_and_blocks_secrets() {
    let readme = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/hooks/README.md"
    ))
    .unwrap();
    let start = readme.find("```toml\n").expect("a toml block") + "```toml\n".len();
    let end = start + readme[start..].find("```").unwrap();
    let hooks = parse(&readme[start..end]).unwrap();
    assert_eq!(hooks.len(), 3);
    let resolved = std::sync::Mutex::new(Vec::new());
    let chain = build_chain(&hooks, |name| {
        resolved.lock().unwrap().push(name.to_owned());
        Some(Arc::new(FnHook::after(name, |_, _| AfterDecision::Keep)) as Arc<dyn Hook>)
    })
    .unwrap();
    assert_eq!(*resolved.lock().unwrap(), ["redact-secrets"]);
    let names: Vec<&str> = chain.entries().iter().map(|e| e.hook.name()).collect();
    assert_eq!(names, ["no-secrets", "audit", "redact-secrets"]);

    // The paths in it are relative to the repository root.
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let hooks: Vec<HookConfig> = hooks
        .into_iter()
        .filter(|h| h.name.as_deref() == Some("no-secrets"))
        .map(|h| HookConfig {
            cwd: Some(root.into()),
            ..h
        })
        .collect();
    let chain = build_chain(&hooks, no_plugins).unwrap();
    let args = json!({"path": "config/.env"});
    let report = chain
        .run_before(&HookCall::new("read_file", &args).plugin("fs", "0.1.0"))
        .await;
    assert!(
        matches!(report.decision, BeforeVerdict::Block { ref hook, .. } if hook == "no-secrets"),
        "{report:?}"
    );
}
