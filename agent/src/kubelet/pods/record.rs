//! The executor's Events, with upstream's reasons and messages: image pulls (`Pulling`,
//! `Pulled`, `Failed`, `BackOff`), container starts (`Created`, `Started`, `Failed`), stops
//! (`Killing`), back-offs (`BackOff`), hooks (`FailedPostStartHook`, `FailedPreStopHook`) and
//! sandboxes (`SandboxChanged`, `FailedCreatePodSandBox`); and running a container's hooks.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Container, LifecycleHandler, Pod};

use super::hooks::{pod_label, run_hook, HookTarget};
use super::sync::{find_container, Executor};
use crate::kubelet::events::{NORMAL, WARNING};
use crate::kubelet::plan::{go_duration, Waiting};

fn spec<'a>(pod: &'a Pod, name: &str) -> Option<&'a Container> {
    find_container(pod, name, false).or_else(|| find_container(pod, name, true))
}

fn image(pod: &Pod, name: &str) -> String {
    spec(pod, name)
        .and_then(|c| c.image.clone())
        .unwrap_or_default()
}

impl Executor {
    pub(super) fn warn(&self, pod: &Pod, container: &str, reason: &str, message: String) {
        self.events
            .container(pod, container, WARNING, reason, message);
    }

    /// `Killing`: the planner's message, or `Stopping container <name>`.
    pub(super) fn killing(&self, pod: &Pod, container: &str, message: &str) {
        let message = if message.is_empty() {
            format!("Stopping container {container}")
        } else {
            message.to_string()
        };
        self.events
            .container(pod, container, NORMAL, "Killing", message);
    }

    /// `SandboxChanged` when a sandbox is replaced (not for the pod's first).
    pub(super) fn sandbox_changed(&self, pod: &Pod, attempt: u32) {
        if attempt > 0 {
            let message = "Pod sandbox changed, it will be killed and re-created.";
            self.events
                .pod(pod, NORMAL, "SandboxChanged", message.to_string());
        }
    }

    /// `FailedCreatePodSandBox`; the sync's error.
    pub(super) fn sandbox_failed(
        &self,
        pod: &Pod,
        e: crate::cri::error::Error,
    ) -> super::sync::StepError {
        let message = format!("Failed to create pod sandbox: {e}");
        self.events
            .pod(pod, WARNING, "FailedCreatePodSandBox", message);
        super::sync::StepError::CreateSandbox(e)
    }

    /// `Pulling`; when the pull started.
    pub(super) fn pulling(&self, pod: &Pod, container: &str, image: &str) -> Instant {
        let message = format!("Pulling image {image:?}");
        self.events
            .container(pod, container, NORMAL, "Pulling", message);
        Instant::now()
    }

    /// `Pulled`, or `Failed` twice (the pull's error, then `Error: ErrImagePull`).
    pub(super) fn pull_done<T, E: std::fmt::Display>(
        &self,
        pod: &Pod,
        container: &str,
        image: &str,
        started: Instant,
        result: &Result<T, E>,
    ) {
        match result {
            Ok(_) => {
                let took = go_duration(round_ms(started.elapsed()));
                let message = format!(
                    "Successfully pulled image {image:?} in {took} ({took} including waiting)"
                );
                self.events
                    .container(pod, container, NORMAL, "Pulled", message);
            }
            Err(e) => {
                let message = format!("Failed to pull image {image:?}: {e}");
                self.warn(pod, container, "Failed", message);
                self.warn(pod, container, "Failed", "Error: ErrImagePull".into());
            }
        }
    }

    /// After a start: `Pulled` (already present) unless this sync pulled the image, then
    /// `Created` and `Started`, or `Failed` with the error.
    pub(super) fn started(&self, pod: &Pod, c: &Container, pulled: bool, r: &Result<(), Waiting>) {
        let name = c.name.as_str();
        if !pulled {
            let image = image(pod, name);
            let message = format!("Container image {image:?} already present on machine");
            self.events.container(pod, name, NORMAL, "Pulled", message);
        }
        let created = || {
            let message = format!("Created container: {name}");
            self.events.container(pod, name, NORMAL, "Created", message);
        };
        match r {
            Ok(()) => {
                created();
                let message = format!("Started container {name}");
                self.events.container(pod, name, NORMAL, "Started", message);
            }
            Err(w) => {
                if w.reason == "RunContainerError" {
                    created();
                }
                self.warn(pod, name, "Failed", format!("Error: {}", w.message));
            }
        }
    }

    /// `BackOff` (and `Failed`) for containers the plan holds back.
    pub(super) fn waiting(&self, pod: &Pod, name: &str, w: &Waiting) {
        match w.reason.as_str() {
            "CrashLoopBackOff" => {
                let message = format!(
                    "Back-off restarting failed container {name} in pod {}",
                    pod_label(pod)
                );
                self.warn(pod, name, "BackOff", message);
            }
            "ImagePullBackOff" => {
                let message = format!("Back-off pulling image {:?}", image(pod, name));
                self.events.container(pod, name, NORMAL, "BackOff", message);
                self.warn(pod, name, "Failed", "Error: ImagePullBackOff".into());
            }
            "ErrImageNeverPull" => self.warn(pod, name, "ErrImageNeverPull", w.message.clone()),
            _ => {}
        }
    }

    /// Runs a container's hook (none: nothing to do).
    pub(super) async fn hook(
        &self,
        pod: &Pod,
        name: &str,
        container_id: &str,
        pod_ip: &str,
        handler: Option<&LifecycleHandler>,
        timeout: Duration,
    ) -> Result<(), super::hooks::HookError> {
        let (Some(handler), Some(container)) = (handler, spec(pod, name)) else {
            return Ok(());
        };
        let target = HookTarget {
            runtime: &*self.runtime,
            pod,
            container,
            container_id,
            pod_ip,
        };
        run_hook(&target, handler, timeout).await
    }
}

fn round_ms(d: Duration) -> Duration {
    Duration::from_millis(d.as_millis() as u64)
}
