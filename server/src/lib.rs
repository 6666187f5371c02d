//! k3rs-server: the control plane (STUB: signatures are the contract).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

pub mod pki;

/// etcd v3 `mvccpb` messages (KeyValue, Event), generated from `proto/mvccpb/kv.proto`.
#[allow(clippy::all, clippy::pedantic, missing_docs)]
pub mod mvccpb {
    include!(concat!(env!("OUT_DIR"), "/mvccpb.rs"));
}

/// etcd v3 `etcdserverpb` messages, tonic servers and clients (KV, Watch, Lease, Cluster,
/// Maintenance), generated from `proto/etcdserverpb/rpc.proto`. Wire-compatible with etcd.
#[allow(clippy::all, clippy::pedantic, missing_docs)]
pub mod etcdpb {
    include!(concat!(env!("OUT_DIR"), "/etcdserverpb.rs"));
}

/// Everything `k3rs server` is configured with.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// `--data-dir`; the server keeps its state under `<data_dir>/server/`.
    pub data_dir: PathBuf,
    /// `--etcd-client-port` address (etcd v3 gRPC, mTLS).
    pub etcd_client_addr: SocketAddr,
    /// Revisions older than this are compacted automatically; zero disables it.
    pub auto_compaction_retention: Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("pki: {0}")]
    Pki(#[from] pki::Error),
    #[error("datastore: {0}")]
    Datastore(#[from] k3rs_raft::Error),
    #[error("serving etcd api: {0}")]
    Serve(String),
    #[error("i/o on {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Runs the server until `shutdown` is cancelled, then drains and returns.
pub async fn run(_cfg: ServerConfig, _shutdown: CancellationToken) -> Result<()> {
    unimplemented!()
}
