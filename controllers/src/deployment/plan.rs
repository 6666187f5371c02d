//! Which ReplicaSets of a Deployment change size in one sync (upstream's `rolloutRolling`,
//! `rolloutRecreate` and `scale`), decided on sizes alone.

use std::cmp::Reverse;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::hash;
use super::revision;
use super::rolling::{self, Size};

/// A size change: `(ReplicaSet name, from, to)`.
pub type Scale = (String, i32, i32);

/// The deployment's spec, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    pub replicas: i32,
    pub recreate: bool,
    pub max_surge: i32,
    pub max_unavailable: i32,
    pub paused: bool,
}

impl Spec {
    /// Upstream's defaults apply to missing fields (25% surge and unavailability).
    pub fn of(d: &Deployment) -> Spec {
        let spec = d.spec.clone().unwrap_or_default();
        let replicas = spec.replicas.unwrap_or(1);
        let strategy = spec.strategy.unwrap_or_default();
        let recreate = strategy.type_.as_deref() == Some("Recreate");
        let pct = || IntOrString::String("25%".into());
        let ru = strategy.rolling_update.unwrap_or_default();
        let (max_surge, max_unavailable) = if recreate {
            (0, 0)
        } else {
            let (s, u) = rolling::fenceposts(
                &ru.max_surge.unwrap_or_else(pct),
                &ru.max_unavailable.unwrap_or_else(pct),
                replicas,
            );
            (s, u.min(replicas))
        };
        Spec {
            replicas,
            recreate,
            max_surge,
            max_unavailable,
            paused: spec.paused.unwrap_or(false),
        }
    }
}

pub fn replicas(rs: &ReplicaSet) -> i32 {
    rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0)
}

pub fn available(rs: &ReplicaSet) -> i32 {
    rs.status
        .as_ref()
        .and_then(|s| s.available_replicas)
        .unwrap_or(0)
}

pub fn name(rs: &ReplicaSet) -> String {
    rs.metadata.name.clone().unwrap_or_default()
}

/// The set as the rolling-update arithmetic sees it. A set scaled down reports its old
/// availability until its controller has synced again; at most `spec.replicas` of its pods
/// stay, so it counts no more than that (without this, a stale status lets two steps in a
/// row each scale down by the full budget, dropping below `replicas - maxUnavailable`).
pub fn size(rs: &ReplicaSet) -> Size {
    Size {
        name: name(rs),
        replicas: replicas(rs),
        available: available(rs).min(replicas(rs)),
    }
}

/// Oldest first (creation time, then name), as upstream's `ReplicaSetsByCreationTimestamp`.
pub fn sort_oldest_first(sets: &mut [&ReplicaSet]) {
    sets.sort_by_key(|rs| (rs.metadata.creation_timestamp.clone(), name(rs)));
}

/// The ReplicaSet whose template is the Deployment's (ignoring the hash label), the oldest
/// when several are (upstream's `FindNewReplicaSet`).
pub fn find_new<'a>(d: &Deployment, sets: &[&'a ReplicaSet]) -> Option<&'a ReplicaSet> {
    let template = &d.spec.as_ref()?.template;
    let mut sorted = sets.to_vec();
    sort_oldest_first(&mut sorted);
    sorted.into_iter().find(|rs| {
        rs.spec
            .as_ref()
            .and_then(|s| s.template.as_ref())
            .is_some_and(|t| hash::equal_ignore_hash(t, template))
    })
}

/// Some active ReplicaSet's `desired-replicas` annotation differs from the Deployment's
/// replicas: the user scaled it (upstream's `isScalingEvent`).
pub fn is_scaling_event(spec: &Spec, sets: &[&ReplicaSet]) -> bool {
    sets.iter()
        .filter(|rs| replicas(rs) > 0)
        .any(|rs| revision::desired_replicas(rs).is_some_and(|d| d != spec.replicas))
}

/// One step of a rolling update: grow (or trim) the new set, else shrink the old ones.
pub fn rolling(spec: &Spec, new: &ReplicaSet, old: &[&ReplicaSet]) -> Vec<Scale> {
    let new_size = size(new);
    if new_size.replicas > spec.replicas {
        return vec![(new_size.name, new_size.replicas, spec.replicas)];
    }
    if new_size.replicas < spec.replicas {
        let all: Vec<Size> = old
            .iter()
            .map(|r| size(r))
            .chain([new_size.clone()])
            .collect();
        let refs: Vec<&Size> = all.iter().collect();
        let to = rolling::new_rs_replicas(spec.replicas, spec.max_surge, &refs, &new_size);
        if to != new_size.replicas {
            return vec![(new_size.name, new_size.replicas, to)];
        }
    }
    let mut sorted = old.to_vec();
    sort_oldest_first(&mut sorted);
    let sizes: Vec<Size> = sorted.iter().map(|r| size(r)).collect();
    rolling::scale_down_old(spec.replicas, spec.max_unavailable, &sizes, &new_size)
        .into_iter()
        .filter_map(|(n, to)| {
            let from = sizes.iter().find(|s| s.name == n)?.replicas;
            (from != to).then_some((n, from, to))
        })
        .collect()
}

/// One step of a Recreate rollout: scale every old set to zero, then (once no old pod runs)
/// the new one up.
pub fn recreate(
    spec: &Spec,
    new: Option<&ReplicaSet>,
    old: &[&ReplicaSet],
    old_pods_running: bool,
) -> Vec<Scale> {
    let down: Vec<Scale> = old
        .iter()
        .filter(|rs| replicas(rs) > 0)
        .map(|rs| (name(rs), replicas(rs), 0))
        .collect();
    if !down.is_empty() || old_pods_running {
        return down;
    }
    match new {
        Some(n) if replicas(n) != spec.replicas => vec![(name(n), replicas(n), spec.replicas)],
        _ => Vec::new(),
    }
}

/// Upstream's `scale` for a scaling event or a paused Deployment: one active set takes the
/// new size; a saturated new set sends the old ones to zero; otherwise a rolling update's
/// sets share the change in proportion to their size (`status_replicas`: the Deployment's
/// `status.replicas`, the fallback for a set without `max-replicas`).
pub fn proportional(
    spec: &Spec,
    new: Option<&ReplicaSet>,
    old: &[&ReplicaSet],
    status_replicas: i32,
) -> Vec<Scale> {
    let mut all: Vec<&ReplicaSet> = old.iter().copied().chain(new).collect();
    sort_oldest_first(&mut all);
    let active: Vec<&ReplicaSet> = all.iter().copied().filter(|r| replicas(r) > 0).collect();
    let one = match active.len() {
        0 => new.or_else(|| all.last().copied()),
        1 => Some(active[0]),
        _ => None,
    };
    // A set whose size stays is still listed when its desired-replicas annotation is stale
    // (the shell rewrites it; otherwise the scaling event would never end).
    let stale = |rs: &ReplicaSet| revision::desired_replicas(rs) != Some(spec.replicas);
    if let Some(rs) = one {
        if replicas(rs) == spec.replicas && !stale(rs) {
            return Vec::new();
        }
        return vec![(name(rs), replicas(rs), spec.replicas)];
    }
    if let Some(n) = new {
        let saturated = replicas(n) == spec.replicas
            && revision::desired_replicas(n) == Some(spec.replicas)
            && available(n) >= spec.replicas;
        if saturated {
            return old
                .iter()
                .filter(|r| replicas(r) > 0)
                .map(|r| (name(r), replicas(r), 0))
                .collect();
        }
    }
    if spec.recreate {
        return Vec::new();
    }
    let current: i32 = active.iter().map(|r| replicas(r)).sum();
    let allowed = if spec.replicas > 0 {
        spec.replicas + spec.max_surge
    } else {
        0
    };
    let to_add = allowed - current;
    if to_add == 0 {
        return active
            .iter()
            .filter(|r| stale(r))
            .map(|r| (name(r), replicas(r), replicas(r)))
            .collect();
    }
    let mut order = active.clone();
    // Growing: the largest (then newest) first; shrinking: the largest (then oldest) first.
    if to_add > 0 {
        order.sort_by_key(|r| {
            (
                Reverse(replicas(r)),
                Reverse(r.metadata.creation_timestamp.clone()),
            )
        });
    } else {
        order.sort_by_key(|r| (Reverse(replicas(r)), r.metadata.creation_timestamp.clone()));
    }
    let mut sizes: Vec<(String, i32, i32, bool)> = Vec::new();
    let mut added = 0;
    for rs in &order {
        let r = replicas(rs);
        let share = if to_add == added {
            0
        } else {
            let annotated = rs
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(revision::MAX_REPLICAS))
                .and_then(|v| v.parse::<i32>().ok())
                .unwrap_or(status_replicas);
            let fraction = if spec.replicas == 0 || annotated == 0 {
                -r
            } else {
                let target = f64::from(r) * f64::from(allowed) / f64::from(annotated);
                target.round() as i32 - r
            };
            let left = to_add - added;
            if to_add > 0 {
                fraction.min(left)
            } else {
                fraction.max(left)
            }
        };
        added += share;
        sizes.push((name(rs), r, r + share, stale(rs)));
    }
    if let Some(first) = sizes.first_mut() {
        first.2 = (first.2 + to_add - added).max(0);
    }
    sizes
        .into_iter()
        .filter(|(_, from, to, stale)| from != to || *stale)
        .map(|(n, from, to, _)| (n, from, to))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scaled_down_set_counts_no_more_available_than_its_size() {
        let stale = rs("old", 1, 8, 10, "a");
        assert_eq!(
            size(&stale),
            Size {
                name: "old".into(),
                replicas: 8,
                available: 8
            }
        );
        assert_eq!(size(&rs("new", 2, 3, 1, "b")).available, 1);
    }

    fn rs(name: &str, created: i64, replicas: i32, available: i32, image: &str) -> ReplicaSet {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "creationTimestamp":
                k8s_openapi::jiff::Timestamp::from_second(1_700_000_000 + created).unwrap().to_string(),
                "annotations": {revision::DESIRED_REPLICAS: "10", revision::MAX_REPLICAS: "13"}},
            "spec": {"replicas": replicas, "selector": {},
                "template": {"metadata": {"labels": {"app": "web", "pod-template-hash": name}},
                    "spec": {"containers": [{"name": "c", "image": image}]}}},
            "status": {"replicas": replicas, "availableReplicas": available}
        }))
        .unwrap()
    }

    fn deployment(replicas: i32, image: &str, strategy: serde_json::Value) -> Deployment {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                "strategy": strategy,
                "template": {"metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "c", "image": image}]}}}
        }))
        .unwrap()
    }

    fn rolling_update(
        surge: serde_json::Value,
        unavailable: serde_json::Value,
    ) -> serde_json::Value {
        serde_json::json!({"type": "RollingUpdate",
            "rollingUpdate": {"maxSurge": surge, "maxUnavailable": unavailable}})
    }

    #[test]
    fn spec_resolves_the_strategy() {
        let d = deployment(10, "v1", rolling_update("25%".into(), "25%".into()));
        assert_eq!(
            Spec::of(&d),
            Spec {
                replicas: 10,
                recreate: false,
                max_surge: 3,
                max_unavailable: 2,
                paused: false
            }
        );
        let d = deployment(3, "v1", serde_json::json!({"type": "Recreate"}));
        assert!(Spec::of(&d).recreate);
    }

    #[test]
    fn new_replica_set_is_the_one_with_the_template() {
        let d = deployment(10, "v2", rolling_update(1.into(), 0.into()));
        let (a, b) = (rs("a", 0, 10, 10, "v1"), rs("b", 5, 0, 0, "v2"));
        assert_eq!(find_new(&d, &[&a, &b]).map(name), Some("b".to_string()));
        let d1 = deployment(10, "v3", rolling_update(1.into(), 0.into()));
        assert!(find_new(&d1, &[&a, &b]).is_none());
    }

    #[test]
    fn rolling_grows_the_new_set_then_shrinks_the_old() {
        let spec = Spec::of(&deployment(10, "v2", rolling_update(3.into(), 2.into())));
        let old = rs("old", 0, 10, 10, "v1");
        let new = rs("new", 5, 0, 0, "v2");
        assert_eq!(rolling(&spec, &new, &[&old]), [("new".to_string(), 0, 3)]);
        let new = rs("new", 5, 3, 0, "v2");
        assert_eq!(rolling(&spec, &new, &[&old]), [("old".to_string(), 10, 8)]);
        let old = rs("old", 0, 8, 8, "v1");
        assert_eq!(rolling(&spec, &new, &[&old]), [("new".to_string(), 3, 5)]);
        let new = rs("new", 5, 5, 5, "v2");
        assert_eq!(rolling(&spec, &new, &[&old]), [("old".to_string(), 8, 3)]);
        let new = rs("new", 5, 12, 5, "v2");
        assert_eq!(rolling(&spec, &new, &[&old]), [("new".to_string(), 12, 10)]);
    }

    #[test]
    fn recreate_empties_the_old_sets_before_the_new_one_grows() {
        let spec = Spec::of(&deployment(
            3,
            "v2",
            serde_json::json!({"type": "Recreate"}),
        ));
        let old = rs("old", 0, 3, 3, "v1");
        let new = rs("new", 5, 0, 0, "v2");
        assert_eq!(
            recreate(&spec, Some(&new), &[&old], true),
            [("old".to_string(), 3, 0)]
        );
        let old = rs("old", 0, 0, 0, "v1");
        assert_eq!(recreate(&spec, Some(&new), &[&old], true), []);
        assert_eq!(
            recreate(&spec, Some(&new), &[&old], false),
            [("new".to_string(), 0, 3)]
        );
    }

    #[test]
    fn scaling_shares_the_change_in_proportion() {
        // Mid-rollout 10 -> 20 replicas (maxSurge 3 -> 5): old 8 and new 5 (of 13 allowed).
        let spec = Spec::of(&deployment(
            20,
            "v2",
            rolling_update("25%".into(), "25%".into()),
        ));
        let old = rs("old", 0, 8, 8, "v1");
        let new = rs("new", 5, 5, 5, "v2");
        let ops = proportional(&spec, Some(&new), &[&old], 13);
        // allowed 25, to add 12: old 8*25/13=15.4 -> +7; new 5*25/13=9.6 -> +5.
        assert_eq!(
            ops,
            [("old".to_string(), 8, 15), ("new".to_string(), 5, 10)]
        );
        // A single active set takes the new size.
        let old = rs("old", 0, 0, 0, "v1");
        let new = rs("new", 5, 10, 10, "v2");
        assert_eq!(
            proportional(&spec, Some(&new), &[&old], 10),
            [("new".to_string(), 10, 20)]
        );
    }
}
