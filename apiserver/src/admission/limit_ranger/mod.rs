//! LimitRanger: the LimitRanges of a namespace give its new pods' containers default
//! requests and limits ([`defaults`]) and bound what pods and PersistentVolumeClaims may ask
//! for ([`constraints`]); a violation is a 403 listing every broken bound
//! (`pods "p" is forbidden: [minimum cpu usage per Container is 100m, but request is 50m, …]`).
//! Pods are looked at when created (their containers' resources cannot change later), claims
//! when created or resized.

pub mod constraints;
pub mod defaults;

use futures::future::BoxFuture;
use serde_json::Value;

use super::{forbidden, Attributes, Mutating, Operation, Validating};
use crate::registry::Registry;
use k3rs_apimachinery::status::ApiResult;

/// The plugin.
#[derive(Debug, Clone, Copy)]
pub struct LimitRanger;

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

async fn limit_ranges(reg: &Registry, namespace: &str) -> ApiResult<Vec<Value>> {
    super::stored(reg, "", "limitranges", Some(namespace)).await
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
            if !applies(a) || !a.is("", "Pod") {
                return Ok(());
            }
            let ranges = limit_ranges(reg, &a.namespace).await?;
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
            for lr in limit_ranges(reg, &a.namespace).await? {
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
