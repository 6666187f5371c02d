//! A k3rs cluster of real `k3rs server` processes, each in its own network namespace of a
//! [`Lab`]: server `i` listens on `10.213.0.(10+i)` (etcd client port 2379, peers 2380, HTTPS
//! 6443); servers 2.. join server 1 by token.
//!
//! Guarantees:
//! - Every method that talks to a server must run on a thread inside the lab's hub namespace
//!   (see [`Lab::in_hub`]); the servers are reachable only from there.
//! - Dropping the cluster kills every server (SIGKILL, by PID) before the namespaces go.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use super::etcdctl::started_voters;
use super::etcdctl::{etcdctl_with_timeout, Endpoint, TlsFiles};
use super::netns::Lab;
use super::process::ChildGuard;
use super::wait_for;

pub const CLIENT_PORT: u16 = 2379;
pub const PEER_PORT: u16 = 2380;

/// One server: its namespace index, data dir, and process (when running).
#[derive(Debug)]
pub struct NsServer {
    pub index: usize,
    proc: Option<ChildGuard>,
    dir: tempfile::TempDir,
    addr: std::net::Ipv4Addr,
    netns: String,
    join_args: Vec<String>,
}

impl NsServer {
    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    pub fn tls_dir(&self) -> PathBuf {
        self.data_dir().join("server/tls/etcd")
    }

    pub fn log_path(&self) -> PathBuf {
        self.dir.path().join("k3rs.log")
    }

    pub fn client_url(&self) -> String {
        format!("https://{}:{CLIENT_PORT}", self.addr)
    }

    pub fn peer_url(&self) -> String {
        format!("https://{}:{PEER_PORT}", self.addr)
    }

    /// What joining servers pass as `--server` (the supervisor on the default HTTPS port).
    pub fn server_url(&self) -> String {
        format!("https://{}:6443", self.addr)
    }

    /// The server token (`K10<CA hash>::server:<secret>`).
    pub fn token(&self) -> String {
        std::fs::read_to_string(self.data_dir().join("server/token"))
            .expect("server token")
            .trim()
            .to_string()
    }

    /// The etcd endpoint with the client certificate this server wrote.
    pub fn endpoint(&self) -> Endpoint {
        let tls = self.tls_dir();
        Endpoint {
            url: self.client_url(),
            tls: Some(TlsFiles {
                ca: tls.join("server-ca.crt"),
                cert: Some(tls.join("client.crt")),
                key: Some(tls.join("client.key")),
            }),
        }
    }

    pub fn pid(&self) -> Option<u32> {
        self.proc.as_ref().and_then(ChildGuard::pid)
    }

    pub fn is_running(&self) -> bool {
        self.proc.is_some()
    }

    fn command(&self) -> Command {
        let mut cmd = Command::new(super::require_program("ip", "iproute2"));
        cmd.args(["netns", "exec", &self.netns])
            .arg(env!("CARGO_BIN_EXE_k3rs"))
            .arg("server")
            .arg("--data-dir")
            .arg(self.data_dir())
            .args(["--etcd-client-address", &self.addr.to_string()])
            .args(["--etcd-client-port", &CLIENT_PORT.to_string()])
            .args(["--etcd-peer-port", &PEER_PORT.to_string()])
            .args(["--node-ip", &self.addr.to_string()])
            .args([
                "--etcd-auto-compaction-retention",
                "0",
                "--disable-apiserver",
            ])
            .args(&self.join_args)
            .env_remove("K3RS_DATA_DIR")
            .env_remove("K3RS_ETCD_CLIENT_PORT");
        cmd
    }

    /// Starts the process (on its data dir) without waiting for it.
    pub fn spawn(&mut self) {
        assert!(self.proc.is_none(), "server {} already runs", self.index);
        let name = format!("k3rs server s{}", self.index);
        self.proc = Some(ChildGuard::spawn(&name, self.command(), &self.log_path()));
    }

    /// Waits until the server answers a linearizable read.
    pub fn wait_ready(&mut self) {
        let ep = self.endpoint();
        let key = self.tls_dir().join("client.key");
        let log = self.log_path();
        let proc = self.proc.as_mut().expect("started");
        wait_for("the server to answer", super::k3rs::START_TIMEOUT, || {
            if let Some(status) = proc.exited() {
                panic!(
                    "server exited ({status}); log tail:\n{}",
                    super::log_tail(&log, 40)
                );
            }
            let ready = key.exists()
                && etcdctl_with_timeout(&ep, &["get", "x"], None, Duration::from_secs(5)).success();
            ready.then_some(())
        });
    }

    /// SIGKILL (and reap).
    pub fn kill(&mut self) {
        if let Some(mut p) = self.proc.take() {
            p.kill();
        }
    }

    /// Sends `signal` ("STOP", "CONT", …) to the process.
    pub fn signal(&self, signal: &str) {
        self.proc.as_ref().expect("running").signal(signal);
    }

    pub fn assert_running(&mut self) {
        self.proc.as_mut().expect("started").assert_running();
    }

    pub fn log_tail(&self, n: usize) -> String {
        super::log_tail(&self.log_path(), n)
    }
}

/// `n` servers joined into one cluster, in the namespaces of `lab`.
#[derive(Debug)]
pub struct NsCluster {
    pub servers: Vec<NsServer>,
}

fn new_server(lab: &Lab, index: usize) -> NsServer {
    let dir = tempfile::Builder::new()
        .prefix("k3rs-ns-")
        .tempdir()
        .expect("tempdir");
    NsServer {
        index,
        proc: None,
        dir,
        addr: lab.addr(index),
        netns: lab.server(index),
        join_args: Vec::new(),
    }
}

impl NsCluster {
    /// Starts server 1, then joins servers 2..=n one at a time (each promoted to voter before
    /// the next joins). Must run inside the hub namespace.
    pub fn start(lab: &Lab, n: usize) -> NsCluster {
        let mut first = new_server(lab, 1);
        first.spawn();
        first.wait_ready();
        let mut servers = vec![first];
        for i in 2..=n {
            let mut s = new_server(lab, i);
            let ep1 = servers[0].endpoint();
            s.join_args = vec![
                "--server".into(),
                servers[0].server_url(),
                "--token".into(),
                servers[0].token(),
            ];
            s.spawn();
            s.wait_ready();
            wait_for(
                "the new member to be a voter",
                Duration::from_secs(60),
                || started_voters(&ep1, i),
            );
            servers.push(s);
        }
        NsCluster { servers }
    }

    pub fn server(&mut self, i: usize) -> &mut NsServer {
        &mut self.servers[i - 1]
    }

    pub fn endpoints(&self) -> Vec<Endpoint> {
        self.servers.iter().map(NsServer::endpoint).collect()
    }
}
