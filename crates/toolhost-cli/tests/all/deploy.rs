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
