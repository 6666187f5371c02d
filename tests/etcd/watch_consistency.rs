//! Watch guarantees under concurrent writes and compaction, end to end over gRPC: one watcher on
//! a prefix sees every revision exactly once, in order, never split across responses, with
//! correct `prev_kv`; replaying its events gives exactly the final state of the store. Runs
//! against etcd 3.4 (to check the checker) and against k3rs.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::common::client::{open_watch, runtime, Clients};
use crate::common::{Endpoint, Etcd, K3rs};
use k3rs_datastore::etcdpb::request_op::Request;
use k3rs_datastore::etcdpb::{
    CompactionRequest, DeleteRangeRequest, PutRequest, RangeRequest, RequestOp, TxnRequest,
    WatchCreateRequest,
};
use k3rs_datastore::mvccpb::{event::EventType, KeyValue};
use rand::Rng;

const WRITERS: usize = 4;
const OPS_PER_WRITER: usize = 250;
const KEYS: usize = 40;

fn key(i: usize) -> Vec<u8> {
    format!("wc/{i:03}").into_bytes()
}

async fn current_revision(c: &mut Clients) -> i64 {
    let r =
        c.kv.range(RangeRequest {
            key: b"x".to_vec(),
            ..Default::default()
        })
        .await;
    r.expect("range")
        .into_inner()
        .header
        .expect("header")
        .revision
}

/// Random puts, deletes and two-key txns on the prefix.
async fn writer(ep: Endpoint, n: usize) {
    let mut c = Clients::connect(&ep).await.expect("connect");
    for seq in 0..n {
        let (a, b, what) = {
            let mut rng = rand::rng();
            (
                rng.random_range(0..KEYS),
                rng.random_range(0..KEYS),
                rng.random_range(0..10),
            )
        };
        let value = format!("{seq}").into_bytes();
        match what {
            0..=5 => {
                let req = PutRequest {
                    key: key(a),
                    value,
                    ..Default::default()
                };
                c.kv.put(req).await.expect("put");
            }
            6 | 7 => {
                let req = DeleteRangeRequest {
                    key: key(a),
                    ..Default::default()
                };
                c.kv.delete_range(req).await.expect("delete");
            }
            _ if a != b => {
                let put = |k: usize| RequestOp {
                    request: Some(Request::RequestPut(PutRequest {
                        key: key(k),
                        value: value.clone(),
                        ..Default::default()
                    })),
                };
                let txn = TxnRequest {
                    compare: vec![],
                    success: vec![put(a), put(b)],
                    failure: vec![],
                };
                c.kv.txn(txn).await.expect("txn");
            }
            _ => {}
        }
    }
}

/// Runs the workload with a watcher and a compactor; returns a description of every violation.
async fn check(ep: Endpoint) -> Vec<String> {
    let mut c = Clients::connect(&ep).await.expect("connect");
    let start = current_revision(&mut c).await;
    let create = WatchCreateRequest {
        key: b"wc/".to_vec(),
        range_end: b"wc0".to_vec(),
        start_revision: start + 1,
        prev_kv: true,
        ..Default::default()
    };
    let mut watch = open_watch(&mut c, create).await.expect("watch");
    let writers: Vec<_> = (0..WRITERS)
        .map(|_| tokio::spawn(writer(ep.clone(), OPS_PER_WRITER)))
        .collect();
    let compactor = {
        let ep = ep.clone();
        tokio::spawn(async move {
            let mut c = Clients::connect(&ep).await.expect("connect");
            loop {
                tokio::time::sleep(Duration::from_millis(100)).await;
                let rev = current_revision(&mut c).await;
                let req = CompactionRequest {
                    revision: rev - 20,
                    physical: false,
                };
                let _ = c.kv.compact(req).await;
            }
        })
    };
    for w in writers {
        w.await.expect("writer");
    }
    compactor.abort();
    let end = current_revision(&mut c).await;

    // Collect events up to `end`: (revision, response number, event).
    let mut events = Vec::new();
    let mut problems = Vec::new();
    let mut response_no = 0;
    while events.last().map_or(start, |(rev, _, _)| *rev) < end {
        let msg = tokio::time::timeout(Duration::from_secs(20), watch.responses.message()).await;
        let resp = match msg {
            Ok(Ok(Some(resp))) => resp,
            other => {
                problems.push(format!(
                    "watch stream ended before revision {end}: {other:?}"
                ));
                break;
            }
        };
        if resp.canceled {
            problems.push(format!("watch canceled: {resp:?}"));
            break;
        }
        response_no += 1;
        for e in resp.events {
            let rev = e.kv.as_ref().map_or(0, |kv| kv.mod_revision);
            events.push((rev, response_no, e));
        }
    }

    // Every revision in (start, end] exactly once, in order, each within one response.
    let mut revs: Vec<i64> = events.iter().map(|(rev, _, _)| *rev).collect();
    if revs.windows(2).any(|w| w[0] > w[1]) {
        problems.push("events out of revision order".into());
    }
    revs.dedup();
    let expected: Vec<i64> = (start + 1..=end).collect();
    if revs != expected {
        let missing: Vec<_> = expected
            .iter()
            .filter(|r| !revs.contains(r))
            .take(10)
            .collect();
        problems.push(format!(
            "revisions seen != {}..={end}; missing e.g. {missing:?}",
            start + 1
        ));
    }
    for w in events.windows(2) {
        if w[0].0 == w[1].0 && w[0].1 != w[1].1 {
            problems.push(format!("revision {} split across responses", w[0].0));
        }
    }

    // Replay: prev_kv must be the state before, and the end state must match a Range.
    let mut state: BTreeMap<Vec<u8>, KeyValue> = BTreeMap::new();
    for (rev, _, e) in &events {
        let kv = e.kv.clone().unwrap_or_default();
        if e.prev_kv.as_ref() != state.get(&kv.key) {
            problems.push(format!(
                "revision {rev}: prev_kv {:?} but the key was {:?}",
                e.prev_kv,
                state.get(&kv.key)
            ));
        }
        if e.r#type == EventType::Delete as i32 {
            state.remove(&kv.key);
        } else {
            state.insert(kv.key.clone(), kv);
        }
        if problems.len() > 20 {
            return problems;
        }
    }
    let range = RangeRequest {
        key: b"wc/".to_vec(),
        range_end: b"wc0".to_vec(),
        revision: end,
        ..Default::default()
    };
    let stored = c.kv.range(range).await.expect("range").into_inner().kvs;
    let replayed: Vec<KeyValue> = state.into_values().collect();
    if stored != replayed {
        problems.push(format!(
            "replayed events give {} keys, the store has {} (or they differ)",
            replayed.len(),
            stored.len()
        ));
    }
    problems
}

/// The checker itself holds on etcd 3.4.
#[test]
fn watch_guarantees_hold_on_etcd() {
    let etcd = Etcd::start();
    let problems = runtime().block_on(check(etcd.endpoint()));
    assert!(
        problems.is_empty(),
        "etcd 3.4 violates the checker:\n{}",
        problems.join("\n")
    );
}

#[test]
fn watch_guarantees_hold_on_k3rs() {
    let mut k3rs = K3rs::start();
    let problems = runtime().block_on(check(k3rs.endpoint()));
    k3rs.assert_running();
    assert!(
        problems.is_empty(),
        "k3rs watch violations:\n{}",
        problems.join("\n")
    );
}
