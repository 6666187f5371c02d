//! A real etcd 3.4 (Debian `etcd-server`) as the reference: on loopback, durable (default fsync
//! behaviour, no unsafe flags), in its own temp dir; plain http, or https with client
//! certificates required ([`Etcd::start_tls`]).

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use super::etcdctl::{etcdctl_with_timeout, Endpoint, TlsFiles};
use super::process::ChildGuard;

/// A running etcd member (of a cluster of one unless made by [`Etcd::start_cluster`]). Killed
/// (SIGKILL) when dropped; its temp dir is removed then.
#[derive(Debug)]
pub struct Etcd {
    proc: Option<ChildGuard>,
    dir: tempfile::TempDir,
    client_port: u16,
    peer_port: u16,
    /// `--name`.
    name: String,
    /// `--initial-cluster`, when the member is one of several (`None`: itself alone).
    initial_cluster: Option<String>,
    /// `Some` serves the client port over https and requires a client certificate.
    tls: Option<EtcdPki>,
    /// Mutual TLS between peers too (members of a [`Etcd::start_cluster_tls`] cluster).
    peer_tls: bool,
    /// More flags for etcd (e.g. `--quota-backend-bytes`).
    extra_args: Vec<String>,
}

/// The certificates of a TLS etcd: a serving certificate for 127.0.0.1 and a client
/// certificate, both from one CA (made with k3rs' own PKI code in the etcd's temp dir).
#[derive(Debug, Clone)]
struct EtcdPki {
    ca: PathBuf,
    serving: (PathBuf, PathBuf),
    client: (PathBuf, PathBuf),
    /// The peer CA and the peer certificate (server and client use), for members of a cluster.
    peer_ca: PathBuf,
    peer: (PathBuf, PathBuf),
}

impl EtcdPki {
    /// Certificates made with k3rs' PKI code in `dir`.
    fn make(dir: &std::path::Path) -> EtcdPki {
        let pki = k3rs_pki::Pki::ensure(dir, &Default::default())
            .expect("generating etcd test certificates");
        let etcd = pki.tls_dir().join("etcd");
        EtcdPki {
            ca: pki.etcd_server_ca_cert(),
            serving: pki.etcd_serving_cert(),
            client: pki.etcd_client_cert(),
            peer_ca: etcd.join("peer-ca.crt"),
            peer: (
                etcd.join("peer-server-client.crt"),
                etcd.join("peer-server-client.key"),
            ),
        }
    }
}

impl Etcd {
    /// Plain http on loopback.
    pub fn start() -> Etcd {
        Etcd::launch(false, &[])
    }

    /// Plain http on loopback, with more flags.
    pub fn start_with(extra_args: &[&str]) -> Etcd {
        Etcd::launch(false, extra_args)
    }

    /// https on loopback with `--client-cert-auth`: clients need [`Etcd::client_tls`].
    pub fn start_tls() -> Etcd {
        Etcd::launch(true, &[])
    }

    /// `n` plain-http members on loopback forming one cluster, each ready to serve.
    pub fn start_cluster(n: usize) -> Vec<Etcd> {
        Etcd::cluster(n, false)
    }

    /// `n` members on loopback forming one cluster, with https and client certificates
    /// required on the client port and mutual TLS between peers (one CA set for all).
    pub fn start_cluster_tls(n: usize) -> Vec<Etcd> {
        Etcd::cluster(n, true)
    }

    fn cluster(n: usize, tls: bool) -> Vec<Etcd> {
        let mut members: Vec<Etcd> = (0..n).map(|i| Etcd::unstarted(format!("m{i}"))).collect();
        if tls {
            let pki = EtcdPki::make(&members[0].dir.path().join("pki"));
            for m in &mut members {
                m.tls = Some(pki.clone());
                m.peer_tls = true;
            }
        }
        let initial = members
            .iter()
            .map(|m| format!("{}={}", m.name, m.peer_url()))
            .collect::<Vec<_>>()
            .join(",");
        for m in &mut members {
            m.initial_cluster = Some(initial.clone());
            m.spawn();
        }
        for m in &mut members {
            m.wait_ready();
        }
        members
    }

    /// A member started on what `etcdctl snapshot restore` makes of `snapshot` (restored with
    /// this member's name and peer URL, as etcd's docs do it).
    pub fn restore_and_start(snapshot: &std::path::Path) -> Etcd {
        let mut e = Etcd::unstarted("default".into());
        let peer = format!("http://127.0.0.1:{}", e.peer_port);
        let data_dir = e.data_dir();
        let restore = [
            "snapshot",
            "restore",
            snapshot.to_str().expect("utf-8 path"),
            "--data-dir",
            data_dir.to_str().expect("utf-8 path"),
            "--name",
            &e.name,
            "--initial-cluster",
            &format!("{}={peer}", e.name),
            "--initial-advertise-peer-urls",
            &peer,
        ];
        let out = etcdctl_with_timeout(&e.endpoint(), &restore, None, Duration::from_secs(60));
        assert!(out.success(), "etcdctl snapshot restore failed: {out:?}");
        e.spawn();
        e.wait_ready();
        e
    }

    /// SIGKILL, like a power cut for the process.
    pub fn kill(&mut self) {
        if let Some(mut p) = self.proc.take() {
            p.kill();
        }
    }

    fn unstarted(name: String) -> Etcd {
        let dir = tempfile::Builder::new()
            .prefix("etcd-ref-")
            .tempdir()
            .expect("tempdir");
        Etcd {
            proc: None,
            dir,
            client_port: super::free_port(),
            peer_port: super::free_port(),
            name,
            initial_cluster: None,
            tls: None,
            peer_tls: false,
            extra_args: Vec::new(),
        }
    }

    fn launch(tls: bool, extra_args: &[&str]) -> Etcd {
        let mut e = Etcd::unstarted("default".into());
        e.extra_args = extra_args.iter().map(|a| a.to_string()).collect();
        if tls {
            e.tls = Some(EtcdPki::make(&e.dir.path().join("pki")));
        }
        // A port picked free can be taken by someone else before etcd binds it: then pick new
        // ones and start again.
        for attempt in 1.. {
            e.spawn();
            match e.try_wait_ready() {
                Ok(()) => break,
                Err(err) if attempt < 4 && err.contains("in use") => {
                    e.kill();
                    e.client_port = super::free_port();
                    e.peer_port = super::free_port();
                    let _ = std::fs::remove_dir_all(e.data_dir());
                }
                Err(err) => panic!("{err}"),
            }
        }
        e
    }

    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    pub fn log_path(&self) -> PathBuf {
        self.dir.path().join("etcd.log")
    }

    pub fn endpoint(&self) -> Endpoint {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        Endpoint {
            url: format!("{scheme}://127.0.0.1:{}", self.client_port),
            tls: self.client_tls(),
        }
    }

    /// The CA and client certificate a client of a [`Etcd::start_tls`] etcd needs.
    pub fn client_tls(&self) -> Option<TlsFiles> {
        self.tls.as_ref().map(|t| TlsFiles {
            ca: t.ca.clone(),
            cert: Some(t.client.0.clone()),
            key: Some(t.client.1.clone()),
        })
    }

    /// The peer URL: https between the members of a TLS cluster.
    fn peer_url(&self) -> String {
        let scheme = if self.peer_tls { "https" } else { "http" };
        format!("{scheme}://127.0.0.1:{}", self.peer_port)
    }

    fn spawn(&mut self) {
        let bin = super::require_program("etcd", "etcd-server");
        let client = self.endpoint().url;
        let peer = self.peer_url();
        let mut cmd = Command::new(bin);
        for (var, _) in std::env::vars() {
            if var.starts_with("ETCD_") {
                cmd.env_remove(var);
            }
        }
        let initial = (self.initial_cluster.clone()).unwrap_or(format!("{}={peer}", self.name));
        cmd.arg("--name")
            .arg(&self.name)
            .arg("--data-dir")
            .arg(self.data_dir())
            .arg("--listen-client-urls")
            .arg(&client)
            .arg("--advertise-client-urls")
            .arg(&client)
            .arg("--listen-peer-urls")
            .arg(&peer)
            .arg("--initial-advertise-peer-urls")
            .arg(&peer)
            .arg("--initial-cluster")
            .arg(initial)
            .arg("--initial-cluster-state")
            .arg("new")
            .arg("--logger")
            .arg("zap")
            .arg("--log-outputs")
            .arg("stderr")
            .args(&self.extra_args);
        if let Some(t) = &self.tls {
            mtls_flags(&mut cmd, "", &t.serving, &t.ca);
            if self.peer_tls {
                mtls_flags(&mut cmd, "peer-", &t.peer, &t.peer_ca);
            }
        }
        self.proc = Some(ChildGuard::spawn("etcd", cmd, &self.log_path()));
    }

    fn wait_ready(&mut self) {
        if let Err(e) = self.try_wait_ready() {
            panic!("{e}");
        }
    }

    fn try_wait_ready(&mut self) -> Result<(), String> {
        let ep = self.endpoint();
        let log = self.log_path();
        let proc = self.proc.as_mut().expect("started");
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = proc.exited() {
                return Err(format!(
                    "etcd exited before it was ready ({status}); log tail:\n{}",
                    super::log_tail(&log, 20)
                ));
            }
            let args = [
                "get",
                "--dial-timeout=1s",
                "--command-timeout=2s",
                "etcd-ref-ready",
            ];
            let out = etcdctl_with_timeout(&ep, &args, None, Duration::from_secs(5));
            if out.success() {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!("etcd not ready after 60s: {out:?}"));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// SIGKILLs etcd and starts it again on the same data dir and ports.
    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
        self.wait_ready();
    }

    pub fn assert_running(&mut self) {
        self.proc.as_mut().expect("started").assert_running();
    }
}

/// etcd's flags for one mutually authenticated TLS listener: `--<prefix>cert-file`,
/// `--<prefix>key-file`, `--<prefix>trusted-ca-file` and `--<prefix>client-cert-auth`
/// (`prefix` is `""` for clients, `"peer-"` for peers).
fn mtls_flags(
    cmd: &mut Command,
    prefix: &str,
    (cert, key): &(PathBuf, PathBuf),
    ca: &std::path::Path,
) {
    cmd.arg(format!("--{prefix}cert-file"))
        .arg(cert)
        .arg(format!("--{prefix}key-file"))
        .arg(key)
        .arg(format!("--{prefix}trusted-ca-file"))
        .arg(ca)
        .arg(format!("--{prefix}client-cert-auth"));
}
