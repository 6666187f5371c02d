//! The watch hub: history replayed from sled, then live events from a broadcast channel.
//!
//! # Guarantees
//! A [`Watcher`] yields every matching event with revision >= its start, in revision order,
//! exactly once, and never splits a revision across batches. Live batches are published by
//! `apply_batch` after they are committed, under the store's write lock; a watcher subscribes
//! under the read lock before noting the revision its history ends at, so every revision is
//! either in its history or in its channel. A watcher that falls behind the channel
//! (`Lagged`) goes back to reading history from sled, so slow watchers lose nothing; if that
//! history was compacted meanwhile it yields [`WatchBatch::Compacted`].

use std::sync::Arc;

use tokio::sync::broadcast;

use crate::keyindex::in_range;
use crate::reader::KvReader;
use crate::record;
use crate::revision::{kv_key, Rev};
use crate::state::State;
use crate::store::{Error, Inner, Result};
use crate::types::{KeyValue, RequestError};

/// Capacity of the live-event channel, in batches.
pub(crate) const HUB_CAPACITY: usize = 256;
/// History records scanned per step before yielding (at a revision boundary).
const HISTORY_SCAN: usize = 4096;

/// Whether an event wrote or deleted the key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum EventKind {
    /// Created or modified.
    Put,
    /// Deleted.
    Delete,
}

/// One change of one key (etcd `mvccpb.Event`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// Put or delete.
    pub kind: EventKind,
    /// For a delete: key, `mod_revision` = delete revision, other fields zero.
    pub kv: KeyValue,
    /// The previous version, when asked and known.
    pub prev_kv: Option<KeyValue>,
}

/// What to watch. Same key/range_end forms as a range.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WatchRequest {
    /// The first key.
    pub key: Vec<u8>,
    /// The range end (as a range's).
    pub range_end: Vec<u8>,
    /// First revision to deliver; 0 = only changes after the current revision.
    pub start_revision: i64,
    /// Deliver each event's previous version.
    pub prev_kv: bool,
    /// Leave put events out.
    pub filter_put: bool,
    /// Leave delete events out.
    pub filter_delete: bool,
}

/// What a watcher yields next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchBatch {
    /// Events of one or more whole revisions, in order. `revision` = the store revision to put
    /// in the response header (>= every event's revision).
    Events {
        /// The header revision.
        revision: i64,
        /// The events.
        events: Vec<Event>,
    },
    /// The watcher's next revision was compacted away; the watch is over.
    Compacted {
        /// The oldest revision still kept.
        compact_revision: i64,
    },
}

/// A change as the apply path records it: the previous version is a revision, read only by
/// watchers that want `prev_kv`.
#[derive(Debug, Clone)]
pub(crate) struct RawEvent {
    pub kind: EventKind,
    pub kv: KeyValue,
    pub prev: Option<Rev>,
}

/// The events of one applied batch, published to every watcher.
#[derive(Debug)]
pub(crate) struct LiveBatch {
    /// Store revision after the batch (the last event's revision).
    pub revision: i64,
    pub events: Vec<RawEvent>,
    /// The state was replaced (snapshot import): watchers re-read history from their next
    /// revision.
    pub resync: bool,
}

/// A live watch. Ordered, gap-free, a revision is never split across batches.
pub struct Watcher {
    inner: Arc<Inner>,
    rx: broadcast::Receiver<Arc<LiveBatch>>,
    req: WatchRequest,
    /// Next revision to deliver.
    next: i64,
    /// History must be read from sled through this revision before consuming live batches.
    history_until: i64,
    /// Highest store revision fully processed.
    processed: i64,
    compacted: Option<i64>,
}

/// Starts a watch (see [`crate::Store::watch`]).
pub(crate) fn start(inner: &Arc<Inner>, req: WatchRequest) -> Result<Watcher, RequestError> {
    let st = inner.read();
    let rx = inner.hub.subscribe();
    let current = st.rev;
    let next = if req.start_revision <= 0 {
        current + 1
    } else {
        req.start_revision
    };
    if next < st.compact {
        return Err(RequestError::Compacted {
            compact_revision: st.reported_compact(),
        });
    }
    drop(st);
    Ok(Watcher {
        inner: inner.clone(),
        rx,
        req,
        next,
        history_until: current,
        processed: current.min(next - 1),
        compacted: None,
    })
}

impl Watcher {
    /// Waits for the next batch. Cancel-safe: state only changes between awaits.
    pub async fn next(&mut self) -> WatchBatch {
        loop {
            if let Some(batch) = self.try_next() {
                return batch;
            }
            match self.rx.recv().await {
                Ok(b) => {
                    if let Some(batch) = self.live(&b) {
                        return batch;
                    }
                }
                Err(broadcast::error::RecvError::Lagged(_)) => self.lagged(),
                Err(broadcast::error::RecvError::Closed) => std::future::pending::<()>().await,
            }
        }
    }

    /// The next batch if one is ready without waiting; `None` once everything published so
    /// far is processed (then [`Watcher::progress_revision`] is up to date).
    pub fn try_next(&mut self) -> Option<WatchBatch> {
        loop {
            if let Some(compact_revision) = self.compacted {
                return Some(WatchBatch::Compacted { compact_revision });
            }
            if self.next <= self.history_until {
                if let Some(batch) = self.history_step() {
                    return Some(batch);
                }
                continue;
            }
            match self.rx.try_recv() {
                Ok(b) => {
                    if let Some(batch) = self.live(&b) {
                        return Some(batch);
                    }
                }
                Err(broadcast::error::TryRecvError::Lagged(_)) => self.lagged(),
                Err(_) => return None,
            }
        }
    }

    /// Fell behind the channel: read history from sled up to the current revision.
    fn lagged(&mut self) {
        self.history_until = self.inner.read().rev;
    }

    /// `Some(rev)` when every matching event with revision <= `rev` has been yielded and the
    /// watcher is caught up (a progress notification may then carry `rev`); `None` while
    /// replaying history.
    pub fn progress_revision(&self) -> Option<i64> {
        (self.compacted.is_none() && self.next > self.history_until).then_some(self.processed)
    }

    fn wants(&self, kind: EventKind, key: &[u8]) -> bool {
        let filtered = match kind {
            EventKind::Put => self.req.filter_put,
            EventKind::Delete => self.req.filter_delete,
        };
        !filtered && in_range(key, &self.req.key, &self.req.range_end)
    }

    /// Handles one live batch; `Some` if it had matching events.
    fn live(&mut self, b: &LiveBatch) -> Option<WatchBatch> {
        if b.resync {
            self.history_until = b.revision;
            return None;
        }
        if b.revision < self.next {
            return None;
        }
        let wanted: Vec<&RawEvent> = b
            .events
            .iter()
            .filter(|e| e.kv.mod_revision >= self.next && self.wants(e.kind, &e.kv.key))
            .collect();
        self.next = b.revision + 1;
        self.processed = b.revision;
        if wanted.is_empty() {
            return None;
        }
        let st = self.inner.read();
        let kvs = KvReader::new(&st.db, None);
        let events = wanted
            .into_iter()
            .map(|e| Event {
                kind: e.kind,
                kv: e.kv.clone(),
                prev_kv: if self.req.prev_kv {
                    e.prev
                        .and_then(|r| kvs.get(r).ok().flatten())
                        .map(|(kv, _)| kv)
                } else {
                    None
                },
            })
            .collect();
        Some(WatchBatch::Events {
            revision: b.revision,
            events,
        })
    }

    /// Reads one step of history; `Some` if it found matching events or the history is gone.
    fn history_step(&mut self) -> Option<WatchBatch> {
        let inner = self.inner.clone();
        let st = inner.read();
        if self.next < st.compact {
            self.compacted = Some(st.reported_compact());
            return Some(WatchBatch::Compacted {
                compact_revision: st.reported_compact(),
            });
        }
        let until = self.history_until.min(st.rev);
        if self.next > until {
            // The state was replaced by an older one: wait for it to reach `next`.
            self.history_until = until;
            return None;
        }
        let mut events = Vec::new();
        let mut scanned = 0usize;
        let mut last_main = self.next - 1;
        let mut stopped_at = None;
        let range = kv_key(Rev::new(self.next, 0))..kv_key(Rev::new(until.saturating_add(1), 0));
        for item in st.db.range(range) {
            let step = item.map_err(Error::from).and_then(|(k, v)| {
                let rev = crate::revision::parse_kv_key(&k)?;
                if st.garbage.contains(&rev) {
                    return Ok(None); // compacted, not yet deleted from sled
                }
                Ok(Some((rev, v)))
            });
            let (rev, v) = match step {
                Ok(Some(found)) => found,
                Ok(None) => continue,
                Err(e) => return Some(self.fail(&st, e)),
            };
            if scanned >= HISTORY_SCAN && rev.main != last_main {
                stopped_at = Some(rev.main);
                break;
            }
            scanned += 1;
            last_main = rev.main;
            match self.history_event(&st, rev, &v) {
                Ok(Some(e)) => events.push(e),
                Ok(None) => {}
                Err(e) => return Some(self.fail(&st, e)),
            }
        }
        let processed = match stopped_at {
            Some(main) => main - 1,
            None => until,
        };
        self.next = processed + 1;
        self.processed = self.processed.max(processed);
        if stopped_at.is_none() {
            self.history_until = until;
        }
        (!events.is_empty()).then_some(WatchBatch::Events {
            revision: processed,
            events,
        })
    }

    /// History cannot be read (engine failure or corrupt record): the watch ends as if
    /// compacted, so the client starts over (re-lists) instead of missing events.
    fn fail(&mut self, st: &State, e: Error) -> WatchBatch {
        tracing::error!(error = %e, next = self.next, "watch history unreadable; ending the watch");
        self.compacted = Some(st.reported_compact());
        WatchBatch::Compacted {
            compact_revision: st.reported_compact(),
        }
    }

    fn history_event(&self, st: &State, rev: Rev, v: &[u8]) -> Result<Option<Event>> {
        let r = record::parse(rev, v)?;
        let kind = if r.tombstone {
            EventKind::Delete
        } else {
            EventKind::Put
        };
        if !self.wants(kind, r.key) {
            return Ok(None);
        }
        let prev_kv = if self.req.prev_kv && (r.tombstone || r.version > 1) {
            let at = st.index.get(r.key).and_then(|ki| ki.get(rev.main - 1));
            at.and_then(|k| KvReader::new(&st.db, None).get(k.rev).ok().flatten())
                .map(|(kv, _)| kv)
        } else {
            None
        };
        let kv = KeyValue {
            key: r.key.to_vec(),
            mod_revision: rev.main,
            ..KeyValue::default()
        };
        let kv = if r.tombstone {
            kv
        } else {
            KeyValue {
                create_revision: r.create_revision,
                version: r.version,
                value: r.value.to_vec(),
                lease: r.lease,
                ..kv
            }
        };
        Ok(Some(Event { kind, kv, prev_kv }))
    }
}
