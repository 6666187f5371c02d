//! Integration tests of a single-member `k3rs_raft::Node`: writes, restarts, crashes
//! (a child process killed with SIGKILL), snapshots with WAL purge, and a lost state machine.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command as Process, Stdio};
use std::sync::Arc;
use std::time::Duration;

use k3rs_raft::{Node, NodeConfig};
use k3rs_storage::{Command, CommandResponse, PutRequest, RangeRequest};

fn config(dir: &Path, snapshot_entries: u64) -> NodeConfig {
    NodeConfig {
        data_dir: dir.to_path_buf(),
        node_id: 1,
        name: "test".into(),
        peer_urls: vec!["https://127.0.0.1:2380".into()],
        client_urls: vec!["https://127.0.0.1:2379".into()],
        heartbeat_interval: Duration::from_millis(50),
        election_timeout: Duration::from_millis(300),
        snapshot_entries,
    }
}

fn put(key: &str, value: &str) -> Command {
    Command::Put(PutRequest {
        key: key.as_bytes().to_vec(),
        value: value.as_bytes().to_vec(),
        ..Default::default()
    })
}

/// Puts `key` and returns the revision of the write.
async fn write_put(node: &Node, key: &str, value: &str) -> i64 {
    let out = node.write(put(key, value)).await.unwrap();
    assert!(matches!(out.result, Ok(CommandResponse::Put(_))), "{out:?}");
    out.revision
}

/// (mod_revision, value) of `key`, if present.
fn get(node: &Node, key: &str) -> Option<(i64, String)> {
    let req = RangeRequest {
        key: key.as_bytes().to_vec(),
        ..Default::default()
    };
    let (_, resp) = node.store().range(&req).unwrap().unwrap();
    resp.kvs.first().map(|kv| {
        (
            kv.mod_revision,
            String::from_utf8(kv.value.clone()).unwrap(),
        )
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_read_status_restart() {
    let dir = tempfile::tempdir().unwrap();
    let mut revs = Vec::new();
    {
        let node = Node::start(config(dir.path(), 10_000)).await.unwrap();
        let st = node.status();
        assert_eq!((st.member_id, st.leader), (1, Some(1)));
        for i in 0..20 {
            revs.push(write_put(&node, &format!("k{i}"), &format!("v{i}")).await);
        }
        assert!(revs.windows(2).all(|w| w[1] == w[0] + 1), "{revs:?}");
        node.read_barrier().await.unwrap();
        assert_eq!(get(&node, "k3"), Some((revs[3], "v3".into())));
        let st = node.status();
        assert!(
            st.applied_index >= 20 && st.commit_index >= st.applied_index,
            "{st:?}"
        );
        assert!(st.term >= 1);
        let members = node.members();
        assert_eq!(members.len(), 1);
        assert_eq!(
            (
                members[0].id,
                members[0].name.as_str(),
                members[0].is_learner
            ),
            (1, "test", false)
        );
        node.shutdown().await.unwrap();
        node.shutdown().await.unwrap();
        assert!(matches!(
            node.write(put("x", "y")).await,
            Err(k3rs_raft::Error::Stopped)
        ));
    }
    let node = Node::start(config(dir.path(), 10_000)).await.unwrap();
    for (i, rev) in revs.iter().enumerate() {
        assert_eq!(get(&node, &format!("k{i}")), Some((*rev, format!("v{i}"))));
    }
    assert_eq!(write_put(&node, "after", "restart").await, revs[19] + 1);
    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writers_share_fsyncs() {
    let dir = tempfile::tempdir().unwrap();
    let node = Node::start(config(dir.path(), 10_000)).await.unwrap();
    let mut tasks = Vec::new();
    for c in 0..32 {
        let node = node.clone();
        tasks.push(tokio::spawn(async move {
            let mut revs = Vec::new();
            for i in 0..20 {
                revs.push(write_put(&node, &format!("c{c}/{i}"), "v").await);
            }
            revs
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), 640, "every write got its own revision");
    node.shutdown().await.unwrap();
}

fn count_snapshots(dir: &Path) -> usize {
    std::fs::read_dir(dir.join("snapshots"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "snap")
        })
        .count()
}

/// Writes `n` puts `k{i}` with small snapshots, so the WAL is purged several times.
async fn write_with_snapshots(dir: &Path, n: usize) -> Vec<i64> {
    let node = Node::start(config(dir, 50)).await.unwrap();
    let mut revs = Vec::new();
    for i in 0..n {
        revs.push(write_put(&node, &format!("k{i}"), &format!("v{i}")).await);
    }
    // Snapshots are built in the background (beside the applies) and a new one replaces the
    // old one right after it is renamed into place: wait until one is there alone.
    for _ in 0..100 {
        if count_snapshots(dir) == 1 && dir.join("wal/purged").exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(count_snapshots(dir) >= 1, "no snapshot was built");
    assert_eq!(count_snapshots(dir), 1, "old snapshots are pruned");
    assert!(dir.join("wal/purged").exists(), "the WAL was never purged");
    node.shutdown().await.unwrap();
    revs
}

async fn check_all(node: &Node, revs: &[i64]) {
    node.read_barrier().await.unwrap();
    for (i, rev) in revs.iter().enumerate() {
        assert_eq!(
            get(node, &format!("k{i}")),
            Some((*rev, format!("v{i}"))),
            "k{i}"
        );
    }
}

/// Bytes of every snapshot file.
fn snapshot_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir.join("snapshots"))
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum()
}

/// After churn, compaction and `defragment`, the snapshot on disk holds the compacted state,
/// not the history it had before: disk use falls back towards the live data.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn defragment_rebuilds_the_snapshot_without_compacted_history() {
    let dir = tempfile::tempdir().unwrap();
    let node = Node::start(config(dir.path(), 200)).await.unwrap();
    let value = "x".repeat(2048);
    let mut last = 0;
    for i in 0..1500 {
        last = write_put(&node, &format!("k{}", i % 10), &value).await;
    }
    // Let a snapshot covering the churn land.
    for _ in 0..100 {
        if snapshot_bytes(dir.path()) > 1_000_000 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let before = snapshot_bytes(dir.path());
    assert!(
        before > 1_000_000,
        "a snapshot holds the history: {before} bytes"
    );

    let out = node
        .write(Command::Compact { revision: last })
        .await
        .unwrap();
    assert!(out.result.is_ok(), "{out:?}");
    node.defragment().await.unwrap();
    // Live data: 10 keys x 2 KiB. Allow generous framing overhead, but not the history.
    let mut after = before;
    for _ in 0..200 {
        after = snapshot_bytes(dir.path());
        if after < 200_000 && count_snapshots(dir.path()) == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        after < 200_000,
        "snapshot bytes after defragment: {after} (before: {before})"
    );
    assert_eq!(count_snapshots(dir.path()), 1);
    node.shutdown().await.unwrap();
    drop(node);

    // The rebuilt snapshot restores: the latest values are all there after a restart.
    let node = Node::start(config(dir.path(), 200)).await.unwrap();
    node.read_barrier().await.unwrap();
    for k in 0..10 {
        assert_eq!(
            get(&node, &format!("k{k}")).map(|(_, v)| v.len()),
            Some(2048)
        );
    }
    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshots_purge_and_restart() {
    let dir = tempfile::tempdir().unwrap();
    let revs = write_with_snapshots(dir.path(), 400).await;
    let node = Node::start(config(dir.path(), 50)).await.unwrap();
    check_all(&node, &revs).await;
    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_state_machine_is_rebuilt_from_snapshot_and_wal() {
    let dir = tempfile::tempdir().unwrap();
    let revs = write_with_snapshots(dir.path(), 400).await;
    std::fs::remove_dir_all(dir.path().join("sm")).unwrap();
    let node = Node::start(config(dir.path(), 50)).await.unwrap();
    check_all(&node, &revs).await;
    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_expire_on_the_leader() {
    let dir = tempfile::tempdir().unwrap();
    let node = Node::start(config(dir.path(), 10_000)).await.unwrap();
    assert_eq!(node.min_lease_ttl(), 1);
    let out = node
        .write(Command::LeaseGrant { id: 7, ttl: 1 })
        .await
        .unwrap();
    assert_eq!(
        out.result,
        Ok(CommandResponse::LeaseGrant { id: 7, ttl: 1 })
    );
    let out = node
        .write(Command::LeaseGrant { id: 8, ttl: 30 })
        .await
        .unwrap();
    assert!(out.result.is_ok());
    let attach = |lease| {
        Command::Put(PutRequest {
            key: b"leased".to_vec(),
            value: b"v".to_vec(),
            lease,
            ..Default::default()
        })
    };
    node.write(attach(7)).await.unwrap();
    assert_eq!(node.lease_remaining(7), Some(1));
    assert_eq!(node.lease_keep_alive(8).await.unwrap(), Some(30));
    assert_eq!(node.lease_keep_alive(99).await.unwrap(), None);
    assert_eq!(node.lease_remaining(99), None);

    let mut gone = false;
    for _ in 0..60 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if get(&node, "leased").is_none() {
            gone = true;
            break;
        }
    }
    assert!(gone, "the key of the expired lease is deleted");
    assert_eq!(node.store().lease(7).unwrap(), None);
    // The clock forgets the lease right after the store applied the revocation.
    for _ in 0..20 {
        if node.lease_remaining(7).is_none() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(node.lease_remaining(7), None);
    assert!(
        node.store().lease(8).unwrap().is_some(),
        "the long lease lives"
    );
    node.shutdown().await.unwrap();
    drop(node);

    // After a restart the surviving lease has a fresh deadline at once.
    let node = Node::start(config(dir.path(), 10_000)).await.unwrap();
    let left = node.lease_remaining(8).unwrap();
    assert!((30..=31).contains(&left), "{left}");
    node.shutdown().await.unwrap();
}

/// Number of acknowledged writes the crash test waits for before killing the child.
const CRASH_ACKS: usize = 2000;
const CRASH_DIR_ENV: &str = "K3RS_RAFT_CRASH_DIR";

/// The child side of `acknowledged_writes_survive_sigkill`: writes forever from 8 clients and
/// prints `ACK <key> <revision>` after each acknowledged write. Does nothing unless run by it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run as a child process by acknowledged_writes_survive_sigkill"]
async fn crash_child() {
    let Ok(dir) = std::env::var(CRASH_DIR_ENV) else {
        return;
    };
    // Small snapshots: the crash also lands around snapshot building and WAL purges.
    let node = Node::start(config(Path::new(&dir), 20)).await.unwrap();
    let mut tasks = Vec::new();
    for c in 0..8 {
        let node: Arc<Node> = node.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0.. {
                let key = format!("c{c}/{i}");
                let rev = write_put(&node, &key, &key).await;
                println!("ACK {key} {rev}");
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
}

/// The harness's name for [`crash_child`]: its path in this test binary, without the crate.
fn child_test() -> String {
    let (_crate, module) = module_path!()
        .split_once("::")
        .expect("a module of the test binary");
    format!("{module}::crash_child")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_writes_survive_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    for round in 0..3 {
        let mut child = Process::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                &child_test(),
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CRASH_DIR_ENV, dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut acked = Vec::new();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        for line in stdout.lines() {
            let line = line.unwrap();
            let Some(rest) = line.strip_prefix("ACK ") else {
                continue;
            };
            let (key, rev) = rest.split_once(' ').unwrap();
            acked.push((key.to_string(), rev.parse::<i64>().unwrap()));
            if acked.len() == CRASH_ACKS {
                child.kill().unwrap(); // SIGKILL
                break;
            }
        }
        child.wait().unwrap();
        assert_eq!(
            acked.len(),
            CRASH_ACKS,
            "round {round}: the child stopped early"
        );

        let node = Node::start(config(dir.path(), 20)).await.unwrap();
        node.read_barrier().await.unwrap();
        for (key, rev) in &acked {
            assert_eq!(
                get(&node, key),
                Some((*rev, key.clone())),
                "round {round}: {key}"
            );
        }
        node.shutdown().await.unwrap();
    }
    assert!(
        count_snapshots(dir.path()) >= 1,
        "the crash runs crossed snapshots"
    );
    assert!(dir.path().join("wal/purged").exists(), "and WAL purges");
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &to.join(e.file_name()));
        } else {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

/// A state machine that lost its latest batches (sled is not fsync'ed) is brought forward by
/// re-applying the WAL past its applied index, to the same revisions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wal_is_replayed_past_the_applied_index() {
    let dir = tempfile::tempdir().unwrap();
    let old_sm = tempfile::tempdir().unwrap();
    let mut revs = Vec::new();
    let node = Node::start(config(dir.path(), 10_000)).await.unwrap();
    for i in 0..10 {
        revs.push(write_put(&node, &format!("k{i}"), &format!("v{i}")).await);
    }
    node.shutdown().await.unwrap();
    drop(node);
    copy_dir(&dir.path().join("sm"), old_sm.path());

    let node = Node::start(config(dir.path(), 10_000)).await.unwrap();
    for i in 10..30 {
        revs.push(write_put(&node, &format!("k{i}"), &format!("v{i}")).await);
    }
    let applied_before = node.status().applied_index;
    node.shutdown().await.unwrap();
    drop(node);

    std::fs::remove_dir_all(dir.path().join("sm")).unwrap();
    copy_dir(old_sm.path(), &dir.path().join("sm"));
    let node = Node::start(config(dir.path(), 10_000)).await.unwrap();
    let st = node.status();
    assert!(
        st.applied_index >= applied_before,
        "{st:?} before: {applied_before}"
    );
    check_all(&node, &revs).await;
    assert_eq!(write_put(&node, "next", "v").await, revs[29] + 1);
    node.shutdown().await.unwrap();
}

/// Dropping the last handle without `shutdown` stops Raft and releases the data dir, and
/// loses nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drop_without_shutdown_then_restart() {
    let dir = tempfile::tempdir().unwrap();
    let node = Node::start(config(dir.path(), 10_000)).await.unwrap();
    let rev = write_put(&node, "k", "v").await;
    drop(node);
    let node = Node::start(config(dir.path(), 10_000)).await.unwrap();
    assert_eq!(get(&node, "k"), Some((rev, "v".into())));
    node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn creates_its_data_dir_and_refuses_huge_commands() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("not/yet/there");
    let node = Node::start(config(&data, 10_000)).await.unwrap();
    let huge = "x".repeat(33 << 20);
    assert!(matches!(
        node.write(put("huge", &huge)).await,
        Err(k3rs_raft::Error::Fatal(_))
    ));
    let rev = write_put(&node, "small", "v").await;
    assert_eq!(get(&node, "small"), Some((rev, "v".into())));
    node.shutdown().await.unwrap();
}

/// Without its state machine and without a snapshot, a purged WAL cannot rebuild the state:
/// the node refuses to start instead of serving a partial state.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refuses_to_start_when_nothing_covers_the_purged_wal() {
    let dir = tempfile::tempdir().unwrap();
    write_with_snapshots(dir.path(), 200).await;
    std::fs::remove_dir_all(dir.path().join("sm")).unwrap();
    std::fs::remove_dir_all(dir.path().join("snapshots")).unwrap();
    let err = Node::start(config(dir.path(), 50))
        .await
        .err()
        .expect("refused");
    assert!(
        matches!(err, k3rs_raft::Error::Fatal(ref m) if m.contains("purged")),
        "{err}"
    );
}

/// The bytes of the files in `dir`; a file removed while it is listed (a purge or a flush
/// running beside the test) counts as gone.
fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok()?.metadata().ok())
        .map(|m| m.len())
        .sum()
}

/// After churn and a compaction the WAL shrinks to about the store's live size (it is
/// snapshotted and purged when it outgrows the store), not to whatever was written since the
/// last entry-count snapshot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wal_is_bounded_by_the_live_data_after_churn() {
    let dir = tempfile::tempdir().unwrap();
    let node = Node::start(config(dir.path(), 10_000)).await.unwrap();
    let value = "x".repeat(4096);
    let mut last = 0;
    for i in 0..3000 {
        last = write_put(&node, &format!("k{}", i % 10), &value).await;
    }
    let wal_after_churn = dir_bytes(&dir.path().join("wal"));
    assert!(wal_after_churn > 10 << 20, "{wal_after_churn}");
    node.write(Command::Compact { revision: last })
        .await
        .unwrap()
        .result
        .unwrap();
    let started = std::time::Instant::now();
    let bounded = 3 << 20;
    while dir_bytes(&dir.path().join("wal")) > bounded {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "WAL still {} bytes",
            dir_bytes(&dir.path().join("wal"))
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    println!(
        "WAL: {wal_after_churn} bytes after churn, {} bytes {:?} after compaction",
        dir_bytes(&dir.path().join("wal")),
        started.elapsed()
    );
    assert_eq!(get(&node, "k9").map(|(_, v)| v.len()), Some(4096));
    node.shutdown().await.unwrap();
}

/// A single member is its own quorum: a write commits only once its own WAL holds it durably,
/// however long the sync takes (the leader counts itself only after its flush).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_member_write_waits_for_its_own_wal_sync() {
    let dir = tempfile::tempdir().unwrap();
    let node = Node::start(config(dir.path(), 10_000)).await.unwrap();
    write_put(&node, "before", "1").await;

    let stall = k3rs_raft::fault::stall_wal_sync(dir.path());
    let writer = {
        let node = node.clone();
        tokio::spawn(async move { write_put(&node, "held", "2").await })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        !writer.is_finished(),
        "a write was acknowledged before its entry was durable anywhere"
    );
    assert_eq!(get(&node, "held"), None, "applied before it was durable");

    drop(stall);
    let rev = tokio::time::timeout(Duration::from_secs(10), writer)
        .await
        .expect("the write completes once the sync runs")
        .unwrap();
    assert_eq!(get(&node, "held"), Some((rev, "2".into())));
    node.shutdown().await.unwrap();
}

/// The applied index once every answered write shows in it (the metrics trail the answers
/// by a hop of the Raft core).
async fn settled_applied_index(node: &Node) -> u64 {
    tokio::time::sleep(Duration::from_millis(300)).await;
    node.status().applied_index
}

/// A write that finds the proposer idle is proposed at once as its own entry; writes that
/// arrive while a proposal is in Raft still share entries (proposing straight from the
/// caller is only for an idle proposer, never a way around the batches).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lone_writes_take_one_entry_each_and_writes_under_load_share_entries() {
    let dir = tempfile::tempdir().unwrap();
    let node = Node::start(config(dir.path(), 10_000)).await.unwrap();
    write_put(&node, "warm", "0").await;
    let start = settled_applied_index(&node).await;
    for i in 0..5 {
        write_put(&node, &format!("seq{i}"), "v").await;
    }
    assert_eq!(settled_applied_index(&node).await, start + 5);

    let stall = k3rs_raft::fault::stall_wal_sync(dir.path());
    let spawn_put = |key: String| {
        let node = node.clone();
        tokio::spawn(async move { write_put(&node, &key, "v").await })
    };
    let mut writers = vec![spawn_put("held".into())];
    tokio::time::sleep(Duration::from_millis(200)).await;
    writers.extend((0..16).map(|i| spawn_put(format!("load{i}"))));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        writers.iter().all(|w| !w.is_finished()),
        "answered before its sync"
    );
    drop(stall);

    let mut revs = Vec::new();
    for w in writers {
        let rev = tokio::time::timeout(Duration::from_secs(10), w).await;
        revs.push(rev.expect("every write completes once syncs run").unwrap());
    }
    revs.sort_unstable();
    revs.dedup();
    assert_eq!(revs.len(), 17, "every write got its own revision");
    let entries = settled_applied_index(&node).await - (start + 5);
    assert!(
        (2..=4).contains(&entries),
        "17 writes, 16 of them queued behind a held sync, took {entries} entries"
    );
    node.shutdown().await.unwrap();
}
