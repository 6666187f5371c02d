//! k3rs-server: the control plane. For now: the cluster PKI and server token, the Raft-backed
//! datastore and the etcd v3 gRPC API in front of it, and automatic compaction.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use k3rs_apimachinery::clients::ClientBuilder;
use k3rs_apimachinery::tasks;
use k3rs_raft::{Bootstrap, Node, NodeConfig, PeerConfig, PeerTls};
use tokio_util::sync::CancellationToken;

use k3rs_datastore::{self as datastore, compactor, encryption};
use k3rs_etcd_api::{self as etcd, snapshot as etcd_snapshot};
use k3rs_pki as pki;

use k3rs_apiserver as apiserver;
use k3rs_controllers as controllers;
use k3rs_scheduler as scheduler;

pub mod components;
pub mod identity;
pub mod join;
pub mod leader_election;
pub mod ready_notify;
pub mod supervisor;

/// Raft timing of the embedded datastore (etcd's defaults).
const HEARTBEAT: Duration = Duration::from_millis(100);
const ELECTION_TIMEOUT: Duration = Duration::from_millis(1000);
/// Applied entries between Raft snapshots (and WAL purges): etcd 3.4's `--snapshot-count`
/// default. A snapshot exports the whole store, so its cost grows with the store; at 10,000
/// entries a 3-member cluster after `etcdctl check perf --load=l` exported 340 MB on every
/// member every 40 s of one client's puts, 7 s each (docs/benchmarks.md). `bound_wal` still
/// takes one sooner when the WAL outgrows the store.
const SNAPSHOT_ENTRIES: u64 = 100_000;
/// `--etcd-peer-port` default: the Raft peer service (etcd's peer port).
pub const DEFAULT_ETCD_PEER_PORT: u16 = 2380;
/// How long open streams get to finish after shutdown is requested.
const DRAIN_GRACE: Duration = Duration::from_secs(5);

/// Everything `k3rs server` is configured with.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// `--data-dir`; the server keeps its state under `<data_dir>/server/`.
    pub data_dir: PathBuf,
    /// `--etcd-client-port` address (etcd v3 gRPC, mTLS).
    pub etcd_client_addr: SocketAddr,
    /// Revisions older than this are compacted automatically; zero disables it.
    pub auto_compaction_retention: Duration,
    /// Interval of watch progress notifications for watchers that ask for them (etcd: 10 min).
    pub watch_progress_notify_interval: Duration,
    /// `--etcd-quota-backend-bytes`: the backend quota (0: etcd's default 2 GiB; negative:
    /// none).
    pub quota_backend_bytes: i64,
    /// `--etcd-experimental-corrupt-check-time`: interval of the leader's cross-member hash
    /// check; zero disables it (etcd's default).
    pub corrupt_check_time: Duration,
    /// `--etcd-experimental-initial-corrupt-check`: a restarting member compares its
    /// `HashKV` with its peers' before serving and refuses to start if they differ.
    pub initial_corrupt_check: bool,
    /// `--etcd-compact-encoding`: this process writes the byte strings of Raft commands as
    /// MessagePack bin ([`k3rs_storage::bytes_form`]); every member must read that form.
    pub compact_encoding: bool,
    /// `--bind-address` and `--https-listen-port`: the HTTPS port of the API server and of
    /// the supervisor (what joining servers ask for), served also with `--disable-apiserver`.
    pub https_listen: SocketAddr,
    /// The Kubernetes API server; `None` serves the datastore only (`--disable-apiserver`).
    pub api: Option<ApiSettings>,
    /// `--etcd-peer-port`: the Raft peer service listens on the node IP at this port (mutual
    /// TLS with the etcd peer CA).
    pub etcd_peer_port: u16,
    /// `--node-ip` (else `--advertise-address`): the address other servers reach this one
    /// at (its peer URL). `None`: the address of the default route's interface, as k3s.
    pub node_ip: Option<IpAddr>,
    /// `--cluster-reset`: restart this member as a cluster of one, keeping its data.
    pub cluster_reset: bool,
    /// `--cluster-reset-restore-path`: with `cluster_reset`, the data is this snapshot's.
    pub cluster_reset_restore_path: Option<PathBuf>,
    /// `--etcd-snapshot-*`, `--etcd-disable-snapshots`: scheduled datastore snapshots.
    pub snapshots: etcd_snapshot::Settings,
    /// `--server` and `--token`: join the cluster of that server (on first start only).
    pub join: Option<join::JoinConfig>,
    /// `--token` without `--server`: the secret of a new cluster's server token (kept in
    /// `<data-dir>/server/token`; ignored once that exists).
    pub token: Option<String>,
    /// What the HTTPS port (API server or supervisor) allows its clients; its handshake
    /// timeout and connection cap apply to the etcd client port too.
    pub connection_limits: k3rs_apimachinery::tls::Limits,
}

/// `k3rs server`'s Kubernetes API settings.
#[derive(Debug, Clone)]
pub struct ApiSettings {
    /// `--tls-san`: extra names and addresses for the serving certificate.
    pub tls_sans: Vec<String>,
    /// `--write-kubeconfig` (None: not written).
    pub write_kubeconfig: Option<PathBuf>,
    /// `--write-kubeconfig-mode`.
    pub write_kubeconfig_mode: u32,
    /// `--service-cidr`.
    pub service_cidr: ipnet::IpNet,
    /// `--cluster-cidr` (pod CIDR; the node IPAM controller gives each node a range of it).
    pub cluster_cidr: ipnet::IpNet,
    /// `--datastore-endpoint`: an external etcd instead of the embedded store.
    pub datastore: Option<ExternalDatastore>,
    /// `--disable-controller-manager`: no in-process controllers.
    pub disable_controller_manager: bool,
    /// `--disable-scheduler`: no in-process scheduler.
    pub disable_scheduler: bool,
    /// `--cluster-dns`: the `kube-dns` Service's ClusterIP; `None`: no such Service
    /// (`--disable coredns`).
    pub cluster_dns: Option<IpAddr>,
    /// `--kube-scheduler-arg`s.
    pub scheduler_args: scheduler::args::Args,
    /// What agents learn from this server (`/v1-k3rs/agent-config`).
    pub agent_config: k3rs_apimachinery::agent_config::AgentConfig,
    /// `--metric-resolution` of the built-in metrics API (`None`: `--disable metrics-server`).
    pub metric_resolution: Option<std::time::Duration>,
    /// `--kube-controller-manager-arg`s.
    pub controller_args: controllers::Args,
    /// `--secrets-encryption`: Secrets encrypted at rest (AES-GCM).
    pub secrets_encryption: bool,
    /// `--kube-apiserver-arg`s.
    pub apiserver_args: apiserver::args::Args,
    /// The embedded agent's node name (`None`: `--disable-agent`): the service manager is told
    /// READY once that node is Ready too.
    pub embedded_node: Option<String>,
}

/// An external etcd (`--datastore-endpoint` and its TLS files).
#[derive(Debug, Clone)]
pub struct ExternalDatastore {
    /// `--datastore-endpoint`: the etcd URL(s).
    pub endpoint: String,
    /// The client TLS files for it (`--datastore-cafile`, `-certfile`, `-keyfile`).
    pub tls: datastore::EtcdTls,
}

impl ServerConfig {
    /// A configuration with the defaults of every setting but the data dir and etcd address.
    pub fn new(data_dir: PathBuf, etcd_client_addr: SocketAddr) -> ServerConfig {
        ServerConfig {
            data_dir,
            etcd_client_addr,
            auto_compaction_retention: Duration::from_secs(300),
            watch_progress_notify_interval: Duration::from_secs(600),
            quota_backend_bytes: 0,
            corrupt_check_time: Duration::ZERO,
            initial_corrupt_check: false,
            compact_encoding: false,
            https_listen: SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 6443),
            api: None,
            etcd_peer_port: DEFAULT_ETCD_PEER_PORT,
            node_ip: None,
            cluster_reset: false,
            cluster_reset_restore_path: None,
            snapshots: etcd_snapshot::Settings::default(),
            join: None,
            token: None,
            connection_limits: https_limits(),
        }
    }
}

/// The HTTPS servers' default limits, draining for [`DRAIN_GRACE`].
pub fn https_limits() -> k3rs_apimachinery::tls::Limits {
    k3rs_apimachinery::tls::Limits {
        drain: DRAIN_GRACE,
        ..Default::default()
    }
}

/// Why the server could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Creating or loading the cluster PKI failed.
    #[error("pki: {0}")]
    Pki(#[from] pki::Error),
    /// The embedded datastore failed.
    #[error("datastore: {0}")]
    Datastore(#[from] k3rs_raft::Error),
    /// The API server failed.
    #[error("api server: {0}")]
    Api(#[from] apiserver::Error),
    /// Joining an existing cluster failed.
    #[error("joining the cluster: {0}")]
    Join(#[from] join::Error),
    /// Restoring or taking an etcd snapshot failed.
    #[error("etcd snapshot: {0}")]
    Snapshot(#[from] etcd_snapshot::Error),
    /// The startup corruption check found this member's data different from its peers'.
    #[error("initial corruption check: {0}")]
    Corrupt(#[from] etcd::corrupt::InitialCheckError),
    /// A serving task failed or could not start.
    #[error("serving etcd api: {0}")]
    Serve(String),
    /// The datastore's files failed (ENOSPC, EIO) and Raft stopped: the server exits
    /// non-zero (fail-stop) so that its service manager restarts it.
    #[error("the datastore cannot write; stopping: {0}")]
    DatastoreFailed(String),
    /// Reading a file failed.
    #[error("i/o on {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

/// The result of the server's operations.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Runs the server until `shutdown` is cancelled, then drains and returns.
///
/// Creates the PKI and IDs on first start, starts the Raft node on `<data-dir>/server/db`,
/// serves the etcd API with mutual TLS (client certificates signed by the etcd server CA are
/// required), and compacts automatically. On shutdown: stops accepting, gives open streams
/// 5 seconds to finish, then stops Raft.
pub async fn run(cfg: ServerConfig, shutdown: CancellationToken) -> Result<()> {
    let server_dir = cfg.data_dir.join("server");
    // Process-wide, before the store and Raft encode anything.
    k3rs_storage::bytes_form::set_write_form(if cfg.compact_encoding {
        k3rs_storage::bytes_form::BytesForm::Bin
    } else {
        k3rs_storage::bytes_form::BytesForm::IntArray
    });
    // A snapshot to restore is checked before anything is touched.
    let restore = etcd_snapshot::restore::verify_requested(
        cfg.cluster_reset_restore_path.as_deref(),
        cfg.cluster_reset,
        &server_dir.join("tmp"),
    )?;
    pki::files::create_dir(&server_dir)?;
    ready_notify::progress("starting: certificates and datastore");
    let hostname = identity::hostname();
    let etcd_ip = cfg.etcd_client_addr.ip();
    let node_ip = cfg.node_ip.unwrap_or_else(identity::default_ip);
    // A data dir with a datastore is a member already: restarts never join again.
    let joining = match &cfg.join {
        Some(j) if !cfg.cluster_reset && !server_dir.join("db").exists() => {
            tracing::info!(server = %j.server, "joining the cluster");
            ready_notify::progress(&format!("joining the cluster at {}", j.server));
            let (cluster, data) = join::Cluster::bootstrap(j).await?;
            join::install(&server_dir, &data)?;
            Some(cluster)
        }
        Some(_) => {
            tracing::info!("this server is a member already; not joining again");
            None
        }
        None => {
            if let Some(secret) = &cfg.token {
                seed_token(&server_dir, secret)?;
            }
            None
        }
    };
    let pki = {
        let (dir, opts) = (
            server_dir.clone(),
            pki::PkiOptions {
                hostname: hostname.clone(),
                etcd_ips: vec![etcd_ip, node_ip],
                apiserver_dns_names: api_dns_names(cfg.api.as_ref()),
                apiserver_ips: api_ips(&cfg, node_ip),
            },
        );
        tokio::task::spawn_blocking(move || pki::Pki::ensure(&dir, &opts))
            .await
            .map_err(|e| Error::Serve(format!("pki task: {e}")))??
    };
    let ids = identity::load_or_create(&server_dir)?;

    // With an external datastore, this process is only the API server.
    if let Some(api) = &cfg.api {
        if let Some(ext) = &api.datastore {
            let ds = Arc::new(
                datastore::EtcdClient::connect(&ext.endpoint, &ext.tls)
                    .map_err(|e| Error::Serve(format!("datastore endpoint: {e}")))?,
            );
            let sup = supervisor_state(&pki, ids, None)?;
            let (ds, encryption) = secrets_encryption(&cfg, &pki, ds, ids, &shutdown)?;
            let server = apiserver::ApiServer::bind(&api_config(&cfg), &pki, ds, shutdown)
                .await?
                .with_supervisor(supervisor::router(sup), None)
                .with_secrets_encryption(encryption);
            return api_process(&cfg, &ids, &pki, server).run().await;
        }
    }

    let advertise_ip = if etcd_ip.is_unspecified() {
        node_ip
    } else {
        etcd_ip
    };
    let peer_addr = SocketAddr::new(node_ip, cfg.etcd_peer_port);
    let peer_urls = vec![format!("https://{peer_addr}")];
    let client_urls = vec![format!(
        "https://{}",
        SocketAddr::new(advertise_ip, cfg.etcd_client_addr.port())
    )];
    if let Some(cluster) = &joining {
        let added = cluster
            .add_member(&supervisor::JoinRequest {
                id: ids.member_id,
                name: hostname.clone(),
                peer_urls: peer_urls.clone(),
                client_urls: client_urls.clone(),
            })
            .await?;
        tracing::info!(
            member_id = ids.member_id,
            members = added.members.len(),
            "added to the cluster as a learner; the leader promotes this server once caught up"
        );
    }
    let node_cfg = NodeConfig {
        data_dir: etcd_snapshot::restore::member_dir(&server_dir, restore.as_ref())?,
        node_id: ids.member_id,
        name: hostname.clone(),
        peer_urls,
        client_urls,
        heartbeat_interval: HEARTBEAT,
        election_timeout: ELECTION_TIMEOUT,
        snapshot_entries: SNAPSHOT_ENTRIES,
    };
    let node = Node::start_member(node_cfg, peer_config(&cfg, &server_dir, peer_addr)?).await?;
    ready_notify::progress("datastore started; starting the Kubernetes API");
    if cfg.cluster_reset {
        // Like k3s: the reset is done; running on with the flag would reset again next time
        // (and drop the members added meanwhile).
        node.shutdown().await?;
        tracing::info!("cluster reset done: this server is a cluster of one with its data; restart it without --cluster-reset");
        if let (Some(r), Some(path)) = (&restore, &cfg.cluster_reset_restore_path) {
            tracing::info!(snapshot = %path.display(), revision = r.found.revision, "restored; restart without --cluster-reset and --cluster-reset-restore-path; on the other servers, back up and delete <data-dir>/server/db, then start them to rejoin");
        }
        return Ok(());
    }
    if cfg.initial_corrupt_check {
        if joining.is_some() {
            // A new member's store is empty until the leader sends it the data.
            tracing::info!("initial corruption check skipped: this server just joined");
        } else if let Err(e) = etcd::corrupt::check_initial(&node, &peer_hashes(&pki)).await {
            let _ = node.shutdown().await;
            return Err(e.into());
        }
    }
    let snapshots = etcd_snapshot::schedule::spawn(
        &cfg.snapshots,
        &cfg.data_dir,
        node.clone(),
        hostname,
        shutdown.child_token(),
    );
    // A member removed from the cluster, or whose datastore cannot write, stops serving.
    let stopped_by_datastore = tokio::spawn(watch_datastore(node.clone(), shutdown.clone()));

    let sup = supervisor_state(&pki, ids, Some(node.clone()))?;
    let https_server = match &cfg.api {
        Some(_) => {
            let ds = Arc::new(
                datastore::Embedded::new(node.clone())
                    .with_quota(datastore::quota::Quota::from_flag(cfg.quota_backend_bytes)),
            );
            match secrets_encryption(&cfg, &pki, ds, ids, &shutdown) {
                Ok((ds, encryption)) => {
                    apiserver::ApiServer::bind(&api_config(&cfg), &pki, ds, shutdown.clone())
                        .await
                        .map(|s| {
                            let metrics = sup.metrics.clone();
                            HttpsServer::Api(api_process(
                                &cfg,
                                &ids,
                                &pki,
                                s.with_supervisor(supervisor::router(sup), metrics)
                                    .with_secrets_encryption(encryption),
                            ))
                        })
                        .map_err(Error::from)
                }
                Err(e) => Err(e),
            }
        }
        None => bind_supervisor(&cfg, &pki, sup, shutdown.clone()).await,
    };
    let https_server = match https_server {
        Ok(s) => s,
        Err(e) => {
            let _ = node.shutdown().await;
            return Err(e);
        }
    };
    let api_task = {
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            let r = https_server.run().await;
            if let Err(e) = &r {
                tracing::error!(error = %e, "https server stopped; shutting down");
                shutdown.cancel();
            }
            r
        })
    };
    let served = serve(&cfg, &server_dir, &pki, ids, node.clone(), shutdown.clone()).await;
    shutdown.cancel();
    let api_result = api_task
        .await
        .map_err(|e| Error::Serve(format!("https server task: {e}")))
        .and_then(|r| r);
    if let Err(e) = &served {
        tracing::error!(error = %e, "etcd api stopped");
    }
    if let Some(task) = snapshots {
        let _ = task.await;
    }
    let stopped = node.shutdown().await;
    match stopped_by_datastore.await {
        Ok(Some(DatastoreStop::Removed)) => {
            return Err(Error::Serve(
                "this server was removed from the cluster; to rejoin, start it with a fresh data \
                 dir"
                .into(),
            ))
        }
        Ok(Some(DatastoreStop::Failed(cause))) => return Err(Error::DatastoreFailed(cause)),
        Ok(None) | Err(_) => {}
    }
    served?;
    api_result?;
    stopped?;
    tracing::info!("datastore stopped");
    Ok(())
}

/// Why the datastore stopped this server.
enum DatastoreStop {
    /// This member was removed from the cluster.
    Removed,
    /// Raft stopped on a storage failure (the cause).
    Failed(String),
}

/// Cancels `shutdown` when this member is removed from the cluster or its datastore cannot
/// write any more, and says which; `None` when `shutdown` came first.
async fn watch_datastore(node: Arc<Node>, shutdown: CancellationToken) -> Option<DatastoreStop> {
    let stop = tokio::select! {
        _ = node.removed() => {
            tracing::error!("this server was removed from the cluster; stopping");
            DatastoreStop::Removed
        }
        cause = node.failed() => {
            tracing::error!(cause = %cause, "the datastore cannot write; stopping");
            DatastoreStop::Failed(cause)
        }
        _ = shutdown.cancelled() => return None,
    };
    shutdown.cancel();
    Some(stop)
}

/// What serves the HTTPS port: the API server (with the supervisor routes) or, with
/// `--disable-apiserver`, the supervisor alone.
// One value per process, moved once into its task: the variants' sizes do not matter.
#[allow(clippy::large_enum_variant)]
enum HttpsServer {
    Api(ApiProcess),
    Supervisor {
        listener: tokio::net::TcpListener,
        tls: rustls::ServerConfig,
        app: axum::Router,
        stop: CancellationToken,
        limits: k3rs_apimachinery::tls::Limits,
    },
}

impl HttpsServer {
    async fn run(self) -> Result<()> {
        match self {
            HttpsServer::Api(s) => s.run().await,
            HttpsServer::Supervisor {
                listener,
                tls,
                app,
                stop,
                limits,
            } => {
                tracing::info!(addr = ?listener.local_addr().ok(), "supervisor listening (API server disabled)");
                // No /readyz without the API server: ready once the supervisor listens.
                if let Err(e) = k3rs_apimachinery::sd_notify::ready("supervisor serving") {
                    tracing::warn!(error = %e, "notifying the service manager (NOTIFY_SOCKET)");
                }
                k3rs_apimachinery::tls::serve(listener, tls, app, stop, &limits, "supervisor")
                    .await;
                Ok(())
            }
        }
    }
}

async fn bind_supervisor(
    cfg: &ServerConfig,
    pki: &pki::Pki,
    sup: Arc<supervisor::Supervisor>,
    stop: CancellationToken,
) -> Result<HttpsServer> {
    let (cert, key) = pki.apiserver_serving_cert();
    let tls = k3rs_apimachinery::tls::server_config(&cert, &key, &pki.client_ca_cert())
        .map_err(|e| Error::Api(e.into()))?;
    let listener = tokio::net::TcpListener::bind(cfg.https_listen)
        .await
        .map_err(|source| {
            Error::Api(apiserver::Error::Bind {
                addr: cfg.https_listen,
                source,
            })
        })?;
    Ok(HttpsServer::Supervisor {
        listener,
        tls,
        app: supervisor::standalone_router(sup),
        stop,
        limits: cfg.connection_limits.clone(),
    })
}

fn supervisor_state(
    pki: &pki::Pki,
    ids: identity::Identity,
    node: Option<Arc<Node>>,
) -> Result<Arc<supervisor::Supervisor>> {
    let path = pki.server_ca_cert();
    let server_ca_pem = std::fs::read(&path).map_err(|source| Error::Io { path, source })?;
    Ok(Arc::new(supervisor::Supervisor {
        server_ca_pem,
        tls_dir: pki.tls_dir().to_path_buf(),
        token: pki.server_token.clone(),
        cluster_id: ids.cluster_id,
        metrics: node.clone().map(|n| {
            supervisor::MetricsSource(Arc::new(move || {
                etcd::metrics::render(&etcd::metrics::Sample::of(&n))
            }))
        }),
        node,
    }))
}

/// `--token` on a new cluster: the server token's secret, unless the token file exists.
fn seed_token(server_dir: &std::path::Path, secret: &str) -> Result<()> {
    let path = server_dir.join("token");
    if path.exists() {
        return Ok(());
    }
    let token = join::parse_token(secret);
    let text = format!("server:{}\n", token.password);
    pki::files::write_atomic(&path, text.as_bytes(), pki::files::PRIVATE)?;
    Ok(())
}

/// The Raft peer service: mutual TLS with the etcd peer CA; how this member starts.
fn peer_config(
    cfg: &ServerConfig,
    server_dir: &std::path::Path,
    listen: SocketAddr,
) -> Result<PeerConfig> {
    let etcd_tls = server_dir.join("tls").join("etcd");
    let read = |name: &str| {
        let path = etcd_tls.join(name);
        std::fs::read(&path).map_err(|source| Error::Io { path, source })
    };
    let bootstrap = if cfg.cluster_reset {
        Bootstrap::ClusterReset
    } else if cfg.join.is_some() {
        // Added through the supervisor (or a member already): never initialize a cluster.
        Bootstrap::Join { peers: Vec::new() }
    } else {
        Bootstrap::NewCluster
    };
    Ok(PeerConfig {
        listen,
        tls: Some(PeerTls {
            ca_pem: read("peer-ca.crt")?,
            cert_pem: read("peer-server-client.crt")?,
            key_pem: read("peer-server-client.key")?,
        }),
        bootstrap,
    })
}

/// With `--secrets-encryption`, `ds` wrapped to encrypt Secrets with the keys of
/// `<data-dir>/server/cred/encryption-config.json` (created with a fresh key if missing), kept
/// the same as every other server's through the datastore (sealed with the token's secret)
/// by a supervised task until `stop`.
#[allow(clippy::type_complexity)]
fn secrets_encryption(
    cfg: &ServerConfig,
    pki: &pki::Pki,
    ds: Arc<dyn datastore::Datastore>,
    ids: identity::Identity,
    stop: &CancellationToken,
) -> Result<(
    Arc<dyn datastore::Datastore>,
    Option<Arc<encryption::SecretsEncryption>>,
)> {
    if !cfg.api.as_ref().is_some_and(|a| a.secrets_encryption) {
        return Ok((ds, None));
    }
    let cred = cfg.data_dir.join("server").join("cred");
    std::fs::create_dir_all(&cred)
        .map_err(|e| Error::Serve(format!("creating {}: {e}", cred.display())))?;
    let path = cred.join(encryption::config::FILE);
    let (enc, wrapped) = encryption::SecretsEncryption::open(path, ds.clone())
        .map_err(|e| Error::Serve(format!("secrets encryption: {e}")))?;
    let sync = Arc::new(encryption::KeySync::new(
        ds,
        &pki.server_token.password,
        &format!("{}-{:x}", identity::hostname(), ids.member_id),
    ));
    let shared = enc.clone();
    tokio::spawn(tasks::supervise(
        "secrets-encryption/sync",
        stop.clone(),
        move |stop| {
            let (shared, sync) = (shared.clone(), sync.clone());
            async move {
                if let Err(e) = shared.share(sync, stop).await {
                    tracing::warn!(error = %e, "secrets encryption: sharing the keys failed");
                }
            }
        },
    ));
    Ok((wrapped, Some(enc)))
}

fn api_config(cfg: &ServerConfig) -> apiserver::ApiServerConfig {
    let api = cfg.api.as_ref().expect("api settings");
    apiserver::ApiServerConfig {
        listen: cfg.https_listen,
        service_cidr: api.service_cidr,
        kubeconfig_path: api.write_kubeconfig.clone(),
        kubeconfig_mode: api.write_kubeconfig_mode,
        args: api.apiserver_args.clone(),
        limits: cfg.connection_limits.clone(),
        cluster_dns: api.cluster_dns,
        agent_config: api.agent_config.clone(),
        metric_resolution: api.metric_resolution,
    }
}

/// The API server with what runs beside it in this process.
fn api_process(
    cfg: &ServerConfig,
    ids: &identity::Identity,
    pki: &pki::Pki,
    server: apiserver::ApiServer,
) -> ApiProcess {
    let api = cfg.api.as_ref().expect("api settings");
    ApiProcess {
        server,
        components: components::Enabled {
            controller_manager: !api.disable_controller_manager,
            controller_args: api.controller_args.clone(),
            scheduler: !api.disable_scheduler,
            scheduler_args: api.scheduler_args,
            manifests_dir: Some(cfg.data_dir.join("server").join("manifests")),
            holder: leader_election::holder_identity(
                &identity::hostname(),
                ids.member_id,
                ids.cluster_id,
            ),
        },
        tls_dir: pki.tls_dir().to_path_buf(),
        ready_node: api.embedded_node.clone(),
    }
}

/// The API server and its in-process components (controller manager, scheduler) with the
/// `READY=1` notification, started in that order and stopped in the reverse.
#[derive(Debug)]
struct ApiProcess {
    server: apiserver::ApiServer,
    components: components::Enabled,
    tls_dir: std::path::PathBuf,
    /// The embedded agent's node: `READY=1` waits until it is Ready too.
    ready_node: Option<String>,
}

impl ApiProcess {
    async fn run(self) -> Result<()> {
        let api = self.server.start().await?;
        let stop = api.state().stop.clone();
        let clients: Arc<dyn ClientBuilder> = Arc::new(api.clients());
        let manager = components::ControllerManager {
            service_accounts: api.state().service_accounts.clone(),
            server_ca_pem: api.state().server_ca_pem.clone(),
            tls_dir: self.tls_dir,
        };
        // One informer factory per process: the controllers and the scheduler share the
        // API server's watches and caches.
        let running = components::spawn(
            clients.clone(),
            api.informers(),
            self.components,
            manager,
            &stop,
        );
        let ready = ready_notify::spawn(clients.as_ref(), self.ready_node, &stop);
        api.serve().await;
        ready.abort();
        for task in running {
            task.abort();
            let _ = task.await;
        }
        Ok(())
    }
}

/// The serving certificate's extra DNS names: the in-cluster service names and `--tls-san`
/// names.
fn api_dns_names(api: Option<&ApiSettings>) -> Vec<String> {
    let Some(api) = api else { return Vec::new() };
    let mut names: Vec<String> = [
        "kubernetes",
        "kubernetes.default",
        "kubernetes.default.svc",
        "kubernetes.default.svc.cluster.local",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    names.extend(
        api.tls_sans
            .iter()
            .filter(|s| s.parse::<IpAddr>().is_err())
            .cloned(),
    );
    names
}

/// The serving certificate's extra IPs: the bind address, the node IP, the `kubernetes`
/// service IP and `--tls-san` addresses (joining servers reach the supervisor on them).
fn api_ips(cfg: &ServerConfig, node_ip: IpAddr) -> Vec<IpAddr> {
    let mut ips = vec![node_ip];
    if !cfg.https_listen.ip().is_unspecified() {
        ips.push(cfg.https_listen.ip());
    }
    let Some(api) = &cfg.api else { return ips };
    ips.extend(api.tls_sans.iter().filter_map(|s| s.parse::<IpAddr>().ok()));
    ips.extend(apiserver::resources::cluster_ip::first_ip(
        &api.service_cidr,
    ));
    ips
}

/// How the corruption checks reach other members: their etcd client URLs, with the
/// cluster's etcd client certificate.
fn peer_hashes(pki: &pki::Pki) -> etcd::corrupt::PeerHashes {
    let (client_cert, client_key) = pki.etcd_client_cert();
    etcd::corrupt::PeerHashes {
        tls: datastore::EtcdTls {
            ca_file: Some(pki.etcd_server_ca_cert()),
            cert_file: Some(client_cert),
            key_file: Some(client_key),
        },
    }
}

async fn serve(
    cfg: &ServerConfig,
    server_dir: &std::path::Path,
    pki: &pki::Pki,
    ids: identity::Identity,
    node: Arc<Node>,
    shutdown: CancellationToken,
) -> Result<()> {
    use tonic::transport::{Certificate, Identity as TlsIdentity, Server, ServerTlsConfig};

    // Cancelled on shutdown, or when serving fails: ends streams and the compactor.
    let stop = shutdown.child_token();

    let read = |path: PathBuf| std::fs::read(&path).map_err(|source| Error::Io { path, source });
    let (cert, key) = pki.etcd_serving_cert();
    let tls = ServerTlsConfig::new()
        .identity(TlsIdentity::from_pem(read(cert)?, read(key)?))
        .client_ca_root(Certificate::from_pem(read(pki.etcd_server_ca_cert())?))
        .timeout(cfg.connection_limits.handshake_timeout);

    let api = etcd::Api::new(
        node.clone(),
        etcd::ApiConfig {
            cluster_id: ids.cluster_id,
            progress_notify_interval: cfg.watch_progress_notify_interval,
            scratch_dir: server_dir.join("tmp"),
            quota: etcd::quota::Quota::from_flag(cfg.quota_backend_bytes),
        },
        stop.clone(),
    );
    let corrupt_check = (!cfg.corrupt_check_time.is_zero()).then(|| {
        let peers = peer_hashes(pki);
        let (api, interval) = (api.clone(), cfg.corrupt_check_time);
        tokio::spawn(tasks::supervise(
            "etcd/corrupt-check",
            stop.clone(),
            move |stop| etcd::corrupt::run(api.clone(), interval, peers.clone(), stop),
        ))
    });

    let node_for_http = node.clone();
    // Supervised only when enabled: a disabled compactor returns at once, which supervision
    // would count as a failure.
    let compaction = if cfg.auto_compaction_retention.is_zero() {
        tracing::info!("automatic compaction disabled");
        None
    } else {
        let config = compactor::CompactorConfig {
            retention: cfg.auto_compaction_retention,
            ..Default::default()
        };
        Some(tokio::spawn(tasks::supervise(
            "datastore/compactor",
            stop.clone(),
            move |stop| compactor::run(node.clone(), config.clone(), stop),
        )))
    };

    let listener = tokio::net::TcpListener::bind(cfg.etcd_client_addr)
        .await
        .map_err(|e| Error::Serve(format!("binding {}: {e}", cfg.etcd_client_addr)))?;
    let local = listener
        .local_addr()
        .map_err(|e| Error::Serve(e.to_string()))?;
    tracing::info!(addr = %local, "etcd API listening on {local}");

    let incoming = k3rs_raft::conn_limit::incoming(listener, cfg.connection_limits.max_connections);
    let server = Server::builder()
        .tls_config(tls)
        .map_err(|e| Error::Serve(format!("tls: {e}")))?
        .http2_keepalive_interval(Some(Duration::from_secs(30)))
        .http2_keepalive_timeout(Some(Duration::from_secs(10)))
        // etcd allows any number of streams per connection (clients multiplex watches on one
        // connection); hyper would stop at 200.
        .max_concurrent_streams(u32::MAX)
        // Like grpc-go's BDP estimation: large values and snapshots are not window-bound.
        .http2_adaptive_window(Some(true))
        // etcd serves `/metrics` and `/health` over HTTP on the client port too.
        .accept_http1(true)
        .add_routes(tonic::service::Routes::from(
            api.routes()
                .into_axum_router()
                .merge(etcd::http::routes(node_for_http)),
        ))
        .serve_with_incoming_shutdown(incoming, stop.clone().cancelled_owned());
    tokio::pin!(server);

    let result = tokio::select! {
        r = &mut server => r.map_err(|e| Error::Serve(e.to_string())),
        _ = async { stop.cancelled().await; tokio::time::sleep(DRAIN_GRACE).await } => {
            tracing::warn!("open etcd API connections did not drain in {DRAIN_GRACE:?}; closing them");
            Ok(())
        }
    };
    stop.cancel();
    if let Some(compaction) = compaction {
        let _ = compaction.await;
    }
    if let Some(check) = corrupt_check {
        let _ = check.await;
    }
    result
}
