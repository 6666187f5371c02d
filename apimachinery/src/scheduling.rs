//! Matching as the scheduler needs it: label selectors (pod affinity terms), node selector
//! terms (node affinity), and tolerations against taints.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    NodeSelector, NodeSelectorRequirement, NodeSelectorTerm, PodSpec, Taint, Toleration,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

type Labels = BTreeMap<String, String>;

/// Whether `labels` match `selector`. An empty selector matches everything; `None` matches
/// nothing (as `LabelSelectorAsSelector(nil)`).
pub fn label_selector_matches(selector: Option<&LabelSelector>, labels: &Labels) -> bool {
    let Some(s) = selector else { return false };
    let labels_match = s
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v));
    labels_match
        && s.match_expressions.iter().flatten().all(|e| {
            let values = e.values.as_deref().unwrap_or_default();
            let has = labels.get(&e.key);
            match e.operator.as_str() {
                "In" => has.is_some_and(|v| values.contains(v)),
                "NotIn" => has.is_none_or(|v| !values.contains(v)),
                "Exists" => has.is_some(),
                "DoesNotExist" => has.is_none(),
                _ => false,
            }
        })
}

fn requirement_matches(r: &NodeSelectorRequirement, value: Option<&String>) -> bool {
    let values = r.values.as_deref().unwrap_or_default();
    let number = |v: &String| v.parse::<i64>().ok();
    let bound = || values.first().and_then(number);
    match r.operator.as_str() {
        "In" => value.is_some_and(|v| values.contains(v)),
        "NotIn" => value.is_none_or(|v| !values.contains(v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" => matches!((value.and_then(number), bound()), (Some(v), Some(b)) if v > b),
        "Lt" => matches!((value.and_then(number), bound()), (Some(v), Some(b)) if v < b),
        _ => false,
    }
}

/// Whether a node (its labels and name) matches one term: every expression and every field
/// requirement. A term without any requirement matches nothing.
pub fn node_selector_term_matches(t: &NodeSelectorTerm, labels: &Labels, name: &str) -> bool {
    let exprs = t.match_expressions.as_deref().unwrap_or_default();
    let fields = t.match_fields.as_deref().unwrap_or_default();
    if exprs.is_empty() && fields.is_empty() {
        return false;
    }
    let name = name.to_string();
    exprs
        .iter()
        .all(|e| requirement_matches(e, labels.get(&e.key)))
        && fields
            .iter()
            .all(|f| f.key == "metadata.name" && requirement_matches(f, Some(&name)))
}

/// Whether `toleration` tolerates `taint`.
pub fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    let effect = toleration.effect.as_deref().unwrap_or("");
    if !effect.is_empty() && effect != taint.effect {
        return false;
    }
    let key = toleration.key.as_deref().unwrap_or("");
    let operator = toleration.operator.as_deref().unwrap_or("Equal");
    if key.is_empty() {
        return operator == "Exists";
    }
    if key != taint.key {
        return false;
    }
    match operator {
        "Exists" => true,
        "Equal" | "" => {
            toleration.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or("")
        }
        _ => false,
    }
}

/// Whether any of `tolerations` tolerates `taint`.
pub fn tolerated(tolerations: &[Toleration], taint: &Taint) -> bool {
    tolerations.iter().any(|t| tolerates(t, taint))
}

/// A pod's required node affinity (`requiredDuringSchedulingIgnoredDuringExecution`).
pub fn required_node_affinity(spec: Option<&PodSpec>) -> Option<&NodeSelector> {
    spec.and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
}

/// Whether a pod's `nodeSelector` (every label) and required node affinity (any term) admit
/// the node with `labels` and `name` (component-helpers' `GetRequiredNodeAffinity(pod).Match`).
pub fn required_node_affinity_matches(spec: Option<&PodSpec>, labels: &Labels, name: &str) -> bool {
    let selector_ok = spec
        .and_then(|s| s.node_selector.as_ref())
        .into_iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v));
    let affinity_ok = required_node_affinity(spec).is_none_or(|r| {
        r.node_selector_terms
            .iter()
            .any(|t| node_selector_term_matches(t, labels, name))
    });
    selector_ok && affinity_ok
}

/// The first of `taints` with one of `effects` that `tolerations` do not tolerate
/// (v1helper's `FindMatchingUntoleratedTaint`).
pub fn untolerated_taint<'a>(
    taints: &'a [Taint],
    tolerations: &[Toleration],
    effects: &[&str],
) -> Option<&'a Taint> {
    taints
        .iter()
        .find(|t| effects.contains(&t.effect.as_str()) && !tolerated(tolerations, t))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn label_selectors() {
        let s: LabelSelector = serde_json::from_value(json!({"matchLabels": {"app": "web"},
            "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["db"]}]}))
        .unwrap();
        assert!(label_selector_matches(Some(&s), &labels(&[("app", "web")])));
        assert!(!label_selector_matches(
            Some(&s),
            &labels(&[("app", "web"), ("tier", "db")])
        ));
        assert!(label_selector_matches(
            Some(&LabelSelector::default()),
            &labels(&[])
        ));
        assert!(!label_selector_matches(None, &labels(&[("app", "web")])));
    }

    #[test]
    fn node_selector_terms() {
        let t: NodeSelectorTerm = serde_json::from_value(json!({
            "matchExpressions": [{"key": "cores", "operator": "Gt", "values": ["4"]}],
            "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}))
        .unwrap();
        assert!(node_selector_term_matches(
            &t,
            &labels(&[("cores", "8")]),
            "n1"
        ));
        assert!(!node_selector_term_matches(
            &t,
            &labels(&[("cores", "4")]),
            "n1"
        ));
        assert!(!node_selector_term_matches(
            &t,
            &labels(&[("cores", "8")]),
            "n2"
        ));
        assert!(!node_selector_term_matches(
            &NodeSelectorTerm::default(),
            &labels(&[]),
            "n1"
        ));
    }

    #[test]
    fn tolerations() {
        let taint: Taint =
            serde_json::from_value(json!({"key": "k", "value": "v", "effect": "NoSchedule"}))
                .unwrap();
        let t = |v: serde_json::Value| -> Toleration { serde_json::from_value(v).unwrap() };
        assert!(tolerates(&t(json!({"key": "k", "value": "v"})), &taint));
        assert!(tolerates(
            &t(json!({"key": "k", "operator": "Exists", "effect": "NoSchedule"})),
            &taint
        ));
        assert!(tolerates(&t(json!({"operator": "Exists"})), &taint));
        assert!(!tolerates(&t(json!({"key": "k", "value": "w"})), &taint));
        assert!(!tolerates(
            &t(json!({"key": "k", "operator": "Exists", "effect": "NoExecute"})),
            &taint
        ));
        assert!(!tolerates(&t(json!({"value": "v"})), &taint));
    }
}
