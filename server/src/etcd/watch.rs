//! The Watch service: one task per gRPC stream multiplexes many watchers.
//!
//! # Guarantees (etcd's, see `v3rpc/watch.go`)
//! - A create request is answered with `created` (header revision = current revision) before
//!   any event of that watcher. IDs are assigned per stream from 0 unless the client picks one.
//! - A watcher whose start revision is compacted (or negative, as etcd 3.4) gets `created`,
//!   then `canceled` with `compact_revision`; an empty range or a duplicate ID gets one
//!   `created`+`canceled` response with watch ID -1 and a `cancel_reason`.
//! - Events of one watcher are sent in revision order, a revision never split (except by
//!   `fragment`, which marks every piece but the last).
//! - A `WatchProgressRequest` is answered with watch ID -1 once every watcher of the stream is
//!   caught up; every later event on the stream has a higher revision than its header.
//! - Periodic progress notifications go to watchers with `progress_notify` that sent no event
//!   since the previous tick.
//!
//! The stream is a state machine driven by one task: client requests, watcher batches, the
//! progress ticker and shutdown are its inputs; responses go out in the order decided here.

use std::collections::BTreeMap;
use std::pin::Pin;
use std::time::Duration;

use futures::{FutureExt, Stream};
use k3rs_storage::{RequestError, WatchBatch, Watcher};
use prost::Message;
use tokio::sync::mpsc;
use tokio::time::{interval, interval_at, Instant, MissedTickBehavior};
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

use super::error::EtcdError;
use super::{convert, requires_leader, Api, MAX_GRPC_MESSAGE_BYTES};
use crate::etcdpb as pb;

/// The watch ID of responses that are not about one watcher.
pub const INVALID_WATCH_ID: i64 = -1;
/// How often a stream re-checks a pending progress request and, for `hasleader` streams, the
/// leader.
const RECHECK: Duration = Duration::from_millis(50);

const ERR_DUPLICATE_ID: &str = "mvcc: duplicate watch ID provided on the WatchStream";
const ERR_EMPTY_RANGE: &str = "mvcc: watcher range is empty";

#[derive(Debug, Clone)]
pub struct WatchService {
    api: Api,
}

impl WatchService {
    pub fn new(api: Api) -> WatchService {
        WatchService { api }
    }
}

type WatchResponseStream = Pin<Box<dyn Stream<Item = Result<pb::WatchResponse, Status>> + Send>>;

#[tonic::async_trait]
impl pb::watch_server::Watch for WatchService {
    type WatchStream = WatchResponseStream;

    async fn watch(
        &self,
        request: Request<Streaming<pb::WatchRequest>>,
    ) -> Result<Response<Self::WatchStream>, Status> {
        let leader_required = requires_leader(request.metadata());
        let (tx, rx) = mpsc::channel(64);
        let stream = WatchStream {
            api: self.api.clone(),
            tx,
            watchers: BTreeMap::new(),
            next_id: 0,
            progress_pending: false,
            rotation: 0,
            leader_required,
        };
        tokio::spawn(stream.run(request.into_inner()));
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }
}

/// One watcher of a stream.
struct ActiveWatch {
    watcher: Watcher,
    progress_notify: bool,
    fragment: bool,
    /// No event sent since the last progress tick (etcd's per-watcher progress flag).
    quiet: bool,
}

/// The client went away: stop.
struct Closed;

type Step = Result<(), Closed>;

struct WatchStream {
    api: Api,
    tx: mpsc::Sender<Result<pb::WatchResponse, Status>>,
    watchers: BTreeMap<i64, ActiveWatch>,
    next_id: i64,
    progress_pending: bool,
    /// Which watcher is polled first, rotated so a busy watcher cannot starve the others.
    rotation: usize,
    leader_required: bool,
}

enum Input {
    Request(Option<pb::WatchRequest>),
    InboundFailed,
    Batch(i64, WatchBatch),
    ProgressTick,
    Recheck,
    Shutdown,
    ClientGone,
}

impl WatchStream {
    async fn run(mut self, mut inbound: Streaming<pb::WatchRequest>) {
        let shutdown = self.api.shutdown_token().clone();
        let period = self
            .api
            .config()
            .progress_notify_interval
            .max(Duration::from_millis(100));
        let mut progress = interval_at(Instant::now() + period, period);
        progress.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut recheck = interval(RECHECK);
        recheck.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut inbound_open = true;
        loop {
            let tx = self.tx.clone();
            let needs_recheck = self.progress_pending || self.leader_required;
            let input = tokio::select! {
                _ = shutdown.cancelled() => Input::Shutdown,
                _ = tx.closed() => Input::ClientGone,
                msg = inbound.message(), if inbound_open => match msg {
                    Ok(m) => Input::Request(m),
                    Err(_) => Input::InboundFailed,
                },
                (id, batch) = next_batch(&mut self.watchers, self.rotation), if !self.watchers.is_empty() => {
                    Input::Batch(id, batch)
                }
                _ = progress.tick() => Input::ProgressTick,
                _ = recheck.tick(), if needs_recheck => Input::Recheck,
            };
            let step = match input {
                Input::Shutdown => {
                    let _ = self
                        .tx
                        .send(Err(EtcdError::Raft(k3rs_raft::Error::Stopped).into()))
                        .await;
                    return;
                }
                Input::ClientGone | Input::InboundFailed => return,
                // A client that half-closes keeps receiving events, as with etcd.
                Input::Request(None) => {
                    inbound_open = false;
                    Ok(())
                }
                Input::Request(Some(req)) => self.on_request(req).await,
                Input::Batch(id, batch) => {
                    self.rotation = self.rotation.wrapping_add(1);
                    match self.on_batch(id, batch).await {
                        Ok(()) if self.progress_pending => self.try_progress_all().await,
                        other => other,
                    }
                }
                Input::ProgressTick => self.on_progress_tick().await,
                Input::Recheck => self.on_recheck().await,
            };
            if step.is_err() {
                return;
            }
        }
    }

    async fn send(&self, resp: pb::WatchResponse) -> Step {
        self.tx.send(Ok(resp)).await.map_err(|_| Closed)
    }

    async fn on_request(&mut self, req: pb::WatchRequest) -> Step {
        use pb::watch_request::RequestUnion;
        match req.request_union {
            Some(RequestUnion::CreateRequest(c)) => self.create(c).await,
            Some(RequestUnion::CancelRequest(c)) => self.cancel(c.watch_id).await,
            Some(RequestUnion::ProgressRequest(_)) => {
                self.progress_pending = true;
                self.try_progress_all().await
            }
            None => Ok(()), // etcd ignores requests it does not understand
        }
    }

    fn refused(&self, reason: &str) -> pb::WatchResponse {
        pb::WatchResponse {
            header: self.api.current_header(),
            watch_id: INVALID_WATCH_ID,
            created: true,
            canceled: true,
            cancel_reason: reason.to_string(),
            ..Default::default()
        }
    }

    async fn create(&mut self, c: pb::WatchCreateRequest) -> Step {
        let req = convert::watch_request(&c);
        if range_is_empty(&req.key, &req.range_end) {
            return self.send(self.refused(ERR_EMPTY_RANGE)).await;
        }
        let id = if c.watch_id != 0 {
            if c.watch_id < 0 || self.watchers.contains_key(&c.watch_id) {
                return self.send(self.refused(ERR_DUPLICATE_ID)).await;
            }
            c.watch_id
        } else {
            while self.watchers.contains_key(&self.next_id) {
                self.next_id += 1;
            }
            let id = self.next_id;
            self.next_id += 1;
            id
        };
        if c.start_revision < 0 {
            // etcd 3.4 registers the watcher, then cancels it as compacted (with compact
            // revision -1 while nothing was ever compacted).
            let compacted = self.api.node().store().compact_revision();
            let compact_revision = if compacted > 0 { compacted } else { -1 };
            let created = pb::WatchResponse {
                header: self.api.current_header(),
                watch_id: id,
                created: true,
                ..Default::default()
            };
            self.send(created).await?;
            return self.send(self.compacted(id, compact_revision)).await;
        }
        let created = |header| pb::WatchResponse {
            header,
            watch_id: id,
            created: true,
            ..Default::default()
        };
        match self.api.node().store().watch(req) {
            Ok(watcher) => {
                let header = self.api.current_header();
                self.watchers.insert(
                    id,
                    ActiveWatch {
                        watcher,
                        progress_notify: c.progress_notify,
                        fragment: c.fragment,
                        quiet: true,
                    },
                );
                self.send(created(header)).await
            }
            Err(RequestError::Compacted { compact_revision }) => {
                self.send(created(self.api.current_header())).await?;
                self.send(self.compacted(id, compact_revision)).await
            }
            Err(other) => {
                self.send(self.refused(&EtcdError::Request(other).message()))
                    .await
            }
        }
    }

    /// etcd's cancellation of a watcher that needs compacted history (header revision 0, as
    /// etcd's watchable store leaves it).
    fn compacted(&self, id: i64, compact_revision: i64) -> pb::WatchResponse {
        pb::WatchResponse {
            header: self.api.header(0),
            watch_id: id,
            canceled: true,
            compact_revision,
            ..Default::default()
        }
    }

    async fn cancel(&mut self, id: i64) -> Step {
        if self.watchers.remove(&id).is_none() {
            return Ok(()); // etcd answers nothing for an unknown ID
        }
        let resp = pb::WatchResponse {
            header: self.api.current_header(),
            watch_id: id,
            canceled: true,
            ..Default::default()
        };
        self.send(resp).await
    }

    async fn on_batch(&mut self, id: i64, batch: WatchBatch) -> Step {
        match batch {
            WatchBatch::Events { revision, events } => {
                let Some(w) = self.watchers.get_mut(&id) else {
                    return Ok(());
                };
                if events.is_empty() {
                    return Ok(());
                }
                w.quiet = false;
                let fragment = w.fragment;
                let resp = pb::WatchResponse {
                    header: self.api.header(revision),
                    watch_id: id,
                    events: events.into_iter().map(convert::event).collect(),
                    ..Default::default()
                };
                if fragment {
                    for piece in fragments(resp, MAX_GRPC_MESSAGE_BYTES) {
                        self.send(piece).await?;
                    }
                    Ok(())
                } else {
                    self.send(resp).await
                }
            }
            WatchBatch::Compacted { compact_revision } => {
                if self.watchers.remove(&id).is_none() {
                    return Ok(());
                }
                self.send(self.compacted(id, compact_revision)).await
            }
        }
    }

    /// Sends every batch that is ready now, so caught-up watchers report the newest revision.
    async fn drain_ready(&mut self) -> Step {
        let ids: Vec<i64> = self.watchers.keys().copied().collect();
        for id in ids {
            while let Some(w) = self.watchers.get_mut(&id) {
                // `Watcher::next` is cancel-safe: polling once and dropping loses nothing.
                match w.watcher.next().now_or_never() {
                    Some(batch) => self.on_batch(id, batch).await?,
                    None => break,
                }
            }
        }
        Ok(())
    }

    /// Answers a pending `WatchProgressRequest` if every watcher is caught up.
    async fn try_progress_all(&mut self) -> Step {
        if self.watchers.is_empty() {
            self.progress_pending = false; // etcd sends nothing for a stream without watchers
            return Ok(());
        }
        self.drain_ready().await?;
        let mut revision = i64::MAX;
        for w in self.watchers.values() {
            match w.watcher.progress_revision() {
                Some(r) => revision = revision.min(r),
                None => return Ok(()), // still replaying history: answer later
            }
        }
        if self.watchers.is_empty() {
            self.progress_pending = false;
            return Ok(());
        }
        self.progress_pending = false;
        self.send(pb::WatchResponse {
            header: self.api.header(revision),
            watch_id: INVALID_WATCH_ID,
            ..Default::default()
        })
        .await
    }

    async fn on_progress_tick(&mut self) -> Step {
        if !self.watchers.values().any(|w| w.progress_notify) {
            return Ok(());
        }
        self.drain_ready().await?;
        let mut due = Vec::new();
        for (id, w) in self.watchers.iter_mut() {
            if !w.progress_notify {
                continue;
            }
            if w.quiet {
                if let Some(rev) = w.watcher.progress_revision() {
                    due.push((*id, rev));
                }
            }
            w.quiet = true;
        }
        for (id, rev) in due {
            self.send(pb::WatchResponse {
                header: self.api.header(rev),
                watch_id: id,
                ..Default::default()
            })
            .await?;
        }
        Ok(())
    }

    async fn on_recheck(&mut self) -> Step {
        if self.leader_required && self.api.node().status().leader.is_none() {
            let _ = self.tx.send(Err(EtcdError::NoLeader.into())).await;
            return Err(Closed);
        }
        if self.progress_pending {
            return self.try_progress_all().await;
        }
        Ok(())
    }
}

/// The next batch of any watcher, polling from a rotating start.
async fn next_batch(
    watchers: &mut BTreeMap<i64, ActiveWatch>,
    rotation: usize,
) -> (i64, WatchBatch) {
    let mut entries: Vec<(&i64, &mut ActiveWatch)> = watchers.iter_mut().collect();
    let n = entries.len();
    entries.rotate_left(rotation % n.max(1));
    let futures = entries.into_iter().map(|(id, w)| {
        let id = *id;
        Box::pin(async move { (id, w.watcher.next().await) })
    });
    futures::future::select_all(futures).await.0
}

/// Whether `[key, range_end)` is empty (etcd refuses such watches).
fn range_is_empty(key: &[u8], range_end: &[u8]) -> bool {
    !range_end.is_empty() && range_end != [0] && key >= range_end
}

/// Splits a response larger than `limit` bytes that holds at least two events into pieces
/// below the limit (a piece holds at least one event); all but the last carry `fragment`.
pub fn fragments(resp: pb::WatchResponse, limit: usize) -> Vec<pb::WatchResponse> {
    if resp.encoded_len() < limit || resp.events.len() < 2 {
        return vec![resp];
    }
    let mut template = resp;
    let events = std::mem::take(&mut template.events);
    template.fragment = true;
    let base = template.encoded_len();
    let mut out = Vec::new();
    let mut cur = template.clone();
    let mut size = base;
    for ev in events {
        let ev_len = prost::encoding::message::encoded_len(11, &ev);
        if !cur.events.is_empty() && size + ev_len >= limit {
            out.push(std::mem::replace(&mut cur, template.clone()));
            size = base;
        }
        size += ev_len;
        cur.events.push(ev);
    }
    cur.fragment = false;
    out.push(cur);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mvccpb;

    fn ev(size: usize) -> mvccpb::Event {
        mvccpb::Event {
            r#type: 0,
            kv: Some(mvccpb::KeyValue {
                key: b"k".to_vec(),
                value: vec![7; size],
                ..Default::default()
            }),
            prev_kv: None,
        }
    }

    fn resp(events: Vec<mvccpb::Event>) -> pb::WatchResponse {
        pb::WatchResponse {
            header: Some(pb::ResponseHeader {
                revision: 9,
                ..Default::default()
            }),
            watch_id: 3,
            events,
            ..Default::default()
        }
    }

    #[test]
    fn small_or_single_event_responses_are_not_split() {
        assert_eq!(fragments(resp(vec![ev(10), ev(10)]), 1000).len(), 1);
        let one = fragments(resp(vec![ev(5000)]), 1000);
        assert_eq!(one.len(), 1);
        assert!(!one[0].fragment);
    }

    #[test]
    fn large_responses_split_in_order_with_fragment_flags() {
        let events: Vec<_> = (0..10).map(|_| ev(300)).collect();
        let pieces = fragments(resp(events.clone()), 1000);
        assert!(pieces.len() > 1);
        for (i, p) in pieces.iter().enumerate() {
            assert_eq!(p.fragment, i + 1 < pieces.len());
            assert_eq!(p.watch_id, 3);
            assert_eq!(p.header.as_ref().unwrap().revision, 9);
            assert!(!p.events.is_empty());
            assert!(p.encoded_len() < 1000 || p.events.len() == 1);
        }
        let rejoined: Vec<_> = pieces.into_iter().flat_map(|p| p.events).collect();
        assert_eq!(rejoined, events);
    }

    #[test]
    fn empty_ranges() {
        assert!(!range_is_empty(b"a", b""));
        assert!(!range_is_empty(b"a", &[0]));
        assert!(!range_is_empty(b"a", b"b"));
        assert!(range_is_empty(b"b", b"a"));
        assert!(range_is_empty(b"a", b"a"));
    }
}
