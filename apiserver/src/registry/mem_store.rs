//! An in-memory [`Datastore`] for unit tests that records every read: what the registry and
//! the admission plugins ask the store for. Lists honour `limit` (not `revision`: only the
//! latest state is kept). Watches are not served.

use std::collections::BTreeMap;
use std::sync::Mutex;

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::FutureExt;

use k3rs_datastore::{
    Datastore, Error, GuardedOp, KeyValue, ListRequest, ListResponse, Result, WatchItem,
    WatchRequest, WriteOutcome,
};

/// The store's keys and every read made of it.
#[derive(Debug, Default)]
pub struct MemStore {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    revision: i64,
    kvs: BTreeMap<Vec<u8>, KeyValue>,
    /// The key of every `get` and the start of every `list`, in order.
    reads: Vec<String>,
}

impl MemStore {
    /// The reads so far (keys and list prefixes), forgetting them.
    pub fn take_reads(&self) -> Vec<String> {
        std::mem::take(&mut self.lock().reads)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Datastore for MemStore {
    fn get(&self, key: &[u8]) -> BoxFuture<'_, Result<(Option<KeyValue>, i64)>> {
        let mut s = self.lock();
        s.reads.push(String::from_utf8_lossy(key).into_owned());
        let out = (s.kvs.get(key).cloned(), s.revision);
        futures::future::ready(Ok(out)).boxed()
    }

    fn list(&self, req: ListRequest) -> BoxFuture<'_, Result<ListResponse>> {
        let mut s = self.lock();
        s.reads.push(String::from_utf8_lossy(&req.key).into_owned());
        let mut kvs: Vec<KeyValue> = s
            .kvs
            .range(req.key..req.range_end)
            .map(|(_, kv)| kv.clone())
            .collect();
        let count = kvs.len() as i64;
        let more = req.limit > 0 && count > req.limit;
        if more {
            kvs.truncate(req.limit as usize);
        }
        let out = ListResponse {
            count,
            kvs,
            more,
            revision: s.revision,
        };
        futures::future::ready(Ok(out)).boxed()
    }

    fn guarded(
        &self,
        key: &[u8],
        mod_revision: i64,
        op: GuardedOp,
    ) -> BoxFuture<'_, Result<WriteOutcome>> {
        let mut s = self.lock();
        let current = s.kvs.get(key).cloned();
        if current.as_ref().map_or(0, |kv| kv.mod_revision) != mod_revision {
            let revision = s.revision;
            return futures::future::ready(Ok(WriteOutcome::Conflict { current, revision }))
                .boxed();
        }
        s.revision += 1;
        let revision = s.revision;
        match op {
            GuardedOp::Put { value, lease } => {
                let kv = KeyValue {
                    key: key.to_vec(),
                    create_revision: current.map_or(revision, |c| c.create_revision),
                    mod_revision: revision,
                    version: 1,
                    value,
                    lease,
                };
                s.kvs.insert(key.to_vec(), kv);
            }
            GuardedOp::Delete => {
                s.kvs.remove(key);
            }
        }
        futures::future::ready(Ok(WriteOutcome::Done { revision })).boxed()
    }

    fn watch(&self, _req: WatchRequest) -> BoxFuture<'_, Result<BoxStream<'static, WatchItem>>> {
        futures::future::ready(Err(Error::Unavailable("no watches here".into()))).boxed()
    }

    fn grant_lease(&self, _ttl: i64) -> BoxFuture<'_, Result<i64>> {
        futures::future::ready(Ok(1)).boxed()
    }

    fn current_revision(&self) -> BoxFuture<'_, Result<i64>> {
        futures::future::ready(Ok(self.lock().revision)).boxed()
    }

    fn compact(&self, _revision: i64) -> BoxFuture<'_, Result<()>> {
        futures::future::ready(Ok(())).boxed()
    }
}
