//! The authenticators kube-apiserver offers besides certificates and service-account
//! tokens, each configured through `--kube-apiserver-arg` with upstream's flag and file
//! format, exercised with real kubectl: the right user and groups are admitted, wrong
//! credentials get 401.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::common;
use crate::common::kubectl::Kubectl;
use crate::common::users;
use serde_json::Value;

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn as_token(admin: &Kubectl, server: &common::K3rs, name: &str, token: &str) -> Kubectl {
    Kubectl {
        bin: admin.bin.clone(),
        kubeconfig: users::token_kubeconfig(server, name, token),
    }
}

/// `kubectl auth whoami`: (username, uid, groups).
fn whoami(k: &Kubectl) -> (String, String, Vec<String>) {
    let out = k.ok(&["auth", "whoami", "-o", "json"]);
    let v: Value = serde_json::from_str(&out).unwrap();
    let u = &v["status"]["userInfo"];
    (
        u["username"].as_str().unwrap_or_default().to_string(),
        u["uid"].as_str().unwrap_or_default().to_string(),
        u["groups"]
            .as_array()
            .map(|g| {
                g.iter()
                    .filter_map(|g| g.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default(),
    )
}

#[test]
fn token_auth_file_admits_its_users_and_groups() {
    let files = tempfile::tempdir().unwrap();
    let tokens = write(
        files.path(),
        "tokens.csv",
        "tok-alice-0123456789,alice,uid-1,\"dev,ops\"\ntok-bob-0123456789,bob,uid-2\n",
    );
    let (server, admin) = Kubectl::start_server(&[&format!(
        "--kube-apiserver-arg=token-auth-file={}",
        tokens.display()
    )]);
    let alice = as_token(&admin, &server, "alice", "tok-alice-0123456789");
    let bob = as_token(&admin, &server, "bob", "tok-bob-0123456789");
    assert_eq!(
        whoami(&alice),
        (
            "alice".to_string(),
            "uid-1".to_string(),
            vec!["dev".into(), "ops".into(), "system:authenticated".into()]
        )
    );
    assert_eq!(
        whoami(&bob),
        (
            "bob".to_string(),
            "uid-2".to_string(),
            vec!["system:authenticated".into()]
        )
    );
    // The groups reach RBAC.
    admin.ok(&[
        "create",
        "clusterrolebinding",
        "dev-view",
        "--clusterrole=view",
        "--group=dev",
    ]);
    common::wait_for("the binding to apply", Duration::from_secs(20), || {
        (alice.ok(&["auth", "can-i", "list", "pods"]).trim() == "yes").then_some(())
    });
    assert_eq!(
        bob.run(&["auth", "can-i", "list", "pods"]).stdout.trim(),
        "no"
    );
    alice.ok(&["get", "pods"]);
    // A token not in the file (or a changed one) is 401.
    for wrong in ["tok-alice-012345678", "tok-carol-0123456789"] {
        let k = as_token(&admin, &server, "wrong", wrong);
        k.fails_with(&["get", "pods"], None, "Unauthorized");
    }
}

#[test]
fn a_token_file_with_too_few_columns_stops_the_server() {
    let files = tempfile::tempdir().unwrap();
    let tokens = write(files.path(), "tokens.csv", "tok,alice\n");
    let (status, log, _dir) = common::K3rs::run_to_exit(
        &[&format!(
            "--kube-apiserver-arg=token-auth-file={}",
            tokens.display()
        )],
        Duration::from_secs(60),
    );
    assert!(status.is_some_and(|s| !s.success()), "{log}");
    assert!(
        log.contains("must have at least 3 columns (token, user name, user uid), found 2"),
        "{log}"
    );
}

fn openssl(args: &[&str]) {
    let out = std::process::Command::new("openssl")
        .args(args)
        .output()
        .expect("running openssl");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A self-signed CA in `dir`: `(cert, key)`.
fn make_ca(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    let (cert, key) = (
        dir.join(format!("{name}.crt")),
        dir.join(format!("{name}.key")),
    );
    openssl(&[
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-days",
        "2",
        "-subj",
        &format!("/CN={name}"),
        "-keyout",
        key.to_str().unwrap(),
        "-out",
        cert.to_str().unwrap(),
    ]);
    (cert, key)
}

/// A client certificate for `cn` signed by `ca`: `(cert, key)`.
fn make_client_cert(dir: &Path, ca: &(PathBuf, PathBuf), cn: &str) -> (PathBuf, PathBuf) {
    let (cert, key, csr, ext) = (
        dir.join(format!("{cn}.crt")),
        dir.join(format!("{cn}.key")),
        dir.join(format!("{cn}.csr")),
        dir.join(format!("{cn}.ext")),
    );
    std::fs::write(
        &ext,
        "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth\n",
    )
    .unwrap();
    openssl(&[
        "req",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-subj",
        &format!("/CN={cn}"),
        "-keyout",
        key.to_str().unwrap(),
        "-out",
        csr.to_str().unwrap(),
    ]);
    openssl(&[
        "x509",
        "-req",
        "-extfile",
        ext.to_str().unwrap(),
        "-in",
        csr.to_str().unwrap(),
        "-CA",
        ca.0.to_str().unwrap(),
        "-CAkey",
        ca.1.to_str().unwrap(),
        "-CAcreateserial",
        "-days",
        "2",
        "-out",
        cert.to_str().unwrap(),
    ]);
    (cert, key)
}

/// The API's URL, from the admin kubeconfig.
fn api_url(server: &common::K3rs) -> String {
    let admin = std::fs::read_to_string(server.kubeconfig()).unwrap();
    admin
        .lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix("server:")
                .map(|v| v.trim().to_string())
        })
        .expect("server: in the admin kubeconfig")
}

/// POSTs a SelfSubjectReview with curl, presenting `cert` and `headers`: `(code, body)`.
fn self_subject_review(
    server: &common::K3rs,
    cert: Option<&(PathBuf, PathBuf)>,
    headers: &[&str],
) -> (u16, Value) {
    let mut cmd = std::process::Command::new("curl");
    cmd.args([
        "-sS",
        "--http1.1",
        "--max-time",
        "20",
        "-w",
        "\n%{http_code}",
        "--cacert",
    ])
    .arg(server.data_dir().join("server/tls/server-ca.crt"));
    if let Some((c, k)) = cert {
        cmd.arg("--cert").arg(c).arg("--key").arg(k);
    }
    for h in headers {
        cmd.args(["-H", h]);
    }
    let out = cmd
        .args(["-H", "Content-Type: application/json", "-X", "POST", "-d"])
        .arg(r#"{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}"#)
        .arg(format!(
            "{}/apis/authentication.k8s.io/v1/selfsubjectreviews",
            api_url(server)
        ))
        .output()
        .expect("running curl");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", &text));
    (
        code.trim().parse().unwrap_or(0),
        serde_json::from_str(body).unwrap_or_else(|_| {
            Value::String(format!("{body} {}", String::from_utf8_lossy(&out.stderr)))
        }),
    )
}

#[test]
fn an_authenticating_proxy_with_the_request_header_ca_asserts_users() {
    let files = tempfile::tempdir().unwrap();
    let ca = make_ca(files.path(), "front-proxy-ca");
    let proxy = make_client_cert(files.path(), &ca, "front-proxy");
    let intruder = make_client_cert(files.path(), &ca, "intruder");
    let other = files.path().join("other");
    std::fs::create_dir(&other).unwrap();
    let other_ca = make_ca(&other, "other-ca");
    let forged = make_client_cert(&other, &other_ca, "front-proxy");
    let (server, admin) = Kubectl::start_server(&[
        &format!(
            "--kube-apiserver-arg=requestheader-client-ca-file={}",
            ca.0.display()
        ),
        "--kube-apiserver-arg=requestheader-allowed-names=front-proxy",
        "--kube-apiserver-arg=requestheader-uid-headers=X-Remote-Uid",
    ]);
    let asserted = [
        "X-Remote-User: alice",
        "X-Remote-Group: dev",
        "X-Remote-Group: ops",
        "X-Remote-Extra-Scopes: read",
        "X-Remote-Extra-Acme.com%2Fproject: p1",
        "X-Remote-Uid: u-42",
    ];
    let (code, body) = self_subject_review(&server, Some(&proxy), &asserted);
    assert_eq!(code, 201, "{body}");
    assert_eq!(
        body["status"]["userInfo"],
        serde_json::json!({
            "username": "alice",
            "uid": "u-42",
            "groups": ["dev", "ops", "system:authenticated"],
            "extra": {"scopes": ["read"], "acme.com/project": ["p1"]}
        })
    );
    // The CA's certificate without an allowed name, no certificate, and the proxy without
    // a username header: 401.
    for (what, cert, headers) in [
        ("CN not allowed", Some(&intruder), &asserted[..]),
        ("no certificate", None, &asserted[..]),
        ("no username header", Some(&proxy), &asserted[1..]),
    ] {
        let (code, body) = self_subject_review(&server, cert, headers);
        assert_eq!(code, 401, "{what}: {body}");
    }
    // A certificate of an unknown CA with the allowed name: the handshake refuses it.
    let (code, body) = self_subject_review(&server, Some(&forged), &asserted);
    assert_eq!(code, 0, "{body}");
    // A client-CA certificate still authenticates as itself; its headers mean nothing.
    let (cert, key) = users::client_cert(&server, "bob", &["team"]);
    let (code, body) = self_subject_review(&server, Some(&(cert, key)), &asserted);
    assert_eq!(code, 201, "{body}");
    assert_eq!(body["status"]["userInfo"]["username"], "bob");
    // kubectl with the admin kubeconfig is unaffected.
    admin.ok(&["get", "pods"]);
}
