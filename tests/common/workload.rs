//! Concurrent etcd clients that record what they did, for the fault-injection tests: puts,
//! compare-and-swap txns, deletes and linearizable reads on a few keys per round, and one
//! watcher per member that resumes after errors.
//!
//! Guarantees:
//! - Every operation is recorded with its call and return times (nanoseconds since the
//!   workload started). A write whose outcome is unknown (timeout, error after the request may
//!   have been sent) is recorded with no output: it may have happened. A request that never
//!   left the client (the connection could not be made) and a failed read are not recorded.
//! - Every client loop is bounded in operations and in time, and stops when asked.
//! - Written values are unique (`c<client>-<seq>`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k3rs_datastore::etcdpb::compare::{CompareResult, CompareTarget, TargetUnion};
use k3rs_datastore::etcdpb::request_op::Request;
use k3rs_datastore::etcdpb::{
    Compare, DeleteRangeRequest, PutRequest, RangeRequest, RequestOp, TxnRequest,
    WatchCreateRequest,
};
use k3rs_lincheck::{KvInput, KvOperation, KvOutput, Operation};
use rand::{Rng, SeedableRng};

use super::client::{open_watch, Clients};
use super::Endpoint;

/// Every key of the workload is under this prefix.
pub const PREFIX: &str = "/f/";
/// Keys written per round (fresh keys each round keep every checked part small).
pub const KEYS_PER_ROUND: u64 = 3;
/// How long one request may take before its outcome counts as unknown.
pub const OP_TIMEOUT: Duration = Duration::from_secs(2);
/// The most operations one client issues.
pub const MAX_OPS: usize = 50_000;

/// One watch event: (revision, key, value or `None` for a delete).
pub type WatchEvent = (i64, String, Option<String>);

/// State shared by the clients and the test.
#[derive(Debug)]
pub struct Workload {
    start: Instant,
    deadline: Instant,
    history: Mutex<Vec<KvOperation>>,
    stop: AtomicBool,
    round: AtomicU64,
    /// Watchers stop once they have seen this revision (0 = not yet known).
    drain_until: AtomicI64,
}

impl Workload {
    /// A workload whose clients give up at the latest after `limit`.
    pub fn new(limit: Duration) -> Arc<Workload> {
        let start = Instant::now();
        Arc::new(Workload {
            start,
            deadline: start + limit,
            history: Mutex::new(Vec::new()),
            stop: AtomicBool::new(false),
            round: AtomicU64::new(0),
            drain_until: AtomicI64::new(0),
        })
    }

    fn now(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    fn running(&self) -> bool {
        !self.stop.load(Ordering::SeqCst) && Instant::now() < self.deadline
    }

    pub fn set_round(&self, round: u64) {
        self.round.store(round, Ordering::SeqCst);
    }

    /// Asks the clients (not the watchers) to stop after their current operation.
    pub fn stop_clients(&self) {
        self.stop.store(true, Ordering::SeqCst);
    }

    /// Asks the watchers to stop once they have seen revision `rev`.
    pub fn drain_watchers(&self, rev: i64) {
        self.drain_until.store(rev, Ordering::SeqCst);
    }

    /// The recorded history so far.
    pub fn history(&self) -> Vec<KvOperation> {
        self.history.lock().unwrap().clone()
    }

    fn record(&self, client: u64, call: u64, input: KvInput, output: Option<KvOutput>) {
        let op = Operation {
            client,
            call,
            ret: self.now(),
            input,
            output,
        };
        self.history.lock().unwrap().push(op);
    }
}

/// Whether the request certainly never reached a server (no connection could be made).
fn never_sent(status: &tonic::Status) -> bool {
    let text = format!("{status:?}");
    status.code() == tonic::Code::Unavailable
        && (text.contains("error trying to connect") || text.contains("tcp connect error"))
}

fn bytes(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Sends one operation; `Err` carries the gRPC status.
async fn execute(c: &mut Clients, input: &KvInput) -> Result<KvOutput, tonic::Status> {
    let rev = |h: Option<k3rs_datastore::etcdpb::ResponseHeader>| h.map_or(0, |h| h.revision);
    Ok(match input {
        KvInput::Put { key, value } => {
            let req = PutRequest {
                key: bytes(key),
                value: bytes(value),
                ..Default::default()
            };
            let r = c.kv.put(req).await?.into_inner();
            KvOutput::Put { rev: rev(r.header) }
        }
        KvInput::Get { key } => {
            let req = RangeRequest {
                key: bytes(key),
                ..Default::default()
            };
            let r = c.kv.range(req).await?.into_inner();
            let value = r.kvs.first().map(|kv| (text(&kv.value), kv.mod_revision));
            KvOutput::Get { value }
        }
        KvInput::Cas { key, expect, value } => {
            let (target, union) = match expect {
                Some(v) => (CompareTarget::Value, TargetUnion::Value(bytes(v))),
                None => (CompareTarget::Mod, TargetUnion::ModRevision(0)),
            };
            let req = TxnRequest {
                compare: vec![Compare {
                    result: CompareResult::Equal as i32,
                    target: target as i32,
                    key: bytes(key),
                    range_end: vec![],
                    target_union: Some(union),
                }],
                success: vec![RequestOp {
                    request: Some(Request::RequestPut(PutRequest {
                        key: bytes(key),
                        value: bytes(value),
                        ..Default::default()
                    })),
                }],
                failure: vec![],
            };
            let r = c.kv.txn(req).await?.into_inner();
            KvOutput::Cas {
                succeeded: r.succeeded,
                rev: rev(r.header),
            }
        }
        KvInput::Delete { key } => {
            let req = DeleteRangeRequest {
                key: bytes(key),
                ..Default::default()
            };
            let r = c.kv.delete_range(req).await?.into_inner();
            KvOutput::Delete {
                deleted: r.deleted,
                rev: rev(r.header),
            }
        }
    })
}

/// Connects, retrying for up to `limit`.
pub async fn connect(ep: &Endpoint, limit: Duration) -> Clients {
    let deadline = Instant::now() + limit;
    loop {
        match Clients::connect(ep).await {
            Ok(c) => return c,
            Err(e) if Instant::now() > deadline => panic!("connect {}: {e}", ep.url),
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// One client issuing random operations to `ep` until stopped (or its bounds are reached).
pub async fn client(id: u64, ep: Endpoint, w: Arc<Workload>) {
    let mut c = connect(&ep, Duration::from_secs(30)).await;
    let mut rng = rand::rngs::StdRng::seed_from_u64(id);
    // The last value this client saw per key: what its compare-and-swaps expect.
    let mut seen: HashMap<String, Option<String>> = HashMap::new();
    for seq in 0..MAX_OPS {
        if !w.running() {
            break;
        }
        let key = format!(
            "{PREFIX}{}/k{}",
            w.round.load(Ordering::SeqCst),
            rng.random_range(0..KEYS_PER_ROUND)
        );
        let value = format!("c{id}-{seq}");
        let input = match rng.random_range(0..100) {
            0..35 => KvInput::Put { key, value },
            35..60 => KvInput::Cas {
                expect: seen.get(&key).cloned().flatten(),
                key,
                value,
            },
            60..95 => KvInput::Get { key },
            _ => KvInput::Delete { key },
        };
        let call = w.now();
        let result = tokio::time::timeout(OP_TIMEOUT, execute(&mut c, &input)).await;
        let is_read = matches!(input, KvInput::Get { .. });
        match result {
            Ok(Ok(out)) => {
                let now = match (&input, &out) {
                    (_, KvOutput::Get { value }) => Some(value.clone().map(|v| v.0)),
                    (KvInput::Put { value, .. }, _)
                    | (
                        KvInput::Cas { value, .. },
                        KvOutput::Cas {
                            succeeded: true, ..
                        },
                    ) => Some(Some(value.clone())),
                    (_, KvOutput::Delete { .. }) => Some(None),
                    _ => None,
                };
                match now {
                    Some(v) => seen.insert(input.key().to_string(), v),
                    None => seen.remove(input.key()),
                };
                w.record(id, call, input, Some(out));
            }
            Ok(Err(status)) if never_sent(&status) || is_read => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Ok(Err(_)) | Err(_) => {
                if !is_read {
                    w.record(id, call, input, None);
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// Watches the whole prefix on `ep` from revision 1, resuming after the last event it saw
/// whenever the stream breaks, until it has seen the revision given to
/// [`Workload::drain_watchers`]. Returns the events and the problems it saw (cancellations).
pub async fn watcher(ep: Endpoint, w: Arc<Workload>) -> (Vec<WatchEvent>, Vec<String>) {
    let mut events: Vec<WatchEvent> = Vec::new();
    let mut problems = Vec::new();
    let mut next = 1i64;
    let done = |next: i64| {
        let until = w.drain_until.load(Ordering::SeqCst);
        (until > 0 && next > until) || Instant::now() > w.deadline
    };
    while !done(next) {
        let Ok(Ok(mut c)) =
            tokio::time::timeout(Duration::from_secs(3), Clients::connect(&ep)).await
        else {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        };
        let create = WatchCreateRequest {
            key: bytes(PREFIX),
            range_end: prefix_end(PREFIX),
            start_revision: next,
            ..Default::default()
        };
        let Ok(Ok(mut stream)) =
            tokio::time::timeout(Duration::from_secs(3), open_watch(&mut c, create)).await
        else {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        };
        while !done(next) {
            let msg =
                tokio::time::timeout(Duration::from_millis(500), stream.responses.message()).await;
            let resp = match msg {
                Err(_) => continue,
                Ok(Ok(Some(resp))) => resp,
                Ok(Ok(None)) | Ok(Err(_)) => break,
            };
            if resp.canceled {
                problems.push(format!("watch on {} canceled: {resp:?}", ep.url));
                break;
            }
            for e in resp.events {
                let Some(kv) = e.kv else {
                    problems.push(format!("event without kv from {}", ep.url));
                    continue;
                };
                let value = (e.r#type == 0).then(|| text(&kv.value));
                next = kv.mod_revision + 1;
                events.push((kv.mod_revision, text(&kv.key), value));
            }
        }
        // Dropping the stream and connection; a new one resumes at `next`.
    }
    (events, problems)
}

/// The `range_end` that makes `prefix` a prefix watch or range.
pub fn prefix_end(prefix: &str) -> Vec<u8> {
    let mut end = bytes(prefix);
    *end.last_mut().expect("non-empty prefix") += 1;
    end
}
