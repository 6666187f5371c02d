//! Integration tests of multi-member clusters: three `k3rs_raft::Node`s in one process on
//! loopback ports (plaintext peers), with elections, forwarding, ReadIndex on followers,
//! failover, membership changes, snapshot catch-up and cluster reset.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k3rs_raft::types::NodeInfo;
use k3rs_raft::{Bootstrap, MembershipError, Node, NodeConfig, NodeId, PeerConfig};
use k3rs_storage::{Command, CommandResponse, PutRequest, RangeRequest};

/// Raft timing of a member; `fast` for most tests, etcd's defaults for the failover time.
#[derive(Clone, Copy)]
struct Timing {
    heartbeat: Duration,
    election: Duration,
}

const FAST: Timing = Timing {
    heartbeat: Duration::from_millis(50),
    election: Duration::from_millis(300),
};
const ETCD_DEFAULTS: Timing = Timing {
    heartbeat: Duration::from_millis(100),
    election: Duration::from_millis(1000),
};

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A member's fixed identity: where it lives and how it is reached.
#[derive(Clone)]
struct Spec {
    id: NodeId,
    dir: PathBuf,
    port: u16,
    timing: Timing,
    snapshot_entries: u64,
}

impl Spec {
    fn new(root: &Path, id: NodeId, timing: Timing, snapshot_entries: u64) -> Spec {
        Spec {
            id,
            dir: root.join(format!("n{id}")),
            port: free_port(),
            timing,
            snapshot_entries,
        }
    }

    fn info(&self) -> NodeInfo {
        NodeInfo {
            name: format!("n{}", self.id),
            peer_urls: vec![format!("http://127.0.0.1:{}", self.port)],
            client_urls: vec![format!("http://127.0.0.1:{}", self.port + 1)],
            auto_promote: false,
        }
    }

    async fn start(&self, bootstrap: Bootstrap) -> Arc<Node> {
        let info = self.info();
        let cfg = NodeConfig {
            data_dir: self.dir.clone(),
            node_id: self.id,
            name: info.name,
            peer_urls: info.peer_urls,
            client_urls: info.client_urls,
            heartbeat_interval: self.timing.heartbeat,
            election_timeout: self.timing.election,
            snapshot_entries: self.snapshot_entries,
        };
        let peer = PeerConfig {
            listen: ([127, 0, 0, 1], self.port).into(),
            tls: None,
            bootstrap,
        };
        // The previous incarnation's store is released when its last task ends.
        let started = Instant::now();
        loop {
            match Node::start_member(cfg.clone(), peer.clone()).await {
                Ok(n) => return n,
                Err(e)
                    if e.to_string().contains("lock")
                        && started.elapsed() < Duration::from_secs(5) =>
                {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(e) => panic!(
                    "starting member {}: {e} (after {:?})",
                    self.id,
                    started.elapsed()
                ),
            }
        }
    }
}

fn put(key: &str, value: &str) -> Command {
    Command::Put(PutRequest {
        key: key.as_bytes().to_vec(),
        value: value.as_bytes().to_vec(),
        ..Default::default()
    })
}

async fn write_put(node: &Node, key: &str, value: &str) -> i64 {
    let out = node.write(put(key, value)).await.unwrap();
    assert!(matches!(out.result, Ok(CommandResponse::Put(_))), "{out:?}");
    out.revision
}

/// The value of `key` in `node`'s applied state, read without a barrier.
fn get(node: &Node, key: &str) -> Option<String> {
    let req = RangeRequest {
        key: key.as_bytes().to_vec(),
        ..Default::default()
    };
    let (_, resp) = node.store().range(&req).unwrap().unwrap();
    resp.kvs
        .first()
        .map(|kv| String::from_utf8(kv.value.clone()).unwrap())
}

/// Polls `cond` every 20 ms until it holds, or panics after `timeout`.
async fn eventually(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A read barrier, retried for a while: with [`FAST`] timing a loaded machine can delay
/// heartbeats past the election timeout, and a barrier during the election that follows fails
/// (as a client's would, and a client retries).
async fn barrier(node: &Node) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match node.read_barrier().await {
            Ok(()) => return,
            Err(e) if Instant::now() < deadline => {
                eprintln!("read barrier failed, retrying: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("read barrier failed for 10 s: {e}"),
        }
    }
}

fn voters(node: &Node) -> Vec<NodeId> {
    let mut v: Vec<NodeId> = node
        .members()
        .into_iter()
        .filter(|m| !m.is_learner)
        .map(|m| m.id)
        .collect();
    v.sort_unstable();
    v
}

fn leader_of(nodes: &[&Arc<Node>]) -> Option<usize> {
    nodes.iter().position(|n| n.is_leader())
}

/// Starts member 1 as a new cluster, adds 2 and 3 as voters (etcd `member add`), starts them
/// as joiners, and waits until all three are voters.
async fn three_members(root: &Path, timing: Timing) -> (Vec<Spec>, Vec<Arc<Node>>) {
    let specs: Vec<Spec> = (1..=3)
        .map(|i| Spec::new(root, i, timing, 10_000))
        .collect();
    let first = specs[0].start(Bootstrap::NewCluster).await;
    write_put(&first, "before-join", "1").await;
    let mut nodes = vec![first];
    for s in &specs[1..] {
        nodes[0].add_voter(s.id, s.info()).await.unwrap();
        let peers = vec![specs[0].info().peer_urls[0].clone()];
        nodes.push(s.start(Bootstrap::Join { peers }).await);
    }
    for n in &nodes {
        eventually("three voters", Duration::from_secs(20), || {
            voters(n) == [1, 2, 3]
        })
        .await;
    }
    (specs, nodes)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn forwarding_read_index_failover_and_removal() {
    let root = tempfile::tempdir().unwrap();
    let (specs, nodes) = three_members(root.path(), ETCD_DEFAULTS).await;
    let all: Vec<&Arc<Node>> = nodes.iter().collect();
    let leader = leader_of(&all).expect("a leader");
    let followers: Vec<usize> = (0..3).filter(|i| *i != leader).collect();

    // Joiners caught up with what was written before they joined.
    for n in &nodes {
        n.read_barrier().await.unwrap();
        assert_eq!(get(n, "before-join").as_deref(), Some("1"));
    }

    // A write on the leader and one on a follower (forwarded); each linearizable read on a
    // follower sees both.
    let r1 = write_put(&nodes[leader], "on-leader", "a").await;
    let r2 = write_put(&nodes[followers[0]], "on-follower", "b").await;
    assert_eq!(r2, r1 + 1);
    for f in &followers {
        nodes[*f].read_barrier().await.unwrap();
        assert_eq!(get(&nodes[*f], "on-leader").as_deref(), Some("a"));
        assert_eq!(get(&nodes[*f], "on-follower").as_deref(), Some("b"));
    }
    // Concurrent writers on a follower share forwarded batches.
    let mut tasks = Vec::new();
    for c in 0..16 {
        let n = nodes[followers[1]].clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..10 {
                write_put(&n, &format!("c{c}/{i}"), "v").await;
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    nodes[followers[0]].read_barrier().await.unwrap();
    assert_eq!(get(&nodes[followers[0]], "c15/9").as_deref(), Some("v"));

    // A lease granted through a follower is kept alive through a follower.
    let grant = nodes[followers[0]]
        .write(Command::LeaseGrant { id: 77, ttl: 30 })
        .await
        .unwrap();
    assert!(matches!(
        grant.result,
        Ok(CommandResponse::LeaseGrant { id: 77, .. })
    ));
    assert_eq!(
        nodes[followers[1]].lease_keep_alive(77).await.unwrap(),
        Some(30)
    );
    assert_eq!(
        nodes[followers[1]].lease_keep_alive(78).await.unwrap(),
        None
    );

    // Kill the leader: a new one is elected and writes (on the survivors) succeed again.
    let stopping = Instant::now();
    nodes[leader].shutdown().await.unwrap();
    println!("stopping the leader took {:?}", stopping.elapsed());
    let killed = Instant::now();
    let survivors: Vec<&Arc<Node>> = followers.iter().map(|f| &nodes[*f]).collect();
    loop {
        if let Ok(out) = survivors[0].write(put("after-failover", "c")).await {
            assert!(out.result.is_ok());
            break;
        }
        assert!(killed.elapsed() < Duration::from_secs(20), "no new leader");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let failover = killed.elapsed();
    println!(
        "failover (heartbeat 100 ms, election timeout 1000 ms): new leader elected and a \
         write committed {failover:?} after the leader stopped"
    );
    let new_leader = leader_of(&survivors).expect("a new leader");
    survivors[1 - new_leader].read_barrier().await.unwrap();
    assert_eq!(
        get(survivors[1 - new_leader], "after-failover").as_deref(),
        Some("c")
    );
    // The lease survived the leader change (its deadline was refreshed, not expired).
    assert_eq!(survivors[0].lease_keep_alive(77).await.unwrap(), Some(30));

    // Remove the dead member; the two survivors go on.
    let dead = specs[leader].id;
    survivors[1].remove_member(dead).await.unwrap();
    for s in &survivors {
        eventually("two members", Duration::from_secs(10), || {
            s.members().len() == 2
        })
        .await;
    }
    assert_eq!(
        survivors[0].remove_member(dead).await,
        Err(MembershipError::MemberNotFound)
    );
    // Removing a voter of two would leave one of one started: etcd allows it; promoting a
    // voter is refused.
    let other = survivors[0].members()[0].id;
    assert_eq!(
        survivors[0].promote(other).await,
        Err(MembershipError::NotLearner)
    );
    write_put(survivors[1], "end", "d").await;
    for s in survivors {
        s.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn removed_member_stops_and_lease_expiry_is_the_leaders() {
    let root = tempfile::tempdir().unwrap();
    let (_specs, nodes) = three_members(root.path(), FAST).await;
    let all: Vec<&Arc<Node>> = nodes.iter().collect();
    let leader = leader_of(&all).expect("a leader");
    let victim = (leader + 1) % 3;
    let keep = 3 - leader - victim;

    // A lease with a key, granted and attached through a follower, expires (the leader
    // revokes it) and the key disappears everywhere.
    let grant = nodes[keep]
        .write(Command::LeaseGrant { id: 5, ttl: 1 })
        .await
        .unwrap();
    assert!(grant.result.is_ok(), "{grant:?}");
    nodes[keep]
        .write(Command::Put(PutRequest {
            key: b"leased".to_vec(),
            value: b"v".to_vec(),
            lease: 5,
            ..Default::default()
        }))
        .await
        .unwrap()
        .result
        .unwrap();
    for n in &nodes {
        barrier(n).await;
        assert_eq!(get(n, "leased").as_deref(), Some("v"));
    }
    let started = Instant::now();
    for n in &nodes {
        loop {
            barrier(n).await;
            if get(n, "leased").is_none() {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "lease never expired"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    // Remove a live follower: it learns it was removed and stops.
    let victim_id = nodes[victim].status().member_id;
    nodes[keep].remove_member(victim_id).await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), nodes[victim].removed())
        .await
        .expect("the removed member noticed");
    assert!(nodes[victim].write(put("x", "y")).await.is_err());
    eventually("two members", Duration::from_secs(10), || {
        nodes[leader].members().len() == 2
    })
    .await;
    write_put(&nodes[keep], "after-remove", "1").await;
    for n in nodes {
        let _ = n.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn learner_catches_up_by_snapshot_then_is_promoted() {
    let root = tempfile::tempdir().unwrap();
    let a = Spec::new(root.path(), 1, FAST, 20);
    let b = Spec::new(root.path(), 2, FAST, 20);
    let leader = a.start(Bootstrap::NewCluster).await;
    // Small snapshots: the log the learner would need is purged several times over.
    let mut tasks = Vec::new();
    for c in 0..4 {
        let n = leader.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..100 {
                write_put(&n, &format!("k{c}/{i}"), &"x".repeat(3000)).await;
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    for i in 0..50 {
        write_put(&leader, &format!("seq{i}"), "v").await;
    }
    assert!(
        std::fs::read_dir(a.dir.join("wal"))
            .unwrap()
            .any(|e| e.unwrap().file_name() == "purged"),
        "the WAL was purged"
    );

    let term = leader.status().term;
    leader.add_learner(b.id, b.info()).await.unwrap();
    let started = Instant::now();
    let learner = b.start(Bootstrap::Join { peers: vec![] }).await;
    learner.read_barrier().await.unwrap();
    println!("learner caught up in {:?}", started.elapsed());
    assert_eq!(get(&learner, "k3/99").map(|v| v.len()), Some(3000));
    assert_eq!(get(&learner, "seq49").as_deref(), Some("v"));
    let snaps = std::fs::read_dir(b.dir.join("snapshots"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "snap")
        })
        .count();
    assert!(snaps >= 1, "the learner installed a snapshot");
    // Installing it did not stall the Raft core long enough for an election.
    assert_eq!(leader.status().term, term);
    assert!(leader.is_leader());
    assert!(learner.members().iter().any(|m| m.id == 2 && m.is_learner));

    // A learner's write is forwarded too; then it is promoted.
    write_put(&learner, "from-learner", "1").await;
    eventually("learner in sync", Duration::from_secs(10), || {
        learner.status().applied_index + 1 >= leader.status().applied_index
    })
    .await;
    leader.promote(b.id).await.unwrap();
    assert_eq!(leader.promote(b.id).await, Err(MembershipError::NotLearner));
    eventually("two voters", Duration::from_secs(10), || {
        voters(&learner) == [1, 2]
    })
    .await;
    learner.shutdown().await.unwrap();
    leader.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cluster_reset_on_a_survivor_of_a_lost_majority() {
    let root = tempfile::tempdir().unwrap();
    let (specs, nodes) = three_members(root.path(), FAST).await;
    let all: Vec<&Arc<Node>> = nodes.iter().collect();
    let leader = leader_of(&all).expect("a leader");
    let survivor = (leader + 1) % 3;
    write_put(&nodes[leader], "kept", "1").await;
    nodes[survivor].read_barrier().await.unwrap();

    // The majority is lost for good.
    for (i, n) in nodes.iter().enumerate() {
        if i != survivor {
            n.shutdown().await.unwrap();
        }
    }
    assert!(nodes[survivor].write(put("lost", "x")).await.is_err());
    nodes[survivor].shutdown().await.unwrap();
    drop(nodes);

    let reset = specs[survivor].start(Bootstrap::ClusterReset).await;
    assert!(reset.is_leader());
    assert_eq!(reset.members().len(), 1);
    reset.read_barrier().await.unwrap();
    assert_eq!(get(&reset, "kept").as_deref(), Some("1"));
    write_put(&reset, "after-reset", "2").await;
    reset.shutdown().await.unwrap();
    drop(reset);

    // An ordinary restart keeps the single-member cluster.
    let again = specs[survivor].start(Bootstrap::NewCluster).await;
    assert_eq!(again.members().len(), 1);
    assert_eq!(get(&again, "after-reset").as_deref(), Some("2"));
    again.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn restored_snapshot_becomes_a_one_member_cluster_that_new_members_copy() {
    let root = tempfile::tempdir().unwrap();
    let (_specs, nodes) = three_members(root.path(), FAST).await;
    let leader = &nodes[leader_of(&nodes.iter().collect::<Vec<_>>()).expect("a leader")];
    let at_snapshot = write_put(leader, "in-snapshot", "1").await;
    leader.read_barrier().await.unwrap();
    let mut snap = Vec::new();
    leader.store().export_snapshot(&mut snap).unwrap();
    write_put(leader, "after-snapshot", "2").await;
    for n in &nodes {
        n.shutdown().await.unwrap();
    }
    drop(nodes);

    // A fresh member (another id, another directory) from the snapshot.
    let restored = Spec::new(root.path(), 7, FAST, 10_000);
    let last = k3rs_raft::restore::restore(&restored.dir, &mut snap.as_slice())
        .unwrap()
        .expect("the snapshot holds applied entries");
    assert!(
        k3rs_raft::restore::restore(&restored.dir, &mut snap.as_slice()).is_err(),
        "a directory holding a member is refused"
    );
    let node = restored.start(Bootstrap::ClusterReset).await;
    assert!(node.is_leader());
    assert_eq!(voters(&node), [7]);
    assert!(node.status().applied_index > last.index);
    node.read_barrier().await.unwrap();
    assert_eq!(get(&node, "in-snapshot").as_deref(), Some("1"));
    assert_eq!(get(&node, "after-snapshot"), None);
    assert_eq!(node.store().current_revision(), at_snapshot);
    assert_eq!(
        write_put(&node, "after-restore", "3").await,
        at_snapshot + 1
    );

    // The log before the snapshot is gone: a new member gets the restored data by snapshot.
    let joiner = Spec::new(root.path(), 8, FAST, 10_000);
    node.add_learner(joiner.id, joiner.info()).await.unwrap();
    let learner = joiner.start(Bootstrap::Join { peers: vec![] }).await;
    learner.read_barrier().await.unwrap();
    assert_eq!(get(&learner, "in-snapshot").as_deref(), Some("1"));
    assert_eq!(get(&learner, "after-restore").as_deref(), Some("3"));
    assert_eq!(get(&learner, "after-snapshot"), None);
    learner.shutdown().await.unwrap();
    node.shutdown().await.unwrap();
    drop(node);

    // An ordinary restart keeps it.
    let again = restored.start(Bootstrap::NewCluster).await;
    assert_eq!(voters(&again), [7]);
    assert_eq!(get(&again, "after-restore").as_deref(), Some("3"));
    again.shutdown().await.unwrap();
}

/// The leader sends its entries to the followers while its own WAL syncs them: with the
/// leader's disk stalled, two followers that hold a write durably are a quorum and the write
/// commits. The leader counts itself once its sync completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn leader_commits_through_followers_while_its_wal_sync_is_stalled() {
    let root = tempfile::tempdir().unwrap();
    let (specs, nodes) = three_members(root.path(), ETCD_DEFAULTS).await;
    let all: Vec<&Arc<Node>> = nodes.iter().collect();
    let leader = leader_of(&all).expect("a leader");
    write_put(&nodes[leader], "warm", "1").await;

    let stall = k3rs_raft::fault::stall_wal_sync(&specs[leader].dir);
    let mut revs = Vec::new();
    for i in 0..5 {
        let key = format!("stalled/{i}");
        let written =
            tokio::time::timeout(Duration::from_secs(10), nodes[leader].write(put(&key, "v")))
                .await
                .expect("a write commits on the followers' syncs while the leader's is stalled")
                .unwrap();
        assert!(
            matches!(written.result, Ok(CommandResponse::Put(_))),
            "{written:?}"
        );
        revs.push(written.revision);
    }
    assert!(revs.windows(2).all(|w| w[0] < w[1]), "{revs:?}");
    assert!(nodes[leader].is_leader(), "leadership survived the stall");
    for n in &nodes {
        eventually(
            "the followers apply the writes",
            Duration::from_secs(10),
            || get(n, "stalled/4").as_deref() == Some("v"),
        )
        .await;
    }

    // Once the leader's disk is back, later writes go on through the same leader.
    drop(stall);
    write_put(&nodes[leader], "after", "1").await;
    assert!(nodes[leader].is_leader());
    for n in &nodes {
        n.shutdown().await.unwrap();
    }
}
