//! The embedded cluster DNS: what CoreDNS does in k3s (a Deployment behind the `kube-dns`
//! Service), run by every agent instead of as a pod.
//!
//! Design: each agent answers DNS on its node's IPs (port 53 by default, UDP and TCP) and
//! labels its Node [`PORT_LABEL`]`=<port>`; the server keeps a selector-less `kube-dns`
//! Service in `kube-system` at `--cluster-dns` (10.43.0.10) whose endpoints are the Ready
//! nodes carrying that label, so pods reach the nearest answer through the service proxy's
//! DNAT like any Service, no pod and no image are needed, and a node that is down drops out
//! of the endpoints with its Ready condition.
//!
//! [`index`] turns the watched Services and EndpointSlices into the zone's data,
//! [`answer`] answers a question from it (pure), [`wire`] speaks the DNS wire format
//! (hickory-proto), [`upstream`] relays everything outside the zone to the host's resolvers,
//! and [`run`] is the thin async shell.
//!
//! Guarantees:
//! - Names under the cluster domain are answered only from the index, never forwarded; until
//!   both watches have listed they fail with SERVFAIL.
//! - The agent keeps running when the DNS port can not be bound (the error is logged).
//! - Not an open resolver: only the sources [`sources`] allows get answers (others REFUSED),
//!   each with a bounded number of queries in flight.
//!
//! Assumptions: every node answering for the Service listens on the port in its label; pods
//! are not watched, so pod records are answered from the name (CoreDNS's `pods insecure`)
//! and PTR covers cluster and endpoint IPs only.

pub mod answer;
pub mod index;
pub mod sources;
pub mod upstream;
pub mod wire;

#[cfg(test)]
mod tests;

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use futures::{stream, StreamExt};
use k3rs_apimachinery::informers::Informer;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use self::index::Index;
use self::wire::Step;
use crate::watches::{snapshot, watch_all, Cluster, Listed};

/// The Node label an agent that serves DNS sets to its port; the server's `kube-dns`
/// endpoints are the Ready nodes with it.
pub const PORT_LABEL: &str = k3rs_apimachinery::labels::CLUSTER_DNS_PORT_LABEL;

/// How the DNS server runs.
#[derive(Debug, Clone)]
pub struct DnsConfig {
    /// Where to answer (UDP and TCP each).
    pub listen: Vec<SocketAddr>,
    /// `--cluster-domain` (`cluster.local`).
    pub cluster_domain: String,
    /// Where names outside the zone go; `None`: the host's ([`upstream::host`]).
    pub upstreams: Option<Vec<SocketAddr>>,
    /// Who may ask besides the node itself and the nodes serving cluster DNS.
    pub allowed: sources::Allowed,
}

struct Shared {
    index: watch::Receiver<Option<Arc<Index>>>,
    domain: String,
    upstreams: Vec<SocketAddr>,
    allowed: sources::Allowed,
    in_flight: sources::InFlight,
}

impl Shared {
    /// The reply to `request` from `source`, if any.
    async fn handle(&self, request: &[u8], source: IpAddr, udp: bool) -> Option<Vec<u8>> {
        let index = self.index.borrow().clone();
        if !sources::may_ask(source, &self.allowed, index.as_deref()) {
            tracing::debug!(%source, "dns: refused a source outside the cluster");
            return wire::refused(request);
        }
        let _slot = self.in_flight.admit(source)?;
        match wire::step(request, index.as_deref(), &self.domain, udp) {
            Step::Reply(bytes) => Some(bytes),
            Step::Drop => None,
            Step::Forward => {
                match upstream::relay(&self.upstreams, request, !udp, upstream::TIMEOUT).await {
                    Ok(reply) => Some(reply),
                    Err(e) => {
                        tracing::debug!(error = %e, "dns: forwarding failed");
                        wire::servfail(request)
                    }
                }
            }
        }
    }
}

/// Runs the DNS server until `stop`, with the watches of the latest [`Cluster`] of
/// `clusters`.
pub async fn run(clusters: watch::Receiver<Cluster>, cfg: DnsConfig, stop: CancellationToken) {
    let (index_tx, index_rx) = watch::channel(None);
    let upstreams = cfg
        .upstreams
        .clone()
        .unwrap_or_else(|| upstream::host(None));
    tracing::info!(listen = ?cfg.listen, ?upstreams, "dns: starting");
    let shared = Arc::new(Shared {
        index: index_rx,
        domain: cfg.cluster_domain.to_ascii_lowercase(),
        upstreams,
        allowed: cfg.allowed.clone(),
        in_flight: sources::InFlight::default(),
    });
    let mut tasks = tokio::task::JoinSet::new();
    for addr in &cfg.listen {
        match UdpSocket::bind(addr).await {
            Ok(sock) => {
                tasks.spawn(serve_udp(sock, shared.clone()));
            }
            Err(e) => tracing::error!(%addr, error = %e, "dns: can not listen on UDP"),
        }
        match TcpListener::bind(addr).await {
            Ok(l) => {
                tasks.spawn(serve_tcp(l, shared.clone()));
            }
            Err(e) => tracing::error!(%addr, error = %e, "dns: can not listen on TCP"),
        }
    }
    tokio::select! {
        _ = stop.cancelled() => {}
        _ = watch_index(clusters, index_tx) => {}
    }
    tasks.abort_all();
    tracing::info!("dns stopped");
}

async fn serve_udp(sock: UdpSocket, shared: Arc<Shared>) {
    let sock = Arc::new(sock);
    let mut buf = vec![0u8; 65535];
    loop {
        let (n, peer) = match sock.recv_from(&mut buf).await {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(error = %e, "dns: UDP receive failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let request = buf[..n].to_vec();
        let (sock, shared) = (sock.clone(), shared.clone());
        tokio::spawn(async move {
            if let Some(reply) = shared.handle(&request, peer.ip(), true).await {
                let _ = sock.send_to(&reply, peer).await;
            }
        });
    }
}

async fn serve_tcp(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        match listener.accept().await {
            Ok((conn, peer)) => {
                tokio::spawn(serve_conn(conn, peer.ip(), shared.clone()));
            }
            Err(e) => {
                tracing::warn!(error = %e, "dns: TCP accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// Length-prefixed queries on one connection until EOF or 10 s idle.
async fn serve_conn(mut conn: TcpStream, source: IpAddr, shared: Arc<Shared>) {
    let idle = Duration::from_secs(10);
    loop {
        let mut len = [0u8; 2];
        match tokio::time::timeout(idle, conn.read_exact(&mut len)).await {
            Ok(Ok(_)) => {}
            _ => return,
        }
        let mut request = vec![0u8; usize::from(u16::from_be_bytes(len))];
        if !matches!(
            tokio::time::timeout(idle, conn.read_exact(&mut request)).await,
            Ok(Ok(_))
        ) {
            return;
        }
        let Some(reply) = shared.handle(&request, source, false).await else {
            return;
        };
        let Ok(n) = u16::try_from(reply.len()) else {
            return;
        };
        if conn.write_all(&n.to_be_bytes()).await.is_err() || conn.write_all(&reply).await.is_err()
        {
            return;
        }
    }
}

fn rebuild(services: &Informer<Service>, slices: &Informer<EndpointSlice>) -> Index {
    let services = snapshot(services);
    let slices = snapshot(slices);
    let serial = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as u32)
        .unwrap_or(1);
    index::build(&services, &slices, serial)
}

/// Keeps `index` the zone of the watched Services and EndpointSlices; a rotated client
/// restarts the watches.
async fn watch_index(
    mut clusters: watch::Receiver<Cluster>,
    index: watch::Sender<Option<Arc<Index>>>,
) {
    'clusters: loop {
        let cluster = clusters.borrow_and_update().clone();
        let (services, svc_events) = watch_all::<Service>(&cluster.informers, 0);
        let (slices, eps_events) = watch_all::<EndpointSlice>(&cluster.informers, 1);
        let mut events = stream::select(svc_events, eps_events);
        let mut listed = Listed::new(2);
        loop {
            tokio::select! {
                changed = clusters.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    continue 'clusters;
                }
                ev = events.next() => {
                    match ev {
                        Some(seen) => listed.note(&seen),
                        None => return,
                    }
                    if listed.all() {
                        index.send_replace(Some(Arc::new(rebuild(&services, &slices))));
                    }
                }
            }
        }
    }
}
