//! Strategic merge patch on lists: merge keys, sets, list directives and order.

use serde_json::{json, Value};

use super::tests::{smp, smp_err, DEPLOY, POD};
use super::StrategicMergeError;

fn deployment(containers: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
           "spec": {"replicas": 2, "template": {"spec": {"containers": containers}}}})
}

fn containers_of(d: &Value) -> &Value {
    &d["spec"]["template"]["spec"]["containers"]
}

#[test]
fn kubectl_set_image() {
    let live = deployment(json!([
        {"name": "nginx", "image": "nginx:1.14", "ports": [{"containerPort": 80, "protocol": "TCP"}]},
        {"name": "sidecar", "image": "busybox"}
    ]));
    let patch = json!({"spec": {"template": {"spec": {"containers": [
        {"name": "sidecar", "image": "busybox:1.36"}]}}}});
    let out = smp(DEPLOY, live, patch);
    assert_eq!(
        out,
        deployment(json!([
            {"name": "nginx", "image": "nginx:1.14", "ports": [{"containerPort": 80, "protocol": "TCP"}]},
            {"name": "sidecar", "image": "busybox:1.36"}
        ]))
    );
}

#[test]
fn kubectl_patch_adds_a_container_port() {
    let live = deployment(json!([{"name": "nginx", "image": "nginx",
        "ports": [{"containerPort": 80, "protocol": "TCP"}]}]));
    let patch = json!({"spec": {"template": {"spec": {"containers": [
        {"name": "nginx", "ports": [{"containerPort": 443}]}]}}}});
    let out = smp(DEPLOY, live, patch);
    // Patched items come before the live-only items they are not ordered against.
    assert_eq!(
        containers_of(&out),
        &json!([{"name": "nginx", "image": "nginx",
                 "ports": [{"containerPort": 443}, {"containerPort": 80, "protocol": "TCP"}]}])
    );
}

#[test]
fn new_items_are_placed_before_unpatched_live_items() {
    let live = deployment(json!([{"name": "a"}, {"name": "b"}]));
    let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": "c"}]}}}});
    let out = smp(DEPLOY, live, patch);
    assert_eq!(
        containers_of(&out),
        &json!([{"name": "c"}, {"name": "a"}, {"name": "b"}])
    );
}

#[test]
fn patched_items_keep_their_live_order() {
    let live = deployment(json!([{"name": "a"}, {"name": "b"}, {"name": "c"}]));
    let patch = json!({"spec": {"template": {"spec": {"containers": [
        {"name": "c", "image": "c2"}, {"name": "a", "image": "a2"}]}}}});
    let out = smp(DEPLOY, live, patch);
    // Patch order among patched items (c before a); b stays before c as it was live.
    assert_eq!(
        containers_of(&out),
        &json!([{"name": "b"}, {"name": "c", "image": "c2"}, {"name": "a", "image": "a2"}])
    );
}

#[test]
fn delete_a_list_item() {
    let live = deployment(json!([{"name": "a"}, {"name": "b"}, {"name": "a"}]));
    let patch = json!({"spec": {"template": {"spec": {"containers": [
        {"name": "a", "$patch": "delete"}]}}}});
    assert_eq!(
        containers_of(&smp(DEPLOY, live, patch)),
        &json!([{"name": "b"}])
    );
}

#[test]
fn delete_needs_the_merge_key() {
    let live = deployment(json!([{"name": "a"}]));
    let patch = json!({"spec": {"template": {"spec": {"containers": [{"$patch": "delete"}]}}}});
    let err = smp_err(DEPLOY, live, patch);
    assert!(
        matches!(&err, StrategicMergeError::BadPatch(m) if m.contains("does not contain declared merge key: name")),
        "{err:?}"
    );
}

#[test]
fn replace_a_whole_list() {
    let live = deployment(json!([{"name": "a", "image": "x"}, {"name": "b"}]));
    let patch = json!({"spec": {"template": {"spec": {"containers": [
        {"name": "c", "image": "y"}, {"$patch": "replace"}]}}}});
    assert_eq!(
        containers_of(&smp(DEPLOY, live, patch)),
        &json!([{"name": "c", "image": "y"}])
    );
}

#[test]
fn merge_directive_in_a_list_is_refused() {
    let live = deployment(json!([{"name": "a"}]));
    let patch = json!({"spec": {"template": {"spec": {"containers": [{"$patch": "merge"}]}}}});
    assert_eq!(
        smp_err(DEPLOY, live, patch),
        StrategicMergeError::BadPatch("merging lists cannot yet be specified in the patch".into())
    );
}

#[test]
fn set_element_order_reorders() {
    let live = deployment(json!([{"name": "a"}, {"name": "b", "image": "b"}, {"name": "c"}]));
    let patch = json!({"spec": {"template": {"spec": {
        "$setElementOrder/containers": [{"name": "c"}, {"name": "b"}, {"name": "a"}]}}}});
    assert_eq!(
        containers_of(&smp(DEPLOY, live, patch)),
        &json!([{"name": "c"}, {"name": "b", "image": "b"}, {"name": "a"}])
    );
}

#[test]
fn set_element_order_with_changes_and_deletions() {
    // What kubectl apply sends after removing b and changing c.
    let live = deployment(json!([{"name": "a"}, {"name": "b"}, {"name": "c", "image": "old"}]));
    let patch = json!({"spec": {"template": {"spec": {
        "$setElementOrder/containers": [{"name": "c"}, {"name": "a"}],
        "containers": [{"name": "c", "image": "new"}, {"name": "b", "$patch": "delete"}]}}}});
    assert_eq!(
        containers_of(&smp(DEPLOY, live, patch)),
        &json!([{"name": "c", "image": "new"}, {"name": "a"}])
    );
}

#[test]
fn set_element_order_leaves_server_only_items_in_place() {
    let live = deployment(json!([{"name": "a"}, {"name": "b"}, {"name": "c"}]));
    let patch = json!({"spec": {"template": {"spec": {
        "$setElementOrder/containers": [{"name": "c"}, {"name": "a"}]}}}});
    assert_eq!(
        containers_of(&smp(DEPLOY, live, patch)),
        &json!([{"name": "b"}, {"name": "c"}, {"name": "a"}])
    );
}

#[test]
fn set_element_order_must_match_the_patch_order() {
    let live = deployment(json!([{"name": "a"}, {"name": "b"}]));
    let patch = json!({"spec": {"template": {"spec": {
        "$setElementOrder/containers": [{"name": "a"}, {"name": "b"}],
        "containers": [{"name": "b", "image": "x"}, {"name": "a", "image": "y"}]}}}});
    let err = smp_err(DEPLOY, live, patch);
    assert!(
        matches!(&err, StrategicMergeError::BadPatch(m) if m.starts_with("The order in patch list")),
        "{err:?}"
    );
}

#[test]
fn set_element_order_creates_a_missing_list() {
    let live = json!({"spec": {}});
    let patch = json!({"spec": {"$setElementOrder/containers": [{"name": "b"}, {"name": "a"}],
                                "containers": [{"name": "b"}, {"name": "a"}]}});
    assert_eq!(
        smp(POD, live, patch),
        json!({"spec": {"containers": [{"name": "b"}, {"name": "a"}]}})
    );
}

#[test]
fn finalizers_are_a_set() {
    let live = json!({"metadata": {"finalizers": ["a", "b"]}});
    let out = smp(POD, live, json!({"metadata": {"finalizers": ["b", "c"]}}));
    assert_eq!(out, json!({"metadata": {"finalizers": ["a", "b", "c"]}}));
}

#[test]
fn delete_from_primitive_list() {
    let live = json!({"metadata": {"finalizers": ["a", "b", "c"]}});
    let out = smp(
        POD,
        live,
        json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a", "c", "zz"],
                            "finalizers": ["d"]}}),
    );
    assert_eq!(out, json!({"metadata": {"finalizers": ["d", "b"]}}));
}

#[test]
fn delete_from_a_missing_primitive_list_is_a_no_op() {
    let live = json!({"metadata": {"name": "p"}});
    let out = smp(
        POD,
        live.clone(),
        json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}}),
    );
    assert_eq!(out, live);
}

#[test]
fn set_element_order_of_a_primitive_list() {
    let live = json!({"metadata": {"finalizers": ["a", "b"]}});
    let out = smp(
        POD,
        live,
        json!({"metadata": {"$setElementOrder/finalizers": ["b", "a"]}}),
    );
    assert_eq!(out, json!({"metadata": {"finalizers": ["b", "a"]}}));
}

#[test]
fn lists_without_strategy_are_replaced() {
    let live = json!({"spec": {"tolerations": [{"key": "a"}, {"key": "b"}],
                               "containers": [{"name": "c", "args": ["x", "y"], "envFrom": [{"prefix": "P"}]}]}});
    let out = smp(
        POD,
        live,
        json!({"spec": {"tolerations": [{"key": "z"}],
                        "containers": [{"name": "c", "args": ["y"], "envFrom": [{"prefix": "Q"}]}]}}),
    );
    assert_eq!(
        out,
        json!({"spec": {"tolerations": [{"key": "z"}],
                        "containers": [{"name": "c", "args": ["y"], "envFrom": [{"prefix": "Q"}]}]}})
    );
}

#[test]
fn node_taints_are_replaced() {
    let node = ("v1", "Node");
    let live = json!({"spec": {"taints": [{"key": "a", "effect": "NoSchedule"}]}});
    let out = smp(
        node,
        live,
        json!({"spec": {"unschedulable": true, "taints": [{"key": "b", "effect": "NoExecute"}]}}),
    );
    assert_eq!(
        out,
        json!({"spec": {"unschedulable": true, "taints": [{"key": "b", "effect": "NoExecute"}]}})
    );
}

#[test]
fn every_merge_key_of_the_pod_spec() {
    let live = json!({"spec": {
        "containers": [{"name": "c",
            "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
            "volumeMounts": [{"mountPath": "/a", "name": "v"}, {"mountPath": "/b", "name": "w"}],
            "volumeDevices": [{"devicePath": "/dev/a", "name": "d"}]}],
        "initContainers": [{"name": "i", "image": "x"}],
        "ephemeralContainers": [{"name": "e", "image": "x"}],
        "imagePullSecrets": [{"name": "s1"}],
        "hostAliases": [{"ip": "10.0.0.1", "hostnames": ["a"]}],
        "topologySpreadConstraints": [{"topologyKey": "zone", "maxSkew": 1}],
        "volumes": [{"name": "v", "emptyDir": {}}]}});
    let patch = json!({"spec": {
        "containers": [{"name": "c",
            "env": [{"name": "B", "value": "3"}],
            "volumeMounts": [{"mountPath": "/b", "readOnly": true}],
            "volumeDevices": [{"devicePath": "/dev/a", "name": "d2"}]}],
        "initContainers": [{"name": "i", "image": "y"}],
        "ephemeralContainers": [{"name": "e", "image": "y"}],
        "imagePullSecrets": [{"name": "s1"}, {"name": "s2"}],
        "hostAliases": [{"ip": "10.0.0.1", "hostnames": ["b"]}],
        "topologySpreadConstraints": [{"topologyKey": "zone", "maxSkew": 2}],
        "volumes": [{"name": "v", "emptyDir": {"medium": "Memory"}}]}});
    assert_eq!(
        smp(POD, live, patch),
        json!({"spec": {
            "containers": [{"name": "c",
                "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "3"}],
                "volumeMounts": [{"mountPath": "/a", "name": "v"},
                                 {"mountPath": "/b", "name": "w", "readOnly": true}],
                "volumeDevices": [{"devicePath": "/dev/a", "name": "d2"}]}],
            "initContainers": [{"name": "i", "image": "y"}],
            "ephemeralContainers": [{"name": "e", "image": "y"}],
            "imagePullSecrets": [{"name": "s1"}, {"name": "s2"}],
            "hostAliases": [{"ip": "10.0.0.1", "hostnames": ["b"]}],
            "topologySpreadConstraints": [{"topologyKey": "zone", "maxSkew": 2}],
            "volumes": [{"name": "v", "emptyDir": {"medium": "Memory"}}]}})
    );
}

#[test]
fn service_ports_node_addresses_conditions_owner_references() {
    let svc = smp(
        ("v1", "Service"),
        json!({"spec": {"ports": [{"port": 80, "targetPort": 8080}, {"port": 443}]}}),
        json!({"spec": {"ports": [{"port": 80, "targetPort": 9090}]}}),
    );
    assert_eq!(
        svc,
        json!({"spec": {"ports": [{"port": 80, "targetPort": 9090}, {"port": 443}]}})
    );

    let node = smp(
        ("v1", "Node"),
        json!({"status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.1"},
                                        {"type": "Hostname", "address": "n"}],
                          "conditions": [{"type": "Ready", "status": "False"}]}}),
        json!({"status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.2"}],
                          "conditions": [{"type": "Ready", "status": "True"}]}}),
    );
    assert_eq!(
        node,
        json!({"status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.2"},
                                        {"type": "Hostname", "address": "n"}],
                          "conditions": [{"type": "Ready", "status": "True"}]}})
    );

    let pod = smp(
        POD,
        json!({"metadata": {"ownerReferences": [{"uid": "1", "name": "rs"}]},
               "status": {"conditions": [{"type": "Ready", "status": "False"},
                                         {"type": "PodScheduled", "status": "True"}]}}),
        json!({"metadata": {"ownerReferences": [{"uid": "2", "name": "other"}]},
               "status": {"conditions": [{"type": "Ready", "status": "True"}]}}),
    );
    assert_eq!(
        pod,
        json!({"metadata": {"ownerReferences": [{"uid": "2", "name": "other"}, {"uid": "1", "name": "rs"}]},
               "status": {"conditions": [{"type": "Ready", "status": "True"},
                                         {"type": "PodScheduled", "status": "True"}]}})
    );
}

#[test]
fn rollout_restart_and_pause() {
    let live = deployment(json!([{"name": "a"}]));
    let patch = json!({"spec": {"paused": true, "template": {"metadata": {"annotations": {
        "kubectl.kubernetes.io/restartedAt": "2024-01-01T00:00:00Z"}}}}});
    let out = smp(DEPLOY, live, patch);
    assert_eq!(out["spec"]["paused"], json!(true));
    assert_eq!(
        out["spec"]["template"]["metadata"]["annotations"]["kubectl.kubernetes.io/restartedAt"],
        json!("2024-01-01T00:00:00Z")
    );
    assert_eq!(containers_of(&out), &json!([{"name": "a"}]));
}

#[test]
fn list_shape_errors() {
    let err = smp_err(
        POD,
        json!({"metadata": {"finalizers": ["a"]}}),
        json!({"metadata": {"finalizers": [["b"]]}}),
    );
    assert_eq!(
        err,
        StrategicMergeError::Invalid("lists of lists are not supported".into())
    );
    let err = smp_err(
        POD,
        json!({"metadata": {"finalizers": ["a"]}}),
        json!({"metadata": {"finalizers": [1]}}),
    );
    assert!(matches!(err, StrategicMergeError::BadPatch(_)), "{err:?}");
    let err = smp_err(
        POD,
        json!({"metadata": {"finalizers": [{"a": 1}]}}),
        json!({"metadata": {"finalizers": [{"b": 1}]}}),
    );
    assert!(
        matches!(&err, StrategicMergeError::BadPatch(m) if m.starts_with("cannot merge lists without merge key")),
        "{err:?}"
    );
    let err = smp_err(
        POD,
        json!({"spec": {"containers": [{"name": "a"}]}}),
        json!({"spec": {"containers": [{"image": "x"}]}}),
    );
    assert!(
        matches!(&err, StrategicMergeError::BadPatch(m) if m.contains("merge key: name")),
        "{err:?}"
    );
}

#[test]
fn empty_patch_list_keeps_a_merging_list() {
    let live = deployment(json!([{"name": "a"}]));
    let patch = json!({"spec": {"template": {"spec": {"containers": []}}}});
    assert_eq!(
        containers_of(&smp(DEPLOY, live, patch)),
        &json!([{"name": "a"}])
    );
}
