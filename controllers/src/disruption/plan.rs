//! The disruption controller's decisions, without I/O (upstream's `getExpectedPodCount`,
//! `getExpectedScale`, `buildDisruptedPodMap`, `countHealthyPods`, `updatePdbStatus` and
//! `UpdateDisruptionAllowedCondition`): how many pods a PodDisruptionBudget expects, how many
//! must stay healthy, how many are, and so how many may be disrupted now.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, OwnerReference, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

use crate::deployment::rolling::scaled_value;
use crate::{pods, ref_manager};

/// How long an evicted pod counts as disrupted before the controller stops waiting for its
/// deletion (upstream's `DeletionTimeout`).
pub const DELETION_TIMEOUT: SignedDuration = SignedDuration::from_secs(120);

pub const CONDITION: &str = "DisruptionAllowed";

/// The scale of a pod's controller: the uid it is counted under (a Deployment's for the pods
/// of its ReplicaSets) and its replicas.
pub type Scale = (String, i32);

/// What the budget expects of its pods.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expected {
    pub expected_pods: i32,
    pub desired_healthy: i32,
    /// Pods without a controller (their budget cannot be computed from a scale).
    pub unmanaged: Vec<String>,
}

/// Why the expected pod count cannot be computed (upstream's messages).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExpectedError {
    /// A pod's controller was not found.
    #[error("found no controllers for pod {0:?}")]
    NoController(String),
    /// `minAvailable`/`maxUnavailable` is neither an int nor a percentage.
    #[error("invalid value for IntOrString: {0:?}")]
    IntOrString(IntOrString),
}

/// Upstream's `getExpectedScale`: the summed replicas of the controllers of `pods`, each
/// counted once; `scale_of` looks a controller reference up. A pod whose controller is not
/// found fails the sync with upstream's message.
fn expected_scale(
    pods: &[&Pod],
    scale_of: &dyn Fn(&OwnerReference) -> Option<Scale>,
) -> Result<(i32, Vec<String>), ExpectedError> {
    let mut scales: BTreeMap<String, i32> = BTreeMap::new();
    let mut unmanaged = Vec::new();
    let mut seen_refs = std::collections::BTreeSet::new();
    for pod in pods {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let Some(r) = ref_manager::controller_of(&pod.metadata) else {
            unmanaged.push(name);
            continue;
        };
        if !seen_refs.insert(r.uid.clone()) {
            continue;
        }
        let Some((uid, scale)) = scale_of(r) else {
            return Err(ExpectedError::NoController(name));
        };
        scales.insert(uid, scale);
    }
    Ok((scales.values().sum(), unmanaged))
}

/// Upstream's `getExpectedPodCount`: maxUnavailable (int or percent) and a percentage
/// minAvailable scale from the pods' controllers; an integer minAvailable is taken as is
/// against the number of pods.
pub fn expected(
    pdb: &PodDisruptionBudget,
    pods: &[&Pod],
    scale_of: &dyn Fn(&OwnerReference) -> Option<Scale>,
) -> Result<Expected, ExpectedError> {
    let spec = pdb.spec.clone().unwrap_or_default();
    let bad = |v: &IntOrString| ExpectedError::IntOrString(v.clone());
    if let Some(max) = spec.max_unavailable {
        let (expected_pods, unmanaged) = expected_scale(pods, scale_of)?;
        let max = scaled_value(&max, expected_pods, true).ok_or_else(|| bad(&max))?;
        return Ok(Expected {
            expected_pods,
            desired_healthy: (expected_pods - max).max(0),
            unmanaged,
        });
    }
    match spec.min_available {
        Some(IntOrString::Int(n)) => Ok(Expected {
            expected_pods: pods.len() as i32,
            desired_healthy: n,
            unmanaged: Vec::new(),
        }),
        Some(min) => {
            let (expected_pods, unmanaged) = expected_scale(pods, scale_of)?;
            let min = scaled_value(&min, expected_pods, true).ok_or_else(|| bad(&min))?;
            Ok(Expected {
                expected_pods,
                desired_healthy: min,
                unmanaged,
            })
        }
        None => Ok(Expected {
            expected_pods: 0,
            desired_healthy: 0,
            unmanaged: Vec::new(),
        }),
    }
}

/// Upstream's `buildDisruptedPodMap`: the recorded disruptions of live pods still within the
/// deletion timeout, the earliest time one of them runs out (recheck then), and the pods
/// that outlived it (reported as `NotDeleted`).
pub fn disrupted_pods(
    pdb: &PodDisruptionBudget,
    pods: &[&Pod],
    now: Timestamp,
) -> (BTreeMap<String, Time>, Option<Timestamp>, Vec<String>) {
    let mut kept = BTreeMap::new();
    let mut recheck: Option<Timestamp> = None;
    let mut not_deleted = Vec::new();
    let recorded = pdb.status.as_ref().and_then(|s| s.disrupted_pods.as_ref());
    let Some(recorded) = recorded else {
        return (kept, recheck, not_deleted);
    };
    for pod in pods {
        if pod.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let name = pod.metadata.name.clone().unwrap_or_default();
        let Some(at) = recorded.get(&name) else {
            continue;
        };
        let expected_deletion = at.0 + DELETION_TIMEOUT;
        if expected_deletion < now {
            not_deleted.push(name);
        } else {
            recheck = Some(recheck.map_or(expected_deletion, |r| r.min(expected_deletion)));
            kept.insert(name, at.clone());
        }
    }
    (kept, recheck, not_deleted)
}

/// Upstream's `countHealthyPods`: ready pods neither being deleted nor recently disrupted.
pub fn count_healthy(pods: &[&Pod], disrupted: &BTreeMap<String, Time>, now: Timestamp) -> i32 {
    pods.iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| {
            let name = p.metadata.name.as_deref().unwrap_or("");
            disrupted
                .get(name)
                .is_none_or(|at| at.0 + DELETION_TIMEOUT <= now)
        })
        .filter(|p| pods::is_ready(p))
        .count() as i32
}

/// `apimeta.SetStatusCondition`: the transition time changes only with the status.
fn set_condition(conditions: &mut Vec<Condition>, c: Condition) {
    match conditions.iter_mut().find(|o| o.type_ == c.type_) {
        Some(o) => {
            if o.status != c.status {
                o.status = c.status;
                o.last_transition_time = c.last_transition_time;
            }
            o.reason = c.reason;
            o.message = c.message;
            o.observed_generation = c.observed_generation;
        }
        None => conditions.push(c),
    }
}

fn allowed_condition(
    allowed: bool,
    reason: &str,
    message: String,
    generation: Option<i64>,
    now: Timestamp,
) -> Condition {
    Condition {
        type_: CONDITION.into(),
        status: if allowed { "True" } else { "False" }.into(),
        reason: reason.into(),
        message,
        observed_generation: generation,
        last_transition_time: Time(now),
    }
}

/// Upstream's `ConditionsAreUpToDate`.
fn conditions_up_to_date(status: &PodDisruptionBudgetStatus, generation: Option<i64>) -> bool {
    let Some(c) = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_ == CONDITION)
    else {
        return false;
    };
    if status.observed_generation != generation {
        return false;
    }
    if status.disruptions_allowed > 0 {
        c.status == "True" && c.reason == "SufficientPods"
    } else {
        c.status == "False" && c.reason == "InsufficientPods"
    }
}

/// The counts a sync arrived at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Counts {
    pub current_healthy: i32,
    pub desired_healthy: i32,
    pub expected_pods: i32,
    pub disrupted: BTreeMap<String, Time>,
}

/// Upstream's `updatePdbStatus`: the new status, or `None` when the stored one already says
/// it. No disruption is allowed while no pod is expected.
pub fn status(
    pdb: &PodDisruptionBudget,
    counts: Counts,
    now: Timestamp,
) -> Option<PodDisruptionBudgetStatus> {
    let old = pdb.status.clone().unwrap_or_default();
    let generation = pdb.metadata.generation;
    let mut allowed = counts.current_healthy - counts.desired_healthy;
    if counts.expected_pods <= 0 || allowed <= 0 {
        allowed = 0;
    }
    let old_disrupted = old.disrupted_pods.clone().unwrap_or_default();
    if old.current_healthy == counts.current_healthy
        && old.desired_healthy == counts.desired_healthy
        && old.expected_pods == counts.expected_pods
        && old.disruptions_allowed == allowed
        && old_disrupted == counts.disrupted
        && old.observed_generation == generation
        && conditions_up_to_date(&old, generation)
    {
        return None;
    }
    let mut conditions = old.conditions.clone().unwrap_or_default();
    let (ok, reason) = if allowed > 0 {
        (true, "SufficientPods")
    } else {
        (false, "InsufficientPods")
    };
    set_condition(
        &mut conditions,
        allowed_condition(ok, reason, String::new(), generation, now),
    );
    Some(PodDisruptionBudgetStatus {
        current_healthy: counts.current_healthy,
        desired_healthy: counts.desired_healthy,
        expected_pods: counts.expected_pods,
        disruptions_allowed: allowed,
        disrupted_pods: (!counts.disrupted.is_empty()).then_some(counts.disrupted),
        observed_generation: generation,
        conditions: Some(conditions),
    })
}

/// Upstream's `failSafe`: a sync that failed allows no disruption and says why.
pub fn fail_safe(
    pdb: &PodDisruptionBudget,
    error: &str,
    now: Timestamp,
) -> PodDisruptionBudgetStatus {
    let mut st = pdb.status.clone().unwrap_or_default();
    st.disruptions_allowed = 0;
    let mut conditions = st.conditions.take().unwrap_or_default();
    let generation = st.observed_generation;
    set_condition(
        &mut conditions,
        allowed_condition(false, "SyncFailed", error.to_string(), generation, now),
    );
    st.conditions = Some(conditions);
    st
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn t(secs: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + secs).unwrap()
    }

    fn pdb(spec: serde_json::Value, status: serde_json::Value) -> PodDisruptionBudget {
        serde_json::from_value(
            json!({"metadata": {"name": "b", "namespace": "ns", "generation": 2},
            "spec": spec, "status": status}),
        )
        .unwrap()
    }

    fn pod(name: &str, owner: Option<(&str, &str)>, ready: bool, deleting: bool) -> Pod {
        let mut v = json!({"metadata": {"name": name},
            "status": {"phase": "Running",
                "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}});
        if let Some((kind, uid)) = owner {
            v["metadata"]["ownerReferences"] = json!([{"apiVersion": "apps/v1", "kind": kind,
                "name": uid, "uid": uid, "controller": true}]);
        }
        if deleting {
            v["metadata"]["deletionTimestamp"] = json!(t(0).to_string());
        }
        serde_json::from_value(v).unwrap()
    }

    /// rs-a belongs to Deployment d (5 replicas), rs-b too; sts has 3.
    fn scale_of(r: &OwnerReference) -> Option<Scale> {
        match r.uid.as_str() {
            "rs-a" | "rs-b" => Some(("d".into(), 5)),
            "sts" => Some(("sts".into(), 3)),
            _ => None,
        }
    }

    #[test]
    fn expected_pods_come_from_the_controllers_scale() {
        let a = pod("a", Some(("ReplicaSet", "rs-a")), true, false);
        let b = pod("b", Some(("ReplicaSet", "rs-b")), true, false);
        let c = pod("c", Some(("StatefulSet", "sts")), true, false);
        let all = [&a, &b, &c];
        // maxUnavailable 25% of 8 (both ReplicaSets count the Deployment once): 2.
        let e = expected(
            &pdb(json!({"maxUnavailable": "25%"}), json!({})),
            &all,
            &scale_of,
        );
        assert_eq!(
            e,
            Ok(Expected {
                expected_pods: 8,
                desired_healthy: 6,
                unmanaged: vec![]
            })
        );
        let e = expected(
            &pdb(json!({"minAvailable": "50%"}), json!({})),
            &all,
            &scale_of,
        );
        assert_eq!(e.unwrap().desired_healthy, 4);
        // An integer minAvailable counts the pods themselves.
        let e = expected(&pdb(json!({"minAvailable": 2}), json!({})), &all, &scale_of);
        assert_eq!(
            e,
            Ok(Expected {
                expected_pods: 3,
                desired_healthy: 2,
                unmanaged: vec![]
            })
        );
        let orphan = pod("o", None, true, false);
        let e = expected(
            &pdb(json!({"maxUnavailable": 1}), json!({})),
            &[&c, &orphan],
            &scale_of,
        );
        assert_eq!(
            e,
            Ok(Expected {
                expected_pods: 3,
                desired_healthy: 2,
                unmanaged: vec!["o".into()]
            })
        );
        let ds = pod("x", Some(("DaemonSet", "ds")), true, false);
        assert_eq!(
            expected(
                &pdb(json!({"maxUnavailable": 1}), json!({})),
                &[&ds],
                &scale_of
            )
            .map_err(|e| e.to_string()),
            Err("found no controllers for pod \"x\"".into())
        );
    }

    #[test]
    fn healthy_pods_exclude_unready_deleting_and_recently_disrupted_ones() {
        let p = pdb(
            json!({"minAvailable": 1}),
            json!({"disruptedPods": {"fresh": t(50).to_string(), "stale": t(-200).to_string(),
                "gone": t(50).to_string()}}),
        );
        let ok = pod("ok", None, true, false);
        let unready = pod("unready", None, false, false);
        let deleting = pod("deleting", None, true, true);
        let fresh = pod("fresh", None, true, false);
        let stale = pod("stale", None, true, false);
        let all = [&ok, &unready, &deleting, &fresh, &stale];
        let (kept, recheck, not_deleted) = disrupted_pods(&p, &all, t(100));
        assert_eq!(kept.keys().collect::<Vec<_>>(), ["fresh"]);
        assert_eq!(recheck, Some(t(170)));
        assert_eq!(not_deleted, ["stale"]);
        assert_eq!(count_healthy(&all, &kept, t(100)), 2);
    }

    #[test]
    fn status_allows_what_is_above_desired_and_says_so() {
        let p = pdb(json!({"minAvailable": 2}), json!({}));
        let counts = |current, expected| Counts {
            current_healthy: current,
            desired_healthy: 2,
            expected_pods: expected,
            disrupted: BTreeMap::new(),
        };
        let st = status(&p, counts(3, 3), t(0)).unwrap();
        assert_eq!(
            serde_json::to_value(&st).unwrap(),
            json!({"currentHealthy": 3, "desiredHealthy": 2, "expectedPods": 3,
                "disruptionsAllowed": 1, "observedGeneration": 2,
                "conditions": [{"type": "DisruptionAllowed", "status": "True",
                    "reason": "SufficientPods", "message": "", "observedGeneration": 2,
                    "lastTransitionTime": t(0).to_string()}]})
        );
        let mut p2 = p.clone();
        p2.status = Some(st);
        assert_eq!(status(&p2, counts(3, 3), t(5)), None, "up to date");
        let st = status(&p2, counts(2, 3), t(5)).unwrap();
        assert_eq!(st.disruptions_allowed, 0);
        let c = &st.conditions.as_ref().unwrap()[0];
        assert_eq!(
            (
                c.status.as_str(),
                c.reason.as_str(),
                c.last_transition_time.0
            ),
            ("False", "InsufficientPods", t(5))
        );
        // Nothing expected yet: nothing allowed, however healthy.
        assert_eq!(
            status(&p, counts(3, 0), t(0)).unwrap().disruptions_allowed,
            0
        );
    }

    #[test]
    fn a_failed_sync_allows_nothing() {
        let p = pdb(
            json!({"maxUnavailable": 1}),
            json!({"disruptionsAllowed": 2, "observedGeneration": 1, "currentHealthy": 3}),
        );
        let st = fail_safe(&p, "found no controllers for pod \"x\"", t(0));
        assert_eq!(st.disruptions_allowed, 0);
        assert_eq!(st.current_healthy, 3);
        let c = &st.conditions.unwrap()[0];
        assert_eq!(
            (c.status.as_str(), c.reason.as_str(), c.message.as_str()),
            ("False", "SyncFailed", "found no controllers for pod \"x\"")
        );
        assert_eq!(c.observed_generation, Some(1));
    }
}
