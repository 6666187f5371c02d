//! What an in-process cache keeps of an object, applied to each object before it is stored
//! (client-go's `cache.TransformFunc`, set on its informers).
//!
//! # Guarantees
//! - [`strip_managed_fields`] removes only `metadata.managedFields`, which no controller or
//!   scheduler decision reads. Writing a stripped object back with an update keeps the stored
//!   managedFields: the API server, as upstream, keeps them when a write sends none.

/// client-go's `TransformStripManagedFields`: `metadata.managedFields` dropped. They are a
/// large share of an object in memory (a pod's are as large as the rest of it once decoded),
/// and a server process holds each pod in several caches.
pub fn strip_managed_fields<K: kube::Resource>(obj: &mut K) {
    obj.meta_mut().managed_fields = None;
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Pod;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ManagedFieldsEntry, ObjectMeta};

    #[test]
    fn only_managed_fields_go() {
        let meta = ObjectMeta {
            name: Some("p".into()),
            labels: Some([("app".to_string(), "a".to_string())].into()),
            ..ObjectMeta::default()
        };
        let mut pod = Pod {
            metadata: ObjectMeta {
                managed_fields: Some(vec![ManagedFieldsEntry {
                    manager: Some("m".into()),
                    ..ManagedFieldsEntry::default()
                }]),
                ..meta.clone()
            },
            ..Pod::default()
        };
        strip_managed_fields(&mut pod);
        assert_eq!(pod.metadata, meta);
    }
}
