//! What the planner is told about the world: the runtime's sandboxes and containers of one pod,
//! the images on the node, probe results and the reasons recorded for containers that could not
//! start. The executor maps CRI answers to these types; the planner never sees a CRI proto.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use k8s_openapi::jiff::Timestamp;

/// A pod sandbox's state, as CRI reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SandboxState {
    Ready,
    NotReady,
}

/// One pod sandbox the runtime has for the pod.
#[derive(Debug, Clone, PartialEq)]
pub struct ObservedSandbox {
    pub id: String,
    pub state: SandboxState,
    /// The sandbox's `metadata.attempt`.
    pub attempt: u32,
    /// The pod's primary IP in this sandbox (`None` for host-network sandboxes or before CNI ran).
    pub ip: Option<IpAddr>,
    /// Further IPs (the other family of a dual-stack pod).
    pub additional_ips: Vec<IpAddr>,
    /// Whether the sandbox shares the node's network namespace.
    pub host_network: bool,
    pub created_at: Timestamp,
}

/// A container's state, as CRI reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContainerState {
    Created,
    Running,
    Exited,
    Unknown,
}

/// One container (of any attempt) the runtime has for the pod.
#[derive(Debug, Clone, PartialEq)]
pub struct ObservedContainer {
    /// The runtime's container ID (without the `containerd://` prefix).
    pub id: String,
    /// The container's name in the pod spec.
    pub name: String,
    pub state: ContainerState,
    pub created_at: Timestamp,
    pub started_at: Option<Timestamp>,
    pub finished_at: Option<Timestamp>,
    pub exit_code: i32,
    /// The runtime's reason for an exited container (`Completed`, `Error`, `OOMKilled`, …).
    pub reason: String,
    pub message: String,
    /// The image as the runtime names it.
    pub image: String,
    /// The image's ID or digest reference (reported as `imageID`).
    pub image_ref: String,
    /// The restart count the kubelet stored on the container when creating it (its `attempt`).
    pub restart_count: i32,
    /// [`super::spec::container_hash`] of the spec the container was created from.
    pub hash: u64,
}

/// Everything the runtime has for one pod, plus the images present on the node.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ObservedPod {
    pub sandboxes: Vec<ObservedSandbox>,
    pub containers: Vec<ObservedContainer>,
    /// Images present on the node, by the reference the pod spec uses.
    pub images: BTreeSet<String>,
}

impl ObservedPod {
    /// The sandboxes, newest first (the order upstream's kubelet reasons in).
    pub fn sandboxes_newest_first(&self) -> Vec<&ObservedSandbox> {
        let mut s: Vec<&ObservedSandbox> = self.sandboxes.iter().collect();
        s.sort_by(|a, b| (b.created_at, b.attempt, &b.id).cmp(&(a.created_at, a.attempt, &a.id)));
        s
    }

    /// The containers, newest first.
    pub fn containers_newest_first(&self) -> Vec<&ObservedContainer> {
        let mut c: Vec<&ObservedContainer> = self.containers.iter().collect();
        c.sort_by(|a, b| {
            (b.created_at, b.restart_count, &b.id).cmp(&(a.created_at, a.restart_count, &a.id))
        });
        c
    }

    /// The newest container named `name` (upstream's `FindContainerStatusByName`).
    pub fn latest(&self, name: &str) -> Option<&ObservedContainer> {
        self.containers_newest_first()
            .into_iter()
            .find(|c| c.name == name)
    }

    /// The newest exited container named `name`.
    pub fn latest_exited(&self, name: &str) -> Option<&ObservedContainer> {
        self.containers_newest_first()
            .into_iter()
            .find(|c| c.name == name && c.state == ContainerState::Exited)
    }
}

/// A probe's last outcome. A probe that has not run yet has no entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeResult {
    Success,
    Failure,
}

/// The probe workers' latest results, by runtime container ID.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProbeResults {
    pub liveness: BTreeMap<String, ProbeResult>,
    pub readiness: BTreeMap<String, ProbeResult>,
    pub startup: BTreeMap<String, ProbeResult>,
}

/// Why a container is waiting: reported as its `state.waiting`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Waiting {
    pub reason: String,
    pub message: String,
}

impl Waiting {
    pub fn new(reason: &str, message: impl Into<String>) -> Self {
        Waiting {
            reason: reason.to_string(),
            message: message.into(),
        }
    }
}

/// The last reason each container (by name) failed to start (upstream's reason cache): the
/// executor records the planner's [`super::PodActions::waiting`] and its own start failures
/// (`ErrImagePull`, `CreateContainerConfigError`, `RunContainerError`) and forgets a name when
/// its container starts.
pub type Reasons = BTreeMap<String, Waiting>;
