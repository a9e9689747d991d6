//! TLS to a real PostgreSQL (Debian's) that takes TLS connections only
//! (`hostssl`; a plain one is rejected), its certificate signed by a CA
//! the test makes: what each `sslmode` accepts and refuses, and that a
//! refusal says why, typed.

use std::sync::Arc;
use std::time::Duration;

use toolhost_policy::approvals::{Approvals, ApprovalsError};
use toolhost_state::tls::CertificateRefused;
use toolhost_state::{DatabaseError, Lost, PostgresApprovals};
use toolhost_test_support::postgres::{Postgres, TestCa};

/// How long the first attempt may take (a cold machine under load).
const FIRST_ATTEMPT: Duration = Duration::from_secs(30);

struct Scene {
    db: Postgres,
    dir: tempfile::TempDir,
    right: String,
    wrong: String,
    ca: TestCa,
}

fn scene() -> Scene {
    let ca = TestCa::new("toolhost test CA");
    let db = Postgres::start_tls(&ca, &["127.0.0.1", "localhost", "db.test"]);
    let dir = tempfile::tempdir().unwrap();
    let right = ca.write(&dir.path().join("ca.pem")).display().to_string();
    let wrong = TestCa::new("another CA")
        .write(&dir.path().join("other-ca.pem"))
        .display()
        .to_string();
    Scene {
        db,
        dir,
        right,
        wrong,
        ca,
    }
}

impl Scene {
    /// `key=value` pairs to the server at `host` (reached at 127.0.0.1
    /// whatever its name), with `more`.
    fn at(&self, host: &str, more: &str) -> String {
        format!(
            "host={host} hostaddr=127.0.0.1 port={} user=postgres dbname=postgres {more}",
            self.db.port()
        )
    }

    /// How the first attempt to `url` ended.
    fn attempt(&self, url: &str) -> Result<PostgresApprovals, DatabaseError> {
        let store = PostgresApprovals::connect(url, "main")?;
        store.wait_connected(FIRST_ATTEMPT)?;
        Ok(store)
    }
}

fn refused(result: Result<PostgresApprovals, DatabaseError>) -> CertificateRefused {
    match result {
        Err(DatabaseError::Unreachable(Lost::Certificate(why))) => why,
        Err(other) => panic!("refused, but not for the certificate: {other}"),
        Ok(_) => panic!("connected"),
    }
}

#[test]
fn the_right_ca_connects_and_a_wrong_ca_or_host_name_is_refused_and_said_so() {
    let s = scene();
    // verify-full with the CA that signed the server's certificate, by
    // URL and by the IP address it names: connected, and it works.
    let url = format!("{}?sslmode=verify-full&sslrootcert={}", s.db.url(), s.right);
    let store = s
        .attempt(&url)
        .unwrap_or_else(|e| panic!("{e}: {}", s.db.log()));
    let approvals = Approvals::with_store(Arc::new(store));
    assert!(approvals.list().unwrap().is_empty());
    assert!(approvals.clear().is_ok());
    // Another CA: refused, and said so.
    let other = refused(s.attempt(&s.at(
        "db.test",
        &format!("sslmode=verify-full sslrootcert={}", s.wrong),
    )));
    assert_eq!(
        other,
        CertificateRefused::UnknownIssuer {
            roots: format!("the CAs in {}", s.wrong)
        }
    );
    // The right CA, a host name the certificate does not name: refused.
    let name = refused(s.attempt(&s.at(
        "db.wrong.test",
        &format!("sslmode=verify-full sslrootcert={}", s.right),
    )));
    assert_eq!(
        name,
        CertificateRefused::WrongName {
            host: "db.wrong.test".into()
        }
    );
    // What a lookup's caller reads.
    let store = PostgresApprovals::connect(
        &s.at(
            "db.wrong.test",
            &format!("sslmode=verify-full sslrootcert={}", s.right),
        ),
        "main",
    )
    .unwrap();
    let _ = store.wait_connected(FIRST_ATTEMPT);
    match Approvals::with_store(Arc::new(store)).list() {
        Err(ApprovalsError::Unavailable { message, .. }) => assert!(
            message.contains("is not valid for the host name `db.wrong.test`"),
            "{message}"
        ),
        other => panic!("{other:?}"),
    }
}

#[test]
fn each_sslmode_checks_what_libpq_documents_and_no_more() {
    let s = scene();
    // With no sslmode, a host that is not loopback is verify-full: the
    // right CA and name connect, the machine's CAs (which never signed
    // it) do not.
    s.attempt(&s.at("db.test", &format!("sslrootcert={}", s.right)))
        .unwrap();
    assert!(matches!(
        refused(s.attempt(&s.at("db.test", ""))),
        CertificateRefused::UnknownIssuer { roots } if roots == "the system's CAs"
    ));
    assert!(matches!(
        refused(s.attempt(&s.at("db.wrong.test", &format!("sslrootcert={}", s.right)))),
        CertificateRefused::WrongName { .. }
    ));
    // verify-ca: the CA is checked, the name is not.
    s.attempt(&s.at(
        "db.wrong.test",
        &format!("sslmode=verify-ca sslrootcert={}", s.right),
    ))
    .unwrap();
    assert!(matches!(
        refused(s.attempt(&s.at(
            "db.test",
            &format!("sslmode=verify-ca sslrootcert={}", s.wrong)
        ))),
        CertificateRefused::UnknownIssuer { .. }
    ));
    // require: TLS, any certificate; with a root file, its CA is checked
    // (as libpq does).
    s.attempt(&s.at("db.wrong.test", "sslmode=require"))
        .unwrap();
    assert!(matches!(
        refused(s.attempt(&s.at(
            "db.test",
            &format!("sslmode=require sslrootcert={}", s.wrong)
        ))),
        CertificateRefused::UnknownIssuer { .. }
    ));
    // The server rejects plain text: what connected above was TLS, and
    // disable is plain text.
    match s.attempt(&s.at("db.test", "sslmode=disable")) {
        Err(DatabaseError::Unreachable(Lost::Failed(why))) => {
            assert!(why.contains("no encryption"), "{why}");
        }
        Err(other) => panic!("{other}"),
        Ok(_) => panic!("a plain connection was taken"),
    }
}

#[test]
fn a_client_certificate_signs_in_where_the_server_asks_for_one() {
    let s = scene();
    let (cert, key) = s.ca.client("postgres");
    let (cert_path, key_path) = (
        s.dir.path().join("client.crt"),
        s.dir.path().join("client.key"),
    );
    std::fs::write(&cert_path, cert).unwrap();
    std::fs::write(&key_path, key).unwrap();
    // `template1` asks for a client certificate of the server's CA.
    let url = |more: &str| {
        format!(
            "host=db.test hostaddr=127.0.0.1 port={} user=postgres dbname=template1 sslrootcert={} {more}",
            s.db.port(),
            s.right
        )
    };
    s.attempt(&url(&format!(
        "sslcert={} sslkey={}",
        cert_path.display(),
        key_path.display()
    )))
    .unwrap_or_else(|e| panic!("{e}: {}", s.db.log()));
    match s.attempt(&url("")) {
        Err(DatabaseError::Unreachable(Lost::Failed(why))) => {
            assert!(why.contains("certificate"), "{why}");
        }
        Err(other) => panic!("{other}"),
        Ok(_) => panic!("connected without the client certificate"),
    }
}
