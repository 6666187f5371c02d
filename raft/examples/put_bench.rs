//! Put throughput and latency of a single-member Node at 1 and 64 concurrent clients.
//!
//! `cargo run --release -p k3rs-raft --example put_bench [-- <data dir> <seconds>]`
//! (the data dir should be on the disk under test; default: a temp dir). Ends with the disk
//! use of the WAL, the state machine and the snapshots.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k3rs_raft::{Node, NodeConfig};
use k3rs_storage::{Command, PutRequest};

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = args.get(1).map_or(tmp.path().to_path_buf(), Into::into);
    let secs: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(5);
    let node = Node::start(NodeConfig {
        data_dir: dir.clone(),
        node_id: 1,
        name: "bench".into(),
        peer_urls: vec![],
        client_urls: vec![],
        heartbeat_interval: Duration::from_millis(100),
        election_timeout: Duration::from_millis(1000),
        snapshot_entries: 10_000,
    })
    .await
    .expect("start");
    println!(
        "{:>8} {:>10} {:>10} {:>10} {:>10}",
        "clients", "writes/s", "avg ms", "p50 ms", "p99 ms"
    );
    for clients in [1usize, 64] {
        let deadline = Instant::now() + Duration::from_secs(secs);
        let started = Instant::now();
        let mut tasks = Vec::new();
        for c in 0..clients {
            let node: Arc<Node> = node.clone();
            tasks.push(tokio::spawn(async move {
                let mut lat = Vec::new();
                let mut i = 0u64;
                while Instant::now() < deadline {
                    let cmd = Command::Put(PutRequest {
                        key: format!("bench/{c}/{}", i % 1000).into_bytes(),
                        value: vec![b'x'; 256],
                        ..Default::default()
                    });
                    let t = Instant::now();
                    node.write(cmd).await.expect("write");
                    lat.push(t.elapsed());
                    i += 1;
                }
                lat
            }));
        }
        let mut lat = Vec::new();
        for t in tasks {
            lat.extend(t.await.expect("client"));
        }
        let elapsed = started.elapsed().as_secs_f64();
        lat.sort_unstable();
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        let avg = lat.iter().map(|d| ms(*d)).sum::<f64>() / lat.len() as f64;
        println!(
            "{:>8} {:>10.0} {:>10.2} {:>10.2} {:>10.2}",
            clients,
            lat.len() as f64 / elapsed,
            avg,
            ms(lat[lat.len() / 2]),
            ms(lat[lat.len() * 99 / 100]),
        );
    }
    node.shutdown().await.expect("shutdown");
    for part in ["wal", "sm", "snapshots"] {
        println!(
            "{part:>10}: {:.1} MiB",
            du(&dir.join(part)) as f64 / (1 << 20) as f64
        );
    }
}

/// Bytes in the files under `path`.
fn du(path: &std::path::Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(path) else {
        return std::fs::metadata(path).map_or(0, |m| m.len());
    };
    entries
        .filter_map(Result::ok)
        .map(|e| {
            let p = e.path();
            if p.is_dir() {
                du(&p)
            } else {
                e.metadata().map_or(0, |m| m.len())
            }
        })
        .sum()
}
