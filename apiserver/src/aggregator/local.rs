//! The Local APIServices (kube-apiserver's autoregistration): one per group/version this
//! server serves itself, built-in, optional (the metrics API) and custom (CRDs), named
//! `<version>.<group>` (`v1.` for the core group) with kube-apiserver's priorities, labelled
//! as automanaged. Those whose group/version is no longer served are deleted; APIServices
//! without the label (the user's) are never touched.

use kube::api::{Api, DeleteParams, PostParams};
use serde_json::{json, Value};

use k3rs_apimachinery::catalog;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;

/// The label on the APIServices this server manages, and its value (upstream's).
pub const AUTOMANAGED_LABEL: &str = "kube-aggregator.kubernetes.io/automanaged";
const AUTOMANAGED: &str = "onstart";

/// kube-apiserver's `groupPriorityMinimum` and `versionPriority` of its groups; others
/// (custom resources, the metrics API) get 1000 and 100.
fn priorities(group: &str, version: &str) -> (i64, i64) {
    let group_priority = match group {
        "" => 18000,
        "apps" => 17800,
        "events.k8s.io" => 17750,
        "authentication.k8s.io" => 17700,
        "authorization.k8s.io" => 17600,
        "autoscaling" => 17500,
        "batch" => 17400,
        "certificates.k8s.io" => 17300,
        "networking.k8s.io" => 17200,
        "policy" => 17100,
        "rbac.authorization.k8s.io" => 17000,
        "storage.k8s.io" => 16800,
        "apiextensions.k8s.io" | "admissionregistration.k8s.io" => 16700,
        "scheduling.k8s.io" => 16600,
        "coordination.k8s.io" => 16500,
        "node.k8s.io" => 16300,
        "discovery.k8s.io" => 16200,
        "flowcontrol.apiserver.k8s.io" => 16100,
        "apiregistration.k8s.io" => 18000,
        _ => return (1000, 100),
    };
    let version_priority = match (group, version) {
        ("", _) => 1,
        ("autoscaling", "v2") => 30,
        ("flowcontrol.apiserver.k8s.io", _) => 21,
        _ => 15,
    };
    (group_priority, version_priority)
}

/// `(group, version)` of everything this server serves now, the core group first.
pub fn served() -> Vec<(String, String)> {
    std::iter::once((String::new(), "v1".to_string()))
        .chain(catalog::groups().into_iter().flat_map(|(g, versions)| {
            versions
                .into_iter()
                .map(move |v| (g.to_string(), v.to_string()))
        }))
        .collect()
}

/// The Local APIService of `group/version`.
pub fn object(group: &str, version: &str) -> Value {
    let (group_priority, version_priority) = priorities(group, version);
    json!({
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": {
            "name": format!("{version}.{group}"),
            "labels": {AUTOMANAGED_LABEL: AUTOMANAGED},
        },
        "spec": {
            "group": group,
            "version": version,
            "groupPriorityMinimum": group_priority,
            "versionPriority": version_priority,
        },
    })
}

/// What to change.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    Create(Value),
    Delete(String),
}

/// Creates the missing Local APIServices of `served`, deletes the automanaged local ones
/// not in it.
pub fn plan(served: &[(String, String)], existing: &[Value]) -> Vec<Action> {
    let name_of = |o: &Value| o["metadata"]["name"].as_str().unwrap_or("").to_string();
    let names: Vec<String> = existing.iter().map(name_of).collect();
    let mut actions: Vec<Action> = served
        .iter()
        .filter(|(g, v)| !names.contains(&format!("{v}.{g}")))
        .map(|(g, v)| Action::Create(object(g, v)))
        .collect();
    for o in existing {
        let automanaged = o["metadata"]["labels"][AUTOMANAGED_LABEL].is_string();
        let local = !o["spec"]["service"].is_object();
        let gv = (
            o["spec"]["group"].as_str().unwrap_or("").to_string(),
            o["spec"]["version"].as_str().unwrap_or("").to_string(),
        );
        if automanaged && local && !served.contains(&gv) {
            actions.push(Action::Delete(name_of(o)));
        }
    }
    actions
}

/// Applies [`plan`] for what this server serves now; failures are retried on the next pass.
pub async fn reconcile(api: &Api<APIService>, existing: &[Value]) {
    for action in plan(&served(), existing) {
        let result = match &action {
            Action::Create(obj) => match serde_json::from_value::<APIService>(obj.clone()) {
                Ok(a) => api.create(&PostParams::default(), &a).await.map(|_| ()),
                Err(_) => continue,
            },
            Action::Delete(name) => api.delete(name, &DeleteParams::default()).await.map(|_| ()),
        };
        if let Err(e) = result {
            tracing::debug!(?action, error = %e, "reconciling a Local APIService");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gv(g: &str, v: &str) -> (String, String) {
        (g.to_string(), v.to_string())
    }

    #[test]
    fn objects_are_named_version_dot_group() {
        let core = object("", "v1");
        assert_eq!(core["metadata"]["name"], "v1.");
        assert_eq!(core["spec"]["groupPriorityMinimum"], 18000);
        let hpa = object("autoscaling", "v2");
        assert_eq!(
            (&hpa["metadata"]["name"], &hpa["spec"]["versionPriority"]),
            (&json!("v2.autoscaling"), &json!(30))
        );
        assert!(served().contains(&gv("apps", "v1")));
        assert_eq!(served()[0], gv("", "v1"));
    }

    #[test]
    fn creates_missing_and_deletes_only_automanaged_unserved_local_ones() {
        let served = [gv("", "v1"), gv("apps", "v1")];
        let existing = [
            object("", "v1"),
            object("stale.example.com", "v1"),
            // The user's, service-backed, and a user's local one: left alone.
            json!({"metadata": {"name": "v1alpha1.wardle.example.com"},
                "spec": {"group": "wardle.example.com", "version": "v1alpha1",
                "service": {"namespace": "w", "name": "api"}}}),
            json!({"metadata": {"name": "v1.mine.example.com"},
                "spec": {"group": "mine.example.com", "version": "v1"}}),
        ];
        assert_eq!(
            plan(&served, &existing),
            [
                Action::Create(object("apps", "v1")),
                Action::Delete("v1.stale.example.com".into())
            ]
        );
    }
}
