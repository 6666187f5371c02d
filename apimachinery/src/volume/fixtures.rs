//! Volume and claim builders for tests (here and in the crates that use [`super::matching`]):
//! a minimal object merged with the JSON a test adds. Built with the `testing` feature.

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use serde_json::{json, Value};

/// An Available hostPath volume `name` of `size`, merged with `extra`.
pub fn pv(name: &str, size: &str, extra: Value) -> PersistentVolume {
    let mut v = json!({"metadata": {"name": name},
        "spec": {"capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"],
                 "hostPath": {"path": format!("/tmp/{name}")}},
        "status": {"phase": "Available"}});
    merge(&mut v, extra);
    serde_json::from_value(v).expect("a test's extra JSON keeps the PersistentVolume decodable")
}

/// A Pending claim `name` in `ns` asking for `size`, merged with `extra`.
pub fn pvc(name: &str, size: &str, extra: Value) -> PersistentVolumeClaim {
    let mut v = json!({"metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}")},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}},
        "status": {"phase": "Pending"}});
    merge(&mut v, extra);
    serde_json::from_value(v)
        .expect("a test's extra JSON keeps the PersistentVolumeClaim decodable")
}

/// Merges `b` into `a`, object by object; other values replace.
pub fn merge(a: &mut Value, b: Value) {
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                merge(a.entry(k).or_insert(Value::Null), v);
            }
        }
        (a, b) => *a = b,
    }
}

/// A WaitForFirstConsumer StorageClass `name` of `provisioner` (k3s's `local-path` class has
/// this shape).
pub fn delayed_class(name: &str, provisioner: &str) -> k8s_openapi::api::storage::v1::StorageClass {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "provisioner": provisioner,
        "reclaimPolicy": "Delete",
        "volumeBindingMode": "WaitForFirstConsumer",
    }))
    .expect("a constant StorageClass decodes")
}
