//! The built-in local-path provisioner on a real node: a claim without a class gets
//! `local-path` (the default), stays Pending until a pod uses it, then the scheduler picks the
//! node, the provisioner creates a hostPath volume under `<data-dir>/storage` on that node and
//! the binder binds it; the pod writes a file, a second pod on the same claim reads it back;
//! deleting the claim deletes the volume (reclaim Delete) and its directory (helper pod).
//! As root, inside a network namespace the test makes (loopback only), with the images of
//! `scripts/build-images.sh`.

use std::path::PathBuf;
use std::time::Duration;

use crate::common;
use crate::common::kubectl::{json, wait_json, Kubectl};
use crate::common::node_lab::NodeLab;
use serde_json::{json as j, Value};

const NODE: &str = "storage-1";

fn pod(name: &str, script: &str) -> String {
    j!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
        "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
                 "containers": [{"name": "c", "image": "docker.io/library/busybox:1.35",
                                 "command": ["sh", "-c", script],
                                 "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
                 "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]}})
    .to_string()
}

fn finished(k: &Kubectl, name: &str) -> Value {
    wait_json(
        k,
        &format!("pod {name} to finish"),
        &["get", "pod", name],
        |p| p["status"]["phase"] == "Succeeded" || p["status"]["phase"] == "Failed",
    )
}

#[test]
fn local_path_volumes_live_across_pods_and_go_with_their_claim() {
    NodeLab::run("localpath", scenario);
}

fn scenario(lab: &NodeLab) {
    let (mut server, k) = lab.start_server(NODE, "127.0.0.1", &[], &[]);
    common::wait_for("the node to be Ready", Duration::from_secs(120), || {
        server.assert_running();
        let n: Value = serde_json::from_str(&k.run(&["get", "node", NODE, "-o", "json"]).stdout)
            .unwrap_or_default();
        n["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
            .then_some(())
    });
    wait_json(&k, "the local-path class", &["get", "storageclass"], |v| {
        v["items"][0]["metadata"]["name"] == "local-path"
    });

    // A claim without a class: local-path, Pending until a pod uses it.
    k.ok_stdin(
        &["apply", "-f", "-"],
        Some(
            &j!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                 "metadata": {"name": "data", "namespace": "default"},
                 "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "64Mi"}}}})
            .to_string(),
        ),
    );
    let claim = json(&k, &["get", "pvc", "data"]);
    assert_eq!(claim["spec"]["storageClassName"], "local-path");
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(
        json(&k, &["get", "pvc", "data"])["status"]["phase"],
        "Pending"
    );
    assert_eq!(
        k.ok(&["get", "pv", "-o", "name"]).trim(),
        "",
        "no volume before a consumer"
    );

    // The first consumer: scheduled, provisioned, bound, mounted; it writes.
    k.ok_stdin(
        &["apply", "-f", "-"],
        Some(&pod("writer", "echo kept > /data/file")),
    );
    let writer = finished(&k, "writer");
    assert_eq!(writer["status"]["phase"], "Succeeded", "{writer}");
    let claim = wait_json(&k, "the claim to be Bound", &["get", "pvc", "data"], |c| {
        c["status"]["phase"] == "Bound"
    });
    assert_eq!(
        claim["metadata"]["annotations"]["volume.kubernetes.io/selected-node"],
        NODE
    );
    let pv_name = claim["spec"]["volumeName"].as_str().unwrap().to_string();
    let uid = claim["metadata"]["uid"].as_str().unwrap();
    assert_eq!(pv_name, format!("pvc-{uid}"));
    let pv = json(&k, &["get", "pv", &pv_name]);
    let dir = PathBuf::from(pv["spec"]["hostPath"]["path"].as_str().unwrap());
    assert_eq!(
        dir,
        server
            .data_dir()
            .join(format!("storage/pvc-{uid}_default_data"))
    );
    assert_eq!(
        pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]
            ["values"],
        j!([NODE])
    );
    assert_eq!(pv["spec"]["persistentVolumeReclaimPolicy"], "Delete");
    assert_eq!(std::fs::read_to_string(dir.join("file")).unwrap(), "kept\n");

    // Another pod on the same claim reads it back.
    k.ok(&["delete", "pod", "writer"]);
    k.ok_stdin(
        &["apply", "-f", "-"],
        Some(&pod("reader", "test \"$(cat /data/file)\" = kept")),
    );
    let reader = finished(&k, "reader");
    assert_eq!(reader["status"]["phase"], "Succeeded", "{reader}");
    assert_eq!(reader["spec"]["nodeName"], NODE);

    // Deleting the claim deletes the volume and its directory.
    k.ok(&["delete", "pod", "reader"]);
    k.ok(&["delete", "pvc", "data", "--wait=false"]);
    common::wait_for("the volume to be deleted", Duration::from_secs(90), || {
        server.assert_running();
        (!k.run(&["get", "pv", &pv_name]).ok).then_some(())
    });
    assert!(!dir.exists(), "{} is still there", dir.display());
    assert!(!k.run(&["get", "pvc", "data"]).ok, "the claim is gone too");
}
