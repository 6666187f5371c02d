//! The built-in metrics API (`metrics.k8s.io/v1beta1`) without a node: in discovery (legacy
//! and aggregated) and `kubectl api-resources`, lists and Tables of NodeMetrics/PodMetrics,
//! metrics-server's NotFound for an object without usage, 400 for a bad selector, 405 for
//! writes and watches, and `--disable metrics-server` removing the group so that `kubectl top`
//! says the Metrics API is not available. (Numbers from real pods: `tests/node/metrics_top.rs`.)

use crate::common::kubectl::Kubectl;
use serde_json::Value;

fn raw(k: &Kubectl, path: &str) -> Value {
    serde_json::from_str(&k.ok(&["get", "--raw", path])).expect("JSON")
}

const POD: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: idle, labels: {app: idle}}
spec:
  containers: [{name: c, image: "busybox:1.36"}]
"#;

#[test]
fn the_metrics_api_is_served_and_answers_with_statuses() {
    let (_server, k) = Kubectl::start_server(&[]);

    let resources = k.ok(&[
        "api-resources",
        "--api-group=metrics.k8s.io",
        "--no-headers",
    ]);
    let mut rows: Vec<Vec<&str>> = resources
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    rows.sort();
    assert_eq!(
        rows,
        [
            vec!["nodes", "metrics.k8s.io/v1beta1", "false", "NodeMetrics"],
            vec!["pods", "metrics.k8s.io/v1beta1", "true", "PodMetrics"],
        ],
        "{resources}"
    );
    let groups = raw(&k, "/apis");
    let metrics = groups["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"] == "metrics.k8s.io")
        .unwrap_or_else(|| panic!("metrics.k8s.io in {groups}"));
    assert_eq!(metrics["preferredVersion"]["version"], "v1beta1");
    let list = raw(&k, "/apis/metrics.k8s.io/v1beta1");
    let verbs: Vec<&Value> = list["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["verbs"])
        .collect();
    assert!(
        verbs
            .iter()
            .all(|v| **v == serde_json::json!(["get", "list"])),
        "{list}"
    );

    // No node, so no usage: empty lists, and a pod without usage is not found.
    k.ok_stdin(&["apply", "-f", "-"], Some(POD));
    let nodes = raw(&k, "/apis/metrics.k8s.io/v1beta1/nodes");
    assert_eq!(nodes["kind"], "NodeMetricsList");
    assert_eq!(nodes["apiVersion"], "metrics.k8s.io/v1beta1");
    assert_eq!(nodes["items"], serde_json::json!([]));
    let pods = raw(
        &k,
        "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods?labelSelector=app%3Didle",
    );
    assert_eq!(pods["kind"], "PodMetricsList");
    assert_eq!(pods["items"], serde_json::json!([]));
    k.fails_with(
        &[
            "get",
            "--raw",
            "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/idle",
        ],
        None,
        r#"pods.metrics.k8s.io "default/idle" not found"#,
    );
    k.fails_with(
        &["get", "--raw", "/apis/metrics.k8s.io/v1beta1/nodes/nowhere"],
        None,
        r#"nodes.metrics.k8s.io "nowhere" not found"#,
    );
    k.fails_with(
        &[
            "get",
            "--raw",
            "/apis/metrics.k8s.io/v1beta1/pods?labelSelector=a%20in",
        ],
        None,
        "BadRequest",
    );
    k.fails_with(
        &[
            "get",
            "--raw",
            "/apis/metrics.k8s.io/v1beta1/pods?watch=true",
        ],
        None,
        "MethodNotAllowed",
    );
    k.fails_with(
        &["create", "--raw", "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods", "-f", "-"],
        Some(r#"{"apiVersion":"metrics.k8s.io/v1beta1","kind":"PodMetrics","metadata":{"name":"x"}}"#),
        "MethodNotAllowed",
    );
    // Tables (kubectl get): the group is there, with nothing to print yet.
    let out = k.run(&["get", "podmetrics", "-A"]);
    assert!(
        out.ok && out.stderr.contains("No resources found"),
        "{out:?}"
    );
    // kubectl top finds the API; it only lacks numbers.
    let out = k.run(&["top", "nodes"]);
    assert!(!out.stderr.contains("Metrics API not available"), "{out:?}");
}

#[test]
fn disable_metrics_server_removes_the_group() {
    let (_server, k) = Kubectl::start_server(&["--disable", "metrics-server"]);
    let groups = raw(&k, "/apis");
    assert!(
        !groups["groups"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g["name"] == "metrics.k8s.io"),
        "{groups}"
    );
    k.fails_with(
        &["get", "--raw", "/apis/metrics.k8s.io/v1beta1/nodes"],
        None,
        "NotFound",
    );
    k.fails_with(&["top", "nodes"], None, "Metrics API not available");
    // Other groups are unaffected.
    assert!(k.ok(&["api-versions"]).lines().any(|l| l == "apps/v1"));
}
