//! Bringing the bootstrap policy into the cluster at start (kube-apiserver's
//! `rbac/bootstrap-roles` post-start hook): missing roles and bindings are created; existing
//! ones get the rules and subjects they lack, unless annotated
//! `rbac.authorization.kubernetes.io/autoupdate: "false"`. Nothing is ever removed.

use std::collections::BTreeMap;

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::api::PostParams;
use kube::Api;

use super::bootstrap::{self, AUTOUPDATE};
use super::covers::uncovered;

/// What reconciliation does to one object.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Plan<T> {
    Create(T),
    Update(T),
    /// The binding's roleRef changed (immutable): delete it, then create this.
    Recreate(T),
    Keep,
}

fn autoupdate_off(m: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> bool {
    m.annotations
        .as_ref()
        .and_then(|a| a.get(AUTOUPDATE))
        .is_some_and(|v| v == "false")
}

/// `existing` with the keys of `expected` it lacks (existing values win, as upstream).
fn merge_map(
    existing: &Option<BTreeMap<String, String>>,
    expected: &Option<BTreeMap<String, String>>,
) -> Option<BTreeMap<String, String>> {
    let mut out = expected.clone().unwrap_or_default();
    out.extend(existing.clone().unwrap_or_default());
    (!out.is_empty()).then_some(out)
}

/// The plan for a bootstrap ClusterRole: rules the existing role does not cover are appended;
/// aggregated roles get the missing selectors (their rules belong to the aggregation
/// controller).
pub(crate) fn cluster_role(
    existing: Option<&ClusterRole>,
    expected: &ClusterRole,
) -> Plan<ClusterRole> {
    let Some(existing) = existing else {
        return Plan::Create(expected.clone());
    };
    if autoupdate_off(&existing.metadata) {
        return Plan::Keep;
    }
    let mut out = existing.clone();
    out.metadata.labels = merge_map(&existing.metadata.labels, &expected.metadata.labels);
    out.metadata.annotations = merge_map(
        &existing.metadata.annotations,
        &expected.metadata.annotations,
    );
    if let Some(agg) = &expected.aggregation_rule {
        let selectors = out
            .aggregation_rule
            .get_or_insert_with(Default::default)
            .cluster_role_selectors
            .get_or_insert_with(Vec::new);
        for s in agg.cluster_role_selectors.iter().flatten() {
            if !selectors.contains(s) {
                selectors.push(s.clone());
            }
        }
    } else {
        let have = existing.rules.clone().unwrap_or_default();
        let missing = uncovered(&have, expected.rules.as_deref().unwrap_or_default());
        if !missing.is_empty() {
            out.rules = Some(have.into_iter().chain(missing).collect());
        }
    }
    if &out == existing {
        Plan::Keep
    } else {
        Plan::Update(out)
    }
}

/// The plan for a bootstrap ClusterRoleBinding: missing subjects are appended; a changed
/// roleRef is recreated.
pub(crate) fn cluster_role_binding(
    existing: Option<&ClusterRoleBinding>,
    expected: &ClusterRoleBinding,
) -> Plan<ClusterRoleBinding> {
    let Some(existing) = existing else {
        return Plan::Create(expected.clone());
    };
    if autoupdate_off(&existing.metadata) {
        return Plan::Keep;
    }
    let mut out = existing.clone();
    out.metadata.labels = merge_map(&existing.metadata.labels, &expected.metadata.labels);
    out.metadata.annotations = merge_map(
        &existing.metadata.annotations,
        &expected.metadata.annotations,
    );
    let subjects = out.subjects.get_or_insert_with(Vec::new);
    for s in expected.subjects.iter().flatten() {
        if !subjects.contains(s) {
            subjects.push(s.clone());
        }
    }
    if out.subjects.as_ref().is_some_and(Vec::is_empty) && existing.subjects.is_none() {
        out.subjects = None;
    }
    if existing.role_ref != expected.role_ref {
        out.role_ref = expected.role_ref.clone();
        out.metadata.resource_version = None;
        out.metadata.uid = None;
        return Plan::Recreate(out);
    }
    if &out == existing {
        Plan::Keep
    } else {
        Plan::Update(out)
    }
}

/// Errors of the reconciliation shell.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Creating, updating or deleting a bootstrap object failed.
    #[error("reconciling {kind} {name:?}: {source}")]
    Write {
        /// `ClusterRole` or `ClusterRoleBinding`.
        kind: &'static str,
        /// The object's name.
        name: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
}

async fn apply<K>(api: &Api<K>, name: &str, plan: Plan<K>, kind: &'static str) -> Result<(), Error>
where
    K: kube::Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let err = |source| Error::Write {
        kind,
        name: name.to_string(),
        source,
    };
    let pp = PostParams::default();
    match plan {
        Plan::Keep => return Ok(()),
        Plan::Create(o) => api.create(&pp, &o).await.map(drop),
        Plan::Update(o) => api.replace(name, &pp, &o).await.map(drop),
        Plan::Recreate(o) => {
            api.delete(name, &Default::default()).await.map_err(err)?;
            api.create(&pp, &o).await.map(drop)
        }
    }
    .map_err(err)?;
    tracing::info!(kind, name, "reconciled bootstrap RBAC policy");
    Ok(())
}

/// Reconciles every bootstrap ClusterRole and ClusterRoleBinding through `client` (which
/// must be allowed to, e.g. `system:masters`).
pub async fn bootstrap_policy(client: kube::Client) -> Result<(), Error> {
    let roles: Api<ClusterRole> = Api::all(client.clone());
    for want in bootstrap::cluster_roles() {
        let name = want.metadata.name.clone().unwrap_or_default();
        let have = roles.get_opt(&name).await.map_err(|source| Error::Write {
            kind: "clusterrole",
            name: name.clone(),
            source,
        })?;
        apply(
            &roles,
            &name,
            cluster_role(have.as_ref(), &want),
            "clusterrole",
        )
        .await?;
    }
    let bindings: Api<ClusterRoleBinding> = Api::all(client);
    for want in bootstrap::cluster_role_bindings() {
        let name = want.metadata.name.clone().unwrap_or_default();
        let have = bindings
            .get_opt(&name)
            .await
            .map_err(|source| Error::Write {
                kind: "clusterrolebinding",
                name: name.clone(),
                source,
            })?;
        let plan = cluster_role_binding(have.as_ref(), &want);
        apply(&bindings, &name, plan, "clusterrolebinding").await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rbac::bootstrap::{cluster_role as role, subject};
    use crate::rbac::rules::rule;

    #[test]
    fn roles_gain_missing_rules_unless_autoupdate_is_off() {
        let want = role(
            "r",
            vec![
                rule(&["get"], &[""], &["pods"]),
                rule(&["list"], &[""], &["nodes"]),
            ],
        );
        assert_eq!(cluster_role(None, &want), Plan::Create(want.clone()));
        assert_eq!(cluster_role(Some(&want), &want), Plan::Keep);
        let mut emptied = want.clone();
        emptied.rules = Some(vec![rule(&["*"], &[""], &["pods"])]);
        let mut expected = emptied.clone();
        expected.rules = Some(vec![
            rule(&["*"], &[""], &["pods"]),
            rule(&["list"], &[""], &["nodes"]),
        ]);
        assert_eq!(cluster_role(Some(&emptied), &want), Plan::Update(expected));
        emptied
            .metadata
            .annotations
            .as_mut()
            .unwrap()
            .insert(AUTOUPDATE.into(), "false".into());
        assert_eq!(cluster_role(Some(&emptied), &want), Plan::Keep);
    }

    #[test]
    fn bindings_gain_subjects_and_recreate_on_new_role_ref() {
        let want = bootstrap::binding("b", "r", vec![subject("Group", "g")]);
        let mut have = want.clone();
        have.subjects = Some(vec![subject("User", "u")]);
        let mut expected = have.clone();
        expected.subjects = Some(vec![subject("User", "u"), subject("Group", "g")]);
        assert_eq!(
            cluster_role_binding(Some(&have), &want),
            Plan::Update(expected)
        );
        let mut moved = want.clone();
        moved.role_ref.name = "other".into();
        assert_eq!(
            cluster_role_binding(Some(&moved), &want),
            Plan::Recreate(want.clone())
        );
        assert_eq!(cluster_role_binding(Some(&want), &want), Plan::Keep);
    }
}
