//! A Deployment's status (upstream's `calculateStatus`, `syncRolloutStatus` and the condition
//! helpers of `deployment/util`): counts summed over its ReplicaSets, the `Available`
//! condition, and the `Progressing` condition with its deadline.

use k8s_openapi::api::apps::v1::{DeploymentCondition, DeploymentStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

pub const AVAILABLE: &str = "Available";
pub const PROGRESSING: &str = "Progressing";
pub const REPLICA_FAILURE: &str = "ReplicaFailure";

pub const MINIMUM_REPLICAS_AVAILABLE: &str = "MinimumReplicasAvailable";
pub const MINIMUM_REPLICAS_UNAVAILABLE: &str = "MinimumReplicasUnavailable";
pub const NEW_RS_AVAILABLE: &str = "NewReplicaSetAvailable";
pub const RS_UPDATED: &str = "ReplicaSetUpdated";
pub const TIMED_OUT: &str = "ProgressDeadlineExceeded";
pub const NEW_RS_CREATED: &str = "NewReplicaSetCreated";
pub const FOUND_NEW_RS: &str = "FoundNewReplicaSet";
pub const PAUSED: &str = "DeploymentPaused";
pub const RESUMED: &str = "DeploymentResumed";
pub const FAILED_RS_CREATE: &str = "FailedRSCreate";

/// `progressDeadlineSeconds` of this value means no deadline.
const NO_DEADLINE: i32 = i32::MAX;

/// A condition with both times at `now` (upstream's `NewDeploymentCondition`).
pub fn condition(
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
    now: Timestamp,
) -> DeploymentCondition {
    DeploymentCondition {
        type_: type_.into(),
        status: status.into(),
        reason: Some(reason.into()),
        message: Some(message.into()),
        last_update_time: Some(Time(now)),
        last_transition_time: Some(Time(now)),
    }
}

/// The condition of `type_`, if set.
pub fn get<'a>(status: &'a DeploymentStatus, type_: &str) -> Option<&'a DeploymentCondition> {
    status
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
}

/// Upstream's `SetDeploymentCondition`: no change for the same status and reason; the
/// transition time is kept while the status stays the same.
pub fn set(status: &mut DeploymentStatus, mut c: DeploymentCondition) {
    if let Some(cur) = get(status, &c.type_) {
        if cur.status == c.status && cur.reason == c.reason {
            return;
        }
        if cur.status == c.status {
            c.last_transition_time = cur.last_transition_time.clone();
        }
    }
    remove(status, &c.type_);
    status.conditions.get_or_insert_with(Vec::new).push(c);
}

/// Removes the condition of `type_`.
pub fn remove(status: &mut DeploymentStatus, type_: &str) {
    if let Some(cs) = status.conditions.as_mut() {
        cs.retain(|c| c.type_ != type_);
        if cs.is_empty() {
            status.conditions = None;
        }
    }
}

/// A ReplicaSet's contribution to the status.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RsCounts {
    pub spec_replicas: i32,
    pub replicas: i32,
    pub ready: i32,
    pub available: i32,
}

/// What the status is computed from.
pub struct Input<'a> {
    pub old: &'a DeploymentStatus,
    pub generation: Option<i64>,
    pub replicas: i32,
    pub max_unavailable: i32,
    pub all: &'a [RsCounts],
    pub new: Option<&'a RsCounts>,
}

/// Upstream's `calculateStatus`: the counts and the `Available` condition (old conditions kept).
pub fn calculate(input: &Input, now: Timestamp) -> DeploymentStatus {
    let sum = |f: fn(&RsCounts) -> i32| input.all.iter().map(f).sum::<i32>();
    let available = sum(|r| r.available);
    let total = sum(|r| r.spec_replicas);
    let nonzero = |v: i32| (v != 0).then_some(v);
    let mut status = DeploymentStatus {
        observed_generation: input.generation,
        replicas: nonzero(sum(|r| r.replicas)),
        updated_replicas: input.new.and_then(|n| nonzero(n.replicas)),
        ready_replicas: nonzero(sum(|r| r.ready)),
        available_replicas: nonzero(available),
        unavailable_replicas: nonzero((total - available).max(0)),
        collision_count: input.old.collision_count,
        conditions: input.old.conditions.clone(),
        terminating_replicas: input.old.terminating_replicas,
    };
    if available >= input.replicas - input.max_unavailable {
        let msg = "Deployment has minimum availability.";
        set(
            &mut status,
            condition(AVAILABLE, "True", MINIMUM_REPLICAS_AVAILABLE, msg, now),
        );
    } else {
        let msg = "Deployment does not have minimum availability.";
        set(
            &mut status,
            condition(AVAILABLE, "False", MINIMUM_REPLICAS_UNAVAILABLE, msg, now),
        );
    }
    status
}

fn n(v: Option<i32>) -> i32 {
    v.unwrap_or(0)
}

/// All replicas updated, counted and available for the current generation
/// (upstream's `DeploymentComplete`).
pub fn complete(replicas: i32, generation: Option<i64>, s: &DeploymentStatus) -> bool {
    n(s.updated_replicas) == replicas
        && n(s.replicas) == replicas
        && n(s.available_replicas) == replicas
        && s.observed_generation.unwrap_or(0) >= generation.unwrap_or(0)
}

/// Some progress since `old` (upstream's `DeploymentProgressing`).
pub fn progressing(old: &DeploymentStatus, new: &DeploymentStatus) -> bool {
    let old_old = n(old.replicas) - n(old.updated_replicas);
    let new_old = n(new.replicas) - n(new.updated_replicas);
    n(new.updated_replicas) > n(old.updated_replicas)
        || new_old < old_old
        || n(new.ready_replicas) > n(old.ready_replicas)
        || n(new.available_replicas) > n(old.available_replicas)
}

/// The deadline is set and not "none".
pub fn has_deadline(deadline: Option<i32>) -> bool {
    deadline.is_some_and(|d| d != NO_DEADLINE)
}

/// The Progressing condition saw no update for longer than the deadline
/// (upstream's `DeploymentTimedOut`).
pub fn timed_out(deadline: Option<i32>, s: &DeploymentStatus, now: Timestamp) -> bool {
    let Some(d) = deadline.filter(|d| *d != NO_DEADLINE) else {
        return false;
    };
    let Some(c) = get(s, PROGRESSING) else {
        return false;
    };
    match c.reason.as_deref() {
        Some(NEW_RS_AVAILABLE) => false,
        Some(TIMED_OUT) => true,
        _ => c
            .last_update_time
            .as_ref()
            .is_some_and(|t| t.0 + SignedDuration::from_secs(i64::from(d)) < now),
    }
}

/// The rollout part of upstream's `syncRolloutStatus`: sets Progressing to
/// NewReplicaSetAvailable, ReplicaSetUpdated or ProgressDeadlineExceeded.
/// `subject` is `ReplicaSet "<new>"` or `Deployment "<name>"` when there is no new set.
pub fn rollout_conditions(
    old: &DeploymentStatus,
    status: &mut DeploymentStatus,
    replicas: i32,
    generation: Option<i64>,
    deadline: Option<i32>,
    subject: &str,
    now: Timestamp,
) {
    if !has_deadline(deadline) {
        remove(status, PROGRESSING);
        return;
    }
    let cur = get(status, PROGRESSING).cloned();
    let done = n(status.replicas) == n(status.updated_replicas)
        && cur.as_ref().and_then(|c| c.reason.as_deref()) == Some(NEW_RS_AVAILABLE);
    if done {
        return;
    }
    if complete(replicas, generation, status) {
        let msg = format!("{subject} has successfully progressed.");
        set(
            status,
            condition(PROGRESSING, "True", NEW_RS_AVAILABLE, &msg, now),
        );
    } else if progressing(old, status) {
        let msg = format!("{subject} is progressing.");
        let mut c = condition(PROGRESSING, "True", RS_UPDATED, &msg, now);
        if let Some(cur) = cur {
            if cur.status == "True" {
                c.last_transition_time = cur.last_transition_time;
            }
            remove(status, PROGRESSING);
        }
        set(status, c);
    } else if timed_out(deadline, status, now) {
        let msg = format!("{subject} has timed out progressing.");
        set(
            status,
            condition(PROGRESSING, "False", TIMED_OUT, &msg, now),
        );
    }
}

/// Seconds until an unfinished rollout would time out (upstream's `requeueStuckDeployment`).
pub fn until_deadline(deadline: Option<i32>, s: &DeploymentStatus, now: Timestamp) -> Option<i64> {
    let d = deadline.filter(|d| *d != NO_DEADLINE)?;
    let c = get(s, PROGRESSING)?;
    if matches!(
        c.reason.as_deref(),
        Some(NEW_RS_AVAILABLE) | Some(TIMED_OUT)
    ) {
        return None;
    }
    let at = c.last_update_time.as_ref()?.0 + SignedDuration::from_secs(i64::from(d));
    Some((at.duration_since(now).as_secs() + 1).max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(secs: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + secs).unwrap()
    }

    fn counts(spec: i32, replicas: i32, ready: i32, available: i32) -> RsCounts {
        RsCounts {
            spec_replicas: spec,
            replicas,
            ready,
            available,
        }
    }

    #[test]
    fn counts_and_availability() {
        let old = DeploymentStatus::default();
        let new = counts(3, 3, 2, 1);
        let all = [counts(8, 8, 8, 8), new.clone()];
        let s = calculate(
            &Input {
                old: &old,
                generation: Some(2),
                replicas: 10,
                max_unavailable: 2,
                all: &all,
                new: Some(&new),
            },
            t(0),
        );
        assert_eq!(
            (
                s.replicas,
                s.updated_replicas,
                s.ready_replicas,
                s.available_replicas
            ),
            (Some(11), Some(3), Some(10), Some(9))
        );
        assert_eq!(s.unavailable_replicas, Some(2));
        assert_eq!(s.observed_generation, Some(2));
        let a = get(&s, AVAILABLE).unwrap();
        assert_eq!(
            (a.status.as_str(), a.reason.as_deref(), a.message.as_deref()),
            (
                "True",
                Some(MINIMUM_REPLICAS_AVAILABLE),
                Some("Deployment has minimum availability.")
            )
        );
        let s2 = calculate(
            &Input {
                old: &s,
                generation: Some(2),
                replicas: 10,
                max_unavailable: 0,
                all: &all,
                new: Some(&new),
            },
            t(5),
        );
        let a = get(&s2, AVAILABLE).unwrap();
        assert_eq!(
            (a.status.as_str(), a.reason.as_deref()),
            ("False", Some(MINIMUM_REPLICAS_UNAVAILABLE))
        );
        assert_eq!(a.last_transition_time, Some(Time(t(5))));
    }

    #[test]
    fn progressing_updates_complete_and_times_out() {
        let subject = "ReplicaSet \"web-abc\"";
        let mut start = DeploymentStatus::default();
        set(
            &mut start,
            condition(
                PROGRESSING,
                "True",
                NEW_RS_CREATED,
                "Created new replica set \"web-abc\"",
                t(0),
            ),
        );
        // Progress: ReplicaSetUpdated, transition time kept.
        let mut s = start.clone();
        s.updated_replicas = Some(1);
        s.replicas = Some(1);
        rollout_conditions(&start, &mut s, 3, Some(1), Some(600), subject, t(10));
        let c = get(&s, PROGRESSING).unwrap();
        assert_eq!(c.reason.as_deref(), Some(RS_UPDATED));
        assert_eq!(
            c.message.as_deref(),
            Some("ReplicaSet \"web-abc\" is progressing.")
        );
        assert_eq!(
            (c.last_update_time.clone(), c.last_transition_time.clone()),
            (Some(Time(t(10))), Some(Time(t(0))))
        );
        assert_eq!(until_deadline(Some(600), &s, t(10)), Some(601));
        // No progress past the deadline: ProgressDeadlineExceeded.
        let mut stuck = s.clone();
        rollout_conditions(&s, &mut stuck, 3, Some(1), Some(600), subject, t(611));
        let c = get(&stuck, PROGRESSING).unwrap();
        assert_eq!(
            (c.status.as_str(), c.reason.as_deref()),
            ("False", Some(TIMED_OUT))
        );
        assert_eq!(
            c.message.as_deref(),
            Some("ReplicaSet \"web-abc\" has timed out progressing.")
        );
        // Complete: NewReplicaSetAvailable.
        let mut done = s.clone();
        done.replicas = Some(3);
        done.updated_replicas = Some(3);
        done.available_replicas = Some(3);
        done.observed_generation = Some(1);
        rollout_conditions(&s, &mut done, 3, Some(1), Some(600), subject, t(20));
        let c = get(&done, PROGRESSING).unwrap();
        assert_eq!(c.reason.as_deref(), Some(NEW_RS_AVAILABLE));
        assert_eq!(
            c.message.as_deref(),
            Some("ReplicaSet \"web-abc\" has successfully progressed.")
        );
        assert_eq!(until_deadline(Some(600), &done, t(20)), None);
        assert!(complete(3, Some(1), &done));
        assert!(!complete(3, Some(2), &done));
    }

    #[test]
    fn no_deadline_drops_progressing() {
        let mut s = DeploymentStatus::default();
        set(
            &mut s,
            condition(PROGRESSING, "True", RS_UPDATED, "m", t(0)),
        );
        let old = s.clone();
        rollout_conditions(&old, &mut s, 1, None, Some(i32::MAX), "x", t(1));
        assert_eq!(s.conditions, None);
    }
}
