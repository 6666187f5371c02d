//! An object serialized for the store without its `metadata.resourceVersion` (the store's
//! revision is the version), written from the object as it is rather than from a copy with
//! the field removed: every create, update and binding encodes one object, a pod's copy was
//! a tree of a few hundred allocations made only to be dropped.

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{Map, Value};

/// `obj` as the store keeps it: the same MessagePack as encoding a copy of it whose
/// `metadata` (when an object) has no `resourceVersion` key.
pub(super) struct WithoutResourceVersion<'a>(pub &'a Value);

impl Serialize for WithoutResourceVersion<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let Value::Object(top) = self.0 else {
            return self.0.serialize(s);
        };
        let mut map = s.serialize_map(Some(top.len()))?;
        for (k, v) in top {
            match v {
                Value::Object(meta) if k == "metadata" => {
                    map.serialize_entry(k, &Metadata(meta))?;
                }
                _ => map.serialize_entry(k, v)?,
            }
        }
        map.end()
    }
}

/// A `metadata` map without its `resourceVersion`.
struct Metadata<'a>(&'a Map<String, Value>);

impl Serialize for Metadata<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let kept = self.0.iter().filter(|(k, _)| *k != "resourceVersion");
        let mut map = s.serialize_map(Some(kept.clone().count()))?;
        for (k, v) in kept {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    /// What the store kept before: a copy without the field, encoded.
    fn reference(obj: &Value) -> Vec<u8> {
        let mut obj = obj.clone();
        if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
            m.remove("resourceVersion");
        }
        rmp_serde::to_vec_named(&obj).unwrap()
    }

    fn ours(obj: &Value) -> Vec<u8> {
        rmp_serde::to_vec_named(&WithoutResourceVersion(obj)).unwrap()
    }

    #[test]
    fn the_version_is_left_out_of_metadata_only() {
        let pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "resourceVersion": "7", "labels": {"resourceVersion": "x"}},
            "resourceVersion": "top", "spec": {"metadata": {"resourceVersion": "nested"}}});
        assert_eq!(ours(&pod), reference(&pod));
        let back: Value = rmp_serde::from_slice(&ours(&pod)).unwrap();
        assert_eq!(back["metadata"].get("resourceVersion"), None);
        assert_eq!(back["metadata"]["labels"]["resourceVersion"], "x");
        assert_eq!(back["resourceVersion"], "top");
        assert_eq!(back["spec"]["metadata"]["resourceVersion"], "nested");
        for odd in [
            json!(null),
            json!([1]),
            json!({"metadata": "m"}),
            json!({"metadata": null}),
        ] {
            assert_eq!(ours(&odd), reference(&odd), "{odd}");
        }
    }

    const KEYS: &[&str] = &["metadata", "resourceVersion", "name", "metadatb", "z"];

    proptest! {
        #[test]
        fn any_object_encodes_as_its_copy_without_the_version(
            obj in super::super::arbitrary::object(KEYS),
        ) {
            prop_assert_eq!(ours(&obj), reference(&obj));
        }
    }
}
