//! Whether a request falls under a policy's `matchConstraints` or a binding's
//! `matchResources` (the admission webhooks' rule matcher, shared by policies upstream).
//!
//! # Guarantees
//! - Pure: decides on the request's [`Attributes`] and the labels of its namespace.
//! - Order: namespaceSelector, objectSelector, excludeResourceRules, resourceRules; an empty
//!   `resourceRules` (allowed in bindings) matches everything the rest lets through.
//! - `namespaceSelector` applies to namespaced resources (by their namespace's labels) and to
//!   Namespaces themselves (by their own labels); other cluster-scoped objects always pass it.
//! - `objectSelector` passes when the new or the old object's labels match.
//! - `matchPolicy: Equivalent` also matches the request through the other served versions of
//!   its resource (HorizontalPodAutoscaler `autoscaling/v1` ↔ `v2`).

use std::collections::BTreeMap;

use serde_json::Value;

use super::model::{MatchResources, Rule};
use crate::admission::Attributes;
use k3rs_apimachinery::catalog::{self, Resource};

/// An object's labels.
pub fn labels(obj: Option<&Value>) -> Option<BTreeMap<String, String>> {
    let obj = obj?;
    Some(
        obj["metadata"]["labels"]
            .as_object()
            .into_iter()
            .flatten()
            .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
            .collect(),
    )
}

fn is_namespace(a: &Attributes) -> bool {
    a.resource.group.is_empty() && a.resource.plural == "namespaces"
}

/// The name the rules' `resourceNames` see: the request's, or the new object's.
pub fn request_name(a: &Attributes) -> &str {
    if !a.name.is_empty() {
        return &a.name;
    }
    a.object
        .as_ref()
        .and_then(|o| o["metadata"]["name"].as_str())
        .unwrap_or("")
}

fn listed(items: &[String], value: &str) -> bool {
    items.iter().any(|i| i == "*" || i == value)
}

fn resource_listed(rule: &Rule, a: &Attributes, r: &Resource) -> bool {
    let sub = a.subresource.as_deref().unwrap_or("");
    rule.resources.iter().any(|pattern| {
        let (res, rsub) = pattern.split_once('/').unwrap_or((pattern.as_str(), ""));
        (res == "*" || res == r.plural) && (rsub == "*" || rsub == sub)
    })
}

fn scope_matches(rule: &Rule, a: &Attributes) -> bool {
    let cluster = is_namespace(a) || !a.resource.namespaced;
    match rule.scope.as_str() {
        "Cluster" => cluster,
        "Namespaced" => !cluster,
        _ => true,
    }
}

/// The resources a request can match as: its own and, when `equivalent`, the other served
/// versions of the same group and resource.
fn candidates(a: &Attributes, equivalent: bool) -> Vec<&'static Resource> {
    let mut out = vec![a.resource];
    if equivalent {
        out.extend(catalog::all().into_iter().filter(|r| {
            r.group == a.resource.group
                && r.plural == a.resource.plural
                && r.version != a.resource.version
        }));
    }
    out
}

/// The resource a rule matches the request as, if it does.
pub fn rule_matches(rule: &Rule, a: &Attributes, equivalent: bool) -> Option<&'static Resource> {
    let op_ok = listed(&rule.operations, a.operation.as_str());
    let names_ok =
        rule.resource_names.is_empty() || rule.resource_names.iter().any(|n| n == request_name(a));
    if !(op_ok && names_ok && scope_matches(rule, a)) {
        return None;
    }
    candidates(a, equivalent).into_iter().find(|r| {
        listed(&rule.api_groups, r.group)
            && listed(&rule.api_versions, r.version)
            && resource_listed(rule, a, r)
    })
}

/// The request's namespace is not stored, so a namespace selector cannot be decided.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("namespace \"{0}\" not found")]
pub struct NamespaceNotFound(pub String);

/// The resource `m` selects the request as, if it does. `namespace_labels` are the labels
/// of the request's namespace (`None` when it was not found); an error means it could not
/// be decided.
pub fn matches(
    m: &MatchResources,
    a: &Attributes,
    namespace_labels: Option<&BTreeMap<String, String>>,
) -> Result<Option<&'static Resource>, NamespaceNotFound> {
    if !m.namespace_selector.is_empty() {
        let selected = if is_namespace(a) {
            let own = labels(a.object.as_ref().or(a.old_object.as_deref())).unwrap_or_default();
            m.namespace_selector.matches(&own)
        } else if !a.resource.namespaced {
            true
        } else {
            let Some(ns) = namespace_labels else {
                return Err(NamespaceNotFound(a.namespace.clone()));
            };
            m.namespace_selector.matches(ns)
        };
        if !selected {
            return Ok(None);
        }
    }
    if !m.object_selector.is_empty() {
        let selected = [a.object.as_ref(), a.old_object.as_deref()]
            .into_iter()
            .filter_map(|o| labels(o))
            .any(|l| m.object_selector.matches(&l));
        if !selected {
            return Ok(None);
        }
    }
    let excluded = m
        .exclude_resource_rules
        .iter()
        .any(|r| rule_matches(r, a, m.equivalent).is_some());
    if excluded {
        return Ok(None);
    }
    if m.resource_rules.is_empty() {
        return Ok(Some(a.resource));
    }
    Ok(m.resource_rules
        .iter()
        .find_map(|r| rule_matches(r, a, m.equivalent)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::Operation;
    use serde_json::json;

    fn attrs(op: Operation, group: &str, version: &str, plural: &str, ns: &str) -> Attributes {
        Attributes {
            operation: op,
            resource: catalog::lookup(group, version, plural).unwrap(),
            subresource: None,
            namespace: ns.into(),
            name: "x".into(),
            object: Some(json!({"metadata": {"name": "x", "labels": {"app": "web"}}})),
            old_object: None,
            user: None,
            dry_run: false,
            reinvocation: Default::default(),
        }
    }

    fn rule(groups: &[&str], versions: &[&str], ops: &[&str], resources: &[&str]) -> Rule {
        let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect();
        Rule {
            api_groups: v(groups),
            api_versions: v(versions),
            operations: v(ops),
            resources: v(resources),
            resource_names: Vec::new(),
            scope: "*".into(),
        }
    }

    fn resources(rules: Vec<Rule>) -> MatchResources {
        MatchResources {
            resource_rules: rules,
            equivalent: true,
            ..Default::default()
        }
    }

    #[test]
    fn rules_match_group_version_operation_and_resource() {
        let a = attrs(Operation::Create, "apps", "v1", "deployments", "n");
        let r = rule(&["apps"], &["v1"], &["CREATE", "UPDATE"], &["deployments"]);
        assert!(rule_matches(&r, &a, false).is_some());
        let update = attrs(Operation::Delete, "apps", "v1", "deployments", "n");
        assert!(rule_matches(&r, &update, false).is_none());
        let pods = attrs(Operation::Create, "", "v1", "pods", "n");
        assert!(rule_matches(&r, &pods, false).is_none());
        let any = rule(&["*"], &["*"], &["*"], &["*"]);
        assert!(rule_matches(&any, &pods, false).is_some());
    }

    #[test]
    fn subresources_need_their_own_pattern() {
        let mut a = attrs(Operation::Update, "apps", "v1", "deployments", "n");
        a.subresource = Some("scale".into());
        let main = rule(&["apps"], &["v1"], &["*"], &["deployments"]);
        assert!(rule_matches(&main, &a, false).is_none());
        for pattern in ["deployments/scale", "deployments/*", "*/scale", "*/*"] {
            let r = rule(&["apps"], &["v1"], &["*"], &[pattern]);
            assert!(rule_matches(&r, &a, false).is_some(), "{pattern}");
        }
        let status = rule(&["apps"], &["v1"], &["*"], &["*/status"]);
        assert!(rule_matches(&status, &a, false).is_none());
    }

    #[test]
    fn scope_and_resource_names() {
        let ns = attrs(Operation::Create, "", "v1", "namespaces", "");
        let mut r = rule(&[""], &["v1"], &["*"], &["*"]);
        r.scope = "Namespaced".into();
        assert!(rule_matches(&r, &ns, false).is_none());
        r.scope = "Cluster".into();
        assert!(rule_matches(&r, &ns, false).is_some());
        r.resource_names = vec!["other".into()];
        assert!(rule_matches(&r, &ns, false).is_none());
        r.resource_names = vec!["x".into()];
        assert!(rule_matches(&r, &ns, false).is_some());
    }

    #[test]
    fn equivalent_versions_match_unless_exact() {
        let a = attrs(
            Operation::Create,
            "autoscaling",
            "v2",
            "horizontalpodautoscalers",
            "n",
        );
        let r = rule(
            &["autoscaling"],
            &["v1"],
            &["*"],
            &["horizontalpodautoscalers"],
        );
        assert_eq!(rule_matches(&r, &a, true).map(|r| r.version), Some("v1"));
        assert!(rule_matches(&r, &a, false).is_none());
    }

    #[test]
    fn selectors_and_exclusions() {
        let a = attrs(Operation::Create, "", "v1", "configmaps", "prod");
        let mut m = resources(vec![rule(&[""], &["v1"], &["*"], &["configmaps"])]);
        assert_eq!(matches(&m, &a, None), Ok(Some(a.resource)));
        m.namespace_selector = LabelSelectorFrom::parse(json!({"matchLabels": {"env": "prod"}}));
        let prod = BTreeMap::from([("env".to_string(), "prod".to_string())]);
        assert_eq!(matches(&m, &a, Some(&prod)), Ok(Some(a.resource)));
        assert_eq!(matches(&m, &a, Some(&BTreeMap::new())), Ok(None));
        assert!(matches(&m, &a, None).is_err());
        m.object_selector = LabelSelectorFrom::parse(json!({"matchLabels": {"app": "db"}}));
        assert_eq!(matches(&m, &a, Some(&prod)), Ok(None));
        let mut old = a.clone();
        old.operation = Operation::Update;
        old.old_object = Some(std::sync::Arc::new(
            json!({"metadata": {"labels": {"app": "db"}}}),
        ));
        assert_eq!(matches(&m, &old, Some(&prod)), Ok(Some(a.resource)));
        m.exclude_resource_rules = vec![rule(&[""], &["*"], &["UPDATE"], &["configmaps"])];
        assert_eq!(matches(&m, &old, Some(&prod)), Ok(None));
    }

    #[test]
    fn cluster_scoped_objects_pass_namespace_selectors_but_namespaces_use_their_labels() {
        let mut m = resources(Vec::new());
        m.namespace_selector = LabelSelectorFrom::parse(json!({"matchLabels": {"app": "web"}}));
        let node = attrs(Operation::Create, "", "v1", "nodes", "");
        assert_eq!(matches(&m, &node, None), Ok(Some(node.resource)));
        let ns = attrs(Operation::Create, "", "v1", "namespaces", "");
        assert_eq!(matches(&m, &ns, None), Ok(Some(ns.resource)));
        m.namespace_selector = LabelSelectorFrom::parse(json!({"matchLabels": {"app": "db"}}));
        assert_eq!(matches(&m, &ns, None), Ok(None));
    }

    struct LabelSelectorFrom;
    impl LabelSelectorFrom {
        fn parse(v: Value) -> k3rs_apimachinery::selector::label::LabelSelector {
            k3rs_apimachinery::selector::label::LabelSelector::from_object(&v).unwrap()
        }
    }
}
