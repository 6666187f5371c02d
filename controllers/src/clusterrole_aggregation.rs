//! The ClusterRole aggregation controller (upstream's `clusterrole-aggregation-controller`):
//! a ClusterRole with an `aggregationRule` gets, as its rules, the union of the rules of the
//! ClusterRoles its selectors match (sorted by name, itself excluded, duplicates dropped).

use crate::backoff::ErrorBackoff;
use crate::{shared_controller, SharedInformerFactory};
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule};
use kube::api::PostParams;
use kube::core::{Selector, SelectorExt};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::Api;
use tokio_util::sync::CancellationToken;

/// The service account (in `kube-system`) the controller runs as.
pub const CONTROLLER_NAME: &str = "clusterrole-aggregation-controller";

/// The rules `target` should have given every ClusterRole in `all`, or `None` when it does
/// not aggregate. Selectors that do not parse select nothing.
pub fn aggregate(target: &ClusterRole, all: &[Arc<ClusterRole>]) -> Option<Vec<PolicyRule>> {
    let selectors = target
        .aggregation_rule
        .as_ref()?
        .cluster_role_selectors
        .clone();
    let mut sorted: Vec<&Arc<ClusterRole>> = all.iter().collect();
    sorted.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let empty = Default::default();
    let mut rules: Vec<PolicyRule> = Vec::new();
    for s in selectors.into_iter().flatten() {
        let Ok(selector) = Selector::try_from(s) else {
            continue;
        };
        for role in &sorted {
            if role.metadata.name == target.metadata.name
                || !selector.matches(role.metadata.labels.as_ref().unwrap_or(&empty))
            {
                continue;
            }
            for r in role.rules.iter().flatten() {
                if !rules.contains(r) {
                    rules.push(r.clone());
                }
            }
        }
    }
    Some(rules)
}

/// Errors of one reconcile.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("updating clusterrole {name:?}: {source}")]
    Update {
        name: String,
        #[source]
        source: kube::Error,
    },
}

struct Ctx {
    api: Api<ClusterRole>,
    store: Store<ClusterRole>,
}

async fn reconcile(role: Arc<ClusterRole>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let Some(rules) = aggregate(&role, &ctx.store.state()) else {
        return Ok(Action::await_change());
    };
    if role.rules.as_deref().unwrap_or_default() == rules.as_slice() {
        return Ok(Action::await_change());
    }
    let name = role.metadata.name.clone().unwrap_or_default();
    let mut updated = (*role).clone();
    updated.rules = Some(rules);
    ctx.api
        .replace(&name, &PostParams::default(), &updated)
        .await
        .map_err(|source| Error::Update { name, source })?;
    Ok(Action::await_change())
}

/// Runs until `stop`: every ClusterRole change re-evaluates every aggregating ClusterRole.
pub async fn run(client: kube::Client, informers: SharedInformerFactory, stop: CancellationToken) {
    let backoff = ErrorBackoff::new("clusterrole_aggregation");
    let api: Api<ClusterRole> = Api::all(client);
    let controller = shared_controller::<ClusterRole>(&informers).await;
    let store = controller.store();
    let mapper_store = store.clone();
    let ctx = Arc::new(Ctx { api, store });
    let changed = informers.informer::<ClusterRole>().touched();
    let run = controller
        .watches_shared_stream(changed, move |_changed| {
            mapper_store
                .state()
                .into_iter()
                .filter(|r| r.aggregation_rule.is_some())
                .map(|r| ObjectRef::from_obj(&*r))
                .collect::<Vec<_>>()
        })
        .run(backoff.reconcile(reconcile), backoff.policy(), ctx)
        .for_each(|_| async {});
    tokio::select! {
        _ = run => {}
        _ = stop.cancelled() => {}
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::json;

    use super::*;

    const AGGREGATE_TO_VIEW: &str = "rbac.authorization.k8s.io/aggregate-to-view";

    fn rule(verbs: &[&str], groups: &[&str], resources: &[&str]) -> PolicyRule {
        serde_json::from_value(json!({"verbs": verbs, "apiGroups": groups, "resources": resources}))
            .unwrap()
    }

    fn cluster_role(name: &str, rules: Vec<PolicyRule>, labels: &[(&str, &str)]) -> ClusterRole {
        let labels: BTreeMap<_, _> = labels.iter().copied().collect();
        serde_json::from_value(
            json!({"metadata": {"name": name, "labels": labels}, "rules": rules}),
        )
        .unwrap()
    }

    fn aggregated(name: &str, label: &str) -> ClusterRole {
        serde_json::from_value(json!({"metadata": {"name": name}, "rules": [],
            "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {label: "true"}}]}}))
        .unwrap()
    }

    #[test]
    fn union_of_selected_roles_sorted_by_name_without_duplicates() {
        let view = aggregated("view", AGGREGATE_TO_VIEW);
        let label = [(AGGREGATE_TO_VIEW, "true")];
        let all: Vec<Arc<ClusterRole>> = vec![
            Arc::new(cluster_role(
                "z",
                vec![rule(&["get"], &[""], &["pods"])],
                &label,
            )),
            Arc::new(cluster_role(
                "a",
                vec![
                    rule(&["list"], &["x"], &["crs"]),
                    rule(&["get"], &[""], &["pods"]),
                ],
                &label,
            )),
            Arc::new(cluster_role(
                "unlabelled",
                vec![rule(&["*"], &["*"], &["*"])],
                &[],
            )),
            Arc::new(view.clone()),
        ];
        assert_eq!(
            aggregate(&view, &all),
            Some(vec![
                rule(&["list"], &["x"], &["crs"]),
                rule(&["get"], &[""], &["pods"]),
            ])
        );
        assert_eq!(aggregate(&all[2], &all), None);
        let mut wrong = view.clone();
        wrong.metadata.labels = Some(BTreeMap::new());
        wrong
            .aggregation_rule
            .as_mut()
            .unwrap()
            .cluster_role_selectors = Some(vec![]);
        assert_eq!(aggregate(&wrong, &all), Some(vec![]));
    }
}
