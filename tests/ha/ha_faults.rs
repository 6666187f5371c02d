//! Fault injection: three real `k3rs server` processes, each in its own network namespace,
//! under concurrent clients (puts, compare-and-swap txns, deletes and linearizable reads on
//! every member, plus one watcher per member) while the test, round after round:
//! kills the leader (SIGKILL) and restarts it, kills a follower, cuts the leader off the
//! network and heals it, SIGSTOPs the leader and SIGCONTs it, and restarts every server.
//!
//! Then:
//! - the recorded history must be linearizable (`k3rs-lincheck`, per key, with the revisions
//!   the store reported; writes with unknown outcomes may or may not have happened);
//! - every acknowledged write is in the store's event history at the revision it was
//!   acknowledged with (none lost);
//! - each member's watcher saw exactly that event history: ordered, no gaps, no duplicates;
//! - replaying it gives exactly the final contents of the store.
//!
//! After each SIGKILL of the leader the test prints how long it took until a write succeeded
//! again (election + commit). `K3RS_FAULT_ROUNDS` sets the number of rounds (default 5: one of
//! each fault); `scripts/fault-rounds.sh` runs many.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common;
use crate::common::client::Clients;
use crate::common::netns::Lab;
use crate::common::ns_cluster::NsCluster;
use crate::common::workload::{self, prefix_end, WatchEvent, Workload, PREFIX};
use k3rs_datastore::etcdpb::{PutRequest, RangeRequest, StatusRequest};
use k3rs_lincheck::{check, KvInput, KvModel, KvOperation, KvOutput, Verdict};

const SERVERS: usize = 3;
const CLIENTS_PER_SERVER: u64 = 2;
/// Search steps per key the checker may take before answering "unknown" (a test failure).
const CHECK_BUDGET: u64 = 20_000_000;
/// How long the workload runs between faults.
const TRAFFIC: Duration = Duration::from_millis(1500);
/// How long a fault may take to be survived (a write through the majority succeeds).
const RECOVERY_LIMIT: Duration = Duration::from_secs(30);

#[derive(Debug, Clone, Copy)]
enum Fault {
    KillLeader,
    KillFollower,
    PartitionLeader,
    PauseLeader,
    RestartAll,
}

const FAULTS: [Fault; 5] = [
    Fault::KillLeader,
    Fault::KillFollower,
    Fault::PartitionLeader,
    Fault::PauseLeader,
    Fault::RestartAll,
];

fn rounds() -> usize {
    std::env::var("K3RS_FAULT_ROUNDS")
        .ok()
        .map(|v| v.parse().expect("K3RS_FAULT_ROUNDS is a number"))
        .unwrap_or(FAULTS.len())
}

/// The index (1-based) of the member that says it is the leader, once one does.
async fn find_leader(clients: &mut [Clients], candidates: &[usize]) -> usize {
    let deadline = Instant::now() + RECOVERY_LIMIT;
    loop {
        for &i in candidates {
            let status = clients[i - 1].maintenance.status(StatusRequest {});
            if let Ok(Ok(r)) = tokio::time::timeout(Duration::from_secs(1), status).await {
                let r = r.into_inner();
                let me = r.header.map_or(0, |h| h.member_id);
                if r.leader != 0 && r.leader == me {
                    return i;
                }
            }
        }
        assert!(
            Instant::now() < deadline,
            "no leader after {RECOVERY_LIMIT:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Starts a put through one of the `via` members (in turn) every 50 ms, each allowed 2 s, and
/// returns when the first one succeeds: the time is then accurate to ~50 ms, however long
/// the attempts sent to a dead or deposed leader take to fail.
async fn write_succeeds(clients: &mut [Clients], via: &[usize], what: &str) -> Instant {
    use futures::stream::{FuturesUnordered, StreamExt};
    let deadline = Instant::now() + RECOVERY_LIMIT;
    let mut attempts = FuturesUnordered::new();
    let mut tick = tokio::time::interval(Duration::from_millis(50));
    for attempt in 0usize.. {
        assert!(
            Instant::now() < deadline,
            "no write succeeded within {RECOVERY_LIMIT:?} after {what}"
        );
        let mut kv = clients[via[attempt % via.len()] - 1].kv.clone();
        let put = PutRequest {
            key: b"/probe".to_vec(),
            value: format!("{what}-{attempt}").into_bytes(),
            ..Default::default()
        };
        attempts.push(async move {
            matches!(
                tokio::time::timeout(Duration::from_secs(2), kv.put(put)).await,
                Ok(Ok(_))
            )
        });
        let next_tick = tick.tick();
        tokio::pin!(next_tick);
        loop {
            tokio::select! {
                Some(ok) = attempts.next() => if ok { return Instant::now() },
                _ = &mut next_tick => break,
            }
        }
    }
    unreachable!()
}

fn others(of: usize) -> Vec<usize> {
    (1..=SERVERS).filter(|&i| i != of).collect()
}

/// Runs one fault and waits until the cluster has survived it and is whole again. Returns
/// the failover time when the leader was killed.
async fn inject(
    fault: Fault,
    lab: &Lab,
    cluster: &mut NsCluster,
    clients: &mut [Clients],
) -> Option<Duration> {
    let all: Vec<usize> = (1..=SERVERS).collect();
    let leader = find_leader(clients, &all).await;
    let mut failover = None;
    match fault {
        Fault::KillLeader => {
            let killed = Instant::now();
            cluster.server(leader).kill();
            let ok = write_succeeds(clients, &others(leader), "leader killed").await;
            failover = Some(ok - killed);
            tokio::time::sleep(TRAFFIC).await;
            cluster.server(leader).spawn();
        }
        Fault::KillFollower => {
            let follower = others(leader)[0];
            cluster.server(follower).kill();
            tokio::time::sleep(TRAFFIC).await;
            cluster.server(follower).spawn();
        }
        Fault::PartitionLeader => {
            lab.isolate(leader);
            write_succeeds(clients, &others(leader), "leader partitioned").await;
            tokio::time::sleep(TRAFFIC).await;
            lab.heal(leader);
        }
        Fault::PauseLeader => {
            cluster.server(leader).signal("STOP");
            write_succeeds(clients, &others(leader), "leader paused").await;
            tokio::time::sleep(TRAFFIC).await;
            cluster.server(leader).signal("CONT");
        }
        Fault::RestartAll => {
            for s in &mut cluster.servers {
                s.kill();
            }
            for s in &mut cluster.servers {
                s.spawn();
            }
        }
    }
    for s in &mut cluster.servers {
        s.wait_ready();
    }
    failover
}

/// The final contents under the prefix: key → (value, mod_revision), and the header revision.
async fn final_state(c: &mut Clients) -> (BTreeMap<String, (String, i64)>, i64) {
    let r =
        c.kv.range(RangeRequest {
            key: PREFIX.as_bytes().to_vec(),
            range_end: prefix_end(PREFIX),
            ..Default::default()
        })
        .await
        .expect("final range")
        .into_inner();
    let state = r
        .kvs
        .iter()
        .map(|kv| {
            let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
            (text(&kv.key), (text(&kv.value), kv.mod_revision))
        })
        .collect();
    (state, r.header.map_or(0, |h| h.revision))
}

/// What an acknowledged write must have left in the event history: (revision, key, value).
fn acknowledged(op: &KvOperation) -> Option<WatchEvent> {
    let key = op.input.key().to_string();
    match (&op.input, op.output.as_ref()?) {
        (KvInput::Put { value, .. }, KvOutput::Put { rev }) => {
            Some((*rev, key, Some(value.clone())))
        }
        (
            KvInput::Cas { value, .. },
            KvOutput::Cas {
                succeeded: true,
                rev,
            },
        ) => Some((*rev, key, Some(value.clone()))),
        (KvInput::Delete { .. }, KvOutput::Delete { deleted: 1, rev }) => Some((*rev, key, None)),
        _ => None,
    }
}

/// Checks the event history `log` (from a fresh watch) and returns the problems found.
fn check_events(
    log: &[WatchEvent],
    watched: &[(Vec<WatchEvent>, Vec<String>)],
    history: &[KvOperation],
    state: &BTreeMap<String, (String, i64)>,
) -> Vec<String> {
    let mut problems = Vec::new();
    if let Some(w) = log.windows(2).find(|w| w[0].0 >= w[1].0) {
        problems.push(format!("event history out of order: {w:?}"));
    }
    // Replaying the events gives the final state.
    let mut replay = BTreeMap::new();
    for (rev, key, value) in log {
        match value {
            Some(v) => replay.insert(key.clone(), (v.clone(), *rev)),
            None => replay.remove(key),
        };
    }
    if replay != *state {
        problems.push(format!(
            "replayed events differ from the final state:\n{replay:?}\n{state:?}"
        ));
    }
    // No acknowledged write lost; no event that no client wrote.
    let events: HashSet<&WatchEvent> = log.iter().collect();
    for op in history {
        if let Some(ack) = acknowledged(op) {
            if !events.contains(&ack) {
                problems.push(format!(
                    "acknowledged write missing from the events: {op:?}"
                ));
            }
        }
    }
    let written: HashSet<&str> = history
        .iter()
        .filter_map(|op| match &op.input {
            KvInput::Put { value, .. } | KvInput::Cas { value, .. } => Some(value.as_str()),
            _ => None,
        })
        .collect();
    for (rev, key, value) in log {
        if value.as_deref().is_some_and(|v| !written.contains(v)) {
            problems.push(format!(
                "event at {rev} on {key} with a value nobody wrote: {value:?}"
            ));
        }
    }
    // Every member's watcher saw exactly the event history.
    for (i, (events, troubles)) in watched.iter().enumerate() {
        problems.extend(troubles.iter().cloned());
        if events != log {
            let first = events
                .iter()
                .zip(log)
                .position(|(a, b)| a != b)
                .unwrap_or(events.len().min(log.len()));
            problems.push(format!(
                "watcher on s{} saw {} events, the history has {}; first difference at #{first}: \
                 {:?} vs {:?}",
                i + 1,
                events.len(),
                log.len(),
                events.get(first),
                log.get(first)
            ));
        }
    }
    problems
}

/// The operations on `key` up to the first moment the history stops being linearizable
/// (operations still running then count as unknown), one line each, in call order.
fn explain(history: &[KvOperation], key: &str) -> String {
    let ops: Vec<KvOperation> = history
        .iter()
        .filter(|o| o.input.key() == key)
        .cloned()
        .collect();
    let cut = |t: u64| -> Vec<KvOperation> {
        ops.iter()
            .filter(|o| o.call <= t)
            .filter(|o| o.ret <= t || !matches!(o.input, KvInput::Get { .. }))
            .map(|o| {
                let mut o = o.clone();
                if o.ret > t {
                    o.output = None;
                }
                o
            })
            .collect()
    };
    let mut rets: Vec<u64> = ops.iter().map(|o| o.ret).collect();
    rets.sort();
    let first_bad = rets
        .iter()
        .copied()
        .find(|&t| check(&KvModel, &cut(t), CHECK_BUDGET) != Verdict::Linearizable);
    let mut shown = first_bad.map_or(ops.clone(), cut);
    shown.sort_by_key(|o| o.call);
    let ms = |t: u64| t as f64 / 1e6;
    let mut out = format!(
        "{} operations on {key}; not linearizable from {:?} ms on; up to then:\n",
        ops.len(),
        first_bad.map(ms)
    );
    for o in shown {
        out += &format!(
            "  c{} [{:.3} .. {:.3}] {:?} -> {:?}\n",
            o.client,
            ms(o.call),
            ms(o.ret),
            o.input,
            o.output
        );
    }
    out
}

#[test]
fn history_stays_linearizable_and_watches_complete_under_faults() {
    let rounds = rounds();
    let lab = Lab::new(SERVERS);
    lab.in_hub(|| {
        let mut cluster = NsCluster::start(&lab, SERVERS);
        let eps = cluster.endpoints();
        let rt = common::client::runtime();
        let limit = Duration::from_secs(60 + 60 * rounds as u64);
        let work = Workload::new(limit);
        let mut failovers = Vec::new();
        let (history, log, watched, state) = rt.block_on(async {
            let mut clients = Vec::new();
            for ep in &eps {
                clients.push(workload::connect(ep, Duration::from_secs(30)).await);
            }
            let watchers: Vec<_> = eps
                .iter()
                .map(|ep| tokio::spawn(workload::watcher(ep.clone(), Arc::clone(&work))))
                .collect();
            let workers: Vec<_> = (0..SERVERS as u64 * CLIENTS_PER_SERVER)
                .map(|id| {
                    let ep = eps[id as usize % SERVERS].clone();
                    tokio::spawn(workload::client(id, ep, Arc::clone(&work)))
                })
                .collect();
            for round in 0..rounds {
                work.set_round(round as u64);
                tokio::time::sleep(TRAFFIC).await;
                let fault = FAULTS[round % FAULTS.len()];
                let started = Instant::now();
                let failover = inject(fault, &lab, &mut cluster, &mut clients).await;
                println!(
                    "round {round}: {fault:?} survived in {:?}",
                    started.elapsed()
                );
                if let Some(f) = failover {
                    println!("round {round}: a write succeeded {f:?} after SIGKILL of the leader");
                    failovers.push(f);
                }
            }
            tokio::time::sleep(TRAFFIC).await;
            work.stop_clients();
            for w in workers {
                w.await.expect("client task");
            }
            // A last write marks the end of the event history every watcher must reach.
            let end = clients[0]
                .kv
                .put(PutRequest {
                    key: format!("{PREFIX}end").into_bytes(),
                    value: b"end".to_vec(),
                    ..Default::default()
                })
                .await
                .expect("final put")
                .into_inner()
                .header
                .expect("header")
                .revision;
            work.drain_watchers(end);
            let mut watched = Vec::new();
            for w in watchers {
                watched.push(w.await.expect("watcher task"));
            }
            let (state, _) = final_state(&mut clients[1]).await;
            // The event history, read by a fresh watcher once everything has settled.
            let fresh = Workload::new(Duration::from_secs(60));
            fresh.drain_watchers(end);
            let (log, troubles) = workload::watcher(eps[2].clone(), fresh).await;
            assert!(troubles.is_empty(), "{troubles:?}");
            (work.history(), log, watched, state)
        });
        for s in &mut cluster.servers {
            s.assert_running();
        }

        let writes = history
            .iter()
            .filter(|o| !matches!(o.input, KvInput::Get { .. }))
            .count();
        let unknown = history.iter().filter(|o| o.output.is_none()).count();
        println!(
            "{} operations ({writes} writes, {unknown} with unknown outcome), {} events",
            history.len(),
            log.len()
        );
        assert!(
            history.len() > 100 * rounds,
            "too little traffic to mean anything: {} operations",
            history.len()
        );
        let checked = Instant::now();
        let verdict = check(&KvModel, &history, CHECK_BUDGET);
        println!(
            "linearizability check: {verdict:?} in {:?}",
            checked.elapsed()
        );
        let end_key = format!("{PREFIX}end");
        let log: Vec<WatchEvent> = log.into_iter().filter(|e| e.1 != end_key).collect();
        let watched: Vec<(Vec<WatchEvent>, Vec<String>)> = watched
            .into_iter()
            .map(|(ev, p)| (ev.into_iter().filter(|e| e.1 != end_key).collect(), p))
            .collect();
        let mut state = state;
        state.remove(&end_key);
        let mut problems = check_events(&log, &watched, &history, &state);
        if let Verdict::Violation { part, .. } | Verdict::Unknown { part, .. } = &verdict {
            let events: Vec<&WatchEvent> = log.iter().filter(|e| e.1 == *part).collect();
            problems.push(format!(
                "{verdict:?}\n{}\nthe events on {part}:\n{events:?}",
                explain(&history, part)
            ));
        }
        assert!(problems.is_empty(), "{}", problems.join("\n"));
        if !failovers.is_empty() {
            failovers.sort();
            println!(
                "leader failover (SIGKILL to first successful write): min {:?}, median {:?}, \
                 max {:?} over {} kills",
                failovers[0],
                failovers[failovers.len() / 2],
                failovers[failovers.len() - 1],
                failovers.len()
            );
        }
    });
}

/// Regression: openraft restores a restarted leader in its old term without a blank entry,
/// and its ReadIndex then answered from a state machine that had lost its last unflushed
/// batches in the crash: a read right after every server was killed and restarted missed
/// writes acknowledged just before. The first read that succeeds on any member after the
/// restart must see the last acknowledged write.
#[test]
fn a_read_right_after_every_server_restarts_sees_the_last_acknowledged_write() {
    let lab = Lab::new(SERVERS);
    lab.in_hub(|| {
        let mut cluster = NsCluster::start(&lab, SERVERS);
        let eps = cluster.endpoints();
        let rt = common::client::runtime();
        rt.block_on(async {
            let mut clients = Vec::new();
            for ep in &eps {
                clients.push(workload::connect(ep, Duration::from_secs(30)).await);
            }
            let all: Vec<usize> = (1..=SERVERS).collect();
            for attempt in 0..4 {
                let leader = find_leader(&mut clients, &all).await;
                // A burst of writes through the leader, so its store has unflushed batches.
                let mut last = (String::new(), 0);
                for i in 0..200 {
                    let value = format!("{attempt}-{i}");
                    let put = PutRequest {
                        key: b"/restart/k".to_vec(),
                        value: value.clone().into_bytes(),
                        ..Default::default()
                    };
                    let r = clients[leader - 1].kv.put(put).await.expect("put");
                    last = (value, r.into_inner().header.expect("header").revision);
                }
                for s in &mut cluster.servers {
                    s.kill();
                }
                for s in &mut cluster.servers {
                    s.spawn();
                }
                for i in [leader].into_iter().chain(others(leader)) {
                    let deadline = Instant::now() + RECOVERY_LIMIT;
                    let seen = loop {
                        let get = clients[i - 1].kv.range(RangeRequest {
                            key: b"/restart/k".to_vec(),
                            ..Default::default()
                        });
                        if let Ok(Ok(r)) = tokio::time::timeout(Duration::from_secs(1), get).await {
                            let kv = r.into_inner().kvs.into_iter().next().expect("the key");
                            break (String::from_utf8(kv.value).unwrap(), kv.mod_revision);
                        }
                        assert!(
                            Instant::now() < deadline,
                            "no read on s{i} after the restart"
                        );
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    };
                    assert_eq!(
                        seen, last,
                        "attempt {attempt}: the first read on s{i} (leader before: s{leader}) \
                         after every server restarted"
                    );
                }
            }
        });
    });
}
