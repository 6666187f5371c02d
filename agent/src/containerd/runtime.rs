//! The agent's container runtime, brought up in one call: either the agent's own containerd
//! (config written, supervised, the embedded pause image and the air-gap images imported:
//! [`images::provision`]) or, with
//! `--container-runtime-endpoint`, someone else's runtime that the agent only connects to.
//!
//! Guarantees: [`Runtime::start`] returns a CRI client whose `Version` call has succeeded; on
//! failure after containerd started, containerd is stopped again. The CNI conflist is not
//! written here: it needs the node's pod CIDR, known only once the node is registered
//! ([`crate::cni::write`] into [`super::Layout::cni_conf_dir`]).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::supervisor::{self, Supervisor, SupervisorOptions};
use super::Config;
use crate::cri::grpc::Cri;
use crate::cri::RuntimeService;
use crate::images;

/// Why the runtime could not be brought up.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("starting containerd")]
    Supervise(#[source] supervisor::Error),
    #[error("importing images (air-gap directory {dir})")]
    Import {
        dir: PathBuf,
        #[source]
        source: images::Error,
    },
    #[error("the container runtime at {address} does not answer CRI Version")]
    Cri {
        address: PathBuf,
        #[source]
        source: crate::cri::Error,
    },
}

/// Where the runtime comes from.
// Built once per agent start: the size difference between the variants costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum Endpoint {
    /// The agent's own containerd, with this config; after it starts, the embedded pause image
    /// is imported if it is the config's sandbox image and missing, and the images of the
    /// directory (if any).
    Supervised {
        config: Config,
        options: SupervisorOptions,
        images_dir: Option<PathBuf>,
    },
    /// `--container-runtime-endpoint`: a CRI socket (path or `unix://` URL) run by someone
    /// else. Nothing is started or imported.
    External(PathBuf),
}

/// A connected runtime.
#[derive(Debug)]
pub struct Runtime {
    pub cri: Cri,
    /// What the start imported (empty for an external runtime).
    pub imported: images::Report,
    address: PathBuf,
    supervisor: Option<Supervisor>,
}

/// How long [`Runtime::start`] retries CRI `Version` (containerd serves its socket before
/// every plugin is up).
const VERSION_TIMEOUT: Duration = Duration::from_secs(30);

impl Runtime {
    pub async fn start(endpoint: Endpoint) -> Result<Runtime, Error> {
        match endpoint {
            Endpoint::External(address) => {
                let cri = connect(&address).await?;
                Ok(Runtime {
                    cri,
                    imported: images::Report::default(),
                    address,
                    supervisor: None,
                })
            }
            Endpoint::Supervised {
                config,
                options,
                images_dir,
            } => {
                let supervisor = Supervisor::start(&config, options)
                    .await
                    .map_err(Error::Supervise)?;
                let address = supervisor.address().to_path_buf();
                let started = async {
                    let ctr = images::Ctr::new(&address, &config.snapshotter);
                    let imported =
                        images::provision(&ctr, images_dir.as_deref(), &config.sandbox_image)
                            .await
                            .map_err(|source| Error::Import {
                                dir: images_dir.clone().unwrap_or_default(),
                                source,
                            })?;
                    Ok::<_, Error>((connect(&address).await?, imported))
                };
                match started.await {
                    Ok((cri, imported)) => Ok(Runtime {
                        cri,
                        imported,
                        address,
                        supervisor: Some(supervisor),
                    }),
                    Err(e) => {
                        supervisor.stop().await;
                        Err(e)
                    }
                }
            }
        }
    }

    /// The runtime's CRI socket.
    pub fn address(&self) -> &Path {
        &self.address
    }

    /// The supervisor of the agent's own containerd (`None` for an external runtime).
    pub fn supervisor(&self) -> Option<&Supervisor> {
        self.supervisor.as_ref()
    }

    /// Stops the agent's own containerd (an external runtime is left alone).
    pub async fn stop(self) {
        if let Some(s) = self.supervisor {
            s.stop().await;
        }
    }
}

/// Connects and retries `Version` until it answers or [`VERSION_TIMEOUT`] passes.
async fn connect(address: &Path) -> Result<Cri, Error> {
    let deadline = Instant::now() + VERSION_TIMEOUT;
    let to_error = |source| Error::Cri {
        address: address.to_path_buf(),
        source,
    };
    let cri = Cri::connect(address).await.map_err(to_error)?;
    loop {
        match cri.version().await {
            Ok(_) => return Ok(cri),
            Err(e) if Instant::now() >= deadline => return Err(to_error(e)),
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_missing_external_endpoint_fails_without_starting_anything() {
        let dir = tempfile::tempdir().unwrap();
        let address = dir.path().join("containerd.sock");
        let err = Runtime::start(Endpoint::External(address.clone()))
            .await
            .unwrap_err();
        match err {
            Error::Cri { address: a, source } => {
                assert_eq!(a, address);
                assert!(
                    matches!(source, crate::cri::Error::Connect { .. }),
                    "{source:?}"
                );
            }
            other => panic!("expected a CRI error, got {other:?}"),
        }
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
