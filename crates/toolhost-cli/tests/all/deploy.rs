//! The Kubernetes manifests in `deploy/kubernetes/`, checked against the
//! Kubernetes API's schemas (`kubernetes-validate` from PyPI, which ships
//! the schemas of every release and works offline), strictly: an unknown
//! or misspelt field fails too. Nothing here applies them to a cluster.

use std::path::PathBuf;
use std::process::Command;

use crate::support::*;

/// `kubernetes-validate`, which `cargo xtask test` installs.
fn validator() -> PathBuf {
    let path = std::env::var_os("TOOLHOST_TEST_KUBE_VALIDATE").map_or_else(
        || root().join("target/tools/kube/bin/kubernetes-validate"),
        PathBuf::from,
    );
    assert!(
        path.is_file(),
        "kubernetes-validate ({}) is missing: run the tests with `cargo xtask test`, which \
         installs it from PyPI",
        path.display()
    );
    path
}

#[test]
fn the_kubernetes_manifests_validate_strictly_against_the_kubernetes_schemas() {
    let manifest = root().join("deploy/kubernetes/toolhost.yaml");
    let out = Command::new(validator())
        .args(["--strict", "--kubernetes-version", "1.33.0"])
        .arg(&manifest)
        .output()
        .unwrap();
    let said =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    for kind in ["deployment", "configmap", "service", "poddisruptionbudget"] {
        assert!(
            said.contains(&format!("passed for resource {kind}/toolhost")),
            "{kind} was not checked: {said}"
        );
    }
    // The validator fails what it should: a misspelt field, strictly.
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.yaml");
    let text = std::fs::read_to_string(&manifest)
        .unwrap()
        .replace("readOnlyRootFilesystem", "readOnlyRootFileSystem");
    std::fs::write(&bad, text).unwrap();
    let out = Command::new(validator())
        .args(["--strict", "--kubernetes-version", "1.33.0"])
        .arg(&bad)
        .output()
        .unwrap();
    assert!(!out.status.success(), "a misspelt field passed");
}

#[test]
fn the_database_policy_lets_only_toolhosts_pods_reach_postgresql() {
    let manifest = root().join("deploy/kubernetes/database-policy.yaml");
    let out = Command::new(validator())
        .args(["--strict", "--kubernetes-version", "1.33.0"])
        .arg(&manifest)
        .output()
        .unwrap();
    let said =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains("passed for resource networkpolicy/toolhost-database"),
        "the policy was not checked: {said}"
    );
    // What it lets in: the Deployment's pods, on PostgreSQL's port, to
    // nothing but ingress of the database's pods.
    let text = std::fs::read_to_string(&manifest).unwrap();
    let deployment =
        std::fs::read_to_string(root().join("deploy/kubernetes/toolhost.yaml")).unwrap();
    assert!(
        deployment.contains("labels: { app: toolhost }"),
        "the pods' label moved"
    );
    for line in [
        "policyTypes: [\"Ingress\"]",
        "matchLabels: { app: toolhost }",
        "- { protocol: TCP, port: 5432 }",
    ] {
        assert!(text.contains(line), "{line} is not in the policy");
    }
    assert_eq!(text.matches("- from:").count(), 1, "one rule only");
}

/// Issue 59: trust is shipped, not taken at a pod's start, and a pod holds
/// no Kubernetes API token. The image runs locked with its lock where the
/// manifests' read-only ConfigMap puts one (so a pod without it does not
/// start: `runtime.rs` proves the refusal).
#[test]
fn the_manifests_ship_the_lock_read_only_and_mount_no_service_account_token() {
    let manifest = std::fs::read_to_string(root().join("deploy/kubernetes/toolhost.yaml")).unwrap();
    let dockerfile = std::fs::read_to_string(root().join("Dockerfile")).unwrap();
    assert!(manifest.contains("automountServiceAccountToken: false"));
    assert!(
        manifest.contains("{ name: config, mountPath: /etc/toolhost, readOnly: true }"),
        "the config volume is read-only at /etc/toolhost"
    );
    assert!(
        manifest.contains("\n  toolhost.lock: |\n"),
        "the ConfigMap carries the lock"
    );
    for env in [
        "TOOLHOST_LOCK=/etc/toolhost/toolhost.lock",
        "TOOLHOST_LOCKED=true",
        "TOOLHOST_CACHE_DIR=/cache/components",
    ] {
        assert!(dockerfile.contains(env), "{env} is not in the image");
    }
    assert!(
        !dockerfile.contains("TOOLHOST_LOCK=/cache"),
        "the lock is not in the writable cache"
    );
}
