//! LimitRanger: the LimitRanges of a namespace give its new pods' containers default
//! requests and limits ([`defaults`]) and bound what pods and PersistentVolumeClaims may ask
//! for ([`constraints`]); a violation is a 403 listing every broken bound
//! (`pods "p" is forbidden: [minimum cpu usage per Container is 100m, but request is 50m, …]`).
//! Pods are looked at when created (their containers' resources cannot change later), claims
//! when created or resized. The LimitRanges are read from the API server's cache
//! ([`super::lister`]), as upstream reads its lister.

pub mod constraints;
pub mod defaults;

use futures::future::BoxFuture;
use serde_json::Value;

use super::lister::Lister;
use super::{forbidden, Attributes, Mutating, Operation, Validating};
use crate::registry::Registry;
use k3rs_apimachinery::status::ApiResult;
use k8s_openapi::api::core::v1::LimitRange;

/// The plugin.
#[derive(Debug, Clone, Default)]
pub struct LimitRanger {
    /// The LimitRanges it reads first.
    pub ranges: Lister<LimitRange>,
}

/// Pod creates and claim creates/updates, never subresources.
fn applies(a: &Attributes) -> bool {
    if a.subresource.is_some() || a.object.is_none() || a.namespace.is_empty() {
        return false;
    }
    match a.operation {
        Operation::Create => a.is("", "Pod") || a.is("", "PersistentVolumeClaim"),
        Operation::Update => a.is("", "PersistentVolumeClaim"),
        _ => false,
    }
}

impl LimitRanger {
    /// The namespace's LimitRanges, by name.
    async fn limit_ranges(&self, reg: &Registry, namespace: &str) -> ApiResult<Vec<Value>> {
        match self.ranges.namespaced(namespace) {
            Some(cached) => cached,
            None => super::stored(reg, "", "limitranges", Some(namespace)).await,
        }
    }
}

impl Mutating for LimitRanger {
    fn name(&self) -> &'static str {
        "LimitRanger"
    }

    fn admit<'a>(
        &'a self,
        a: &'a mut Attributes,
        reg: &'a Registry,
    ) -> BoxFuture<'a, ApiResult<()>> {
        Box::pin(async move {
            if a.is("", "LimitRange") {
                self.ranges.note_write(&a.namespace);
            }
            if !applies(a) || !a.is("", "Pod") {
                return Ok(());
            }
            let ranges = self.limit_ranges(reg, &a.namespace).await?;
            if let Some(pod) = a.object.as_mut() {
                for lr in &ranges {
                    defaults::apply(pod, &defaults::of(lr));
                }
            }
            Ok(())
        })
    }
}

impl Validating for LimitRanger {
    fn name(&self) -> &'static str {
        "LimitRanger"
    }

    fn validate<'a>(
        &'a self,
        a: &'a Attributes,
        reg: &'a Registry,
    ) -> BoxFuture<'a, ApiResult<()>> {
        Box::pin(async move {
            let Some(obj) = a.object.as_ref().filter(|_| applies(a)) else {
                return Ok(());
            };
            let mut errs = Vec::new();
            for lr in self.limit_ranges(reg, &a.namespace).await? {
                if a.is("", "Pod") {
                    errs.extend(constraints::pod_violations(&lr, obj));
                } else {
                    errs.extend(constraints::claim_violations(&lr, obj));
                }
            }
            match constraints::aggregate(&errs) {
                Some(why) => Err(forbidden(a, &why)),
                None => Ok(()),
            }
        })
    }
}
