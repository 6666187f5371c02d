//! DefaultStorageClass: a new PersistentVolumeClaim that names no class (no
//! `spec.storageClassName`, not even "", and no beta class annotation) gets the default
//! StorageClass — the one annotated `storageclass.kubernetes.io/is-default-class: "true"`
//! (or the beta annotation), the newest if several are, then by name. The classes are read
//! from the API server's cache ([`super::lister`], as upstream's plugin reads its lister), or
//! from the store while the cache may not answer (unsynced, or a StorageClass written through
//! this server less than [`super::lister::LIVE_AFTER_WRITE`] ago).

use futures::future::BoxFuture;
use serde_json::{json, Value};

use super::lister::Lister;
use super::{Attributes, Mutating, Operation};
use crate::registry::Registry;
use k3rs_apimachinery::status::ApiResult;
use k8s_openapi::api::storage::v1::StorageClass;

/// The plugin.
#[derive(Debug, Clone, Default)]
pub struct DefaultStorageClass {
    /// The classes claims read first.
    pub classes: Lister<StorageClass>,
}

/// The annotations that mark a default class.
pub const DEFAULT_ANNOTATIONS: [&str; 2] = [
    "storageclass.kubernetes.io/is-default-class",
    "storageclass.beta.kubernetes.io/is-default-class",
];
/// The claim annotation that named a class before `spec.storageClassName`.
pub const BETA_CLASS_ANNOTATION: &str = "volume.beta.kubernetes.io/storage-class";

/// Whether the claim already says which class it wants.
pub fn has_class(claim: &Value) -> bool {
    !claim["spec"]["storageClassName"].is_null()
        || !claim["metadata"]["annotations"][BETA_CLASS_ANNOTATION].is_null()
}

/// The default class's name: the newest class marked default, by name among equals.
pub fn default_class(classes: &[Value]) -> Option<&str> {
    classes
        .iter()
        .filter(|c| {
            DEFAULT_ANNOTATIONS
                .iter()
                .any(|a| c["metadata"]["annotations"][a] == "true")
        })
        .max_by(|a, b| {
            let t = |c: &Value| {
                c["metadata"]["creationTimestamp"]
                    .as_str()
                    .unwrap_or("")
                    .to_string()
            };
            let n = |c: &Value| c["metadata"]["name"].as_str().unwrap_or("").to_string();
            // Newest first, then the smaller name.
            t(a).cmp(&t(b)).then_with(|| n(b).cmp(&n(a)))
        })
        .and_then(|c| c["metadata"]["name"].as_str())
}

/// Gives `claim` the default class of `classes`, if it names none (pure).
pub fn apply(claim: &mut Value, classes: &[Value]) {
    if has_class(claim) {
        return;
    }
    if let (Some(class), Some(spec)) = (
        default_class(classes),
        claim.get_mut("spec").filter(|s| s.is_object()),
    ) {
        spec["storageClassName"] = json!(class);
    }
}

impl Mutating for DefaultStorageClass {
    fn name(&self) -> &'static str {
        "DefaultStorageClass"
    }

    fn admit<'a>(
        &'a self,
        a: &'a mut Attributes,
        reg: &'a Registry,
    ) -> BoxFuture<'a, ApiResult<()>> {
        Box::pin(async move {
            if a.is("storage.k8s.io", "StorageClass") {
                self.classes.note_write("");
            }
            if a.operation != Operation::Create || !a.is("", "PersistentVolumeClaim") {
                return Ok(());
            }
            if a.object.as_ref().is_none_or(has_class) {
                return Ok(());
            }
            let classes = match self.classes.all() {
                Some(cached) => cached?,
                None => super::stored(reg, "storage.k8s.io", "storageclasses", None).await?,
            };
            if let Some(claim) = a.object.as_mut() {
                apply(claim, &classes);
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(name: &str, created: &str, default: Option<&str>) -> Value {
        let mut c = json!({"metadata": {"name": name, "creationTimestamp": created}});
        if let Some(ann) = default {
            c["metadata"]["annotations"] = json!({ann: "true"});
        }
        c
    }

    #[test]
    fn newest_default_wins_then_name() {
        let classes = [
            class("old", "2026-01-01T00:00:00Z", Some(DEFAULT_ANNOTATIONS[0])),
            class("new", "2026-02-01T00:00:00Z", Some(DEFAULT_ANNOTATIONS[1])),
            class("newest-plain", "2026-03-01T00:00:00Z", None),
        ];
        assert_eq!(default_class(&classes), Some("new"));
        let tie = [
            class("b", "2026-01-01T00:00:00Z", Some(DEFAULT_ANNOTATIONS[0])),
            class("a", "2026-01-01T00:00:00Z", Some(DEFAULT_ANNOTATIONS[0])),
        ];
        assert_eq!(default_class(&tie), Some("a"));
        assert_eq!(default_class(&classes[2..]), None);
    }

    #[test]
    fn only_claims_without_a_class_get_it() {
        let classes = [class(
            "local-path",
            "2026-01-01T00:00:00Z",
            Some(DEFAULT_ANNOTATIONS[0]),
        )];
        let mut none = json!({"metadata": {"name": "c"}, "spec": {}});
        apply(&mut none, &classes);
        assert_eq!(none["spec"]["storageClassName"], "local-path");
        let mut empty = json!({"metadata": {"name": "c"}, "spec": {"storageClassName": ""}});
        apply(&mut empty, &classes);
        assert_eq!(empty["spec"]["storageClassName"], "");
        let mut beta = json!({"metadata": {"name": "c", "annotations": {BETA_CLASS_ANNOTATION: "x"}}, "spec": {}});
        apply(&mut beta, &classes);
        assert!(beta["spec"]["storageClassName"].is_null());
        let mut without_default = json!({"metadata": {"name": "c"}, "spec": {}});
        apply(&mut without_default, &[]);
        assert!(without_default["spec"]["storageClassName"].is_null());
    }
}
