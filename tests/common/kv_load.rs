//! Timed etcd KV load for the store benchmarks (`etcd_compare`, `ha_compare`): concurrent
//! clients of the generated tonic KV client, spread over one or more members' endpoints.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k3rs_datastore::etcdpb::kv_client::KvClient;
use k3rs_datastore::etcdpb::{PutRequest, RangeRequest};
use tonic::transport::Channel;

use super::client::channel;
use super::stats::Load;
use super::Endpoint;

/// Keys the load cycles over.
pub const KEYS: usize = 1000;
/// Bytes per value written.
pub const VALUE_LEN: usize = 256;

pub fn key(i: usize) -> Vec<u8> {
    format!("bench/{:04}", i % KEYS).into_bytes()
}

/// `clients` KV clients over `conns` connections per endpoint, the clients dealt round-robin
/// over the endpoints (client `i` talks to `eps[i % eps.len()]`).
async fn kv_clients(eps: &[Endpoint], clients: usize, conns: usize) -> Vec<KvClient<Channel>> {
    let mut chans = Vec::new();
    for ep in eps {
        let mut mine = Vec::new();
        for _ in 0..conns {
            mine.push(channel(ep).await.expect("connect"));
        }
        chans.push(mine);
    }
    (0..clients)
        .map(|i| {
            let per_ep = &chans[i % eps.len()];
            KvClient::new(per_ep[(i / eps.len()) % conns].clone())
        })
        .collect()
}

/// `clients` concurrent loops of `op` for `dur` (or until `max_ops` in total), spread over
/// `eps`; at most 8 connections per endpoint are shared by its clients.
pub async fn load<F, Fut>(
    eps: &[Endpoint],
    clients: usize,
    dur: Duration,
    max_ops: usize,
    op: F,
) -> Load
where
    F: Fn(KvClient<Channel>, usize) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = KvClient<Channel>> + Send,
{
    let per_ep = clients.div_ceil(eps.len().max(1));
    let kvs = kv_clients(eps, clients, per_ep.clamp(1, 8)).await;
    let counter = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let tasks: Vec<_> = kvs
        .into_iter()
        .map(|mut kv| {
            let op = op.clone();
            let counter = counter.clone();
            tokio::spawn(async move {
                let mut lat = Vec::new();
                loop {
                    let n = counter.fetch_add(1, Ordering::Relaxed);
                    if n >= max_ops || start.elapsed() >= dur {
                        break;
                    }
                    let t = Instant::now();
                    kv = op(kv, n).await;
                    lat.push(t.elapsed());
                }
                lat
            })
        })
        .collect();
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.expect("load task"));
    }
    Load {
        ops: all.len(),
        secs: start.elapsed().as_secs_f64(),
        lat: all,
    }
}

/// One put of a [`VALUE_LEN`]-byte value to key `n`.
pub async fn put_op(mut kv: KvClient<Channel>, n: usize) -> KvClient<Channel> {
    let req = PutRequest {
        key: key(n),
        value: vec![b'v'; VALUE_LEN],
        ..Default::default()
    };
    kv.put(req).await.expect("put");
    kv
}

/// One linearizable range of key `n`.
pub async fn range_op(mut kv: KvClient<Channel>, n: usize) -> KvClient<Channel> {
    let req = RangeRequest {
        key: key(n),
        ..Default::default()
    };
    kv.range(req).await.expect("range");
    kv
}
