//! PodSecurity (kube-apiserver's built-in pod-security-admission): the Pod Security Standards
//! (`privileged`, `baseline`, `restricted`) enforced per namespace through its
//! `pod-security.kubernetes.io/{enforce,audit,warn}[-version]` labels.
//!
//! # Guarantees
//! - Pods (create, update that changes an image or adds an ephemeral container, and the
//!   `ephemeralcontainers` subresource) failing the enforce level are denied with 403 and
//!   upstream's `violates PodSecurity "<level>:<version>": …` message; passing pods failing
//!   the warn level get a `would violate PodSecurity …` Warning.
//! - Workload resources (deployments, replicasets, statefulsets, daemonsets, jobs, cronjobs,
//!   replicationcontrollers, podtemplates) are never denied: their pod templates are only
//!   warned about (their pods are enforced when created).
//! - Namespaces with malformed labels are rejected (422); tightening a namespace's enforce
//!   level warns about the existing pods that would now be denied.
//! - Without labels every mode is `privileged:latest` (k3s's default): nothing is checked.
//!
//! # Not here
//! Exemptions (usernames, runtime classes, namespaces) and the admission configuration
//! file; audit annotations (k3rs keeps no audit log of annotations).

pub mod checks;
pub mod decision;
pub mod policy;

use futures::future::BoxFuture;

use super::{forbidden, stored, Attributes, Operation, Validating};
use crate::apiserver::registry::{Registry, Target};
use crate::apiserver::resources::catalog;
use crate::apiserver::status::{ApiError, ApiResult, Subject};
use crate::apiserver::warning;
use decision::ExistingPod;

/// The plugin.
#[derive(Debug, Clone, Copy, Default)]
pub struct PodSecurity;

impl Validating for PodSecurity {
    fn name(&self) -> &'static str {
        "PodSecurity"
    }

    fn validate<'a>(
        &'a self,
        a: &'a Attributes,
        reg: &'a Registry,
    ) -> BoxFuture<'a, ApiResult<()>> {
        Box::pin(async move {
            if !matches!(a.operation, Operation::Create | Operation::Update) {
                return Ok(());
            }
            let (group, kind) = (a.resource.group, a.resource.kind);
            match (group, kind) {
                ("", "Namespace") if a.subresource.is_none() => validate_namespace(a, reg).await,
                ("", "Pod") => match a.subresource.as_deref() {
                    None | Some("ephemeralcontainers") => validate_pod(a, reg).await,
                    Some(_) => Ok(()),
                },
                _ if a.subresource.is_none()
                    && decision::POD_TEMPLATE_KINDS.contains(&(group, kind)) =>
                {
                    validate_workload(a, reg).await
                }
                _ => Ok(()),
            }
        })
    }
}

/// The policy of namespace `name`, and the errors of its malformed labels.
async fn namespace_policy(
    reg: &Registry,
    name: &str,
) -> ApiResult<(policy::Policy, Vec<crate::apiserver::status::Cause>)> {
    let Some(namespaces) = catalog::lookup("", "v1", "namespaces") else {
        return Ok(Default::default());
    };
    let t = Target {
        resource: namespaces,
        namespace: None,
        name: Some(name.to_string()),
        subresource: None,
    };
    let ns = reg.get(&t).await.map_err(|e| {
        tracing::warn!(namespace = %name, error = %e.message, "PodSecurity: namespace lookup failed");
        ApiError::internal(format!(
            "Internal error occurred: failed to lookup namespace {name:?}"
        ))
    })?;
    Ok(policy::policy_to_evaluate(&policy::labels_of(&ns)))
}

async fn validate_pod(a: &Attributes, reg: &Registry) -> ApiResult<()> {
    let (p, _) = namespace_policy(reg, &a.namespace).await?;
    if p.fully_privileged() {
        return Ok(());
    }
    let Some(obj) = &a.object else {
        return Ok(());
    };
    if let (Operation::Update, Some(old)) = (a.operation, &a.old_object) {
        if !decision::significant_pod_update(obj, old) {
            return Ok(());
        }
    }
    let parts =
        decision::parts_of(obj).map_err(|_| ApiError::bad_request("failed to decode pod"))?;
    apply(a, decision::evaluate(&p, &parts, true))
}

async fn validate_workload(a: &Attributes, reg: &Registry) -> ApiResult<()> {
    // Workloads are never denied: a failed lookup or decode only skips the warning.
    let Ok((p, _)) = namespace_policy(reg, &a.namespace).await else {
        return Ok(());
    };
    if p.warn.level == policy::Level::Privileged {
        return Ok(());
    }
    let Some(template) = a
        .object
        .as_ref()
        .and_then(|o| decision::template_of(a.resource.kind, o))
    else {
        return Ok(());
    };
    if let Ok(parts) = decision::parts_of(template) {
        apply(a, decision::evaluate(&p, &parts, false))?;
    }
    Ok(())
}

/// Sends the evaluation's warning, or its denial.
fn apply(a: &Attributes, e: decision::Evaluation) -> ApiResult<()> {
    if let Some(why) = e.denied {
        return Err(forbidden(a, &why));
    }
    if let Some(w) = e.warning {
        warning::add(w);
    }
    Ok(())
}

async fn validate_namespace(a: &Attributes, reg: &Registry) -> ApiResult<()> {
    let Some(obj) = &a.object else {
        return Ok(());
    };
    let (new, errs) = policy::policy_to_evaluate(&policy::labels_of(obj));
    let invalid = |errs| {
        ApiError::invalid(
            Subject {
                group: "",
                kind: "Namespace",
                name: &a.name,
            },
            errs,
        )
    };
    let old = match (&a.old_object, a.operation) {
        (Some(old), Operation::Update) => old,
        _ if !errs.is_empty() => return Err(invalid(errs)),
        _ => return Ok(()),
    };
    let (old_policy, old_errs) = policy::policy_to_evaluate(&policy::labels_of(old));
    if !errs.is_empty() && errs != old_errs {
        return Err(invalid(errs));
    }
    if !decision::enforce_tightened(&old_policy, &new) {
        return Ok(());
    }
    let name = crate::apiserver::registry::meta::name(obj);
    let pods = match stored(reg, "", "pods", Some(name)).await {
        Ok(pods) => pods,
        Err(_) => {
            warning::add("failed to list pods while checking new PodSecurity enforce level");
            return Ok(());
        }
    };
    let existing: Vec<ExistingPod> = pods
        .iter()
        .filter_map(|p| {
            Some(ExistingPod {
                name: crate::apiserver::registry::meta::name(p).to_string(),
                controller: decision::controller_uid(p),
                parts: decision::parts_of(p).ok()?,
            })
        })
        .collect();
    for w in decision::namespace_warnings(name, new.enforce, &existing) {
        warning::add(w);
    }
    Ok(())
}
