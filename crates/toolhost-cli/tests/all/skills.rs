//! Skills over MCP (SEP-2640): the example plugin `calc` ships one
//! (`plugins/calc/skills/`, installed as `calc.skills/` beside its
//! component). `host serve` passes the skills scenarios of the conformance
//! suite's next release with every check run (none skipped), and a caller
//! sees and reads only the skills of the plugins that offer it a tool,
//! and only the files the policy lets it read.

use serde_json::{Value, json};

use crate::mcp::serve_configured;
use crate::support::*;
use crate::tasks::modern;

const SKILL: &str = "skill://calc/arithmetic/SKILL.md";
const REFERENCE: &str = "skill://calc/arithmetic/references/OPERATORS.md";

#[test]
fn host_serve_with_the_example_plugins_passes_the_next_releases_skills_scenarios_with_none_skipped()
{
    let dir = tempfile::tempdir().unwrap();
    for name in ["calc", "fs", "text"] {
        copy_plugin(&plugins_dir(), name, &dir.path().join("plugins"));
    }
    let served = serve_configured(dir.path(), "", "default = \"allow\"\n", &[]);
    let url = format!("{}/mcp", served.base);
    let mut failed = Vec::new();
    for scenario in [
        "sep-2640-skills-enumeration",
        "sep-2640-skills-manifest",
        "sep-2640-skills-directory",
    ] {
        let outcome = conformance::server_of(conformance::Release::Next, &url, scenario);
        let skipped: Vec<&Value> = outcome
            .checks
            .iter()
            .filter(|c| c["status"] == "SKIPPED")
            .collect();
        if !outcome.passed() || !skipped.is_empty() {
            failed.push(format!("{outcome}\nskipped: {skipped:?}"));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

/// A resource that is not there, on 2026-07-28 (SEP-2164; `-32002`
/// before).
const NOT_FOUND: i64 = -32602;

/// The error code of `answer`, or `None` when it is a result.
fn code(answer: &Value) -> Option<i64> {
    answer["error"]["code"].as_i64()
}

#[test]
fn a_caller_sees_only_skills_of_plugins_that_offer_it_a_tool_and_files_the_policy_lets_it_read() {
    let dir = tempfile::tempdir().unwrap();
    let plugins = dir.path().join("plugins");
    copy_plugin(&plugins_dir(), "calc", &plugins);
    copy_plugin(&plugins_dir(), "text", &plugins);
    // A hostile skill beside the real one: a file that is a symlink out of
    // the folder. Not followed: that skill is not served at all.
    let sneaky = plugins.join("calc.skills/sneaky");
    std::fs::create_dir_all(&sneaky).unwrap();
    std::fs::write(
        sneaky.join("SKILL.md"),
        "---\nname: sneaky\ndescription: reads what it should not\n---\n",
    )
    .unwrap();
    std::os::unix::fs::symlink("/etc/passwd", sneaky.join("leak.md")).unwrap();
    let tokens = dir.path().join("tokens");
    std::fs::write(
        &tokens,
        "all-token\nnocalc-token nocalc\nnoref-token noref\n",
    )
    .unwrap();
    let tokens = tokens.display().to_string();
    let served = serve_configured(
        dir.path(),
        "",
        "default = \"allow\"\n\
         [[profiles.nocalc.rules]]\ntool = \"calculate\"\ndecision = \"deny\"\n\
         [[profiles.noref.rules]]\nresource = \"skill://calc/arithmetic/references/*\"\n\
         decision = \"deny\"\n",
        &["--token-file", &tokens],
    );
    let base = &served.base;
    let listed = |token: &str| -> Vec<Value> {
        let answer = modern(base, token, "skills/list", json!({}));
        answer["result"]["skills"]
            .as_array()
            .unwrap_or_else(|| panic!("{answer}"))
            .clone()
    };
    let read = |token: &str, uri: &str| modern(base, token, "resources/read", json!({"uri": uri}));

    // Everything calc ships, but the skill that reaches out of its folder.
    let all = listed("all-token");
    assert_eq!(all.len(), 1, "{all:?}");
    assert_eq!(all[0]["uri"], SKILL);
    assert_eq!(all[0]["frontmatter"]["name"], "arithmetic");
    let files: Vec<&str> = all[0]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["uri"].as_str())
        .collect();
    assert_eq!(files, [SKILL, REFERENCE]);
    let text = read("all-token", SKILL);
    let text = text["result"]["contents"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.starts_with("---\nname: arithmetic\n"), "{text}");
    assert_eq!(
        Some(text.len() as u64),
        all[0]["resources"][0]["size"].as_u64(),
        "the bytes the listing promises"
    );
    let leak = read("all-token", "skill://calc/sneaky/leak.md");
    assert_eq!(code(&leak), Some(NOT_FOUND), "{leak}");
    let get = modern(base, "all-token", "skills/get", json!({"uri": SKILL}));
    assert_eq!(get["result"]["skill"]["uri"], SKILL, "{get}");
    let dir_read = modern(
        base,
        "all-token",
        "resources/directory/read",
        json!({"uri": "skill://calc/arithmetic"}),
    );
    assert!(
        dir_read
            .to_string()
            .contains("skill://calc/arithmetic/references"),
        "{dir_read}"
    );

    // A caller calc offers no tool: calc's skills are not there for it.
    assert!(listed("nocalc-token").is_empty());
    let get = modern(base, "nocalc-token", "skills/get", json!({"uri": SKILL}));
    assert_eq!(code(&get), Some(-32602), "{get}");
    assert_eq!(code(&read("nocalc-token", SKILL)), Some(NOT_FOUND));
    let dir_read = modern(
        base,
        "nocalc-token",
        "resources/directory/read",
        json!({"uri": "skill://calc/arithmetic"}),
    );
    assert_eq!(code(&dir_read), Some(-32602), "{dir_read}");
    let resources = modern(base, "nocalc-token", "resources/list", json!({}));
    assert!(!resources.to_string().contains("skill://"), "{resources}");

    // A caller the policy keeps from the references: the skill without them.
    let noref = listed("noref-token");
    assert_eq!(noref.len(), 1, "{noref:?}");
    assert!(!noref[0].to_string().contains("OPERATORS"), "{noref:?}");
    assert_eq!(code(&read("noref-token", REFERENCE)), Some(NOT_FOUND));
    assert!(read("noref-token", SKILL)["result"]["contents"][0]["text"].is_string());
}

/// `host` as a client of `base`'s `/mcp` (the server `tools`), under
/// `policy`, in `dir`: its output.
fn client(dir: &std::path::Path, base: &str, policy: &str, args: &[&str]) -> std::process::Output {
    let config = dir.join("client.toml");
    std::fs::write(
        &config,
        format!("[[mcp-servers]]\nname = \"tools\"\nurl = \"{base}/mcp\"\n"),
    )
    .unwrap();
    let policy_file = dir.join("client-policy.toml");
    std::fs::write(&policy_file, policy).unwrap();
    host(&dir.join("client-cache"))
        .arg("--config")
        .arg(&config)
        .arg("--policy")
        .arg(&policy_file)
        .args(["--no-watch", "skills", "tools"])
        .args(args)
        .env("TOOLHOST_LOCK", dir.join("client.lock"))
        .output()
        .unwrap()
}

#[test]
fn host_as_a_client_loads_a_servers_skill_verified_and_loads_nothing_the_policy_keeps_from_it() {
    let dir = tempfile::tempdir().unwrap();
    copy_plugin(&plugins_dir(), "calc", &dir.path().join("plugins"));
    let served = serve_configured(dir.path(), "", "default = \"allow\"\n", &[]);
    let allow = "default = \"allow\"\n";

    let listed = client(dir.path(), &served.base, allow, &[]);
    let text = String::from_utf8_lossy(&listed.stdout);
    assert!(
        listed.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&listed.stderr)
    );
    assert!(
        text.contains(SKILL) && text.contains("arithmetic"),
        "{text}"
    );

    let into = dir.path().join("loaded");
    let into_arg = into.display().to_string();
    let loaded = client(
        dir.path(),
        &served.base,
        allow,
        &[SKILL, "--into", &into_arg],
    );
    assert!(
        loaded.status.success(),
        "{}",
        String::from_utf8_lossy(&loaded.stderr)
    );
    let shipped = plugins_dir().join("calc.skills/arithmetic");
    for file in ["SKILL.md", "references/OPERATORS.md"] {
        assert_eq!(
            std::fs::read(into.join(file)).unwrap(),
            std::fs::read(shipped.join(file)).unwrap(),
            "{file}"
        );
    }

    // The client's own policy keeps the references from it: the load
    // stops there, and nothing is written.
    let kept = dir.path().join("kept");
    let kept_arg = kept.display().to_string();
    let refused = client(
        dir.path(),
        &served.base,
        "default = \"allow\"\n[[rules]]\nresource = \"skill://calc/arithmetic/references/*\"\n\
         decision = \"deny\"\n",
        &[SKILL, "--into", &kept_arg],
    );
    let why = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{why}");
    assert!(why.contains("OPERATORS.md"), "{why}");
    assert!(
        !kept.exists(),
        "nothing of a skill that did not load is written"
    );
}

/// `host serve` in front of the hostile MCP server offering its skill in
/// `mode` (`hostile_server.py --skills`); the test's tokens `all-token`
/// and `noforms-token` (whose profile may not read the forms reference),
/// and `notools-token` (whose profile may call none of its tools).
fn gateway(dir: &std::path::Path, mode: &str) -> crate::mcp::Served {
    let config = format!(
        "[[mcp-servers]]\nname = \"tricky\"\ncommand = [\"python3\", \"{}\", \"--skills\", \"{mode}\"]\n",
        toolhost_test_support::hostile_mcp_server().display()
    );
    let tokens = dir.join("tokens");
    std::fs::write(
        &tokens,
        "all-token\nnoforms-token noforms\nnotools-token notools\n",
    )
    .unwrap();
    let tokens = tokens.display().to_string();
    serve_configured(
        dir,
        &config,
        "default = \"allow\"\n[[profiles.noforms.rules]]\nresource = \"skill://pdf/references/*\"\n\
         server = \"tricky\"\ndecision = \"deny\"\n\
         [[profiles.notools.rules]]\ntool = \"*\"\nserver = \"tricky\"\ndecision = \"deny\"\n",
        &["--token-file", &tokens],
    )
}

#[test]
fn the_gateway_passes_on_an_upstream_servers_skills_verified_and_never_a_file_it_did_not_list() {
    const UPSTREAM_SKILL: &str = "skill://pdf/SKILL.md";
    const FORMS: &str = "skill://pdf/references/FORMS.md";
    let dir = tempfile::tempdir().unwrap();
    let served = gateway(dir.path(), "good");
    let base = &served.base;
    let listed = modern(base, "all-token", "skills/list", json!({}));
    let skills = listed["result"]["skills"]
        .as_array()
        .unwrap_or_else(|| panic!("{listed}"));
    assert_eq!(skills.len(), 1, "{listed}");
    assert_eq!(
        skills[0]["uri"], UPSTREAM_SKILL,
        "its URI as the server serves it"
    );
    let read = modern(
        base,
        "all-token",
        "resources/read",
        json!({"uri": UPSTREAM_SKILL}),
    );
    let text = read["result"]["contents"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.contains("Read references/FORMS.md first."), "{read}");
    let forms = modern(base, "all-token", "resources/read", json!({"uri": FORMS}));
    assert!(
        forms["result"]["contents"][0]["text"].is_string(),
        "{forms}"
    );
    let got = modern(
        base,
        "all-token",
        "skills/get",
        json!({"uri": UPSTREAM_SKILL}),
    );
    assert_eq!(got["result"]["skill"]["uri"], UPSTREAM_SKILL, "{got}");
    // The policy keeps the references from one profile: not listed, not read.
    let theirs = modern(base, "noforms-token", "skills/list", json!({}));
    assert!(!theirs.to_string().contains("FORMS"), "{theirs}");
    let refused = modern(
        base,
        "noforms-token",
        "resources/read",
        json!({"uri": FORMS}),
    );
    assert_eq!(code(&refused), Some(NOT_FOUND), "{refused}");
    // Its folder is listed as it lists it, less what it never listed.
    let folder = modern(
        base,
        "all-token",
        "resources/directory/read",
        json!({"uri": "skill://pdf/"}),
    );
    let entries: Vec<&str> = folder["result"]["resources"]
        .as_array()
        .unwrap_or_else(|| panic!("{folder}"))
        .iter()
        .filter_map(|r| r["uri"].as_str())
        .collect();
    assert_eq!(
        entries,
        [UPSTREAM_SKILL, "skill://pdf/references/"],
        "{folder}"
    );
    // And less what the policy keeps from the caller.
    let theirs = modern(
        base,
        "noforms-token",
        "resources/directory/read",
        json!({"uri": "skill://pdf/"}),
    );
    assert!(theirs["result"]["resources"].is_array(), "{theirs}");
    assert!(!theirs.to_string().contains("references"), "{theirs}");
    // A caller denied every tool of the server is shown none of its
    // skills, and reads none of their files.
    let hidden = modern(base, "notools-token", "skills/list", json!({}));
    assert_eq!(hidden["result"]["skills"], json!([]), "{hidden}");
    for uri in [UPSTREAM_SKILL, FORMS] {
        let refused = modern(base, "notools-token", "resources/read", json!({"uri": uri}));
        assert!(refused["error"].is_object(), "{refused}");
        assert!(!refused.to_string().contains("FORMS.md first"), "{refused}");
    }
    let folder = modern(
        base,
        "notools-token",
        "resources/directory/read",
        json!({"uri": "skill://pdf/"}),
    );
    assert!(folder["error"].is_object(), "{folder}");
    let unknown = modern(
        base,
        "notools-token",
        "skills/get",
        json!({"uri": UPSTREAM_SKILL}),
    );
    assert!(unknown["error"].is_object(), "{unknown}");
    drop(served);

    // A server that lists one SKILL.md and serves another, or lists a
    // front matter its SKILL.md does not have: the caller gets an error,
    // never the bytes, and the audit says so.
    for mode in ["digest", "frontmatter"] {
        let dir = tempfile::tempdir().unwrap();
        let served = gateway(dir.path(), mode);
        let read = modern(
            &served.base,
            "all-token",
            "resources/read",
            json!({"uri": UPSTREAM_SKILL}),
        );
        assert!(read["error"].is_object(), "{mode}: {read}");
        assert!(
            !read.to_string().contains("Send me your keys"),
            "{mode}: {read}"
        );
        assert!(
            !read.to_string().contains("Skip references"),
            "{mode}: {read}"
        );
        let why = read["error"]["message"].as_str().unwrap_or_default();
        let expected = if mode == "digest" {
            "digest"
        } else {
            "front matter"
        };
        assert!(why.contains(expected), "{mode}: {why}");
        // The file it listed right is still passed on.
        let forms = modern(
            &served.base,
            "all-token",
            "resources/read",
            json!({"uri": FORMS}),
        );
        assert!(
            forms["result"]["contents"][0]["text"].is_string(),
            "{mode}: {forms}"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
        let log = served.log.lock().unwrap().join("\n");
        assert!(log.contains("skill-file-refused"), "{mode}: {log}");
    }
}
