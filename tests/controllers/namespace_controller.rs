//! The namespace controller inside `k3rs server`, driven with kubectl: deleting a namespace
//! makes it Terminating, its content is deleted through the API (a finalizer on an object
//! holds the namespace, reported in the namespace's conditions in upstream's words), and once
//! the content is gone the namespace is finalized and removed.

use std::time::Duration;

use crate::common;
use crate::common::kubectl::Kubectl;
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(60);

fn condition(ns: &Value, type_: &str) -> (String, String) {
    let c = ns["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == type_)
        .cloned()
        .unwrap_or(Value::Null);
    (
        c["status"].as_str().unwrap_or("").to_string(),
        c["message"].as_str().unwrap_or("").to_string(),
    )
}

#[test]
fn deleting_a_namespace_deletes_its_content_then_the_namespace() {
    let (_server, k) = Kubectl::start_server(&[]);
    k.ok(&["create", "namespace", "doomed"]);
    k.ok(&["create", "configmap", "plain", "-n", "doomed"]);
    k.ok(&[
        "create",
        "deployment",
        "web",
        "--image=nginx",
        "-n",
        "doomed",
    ]);
    k.ok(&["create", "secret", "generic", "s", "-n", "doomed"]);
    let held = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "held", "namespace": "doomed", "finalizers": ["example.com/keep"]},
    });
    k.ok_stdin(&["create", "-f", "-"], Some(&held.to_string()));
    // An object elsewhere is untouched.
    k.ok(&["create", "configmap", "bystander", "-n", "default"]);

    k.ok(&["delete", "namespace", "doomed", "--wait=false"]);
    assert_eq!(
        k.ok(&[
            "get",
            "namespace",
            "doomed",
            "-o",
            "jsonpath={.status.phase}"
        ]),
        "Terminating"
    );
    // Everything but the held ConfigMap goes; the namespace says what holds it.
    let ns = common::wait_for("the namespace to report the held content", WAIT, || {
        let out = k.run(&["get", "namespace", "doomed", "-o", "json"]);
        let ns: Value = serde_json::from_str(&out.stdout).ok()?;
        (condition(&ns, "NamespaceContentRemaining").1
            == "Some resources are remaining: configmaps has 1 resource instances")
            .then_some(ns)
    });
    assert_eq!(
        condition(&ns, "NamespaceFinalizersRemaining"),
        (
            "True".to_string(),
            "Some content in the namespace has finalizers remaining: example.com/keep in 1 resource instances".to_string()
        )
    );
    assert_eq!(
        condition(&ns, "NamespaceDeletionDiscoveryFailure").0,
        "False"
    );
    assert_eq!(condition(&ns, "NamespaceDeletionContentFailure").0, "False");
    assert_eq!(
        k.ok(&[
            "get",
            "configmaps,deployments,secrets",
            "-n",
            "doomed",
            "-o",
            "name"
        ]),
        "configmap/held\n"
    );
    // Creating in a terminating namespace is refused (NamespaceLifecycle).
    let refused = k.run(&["create", "configmap", "late", "-n", "doomed"]);
    assert!(
        !refused.ok && refused.stderr.contains("because it is being terminated"),
        "{refused:?}"
    );

    // Releasing the finalizer lets the namespace go.
    k.ok(&[
        "patch",
        "configmap",
        "held",
        "-n",
        "doomed",
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":null}}"#,
    ]);
    common::wait_for("the namespace to be gone", WAIT, || {
        let out = k.run(&["get", "namespace", "doomed", "-o", "name"]);
        (!out.ok && out.stderr.contains("NotFound")).then_some(())
    });
    assert_eq!(
        k.ok(&[
            "get",
            "configmap",
            "bystander",
            "-n",
            "default",
            "-o",
            "name"
        ]),
        "configmap/bystander\n"
    );
    // The name can be used again, empty.
    k.ok(&["create", "namespace", "doomed"]);
    let cms = k.ok(&["get", "configmaps", "-n", "doomed", "-o", "name"]);
    assert!(!cms.contains("plain") && !cms.contains("held"), "{cms}");
}
