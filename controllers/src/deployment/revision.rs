//! Revisions and the annotations a Deployment keeps on its ReplicaSets (upstream's
//! `SetNewReplicaSetAnnotations`, `SetReplicasAnnotations`, `MaxRevision` and the cleanup
//! policy): what `kubectl rollout history` and `kubectl rollout undo` read.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::ReplicaSet;

pub const REVISION: &str = "deployment.kubernetes.io/revision";
pub const REVISION_HISTORY: &str = "deployment.kubernetes.io/revision-history";
pub const DESIRED_REPLICAS: &str = "deployment.kubernetes.io/desired-replicas";
pub const MAX_REPLICAS: &str = "deployment.kubernetes.io/max-replicas";
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";
const ROLLBACK_TO: &str = "deprecated.deployment.rollback.to";

/// Deployment annotations never copied to its ReplicaSets.
fn skip(key: &str) -> bool {
    matches!(
        key,
        LAST_APPLIED | REVISION | REVISION_HISTORY | DESIRED_REPLICAS | MAX_REPLICAS | ROLLBACK_TO
    )
}

/// The revision a ReplicaSet carries (0 when none or malformed).
pub fn revision(rs: &ReplicaSet) -> i64 {
    rs.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(REVISION))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// The highest revision among `sets`.
pub fn max_revision<'a>(sets: impl IntoIterator<Item = &'a ReplicaSet>) -> i64 {
    sets.into_iter().map(revision).max().unwrap_or(0)
}

/// Sets the new ReplicaSet's annotations from the Deployment's (`deployment`) and its new
/// revision; a ReplicaSet brought back (rollback) records its former revision in
/// `revision-history`. True when anything changed.
pub fn set_new_rs_annotations(
    deployment: &BTreeMap<String, String>,
    rs: &mut BTreeMap<String, String>,
    new_revision: i64,
) -> bool {
    let mut changed = false;
    for (k, v) in deployment.iter().filter(|(k, _)| !skip(k)) {
        if rs.get(k) != Some(v) {
            rs.insert(k.clone(), v.clone());
            changed = true;
        }
    }
    let old: i64 = rs.get(REVISION).and_then(|v| v.parse().ok()).unwrap_or(0);
    if old < new_revision {
        let new = new_revision.to_string();
        if let Some(prev) = rs.get(REVISION).cloned() {
            let history = match rs.get(REVISION_HISTORY) {
                Some(h) if !h.is_empty() => format!("{h},{prev}"),
                _ => prev,
            };
            rs.insert(REVISION_HISTORY.into(), history);
        }
        rs.insert(REVISION.into(), new);
        changed = true;
    }
    changed
}

/// Sets `desired-replicas` and `max-replicas`; true when they changed.
pub fn set_replicas_annotations(rs: &mut BTreeMap<String, String>, desired: i32, max: i32) -> bool {
    let mut changed = false;
    for (k, v) in [(DESIRED_REPLICAS, desired), (MAX_REPLICAS, max)] {
        let v = v.to_string();
        if rs.get(k) != Some(&v) {
            rs.insert(k.into(), v);
            changed = true;
        }
    }
    changed
}

/// The `desired-replicas` annotation.
pub fn desired_replicas(rs: &ReplicaSet) -> Option<i32> {
    rs.metadata
        .annotations
        .as_ref()?
        .get(DESIRED_REPLICAS)?
        .parse()
        .ok()
}

/// The old ReplicaSets past `limit` to delete, lowest revision first: only those scaled to
/// zero with no pods and a status that caught up with their spec (upstream's
/// `cleanupDeployment`).
pub fn to_clean_up<'a>(old: &[&'a ReplicaSet], limit: i32) -> Vec<&'a ReplicaSet> {
    let mut cleanable: Vec<&ReplicaSet> = old
        .iter()
        .copied()
        .filter(|rs| rs.metadata.deletion_timestamp.is_none())
        .collect();
    let excess = cleanable.len() as i64 - i64::from(limit.max(0));
    if excess <= 0 {
        return Vec::new();
    }
    cleanable.sort_by_key(|rs| (revision(rs), rs.metadata.creation_timestamp.clone()));
    cleanable
        .into_iter()
        .take(excess as usize)
        .filter(|rs| {
            let spec = rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0);
            let status = rs.status.as_ref();
            spec == 0
                && status.map_or(0, |s| s.replicas) == 0
                && rs.metadata.generation.unwrap_or(0)
                    <= status.and_then(|s| s.observed_generation).unwrap_or(0)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn new_replica_set_gets_the_next_revision_and_the_deployment_annotations() {
        let d = map(&[
            ("kubernetes.io/change-cause", "kubectl set image"),
            (LAST_APPLIED, "{}"),
            (REVISION, "1"),
        ]);
        let mut rs = BTreeMap::new();
        assert!(set_new_rs_annotations(&d, &mut rs, 2));
        assert_eq!(
            rs,
            map(&[
                ("kubernetes.io/change-cause", "kubectl set image"),
                (REVISION, "2")
            ])
        );
        assert!(!set_new_rs_annotations(&d, &mut rs, 2));
    }

    #[test]
    fn a_rolled_back_replica_set_keeps_its_revision_history() {
        let mut rs = map(&[(REVISION, "1")]);
        assert!(set_new_rs_annotations(&BTreeMap::new(), &mut rs, 3));
        assert_eq!(rs, map(&[(REVISION, "3"), (REVISION_HISTORY, "1")]));
        set_new_rs_annotations(&BTreeMap::new(), &mut rs, 5);
        assert_eq!(rs, map(&[(REVISION, "5"), (REVISION_HISTORY, "1,3")]));
    }

    #[test]
    fn cleanup_takes_the_oldest_empty_sets_past_the_limit() {
        let rs = |name: &str, rev: &str, replicas: i32| -> ReplicaSet {
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": name, "annotations": {REVISION: rev}, "generation": 1},
                "spec": {"replicas": replicas, "selector": {}},
                "status": {"replicas": replicas, "observedGeneration": 1}
            }))
            .unwrap()
        };
        let (a, b, c) = (rs("a", "1", 0), rs("b", "2", 1), rs("c", "3", 0));
        let names = |v: Vec<&ReplicaSet>| -> Vec<String> {
            v.iter().map(|r| r.metadata.name.clone().unwrap()).collect()
        };
        assert_eq!(names(to_clean_up(&[&c, &b, &a], 1)), ["a"]); // b still has a pod
        assert_eq!(names(to_clean_up(&[&c, &b, &a], 0)), ["a", "c"]);
        assert_eq!(names(to_clean_up(&[&c, &b, &a], 3)), Vec::<String>::new());
    }
}
