//! Rough throughput figures of the store alone (no Raft, no gRPC): prints a table.
//!
//! `cargo run --release -p k3rs-storage --example bench [-- N | soak=ROUNDS]`
use std::time::Instant;

use k3rs_storage::*;

fn put(i: usize, value: &[u8]) -> Command {
    Command::Put(PutRequest {
        key: format!("/registry/pods/default/pod-{:06}", i % 10_000).into_bytes(),
        value: value.to_vec(),
        ..Default::default()
    })
}

fn row(what: &str, n: usize, start: Instant) {
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{what:<40} {n:>8} {:>12.0}/s {:>10.1} µs/op",
        n as f64 / secs,
        secs * 1e6 / n as f64
    );
}

/// Writes 1 KiB values over 1000 keys with a compaction every 20k writes (like
/// kube-apiserver's periodic compaction) and prints the size on disk, which must level off.
fn soak(rounds: usize) -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let store = Store::open(dir.path())?;
    let value = vec![b'x'; 1024];
    println!("{:>10} {:>14} {:>14}", "writes", "db size", "in use");
    for round in 1..=rounds {
        for i in 0..20_000 {
            store.apply_batch(&[put(i % 1000, &value)], b"meta")?;
        }
        store.apply_batch(
            &[Command::Compact {
                revision: store.current_revision(),
            }],
            b"meta",
        )?;
        store.flush()?;
        println!(
            "{:>10} {:>14} {:>14}",
            round * 20_000,
            store.db_size(),
            store.db_size_in_use()
        );
    }
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    if let Some(rounds) = std::env::args()
        .nth(1)
        .and_then(|a| a.strip_prefix("soak=").map(str::to_owned))
    {
        return soak(rounds.parse()?);
    }
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(50_000);
    let dir = tempfile::tempdir()?;
    let store = Store::open(dir.path())?;
    let value = vec![b'x'; 1024];
    println!(
        "{:<40} {:>8} {:>14} {:>16}",
        "operation", "count", "throughput", "latency"
    );

    let t = Instant::now();
    for i in 0..n {
        store.apply_batch(&[put(i, &value)], b"meta")?;
    }
    row("put, 1 KiB, one command per batch", n, t);

    let t = Instant::now();
    for chunk in (0..n).collect::<Vec<_>>().chunks(64) {
        let cmds: Vec<Command> = chunk.iter().map(|&i| put(i, &value)).collect();
        store.apply_batch(&cmds, b"meta")?;
    }
    row("put, 1 KiB, 64 commands per batch", n, t);

    let t = Instant::now();
    for i in 0..n {
        let key = format!("/registry/pods/default/pod-{:06}", i % 10_000).into_bytes();
        store
            .range(&RangeRequest {
                key,
                ..Default::default()
            })?
            .ok();
    }
    row("get one key", n, t);

    let t = Instant::now();
    let lists = 100;
    for _ in 0..lists {
        let req = RangeRequest {
            key: b"/registry/pods/".to_vec(),
            range_end: b"/registry/pods0".to_vec(),
            limit: 500,
            ..Default::default()
        };
        store.range(&req)?.ok();
    }
    row("list 500 of 10k keys (limit 500)", lists, t);

    let t = Instant::now();
    store.apply_batch(
        &[Command::Compact {
            revision: store.current_revision(),
        }],
        b"meta",
    )?;
    row("compact everything", 1, t);
    let before = store.db_size();
    let t = Instant::now();
    store.defragment()?;
    row("defragment", 1, t);
    println!(
        "db size {before} -> {} bytes, in use {}",
        store.db_size(),
        store.db_size_in_use()
    );
    Ok(())
}
