//! StorageObjectInUseProtection: a new PersistentVolumeClaim gets the
//! `kubernetes.io/pvc-protection` finalizer and a new PersistentVolume
//! `kubernetes.io/pv-protection`, so neither disappears while in use (the protection
//! controllers remove them; see `controllers::volume::protection`).

use futures::future::BoxFuture;
use serde_json::{json, Value};

use super::{Attributes, Mutating, Operation};
use crate::registry::Registry;
use k3rs_apimachinery::status::ApiResult;
use k3rs_apimachinery::volume::{PVC_PROTECTION, PV_PROTECTION};

/// The plugin.
#[derive(Debug, Clone, Copy)]
pub struct StorageObjectInUseProtection;

/// Adds `finalizer` to `obj` unless it is there (pure).
pub fn add_finalizer(obj: &mut Value, finalizer: &str) {
    let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    let list = meta.entry("finalizers").or_insert_with(|| json!([]));
    if !list.is_array() {
        *list = json!([]);
    }
    if let Some(items) = list.as_array_mut() {
        if !items.iter().any(|f| f == finalizer) {
            items.push(json!(finalizer));
        }
    }
}

impl Mutating for StorageObjectInUseProtection {
    fn name(&self) -> &'static str {
        "StorageObjectInUseProtection"
    }

    fn admit<'a>(
        &'a self,
        a: &'a mut Attributes,
        _reg: &'a Registry,
    ) -> BoxFuture<'a, ApiResult<()>> {
        Box::pin(async move {
            if a.operation != Operation::Create {
                return Ok(());
            }
            let finalizer = if a.is("", "PersistentVolumeClaim") {
                PVC_PROTECTION
            } else if a.is("", "PersistentVolume") {
                PV_PROTECTION
            } else {
                return Ok(());
            };
            if let Some(obj) = a.object.as_mut() {
                add_finalizer(obj, finalizer);
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adds_the_finalizer_once() {
        let mut o = json!({"metadata": {"name": "c", "finalizers": ["x"]}});
        add_finalizer(&mut o, PVC_PROTECTION);
        add_finalizer(&mut o, PVC_PROTECTION);
        assert_eq!(o["metadata"]["finalizers"], json!(["x", PVC_PROTECTION]));
        let mut bare = json!({"metadata": {"name": "v"}});
        add_finalizer(&mut bare, PV_PROTECTION);
        assert_eq!(bare["metadata"]["finalizers"], json!([PV_PROTECTION]));
    }
}
