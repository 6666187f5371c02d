//! The garbage collector inside `k3rs server`, driven with kubectl: ConfigMaps own other
//! ConfigMaps through `ownerReferences`, and deleting an owner with each propagation policy
//! (`--cascade=background|foreground|orphan`) leaves exactly what upstream leaves; dependents of
//! an owner that never existed are collected; a dependent with a remaining owner stays.

use std::time::Duration;

use crate::common;
use crate::common::kubectl::Kubectl;

const WAIT: Duration = Duration::from_secs(60);

fn create_owner(k: &Kubectl, name: &str) -> String {
    k.ok(&["create", "configmap", name]);
    k.ok(&["get", "configmap", name, "-o", "jsonpath={.metadata.uid}"])
}

/// A ConfigMap owned by `owners` (name, uid); `finalizers` on it from the start.
fn create_dependent(k: &Kubectl, name: &str, owners: &[(&str, &str)], finalizers: &[&str]) {
    let refs: Vec<serde_json::Value> = owners
        .iter()
        .map(|(n, uid)| {
            serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "name": n, "uid": uid,
                               "blockOwnerDeletion": true})
        })
        .collect();
    let obj = serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "ownerReferences": refs, "finalizers": finalizers},
    });
    k.ok_stdin(&["create", "-f", "-"], Some(&obj.to_string()));
}

fn exists(k: &Kubectl, name: &str) -> bool {
    let out = k.run(&["get", "configmap", name, "-o", "name"]);
    if out.ok {
        return true;
    }
    assert!(out.stderr.contains("NotFound"), "get {name}: {out:?}");
    false
}

fn wait_gone(k: &Kubectl, name: &str) {
    common::wait_for(&format!("configmap {name} to be deleted"), WAIT, || {
        (!exists(k, name)).then_some(())
    });
}

fn jsonpath(k: &Kubectl, name: &str, path: &str) -> String {
    k.ok(&["get", "configmap", name, "-o", &format!("jsonpath={path}")])
}

#[test]
fn deletion_propagates_as_upstream() {
    let (_server, k) = Kubectl::start_server(&[]);

    // Background (kubectl's default): the owner goes at once, its dependents after it.
    let bg = create_owner(&k, "bg-owner");
    create_dependent(&k, "bg-a", &[("bg-owner", &bg)], &[]);
    create_dependent(&k, "bg-b", &[("bg-owner", &bg)], &[]);
    let keeper = create_owner(&k, "keeper");
    create_dependent(
        &k,
        "bg-shared",
        &[("bg-owner", &bg), ("keeper", &keeper)],
        &[],
    );
    k.ok(&["delete", "configmap", "bg-owner", "--cascade=background"]);
    assert!(!exists(&k, "bg-owner"));
    wait_gone(&k, "bg-a");
    wait_gone(&k, "bg-b");
    // The dependent with a remaining owner stays; only the dead reference is dropped.
    common::wait_for("bg-shared to lose its reference to bg-owner", WAIT, || {
        (jsonpath(&k, "bg-shared", "{.metadata.ownerReferences[*].name}") == "keeper").then_some(())
    });
    assert!(exists(&k, "keeper"));

    // A reference to an owner uid that never existed is dangling: the dependent goes.
    create_dependent(
        &k,
        "dangling",
        &[("nobody", "00000000-0000-0000-0000-000000000000")],
        &[],
    );
    wait_gone(&k, "dangling");

    // Foreground: the owner waits (deletionTimestamp + foregroundDeletion) for its blocking
    // dependents; one of them holds its own finalizer, so the owner must still be there.
    let fg = create_owner(&k, "fg-owner");
    create_dependent(&k, "fg-a", &[("fg-owner", &fg)], &[]);
    create_dependent(&k, "fg-held", &[("fg-owner", &fg)], &["example.com/hold"]);
    k.ok(&[
        "delete",
        "configmap",
        "fg-owner",
        "--cascade=foreground",
        "--wait=false",
    ]);
    assert_eq!(
        jsonpath(&k, "fg-owner", "{.metadata.finalizers}"),
        r#"["foregroundDeletion"]"#
    );
    wait_gone(&k, "fg-a");
    common::wait_for("fg-held to be terminating", WAIT, || {
        (!jsonpath(&k, "fg-held", "{.metadata.deletionTimestamp}").is_empty()).then_some(())
    });
    assert!(
        exists(&k, "fg-owner"),
        "the owner waits for its blocking dependent"
    );
    k.ok(&[
        "patch",
        "configmap",
        "fg-held",
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":null}}"#,
    ]);
    wait_gone(&k, "fg-held");
    wait_gone(&k, "fg-owner");

    // Orphan: the owner goes, the dependents stay without the reference.
    let orphan = create_owner(&k, "or-owner");
    create_dependent(&k, "or-a", &[("or-owner", &orphan)], &[]);
    create_dependent(
        &k,
        "or-b",
        &[("or-owner", &orphan), ("keeper", &keeper)],
        &[],
    );
    k.ok(&["delete", "configmap", "or-owner", "--cascade=orphan"]);
    wait_gone(&k, "or-owner");
    assert_eq!(
        jsonpath(&k, "or-a", "{.metadata.ownerReferences}"),
        "",
        "or-a is orphaned"
    );
    assert_eq!(
        jsonpath(&k, "or-b", "{.metadata.ownerReferences[*].name}"),
        "keeper"
    );
    assert!(exists(&k, "or-a") && exists(&k, "or-b"));
}

/// TTL after finished: a finished Job with `ttlSecondsAfterFinished` is deleted; one without
/// a TTL stays.
#[test]
fn finished_jobs_expire_after_their_ttl() {
    // The test marks its Jobs finished itself: no Job controller may run them.
    let (_server, k) = Kubectl::start_server(&["--kube-controller-manager-arg=controllers=*,-job"]);
    for (name, ttl) in [("short", Some(1)), ("kept", None)] {
        let mut job = serde_json::json!({
            "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"template": {"spec": {"restartPolicy": "Never",
                "containers": [{"name": "c", "image": "busybox"}]}}},
        });
        if let Some(t) = ttl {
            job["spec"]["ttlSecondsAfterFinished"] = serde_json::json!(t);
        }
        k.ok_stdin(&["create", "-f", "-"], Some(&job.to_string()));
        let now = k.ok(&[
            "get",
            "job",
            name,
            "-o",
            "jsonpath={.metadata.creationTimestamp}",
        ]);
        let status = serde_json::json!({"status": {
            "startTime": now, "completionTime": now, "succeeded": 1,
            "conditions": [
                {"type": "SuccessCriteriaMet", "status": "True", "lastTransitionTime": now},
                {"type": "Complete", "status": "True", "lastTransitionTime": now}],
        }});
        k.ok(&[
            "patch",
            "job",
            name,
            "--subresource=status",
            "--type=merge",
            "-p",
            &status.to_string(),
        ]);
    }
    common::wait_for("the job with a TTL to be deleted", WAIT, || {
        (!k.run(&["get", "job", "short", "-o", "name"]).ok).then_some(())
    });
    assert!(k.run(&["get", "job", "kept", "-o", "name"]).ok);
}
