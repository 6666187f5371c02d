//! The CRI calls the kubelet makes, as traits: one for containers and pod sandboxes, one for
//! images (a runtime may serve them on different sockets).
//!
//! Methods take owned arguments and return boxed futures so the traits can be used as
//! `Arc<dyn RuntimeService>`. Replies that carry a single value are unwrapped to it.

use futures::future::BoxFuture;

use super::pb;
use super::Result;

/// `runtime.v1.RuntimeService`: pod sandboxes and containers.
pub trait RuntimeService: Send + Sync {
    /// The runtime's name and versions (`version` is the kubelet's CRI version, `v1`).
    fn version(&self) -> BoxFuture<'_, Result<pb::VersionResponse>>;
    /// The runtime's conditions (`RuntimeReady`, `NetworkReady`).
    fn status(&self, verbose: bool) -> BoxFuture<'_, Result<pb::StatusResponse>>;
    /// Creates and starts a pod sandbox; returns its id.
    fn run_pod_sandbox(
        &self,
        config: pb::PodSandboxConfig,
        runtime_handler: String,
    ) -> BoxFuture<'_, Result<String>>;
    /// Stops every container of the sandbox and tears its network down. Idempotent.
    fn stop_pod_sandbox(&self, pod_sandbox_id: String) -> BoxFuture<'_, Result<()>>;
    /// Removes a stopped sandbox and its containers. Idempotent.
    fn remove_pod_sandbox(&self, pod_sandbox_id: String) -> BoxFuture<'_, Result<()>>;
    /// The sandbox's status (`verbose`: with the runtime's info map).
    fn pod_sandbox_status(
        &self,
        pod_sandbox_id: String,
        verbose: bool,
    ) -> BoxFuture<'_, Result<pb::PodSandboxStatusResponse>>;
    /// The sandboxes `filter` selects (all without one).
    fn list_pod_sandbox(
        &self,
        filter: Option<pb::PodSandboxFilter>,
    ) -> BoxFuture<'_, Result<Vec<pb::PodSandbox>>>;
    /// Creates a container in a sandbox; returns its id.
    fn create_container(
        &self,
        pod_sandbox_id: String,
        config: pb::ContainerConfig,
        sandbox_config: pb::PodSandboxConfig,
    ) -> BoxFuture<'_, Result<String>>;
    /// Starts a created container.
    fn start_container(&self, container_id: String) -> BoxFuture<'_, Result<()>>;
    /// Stops a container, SIGKILLing it `timeout_secs` after the stop signal. Idempotent.
    fn stop_container(&self, container_id: String, timeout_secs: i64) -> BoxFuture<'_, Result<()>>;
    /// Removes a container (killing it if running). Idempotent.
    fn remove_container(&self, container_id: String) -> BoxFuture<'_, Result<()>>;
    /// The containers `filter` selects (all without one).
    fn list_containers(
        &self,
        filter: Option<pb::ContainerFilter>,
    ) -> BoxFuture<'_, Result<Vec<pb::Container>>>;
    /// The container's status (`verbose`: with the runtime's info map).
    fn container_status(
        &self,
        container_id: String,
        verbose: bool,
    ) -> BoxFuture<'_, Result<pb::ContainerStatusResponse>>;
    /// Makes the runtime close the container's log file and open its log path anew (after
    /// log rotation renamed the file). The container must be running.
    fn reopen_container_log(&self, container_id: String) -> BoxFuture<'_, Result<()>>;
    /// Runs `cmd` in the container and waits for it (0 `timeout_secs` = no timeout).
    fn exec_sync(
        &self,
        container_id: String,
        cmd: Vec<String>,
        timeout_secs: i64,
    ) -> BoxFuture<'_, Result<pb::ExecSyncResponse>>;
    /// Usage statistics of the runtime's running containers (runtimes without them answer
    /// Unimplemented).
    fn list_container_stats(&self) -> BoxFuture<'_, Result<Vec<pb::ContainerStats>>> {
        Box::pin(std::future::ready(Err(super::Error::rpc(
            "ListContainerStats",
            tonic::Status::unimplemented("no container stats"),
        ))))
    }
    /// A URL of the runtime's streaming server for an exec, attach or port-forward session
    /// (the caller carries the client's upgraded connection there).
    fn streaming_url(&self, req: StreamRequest) -> BoxFuture<'_, Result<String>> {
        let _ = req;
        Box::pin(std::future::ready(Err(super::Error::rpc(
            "Exec",
            tonic::Status::unimplemented("no streaming server"),
        ))))
    }
}

/// What a streaming session is for.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamRequest {
    /// `kubectl exec`.
    Exec(pb::ExecRequest),
    /// `kubectl attach`.
    Attach(pb::AttachRequest),
    /// `kubectl port-forward`.
    PortForward(pb::PortForwardRequest),
}

/// `runtime.v1.ImageService`.
pub trait ImageService: Send + Sync {
    /// The images `filter` selects (all without one).
    fn list_images(&self, filter: Option<pb::ImageFilter>)
        -> BoxFuture<'_, Result<Vec<pb::Image>>>;
    /// The image, or `None` when the runtime does not have it.
    fn image_status(
        &self,
        image: pb::ImageSpec,
        verbose: bool,
    ) -> BoxFuture<'_, Result<Option<pb::Image>>>;
    /// Pulls the image; returns its reference (an image id or digest).
    fn pull_image(
        &self,
        image: pb::ImageSpec,
        auth: Option<pb::AuthConfig>,
        sandbox_config: Option<pb::PodSandboxConfig>,
    ) -> BoxFuture<'_, Result<String>>;
    /// Removes the image. Idempotent.
    fn remove_image(&self, image: pb::ImageSpec) -> BoxFuture<'_, Result<()>>;
}
