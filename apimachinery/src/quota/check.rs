//! The quota decision for one request against one ResourceQuota (kube's `CheckRequest`):
//! which quotas the object falls under (scopes), what it must state (constraints), and the
//! new `status.used` — or the exceeded-quota message.

use std::collections::BTreeMap;

use serde_json::Value;

use super::amount::Amount;
use super::usage::{pod_constraints, MissingCompute, Usage, COMPUTE_VALIDATED};

/// Why a request does not fit a quota; the text follows `is forbidden: ` in the Status.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuotaError {
    /// A pod leaves a compute resource the quota limits unstated.
    #[error("failed quota: {quota}: {source}")]
    Constraints {
        /// The ResourceQuota's name.
        quota: String,
        /// Which containers miss which resource.
        #[source]
        source: MissingCompute,
    },
    /// The quota controller has not yet computed `status.used` for these resources.
    #[error("status unknown for quota: {quota}, resources: {}", .resources.join(","))]
    StatusUnknown {
        /// The ResourceQuota's name.
        quota: String,
        /// The restricted resources without a `status.used` entry.
        resources: Vec<String>,
    },
    /// Admitting the request would take usage past `status.hard`.
    #[error("exceeded quota: {quota}, requested: {requested}, used: {used}, limited: {limited}")]
    Exceeded {
        /// The ResourceQuota's name.
        quota: String,
        /// The exceeded resources the request asks for (`a=1,b=2`).
        requested: String,
        /// Their current usage.
        used: String,
        /// Their hard limits.
        limited: String,
    },
}

/// A ResourceList (`status.hard`, `status.used`) as amounts; entries that are not quantities
/// are left out.
pub fn resource_list(v: &Value) -> Usage {
    v.as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Amount::of(v).map(|a| (k.clone(), a)))
        .collect()
}

/// `k=v,k=v` in name order (kube's `prettyPrint`).
pub fn pretty(u: &Usage) -> String {
    u.iter()
        .map(|(k, v)| format!("{k}={}", v.render()))
        .collect::<Vec<_>>()
        .join(",")
}

fn mask(u: &Usage, names: impl Fn(&str) -> bool) -> Usage {
    u.iter()
        .filter(|(k, _)| names(k))
        .map(|(k, v)| (k.clone(), *v))
        .collect()
}

/// Whether a pod is best effort (no container requests or limits cpu or memory).
fn best_effort(pod: &Value) -> bool {
    ["containers", "initContainers"]
        .iter()
        .filter_map(|l| pod["spec"][*l].as_array())
        .flatten()
        .all(|c| {
            ["requests", "limits"].iter().all(|k| {
                c["resources"][*k]
                    .as_object()
                    .is_none_or(|m| !m.contains_key("cpu") && !m.contains_key("memory"))
            })
        })
}

fn scope_matches(scope: &str, op: &str, values: &[&str], pod: &Value) -> bool {
    match scope {
        "Terminating" => pod["spec"]["activeDeadlineSeconds"].as_i64().is_some(),
        "NotTerminating" => pod["spec"]["activeDeadlineSeconds"].as_i64().is_none(),
        "BestEffort" => best_effort(pod),
        "NotBestEffort" => !best_effort(pod),
        "PriorityClass" => {
            let class = pod["spec"]["priorityClassName"].as_str().unwrap_or("");
            match op {
                "In" => values.contains(&class),
                "NotIn" => !values.contains(&class),
                "Exists" => !class.is_empty(),
                "DoesNotExist" => class.is_empty(),
                _ => false,
            }
        }
        _ => false,
    }
}

/// Whether the quota's scopes (and scope selector) select the object. Only pods fall under
/// scoped quotas.
pub fn matches(quota: &Value, is_pod: bool, obj: &Value) -> bool {
    let spec = &quota["spec"];
    let scopes: Vec<&str> = spec["scopes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let exprs = spec["scopeSelector"]["matchExpressions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if scopes.is_empty() && exprs.is_empty() {
        return true;
    }
    if !is_pod {
        return false;
    }
    scopes.iter().all(|s| scope_matches(s, "Exists", &[], obj))
        && exprs.iter().all(|e| {
            let values: Vec<&str> = e["values"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            scope_matches(
                e["scopeName"].as_str().unwrap_or(""),
                e["operator"].as_str().unwrap_or(""),
                &values,
                obj,
            )
        })
}

/// What admitting `delta` does to one matching quota: `Ok(None)` when the quota limits none
/// of it, `Ok(Some(new used))` when it fits, `Err(why)` when it does not.
pub fn charge(
    quota: &Value,
    delta: &Usage,
    pod: Option<&Value>,
) -> Result<Option<Usage>, QuotaError> {
    let name = quota["metadata"]["name"].as_str().unwrap_or("");
    let hard = resource_list(&quota["status"]["hard"]);
    let used = resource_list(&quota["status"]["used"]);
    let restricted: Vec<String> = hard
        .keys()
        .filter(|k| {
            delta.contains_key(*k) || (pod.is_some() && COMPUTE_VALIDATED.contains(&k.as_str()))
        })
        .cloned()
        .collect();
    if restricted.is_empty() {
        return Ok(None);
    }
    if let Some(pod) = pod {
        pod_constraints(pod, &restricted).map_err(|source| QuotaError::Constraints {
            quota: name.to_string(),
            source,
        })?;
    }
    let unknown: Vec<&str> = restricted
        .iter()
        .filter(|r| !used.contains_key(*r))
        .map(String::as_str)
        .collect();
    if !unknown.is_empty() {
        return Err(QuotaError::StatusUnknown {
            quota: name.to_string(),
            resources: unknown.into_iter().map(str::to_string).collect(),
        });
    }
    let requested = mask(delta, |k| hard.contains_key(k));
    if requested.is_empty() {
        return Ok(None);
    }
    let mut new_used = used.clone();
    for (k, v) in &requested {
        let sum = used.get(k).copied().unwrap_or_default().plus(*v);
        new_used.insert(k.clone(), sum);
    }
    let exceeded: Vec<&String> = requested
        .keys()
        .filter(|k| new_used[*k].milli > hard[*k].milli)
        .collect();
    if !exceeded.is_empty() {
        let only = |u: &Usage| mask(u, |k| exceeded.iter().any(|e| e.as_str() == k));
        return Err(QuotaError::Exceeded {
            quota: name.to_string(),
            requested: pretty(&only(&requested)),
            used: pretty(&only(&used)),
            limited: pretty(&only(&hard)),
        });
    }
    Ok(Some(new_used))
}

/// `status.used` as JSON.
pub fn used_json(u: &Usage) -> Value {
    Value::Object(
        u.iter()
            .map(|(k, v)| (k.clone(), Value::String(v.render())))
            .collect(),
    )
}

/// The usage a quota tracks out of `total` (what the quota controller writes).
pub fn tracked(hard: &BTreeMap<String, Amount>, total: &Usage) -> Usage {
    hard.keys()
        .map(|k| (k.clone(), total.get(k).copied().unwrap_or_default()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn quota(hard: Value, used: Value) -> Value {
        json!({"metadata": {"name": "q"}, "spec": {"hard": hard},
            "status": {"hard": hard, "used": used}})
    }

    fn delta(pairs: &[(&str, &str)]) -> Usage {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), Amount::parse(v).unwrap()))
            .collect()
    }

    #[test]
    fn within_and_past_the_limit() {
        let q = quota(json!({"pods": "2"}), json!({"pods": "1"}));
        let d = delta(&[("pods", "1"), ("count/pods", "1")]);
        assert_eq!(pretty(&charge(&q, &d, None).unwrap().unwrap()), "pods=2");
        let full = quota(json!({"pods": "2"}), json!({"pods": "2"}));
        assert_eq!(
            charge(&full, &d, None).map_err(|e| e.to_string()),
            Err("exceeded quota: q, requested: pods=1, used: pods=2, limited: pods=2".into())
        );
        let other = quota(json!({"services": "1"}), json!({"services": "1"}));
        assert_eq!(charge(&other, &d, None), Ok(None));
    }

    #[test]
    fn only_exceeded_resources_are_named() {
        let q = quota(
            json!({"pods": "10", "requests.cpu": "1"}),
            json!({"pods": "1", "requests.cpu": "800m"}),
        );
        let pod = json!({"spec": {"containers": [{"name": "c",
            "resources": {"requests": {"cpu": "300m"}}}]}});
        let d = delta(&[("pods", "1"), ("requests.cpu", "300m"), ("cpu", "300m")]);
        assert_eq!(
            charge(&q, &d, Some(&pod)).map_err(|e| e.to_string()),
            Err("exceeded quota: q, requested: requests.cpu=300m, used: requests.cpu=800m, limited: requests.cpu=1".into())
        );
    }

    #[test]
    fn constraints_and_unknown_status() {
        let q = quota(
            json!({"limits.memory": "1Gi"}),
            json!({"limits.memory": "0"}),
        );
        let pod = json!({"spec": {"containers": [{"name": "c"}]}});
        assert_eq!(
            charge(&q, &delta(&[("pods", "1")]), Some(&pod)).map_err(|e| e.to_string()),
            Err("failed quota: q: must specify limits.memory for: c".into())
        );
        let fresh = quota(json!({"pods": "1"}), json!({}));
        assert_eq!(
            charge(&fresh, &delta(&[("pods", "1")]), None).map_err(|e| e.to_string()),
            Err("status unknown for quota: q, resources: pods".into())
        );
        let no_status = json!({"metadata": {"name": "q"}, "spec": {"hard": {"pods": "1"}}});
        assert_eq!(charge(&no_status, &delta(&[("pods", "1")]), None), Ok(None));
    }

    #[test]
    fn scopes() {
        let be = json!({"spec": {"scopes": ["BestEffort"]}});
        let plain = json!({"spec": {"containers": [{"name": "c"}]}});
        let sized =
            json!({"spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": "1"}}}]}});
        assert!(matches(&be, true, &plain));
        assert!(!matches(&be, true, &sized));
        assert!(!matches(&be, false, &json!({})));
        assert!(matches(&json!({"spec": {}}), false, &json!({})));
        let pc = json!({"spec": {"scopeSelector": {"matchExpressions": [
            {"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]}}});
        let high = json!({"spec": {"priorityClassName": "high"}});
        assert!(matches(&pc, true, &high));
        assert!(!matches(&pc, true, &plain));
    }
}
