//! kube-apiserver's webhooks, configured through `--kube-apiserver-arg` with upstream's flags
//! and kubeconfig files, against a loopback HTTPS service the test plays: the token webhook
//! (`TokenReview`) admits the users it names and its answers are cached; the `Webhook`
//! authorization mode (`SubjectAccessReview`) allows, denies (ending the chain before RBAC)
//! or has no opinion (RBAC decides), and a failing webhook is no opinion.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::common::kubectl::Kubectl;
use crate::common::tls_server::{self, Received};
use crate::common::users;
use serde_json::{json, Value};

fn webhook_kubeconfig(dir: &Path, name: &str, url: &str, ca: &Path) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(
        &p,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: hook\n  cluster:\n    server: {url}\n    certificate-authority: {}\nusers:\n- name: apiserver\n  user:\n    token: apiserver-secret\ncontexts:\n- name: webhook\n  context: {{cluster: hook, user: apiserver}}\ncurrent-context: webhook\n",
            ca.display()
        ),
    )
    .unwrap();
    p
}

/// The service: `/authenticate` knows `jane-token`; `/authorize` decides jane's requests.
fn answer(r: &Received) -> (u16, String) {
    let v: Value = serde_json::from_str(&r.body).unwrap_or_default();
    match r.path.as_str() {
        "/authenticate" => {
            let ok = v["kind"] == "TokenReview"
                && v["apiVersion"] == "authentication.k8s.io/v1"
                && v["spec"]["token"] == "jane-token";
            let status = if ok {
                json!({"authenticated": true, "user": {"username": "jane", "uid": "u-1",
                    "groups": ["dev"], "extra": {"team": ["blue"]}}})
            } else {
                json!({"authenticated": false})
            };
            (
                200,
                json!({"apiVersion": v["apiVersion"], "kind": "TokenReview", "status": status})
                    .to_string(),
            )
        }
        "/authorize" => {
            let spec = &v["spec"];
            let ra = &spec["resourceAttributes"];
            let status = if spec["user"] != "jane" {
                json!({"allowed": false})
            } else {
                match (ra["resource"].as_str(), ra["namespace"].as_str()) {
                    (Some("pods"), Some("hooked")) => {
                        json!({"allowed": true, "reason": "hooked pods"})
                    }
                    (Some("secrets"), _) => {
                        json!({"allowed": false, "denied": true, "reason": "secrets are off limits"})
                    }
                    (Some("configmaps"), _) => return (500, "{}".into()),
                    _ => json!({"allowed": false, "reason": "no opinion"}),
                }
            };
            (200, json!({"apiVersion": v["apiVersion"], "kind": "SubjectAccessReview", "status": status}).to_string())
        }
        _ => (404, "{}".into()),
    }
}

/// `kubectl auth can-i`: "yes", or "no" followed by " - <reason>" when there is one.
fn can_i(k: &Kubectl, args: &[&str]) -> String {
    let mut a = vec!["auth", "can-i"];
    a.extend(args);
    k.run(&a).stdout.trim().to_string()
}

fn is_no(answer: &str) -> bool {
    answer == "no" || answer.starts_with("no - ")
}

#[test]
fn token_webhook_and_webhook_authorizer() {
    let dir = tempfile::tempdir().unwrap();
    let hook = tls_server::start(dir.path(), Arc::new(answer));
    let authn = webhook_kubeconfig(
        dir.path(),
        "authn.yaml",
        &format!("{}/authenticate", hook.url()),
        &hook.ca,
    );
    let authz = webhook_kubeconfig(
        dir.path(),
        "authz.yaml",
        &format!("{}/authorize", hook.url()),
        &hook.ca,
    );
    let (server, admin) = Kubectl::start_server(&[
        &format!(
            "--kube-apiserver-arg=authentication-token-webhook-config-file={}",
            authn.display()
        ),
        "--kube-apiserver-arg=authorization-mode=Node,Webhook,RBAC",
        &format!(
            "--kube-apiserver-arg=authorization-webhook-config-file={}",
            authz.display()
        ),
    ]);
    let as_token = |token: &str| Kubectl {
        bin: admin.bin.clone(),
        kubeconfig: users::token_kubeconfig(&server, token, token),
    };
    let jane = as_token("jane-token");
    let stranger = as_token("wrong-token");

    // The webhook's user, groups and uid (plus system:authenticated).
    let me: Value = serde_json::from_str(&jane.ok(&["auth", "whoami", "-o", "json"])).unwrap();
    let info = &me["status"]["userInfo"];
    assert_eq!(info["username"], "jane", "{me}");
    assert_eq!(info["uid"], "u-1", "{me}");
    assert_eq!(
        info["groups"],
        json!(["dev", "system:authenticated"]),
        "{me}"
    );
    assert_eq!(info["extra"]["team"], json!(["blue"]), "{me}");
    // A token the webhook does not authenticate is 401.
    stranger.fails_with(&["get", "pods"], None, "Unauthorized");
    stranger.fails_with(&["get", "pods"], None, "Unauthorized");
    // The reviews carried the API server's audiences.
    let reviews = |token: &str| {
        hook.count(|r| {
            let v: Value = serde_json::from_str(&r.body).unwrap_or_default();
            r.path == "/authenticate" && v["spec"]["token"] == token
        })
    };
    let first = hook
        .received
        .lock()
        .unwrap()
        .iter()
        .find(|r| r.path == "/authenticate")
        .cloned()
        .unwrap();
    let v: Value = serde_json::from_str(&first.body).unwrap();
    assert!(
        v["spec"]["audiences"]
            .as_array()
            .unwrap()
            .contains(&json!("https://kubernetes.default.svc.cluster.local")),
        "{v}"
    );
    // Both answers are cached for the 2m default: more requests, no more reviews.
    jane.ok(&["auth", "whoami"]);
    assert_eq!(reviews("jane-token"), 1);
    assert_eq!(reviews("wrong-token"), 1);

    // RBAC grants jane secrets, configmaps and deployments in "rbac-only".
    for ns in ["hooked", "rbac-only"] {
        admin.ok(&["create", "namespace", ns]);
    }
    admin.ok(&[
        "create",
        "role",
        "jane-things",
        "-n",
        "rbac-only",
        "--verb=get,list",
        "--resource=secrets,configmaps,deployments.apps",
    ]);
    admin.ok(&[
        "create",
        "rolebinding",
        "jane-things",
        "-n",
        "rbac-only",
        "--role=jane-things",
        "--user=jane",
    ]);
    // Allowed by the webhook alone.
    assert_eq!(can_i(&jane, &["get", "pods", "-n", "hooked"]), "yes");
    let no = can_i(&jane, &["get", "pods", "-n", "rbac-only"]);
    assert!(is_no(&no), "{no}");
    // Denied by the webhook: RBAC's grant is never consulted.
    let no = can_i(&jane, &["get", "secrets", "-n", "rbac-only"]);
    assert!(is_no(&no) && no.contains("secrets are off limits"), "{no}");
    jane.fails_with(
        &["get", "secrets", "-n", "rbac-only"],
        None,
        "secrets are off limits",
    );
    // No opinion: RBAC decides.
    assert_eq!(
        can_i(&jane, &["list", "deployments", "-n", "rbac-only"]),
        "yes"
    );
    let no = can_i(&jane, &["list", "deployments", "-n", "hooked"]);
    assert!(is_no(&no), "{no}");
    // A failing webhook (500) has no opinion either.
    assert_eq!(
        can_i(&jane, &["get", "configmaps", "-n", "rbac-only"]),
        "yes"
    );
    // The allowed answer is cached (5m default).
    let pod_reviews = || {
        hook.count(|r| {
            let v: Value = serde_json::from_str(&r.body).unwrap_or_default();
            r.path == "/authorize"
                && v["spec"]["resourceAttributes"]["resource"] == "pods"
                && v["spec"]["resourceAttributes"]["namespace"] == "hooked"
                && v["spec"]["user"] == "jane"
        })
    };
    let before = pod_reviews();
    assert!(before >= 1);
    assert_eq!(can_i(&jane, &["get", "pods", "-n", "hooked"]), "yes");
    assert_eq!(pod_reviews(), before);
    // Members of system:masters never reach the webhook's verdict.
    assert_eq!(can_i(&admin, &["get", "secrets", "-n", "rbac-only"]), "yes");
}
