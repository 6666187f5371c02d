//! ResourceQuota admission: a create that would take a namespace past one of its quotas is
//! refused (403, `exceeded quota: …`), and one that fits is charged to every quota it falls
//! under before it is stored — `status.used` is raised with a compare-and-swap on the quota, so
//! concurrent creates cannot both take the last unit. The quota controller
//! ([`crate::controllers::resource_quota`]) recalculates `status` from what exists (and so
//! gives back what deletions and failed writes left charged).

use futures::future::BoxFuture;

use super::{forbidden, Attributes, Operation, Validating};
use crate::registry::{decode, keys, Registry};
use k3rs_apimachinery::catalog;
use k3rs_apimachinery::quota::{check, usage};
use k3rs_apimachinery::status::{ApiError, ApiResult, Subject};

/// Rounds of read-check-charge before a create gives up under contention.
const ATTEMPTS: usize = 16;

/// The plugin (the last validating plugin, as in kube-apiserver).
#[derive(Debug, Clone, Copy)]
pub struct ResourceQuota;

impl Validating for ResourceQuota {
    fn name(&self) -> &'static str {
        "ResourceQuota"
    }

    fn validate<'a>(
        &'a self,
        a: &'a Attributes,
        reg: &'a Registry,
    ) -> BoxFuture<'a, ApiResult<()>> {
        Box::pin(admit_create(a, reg))
    }
}

async fn admit_create(a: &Attributes, reg: &Registry) -> ApiResult<()> {
    let Some(obj) = a.object.as_ref() else {
        return Ok(());
    };
    if a.operation != Operation::Create || a.subresource.is_some() || a.namespace.is_empty() {
        return Ok(());
    }
    let Some(quotas) = catalog::lookup("", "v1", "resourcequotas") else {
        return Ok(());
    };
    let delta = usage::usage(a.resource, obj);
    if delta.is_empty() {
        return Ok(());
    }
    let is_pod = a.is("", "Pod");
    let pod = is_pod.then_some(obj);
    for _ in 0..ATTEMPTS {
        let kvs = reg
            .all_under(keys::list_prefix(quotas, Some(&a.namespace)))
            .await?;
        let mut charges = Vec::new();
        for kv in kvs {
            let q = decode(&kv)?;
            if !check::matches(&q, is_pod, obj) {
                continue;
            }
            match check::charge(&q, &delta, pod) {
                Ok(None) => {}
                Ok(Some(used)) => charges.push((kv, q, used)),
                Err(why) => return Err(forbidden(a, &why.to_string())),
            }
        }
        if a.dry_run || charges.is_empty() {
            return Ok(());
        }
        let mut raced = false;
        for (kv, mut q, used) in charges {
            q["status"]["used"] = check::used_json(&used);
            if reg
                .replace_at(quotas, &kv.key, kv.mod_revision, q)
                .await?
                .is_none()
            {
                raced = true;
                break;
            }
        }
        if !raced {
            return Ok(());
        }
    }
    Err(ApiError::conflict(Subject {
        group: "",
        kind: "resourcequotas",
        name: "",
    }))
}
