//! Which pod to evict first (upstream's `rankMemoryPressure` and `rankDiskPressureFunc`):
//! pods whose usage of the starved resource exceeds their requests first, then lower
//! priority first, then the larger usage above requests first. Critical pods (static and
//! mirror pods, priority ≥ `system-cluster-critical`) are never chosen. Pure.

use k3rs_apimachinery::quantity::Quantity;
use k8s_openapi::api::core::v1::{Container, Pod};

use super::threshold::Signal;
use crate::kubelet::plan::resources::SYSTEM_CRITICAL_PRIORITY;
use crate::kubelet::static_pods::{is_mirror, is_static};

/// One container's usage.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ContainerUsage {
    pub name: String,
    /// Memory working set, bytes.
    pub memory: Option<u64>,
    /// The writable layer (bytes, inodes).
    pub rootfs_bytes: Option<u64>,
    pub rootfs_inodes: Option<u64>,
    /// The container's log files, bytes.
    pub logs_bytes: Option<u64>,
}

/// One pod's usage: its containers', its local volumes' (emptyDir) and its logs' inodes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PodUsage {
    pub containers: Vec<ContainerUsage>,
    pub volumes_bytes: u64,
    pub volumes_inodes: u64,
    pub logs_inodes: u64,
}

/// Which of a pod's filesystem usage counts against a signal (upstream's `fsStatsToMeasure`):
/// with a dedicated image filesystem, `imagefs` counts writable layers and `nodefs` logs and
/// volumes; on one shared filesystem everything counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FsScope {
    pub rootfs: bool,
    pub logs_and_volumes: bool,
}

impl FsScope {
    /// The scope of `signal`'s filesystem.
    pub fn of(signal: Signal, dedicated_imagefs: bool) -> FsScope {
        let image = matches!(signal, Signal::ImageFsAvailable | Signal::ImageFsInodesFree);
        FsScope {
            rootfs: !dedicated_imagefs || image,
            logs_and_volumes: !dedicated_imagefs || !image,
        }
    }
}

impl PodUsage {
    /// The working set of all containers.
    pub fn memory(&self) -> u64 {
        self.containers.iter().filter_map(|c| c.memory).sum()
    }

    /// Bytes (or inodes with `inodes`) the pod uses in `scope`.
    pub fn disk(&self, scope: FsScope, inodes: bool) -> u64 {
        let mut total = 0;
        for c in &self.containers {
            if scope.rootfs {
                total += if inodes {
                    c.rootfs_inodes
                } else {
                    c.rootfs_bytes
                }
                .unwrap_or(0);
            }
            if scope.logs_and_volumes && !inodes {
                total += c.logs_bytes.unwrap_or(0);
            }
        }
        if scope.logs_and_volumes {
            total += if inodes {
                self.volumes_inodes + self.logs_inodes
            } else {
                self.volumes_bytes
            };
        }
        total
    }
}

/// A container's request of `resource` in whole units (0 when none).
pub(super) fn request(c: &Container, resource: &str) -> i64 {
    c.resources
        .as_ref()
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get(resource))
        .map_or(0, |q| Quantity::of(q).value())
}

/// The pod's request of `resource` (the containers' sum, or an init container's when larger,
/// as upstream's `PodRequests`).
pub fn pod_request(pod: &Pod, resource: &str) -> i64 {
    let Some(spec) = pod.spec.as_ref() else {
        return 0;
    };
    let sum: i64 = spec.containers.iter().map(|c| request(c, resource)).sum();
    let init = spec
        .init_containers
        .iter()
        .flatten()
        .map(|c| request(c, resource))
        .max()
        .unwrap_or(0);
    sum.max(init)
}

/// The pod's priority (0 when unset).
pub fn priority(pod: &Pod) -> i32 {
    pod.spec.as_ref().and_then(|s| s.priority).unwrap_or(0)
}

/// Whether the kubelet must not evict the pod (upstream's `IsCriticalPod`).
pub fn is_critical(pod: &Pod) -> bool {
    is_static(pod) || is_mirror(pod) || priority(pod) >= SYSTEM_CRITICAL_PRIORITY
}

/// A pod as the ranking sees it.
#[derive(Debug, Clone, Copy)]
pub struct Candidate<'a> {
    pub pod: &'a Pod,
    /// `None`: no stats (counts as no usage).
    pub usage: Option<&'a PodUsage>,
}

/// The pods in eviction order for `signal` (critical pods left out).
pub fn rank<'a>(
    pods: &[Candidate<'a>],
    signal: Signal,
    dedicated_imagefs: bool,
) -> Vec<Candidate<'a>> {
    let resource = match signal {
        Signal::MemoryAvailable => "memory",
        _ => "ephemeral-storage",
    };
    let inodes = signal.resource() == "inodes";
    let scope = FsScope::of(signal, dedicated_imagefs);
    let usage = |c: &Candidate| -> i64 {
        let u = c.usage.map_or(0, |u| match signal {
            Signal::MemoryAvailable => u.memory(),
            _ => u.disk(scope, inodes),
        });
        i64::try_from(u).unwrap_or(i64::MAX)
    };
    // Inodes have no requests: everything used is above them.
    let req = |c: &Candidate| {
        if inodes {
            0
        } else {
            pod_request(c.pod, resource)
        }
    };
    let mut out: Vec<Candidate<'a>> = pods
        .iter()
        .filter(|c| !is_critical(c.pod))
        .copied()
        .collect();
    out.sort_by(|a, b| {
        let exceeds = |c: &Candidate| usage(c) > req(c);
        exceeds(b)
            .cmp(&exceeds(a))
            .then_with(|| priority(a.pod).cmp(&priority(b.pod)))
            .then_with(|| (usage(b) - req(b)).cmp(&(usage(a) - req(a))))
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str, priority: i32, memory_request: Option<&str>) -> Pod {
        let resources = match memory_request {
            Some(r) => json!({"requests": {"memory": r, "ephemeral-storage": r}}),
            None => json!({}),
        };
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "default", "uid": name},
            "spec": {"priority": priority,
                     "containers": [{"name": "c", "image": "i", "resources": resources}]}
        }))
        .unwrap()
    }

    fn usage(memory: u64, rootfs: u64, volumes: u64) -> PodUsage {
        PodUsage {
            containers: vec![ContainerUsage {
                name: "c".into(),
                memory: Some(memory),
                rootfs_bytes: Some(rootfs),
                rootfs_inodes: Some(rootfs / 100),
                logs_bytes: Some(10),
            }],
            volumes_bytes: volumes,
            volumes_inodes: 1,
            logs_inodes: 1,
        }
    }

    fn names(c: &[Candidate]) -> Vec<String> {
        c.iter()
            .map(|c| c.pod.metadata.name.clone().unwrap_or_default())
            .collect()
    }

    #[test]
    fn memory_ranks_by_exceeding_requests_then_priority_then_usage_above_requests() {
        let mi = 1024 * 1024;
        let within = pod("within", 0, Some("100Mi"));
        let low_prio_big = pod("low-big", -10, Some("10Mi"));
        let high_prio = pod("high", 1000, None);
        let small = pod("small", 0, None);
        let big = pod("big", 0, None);
        let critical = pod("critical", 2_000_000_000, None);
        let u_within = usage(50 * mi, 0, 0);
        let u_low = usage(20 * mi, 0, 0);
        let u_high = usage(500 * mi, 0, 0);
        let u_small = usage(30 * mi, 0, 0);
        let u_big = usage(300 * mi, 0, 0);
        let c = |p, u| Candidate {
            pod: p,
            usage: Some(u),
        };
        let pods = [
            c(&within, &u_within),
            c(&high_prio, &u_high),
            c(&small, &u_small),
            c(&critical, &u_high),
            c(&big, &u_big),
            c(&low_prio_big, &u_low),
        ];
        assert_eq!(
            names(&rank(&pods, Signal::MemoryAvailable, false)),
            ["low-big", "big", "small", "high", "within"]
        );
    }

    #[test]
    fn disk_ranks_by_local_usage_in_the_signals_scope() {
        let a = pod("a", 0, None);
        let b = pod("b", 0, None);
        let ua = usage(0, 1000, 0);
        let ub = usage(0, 10, 500);
        let pods = [
            Candidate {
                pod: &a,
                usage: Some(&ua),
            },
            Candidate {
                pod: &b,
                usage: Some(&ub),
            },
        ];
        assert_eq!(
            names(&rank(&pods, Signal::NodeFsAvailable, false)),
            ["a", "b"]
        );
        // A dedicated image filesystem: nodefs counts logs and volumes only.
        assert_eq!(
            names(&rank(&pods, Signal::NodeFsAvailable, true)),
            ["b", "a"]
        );
        assert_eq!(
            names(&rank(&pods, Signal::ImageFsAvailable, true)),
            ["a", "b"]
        );
        assert_eq!(
            ua.disk(FsScope::of(Signal::NodeFsAvailable, false), false),
            1010
        );
        assert_eq!(
            ub.disk(FsScope::of(Signal::NodeFsInodesFree, false), true),
            2
        );
        // Without stats a pod counts as using nothing.
        let none = [
            Candidate {
                pod: &a,
                usage: None,
            },
            Candidate {
                pod: &b,
                usage: Some(&ub),
            },
        ];
        assert_eq!(
            names(&rank(&none, Signal::NodeFsAvailable, false)),
            ["b", "a"]
        );
    }

    #[test]
    fn static_and_mirror_pods_are_critical() {
        let mut s = pod("s", 0, None);
        s.metadata.annotations = Some(
            [(
                "kubernetes.io/config.source".to_string(),
                "file".to_string(),
            )]
            .into(),
        );
        assert!(is_critical(&s));
        assert!(!is_critical(&pod("p", 0, None)));
        assert_eq!(pod_request(&pod("p", 0, Some("1Ki")), "memory"), 1024);
    }
}
