//! Crash durability: concurrent clients write while `k3rs server` is killed with SIGKILL at a
//! random moment; after a restart on the same data dir every acknowledged write is there with
//! the revision it was acknowledged at. Repeated for [`ROUNDS`] rounds on one growing data dir.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::common;
use crate::common::client::{runtime, Clients};
use crate::common::{Endpoint, K3rs};
use k3rs_datastore::etcdpb::compare::{CompareResult, CompareTarget, TargetUnion};
use k3rs_datastore::etcdpb::request_op::Request;
use k3rs_datastore::etcdpb::{Compare, PutRequest, RangeRequest, RequestOp, TxnRequest};
use rand::Rng;

const ROUNDS: usize = 20;
const CLIENTS: usize = 6;
/// The whole test must finish within this (each round is a few seconds).
const BUDGET: Duration = Duration::from_secs(600);

/// One acknowledged put.
#[derive(Debug, Clone)]
struct Ack {
    key: Vec<u8>,
    value: Vec<u8>,
    revision: i64,
}

/// Writes unique keys until the first error (the server died) or `max` writes. Even clients
/// put; odd clients create like kube-apiserver does (`Txn(If MOD(key) == 0 Then Put)`).
async fn writer(ep: Endpoint, round: usize, client: usize, max: usize) -> Vec<Ack> {
    let mut acks = Vec::new();
    let Ok(mut c) = Clients::connect(&ep).await else {
        return acks;
    };
    for seq in 0..max {
        let key = format!("crash/r{round:02}/c{client}/{seq:06}").into_bytes();
        let len = rand::rng().random_range(1..256);
        let mut value = format!("{round}/{client}/{seq}/").into_bytes();
        value.extend((0..len).map(|i| (i % 251) as u8));
        let put = PutRequest {
            key: key.clone(),
            value: value.clone(),
            ..Default::default()
        };
        let header = if client.is_multiple_of(2) {
            c.kv.put(put).await.map(|r| r.into_inner().header)
        } else {
            let create = TxnRequest {
                compare: vec![Compare {
                    result: CompareResult::Equal as i32,
                    target: CompareTarget::Mod as i32,
                    key: key.clone(),
                    range_end: vec![],
                    target_union: Some(TargetUnion::ModRevision(0)),
                }],
                success: vec![RequestOp {
                    request: Some(Request::RequestPut(put)),
                }],
                failure: vec![],
            };
            c.kv.txn(create).await.map(|r| {
                let r = r.into_inner();
                assert!(r.succeeded, "create of a fresh key must succeed");
                r.header
            })
        };
        match header {
            Ok(h) => {
                let revision = h.expect("response header").revision;
                acks.push(Ack {
                    key,
                    value,
                    revision,
                });
            }
            Err(_) => break,
        }
    }
    acks
}

/// Checks every acknowledged write against what the restarted server returns.
async fn verify(ep: &Endpoint, acked: &BTreeMap<Vec<u8>, Ack>, max_rev: i64) -> Result<(), String> {
    let mut c = Clients::connect(ep)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let mut kvs = Vec::new();
    let mut current = 0;
    for round in 0..ROUNDS {
        // One range per round keeps each response small.
        let prefix = format!("crash/r{round:02}/").into_bytes();
        let mut range_end = prefix.clone();
        *range_end.last_mut().unwrap() += 1;
        let req = RangeRequest {
            key: prefix,
            range_end,
            ..Default::default()
        };
        let resp =
            c.kv.range(req)
                .await
                .map_err(|e| format!("range: {e}"))?
                .into_inner();
        current = resp.header.as_ref().map_or(0, |h| h.revision);
        kvs.extend(resp.kvs);
    }
    if current < max_rev {
        return Err(format!(
            "store revision {current} < highest acknowledged {max_rev}"
        ));
    }
    let stored: BTreeMap<&[u8], _> = kvs.iter().map(|kv| (kv.key.as_slice(), kv)).collect();
    let mut problems = Vec::new();
    for ack in acked.values() {
        let key = String::from_utf8_lossy(&ack.key);
        match stored.get(ack.key.as_slice()) {
            None => problems.push(format!(
                "{key}: acknowledged at {} but missing",
                ack.revision
            )),
            Some(kv) => {
                if (kv.mod_revision, kv.create_revision, kv.version)
                    != (ack.revision, ack.revision, 1)
                {
                    problems.push(format!(
                        "{key}: acknowledged at {}, stored mod {} create {} version {}",
                        ack.revision, kv.mod_revision, kv.create_revision, kv.version
                    ));
                }
                if kv.value != ack.value {
                    problems.push(format!("{key}: value differs from the acknowledged one"));
                }
            }
        }
        if problems.len() > 20 {
            break;
        }
    }
    // The next write must get a fresh revision (no revision reuse after the crash).
    let put = PutRequest {
        key: b"after-crash".to_vec(),
        value: b"x".to_vec(),
        ..Default::default()
    };
    let rev =
        c.kv.put(put)
            .await
            .map_err(|e| format!("put after restart: {e}"))?
            .into_inner();
    let rev = rev.header.map_or(0, |h| h.revision);
    if rev <= max_rev.max(current) {
        problems.push(format!(
            "put after restart got revision {rev} <= {}",
            max_rev.max(current)
        ));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("\n"))
    }
}

#[test]
fn acknowledged_writes_survive_sigkill() {
    let started = Instant::now();
    let rt = runtime();
    let mut k3rs = K3rs::start();
    let mut acked: BTreeMap<Vec<u8>, Ack> = BTreeMap::new();
    let mut max_rev = 0;
    for round in 0..ROUNDS {
        assert!(
            started.elapsed() < BUDGET,
            "budget exhausted after {round} rounds"
        );
        let ep = k3rs.endpoint();
        let tasks: Vec<_> = (0..CLIENTS)
            .map(|client| rt.spawn(writer(ep.clone(), round, client, 100_000)))
            .collect();
        let delay = rand::rng().random_range(300..1500);
        std::thread::sleep(Duration::from_millis(delay));
        k3rs.assert_running();
        k3rs.kill();

        let mut this_round = 0;
        for task in tasks {
            let acks = rt
                .block_on(async { tokio::time::timeout(Duration::from_secs(30), task).await })
                .expect("writer did not stop within 30 s of the kill")
                .expect("writer task panicked");
            let mut last = 0;
            for ack in acks {
                assert!(ack.revision > last, "revisions of one client must increase");
                last = ack.revision;
                max_rev = max_rev.max(ack.revision);
                this_round += 1;
                assert!(
                    acked.insert(ack.key.clone(), ack).is_none(),
                    "keys are unique"
                );
            }
        }

        if round % 4 == 3 {
            // Also crash while the server is recovering (replaying its log).
            k3rs.relaunch();
            std::thread::sleep(Duration::from_millis(rand::rng().random_range(20..400)));
            k3rs.kill();
        }
        k3rs.restart();
        if let Err(problems) = rt.block_on(verify(&k3rs.endpoint(), &acked, max_rev)) {
            panic!(
                "round {round}: acknowledged writes lost after SIGKILL ({} acknowledged so far, \
                 killed after {delay} ms):\n{problems}\nserver log tail:\n{}",
                acked.len(),
                common::log_tail(&k3rs.log_path(), 30)
            );
        }
        eprintln!(
            "round {round}: killed after {delay} ms{}, {this_round} acknowledged writes, all {} \
             present after restart",
            if round % 4 == 3 {
                " and again while recovering"
            } else {
                ""
            },
            acked.len()
        );
    }
    assert!(
        acked.len() >= 100,
        "too few acknowledged writes ({}) to mean anything",
        acked.len()
    );
}
