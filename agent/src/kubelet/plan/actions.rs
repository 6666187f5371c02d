//! The planner's output: plain data the executor carries out in order.

use std::collections::BTreeMap;
use std::time::Duration;

use super::observed::Waiting;

/// Why a container is stopped (upstream's `containerKillReason`; reported in events).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KillReason {
    /// The liveness probe failed.
    LivenessProbe,
    /// The startup probe failed.
    StartupProbe,
    /// The runtime reports the container's state as unknown: it is stopped before a restart.
    Unknown,
    /// The container's spec (image) changed.
    SpecChanged,
    /// The pod is stopping (deleted, terminal, or its sandbox must be recreated).
    PodStopping,
}

/// One step for the executor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Run the container's preStop hook, for at most `timeout`, before the next
    /// [`Action::KillContainer`] of the same container.
    RunPreStop {
        id: String,
        name: String,
        timeout: Duration,
    },
    /// Stop a container: SIGTERM, then SIGKILL after `grace` (less the time its preStop hook
    /// took, but at least 2 s unless `grace` itself is shorter). `message` goes into the
    /// `Killing` event.
    KillContainer {
        id: String,
        name: String,
        grace: Duration,
        reason: KillReason,
        message: String,
    },
    /// Stop a pod sandbox (tears down its network); its containers stay for their logs.
    KillSandbox { id: String },
    /// Create the pod sandbox (with CNI networking unless host network) with this attempt.
    CreateSandbox { attempt: u32 },
    /// Pull the image of the container that the next [`Action::StartContainer`] of that name
    /// starts. On failure the executor records the image back-off and `ErrImagePull` for the
    /// container and skips its start.
    PullImage { container: String, image: String },
    /// Create and start a container (spec'd in `initContainers` when `init`) in the current
    /// sandbox, with this `attempt` (its restart count).
    StartContainer {
        name: String,
        init: bool,
        attempt: u32,
    },
    /// Run the postStart hook of the container just started; if it fails, stop the container
    /// (reason `FailedPostStartHook`).
    RunPostStart { name: String },
    /// Remove a stopped container.
    RemoveContainer { id: String },
    /// Remove a stopped sandbox.
    RemoveSandbox { id: String },
    /// Everything of a deleted pod has stopped: write its final status and delete the API
    /// object with grace period 0 and this UID as precondition.
    FinishDeletion { uid: String },
}

/// What to do for one pod now.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodActions {
    /// The steps, in order. Empty: the pod is as it should be.
    pub actions: Vec<Action>,
    /// Containers the plan holds back, by name, with the reason to report
    /// (`CrashLoopBackOff`, `ImagePullBackOff`, `ErrImageNeverPull`).
    pub waiting: BTreeMap<String, Waiting>,
}
