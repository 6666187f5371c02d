//! `k3rs`: the command line. Parses flags and dispatches to the crates; nothing else.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

mod airgap_images;
mod certificate;
mod config_file;
mod disable;
mod embedded_agent;
mod etcd_snapshot_cli;
mod multicall;
mod node_flags;
mod open_files;
mod runtime_tools;
mod service_network;
mod switch;

use anyhow::Context;
use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};
use tokio_util::sync::CancellationToken;

/// The process's allocator. With glibc's, `malloc` and `free` were a third of the server's
/// CPU at 5,000 hollow nodes, most of it in the allocator's own free-list searches
/// (`_int_malloc`, `unlink_chunk`); see docs/scale.md, "Session 25". Built without its
/// transparent-huge-page advice (`no_thp`), which quadrupled the idle server's anonymous
/// memory.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "k3rs",
    version = k3rs_apimachinery::version::GIT_VERSION,
    about = "A lightweight, single-binary Kubernetes distribution"
)]
struct Cli {
    /// Turn on debug logs.
    #[arg(long, global = true, env = "K3RS_DEBUG", value_parser = crate::switch::parse)]
    debug: bool,
    /// Log format.
    #[arg(
        long,
        global = true,
        value_enum,
        default_value = "text",
        env = "K3RS_LOG_FORMAT"
    )]
    log_format: LogFormat,
    /// Config file with the same keys as the flags (flags given here win); its
    /// `<file>.d/*.yaml` are read after it.
    #[arg(
        long,
        short = 'c',
        global = true,
        env = config_file::ENV,
        default_value = config_file::DEFAULT_PATH,
        value_name = "FILE"
    )]
    config: PathBuf,
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

// Parsed once at start; the size of the server's flags does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
enum Command {
    /// Run the control plane (datastore with the etcd v3 API).
    Server(ServerArgs),
    /// Run a worker node: join with --server URL --token TOKEN (or simulated nodes: --hollow N).
    Agent(AgentArgs),
    /// Manage bootstrap tokens (agents join with them); run on a server.
    Token(TokenArgs),
    /// Secrets encryption at rest (servers started with --secrets-encryption); run on a server.
    SecretsEncrypt(SecretsEncryptArgs),
    /// Datastore snapshots: save, ls, delete, prune; run on a server.
    EtcdSnapshot(etcd_snapshot_cli::EtcdSnapshotArgs),
    /// Check the kernel and host for what a k3rs node needs (exit status 1 when a check fails).
    CheckConfig,
    /// Check or rotate the node's certificates.
    Certificate(certificate::CertificateArgs),
    /// Inspect the node's containers, pods and images over CRI (crictl's ps, pods, images,
    /// inspect, inspectp, logs, rmi, version).
    Crictl(runtime_tools::CrictlArgs),
    /// Write the air-gap images tarball (the pause image k3rs embeds), as releases ship it.
    AirgapImages(airgap_images::AirgapImagesArgs),
    /// Run containerd's ctr against the node's containerd (namespace k8s.io).
    #[command(disable_help_flag = true)]
    Ctr(runtime_tools::CtrArgs),
    /// Run kubectl as the cluster admin (/etc/k3rs/k3rs.yaml unless KUBECONFIG is set): the
    /// PATH's kubectl, else the k3rs-kubectl install.sh put beside k3rs.
    #[command(disable_help_flag = true)]
    Kubectl {
        /// kubectl's own arguments.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<std::ffi::OsString>,
    },
}

/// How the commands run on a server machine reach its API server as its admin (like k3s).
#[derive(Args)]
struct ServerAccess {
    /// The server's data dir (its admin credentials are in <data-dir>/server/cred).
    #[arg(
        long,
        short = 'd',
        global = true,
        default_value = "/var/lib/k3rs",
        env = "K3RS_DATA_DIR"
    )]
    data_dir: PathBuf,
    /// Use this kubeconfig instead of the server's admin credentials.
    #[arg(long, global = true)]
    kubeconfig: Option<PathBuf>,
}

impl ServerAccess {
    /// The kubeconfig to use: the given one, else the server's admin kubeconfig.
    fn kubeconfig(&self) -> PathBuf {
        self.kubeconfig
            .clone()
            .unwrap_or_else(|| k3rs_apiserver::tokens::client::admin_kubeconfig(&self.data_dir))
    }
}

#[derive(Args)]
struct SecretsEncryptArgs {
    #[command(subcommand)]
    command: SecretsEncryptCommand,
    #[command(flatten)]
    access: ServerAccess,
}

#[derive(Subcommand)]
enum SecretsEncryptCommand {
    /// Whether Secrets are encrypted, and the keys.
    Status,
    /// Re-encrypt every Secret with the active key.
    Reencrypt,
    /// Make a fresh key active, re-encrypt every Secret with it, drop the old keys.
    RotateKeys,
}

#[derive(Args)]
struct AgentArgs {
    /// The API server (https://<server>:6443); overrides the kubeconfig's server.
    #[arg(long, short = 's', env = "K3RS_URL")]
    server: Option<String>,
    /// Join token (K10<CA hash>::<id>.<secret>, as in the server's agent-token file); with
    /// --hollow, a bearer token.
    #[arg(
        long,
        short = 't',
        env = "K3RS_TOKEN",
        hide_env_values = true,
        requires = "server"
    )]
    token: Option<String>,
    /// File holding the join token.
    #[arg(long, env = "K3RS_TOKEN_FILE", conflicts_with = "token")]
    token_file: Option<PathBuf>,
    #[command(flatten)]
    node: node_flags::NodeFlags,
    /// The node's InternalIP (repeatable; default: the address of the default route).
    #[arg(long = "node-ip", env = "K3RS_NODE_IP", value_delimiter = ',')]
    node_ip: Vec<IpAddr>,
    /// Directory for state; the agent uses <data-dir>/agent.
    #[arg(
        long,
        short = 'd',
        default_value = "/var/lib/k3rs",
        env = "K3RS_DATA_DIR"
    )]
    data_dir: PathBuf,
    /// How long to wait for the node's client certificate to be issued.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    csr_timeout: Duration,
    /// CA bundle that signed the API server's certificate (with --token).
    #[arg(long, env = "K3RS_CERTIFICATE_AUTHORITY")]
    certificate_authority: Option<PathBuf>,
    /// Kubeconfig to reach the API server with (stands in for the bootstrap-token TLS
    /// bootstrap for now).
    #[arg(long, env = "K3RS_AGENT_KUBECONFIG", conflicts_with = "token")]
    kubeconfig: Option<PathBuf>,
    /// Run this many simulated nodes (kubemark's hollow nodes) instead of a real kubelet.
    #[arg(long, env = "K3RS_HOLLOW")]
    hollow: Option<usize>,
    /// Name prefix of the hollow nodes (<prefix><index>).
    #[arg(long, default_value = "hollow-", env = "K3RS_HOLLOW_NAME_PREFIX")]
    hollow_name_prefix: String,
    /// CPU capacity of each hollow node.
    #[arg(long, default_value = "4")]
    hollow_cpu: String,
    /// Memory capacity of each hollow node.
    #[arg(long, default_value = "16Gi")]
    hollow_memory: String,
    /// Pod capacity of each hollow node.
    #[arg(long, default_value = "110")]
    hollow_pods: String,
    /// Ephemeral-storage capacity of each hollow node.
    #[arg(long, default_value = "100Gi")]
    hollow_ephemeral_storage: String,
    /// How long the containers of a Job's pod run on a hollow node before they exit.
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    hollow_job_duration: Duration,
    /// How often a hollow node renews its Lease (its leaseDurationSeconds is 4 times this).
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    node_lease_renew_interval: Duration,
    /// How often a hollow node reports its status when nothing changed.
    #[arg(long, default_value = "5m", value_parser = parse_duration)]
    node_status_report_frequency: Duration,
    /// Requests the agent has outstanding at most.
    #[arg(long, default_value_t = 64)]
    max_requests_in_flight: usize,
    /// The pod network, as the server's --cluster-cidr: the proxy masquerades traffic from
    /// outside it to cluster IPs.
    #[arg(long, default_value = "10.42.0.0/16", env = "K3RS_CLUSTER_CIDR")]
    cluster_cidr: ipnet::Ipv4Net,
}

#[derive(Args)]
struct TokenArgs {
    #[command(subcommand)]
    command: TokenCommand,
    #[command(flatten)]
    access: ServerAccess,
}

#[derive(Subcommand)]
enum TokenCommand {
    /// Create a bootstrap token and print it as K10<CA hash>::<id>.<secret>.
    Create {
        /// The token (<id>.<secret>, [a-z0-9]{6}.[a-z0-9]{16}); default: a random one.
        token: Option<String>,
        /// Lifetime (e.g. 30m, 24h); 0 never expires.
        #[arg(long, default_value = "24h", value_parser = parse_duration)]
        ttl: Duration,
        /// A human-friendly description.
        #[arg(long, default_value = "")]
        description: String,
        /// Extra groups the token authenticates as (system:bootstrappers:...).
        #[arg(
            long,
            value_delimiter = ',',
            default_value = k3rs_apiserver::tokens::DEFAULT_GROUP
        )]
        groups: Vec<String>,
        /// What the token may be used for (authentication, signing).
        #[arg(long, value_delimiter = ',', default_value = "signing,authentication")]
        usages: Vec<String>,
    },
    /// List the bootstrap tokens.
    List,
    /// Delete bootstrap tokens (by id or whole token).
    Delete {
        #[arg(required = true)]
        ids: Vec<String>,
    },
}

#[derive(Args)]
struct ServerArgs {
    /// Directory for state; the server uses <data-dir>/server.
    #[arg(
        long,
        short = 'd',
        default_value = "/var/lib/k3rs",
        env = "K3RS_DATA_DIR"
    )]
    data_dir: PathBuf,
    /// Port of the etcd v3 gRPC API (mTLS with the cluster's etcd CA).
    #[arg(long, default_value_t = 2379, env = "K3RS_ETCD_CLIENT_PORT")]
    etcd_client_port: u16,
    /// Port of the Raft peer service (mTLS with the cluster's etcd peer CA), on the etcd
    /// client address.
    #[arg(long, default_value_t = 2380, env = "K3RS_ETCD_PEER_PORT")]
    etcd_peer_port: u16,
    /// Start a new cluster on the embedded datastore, which other servers then join with
    /// --server (k3s's flag for its embedded etcd). k3rs's embedded datastore is always such a
    /// cluster (Raft behind the etcd v3 API), so this states the default; it cannot be used
    /// with --datastore-endpoint, and a server given --server joins that cluster instead.
    #[arg(long, env = "K3RS_CLUSTER_INIT", value_parser = crate::switch::parse)]
    cluster_init: bool,
    /// Rewrite this server's membership to itself alone, keeping its data (after losing the
    /// majority of servers), and exit; then start it without the flag and add fresh servers.
    #[arg(long, env = "K3RS_CLUSTER_RESET", value_parser = crate::switch::parse)]
    cluster_reset: bool,
    #[command(flatten)]
    snapshots: etcd_snapshot_cli::ServerSnapshotArgs,
    /// Join the cluster of this server (https://<server>:6443) on first start; needs --token.
    #[arg(long, short = 's', env = "K3RS_URL", requires = "token")]
    server: Option<String>,
    /// The cluster's server token (K10<CA hash>::server:<secret>, or the bare secret). Without
    /// --server: the secret of a new cluster's token.
    #[arg(long, short = 't', env = "K3RS_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// Address other servers reach this one at (peer URL); default: the address of the
    /// default route's interface.
    #[arg(long, env = "K3RS_NODE_IP")]
    node_ip: Option<IpAddr>,
    /// Address advertised to other servers when --node-ip is not given.
    #[arg(long, env = "K3RS_ADVERTISE_ADDRESS")]
    advertise_address: Option<IpAddr>,
    /// Address the etcd client port listens on.
    #[arg(long, default_value = "127.0.0.1", env = "K3RS_ETCD_CLIENT_ADDRESS")]
    etcd_client_address: IpAddr,
    /// Keep this much revision history before automatic compaction (e.g. 5m, 1h); 0 disables it.
    #[arg(long, default_value = "5m", value_parser = parse_duration, env = "K3RS_ETCD_AUTO_COMPACTION_RETENTION")]
    etcd_auto_compaction_retention: Duration,
    /// Interval of watch progress notifications for watchers that request them (like etcd's
    /// --experimental-watch-progress-notify-interval).
    #[arg(
        long,
        default_value = "10m",
        value_parser = parse_duration,
        env = "K3RS_ETCD_WATCH_PROGRESS_NOTIFY_INTERVAL"
    )]
    etcd_watch_progress_notify_interval: Duration,
    /// Backend quota in bytes, like etcd's --quota-backend-bytes: when the database would
    /// outgrow it, the member raises the NOSPACE alarm and refuses writes that add data until
    /// the space is reclaimed (compact, defrag) and the alarm disarmed. 0: etcd's default of
    /// 2 GiB; negative: no quota.
    #[arg(
        long,
        default_value_t = 0,
        allow_negative_numbers = true,
        env = "K3RS_ETCD_QUOTA_BACKEND_BYTES"
    )]
    etcd_quota_backend_bytes: i64,
    /// Interval of the leader's cross-member data check, like etcd's
    /// --experimental-corrupt-check-time: a member whose HashKV differs gets the CORRUPT alarm,
    /// which refuses writes. 0 (the default, as etcd's) disables it.
    #[arg(
        long,
        default_value = "0s",
        value_parser = parse_duration,
        env = "K3RS_ETCD_EXPERIMENTAL_CORRUPT_CHECK_TIME"
    )]
    etcd_experimental_corrupt_check_time: Duration,
    /// Before serving, compare this member's data (HashKV) with the other members' and refuse
    /// to start if it differs, like etcd's --experimental-initial-corrupt-check.
    #[arg(long, env = "K3RS_ETCD_EXPERIMENTAL_INITIAL_CORRUPT_CHECK", value_parser = crate::switch::parse)]
    etcd_experimental_initial_corrupt_check: bool,
    /// Write the datastore's keys and values as raw bytes in the Raft log, WAL and peer
    /// messages (MessagePack bin) instead of integer arrays: less CPU and fewer bytes. Every
    /// server of the cluster must run a release that reads it (this one or later) first;
    /// either form is always read.
    #[arg(long, env = "K3RS_ETCD_COMPACT_ENCODING", value_parser = crate::switch::parse)]
    etcd_compact_encoding: bool,
    /// Port of the Kubernetes API (HTTPS).
    #[arg(long, default_value_t = 6443, env = "K3RS_HTTPS_LISTEN_PORT")]
    https_listen_port: u16,
    /// Address the Kubernetes API listens on.
    #[arg(long, default_value = "0.0.0.0", env = "K3RS_BIND_ADDRESS")]
    bind_address: IpAddr,
    /// Extra host name or IP for the API serving certificate (repeatable).
    #[arg(long = "tls-san", env = "K3RS_TLS_SAN", value_delimiter = ',')]
    tls_san: Vec<String>,
    /// Where to write the admin kubeconfig.
    #[arg(
        long,
        default_value = "/etc/k3rs/k3rs.yaml",
        env = "K3RS_KUBECONFIG_OUTPUT"
    )]
    write_kubeconfig: PathBuf,
    /// File mode of the admin kubeconfig (octal).
    #[arg(long, default_value = "0600", value_parser = parse_mode, env = "K3RS_KUBECONFIG_MODE")]
    write_kubeconfig_mode: u32,
    /// IPv4 network for service ClusterIPs.
    #[arg(long, default_value = "10.43.0.0/16", env = "K3RS_SERVICE_CIDR")]
    service_cidr: ipnet::IpNet,
    /// The cluster DNS address: the `kube-system/kube-dns` Service's ClusterIP and the
    /// nameserver kubelets give pods (default: the tenth address of --service-cidr,
    /// 10.43.0.10). Must be inside --service-cidr.
    #[arg(long, env = "K3RS_CLUSTER_DNS")]
    cluster_dns: Option<IpAddr>,
    /// IPv4 network for pod IPs.
    #[arg(long, default_value = "10.42.0.0/16", env = "K3RS_CLUSTER_CIDR")]
    cluster_cidr: ipnet::IpNet,
    /// Do not run the embedded agent (the server's own node: kubelet on containerd, proxy).
    #[arg(long, env = "K3RS_DISABLE_AGENT", value_parser = crate::switch::parse)]
    disable_agent: bool,
    #[command(flatten)]
    node: node_flags::NodeFlags,
    /// Serve the datastore (etcd API) only, without the Kubernetes API.
    #[arg(long, env = "K3RS_DISABLE_APISERVER", value_parser = crate::switch::parse)]
    disable_apiserver: bool,
    /// Do not run the controller manager (the in-process controllers), as k3s's flag.
    #[arg(long, env = "K3RS_DISABLE_CONTROLLER_MANAGER", value_parser = crate::switch::parse)]
    disable_controller_manager: bool,
    /// Do not run the scheduler, as k3s's flag (pods stay unbound unless something else
    /// binds them).
    #[arg(long, env = "K3RS_DISABLE_SCHEDULER", value_parser = crate::switch::parse)]
    disable_scheduler: bool,
    /// Do not run these packaged components (k3s's flag; repeatable or comma-separated):
    /// coredns (the kube-dns Service and the embedded DNS), servicelb, local-storage (the
    /// local-path provisioner), metrics-server (the built-in metrics.k8s.io API),
    /// network-policy, traefik or ingress (the built-in ingress controller). runtimes is not
    /// shipped by k3rs: disabling it only warns. Objects created by an earlier start are kept.
    #[arg(
        long = "disable",
        value_name = "COMPONENT",
        value_delimiter = ',',
        env = "K3RS_DISABLE"
    )]
    disable: Vec<String>,
    /// How often the built-in metrics API scrapes the kubelets (metrics-server's flag; k3s
    /// runs it with 15s): the window `kubectl top` and the HPA see.
    #[arg(long, default_value = "15s", value_parser = parse_duration, env = "K3RS_METRIC_RESOLUTION")]
    metric_resolution: Duration,
    /// Where the local-path provisioner creates volumes (default <data-dir>/storage).
    #[arg(long, env = "K3RS_DEFAULT_LOCAL_STORAGE_PATH")]
    default_local_storage_path: Option<PathBuf>,
    /// Encrypt Secrets at rest (AES-GCM; keys in <data-dir>/server/cred/encryption-config.json).
    #[arg(long, env = "K3RS_SECRETS_ENCRYPTION", value_parser = crate::switch::parse)]
    secrets_encryption: bool,
    /// A kube-controller-manager flag as KEY=VALUE (repeatable): `controllers=…` (e.g.
    /// `controllers=*,-resourcequota`), `cluster-cidr`, `node-monitor-grace-period`; an
    /// unknown KEY is refused.
    #[arg(long = "kube-controller-manager-arg", value_name = "KEY=VALUE")]
    kube_controller_manager_arg: Vec<String>,
    /// A kube-scheduler flag as KEY=VALUE (repeatable; today `leader-elect=false`, which runs
    /// the scheduler without the `kube-system/kube-scheduler` Lease; an unknown KEY is
    /// refused).
    #[arg(long = "kube-scheduler-arg", value_name = "KEY=VALUE")]
    kube_scheduler_arg: Vec<String>,
    /// A kube-apiserver flag as KEY=VALUE (repeatable): `authorization-mode=Node,RBAC` (the
    /// default), `default-not-ready-toleration-seconds=300`,
    /// `default-unreachable-toleration-seconds=300`, and the `audit-*`, `token-auth-file`,
    /// `requestheader-*`, `authentication-token-webhook-*`, `authorization-webhook-*`,
    /// `authorization-policy-file`, `oidc-*`, `authentication-config` and
    /// `admission-control-config-file` families (an unknown KEY prints the full list).
    #[arg(long = "kube-apiserver-arg", value_name = "KEY=VALUE")]
    kube_apiserver_arg: Vec<String>,
    /// PodSecurity admission configuration (an AdmissionConfiguration with defaults and
    /// exemptions), as k3s's flag; the same as
    /// `--kube-apiserver-arg=admission-control-config-file=FILE`.
    #[arg(long, env = "K3RS_POD_SECURITY_ADMISSION_CONFIG_FILE")]
    pod_security_admission_config_file: Option<PathBuf>,
    /// Use this etcd (https://host:port) instead of the embedded datastore.
    #[arg(long, env = "K3RS_DATASTORE_ENDPOINT")]
    datastore_endpoint: Option<String>,
    /// CA bundle of the external datastore.
    #[arg(long, env = "K3RS_DATASTORE_CAFILE")]
    datastore_cafile: Option<PathBuf>,
    /// Client certificate for the external datastore.
    #[arg(long, env = "K3RS_DATASTORE_CERTFILE")]
    datastore_certfile: Option<PathBuf>,
    /// Client key for the external datastore.
    #[arg(long, env = "K3RS_DATASTORE_KEYFILE")]
    datastore_keyfile: Option<PathBuf>,
    /// How long a client of the HTTPS and etcd ports may take to finish its TLS handshake
    /// (hidden: for tests).
    #[arg(long, hide = true, default_value = "10s", value_parser = parse_duration)]
    tls_handshake_timeout: Duration,
    /// How long an HTTPS connection may wait before sending a request header (hidden: for
    /// tests).
    #[arg(long, hide = true, default_value = "30s", value_parser = parse_duration)]
    https_header_read_timeout: Duration,
}

/// A flag value clap's parsers below refuse (the message clap prints after the flag).
#[derive(Debug, thiserror::Error)]
enum FlagValueError {
    #[error("invalid file mode {0:?}: expected octal, e.g. 0600")]
    Mode(String),
    #[error("invalid duration {0:?}: expected a Go duration, e.g. 30s, 5m, 1h30m")]
    Duration(String),
}

fn parse_mode(s: &str) -> Result<u32, FlagValueError> {
    u32::from_str_radix(s.trim_start_matches("0o"), 8)
        .ok()
        .filter(|m| *m <= 0o777)
        .ok_or_else(|| FlagValueError::Mode(s.to_string()))
}

/// A flag's duration, in Go's form (`30s`, `5m`, `1h30m`, `1.5h`), as k3s's flags take it.
fn parse_duration(s: &str) -> Result<Duration, FlagValueError> {
    k3rs_apimachinery::duration::parse(s).ok_or_else(|| FlagValueError::Duration(s.to_string()))
}

fn init_logging(debug: bool, format: LogFormat) {
    // openraft narrates every election at info; keep its warnings only unless debugging.
    let default = if debug { "debug" } else { "info,openraft=warn" };
    let filter = tracing_subscriber::EnvFilter::try_from_env("K3RS_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

/// Cancels `token` on the first SIGTERM or SIGINT.
fn cancel_on_signal(token: CancellationToken) -> anyhow::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).context("installing SIGTERM handler")?;
    let mut int = signal(SignalKind::interrupt()).context("installing SIGINT handler")?;
    tokio::spawn(async move {
        tokio::select! {
            _ = term.recv() => tracing::info!("SIGTERM received, shutting down"),
            _ = int.recv() => tracing::info!("SIGINT received, shutting down"),
        }
        if let Err(e) = k3rs_apimachinery::sd_notify::stopping("shutting down") {
            tracing::warn!(error = %e, "notifying the service manager (NOTIFY_SOCKET)");
        }
        token.cancel();
    });
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // The config file's settings become flags before the command line's own; a flag given
    // twice keeps its last value (a repeatable one keeps all).
    let command = Cli::command().mut_subcommands(|s| s.args_override_self(true));
    let argv = multicall::argv(std::env::args_os().collect());
    let argv = config_file::expand(argv, &command)?;
    let cli =
        Cli::from_arg_matches_mut(&mut command.get_matches_from(argv)).unwrap_or_else(|e| e.exit());
    init_logging(cli.debug, cli.log_format);
    if matches!(cli.command, Command::Server(_) | Command::Agent(_)) {
        open_files::raise();
    }
    match cli.command {
        Command::Server(mut args) => {
            // Checked here, not by clap's `conflicts_with`: clap counts a switch as given when
            // its environment variable is set at all, even empty (off).
            if args.cluster_init && args.datastore_endpoint.is_some() {
                Cli::command()
                    .error(
                        clap::error::ErrorKind::ArgumentConflict,
                        "the argument '--cluster-init' cannot be used with '--datastore-endpoint'",
                    )
                    .exit()
            }
            let disabled = disable::Disabled::parse(&args.disable).unwrap_or_else(|e| {
                Cli::command()
                    .error(clap::error::ErrorKind::InvalidValue, e)
                    .exit()
            });
            for warning in disabled.warnings() {
                tracing::warn!("{warning}");
            }
            if args.metric_resolution < Duration::from_secs(1) {
                Cli::command()
                    .error(
                        clap::error::ErrorKind::InvalidValue,
                        "--metric-resolution must be at least 1s",
                    )
                    .exit()
            }
            // The server's own settings first, so that a --kube-controller-manager-arg
            // overrides them (as in k3s).
            let controller_args = std::iter::once(format!("cluster-cidr={}", args.cluster_cidr))
                .chain(args.kube_controller_manager_arg.iter().cloned())
                .collect::<Vec<_>>();
            let mut controller_args = k3rs_controllers::Args::parse(&controller_args)
                .unwrap_or_else(|e| {
                    Cli::command()
                        .error(clap::error::ErrorKind::InvalidValue, e)
                        .exit()
                });
            for controller in disabled.controllers() {
                controller_args.controllers.exclude(controller);
            }
            controller_args.system_default_registry = args.node.system_default_registry.clone();
            controller_args.local_storage = (!disabled.local_storage).then(|| {
                args.default_local_storage_path
                    .clone()
                    .unwrap_or_else(|| args.data_dir.join("storage"))
            });
            // k3s's own flag first, so that a --kube-apiserver-arg overrides it.
            let kube_apiserver_args = args
                .pod_security_admission_config_file
                .iter()
                .map(|p| format!("admission-control-config-file={}", p.display()))
                .chain(args.kube_apiserver_arg.iter().cloned())
                .collect::<Vec<_>>();
            let apiserver_args = k3rs_apiserver::args::Args::parse(&kube_apiserver_args)
                .unwrap_or_else(|e| {
                    Cli::command()
                        .error(clap::error::ErrorKind::InvalidValue, e)
                        .exit()
                });
            let scheduler_args = k3rs_scheduler::args::Args::parse(&args.kube_scheduler_arg)
                .unwrap_or_else(|e| {
                    Cli::command()
                        .error(clap::error::ErrorKind::InvalidValue, e)
                        .exit()
                });
            let cluster_dns = service_network::cluster_dns(args.service_cidr, args.cluster_dns)
                .unwrap_or_else(|e| {
                    Cli::command()
                        .error(clap::error::ErrorKind::InvalidValue, e)
                        .exit()
                });
            if args.cluster_init && args.server.is_some() {
                tracing::info!("--cluster-init with --server: joining that server's cluster");
            }
            if let Err(e) = args.node.check_component_args() {
                Cli::command()
                    .error(clap::error::ErrorKind::InvalidValue, e)
                    .exit()
            }
            // The embedded agent answers cluster DNS only while the cluster has it.
            args.node.disable_cluster_dns |= disabled.coredns;
            args.node.disable_network_policy |= disabled.network_policy;
            args.node.disable_ingress |= disabled.ingress;
            // The cluster's pod network backend is the server's: its agents learn it from the
            // agent-config answer, and its own node runs it whatever that answer says.
            let flannel_backend = (args.node.flannel_backend)
                .get_or_insert_with(|| k3rs_agent::pod_network::Backend::DEFAULT.to_string())
                .clone();
            let agent = (!args.disable_agent && !args.disable_apiserver).then(|| {
                let join = node_flags::Join {
                    server: format!("https://127.0.0.1:{}", args.https_listen_port),
                    token: None,
                    data_dir: args.data_dir.clone(),
                    node_ips: args.node_ip.into_iter().collect(),
                    cluster_cidr: pod_network(args.cluster_cidr),
                    cluster_dns: Some(cluster_dns),
                    csr_timeout: Duration::from_secs(60),
                };
                // Wrong kubelet flags are refused now, not after the server started.
                let node = match args.node.agent_config(join.clone()) {
                    Ok(cfg) => cfg.node.name,
                    Err(e) => Cli::command()
                        .error(clap::error::ErrorKind::InvalidValue, e)
                        .exit(),
                };
                (args.node.clone(), join, node)
            });
            let embedded_node = agent.as_ref().map(|(_, _, node)| node.clone());
            let cfg = k3rs_server::ServerConfig {
                data_dir: args.data_dir,
                etcd_client_addr: SocketAddr::new(args.etcd_client_address, args.etcd_client_port),
                auto_compaction_retention: args.etcd_auto_compaction_retention,
                watch_progress_notify_interval: args.etcd_watch_progress_notify_interval,
                quota_backend_bytes: args.etcd_quota_backend_bytes,
                corrupt_check_time: args.etcd_experimental_corrupt_check_time,
                initial_corrupt_check: args.etcd_experimental_initial_corrupt_check,
                compact_encoding: args.etcd_compact_encoding,
                etcd_peer_port: args.etcd_peer_port,
                cluster_reset: args.cluster_reset,
                cluster_reset_restore_path: args.snapshots.cluster_reset_restore_path.clone(),
                snapshots: args.snapshots.settings(),
                https_listen: SocketAddr::new(args.bind_address, args.https_listen_port),
                node_ip: args.node_ip.or(args.advertise_address),
                join: args.server.map(|server| k3rs_server::join::JoinConfig {
                    server,
                    token: args.token.clone().unwrap_or_default(),
                }),
                token: args.token,
                connection_limits: k3rs_apimachinery::tls::Limits {
                    handshake_timeout: args.tls_handshake_timeout,
                    header_read_timeout: args.https_header_read_timeout,
                    ..k3rs_server::https_limits()
                },
                api: (!args.disable_apiserver).then(|| k3rs_server::ApiSettings {
                    tls_sans: args.tls_san,
                    write_kubeconfig: Some(args.write_kubeconfig),
                    write_kubeconfig_mode: args.write_kubeconfig_mode,
                    service_cidr: args.service_cidr,
                    cluster_cidr: args.cluster_cidr,
                    disable_controller_manager: args.disable_controller_manager,
                    disable_scheduler: args.disable_scheduler,
                    cluster_dns: (!disabled.coredns).then_some(cluster_dns),
                    scheduler_args,
                    agent_config: k3rs_apimachinery::agent_config::AgentConfig {
                        cluster_dns: vec![cluster_dns],
                        system_default_registry: args.node.system_default_registry.clone(),
                        disable_network_policy: disabled.network_policy,
                        disable_ingress: disabled.ingress,
                        flannel_backend: Some(flannel_backend),
                    },
                    metric_resolution: (!disabled.metrics_server).then_some(args.metric_resolution),
                    controller_args,
                    secrets_encryption: args.secrets_encryption,
                    apiserver_args,
                    embedded_node,
                    datastore: args.datastore_endpoint.map(|endpoint| {
                        k3rs_server::ExternalDatastore {
                            endpoint,
                            tls: k3rs_datastore::EtcdTls {
                                ca_file: args.datastore_cafile,
                                cert_file: args.datastore_certfile,
                                key_file: args.datastore_keyfile,
                            },
                        }
                    }),
                }),
            };
            let shutdown = CancellationToken::new();
            cancel_on_signal(shutdown.clone())?;
            let agent =
                agent.map(|(flags, join, _)| embedded_agent::spawn(flags, join, shutdown.clone()));
            let result = k3rs_server::run(cfg, shutdown.clone()).await;
            shutdown.cancel();
            if let Some(agent) = agent {
                let _ = agent.await;
            }
            result.context("k3rs server")?;
        }
        Command::Agent(args) => run_agent(args).await?,
        Command::EtcdSnapshot(args) => etcd_snapshot_cli::run(args).await?,
        Command::CheckConfig => check_config(),
        Command::AirgapImages(args) => airgap_images::run(args)?,
        Command::Certificate(args) => certificate::run(args)?,
        Command::Kubectl { args } => return Err(kubectl(args)),
        Command::Crictl(args) => runtime_tools::crictl(args).await?,
        Command::Ctr(args) => return Err(runtime_tools::ctr(args)),
        Command::Token(args) => {
            use k3rs_apiserver::tokens::{client, TokenSpec};
            let cmd = match args.command {
                TokenCommand::Create {
                    token,
                    ttl,
                    description,
                    groups,
                    usages,
                } => client::Command::Create {
                    token,
                    spec: TokenSpec {
                        ttl: (!ttl.is_zero()).then_some(ttl),
                        description,
                        usages,
                        groups: groups.into_iter().filter(|g| !g.is_empty()).collect(),
                    },
                },
                TokenCommand::List => client::Command::List,
                TokenCommand::Delete { ids } => client::Command::Delete { ids },
            };
            let out = client::run(
                &args.access.data_dir,
                args.access.kubeconfig.as_deref(),
                cmd,
            )
            .await
            .context("k3rs token")?;
            print!("{out}");
        }
        Command::SecretsEncrypt(args) => {
            use k3rs_datastore::encryption::client::{run, Op};
            let op = match args.command {
                SecretsEncryptCommand::Status => Op::Status,
                SecretsEncryptCommand::Reencrypt => Op::Reencrypt,
                SecretsEncryptCommand::RotateKeys => Op::RotateKeys,
            };
            let client = k3rs_apiserver::tokens::client::connect(&args.access.kubeconfig())
                .await
                .context("k3rs secrets-encrypt")?;
            let out = run(&client, op).await.context("k3rs secrets-encrypt")?;
            print!("{out}");
        }
    }
    Ok(())
}

/// Prints the host checks and exits 1 when one fails.
fn check_config() {
    use k3rs_agent::host_check;
    let facts = host_check::gather(&std::env::var("PATH").unwrap_or_default());
    let checks = host_check::evaluate(&facts);
    for c in &checks {
        println!("{c}");
    }
    println!("\n{}", host_check::summary(&checks));
    if checks.iter().any(|c| c.status == host_check::Status::Fail) {
        std::process::exit(1);
    }
}

/// The admin kubeconfig `k3rs kubectl` uses when KUBECONFIG is unset (k3s's rule).
const ADMIN_KUBECONFIG: &str = "/etc/k3rs/k3rs.yaml";

/// Replaces this process with the system kubectl; returns only on failure.
fn kubectl(args: Vec<std::ffi::OsString>) -> anyhow::Error {
    use std::os::unix::process::CommandExt;
    let path = std::env::var("PATH").unwrap_or_default();
    let me = std::env::current_exe().unwrap_or_default();
    let Some(bin) = multicall::system_kubectl(&path, &me) else {
        return anyhow::anyhow!(
            "k3rs kubectl: no kubectl on PATH nor {} beside k3rs (k3rs does not bundle it: \
             install kubectl, or run install.sh without INSTALL_K3RS_SKIP_KUBECTL)",
            multicall::PRIVATE_KUBECTL
        );
    };
    let mut cmd = std::process::Command::new(&bin);
    cmd.args(args);
    if std::env::var_os("KUBECONFIG").is_none_or(|v| v.is_empty()) {
        cmd.env("KUBECONFIG", ADMIN_KUBECONFIG);
    }
    let err = cmd.exec();
    anyhow::anyhow!("k3rs kubectl: running {}: {err}", bin.display())
}

/// `k3rs agent` without `--hollow`: join by token and run the node.
async fn run_node_agent(args: AgentArgs) -> anyhow::Result<()> {
    use k3rs_agent::node_agent;
    let Some(server) = args.server else {
        anyhow::bail!(
            "k3rs agent: pass --server https://<server>:6443 (and --token on first start)"
        );
    };
    let text = match (&args.token, &args.token_file) {
        (Some(t), _) => Some(t.clone()),
        (None, Some(path)) => Some(
            std::fs::read_to_string(path)
                .with_context(|| format!("reading the token file {}", path.display()))?,
        ),
        (None, None) => None,
    };
    let token = text
        .map(|t| k3rs_agent::join::token::parse(&t))
        .transpose()
        .context("k3rs agent: --token")?;
    let join = node_flags::Join {
        server,
        token,
        data_dir: args.data_dir,
        node_ips: args.node_ip,
        cluster_cidr: args.cluster_cidr,
        cluster_dns: None,
        csr_timeout: args.csr_timeout,
    };
    let cfg = args.node.agent_config(join).unwrap_or_else(|e| {
        Cli::command()
            .error(clap::error::ErrorKind::InvalidValue, e)
            .exit()
    });
    let shutdown = CancellationToken::new();
    cancel_on_signal(shutdown.clone())?;
    node_agent::run(cfg, shutdown).await.context("k3rs agent")?;
    Ok(())
}

async fn run_agent(args: AgentArgs) -> anyhow::Result<()> {
    let Some(count) = args.hollow else {
        return run_node_agent(args).await;
    };
    let client = match (&args.kubeconfig, &args.token, &args.server) {
        (Some(path), _, server) => {
            k3rs_agent::client::from_kubeconfig(path, server.as_deref()).await?
        }
        (None, Some(token), Some(server)) => {
            let ca = match &args.certificate_authority {
                Some(path) => Some(
                    std::fs::read(path).with_context(|| format!("reading {}", path.display()))?,
                ),
                None => None,
            };
            k3rs_agent::client::from_token(server, token, ca)?
        }
        _ => anyhow::bail!("k3rs agent: pass --kubeconfig PATH, or --server URL --token TOKEN"),
    };
    let cfg = k3rs_agent::hollow::HollowConfig {
        count,
        name_prefix: args.hollow_name_prefix,
        shape: k3rs_agent::hollow::NodeShape {
            cpu: args.hollow_cpu,
            memory: args.hollow_memory,
            pods: args.hollow_pods,
            ephemeral_storage: args.hollow_ephemeral_storage,
        },
        lease_duration: args.node_lease_renew_interval * 4,
        lease_renew_interval: args.node_lease_renew_interval,
        status_report_frequency: args.node_status_report_frequency,
        job_pod_duration: args.hollow_job_duration,
        max_in_flight: args.max_requests_in_flight,
    };
    let shutdown = CancellationToken::new();
    cancel_on_signal(shutdown.clone())?;
    k3rs_agent::hollow::run(client, cfg, shutdown).await;
    Ok(())
}

/// The pod network as the agent's proxy takes it (IPv4; an IPv6 --cluster-cidr falls back to
/// the default, since the proxy programs iptables, not ip6tables).
fn pod_network(cidr: ipnet::IpNet) -> ipnet::Ipv4Net {
    match cidr {
        ipnet::IpNet::V4(v4) => v4,
        ipnet::IpNet::V6(_) => "10.42.0.0/16".parse().expect("a valid network"),
    }
}
