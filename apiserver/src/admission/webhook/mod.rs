//! Admission webhooks (`MutatingAdmissionWebhook`, `ValidatingAdmissionWebhook`): the
//! services named by Mutating/ValidatingWebhookConfigurations receive an
//! `admission.k8s.io/v1 AdmissionReview` for each write they match and allow it, deny it or
//! (mutating ones) patch it.
//!
//! # Guarantees
//! - Configurations come from a watch-fed cache ([`cache`]). Mutating webhooks are called
//!   one at a time, configurations in name order and their webhooks in order; validating
//!   webhooks are called all at once, and the first denial or failure in that order is the
//!   answer.
//! - When a mutating webhook changes the object, the mutating plugins run once more and
//!   `reinvocationPolicy: IfNeeded` webhooks called before the change are called again
//!   ([`reinvocation`](super::reinvocation)); each call is recorded as the audit annotation
//!   `mutation.webhook.admission.k8s.io/round_<r>_index_<i>`.
//! - Until the cache has its first lists, requests wait (at most [`READY_WAIT`](crate::admission::validating_policy::READY_WAIT)).
//! - A webhook is called when its rules, namespace and object selectors (the policies'
//!   [matcher](crate::admission::validating_policy::matcher)) and match conditions
//!   select the request (conditions see `object`, `oldObject`, `request` and `authorizer`); a
//!   dry-run request is refused by webhooks with side effects.
//! - A call that fails (unreachable, timeout, bad answer) denies with a 500 under
//!   `failurePolicy: Fail` and is skipped under `Ignore`.
//! - Admission configuration objects themselves and the server's own bootstrap writes are
//!   never sent to webhooks.
//! - Warnings reach the client; audit annotations are recorded as `<webhook>/<key>`.

pub mod cache;
pub mod call;
pub mod definition;
pub mod model;
mod mutating;
pub mod review;
mod validating;

pub use mutating::MutatingWebhooks;
pub use validating::ValidatingWebhooks;

use std::collections::BTreeMap;

use serde_json::Value;

use super::validating_policy::{self as vap, matcher, Namespace};
use super::Attributes;
use crate::registry::Registry;
use cache::WebhookCache;
use k3rs_apimachinery::status::{ApiError, ApiResult};
use k3rs_auth::authz::Chain as Authz;
use model::Webhook;
use review::Verdict;

/// Why the match conditions could not decide (the first failure; none was false).
#[derive(Debug, thiserror::Error)]
enum ConditionError {
    /// The runtime cost budget ran out.
    #[error("{}", k3rs_cel::cost::OUT_OF_BUDGET)]
    OutOfBudget,
    /// A condition gave something other than a bool.
    #[error("matchCondition '{0}' did not evaluate to a bool")]
    NotBool(String),
    /// A condition failed (its per-call cost or its evaluation).
    #[error("matchCondition '{name}': {reason}")]
    Failed {
        /// The condition's name.
        name: String,
        /// Why.
        reason: String,
    },
    /// The CEL pool did not run the evaluation.
    #[error(transparent)]
    Pool(#[from] k3rs_cel::PoolError),
}

/// Whether the match conditions select the request (`Err`: one failed, none was false).
/// They are evaluated on the CEL pool (an `authorizer` check waits for the chain there),
/// each within the per-call cost limit and all within one runtime budget.
async fn conditions(
    w: &Webhook,
    a: &Attributes,
    request: &Value,
    authz: Option<&Authz>,
) -> Result<bool, ConditionError> {
    if w.match_conditions.is_empty() {
        return Ok(true);
    }
    let null = Value::Null;
    let shapes = vec![
        (
            "object",
            k3rs_cel::Shape::of_json(a.object.as_ref().unwrap_or(&null)),
        ),
        (
            "oldObject",
            k3rs_cel::Shape::of_json(a.old_object.as_deref().unwrap_or(&null)),
        ),
        ("request", k3rs_cel::Shape::of_json(request)),
        ("authorizer", k3rs_cel::Shape::Scalar),
    ];
    let mut vars: k3rs_cel::Vars = vec![
        ("object", plain(a.object.as_ref())),
        ("oldObject", plain(a.old_object.as_deref())),
        ("request", plain(Some(request))),
    ];
    if let Some(v) = authz.and_then(|c| vap::authorizer::variable(c, a)) {
        vars.push(("authorizer", k3rs_cel::Var::Authorizer(Box::new(v))));
    }
    let conditions = w.match_conditions.clone();
    let evaluate = move || {
        let mut error = None;
        let mut budget = k3rs_cel::Budget::runtime();
        for c in &conditions {
            let result = match budget.charge(k3rs_cel::cost_of(&c.program, &shapes)) {
                Err(k3rs_cel::Refusal::OutOfBudget) => return Err(ConditionError::OutOfBudget),
                Err(refused) => Err(refused.to_string()),
                Ok(()) => k3rs_cel::evaluate(&c.program, &vars).map_err(|e| e.to_string()),
            };
            match result {
                Ok(cel::Value::Bool(false)) => return Ok(false),
                Ok(cel::Value::Bool(true)) => {}
                Ok(_) => {
                    error.get_or_insert(ConditionError::NotBool(c.name.clone()));
                }
                Err(e) => {
                    error.get_or_insert(ConditionError::Failed {
                        name: c.name.clone(),
                        reason: e,
                    });
                }
            }
        }
        error.map_or(Ok(true), Err)
    };
    super::cel_pool::run(evaluate)
        .await
        .unwrap_or_else(|e| Err(e.into()))
}

fn plain(v: Option<&Value>) -> k3rs_cel::Var {
    k3rs_cel::Var::Plain(k3rs_cel::value::to_cel(v.unwrap_or(&Value::Null), None))
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
/// `labels` are the request's namespace's labels, when a webhook selects on them.
pub(crate) async fn consult(
    clients: &call::Clients,
    w: &Webhook,
    a: &Attributes,
    reg: &Registry,
    labels: Option<&BTreeMap<String, String>>,
    authz: Option<&Authz>,
) -> ApiResult<Option<Verdict>> {
    let matched = match matcher::matches(&w.matching, a, labels) {
        Ok(None) => return Ok(None),
        Ok(Some(r)) => r,
        Err(e) => return failure(w, &e.to_string()),
    };
    if let Some(e) = &w.config_error {
        return failure(w, e);
    }
    let uid = uuid::Uuid::new_v4().to_string();
    let request = vap::request::admission_request(a, matched, &uid);
    match conditions(w, a, &request, authz).await {
        Ok(false) => return Ok(None),
        Ok(true) => {}
        Err(e) => return failure(w, &e.to_string()),
    }
    if a.dry_run && !w.dry_run_safe {
        return Err(ApiError::bad_request(format!(
            "admission webhook \"{}\" does not support dry run",
            w.name
        )));
    }
    let review = review::request(a, request);
    let verdict = match call::call(clients, reg, w, &review).await {
        Ok(body) => review::verdict(&body, &uid).map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    let verdict = match verdict {
        Ok(v) => v,
        Err(e) => return failure(w, &e),
    };
    for warning in &verdict.warnings {
        crate::warning::add(warning.clone());
    }
    for (k, v) in &verdict.audit_annotations {
        crate::audit::annotations::add(format!("{}/{k}", w.name), v.clone());
    }
    Ok(Some(verdict))
}

/// The labels of the request's namespace when one of `hooks` selects on them.
pub(crate) async fn namespace_labels<'w>(
    mut hooks: impl Iterator<Item = &'w Webhook>,
    a: &Attributes,
    reg: &Registry,
) -> Option<BTreeMap<String, String>> {
    if !vap::in_namespace(a) || !hooks.any(|w| !w.matching.namespace_selector.is_empty()) {
        return None;
    }
    Namespace::of(a, reg).labels().await
}

/// Whether webhooks see request `a` at all (not the server's own writes, nor admission
/// configuration); waits for the cache's first lists and refuses when they do not come.
pub(crate) async fn applies(cache: &WebhookCache, a: &Attributes) -> ApiResult<bool> {
    if a.user.is_none() || vap::exempt(a) {
        return Ok(false);
    }
    let ready = cache.ready()
        || tokio::time::timeout(vap::READY_WAIT, cache.wait_until_ready())
            .await
            .is_ok();
    if !ready {
        return Err(super::forbidden(a, "not yet ready to handle request"));
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::tests::attrs;
    use crate::admission::Operation;
    use k3rs_auth::authz::{AlwaysAllow, AlwaysDeny};
    use serde_json::json;
    use std::sync::Arc;

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn match_conditions_may_ask_the_authorizer() {
        let w = &model::parse(&json!({"webhooks": [{"name": "a.example.com",
            "clientConfig": {"url": "https://127.0.0.1:1/"},
            "matchConditions": [{"name": "deleters",
                "expression": "authorizer.group('').resource('pods').namespace('n').check('delete').allowed()"}]}]}))
            [0];
        assert_eq!(w.config_error, None);
        let mut a = attrs(Operation::Create, "pods", "n", Some(json!({})));
        a.user = Some(Arc::new(k3rs_auth::UserInfo::authenticated("bob", vec![])));
        let allow = Authz::new(vec![Arc::new(AlwaysAllow)]);
        let deny = Authz::new(vec![Arc::new(AlwaysDeny)]);
        let req = json!({});
        assert_eq!(conditions(w, &a, &req, Some(&allow)).await.ok(), Some(true));
        assert_eq!(conditions(w, &a, &req, Some(&deny)).await.ok(), Some(false));
        // Without an authorizer the condition errs (failurePolicy decides).
        assert!(conditions(w, &a, &req, None).await.is_err());
    }
}
