//! `--kube-apiserver-arg=authorization-mode=…` as k3s passes it: the modes after
//! `system:masters`, evaluated in order; unknown modes stop the server with kube-apiserver's
//! message.

mod common;

use std::time::Duration;

use common::kubectl::Kubectl;
use common::users;

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
