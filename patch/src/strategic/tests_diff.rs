//! Two-way and three-way strategic merge patches.

use proptest::prelude::*;
use serde_json::{json, Value};

use super::tests::DEPLOY;
use super::*;
use crate::BuiltinPatchMeta;

fn meta() -> BuiltinPatchMeta {
    BuiltinPatchMeta::for_kind(DEPLOY.0, DEPLOY.1).unwrap()
}

fn two_way(original: Value, modified: Value) -> Value {
    let patch = create_two_way_merge_patch(&original, &modified, &meta()).unwrap();
    // Whatever the patch, it must turn original into modified.
    assert_eq!(
        strategic_merge(&original, &patch, &meta()).unwrap(),
        modified,
        "{patch}"
    );
    patch
}

fn deployment(spec: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}, "spec": spec})
}

fn with_containers(containers: Value) -> Value {
    deployment(json!({"template": {"spec": {"containers": containers}}}))
}

#[test]
fn image_change() {
    let patch = two_way(
        with_containers(json!([{"name": "nginx", "image": "nginx:1.14"}])),
        with_containers(json!([{"name": "nginx", "image": "nginx:1.16"}])),
    );
    assert_eq!(
        patch,
        json!({"spec": {"template": {"spec": {
            "$setElementOrder/containers": [{"name": "nginx"}],
            "containers": [{"name": "nginx", "image": "nginx:1.16"}]}}}})
    );
}

#[test]
fn removed_container_and_label() {
    let mut original = with_containers(json!([{"name": "a"}, {"name": "b"}]));
    original["metadata"]["labels"] = json!({"x": "1", "y": "2"});
    let mut modified = with_containers(json!([{"name": "a"}]));
    modified["metadata"]["labels"] = json!({"x": "1"});
    let patch = two_way(original, modified);
    assert_eq!(
        patch,
        json!({"metadata": {"labels": {"y": null}},
               "spec": {"template": {"spec": {
                   "$setElementOrder/containers": [{"name": "a"}],
                   "containers": [{"name": "b", "$patch": "delete"}]}}}})
    );
}

#[test]
fn reordered_containers() {
    let patch = two_way(
        with_containers(json!([{"name": "a"}, {"name": "b"}])),
        with_containers(json!([{"name": "b"}, {"name": "a"}])),
    );
    assert_eq!(
        patch,
        json!({"spec": {"template": {"spec": {
            "$setElementOrder/containers": [{"name": "b"}, {"name": "a"}]}}}})
    );
}

#[test]
fn finalizer_removed() {
    let original = json!({"metadata": {"finalizers": ["a", "b"]}});
    let patch = two_way(original, json!({"metadata": {"finalizers": ["a", "c"]}}));
    assert_eq!(
        patch,
        json!({"metadata": {"finalizers": ["c"],
                            "$deleteFromPrimitiveList/finalizers": ["b"],
                            "$setElementOrder/finalizers": ["a", "c"]}})
    );
}

#[test]
fn strategy_switch_writes_retain_keys() {
    let patch = two_way(
        deployment(
            json!({"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}}),
        ),
        deployment(json!({"strategy": {"type": "Recreate"}})),
    );
    assert_eq!(
        patch,
        json!({"spec": {"strategy": {"$retainKeys": ["type"], "rollingUpdate": null, "type": "Recreate"}}})
    );
}

#[test]
fn no_change_is_an_empty_patch() {
    let d = with_containers(json!([{"name": "a", "env": [{"name": "X", "value": "1"}]}]));
    assert_eq!(two_way(d.clone(), d), json!({}));
}

#[test]
fn three_way_keeps_what_others_set() {
    let last_applied = deployment(json!({"replicas": 2,
        "template": {"metadata": {"labels": {"app": "web", "old": "1"}},
                     "spec": {"containers": [{"name": "a", "image": "1"}, {"name": "b", "image": "1"}]}}}));
    let modified = deployment(json!({"replicas": 3,
        "template": {"metadata": {"labels": {"app": "web"}},
                     "spec": {"containers": [{"name": "a", "image": "2"}]}}}));
    // The live object: scaled by someone, a sidecar injected, an annotation added.
    let current = deployment(json!({"replicas": 5, "paused": false,
        "template": {"metadata": {"labels": {"app": "web", "old": "1"}, "annotations": {"x": "y"}},
                     "spec": {"containers": [{"name": "a", "image": "1"}, {"name": "b", "image": "1"},
                                             {"name": "sidecar", "image": "s"}]}}}));
    let patch = create_three_way_merge_patch(&last_applied, &modified, &current, &meta()).unwrap();
    assert_eq!(
        patch,
        json!({"spec": {"replicas": 3, "template": {
            "metadata": {"labels": {"old": null}},
            "spec": {"$setElementOrder/containers": [{"name": "a"}],
                     "containers": [{"name": "a", "image": "2"}, {"name": "b", "$patch": "delete"}]}}}})
    );
    let applied = strategic_merge(&current, &patch, &meta()).unwrap();
    assert_eq!(
        applied,
        deployment(json!({"replicas": 3, "paused": false,
            "template": {"metadata": {"labels": {"app": "web"}, "annotations": {"x": "y"}},
                         "spec": {"containers": [{"name": "a", "image": "2"},
                                                 {"name": "sidecar", "image": "s"}]}}}))
    );
}

#[test]
fn three_way_without_last_applied() {
    let modified = deployment(json!({"replicas": 3}));
    let current = deployment(json!({"replicas": 1, "paused": true}));
    let patch = create_three_way_merge_patch(&Value::Null, &modified, &current, &meta()).unwrap();
    assert_eq!(patch, json!({"spec": {"replicas": 3}}));
}

#[test]
fn three_way_strategy_switch() {
    let last = deployment(
        json!({"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}}),
    );
    let modified = deployment(json!({"strategy": {"type": "Recreate"}}));
    let current = deployment(json!({"strategy": {"type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 1, "maxUnavailable": "25%"}}}));
    let patch = create_three_way_merge_patch(&last, &modified, &current, &meta()).unwrap();
    assert_eq!(
        strategic_merge(&current, &patch, &meta()).unwrap(),
        deployment(json!({"strategy": {"type": "Recreate"}}))
    );
}

#[test]
fn three_way_orders_joined_lists_by_set_element_order() {
    let original = with_containers(json!([{"name": "a", "image": "1"},
                                          {"name": "c", "env": [{"name": "A", "value": "x"}]}]));
    let modified = with_containers(json!([{"name": "c", "env": []}, {"name": "a", "image": "2"}]));
    let patch = create_three_way_merge_patch(&original, &modified, &original, &meta()).unwrap();
    assert_eq!(
        patch["spec"]["template"]["spec"]["containers"],
        json!([{"name": "c", "env": [{"name": "A", "$patch": "delete"}]},
               {"name": "a", "image": "2"}])
    );
    assert_eq!(
        strategic_merge(&original, &patch, &meta()).unwrap(),
        modified
    );
}

fn container() -> impl Strategy<Value = Value> {
    (
        prop::sample::select(vec!["1", "2"]),
        prop::collection::btree_map("[A-C]", "[a-b]", 0..3),
    )
        .prop_map(|(image, env)| {
            let env: Vec<Value> = env
                .into_iter()
                .map(|(name, value)| json!({"name": name, "value": value}))
                .collect();
            json!({"image": image, "env": env})
        })
}

/// Deployments with unique container names, env vars, finalizers and labels.
pub(crate) fn arb_deployment() -> impl Strategy<Value = Value> {
    (
        prop::collection::btree_map("[a-d]", container(), 0..4),
        prop::sample::subsequence(vec!["f1", "f2", "f3"], 0..3),
        prop::collection::btree_map("[x-z]", "[0-1]", 0..3),
        any::<bool>(),
        prop::sample::select(vec!["RollingUpdate", "Recreate"]),
    )
        .prop_flat_map(|(containers, finalizers, labels, reverse, strategy)| {
            let mut list: Vec<Value> = containers
                .into_iter()
                .map(|(name, mut c)| {
                    c["name"] = json!(name);
                    c
                })
                .collect();
            if reverse {
                list.reverse();
            }
            let strategy = if strategy == "Recreate" {
                json!({"type": "Recreate"})
            } else {
                json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}})
            };
            Just(json!({"metadata": {"name": "web", "labels": labels, "finalizers": finalizers},
                        "spec": {"strategy": strategy, "template": {"spec": {"containers": list}}}}))
        })
}

proptest! {
    /// A two-way patch applied to its original gives the modified object, order included.
    #[test]
    fn two_way_patch_round_trips(original in arb_deployment(), modified in arb_deployment()) {
        let patch = create_two_way_merge_patch(&original, &modified, &meta()).unwrap();
        prop_assert_eq!(strategic_merge(&original, &patch, &meta()).unwrap(), modified);
    }

    /// With the live object equal to the last-applied configuration, the three-way patch
    /// also gives the modified object.
    #[test]
    fn three_way_patch_round_trips(original in arb_deployment(), modified in arb_deployment()) {
        let patch = create_three_way_merge_patch(&original, &modified, &original, &meta()).unwrap();
        prop_assert_eq!(strategic_merge(&original, &patch, &meta()).unwrap(), modified);
    }
}
