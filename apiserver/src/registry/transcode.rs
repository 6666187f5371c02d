//! A stored object's JSON straight from its stored (MessagePack) form, with
//! `metadata.resourceVersion` set, without building it as a `serde_json::Value` first. The
//! watch cache serializes every event's object once for all watchers; decoding a pod into a
//! `Value` tree only to write it out and free it again was most of what that cost.
//!
//! # Guarantees
//! - Where it answers, the answer is byte for byte what [`super::decode`] followed by
//!   `serde_json::to_vec` gives: the stored object with `metadata.resourceVersion` set to the
//!   revision (`metadata` made an object holding it where the top level is an object and
//!   `metadata` is missing or not an object), keys in `serde_json`'s (sorted) order.
//! - It answers only for what it can write in that order as it reads: maps whose keys are
//!   strings in strictly increasing order (what [`super::encode`] writes), and MessagePack's
//!   nil, booleans, integers, floats, strings and arrays. Anything else (unsorted or
//!   repeated keys, binary or extension values, truncated bytes) is an error, and the caller
//!   takes the full decode, which answers as before.

use std::io::Write;

use serde::de::Visitor;
use serde::de::{DeserializeSeed, Deserializer, Error as _, IgnoredAny, MapAccess, SeqAccess};

/// Why the stored bytes were not transcoded (the caller then decodes in full).
pub type Error = rmp_serde::decode::Error;

/// The JSON of the stored object `bytes` with `metadata.resourceVersion` set to `revision`.
pub fn to_json(bytes: &[u8], revision: i64) -> Result<Vec<u8>, Error> {
    // JSON is rarely shorter than MessagePack; a pod's grows by about a fifth.
    let mut out = Vec::with_capacity(bytes.len() + bytes.len() / 4 + 32);
    let version = revision.to_string();
    let mut de = rmp_serde::Deserializer::from_read_ref(bytes);
    Json {
        out: &mut out,
        at: At::Top(&version),
    }
    .deserialize(&mut de)?;
    Ok(out)
}

/// Where in the object a value is: what it must get besides its own content.
#[derive(Clone, Copy)]
enum At<'v> {
    /// The object itself: its `metadata` gets the resourceVersion.
    Top(&'v str),
    /// `metadata`: holds the resourceVersion, whatever it was.
    Metadata(&'v str),
    /// Anywhere else: written as it is.
    Inside,
}

/// Writes one value as JSON into `out`.
struct Json<'o, 'v> {
    out: &'o mut Vec<u8>,
    at: At<'v>,
}

impl<'de> DeserializeSeed<'de> for Json<'_, '_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<(), D::Error> {
        de.deserialize_any(self)
    }
}

impl Json<'_, '_> {
    /// A scalar: as itself, except as `metadata`, which becomes `{"resourceVersion":…}`.
    fn scalar<E: serde::de::Error>(self, v: impl serde::Serialize) -> Result<(), E> {
        match self.at {
            At::Metadata(version) => write_only_version(self.out, version),
            At::Top(_) | At::Inside => serde_json::to_writer(&mut *self.out, &v).map_err(E::custom),
        }
    }
}

/// `{"resourceVersion":"<version>"}`: a `metadata` that was not an object.
fn write_only_version<E: serde::de::Error>(out: &mut Vec<u8>, version: &str) -> Result<(), E> {
    out.push(b'{');
    write_version(out, version)?;
    out.push(b'}');
    Ok(())
}

/// `"resourceVersion":"<version>"`.
fn write_version<E: serde::de::Error>(out: &mut Vec<u8>, version: &str) -> Result<(), E> {
    write!(out, "\"resourceVersion\":\"{version}\"").map_err(E::custom)
}

impl<'de> Visitor<'de> for Json<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        // The key this level must hold, with the value written for it, and whether it was.
        let (missing_key, mut missing_written): (Option<&str>, bool) = match self.at {
            At::Top(_) => (Some("metadata"), false),
            At::Metadata(_) => (Some("resourceVersion"), false),
            At::Inside => (None, true),
        };
        let write_missing = |out: &mut Vec<u8>, first: bool| -> Result<(), A::Error> {
            if !first {
                out.push(b',');
            }
            match self.at {
                At::Top(version) => {
                    out.extend_from_slice(b"\"metadata\":");
                    write_only_version(out, version)
                }
                At::Metadata(version) => write_version(out, version),
                At::Inside => Ok(()),
            }
        };
        self.out.push(b'{');
        let mut previous: Option<&'de str> = None;
        let mut first = true;
        while let Some(key) = map.next_key_seed(BorrowedKey)? {
            if previous.is_some_and(|p| p >= key) {
                return Err(A::Error::custom("map keys out of order"));
            }
            previous = Some(key);
            if let Some(missing) = missing_key.filter(|_| !missing_written) {
                if key > missing {
                    write_missing(self.out, first)?;
                    missing_written = true;
                    first = false;
                }
            }
            if !first {
                self.out.push(b',');
            }
            first = false;
            serde_json::to_writer(&mut *self.out, key).map_err(A::Error::custom)?;
            self.out.push(b':');
            match (self.at, Some(key) == missing_key) {
                (At::Top(version), true) => {
                    missing_written = true;
                    map.next_value_seed(Json {
                        out: self.out,
                        at: At::Metadata(version),
                    })?;
                }
                (At::Metadata(version), true) => {
                    missing_written = true;
                    map.next_value::<IgnoredAny>()?;
                    write!(self.out, "\"{version}\"").map_err(A::Error::custom)?;
                }
                _ => map.next_value_seed(Json {
                    out: self.out,
                    at: At::Inside,
                })?,
            }
        }
        if !missing_written {
            write_missing(self.out, first)?;
        }
        self.out.push(b'}');
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        if let At::Metadata(version) = self.at {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            return write_only_version(self.out, version);
        }
        self.out.push(b'[');
        let mut first = true;
        loop {
            if !first {
                self.out.push(b',');
            }
            let seed = Json {
                out: self.out,
                at: At::Inside,
            };
            if seq.next_element_seed(seed)?.is_none() {
                if !first {
                    // The separator written for an element that did not come.
                    self.out.pop();
                }
                break;
            }
            first = false;
        }
        self.out.push(b']');
        Ok(())
    }

    fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<(), E> {
        self.scalar(v)
    }

    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<(), E> {
        self.scalar(v)
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<(), E> {
        self.scalar(v)
    }

    fn visit_f32<E: serde::de::Error>(self, v: f32) -> Result<(), E> {
        // As the full decode reads it: widened to an f64.
        self.scalar(f64::from(v))
    }

    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<(), E> {
        // NaN and the infinities write as `null`, as a `Value` holds them.
        self.scalar(v)
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<(), E> {
        self.scalar(v)
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<(), E> {
        self.scalar(())
    }

    fn visit_none<E: serde::de::Error>(self) -> Result<(), E> {
        self.scalar(())
    }

    fn visit_some<D: Deserializer<'de>>(self, de: D) -> Result<(), D::Error> {
        de.deserialize_any(self)
    }
}

/// A map key borrowed from the stored bytes; any other key is an error.
struct BorrowedKey;

impl<'de> DeserializeSeed<'de> for BorrowedKey {
    type Value = &'de str;

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<&'de str, D::Error> {
        de.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for BorrowedKey {
    type Value = &'de str;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a string key")
    }

    fn visit_borrowed_str<E>(self, key: &'de str) -> Result<&'de str, E> {
        Ok(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::{json, Value};

    /// What the full decode writes: the object decoded, its resourceVersion set, serialized.
    fn reference(bytes: &[u8], revision: i64) -> Option<Vec<u8>> {
        let mut obj: Value = rmp_serde::from_slice(bytes).ok()?;
        k3rs_apimachinery::meta::set_resource_version(&mut obj, revision);
        serde_json::to_vec(&obj).ok()
    }

    fn check(obj: &Value, revision: i64) {
        let bytes = rmp_serde::to_vec_named(obj).unwrap();
        let ours = to_json(&bytes, revision).unwrap();
        let want = reference(&bytes, revision).unwrap();
        assert_eq!(
            String::from_utf8(ours).unwrap(),
            String::from_utf8(want).unwrap(),
            "{obj}"
        );
    }

    #[test]
    fn a_pod_reads_as_the_full_decode_writes_it() {
        let pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "ns", "resourceVersion": "3",
                "labels": {"app": "a"}, "uid": "u",
                "managedFields": [{"manager": "m", "fieldsV1": {"f:spec": {"f:x": {}}}}]},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i",
                "resources": {"requests": {"cpu": "100m"}}, "args": ["a \"q\" \\ \n\u{1}é"]}],
                "priority": 0, "terminationGracePeriodSeconds": 30},
            "status": {"phase": "Running", "conditions": [], "x": [1.5, -3, 18446744073709551615u64]}
        });
        check(&pod, 17);
        let out: Value =
            serde_json::from_slice(&to_json(&rmp_serde::to_vec_named(&pod).unwrap(), 17).unwrap())
                .unwrap();
        assert_eq!(out["metadata"]["resourceVersion"], "17");
    }

    #[test]
    fn metadata_gets_the_version_wherever_it_was_missing_or_odd() {
        for obj in [
            json!({}),
            json!({"apiVersion": "v1"}),
            json!({"zz": 1}),
            json!({"apiVersion": "v1", "spec": {}}),
            json!({"metadata": {}}),
            json!({"metadata": {"name": "a"}}),
            json!({"metadata": {"zone": "z"}}),
            json!({"metadata": {"name": "a", "resourceVersion": "9", "uid": "u"}}),
            json!({"metadata": {"resourceVersion": 5}}),
            json!({"metadata": {"resourceVersion": {"deep": [1]}}}),
            json!({"metadata": null}),
            json!({"metadata": "x"}),
            json!({"metadata": 7}),
            json!({"metadata": [1, {"resourceVersion": "2"}]}),
            json!({"metadata": true, "spec": {"metadata": {"name": "inner"}}}),
            json!({"a": {"metadata": {}}, "metadata": {"b": {"resourceVersion": "x"}}}),
            json!(null),
            json!([{"metadata": {}}]),
            json!("metadata"),
            json!(1.25),
            json!([]),
            json!({"list": [], "map": {}, "nested": [[], [{}], [null, false]]}),
        ] {
            check(&obj, 42);
        }
    }

    #[test]
    fn floats_read_as_the_full_decode_reads_them() {
        // An f32, a NaN and an infinity in MessagePack: {"a": f32 0.1, "b": NaN, "c": inf}.
        let mut bytes = vec![0x83];
        bytes.extend(rmp_serde::to_vec("a").unwrap());
        bytes.extend(rmp_serde::to_vec(&0.1f32).unwrap());
        bytes.extend(rmp_serde::to_vec("b").unwrap());
        bytes.extend(rmp_serde::to_vec(&f64::NAN).unwrap());
        bytes.extend(rmp_serde::to_vec("c").unwrap());
        bytes.extend(rmp_serde::to_vec(&f64::INFINITY).unwrap());
        assert_eq!(to_json(&bytes, 1).unwrap(), reference(&bytes, 1).unwrap());
    }

    /// `{k: v, …}` in MessagePack, in the given order (repeats kept).
    fn map_of(entries: &[(&str, Value)]) -> Vec<u8> {
        let mut bytes = vec![0x80 | u8::try_from(entries.len()).unwrap()];
        for (k, v) in entries {
            bytes.extend(rmp_serde::to_vec(k).unwrap());
            bytes.extend(rmp_serde::to_vec_named(v).unwrap());
        }
        bytes
    }

    #[test]
    fn unsorted_or_repeated_keys_are_left_to_the_full_decode() {
        let unsorted = map_of(&[("spec", json!(1)), ("metadata", json!({}))]);
        assert!(to_json(&unsorted, 1).is_err());
        let repeated = map_of(&[("a", json!(1)), ("a", json!(2))]);
        assert!(to_json(&repeated, 1).is_err());
        // {"metadata": {"name": "x", "name": "x"}}
        let meta = rmp_serde::to_vec_named(&json!({"name": "x"})).unwrap();
        let mut twice = vec![0x82];
        twice.extend_from_slice(&meta[1..]);
        twice.extend_from_slice(&meta[1..]);
        let mut bytes = vec![0x81];
        bytes.extend(rmp_serde::to_vec("metadata").unwrap());
        bytes.extend(twice);
        assert!(to_json(&bytes, 1).is_err());
        // The full decode takes all three (the last value of a repeated key wins).
        for b in [&unsorted, &repeated, &bytes] {
            assert!(reference(b, 1).is_some());
        }
    }

    #[test]
    fn other_keys_binary_and_truncated_bytes_are_errors() {
        // {1: 2}
        assert!(to_json(&[0x81, 0x01, 0x02], 1).is_err());
        // {"a": bin8 [1]}
        let mut bin = vec![0x81];
        bin.extend(rmp_serde::to_vec("a").unwrap());
        bin.extend([0xc4, 0x01, 0x01]);
        assert!(to_json(&bin, 1).is_err());
        let bytes =
            rmp_serde::to_vec_named(&json!({"metadata": {"name": "abc"}, "x": [1]})).unwrap();
        for cut in 0..bytes.len() {
            assert!(to_json(&bytes[..cut], 1).is_err(), "cut at {cut}");
        }
    }

    /// The keys the transcoder treats specially, and their neighbours in order.
    const KEYS: &[&str] = &[
        "metadata",
        "resourceVersion",
        "name",
        "meta",
        "metadatb",
        "resourceVersiom",
        "z",
    ];

    proptest! {
        #[test]
        fn any_object_reads_as_the_full_decode_writes_it(
            obj in super::super::arbitrary::object(KEYS),
            rev in any::<i64>(),
        ) {
            let bytes = rmp_serde::to_vec_named(&obj).unwrap();
            let ours = to_json(&bytes, rev).unwrap();
            prop_assert_eq!(ours, reference(&bytes, rev).unwrap());
        }
    }
}
