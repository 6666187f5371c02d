//! Admission webhooks (`MutatingAdmissionWebhook`, `ValidatingAdmissionWebhook`): the
//! services named by Mutating/ValidatingWebhookConfigurations receive an
//! `admission.k8s.io/v1 AdmissionReview` for each write they match and allow it, deny it or
//! (mutating ones) patch it.
//!
//! # Guarantees
//! - Configurations come from a watch-fed cache ([`cache`]); they are called in name order,
//!   their webhooks in order, one at a time. Until the cache has its first lists, requests
//!   wait (at most [`READY_WAIT`](crate::apiserver::admission::validating_policy::READY_WAIT)).
//! - A webhook is called when its rules, namespace and object selectors (the policies'
//!   [matcher](crate::apiserver::admission::validating_policy::matcher)) and match conditions
//!   select the request; a dry-run request is refused by webhooks with side effects.
//! - A call that fails (unreachable, timeout, bad answer) denies with a 500 under
//!   `failurePolicy: Fail` and is skipped under `Ignore`.
//! - Admission configuration objects themselves and the server's own bootstrap writes are
//!   never sent to webhooks.
//! - Warnings reach the client; audit annotations are recorded as `<webhook>/<key>`.

pub mod cache;
pub mod call;
pub mod definition;
pub mod model;
pub mod review;

use futures::future::BoxFuture;
use serde_json::Value;

use super::validating_policy::{self as vap, matcher, Namespace};
use super::{forbidden, Attributes, Mutating, Validating};
use crate::apiserver::registry::Registry;
use crate::apiserver::status::{ApiError, ApiResult};
use cache::WebhookCache;
use model::Webhook;
use review::Verdict;

/// Whether the match conditions select the request (`Err`: one failed, none was false).
fn conditions(w: &Webhook, a: &Attributes, request: &Value) -> Result<bool, String> {
    if w.match_conditions.is_empty() {
        return Ok(true);
    }
    let vars: crate::cel::Vars = vec![
        ("object", plain(a.object.as_ref())),
        ("oldObject", plain(a.old_object.as_ref())),
        ("request", plain(Some(request))),
    ];
    let conditions = w.match_conditions.clone();
    crate::cel::bounded(move || {
        let mut error = None;
        for c in &conditions {
            match crate::cel::evaluate(&c.program, &vars) {
                Ok(cel::Value::Bool(false)) => return Ok(false),
                Ok(cel::Value::Bool(true)) => {}
                Ok(_) => {
                    error.get_or_insert(format!(
                        "matchCondition '{}' did not evaluate to a bool",
                        c.name
                    ));
                }
                Err(e) => {
                    error.get_or_insert(format!("matchCondition '{}': {e}", c.name));
                }
            }
        }
        error.map_or(Ok(true), Err)
    })
    .unwrap_or_else(|| Err("match conditions ran out of time".into()))
}

fn plain(v: Option<&Value>) -> crate::cel::Var {
    crate::cel::Var::Plain(crate::cel::value::to_cel(v.unwrap_or(&Value::Null), None))
}

/// A failure under the webhook's failure policy.
fn failure(w: &Webhook, why: &str) -> ApiResult<Option<Verdict>> {
    if w.ignore_failures {
        tracing::warn!(webhook = %w.name, error = %why, "failed calling webhook; failurePolicy Ignore admits");
        Ok(None)
    } else {
        Err(review::call_failure(&w.name, why))
    }
}

/// Calls `w` when it selects the request; `None` when it does not (or failed, ignored).
async fn consult(
    w: &Webhook,
    a: &Attributes,
    reg: &Registry,
    ns: &mut Namespace<'_>,
) -> ApiResult<Option<Verdict>> {
    let labels = if vap::in_namespace(a) && !w.matching.namespace_selector.is_empty() {
        ns.labels().await
    } else {
        None
    };
    let matched = match matcher::matches(&w.matching, a, labels.as_ref()) {
        Ok(None) => return Ok(None),
        Ok(Some(r)) => r,
        Err(e) => return failure(w, &e),
    };
    if let Some(e) = &w.config_error {
        return failure(w, e);
    }
    let uid = uuid::Uuid::new_v4().to_string();
    let request = vap::request::admission_request(a, matched, &uid);
    match conditions(w, a, &request) {
        Ok(false) => return Ok(None),
        Ok(true) => {}
        Err(e) => return failure(w, &e),
    }
    if a.dry_run && !w.dry_run_safe {
        return Err(ApiError::bad_request(format!(
            "admission webhook \"{}\" does not support dry run",
            w.name
        )));
    }
    let review = review::request(a, request);
    let verdict = match call::call(reg, w, &review).await {
        Ok(body) => review::verdict(&body, &uid),
        Err(e) => Err(e),
    };
    let verdict = match verdict {
        Ok(v) => v,
        Err(e) => return failure(w, &e),
    };
    for warning in &verdict.warnings {
        crate::apiserver::warning::add(warning.clone());
    }
    for (k, v) in &verdict.audit_annotations {
        crate::audit::annotations::add(format!("{}/{k}", w.name), v.clone());
    }
    Ok(Some(verdict))
}

/// Waits for the cache's first lists; false when they did not come in time.
async fn ready(cache: &WebhookCache) -> bool {
    cache.ready()
        || tokio::time::timeout(vap::READY_WAIT, cache.wait_until_ready())
            .await
            .is_ok()
}

/// The `ValidatingAdmissionWebhook` plugin.
#[derive(Debug, Clone)]
pub struct ValidatingWebhooks {
    pub cache: WebhookCache,
}

impl Validating for ValidatingWebhooks {
    fn name(&self) -> &'static str {
        "ValidatingAdmissionWebhook"
    }

    fn validate<'a>(
        &'a self,
        a: &'a Attributes,
        reg: &'a Registry,
    ) -> BoxFuture<'a, ApiResult<()>> {
        Box::pin(async move {
            if a.user.is_none() || vap::exempt(a) {
                return Ok(());
            }
            if !ready(&self.cache).await {
                return Err(forbidden(a, "not yet ready to handle request"));
            }
            let mut ns = Namespace::of(a, reg);
            for (_, hooks) in self.cache.validating() {
                for w in hooks.iter() {
                    if let Some(v) = consult(w, a, reg, &mut ns).await? {
                        if !v.allowed {
                            return Err(review::denial(&w.name, &v.status));
                        }
                    }
                }
            }
            Ok(())
        })
    }
}

/// The `MutatingAdmissionWebhook` plugin.
#[derive(Debug, Clone)]
pub struct MutatingWebhooks {
    pub cache: WebhookCache,
}

impl Mutating for MutatingWebhooks {
    fn name(&self) -> &'static str {
        "MutatingAdmissionWebhook"
    }

    fn admit<'a>(
        &'a self,
        a: &'a mut Attributes,
        reg: &'a Registry,
    ) -> BoxFuture<'a, ApiResult<()>> {
        Box::pin(async move {
            if a.user.is_none() || vap::exempt(a) {
                return Ok(());
            }
            if !ready(&self.cache).await {
                return Err(forbidden(a, "not yet ready to handle request"));
            }
            for (_, hooks) in self.cache.mutating() {
                for w in hooks.iter() {
                    let verdict = {
                        let view: &Attributes = a;
                        let mut ns = Namespace::of(view, reg);
                        consult(w, view, reg, &mut ns).await?
                    };
                    let Some(v) = verdict else { continue };
                    if !v.allowed {
                        return Err(review::denial(&w.name, &v.status));
                    }
                    if let (Some(patch), Some(obj)) = (v.patch, a.object.as_mut()) {
                        match crate::patch::json_patch::apply(obj, &patch) {
                            Ok(patched) => *obj = patched,
                            Err(e) => {
                                return Err(ApiError::internal(format!(
                                    "admission webhook \"{}\" returned a patch that does not apply: {e}",
                                    w.name
                                )))
                            }
                        }
                    }
                }
            }
            Ok(())
        })
    }
}
