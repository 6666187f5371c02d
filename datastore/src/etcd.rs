//! [`Datastore`] on an external etcd (`--datastore-endpoint`), through the generated etcd v3
//! gRPC clients. Requests are exactly what kube-apiserver sends.

use std::path::PathBuf;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Identity};

use super::{
    Datastore, Error, Event, GuardedOp, KeyValue, ListRequest, ListResponse, Result, WatchItem,
    WatchRequest, WriteOutcome,
};
use crate::etcdpb as pb;
use crate::etcdpb::kv_client::KvClient;
use crate::etcdpb::lease_client::LeaseClient;
use crate::etcdpb::watch_client::WatchClient;
use crate::mvccpb;

/// Client certificate files for an `https://` endpoint.
#[derive(Debug, Clone, Default)]
pub struct EtcdTls {
    /// The CA bundle verifying the servers.
    pub ca_file: Option<PathBuf>,
    /// The client certificate.
    pub cert_file: Option<PathBuf>,
    /// The client key.
    pub key_file: Option<PathBuf>,
}

/// A client of an external etcd.
#[derive(Debug, Clone)]
pub struct EtcdClient {
    kv: KvClient<Channel>,
    watch: WatchClient<Channel>,
    lease: LeaseClient<Channel>,
}

/// Largest message we accept (etcd's default request limit is 1.5 MiB; lists are larger).
const MAX_MESSAGE: usize = 256 * 1024 * 1024;

impl EtcdClient {
    /// Connects lazily to `endpoint` (`http://` or `https://host:port`).
    pub fn connect(endpoint: &str, tls: &EtcdTls) -> Result<EtcdClient> {
        let channel = channel(endpoint, tls)?;
        Ok(EtcdClient {
            kv: KvClient::new(channel.clone())
                .max_decoding_message_size(MAX_MESSAGE)
                .max_encoding_message_size(MAX_MESSAGE),
            watch: WatchClient::new(channel.clone()).max_decoding_message_size(MAX_MESSAGE),
            lease: LeaseClient::new(channel),
        })
    }

    async fn txn(&self, key: &[u8], rev: i64, op: pb::request_op::Request) -> Result<WriteOutcome> {
        let txn = pb::TxnRequest {
            compare: vec![pb::Compare {
                result: pb::compare::CompareResult::Equal as i32,
                target: pb::compare::CompareTarget::Mod as i32,
                key: key.to_vec(),
                range_end: Vec::new(),
                target_union: Some(pb::compare::TargetUnion::ModRevision(rev)),
            }],
            success: vec![pb::RequestOp { request: Some(op) }],
            failure: vec![pb::RequestOp {
                request: Some(pb::request_op::Request::RequestRange(pb::RangeRequest {
                    key: key.to_vec(),
                    ..Default::default()
                })),
            }],
        };
        let resp = self
            .kv
            .clone()
            .txn(txn)
            .await
            .map_err(status_error)?
            .into_inner();
        let revision = resp.header.map_or(0, |h| h.revision);
        if resp.succeeded {
            return Ok(WriteOutcome::Done { revision });
        }
        let current = resp.responses.into_iter().find_map(|r| match r.response {
            Some(pb::response_op::Response::ResponseRange(r)) => r.kvs.into_iter().next().map(kv),
            _ => None,
        });
        Ok(WriteOutcome::Conflict { current, revision })
    }
}

/// A lazily connecting channel to `endpoint` (`http://` or `https://host:port`) with the
/// client certificate and CA of `tls`.
pub fn channel(endpoint: &str, tls: &EtcdTls) -> Result<Channel> {
    let bad = |e: &dyn std::fmt::Display| Error::Unavailable(format!("{endpoint}: {e}"));
    let mut ep = tonic::transport::Endpoint::from_shared(endpoint.to_string())
        .map_err(|e| bad(&e))?
        .connect_timeout(Duration::from_secs(5))
        .tcp_nodelay(true)
        .http2_keep_alive_interval(Duration::from_secs(30))
        .keep_alive_timeout(Duration::from_secs(10));
    if endpoint.starts_with("https://") {
        let read =
            |p: &PathBuf| std::fs::read(p).map_err(|e| bad(&format!("{}: {e}", p.display())));
        let mut config = ClientTlsConfig::new();
        if let Some(ca) = &tls.ca_file {
            config = config.ca_certificate(Certificate::from_pem(read(ca)?));
        }
        if let (Some(cert), Some(key)) = (&tls.cert_file, &tls.key_file) {
            config = config.identity(Identity::from_pem(read(cert)?, read(key)?));
        }
        ep = ep.tls_config(config).map_err(|e| bad(&e))?;
    }
    Ok(ep.connect_lazy())
}

fn status_error(s: tonic::Status) -> Error {
    let msg = s.message();
    if msg.contains("required revision has been compacted") {
        // etcd does not say where; callers only need the fact.
        Error::Compacted {
            compact_revision: 0,
        }
    } else if msg.contains("future revision") {
        Error::FutureRevision
    } else {
        Error::Unavailable(format!("etcd: {} {msg}", s.code()))
    }
}

fn kv(k: mvccpb::KeyValue) -> KeyValue {
    KeyValue {
        key: k.key,
        create_revision: k.create_revision,
        mod_revision: k.mod_revision,
        version: k.version,
        value: k.value,
        lease: k.lease,
    }
}

fn event(e: mvccpb::Event) -> Option<Event> {
    let prev = e.prev_kv.map(kv);
    let k = kv(e.kv?);
    Some(match mvccpb::event::EventType::try_from(e.r#type) {
        Ok(mvccpb::event::EventType::Delete) => Event::Delete {
            key: k.key,
            revision: k.mod_revision,
            prev,
        },
        _ => Event::Put { kv: k, prev },
    })
}

impl Datastore for EtcdClient {
    fn get(&self, key: &[u8]) -> BoxFuture<'_, Result<(Option<KeyValue>, i64)>> {
        let req = pb::RangeRequest {
            key: key.to_vec(),
            limit: 1,
            ..Default::default()
        };
        async move {
            let resp = self
                .kv
                .clone()
                .range(req)
                .await
                .map_err(status_error)?
                .into_inner();
            let rev = resp.header.map_or(0, |h| h.revision);
            Ok((resp.kvs.into_iter().next().map(kv), rev))
        }
        .boxed()
    }

    fn list(&self, req: ListRequest) -> BoxFuture<'_, Result<ListResponse>> {
        let req = pb::RangeRequest {
            key: req.key,
            range_end: req.range_end,
            limit: req.limit,
            revision: req.revision,
            ..Default::default()
        };
        async move {
            let resp = self
                .kv
                .clone()
                .range(req)
                .await
                .map_err(status_error)?
                .into_inner();
            Ok(ListResponse {
                revision: resp.header.map_or(0, |h| h.revision),
                kvs: resp.kvs.into_iter().map(kv).collect(),
                more: resp.more,
                count: resp.count,
            })
        }
        .boxed()
    }

    fn guarded(
        &self,
        key: &[u8],
        mod_revision: i64,
        op: GuardedOp,
    ) -> BoxFuture<'_, Result<WriteOutcome>> {
        let op = match op {
            GuardedOp::Put { value, lease } => {
                pb::request_op::Request::RequestPut(pb::PutRequest {
                    key: key.to_vec(),
                    value,
                    lease,
                    ..Default::default()
                })
            }
            GuardedOp::Delete => {
                pb::request_op::Request::RequestDeleteRange(pb::DeleteRangeRequest {
                    key: key.to_vec(),
                    ..Default::default()
                })
            }
        };
        let key = key.to_vec();
        async move { self.txn(&key, mod_revision, op).await }.boxed()
    }

    fn watch(&self, req: WatchRequest) -> BoxFuture<'_, Result<BoxStream<'static, WatchItem>>> {
        async move {
            let create = pb::WatchRequest {
                request_union: Some(pb::watch_request::RequestUnion::CreateRequest(
                    pb::WatchCreateRequest {
                        key: req.key,
                        range_end: req.range_end,
                        start_revision: req.start_revision,
                        progress_notify: req.progress_notify,
                        prev_kv: req.prev_kv,
                        ..Default::default()
                    },
                )),
            };
            // The request stream must stay open for the watch to live: it ends with the
            // response stream (the pending future is dropped with it).
            let requests =
                futures::stream::once(async { create }).chain(futures::stream::pending());
            let mut responses = self
                .watch
                .clone()
                .watch(requests)
                .await
                .map_err(status_error)?
                .into_inner();
            // The first response confirms the creation (or cancels a compacted start).
            let first = responses
                .message()
                .await
                .map_err(status_error)?
                .ok_or_else(|| Error::Unavailable("etcd closed the watch".into()))?;
            if first.canceled {
                return Err(if first.compact_revision > 0 {
                    Error::Compacted {
                        compact_revision: first.compact_revision,
                    }
                } else {
                    Error::Unavailable(format!("watch canceled: {}", first.cancel_reason))
                });
            }
            let stream = futures::stream::unfold(Some(responses), |state| async move {
                let mut responses = state?;
                loop {
                    match responses.message().await {
                        Ok(Some(r)) if r.canceled => {
                            let item = if r.compact_revision > 0 {
                                WatchItem::Compacted {
                                    compact_revision: r.compact_revision,
                                }
                            } else {
                                WatchItem::Failed(format!("watch canceled: {}", r.cancel_reason))
                            };
                            return Some((item, None));
                        }
                        Ok(Some(r)) if r.events.is_empty() => {
                            let revision = r.header.map_or(0, |h| h.revision);
                            return Some((WatchItem::Progress { revision }, Some(responses)));
                        }
                        Ok(Some(r)) => {
                            let events: Vec<Event> =
                                r.events.into_iter().filter_map(event).collect();
                            if events.is_empty() {
                                continue;
                            }
                            return Some((WatchItem::Events(events), Some(responses)));
                        }
                        Ok(None) => {
                            return Some((WatchItem::Failed("etcd closed the watch".into()), None))
                        }
                        Err(e) => return Some((WatchItem::Failed(e.to_string()), None)),
                    }
                }
            });
            Ok(stream.boxed())
        }
        .boxed()
    }

    fn grant_lease(&self, ttl: i64) -> BoxFuture<'_, Result<i64>> {
        async move {
            let resp = self
                .lease
                .clone()
                .lease_grant(pb::LeaseGrantRequest { ttl, id: 0 })
                .await
                .map_err(status_error)?
                .into_inner();
            Ok(resp.id)
        }
        .boxed()
    }

    fn current_revision(&self) -> BoxFuture<'_, Result<i64>> {
        async move {
            // kube-apiserver's GetCurrentResourceVersion: a count-only range over everything.
            let resp = self
                .kv
                .clone()
                .range(pb::RangeRequest {
                    key: b"/".to_vec(),
                    limit: 1,
                    count_only: true,
                    ..Default::default()
                })
                .await
                .map_err(status_error)?
                .into_inner();
            Ok(resp.header.map_or(0, |h| h.revision))
        }
        .boxed()
    }

    fn compact(&self, revision: i64) -> BoxFuture<'_, Result<()>> {
        async move {
            self.kv
                .clone()
                .compact(pb::CompactionRequest {
                    revision,
                    physical: false,
                })
                .await
                .map_err(status_error)?;
            Ok(())
        }
        .boxed()
    }
}
