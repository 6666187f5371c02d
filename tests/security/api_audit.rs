//! `--kube-apiserver-arg audit-policy-file=… audit-log-path=…`: kubectl's requests appear in
//! the audit log as `audit.k8s.io/v1` Event lines at the levels and stages the policy says;
//! `audit-log-maxsize/-maxbackup` rotate the file; a broken policy stops the server.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::common;
use crate::common::audit_log::{events, s, wait_event};
use crate::common::kubectl::Kubectl;
use crate::common::users;
use serde_json::Value;

const POLICY: &str = r#"apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: None
  users: ["system:apiserver", "system:kube-scheduler", "system:kube-controller-manager", "system:k3rs-deploy"]
- level: None
  userGroups: ["system:serviceaccounts", "system:nodes"]
- level: RequestResponse
  resources:
  - group: ""
    resources: ["configmaps"]
- level: Request
  verbs: ["create"]
  namespaces: ["default"]
- level: None
  nonResourceURLs: ["/openapi*"]
- level: Metadata
"#;

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn kubectl_requests_are_logged_at_the_policy_levels() {
    let files = tempfile::tempdir().unwrap();
    let policy = write(files.path(), "policy.yaml", POLICY);
    let log = files.path().join("logs/audit.log");
    let (server, admin) = Kubectl::start_server(&[
        &format!(
            "--kube-apiserver-arg=audit-policy-file={}",
            policy.display()
        ),
        &format!("--kube-apiserver-arg=audit-log-path={}", log.display()),
    ]);

    // RequestResponse for configmaps: request and response bodies.
    admin.ok(&["create", "configmap", "audited", "--from-literal=k=v"]);
    let e = wait_event(&log, "create configmap", |e| {
        s(e, "/verb") == "create" && s(e, "/objectRef/resource") == "configmaps"
    });
    assert_eq!(s(&e, "/kind"), "Event");
    assert_eq!(s(&e, "/apiVersion"), "audit.k8s.io/v1");
    assert_eq!(s(&e, "/level"), "RequestResponse");
    assert_eq!(s(&e, "/stage"), "ResponseComplete");
    assert_eq!(s(&e, "/user/username"), "system:admin");
    assert!(
        e["user"]["groups"]
            .as_array()
            .unwrap()
            .contains(&Value::from("system:masters")),
        "{e}"
    );
    assert_eq!(s(&e, "/objectRef/namespace"), "default");
    assert_eq!(s(&e, "/objectRef/name"), "audited");
    assert_eq!(s(&e, "/objectRef/apiVersion"), "v1");
    assert_eq!(e["responseStatus"]["code"], 201);
    assert_eq!(s(&e, "/requestObject/data/k"), "v");
    assert_eq!(s(&e, "/responseObject/kind"), "ConfigMap");
    assert!(s(&e, "/requestURI").starts_with("/api/v1/namespaces/default/configmaps"));
    assert!(s(&e, "/userAgent").starts_with("kubectl"), "{e}");
    assert_eq!(e["sourceIPs"], serde_json::json!(["127.0.0.1"]));
    assert_eq!(
        s(&e, "/annotations/authorization.k8s.io~1decision"),
        "allow"
    );
    assert!(!s(&e, "/auditID").is_empty());
    assert!(s(&e, "/requestReceivedTimestamp").ends_with('Z'));
    assert!(s(&e, "/stageTimestamp") >= s(&e, "/requestReceivedTimestamp"));

    // Request for creates in default: the request body, no response body.
    admin.ok(&["create", "serviceaccount", "audited-sa"]);
    let e = wait_event(&log, "create serviceaccount", |e| {
        s(e, "/verb") == "create" && s(e, "/objectRef/resource") == "serviceaccounts"
    });
    assert_eq!(s(&e, "/level"), "Request");
    assert_eq!(s(&e, "/requestObject/metadata/name"), "audited-sa");
    assert!(e.get("responseObject").is_none(), "{e}");

    // Metadata for the rest: no bodies; failures carry their Status.
    admin.ok(&["get", "pods"]);
    let e = wait_event(&log, "list pods", |e| {
        s(e, "/verb") == "list" && s(e, "/objectRef/resource") == "pods"
    });
    assert_eq!(s(&e, "/level"), "Metadata");
    assert!(e.get("requestObject").is_none() && e.get("responseObject").is_none());
    assert_eq!(
        e["responseStatus"],
        serde_json::json!({"metadata": {}, "code": 200})
    );
    admin.fails_with(&["get", "secret", "nope"], None, "NotFound");
    let e = wait_event(&log, "get a missing secret", |e| {
        s(e, "/verb") == "get" && s(e, "/objectRef/name") == "nope"
    });
    assert_eq!(e["responseStatus"]["code"], 404);
    assert_eq!(s(&e, "/responseStatus/reason"), "NotFound");

    // A forbidden request, and the identity of a client certificate.
    let nobody = Kubectl {
        bin: admin.bin.clone(),
        kubeconfig: users::cert_kubeconfig(&server, "nobody", &["team"]),
    };
    nobody.fails_with(&["get", "secrets", "-n", "kube-system"], None, "Forbidden");
    let e = wait_event(&log, "nobody's forbidden list", |e| {
        s(e, "/user/username") == "nobody" && s(e, "/objectRef/resource") == "secrets"
    });
    assert_eq!(e["responseStatus"]["code"], 403);
    assert_eq!(s(&e, "/objectRef/namespace"), "kube-system");
    assert_eq!(
        s(&e, "/annotations/authorization.k8s.io~1decision"),
        "forbid"
    );
    assert_eq!(
        e["user"]["groups"],
        serde_json::json!(["team", "system:authenticated"])
    );

    // Impersonation: the authenticated user and the one acted as.
    admin.fails_with(
        &["get", "configmaps", "--as", "jane", "--as-group", "devs"],
        None,
        "Forbidden",
    );
    let e = wait_event(&log, "impersonated list", |e| {
        s(e, "/impersonatedUser/username") == "jane"
    });
    assert_eq!(s(&e, "/user/username"), "system:admin");
    assert_eq!(e["responseStatus"]["code"], 403);

    // A watch: ResponseStarted, then ResponseComplete when it ends; same audit ID.
    admin.ok(&[
        "get",
        "--raw",
        "/api/v1/namespaces/default/pods?watch=true&timeoutSeconds=1",
    ]);
    let started = wait_event(&log, "watch started", |e| {
        s(e, "/verb") == "watch" && s(e, "/stage") == "ResponseStarted"
    });
    let done = wait_event(&log, "watch complete", |e| {
        s(e, "/verb") == "watch" && s(e, "/stage") == "ResponseComplete"
    });
    assert_eq!(s(&started, "/auditID"), s(&done, "/auditID"));
    assert_eq!(started["responseStatus"]["code"], 200);

    // Bad credentials: a 401 at ResponseStarted, without a user name.
    let bad = Kubectl {
        bin: admin.bin.clone(),
        kubeconfig: users::token_kubeconfig(&server, "bad", "not-a-token"),
    };
    bad.fails_with(&["get", "nodes"], None, "Unauthorized");
    let e = wait_event(&log, "401", |e| e["responseStatus"]["code"] == 401);
    assert_eq!(s(&e, "/stage"), "ResponseStarted");
    assert_eq!(s(&e, "/user/username"), "");

    // Omitted stage and users, and the in-process components: never in the log.
    for e in events(&log) {
        assert_ne!(s(&e, "/stage"), "RequestReceived", "{e}");
        assert!(
            !s(&e, "/user/username").starts_with("system:serviceaccount:")
                && s(&e, "/user/username") != "system:apiserver",
            "{e}"
        );
        assert!(!s(&e, "/requestURI").starts_with("/openapi"), "{e}");
    }
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&log).unwrap().permissions().mode() & 0o777,
        0o600
    );
}

#[test]
fn the_log_rotates_at_maxsize_and_keeps_maxbackup_files() {
    let files = tempfile::tempdir().unwrap();
    let policy = write(
        files.path(),
        "policy.yaml",
        "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: RequestResponse\n  resources:\n  - group: \"\"\n    resources: [\"configmaps\"]\n",
    );
    let log = files.path().join("audit.log");
    let (_server, admin) = Kubectl::start_server(&[
        &format!(
            "--kube-apiserver-arg=audit-policy-file={}",
            policy.display()
        ),
        &format!("--kube-apiserver-arg=audit-log-path={}", log.display()),
        "--kube-apiserver-arg=audit-log-maxsize=1",
        "--kube-apiserver-arg=audit-log-maxbackup=1",
    ]);
    // Each create logs ~0.8 MB (request and response bodies): every one after the first
    // rotates the 1 MB file.
    let data = write(files.path(), "big.txt", &"x".repeat(400 * 1024));
    for i in 0..4 {
        admin.ok(&[
            "create",
            "configmap",
            &format!("big-{i}"),
            &format!("--from-file=big={}", data.display()),
        ]);
    }
    let backups = || -> Vec<String> {
        std::fs::read_dir(files.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("audit-") && n.ends_with(".log"))
            .collect()
    };
    wait_event(&log, "the last create", |e| {
        s(e, "/objectRef/name") == "big-3" && s(e, "/stage") == "ResponseComplete"
    });
    let b = backups();
    assert_eq!(b.len(), 1, "one backup kept: {b:?}");
    let backup = files.path().join(&b[0]);
    let old = events(&backup);
    assert!(
        old.iter().any(|e| s(e, "/objectRef/name") == "big-2"),
        "the newest backup holds the previous create"
    );
    assert!(std::fs::metadata(&log).unwrap().len() <= 1024 * 1024);
    assert!(
        !events(&log)
            .iter()
            .any(|e| s(e, "/objectRef/name") == "big-0"),
        "the oldest events were rotated away"
    );
}

#[test]
fn a_broken_policy_stops_the_server() {
    let files = tempfile::tempdir().unwrap();
    let policy = write(
        files.path(),
        "policy.yaml",
        "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Loud\n",
    );
    let (status, log, _dir) = common::K3rs::run_to_exit(
        &[
            "--kube-apiserver-arg=audit-log-path=-",
            &format!(
                "--kube-apiserver-arg=audit-policy-file={}",
                policy.display()
            ),
        ],
        Duration::from_secs(60),
    );
    assert!(status.is_some_and(|s| !s.success()), "{log}");
    assert!(log.contains("loading the audit policy file"), "{log}");
}
