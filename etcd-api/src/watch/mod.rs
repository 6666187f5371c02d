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
//! [`session::Session`] decides (no I/O); the task here owns the store watchers, feeds the
//! session its inputs (client requests, watcher batches, ticks) and carries out its actions.

mod fragment;
pub mod session;

use std::collections::BTreeMap;
use std::pin::Pin;
use std::time::Duration;

use futures::{FutureExt, Stream};
use k3rs_storage::{WatchBatch, Watcher};
use tokio::sync::mpsc;
use tokio::time::{interval, interval_at, Instant, MissedTickBehavior};
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status, Streaming};

pub use fragment::fragments;
use session::{Action, HeaderRevision, Session};

use super::error::EtcdError;
use super::{requires_leader, Api, MAX_GRPC_MESSAGE_BYTES};
use k3rs_datastore::etcdpb as pb;

/// How often a stream re-checks a pending progress request and, for `hasleader` streams, the
/// leader.
const RECHECK: Duration = Duration::from_millis(50);

/// etcd's `Watch` gRPC service over the local member.
#[derive(Debug, Clone)]
pub struct WatchService {
    api: Api,
}

impl WatchService {
    /// The service over `api`.
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
            session: Session::new(MAX_GRPC_MESSAGE_BYTES),
            watchers: BTreeMap::new(),
            rotation: 0,
            leader_required,
        };
        tokio::spawn(stream.run(request.into_inner()));
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }
}

/// The client went away: stop.
struct Closed;

type Step = Result<(), Closed>;

struct WatchStream {
    api: Api,
    tx: mpsc::Sender<Result<pb::WatchResponse, Status>>,
    session: Session,
    watchers: BTreeMap<i64, Watcher>,
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
            let needs_recheck = self.session.progress_pending() || self.leader_required;
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
                        Ok(()) => self.answer_progress().await,
                        err => err,
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

    /// Carries out the session's actions in order.
    async fn execute(&mut self, actions: Vec<Action>) -> Step {
        let mut queue = std::collections::VecDeque::from(actions);
        while let Some(action) = queue.pop_front() {
            match action {
                Action::Send { mut resp, revision } => {
                    resp.header = match revision {
                        HeaderRevision::Current => self.api.current_header(),
                        HeaderRevision::At(rev) => self.api.header(rev),
                    };
                    self.tx.send(Ok(resp)).await.map_err(|_| Closed)?;
                }
                Action::Start { id, req, .. } => {
                    let outcome = match self.api.node().store().watch(req) {
                        Ok(watcher) => {
                            self.watchers.insert(id, watcher);
                            Ok(())
                        }
                        Err(e) => Err(e),
                    };
                    queue.extend(self.session.started(id, outcome));
                }
                Action::Stop { id } => {
                    self.watchers.remove(&id);
                }
            }
        }
        Ok(())
    }

    async fn on_request(&mut self, req: pb::WatchRequest) -> Step {
        use pb::watch_request::RequestUnion;
        let actions = match req.request_union {
            Some(RequestUnion::CreateRequest(c)) => {
                let compact_revision = self.api.node().store().compact_revision();
                self.session.create(&c, compact_revision)
            }
            Some(RequestUnion::CancelRequest(c)) => self.session.cancel(c.watch_id),
            Some(RequestUnion::ProgressRequest(_)) => {
                self.session.request_progress();
                return self.answer_progress().await;
            }
            None => Vec::new(), // etcd ignores requests it does not understand
        };
        self.execute(actions).await
    }

    async fn on_batch(&mut self, id: i64, batch: WatchBatch) -> Step {
        let actions = match batch {
            WatchBatch::Events { revision, events } => self.session.events(id, revision, events),
            WatchBatch::Compacted { compact_revision } => {
                self.session.compacted(id, compact_revision)
            }
        };
        self.execute(actions).await
    }

    /// Sends every batch that is ready now, so caught-up watchers report the newest revision.
    async fn drain_ready(&mut self) -> Step {
        let ids: Vec<i64> = self.watchers.keys().copied().collect();
        for id in ids {
            while let Some(w) = self.watchers.get_mut(&id) {
                // `Watcher::next` is cancel-safe: polling once and dropping loses nothing.
                match w.next().now_or_never() {
                    Some(batch) => self.on_batch(id, batch).await?,
                    None => break,
                }
            }
        }
        Ok(())
    }

    fn progress_revisions(&self) -> BTreeMap<i64, Option<i64>> {
        self.watchers
            .iter()
            .map(|(id, w)| (*id, w.progress_revision()))
            .collect()
    }

    /// Answers a pending `WatchProgressRequest` if every watcher is caught up.
    async fn answer_progress(&mut self) -> Step {
        if !self.session.progress_pending() {
            return Ok(());
        }
        self.drain_ready().await?;
        let actions = self.session.progress_all(&self.progress_revisions());
        self.execute(actions).await
    }

    async fn on_progress_tick(&mut self) -> Step {
        if !self.session.wants_progress_ticks() {
            return Ok(());
        }
        self.drain_ready().await?;
        let actions = self.session.progress_tick(&self.progress_revisions());
        self.execute(actions).await
    }

    async fn on_recheck(&mut self) -> Step {
        if self.leader_required && self.api.node().status().leader.is_none() {
            let _ = self.tx.send(Err(EtcdError::NoLeader.into())).await;
            return Err(Closed);
        }
        self.answer_progress().await
    }
}

/// The next batch of any watcher, polling from a rotating start.
async fn next_batch(watchers: &mut BTreeMap<i64, Watcher>, rotation: usize) -> (i64, WatchBatch) {
    let mut entries: Vec<(&i64, &mut Watcher)> = watchers.iter_mut().collect();
    let n = entries.len();
    entries.rotate_left(rotation % n.max(1));
    let futures = entries.into_iter().map(|(id, w)| {
        let id = *id;
        Box::pin(async move { (id, w.next().await) })
    });
    futures::future::select_all(futures).await.0
}
