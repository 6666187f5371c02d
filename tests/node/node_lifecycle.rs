//! The node controllers inside `k3rs server` (`node-monitor-grace-period=3s`), with Nodes,
//! Leases and pod statuses written by the test as a kubelet would:
//! - node IPAM gives every Node a distinct `/24` of `--cluster-cidr`, and a deleted Node's
//!   range is handed out again;
//! - a Node whose Lease stops being renewed turns Ready=Unknown ("Kubelet stopped posting node
//!   status."), gets the `unreachable` NoSchedule/NoExecute taints, its pods Ready=False;
//! - taint eviction deletes a pod after its `tolerationSeconds`, keeps one that tolerates the
//!   taint forever, and deletes at once a pod that does not tolerate a NoExecute taint;
//! - the pod garbage collector removes a pod bound to a Node that does not exist;
//! - the readiness taints follow each change of a Node's Ready condition as it happens.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::common;
use crate::common::kubectl::Kubectl;
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(60);

fn get_json(k: &Kubectl, args: &[&str]) -> Value {
    let mut all = vec!["get"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["-o", "json"]);
    serde_json::from_str(&k.ok(&all)).expect("kubectl -o json")
}

fn create(k: &Kubectl, obj: Value) {
    k.ok_stdin(&["create", "-f", "-"], Some(&obj.to_string()));
}

/// RFC 3339 with microseconds, as a Lease's renewTime (MicroTime) wants.
fn now() -> String {
    let out = std::process::Command::new("date")
        .args(["-u", "+%Y-%m-%dT%H:%M:%S.%6NZ"])
        .output()
        .expect("date");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn create_node(k: &Kubectl, name: &str) {
    create(
        k,
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}),
    );
    set_ready(k, name, "True");
}

/// Writes the node's Ready condition as its kubelet would.
fn set_ready(k: &Kubectl, node: &str, status: &str) {
    let (reason, message) = match status {
        "True" => ("KubeletReady", "kubelet is posting ready status"),
        _ => ("KubeletNotReady", "container runtime is down"),
    };
    let status = json!({"status": {"conditions": [{"type": "Ready", "status": status,
        "reason": reason, "message": message,
        "lastHeartbeatTime": now(), "lastTransitionTime": now()}]}});
    k.ok(&[
        "patch",
        "node",
        node,
        "--subresource=status",
        "--type=merge",
        "-p",
        &status.to_string(),
    ]);
}

fn pod_cidr(k: &Kubectl, node: &str) -> String {
    common::wait_for(&format!("a pod CIDR for {node}"), WAIT, || {
        let cidr = k.ok(&["get", "node", node, "-o", "jsonpath={.spec.podCIDR}"]);
        (!cidr.is_empty()).then_some(cidr)
    })
}

fn create_pod(k: &Kubectl, name: &str, node: &str, tolerations: Value) {
    create(
        k,
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
               "spec": {"nodeName": node, "tolerations": tolerations,
                        "containers": [{"name": "c", "image": "pause"}]}}),
    );
    let status = json!({"status": {"phase": "Running", "podIP": "10.42.9.9",
        "conditions": [{"type": "Ready", "status": "True"}]}});
    k.ok(&[
        "patch",
        "pod",
        name,
        "--subresource=status",
        "--type=merge",
        "-p",
        &status.to_string(),
    ]);
}

fn deleting(k: &Kubectl, pod: &str) -> bool {
    let out = k.run(&[
        "get",
        "pod",
        pod,
        "-o",
        "jsonpath={.metadata.deletionTimestamp}",
    ]);
    !out.ok || !out.stdout.is_empty()
}

#[test]
fn ipam_heartbeats_taints_and_evictions() {
    let (_server, k) =
        Kubectl::start_server(&["--kube-controller-manager-arg=node-monitor-grace-period=3s"]);

    // IPAM: distinct /24s of the default cluster CIDR; a deleted node's range comes back.
    create_node(&k, "n1");
    create_node(&k, "n2");
    let (c1, c2) = (pod_cidr(&k, "n1"), pod_cidr(&k, "n2"));
    let mut both = [c1.clone(), c2.clone()];
    both.sort();
    assert_eq!(both, ["10.42.0.0/24", "10.42.1.0/24"]);
    assert_eq!(
        k.ok(&["get", "node", "n1", "-o", "jsonpath={.spec.podCIDRs}"]),
        format!(r#"["{c1}"]"#)
    );
    k.ok(&["delete", "node", "n1"]);
    create_node(&k, "n3");
    assert_eq!(pod_cidr(&k, "n3"), c1);

    // n2's kubelet renews its Lease (every 500 ms) until told to stop.
    create(
        &k,
        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
               "metadata": {"name": "n2", "namespace": "kube-node-lease"},
               "spec": {"holderIdentity": "n2", "leaseDurationSeconds": 40, "renewTime": now()}}),
    );
    let renewing = Arc::new(AtomicBool::new(true));
    let renewer = {
        let renewing = renewing.clone();
        let k = Kubectl {
            bin: k.bin.clone(),
            kubeconfig: k.kubeconfig.clone(),
        };
        std::thread::spawn(move || {
            while renewing.load(Ordering::SeqCst) {
                let patch = json!({"spec": {"renewTime": now()}}).to_string();
                k.run(&[
                    "patch",
                    "lease",
                    "n2",
                    "-n",
                    "kube-node-lease",
                    "--type=merge",
                    "-p",
                    &patch,
                ]);
                std::thread::sleep(Duration::from_millis(500));
            }
        })
    };
    let unreachable = |seconds: Option<i64>| {
        let mut t = json!({"key": "node.kubernetes.io/unreachable", "operator": "Exists",
                           "effect": "NoExecute"});
        if let Some(s) = seconds {
            t["tolerationSeconds"] = json!(s);
        }
        json!([t])
    };
    create_pod(&k, "short", "n2", unreachable(Some(2)));
    create_pod(&k, "forever", "n2", unreachable(None));

    // The kubelet stops: Unknown, tainted, pods not ready, the short toleration runs out.
    renewing.store(false, Ordering::SeqCst);
    renewer.join().unwrap();
    let ready = common::wait_for("n2 to turn Unknown", WAIT, || {
        let node = get_json(&k, &["node", "n2"]);
        let conditions = node["status"]["conditions"].as_array()?.clone();
        let ready = conditions.iter().find(|c| c["type"] == "Ready")?.clone();
        (ready["status"] == "Unknown").then_some(ready)
    });
    assert_eq!(ready["reason"], "NodeStatusUnknown");
    assert_eq!(ready["message"], "Kubelet stopped posting node status.");
    common::wait_for("the unreachable taints", WAIT, || {
        let node = get_json(&k, &["node", "n2"]);
        let mut taints: Vec<(String, String)> = node["spec"]["taints"]
            .as_array()?
            .iter()
            .map(|t| {
                (
                    t["key"].as_str().unwrap_or("").to_string(),
                    t["effect"].as_str().unwrap_or("").to_string(),
                )
            })
            .collect();
        taints.sort();
        (taints
            == vec![
                ("node.kubernetes.io/unreachable".into(), "NoExecute".into()),
                ("node.kubernetes.io/unreachable".into(), "NoSchedule".into()),
            ])
        .then_some(())
    });
    common::wait_for("the pods of n2 to be not ready", WAIT, || {
        let ready = k.ok(&[
            "get",
            "pod",
            "forever",
            "-o",
            r#"jsonpath={.status.conditions[?(@.type=="Ready")].status}"#,
        ]);
        (ready == "False").then_some(())
    });
    common::wait_for("the pod with a 2 s toleration to be evicted", WAIT, || {
        deleting(&k, "short").then_some(())
    });
    assert!(
        !deleting(&k, "forever"),
        "a pod tolerating the taint forever stays"
    );

    // A NoExecute taint the pod does not tolerate evicts it at once.
    create_pod(&k, "intolerant", "n3", json!([]));
    k.ok(&["taint", "node", "n3", "example.com/drain=now:NoExecute"]);
    common::wait_for("the intolerant pod to be evicted", WAIT, || {
        deleting(&k, "intolerant").then_some(())
    });

    // Pod GC: a pod bound to a node that does not exist is removed.
    create_pod(&k, "stray", "ghost", json!([]));
    common::wait_for("the pod on a missing node to be collected", WAIT, || {
        (!k.run(&["get", "pod", "stray", "-o", "name"]).ok).then_some(())
    });
}

/// The node's taints as (key, effect), sorted.
fn taints(k: &Kubectl, node: &str) -> Vec<(String, String)> {
    let node = get_json(k, &["node", node]);
    let mut taints: Vec<(String, String)> = node["spec"]["taints"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| {
            let field = |f: &str| t[f].as_str().unwrap_or_default().to_string();
            (field("key"), field("effect"))
        })
        .collect();
    taints.sort();
    taints
}

/// The readiness taints follow each change of a Node's Ready condition as it is written
/// (upstream's taint pass runs from the node informer's events), not at the next monitor
/// period: with the period at an hour, only the events can set or lift them.
#[test]
fn taints_follow_ready_as_it_changes() {
    let (_server, k) = Kubectl::start_server(&[
        "--kube-controller-manager-arg=node-monitor-period=1h",
        "--kube-controller-manager-arg=node-monitor-grace-period=1h",
    ]);
    let s = |key: &str, effect: &str| (key.to_string(), effect.to_string());
    create_node(&k, "n1");
    set_ready(&k, "n1", "False");
    let not_ready = vec![
        s("node.kubernetes.io/not-ready", "NoExecute"),
        s("node.kubernetes.io/not-ready", "NoSchedule"),
    ];
    common::wait_for("the not-ready taints", WAIT, || {
        (taints(&k, "n1") == not_ready).then_some(())
    });
    // Someone else's taint stays through every change.
    k.ok(&["taint", "node", "n1", "dedicated=db:NoSchedule"]);
    set_ready(&k, "n1", "True");
    common::wait_for("only the user's taint", WAIT, || {
        (taints(&k, "n1") == vec![s("dedicated", "NoSchedule")]).then_some(())
    });
    set_ready(&k, "n1", "Unknown");
    common::wait_for("the unreachable taints", WAIT, || {
        let expected = vec![
            s("dedicated", "NoSchedule"),
            s("node.kubernetes.io/unreachable", "NoExecute"),
            s("node.kubernetes.io/unreachable", "NoSchedule"),
        ];
        (taints(&k, "n1") == expected).then_some(())
    });
}
