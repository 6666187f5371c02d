//! DELETE: preconditions, propagation policy (recorded as the `orphan` / `foregroundDeletion`
//! finalizers, like kube-apiserver; the garbage collector acts on them), finalizers and
//! graceful deletion (deletionTimestamp + deletionGracePeriodSeconds), deletecollection, and
//! namespace termination (Terminating first; gone once the namespace controller finalized it).

use std::time::SystemTime;

use serde_json::{json, Value};

use super::decode_as;

use super::encode_as;

use k3rs_apimachinery::meta;

use super::ListOptions;

use super::Registry;

use super::Target;

use super::WriteOptions;
use crate::admission::{Attributes, Operation};
use crate::resources::strategy;
use k3rs_apimachinery::catalog::Resource;
use k3rs_apimachinery::status::{success, ApiError, ApiResult, Subject};
use k3rs_datastore::WriteOutcome;

/// `metav1.DeleteOptions` as far as the registry needs them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeleteOptions {
    /// `gracePeriodSeconds` (pods); `None`: the object's own.
    pub grace_period_seconds: Option<i64>,
    /// `Orphan`, `Background` or `Foreground`.
    pub propagation_policy: Option<String>,
    /// `preconditions.uid`: delete only this incarnation.
    pub precondition_uid: Option<String>,
    /// `preconditions.resourceVersion`: delete only this version.
    pub precondition_resource_version: Option<String>,
    /// Dry run and who deletes.
    pub write: WriteOptions,
}

/// What a delete did.
#[derive(Debug, Clone, PartialEq)]
pub enum Deleted {
    /// The object is gone: its last stored state.
    Gone(Value),
    /// Deletion is pending (finalizers or a grace period): the updated object.
    Pending(Value),
}

impl Deleted {
    /// The body of the DELETE answer, as upstream's generic registry (`finalizeDelete`)
    /// makes it: a pending object as it now is; a removed one itself where the resource's
    /// registry returns deleted objects, else a `Status` Success naming it (group, resource
    /// as `kind`, name, uid).
    pub fn answer(self, r: &Resource) -> Value {
        match self {
            Deleted::Pending(obj) => obj,
            Deleted::Gone(obj) if r.returns_deleted_object => obj,
            Deleted::Gone(obj) => success(
                Subject {
                    group: r.group,
                    kind: r.plural,
                    name: meta::name(&obj),
                },
                meta::uid(&obj),
            ),
        }
    }
}

const ATTEMPTS: usize = 16;

impl Registry {
    /// Deletes `t` as kube-apiserver does: at once, or by setting `deletionTimestamp` while
    /// finalizers (including the propagation policy's) or a pod's grace period remain.
    pub async fn delete(&self, t: &Target, opts: &DeleteOptions) -> ApiResult<Deleted> {
        if let Some(why) = strategy::delete_refusal(t.resource, t.name()) {
            return Err(ApiError::forbidden(t.subject(), why));
        }
        let finalizer = match opts.propagation_policy.as_deref() {
            None | Some("Background") => None,
            Some("Orphan") => Some("orphan"),
            Some("Foreground") => Some("foregroundDeletion"),
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "propagationPolicy {other:?} is not supported: use Orphan, Background or Foreground"
                )))
            }
        };
        if let Some(g) = opts.grace_period_seconds {
            if g < 0 {
                return Err(ApiError::bad_request(
                    "gracePeriodSeconds must not be negative",
                ));
            }
        }
        for _ in 0..ATTEMPTS {
            let (kv, _) = self.ds.get(&t.key()).await?;
            let kv = kv.ok_or_else(|| ApiError::not_found(t.subject()))?;
            let old = std::sync::Arc::new(decode_as(t.resource, &kv)?);
            check_preconditions(t, &old, opts)?;
            let mut admission = Attributes::of_write(Operation::Delete, t, &opts.write);
            admission.old_object = Some(old.clone());
            self.admission.admit(&mut admission, self).await?;
            self.admission.validate(&admission, self).await?;
            // Admission shared the stored object; with its attributes gone it is ours again
            // (a plugin that kept a reference would cost one copy here).
            drop(admission);
            let old = std::sync::Arc::unwrap_or_clone(old);

            let mut finalizers = meta::finalizers(&old);
            // A CRD's deletion waits for its custom resources (the CRD controller deletes
            // them, then removes the finalizer).
            let is_crd = t.resource.group == "apiextensions.k8s.io"
                && t.resource.kind == "CustomResourceDefinition";
            let cleanup = crate::crd::controller::CLEANUP_FINALIZER;
            if is_crd && !meta::is_deleting(&old) && !finalizers.iter().any(|f| f == cleanup) {
                finalizers.push(cleanup.to_string());
            }
            if let Some(f) = finalizer {
                if !finalizers.iter().any(|x| x == f) {
                    finalizers.push(f.to_string());
                }
            }
            let is_namespace = t.resource.group.is_empty() && t.resource.kind == "Namespace";
            let grace = grace_period(t, &old, opts);
            // A namespace goes in two steps: the first delete makes it Terminating; the
            // namespace controller deletes its content, removes its `kubernetes` finalizer
            // (`finalize`) and deletes it again, which then removes it.
            let namespace_pending = is_namespace
                && (!meta::is_deleting(&old)
                    || !super::update::namespace_finalizers(t, &old).is_empty());
            let pending = !finalizers.is_empty() || grace > 0 || namespace_pending;

            let outcome = if pending {
                if meta::is_deleting(&old) && finalizers == meta::finalizers(&old) {
                    // Already terminating; nothing to record.
                    return Ok(Deleted::Pending(old));
                }
                let mut new = old;
                let m = meta::metadata_mut(&mut new);
                if !m.contains_key("deletionTimestamp") {
                    let at = meta::seconds_after(SystemTime::now(), grace);
                    m.insert("deletionTimestamp".into(), json!(meta::rfc3339(at)));
                    m.insert("deletionGracePeriodSeconds".into(), json!(grace));
                }
                if !finalizers.is_empty() {
                    m.insert("finalizers".into(), json!(finalizers));
                }
                if is_namespace {
                    new["status"]["phase"] = json!("Terminating");
                }
                if opts.write.dry_run {
                    return Ok(Deleted::Pending(new));
                }
                match self
                    .ds
                    .update(&t.key(), kv.mod_revision, encode_as(t.resource, &new)?)
                    .await?
                {
                    WriteOutcome::Done { revision } => {
                        meta::set_resource_version(&mut new, revision);
                        return Ok(Deleted::Pending(new));
                    }
                    WriteOutcome::Conflict { .. } => continue,
                }
            } else if is_pod(t) && !meta::is_deleting(&old) {
                // Pods always delete gracefully upstream: an unbound or finished pod (or
                // one deleted with grace period 0) is first marked with a deletionTimestamp
                // and a zero grace period, which watchers see, then removed; the answer is
                // the marked pod.
                let mut marked = old;
                let m = meta::metadata_mut(&mut marked);
                m.insert(
                    "deletionTimestamp".into(),
                    json!(meta::rfc3339(SystemTime::now())),
                );
                m.insert("deletionGracePeriodSeconds".into(), json!(0));
                if opts.write.dry_run {
                    return Ok(Deleted::Gone(marked));
                }
                let revision = match self
                    .ds
                    .update(&t.key(), kv.mod_revision, encode_as(t.resource, &marked)?)
                    .await?
                {
                    WriteOutcome::Done { revision } => revision,
                    WriteOutcome::Conflict { .. } => continue,
                };
                meta::set_resource_version(&mut marked, revision);
                match self.ds.delete(&t.key(), revision).await? {
                    WriteOutcome::Done { .. } => return Ok(Deleted::Gone(marked)),
                    // Changed between the two writes: the next attempt sees it marked.
                    WriteOutcome::Conflict { .. } => continue,
                }
            } else {
                if opts.write.dry_run {
                    return Ok(Deleted::Gone(old));
                }
                self.ds.delete(&t.key(), kv.mod_revision).await?
            };
            match outcome {
                WriteOutcome::Done { .. } => return Ok(Deleted::Gone(old)),
                WriteOutcome::Conflict { .. } => continue,
            }
        }
        Err(ApiError::conflict(t.subject()))
    }

    /// DELETE on a collection: deletes every object the selectors match; answers with the
    /// list of them as they were listed (upstream's `DeleteCollection`).
    pub async fn delete_collection(
        &self,
        t: &Target,
        list: ListOptions,
        opts: &DeleteOptions,
    ) -> ApiResult<Value> {
        let mut listed = self.list(t, list).await?;
        let items = listed["items"].as_array().cloned().unwrap_or_default();
        let mut out = Vec::new();
        for item in items {
            let one = Target {
                namespace: Some(meta::namespace(&item).to_string()).filter(|n| !n.is_empty()),
                name: Some(meta::name(&item).to_string()),
                ..t.clone()
            };
            if strategy::delete_refusal(t.resource, one.name()).is_some() {
                // Protected objects (system priority classes) stay; the rest goes.
                continue;
            }
            // As upstream's `DeleteCollection`: the answer lists the objects as listed.
            match self.delete(&one, opts).await {
                Ok(_) => out.push(item),
                Err(e) if e.code == 404 => out.push(item),
                Err(e) => return Err(e),
            }
        }
        listed["items"] = json!(out);
        Ok(listed)
    }
}

fn check_preconditions(t: &Target, obj: &Value, opts: &DeleteOptions) -> ApiResult<()> {
    if let Some(uid) = &opts.precondition_uid {
        if uid != meta::uid(obj) {
            return Err(ApiError::conflict_because(
                t.subject(),
                &format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                    meta::uid(obj)
                ),
            ));
        }
    }
    if let Some(rv) = &opts.precondition_resource_version {
        if rv != meta::resource_version(obj) {
            return Err(ApiError::conflict_because(
                t.subject(),
                &format!(
                    "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                    meta::resource_version(obj)
                ),
            ));
        }
    }
    Ok(())
}

fn is_pod(t: &Target) -> bool {
    t.resource.group.is_empty() && t.resource.kind == "Pod"
}

/// Pods bound to a node terminate gracefully (the kubelet finishes the deletion); everything
/// else is deleted at once.
fn grace_period(t: &Target, obj: &Value, opts: &DeleteOptions) -> i64 {
    if !is_pod(t) || obj["spec"]["nodeName"].as_str().is_none_or(str::is_empty) {
        return 0;
    }
    let phase = obj["status"]["phase"].as_str().unwrap_or("");
    if phase == "Succeeded" || phase == "Failed" {
        return 0;
    }
    opts.grace_period_seconds
        .or_else(|| obj["spec"]["terminationGracePeriodSeconds"].as_i64())
        .unwrap_or(30)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k3rs_apimachinery::catalog;

    #[test]
    fn answers_are_the_registries() {
        let obj = |kind: &str| {
            json!({"kind": kind, "metadata": {"name": "x", "uid": "u-1",
                "deletionTimestamp": "2026-01-01T00:00:00Z"}})
        };
        let cms = catalog::lookup("", "v1", "configmaps").unwrap();
        let svcs = catalog::lookup("", "v1", "services").unwrap();
        assert_eq!(
            Deleted::Gone(obj("ConfigMap")).answer(cms),
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                "details": {"name": "x", "kind": "configmaps", "uid": "u-1"}})
        );
        assert_eq!(Deleted::Gone(obj("Service")).answer(svcs), obj("Service"));
        assert_eq!(
            Deleted::Pending(obj("ConfigMap")).answer(cms),
            obj("ConfigMap")
        );
        let rdo: Vec<&str> = catalog::CATALOG
            .iter()
            .filter(|r| r.returns_deleted_object)
            .map(|r| r.plural)
            .collect();
        assert_eq!(
            rdo,
            [
                "namespaces",
                "pods",
                "services",
                "serviceaccounts",
                "persistentvolumes",
                "persistentvolumeclaims",
                "resourcequotas",
                "podtemplates",
                "storageclasses",
                "csidrivers"
            ]
        );
    }
}
