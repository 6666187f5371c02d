//! ResourceQuota admission: a create that would take a namespace past one of its quotas is
//! refused (403, `exceeded quota: …`), and one that fits is charged to every quota it falls
//! under before it is stored — `status.used` is raised with a compare-and-swap on the quota, so
//! concurrent creates cannot both take the last unit. The quota controller
//! ([`crate::controllers::resource_quota`]) recalculates `status` from what exists (and so
//! gives back what deletions and failed writes left charged).
//!
//! The API server's cache of ResourceQuotas ([`super::lister`]) only answers "nothing to
//! charge here" (no quota of the namespace covers what the object uses, the common case);
//! whenever a cached quota would charge or refuse, the decision is taken again on the quotas
//! read from the store and charged with the compare-and-swap above, so a burst can never take a
//! quota past `hard`, whatever the cache holds. A quota written through this server sends its
//! namespace to the store for 30 s, so a pod created right after its quota is charged.

use futures::future::BoxFuture;

use serde_json::Value;

use super::lister::Lister;
use super::{forbidden, Attributes, Operation, Validating};
use crate::registry::{decode, keys, Registry};
use k3rs_apimachinery::catalog;
use k3rs_apimachinery::quota::usage::Usage;
use k3rs_apimachinery::quota::{check, usage};
use k3rs_apimachinery::status::{ApiError, ApiResult, Subject};

/// Rounds of read-check-charge before a create gives up under contention.
const ATTEMPTS: usize = 16;

/// The plugin (the last validating plugin, as in kube-apiserver).
#[derive(Debug, Clone, Default)]
pub struct ResourceQuota {
    /// The quotas it reads first.
    pub quotas: Lister<k8s_openapi::api::core::v1::ResourceQuota>,
}

impl Validating for ResourceQuota {
    fn name(&self) -> &'static str {
        "ResourceQuota"
    }

    fn validate<'a>(
        &'a self,
        a: &'a Attributes,
        reg: &'a Registry,
    ) -> BoxFuture<'a, ApiResult<()>> {
        Box::pin(async move {
            if a.is("", "ResourceQuota") {
                self.quotas.note_write(&a.namespace);
            }
            admit_create(a, reg, &self.quotas).await
        })
    }
}

/// Whether none of `quotas` would charge or refuse the object (pure).
pub fn charges_nothing(quotas: &[Value], is_pod: bool, obj: &Value, delta: &Usage) -> bool {
    let pod = is_pod.then_some(obj);
    quotas
        .iter()
        .filter(|q| check::matches(q, is_pod, obj))
        .all(|q| matches!(check::charge(q, delta, pod), Ok(None)))
}

async fn admit_create(
    a: &Attributes,
    reg: &Registry,
    cache: &Lister<k8s_openapi::api::core::v1::ResourceQuota>,
) -> ApiResult<()> {
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
    if let Some(cached) = cache.namespaced(&a.namespace) {
        if charges_nothing(&cached?, is_pod, obj, &delta) {
            return Ok(());
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod() -> Value {
        json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c",
            "resources": {"requests": {"cpu": "100m"}, "limits": {"cpu": "100m"}}}]}})
    }

    fn quota(hard: Value, used: Value) -> Value {
        json!({"metadata": {"name": "q", "namespace": "n"}, "spec": {"hard": hard},
            "status": {"hard": hard, "used": used}})
    }

    #[test]
    fn only_quotas_that_charge_nothing_skip_the_store() {
        let r = catalog::lookup("", "v1", "pods").unwrap();
        let pod = pod();
        let delta = usage::usage(r, &pod);
        assert!(charges_nothing(&[], true, &pod, &delta));
        let secrets = quota(json!({"secrets": "3"}), json!({"secrets": "0"}));
        assert!(charges_nothing(
            std::slice::from_ref(&secrets),
            true,
            &pod,
            &delta
        ));
        let pods = quota(json!({"pods": "3"}), json!({"pods": "0"}));
        assert!(!charges_nothing(&[secrets, pods], true, &pod, &delta));
        let full = quota(json!({"pods": "1"}), json!({"pods": "1"}));
        assert!(!charges_nothing(&[full], true, &pod, &delta));
    }
}
