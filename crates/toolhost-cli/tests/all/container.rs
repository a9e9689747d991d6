//! The container image (`Dockerfile`, target `prebuilt`) built with
//! Debian's podman on a base image made from Debian's packages, and run as
//! a deployment runs it: not root, a read-only root file system, a token.
//! The official MCP Python SDK calls a plugin through it.

use std::path::Path;

use toolhost_test_support::container::Image;

use crate::mcp::{INITIALIZE, client, mcp_headers, post};
use crate::support::*;

#[test]
fn the_image_runs_as_no_root_on_a_read_only_root_and_serves_a_plugin_over_mcp() {
    if let Err(why) = toolhost_test_support::container::runs_containers() {
        eprintln!(
            "SKIPPED the_image_runs_as_no_root_on_a_read_only_root_and_serves_a_plugin_over_mcp: \
             this machine cannot run containers (cargo xtask test ran one of the base image: {why})"
        );
        return;
    }
    let image = Image::build(
        Path::new(env!("CARGO_BIN_EXE_host")),
        &[
            plugins_dir().join("calc.wasm"),
            plugins_dir().join("calc.toml"),
        ],
    );
    let running = image.run(&["--read-only", "-e", "TOOLHOST_TOKEN=s3cret-token"]);
    let report = client(
        "basics",
        &["--url", &running.url, "--token", "s3cret-token"],
        &[],
    );
    let ok = &report["calls"]["ok"];
    assert_eq!(ok["is_error"], false, "{report}\n{}", running.logs());
    assert_eq!(ok["text"], "14", "{report}");
    let base = running.url.trim_end_matches("/mcp");
    let (status, body) = post(base, &mcp_headers(None), INITIALIZE);
    assert_eq!(status, 401, "no token: {body}");

    let uid = running.exec(&["id", "-u"]);
    assert_eq!(String::from_utf8_lossy(&uid.stdout).trim(), "10001");
    assert_eq!(running.inspect("{{.HostConfig.ReadonlyRootfs}}"), "true");
    let write = running.exec(&["sh", "-c", "echo x > /usr/local/bin/host"]);
    assert!(!write.status.success(), "the root file system took a write");

    // Issue 59: trust ships with the image, read-only; the compile cache
    // is a directory of host's own that nobody else may write.
    let lock = running.exec(&["sh", "-c", "echo x >> /etc/toolhost/toolhost.lock"]);
    assert!(!lock.status.success(), "the lock file took a write");
    let cache = running.exec(&["stat", "-c", "%u %a", "/cache/components"]);
    assert_eq!(String::from_utf8_lossy(&cache.stdout).trim(), "10001 755");
    // Without its lock (a deployment that forgot it) the image does not
    // start, rather than trust whatever plugins it finds.
    let out = toolhost_test_support::container::podman()
        .args(["run", "--rm"])
        .args(toolhost_test_support::container::sandbox_flags())
        // An empty /etc/toolhost (not a copy of the image's), and a command
        // that ends either way (`tools` rather than `serve`).
        .args([
            "--read-only",
            "--tmpfs",
            "/etc/toolhost:notmpcopyup",
            "--entrypoint",
            "host",
        ])
        .arg(&image.tag)
        .args(["--plugins", "/plugins", "tools"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "started without its lock: {said}");
    assert!(said.contains("toolhost.lock is missing"), "{said}");
    eprintln!(
        "image: {} MB, answered /healthz {} ms after `podman run`",
        image.size() / 1_000_000,
        running.ready_after.as_millis()
    );
}
