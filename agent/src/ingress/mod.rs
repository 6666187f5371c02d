//! The built-in ingress controller on every node (k3s ships traefik for this): the Ingresses
//! of the `k3rs` IngressClass ([`k3rs_apimachinery::ingress_class`]) are served on the
//! node's HTTP and HTTPS ports (80 and 443 by default), proxied to the ready endpoints of
//! their Services.
//!
//! [`table`] decides the routes, default backend and certificates without I/O
//! ([`routes`] holds the Ingress matching rules); [`proxy`] serves one request from the
//! current table; [`tls`] picks certificates by SNI; [`listen`] runs the listeners; [`run`]
//! watches Ingresses, IngressClasses, Services and EndpointSlices, reads the TLS Secrets the
//! Ingresses name one by one ([`secrets`]), and publishes a new table on change.
//!
//! Guarantees:
//! - Nothing is routed before all four kinds have been listed (until then every request is a
//!   404, and every TLS client gets the default certificate).
//! - A change builds a new table that replaces the old one at once (an `Arc` swap): requests
//!   and WebSocket tunnels in flight are not interrupted; the next request uses the new table.
//!   The listeners never restart for a change.
//! - TLS Secrets are read by name when an Ingress first names them and again at least every
//!   `sync_period` (30 s): a rotated certificate is served within about that time.
//! - What an Ingress asks that cannot be served (a Service, port, endpoints or TLS Secret
//!   missing) is reported once per Ingress version: a Warning Event on the Ingress and a log
//!   line (the request answers 503, or the default certificate is served).
//! - The agent never writes Ingress status: the server's `ingress` controller sets
//!   `status.loadBalancer.ingress` (one writer for the whole cluster).
//!
//! Assumptions: the node's credentials may list and watch those four kinds cluster-wide (the
//! server binds `k3rs:ingress` to `system:nodes`) and get the TLS Secrets of the Ingresses of
//! the built-in class by name (the Node authorizer relates them to every node; a node cannot
//! list Secrets); pod IPs are reachable from the node.

pub mod listen;
pub mod proxy;
pub mod routes;
pub mod secrets;
pub mod table;
pub mod tls;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures::{stream, StreamExt};
use k3rs_apimachinery::events::{EventRecorder, EventType};
use k3rs_apimachinery::informers::Informer;
use k3rs_apimachinery::tls::{Limits, Transport};
use k8s_openapi::api::core::v1::{ObjectReference, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::{Ingress, IngressClass};
use kube::Client;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::proxy::sync::Pacer;
use crate::watches::{run_paced, snapshot, watch_all, Cluster, Keeper, OncePerVersion, Watches};
use table::Table;

/// How the node's ingress controller runs.
#[derive(Debug, Clone)]
pub struct IngressConfig {
    /// The node's name (the source of its Events).
    pub node_name: String,
    /// Where plain HTTP is served (the node IPs at `--ingress-http-port`).
    pub http: Vec<SocketAddr>,
    /// Where HTTPS is served (the node IPs at `--ingress-https-port`).
    pub https: Vec<SocketAddr>,
    /// At most one table rebuild per this period.
    pub min_sync_period: Duration,
    /// A rebuild at least this often, which also reads the TLS Secrets again (a rotated
    /// certificate is served within about this period).
    pub sync_period: Duration,
}

impl IngressConfig {
    /// HTTP on `http_port` and HTTPS on `https_port` of each of `ips`.
    pub fn new(node_name: &str, ips: &[std::net::IpAddr], http_port: u16, https_port: u16) -> Self {
        IngressConfig {
            node_name: node_name.to_string(),
            http: ips
                .iter()
                .map(|ip| SocketAddr::new(*ip, http_port))
                .collect(),
            https: ips
                .iter()
                .map(|ip| SocketAddr::new(*ip, https_port))
                .collect(),
            min_sync_period: Duration::from_millis(200),
            sync_period: Duration::from_secs(30),
        }
    }
}

/// The Events' `source.component`.
const COMPONENT: &str = "k3rs-ingress";

/// The informers a table is built from.
struct Stores {
    ingresses: Informer<Ingress>,
    classes: Informer<IngressClass>,
    services: Informer<Service>,
    slices: Informer<EndpointSlice>,
}

/// Runs the listeners and keeps their table current until `stop`, with the latest
/// [`Cluster`] of `clusters` (a rotated certificate restarts the watches, not the listeners).
pub async fn run(clusters: watch::Receiver<Cluster>, cfg: IngressConfig, stop: CancellationToken) {
    let default = match tls::default_certificate() {
        Ok(c) => Arc::new(c),
        Err(e) => {
            tracing::error!(error = %crate::report::error_chain(&e), "ingress: no default certificate; not serving");
            return stop.cancelled().await;
        }
    };
    let (tables, table) = watch::channel(Arc::new(Table::default()));
    let tls_config = match tls::server_config(tls::SniResolver {
        table: table.clone(),
        default,
    }) {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %crate::report::error_chain(&e), "ingress: TLS setup failed; not serving");
            return stop.cancelled().await;
        }
    };
    let limits = Limits::default();
    let mut listeners = tokio::task::JoinSet::new();
    let make_proxy = |scheme, port| proxy::Proxy {
        table: table.clone(),
        scheme,
        port,
        stop: stop.clone(),
    };
    let tls = Transport::from(tls_config);
    let plain = cfg.http.iter().map(|a| (a, "http", Transport::Plain));
    let secure = cfg.https.iter().map(|a| (a, "https", tls.clone()));
    for (addr, scheme, transport) in plain.chain(secure) {
        let app = listen::router(make_proxy(scheme, addr.port()));
        listeners.spawn(listen::serve(
            *addr,
            transport,
            app,
            limits.clone(),
            stop.clone(),
        ));
    }
    let pacer = Pacer::new(cfg.min_sync_period, cfg.sync_period, cfg.sync_period / 6);
    let mut controller = Controller {
        node_name: cfg.node_name.clone(),
        tables,
        reporter: Reporter::default(),
        secrets: secrets::Reads::new(cfg.sync_period / 2),
    };
    run_paced("ingress", clusters, pacer, &stop, &mut controller).await;
    stop.cancelled().await;
    while listeners.join_next().await.is_some() {}
    tracing::info!("ingress: stopped");
}

/// The table keeper as a [`Keeper`]: what persists across syncs.
struct Controller {
    node_name: String,
    tables: watch::Sender<Arc<Table>>,
    reporter: Reporter,
    secrets: secrets::Reads,
}

impl Keeper for Controller {
    type State = (Stores, EventRecorder, Client);

    fn watch(&mut self, cluster: &Cluster) -> Watches<Self::State> {
        let (ingresses, e0) = watch_all::<Ingress>(&cluster.informers, 0);
        let (classes, e1) = watch_all::<IngressClass>(&cluster.informers, 1);
        let (services, e2) = watch_all::<Service>(&cluster.informers, 2);
        let (slices, e3) = watch_all::<EndpointSlice>(&cluster.informers, 3);
        let stores = Stores {
            ingresses,
            classes,
            services,
            slices,
        };
        let recorder = EventRecorder::new(cluster.client.clone(), COMPONENT, &self.node_name);
        Watches {
            state: (stores, recorder, cluster.client.clone()),
            events: stream::select_all([e0, e1, e2, e3]).boxed(),
            count: 4,
        }
    }

    async fn sync(&mut self, (stores, recorder, client): &Self::State) -> bool {
        let ingresses = snapshot(&stores.ingresses);
        let classes = snapshot(&stores.classes);
        let wanted = secrets::wanted(&ingresses, &classes);
        let due = self.secrets.due(&wanted, tokio::time::Instant::now());
        let read = secrets::read(client, &mut self.secrets, due).await;
        let (new, warnings) = table::build(&table::Input {
            ingresses: &ingresses,
            classes: &classes,
            services: &snapshot(&stores.services),
            slices: &snapshot(&stores.slices),
            secrets: &self.secrets.secrets(),
            unread: self.secrets.unread(),
        });
        tracing::debug!(
            routes = new.routes.len(),
            certificates = new.certs.len(),
            "ingress: table rebuilt"
        );
        self.tables.send_replace(Arc::new(new));
        self.reporter
            .report(&warnings, &ingresses, &self.node_name, recorder)
            .await;
        read
    }
}

/// Reports each warning once per Ingress version.
#[derive(Default)]
struct Reporter {
    reported: OncePerVersion<table::Warning>,
}

impl Reporter {
    async fn report(
        &mut self,
        warnings: &[table::Warning],
        ingresses: &[Ingress],
        node: &str,
        recorder: &EventRecorder,
    ) {
        for w in warnings {
            let Some(ing) = ingresses.iter().find(|i| {
                i.metadata.namespace.as_deref() == Some(&w.namespace)
                    && i.metadata.name.as_deref() == Some(&w.ingress)
            }) else {
                continue;
            };
            if !self.reported.first(&ing.metadata, w.clone()) {
                continue;
            }
            tracing::warn!(namespace = %w.namespace, ingress = %w.ingress, reason = w.reason, "ingress: {}", w.message);
            let regarding = ObjectReference {
                api_version: Some("networking.k8s.io/v1".into()),
                kind: Some("Ingress".into()),
                namespace: Some(w.namespace.clone()),
                name: Some(w.ingress.clone()),
                uid: ing.metadata.uid.clone(),
                ..ObjectReference::default()
            };
            let message = format!("node {node}: {}", w.message);
            recorder.publish(&regarding, EventType::Warning, w.reason, &message);
        }
    }
}
