//! An in-memory CRI runtime for unit tests: it keeps sandboxes, containers and images the way
//! a runtime would (ids, states, "not found" errors), records every call in order, and fails a
//! chosen call on demand.
//!
//! Assumptions: containers run until stopped (nothing exits by itself unless the test calls
//! [`FakeRuntime::exit_container`]); ExecSync answers with what [`FakeRuntime::set_exec_reply`]
//! set (default: exit 0, no output).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Mutex, MutexGuard};

use futures::future::BoxFuture;

use super::pb;
use super::{Error, ImageService, Result, RuntimeService};

/// One recorded call, with the arguments that identify what it acted on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    Version,
    Status,
    RunPodSandbox {
        namespace: String,
        name: String,
        attempt: u32,
    },
    StopPodSandbox(String),
    RemovePodSandbox(String),
    PodSandboxStatus(String),
    ListPodSandbox,
    CreateContainer {
        pod_sandbox_id: String,
        name: String,
        image: String,
    },
    StartContainer(String),
    StopContainer {
        container_id: String,
        timeout_secs: i64,
    },
    RemoveContainer(String),
    ListContainers,
    ContainerStatus(String),
    ReopenContainerLog(String),
    ExecSync {
        container_id: String,
        cmd: Vec<String>,
    },
    ListImages,
    ImageStatus(String),
    PullImage(String),
    RemoveImage(String),
}

#[derive(Debug, Default)]
struct State {
    calls: Vec<Call>,
    next_id: u64,
    clock: i64,
    sandboxes: BTreeMap<String, pb::PodSandboxStatus>,
    containers: BTreeMap<String, (String, pb::ContainerStatus)>,
    images: BTreeSet<String>,
    failures: BTreeMap<&'static str, tonic::Status>,
    exec_reply: pb::ExecSyncResponse,
    pull_auths: Vec<Option<pb::AuthConfig>>,
}

/// The fake runtime (both services).
#[derive(Debug, Default)]
pub struct FakeRuntime {
    state: Mutex<State>,
}

const SANDBOX_READY: i32 = pb::PodSandboxState::SandboxReady as i32;
const SANDBOX_NOTREADY: i32 = pb::PodSandboxState::SandboxNotready as i32;
const CREATED: i32 = pb::ContainerState::ContainerCreated as i32;
const RUNNING: i32 = pb::ContainerState::ContainerRunning as i32;
const EXITED: i32 = pb::ContainerState::ContainerExited as i32;

impl FakeRuntime {
    /// A fake whose clock starts at the current time (nanoseconds since the epoch, one more
    /// per call), so its timestamps are recent, like a real runtime's.
    pub fn new() -> FakeRuntime {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as i64)
            .unwrap_or_default();
        let fake = FakeRuntime::default();
        fake.lock().clock = now;
        fake
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Every call so far, in order.
    pub fn calls(&self) -> Vec<Call> {
        self.lock().calls.clone()
    }

    /// Forgets the recorded calls (state stays).
    pub fn clear_calls(&self) {
        self.lock().calls.clear();
    }

    /// The next call of `rpc` (e.g. `"StartContainer"`) fails with `status`; once.
    pub fn fail_next(&self, rpc: &'static str, status: tonic::Status) {
        self.lock().failures.insert(rpc, status);
    }

    /// The credentials of every PullImage call so far, in order.
    pub fn pull_auths(&self) -> Vec<Option<pb::AuthConfig>> {
        self.lock().pull_auths.clone()
    }

    /// Makes `image` present, as if pulled or imported.
    pub fn add_image(&self, image: &str) {
        self.lock().images.insert(image.to_string());
    }

    /// What the next ExecSync calls answer.
    pub fn set_exec_reply(&self, reply: pb::ExecSyncResponse) {
        self.lock().exec_reply = reply;
    }

    /// The container exits by itself with `exit_code`.
    pub fn exit_container(&self, container_id: &str, exit_code: i32) {
        let mut s = self.lock();
        s.clock += 1;
        let now = s.clock;
        if let Some((_, c)) = s.containers.get_mut(container_id) {
            c.state = EXITED;
            c.exit_code = exit_code;
            c.finished_at = now;
        }
    }

    /// Records `call`, then fails if a failure was set for `rpc`.
    fn enter(&self, rpc: &'static str, call: Call) -> Result<MutexGuard<'_, State>> {
        let mut s = self.lock();
        s.calls.push(call);
        s.clock += 1;
        match s.failures.remove(rpc) {
            Some(status) => Err(Error::rpc(rpc, status)),
            None => Ok(s),
        }
    }
}

fn not_found(rpc: &'static str, what: &str, id: &str) -> Error {
    Error::rpc(
        rpc,
        tonic::Status::not_found(format!("{what} \"{id}\" not found")),
    )
}

fn ready<T: Send + 'static>(v: Result<T>) -> BoxFuture<'static, Result<T>> {
    Box::pin(std::future::ready(v))
}

fn matches_labels(
    labels: &std::collections::HashMap<String, String>,
    selector: &std::collections::HashMap<String, String>,
) -> bool {
    selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

impl RuntimeService for FakeRuntime {
    fn version(&self) -> BoxFuture<'_, Result<pb::VersionResponse>> {
        ready(
            self.enter("Version", Call::Version)
                .map(|_| pb::VersionResponse {
                    version: "0.1.0".into(),
                    runtime_name: "fake".into(),
                    runtime_version: "0.0.0".into(),
                    runtime_api_version: "v1".into(),
                }),
        )
    }

    fn status(&self, _verbose: bool) -> BoxFuture<'_, Result<pb::StatusResponse>> {
        let condition = |t: &str| pb::RuntimeCondition {
            r#type: t.into(),
            status: true,
            ..Default::default()
        };
        ready(
            self.enter("Status", Call::Status)
                .map(|_| pb::StatusResponse {
                    status: Some(pb::RuntimeStatus {
                        conditions: vec![condition("RuntimeReady"), condition("NetworkReady")],
                    }),
                    info: Default::default(),
                }),
        )
    }

    fn run_pod_sandbox(
        &self,
        config: pb::PodSandboxConfig,
        runtime_handler: String,
    ) -> BoxFuture<'_, Result<String>> {
        let meta = config.metadata.clone().unwrap_or_default();
        let call = Call::RunPodSandbox {
            namespace: meta.namespace.clone(),
            name: meta.name.clone(),
            attempt: meta.attempt,
        };
        ready(self.enter("RunPodSandbox", call).map(|mut s| {
            s.next_id += 1;
            let id = format!("sandbox-{}", s.next_id);
            let status = pb::PodSandboxStatus {
                id: id.clone(),
                metadata: Some(meta),
                state: SANDBOX_READY,
                created_at: s.clock,
                network: Some(pb::PodSandboxNetworkStatus {
                    ip: format!("10.244.0.{}", s.next_id % 250 + 2),
                    additional_ips: Vec::new(),
                }),
                linux: None,
                labels: config.labels,
                annotations: config.annotations,
                runtime_handler,
            };
            s.sandboxes.insert(id.clone(), status);
            id
        }))
    }

    fn stop_pod_sandbox(&self, pod_sandbox_id: String) -> BoxFuture<'_, Result<()>> {
        let call = Call::StopPodSandbox(pod_sandbox_id.clone());
        ready(self.enter("StopPodSandbox", call).and_then(|mut s| {
            let now = s.clock;
            let Some(sandbox) = s.sandboxes.get_mut(&pod_sandbox_id) else {
                return Err(not_found("StopPodSandbox", "sandbox", &pod_sandbox_id));
            };
            sandbox.state = SANDBOX_NOTREADY;
            sandbox.network = None;
            for (sb, c) in s.containers.values_mut() {
                if *sb == pod_sandbox_id && c.state != EXITED {
                    c.state = EXITED;
                    c.exit_code = 137;
                    c.finished_at = now;
                }
            }
            Ok(())
        }))
    }

    fn remove_pod_sandbox(&self, pod_sandbox_id: String) -> BoxFuture<'_, Result<()>> {
        let call = Call::RemovePodSandbox(pod_sandbox_id.clone());
        ready(self.enter("RemovePodSandbox", call).map(|mut s| {
            // Like containerd: removing what is gone already succeeds.
            s.sandboxes.remove(&pod_sandbox_id);
            s.containers.retain(|_, (sb, _)| *sb != pod_sandbox_id);
        }))
    }

    fn pod_sandbox_status(
        &self,
        pod_sandbox_id: String,
        _verbose: bool,
    ) -> BoxFuture<'_, Result<pb::PodSandboxStatusResponse>> {
        let call = Call::PodSandboxStatus(pod_sandbox_id.clone());
        ready(self.enter("PodSandboxStatus", call).and_then(|s| {
            match s.sandboxes.get(&pod_sandbox_id) {
                Some(status) => Ok(pb::PodSandboxStatusResponse {
                    status: Some(status.clone()),
                    info: Default::default(),
                }),
                None => Err(not_found("PodSandboxStatus", "sandbox", &pod_sandbox_id)),
            }
        }))
    }

    fn list_pod_sandbox(
        &self,
        filter: Option<pb::PodSandboxFilter>,
    ) -> BoxFuture<'_, Result<Vec<pb::PodSandbox>>> {
        let f = filter.unwrap_or_default();
        ready(self.enter("ListPodSandbox", Call::ListPodSandbox).map(|s| {
            s.sandboxes
                .values()
                .filter(|sb| f.id.is_empty() || sb.id == f.id)
                .filter(|sb| f.state.as_ref().is_none_or(|v| v.state == sb.state))
                .filter(|sb| matches_labels(&sb.labels, &f.label_selector))
                .map(|sb| pb::PodSandbox {
                    id: sb.id.clone(),
                    metadata: sb.metadata.clone(),
                    state: sb.state,
                    created_at: sb.created_at,
                    labels: sb.labels.clone(),
                    annotations: sb.annotations.clone(),
                    runtime_handler: sb.runtime_handler.clone(),
                })
                .collect()
        }))
    }

    fn create_container(
        &self,
        pod_sandbox_id: String,
        config: pb::ContainerConfig,
        sandbox_config: pb::PodSandboxConfig,
    ) -> BoxFuture<'_, Result<String>> {
        // Like containerd: the status names the file under the sandbox's log directory.
        let log_path = std::path::Path::new(&sandbox_config.log_directory)
            .join(&config.log_path)
            .to_string_lossy()
            .into_owned();
        let meta = config.metadata.clone().unwrap_or_default();
        let image = config.image.clone().unwrap_or_default();
        let call = Call::CreateContainer {
            pod_sandbox_id: pod_sandbox_id.clone(),
            name: meta.name.clone(),
            image: image.image.clone(),
        };
        ready(self.enter("CreateContainer", call).and_then(|mut s| {
            match s.sandboxes.get(&pod_sandbox_id) {
                Some(sb) if sb.state == SANDBOX_READY => {}
                Some(_) => {
                    return Err(Error::rpc(
                        "CreateContainer",
                        tonic::Status::failed_precondition("sandbox is not ready"),
                    ))
                }
                None => return Err(not_found("CreateContainer", "sandbox", &pod_sandbox_id)),
            }
            if !s.images.contains(&image.image) {
                return Err(not_found("CreateContainer", "image", &image.image));
            }
            s.next_id += 1;
            let id = format!("container-{}", s.next_id);
            let status = pb::ContainerStatus {
                id: id.clone(),
                metadata: Some(meta),
                state: CREATED,
                created_at: s.clock,
                image: Some(image.clone()),
                image_ref: image.image,
                labels: config.labels,
                annotations: config.annotations,
                log_path,
                ..Default::default()
            };
            s.containers.insert(id.clone(), (pod_sandbox_id, status));
            Ok(id)
        }))
    }

    fn start_container(&self, container_id: String) -> BoxFuture<'_, Result<()>> {
        let call = Call::StartContainer(container_id.clone());
        ready(self.enter("StartContainer", call).and_then(|mut s| {
            let now = s.clock;
            match s.containers.get_mut(&container_id) {
                Some((_, c)) if c.state == CREATED => {
                    c.state = RUNNING;
                    c.started_at = now;
                    Ok(())
                }
                Some(_) => Err(Error::rpc(
                    "StartContainer",
                    tonic::Status::unknown(format!(
                        "container \"{container_id}\" is not in created state"
                    )),
                )),
                None => Err(not_found("StartContainer", "container", &container_id)),
            }
        }))
    }

    fn stop_container(&self, container_id: String, timeout_secs: i64) -> BoxFuture<'_, Result<()>> {
        let call = Call::StopContainer {
            container_id: container_id.clone(),
            timeout_secs,
        };
        ready(self.enter("StopContainer", call).and_then(|mut s| {
            let now = s.clock;
            match s.containers.get_mut(&container_id) {
                Some((_, c)) => {
                    if c.state == RUNNING {
                        c.state = EXITED;
                        c.exit_code = 143;
                        c.finished_at = now;
                    }
                    Ok(())
                }
                None => Err(not_found("StopContainer", "container", &container_id)),
            }
        }))
    }

    fn remove_container(&self, container_id: String) -> BoxFuture<'_, Result<()>> {
        let call = Call::RemoveContainer(container_id.clone());
        ready(self.enter("RemoveContainer", call).map(|mut s| {
            s.containers.remove(&container_id);
        }))
    }

    fn list_containers(
        &self,
        filter: Option<pb::ContainerFilter>,
    ) -> BoxFuture<'_, Result<Vec<pb::Container>>> {
        let f = filter.unwrap_or_default();
        ready(self.enter("ListContainers", Call::ListContainers).map(|s| {
            s.containers
                .values()
                .filter(|(_, c)| f.id.is_empty() || c.id == f.id)
                .filter(|(sb, _)| f.pod_sandbox_id.is_empty() || *sb == f.pod_sandbox_id)
                .filter(|(_, c)| f.state.as_ref().is_none_or(|v| v.state == c.state))
                .filter(|(_, c)| matches_labels(&c.labels, &f.label_selector))
                .map(|(sb, c)| pb::Container {
                    id: c.id.clone(),
                    pod_sandbox_id: sb.clone(),
                    metadata: c.metadata.clone(),
                    image: c.image.clone(),
                    image_ref: c.image_ref.clone(),
                    state: c.state,
                    created_at: c.created_at,
                    labels: c.labels.clone(),
                    annotations: c.annotations.clone(),
                    image_id: c.image_id.clone(),
                })
                .collect()
        }))
    }

    fn container_status(
        &self,
        container_id: String,
        _verbose: bool,
    ) -> BoxFuture<'_, Result<pb::ContainerStatusResponse>> {
        let call = Call::ContainerStatus(container_id.clone());
        ready(self.enter("ContainerStatus", call).and_then(
            |s| match s.containers.get(&container_id) {
                Some((_, c)) => Ok(pb::ContainerStatusResponse {
                    status: Some(c.clone()),
                    info: Default::default(),
                }),
                None => Err(not_found("ContainerStatus", "container", &container_id)),
            },
        ))
    }

    /// Creates the container's log file if it is missing (as a runtime opening it anew
    /// would); refused unless the container runs.
    fn reopen_container_log(&self, container_id: String) -> BoxFuture<'_, Result<()>> {
        let call = Call::ReopenContainerLog(container_id.clone());
        ready(self.enter("ReopenContainerLog", call).and_then(|s| {
            match s.containers.get(&container_id) {
                Some((_, c)) if c.state == RUNNING => std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&c.log_path)
                    .map(drop)
                    .map_err(|e| {
                        Error::rpc("ReopenContainerLog", tonic::Status::internal(e.to_string()))
                    }),
                Some(_) => Err(Error::rpc(
                    "ReopenContainerLog",
                    tonic::Status::failed_precondition(format!(
                        "container \"{container_id}\" is not running"
                    )),
                )),
                None => Err(not_found("ReopenContainerLog", "container", &container_id)),
            }
        }))
    }

    fn exec_sync(
        &self,
        container_id: String,
        cmd: Vec<String>,
        _timeout_secs: i64,
    ) -> BoxFuture<'_, Result<pb::ExecSyncResponse>> {
        let call = Call::ExecSync {
            container_id: container_id.clone(),
            cmd,
        };
        ready(
            self.enter("ExecSync", call)
                .and_then(|s| match s.containers.get(&container_id) {
                    Some((_, c)) if c.state == RUNNING => Ok(s.exec_reply.clone()),
                    Some(_) => Err(Error::rpc(
                        "ExecSync",
                        tonic::Status::unknown(format!(
                            "container \"{container_id}\" is not running"
                        )),
                    )),
                    None => Err(not_found("ExecSync", "container", &container_id)),
                }),
        )
    }
}

impl ImageService for FakeRuntime {
    fn list_images(
        &self,
        _filter: Option<pb::ImageFilter>,
    ) -> BoxFuture<'_, Result<Vec<pb::Image>>> {
        ready(
            self.enter("ListImages", Call::ListImages)
                .map(|s| s.images.iter().map(|name| fake_image(name)).collect()),
        )
    }

    fn image_status(
        &self,
        image: pb::ImageSpec,
        _verbose: bool,
    ) -> BoxFuture<'_, Result<Option<pb::Image>>> {
        let call = Call::ImageStatus(image.image.clone());
        ready(self.enter("ImageStatus", call).map(|s| {
            s.images
                .contains(&image.image)
                .then(|| fake_image(&image.image))
        }))
    }

    fn pull_image(
        &self,
        image: pb::ImageSpec,
        auth: Option<pb::AuthConfig>,
        _sandbox_config: Option<pb::PodSandboxConfig>,
    ) -> BoxFuture<'_, Result<String>> {
        self.lock().pull_auths.push(auth);
        let call = Call::PullImage(image.image.clone());
        ready(self.enter("PullImage", call).map(|mut s| {
            s.images.insert(image.image.clone());
            fake_image(&image.image).id
        }))
    }

    fn remove_image(&self, image: pb::ImageSpec) -> BoxFuture<'_, Result<()>> {
        let call = Call::RemoveImage(image.image.clone());
        ready(self.enter("RemoveImage", call).map(|mut s| {
            s.images.remove(&image.image);
        }))
    }
}

fn fake_image(name: &str) -> pb::Image {
    pb::Image {
        id: format!("sha256:{name}"),
        repo_tags: vec![name.to_string()],
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sandbox_config(name: &str) -> pb::PodSandboxConfig {
        pb::PodSandboxConfig {
            metadata: Some(pb::PodSandboxMetadata {
                name: name.into(),
                uid: "uid-1".into(),
                namespace: "default".into(),
                attempt: 0,
            }),
            ..Default::default()
        }
    }

    fn container_config(name: &str, image: &str) -> pb::ContainerConfig {
        pb::ContainerConfig {
            metadata: Some(pb::ContainerMetadata {
                name: name.into(),
                attempt: 0,
            }),
            image: Some(pb::ImageSpec {
                image: image.into(),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn a_pod_lifecycle_is_recorded_in_order() {
        let rt = FakeRuntime::new();
        rt.add_image("busybox");
        let sb = rt
            .run_pod_sandbox(sandbox_config("web"), String::new())
            .await
            .unwrap();
        let c = rt
            .create_container(
                sb.clone(),
                container_config("app", "busybox"),
                sandbox_config("web"),
            )
            .await
            .unwrap();
        rt.start_container(c.clone()).await.unwrap();
        let status = rt.container_status(c.clone(), false).await.unwrap();
        assert_eq!(status.status.unwrap().state, RUNNING);
        rt.stop_pod_sandbox(sb.clone()).await.unwrap();
        let status = rt.container_status(c.clone(), false).await.unwrap();
        assert_eq!(status.status.unwrap().state, EXITED);
        rt.remove_pod_sandbox(sb.clone()).await.unwrap();
        assert!(rt.list_containers(None).await.unwrap().is_empty());
        assert!(rt.list_pod_sandbox(None).await.unwrap().is_empty());
        assert_eq!(
            rt.calls(),
            vec![
                Call::RunPodSandbox {
                    namespace: "default".into(),
                    name: "web".into(),
                    attempt: 0
                },
                Call::CreateContainer {
                    pod_sandbox_id: "sandbox-1".into(),
                    name: "app".into(),
                    image: "busybox".into()
                },
                Call::StartContainer("container-2".into()),
                Call::ContainerStatus("container-2".into()),
                Call::StopPodSandbox("sandbox-1".into()),
                Call::ContainerStatus("container-2".into()),
                Call::RemovePodSandbox("sandbox-1".into()),
                Call::ListContainers,
                Call::ListPodSandbox,
            ]
        );
    }

    #[tokio::test]
    async fn missing_objects_are_not_found_and_failures_fire_once() {
        let rt = FakeRuntime::new();
        let err = rt.start_container("nope".into()).await.unwrap_err();
        assert!(err.is_not_found(), "{err}");
        let sb = rt
            .run_pod_sandbox(sandbox_config("web"), String::new())
            .await
            .unwrap();
        let err = rt
            .create_container(
                sb,
                container_config("app", "missing:1"),
                sandbox_config("web"),
            )
            .await
            .unwrap_err();
        assert!(err.is_not_found(), "{err}");

        rt.fail_next("Version", tonic::Status::unavailable("down"));
        let err = rt.version().await.unwrap_err();
        assert_eq!(err.code(), Some(tonic::Code::Unavailable));
        assert_eq!(rt.version().await.unwrap().runtime_name, "fake");
    }

    #[tokio::test]
    async fn pulled_images_are_present() {
        let rt = FakeRuntime::new();
        let spec = pb::ImageSpec {
            image: "docker.io/library/busybox:1.35".into(),
            ..Default::default()
        };
        assert_eq!(rt.image_status(spec.clone(), false).await.unwrap(), None);
        rt.pull_image(spec.clone(), None, None).await.unwrap();
        let img = rt.image_status(spec.clone(), false).await.unwrap().unwrap();
        assert_eq!(
            img.repo_tags,
            vec!["docker.io/library/busybox:1.35".to_string()]
        );
        rt.remove_image(spec.clone()).await.unwrap();
        assert!(rt.list_images(None).await.unwrap().is_empty());
    }
}
