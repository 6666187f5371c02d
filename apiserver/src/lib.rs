//! The Kubernetes API server: HTTPS (axum + rustls) on `--https-listen-port`, the generic
//! registry over the [`Datastore`](k3rs_datastore::Datastore), discovery, health, version
//! and metrics.
//!
//! # Guarantees
//! - Every request error is a `metav1.Status` with kube-apiserver's code and reason.
//! - `resourceVersion` is the datastore's `mod_revision`; lists carry the revision they read.
//! - Shuts down with the server's cancellation token: stops accepting, ends watches, drains.

pub(crate) mod admission;
pub(crate) mod aggregator;
pub mod args;
pub mod audit;
pub(crate) mod authentication_trust;
pub mod bootstrap;
pub(crate) mod crd;
pub(crate) mod discovery;
pub(crate) mod health;
pub mod http;
pub mod in_process;
pub(crate) mod kubeconfig;
pub mod kubelet;
pub mod metrics;
pub mod openapi;
pub mod registry;
pub mod resource_metrics;
pub mod resources;
pub(crate) mod reviews;
mod secret_source;
pub(crate) mod table;
pub(crate) mod token_lookup;
pub mod tokens;
pub(crate) mod version;
pub(crate) mod warning;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use ipnet::IpNet;
use tokio_util::sync::CancellationToken;

use k3rs_apimachinery::informers::SharedInformerFactory;
use k3rs_apimachinery::tasks;
use k3rs_datastore::Datastore;
use registry::Registry;

/// The API server's settings.
#[derive(Debug, Clone)]
pub struct ApiServerConfig {
    /// `--bind-address` and `--https-listen-port`.
    pub listen: SocketAddr,
    /// `--service-cidr` (ClusterIPs; the first address is the `kubernetes` service's).
    pub service_cidr: IpNet,
    /// `--write-kubeconfig` (None: not written).
    pub kubeconfig_path: Option<PathBuf>,
    /// `--write-kubeconfig-mode`.
    pub kubeconfig_mode: u32,
    /// `--kube-apiserver-arg`s.
    pub args: args::Args,
    /// What the HTTPS port allows its clients (timeouts, connection and stream caps).
    pub limits: k3rs_apimachinery::tls::Limits,
    /// The `kube-system/kube-dns` Service's ClusterIP (`--cluster-dns`); `None`: the Service
    /// is not created (`--disable coredns`).
    pub cluster_dns: Option<std::net::IpAddr>,
    /// What `/v1-k3rs/agent-config` tells agents.
    pub agent_config: k3rs_apimachinery::agent_config::AgentConfig,
    /// `--metric-resolution` of the built-in metrics API (`None`: `--disable metrics-server`,
    /// the `metrics.k8s.io` group is not served).
    pub metric_resolution: Option<Duration>,
}

/// Failures that stop the API server (as opposed to request errors).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The HTTPS port could not be bound.
    #[error("binding {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// Why the bind failed.
        #[source]
        source: std::io::Error,
    },
    /// The serving certificate or key could not be loaded.
    #[error("tls: {0}")]
    Tls(#[from] k3rs_apimachinery::tls::TlsError),
    /// `--write-kubeconfig` could not be written.
    #[error("writing the kubeconfig: {0}")]
    Kubeconfig(#[source] k3rs_pki::Error),
    /// The default agent token could not be read or made.
    #[error("the default agent token: {0}")]
    AgentToken(#[source] k3rs_pki::Error),
    /// A file the server needs (a CA bundle, a key) could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why it could not be read.
        #[source]
        source: std::io::Error,
    },
    /// The service-account signing key is unusable.
    #[error("{0}")]
    ServiceAccountKey(#[from] k3rs_auth::serviceaccount::jwt::JwtError),
    /// The built-in objects (namespaces, the `kubernetes` Service…) could not be created.
    #[error("creating the bootstrap objects: {0}")]
    Bootstrap(String),
    /// `--audit-policy-file` or `--audit-log-path` is unusable.
    #[error("{0}")]
    Audit(#[from] crate::audit::Error),
    /// `--token-auth-file` is unusable.
    #[error("{0}")]
    TokenFile(#[from] k3rs_auth::token_file::TokenFileError),
    /// `--authorization-policy-file` (ABAC) is unusable.
    #[error("{0}")]
    AbacPolicy(#[from] k3rs_auth::abac::PolicyFileError),
    /// A webhook authenticator's or authorizer's kubeconfig is unusable.
    #[error("{0}")]
    Webhook(#[from] k3rs_auth::webhook::client::ConfigError),
    /// The client the API server dials kubelets with could not be made.
    #[error("{0}")]
    KubeletClient(#[source] kubelet::Error),
    /// The OIDC authenticators (`oidc-*` flags, `authentication-config`) are unusable.
    #[error("{0}")]
    Oidc(String),
    /// The aggregation layer could not start.
    #[error("{0}")]
    Aggregator(#[from] aggregator::Error),
    /// The bootstrap RBAC roles and bindings could not be reconciled.
    #[error("reconciling the bootstrap RBAC policy: {0}")]
    RbacBootstrap(#[source] k3rs_auth::rbac::reconcile::Error),
}

/// Shared by every request.
#[derive(Debug)]
pub struct ApiState {
    /// Every resource's storage, with admission.
    pub registry: Arc<Registry>,
    /// The request metrics `/metrics` serves.
    pub metrics: metrics::Metrics,
    /// The server CA bundle, served at `/cacerts` (as k3s does).
    pub server_ca_pem: String,
    /// `host:port` advertised in `/api`.
    pub advertise_address: String,
    /// Cancelled on shutdown: ends watches.
    pub stop: CancellationToken,
    /// Who is asking (x509 client certificates, tokens…).
    pub authn: k3rs_auth::authn::Chain,
    /// May they (`--authorization-mode`, after `system:masters`).
    pub authz: k3rs_auth::authz::Chain,
    /// The service-account token signer (TokenRequest, issuer discovery); `None` serves
    /// neither (in-process test servers without a PKI).
    pub service_accounts: Option<Arc<k3rs_auth::serviceaccount::ServiceAccounts>>,
    /// `--audit-policy-file` and `--audit-log-path` (`None`: nothing is audited).
    pub audit: Option<Arc<crate::audit::Auditor>>,
    /// Dials kubelets (logs, exec, attach, port-forward, node proxy); `None` answers 503.
    pub kubelet: Option<kubelet::KubeletClient>,
    /// The client CA bundle, served to agents at `/v1-k3rs/client-ca.crt` (their kubelets
    /// authenticate the API server and users with it).
    pub client_ca_pem: String,
    /// `max-requests-inflight` / `max-mutating-requests-inflight`.
    pub inflight: http::inflight::Inflight,
    /// The built-in metrics API's usage (`None`: `metrics.k8s.io` is not served).
    pub resource_metrics: Option<Arc<resource_metrics::Store>>,
    /// The aggregation layer (`None`: no APIService is proxied, in-process test servers).
    pub aggregator: Option<Arc<aggregator::Aggregator>>,
}

/// The API server's identity towards itself (kube-apiserver's loopback client).
fn loopback_user() -> k3rs_auth::UserInfo {
    k3rs_auth::UserInfo::authenticated(
        "system:apiserver",
        vec![k3rs_auth::user::SYSTEM_MASTERS.into()],
    )
}

/// How long open requests get to finish after shutdown is requested.
const DRAIN_GRACE: Duration = Duration::from_secs(5);

/// A bound API server, ready to [`ApiServer::run`].
#[derive(Debug)]
pub struct ApiServer {
    listener: tokio::net::TcpListener,
    tls: rustls::ServerConfig,
    limits: k3rs_apimachinery::tls::Limits,
    state: Arc<ApiState>,
    bootstrap: bootstrap::Settings,
    /// The default agent token, whose Secret is made at start.
    agent_token: crate::tokens::Token,
    /// The Node authorizer's graph, fed from the shared informers once the router serves.
    node_graph: Arc<std::sync::RwLock<k3rs_auth::node::graph::Graph>>,
    /// Routes served next to the API (the supervisor's), with their own authentication.
    extra_routes: Option<axum::Router>,
    /// Appended to `/metrics` (the datastore's metrics).
    extra_metrics: Option<metrics::MetricsSource>,
    /// The process's informers (one watch and one cache per type): the authorizers', the
    /// admission plugins' and the aggregator's here, the controllers' and the scheduler's
    /// beside the API server ([`Started::informers`]); started with the loopback client once
    /// the router exists.
    informers: SharedInformerFactory,
    /// What the ValidatingAdmissionPolicy plugin reads.
    policy_cache: admission::validating_policy::cache::PolicyCache,
    /// What the admission webhooks read.
    webhook_cache: admission::webhook::cache::WebhookCache,
    /// What the RBAC authorizer reads.
    rbac_cache: k3rs_auth::rbac::cache::PolicyCache,
    /// `--secrets-encryption`'s keys and operations (`/v1-k3rs/encrypt/…`).
    secrets_encryption: Option<Arc<k3rs_datastore::encryption::SecretsEncryption>>,
    /// Served on `/v1-k3rs/agent-config`.
    agent_config: Arc<k3rs_apimachinery::agent_config::AgentConfig>,
    /// `--metric-resolution` (`None`: the metrics API is off).
    metric_resolution: Option<Duration>,
    /// Published to extension API servers.
    authentication_trust: authentication_trust::AuthenticationTrust,
}

impl ApiServer {
    /// Binds the port, loads the certificates, writes the kubeconfig.
    pub async fn bind(
        cfg: &ApiServerConfig,
        pki: &k3rs_pki::Pki,
        ds: Arc<dyn Datastore>,
        stop: CancellationToken,
    ) -> Result<ApiServer, Error> {
        let read =
            |path: PathBuf| std::fs::read(&path).map_err(|source| Error::Read { path, source });
        let (cert, key) = pki.apiserver_serving_cert();
        let client_ca = pki.client_ca_cert();
        // The authenticating proxy: k3s's defaults (the request-header CA, the aggregation
        // layer's `system:auth-proxy`) unless `requestheader-client-ca-file` is given.
        let (request_header_ca, request_header_names) = match &cfg.args.requestheader_client_ca_file
        {
            Some(ca) => (ca.clone(), cfg.args.requestheader_allowed_names.clone()),
            None => (
                pki.request_header_ca_cert(),
                vec![k3rs_pki::AUTH_PROXY_NAME.to_string()],
            ),
        };
        let client_cas = [client_ca.as_path(), request_header_ca.as_path()];
        let authentication_trust = authentication_trust::AuthenticationTrust {
            client_ca_pem: String::from_utf8_lossy(&read(client_ca.clone())?).into_owned(),
            request_header_ca_pem: String::from_utf8_lossy(&read(request_header_ca.clone())?)
                .into_owned(),
            allowed_names: request_header_names.clone(),
            headers: cfg.args.requestheader_headers.clone(),
        };
        let tls = k3rs_apimachinery::tls::server_config_for(&cert, &key, &client_cas)?;
        let listener = tokio::net::TcpListener::bind(cfg.listen)
            .await
            .map_err(|source| Error::Bind {
                addr: cfg.listen,
                source,
            })?;
        let port = listener
            .local_addr()
            .map_err(|source| Error::Bind {
                addr: cfg.listen,
                source,
            })?
            .port();
        let ca_pem = read(pki.server_ca_cert())?;
        if let Some(path) = &cfg.kubeconfig_path {
            let (admin_cert, admin_key) = pki.admin_client_cert();
            let yaml = kubeconfig::render(
                &format!("https://127.0.0.1:{port}"),
                &ca_pem,
                &read(admin_cert)?,
                &read(admin_key)?,
            );
            kubeconfig::write(path, &yaml, cfg.kubeconfig_mode).map_err(Error::Kubeconfig)?;
            tracing::info!(path = %path.display(), "wrote the admin kubeconfig");
        }
        // The server's own admin credentials (`k3rs token` finds the server through them) and
        // the default agent token, under `<data-dir>/server` as k3s keeps them.
        let server_dir = pki
            .tls_dir()
            .parent()
            .unwrap_or(pki.tls_dir())
            .to_path_buf();
        {
            let (admin_cert, admin_key) = pki.admin_client_cert();
            let yaml = kubeconfig::render(
                &format!("https://127.0.0.1:{port}"),
                &ca_pem,
                &read(admin_cert)?,
                &read(admin_key)?,
            );
            let path =
                crate::tokens::client::admin_kubeconfig(server_dir.parent().unwrap_or(&server_dir));
            kubeconfig::write(&path, &yaml, 0o600).map_err(Error::Kubeconfig)?;
        }
        let agent_token =
            crate::tokens::agent::ensure_file(&server_dir.join("agent-token"), &ca_pem)
                .map_err(Error::AgentToken)?;
        let advertise = if cfg.listen.ip().is_unspecified() {
            format!("127.0.0.1:{port}")
        } else {
            SocketAddr::new(cfg.listen.ip(), port).to_string()
        };
        let informers = SharedInformerFactory::unstarted(stop.clone());
        let rbac_cache = k3rs_auth::rbac::cache::PolicyCache::new(&informers);
        let policy: Arc<dyn k3rs_auth::rbac::resolver::PolicySource> = Arc::new(rbac_cache.clone());
        let node_authorizer = k3rs_auth::node::NodeAuthorizer::new();
        // k3s's `--authorization-mode=Node,RBAC` by default, after system:masters.
        let abac = match &cfg.args.authorization_policy_file {
            Some(path) => Some(Arc::new(k3rs_auth::abac::Abac::load(path)?)
                as Arc<dyn k3rs_auth::authz::Authorizer>),
            None => None,
        };
        let webhook_authz = match &cfg.args.authorization_webhook.config_file {
            Some(_) => Some(Arc::new(
                k3rs_auth::webhook::subject_access_review::WebhookAuthorizer::load(
                    &cfg.args.authorization_webhook,
                )?,
            ) as Arc<dyn k3rs_auth::authz::Authorizer>),
            None => None,
        };
        let authz = args::chain(
            &cfg.args.authorization_modes,
            Arc::new(k3rs_auth::rbac::Rbac::new(policy.clone())),
            Some(Arc::new(node_authorizer.clone())),
            abac,
            webhook_authz,
        );
        let policy_cache = admission::validating_policy::cache::PolicyCache::new(&informers);
        let webhook_cache = admission::webhook::cache::WebhookCache::new(&informers);
        let pod_security = admission::pod_security::PodSecurity {
            config: cfg.args.pod_security.clone(),
            namespaces: Some(informers.informer()),
        };
        let registry = Registry::new(ds, cfg.service_cidr).with_admission(
            admission::Chain::standard_with(
                cfg.args.default_tolerations,
                pod_security,
                admission::lister::Listers::of(&informers),
            )
            .with_policies(policy_cache.clone(), Some(authz.clone()))
            .with_webhooks(webhook_cache.clone(), Some(authz.clone())),
        );
        registry.set_write_check(Arc::new(registry::rbac_escalation::RbacEscalation {
            source: policy,
            authz: authz.clone(),
        }));
        let registry = Arc::new(registry);
        let service_accounts = Arc::new(k3rs_auth::serviceaccount::ServiceAccounts::load(
            &pki.service_account_key(),
            Arc::new(token_lookup::RegistryLookup(registry.clone())),
        )?);
        let audit = crate::audit::Auditor::load(&cfg.args.audit)?.map(Arc::new);
        // The authenticating proxy, client certificates, then the token file
        // (kube-apiserver's order), bootstrap and service-account tokens.
        let mut authn = k3rs_auth::authn::Chain::default();
        // The handshake accepts both CAs: each authenticator checks its own (remembering
        // its verdict per chain: a keep-alive connection presents the same one each time).
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        authn.push(Arc::new(k3rs_auth::request_header::RequestHeader {
            verifier: k3rs_auth::cert_verdicts::CachedVerifier::new(
                k3rs_apimachinery::tls::client_verifier(&request_header_ca, provider.clone())?,
            ),
            allowed_names: request_header_names,
            headers: cfg.args.requestheader_headers.clone(),
        }));
        authn.push(Arc::new(k3rs_auth::request_header::VerifiedX509 {
            verifier: k3rs_auth::cert_verdicts::CachedVerifier::new(
                k3rs_apimachinery::tls::client_verifier(&client_ca, provider)?,
            ),
        }));
        if let Some(path) = &cfg.args.token_auth_file {
            authn.push(Arc::new(k3rs_auth::token_file::TokenFile::load(path)?));
        }
        authn.push(Arc::new(k3rs_auth::bootstrap_token::BootstrapTokens::new(
            registry.clone(),
        )));
        authn.push(Arc::new(service_accounts.tokens.clone()));
        // Then (kube-apiserver's order) OIDC and the token webhook.
        let jwts = cfg
            .args
            .jwt_authenticators()
            .map_err(|e| Error::Oidc(e.to_string()))?;
        for jwt in jwts {
            authn.push(Arc::new(
                k3rs_auth::oidc::Oidc::start(jwt).map_err(|e| Error::Oidc(e.to_string()))?,
            ));
        }
        if cfg.args.token_webhook.config_file.is_some() {
            let audiences = k3rs_auth::serviceaccount::claims::API_AUDIENCES
                .iter()
                .map(|a| a.to_string())
                .collect();
            authn.push(Arc::new(
                k3rs_auth::webhook::token_review::TokenWebhook::load(
                    &cfg.args.token_webhook,
                    audiences,
                )?,
            ));
        }
        let (kcert, kkey) = pki.kubelet_client_cert();
        let kubelet_client = kubelet::KubeletClient::load(&pki.server_ca_cert(), &kcert, &kkey)
            .map_err(Error::KubeletClient)?;
        let state = Arc::new(ApiState {
            authn,
            registry,
            metrics: metrics::Metrics::default(),
            server_ca_pem: String::from_utf8_lossy(&ca_pem).into_owned(),
            advertise_address: advertise,
            stop,
            authz,
            service_accounts: Some(service_accounts),
            audit,
            kubelet: Some(kubelet_client),
            client_ca_pem: authentication_trust.client_ca_pem.clone(),
            inflight: http::inflight::Inflight::new(cfg.args.inflight),
            resource_metrics: cfg
                .metric_resolution
                .map(|_| Arc::new(resource_metrics::Store::default())),
            aggregator: Some(Arc::new(aggregator::Aggregator::load(
                &pki.auth_proxy_client_cert().0,
                &pki.auth_proxy_client_cert().1,
                if cfg.args.enable_aggregator_routing {
                    aggregator::resolve::Routing::Endpoints
                } else {
                    aggregator::resolve::Routing::ClusterIp
                },
            )?)),
        });
        // The metrics API's group is served (in routing and discovery) only while it runs.
        k3rs_apimachinery::catalog::set_local_extensions(match cfg.metric_resolution {
            Some(_) => k3rs_apimachinery::catalog::METRICS_API.iter().collect(),
            None => Vec::new(),
        });
        Ok(ApiServer {
            listener,
            tls,
            limits: cfg.limits.clone(),
            state,
            bootstrap: bootstrap::Settings {
                https_port: port,
                kube_dns: cfg.cluster_dns,
            },
            agent_token,
            node_graph: node_authorizer.graph(),
            extra_routes: None,
            extra_metrics: None,
            informers,
            rbac_cache,
            policy_cache,
            webhook_cache,
            secrets_encryption: None,
            agent_config: Arc::new(cfg.agent_config.clone()),
            metric_resolution: cfg.metric_resolution,
            authentication_trust,
        })
    }

    /// Serves `routes` on the same port (they must not overlap the API's paths) and appends
    /// `metrics` to `/metrics`.
    pub fn with_supervisor(
        mut self,
        routes: axum::Router,
        metrics: Option<metrics::MetricsSource>,
    ) -> ApiServer {
        self.extra_routes = Some(routes);
        self.extra_metrics = metrics;
        self
    }

    /// Serves `/v1-k3rs/encrypt/…` with `encryption` (`None`: encryption is off).
    pub fn with_secrets_encryption(
        mut self,
        encryption: Option<Arc<k3rs_datastore::encryption::SecretsEncryption>>,
    ) -> ApiServer {
        self.secrets_encryption = encryption;
        self
    }

    /// The bound address.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// [`ApiServer::start`], then [`Started::serve`].
    pub async fn run(self) -> Result<(), Error> {
        self.start().await?.serve().await;
        Ok(())
    }

    /// Creates the bootstrap objects, reconciles the bootstrap RBAC policy, starts the API
    /// server's own informers (CRDs, RBAC, admission policies and webhooks, the Node graph)
    /// and waits (bounded) for their first lists. In-process clients work from then on;
    /// network clients once [`Started::serve`] runs.
    pub async fn start(self) -> Result<Started, Error> {
        let stop = self.state.stop.clone();
        // The datastore may still be electing its leader: retry the bootstrap briefly.
        let mut attempt = 0;
        loop {
            match bootstrap::ensure(&self.state.registry, self.bootstrap).await {
                Ok(()) => break,
                Err(e) if attempt < 300 && !stop.is_cancelled() => {
                    attempt += 1;
                    tracing::debug!(error = %e.message, "bootstrap objects not created yet; retrying");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(e) => return Err(Error::Bootstrap(e.message)),
            }
        }
        if let Err(e) =
            crate::tokens::agent::ensure_secret(&self.state.registry, &self.agent_token).await
        {
            tracing::warn!(error = %e.message, "creating the default agent token's secret");
        }
        let addr = self.local_addr().ok();
        tracing::info!(?addr, "Kubernetes API listening");
        // Build the OpenAPI definitions (milliseconds) before serving, not in the first
        // request that validates a body; the documents wait for the first request for them.
        openapi::Definitions::get();
        // Serve the custom resources the datastore already defines from the first request on,
        // then follow the CRDs.
        if let Ok((crds, _)) = crd::controller::list(&self.state.registry).await {
            crd::controller::sync(&self.state.registry, &crds).await;
        }
        let crds = {
            let registry = self.state.registry.clone();
            tokio::spawn(tasks::supervise(
                "apiserver/crd-controller",
                stop.clone(),
                move |stop| crd::controller::run(registry.clone(), stop),
            ))
        };
        let mut app = http::router::router(self.state.clone());
        if let Some(e) = self.secrets_encryption.clone() {
            app = app.layer(axum::Extension(e));
        }
        app = app.layer(axum::Extension(self.agent_config.clone()));
        if let Some(extra) = self.extra_metrics {
            app = app.layer(axum::middleware::from_fn(move |req, next| {
                metrics::append(extra.clone(), req, next)
            }));
        }
        if let Some(routes) = self.extra_routes {
            app = app.merge(routes);
        }
        // The RBAC policy: bootstrap roles reconciled, then the authorizer's informers filled
        // before the first network request. The informers stop with `stop`.
        let loopback = in_process::client(app.clone(), in_process::apiserver_identity(), "default");
        self.informers.start(loopback.clone());
        rbac_bootstrap(loopback, &self.rbac_cache, &stop).await?;
        let admission_ready = async {
            self.policy_cache.wait_until_ready().await;
            self.webhook_cache.wait_until_ready().await;
        };
        if tokio::time::timeout(Duration::from_secs(30), admission_ready)
            .await
            .is_err()
        {
            tracing::warn!("the admission caches are not filled after 30 s; serving anyway");
        }
        let node_graph = {
            let (informers, graph) = (self.informers.clone(), self.node_graph.clone());
            tokio::spawn(tasks::supervise(
                "apiserver/node-authorizer-graph",
                stop.clone(),
                move |stop| k3rs_auth::node::populator::run(informers.clone(), graph.clone(), stop),
            ))
        };
        let scraper = match (
            &self.state.resource_metrics,
            &self.state.kubelet,
            self.metric_resolution,
        ) {
            (Some(store), Some(kubelet), Some(resolution)) => {
                let scraper = resource_metrics::scraper::Scraper {
                    registry: self.state.registry.clone(),
                    kubelet: kubelet.clone(),
                    store: store.clone(),
                    resolution,
                };
                Some(tokio::spawn(tasks::supervise(
                    "apiserver/metrics-scraper",
                    stop.clone(),
                    move |stop| scraper.clone().run(stop),
                )))
            }
            _ => None,
        };
        let aggregation = self.state.aggregator.clone().map(|aggregator| {
            let controller = aggregator::availability::AvailabilityController {
                aggregator,
                registry: self.state.registry.clone(),
                client: in_process::client(app.clone(), loopback_user(), "default"),
                informers: self.informers.clone(),
            };
            tokio::spawn(tasks::supervise(
                "apiserver/apiservice-availability",
                stop.clone(),
                move |stop| controller.clone().run(stop),
            ))
        });
        let trust = {
            let (client, trust) = (
                in_process::client(app.clone(), loopback_user(), "default"),
                self.authentication_trust.clone(),
            );
            tokio::spawn(tasks::supervise(
                "apiserver/authentication-trust",
                stop.clone(),
                move |stop| trust.clone().run(client.clone(), stop),
            ))
        };
        let tasks = [
            Some(crds),
            aggregation,
            Some(trust),
            Some(node_graph),
            scraper,
        ]
        .into_iter()
        .flatten()
        .collect();
        Ok(Started {
            app,
            listener: self.listener,
            tls: self.tls,
            limits: self.limits,
            state: self.state,
            informers: self.informers,
            tasks,
        })
    }
}

/// An API server whose bootstrap is done and whose informers run ([`ApiServer::start`]).
#[derive(Debug)]
pub struct Started {
    app: axum::Router,
    listener: tokio::net::TcpListener,
    tls: rustls::ServerConfig,
    limits: k3rs_apimachinery::tls::Limits,
    state: Arc<ApiState>,
    informers: SharedInformerFactory,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Started {
    /// In-process clients through this API server's router.
    pub fn clients(&self) -> in_process::InProcessClients {
        in_process::InProcessClients(self.app.clone())
    }

    /// The state every request shares.
    pub fn state(&self) -> &Arc<ApiState> {
        &self.state
    }

    /// The process's shared informers, for the components beside the API server (the
    /// controller manager, the scheduler): one watch and one cache per resource type, shared
    /// with the API server's own readers (the RBAC and Node authorizers, admission, the
    /// aggregator's availability controller).
    ///
    /// # Guarantees
    /// - Started, with the loopback client (`system:apiserver`, in `system:masters`: it may
    ///   list and watch every type); an informer asked for now starts its watch at once.
    /// - Runs on every server, leading or not, until the stop token is cancelled (the
    ///   watches of a type only a leader's component asked for keep running after it stops
    ///   leading, as client-go's factory keeps its informers).
    /// - Cached objects have no `managedFields` (the factory's transform), as every reader
    ///   here expects.
    pub fn informers(&self) -> SharedInformerFactory {
        self.informers.clone()
    }

    /// Serves HTTPS until the stop token is cancelled, drains, then stops the informers.
    pub async fn serve(self) {
        let stop = self.state.stop.clone();
        let limits = k3rs_apimachinery::tls::Limits {
            drain: DRAIN_GRACE,
            ..self.limits
        };
        k3rs_apimachinery::tls::serve(self.listener, self.tls, self.app, stop, &limits, "api")
            .await;
        for t in self.tasks {
            t.abort();
            let _ = t.await;
        }
    }
}

/// Reconciles the bootstrap RBAC policy (retried while the datastore settles), then waits
/// (bounded) for the authorizer's cache to hold its first lists.
async fn rbac_bootstrap(
    client: kube::Client,
    cache: &k3rs_auth::rbac::cache::PolicyCache,
    stop: &CancellationToken,
) -> Result<(), Error> {
    let mut attempt = 0;
    loop {
        match k3rs_auth::rbac::reconcile::bootstrap_policy(client.clone()).await {
            Ok(()) => break,
            Err(e) if attempt < 300 && !stop.is_cancelled() => {
                attempt += 1;
                tracing::debug!(error = %e, "bootstrap RBAC policy not reconciled yet; retrying");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => return Err(Error::RbacBootstrap(e)),
        }
    }
    if tokio::time::timeout(Duration::from_secs(30), cache.wait_until_ready())
        .await
        .is_err()
    {
        tracing::warn!("the RBAC cache is not filled after 30 s; serving anyway");
    }
    Ok(())
}
