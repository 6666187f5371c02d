//! End-to-end, without nodes: the persistent-volume controllers of a real `k3rs server`
//! driven with kubectl. The `local-path` StorageClass is installed as the default and a claim
//! without a class gets it (DefaultStorageClass) and waits for its first consumer; static
//! volumes bind to the smallest fitting one, to a pre-bound one, or not at all; claims and
//! volumes carry the protection finalizers, a claim used by a pod outlives its deletion
//! until the pod is gone, and its Retain volume is then Released; a static Delete volume
//! Fails as upstream without a deleter.

use std::time::Duration;

use crate::common::kubectl::{json, wait_json, Kubectl};
use crate::common::wait_for;
use serde_json::{json as j, Value};

fn apply(k: &Kubectl, obj: Value) {
    k.ok_stdin(&["apply", "-f", "-"], Some(&obj.to_string()));
}

fn pv(name: &str, size: &str, class: &str, extra: Value) -> Value {
    let mut v = j!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
        "spec": {"capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"],
                 "storageClassName": class, "hostPath": {"path": format!("/tmp/k3rs-pv-{name}")}}});
    if let (Some(spec), Value::Object(extra)) = (v["spec"].as_object_mut(), extra) {
        spec.extend(extra);
    }
    v
}

fn pvc(name: &str, size: &str, spec: Value) -> Value {
    let mut v = j!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}}});
    if let (Some(s), Value::Object(extra)) = (v["spec"].as_object_mut(), spec) {
        s.extend(extra);
    }
    v
}

fn wait_phase(k: &Kubectl, kind: &str, name: &str, phase: &str) -> Value {
    wait_json(
        k,
        &format!("{kind} {name} to be {phase}"),
        &["get", kind, name],
        |v| v["status"]["phase"] == phase,
    )
}

fn events_of(k: &Kubectl, name: &str) -> String {
    k.ok(&[
        "get",
        "events",
        "--field-selector",
        &format!("involvedObject.name={name}"),
        "-o",
        "custom-columns=REASON:.reason,MESSAGE:.message",
        "--no-headers",
    ])
}

#[test]
fn binder_protection_and_default_class() {
    let (_server, k) = Kubectl::start_server(&[]);

    // The built-in class, default.
    let class = wait_json(
        &k,
        "the local-path StorageClass",
        &["get", "storageclass"],
        |v| v["items"].as_array().is_some_and(|i| !i.is_empty()),
    );
    let lp = &class["items"][0];
    assert_eq!(lp["metadata"]["name"], "local-path", "{class}");
    assert_eq!(
        lp["metadata"]["annotations"]["storageclass.kubernetes.io/is-default-class"],
        "true"
    );
    assert_eq!(lp["provisioner"], "rancher.io/local-path");
    assert_eq!(lp["volumeBindingMode"], "WaitForFirstConsumer");
    assert_eq!(lp["reclaimPolicy"], "Delete");
    let shown = k.ok(&["get", "storageclass"]);
    assert!(shown.contains("local-path (default)"), "{shown}");

    // A claim without a class gets the default one and waits for a consumer.
    apply(&k, pvc("lazy", "1Gi", j!({})));
    let lazy = json(&k, &["get", "pvc", "lazy"]);
    assert_eq!(lazy["spec"]["storageClassName"], "local-path", "{lazy}");
    assert_eq!(
        lazy["metadata"]["finalizers"],
        j!(["kubernetes.io/pvc-protection"])
    );
    wait_for(
        "the WaitForFirstConsumer event",
        Duration::from_secs(30),
        || {
            events_of(&k, "lazy")
                .contains("waiting for first consumer to be created before binding")
                .then_some(())
        },
    );
    assert_eq!(
        json(&k, &["get", "pvc", "lazy"])["status"]["phase"],
        "Pending"
    );

    // Static volumes: the smallest that fits wins; both sides are written.
    apply(&k, pv("small", "1Gi", "manual", j!({})));
    apply(&k, pv("big", "5Gi", "manual", j!({})));
    apply(&k, pv("tiny", "100Mi", "manual", j!({})));
    wait_phase(&k, "pv", "small", "Available");
    let small = json(&k, &["get", "pv", "small"]);
    assert_eq!(
        small["metadata"]["finalizers"],
        j!(["kubernetes.io/pv-protection"])
    );
    apply(&k, pvc("data", "500Mi", j!({"storageClassName": "manual"})));
    let data = wait_phase(&k, "pvc", "data", "Bound");
    assert_eq!(data["spec"]["volumeName"], "small", "{data}");
    assert_eq!(data["status"]["capacity"]["storage"], "1Gi");
    assert_eq!(
        data["metadata"]["annotations"]["pv.kubernetes.io/bind-completed"],
        "yes"
    );
    let small = wait_phase(&k, "pv", "small", "Bound");
    assert_eq!(small["spec"]["claimRef"]["name"], "data");
    assert_eq!(small["spec"]["claimRef"]["uid"], data["metadata"]["uid"]);

    // Pre-bound to a named volume; a claim nothing fits stays Pending.
    apply(
        &k,
        pvc(
            "named",
            "1Gi",
            j!({"storageClassName": "manual", "volumeName": "big"}),
        ),
    );
    let named = wait_phase(&k, "pvc", "named", "Bound");
    assert_eq!(named["spec"]["volumeName"], "big");
    apply(&k, pvc("huge", "10Gi", j!({"storageClassName": ""})));
    wait_for("the FailedBinding event", Duration::from_secs(30), || {
        events_of(&k, "huge")
            .contains("no persistent volumes available for this claim and no storage class is set")
            .then_some(())
    });
    assert_eq!(
        json(&k, &["get", "pvc", "huge"])["status"]["phase"],
        "Pending"
    );
    assert_eq!(
        json(&k, &["get", "pv", "tiny"])["status"]["phase"],
        "Available"
    );

    // A claim a pod uses outlives its deletion until the pod is gone.
    apply(
        &k,
        j!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "user", "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "busybox"}],
                     "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]}}),
    );
    k.ok(&["delete", "pvc", "data", "--wait=false"]);
    std::thread::sleep(Duration::from_secs(3));
    let held = json(&k, &["get", "pvc", "data"]);
    assert!(held["metadata"]["deletionTimestamp"].is_string(), "{held}");
    assert_eq!(held["status"]["phase"], "Bound");
    // A bound volume is not deleted either.
    k.ok(&["delete", "pv", "big", "--wait=false"]);
    k.ok(&["delete", "pod", "user", "--grace-period=0", "--force"]);
    wait_for("the claim to go", Duration::from_secs(30), || {
        (!k.run(&["get", "pvc", "data"]).ok).then_some(())
    });
    // Its Retain volume is Released, and kept.
    let released = wait_phase(&k, "pv", "small", "Released");
    assert_eq!(released["spec"]["persistentVolumeReclaimPolicy"], "Retain");
    let big = json(&k, &["get", "pv", "big"]);
    assert!(big["metadata"]["deletionTimestamp"].is_string(), "{big}");
    assert_eq!(big["status"]["phase"], "Bound");
    // Once its claim is gone, the deleted volume goes too.
    k.ok(&["delete", "pvc", "named"]);
    wait_for("pv big to go", Duration::from_secs(30), || {
        (!k.run(&["get", "pv", "big"]).ok).then_some(())
    });

    // A static volume with reclaim policy Delete has no deleter: Failed.
    apply(
        &k,
        pv(
            "doomed",
            "1Gi",
            "gone",
            j!({"persistentVolumeReclaimPolicy": "Delete"}),
        ),
    );
    apply(
        &k,
        pvc(
            "brief",
            "1Gi",
            j!({"storageClassName": "gone", "volumeName": "doomed"}),
        ),
    );
    wait_phase(&k, "pvc", "brief", "Bound");
    k.ok(&["delete", "pvc", "brief"]);
    let failed = wait_phase(&k, "pv", "doomed", "Failed");
    assert_eq!(
        failed["status"]["message"],
        "error getting deleter volume plugin for volume \"doomed\": no deletable volume plugin matched"
    );
}

#[test]
fn disable_local_storage_installs_no_class() {
    let (_server, k) = Kubectl::start_server(&["--disable", "local-storage"]);
    apply(&k, pvc("c", "1Gi", j!({})));
    // The controllers run (the claim gets its finalizer and an event), but no class exists.
    wait_for("the FailedBinding event", Duration::from_secs(30), || {
        events_of(&k, "c")
            .contains("no storage class is set")
            .then_some(())
    });
    let c = json(&k, &["get", "pvc", "c"]);
    assert!(c["spec"]["storageClassName"].is_null(), "{c}");
    assert_eq!(k.ok(&["get", "storageclass", "-o", "name"]).trim(), "");
}
