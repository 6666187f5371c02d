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
//! - Modes a namespace does not label use the admission configuration's defaults
//!   ([`config`]; without one every mode is `privileged:latest`, k3s's default, and nothing
//!   is checked). Exempt namespaces, users and runtime classes are not evaluated.
//! - Each evaluation leaves upstream's audit annotations (`pod-security.kubernetes.io/`
//!   `enforce-policy`, `audit-violations`, `exempt`, `error`) on the request's audit event.

pub mod checks;
pub mod config;
pub mod decision;
pub mod policy;

use std::sync::Arc;

use futures::future::BoxFuture;

use super::{forbidden, stored, Attributes, Operation, Validating};
use crate::registry::{Registry, Target};
use crate::warning;
use decision::ExistingPod;
use k3rs_apimachinery::catalog;
use k3rs_apimachinery::informers::Informer;
use k3rs_apimachinery::status::{ApiError, ApiResult, Subject};
use k8s_openapi::api::core::v1::Namespace;
use kube::runtime::reflector::ObjectRef;

/// The plugin.
#[derive(Debug, Clone, Default)]
pub struct PodSecurity {
    pub config: Arc<config::Config>,
    /// The namespaces it reads first (upstream's namespace lister); `None`, or a miss (a
    /// namespace created a moment ago, a cache not yet synced), reads the registry.
    pub namespaces: Option<Informer<Namespace>>,
}

/// Prefix of PodSecurity's audit annotations.
const ANNOTATION_PREFIX: &str = "pod-security.kubernetes.io/";

fn annotate(key: &str, value: impl Into<String>) {
    crate::audit::annotations::add(format!("{ANNOTATION_PREFIX}{key}"), value);
}

impl PodSecurity {
    /// Whether the request's namespace or user is exempt (annotated as upstream does).
    fn exempt(&self, a: &Attributes) -> bool {
        let ex = &self.config.exemptions;
        let why = if ex.namespace(&a.namespace) {
            "namespace"
        } else if a.user.as_ref().is_some_and(|u| ex.user(&u.username)) {
            "user"
        } else {
            return false;
        };
        annotate("exempt", why);
        true
    }

    /// Whether the pod (or template) runs with an exempt runtime class.
    fn exempt_runtime_class(&self, pod: &serde_json::Value) -> bool {
        let class = pod["spec"]["runtimeClassName"].as_str();
        let exempt = self.config.exemptions.runtime_class(class);
        if exempt {
            annotate("exempt", "runtimeClass");
        }
        exempt
    }
}

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
                ("", "Namespace") if a.subresource.is_none() => {
                    self.validate_namespace(a, reg).await
                }
                ("", "Pod") => match a.subresource.as_deref() {
                    None | Some("ephemeralcontainers") => self.validate_pod(a, reg).await,
                    Some(_) => Ok(()),
                },
                _ if a.subresource.is_none()
                    && decision::POD_TEMPLATE_KINDS.contains(&(group, kind)) =>
                {
                    self.validate_workload(a, reg).await
                }
                _ => Ok(()),
            }
        })
    }
}

/// The policy of namespace `name`, and the errors of its malformed labels.
async fn namespace_policy(
    cached: Option<&Informer<Namespace>>,
    reg: &Registry,
    name: &str,
    defaults: &policy::Policy,
) -> ApiResult<(policy::Policy, Vec<k3rs_apimachinery::status::Cause>)> {
    if let Some(ns) = cached.and_then(|c| c.get(&ObjectRef::new(name))) {
        let labels = ns.metadata.labels.clone().unwrap_or_default();
        return Ok(policy::policy_to_evaluate(&labels, defaults));
    }
    let Some(namespaces) = catalog::lookup("", "v1", "namespaces") else {
        return Ok((*defaults, Vec::new()));
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
    Ok(policy::policy_to_evaluate(
        &policy::labels_of(&ns),
        defaults,
    ))
}

impl PodSecurity {
    async fn validate_pod(&self, a: &Attributes, reg: &Registry) -> ApiResult<()> {
        if self.exempt(a) {
            return Ok(());
        }
        let (p, errs) = namespace_policy(
            self.namespaces.as_ref(),
            reg,
            &a.namespace,
            &self.config.defaults,
        )
        .await?;
        if errs.is_empty() && p.fully_privileged() {
            annotate(
                "enforce-policy",
                policy::LevelVersion::PRIVILEGED.to_string(),
            );
            return Ok(());
        }
        let Some(obj) = &a.object else {
            return Ok(());
        };
        if let (Operation::Update, Some(old)) = (a.operation, a.old_object.as_deref()) {
            if !decision::significant_pod_update(obj, old) {
                return Ok(());
            }
        }
        if self.exempt_runtime_class(obj) {
            return Ok(());
        }
        let parts =
            decision::parts_of(obj).map_err(|_| ApiError::bad_request("failed to decode pod"))?;
        annotate_policy_errors(&errs);
        annotate("enforce-policy", p.enforce.to_string());
        apply(a, decision::evaluate(&p, &parts, true))
    }

    async fn validate_workload(&self, a: &Attributes, reg: &Registry) -> ApiResult<()> {
        if self.exempt(a) {
            return Ok(());
        }
        // Workloads are never denied: a failed lookup or decode only skips the evaluation.
        let (p, errs) = match namespace_policy(
            self.namespaces.as_ref(),
            reg,
            &a.namespace,
            &self.config.defaults,
        )
        .await
        {
            Ok(r) => r,
            Err(_) => {
                annotate(
                    "error",
                    format!("failed to lookup namespace {:?}", a.namespace),
                );
                return Ok(());
            }
        };
        if errs.is_empty()
            && p.warn.level == policy::Level::Privileged
            && p.audit.level == policy::Level::Privileged
        {
            return Ok(());
        }
        let Some(template) = a
            .object
            .as_ref()
            .and_then(|o| decision::template_of(a.resource.kind, o))
        else {
            return Ok(());
        };
        if self.exempt_runtime_class(template) {
            return Ok(());
        }
        if let Ok(parts) = decision::parts_of(template) {
            annotate_policy_errors(&errs);
            apply(a, decision::evaluate(&p, &parts, false))?;
        }
        Ok(())
    }
}

/// The `error` audit annotation of a namespace's malformed labels.
fn annotate_policy_errors(errs: &[k3rs_apimachinery::status::Cause]) {
    if errs.is_empty() {
        return;
    }
    let text: Vec<String> = errs
        .iter()
        .map(|c| format!("{}: {}", c.field, c.message))
        .collect();
    annotate(
        "error",
        format!("Failed to parse policy: {}", text.join(", ")),
    );
}

/// Sends the evaluation's denial, or its warning; records its audit violations.
fn apply(a: &Attributes, e: decision::Evaluation) -> ApiResult<()> {
    if let Some(v) = e.audit {
        annotate("audit-violations", v);
    }
    if let Some(why) = e.denied {
        return Err(forbidden(a, &why));
    }
    if let Some(w) = e.warning {
        warning::add(w);
    }
    Ok(())
}

impl PodSecurity {
    async fn validate_namespace(&self, a: &Attributes, reg: &Registry) -> ApiResult<()> {
        let Some(obj) = &a.object else {
            return Ok(());
        };
        let defaults = &self.config.defaults;
        let (new, errs) = policy::policy_to_evaluate(&policy::labels_of(obj), defaults);
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
        let old = match (a.old_object.as_deref(), a.operation) {
            (Some(old), Operation::Update) => old,
            _ if !errs.is_empty() => return Err(invalid(errs)),
            _ => return Ok(()),
        };
        let (old_policy, old_errs) = policy::policy_to_evaluate(&policy::labels_of(old), defaults);
        if !errs.is_empty() && errs != old_errs {
            return Err(invalid(errs));
        }
        if !decision::enforce_tightened(&old_policy, &new)
            || self.config.exemptions.namespace(&a.name)
        {
            return Ok(());
        }
        let name = k3rs_apimachinery::meta::name(obj);
        let pods = match stored(reg, "", "pods", Some(name)).await {
            Ok(pods) => pods,
            Err(_) => {
                warning::add("failed to list pods while checking new PodSecurity enforce level");
                return Ok(());
            }
        };
        let existing: Vec<ExistingPod> = pods
            .iter()
            .filter(|p| {
                let class = p["spec"]["runtimeClassName"].as_str();
                !self.config.exemptions.runtime_class(class)
            })
            .filter_map(|p| {
                Some(ExistingPod {
                    name: k3rs_apimachinery::meta::name(p).to_string(),
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
}
