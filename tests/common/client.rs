//! gRPC clients (the generated `k3rs_datastore::etcdpb` tonic clients) for an [`Endpoint`]:
//! mTLS with the k3rs client certificate, or plain http for the reference etcd.

use std::time::Duration;

use k3rs_datastore::etcdpb::kv_client::KvClient;
use k3rs_datastore::etcdpb::lease_client::LeaseClient;
use k3rs_datastore::etcdpb::maintenance_client::MaintenanceClient;
use k3rs_datastore::etcdpb::watch_client::WatchClient;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Identity};

use super::Endpoint;

/// Opens one HTTP/2 connection to `ep` (each call is a separate connection); requests time
/// out after 10 s.
pub async fn channel(ep: &Endpoint) -> anyhow::Result<Channel> {
    channel_with_timeout(ep, Duration::from_secs(10)).await
}

/// [`channel`] whose requests time out after `timeout` (a reference etcd's physical
/// compaction of a long history takes longer than 10 s on a loaded machine).
pub async fn channel_with_timeout(ep: &Endpoint, timeout: Duration) -> anyhow::Result<Channel> {
    let mut endpoint = tonic::transport::Endpoint::from_shared(ep.url.clone())?
        .connect_timeout(Duration::from_secs(3))
        .timeout(timeout)
        .tcp_nodelay(true);
    if let Some(tls) = &ep.tls {
        let mut config =
            ClientTlsConfig::new().ca_certificate(Certificate::from_pem(std::fs::read(&tls.ca)?));
        if let (Some(cert), Some(key)) = (&tls.cert, &tls.key) {
            config = config.identity(Identity::from_pem(
                std::fs::read(cert)?,
                std::fs::read(key)?,
            ));
        }
        endpoint = endpoint.tls_config(config)?;
    }
    Ok(endpoint.connect().await?)
}

/// All the etcd API clients over one connection.
#[derive(Debug, Clone)]
pub struct Clients {
    pub kv: KvClient<Channel>,
    pub lease: LeaseClient<Channel>,
    pub watch: WatchClient<Channel>,
    pub maintenance: MaintenanceClient<Channel>,
}

impl Clients {
    pub async fn connect(ep: &Endpoint) -> anyhow::Result<Clients> {
        Clients::connect_with_timeout(ep, Duration::from_secs(10)).await
    }

    /// [`Clients::connect`] whose requests time out after `timeout`.
    pub async fn connect_with_timeout(ep: &Endpoint, timeout: Duration) -> anyhow::Result<Clients> {
        let ch = channel_with_timeout(ep, timeout).await?;
        let big = 64 * 1024 * 1024;
        Ok(Clients {
            kv: KvClient::new(ch.clone())
                .max_decoding_message_size(big)
                .max_encoding_message_size(big),
            lease: LeaseClient::new(ch.clone()),
            watch: WatchClient::new(ch.clone()),
            maintenance: MaintenanceClient::new(ch).max_decoding_message_size(big),
        })
    }
}

/// A tokio runtime for a synchronous `#[test]`.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// An open Watch stream: `requests` sends more create/cancel/progress requests on it.
#[derive(Debug)]
pub struct WatchStream {
    pub requests: tokio::sync::mpsc::Sender<k3rs_datastore::etcdpb::WatchRequest>,
    pub responses: tonic::Streaming<k3rs_datastore::etcdpb::WatchResponse>,
}

/// Opens a Watch stream with one create request.
pub async fn open_watch(
    c: &mut Clients,
    create: k3rs_datastore::etcdpb::WatchCreateRequest,
) -> Result<WatchStream, tonic::Status> {
    use k3rs_datastore::etcdpb::watch_request::RequestUnion;
    use k3rs_datastore::etcdpb::WatchRequest;
    let (requests, mut rx) = tokio::sync::mpsc::channel(16);
    let create = WatchRequest {
        request_union: Some(RequestUnion::CreateRequest(create)),
    };
    requests.send(create).await.expect("receiver alive");
    let stream = futures::stream::poll_fn(move |cx| rx.poll_recv(cx));
    let responses = c.watch.watch(stream).await?.into_inner();
    Ok(WatchStream {
        requests,
        responses,
    })
}
