//! The kubelet's pod-lifecycle planner: pure functions from a desired pod and the observed
//! runtime state to the steps that reconcile them ([`compute_pod_actions`]) and to the pod's API
//! status ([`pod_status()`]), with upstream's kubelet semantics. No I/O, no clock, no tokio: the
//! executor reads the runtime (CRI), calls the planner, and carries the plan out.
//!
//! # What the executor does with each [`Action`], in the order given
//! - [`Action::RunPreStop`]: runs the container's preStop hook (exec or httpGet) for at most
//!   `timeout`, and remembers how long it took.
//! - [`Action::KillContainer`]: CRI `StopContainer` with a timeout of `grace` minus the preStop
//!   time, at least 2 s unless `grace` itself is shorter; records a `Killing` event with
//!   `message`. Failure: stop carrying out this plan (the next plan retries). Kills of a
//!   stopping pod come regular containers first, then sidecars from the last: the executor may
//!   stop the regular ones at once but a sidecar only after everything before it exited.
//! - [`Action::KillSandbox`]: CRI `StopPodSandbox` (CNI teardown happens there).
//! - [`Action::CreateSandbox`]: CRI `RunPodSandbox` with [`sandbox_spec()`] for this attempt
//!   (network set up by CNI); on failure stop carrying out this plan.
//! - [`Action::PullImage`]: CRI `PullImage`. On failure: `Backoffs::image_pull.next(key, now,
//!   now)` with [`image_backoff_key`], record `ErrImagePull` (with the error as message) in the
//!   [`Reasons`] for the container, and skip its `StartContainer` and `RunPostStart`.
//! - [`Action::StartContainer`]: builds the container config (command, env, mounts, resources:
//!   from [`container_env`] and [`container_spec()`], which carries [`spec::container_hash`] and
//!   `attempt` in its labels), CRI `CreateContainer` + `StartContainer`. Success: forget the
//!   container's entry in the [`Reasons`]. Failure: record `CreateContainerConfigError` /
//!   `CreateContainerError` / `RunContainerError`; if it was a regular (not restartable) init
//!   container, stop carrying out the plan's starts.
//! - [`Action::RunPostStart`]: runs the hook in the container just started; on failure stops
//!   it (reason `FailedPostStartHook`) with the pod's grace period.
//! - [`Action::RemoveContainer`] / [`Action::RemoveSandbox`]: CRI `RemoveContainer` /
//!   `RemovePodSandbox`.
//! - [`Action::FinishDeletion`]: writes the final status ([`pod_status()`] passed through
//!   [`terminated_status`]) and deletes the pod object with grace period 0 and the UID as
//!   precondition.
//!
//! Every minute or so the executor also removes what [`garbage`] names (old dead containers).
//!
//! After carrying out a plan, the executor merges [`actions::PodActions::waiting`] into its
//! [`Reasons`], writes [`pod_status()`] if it changed, and plans again when the runtime, the pod,
//! a probe result or a back-off deadline changes — never before the previous plan was carried
//! out (planning records crash-loop back-off).

mod actions;
mod backoff;
mod compute;
mod conditions;
mod container_spec;
mod container_status;
mod dns;
mod downward;
mod env;
mod expand;
mod gc;
mod image;
mod init_containers;
pub(crate) mod labels;
mod lifecycle;
mod observed;
mod phase;
mod pod_status;
mod qos;
pub(crate) mod resources;
mod sandbox_spec;
mod service_env;
pub(crate) mod spec;
mod terminate;

pub use actions::Action;
pub use backoff::go_duration;
pub use compute::{compute_pod_actions, Backoffs};
pub use container_spec::{container_spec, ContainerSpec};
pub use container_status::StatusInputs;
pub use dns::{parse_resolv_conf, NodeDns};
pub use downward::{field_value, resource_value, Allocatable, DownwardError};
pub use env::{container_env, EnvInputs};
pub use gc::garbage;
pub use image::{image_backoff_key, pull_policy, PullPolicy};
pub use k3rs_apimachinery::quantity::Quantity;
pub use labels::read_container_labels;
pub use observed::{
    ContainerState, ObservedContainer, ObservedPod, ObservedSandbox, ProbeResult, ProbeResults,
    Reasons, SandboxState, Waiting,
};
pub use pod_status::pod_status;
pub use qos::qos_class;
pub use sandbox_spec::{sandbox_spec, SandboxSpec};
pub use terminate::terminated_status;
