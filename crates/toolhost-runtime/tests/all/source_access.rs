//! Reads of a tool source's resources and gets of its prompts
//! (`Runtime::access`, what the MCP gateway serves as `resources/read` and
//! `prompts/get`): through the same policy (`resource = ...`, `prompt =
//! ...` rules), hooks and audit as a tool call of that source.

use std::sync::{Arc, Mutex};

use serde_json::json;
use toolhost_runtime::content::Content;
use toolhost_runtime::hooks::{AfterDecision, FnHook, HookEntry, HookOutcome};
use toolhost_runtime::policy::{Decision, Policy, Rule};
use toolhost_runtime::{
    Access, CallContext, Runtime, ToolSource, error::ErrorKind, source::SourceCall,
    source::SourceError, source::SourceFuture, source::SourceOutcome, source::SourceState,
    source::SourceStatus, source::SourceTool,
};

/// A source with no tools that answers every read with the URI it was
/// asked for, and every get with the prompt's name and arguments.
struct Library(tokio::sync::watch::Sender<u64>);

impl ToolSource for Library {
    fn name(&self) -> &str {
        "library"
    }
    fn status(&self) -> SourceStatus {
        SourceStatus::new("native", "in process", SourceState::Ready)
    }
    fn tools(&self) -> Arc<[SourceTool]> {
        Arc::new([])
    }
    fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.0.subscribe()
    }
    fn call<'a>(
        &'a self,
        call: SourceCall<'a>,
    ) -> SourceFuture<'a, Result<SourceOutcome, SourceError>> {
        Box::pin(async move {
            let text = match call.tool {
                toolhost_runtime::policy::READ_RESOURCE => format!("read {}", call.args["uri"]),
                toolhost_runtime::policy::GET_PROMPT => {
                    format!("got {} {}", call.args["name"], call.args["arguments"])
                }
                other => return Err(SourceError::Protocol(format!("no tool {other}"))),
            };
            Ok(SourceOutcome::Ok {
                output: text.clone(),
                details: None,
                structured: None,
                content: vec![Content::embedded_text("lib://x", text)],
                meta: None,
            })
        })
    }
}

#[tokio::test]
async fn reads_and_gets_pass_the_policy_and_the_after_hooks_as_calls_of_their_source() {
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let log = seen.clone();
    let audit = HookEntry::new(Arc::new(FnHook::after("audit", move |call, outcome| {
        let kind = match outcome {
            HookOutcome::Ok { .. } => "ok".to_owned(),
            HookOutcome::Err { kind, .. } => kind.as_str().to_owned(),
        };
        log.lock()
            .unwrap()
            .push(format!("{}:{}:{kind}", call.tool, call.args));
        AfterDecision::Keep
    })));
    let policy = Policy::builder()
        .rule(Rule::resource(Decision::Deny, "lib://secret/*"))
        .rule(Rule::prompt(Decision::Deny, "leak").plugin("library"))
        .build()
        .unwrap();
    let rt = Runtime::builder()
        .cache_dir(None)
        .policy(policy)
        .hook(audit)
        .source(Arc::new(Library(tokio::sync::watch::channel(0).0)))
        .build()
        .await
        .unwrap();
    let read = |uri: &str| Access::Resource { uri: uri.into() };
    let get = |name: &str| Access::Prompt {
        name: name.into(),
        arguments: serde_json::Map::from_iter([("topic".to_owned(), json!("rust"))]),
    };

    let open = rt
        .access("library", &read("lib://open/a"), CallContext::new())
        .await
        .unwrap();
    assert_eq!(open.output, "read \"lib://open/a\"");
    assert!(
        matches!(&open.content[..], [Content::Resource(_)]),
        "{:?}",
        open.content
    );
    let secret = rt
        .access("library", &read("lib://secret/keys/a"), CallContext::new())
        .await
        .unwrap_err();
    assert_eq!(secret.kind(), ErrorKind::PermissionDenied, "{secret}");
    let summary = rt
        .access("library", &get("summary"), CallContext::new())
        .await
        .unwrap();
    assert_eq!(summary.output, "got \"summary\" {\"topic\":\"rust\"}");
    let leak = rt
        .access("library", &get("leak"), CallContext::new())
        .await
        .unwrap_err();
    assert_eq!(leak.kind(), ErrorKind::PermissionDenied, "{leak}");
    let elsewhere = rt
        .access("nowhere", &get("summary"), CallContext::new())
        .await
        .unwrap_err();
    assert_eq!(elsewhere.kind(), ErrorKind::NotFound, "{elsewhere}");

    // What a caller may not read is what it is not shown.
    assert!(rt.may_access("library", &read("lib://open/a"), None, None));
    assert!(!rt.may_access("library", &read("lib://secret/b"), None, None));
    assert!(!rt.may_access("library", &get("leak"), None, None));
    assert!(rt.may_access("library", &get("summary"), None, None));

    // Every read and get, refused ones too, reached the after-hooks.
    assert_eq!(
        *seen.lock().unwrap(),
        [
            r#"resources/read:{"uri":"lib://open/a"}:ok"#,
            r#"resources/read:{"uri":"lib://secret/keys/a"}:permission-denied"#,
            r#"prompts/get:{"arguments":{"topic":"rust"},"name":"summary"}:ok"#,
            r#"prompts/get:{"arguments":{"topic":"rust"},"name":"leak"}:permission-denied"#,
        ]
    );
}
