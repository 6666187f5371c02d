//! PATCH (JSON patch, merge patch, strategic merge patch, server-side apply) of an object,
//! its `status` or its `scale`: the patch is applied to the live object by `k3rs_patch`, and
//! the result goes through the update path (defaulting, validation, optimistic concurrency).
//! A conflict with a concurrent writer re-applies the patch to the new live object, as
//! kube-apiserver does, unless the patch itself pinned a resourceVersion.

use serde_json::Value;

use super::managed_fields;
use super::update::scale_of;
use super::Registry;
use super::Target;
use super::WriteOptions;
use k3rs_apimachinery::meta;
use k3rs_apimachinery::status::{ApiError, ApiResult};
use k3rs_patch::{
    apply_patch, BuiltinPatchMeta, NoPatchMeta, PatchContext, PatchError, PatchMeta, PatchType,
};

const ATTEMPTS: usize = 16;

/// A PATCH request's options.
#[derive(Debug, Clone, Default)]
pub struct PatchOptions {
    /// `fieldManager` (required for server-side apply).
    pub field_manager: Option<String>,
    /// `force`: server-side apply takes over conflicting fields.
    pub force: bool,
    /// Dry run and who patches.
    pub write: WriteOptions,
}

fn patch_error(t: &Target, e: PatchError) -> ApiError {
    let message = e.to_string();
    match e {
        PatchError::BadRequest(_) => ApiError::bad_request(message),
        PatchError::TestFailed(_) | PatchError::Invalid(_) => ApiError {
            code: 422,
            reason: "Invalid",
            message,
            details: None,
        },
        PatchError::TooLarge(_) => ApiError::too_large(message),
        PatchError::Conflict(c) => {
            let mut err = ApiError::conflict_because(t.subject(), &message);
            if let Some(d) = err.details.as_mut() {
                d["causes"] = Value::from(c.causes());
            }
            err
        }
        PatchError::UnsupportedMediaType(_) => ApiError {
            code: 415,
            reason: "UnsupportedMediaType",
            message,
            details: None,
        },
    }
}

/// Applies the patch (synchronously: the patch schema is not shared across awaits).
fn run_patch(
    t: &Target,
    kind: PatchType,
    live: &Value,
    body: &[u8],
    opts: &PatchOptions,
    now: &str,
) -> ApiResult<Value> {
    let r = t.resource;
    let builtin = BuiltinPatchMeta::for_kind(&r.group_version(), r.kind);
    let patch_meta: &dyn PatchMeta = match &builtin {
        Some(m) => m,
        None => &NoPatchMeta,
    };
    // Other patches are tracked as updates by the update path, on the defaulted object.
    let ctx = PatchContext {
        meta: patch_meta,
        field_manager: opts
            .field_manager
            .as_deref()
            .filter(|_| kind == PatchType::Apply),
        force: opts.force,
        scope: managed_fields::scope_of(t),
        now,
    };
    let patched = apply_patch(kind, live, body, &ctx).map_err(|e| patch_error(t, e))?;
    // A merge or JSON patch may replace the whole document; what is stored is always an object.
    if !patched.is_object() {
        return Err(ApiError::bad_request(format!(
            "the patch turned the {} into a non-object",
            r.kind
        )));
    }
    Ok(patched)
}

impl Registry {
    /// Applies a JSON, merge, strategic merge or server-side apply patch to `t` (creating it
    /// for an apply of a missing object), retrying on conflicts as kube-apiserver does.
    pub async fn patch(
        &self,
        t: &Target,
        kind: PatchType,
        body: &[u8],
        opts: &PatchOptions,
    ) -> ApiResult<Value> {
        let scale = t.subresource.as_deref() == Some("scale");
        let now = meta::now_rfc3339();
        let run = |live: &Value| run_patch(t, kind, live, body, opts, &now);
        // An apply computes its own managedFields; the update path must not add an Update.
        let write = WriteOptions {
            field_manager: opts
                .write
                .field_manager
                .clone()
                .filter(|_| kind != PatchType::Apply),
            ..opts.write.clone()
        };
        for _ in 0..ATTEMPTS {
            // Read and decoded once: the update starts from this same object.
            let live = match self.get_live(t).await {
                Ok(l) => l,
                Err(e) if e.code == 404 && kind == PatchType::Apply && t.subresource.is_none() => {
                    let created = run(&Value::Null)?;
                    return self.create(t, created, write).await;
                }
                Err(e) => return Err(e),
            };
            let live_rv = meta::resource_version(&live.object).to_string();
            let mut patched = if scale {
                run(&scale_of(t.resource, &live.object))?
            } else {
                run(&live.object)?
            };
            let pinned = meta::resource_version(&patched) != live_rv;
            if pinned && !meta::resource_version(&patched).is_empty() {
                return Err(ApiError::conflict(t.subject()));
            }
            meta::metadata_mut(&mut patched).insert("resourceVersion".into(), Value::from(live_rv));
            let result = if scale {
                self.update_scale_from(t, patched, write.clone(), Some(live))
                    .await
            } else {
                self.update_from(t, patched, write.clone(), Some(live))
                    .await
            };
            match result {
                Err(e) if e.code == 409 && e.reason == "Conflict" => continue,
                other => return other,
            }
        }
        Err(ApiError::conflict(t.subject()))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;
    use crate::admission::Chain;
    use crate::registry::mem_store::MemStore;
    use k3rs_apimachinery::catalog;

    #[tokio::test]
    async fn a_patch_reads_the_object_once() {
        let store = Arc::new(MemStore::default());
        let ds: Arc<dyn k3rs_datastore::Datastore> = store.clone();
        let reg = Registry::new(ds, "10.43.0.0/16".parse().unwrap()).with_admission(Chain::empty());
        let mut t = Target {
            resource: catalog::lookup("", "v1", "configmaps").unwrap(),
            namespace: Some("n".into()),
            name: None,
            subresource: None,
        };
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c"}, "data": {"k": "1"}});
        reg.create(&t, cm, WriteOptions::default()).await.unwrap();
        t.name = Some("c".into());
        store.take_reads();
        let patched = reg
            .patch(
                &t,
                PatchType::Merge,
                br#"{"data": {"k": "2"}}"#,
                &PatchOptions::default(),
            )
            .await
            .unwrap();
        assert_eq!(patched["data"], json!({"k": "2"}));
        assert_eq!(store.take_reads(), ["/registry/configmaps/n/c"]);
        assert_eq!(reg.get(&t).await.unwrap()["data"], json!({"k": "2"}));
    }
}
