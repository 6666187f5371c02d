//! A container's Linux resources as the kubelet hands them to the runtime (upstream's
//! `calculateLinuxResources`, `MilliCPUToShares`, `milliCPUToQuota` and the OOM score policy of
//! `qos.GetContainerOOMScoreAdjust`).

use k8s_openapi::api::core::v1::{Container, Pod};

use super::qos::{compute_qos, QosClass};
use k3rs_apimachinery::quantity::Quantity;

/// cgroup v1 `cpu.shares` bounds and the shares of one CPU.
pub const MIN_SHARES: i64 = 2;
pub const MAX_SHARES: i64 = 262_144;
pub const SHARES_PER_CPU: i64 = 1024;
/// The CFS period (100 ms, in µs) and the smallest quota (1 ms).
pub const QUOTA_PERIOD: i64 = 100_000;
pub const MIN_QUOTA_PERIOD: i64 = 1000;

/// The OOM score adjustments by class.
pub const GUARANTEED_OOM_SCORE_ADJ: i64 = -997;
pub const BEST_EFFORT_OOM_SCORE_ADJ: i64 = 1000;

/// The priority from which a pod counts as critical (`SystemCriticalPriority`).
pub const SYSTEM_CRITICAL_PRIORITY: i32 = 2_000_000_000;

/// `cpu.shares` for a CPU request in millicores: 2 for none, at most 262144.
pub fn milli_cpu_to_shares(milli_cpu: i64) -> i64 {
    if milli_cpu == 0 {
        return MIN_SHARES;
    }
    (milli_cpu * SHARES_PER_CPU / 1000).clamp(MIN_SHARES, MAX_SHARES)
}

/// The CFS quota for a CPU limit in millicores over `period` µs: 0 (unlimited) for none, at
/// least 1 ms.
pub fn milli_cpu_to_quota(milli_cpu: i64, period: i64) -> i64 {
    if milli_cpu == 0 {
        return 0;
    }
    (milli_cpu * period / 1000).max(MIN_QUOTA_PERIOD)
}

/// What the runtime gets as the container's `LinuxContainerResources`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinuxResources {
    pub cpu_shares: i64,
    pub cpu_quota: i64,
    pub cpu_period: i64,
    /// 0: no limit.
    pub memory_limit_in_bytes: i64,
    pub oom_score_adj: i64,
}

fn amount(c: &Container, limits: bool, resource: &str) -> Quantity {
    let r = c.resources.as_ref();
    let list = if limits {
        r.and_then(|r| r.limits.as_ref())
    } else {
        r.and_then(|r| r.requests.as_ref())
    };
    list.and_then(|l| l.get(resource))
        .map(Quantity::of)
        .unwrap_or_default()
}

/// The resources of `c` in `pod` on a node with `memory_capacity` bytes. A CPU request
/// defaults to the limit; the quota follows the limit over a 100 ms period.
pub fn linux_resources(pod: &Pod, c: &Container, memory_capacity: i64) -> LinuxResources {
    let cpu_request = amount(c, false, "cpu");
    let cpu_limit = amount(c, true, "cpu");
    let shares_from = if cpu_request.is_zero() && !cpu_limit.is_zero() {
        cpu_limit
    } else {
        cpu_request
    };
    LinuxResources {
        cpu_shares: milli_cpu_to_shares(shares_from.milli_value()),
        cpu_quota: milli_cpu_to_quota(cpu_limit.milli_value(), QUOTA_PERIOD),
        cpu_period: QUOTA_PERIOD,
        memory_limit_in_bytes: amount(c, true, "memory").value(),
        oom_score_adj: oom_score_adj(pod, c, memory_capacity),
    }
}

fn annotation<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

/// A static or mirror pod, or one with system-critical priority (upstream's `IsCriticalPod`).
pub fn is_critical(pod: &Pod) -> bool {
    let static_pod = annotation(pod, "kubernetes.io/config.source").is_some_and(|s| s != "api");
    let mirror = annotation(pod, "kubernetes.io/config.mirror").is_some();
    let priority = pod.spec.as_ref().and_then(|s| s.priority);
    static_pod || mirror || priority.is_some_and(|p| p >= SYSTEM_CRITICAL_PRIORITY)
}

/// The container's `oom_score_adj`: -997 for node-critical pods and Guaranteed ones, 1000 for
/// BestEffort; Burstable ones `1000 - 1000 * memory request / capacity`, kept within 3..=999.
pub fn oom_score_adj(pod: &Pod, c: &Container, memory_capacity: i64) -> i64 {
    let node_critical = is_critical(pod)
        && pod
            .spec
            .as_ref()
            .and_then(|s| s.priority_class_name.as_deref())
            == Some("system-node-critical");
    if node_critical {
        return GUARANTEED_OOM_SCORE_ADJ;
    }
    match compute_qos(pod) {
        QosClass::Guaranteed => return GUARANTEED_OOM_SCORE_ADJ,
        QosClass::BestEffort => return BEST_EFFORT_OOM_SCORE_ADJ,
        QosClass::Burstable => {}
    }
    let request = i128::from(amount(c, false, "memory").value());
    let capacity = i128::from(memory_capacity.max(1));
    let adj = (1000 - 1000 * request / capacity) as i64;
    if adj < 1000 + GUARANTEED_OOM_SCORE_ADJ {
        return 1000 + GUARANTEED_OOM_SCORE_ADJ;
    }
    if adj == BEST_EFFORT_OOM_SCORE_ADJ {
        return adj - 1;
    }
    adj
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubelet::plan::spec::containers;
    use crate::kubelet::plan::spec::tests::pod;
    use serde_json::{json, Value};

    const GI: i64 = 1 << 30;

    fn with(resources: Value) -> Pod {
        pod(json!({"spec": {"containers": [{"name": "c", "image": "i", "resources": resources}]}}))
    }

    fn res(p: &Pod) -> LinuxResources {
        linux_resources(p, &containers(p)[0], 8 * GI)
    }

    #[test]
    fn shares_and_quota_formulas() {
        assert_eq!(milli_cpu_to_shares(0), 2);
        assert_eq!(milli_cpu_to_shares(1), 2);
        assert_eq!(milli_cpu_to_shares(100), 102);
        assert_eq!(milli_cpu_to_shares(250), 256);
        assert_eq!(milli_cpu_to_shares(1000), 1024);
        assert_eq!(milli_cpu_to_shares(1_000_000), 262_144);
        assert_eq!(milli_cpu_to_quota(0, QUOTA_PERIOD), 0);
        assert_eq!(milli_cpu_to_quota(5, QUOTA_PERIOD), 1000);
        assert_eq!(milli_cpu_to_quota(250, QUOTA_PERIOD), 25_000);
        assert_eq!(milli_cpu_to_quota(1500, QUOTA_PERIOD), 150_000);
    }

    #[test]
    fn best_effort_gets_minimal_shares_no_limits_and_oom_1000() {
        assert_eq!(
            res(&with(json!({}))),
            LinuxResources {
                cpu_shares: 2,
                cpu_quota: 0,
                cpu_period: 100_000,
                memory_limit_in_bytes: 0,
                oom_score_adj: 1000
            }
        );
    }

    #[test]
    fn guaranteed_gets_its_limits_and_minus_997() {
        let p = with(json!({"requests": {"cpu": "500m", "memory": "256Mi"},
            "limits": {"cpu": "500m", "memory": "256Mi"}}));
        assert_eq!(
            res(&p),
            LinuxResources {
                cpu_shares: 512,
                cpu_quota: 50_000,
                cpu_period: 100_000,
                memory_limit_in_bytes: 268_435_456,
                oom_score_adj: -997
            }
        );
    }

    #[test]
    fn burstable_scales_oom_score_by_memory_request() {
        // 1 GiB of 8 GiB: 1000 - 125.
        let p = with(json!({"requests": {"memory": "1Gi"}}));
        assert_eq!(res(&p).oom_score_adj, 875);
        // A CPU limit alone: shares default from it.
        let p = with(json!({"limits": {"cpu": "2"}}));
        let r = res(&p);
        assert_eq!(
            (r.cpu_shares, r.cpu_quota, r.oom_score_adj),
            (2048, 200_000, 999)
        );
        // A request above capacity is floored at 3.
        let p = with(json!({"requests": {"memory": "16Gi"}}));
        assert_eq!(res(&p).oom_score_adj, 3);
    }

    #[test]
    fn node_critical_pods_are_protected() {
        let mut v = json!({"spec": {"priority": 2_000_001_000, "priorityClassName": "system-node-critical"}});
        let p = pod(v.clone());
        assert!(is_critical(&p));
        assert_eq!(res(&p).oom_score_adj, -997);
        // Critical but not node-critical: by class.
        v["spec"]["priorityClassName"] = json!("system-cluster-critical");
        assert_eq!(res(&pod(v)).oom_score_adj, 1000);
        let mirror =
            pod(json!({"metadata": {"annotations": {"kubernetes.io/config.mirror": "x"}}}));
        assert!(is_critical(&mirror));
        assert!(!is_critical(&pod(json!({}))));
    }
}
