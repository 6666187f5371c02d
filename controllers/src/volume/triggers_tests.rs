use super::*;
use crate::volume::local_path::{helper_name, storage_class};
use k3rs_apimachinery::volume::fixtures::{pv, pvc};
use serde_json::json;

fn claim(name: &str) -> ObjectRef<PersistentVolumeClaim> {
    claim_ref("ns", name)
}

fn volume(name: &str) -> ObjectRef<PersistentVolume> {
    ObjectRef::new(name)
}

/// A pending claim `a` of class local-path selected for node n1, a pending one `b` without
/// class, a bound one `c`, one `d` being deleted.
fn claims() -> Vec<Arc<PersistentVolumeClaim>> {
    [
        pvc(
            "a",
            "1Gi",
            json!({"metadata": {"annotations": {ANN_SELECTED_NODE: "n1"}},
                   "spec": {"storageClassName": "local-path"}}),
        ),
        pvc("b", "1Gi", json!({})),
        pvc(
            "c",
            "1Gi",
            json!({"metadata": {"annotations": {ANN_BIND_COMPLETED: "yes", ANN_SELECTED_NODE: "n1"}},
                   "spec": {"volumeName": "v", "storageClassName": "local-path"}}),
        ),
        pvc(
            "d",
            "1Gi",
            json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}}),
        ),
    ]
    .into_iter()
    .map(Arc::new)
    .collect()
}

#[test]
fn a_bound_volume_concerns_its_claim_only() {
    let v = pv(
        "v",
        "1Gi",
        json!({"spec": {"claimRef": {"namespace": "ns", "name": "c", "uid": "uid-c"}}}),
    );
    assert_eq!(claims_of_volume(&v, &claims()), vec![claim("c")]);
}

#[test]
fn a_free_volume_concerns_every_waiting_claim() {
    assert_eq!(
        claims_of_volume(&pv("v", "1Gi", json!({})), &claims()),
        vec![claim("a"), claim("b")]
    );
    // Pre-bound by name (no UID): the named claim first, then the others that wait.
    let prebound = pv(
        "v",
        "1Gi",
        json!({"spec": {"claimRef": {"namespace": "ns", "name": "b"}}}),
    );
    assert_eq!(
        claims_of_volume(&prebound, &claims()),
        vec![claim("b"), claim("a")]
    );
}

#[test]
fn a_class_concerns_its_waiting_claims() {
    assert_eq!(
        claims_of_class(&storage_class(), &claims()),
        vec![claim("a")]
    );
    let other: StorageClass =
        serde_json::from_value(json!({"metadata": {"name": "other"}, "provisioner": "x"})).unwrap();
    assert_eq!(claims_of_class(&other, &claims()), vec![]);
}

#[test]
fn a_node_concerns_the_waiting_claims_selected_for_it() {
    let node = |name: &str| -> Node {
        serde_json::from_value(json!({"metadata": {"name": name}})).unwrap()
    };
    assert_eq!(claims_of_node(&node("n1"), &claims()), vec![claim("a")]);
    assert_eq!(claims_of_node(&node("n2"), &claims()), vec![]);
}

#[test]
fn a_claim_concerns_the_volume_it_names_and_those_naming_it() {
    let volumes: Vec<Arc<PersistentVolume>> = [
        pv(
            "w",
            "1Gi",
            json!({"spec": {"claimRef": {"namespace": "ns", "name": "c", "uid": "uid-c"}}}),
        ),
        pv(
            "x",
            "1Gi",
            json!({"spec": {"claimRef": {"namespace": "other", "name": "c"}}}),
        ),
        pv(
            "v",
            "1Gi",
            json!({"spec": {"claimRef": {"namespace": "ns", "name": "c"}}}),
        ),
    ]
    .into_iter()
    .map(Arc::new)
    .collect();
    let c = &claims()[2];
    assert_eq!(
        volumes_of_claim(c, &volumes),
        vec![volume("v"), volume("w")]
    );
    assert_eq!(volumes_of_claim(&claims()[1], &volumes), vec![]);
}

#[test]
fn a_volume_names_its_claim_for_the_provisioner() {
    let v = pv(
        "v",
        "1Gi",
        json!({"spec": {"claimRef": {"namespace": "ns", "name": "c", "uid": "uid-c"}}}),
    );
    assert_eq!(claim_of_volume(&v), Some(claim("c")));
    assert_eq!(claim_of_volume(&pv("v", "1Gi", json!({}))), None);
}

#[test]
fn a_pod_concerns_its_claims_in_its_namespace() {
    let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "web", "namespace": "ns"},
        "spec": {"containers": [], "volumes": [
            {"name": "data", "persistentVolumeClaim": {"claimName": "c"}},
            {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
            {"name": "tmp", "emptyDir": {}}]}}))
    .unwrap();
    assert_eq!(claims_of_pod(&pod), vec![claim("c"), claim("web-scratch")]);
}

#[test]
fn a_helper_pod_concerns_the_volume_it_deletes() {
    let pod = |ns: &str, name: &str| -> Pod {
        serde_json::from_value(json!({"metadata": {"name": name, "namespace": ns}})).unwrap()
    };
    let helper = helper_name("pvc-1");
    assert_eq!(
        volume_of_helper(&pod(local_path::HELPER_NAMESPACE, &helper)),
        Some(volume("pvc-1"))
    );
    assert_eq!(volume_of_helper(&pod("default", &helper)), None);
    assert_eq!(
        volume_of_helper(&pod(local_path::HELPER_NAMESPACE, "coredns-1")),
        None
    );
    assert_eq!(
        volume_of_helper(&pod(
            local_path::HELPER_NAMESPACE,
            local_path::HELPER_PREFIX
        )),
        None
    );
}
