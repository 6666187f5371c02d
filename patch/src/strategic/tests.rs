//! Strategic merge patch on maps and map directives.

use proptest::prelude::*;
use serde_json::{json, Value};

use super::*;
use crate::{BuiltinPatchMeta, NoPatchMeta};

pub(super) fn smp(kind: (&str, &str), original: Value, patch: Value) -> Value {
    let meta = BuiltinPatchMeta::for_kind(kind.0, kind.1).unwrap();
    strategic_merge(&original, &patch, &meta).unwrap()
}

pub(super) fn smp_err(kind: (&str, &str), original: Value, patch: Value) -> StrategicMergeError {
    let meta = BuiltinPatchMeta::for_kind(kind.0, kind.1).unwrap();
    strategic_merge(&original, &patch, &meta).unwrap_err()
}

pub(super) const POD: (&str, &str) = ("v1", "Pod");
pub(super) const DEPLOY: (&str, &str) = ("apps/v1", "Deployment");

#[test]
fn maps_merge_recursively_and_null_deletes() {
    let out = smp(
        POD,
        json!({"metadata": {"name": "p", "labels": {"a": "1", "b": "2"}},
               "spec": {"nodeSelector": {"disk": "ssd"}, "restartPolicy": "Always"}}),
        json!({"metadata": {"labels": {"a": null, "c": "3"}},
               "spec": {"restartPolicy": "Never", "hostname": "h", "missing": null}}),
    );
    assert_eq!(
        out,
        json!({"metadata": {"name": "p", "labels": {"b": "2", "c": "3"}},
               "spec": {"nodeSelector": {"disk": "ssd"}, "restartPolicy": "Never", "hostname": "h"}})
    );
}

#[test]
fn value_of_another_type_replaces() {
    let out = smp(
        POD,
        json!({"spec": {"a": {"x": 1}, "b": [1], "c": "s"}}),
        json!({"spec": {"a": "now a string", "b": {"y": 2}, "c": [3]}}),
    );
    assert_eq!(
        out,
        json!({"spec": {"a": "now a string", "b": {"y": 2}, "c": [3]}})
    );
}

#[test]
fn new_values_lose_nulls_and_directives() {
    let out = smp(
        POD,
        json!({"spec": {}}),
        json!({"spec": {"affinity": {"nodeAffinity": null, "podAffinity": {"$patch": "replace", "x": 1}},
                        "containers": [{"name": "a", "image": "i", "$patch": "delete"}, {"name": "b"}]}}),
    );
    assert_eq!(
        out,
        json!({"spec": {"affinity": {"podAffinity": {"x": 1}}, "containers": [{"name": "b"}]}})
    );
}

#[test]
fn patch_replace_in_a_map() {
    let out = smp(
        POD,
        json!({"spec": {"nodeSelector": {"a": "1", "b": "2"}, "hostname": "h"}}),
        json!({"spec": {"nodeSelector": {"$patch": "replace", "c": "3"}}}),
    );
    assert_eq!(
        out,
        json!({"spec": {"nodeSelector": {"c": "3"}, "hostname": "h"}})
    );
}

#[test]
fn patch_delete_in_a_map() {
    let out = smp(
        POD,
        json!({"spec": {"securityContext": {"runAsUser": 1}, "hostname": "h"}}),
        json!({"spec": {"securityContext": {"$patch": "delete", "runAsUser": 2}}}),
    );
    assert_eq!(
        out,
        json!({"spec": {"securityContext": {}, "hostname": "h"}})
    );
}

#[test]
fn patch_replace_at_the_top() {
    let out = smp(
        POD,
        json!({"metadata": {"name": "p"}, "spec": {"hostname": "h"}}),
        json!({"$patch": "replace", "metadata": {"name": "q"}}),
    );
    assert_eq!(out, json!({"metadata": {"name": "q"}}));
}

#[test]
fn unknown_map_directive_is_a_bad_request() {
    for directive in ["merge", "frobnicate"] {
        let err = smp_err(
            POD,
            json!({"spec": {"nodeSelector": {"a": "1"}}}),
            json!({"spec": {"nodeSelector": {"$patch": directive}}}),
        );
        assert!(
            matches!(&err, StrategicMergeError::BadPatch(m) if m.starts_with("unknown patch type")),
            "{err:?}"
        );
    }
}

#[test]
fn retain_keys_drops_rolling_update_when_switching_to_recreate() {
    // kubectl's patch when the strategy type changes to Recreate.
    let live = json!({"spec": {"replicas": 1, "strategy": {"type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}}});
    let out = smp(
        DEPLOY,
        live,
        json!({"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}}),
    );
    assert_eq!(
        out,
        json!({"spec": {"replicas": 1, "strategy": {"type": "Recreate"}}})
    );
}

#[test]
fn retain_keys_with_null_and_with_kept_fields() {
    let live = json!({"spec": {"strategy": {"type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}}});
    let out = smp(
        DEPLOY,
        live,
        json!({"spec": {"strategy": {"$retainKeys": ["type", "rollingUpdate"],
            "rollingUpdate": {"maxSurge": 2}, "other": null}}}),
    );
    assert_eq!(
        out,
        json!({"spec": {"strategy": {"type": "RollingUpdate",
            "rollingUpdate": {"maxSurge": 2, "maxUnavailable": 0}}}})
    );
}

#[test]
fn retain_keys_must_list_every_patched_key() {
    let err = smp_err(
        DEPLOY,
        json!({"spec": {"strategy": {"type": "RollingUpdate"}}}),
        json!({"spec": {"strategy": {"$retainKeys": ["type"], "rollingUpdate": {"maxSurge": 1}}}}),
    );
    assert_eq!(
        err,
        StrategicMergeError::BadPatch("invalid patch format of retainKeys".into())
    );
    let err = smp_err(
        DEPLOY,
        json!({"spec": {"strategy": {}}}),
        json!({"spec": {"strategy": {"$retainKeys": "type"}}}),
    );
    assert_eq!(
        err,
        StrategicMergeError::BadPatch("invalid patch format of retainKeys".into())
    );
}

#[test]
fn retain_keys_on_volumes_items() {
    // A volume switching source: the emptyDir goes, the name stays.
    let live = json!({"spec": {"volumes": [{"name": "v", "emptyDir": {}}, {"name": "w", "emptyDir": {}}]}});
    let out = smp(
        POD,
        live,
        json!({"spec": {"volumes": [{"name": "v", "$retainKeys": ["name", "hostPath"],
            "hostPath": {"path": "/data"}}]}}),
    );
    assert_eq!(
        out,
        json!({"spec": {"volumes": [{"name": "v", "hostPath": {"path": "/data"}},
                                    {"name": "w", "emptyDir": {}}]}})
    );
}

#[test]
fn unknown_dollar_keys_are_dropped() {
    let out = smp(
        POD,
        json!({"spec": {"a": 1}}),
        json!({"spec": {"$whatever": 2, "b": 3}}),
    );
    assert_eq!(out, json!({"spec": {"a": 1, "b": 3}}));
}

#[test]
fn malformed_directive_keys() {
    let err = smp_err(
        POD,
        json!({"metadata": {"finalizers": ["a"]}}),
        json!({"metadata": {"$deleteFromPrimitiveList": ["a"]}}),
    );
    assert_eq!(
        err,
        StrategicMergeError::BadPatch("invalid patch format of primitive list".into())
    );
    let err = smp_err(
        POD,
        json!({"metadata": {"finalizers": ["a"]}}),
        json!({"metadata": {"$deleteFromPrimitiveList/finalizers": "a"}}),
    );
    assert_eq!(
        err,
        StrategicMergeError::BadPatch("invalid patch format of primitive list".into())
    );
    let err = smp_err(
        POD,
        json!({"spec": {"containers": []}}),
        json!({"spec": {"$setElementOrder/containers": {"name": "a"}}}),
    );
    assert_eq!(
        err,
        StrategicMergeError::BadPatch("invalid patch format of setElementOrder list".into())
    );
}

#[test]
fn non_object_patch_is_a_bad_json_document() {
    let meta = BuiltinPatchMeta::for_kind("v1", "Pod").unwrap();
    let err = strategic_merge(&json!({}), &json!([1]), &meta).unwrap_err();
    assert_eq!(
        err,
        StrategicMergeError::BadPatch("invalid JSON document".into())
    );
    assert_eq!(PatchError::from(err).status_code(), 400);
}

#[test]
fn error_status_codes() {
    assert_eq!(
        PatchError::from(StrategicMergeError::Invalid("x".into())).status_code(),
        422
    );
}

#[test]
fn original_is_not_modified() {
    let original = json!({"metadata": {"labels": {"a": "1"}}});
    let meta = BuiltinPatchMeta::for_kind("v1", "Pod").unwrap();
    let _ = strategic_merge(
        &original,
        &json!({"metadata": {"labels": {"a": null}}}),
        &meta,
    );
    assert_eq!(original, json!({"metadata": {"labels": {"a": "1"}}}));
}

/// Objects without `$` keys, nulls only as map values, lists of scalars only.
fn plain_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        any::<bool>().prop_map(Value::from),
        (0i64..100).prop_map(Value::from),
        "[a-c]{0,2}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec((0i64..5).prop_map(Value::from), 0..3).prop_map(Value::Array),
            prop::collection::btree_map("[a-d]", prop_oneof![Just(Value::Null), inner], 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn plain_object() -> impl Strategy<Value = Value> {
    prop::collection::btree_map("[a-d]", plain_json(), 0..4)
        .prop_map(|m| Value::Object(m.into_iter().collect()))
}

proptest! {
    /// Without directives and merging lists, strategic merge patch is a merge patch.
    #[test]
    fn smp_without_directives_is_a_merge_patch(original in plain_object(), patch in plain_object()) {
        let meta = NoPatchMeta;
        let smp = strategic_merge(&original, &patch, &meta).unwrap();
        let rfc = crate::merge_patch::merge(&original, &patch);
        prop_assert_eq!(smp, rfc);
    }

    /// Applying a strategic merge patch twice is the same as once.
    #[test]
    fn smp_is_idempotent(original in plain_object(), patch in plain_object()) {
        let meta = BuiltinPatchMeta::for_kind("v1", "Pod").unwrap();
        let once = strategic_merge(&original, &patch, &meta).unwrap();
        prop_assert_eq!(strategic_merge(&once, &patch, &meta).unwrap(), once);
    }
}
