//! The Certificates API's in-process controllers: the approver (kubelet client certificates
//! for bootstrapping and renewing nodes) and the signers of the built-in signer names, both
//! clients of the API like kube-controller-manager's (identity
//! `system:serviceaccount:kube-system:certificate-controller`).

pub(crate) mod approver;
pub(crate) mod request;
pub(crate) mod serving_approval;
pub(crate) mod sign;
pub(crate) mod signer;

use std::path::Path;
use std::sync::Arc;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::SharedInformerFactory;
use k3rs_apimachinery::clients::ClientBuilder;
use k3rs_apimachinery::tasks;

/// The CAs the signers use, loaded from the server's TLS dir.
pub struct Signers {
    client_ca: signer::SigningCa,
    server_ca: signer::SigningCa,
}

impl std::fmt::Debug for Signers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Signers").finish_non_exhaustive()
    }
}

impl Signers {
    /// Loads `client-ca` and `server-ca` from `tls_dir`.
    pub fn load(tls_dir: &Path) -> Result<Signers, k3rs_pki::Error> {
        Ok(Signers {
            client_ca: signer::SigningCa::load(tls_dir, "client-ca")?,
            server_ca: signer::SigningCa::load(tls_dir, "server-ca")?,
        })
    }
}

/// The identity of the approver and the signers (kube-controller-manager's).
pub const CONTROLLER_NAME: &str = "certificate-controller";

/// Starts the approver and the signers until `stop`, each supervised (restarted with backoff
/// when it panics or stops early).
pub fn spawn(
    clients: &dyn ClientBuilder,
    informers: &SharedInformerFactory,
    signers: Signers,
    stop: &CancellationToken,
) -> Vec<JoinHandle<()>> {
    let client = || clients.controller(CONTROLLER_NAME);
    let approver = Arc::new(approver::Context { client: client() });
    let signer = Arc::new(signer::Context {
        client: client(),
        client_ca: signers.client_ca,
        server_ca: signers.server_ca,
    });
    vec![
        tokio::spawn(tasks::supervise("controller/csr-approver", stop.clone(), {
            let informers = informers.clone();
            move |stop| approver::run(approver.clone(), informers.clone(), stop)
        })),
        tokio::spawn(tasks::supervise("controller/csr-signer", stop.clone(), {
            let informers = informers.clone();
            move |stop| signer::run(signer.clone(), informers.clone(), stop)
        })),
    ]
}
