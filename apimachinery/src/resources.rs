//! Resource amounts as the scheduler counts them: milli-CPU, bytes of memory and ephemeral
//! storage, a pod count, and extended (scalar) resources; a pod's requests computed as
//! upstream's `resource.PodRequests` (containers and restartable init "sidecars" summed, the
//! largest init container step, plus overhead).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;

use crate::quantity::Quantity;

/// The CPU a container without a CPU request counts for in scoring (upstream
/// `DefaultMilliCPURequest`).
pub const DEFAULT_MILLI_CPU_REQUEST: i64 = 100;
/// The memory a container without a memory request counts for in scoring (200 MiB).
pub const DEFAULT_MEMORY_REQUEST: i64 = 200 * 1024 * 1024;

/// A set of resource amounts. `allowed_pods` is only meaningful for a node's allocatable.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Resources {
    /// CPU in millicores.
    pub milli_cpu: i64,
    /// Memory in bytes.
    pub memory: i64,
    /// Ephemeral storage in bytes.
    pub ephemeral_storage: i64,
    /// How many pods.
    pub allowed_pods: i64,
    /// Extended resources (`nvidia.com/gpu`, `hugepages-2Mi`, …), by name.
    pub scalar: BTreeMap<String, i64>,
}

impl Resources {
    /// Adds `other` (all fields but `allowed_pods`).
    pub fn add(&mut self, other: &Resources) {
        self.milli_cpu += other.milli_cpu;
        self.memory += other.memory;
        self.ephemeral_storage += other.ephemeral_storage;
        for (k, v) in &other.scalar {
            *self.scalar.entry(k.clone()).or_default() += v;
        }
    }

    /// Subtracts `other` (all fields but `allowed_pods`).
    pub fn sub(&mut self, other: &Resources) {
        self.milli_cpu -= other.milli_cpu;
        self.memory -= other.memory;
        self.ephemeral_storage -= other.ephemeral_storage;
        for (k, v) in &other.scalar {
            *self.scalar.entry(k.clone()).or_default() -= v;
        }
    }

    /// Each field the larger of the two.
    fn max_with(&mut self, other: &Resources) {
        self.milli_cpu = self.milli_cpu.max(other.milli_cpu);
        self.memory = self.memory.max(other.memory);
        self.ephemeral_storage = self.ephemeral_storage.max(other.ephemeral_storage);
        for (k, v) in &other.scalar {
            let e = self.scalar.entry(k.clone()).or_default();
            *e = (*e).max(*v);
        }
    }

    /// Whether nothing is requested.
    pub fn is_zero(&self) -> bool {
        self.milli_cpu == 0
            && self.memory == 0
            && self.ephemeral_storage == 0
            && self.scalar.values().all(|v| *v == 0)
    }

    /// Amounts from a resource list (`status.allocatable`, `resources.requests`, `overhead`).
    pub fn from_list(list: Option<&BTreeMap<String, ApiQuantity>>) -> Resources {
        let mut r = Resources::default();
        for (name, q) in list.into_iter().flatten() {
            match name.as_str() {
                "cpu" => r.milli_cpu = milli_value(&q.0).unwrap_or(0),
                "memory" => r.memory = value(&q.0).unwrap_or(0),
                "ephemeral-storage" => r.ephemeral_storage = value(&q.0).unwrap_or(0),
                "pods" => r.allowed_pods = value(&q.0).unwrap_or(0),
                n if is_scalar(n) => {
                    r.scalar.insert(n.to_string(), value(&q.0).unwrap_or(0));
                }
                _ => {}
            }
        }
        r
    }
}

/// Extended resources and hugepages: names with a domain (`example.com/foo`) outside
/// `kubernetes.io/`, or `hugepages-*`, or `attachable-volumes-*`.
fn is_scalar(name: &str) -> bool {
    name.starts_with("hugepages-")
        || name.starts_with("attachable-volumes-")
        || (name.contains('/') && !name.starts_with("kubernetes.io/"))
}

/// Which requests a pod counts with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counting {
    /// The requests as written (filtering, BalancedAllocation).
    Requested,
    /// CPU and memory requests a container leaves out count as 100m and 200 MiB (upstream's
    /// `NonZeroRequested`, used by LeastAllocated scoring).
    NonZero,
}

fn container_requests(c: &Container, counting: Counting) -> Resources {
    let mut r = Resources::from_list(c.resources.as_ref().and_then(|r| r.requests.as_ref()));
    if counting == Counting::NonZero {
        let requests = c.resources.as_ref().and_then(|r| r.requests.as_ref());
        if !requests.is_some_and(|m| m.contains_key("cpu")) {
            r.milli_cpu = DEFAULT_MILLI_CPU_REQUEST;
        }
        if !requests.is_some_and(|m| m.contains_key("memory")) {
            r.memory = DEFAULT_MEMORY_REQUEST;
        }
    }
    r
}

/// A pod's effective requests: max(sum of containers + all sidecars, each regular init
/// container plus the sidecars started before it) + overhead.
pub fn pod_requests(pod: &Pod, counting: Counting) -> Resources {
    let Some(spec) = pod.spec.as_ref() else {
        return Resources::default();
    };
    let mut sum = Resources::default();
    for c in &spec.containers {
        sum.add(&container_requests(c, counting));
    }
    let mut sidecars = Resources::default();
    let mut init_max = Resources::default();
    for c in spec.init_containers.iter().flatten() {
        let r = container_requests(c, counting);
        if c.restart_policy.as_deref() == Some("Always") {
            sidecars.add(&r);
            sum.add(&r);
            init_max.max_with(&sidecars);
        } else {
            let mut step = sidecars.clone();
            step.add(&r);
            init_max.max_with(&step);
        }
    }
    sum.max_with(&init_max);
    if let Some(overhead) = spec.overhead.as_ref() {
        sum.add(&Resources::from_list(Some(overhead)));
    }
    sum
}

/// A quantity's value rounded up to an integer (as `Quantity.Value()`).
pub fn value(s: &str) -> Option<i64> {
    Quantity::parse(s).map(Quantity::value)
}

/// A quantity's value in thousandths rounded up (as `Quantity.MilliValue()`).
pub fn milli_value(s: &str) -> Option<i64> {
    Quantity::parse(s).map(Quantity::milli_value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(spec: serde_json::Value) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": spec})).unwrap()
    }

    #[test]
    fn quantities() {
        assert_eq!(milli_value("500m"), Some(500));
        assert_eq!(milli_value("0.1"), Some(100));
        assert_eq!(milli_value("2"), Some(2000));
        assert_eq!(milli_value("1u"), Some(1));
        assert_eq!(value("1Gi"), Some(1 << 30));
        assert_eq!(value("128974848"), Some(128974848));
        assert_eq!(value("129e6"), Some(129000000));
        assert_eq!(value("1.5"), Some(2));
        assert_eq!(value("x"), None);
    }

    #[test]
    fn requests_take_the_larger_of_containers_and_init_steps_plus_overhead() {
        let p = pod(json!({
            "initContainers": [
                {"name": "side", "restartPolicy": "Always", "resources": {"requests": {"cpu": "100m"}}},
                {"name": "init", "resources": {"requests": {"cpu": "2", "memory": "1Gi"}}},
            ],
            "containers": [
                {"name": "a", "resources": {"requests": {"cpu": "500m", "memory": "100Mi", "example.com/gpu": "1"}}},
                {"name": "b", "resources": {"requests": {"cpu": "250m"}}},
            ],
            "overhead": {"cpu": "10m"},
        }));
        // Containers + sidecar: 850m, 100Mi; the init step: side (100m) + init (2) = 2100m,
        // 1Gi. Max per resource, then overhead 10m.
        let r = pod_requests(&p, Counting::Requested);
        assert_eq!(r.milli_cpu, 2110);
        assert_eq!(r.memory, 1 << 30);
        assert_eq!(r.scalar.get("example.com/gpu"), Some(&1));
        // Non-zero: b and the sidecar have no memory request (200Mi each): containers 500Mi,
        // the init step sidecar 200Mi + init 1Gi = 1224Mi, the larger.
        let nz = pod_requests(&p, Counting::NonZero);
        assert_eq!(nz.memory, (1024 + 200) << 20);
    }

    #[test]
    fn empty_pod_counts_defaults_only_when_non_zero() {
        let p = pod(json!({"containers": [{"name": "a"}]}));
        assert!(pod_requests(&p, Counting::Requested).is_zero());
        let nz = pod_requests(&p, Counting::NonZero);
        assert_eq!((nz.milli_cpu, nz.memory), (100, 200 << 20));
    }
}
