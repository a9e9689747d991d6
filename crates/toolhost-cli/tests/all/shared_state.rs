//! `[state]`: saved approvals in a PostgreSQL database that replicas share
//! (a real server, Debian's, through `toolhost_test_support::postgres`).

use std::sync::Arc;

use toolhost_policy::approvals::{Answers, Approvals, NewApproval, Scope};
use toolhost_state::PostgresApprovals;
use toolhost_test_support::postgres::Postgres;

use crate::support::host;

#[test]
fn host_approvals_lists_and_revokes_the_approvals_in_the_shared_database() {
    let db = Postgres::start();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("toolhost.toml");
    std::fs::write(
        &config,
        "[state]\npostgres-env = \"TOOLHOST_STATE_URL\"\nstore = \"gate\"\n",
    )
    .unwrap();
    // Another replica saved an approval.
    let replica = Approvals::with_store(Arc::new(
        PostgresApprovals::connect(&db.url(), "gate").unwrap(),
    ));
    let id = replica
        .save(NewApproval {
            tool: "read_file".into(),
            plugin: "fs".into(),
            digest: "sha256:ab".into(),
            scope: Scope::AnyArguments,
            profile: None,
            answers: Answers::User,
            who: "ana".into(),
            from: "console".into(),
            expires: None,
        })
        .unwrap();
    let run = |args: &[&str]| {
        host(dir.path())
            .env("TOOLHOST_STATE_URL", db.url())
            .arg("--config")
            .arg(&config)
            .args(args)
            .output()
            .unwrap()
    };
    let o = run(&["approvals", "list", "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let listed: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(listed[0]["id"], id.as_str(), "{listed}");
    assert_eq!(listed[0]["tool"], "read_file");
    let o = run(&["approvals", "revoke", &id]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        replica.list().unwrap().is_empty(),
        "revoked in the database"
    );
    let o = run(&["approvals", "list"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("no saved approvals (store `gate` of postgresql://127.0.0.1:"),
        "{out}"
    );
}

#[test]
fn a_state_table_whose_variable_is_unset_is_an_error_that_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("toolhost.toml");
    std::fs::write(&config, "[state]\npostgres-env = \"NO_SUCH_VAR_HERE\"\n").unwrap();
    let o = host(dir.path())
        .arg("--config")
        .arg(&config)
        .args(["approvals", "list"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("NO_SUCH_VAR_HERE is not set"), "{err}");
}
