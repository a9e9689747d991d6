//! The permission layer through the public API with the real plugins:
//! policy decisions, argument and URL rules, approvals asked and saved,
//! result approval, session toggles and agent profiles. The approver and
//! the helpers here are shared with `hooks` and `hook_plugins`.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::support::{TestServer, fs_scene, plugins_dir, root};
use serde_json::{Value, json};
use toolhost_runtime::policy::approvals::{Answers, Scope};
use toolhost_runtime::policy::{Policy, Rule};
use toolhost_runtime::{
    Approver, CallContext, CallError, DirGrant, PluginSettings, Runtime, RuntimeBuilder,
    error::ErrorKind, permission::ApprovalFuture, permission::CallApproval,
    permission::CallApprovalRequest, permission::ResultApproval, permission::ResultApprovalRequest,
};

pub(crate) fn builder() -> RuntimeBuilder {
    Runtime::builder()
        .plugin_dir(plugins_dir())
        .cache_dir(Some(root().join("target/test-cache")))
}

pub(crate) async fn calc(rt: &Runtime, expression: &str) -> Result<String, CallError> {
    rt.call(
        "calculate",
        json!({ "expression": expression }),
        CallContext::new(),
    )
    .await
    .map(|r| r.output)
}

/// Answers every question with the next scripted answer, and counts them.
#[derive(Default)]
pub(crate) struct Scripted {
    calls: Mutex<Vec<CallApproval>>,
    results: Mutex<Vec<ResultApproval>>,
    pub(crate) asked: AtomicUsize,
    pub(crate) reasons: Mutex<Vec<String>>,
    /// The output each result question showed.
    shown: Mutex<Vec<String>>,
    /// The scopes each call question offered.
    offered: Mutex<Vec<Vec<Scope>>>,
}

impl Scripted {
    pub(crate) fn calls(answers: Vec<CallApproval>) -> Arc<Scripted> {
        Arc::new(Scripted {
            calls: Mutex::new(answers),
            ..Default::default()
        })
    }
    fn results(answers: Vec<ResultApproval>) -> Arc<Scripted> {
        Arc::new(Scripted {
            results: Mutex::new(answers),
            ..Default::default()
        })
    }
}

impl Approver for Scripted {
    fn approve_call<'a>(
        &'a self,
        req: &'a CallApprovalRequest<'a>,
    ) -> ApprovalFuture<'a, CallApproval> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        self.reasons
            .lock()
            .unwrap()
            .extend(req.reasons.iter().cloned());
        self.offered.lock().unwrap().push(req.scopes.to_vec());
        let answer = self.calls.lock().unwrap().remove(0);
        Box::pin(async move { answer })
    }
    fn approve_result<'a>(
        &'a self,
        req: &'a ResultApprovalRequest<'a>,
    ) -> ApprovalFuture<'a, ResultApproval> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        self.shown.lock().unwrap().push(req.output.to_owned());
        let answer = self.results.lock().unwrap().remove(0);
        Box::pin(async move { answer })
    }
}

#[tokio::test]
async fn a_denied_tool_is_refused_with_the_rule_reason_and_hidden_from_the_model() {
    let policy = Policy::builder()
        .rule(Rule::deny("http_get").reason("no network here"))
        .build()
        .unwrap();
    let rt = builder().policy(policy).build().await.unwrap();
    let err = rt
        .call(
            "http_get",
            json!({"url": "http://127.0.0.1:9/"}),
            CallContext::new(),
        )
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::PermissionDenied);
    assert!(err.to_string().contains("no network here"), "{err}");
    let visible: Vec<String> = rt
        .offered_tools(None, None)
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert!(!visible.contains(&"http_get".to_owned()), "{visible:?}");
    assert!(visible.contains(&"calculate".to_owned()));
    // What the agent loop tells a user who asks for it by name.
    assert_eq!(rt.withheld_tools(None, None), ["http_get"]);
    assert_eq!(calc(&rt, "1+1").await.unwrap(), "2");
}

#[tokio::test]
async fn argument_patterns_decide_per_call_and_keep_the_tool_visible() {
    let scene = fs_scene();
    let secret_dir = scene.granted.join("secret");
    std::fs::create_dir_all(&secret_dir).unwrap();
    std::fs::write(secret_dir.join("key.txt"), "hunter2").unwrap();
    let pattern = format!("{}/secret/**", scene.granted.display());
    let policy = Policy::builder()
        .rule(
            Rule::deny("read_file")
                .arg_path("path", &pattern)
                .reason("the secret folder is off limits"),
        )
        .build()
        .unwrap();
    let mut fs = PluginSettings::default();
    fs.dirs.push(DirGrant::read_only(&scene.granted));
    let rt = builder()
        .policy(policy)
        .plugin_settings("fs", fs)
        .build()
        .await
        .unwrap();
    assert!(
        rt.offered_tools(None, None)
            .iter()
            .any(|t| t.name == "read_file")
    );
    let read = |path: String| {
        let rt = rt.clone();
        async move {
            rt.call("read_file", json!({ "path": path }), CallContext::new())
                .await
        }
    };
    let sneaky = format!("{}/sub/../secret/key.txt", scene.granted.display());
    let err = read(sneaky).await.unwrap_err();
    assert_eq!(
        err.kind(),
        ErrorKind::PermissionDenied,
        "`..` does not get around the rule"
    );
    let ok = read(scene.granted.join("hello.txt").display().to_string()).await;
    assert!(ok.is_ok(), "{ok:?}");
}

#[tokio::test]
async fn ask_without_an_approver_is_denied_unless_the_builder_allows_it() {
    let policy = || {
        Policy::builder()
            .rule(Rule::ask("calculate"))
            .build()
            .unwrap()
    };
    let rt = builder().policy(policy()).build().await.unwrap();
    let err = calc(&rt, "1+1").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::PermissionDenied);
    assert!(
        err.to_string().contains("needs the user's approval"),
        "{err}"
    );

    let rt = builder()
        .policy(policy())
        .allow_asks_without_approver(true)
        .build()
        .await
        .unwrap();
    assert_eq!(calc(&rt, "1+1").await.unwrap(), "2");
}

#[tokio::test]
async fn ask_once_asks_every_time_and_deny_passes_the_users_message_to_the_model() {
    let approver = Scripted::calls(vec![
        CallApproval::AllowOnce,
        CallApproval::AllowOnce,
        CallApproval::Deny {
            message: Some("use mental arithmetic".into()),
        },
    ]);
    let rt = builder()
        .policy(
            Policy::builder()
                .rule(Rule::ask("calculate"))
                .build()
                .unwrap(),
        )
        .approver(approver.clone())
        .build()
        .await
        .unwrap();
    assert_eq!(calc(&rt, "1+1").await.unwrap(), "2");
    assert_eq!(calc(&rt, "2+2").await.unwrap(), "4");
    let err = calc(&rt, "3+3").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::PermissionDenied);
    assert!(err.to_string().contains("use mental arithmetic"), "{err}");
    assert_eq!(approver.asked.load(Ordering::SeqCst), 3);
}

pub(crate) fn ask_calculate() -> Policy {
    Policy::builder()
        .rule(Rule::ask("calculate"))
        .build()
        .unwrap()
}

/// A runtime under `policy` with its saved approvals in `saved`, and
/// `approver` (none: nobody to ask).
async fn with_saved(
    policy: Policy,
    saved: &std::path::Path,
    approver: Option<Arc<Scripted>>,
) -> Runtime {
    let mut b = builder()
        .policy(policy)
        .approvals_file(Some(saved.to_owned()));
    if let Some(a) = approver {
        b = b.approver(a);
    }
    b.build().await.unwrap()
}

#[tokio::test]
async fn allow_always_saves_an_approval_of_these_arguments_only_and_it_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let saved = dir.path().join("approvals.json");
    let approver = Scripted::calls(vec![
        CallApproval::AllowAlways,
        CallApproval::Deny { message: None },
    ]);
    let rt = with_saved(ask_calculate(), &saved, Some(approver.clone())).await;
    assert_eq!(calc(&rt, "1+1").await.unwrap(), "2");
    assert_eq!(calc(&rt, "1+1").await.unwrap(), "2", "not asked again");
    assert_eq!(approver.asked.load(Ordering::SeqCst), 1);
    let err = calc(&rt, "2+2").await.unwrap_err();
    assert_eq!(
        err.kind(),
        ErrorKind::PermissionDenied,
        "other arguments are asked"
    );
    assert_eq!(approver.asked.load(Ordering::SeqCst), 2);
    let list = rt.approvals().list().unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].tool, "calculate");
    assert_eq!(list[0].plugin, "calc");
    assert!(list[0].digest.starts_with("sha256:"), "{:?}", list[0]);
    assert_eq!(
        list[0].scope,
        Scope::Arguments(json!({"expression": "1+1"}))
    );

    // A restart reads the file: nobody to ask, and the approved call runs.
    let rt = with_saved(ask_calculate(), &saved, None).await;
    assert_eq!(calc(&rt, "1+1").await.unwrap(), "2");
    assert_eq!(
        calc(&rt, "2+2").await.unwrap_err().kind(),
        ErrorKind::PermissionDenied
    );
    // Revoked: asked (here: denied, nobody to ask) again.
    assert!(rt.approvals().revoke(&list[0].id).unwrap());
    assert_eq!(
        calc(&rt, "1+1").await.unwrap_err().kind(),
        ErrorKind::PermissionDenied
    );
}

#[tokio::test]
async fn a_directory_approval_covers_the_files_in_it_and_asks_again_outside() {
    let scene = fs_scene();
    let notes = scene.granted.join("notes");
    std::fs::create_dir_all(&notes).unwrap();
    std::fs::write(notes.join("a.txt"), "AAA\n").unwrap();
    std::fs::write(notes.join("b.txt"), "BBB\n").unwrap();
    std::os::unix::fs::symlink(&scene.secret, notes.join("away.txt")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let directory = std::fs::canonicalize(&notes).unwrap();
    let approver = Scripted::calls(vec![
        CallApproval::AllowWithin(Scope::Directory {
            argument: "/path".into(),
            directory: directory.clone(),
        }),
        CallApproval::Deny { message: None },
        CallApproval::Deny { message: None },
    ]);
    let mut fs = PluginSettings::default();
    fs.dirs.push(DirGrant::read_only(&scene.granted));
    let rt = builder()
        .plugin_settings("fs", fs)
        .policy(
            Policy::builder()
                .rule(Rule::ask("read_file"))
                .build()
                .unwrap(),
        )
        .approvals_file(Some(dir.path().join("approvals.json")))
        .approver(approver.clone())
        .build()
        .await
        .unwrap();
    let read = |path: &'static str| {
        let rt = rt.clone();
        async move {
            rt.call("read_file", json!({ "path": path }), CallContext::new())
                .await
                .map(|r| r.output)
        }
    };
    assert!(read("notes/a.txt").await.unwrap().contains("AAA"));
    // The question offered the file's directory, inside the grant.
    assert_eq!(
        approver.offered.lock().unwrap()[0],
        vec![Scope::Directory {
            argument: "/path".into(),
            directory,
        }]
    );
    // Another file in it, by another spelling: not asked.
    assert!(read("./notes//b.txt").await.unwrap().contains("BBB"));
    assert_eq!(approver.asked.load(Ordering::SeqCst), 1);
    // Outside it: asked (denied).
    let err = read("hello.txt").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::PermissionDenied, "{err}");
    assert_eq!(approver.asked.load(Ordering::SeqCst), 2);
    // Through a link that leads out of the grant: refused before anyone
    // is asked (the path is opened, and judged, first).
    let err = read("notes/away.txt").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::PermissionDenied, "{err}");
    assert!(err.to_string().contains("leads outside"), "{err}");
    assert_eq!(approver.asked.load(Ordering::SeqCst), 2);
    assert_eq!(rt.approvals().list().unwrap().len(), 1);
}

#[tokio::test]
async fn an_approval_of_a_scope_the_call_did_not_offer_is_not_saved() {
    let dir = tempfile::tempdir().unwrap();
    let saved = dir.path().join("approvals.json");
    let approver = Scripted::calls(vec![
        CallApproval::AllowWithin(Scope::Directory {
            argument: "/expression".into(),
            directory: "/".into(),
        }),
        CallApproval::Deny { message: None },
    ]);
    let rt = with_saved(ask_calculate(), &saved, Some(approver.clone())).await;
    assert_eq!(calc(&rt, "1+1").await.unwrap(), "2", "allowed once");
    assert!(approver.offered.lock().unwrap()[0].is_empty());
    assert!(rt.approvals().list().unwrap().is_empty());
    assert_eq!(
        calc(&rt, "1+1").await.unwrap_err().kind(),
        ErrorKind::PermissionDenied,
        "asked again"
    );
}

#[tokio::test]
async fn an_approval_a_client_saves_covers_that_clients_calls_and_no_others() {
    let dir = tempfile::tempdir().unwrap();
    let saved = dir.path().join("approvals.json");
    let approver = Scripted::calls(vec![
        CallApproval::AllowTool,
        CallApproval::Deny { message: None },
    ]);
    let rt = with_saved(ask_calculate(), &saved, Some(approver.clone())).await;
    let from = |client: &'static str, expression: &'static str| {
        let rt = rt.clone();
        async move {
            rt.call(
                "calculate",
                json!({ "expression": expression }),
                CallContext::new().client(client),
            )
            .await
            .map(|r| r.output)
        }
    };
    assert_eq!(from("token:a", "1+1").await.unwrap(), "2");
    assert_eq!(from("token:a", "2+2").await.unwrap(), "4", "a's own calls");
    assert_eq!(approver.asked.load(Ordering::SeqCst), 1);
    let other = from("token:b", "1+1").await.unwrap_err();
    assert_eq!(other.kind(), ErrorKind::PermissionDenied, "b is asked");
    assert_eq!(approver.asked.load(Ordering::SeqCst), 2);
    assert_eq!(
        rt.approvals().list().unwrap()[0].answers,
        Answers::Client("token:a".into())
    );
}

#[tokio::test]
async fn an_approval_given_at_the_host_answers_no_client_and_no_other_profile() {
    let dir = tempfile::tempdir().unwrap();
    let saved = dir.path().join("approvals.json");
    let approver = Scripted::calls(vec![CallApproval::AllowTool]);
    let policy = Policy::from_toml(
        "[[rules]]\ntool = \"calculate\"\ndecision = \"ask\"\n\
         [profiles.reviewer]\n[[profiles.reviewer.rules]]\ntool = \"calculate\"\ndecision = \"ask\"\n",
        std::path::Path::new("policy.toml"),
    )
    .unwrap();
    let rt = with_saved(policy.clone(), &saved, Some(approver.clone())).await;
    // "This tool always", answered for a call of the user's own.
    assert_eq!(calc(&rt, "1+1").await.unwrap(), "2");
    let list = rt.approvals().list().unwrap();
    assert_eq!(list[0].answers, Answers::User);
    assert_eq!(list[0].profile, None);
    // Nobody to ask from here on: what the approval does not answer is denied.
    let rt = with_saved(policy, &saved, None).await;
    let call = |cx: CallContext| {
        let rt = rt.clone();
        async move {
            rt.call("calculate", json!({ "expression": "2+2" }), cx)
                .await
                .map(|r| r.output)
        }
    };
    assert_eq!(
        call(CallContext::new()).await.unwrap(),
        "4",
        "the user's calls"
    );
    for (who, cx) in [
        ("a token", CallContext::new().client("token:remote")),
        ("another profile", CallContext::new().agent("reviewer")),
    ] {
        let err = call(cx).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::PermissionDenied, "{who}: {err}");
    }
}

#[tokio::test]
async fn a_tool_approval_covers_any_arguments_of_that_build_and_never_lifts_a_deny() {
    let dir = tempfile::tempdir().unwrap();
    let saved = dir.path().join("approvals.json");
    let approver = Scripted::calls(vec![CallApproval::AllowTool]);
    let rt = with_saved(ask_calculate(), &saved, Some(approver.clone())).await;
    assert_eq!(calc(&rt, "1+1").await.unwrap(), "2");
    assert_eq!(calc(&rt, "5*5").await.unwrap(), "25", "any arguments");
    assert_eq!(approver.asked.load(Ordering::SeqCst), 1);

    // Another build of the plugin (here: the saved digest changed) is asked again.
    let text = std::fs::read_to_string(&saved).unwrap();
    let digest = rt.approvals().list().unwrap()[0].digest.clone();
    std::fs::write(&saved, text.replace(&digest, "sha256:an-older-build")).unwrap();
    let rt = with_saved(ask_calculate(), &saved, None).await;
    assert_eq!(
        calc(&rt, "1+1").await.unwrap_err().kind(),
        ErrorKind::PermissionDenied
    );

    // Saved for this build, and a deny rule: the deny wins.
    std::fs::write(&saved, text).unwrap();
    let deny = Policy::builder()
        .rule(Rule::deny("calculate"))
        .build()
        .unwrap();
    let rt = with_saved(deny, &saved, None).await;
    assert_eq!(
        calc(&rt, "1+1").await.unwrap_err().kind(),
        ErrorKind::PermissionDenied
    );
}

#[tokio::test]
async fn a_rejected_result_reaches_the_model_as_a_rejected_status() {
    let approver = Scripted::results(vec![
        ResultApproval::Accept,
        ResultApproval::Reject {
            message: Some("that number looks wrong".into()),
        },
    ]);
    let rt = builder()
        .policy(
            Policy::builder()
                .approve_results(["calculate"])
                .build()
                .unwrap(),
        )
        .approver(approver)
        .build()
        .await
        .unwrap();
    assert_eq!(calc(&rt, "1+1").await.unwrap(), "2");
    let err = calc(&rt, "2+2").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Rejected);
    let seen: Value = serde_json::from_str(&err.to_string()).unwrap();
    assert_eq!(
        seen,
        json!({"status": "rejected", "message": "that number looks wrong"})
    );
}

#[tokio::test]
async fn the_person_approving_a_result_is_shown_a_line_for_each_block_that_is_not_text() {
    let approver = Scripted::results(vec![ResultApproval::Accept]);
    let rt = builder()
        .policy(
            Policy::builder()
                .approve_results(["bar_chart"])
                .build()
                .unwrap(),
        )
        .approver(approver.clone())
        .build()
        .await
        .unwrap();
    let r = rt
        .call(
            "bar_chart",
            json!({"values": [3, 1, 4], "width": 64, "height": 48}),
            CallContext::new(),
        )
        .await
        .unwrap();
    assert_eq!(r.content[1].kind(), "image", "the image still goes on");
    let shown = approver.shown.lock().unwrap().clone();
    let [shown] = shown.as_slice() else {
        panic!("{shown:?}")
    };
    let (text, line) = shown.split_once('\n').expect("two lines");
    assert_eq!(
        text,
        "A bar chart of 3 values, from 1 to 4: a 64×48 PNG image."
    );
    assert!(
        line.starts_with("[image image/png, ") && line.ends_with(" bytes]"),
        "{shown}"
    );
}

#[tokio::test]
async fn a_tool_switched_off_for_a_session_is_hidden_and_denied_there_only() {
    let rt = builder().build().await.unwrap();
    rt.disable_tools("s1", "calc*").unwrap();
    let in_s1 = CallContext::new().session_id("s1");
    let err = rt
        .call("calculate", json!({"expression": "1"}), in_s1)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::PermissionDenied);
    assert!(
        !rt.offered_tools(None, Some("s1"))
            .iter()
            .any(|t| t.name == "calculate")
    );
    assert!(
        rt.offered_tools(None, Some("s2"))
            .iter()
            .any(|t| t.name == "calculate")
    );
    assert_eq!(rt.withheld_tools(None, Some("s1")), ["calculate"]);
    assert!(rt.withheld_tools(None, Some("s2")).is_empty());
    let in_s2 = CallContext::new().session_id("s2");
    assert!(
        rt.call("calculate", json!({"expression": "1"}), in_s2)
            .await
            .is_ok()
    );
    rt.enable_tools("s1", "calc*").unwrap();
    let again = CallContext::new().session_id("s1");
    assert!(
        rt.call("calculate", json!({"expression": "1"}), again)
            .await
            .is_ok()
    );
}

/// Allows everything, except for `reviewer`, who may call `word_count` only.
fn reviewer_policy() -> Policy {
    Policy::from_toml(
        "default = \"allow\"\n\
         [profiles.reviewer]\n\
         default = \"deny\"\n\
         [[profiles.reviewer.rules]]\n\
         tool = \"word_count\"\n\
         decision = \"allow\"\n",
        Path::new("inline.toml"),
    )
    .unwrap()
}

#[tokio::test]
async fn an_agent_profile_overrides_the_defaults_for_that_agent() {
    let policy = reviewer_policy();
    let rt = builder().policy(policy).build().await.unwrap();
    let names = |agent| -> Vec<String> {
        rt.offered_tools(agent, None)
            .into_iter()
            .map(|t| t.name)
            .collect()
    };
    assert_eq!(names(Some("reviewer")), vec!["word_count".to_owned()]);
    assert!(names(None).len() > 1);
    let err = rt
        .call(
            "calculate",
            json!({"expression": "1"}),
            CallContext::new().agent("reviewer"),
        )
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::PermissionDenied);
}

#[tokio::test]
async fn a_not_found_error_names_only_the_tools_the_callers_profile_may_see() {
    let policy = reviewer_policy();
    let rt = builder().policy(policy).build().await.unwrap();
    let missing = |cx: CallContext| {
        let rt = rt.clone();
        async move {
            match rt.call("calculat", json!({}), cx).await {
                Err(CallError::NotFound {
                    suggestions,
                    available,
                    ..
                }) => (suggestions, available),
                other => panic!("{other:?}"),
            }
        }
    };
    let (suggestions, available) = missing(CallContext::new().agent("reviewer")).await;
    assert_eq!(available, ["word_count"]);
    assert!(suggestions.is_empty(), "{suggestions:?}");
    // Without the profile, the hidden tool is there to suggest.
    let (suggestions, available) = missing(CallContext::new()).await;
    assert!(available.contains(&"calculate".to_owned()), "{available:?}");
    assert_eq!(suggestions.first().map(String::as_str), Some("calculate"));
}

#[tokio::test]
async fn a_call_reaches_the_host_its_url_names_and_no_other_granted_host() {
    let elsewhere = TestServer::start_on("127.0.0.2", "the other granted host");
    let start = TestServer::redirecting(&elsewhere.url("/x"));
    let mut http = toolhost_runtime::PluginSettings::default();
    for host in ["127.0.0.1", "127.0.0.2"] {
        http.hosts.push(host.parse().unwrap());
    }
    let rt = builder()
        .plugin_settings("http", http)
        .build()
        .await
        .unwrap();
    let get = |url: String| {
        let rt = rt.clone();
        async move {
            rt.call("http_get", json!({ "url": url }), CallContext::new())
                .await
        }
    };
    // Named by the call, the other host answers: it is granted.
    let direct = get(elsewhere.url("/x")).await.unwrap();
    assert!(
        direct.output.contains("the other granted host"),
        "{direct:?}"
    );
    // Through a redirect from the host the call named, it is not reached:
    // `http_get` names its URL argument (`url-arg`), so the call's sandbox
    // reaches 127.0.0.1 alone.
    let through = get(start.url("/go")).await;
    let text = format!("{through:?}");
    assert!(!text.contains("the other granted host"), "{text}");
    assert_eq!(start.request_count(), 1);
    assert_eq!(elsewhere.request_count(), 1, "only the direct request");
    // A URL on a host the plugin is not granted is refused before the
    // guest runs.
    let refused = get("http://127.0.0.3:9/".into()).await.unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::PermissionDenied, "{refused}");
    assert!(
        refused.to_string().contains("not a URL on a host granted"),
        "{refused}"
    );
}

#[tokio::test]
async fn a_url_rule_holds_for_every_redirect_hop() {
    let target = TestServer::start("the page behind the redirect");
    let start = TestServer::redirecting(&target.url("/secret"));
    let mut http = toolhost_runtime::PluginSettings::default();
    for port in [start.port, target.port] {
        http.hosts
            .push(format!("127.0.0.1:{port}").parse().unwrap());
    }
    let policy = Policy::builder()
        .rule(
            Rule::deny("http_get")
                .arg_host("url", format!("127.0.0.1:{}", target.port))
                .reason("not that service"),
        )
        .build()
        .unwrap();
    let rt = builder()
        .plugin_settings("http", http)
        .policy(policy)
        .build()
        .await
        .unwrap();

    // Asked directly, the rule denies the call.
    let direct = rt
        .call(
            "http_get",
            json!({"url": target.url("/secret")}),
            CallContext::new(),
        )
        .await
        .unwrap_err();
    assert_eq!(direct.kind(), ErrorKind::PermissionDenied, "{direct}");

    // Through an allowed host's redirect, the hop is refused too.
    let through = rt
        .call(
            "http_get",
            json!({"url": start.url("/go")}),
            CallContext::new(),
        )
        .await;
    assert!(through.is_err(), "{through:?}");
    assert_eq!(start.request_count(), 1, "the first request went out");
    assert_eq!(
        target.request_count(),
        0,
        "the redirect to the denied service never left the host"
    );
}

/// Answers "allow once", after running `meanwhile` (what someone does to
/// the file system while the person thinks).
struct AllowAfter(Box<dyn Fn() + Send + Sync>);

impl Approver for AllowAfter {
    fn approve_call<'a>(
        &'a self,
        _: &'a CallApprovalRequest<'a>,
    ) -> ApprovalFuture<'a, CallApproval> {
        (self.0)();
        Box::pin(async { CallApproval::AllowOnce })
    }
    fn approve_result<'a>(
        &'a self,
        _: &'a ResultApprovalRequest<'a>,
    ) -> ApprovalFuture<'a, ResultApproval> {
        Box::pin(async { ResultApproval::Accept })
    }
}

/// `fs` over a grant holding `notes/todo.txt` and `secret/key.txt`, with
/// `secret/**` denied and every `fs` call asked about; `meanwhile` runs
/// while the question is open.
async fn asked_fs(
    scene: &toolhost_test_support::FsScene,
    meanwhile: impl Fn() + Send + Sync + 'static,
) -> Runtime {
    let policy = Policy::builder()
        .rule(
            Rule::deny("*")
                .arg_path("path", "secret/**")
                .reason("the secret folder is off limits"),
        )
        .rule(Rule::ask("read_file"))
        .rule(Rule::ask("list_dir"))
        .build()
        .unwrap();
    let mut fs = PluginSettings::default();
    fs.dirs.push(DirGrant::read_only(&scene.granted));
    builder()
        .policy(policy)
        .plugin_settings("fs", fs)
        .approver(Arc::new(AllowAfter(Box::new(meanwhile))))
        .build()
        .await
        .unwrap()
}

fn notes_and_secret(scene: &toolhost_test_support::FsScene) {
    let g = &scene.granted;
    std::fs::create_dir_all(g.join("notes")).unwrap();
    std::fs::create_dir_all(g.join("secret")).unwrap();
    std::fs::write(g.join("notes/todo.txt"), "buy milk\n").unwrap();
    std::fs::write(g.join("secret/key.txt"), "hunter2\n").unwrap();
}

#[tokio::test]
async fn a_file_swapped_for_a_link_while_the_person_is_asked_is_not_what_the_call_reads() {
    let scene = fs_scene();
    notes_and_secret(&scene);
    let g = scene.granted.clone();
    let rt = asked_fs(&scene, move || {
        // The note becomes a link to the secret while the question is open.
        std::fs::remove_file(g.join("notes/todo.txt")).unwrap();
        std::os::unix::fs::symlink("../secret/key.txt", g.join("notes/todo.txt")).unwrap();
    })
    .await;
    let r = rt
        .call(
            "read_file",
            json!({"path": "notes/todo.txt"}),
            CallContext::new(),
        )
        .await
        .unwrap();
    assert!(r.output.contains("buy milk"), "{}", r.output);
    assert!(!r.output.contains("hunter2"), "{}", r.output);
    // Asked again now, the link is seen for what it is and denied.
    let err = rt
        .call(
            "read_file",
            json!({"path": "notes/todo.txt"}),
            CallContext::new(),
        )
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::PermissionDenied, "{err}");
    assert!(err.to_string().contains("off limits"), "{err}");
}

#[tokio::test]
async fn a_directory_swapped_for_a_link_while_the_person_is_asked_is_not_what_the_call_lists() {
    let scene = fs_scene();
    notes_and_secret(&scene);
    let g = scene.granted.clone();
    let rt = asked_fs(&scene, move || {
        std::fs::rename(g.join("notes"), g.join("notes-moved")).unwrap();
        std::os::unix::fs::symlink("secret", g.join("notes")).unwrap();
    })
    .await;
    let r = rt
        .call("list_dir", json!({"path": "notes"}), CallContext::new())
        .await
        .unwrap();
    assert!(r.output.contains("todo.txt"), "{}", r.output);
    assert!(!r.output.contains("key.txt"), "{}", r.output);
}

#[tokio::test]
async fn a_path_that_is_neither_file_nor_directory_is_refused_before_anyone_is_asked() {
    let scene = fs_scene();
    let fifo = scene.granted.join("pipe");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let rt = asked_fs(&scene, || panic!("nobody is asked about a FIFO")).await;
    let err = rt
        .call("read_file", json!({"path": "pipe"}), CallContext::new())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::PermissionDenied, "{err}");
    assert!(err.to_string().contains("neither a regular file"), "{err}");
}

/// Two runtimes whose saved approvals are one PostgreSQL store, as two
/// replicas of one gate behind a load balancer.
#[tokio::test(flavor = "multi_thread")]
async fn an_allow_always_given_on_one_replica_answers_on_another_and_a_revocation_on_either_holds_on_both()
 {
    let db = toolhost_test_support::postgres::Postgres::start();
    let replica = |approver: Option<Arc<Scripted>>| {
        let store = toolhost_state::PostgresApprovals::connect(&db.url(), "gate").unwrap();
        let mut b = builder()
            .policy(ask_calculate())
            .approvals_store(Arc::new(store));
        if let Some(a) = approver {
            b = b.approver(a);
        }
        b.build()
    };
    let approver = Scripted::calls(vec![
        CallApproval::AllowAlways,
        CallApproval::Deny { message: None },
    ]);
    let one = replica(Some(approver.clone())).await.unwrap();
    // The other has nobody to ask: what is not approved is denied.
    let other = replica(None).await.unwrap();
    assert_eq!(
        calc(&other, "1+1").await.unwrap_err().kind(),
        ErrorKind::PermissionDenied
    );
    assert_eq!(calc(&one, "1+1").await.unwrap(), "2");
    assert_eq!(approver.asked.load(Ordering::SeqCst), 1);
    // The other replica reads the new approval at its next lookup after
    // the database's notification (milliseconds; the poll is the bound).
    let mut ran = false;
    for _ in 0..200 {
        if calc(&other, "1+1").await.is_ok() {
            ran = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(
        ran,
        "the approval given on one replica never answered on the other"
    );
    let id = other.approvals().list().unwrap()[0].id.clone();
    assert!(other.approvals().revoke(&id).unwrap());
    let mut held = false;
    for _ in 0..200 {
        if calc(&one, "1+1").await.is_err() {
            held = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(
        held,
        "a revocation on one replica did not hold on the other"
    );
    assert_eq!(approver.asked.load(Ordering::SeqCst), 2, "asked again");
}
