//! RBAC at the API with the real binary and kubectl: unbound users are refused with
//! kube-apiserver's message, bindings grant exactly their role's rules in their namespace,
//! the bootstrap policy is reconciled at start, and ClusterRoles aggregate.

use std::time::Duration;

use crate::common;
use crate::common::kubectl::Kubectl;
use crate::common::users;

fn as_user(admin: &Kubectl, server: &common::K3rs, user: &str, groups: &[&str]) -> Kubectl {
    Kubectl {
        bin: admin.bin.clone(),
        kubeconfig: users::cert_kubeconfig(server, user, groups),
    }
}

/// A Role `cm-reader` (get, list configmaps) in `ns`, bound to `user` as `<user>-reads`.
fn bind_cm_reader(admin: &Kubectl, ns: &str, user: &str) {
    admin.ok(&[
        "-n",
        ns,
        "create",
        "role",
        "cm-reader",
        "--verb=get,list",
        "--resource=configmaps",
    ]);
    admin.ok(&[
        "-n",
        ns,
        "create",
        "rolebinding",
        &format!("{user}-reads"),
        "--role=cm-reader",
        &format!("--user={user}"),
    ]);
}

#[test]
fn unbound_users_are_forbidden_and_bindings_grant_exactly_their_role() {
    let (server, admin) = Kubectl::start_server(&[]);
    let nobody = as_user(&admin, &server, "nobody", &["dev"]);
    let err = nobody.fails_with(&["get", "pods"], None, "Forbidden");
    assert!(
        err.contains(r#"pods is forbidden: User "nobody" cannot list resource "pods" in API group "" in the namespace "default""#),
        "{err}"
    );
    let err = nobody.fails_with(&["get", "nodes"], None, "Forbidden");
    assert!(
        err.contains(r#"nodes is forbidden: User "nobody" cannot list resource "nodes" in API group "" at the cluster scope"#),
        "{err}"
    );
    // Discovery is allowed to every authenticated user (system:discovery).
    let out = nobody.ok(&["get", "--raw", "/apis"]);
    assert!(out.contains("APIGroupList"), "{out}");

    admin.ok(&["create", "namespace", "team-a"]);
    admin.ok(&["create", "namespace", "team-b"]);
    admin.ok(&[
        "-n",
        "team-a",
        "create",
        "configmap",
        "cm1",
        "--from-literal=k=v",
    ]);
    admin.ok(&[
        "-n",
        "team-b",
        "create",
        "configmap",
        "cm1",
        "--from-literal=k=v",
    ]);
    bind_cm_reader(&admin, "team-a", "alice");
    let alice = as_user(&admin, &server, "alice", &[]);
    common::wait_for("alice's binding", Duration::from_secs(30), || {
        alice
            .run(&["-n", "team-a", "get", "configmaps"])
            .ok
            .then_some(())
    });
    assert_eq!(
        alice.ok(&[
            "-n",
            "team-a",
            "get",
            "configmap",
            "cm1",
            "-o",
            "jsonpath={.data.k}"
        ]),
        "v"
    );
    let err = alice.fails_with(&["-n", "team-b", "get", "configmaps"], None, "Forbidden");
    assert!(
        err.contains(r#"User "alice" cannot list resource "configmaps" in API group "" in the namespace "team-b""#),
        "{err}"
    );
    let err = alice.fails_with(
        &["-n", "team-a", "delete", "configmap", "cm1"],
        None,
        "Forbidden",
    );
    assert!(
        err.contains(
            r#"configmaps "cm1" is forbidden: User "alice" cannot delete resource "configmaps""#
        ),
        "{err}"
    );
    alice.fails_with(&["-n", "team-a", "get", "secrets"], None, "Forbidden");

    // A group binding to a ClusterRole; a binding to a missing role says so in the denial.
    admin.ok(&[
        "-n",
        "team-b",
        "create",
        "rolebinding",
        "dev-view",
        "--clusterrole=view",
        "--group=dev",
    ]);
    common::wait_for("the dev group's binding", Duration::from_secs(30), || {
        nobody
            .run(&["-n", "team-b", "get", "configmaps"])
            .ok
            .then_some(())
    });
    nobody.fails_with(&["-n", "team-b", "get", "secrets"], None, "Forbidden");
    admin.ok(&[
        "-n",
        "team-b",
        "create",
        "rolebinding",
        "dangling",
        "--clusterrole=no-such-role",
        "--user=carol",
    ]);
    // Impersonation: the admin may act as alice (and gets exactly alice's rights); nobody
    // may not.
    admin.ok(&["--as=alice", "-n", "team-a", "get", "configmap", "cm1"]);
    let err = admin.fails_with(
        &["--as=alice", "-n", "team-b", "get", "configmaps"],
        None,
        "Forbidden",
    );
    assert!(
        err.contains(r#"User "alice" cannot list resource "configmaps""#),
        "{err}"
    );
    admin.ok(&[
        "--as=someone",
        "--as-group=dev",
        "-n",
        "team-b",
        "get",
        "configmaps",
    ]);
    let err = nobody.fails_with(
        &["--as=alice", "-n", "team-a", "get", "configmaps"],
        None,
        "Forbidden",
    );
    assert!(
        err.contains(r#"users "alice" is forbidden: User "nobody" cannot impersonate resource "users" in API group "" at the cluster scope"#),
        "{err}"
    );
    let carol = as_user(&admin, &server, "carol", &[]);
    common::wait_for("carol's dangling binding", Duration::from_secs(30), || {
        let out = carol.run(&["-n", "team-b", "get", "pods"]);
        out.stderr
            .contains(r#"RBAC: clusterrole.rbac.authorization.k8s.io "no-such-role" not found"#)
            .then_some(())
    });
}

#[test]
fn aggregation_and_bootstrap_reconciliation() {
    let (mut server, admin) = Kubectl::start_server(&[]);
    // The bootstrap policy exists, with upstream's bindings.
    let subjects = admin.ok(&[
        "get",
        "clusterrolebinding",
        "system:basic-user",
        "-o",
        "jsonpath={.subjects[*].name}",
    ]);
    assert_eq!(subjects, "system:authenticated");
    // view aggregates system:aggregate-to-view and whatever else is labelled so.
    admin.ok_stdin(
        &["apply", "-f", "-"],
        Some(
            r#"apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: widgets-view
  labels:
    rbac.authorization.k8s.io/aggregate-to-view: "true"
rules:
- apiGroups: ["example.com"]
  resources: ["widgets"]
  verbs: ["get", "list", "watch"]
"#,
        ),
    );
    for role in ["view", "edit", "admin"] {
        common::wait_for(
            "aggregation into view/edit/admin",
            Duration::from_secs(30),
            || {
                let rules = admin.ok(&["get", "clusterrole", role, "-o", "json"]);
                (rules.contains(r#""widgets""#) && rules.contains(r#""pods/log""#)).then_some(())
            },
        );
    }
    // Reconciliation at start: emptied rules come back; autoupdate=false is respected.
    admin.ok(&[
        "patch",
        "clusterrole",
        "system:basic-user",
        "--type=json",
        r#"-p=[{"op":"replace","path":"/rules","value":[]}]"#,
    ]);
    admin.ok(&[
        "patch",
        "clusterrole",
        "system:monitoring",
        "--type=json",
        r#"-p=[{"op":"replace","path":"/rules","value":[]}]"#,
    ]);
    admin.ok(&[
        "annotate",
        "--overwrite",
        "clusterrole",
        "system:monitoring",
        "rbac.authorization.kubernetes.io/autoupdate=false",
    ]);
    let rules = |name: &str| {
        admin.ok(&[
            "get",
            "clusterrole",
            name,
            "-o",
            "jsonpath={.rules[*].resources}",
        ])
    };
    assert_eq!(rules("system:basic-user"), "");
    server.restart();
    common::wait_for("the API after restart", Duration::from_secs(60), || {
        admin.run(&["get", "namespace", "default"]).ok.then_some(())
    });
    assert_eq!(
        rules("system:basic-user"),
        r#"["selfsubjectaccessreviews","selfsubjectrulesreviews"] ["selfsubjectreviews"]"#
    );
    assert_eq!(
        admin.ok(&[
            "get",
            "clusterrole",
            "system:monitoring",
            "-o",
            "jsonpath={.rules[*].nonResourceURLs}"
        ]),
        ""
    );
}

#[test]
fn escalation_is_prevented() {
    let (server, admin) = Kubectl::start_server(&[]);
    admin.ok(&["create", "namespace", "team-a"]);
    admin.ok(&[
        "-n",
        "team-a",
        "create",
        "rolebinding",
        "dana-admin",
        "--clusterrole=admin",
        "--user=dana",
    ]);
    let dana = as_user(&admin, &server, "dana", &[]);
    common::wait_for("dana's admin binding", Duration::from_secs(30), || {
        dana.run(&["-n", "team-a", "get", "secrets"])
            .ok
            .then_some(())
    });
    // Within what admin holds: allowed.
    dana.ok(&[
        "-n",
        "team-a",
        "create",
        "role",
        "secret-reader",
        "--verb=get",
        "--resource=secrets",
    ]);
    // (admin aggregates edit, which aggregates view: wait until that has settled.)
    common::wait_for("dana binds edit", Duration::from_secs(30), || {
        let args = [
            "-n",
            "team-a",
            "create",
            "rolebinding",
            "erin-edit",
            "--clusterrole=edit",
        ];
        dana.run(&[&args[..], &["--user=erin"]].concat())
            .ok
            .then_some(())
    });
    // More than held: refused with upstream's message.
    let err = dana.fails_with(
        &[
            "-n",
            "team-a",
            "create",
            "role",
            "too-much",
            "--verb=get",
            "--resource=nodes",
        ],
        None,
        "Forbidden",
    );
    assert!(
        err.contains(
            "roles.rbac.authorization.k8s.io \"too-much\" is forbidden: user \"dana\" (groups=[\"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n{APIGroups:[\"\"], Resources:[\"nodes\"], Verbs:[\"get\"]}"
        ),
        "{err}"
    );
    let err = dana.fails_with(
        &[
            "-n",
            "team-a",
            "create",
            "rolebinding",
            "root",
            "--clusterrole=cluster-admin",
            "--user=dana",
        ],
        None,
        "is forbidden",
    );
    assert!(
        err.contains(r#"rolebindings.rbac.authorization.k8s.io "root" is forbidden: user "dana""#)
            && err.contains("is attempting to grant RBAC permissions not currently held"),
        "{err}"
    );
    // With the bind verb on cluster-admin the same binding is allowed.
    admin.ok(&[
        "create",
        "clusterrole",
        "bind-root",
        "--verb=bind",
        "--resource=clusterroles",
        "--resource-name=cluster-admin",
    ]);
    admin.ok(&[
        "-n",
        "team-a",
        "create",
        "rolebinding",
        "dana-bind-root",
        "--clusterrole=bind-root",
        "--user=dana",
    ]);
    common::wait_for(
        "dana may bind cluster-admin",
        Duration::from_secs(30),
        || {
            dana.run(&[
                "-n",
                "team-a",
                "create",
                "rolebinding",
                "root",
                "--clusterrole=cluster-admin",
                "--user=dana",
            ])
            .ok
            .then_some(())
        },
    );
}

/// The line of `kubectl auth can-i --list` output whose first column is `first`, as words.
fn list_row(out: &str, first: &str) -> Option<Vec<String>> {
    out.lines()
        .map(|l| l.split_whitespace().map(str::to_string).collect::<Vec<_>>())
        .find(|w| w.first().map(String::as_str) == Some(first))
}

#[test]
fn access_reviews_answer_kubectl_auth_can_i() {
    let (server, admin) = Kubectl::start_server(&[]);
    admin.ok(&["create", "namespace", "team-a"]);
    bind_cm_reader(&admin, "team-a", "alice");
    let alice = as_user(&admin, &server, "alice", &[]);
    // SelfSubjectAccessReview (kubectl sends it as protobuf): yes, then no (exit code 1).
    common::wait_for("alice may list configmaps", Duration::from_secs(30), || {
        let out = alice.run(&["auth", "can-i", "list", "configmaps", "-n", "team-a"]);
        (out.stdout.trim() == "yes").then_some(())
    });
    let out = alice.run(&["auth", "can-i", "delete", "configmaps", "-n", "team-a"]);
    assert_eq!((out.ok, out.stdout.trim()), (false, "no"), "{out:?}");
    let out = alice.run(&["auth", "can-i", "list", "configmaps", "-n", "default"]);
    assert_eq!(out.stdout.trim(), "no", "{out:?}");
    assert_eq!(
        admin.ok(&["auth", "can-i", "get", "nodes"]).trim(),
        "yes",
        "system:masters may"
    );
    // Non-resource URLs: discovery is everyone's, /metrics is system:monitoring's.
    assert_eq!(alice.ok(&["auth", "can-i", "get", "/apis"]).trim(), "yes");
    let out = alice.run(&["auth", "can-i", "get", "/metrics"]);
    assert_eq!(out.stdout.trim(), "no", "{out:?}");
    // --as: the admin asks on alice's behalf (impersonated SelfSubjectAccessReview).
    let out = admin.run(&[
        "auth",
        "can-i",
        "list",
        "configmaps",
        "-n",
        "team-a",
        "--as=alice",
    ]);
    assert_eq!(out.stdout.trim(), "yes", "{out:?}");
    let out = admin.run(&[
        "auth",
        "can-i",
        "get",
        "secrets",
        "-n",
        "team-a",
        "--as=alice",
    ]);
    assert_eq!(out.stdout.trim(), "no", "{out:?}");

    // SelfSubjectRulesReview: the role's rules plus basic-user and discovery, in that
    // namespace only.
    let list = alice.ok(&["auth", "can-i", "--list", "-n", "team-a"]);
    assert_eq!(
        list_row(&list, "configmaps"),
        Some(
            vec!["configmaps", "[]", "[]", "[get", "list]"]
                .into_iter()
                .map(String::from)
                .collect()
        ),
        "{list}"
    );
    for review in [
        "selfsubjectaccessreviews.authorization.k8s.io",
        "selfsubjectrulesreviews.authorization.k8s.io",
        "selfsubjectreviews.authentication.k8s.io",
    ] {
        let row = list_row(&list, review).unwrap_or_else(|| panic!("{review}: {list}"));
        assert_eq!(row.last().map(String::as_str), Some("[create]"), "{list}");
    }
    assert!(
        list.lines()
            .any(|l| l.contains("[/api/*]") && l.trim_end().ends_with("[get]")),
        "{list}"
    );
    let elsewhere = alice.ok(&["auth", "can-i", "--list", "-n", "default"]);
    assert_eq!(list_row(&elsewhere, "configmaps"), None, "{elsewhere}");

    // SubjectAccessReview and LocalSubjectAccessReview (JSON through kubectl create; create-only
    // kinds have no PATCH operation in /openapi/v3, so kubectl validates them against
    // /openapi/v2).
    let sar = |kind: &str, ns: &str, user: &str, verb: &str| {
        format!(
            r#"{{"apiVersion": "authorization.k8s.io/v1", "kind": "{kind}",
              "metadata": {{"namespace": "{ns}"}},
              "spec": {{"user": "{user}", "resourceAttributes":
                {{"namespace": "{ns}", "verb": "{verb}", "resource": "configmaps"}}}}}}"#
        )
    };
    let allowed = |body: String| {
        admin.ok_stdin(
            &[
                "-n",
                "team-a",
                "create",
                "-f",
                "-",
                "-o",
                "jsonpath={.status.allowed}",
            ],
            Some(&body),
        )
    };
    assert_eq!(
        allowed(sar("SubjectAccessReview", "team-a", "alice", "get")),
        "true"
    );
    assert_eq!(
        allowed(sar("SubjectAccessReview", "team-a", "alice", "delete")),
        "false"
    );
    assert_eq!(
        allowed(sar("LocalSubjectAccessReview", "team-a", "alice", "list")),
        "true"
    );
    assert_eq!(
        allowed(sar("SubjectAccessReview", "team-a", "bob", "get")),
        "false"
    );
    // Only those allowed to create SubjectAccessReviews may ask about others. (kubectl's v2
    // validation lists CRDs first, which alice may not: --validate=false, as against
    // kube-apiserver.)
    let err = alice.fails_with(
        &["create", "--validate=false", "-f", "-"],
        Some(&sar("SubjectAccessReview", "team-a", "alice", "get")),
        "Forbidden",
    );
    assert!(
        err.contains(r#"User "alice" cannot create resource "subjectaccessreviews" in API group "authorization.k8s.io" at the cluster scope"#),
        "{err}"
    );
    // A review with neither user nor groups is invalid, in upstream's words.
    let err = admin.fails_with(
        &["create", "-f", "-"],
        Some(&sar("SubjectAccessReview", "team-a", "", "get")),
        "Invalid",
    );
    assert!(
        err.contains(
            "spec.user: Invalid value: \"\": at least one of user or group must be specified"
        ),
        "{err}"
    );
}

/// A WebSocket exec/attach/port-forward starts with a GET: it takes `create` on the
/// subresource too (upstream's 1.35 default), so `get` alone no longer opens a shell.
#[test]
fn websocket_streams_need_create_as_well_as_get() {
    let (server, admin) = Kubectl::start_server(&["--disable-agent"]);
    let role = |name: &str, verbs: &str| {
        admin.ok(&[
            "create",
            "role",
            name,
            &format!("--verb={verbs}"),
            "--resource=pods/exec,pods/attach,pods/portforward",
        ]);
        admin.ok(&[
            "create",
            "rolebinding",
            name,
            &format!("--role={name}"),
            &format!("--user={name}"),
        ]);
    };
    role("getter", "get");
    role("starter", "get,create");
    let getter = as_user(&admin, &server, "getter", &[]);
    let starter = as_user(&admin, &server, "starter", &[]);
    for sub in [
        "exec?command=ls",
        "attach?stdout=true",
        "portforward?ports=80",
    ] {
        let path = format!("/api/v1/namespaces/default/pods/missing/{sub}");
        let err = getter.fails_with(&["get", "--raw", &path], None, "Forbidden");
        let what = sub.split('?').next().unwrap();
        assert!(
            err.contains(&format!(
                r#"User "getter" cannot create resource "pods/{what}" in API group "" in the namespace "default""#
            )),
            "{err}"
        );
        // With both verbs the request gets past authorization (to the missing pod).
        let err = starter.fails_with(&["get", "--raw", &path], None, "NotFound");
        assert!(err.contains(r#"pods "missing" not found"#), "{err}");
    }
}

/// Issue 21's escalation: a Role granting `get,list,watch` on one Secret by `resourceNames`
/// must never serve another Secret, however the narrowing field selector is repeated,
/// reordered or encoded: in a namespace (Role) and cluster-wide (ClusterRole).
#[test]
fn narrowed_lists_are_authorized_as_the_handler_serves_them() {
    let (server, admin) = Kubectl::start_server(&["--disable-agent"]);
    for ns in ["x", "y"] {
        admin.ok(&["create", "namespace", ns]);
        for s in ["allowed", "other", "third"] {
            admin.ok(&[
                "-n",
                ns,
                "create",
                "secret",
                "generic",
                s,
                "--from-literal=k=v",
            ]);
        }
    }
    admin.ok(&[
        "-n",
        "x",
        "create",
        "role",
        "one-secret",
        "--verb=get,list,watch",
        "--resource=secrets",
        "--resource-name=allowed",
    ]);
    admin.ok(&[
        "-n",
        "x",
        "create",
        "rolebinding",
        "narrow",
        "--role=one-secret",
        "--user=narrow",
    ]);
    admin.ok(&[
        "create",
        "clusterrole",
        "one-secret",
        "--verb=get,list,watch",
        "--resource=secrets",
        "--resource-name=allowed",
    ]);
    admin.ok(&[
        "create",
        "clusterrolebinding",
        "wide",
        "--clusterrole=one-secret",
        "--user=wide",
    ]);
    let narrow = as_user(&admin, &server, "narrow", &[]);
    let wide = as_user(&admin, &server, "wide", &[]);
    common::wait_for("the bindings", Duration::from_secs(30), || {
        (narrow.run(&["-n", "x", "get", "secret", "allowed"]).ok
            && wide.run(&["-n", "y", "get", "secret", "allowed"]).ok)
            .then_some(())
    });
    // The plain forms work (kubectl get secret/<n> -w narrows a watch this way).
    let listed = narrow.ok(&[
        "get",
        "--raw",
        "/api/v1/namespaces/x/secrets?fieldSelector=metadata.name%3Dallowed",
    ]);
    assert!(
        listed.contains("\"allowed\"") && !listed.contains("\"other\""),
        "{listed}"
    );
    narrow.fails_with(&["-n", "x", "get", "secrets"], None, "Forbidden");
    narrow.fails_with(&["-n", "x", "get", "secret", "other"], None, "Forbidden");

    let answered = common::narrowing::assert_never_wider(
        &narrow,
        "/api/v1/namespaces/x/secrets",
        "allowed",
        "other",
    );
    assert!(
        answered >= 2,
        "only {answered} narrowed queries were answered"
    );
    // Not in another namespace: the Role is x's.
    assert_eq!(
        common::narrowing::assert_never_wider(
            &narrow,
            "/api/v1/namespaces/y/secrets",
            "allowed",
            "other"
        ),
        0
    );
    for collection in ["/api/v1/secrets", "/api/v1/namespaces/y/secrets"] {
        let answered = common::narrowing::assert_never_wider(&wide, collection, "allowed", "other");
        assert!(answered >= 2, "{collection}: only {answered} answered");
    }
    // The legacy /watch/ path with a name narrows to that name alone.
    let out = narrow.ok(&[
        "get",
        "--raw",
        "/api/v1/watch/namespaces/x/secrets/allowed?timeoutSeconds=1&fieldSelector=metadata.name%3Dother",
    ]);
    assert!(!out.contains("\"other\""), "{out}");
}
