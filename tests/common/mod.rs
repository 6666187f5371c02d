//! Helpers shared by the end-to-end tests (and the `etcd_compare` benchmark): start the real
//! `k3rs server` and a real etcd 3.4 on loopback, and drive them with `etcdctl`.
//!
//! Guarantees:
//! - Every address is on 127.0.0.1; ports are picked free by the kernel.
//! - Every process is started by us and killed by its PID when its guard drops.
//! - A missing `etcd`/`etcdctl`/`openssl` binary is a test failure, never a skip.
#![allow(dead_code)]

pub mod audit_log;
pub mod check_perf;
pub mod client;
pub mod etcd;
pub mod etcdctl;
pub mod hollow;
pub mod https;
pub mod jwt;
pub mod k3rs;
pub mod kinds;
pub mod kube;
pub mod kubectl;
pub mod kv_load;
pub mod mounts;
pub mod narrowing;
pub mod netns;
pub mod node_lab;
pub mod ns_cluster;
pub mod process;
pub mod stats;
pub mod tls_server;
pub mod two_node_lab;
pub mod users;
pub mod workload;

use std::collections::HashSet;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

#[allow(unused_imports)]
pub use etcd::Etcd;

/// The `k3rs` binary to start: `K3RS_BINARY` when set (a benchmark comparing two builds
/// back to back), else the one cargo built with the tests.
pub fn k3rs_binary() -> std::ffi::OsString {
    std::env::var_os("K3RS_BINARY").unwrap_or_else(|| env!("CARGO_BIN_EXE_k3rs").into())
}
#[allow(unused_imports)]
pub use etcdctl::{etcdctl, CtlOutput, Endpoint, TlsFiles};
#[allow(unused_imports)]
pub use k3rs::K3rs;

/// Ports handed out in this process, so two tests running in parallel never pick the same one.
static HANDED_OUT: Mutex<Option<HashSet<u16>>> = Mutex::new(None);

/// A loopback TCP port nobody listens on right now (and that we have not handed out before).
pub fn free_port() -> u16 {
    for _ in 0..100 {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let port = listener.local_addr().expect("local_addr").port();
        drop(listener);
        let mut seen = HANDED_OUT.lock().unwrap();
        if seen.get_or_insert_with(HashSet::new).insert(port) {
            return port;
        }
    }
    panic!("no free loopback port after 100 tries");
}

/// `name`'s path on the PATH, if any.
pub fn find_program(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

/// The absolute path of a required external program (a name looked up in PATH, or an absolute
/// path); panics (fails the test) if it is missing.
pub fn require_program(name: &str, apt_package: &str) -> PathBuf {
    if name.starts_with('/') {
        assert!(
            Path::new(name).exists(),
            "{name} is missing: install it (apt-get install {apt_package}); \
             ./scripts/test.sh does this for you"
        );
        return PathBuf::from(name);
    }
    find_program(name).unwrap_or_else(|| {
        panic!(
            "`{name}` not found in PATH: install it (apt-get install {apt_package}); \
             ./scripts/test.sh does this for you"
        )
    })
}

/// Polls `check` every 50 ms until it returns `Some`, or panics with `what` after `timeout`.
pub fn wait_for<T>(what: &str, timeout: Duration, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Bytes a directory tree occupies on disk (allocated blocks, like `du`).
pub fn disk_usage(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let mut total = 0;
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    for entry in entries.flatten() {
        let Ok(meta) = entry.metadata() else { continue };
        if meta.is_dir() {
            total += disk_usage(&entry.path());
        } else {
            total += meta.blocks() * 512;
        }
    }
    total
}

/// The last `n` lines of a log file, for failure messages.
pub fn log_tail(path: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}
