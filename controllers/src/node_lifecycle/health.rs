//! The node lifecycle controller's decisions about one Node, without I/O (upstream's
//! `monitorNodeHealth` and the taint passes): when its kubelet stopped renewing its Lease for
//! longer than the grace period, every condition turns `Unknown`; the `not-ready` /
//! `unreachable` taints (NoSchedule and NoExecute) follow the Ready condition, and the
//! `memory-pressure` / `disk-pressure` / `pid-pressure` NoSchedule taints follow the pressure
//! conditions (upstream's `doNoScheduleTaintingPass`).

use k8s_openapi::api::core::v1::{NodeCondition, Taint};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

/// The taint of a node whose Ready condition is `False`.
pub const NOT_READY: &str = "node.kubernetes.io/not-ready";
/// The taint of a node whose Ready condition is `Unknown`.
pub const UNREACHABLE: &str = "node.kubernetes.io/unreachable";
/// The NoSchedule taint each pressure condition sets while it is `True`.
pub const PRESSURE_TAINTS: &[(&str, &str)] = &[
    ("MemoryPressure", "node.kubernetes.io/memory-pressure"),
    ("DiskPressure", "node.kubernetes.io/disk-pressure"),
    ("PIDPressure", "node.kubernetes.io/pid-pressure"),
];
/// The conditions a kubelet posts, which go `Unknown` when it stops.
const KUBELET_CONDITIONS: &[&str] = &["Ready", "MemoryPressure", "DiskPressure", "PIDPressure"];

/// The conditions after the grace period ran out without a heartbeat: each kubelet
/// condition `Unknown` (reason `NodeStatusUnknown`, "Kubelet stopped posting node status.",
/// transition time `now` when it changed), a never-posted one added as
/// `NodeStatusNeverUpdated`. `None` when nothing changes.
pub fn unknown_conditions(
    conditions: &[NodeCondition],
    now: Timestamp,
) -> Option<Vec<NodeCondition>> {
    let mut out = conditions.to_vec();
    let mut changed = false;
    for kind in KUBELET_CONDITIONS {
        match out.iter_mut().find(|c| c.type_ == *kind) {
            Some(c) if c.status == "Unknown" => {}
            Some(c) => {
                c.status = "Unknown".into();
                c.reason = Some("NodeStatusUnknown".into());
                c.message = Some("Kubelet stopped posting node status.".into());
                c.last_transition_time = Some(Time(now));
                changed = true;
            }
            None => {
                out.push(NodeCondition {
                    type_: kind.to_string(),
                    status: "Unknown".into(),
                    reason: Some("NodeStatusNeverUpdated".into()),
                    message: Some("Kubelet never posted node status.".into()),
                    last_heartbeat_time: Some(Time(now)),
                    last_transition_time: Some(Time(now)),
                });
                changed = true;
            }
        }
    }
    changed.then_some(out)
}

/// The status of the Ready condition ("True", "False", "Unknown"; "Unknown" when absent).
pub fn ready_status(conditions: &[NodeCondition]) -> &str {
    conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .map_or("Unknown", |c| c.status.as_str())
}

/// The node's taints with the not-ready/unreachable ones set for `ready` (NoSchedule and
/// NoExecute, `timeAdded` now for new NoExecute taints; removed when Ready is `True`); other
/// taints are kept as they are. `None` when nothing changes.
pub fn taints_for(taints: &[Taint], ready: &str, now: Timestamp) -> Option<Vec<Taint>> {
    let wanted = match ready {
        "True" => None,
        "False" => Some(NOT_READY),
        _ => Some(UNREACHABLE),
    };
    let ours = |t: &Taint| {
        (t.key == NOT_READY || t.key == UNREACHABLE)
            && (t.effect == "NoSchedule" || t.effect == "NoExecute")
    };
    let mut out: Vec<Taint> = taints
        .iter()
        .filter(|t| !ours(t) || Some(t.key.as_str()) == wanted)
        .cloned()
        .collect();
    if let Some(key) = wanted {
        for effect in ["NoSchedule", "NoExecute"] {
            if !out.iter().any(|t| t.key == key && t.effect == effect) {
                out.push(Taint {
                    key: key.into(),
                    effect: effect.into(),
                    value: None,
                    time_added: (effect == "NoExecute").then_some(Time(now)),
                });
            }
        }
    }
    (out != taints).then_some(out)
}

/// The node's taints with the pressure taints (NoSchedule) present exactly for the pressure
/// conditions that are `True`; other taints are kept. `None` when nothing changes.
pub fn pressure_taints_for(taints: &[Taint], conditions: &[NodeCondition]) -> Option<Vec<Taint>> {
    let on = |kind: &str| {
        conditions
            .iter()
            .any(|c| c.type_ == kind && c.status == "True")
    };
    let mut out: Vec<Taint> = taints
        .iter()
        .filter(|t| {
            let pressure = PRESSURE_TAINTS.iter().find(|(_, key)| t.key == *key);
            match pressure {
                Some((kind, _)) => t.effect != "NoSchedule" || on(kind),
                None => true,
            }
        })
        .cloned()
        .collect();
    for (kind, key) in PRESSURE_TAINTS {
        if on(kind)
            && !out
                .iter()
                .any(|t| t.key == *key && t.effect == "NoSchedule")
        {
            out.push(Taint {
                key: key.to_string(),
                effect: "NoSchedule".into(),
                value: None,
                time_added: None,
            });
        }
    }
    (out != taints).then_some(out)
}

/// The taints a node with `taints` should carry for `conditions`: the not-ready/unreachable
/// ones following its Ready condition, the pressure ones its pressure conditions. `None`
/// when nothing changes, or when the kubelet never posted a Ready condition (upstream taints
/// only on an observed Ready condition).
pub fn taints_update(
    taints: &[Taint],
    conditions: &[NodeCondition],
    now: Timestamp,
) -> Option<Vec<Taint>> {
    if !conditions.iter().any(|c| c.type_ == "Ready") {
        return None;
    }
    let readiness = taints_for(taints, ready_status(conditions), now);
    let current = readiness.as_deref().unwrap_or(taints);
    pressure_taints_for(current, conditions).or(readiness)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn cond(kind: &str, status: &str) -> NodeCondition {
        NodeCondition {
            type_: kind.into(),
            status: status.into(),
            reason: Some("KubeletReady".into()),
            message: Some("kubelet is posting ready status".into()),
            last_heartbeat_time: Some(Time(t("2026-01-01T00:00:00Z"))),
            last_transition_time: Some(Time(t("2026-01-01T00:00:00Z"))),
        }
    }

    #[test]
    fn silent_kubelet_makes_every_condition_unknown() {
        let now = t("2026-01-01T00:01:00Z");
        let before = vec![cond("Ready", "True"), cond("MemoryPressure", "False")];
        let after = unknown_conditions(&before, now).unwrap();
        assert_eq!(after.len(), 4);
        assert_eq!(after[0].status, "Unknown");
        assert_eq!(after[0].reason.as_deref(), Some("NodeStatusUnknown"));
        assert_eq!(
            after[0].message.as_deref(),
            Some("Kubelet stopped posting node status.")
        );
        assert_eq!(after[0].last_transition_time, Some(Time(now)));
        assert_eq!(after[0].last_heartbeat_time, before[0].last_heartbeat_time);
        assert_eq!(after[2].type_, "DiskPressure");
        assert_eq!(after[2].reason.as_deref(), Some("NodeStatusNeverUpdated"));
        assert_eq!(unknown_conditions(&after, now), None);
        assert_eq!(ready_status(&after), "Unknown");
        assert_eq!(ready_status(&[]), "Unknown");
    }

    #[test]
    fn pressure_taints_follow_the_pressure_conditions() {
        let other = Taint {
            key: "dedicated".into(),
            value: None,
            effect: "NoSchedule".into(),
            time_added: None,
        };
        let disk = vec![
            cond("DiskPressure", "True"),
            cond("MemoryPressure", "False"),
        ];
        let tainted = pressure_taints_for(std::slice::from_ref(&other), &disk).unwrap();
        let keys: Vec<(&str, &str)> = tainted
            .iter()
            .map(|t| (t.key.as_str(), t.effect.as_str()))
            .collect();
        assert_eq!(
            keys,
            [
                ("dedicated", "NoSchedule"),
                ("node.kubernetes.io/disk-pressure", "NoSchedule")
            ]
        );
        assert_eq!(pressure_taints_for(&tainted, &disk), None);
        let relieved = vec![
            cond("DiskPressure", "False"),
            cond("MemoryPressure", "True"),
        ];
        let keys: Vec<String> = pressure_taints_for(&tainted, &relieved)
            .unwrap()
            .into_iter()
            .map(|t| t.key)
            .collect();
        assert_eq!(keys, ["dedicated", "node.kubernetes.io/memory-pressure"]);
        // Unknown (a silent kubelet) is not pressure.
        assert_eq!(
            pressure_taints_for(&tainted, &[cond("DiskPressure", "Unknown")]),
            Some(vec![other.clone()])
        );
        assert_eq!(pressure_taints_for(&[other], &[]), None);
    }

    #[test]
    fn taints_follow_readiness() {
        let now = t("2026-01-01T00:01:00Z");
        let other = Taint {
            key: "dedicated".into(),
            value: Some("db".into()),
            effect: "NoSchedule".into(),
            time_added: None,
        };
        let unreachable = taints_for(std::slice::from_ref(&other), "Unknown", now).unwrap();
        let keys: Vec<(&str, &str, bool)> = unreachable
            .iter()
            .map(|t| (t.key.as_str(), t.effect.as_str(), t.time_added.is_some()))
            .collect();
        assert_eq!(
            keys,
            vec![
                ("dedicated", "NoSchedule", false),
                (UNREACHABLE, "NoSchedule", false),
                (UNREACHABLE, "NoExecute", true)
            ]
        );
        assert_eq!(taints_for(&unreachable, "Unknown", now), None);
        let not_ready = taints_for(&unreachable, "False", now).unwrap();
        assert!(not_ready.iter().all(|t| t.key != UNREACHABLE));
        assert_eq!(not_ready.iter().filter(|t| t.key == NOT_READY).count(), 2);
        assert_eq!(
            taints_for(&not_ready, "True", now),
            Some(vec![other.clone()])
        );
        assert_eq!(taints_for(&[other], "True", now), None);
    }

    #[test]
    fn one_update_sets_readiness_and_pressure_taints_together() {
        let now = t("2026-01-01T00:01:00Z");
        let key_effects = |ts: &[Taint]| -> Vec<(String, String)> {
            ts.iter()
                .map(|t| (t.key.clone(), t.effect.clone()))
                .collect()
        };
        // Never posted Ready: left alone, even under pressure.
        assert_eq!(
            taints_update(&[], &[cond("DiskPressure", "True")], now),
            None
        );
        // Not ready and under disk pressure: both in one write.
        let conditions = [cond("Ready", "False"), cond("DiskPressure", "True")];
        let tainted = taints_update(&[], &conditions, now).unwrap();
        assert_eq!(
            key_effects(&tainted),
            vec![
                (NOT_READY.into(), "NoSchedule".into()),
                (NOT_READY.into(), "NoExecute".into()),
                (
                    "node.kubernetes.io/disk-pressure".into(),
                    "NoSchedule".into()
                ),
            ]
        );
        assert_eq!(taints_update(&tainted, &conditions, now), None);
        // Ready again, pressure gone: every taint of ours goes, a user's stays.
        let user = Taint {
            key: "dedicated".into(),
            value: None,
            effect: "NoExecute".into(),
            time_added: None,
        };
        let mut with_user = tainted.clone();
        with_user.insert(1, user.clone());
        let ready = [cond("Ready", "True"), cond("DiskPressure", "False")];
        assert_eq!(
            taints_update(&with_user, &ready, now),
            Some(vec![user.clone()])
        );
        // Readiness unchanged, only pressure lifted: the readiness taints stay.
        let still_not_ready = [cond("Ready", "False"), cond("DiskPressure", "False")];
        assert_eq!(
            key_effects(&taints_update(&tainted, &still_not_ready, now).unwrap()),
            vec![
                (NOT_READY.into(), "NoSchedule".into()),
                (NOT_READY.into(), "NoExecute".into()),
            ]
        );
    }
}
