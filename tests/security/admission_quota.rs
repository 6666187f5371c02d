//! ResourceQuota end to end: the quota controller fills in `status`, creates are charged
//! (past `pods: 2` the third pod is refused in Kubernetes' words), compute quotas require
//! requests, and deleting a pod gives its unit back.

use std::time::Duration;

use crate::common;
use crate::common::kubectl::Kubectl;
use serde_json::Value;

fn quota_status(k: &Kubectl, ns: &str, name: &str) -> Value {
    let out = k.ok(&["get", "resourcequota", name, "-n", ns, "-o", "json"]);
    serde_json::from_str::<Value>(&out).expect("json")["status"].clone()
}

fn wait_used(k: &Kubectl, ns: &str, name: &str, resource: &str, want: &str) {
    common::wait_for(
        &format!("{name} to show {resource}={want}"),
        Duration::from_secs(30),
        || (quota_status(k, ns, name)["used"][resource] == want).then_some(()),
    );
}

/// Creates a ResourceQuota from JSON (`kubectl create quota` speaks protobuf).
fn create_quota(k: &Kubectl, ns: &str, name: &str, hard: &str) {
    let q = format!(
        r#"{{"apiVersion": "v1", "kind": "ResourceQuota",
        "metadata": {{"name": "{name}", "namespace": "{ns}"}}, "spec": {{"hard": {hard}}}}}"#
    );
    k.ok_stdin(&["create", "-f", "-"], Some(&q));
}

fn run_pod(k: &Kubectl, ns: &str, name: &str) -> common::kubectl::Out {
    k.run(&["run", name, "-n", ns, "--image=nginx", "--restart=Never"])
}

#[test]
fn pods_past_the_quota_are_refused_and_deletions_give_units_back() {
    let (_server, k) = Kubectl::start_server(&[]);
    k.ok(&["create", "namespace", "q"]);
    create_quota(
        &k,
        "q",
        "two-pods",
        r#"{"pods": "2", "count/configmaps": "10"}"#,
    );
    wait_used(&k, "q", "two-pods", "pods", "0");
    let status = quota_status(&k, "q", "two-pods");
    assert_eq!(status["hard"]["pods"], "2", "{status}");

    for name in ["a", "b"] {
        let out = run_pod(&k, "q", name);
        assert!(out.ok, "{name}: {out:?}");
    }
    // Charged at admission, not only when the controller recounts.
    assert_eq!(quota_status(&k, "q", "two-pods")["used"]["pods"], "2");
    let out = run_pod(&k, "q", "c");
    assert!(!out.ok, "{out:?}");
    assert!(
        out.stderr.contains(r#"pods "c" is forbidden: exceeded quota: two-pods, requested: pods=1, used: pods=2, limited: pods=2"#),
        "{out:?}"
    );
    // A dry run is checked the same way and charges nothing.
    let out = k.run(&[
        "run",
        "d",
        "-n",
        "q",
        "--image=nginx",
        "--restart=Never",
        "--dry-run=server",
    ]);
    assert!(out.stderr.contains("exceeded quota: two-pods"), "{out:?}");

    k.ok(&[
        "delete",
        "pod",
        "a",
        "-n",
        "q",
        "--force",
        "--grace-period=0",
    ]);
    wait_used(&k, "q", "two-pods", "pods", "1");
    let out = run_pod(&k, "q", "c");
    assert!(out.ok, "{out:?}");
    wait_used(&k, "q", "two-pods", "count/configmaps", "1"); // kube-root-ca.crt
}

#[test]
fn compute_quotas_need_requests_and_limit_the_sum() {
    let (_server, k) = Kubectl::start_server(&[]);
    k.ok(&["create", "namespace", "c"]);
    create_quota(&k, "c", "cpu", r#"{"requests.cpu": "1"}"#);
    wait_used(&k, "c", "cpu", "requests.cpu", "0");
    let out = run_pod(&k, "c", "bare");
    assert!(
        out.stderr.contains(
            r#"pods "bare" is forbidden: failed quota: cpu: must specify requests.cpu for: bare"#
        ),
        "{out:?}"
    );
    let pod = |name: &str, cpu: &str| {
        format!(
            r#"{{"apiVersion": "v1", "kind": "Pod", "metadata": {{"name": "{name}", "namespace": "c"}},
            "spec": {{"containers": [{{"name": "c", "image": "nginx",
            "resources": {{"requests": {{"cpu": "{cpu}"}}}}}}]}}}}"#
        )
    };
    k.ok_stdin(&["create", "-f", "-"], Some(&pod("small", "600m")));
    k.fails_with(
        &["create", "-f", "-"],
        Some(&pod("big", "500m")),
        "exceeded quota: cpu, requested: requests.cpu=500m, used: requests.cpu=600m, limited: requests.cpu=1",
    );
    k.ok_stdin(&["create", "-f", "-"], Some(&pod("fits", "400m")));
    assert_eq!(quota_status(&k, "c", "cpu")["used"]["requests.cpu"], "1");
}
