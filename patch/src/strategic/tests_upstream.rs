//! Behaviour upstream documents for strategic merge patch (its `MergeItem` test type), on a
//! schema of the same shape: `mergingList` (by `name`), `mergingIntList` (set),
//! `nonMergingList`, `nonMergingIntList`, `simpleMap`, `retainKeysMap` (retainKeys),
//! `retainKeysMergingList` (by `name`, retainKeys).

use serde_json::{json, Value};

use super::*;
use crate::{FieldMeta, ListKind, PatchMeta};

struct MergeItemMeta;

impl PatchMeta for MergeItemMeta {
    fn field(&self, path: &[&str]) -> FieldMeta {
        match path.last().copied() {
            Some("mergingList") => FieldMeta::keyed("name"),
            Some("retainKeysMergingList") => FieldMeta {
                retain_keys: true,
                ..FieldMeta::keyed("name")
            },
            Some("mergingIntList") => FieldMeta {
                list: ListKind::Set,
                ..FieldMeta::default()
            },
            Some("retainKeysMap") => FieldMeta {
                retain_keys: true,
                ..FieldMeta::default()
            },
            _ => FieldMeta::default(),
        }
    }
}

fn patched(original: Value, patch: Value) -> Result<Value> {
    strategic_merge(&original, &patch, &MergeItemMeta)
}

/// (description, original, patch, result)
fn cases() -> Vec<(&'static str, Value, Value, Value)> {
    vec![
        (
            "set union",
            json!({"mergingIntList": [1, 2]}),
            json!({"mergingIntList": [2, 3]}),
            json!({"mergingIntList": [1, 2, 3]}),
        ),
        (
            "delete a nested map",
            json!({"simpleMap": {"key1": 1, "key2": 1}}),
            json!({"simpleMap": {"$patch": "delete"}}),
            json!({"simpleMap": {}}),
        ),
        (
            "replace a merging list by nothing",
            json!({"mergingList": [{"name": 1}, {"name": 2}]}),
            json!({"mergingList": [{"$patch": "replace"}]}),
            json!({"mergingList": []}),
        ),
        (
            "empty merging lists",
            json!({"mergingList": []}),
            json!({"mergingList": []}),
            json!({"mergingList": []}),
        ),
        (
            "replace a whole map by nothing",
            json!({"name": 1, "value": 1}),
            json!({"$patch": "replace"}),
            json!({}),
        ),
        (
            "replace a whole map",
            json!({"name": 1, "value": 1}),
            json!({"other": "a", "$patch": "replace"}),
            json!({"other": "a"}),
        ),
        (
            "delete duplicates",
            json!({"mergingList": [{"name": 1}, {"name": 1}, {"name": 2, "value": "a"}, {"name": 3}, {"name": 3}]}),
            json!({"mergingList": [{"name": 1, "$patch": "delete"}, {"name": 3, "$patch": "delete"}]}),
            json!({"mergingList": [{"name": 2, "value": "a"}]}),
        ),
        (
            "retainKeys map without directive merges",
            json!({"retainKeysMap": {"name": "foo", "value": "a"}}),
            json!({"retainKeysMap": {"value": null, "other": "b"}}),
            json!({"retainKeysMap": {"name": "foo", "other": "b"}}),
        ),
        (
            "retainKeys list without directive merges",
            json!({"retainKeysMergingList": [{"name": "bar"}, {"name": "foo", "value": "a"}]}),
            json!({"retainKeysMergingList": [{"name": "foo", "value": "b"}]}),
            json!({"retainKeysMergingList": [{"name": "bar"}, {"name": "foo", "value": "b"}]}),
        ),
        (
            "patch order wins among patched items",
            json!({"mergingList": [{"name": 1}, {"name": 2, "value": "b"}, {"name": 3}]}),
            json!({"mergingList": [{"name": 3, "value": "c"}, {"name": 1, "value": "a"}, {"name": 2, "other": "x"}]}),
            json!({"mergingList": [{"name": 3, "value": "c"}, {"name": 1, "value": "a"},
                                {"name": 2, "value": "b", "other": "x"}]}),
        ),
        (
            "server-only items keep their place",
            json!({"mergingList": [{"name": 1}, {"name": 2, "value": "b"}, {"name": 3}]}),
            json!({"mergingList": [{"name": 3, "value": "c"}, {"name": 1, "value": "a"}]}),
            json!({"mergingList": [{"name": 2, "value": "b"}, {"name": 3, "value": "c"}, {"name": 1, "value": "a"}]}),
        ),
        (
            "patch order in a set",
            json!({"mergingIntList": [1, 2, 3]}),
            json!({"mergingIntList": [3, 1, 2]}),
            json!({"mergingIntList": [3, 1, 2]}),
        ),
        (
            "partial patch order in a set",
            json!({"mergingIntList": [1, 2, 3]}),
            json!({"mergingIntList": [3, 1]}),
            json!({"mergingIntList": [2, 3, 1]}),
        ),
        (
            "$setElementOrder naming a missing item",
            json!({"mergingList": [{"name": 1}, {"name": 3}]}),
            json!({"$setElementOrder/mergingList": [{"name": 3}, {"name": 2}, {"name": 1}],
                "mergingList": [{"name": 3, "value": 3}, {"name": 1, "value": 1}]}),
            json!({"mergingList": [{"name": 3, "value": 3}, {"name": 1, "value": 1}]}),
        ),
        (
            "$setElementOrder naming a missing scalar",
            json!({"mergingIntList": [1, 3]}),
            json!({"$setElementOrder/mergingIntList": [3, 2, 1]}),
            json!({"mergingIntList": [3, 1]}),
        ),
        (
            "deleting a missing scalar",
            json!({"mergingIntList": [1, 2]}),
            json!({"$deleteFromPrimitiveList/mergingIntList": [3]}),
            json!({"mergingIntList": [1, 2]}),
        ),
        (
            "deleting from a null list",
            json!({"mergingIntList": null}),
            json!({"$deleteFromPrimitiveList/mergingIntList": [3]}),
            json!({"mergingIntList": null}),
        ),
        (
            "deleting from a missing list",
            json!({"foo": ["bar"]}),
            json!({"$deleteFromPrimitiveList/mergingIntList": [3]}),
            json!({"foo": ["bar"]}),
        ),
        (
            "deleting from a merging set",
            json!({"mergingIntList": [1, 2, 3]}),
            json!({"$deleteFromPrimitiveList/mergingIntList": [2]}),
            json!({"mergingIntList": [1, 3]}),
        ),
        (
            "deleting from a non-merging list",
            json!({"nonMergingIntList": [1, 2, 3]}),
            json!({"$deleteFromPrimitiveList/nonMergingIntList": [2]}),
            json!({"nonMergingIntList": [1, 3]}),
        ),
        (
            "directives in a new list are applied",
            json!({"name": "hi"}),
            json!({"mergingList": [{"name": "hello"}, {"$patch": "delete", "name": "doesntexist"}]}),
            json!({"name": "hi", "mergingList": [{"name": "hello"}]}),
        ),
        (
            "new and deleted scalars with order",
            json!({"mergingIntList": [1, 2, 3, 4]}),
            json!({"$setElementOrder/mergingIntList": [1, 2, 4],
                "$deleteFromPrimitiveList/mergingIntList": [3]}),
            json!({"mergingIntList": [1, 2, 4]}),
        ),
        (
            "merging lists of maps with order",
            json!({"mergingList": [{"name": 1, "other": "a"}, {"name": 2, "value": 2, "other": "b"}]}),
            json!({"$setElementOrder/mergingList": [{"name": 4}, {"name": 1}, {"name": 2}, {"name": 3}],
                "mergingList": [{"name": 4, "value": 4}, {"name": 3, "value": 3}]}),
            json!({"mergingList": [{"name": 4, "value": 4}, {"name": 1, "other": "a"},
                                {"name": 2, "value": 2, "other": "b"}, {"name": 3, "value": 3}]}),
        ),
        (
            "nonMergingList is replaced",
            json!({"nonMergingList": [{"name": 1}, {"name": 2}]}),
            json!({"nonMergingList": [{"name": 3}]}),
            json!({"nonMergingList": [{"name": 3}]}),
        ),
    ]
}

#[test]
fn documented_behaviour() {
    for (description, original, patch, result) in cases() {
        assert_eq!(patched(original, patch).unwrap(), result, "{description}");
    }
}

#[test]
fn documented_errors() {
    let err = patched(
        json!({"mergingIntList": [1, 3, 2]}),
        json!({"$setElementOrder/mergingIntList": [1, 2, 3], "mergingIntList": [3, 1]}),
    )
    .unwrap_err();
    assert!(err.to_string().contains("doesn't match"), "{err}");
    let err = patched(
        json!({"mergingList": [{"name": 1, "value": "a"}]}),
        json!({"mergingList": [{"value": "b"}]}),
    )
    .unwrap_err();
    assert!(
        err.to_string()
            .contains("does not contain declared merge key"),
        "{err}"
    );
}

#[test]
fn documented_patch_creation() {
    // (original, modified, two-way patch)
    let cases = [
        (
            Value::Null,
            json!({"name": 1, "value": 1}),
            json!({"name": 1, "value": 1}),
        ),
        (json!({"name": 1}), json!({"name": 1}), json!({})),
        (
            json!({"name": 1}),
            json!({"value": 1}),
            json!({"name": null, "value": 1}),
        ),
        (
            json!({"name": 2}),
            json!({"name": 1, "other": null}),
            json!({"name": 1, "other": null}),
        ),
        (
            json!({"mergingList": [{"name": 1}, {"name": 2}]}),
            json!({"mergingList": []}),
            json!({"mergingList": [{"name": 1, "$patch": "delete"}, {"name": 2, "$patch": "delete"}]}),
        ),
        (
            json!({"mergingList": []}),
            json!({"mergingList": []}),
            json!({}),
        ),
        (
            json!({"mergingIntList": [1, 2, 3]}),
            json!({"mergingIntList": [1, 2, 4]}),
            json!({"$setElementOrder/mergingIntList": [1, 2, 4],
                "$deleteFromPrimitiveList/mergingIntList": [3], "mergingIntList": [4]}),
        ),
        (
            json!({"mergingList": [{"name": 1}, {"name": 2, "value": 2}]}),
            json!({"mergingList": [{"name": 4, "value": 4}, {"name": 1}, {"name": 2, "value": 2}, {"name": 3, "value": 3}]}),
            json!({"$setElementOrder/mergingList": [{"name": 4}, {"name": 1}, {"name": 2}, {"name": 3}],
                "mergingList": [{"name": 4, "value": 4}, {"name": 3, "value": 3}]}),
        ),
        (
            json!({"name": "a", "retainKeysMap": {"name": "foo"}}),
            json!({"name": "a", "value": "b", "retainKeysMap": {"name": "foo"}}),
            json!({"value": "b"}),
        ),
        (
            json!({"nonMergingIntList": [1, 2]}),
            json!({"nonMergingIntList": [2, 3]}),
            json!({"nonMergingIntList": [2, 3]}),
        ),
    ];
    for (original, modified, expected) in cases {
        let patch = create_two_way_merge_patch(&original, &modified, &MergeItemMeta).unwrap();
        assert_eq!(patch, expected, "{original} -> {modified}");
    }
}

#[test]
fn documented_three_way_patches() {
    // (last applied, modified, current, three-way patch, result)
    let cases = [
        (
            Value::Null,
            json!({"name": 1, "value": 1}),
            json!({"name": 1, "other": "a"}),
            json!({"value": 1}),
            json!({"name": 1, "value": 1, "other": "a"}),
        ),
        (
            json!({"name": 1}),
            json!({"name": 1, "value": 1}),
            json!({"name": "a", "other": "a"}),
            json!({"name": 1, "value": 1}),
            json!({"name": 1, "value": 1, "other": "a"}),
        ),
        (
            json!({"simpleMap": {"key1": 1, "key2": 1}}),
            json!({"simpleMap": {"key1": 1}}),
            json!({"simpleMap": {"key1": "a", "key2": 1, "other": "a"}}),
            json!({"simpleMap": {"key1": 1, "key2": null}}),
            json!({"simpleMap": {"key1": 1, "other": "a"}}),
        ),
        (
            json!({"name": 1, "value": 1}),
            json!({"other": "a"}),
            json!({"name": 1, "value": 1, "other": "a"}),
            json!({"name": null, "value": null}),
            json!({"other": "a"}),
        ),
        (
            json!({"mergingList": [{"name": 1}, {"name": 2}]}),
            json!({"mergingList": []}),
            json!({"mergingList": []}),
            json!({"mergingList": [{"name": 1, "$patch": "delete"}, {"name": 2, "$patch": "delete"}]}),
            json!({"mergingList": []}),
        ),
        (
            json!({"mergingIntList": [1, 2, 3]}),
            json!({"mergingIntList": [1, 2]}),
            json!({"mergingIntList": [1, 2, 3, 4]}),
            json!({"$setElementOrder/mergingIntList": [1, 2],
                "$deleteFromPrimitiveList/mergingIntList": [3]}),
            json!({"mergingIntList": [1, 2, 4]}),
        ),
        (
            json!({"mergingList": [{"name": 1}, {"name": 2, "value": 2}]}),
            json!({"mergingList": [{"name": 1}, {"name": 2, "value": 2}, {"name": 3, "value": 3}]}),
            json!({"mergingList": [{"name": 1, "other": "a"}, {"name": 2, "value": 3, "other": "b"}]}),
            json!({"$setElementOrder/mergingList": [{"name": 1}, {"name": 2}, {"name": 3}],
                "mergingList": [{"name": 2, "value": 2}, {"name": 3, "value": 3}]}),
            json!({"mergingList": [{"name": 1, "other": "a"}, {"name": 2, "value": 2, "other": "b"},
                                {"name": 3, "value": 3}]}),
        ),
        (
            json!({"name": "hi"}),
            json!({"name": "hi", "mergingList": [{"name": "hello"}, {"$patch": "delete", "name": "doesntexist"}]}),
            json!({"name": "hi", "mergingList": [{"name": "hello2"}]}),
            json!({"$setElementOrder/mergingList": [{"name": "hello"}, {"name": "doesntexist"}],
                "mergingList": [{"name": "hello"}, {"$patch": "delete", "name": "doesntexist"}]}),
            json!({"name": "hi", "mergingList": [{"name": "hello"}, {"name": "hello2"}]}),
        ),
    ];
    for (last, modified, current, expected, result) in cases {
        let patch =
            create_three_way_merge_patch(&last, &modified, &current, &MergeItemMeta).unwrap();
        assert_eq!(patch, expected, "{last} / {modified} / {current}");
        assert_eq!(patched(current, patch).unwrap(), result);
    }
}
