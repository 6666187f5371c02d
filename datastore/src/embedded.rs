//! [`Datastore`] on the in-process Raft node: writes are proposed through Raft, reads go to
//! the local state machine after a linearizable read barrier, watches read the watch hub.

use std::sync::Arc;

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt};
use k3rs_raft::Node;
use k3rs_storage::{
    Command, CommandResponse, Compare, CompareResult, CompareTarget, DeleteRangeRequest, EventKind,
    PutRequest, RangeRequest, RequestError, RequestOp, ResponseOp, TxnRequest, WatchBatch,
};

use super::quota::{self, Quota};
use super::{
    Datastore, Error, Event, GuardedOp, KeyValue, ListRequest, ListResponse, Result, WatchItem,
    WatchRequest, WriteOutcome,
};

/// The embedded store.
#[derive(Clone)]
pub struct Embedded {
    node: Arc<Node>,
    quota: Quota,
}

impl std::fmt::Debug for Embedded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Embedded").finish_non_exhaustive()
    }
}

impl Embedded {
    /// The datastore served by the local Raft member `node`, with etcd's default backend
    /// quota.
    pub fn new(node: Arc<Node>) -> Embedded {
        Embedded {
            node,
            quota: Quota::default(),
        }
    }

    /// The same store with another backend quota (`--etcd-quota-backend-bytes`): writes
    /// that would outgrow it raise NOSPACE and are refused, as the etcd front end's are.
    pub fn with_quota(self, quota: Quota) -> Embedded {
        Embedded { quota, ..self }
    }

    async fn range(&self, req: RangeRequest) -> Result<(k3rs_storage::RangeResponse, i64)> {
        self.node.read_barrier().await.map_err(unavailable)?;
        match self.node.store().range(&req).map_err(unavailable)? {
            Ok((rev, resp)) => Ok((resp, rev)),
            Err(e) => Err(request_error(e)),
        }
    }

    /// `If MOD(key)==rev Then op Else Range(key)`.
    async fn txn(&self, key: &[u8], rev: i64, op: RequestOp) -> Result<WriteOutcome> {
        if let RequestOp::Put(p) = &op {
            quota::check(
                &self.node,
                self.quota,
                quota::put_cost(p.key.len(), p.value.len()),
            )
            .await
            .map_err(request_error)?;
        }
        let txn = TxnRequest {
            compare: vec![Compare {
                result: CompareResult::Equal,
                target: CompareTarget::Mod(rev),
                key: key.to_vec(),
                range_end: Vec::new(),
            }],
            success: vec![op],
            failure: vec![RequestOp::Range(RangeRequest {
                key: key.to_vec(),
                ..Default::default()
            })],
        };
        let out = self
            .node
            .write(Command::Txn(txn))
            .await
            .map_err(unavailable)?;
        let revision = out.revision;
        match out.result.map_err(request_error)? {
            CommandResponse::Txn(t) if t.succeeded => Ok(WriteOutcome::Done { revision }),
            CommandResponse::Txn(t) => {
                let current = t.responses.into_iter().find_map(|r| match r {
                    ResponseOp::Range(r) => r.kvs.into_iter().next(),
                    _ => None,
                });
                Ok(WriteOutcome::Conflict { current, revision })
            }
            other => Err(Error::Unavailable(format!(
                "unexpected txn response {other:?}"
            ))),
        }
    }
}

fn unavailable(e: impl std::fmt::Display) -> Error {
    Error::Unavailable(e.to_string())
}

fn request_error(e: RequestError) -> Error {
    match e {
        RequestError::Compacted { compact_revision } => Error::Compacted { compact_revision },
        RequestError::FutureRevision => Error::FutureRevision,
        other => Error::Unavailable(other.to_string()),
    }
}

impl Datastore for Embedded {
    fn get(&self, key: &[u8]) -> BoxFuture<'_, Result<(Option<KeyValue>, i64)>> {
        let req = RangeRequest {
            key: key.to_vec(),
            limit: 1,
            ..Default::default()
        };
        async move {
            let (resp, rev) = self.range(req).await?;
            Ok((resp.kvs.into_iter().next(), rev))
        }
        .boxed()
    }

    fn list(&self, req: ListRequest) -> BoxFuture<'_, Result<ListResponse>> {
        let req = RangeRequest {
            key: req.key,
            range_end: req.range_end,
            limit: req.limit,
            revision: req.revision,
            ..Default::default()
        };
        async move {
            let (resp, revision) = self.range(req).await?;
            Ok(ListResponse {
                kvs: resp.kvs,
                more: resp.more,
                count: resp.count,
                revision,
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
            GuardedOp::Put { value, lease } => RequestOp::Put(PutRequest {
                key: key.to_vec(),
                value,
                lease,
                ..Default::default()
            }),
            GuardedOp::Delete => RequestOp::DeleteRange(DeleteRangeRequest {
                key: key.to_vec(),
                ..Default::default()
            }),
        };
        let key = key.to_vec();
        async move { self.txn(&key, mod_revision, op).await }.boxed()
    }

    fn watch(&self, req: WatchRequest) -> BoxFuture<'_, Result<BoxStream<'static, WatchItem>>> {
        async move {
            // A start at or below the current revision must see everything committed so far.
            self.node.read_barrier().await.map_err(unavailable)?;
            let watcher = self
                .node
                .store()
                .watch(k3rs_storage::WatchRequest {
                    key: req.key,
                    range_end: req.range_end,
                    start_revision: req.start_revision,
                    prev_kv: req.prev_kv,
                    filter_put: false,
                    filter_delete: false,
                })
                .map_err(request_error)?;
            let stream = futures::stream::unfold(Some(watcher), |state| async move {
                let mut watcher = state?;
                match watcher.next().await {
                    WatchBatch::Events { events, .. } => {
                        let events = events.into_iter().map(convert_event).collect();
                        Some((WatchItem::Events(events), Some(watcher)))
                    }
                    WatchBatch::Compacted { compact_revision } => {
                        Some((WatchItem::Compacted { compact_revision }, None))
                    }
                }
            });
            Ok(stream.boxed())
        }
        .boxed()
    }

    fn grant_lease(&self, ttl: i64) -> BoxFuture<'_, Result<i64>> {
        async move {
            quota::check(&self.node, self.quota, quota::LEASE_COST)
                .await
                .map_err(request_error)?;
            let ttl = ttl.max(self.node.min_lease_ttl());
            let out = self
                .node
                .write(Command::LeaseGrant { id: 0, ttl })
                .await
                .map_err(unavailable)?;
            match out.result.map_err(request_error)? {
                CommandResponse::LeaseGrant { id, .. } => Ok(id),
                other => Err(Error::Unavailable(format!(
                    "unexpected lease grant response {other:?}"
                ))),
            }
        }
        .boxed()
    }

    fn current_revision(&self) -> BoxFuture<'_, Result<i64>> {
        async move {
            self.node.read_barrier().await.map_err(unavailable)?;
            Ok(self.node.store().current_revision())
        }
        .boxed()
    }

    fn compact(&self, revision: i64) -> BoxFuture<'_, Result<()>> {
        async move {
            let out = self
                .node
                .write(Command::Compact { revision })
                .await
                .map_err(unavailable)?;
            out.result.map(|_| ()).map_err(request_error)
        }
        .boxed()
    }
}

fn convert_event(e: k3rs_storage::Event) -> Event {
    match e.kind {
        EventKind::Put => Event::Put {
            kv: e.kv,
            prev: e.prev_kv,
        },
        EventKind::Delete => Event::Delete {
            key: e.kv.key,
            revision: e.kv.mod_revision,
            prev: e.prev_kv,
        },
    }
}
