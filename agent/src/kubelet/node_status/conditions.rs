//! The node's conditions (upstream kubelet's condition setters): Ready from the runtime's
//! health, MemoryPressure/DiskPressure/PIDPressure as the eviction manager reports them
//! ([`crate::kubelet::eviction`]; without one, from the default `memory.available<100Mi` and
//! `nodefs.available<10%` applied to the machine; no PID threshold by default). Reasons
//! and messages are upstream's; a condition's `lastTransitionTime` is kept while its status
//! does not change. Pure.

use k8s_openapi::api::core::v1::NodeCondition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use super::machine::Machine;
use super::runtime::RuntimeStatus;

/// The memory.available hard eviction threshold (upstream default), bytes.
pub const MEMORY_AVAILABLE_MIN: u64 = 100 * 1024 * 1024;
/// The nodefs.available hard eviction threshold (upstream default), percent.
pub const NODEFS_AVAILABLE_MIN_PERCENT: u64 = 10;

/// Which pressures the node is under.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Pressure {
    pub memory: bool,
    pub disk: bool,
    pub pid: bool,
}

/// The pressures of `m` under the default thresholds (unknown figures never signal one).
pub fn pressure(m: &Machine) -> Pressure {
    Pressure {
        memory: m.memory_bytes > 0 && m.memory_available_bytes < MEMORY_AVAILABLE_MIN,
        disk: m.fs_bytes > 0
            && m.fs_available_bytes * 100 < m.fs_bytes * NODEFS_AVAILABLE_MIN_PERCENT,
        pid: false,
    }
}

/// The errors that keep the node from Ready, in upstream's words and order (runtime, then
/// network).
pub fn not_ready_errors(r: &RuntimeStatus) -> Vec<String> {
    let mut errs = Vec::new();
    if !r.reachable {
        errs.push("container runtime is down".to_string());
        errs.push("container runtime network not ready: network state unknown".to_string());
        return errs;
    }
    if !r.runtime_ready {
        errs.push(format!(
            "container runtime not ready: RuntimeReady=false reason:{} message:{}",
            r.runtime_reason, r.runtime_message
        ));
    }
    if !r.network_ready {
        errs.push(format!(
            "container runtime network not ready: NetworkReady=false reason:{} message:{}",
            r.network_reason, r.network_message
        ));
    }
    errs
}

/// Joins errors as Kubernetes' aggregate error does: one alone, several as `[a, b]`.
pub fn aggregate(errs: &[String]) -> String {
    match errs {
        [one] => one.clone(),
        _ => format!("[{}]", errs.join(", ")),
    }
}

/// `(type, status, reason, message)` of every condition, in upstream's order.
pub fn desired(r: &RuntimeStatus, p: Pressure) -> [(&'static str, bool, &'static str, String); 4] {
    let pair = |on: bool, yes: (&'static str, &str), no: (&'static str, &str)| {
        let (reason, message) = if on { yes } else { no };
        (on, reason, message.to_string())
    };
    let (m, mr, mm) = pair(
        p.memory,
        (
            "KubeletHasInsufficientMemory",
            "kubelet has insufficient memory available",
        ),
        (
            "KubeletHasSufficientMemory",
            "kubelet has sufficient memory available",
        ),
    );
    let (d, dr, dm) = pair(
        p.disk,
        ("KubeletHasDiskPressure", "kubelet has disk pressure"),
        ("KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    );
    let (pi, pr, pm) = pair(
        p.pid,
        (
            "KubeletHasInsufficientPID",
            "kubelet has insufficient PID available",
        ),
        (
            "KubeletHasSufficientPID",
            "kubelet has sufficient PID available",
        ),
    );
    let errs = not_ready_errors(r);
    let ready = if errs.is_empty() {
        (
            true,
            "KubeletReady",
            "kubelet is posting ready status".to_string(),
        )
    } else {
        (false, "KubeletNotReady", aggregate(&errs))
    };
    [
        ("MemoryPressure", m, mr, mm),
        ("DiskPressure", d, dr, dm),
        ("PIDPressure", pi, pr, pm),
        ("Ready", ready.0, ready.1, ready.2),
    ]
}

/// The conditions to report at `now`, keeping `lastTransitionTime` from `previous` (the
/// stored node's) where the status is unchanged.
pub fn conditions(
    r: &RuntimeStatus,
    p: Pressure,
    previous: &[NodeCondition],
    now: Timestamp,
) -> Vec<NodeCondition> {
    desired(r, p)
        .into_iter()
        .map(|(type_, on, reason, message)| {
            // Ready is True when healthy; the pressures are True when under pressure.
            let status = if on { "True" } else { "False" }.to_string();
            let transition = previous
                .iter()
                .find(|c| c.type_ == type_ && c.status == status)
                .and_then(|c| c.last_transition_time.clone())
                .unwrap_or(Time(now));
            NodeCondition {
                type_: type_.to_string(),
                status,
                reason: Some(reason.to_string()),
                message: Some(message),
                last_heartbeat_time: Some(Time(now)),
                last_transition_time: Some(transition),
            }
        })
        .collect()
}

/// Whether two condition lists differ in anything but heartbeat times.
pub fn changed(a: &[NodeCondition], b: &[NodeCondition]) -> bool {
    let key = |c: &NodeCondition| {
        (
            c.type_.clone(),
            c.status.clone(),
            c.reason.clone(),
            c.message.clone(),
        )
    };
    let mut ka: Vec<_> = a.iter().map(key).collect();
    let mut kb: Vec<_> = b.iter().map(key).collect();
    ka.sort();
    kb.sort();
    ka != kb
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn healthy() -> RuntimeStatus {
        RuntimeStatus {
            reachable: true,
            runtime_ready: true,
            network_ready: true,
            version: "containerd://2.0.5".into(),
            ..RuntimeStatus::default()
        }
    }

    #[test]
    fn a_runtime_that_does_not_answer_is_down() {
        let c = conditions(
            &RuntimeStatus::default(),
            Pressure::default(),
            &[],
            at("2026-01-01T00:00:00Z"),
        );
        let ready = &c[3];
        assert_eq!(
            (
                ready.type_.as_str(),
                ready.status.as_str(),
                ready.reason.as_deref(),
                ready.message.as_deref()
            ),
            (
                "Ready",
                "False",
                Some("KubeletNotReady"),
                Some(
                    "[container runtime is down, container runtime network not ready: network \
                     state unknown]"
                )
            )
        );
        let types: Vec<_> = c
            .iter()
            .map(|c| (c.type_.as_str(), c.status.as_str()))
            .collect();
        assert_eq!(
            types,
            [
                ("MemoryPressure", "False"),
                ("DiskPressure", "False"),
                ("PIDPressure", "False"),
                ("Ready", "False")
            ]
        );
        assert_eq!(c[0].reason.as_deref(), Some("KubeletHasSufficientMemory"));
        assert_eq!(
            c[1].message.as_deref(),
            Some("kubelet has no disk pressure")
        );
    }

    #[test]
    fn a_network_not_ready_is_named_with_the_runtimes_reason() {
        let r = RuntimeStatus {
            network_ready: false,
            network_reason: "NetworkPluginNotReady".into(),
            network_message: "Network plugin returns error: cni plugin not initialized".into(),
            ..healthy()
        };
        assert_eq!(
            aggregate(&not_ready_errors(&r)),
            "container runtime network not ready: NetworkReady=false \
             reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not \
             initialized"
        );
        let c = conditions(
            &healthy(),
            Pressure::default(),
            &[],
            at("2026-01-01T00:00:00Z"),
        );
        assert_eq!(
            (
                c[3].status.as_str(),
                c[3].reason.as_deref(),
                c[3].message.as_deref()
            ),
            (
                "True",
                Some("KubeletReady"),
                Some("kubelet is posting ready status")
            )
        );
    }

    #[test]
    fn transition_times_are_kept_until_the_status_changes() {
        let t0 = at("2026-01-01T00:00:00Z");
        let t1 = at("2026-01-01T00:00:10Z");
        let t2 = at("2026-01-01T00:00:20Z");
        let down = conditions(&RuntimeStatus::default(), Pressure::default(), &[], t0);
        let still = conditions(&RuntimeStatus::default(), Pressure::default(), &down, t1);
        assert_eq!(still[3].last_transition_time, Some(Time(t0)));
        assert_eq!(still[3].last_heartbeat_time, Some(Time(t1)));
        assert!(!changed(&down, &still));
        let up = conditions(&healthy(), Pressure::default(), &still, t2);
        assert_eq!(up[3].last_transition_time, Some(Time(t2)));
        assert_eq!(up[0].last_transition_time, Some(Time(t0)));
        assert!(changed(&still, &up));
    }

    #[test]
    fn pressure_follows_the_default_thresholds() {
        let m = Machine {
            memory_bytes: 1 << 30,
            memory_available_bytes: MEMORY_AVAILABLE_MIN - 1,
            fs_bytes: 1000,
            fs_available_bytes: 99,
            ..Machine::default()
        };
        assert_eq!(
            pressure(&m),
            Pressure {
                memory: true,
                disk: true,
                pid: false
            }
        );
        let ok = Machine {
            memory_available_bytes: MEMORY_AVAILABLE_MIN,
            fs_available_bytes: 100,
            ..m.clone()
        };
        assert_eq!(pressure(&ok), Pressure::default());
        assert_eq!(pressure(&Machine::default()), Pressure::default());
        let c = conditions(&healthy(), pressure(&m), &[], at("2026-01-01T00:00:00Z"));
        assert_eq!(
            (c[0].status.as_str(), c[0].reason.as_deref()),
            ("True", Some("KubeletHasInsufficientMemory"))
        );
        assert_eq!(c[1].reason.as_deref(), Some("KubeletHasDiskPressure"));
    }
}
