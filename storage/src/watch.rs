//! Watch hub types (STUB: the implementation replaces this file).
use crate::types::KeyValue;

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum EventKind {
    Put,
    Delete,
}

/// One change of one key (etcd `mvccpb.Event`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub kind: EventKind,
    /// For a delete: key, `mod_revision` = delete revision, other fields zero.
    pub kv: KeyValue,
    pub prev_kv: Option<KeyValue>,
}

/// What to watch. Same key/range_end forms as a range.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WatchRequest {
    pub key: Vec<u8>,
    pub range_end: Vec<u8>,
    /// First revision to deliver; 0 = only changes after the current revision.
    pub start_revision: i64,
    pub prev_kv: bool,
    pub filter_put: bool,
    pub filter_delete: bool,
}

/// What a watcher yields next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchBatch {
    /// Events of one or more whole revisions, in order. `revision` = the store revision to put
    /// in the response header (>= every event's revision).
    Events { revision: i64, events: Vec<Event> },
    /// The watcher's next revision was compacted away; the watch is over.
    Compacted { compact_revision: i64 },
}

/// A live watch. Ordered, gap-free, a revision is never split across batches.
pub struct Watcher {}

impl Watcher {
    /// Waits for the next batch. Cancel-safe.
    pub async fn next(&mut self) -> WatchBatch {
        unimplemented!()
    }

    /// `Some(rev)` when every matching event with revision <= `rev` has been yielded and the
    /// watcher is caught up (a progress notification may then carry `rev`); `None` while
    /// replaying history.
    pub fn progress_revision(&self) -> Option<i64> {
        unimplemented!()
    }
}
