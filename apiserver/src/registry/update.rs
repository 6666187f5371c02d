//! PUT of an object, its `status`, its `scale` or a namespace's `finalize`: admission, optimistic concurrency on resourceVersion,
//! the spec/status split, generation bumps on spec changes, and the final delete once a
//! deleting object's last finalizer is gone.

use serde_json::{json, Value};

use super::create::{check, check_body, scope_namespace};
use super::encode_as;
use super::managed_fields;
use super::Live;
use super::Registry;
use super::Target;
use super::WriteOptions;
use crate::admission::{Attributes, Operation};
use crate::resources::strategy;
use k3rs_apimachinery::meta;
use k3rs_apimachinery::status::{ApiError, ApiResult};
use k3rs_datastore::WriteOutcome;

/// Attempts of an unconditional update (no resourceVersion in the body) under contention.
const UNCONDITIONAL_ATTEMPTS: usize = 16;

/// Metadata a client cannot change through an update.
const SYSTEM_FIELDS: &[&str] = &[
    "uid",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generation",
    "namespace",
    "name",
];

impl Registry {
    /// Replaces the object (or its status, for `t.subresource == Some("status")`).
    pub async fn update(&self, t: &Target, body: Value, opts: WriteOptions) -> ApiResult<Value> {
        self.update_from(t, body, opts, None).await
    }

    /// [`Registry::update`] whose first attempt starts from `live` (what a patch has just
    /// read) instead of reading the object again; later attempts read it.
    pub(crate) async fn update_from(
        &self,
        t: &Target,
        mut body: Value,
        opts: WriteOptions,
        mut live: Option<Live>,
    ) -> ApiResult<Value> {
        check_body(t, &body)?;
        let body_name = meta::name(&body).to_string();
        if !body_name.is_empty() && body_name != t.name() {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({body_name}) does not match the name on the URL ({})",
                t.name()
            )));
        }
        meta::metadata_mut(&mut body).insert("name".into(), json!(t.name()));
        scope_namespace(t, &mut body)?;
        let expected: Option<i64> = match meta::resource_version(&body) {
            "" => None,
            rv => Some(rv.parse().map_err(|_| {
                ApiError::bad_request(format!("invalid resourceVersion {rv:?} in the object"))
            })?),
        };
        // `approval` (CSRs) is a status-only write whose strategy narrows it further.
        let status_only = matches!(t.subresource.as_deref(), Some("status" | "approval"));
        let scale = t.subresource.as_deref() == Some("scale");
        let ephemeral = t.subresource.as_deref() == Some("ephemeralcontainers");
        let finalize = t.subresource.as_deref() == Some("finalize");
        for _ in 0..UNCONDITIONAL_ATTEMPTS {
            let Live {
                object: old,
                mod_revision,
            } = match live.take() {
                Some(l) => l,
                None => self.get_live(t).await?,
            };
            if expected.is_some_and(|rv| rv != mod_revision) {
                return Err(ApiError::conflict(t.subject()));
            }
            // Shared with admission, which reads it, instead of copied for it.
            let old = std::sync::Arc::new(old);
            let mut new = if status_only {
                let mut n = Value::clone(&old);
                n["status"] = body.get("status").cloned().unwrap_or(Value::Null);
                if t.subresource.as_deref() == Some("status") {
                    strategy::prepare_for_status_update(t.resource, &body, &mut n);
                }
                n
            } else if scale {
                let mut n = Value::clone(&old);
                let replicas = body["spec"]["replicas"].clone();
                match custom_scale(t.resource) {
                    Some(sc) => {
                        crate::crd::jsonpath::set(&sc.spec_replicas_path, &mut n, replicas);
                    }
                    None => n["spec"]["replicas"] = replicas,
                }
                n
            } else if finalize {
                let mut n = Value::clone(&old);
                n["spec"]["finalizers"] = body["spec"]["finalizers"].clone();
                n
            } else if ephemeral {
                let mut n = Value::clone(&old);
                n["spec"]["ephemeralContainers"] = body["spec"]["ephemeralContainers"].clone();
                n
            } else {
                let mut n = body.clone();
                if t.resource.has_status {
                    match old.get("status") {
                        Some(s) => n["status"] = s.clone(),
                        None => {
                            if let Some(o) = n.as_object_mut() {
                                o.remove("status");
                            }
                        }
                    }
                }
                n
            };
            keep_system_fields(&old, &mut new);
            // As kube-apiserver decodes (and so defaults) before admission: the plugins see a
            // defaulted object. Defaults run again below for what the plugins and the strategy
            // left unset.
            strategy::apply_defaults(t.resource, &mut new);
            let mut admission = Attributes::of_write(Operation::Update, t, &opts);
            admission.object = Some(new);
            admission.old_object = Some(old.clone());
            self.admission.admit(&mut admission, self).await?;
            let mut new = admission.object.take().unwrap_or_default();
            strategy::prepare_for_update(
                t.resource,
                t.subresource.as_deref(),
                &mut new,
                &old,
                &meta::now_rfc3339(),
            );
            let is_service = t.resource.group.is_empty() && t.resource.kind == "Service";
            if is_service {
                super::service::keep_allocations(&old, &mut new);
            }
            strategy::apply_defaults(t.resource, &mut new);
            meta::drop_empty_collections(&mut new);
            let _ip_guard = if is_service && !status_only {
                let guard = self.ip_lock.lock().await;
                self.allocate_service(t, &mut new, Some(&old)).await?;
                Some(guard)
            } else {
                None
            };
            check(t, &new, Some(&old))?;
            if ephemeral {
                let causes = strategy::validate_ephemeral_update(&old, &new);
                if !causes.is_empty() {
                    return Err(ApiError::invalid(t.kind_subject(t.name()), causes));
                }
            } else if !status_only || t.subresource.as_deref() == Some("approval") {
                // A status write keeps the spec; an approval may not drop conditions.
                check_update(t, &new, &old)?;
            }
            self.check_write(t, &new, Some(&old), &opts).await?;
            let changed = if crate::resources::custom::version_of(t.resource).is_some() {
                crate::crd::generation::bumps(t.resource.has_status, &old, &new)
            } else {
                // Status strategies keep the generation (a Deployment's status write may
                // change its annotations).
                !status_only && strategy::bumps_generation(t.resource, &new, &old)
            };
            if changed {
                let generation = old["metadata"]["generation"].as_i64().unwrap_or(0) + 1;
                new["metadata"]["generation"] = json!(generation);
            }
            admission.object = Some(new);
            self.admission.validate(&admission, self).await?;
            let mut new = admission.object.take().unwrap_or_default();
            drop(admission);
            meta::set_resource_version(&mut new, mod_revision);
            if new == *old {
                return Ok(std::sync::Arc::unwrap_or_clone(old));
            }
            let mut new = managed_fields::track(
                t,
                Some(&*old),
                new,
                opts.field_manager.as_deref(),
                &meta::now_rfc3339(),
            );
            if opts.dry_run {
                return Ok(new);
            }
            let finished = meta::is_deleting(&new)
                && meta::finalizers(&new).is_empty()
                && namespace_finalizers(t, &new).is_empty();
            let outcome = if finished {
                self.ds.delete(&t.key(), mod_revision).await?
            } else {
                let lease = self.lease_for(t.resource).await?;
                let put = k3rs_datastore::GuardedOp::Put {
                    value: encode_as(t.resource, &new)?,
                    lease,
                };
                self.ds.guarded(&t.key(), mod_revision, put).await?
            };
            match outcome {
                WriteOutcome::Done { revision } => {
                    meta::set_resource_version(&mut new, revision);
                    return Ok(new);
                }
                WriteOutcome::Conflict { .. } if expected.is_none() => continue,
                WriteOutcome::Conflict { .. } => return Err(ApiError::conflict(t.subject())),
            }
        }
        Err(ApiError::conflict(t.subject()))
    }

    /// GET of `<resource>/<name>/scale` as an `autoscaling/v1 Scale`.
    pub async fn get_scale(&self, t: &Target) -> ApiResult<Value> {
        Ok(scale_of(t.resource, &self.get(t).await?))
    }

    /// PUT of `<resource>/<name>/scale`: sets `spec.replicas`.
    pub async fn update_scale(
        &self,
        t: &Target,
        body: Value,
        opts: WriteOptions,
    ) -> ApiResult<Value> {
        self.update_scale_from(t, body, opts, None).await
    }

    /// [`Registry::update_scale`] starting from `live` (see [`Registry::update_from`]).
    pub(crate) async fn update_scale_from(
        &self,
        t: &Target,
        body: Value,
        opts: WriteOptions,
        live: Option<Live>,
    ) -> ApiResult<Value> {
        let replicas = body["spec"]["replicas"].clone();
        if !replicas.is_i64() && !replicas.is_u64() {
            return Err(ApiError::invalid(
                t.kind_subject(t.name()),
                vec![k3rs_apimachinery::status::Cause::required(
                    "spec.replicas",
                    "",
                )],
            ));
        }
        let rv = meta::resource_version(&body).to_string();
        let mut carrier =
            json!({"metadata": {"resourceVersion": rv}, "spec": {"replicas": replicas}});
        if rv.is_empty() {
            meta::metadata_mut(&mut carrier).remove("resourceVersion");
        }
        Ok(scale_of(
            t.resource,
            &self.update_from(t, carrier, opts, live).await?,
        ))
    }
}

/// A namespace's `spec.finalizers` (what the namespace controller removes once the content is
/// gone); empty for every other kind.
pub(super) fn namespace_finalizers(t: &Target, obj: &Value) -> Vec<String> {
    let is_namespace = t.resource.group.is_empty() && t.resource.kind == "Namespace";
    if !is_namespace {
        return Vec::new();
    }
    obj["spec"]["finalizers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| f.as_str().map(str::to_string))
        .collect()
}

/// What the kind forbids an update to change (immutable fields).
fn check_update(t: &Target, new: &Value, old: &Value) -> ApiResult<()> {
    let causes = strategy::validate_update(t.resource, new, old);
    if causes.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(t.kind_subject(t.name()), causes))
    }
}

/// Carries over what clients may not change; clients may not undo a deletion either.
fn keep_system_fields(old: &Value, new: &mut Value) {
    let m = meta::metadata_mut(new);
    m.remove("selfLink");
    // A body without managedFields keeps the recorded ones (kube-apiserver does too).
    if !m.contains_key("managedFields") {
        if let Some(mf) = old["metadata"].get("managedFields") {
            m.insert("managedFields".into(), mf.clone());
        }
    }
    for k in SYSTEM_FIELDS {
        match old["metadata"].get(*k) {
            Some(v) => {
                m.insert((*k).to_string(), v.clone());
            }
            None => {
                m.remove(*k);
            }
        }
    }
}

/// The scale subresource's paths of a custom resource.
fn custom_scale(r: &k3rs_apimachinery::catalog::Resource) -> Option<crate::crd::model::ScaleSpec> {
    crate::resources::custom::version_of(r).and_then(|cv| cv.scale.clone())
}

/// The `autoscaling/v1 Scale` view of an object of `r`: a custom resource's through its
/// CRD's scale paths, a workload's from `spec.replicas`.
pub fn scale_of(r: &k3rs_apimachinery::catalog::Resource, obj: &Value) -> Value {
    let Some(sc) = custom_scale(r) else {
        return to_scale(obj);
    };
    let at = |p: &str| crate::crd::jsonpath::first(p, obj).cloned();
    let mut s = to_scale(&Value::Null);
    s["metadata"] = to_scale(obj)["metadata"].clone();
    s["spec"]["replicas"] = json!(at(&sc.spec_replicas_path)
        .and_then(|v| v.as_i64())
        .unwrap_or(0));
    s["status"]["replicas"] = json!(at(&sc.status_replicas_path)
        .and_then(|v| v.as_i64())
        .unwrap_or(0));
    let selector = sc
        .label_selector_path
        .as_deref()
        .and_then(at)
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
    s["status"]["selector"] = json!(selector);
    s
}

/// An `autoscaling/v1 Scale` view of a workload.
pub fn to_scale(obj: &Value) -> Value {
    // A ReplicationController's selector is a plain map; the others' a LabelSelector.
    let sel = &obj["spec"]["selector"];
    let label_selector = sel.get("matchLabels").is_some() || sel.get("matchExpressions").is_some();
    let match_labels = if label_selector {
        &sel["matchLabels"]
    } else {
        sel
    };
    let selector = match_labels
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default();
    let m = &obj["metadata"];
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            "name": m["name"], "namespace": m["namespace"], "uid": m["uid"],
            "resourceVersion": m["resourceVersion"], "creationTimestamp": m["creationTimestamp"],
        },
        "spec": {"replicas": obj["spec"]["replicas"].as_i64().unwrap_or(0)},
        "status": {"replicas": obj["status"]["replicas"].as_i64().unwrap_or(0), "selector": selector},
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_fields_survive_updates() {
        let old = json!({"metadata": {"name": "x", "uid": "u", "creationTimestamp": "t", "generation": 3}});
        let mut new = json!({"metadata": {"name": "x", "uid": "forged", "deletionTimestamp": "now", "selfLink": "/x"}});
        keep_system_fields(&old, &mut new);
        assert_eq!(
            new["metadata"],
            json!({"name": "x", "uid": "u", "creationTimestamp": "t", "generation": 3})
        );
    }

    #[test]
    fn scale_view() {
        let d = json!({"metadata": {"name": "d", "namespace": "n", "resourceVersion": "4"},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "a"}}}, "status": {"replicas": 2}});
        let s = to_scale(&d);
        assert_eq!(s["spec"]["replicas"], 3);
        assert_eq!(s["status"], json!({"replicas": 2, "selector": "app=a"}));
        let rc = json!({"metadata": {"name": "r"},
            "spec": {"replicas": 1, "selector": {"app": "a", "tier": "b"}}});
        assert_eq!(to_scale(&rc)["status"]["selector"], "app=a,tier=b");
    }
}
