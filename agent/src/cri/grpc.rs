//! The CRI client over gRPC on a unix socket (containerd's `containerd.sock`, CRI-O's
//! `crio.sock`).
//!
//! The channel reconnects by itself: after the runtime restarts, the next call dials again.
//!
//! Timeouts are the kubelet's: every call gets the runtime request timeout (2 minutes by
//! default, `--runtime-request-timeout`), ExecSync its own timeout plus that, PullImage none
//! (pulls take as long as they take). A call past its timeout fails with `DeadlineExceeded`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use futures::future::BoxFuture;
use hyper_util::rt::TokioIo;
use tonic::transport::{Channel, Endpoint};

use super::pb;
use super::pb::image_service_client::ImageServiceClient;
use super::pb::runtime_service_client::RuntimeServiceClient;
use super::{Error, ImageService, Result, RuntimeService};

/// The largest reply the client accepts (the kubelet's limit: lists on busy nodes are big).
pub const MAX_MESSAGE_SIZE: usize = 16 * 1024 * 1024;

/// The CRI version the kubelet speaks, sent in `VersionRequest`.
pub const KUBELET_CRI_VERSION: &str = "v1";

/// The kubelet's default `--runtime-request-timeout`.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(120);

/// A CRI v1 client for both services on one socket.
#[derive(Debug, Clone)]
pub struct Cri {
    runtime: RuntimeServiceClient<Channel>,
    image: ImageServiceClient<Channel>,
    request_timeout: Duration,
}

impl Cri {
    /// Connects to the runtime's unix socket at `address` (a path, or `unix://` + path).
    pub async fn connect(address: &Path) -> Result<Cri> {
        let path = socket_path(address);
        let dial = path.clone();
        // The URI is required by the HTTP/2 layer but unused: the connector dials the socket.
        let channel = Endpoint::from_static("http://cri.local")
            .connect_with_connector(tower::service_fn(move |_: http::Uri| {
                let dial = dial.clone();
                async move {
                    let stream = tokio::net::UnixStream::connect(dial).await?;
                    Ok::<_, std::io::Error>(TokioIo::new(stream))
                }
            }))
            .await
            .map_err(|source| Error::Connect {
                address: path,
                source,
            })?;
        Ok(Cri::from_channel(channel))
    }

    /// A client on an existing channel.
    pub fn from_channel(channel: Channel) -> Cri {
        Cri {
            runtime: RuntimeServiceClient::new(channel.clone())
                .max_decoding_message_size(MAX_MESSAGE_SIZE),
            image: ImageServiceClient::new(channel).max_decoding_message_size(MAX_MESSAGE_SIZE),
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
        }
    }

    /// The same client with another runtime request timeout.
    pub fn with_request_timeout(mut self, timeout: Duration) -> Cri {
        self.request_timeout = timeout;
        self
    }
}

/// `unix:///run/x.sock` and `/run/x.sock` both name `/run/x.sock`.
fn socket_path(address: &Path) -> PathBuf {
    match address.to_str().and_then(|s| s.strip_prefix("unix://")) {
        Some(rest) => PathBuf::from(rest),
        None => address.to_path_buf(),
    }
}

/// Calls `$method` on a clone of `$client` with `$req` within the request timeout (or the
/// given `Option<Duration>`); maps errors to [`Error::Rpc`].
macro_rules! call {
    ($self:ident . $client:ident . $method:ident ($req:expr), $rpc:literal) => {
        call!(
            $self.$client.$method($req),
            $rpc,
            Some($self.request_timeout)
        )
    };
    ($self:ident . $client:ident . $method:ident ($req:expr), $rpc:literal, $timeout:expr) => {{
        let mut client = $self.$client.clone();
        let timeout: Option<Duration> = $timeout;
        let mut request = tonic::Request::new($req);
        if let Some(t) = timeout {
            // Tells the runtime the deadline too (gRPC's grpc-timeout header).
            request.set_timeout(t);
        }
        Box::pin(async move {
            let started = std::time::Instant::now();
            let reply = client.$method(request);
            let reply = match timeout {
                Some(t) => tokio::time::timeout(t, reply)
                    .await
                    .unwrap_or_else(|_| Err(deadline_exceeded(t))),
                None => reply.await,
            };
            reply.map(tonic::Response::into_inner).map_err(|status| {
                // tonic's own enforcement of grpc-timeout reports Cancelled; say what it is.
                let status = match timeout {
                    Some(t)
                        if status.code() == tonic::Code::Cancelled && started.elapsed() >= t =>
                    {
                        deadline_exceeded(t)
                    }
                    _ => status,
                };
                Error::rpc($rpc, status)
            })
        })
    }};
}

fn deadline_exceeded(t: Duration) -> tonic::Status {
    tonic::Status::deadline_exceeded(format!("no reply within {t:?}"))
}

impl RuntimeService for Cri {
    fn version(&self) -> BoxFuture<'_, Result<pb::VersionResponse>> {
        call!(
            self.runtime.version(pb::VersionRequest {
                version: KUBELET_CRI_VERSION.to_string()
            }),
            "Version"
        )
    }

    fn status(&self, verbose: bool) -> BoxFuture<'_, Result<pb::StatusResponse>> {
        call!(self.runtime.status(pb::StatusRequest { verbose }), "Status")
    }

    fn run_pod_sandbox(
        &self,
        config: pb::PodSandboxConfig,
        runtime_handler: String,
    ) -> BoxFuture<'_, Result<String>> {
        let reply: BoxFuture<'_, Result<pb::RunPodSandboxResponse>> = call!(
            self.runtime.run_pod_sandbox(pb::RunPodSandboxRequest {
                config: Some(config),
                runtime_handler,
            }),
            "RunPodSandbox"
        );
        Box::pin(async move { Ok(reply.await?.pod_sandbox_id) })
    }

    fn stop_pod_sandbox(&self, pod_sandbox_id: String) -> BoxFuture<'_, Result<()>> {
        let reply: BoxFuture<'_, Result<pb::StopPodSandboxResponse>> = call!(
            self.runtime
                .stop_pod_sandbox(pb::StopPodSandboxRequest { pod_sandbox_id }),
            "StopPodSandbox"
        );
        Box::pin(async move { reply.await.map(drop) })
    }

    fn remove_pod_sandbox(&self, pod_sandbox_id: String) -> BoxFuture<'_, Result<()>> {
        let reply: BoxFuture<'_, Result<pb::RemovePodSandboxResponse>> = call!(
            self.runtime
                .remove_pod_sandbox(pb::RemovePodSandboxRequest { pod_sandbox_id }),
            "RemovePodSandbox"
        );
        Box::pin(async move { reply.await.map(drop) })
    }

    fn pod_sandbox_status(
        &self,
        pod_sandbox_id: String,
        verbose: bool,
    ) -> BoxFuture<'_, Result<pb::PodSandboxStatusResponse>> {
        call!(
            self.runtime
                .pod_sandbox_status(pb::PodSandboxStatusRequest {
                    pod_sandbox_id,
                    verbose
                }),
            "PodSandboxStatus"
        )
    }

    fn list_pod_sandbox(
        &self,
        filter: Option<pb::PodSandboxFilter>,
    ) -> BoxFuture<'_, Result<Vec<pb::PodSandbox>>> {
        let reply: BoxFuture<'_, Result<pb::ListPodSandboxResponse>> = call!(
            self.runtime
                .list_pod_sandbox(pb::ListPodSandboxRequest { filter }),
            "ListPodSandbox"
        );
        Box::pin(async move { Ok(reply.await?.items) })
    }

    fn create_container(
        &self,
        pod_sandbox_id: String,
        config: pb::ContainerConfig,
        sandbox_config: pb::PodSandboxConfig,
    ) -> BoxFuture<'_, Result<String>> {
        let reply: BoxFuture<'_, Result<pb::CreateContainerResponse>> = call!(
            self.runtime.create_container(pb::CreateContainerRequest {
                pod_sandbox_id,
                config: Some(config),
                sandbox_config: Some(sandbox_config),
            }),
            "CreateContainer"
        );
        Box::pin(async move { Ok(reply.await?.container_id) })
    }

    fn start_container(&self, container_id: String) -> BoxFuture<'_, Result<()>> {
        let reply: BoxFuture<'_, Result<pb::StartContainerResponse>> = call!(
            self.runtime
                .start_container(pb::StartContainerRequest { container_id }),
            "StartContainer"
        );
        Box::pin(async move { reply.await.map(drop) })
    }

    fn stop_container(&self, container_id: String, timeout_secs: i64) -> BoxFuture<'_, Result<()>> {
        let reply: BoxFuture<'_, Result<pb::StopContainerResponse>> = call!(
            self.runtime.stop_container(pb::StopContainerRequest {
                container_id,
                timeout: timeout_secs,
            }),
            "StopContainer"
        );
        Box::pin(async move { reply.await.map(drop) })
    }

    fn remove_container(&self, container_id: String) -> BoxFuture<'_, Result<()>> {
        let reply: BoxFuture<'_, Result<pb::RemoveContainerResponse>> = call!(
            self.runtime
                .remove_container(pb::RemoveContainerRequest { container_id }),
            "RemoveContainer"
        );
        Box::pin(async move { reply.await.map(drop) })
    }

    fn list_containers(
        &self,
        filter: Option<pb::ContainerFilter>,
    ) -> BoxFuture<'_, Result<Vec<pb::Container>>> {
        let reply: BoxFuture<'_, Result<pb::ListContainersResponse>> = call!(
            self.runtime
                .list_containers(pb::ListContainersRequest { filter }),
            "ListContainers"
        );
        Box::pin(async move { Ok(reply.await?.containers) })
    }

    fn list_container_stats(&self) -> BoxFuture<'_, Result<Vec<pb::ContainerStats>>> {
        let reply: BoxFuture<'_, Result<pb::ListContainerStatsResponse>> = call!(
            self.runtime
                .list_container_stats(pb::ListContainerStatsRequest { filter: None }),
            "ListContainerStats"
        );
        Box::pin(async move { Ok(reply.await?.stats) })
    }

    fn container_status(
        &self,
        container_id: String,
        verbose: bool,
    ) -> BoxFuture<'_, Result<pb::ContainerStatusResponse>> {
        call!(
            self.runtime.container_status(pb::ContainerStatusRequest {
                container_id,
                verbose
            }),
            "ContainerStatus"
        )
    }

    fn reopen_container_log(&self, container_id: String) -> BoxFuture<'_, Result<()>> {
        let reply: BoxFuture<'_, Result<pb::ReopenContainerLogResponse>> = call!(
            self.runtime
                .reopen_container_log(pb::ReopenContainerLogRequest { container_id }),
            "ReopenContainerLog"
        );
        Box::pin(async move { reply.await.map(drop) })
    }

    fn exec_sync(
        &self,
        container_id: String,
        cmd: Vec<String>,
        timeout_secs: i64,
    ) -> BoxFuture<'_, Result<pb::ExecSyncResponse>> {
        // Upstream: the command's own timeout plus the request timeout; 0 means none.
        let timeout = u64::try_from(timeout_secs)
            .ok()
            .filter(|s| *s > 0)
            .map(|s| Duration::from_secs(s) + self.request_timeout);
        call!(
            self.runtime.exec_sync(pb::ExecSyncRequest {
                container_id,
                cmd,
                timeout: timeout_secs,
            }),
            "ExecSync",
            timeout
        )
    }

    fn streaming_url(&self, req: super::StreamRequest) -> BoxFuture<'_, Result<String>> {
        use super::StreamRequest as S;
        match req {
            S::Exec(r) => {
                let f: BoxFuture<'_, Result<pb::ExecResponse>> =
                    call!(self.runtime.exec(r), "Exec");
                Box::pin(async move { Ok(f.await?.url) })
            }
            S::Attach(r) => {
                let f: BoxFuture<'_, Result<pb::AttachResponse>> =
                    call!(self.runtime.attach(r), "Attach");
                Box::pin(async move { Ok(f.await?.url) })
            }
            S::PortForward(r) => {
                let f: BoxFuture<'_, Result<pb::PortForwardResponse>> =
                    call!(self.runtime.port_forward(r), "PortForward");
                Box::pin(async move { Ok(f.await?.url) })
            }
        }
    }
}

impl ImageService for Cri {
    fn list_images(
        &self,
        filter: Option<pb::ImageFilter>,
    ) -> BoxFuture<'_, Result<Vec<pb::Image>>> {
        let reply: BoxFuture<'_, Result<pb::ListImagesResponse>> = call!(
            self.image.list_images(pb::ListImagesRequest { filter }),
            "ListImages"
        );
        Box::pin(async move { Ok(reply.await?.images) })
    }

    fn image_status(
        &self,
        image: pb::ImageSpec,
        verbose: bool,
    ) -> BoxFuture<'_, Result<Option<pb::Image>>> {
        let reply: BoxFuture<'_, Result<pb::ImageStatusResponse>> = call!(
            self.image.image_status(pb::ImageStatusRequest {
                image: Some(image),
                verbose,
            }),
            "ImageStatus"
        );
        Box::pin(async move { Ok(reply.await?.image) })
    }

    fn pull_image(
        &self,
        image: pb::ImageSpec,
        auth: Option<pb::AuthConfig>,
        sandbox_config: Option<pb::PodSandboxConfig>,
    ) -> BoxFuture<'_, Result<String>> {
        let reply: BoxFuture<'_, Result<pb::PullImageResponse>> = call!(
            self.image.pull_image(pb::PullImageRequest {
                image: Some(image),
                auth,
                sandbox_config,
            }),
            "PullImage",
            None
        );
        Box::pin(async move { Ok(reply.await?.image_ref) })
    }

    fn remove_image(&self, image: pb::ImageSpec) -> BoxFuture<'_, Result<()>> {
        let reply: BoxFuture<'_, Result<pb::RemoveImageResponse>> = call!(
            self.image
                .remove_image(pb::RemoveImageRequest { image: Some(image) }),
            "RemoveImage"
        );
        Box::pin(async move { reply.await.map(drop) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_path_accepts_a_unix_url() {
        assert_eq!(
            socket_path(Path::new("unix:///run/containerd/containerd.sock")),
            PathBuf::from("/run/containerd/containerd.sock")
        );
        assert_eq!(socket_path(Path::new("/x.sock")), PathBuf::from("/x.sock"));
    }

    #[tokio::test]
    async fn a_runtime_that_never_answers_times_out() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mute.sock");
        let listener = tokio::net::UnixListener::bind(&path).unwrap();
        // Accepts connections, reads nothing, answers nothing.
        let server = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((stream, _)) = listener.accept().await {
                held.push(stream);
            }
        });
        let dial = path.clone();
        let channel = Endpoint::from_static("http://cri.local").connect_with_connector_lazy(
            tower::service_fn(move |_: http::Uri| {
                let dial = dial.clone();
                async move {
                    let stream = tokio::net::UnixStream::connect(dial).await?;
                    Ok::<_, std::io::Error>(TokioIo::new(stream))
                }
            }),
        );
        let cri = Cri::from_channel(channel).with_request_timeout(Duration::from_millis(200));
        let err = cri.version().await.unwrap_err();
        assert_eq!(err.code(), Some(tonic::Code::DeadlineExceeded), "{err}");
        server.abort();
    }

    #[tokio::test]
    async fn connecting_to_a_missing_socket_is_a_connect_error() {
        let dir = tempfile::tempdir().unwrap();
        let err = Cri::connect(&dir.path().join("none.sock"))
            .await
            .unwrap_err();
        assert!(matches!(err, Error::Connect { .. }), "{err:?}");
        assert_eq!(err.code(), None);
    }
}
