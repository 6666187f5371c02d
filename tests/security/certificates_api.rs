//! The Certificates API end to end: a bootstrap token's kubelet client request is
//! auto-approved and signed by the client CA, and the certificate authenticates as the node;
//! `kubectl certificate approve|deny` on user requests; the signers refuse what their rules
//! forbid.

use std::time::Duration;

use crate::common;
use crate::common::kubectl::Kubectl;
use crate::common::users;
use base64::Engine;

const KUBELET_USAGES: &str = "[digital signature, key encipherment, client auth]";

fn csr_yaml(name: &str, request_pem: &str, signer: &str, usages: &str, extra: &str) -> String {
    let request = base64::engine::general_purpose::STANDARD.encode(request_pem);
    format!(
        "apiVersion: certificates.k8s.io/v1
kind: CertificateSigningRequest
metadata:
  name: {name}
spec:
  request: {request}
  signerName: {signer}
  usages: {usages}
{extra}"
    )
}

fn jsonpath(k: &Kubectl, name: &str, path: &str) -> String {
    k.ok(&["get", "csr", name, "-o", &format!("jsonpath={path}")])
}

/// Waits for `status.certificate` of CSR `name` and returns it as PEM.
fn wait_certificate(k: &Kubectl, name: &str) -> String {
    let b64 = common::wait_for(
        &format!("csr {name} to be signed"),
        Duration::from_secs(60),
        || Some(jsonpath(k, name, "{.status.certificate}")).filter(|c| !c.is_empty()),
    );
    String::from_utf8(
        base64::engine::general_purpose::STANDARD
            .decode(b64.trim())
            .unwrap(),
    )
    .unwrap()
}

/// The subject and validity of a PEM certificate, through openssl.
fn openssl_x509(pem: &str, args: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.pem");
    std::fs::write(&path, pem).unwrap();
    let out = std::process::Command::new("openssl")
        .args(["x509", "-noout", "-in"])
        .arg(&path)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn bootstrap_token_csr_is_auto_approved_and_the_certificate_is_the_node() {
    let (server, admin) = Kubectl::start_server(&[]);
    let agent = std::fs::read_to_string(server.data_dir().join("server/agent-token")).unwrap();
    let bearer = agent.trim().split_once("::").unwrap().1;
    let bootstrapper = Kubectl {
        bin: admin.bin.clone(),
        kubeconfig: users::token_kubeconfig(&server, "bootstrapper", bearer),
    };
    let (request, key) =
        users::certificate_request(&server, "n1", "/O=system:nodes/CN=system:node:n1");
    let yaml = csr_yaml(
        "node-csr-n1",
        &request,
        "kubernetes.io/kube-apiserver-client-kubelet",
        KUBELET_USAGES,
        "  expirationSeconds: 7200\n",
    );
    bootstrapper.ok_stdin(&["create", "-f", "-"], Some(&yaml));
    let pem = wait_certificate(&admin, "node-csr-n1");
    assert_eq!(
        jsonpath(
            &admin,
            "node-csr-n1",
            "{.status.conditions[0].type} {.status.conditions[0].reason} {.status.conditions[0].message}"
        ),
        "Approved AutoApproved Auto approving kubelet client certificate after SubjectAccessReview."
    );
    let subject = openssl_x509(&pem, &["-subject"]);
    assert!(
        subject.contains("O = system:nodes") && subject.contains("CN = system:node:n1"),
        "{subject}"
    );
    let issuer = openssl_x509(&pem, &["-issuer"]);
    assert!(issuer.contains("k3rs-client-ca"), "{issuer}");
    // Two hours asked for, backdated five minutes: valid for 2h05m.
    let dates = openssl_x509(&pem, &["-startdate", "-enddate"]);
    let parse = |key: &str| {
        let v = dates
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .unwrap()
            .to_string();
        let out = std::process::Command::new("date")
            .args(["-u", "-d", &v, "+%s"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse::<i64>()
            .unwrap()
    };
    assert_eq!(
        parse("notAfter=") - parse("notBefore="),
        7200 + 300,
        "{dates}"
    );

    // The signed certificate authenticates as system:node:n1 (its own renewal request records
    // it, and is auto-approved as a self renewal).
    let cert_path = server.data_dir().join("test-users/n1.crt");
    std::fs::write(&cert_path, &pem).unwrap();
    let node = Kubectl {
        bin: admin.bin.clone(),
        kubeconfig: users::cert_files_kubeconfig(&server, "node-n1", &cert_path, &key),
    };
    let (renewal, _) =
        users::certificate_request(&server, "n1-renew", "/O=system:nodes/CN=system:node:n1");
    node.ok_stdin(
        &["create", "-f", "-"],
        Some(&csr_yaml(
            "node-csr-n1-renew",
            &renewal,
            "kubernetes.io/kube-apiserver-client-kubelet",
            KUBELET_USAGES,
            "",
        )),
    );
    assert_eq!(
        jsonpath(
            &admin,
            "node-csr-n1-renew",
            "{.spec.username} {.spec.groups}"
        ),
        "system:node:n1 [\"system:nodes\",\"system:authenticated\"]"
    );
    wait_certificate(&admin, "node-csr-n1-renew");
    assert_eq!(
        jsonpath(
            &admin,
            "node-csr-n1-renew",
            "{.status.conditions[0].message}"
        ),
        "Auto approving self kubelet client certificate after SubjectAccessReview."
    );
}

#[test]
fn kubectl_certificate_approve_and_deny() {
    let (server, admin) = Kubectl::start_server(&[]);
    let (alice_req, alice_key) = users::certificate_request(&server, "alice", "/O=dev/CN=alice");
    let client = "kubernetes.io/kube-apiserver-client";
    admin.ok_stdin(
        &["create", "-f", "-"],
        Some(&csr_yaml("alice", &alice_req, client, "[client auth]", "")),
    );
    let (bob_req, _) = users::certificate_request(&server, "bob", "/CN=bob");
    admin.ok_stdin(
        &["create", "-f", "-"],
        Some(&csr_yaml("bob", &bob_req, client, "[client auth]", "")),
    );
    // A user request is not auto-approved: nothing happens until someone decides.
    assert_eq!(jsonpath(&admin, "alice", "{.status}"), "");

    admin.ok(&["certificate", "approve", "alice"]);
    admin.ok(&["certificate", "deny", "bob"]);
    let pem = wait_certificate(&admin, "alice");
    let subject = openssl_x509(&pem, &["-subject"]);
    assert!(subject.contains("CN = alice"), "{subject}");
    // One year by default.
    let cert_path = server.data_dir().join("test-users/alice.crt");
    std::fs::write(&cert_path, &pem).unwrap();
    let alice = Kubectl {
        bin: admin.bin.clone(),
        kubeconfig: users::cert_files_kubeconfig(&server, "alice-signed", &cert_path, &alice_key),
    };
    assert!(
        alice.run(&["get", "--raw", "/api"]).ok,
        "alice's certificate authenticates"
    );

    let table = admin.ok(&["get", "csr"]);
    let row = |name: &str| {
        common::kubectl::table(&table)
            .into_iter()
            .find(|r| r.first().map(String::as_str) == Some(name))
            .unwrap_or_else(|| panic!("{name} in\n{table}"))
    };
    assert_eq!(row("alice").last().unwrap(), "Approved,Issued");
    assert_eq!(row("bob").last().unwrap(), "Denied");
    // Denied is final: never signed.
    assert_eq!(jsonpath(&admin, "bob", "{.status.certificate}"), "");
}

#[test]
fn signers_fail_what_their_rules_forbid() {
    let (server, admin) = Kubectl::start_server(&[]);
    // A kubelet client request whose subject is no node's.
    let (req, _) = users::certificate_request(&server, "mallory", "/O=system:masters/CN=mallory");
    admin.ok_stdin(
        &["create", "-f", "-"],
        Some(&csr_yaml(
            "mallory",
            &req,
            "kubernetes.io/kube-apiserver-client-kubelet",
            KUBELET_USAGES,
            "",
        )),
    );
    admin.ok(&["certificate", "approve", "mallory"]);
    let failed = common::wait_for("the Failed condition", Duration::from_secs(60), || {
        let c = jsonpath(
            &admin,
            "mallory",
            "{.status.conditions[?(@.type==\"Failed\")].reason}: {.status.conditions[?(@.type==\"Failed\")].message}",
        );
        (!c.starts_with(':')).then_some(c)
    });
    assert_eq!(
        failed,
        "SignerValidationFailure: subject organization is not system:nodes"
    );
    assert_eq!(jsonpath(&admin, "mallory", "{.status.certificate}"), "");
}
