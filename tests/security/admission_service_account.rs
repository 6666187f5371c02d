//! The ServiceAccount pieces end to end: the controllers give every new namespace its
//! `default` ServiceAccount and `kube-root-ca.crt` ConfigMap (the server's CA), and pods
//! created right after `kubectl create namespace` run as `default` with the projected
//! token volume mounted exactly as kube-apiserver shapes it.

use std::time::Duration;

use crate::common;
use crate::common::kubectl::Kubectl;
use serde_json::{json, Value};

fn get_json(k: &Kubectl, args: &[&str]) -> Value {
    let mut a = vec!["get"];
    a.extend_from_slice(args);
    a.extend_from_slice(&["-o", "json"]);
    serde_json::from_str(&k.ok(&a)).expect("kubectl get -o json")
}

#[test]
fn new_namespaces_get_the_default_account_and_the_root_ca_and_pods_the_token_volume() {
    let (_server, k) = Kubectl::start_server(&[]);
    k.ok(&["create", "namespace", "fresh"]);
    // Right away, as users do: the plugin waits for the controller's `default` account.
    k.ok(&[
        "run",
        "web",
        "-n",
        "fresh",
        "--image=nginx",
        "--restart=Never",
    ]);
    let pod = get_json(&k, &["pod", "web", "-n", "fresh"]);
    let spec = &pod["spec"];
    assert_eq!(spec["serviceAccountName"], "default", "{spec}");
    let volumes = spec["volumes"].as_array().expect("volumes");
    assert_eq!(volumes.len(), 1, "{spec}");
    let name = volumes[0]["name"].as_str().unwrap();
    let suffix = name.strip_prefix("kube-api-access-").expect(name);
    assert_eq!(suffix.len(), 5, "{name}");
    assert!(
        suffix
            .bytes()
            .all(|c| b"bcdfghjklmnpqrstvwxz2456789".contains(&c)),
        "{name}"
    );
    assert_eq!(
        volumes[0]["projected"],
        json!({"defaultMode": 420, "sources": [
            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            {"downwardAPI": {"items": [{"path": "namespace",
                "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
        ]})
    );
    assert_eq!(
        spec["containers"][0]["volumeMounts"],
        json!([{"name": name, "readOnly": true,
            "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}])
    );

    // The controllers' objects.
    let sa = get_json(&k, &["serviceaccount", "default", "-n", "fresh"]);
    assert_eq!(sa["metadata"]["name"], "default");
    let ca = k.ok(&["get", "--raw", "/cacerts"]);
    assert!(ca.starts_with("-----BEGIN CERTIFICATE-----"), "{ca}");
    let cm = wait_for_json(&k, &["configmap", "kube-root-ca.crt", "-n", "fresh"]);
    assert_eq!(cm["data"]["ca.crt"], ca.as_str());
    assert!(
        cm["metadata"]["annotations"]["kubernetes.io/description"]
            .as_str()
            .is_some_and(|d| d.starts_with("Contains a CA bundle")),
        "{cm}"
    );
    // Tampering is undone; a deleted account comes back.
    k.ok(&[
        "patch",
        "configmap",
        "kube-root-ca.crt",
        "-n",
        "fresh",
        "--type=merge",
        "-p",
        r#"{"data":{"ca.crt":"forged"}}"#,
    ]);
    common::wait_for("the CA put back", Duration::from_secs(30), || {
        let cm = get_json(&k, &["configmap", "kube-root-ca.crt", "-n", "fresh"]);
        (cm["data"]["ca.crt"] == ca.as_str()).then_some(())
    });
    k.ok(&["delete", "serviceaccount", "default", "-n", "fresh"]);
    wait_for_json(&k, &["serviceaccount", "default", "-n", "fresh"]);

    // Opting out (pod or account), and a missing account.
    let manifest = |name: &str, extra: Value| {
        let mut pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "fresh"},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]}});
        for (k, v) in extra.as_object().unwrap() {
            pod["spec"][k] = v.clone();
        }
        pod.to_string()
    };
    k.ok_stdin(
        &["create", "-f", "-"],
        Some(&manifest(
            "no-token",
            json!({"automountServiceAccountToken": false}),
        )),
    );
    let pod = get_json(&k, &["pod", "no-token", "-n", "fresh"]);
    assert_eq!(pod["spec"].get("volumes"), None, "{pod}");
    assert_eq!(
        pod["spec"]["containers"][0].get("volumeMounts"),
        None,
        "{pod}"
    );

    k.ok_stdin(&["create", "-f", "-"], Some(r#"{"apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": "quiet", "namespace": "fresh"}, "automountServiceAccountToken": false}"#));
    k.ok_stdin(
        &["create", "-f", "-"],
        Some(&manifest(
            "quiet-pod",
            json!({"serviceAccountName": "quiet"}),
        )),
    );
    let pod = get_json(&k, &["pod", "quiet-pod", "-n", "fresh"]);
    assert_eq!(pod["spec"]["serviceAccountName"], "quiet");
    assert_eq!(pod["spec"].get("volumes"), None, "{pod}");

    k.fails_with(
        &["create", "-f", "-"],
        Some(&manifest("ghost-pod", json!({"serviceAccountName": "ghost"}))),
        r#"pods "ghost-pod" is forbidden: error looking up service account fresh/ghost: serviceaccount "ghost" not found"#,
    );
}

#[test]
fn namespace_lifecycle_is_an_admission_plugin() {
    let (_server, k) = Kubectl::start_server(&[]);
    k.fails_with(
        &["create", "configmap", "c", "-n", "missing"],
        None,
        r#"namespaces "missing" not found"#,
    );
    k.fails_with(
        &["delete", "namespace", "kube-system"],
        None,
        r#"namespaces "kube-system" is forbidden: this namespace may not be deleted"#,
    );
}

/// Waits until `kubectl get <args>` finds the object; its JSON.
fn wait_for_json(k: &Kubectl, args: &[&str]) -> Value {
    let mut a = vec!["get"];
    a.extend_from_slice(args);
    a.extend_from_slice(&["-o", "json"]);
    common::wait_for(&format!("{args:?}"), Duration::from_secs(30), || {
        let out = k.run(&a);
        out.ok
            .then(|| serde_json::from_str(&out.stdout).expect("json"))
    })
}
