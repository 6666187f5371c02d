//! The datastore on a full file system: `k3rs server` runs on a small tmpfs the test mounts
//! (and unmounts, whatever happens), a filler file leaves a few MiB free, and the test writes
//! 256 KiB values until the disk is full.
//! - The write that finds the disk full fails with a clear gRPC status (Unavailable, naming
//!   the cause) within the client's timeout: it does not hang.
//! - The server stops by itself, exits non-zero and logs "the datastore cannot write;
//!   stopping: … No space left on device": no zombie keeps accepting connections.
//! - Once the filler is deleted, the restarted server has every acknowledged write with the
//!   revision it was acknowledged at, and takes writes again.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::client::{runtime, Clients};
use crate::common::K3rs;
use k3rs_datastore::etcdpb::{PutRequest, RangeRequest};

/// Size of the file system the data dir lives on.
const TMPFS_SIZE: &str = "64m";
/// Free space the filler leaves: enough to start, a handful of the writes below.
const HEADROOM: u64 = 3 << 20;
const VALUE_BYTES: usize = 256 << 10;
/// More than fits: the loop ends on the first failure long before.
const MAX_WRITES: usize = 400;
/// A write answered later than this counts as hanging.
const WRITE_TIMEOUT: Duration = Duration::from_secs(15);

/// A tmpfs mounted on a fresh temp dir; unmounted when dropped (also when the test fails).
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    fn mount(size: &str) -> Tmpfs {
        let dir = tempfile::Builder::new()
            .prefix("k3rs-test-tmpfs-")
            .tempdir()
            .expect("tempdir");
        let status = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0700"),
                "tmpfs",
            ])
            .arg(dir.path())
            .status()
            .expect("running mount");
        assert!(
            status.success(),
            "mount -t tmpfs failed (the test runs as root)"
        );
        Tmpfs { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Bytes an unprivileged writer can still allocate.
    fn available(&self) -> u64 {
        let out = Command::new("stat")
            .args(["-f", "--format=%a %S"])
            .arg(self.path())
            .output()
            .expect("running stat");
        let text = String::from_utf8_lossy(&out.stdout);
        let mut it = text.split_whitespace().map(|n| n.parse::<u64>().unwrap());
        it.next().unwrap() * it.next().unwrap()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let unmounted = Command::new("umount")
            .arg(self.path())
            .status()
            .is_ok_and(|s| s.success());
        if !unmounted {
            // Still busy (a process we could not stop): detach it now, gone once released.
            let _ = Command::new("umount").arg("-l").arg(self.path()).status();
        }
    }
}

/// Fills the file system of `tmpfs` but `HEADROOM` bytes with one file.
fn fill(tmpfs: &Tmpfs) -> PathBuf {
    let filler = tmpfs.path().join("filler");
    let len = tmpfs.available().saturating_sub(HEADROOM);
    let status = Command::new("fallocate")
        .args(["-l", &len.to_string()])
        .arg(&filler)
        .status()
        .expect("running fallocate");
    assert!(status.success(), "fallocate -l {len} {}", filler.display());
    filler
}

fn value(i: usize) -> Vec<u8> {
    let mut v = format!("value {i}:").into_bytes();
    v.resize(VALUE_BYTES, b'a' + (i % 26) as u8);
    v
}

#[test]
fn a_full_disk_fails_writes_clearly_stops_the_server_and_loses_no_acknowledged_write() {
    let tmpfs = Tmpfs::mount(TMPFS_SIZE);
    let data = tmpfs.path().join("data");
    let mut server = K3rs::start_on(
        &data,
        &[
            "--etcd-auto-compaction-retention",
            "0",
            "--etcd-disable-snapshots",
        ],
    );
    let rt = runtime();
    let mut acked: BTreeMap<Vec<u8>, (Vec<u8>, i64)> = BTreeMap::new();
    let mut c = rt.block_on(Clients::connect(&server.endpoint())).unwrap();
    let put = |c: &mut Clients, key: Vec<u8>, value: Vec<u8>| {
        rt.block_on(async {
            let req = PutRequest {
                key,
                value,
                ..Default::default()
            };
            tokio::time::timeout(WRITE_TIMEOUT, c.kv.put(req)).await
        })
    };
    for i in 0..20 {
        let (key, value) = (
            format!("small/{i:02}").into_bytes(),
            value(i)[..64].to_vec(),
        );
        let resp = put(&mut c, key.clone(), value.clone()).unwrap().unwrap();
        acked.insert(key, (value, resp.into_inner().header.unwrap().revision));
    }
    let filler = fill(&tmpfs);
    println!("left {} bytes free", tmpfs.available());

    let mut failed = None;
    for i in 0..MAX_WRITES {
        let (key, value) = (format!("big/{i:04}").into_bytes(), value(i));
        let started = Instant::now();
        match put(&mut c, key.clone(), value.clone()) {
            Ok(Ok(resp)) => {
                acked.insert(key, (value, resp.into_inner().header.unwrap().revision));
            }
            Ok(Err(status)) => {
                failed = Some((i, status, started.elapsed()));
                break;
            }
            Err(_) => panic!("write {i} hung on a full disk for {WRITE_TIMEOUT:?}"),
        }
    }
    let (i, status, took) = failed.expect("the disk never filled up");
    println!(
        "write {i} failed after {took:?}: {:?} {}",
        status.code(),
        status.message()
    );
    assert!(i > 0, "not even one write fit: {status:?}");
    assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
    assert!(
        status.message().contains("the datastore cannot write")
            || status.message().contains("server stopped"),
        "no clear error: {status:?}"
    );

    // Fail-stop: the process exits by itself, non-zero, saying why.
    let exit = server
        .wait_exit(Duration::from_secs(60))
        .unwrap_or_else(|| panic!("the server lingers on a full disk:\n{}", server.log()));
    assert!(!exit.success(), "{exit}");
    let log = server.log();
    let said = log
        .lines()
        .find(|l| l.contains("the datastore cannot write; stopping"))
        .unwrap_or_else(|| panic!("no clear message in the log:\n{log}"));
    assert!(
        said.contains("No space left on device"),
        "the cause is missing: {said}"
    );
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", server.port())).is_err(),
        "the etcd port still accepts connections"
    );

    // Space freed: every acknowledged write is there, and writes work again.
    std::fs::remove_file(&filler).unwrap();
    server.restart();
    let mut c = rt.block_on(Clients::connect(&server.endpoint())).unwrap();
    for (key, (value, revision)) in &acked {
        let kvs = rt
            .block_on(c.kv.range(RangeRequest {
                key: key.clone(),
                ..Default::default()
            }))
            .unwrap()
            .into_inner()
            .kvs;
        let name = String::from_utf8_lossy(key);
        assert_eq!(kvs.len(), 1, "acknowledged {name} is gone");
        assert!(kvs[0].value == *value, "{name} has another value");
        assert_eq!(kvs[0].mod_revision, *revision, "{name}");
    }
    println!("{} acknowledged writes intact", acked.len());
    let resp = put(&mut c, b"after".to_vec(), b"x".to_vec());
    assert!(matches!(resp, Ok(Ok(_))), "{resp:?}");
}
