//! `host keygen`, `host publish` and `host install` against a real registry
//! (Debian's `docker-registry`, started on loopback by each test): the
//! installed plugin answers through `host call`, and the lock file records
//! where it came from and who signed it.

use std::path::Path;
use std::process::{Command, Output};

use crate::support::*;

fn run(cmd: &mut Command) -> Output {
    cmd.output().expect("host runs")
}

fn ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn failed(o: &Output) -> String {
    assert!(
        !o.status.success(),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn host_in(dir: &Path) -> Command {
    let mut cmd = host(&root().join("target/test-cache"));
    cmd.env("TOOLHOST_LOCK", dir.join("toolhost.lock"))
        .current_dir(dir);
    cmd
}

#[test]
fn a_signed_plugin_round_trips_through_a_registry_and_answers_calls() {
    let registry = Registry::start();
    let work = tempfile::tempdir().unwrap();
    let src = work.path().join("src");
    copy_plugin(&plugins_dir(), "calc", &src);

    let out = ok(&run(host_in(work.path()).args(["keygen", "publisher"])));
    assert!(out.contains("fingerprint sha256:"), "{out}");
    let fingerprint = out
        .lines()
        .find_map(|l| l.strip_prefix("fingerprint "))
        .unwrap()
        .to_owned();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(work.path().join("publisher.key"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o077, 0, "the private key is readable by others");
    }
    // A second keygen does not overwrite the key.
    failed(&run(host_in(work.path()).args(["keygen", "publisher"])));

    let reference = format!("oci://{}/tools/calc:0.1.0", registry.address);
    let out = ok(&run(host_in(work.path())
        .arg("publish")
        .arg(src.join("calc.wasm"))
        .arg(&reference)
        .args(["--key", "publisher.key"])));
    assert!(out.contains(&format!("signed by {fingerprint}")), "{out}");

    let out = ok(&run(host_in(work.path())
        .args(["--plugins", "plugins", "install", &reference])
        .args(["--require-signature", "--key", "publisher.pub"])));
    assert!(out.contains(&format!("signed by {fingerprint}")), "{out}");
    assert!(work.path().join("plugins/calc.wasm").is_file());
    assert!(work.path().join("plugins/calc.toml").is_file());
    // Its skills came with it, under the signature, byte for byte.
    assert!(out.contains("with its skills in"), "{out}");
    let skill = "calc.skills/arithmetic/SKILL.md";
    assert_eq!(
        std::fs::read(work.path().join("plugins").join(skill)).unwrap(),
        std::fs::read(src.join(skill)).unwrap()
    );

    let lock = std::fs::read_to_string(work.path().join("toolhost.lock")).unwrap();
    let lock: toml::Table = toml::from_str(&lock).unwrap();
    let entry = &lock["plugins"]["calc"];
    let digest = toolhost_oci::sha256_digest(&std::fs::read(src.join("calc.wasm")).unwrap());
    assert_eq!(entry["digest"].as_str(), Some(digest.as_str()));
    assert_eq!(entry["version"].as_str(), Some("0.1.0"));
    assert_eq!(entry["signer"].as_str(), Some(fingerprint.as_str()));
    let source = entry["source"].as_str().unwrap();
    assert!(
        source.starts_with(&format!("oci://{}/tools/calc@sha256:", registry.address)),
        "{source}"
    );

    let out = ok(&run(host_in(work.path()).args([
        "--plugins",
        "plugins",
        "call",
        "calculate",
        r#"{"expression":"2*(3+4)"}"#,
    ])));
    assert_eq!(out, "14\n");
}

#[test]
fn require_signed_in_the_config_refuses_unsigned_and_foreign_signed_plugins() {
    let registry = Registry::start();
    let work = tempfile::tempdir().unwrap();
    let src = work.path().join("src");
    copy_plugin(&plugins_dir(), "calc", &src);
    ok(&run(host_in(work.path()).args(["keygen", "trusted"])));
    ok(&run(host_in(work.path()).args(["keygen", "stranger"])));
    std::fs::write(
        work.path().join("host.toml"),
        "trusted-keys = [\"trusted.pub\"]\nrequire-signed = true\n",
    )
    .unwrap();

    let unsigned = format!("oci://{}/calc:unsigned", registry.address);
    ok(&run(host_in(work.path())
        .arg("publish")
        .arg(src.join("calc.wasm"))
        .arg(&unsigned)));
    let foreign = format!("oci://{}/calc:foreign", registry.address);
    ok(&run(host_in(work.path())
        .arg("publish")
        .arg(src.join("calc.wasm"))
        .arg(&foreign)
        .args(["--key", "stranger.key"])));

    for r in [&unsigned, &foreign] {
        let err = failed(&run(host_in(work.path()).args([
            "--config",
            "host.toml",
            "--plugins",
            "plugins",
            "install",
            r,
        ])));
        assert!(err.contains("is not signed by a trusted key"), "{r}: {err}");
    }
    // Nothing was installed or recorded.
    let installed = std::fs::read_dir(work.path().join("plugins")).map_or(0, Iterator::count);
    assert_eq!(installed, 0);
    assert!(!work.path().join("toolhost.lock").exists());
}

#[test]
fn a_local_file_installs_and_a_missing_plugins_directory_is_explained() {
    let work = tempfile::tempdir().unwrap();
    let src = work.path().join("src");
    copy_plugin(&plugins_dir(), "calc", &src);
    let err = failed(&run(host_in(work.path())
        .arg("install")
        .arg(src.join("calc.wasm"))));
    assert!(err.contains("--plugins DIR"), "{err}");

    let out = ok(&run(host_in(work.path())
        .args(["--plugins", "plugins", "install"])
        .arg(format!("file://{}", src.join("calc.wasm").display()))));
    assert!(out.contains("not verified by a signature"), "{out}");
    let lock = std::fs::read_to_string(work.path().join("toolhost.lock")).unwrap();
    assert!(lock.contains("source = \"file://"), "{lock}");
    assert!(!lock.contains("signer"), "{lock}");
}

#[test]
fn install_takes_the_name_from_the_reference_and_never_replaces_other_code_unasked() {
    let registry = Registry::start();
    let work = tempfile::tempdir().unwrap();
    let src = work.path().join("src");
    copy_plugin(&plugins_dir(), "calc", &src);
    let installed = work.path().join("plugins/calc.wasm");
    let lock = work.path().join("toolhost.lock");
    let install = |args: &[&str]| {
        run(host_in(work.path())
            .args(["--plugins", "plugins", "install"])
            .args(args))
    };

    // `weather.wasm` whose manifest says `calc`, as a file and from a
    // repository named `weather`: refused, nothing installed or recorded.
    let impostor = work.path().join("other");
    std::fs::create_dir_all(&impostor).unwrap();
    std::fs::copy(
        plugins_dir().join("text.wasm"),
        impostor.join("weather.wasm"),
    )
    .unwrap();
    std::fs::write(
        impostor.join("weather.toml"),
        "name = \"calc\"\nversion = \"99.0.0\"\n",
    )
    .unwrap();
    let err = failed(&install(&[impostor.join("weather.wasm").to_str().unwrap()]));
    assert!(
        err.contains("calls itself `calc`") && err.contains("`weather`"),
        "{err}"
    );
    let pushed = format!("oci://{}/tools/weather:1", registry.address);
    ok(&run(host_in(work.path())
        .arg("publish")
        .arg(impostor.join("weather.wasm"))
        .arg(&pushed)));
    let err = failed(&install(&[&pushed]));
    assert!(err.contains("calls itself `calc`"), "{err}");
    assert!(!installed.exists() && !lock.exists());

    // The real calc installs; installing the same code again is quiet.
    let calc = src.join("calc.wasm");
    ok(&install(&[calc.to_str().unwrap()]));
    let first_lock = std::fs::read_to_string(&lock).unwrap();
    let out = ok(&install(&[calc.to_str().unwrap()]));
    assert!(!out.contains("REPLACED"), "{out}");

    // Other code for the same name (even named for it, even with --name):
    // refused, showing the old and the new; nothing changes.
    let other = work.path().join("newer");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::copy(plugins_dir().join("text.wasm"), other.join("calc.wasm")).unwrap();
    std::fs::write(
        other.join("calc.toml"),
        "name = \"calc\"\nversion = \"2.0.0\"\n",
    )
    .unwrap();
    let before = std::fs::read(&installed).unwrap();
    for args in [
        vec![other.join("calc.wasm").to_str().unwrap().to_owned()],
        vec![
            impostor.join("weather.wasm").to_str().unwrap().to_owned(),
            "--name".into(),
            "calc".into(),
        ],
    ] {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let err = failed(&install(&args));
        assert!(
            err.contains("--replace")
                && err.contains("now: sha256:")
                && err.contains("new: sha256:"),
            "{err}"
        );
        assert!(err.contains("version") && err.contains("source"), "{err}");
        assert_eq!(
            std::fs::read(&installed).unwrap(),
            before,
            "the installed file changed"
        );
        assert_eq!(
            std::fs::read_to_string(&lock).unwrap(),
            first_lock,
            "the lock changed"
        );
    }

    // With --replace it goes in, and says that the grants move.
    let out = ok(&install(&[
        other.join("calc.wasm").to_str().unwrap(),
        "--replace",
    ]));
    assert!(out.contains("REPLACED"), "{out}");
    assert_ne!(std::fs::read(&installed).unwrap(), before);
    assert!(
        std::fs::read_to_string(&lock)
            .unwrap()
            .contains("version = \"2.0.0\"")
    );
}

/// An install says what it fetches before the wait, on stderr (issue 47: a
/// pull from a far registry was silent); stdout keeps only the result.
#[test]
fn install_says_what_it_fetches_before_it_waits() {
    let work = tempfile::tempdir().unwrap();
    let src = work.path().join("src");
    copy_plugin(&plugins_dir(), "calc", &src);
    let reference = format!("file://{}", src.join("calc.wasm").display());
    let o = run(host_in(work.path())
        .args(["--plugins", "plugins", "install"])
        .arg(&reference));
    let out = ok(&o);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!("fetching {reference} and verifying it")),
        "{err}"
    );
    assert!(!out.contains("fetching"), "{out}");
}
