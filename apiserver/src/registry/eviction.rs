//! `pods/<name>/eviction` (POST a policy/v1 Eviction, what `kubectl drain` sends): deletes the
//! pod unless that would break its PodDisruptionBudget. The decision is [`plan`], a pure
//! function of the pod and the budgets of its namespace (kube's `EvictionREST.Create` and
//! `checkAndDecrement`); the registry then writes the budget and deletes the pod.
//!
//! # Guarantees
//! - The eviction is admitted (a `CREATE` of `pods/eviction` with the Eviction as object and
//!   the pod as old object: NodeRestriction lets a node evict only pods bound to itself,
//!   webhooks see it) before any budget is read or charged: a refused eviction leaves the
//!   PodDisruptionBudget as it was.

use serde_json::{json, Value};

use super::decode;
use super::keys;
use super::DeleteOptions;
use super::Registry;
use super::Target;
use crate::admission::{Attributes, Operation};
use k3rs_apimachinery::catalog;
use k3rs_apimachinery::meta;
use k3rs_apimachinery::selector::LabelSelector;
use k3rs_apimachinery::status::{ApiError, ApiResult, Subject};

const ATTEMPTS: usize = 16;
/// kube's `MaxDisruptedPodSize`.
const MAX_DISRUPTED_PODS: usize = 2000;
const VIOLATION: &str = "Cannot evict pod as it would violate the pod's disruption budget.";

/// What an eviction does.
#[derive(Debug, Clone, PartialEq)]
pub enum EvictionPlan {
    /// Delete the pod; no budget is involved (or it may be ignored).
    Delete,
    /// Store the budget (index into the budgets given, with one disruption less and the pod
    /// recorded), then delete the pod.
    Decrement { index: usize, pdb: Value },
    /// Refuse with this error.
    Refuse(ApiError),
}

fn is_ready(pod: &Value) -> bool {
    pod["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Ready" && c["status"] == "True")
}

/// Terminal, pending and deleting pods are evicted without consulting budgets.
fn can_ignore_budgets(pod: &Value) -> bool {
    matches!(
        pod["status"]["phase"].as_str().unwrap_or(""),
        "Succeeded" | "Failed" | "Pending"
    ) || meta::is_deleting(pod)
}

/// Whether a budget covers a pod: same namespace, a non-empty selector matching its labels.
fn covers(pdb: &Value, pod: &Value) -> bool {
    if meta::namespace(pdb) != meta::namespace(pod) {
        return false;
    }
    match LabelSelector::from_object(&pdb["spec"]["selector"]) {
        Ok(s) if pdb["spec"]["selector"].is_object() && !s.is_empty() => {
            s.matches(&meta::labels(pod))
        }
        _ => false,
    }
}

/// The eviction decision for `pod` given every budget of its namespace.
pub fn plan(pod: &Value, pdbs: &[Value], now: &str) -> EvictionPlan {
    if can_ignore_budgets(pod) {
        return EvictionPlan::Delete;
    }
    let matching: Vec<usize> = (0..pdbs.len()).filter(|i| covers(&pdbs[*i], pod)).collect();
    let index = match matching.as_slice() {
        [] => return EvictionPlan::Delete,
        [i] => *i,
        _ => {
            return EvictionPlan::Refuse(ApiError::internal(
                "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
            ))
        }
    };
    let pdb = &pdbs[index];
    let name = meta::name(pdb);
    let status = &pdb["status"];
    let int = |k: &str| status[k].as_i64().unwrap_or(0);
    if !is_ready(pod) {
        let policy = pdb["spec"]["unhealthyPodEvictionPolicy"]
            .as_str()
            .unwrap_or("IfHealthyBudget");
        let healthy_budget =
            int("currentHealthy") >= int("desiredHealthy") && int("desiredHealthy") > 0;
        if policy == "AlwaysAllow" || healthy_budget {
            return EvictionPlan::Delete;
        }
    }
    let generation = pdb["metadata"]["generation"].as_i64().unwrap_or(0);
    if int("observedGeneration") < generation {
        return EvictionPlan::Refuse(ApiError::too_many_requests(
            VIOLATION,
            10,
            &[(
                "DisruptionBudget",
                format!("The disruption budget {name} is still being processed by the server."),
            )],
        ));
    }
    let forbidden = |why: &str| {
        EvictionPlan::Refuse(ApiError::forbidden(
            Subject {
                group: "policy",
                kind: "poddisruptionbudget",
                name,
            },
            why,
        ))
    };
    let allowed = int("disruptionsAllowed");
    if allowed < 0 {
        return forbidden("pdb disruptions allowed is negative");
    }
    if status["disruptedPods"]
        .as_object()
        .is_some_and(|d| d.len() > MAX_DISRUPTED_PODS)
    {
        return forbidden(
            "DisruptedPods map too big - too many evictions not confirmed by PDB controller",
        );
    }
    if allowed == 0 {
        return EvictionPlan::Refuse(ApiError::too_many_requests(
            VIOLATION,
            0,
            &[(
                "DisruptionBudget",
                format!(
                    "The disruption budget {name} needs {} healthy pods and has {} currently",
                    int("desiredHealthy"),
                    int("currentHealthy")
                ),
            )],
        ));
    }
    let mut updated = pdb.clone();
    updated["status"]["disruptionsAllowed"] = json!(allowed - 1);
    if allowed - 1 == 0 {
        set_condition(
            &mut updated,
            json!({"type": "DisruptionAllowed", "status": "False", "reason": "InsufficientPods",
                "message": "", "observedGeneration": generation, "lastTransitionTime": now}),
        );
    }
    if !updated["status"]["disruptedPods"].is_object() {
        updated["status"]["disruptedPods"] = json!({});
    }
    updated["status"]["disruptedPods"][meta::name(pod)] = json!(now);
    EvictionPlan::Decrement {
        index,
        pdb: updated,
    }
}

fn set_condition(pdb: &mut Value, condition: Value) {
    if !pdb["status"]["conditions"].is_array() {
        pdb["status"]["conditions"] = json!([]);
    }
    let list = pdb["status"]["conditions"]
        .as_array_mut()
        .expect("set above");
    match list.iter_mut().find(|c| c["type"] == condition["type"]) {
        Some(c) if c["status"] == condition["status"] => {}
        Some(c) => *c = condition,
        None => list.push(condition),
    }
}

impl Registry {
    /// POST `pods/<name>/eviction` with the eviction's delete options already parsed.
    pub async fn evict_pod(
        &self,
        t: &Target,
        eviction: &Value,
        opts: DeleteOptions,
    ) -> ApiResult<Value> {
        if meta::name(eviction) != t.name() {
            return Err(ApiError::bad_request(
                "name in URL does not match name in Eviction object",
            ));
        }
        let pdbs_resource = catalog::lookup("policy", "v1", "poddisruptionbudgets");
        for _ in 0..ATTEMPTS {
            let (kv, _) = self.ds.get(&t.key()).await?;
            let pod = decode(&kv.ok_or_else(|| ApiError::not_found(t.subject()))?)?;
            self.admit_eviction(t, eviction, &pod, &opts).await?;
            let mut pdbs = Vec::new();
            if let Some(r) = pdbs_resource {
                let prefix = keys::list_prefix(r, t.namespace.as_deref());
                for kv in self.all_under(prefix).await? {
                    pdbs.push((kv.mod_revision, kv.key.clone(), decode(&kv)?));
                }
            }
            let budgets: Vec<Value> = pdbs.iter().map(|(_, _, v)| v.clone()).collect();
            let mut delete = opts.clone();
            match plan(&pod, &budgets, &meta::now_rfc3339()) {
                EvictionPlan::Refuse(e) => return Err(e),
                EvictionPlan::Delete => {}
                EvictionPlan::Decrement { index, pdb } => {
                    if opts.write.dry_run {
                        return Ok(super::binding::created_status());
                    }
                    let (rev, key, _) = &pdbs[index];
                    let Some(r) = pdbs_resource else { break };
                    if self.replace_at(r, key, *rev, pdb).await?.is_none() {
                        continue;
                    }
                    // The pod must still be the one the budget was charged for.
                    if delete.precondition_resource_version.is_none() {
                        delete.precondition_resource_version =
                            Some(meta::resource_version(&pod).to_string());
                    }
                }
            }
            self.delete(t, &delete).await?;
            return Ok(super::binding::created_status());
        }
        Err(ApiError::conflict(t.subject()))
    }

    /// Runs the admission chain on the eviction of `pod` (before any budget is charged).
    async fn admit_eviction(
        &self,
        t: &Target,
        eviction: &Value,
        pod: &Value,
        opts: &DeleteOptions,
    ) -> ApiResult<()> {
        let mut a = Attributes::of_write(Operation::Create, t, &opts.write);
        a.object = Some(eviction.clone());
        a.old_object = Some(std::sync::Arc::new(pod.clone()));
        self.admission.admit(&mut a, self).await?;
        self.admission.validate(&a, self).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(phase: &str, ready: bool) -> Value {
        json!({"metadata": {"name": "p", "namespace": "d", "labels": {"app": "a"}},
            "status": {"phase": phase, "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}})
    }

    fn pdb(allowed: i64, observed: i64) -> Value {
        json!({"metadata": {"name": "budget", "namespace": "d", "generation": 1},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "a"}}},
            "status": {"observedGeneration": observed, "disruptionsAllowed": allowed,
                       "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1}})
    }

    #[test]
    fn no_budget_or_a_pending_pod_just_deletes() {
        assert_eq!(plan(&pod("Running", true), &[], "t"), EvictionPlan::Delete);
        assert_eq!(
            plan(&pod("Pending", true), &[pdb(0, 1)], "t"),
            EvictionPlan::Delete
        );
        let mut other = pdb(0, 1);
        other["spec"]["selector"] = json!({"matchLabels": {"app": "b"}});
        assert_eq!(
            plan(&pod("Running", true), &[other], "t"),
            EvictionPlan::Delete
        );
        let mut empty = pdb(0, 1);
        empty["spec"]["selector"] = json!({});
        assert_eq!(
            plan(&pod("Running", true), &[empty], "t"),
            EvictionPlan::Delete
        );
    }

    #[test]
    fn exhausted_budget_is_a_429_with_upstreams_cause() {
        let EvictionPlan::Refuse(e) = plan(&pod("Running", true), &[pdb(0, 1)], "t") else {
            panic!("not refused");
        };
        assert_eq!((e.code, e.reason), (429, "TooManyRequests"));
        assert_eq!(e.message, VIOLATION);
        assert_eq!(
            e.details.unwrap(),
            json!({"causes": [{"reason": "DisruptionBudget",
                "message": "The disruption budget budget needs 1 healthy pods and has 1 currently"}]})
        );
    }

    #[test]
    fn unprocessed_budget_asks_to_retry() {
        let EvictionPlan::Refuse(e) = plan(&pod("Running", true), &[pdb(1, 0)], "t") else {
            panic!("not refused");
        };
        assert_eq!(e.code, 429);
        assert_eq!(e.details.unwrap()["retryAfterSeconds"], 10);
    }

    #[test]
    fn allowed_disruption_is_spent() {
        let EvictionPlan::Decrement { index, pdb } =
            plan(&pod("Running", true), &[pdb(1, 1)], "now")
        else {
            panic!("no decrement");
        };
        assert_eq!(index, 0);
        assert_eq!(pdb["status"]["disruptionsAllowed"], 0);
        assert_eq!(pdb["status"]["disruptedPods"], json!({"p": "now"}));
        assert_eq!(pdb["status"]["conditions"][0]["reason"], "InsufficientPods");
    }

    #[test]
    fn unready_pods_with_a_healthy_budget_go() {
        assert_eq!(
            plan(&pod("Running", false), &[pdb(0, 1)], "t"),
            EvictionPlan::Delete
        );
        let two = [pdb(1, 1), pdb(1, 1)];
        let EvictionPlan::Refuse(e) = plan(&pod("Running", true), &two, "t") else {
            panic!("not refused");
        };
        assert_eq!(e.code, 500);
    }
}
