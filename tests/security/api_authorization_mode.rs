//! `--kube-apiserver-arg=authorization-mode=…` as k3s passes it: the modes after
//! `system:masters`, evaluated in order; unknown modes stop the server with kube-apiserver's
//! message.

use std::time::Duration;

use crate::common;
use crate::common::kubectl::Kubectl;
use crate::common::users;

fn as_user(admin: &Kubectl, server: &common::K3rs, user: &str) -> Kubectl {
    Kubectl {
        bin: admin.bin.clone(),
        kubeconfig: users::cert_kubeconfig(server, user, &[]),
    }
}

#[test]
fn always_allow_after_rbac_allows_what_rbac_does_not() {
    let (server, admin) =
        Kubectl::start_server(&["--kube-apiserver-arg=authorization-mode=RBAC,AlwaysAllow"]);
    let nobody = as_user(&admin, &server, "nobody");
    nobody.ok(&["get", "pods"]);
    assert_eq!(
        nobody.ok(&["auth", "can-i", "delete", "nodes"]).trim(),
        "yes"
    );
}

#[test]
fn always_deny_has_no_opinion_and_masters_stay_allowed() {
    let (server, admin) =
        Kubectl::start_server(&["--kube-apiserver-arg=authorization-mode=AlwaysDeny"]);
    admin.ok(&["get", "pods"]);
    let nobody = as_user(&admin, &server, "nobody");
    let err = nobody.fails_with(&["get", "pods"], None, "Forbidden");
    assert!(
        err.contains(r#"pods is forbidden: User "nobody" cannot list resource "pods" in API group "" in the namespace "default": Everything is forbidden."#),
        "{err}"
    );
}

#[test]
fn unknown_modes_stop_the_server() {
    let (status, log, _dir) = common::K3rs::run_to_exit(
        &["--kube-apiserver-arg=authorization-mode=Node,Magic"],
        Duration::from_secs(30),
    );
    assert!(status.is_some_and(|s| !s.success()), "{log}");
    assert!(
        log.contains(r#"authorization-mode \"Magic\" is not a valid mode"#)
            || log.contains(r#"authorization-mode "Magic" is not a valid mode"#),
        "{log}"
    );
}

#[test]
fn abac_policy_file_allows_what_its_policies_match() {
    let files = tempfile::tempdir().unwrap();
    let policy = files.path().join("abac.jsonl");
    std::fs::write(
        &policy,
        r#"# alice owns her namespace; readers may read pods anywhere
{"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": {"user": "alice", "namespace": "alice", "resource": "*", "apiGroup": "*"}}
{"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": {"group": "readers", "readonly": true, "namespace": "*", "resource": "pods", "apiGroup": ""}}
"#,
    )
    .unwrap();
    let (server, admin) = Kubectl::start_server(&[
        "--kube-apiserver-arg=authorization-mode=Node,RBAC,ABAC",
        &format!(
            "--kube-apiserver-arg=authorization-policy-file={}",
            policy.display()
        ),
    ]);
    admin.ok(&["create", "namespace", "alice"]);
    let alice = as_user(&admin, &server, "alice");
    let reader = Kubectl {
        bin: admin.bin.clone(),
        kubeconfig: users::cert_kubeconfig(&server, "carol", &["readers"]),
    };
    let can = |k: &Kubectl, args: &[&str]| {
        let mut a = vec!["auth", "can-i"];
        a.extend_from_slice(args);
        // "yes", or "no" with the authorizers' reason ("no - No policy matched.").
        let out = k.run(&a).stdout;
        out.split_whitespace()
            .next()
            .unwrap_or_default()
            .to_string()
    };
    assert_eq!(
        can(&alice, &["create", "deployments.apps", "-n", "alice"]),
        "yes"
    );
    assert_eq!(can(&alice, &["delete", "secrets", "-n", "alice"]), "yes");
    assert_eq!(can(&alice, &["get", "pods", "-n", "default"]), "no");
    assert_eq!(can(&reader, &["list", "pods", "-n", "kube-system"]), "yes");
    assert_eq!(can(&reader, &["create", "pods", "-n", "default"]), "no");
    assert_eq!(can(&reader, &["list", "secrets", "-n", "default"]), "no");
    // The real requests agree.
    alice.ok(&["create", "configmap", "mine", "-n", "alice"]);
    reader.ok(&["get", "pods", "-A"]);
    let err = reader.fails_with(&["create", "configmap", "x"], None, "forbidden");
    assert!(err.contains("No policy matched."), "{err}");
}

#[test]
fn abac_without_a_policy_file_stops_the_server() {
    let (status, log, _dir) = common::K3rs::run_to_exit(
        &["--kube-apiserver-arg=authorization-mode=RBAC,ABAC"],
        Duration::from_secs(30),
    );
    assert!(status.is_some_and(|s| !s.success()), "{log}");
    assert!(
        log.contains("authorization-mode ABAC's authorization policy file not passed"),
        "{log}"
    );
}
