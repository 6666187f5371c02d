//! The admission plugins that fill in pods, end to end through kubectl.
//!
//! Priority and DefaultTolerationSeconds:
//! every new pod gets `priority`/`preemptionPolicy` (from its PriorityClass, the global
//! default, or 0) and the not-ready/unreachable NoExecute tolerations (seconds from
//! `--kube-apiserver-arg`, 300 by default) unless it tolerates those taints itself; unknown
//! classes, contradicting priorities and a second global default are refused in
//! kube-apiserver's words.
//!
//! LimitRanger: a namespace's LimitRange defaults containers' requests and limits (and says so
//! in the `kubernetes.io/limit-ranger` annotation) and refuses pods and claims outside its
//! bounds, every violation listed.

use crate::common;
use crate::common::kubectl::Kubectl;
use serde_json::{json, Value};

fn pod_spec(k: &Kubectl, name: &str) -> Value {
    let out = k.ok(&["get", "pod", name, "-o", "json"]);
    serde_json::from_str::<Value>(&out).expect("pod json")["spec"].clone()
}

fn create(k: &Kubectl, obj: &Value) -> common::kubectl::Out {
    k.run_stdin(&["create", "-f", "-"], Some(&obj.to_string()))
}

fn pod(name: &str, spec: Value) -> Value {
    let mut spec = spec;
    spec["containers"] = json!([{"name": "c", "image": "busybox"}]);
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec})
}

fn class(name: &str, value: i64, global_default: bool) -> Value {
    json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
           "metadata": {"name": name}, "value": value, "globalDefault": global_default})
}

#[test]
fn pods_get_priorities_and_default_tolerations() {
    let (_server, k) = Kubectl::start_server(&[
        "--disable-scheduler",
        "--kube-apiserver-arg=default-not-ready-toleration-seconds=7",
    ]);

    // No class anywhere: priority 0, and both default tolerations.
    k.ok(&["run", "plain", "--image=busybox", "--restart=Never"]);
    let spec = pod_spec(&k, "plain");
    assert_eq!(spec["priority"], 0, "{spec}");
    assert_eq!(spec["preemptionPolicy"], "PreemptLowerPriority", "{spec}");
    assert_eq!(spec.get("priorityClassName"), None, "{spec}");
    assert_eq!(
        spec["tolerations"],
        json!([
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists",
             "effect": "NoExecute", "tolerationSeconds": 7},
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists",
             "effect": "NoExecute", "tolerationSeconds": 300},
        ])
    );

    // The pod's own toleration of a taint is kept and not doubled.
    let own = json!({"key": "node.kubernetes.io/unreachable", "operator": "Exists",
                     "effect": "NoExecute", "tolerationSeconds": 2});
    let out = create(&k, &pod("tolerant", json!({"tolerations": [own.clone()]})));
    assert!(out.ok, "{out:?}");
    let tolerations = pod_spec(&k, "tolerant")["tolerations"].clone();
    assert_eq!(
        tolerations,
        json!([own, {"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                     "effect": "NoExecute", "tolerationSeconds": 7}])
    );

    // A named class gives its value; the system classes exist from the start.
    assert!(create(&k, &class("high", 1000, false)).ok);
    assert!(create(&k, &pod("important", json!({"priorityClassName": "high"}))).ok);
    assert_eq!(pod_spec(&k, "important")["priority"], 1000);
    let out = create(
        &k,
        &pod(
            "critical",
            json!({"priorityClassName": "system-node-critical"}),
        ),
    );
    assert!(out.ok, "{out:?}");
    assert_eq!(pod_spec(&k, "critical")["priority"], 2_000_001_000);

    // Refusals, in kube-apiserver's words.
    let out = create(&k, &pod("lost", json!({"priorityClassName": "gold"})));
    assert!(!out.ok);
    assert!(
        out.stderr
            .contains(r#"pods "lost" is forbidden: no PriorityClass with name gold was found"#),
        "{out:?}"
    );
    let out = create(
        &k,
        &pod("liar", json!({"priorityClassName": "high", "priority": 5})),
    );
    assert!(!out.ok);
    assert!(
        out.stderr.contains(
            "the integer value of priority (5) must not be provided in pod spec; priority \
             admission controller computed 1000 from the given PriorityClass name"
        ),
        "{out:?}"
    );

    // A global default applies to pods without a class; only one may exist.
    assert!(create(&k, &class("everyone", 10, true)).ok);
    let out = create(&k, &class("everyone-else", 20, true));
    assert!(!out.ok);
    assert!(
        out.stderr.contains(
            "PriorityClass everyone is already marked as default. Only one default can exist"
        ),
        "{out:?}"
    );
    k.ok(&["run", "defaulted", "--image=busybox", "--restart=Never"]);
    let spec = pod_spec(&k, "defaulted");
    assert_eq!(
        (&spec["priorityClassName"], &spec["priority"]),
        (&json!("everyone"), &json!(10))
    );

    // Updates keep what the create resolved, even when the client leaves it out.
    let mut replaced: Value =
        serde_json::from_str(&k.ok(&["get", "pod", "important", "-o", "json"])).unwrap();
    replaced["spec"].as_object_mut().unwrap().remove("priority");
    replaced["metadata"]["labels"] = json!({"touched": "yes"});
    k.ok_stdin(&["replace", "-f", "-"], Some(&replaced.to_string()));
    let spec = pod_spec(&k, "important");
    assert_eq!(spec["priority"], 1000, "{spec}");
}

fn limit_range(ns: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "bounds", "namespace": ns},
    "spec": {"limits": [
        {"type": "Container", "default": {"cpu": "500m", "memory": "128Mi"},
         "defaultRequest": {"cpu": "100m"}, "min": {"cpu": "50m"}, "max": {"memory": "256Mi"}},
        {"type": "Pod", "max": {"cpu": "1"}},
        {"type": "PersistentVolumeClaim", "min": {"storage": "1Gi"}, "max": {"storage": "5Gi"}},
    ]}})
}

fn container(name: &str, resources: Value) -> Value {
    json!({"name": name, "image": "busybox", "resources": resources})
}

fn pod_in(ns: &str, name: &str, containers: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
           "spec": {"containers": containers}})
}

#[test]
fn limit_ranges_default_and_bound_pods_and_claims() {
    let (_server, k) = Kubectl::start_server(&["--disable-scheduler"]);
    k.ok(&["create", "namespace", "lr"]);
    let out = create(&k, &limit_range("lr"));
    assert!(out.ok, "{out:?}");

    // Defaults fill what a container leaves out; its own values stay.
    let out = create(
        &k,
        &pod_in(
            "lr",
            "filled",
            json!([
                container("app", json!({})),
                container("own", json!({"limits": {"cpu": "200m"}}))
            ]),
        ),
    );
    assert!(out.ok, "{out:?}");
    let pod: Value =
        serde_json::from_str(&k.ok(&["get", "pod", "filled", "-n", "lr", "-o", "json"])).unwrap();
    assert_eq!(
        pod["spec"]["containers"][0]["resources"],
        json!({"limits": {"cpu": "500m", "memory": "128Mi"},
               "requests": {"cpu": "100m", "memory": "128Mi"}})
    );
    // The pod's own limit is its request too (pod defaulting runs before the plugin).
    assert_eq!(
        pod["spec"]["containers"][1]["resources"],
        json!({"limits": {"cpu": "200m", "memory": "128Mi"},
               "requests": {"cpu": "200m", "memory": "128Mi"}})
    );
    assert_eq!(
        pod["metadata"]["annotations"]["kubernetes.io/limit-ranger"],
        "LimitRanger plugin set: cpu, memory request for container app; cpu, memory limit for \
         container app; memory request for container own; memory limit for container own"
    );

    // Out of bounds: every violation is listed.
    let out = create(
        &k,
        &pod_in(
            "lr",
            "greedy",
            json!([
                container(
                    "a",
                    json!({"requests": {"cpu": "10m"},
                                         "limits": {"cpu": "800m", "memory": "512Mi"}})
                ),
                container("b", json!({"limits": {"cpu": "600m"}}))
            ]),
        ),
    );
    assert!(!out.ok);
    assert!(
        out.stderr.contains(
            r#"pods "greedy" is forbidden: [minimum cpu usage per Container is 50m, but request is 10m, maximum memory usage per Container is 256Mi, but limit is 512Mi, maximum cpu usage per Pod is 1, but limit is 1400m]"#
        ),
        "{out:?}"
    );

    // Claims: their storage request is bounded on create and on resize.
    let claim = |size: &str| {
        json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
               "metadata": {"name": "data", "namespace": "lr"},
               "spec": {"accessModes": ["ReadWriteOnce"],
                        "resources": {"requests": {"storage": size}}}})
    };
    let out = create(&k, &claim("10Gi"));
    assert!(!out.ok);
    assert!(
        out.stderr.contains(
            r#"persistentvolumeclaims "data" is forbidden: maximum storage usage per PersistentVolumeClaim is 5Gi, but request is 10Gi"#
        ),
        "{out:?}"
    );
    let out = create(&k, &claim("2Gi"));
    assert!(out.ok, "{out:?}");

    // Elsewhere nothing applies.
    let out = create(
        &k,
        &pod_in("default", "free", json!([container("a", json!({}))])),
    );
    assert!(out.ok, "{out:?}");
    let free: Value = serde_json::from_str(&k.ok(&["get", "pod", "free", "-o", "json"])).unwrap();
    assert_eq!(free["spec"]["containers"][0]["resources"], json!({}));
}
