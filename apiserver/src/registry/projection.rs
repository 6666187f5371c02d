//! Reading a few fields of a stored object without building the rest: a decode of the stored
//! (MessagePack) form that keeps the values at given dotted paths and skips everything else
//! without allocating it. The watch cache reads only what selectors see (labels and the
//! selectable fields) of an event's previous version; decoding a pod in full for that was most
//! of what the cache's feed spent on previous versions.
//!
//! # Guarantees
//! - For every object `o` and every kept path `p`, the result holds at `p` what `o` holds
//!   there (compared as `serde_json::Value`s), and has no value at `p` where `o` has none:
//!   `path.try_fold(result, Value::get) == path.try_fold(o, Value::get)`.
//! - Bytes that the full decode rejects may be rejected here too, or decoded where the
//!   rejected part is skipped; callers that must report the full decode's error decode in
//!   full after an error here.

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// Decodes the MessagePack `bytes` keeping only `paths` (dotted; a path's whole value is kept).
pub fn project(bytes: &[u8], paths: &[&str]) -> Result<Value, rmp_serde::decode::Error> {
    let mut de = rmp_serde::Deserializer::from_read_ref(bytes);
    Level(paths).deserialize(&mut de)
}

/// A dotted path's first key and the rest below it (`None` when the path ends there).
fn head(path: &str) -> (&str, Option<&str>) {
    match path.split_once('.') {
        Some((key, rest)) => (key, Some(rest)),
        None => (path, None),
    }
}

/// One level of the object: the rest of each kept path below it, dotted (every one
/// non-empty). A value that is not a map holds none of them and decodes as `null`, which has
/// no value at any path, as the value itself has none below it.
struct Level<'p, 'a>(&'p [&'a str]);

impl<'de> DeserializeSeed<'de> for Level<'_, '_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<Value, D::Error> {
        de.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Level<'_, '_> {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key_seed(Key(self.0))? {
            let Some(key) = key else {
                map.next_value::<IgnoredAny>()?;
                continue;
            };
            let (mut whole, mut below) = (false, Vec::new());
            for (_, rest) in self.0.iter().map(|p| head(p)).filter(|(k, _)| *k == key) {
                match rest {
                    Some(rest) => below.push(rest),
                    None => whole = true,
                }
            }
            // A path that ends at this key keeps its whole value; otherwise only the parts
            // the paths below it reach.
            let value = if whole {
                map.next_value::<Value>()?
            } else {
                map.next_value_seed(Level(&below))?
            };
            // A repeated key keeps its last value, as the full decode does.
            out.insert(key, value);
        }
        Ok(Value::Object(out))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, de: D) -> Result<Value, D::Error> {
        de.deserialize_any(self)
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, de: D) -> Result<Value, D::Error> {
        de.deserialize_any(self)
    }

    fn visit_bool<E>(self, _: bool) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_i64<E>(self, _: i64) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_u64<E>(self, _: u64) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_f64<E>(self, _: f64) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_str<E>(self, _: &str) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_bytes<E>(self, _: &[u8]) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
}

/// A map key: `Some` (allocated) when a kept path goes through it, `None` otherwise.
struct Key<'p, 'a>(&'p [&'a str]);

impl<'de> DeserializeSeed<'de> for Key<'_, '_> {
    type Value = Option<String>;

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<Option<String>, D::Error> {
        de.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Key<'_, '_> {
    type Value = Option<String>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a string key")
    }

    fn visit_str<E>(self, key: &str) -> Result<Option<String>, E> {
        Ok(self
            .0
            .iter()
            .any(|p| head(p).0 == key)
            .then(|| key.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    const PATHS: &[&str] = &[
        "metadata.name",
        "metadata.namespace",
        "metadata.labels",
        "spec.nodeName",
        "spec.hostNetwork",
        "status.phase",
    ];

    fn at<'v>(v: &'v Value, path: &str) -> Option<&'v Value> {
        path.split('.').try_fold(v, |cur, seg| cur.get(seg))
    }

    fn check(obj: &Value) {
        let bytes = rmp_serde::to_vec_named(obj).unwrap();
        let out = project(&bytes, PATHS).unwrap();
        for p in PATHS {
            assert_eq!(at(&out, p), at(obj, p), "{p} of {obj}");
        }
    }

    #[test]
    fn keeps_the_paths_and_drops_the_rest() {
        let pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "ns", "labels": {"app": "a", "n": "1"},
                "managedFields": [{"manager": "m", "fieldsV1": {"f:spec": {}}}],
                "annotations": {"a": "b"}},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i"}]},
            "status": {"phase": "Running", "conditions": [{"type": "Ready"}]}
        });
        check(&pod);
        let bytes = rmp_serde::to_vec_named(&pod).unwrap();
        assert_eq!(
            project(&bytes, PATHS).unwrap(),
            json!({"metadata": {"name": "p", "namespace": "ns",
                "labels": {"app": "a", "n": "1"}},
                "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}})
        );
    }

    #[test]
    fn odd_shapes_read_as_the_full_decode_reads_them() {
        for obj in [
            json!({}),
            json!(null),
            json!([1, 2, {"metadata": {"name": "x"}}]),
            json!("metadata"),
            json!({"metadata": null, "spec": "nodeName", "status": [{"phase": "x"}]}),
            json!({"metadata": {"labels": {"a": 1, "b": null, "c": {"d": []}}}}),
            json!({"metadata": {"name": {"deep": {"er": [1.5, -3, true]}}}}),
            json!({"spec": {"nodeName": null, "hostNetwork": false}}),
            json!({"status": {"phase": {"phase": "Running"}}}),
        ] {
            check(&obj);
        }
    }

    #[test]
    fn a_repeated_key_keeps_its_last_value() {
        // {"metadata": {"name": "a"}, "metadata": {"name": "b"}} in MessagePack: a map of two
        // entries, each a map of one.
        let mut bytes = vec![0x82];
        for name in ["a", "b"] {
            bytes.extend(rmp_serde::to_vec("metadata").unwrap());
            bytes.push(0x81);
            bytes.extend(rmp_serde::to_vec("name").unwrap());
            bytes.extend(rmp_serde::to_vec(name).unwrap());
        }
        let full: Value = rmp_serde::from_slice(&bytes).unwrap();
        let out = project(&bytes, PATHS).unwrap();
        assert_eq!(at(&out, "metadata.name"), at(&full, "metadata.name"));
        assert_eq!(out["metadata"]["name"], "b");
    }

    #[test]
    fn truncated_bytes_are_an_error() {
        let bytes = rmp_serde::to_vec_named(&json!({"metadata": {"name": "abc"}})).unwrap();
        for cut in 1..bytes.len() {
            assert!(project(&bytes[..cut], PATHS).is_err(), "cut at {cut}");
        }
    }

    /// Keys of the kept paths' segments, so the paths are often present.
    const KEYS: &[&str] = &[
        "metadata", "name", "labels", "spec", "nodeName", "status", "phase",
    ];

    proptest! {
        #[test]
        fn every_kept_path_reads_as_in_the_full_object(obj in super::super::arbitrary::object(KEYS)) {
            check(&obj);
        }
    }
}
