//! The real `k3rs server` binary in a temporary data dir.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use super::etcdctl::{etcdctl_with_timeout, Endpoint, TlsFiles};
use super::process::ChildGuard;

/// How long a (re)start may take before the test fails.
/// Server flags for suites that play the workload controllers themselves: no agent, no
/// scheduler (they see their pods exactly as written: no `PodScheduled` condition or
/// `FailedScheduling` event racing their updates), and only the controllers every API client
/// relies on (default service accounts, the root CA ConfigMaps, quota usage, namespace
/// deletion).
pub const AS_BARE_API: &[&str] = &[
    "--disable-agent",
    "--disable-scheduler",
    "--kube-controller-manager-arg=controllers=serviceaccount,root-ca-cert-publisher,resourcequota,namespace",
];

pub const START_TIMEOUT: Duration = Duration::from_secs(60);

/// Put among a server's extra args: run it with its embedded agent (no `--disable-agent`).
pub const WITH_AGENT: &str = "<with the embedded agent>";

/// The kubelet args every test node gets first (a test's own come after and win): the test
/// machine's disk may be nearly full, so disk eviction and image garbage collection are off
/// (as kind configures its nodes), memory eviction keeps upstream's default. The disk
/// pressure tests set their own thresholds.
pub const TEST_NODE_KUBELET_ARGS: [&str; 4] = [
    "--kubelet-arg",
    "eviction-hard=memory.available<100Mi",
    "--kubelet-arg",
    "image-gc-high-threshold=100",
];

/// A running `k3rs server`. Killed (SIGKILL) when dropped; its temp dir is removed then.
#[derive(Debug)]
pub struct K3rs {
    // Field order matters: the process dies before its directory is removed.
    proc: Option<ChildGuard>,
    dir: tempfile::TempDir,
    port: u16,
    extra_args: Vec<String>,
    /// The Kubernetes API port; `None` runs with `--disable-apiserver` (datastore only).
    api_port: Option<u16>,
    /// The HTTPS port (the API's when it runs; else the supervisor's alone).
    https_port: u16,
    /// Extra environment of the server process (on every start), e.g. `NOTIFY_SOCKET`; the
    /// test process's own environment is never changed.
    env: Vec<(OsString, OsString)>,
    /// `--data-dir` when the test provides it (e.g. on a file system it mounted); else
    /// `<temp dir>/data`.
    data_dir: Option<PathBuf>,
}

/// A fresh `k3rs-test-*` temporary directory.
fn scratch_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("k3rs-test-")
        .tempdir()
        .expect("tempdir")
}

impl Drop for K3rs {
    /// The embedded agent's containerd-shims outlive the server (the test's `NodeLab` stops
    /// them later) and keep their pods' rootfs and `/dev/shm` mounted under the data dir:
    /// the server dies first, then those mounts are detached, so the directory can go.
    fn drop(&mut self) {
        self.proc = None;
        super::mounts::unmount_under(&self.data_dir().join("agent"));
    }
}

impl K3rs {
    /// Starts `k3rs server` on a free loopback port with automatic compaction off (like etcd's
    /// default), and waits until it answers etcdctl.
    pub fn start() -> K3rs {
        K3rs::start_with(&["--etcd-auto-compaction-retention", "0"])
    }

    /// Starts with extra `k3rs server` flags.
    pub fn start_with(extra_args: &[&str]) -> K3rs {
        K3rs::launch(extra_args, None, &[], None)
    }

    /// Like [`K3rs::start_with`], with more environment variables (e.g. `K3RS_LOG`).
    pub fn start_with_env(extra_args: &[&str], env: &[(&str, &OsStr)]) -> K3rs {
        K3rs::launch(extra_args, None, env, None)
    }

    /// [`K3rs::start_with`] with `--data-dir data_dir`, a directory the test owns (e.g. on a
    /// small file system it mounted); the log stays in the server's temp dir.
    pub fn start_on(data_dir: &Path, extra_args: &[&str]) -> K3rs {
        K3rs::launch(extra_args, None, &[], Some(data_dir.to_path_buf()))
    }

    /// [`K3rs::start_kubernetes_with_env`] with `--data-dir data_dir`, a directory the test
    /// owns (e.g. on a small file system it mounted).
    pub fn start_kubernetes_on(
        data_dir: &Path,
        extra_args: &[&str],
        env: &[(&str, &OsStr)],
    ) -> K3rs {
        let port = Some(super::free_port());
        K3rs::launch(extra_args, port, env, Some(data_dir.to_path_buf()))
    }

    /// Starts with the Kubernetes API on a free loopback port (kubeconfig in the temp dir),
    /// and waits until the datastore answers.
    pub fn start_kubernetes(extra_args: &[&str]) -> K3rs {
        K3rs::start_kubernetes_with_env(extra_args, &[])
    }

    /// [`K3rs::start_kubernetes`] with `env` added to the server's environment (kept for
    /// restarts).
    pub fn start_kubernetes_with_env(extra_args: &[&str], env: &[(&str, &OsStr)]) -> K3rs {
        K3rs::launch(extra_args, Some(super::free_port()), env, None)
    }

    fn launch(
        extra_args: &[&str],
        api_port: Option<u16>,
        env: &[(&str, &OsStr)],
        data_dir: Option<PathBuf>,
    ) -> K3rs {
        let dir = scratch_dir();
        let mut k = K3rs {
            proc: None,
            dir,
            port: super::free_port(),
            extra_args: extra_args.iter().map(|s| s.to_string()).collect(),
            https_port: api_port.unwrap_or_else(super::free_port),
            api_port,
            env: env.iter().map(|(k, v)| (k.into(), v.into())).collect(),
            data_dir,
        };
        // A port picked free can be taken by someone else before the server binds it: then
        // pick new ones and start again (the data dir is still fresh).
        for attempt in 1.. {
            k.spawn();
            match k.try_wait_ready() {
                Ok(()) => break,
                Err(e) if attempt < 4 && e.contains("in use") => {
                    k.kill();
                    let _ = std::fs::remove_dir_all(k.data_dir());
                    k.port = super::free_port();
                    k.https_port = super::free_port();
                    k.api_port = k.api_port.map(|_| k.https_port);
                }
                Err(e) => panic!("{e}"),
            }
        }
        k
    }

    /// The admin kubeconfig written by a server started with [`K3rs::start_kubernetes`].
    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.path().join("kubeconfig.yaml")
    }

    pub fn api_port(&self) -> Option<u16> {
        self.api_port
    }

    /// The HTTPS port: the API server's, or the supervisor's alone with `--disable-apiserver`.
    pub fn https_port(&self) -> u16 {
        self.https_port
    }

    /// What other servers pass as `--server` to join this one.
    pub fn server_url(&self) -> String {
        format!("https://127.0.0.1:{}", self.https_port)
    }

    /// The server token (`K10<CA hash>::server:<secret>`).
    pub fn token(&self) -> String {
        std::fs::read_to_string(self.data_dir().join("server/token"))
            .expect("server token")
            .trim()
            .to_string()
    }

    /// Starts a server that joins `cluster` with `token` (and `extra_args`), and waits until
    /// it answers etcdctl.
    pub fn join(cluster: &K3rs, token: &str, extra_args: &[&str]) -> K3rs {
        let url = cluster.server_url();
        let mut args = vec!["--server", url.as_str(), "--token", token];
        args.extend_from_slice(extra_args);
        K3rs::start_with(&args)
    }

    /// Starts `n` servers (datastore only) joined by token into one cluster, each with its own
    /// peer port, `extra_args` and `env`, and waits until the first lists `n` started voters.
    pub fn start_cluster(n: usize, extra_args: &[&str], env: &[(&str, &OsStr)]) -> Vec<K3rs> {
        let mut servers: Vec<K3rs> = Vec::new();
        let mut token = String::new();
        for i in 0..n {
            let peer_port = super::free_port().to_string();
            let mut args = vec!["--etcd-peer-port", peer_port.as_str()];
            args.extend_from_slice(extra_args);
            let url = servers.first().map(K3rs::server_url).unwrap_or_default();
            if i > 0 {
                args.extend(["--server", url.as_str(), "--token", token.as_str()]);
            }
            servers.push(K3rs::launch(&args, None, env, None));
            if i == 0 {
                token = servers[0].token();
            }
            let ep = servers[0].endpoint();
            super::wait_for("started voters", Duration::from_secs(60), || {
                super::etcdctl::started_voters(&ep, i + 1)
            });
        }
        servers
    }

    /// [`K3rs::join`] with the Kubernetes API on a free loopback port.
    pub fn join_kubernetes(cluster: &K3rs, token: &str, extra_args: &[&str]) -> K3rs {
        let url = cluster.server_url();
        let mut args = vec!["--server", url.as_str(), "--token", token];
        args.extend_from_slice(extra_args);
        K3rs::start_kubernetes(&args)
    }

    /// Runs `k3rs server` with `extra_args` on a fresh data dir and waits (up to `timeout`)
    /// for it to exit by itself, for servers that must refuse to start. Returns the exit
    /// status (`None`: still running after `timeout`, then killed) and the log.
    pub fn run_to_exit(
        extra_args: &[&str],
        timeout: Duration,
    ) -> (Option<std::process::ExitStatus>, String, tempfile::TempDir) {
        K3rs::run_to_exit_with_env(extra_args, &[], timeout)
    }

    /// [`K3rs::run_to_exit`] with `env` set for the server.
    pub fn run_to_exit_with_env(
        extra_args: &[&str],
        env: &[(&str, &OsStr)],
        timeout: Duration,
    ) -> (Option<std::process::ExitStatus>, String, tempfile::TempDir) {
        let mut k = K3rs {
            proc: None,
            dir: scratch_dir(),
            port: super::free_port(),
            extra_args: extra_args.iter().map(|s| s.to_string()).collect(),
            api_port: None,
            https_port: super::free_port(),
            env: env.iter().map(|(k, v)| (k.into(), v.into())).collect(),
            data_dir: None,
        };
        k.spawn();
        let status = k.proc.take().and_then(|mut p| p.wait_exit(timeout));
        let log = k.log();
        // `K3rs` cleans up on drop, so the directory is taken out in exchange for an empty one.
        let dir = std::mem::replace(&mut k.dir, scratch_dir());
        (status, log, dir)
    }

    /// Stops the server and runs it once more with `extra_args` added (e.g.
    /// `--cluster-reset`), waiting up to `timeout` for it to exit by itself.
    pub fn run_once_with(
        &mut self,
        extra_args: &[&str],
        timeout: Duration,
    ) -> Option<std::process::ExitStatus> {
        self.kill();
        let kept = self.extra_args.clone();
        self.extra_args
            .extend(extra_args.iter().map(|s| s.to_string()));
        self.spawn();
        self.extra_args = kept;
        self.proc.take().and_then(|mut p| p.wait_exit(timeout))
    }

    /// Waits up to `timeout` for the server to exit by itself (e.g. after it was removed
    /// from its cluster).
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        self.proc.take().and_then(|mut p| p.wait_exit(timeout))
    }

    /// `--data-dir` of this server.
    pub fn data_dir(&self) -> PathBuf {
        self.data_dir
            .clone()
            .unwrap_or_else(|| self.dir.path().join("data"))
    }

    pub fn log_path(&self) -> PathBuf {
        self.dir.path().join("k3rs.log")
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn pid(&self) -> Option<u32> {
        self.proc.as_ref().and_then(ChildGuard::pid)
    }

    /// `<data-dir>/server/tls/etcd/`, where the etcdctl client certificate lives.
    pub fn etcd_tls_dir(&self) -> PathBuf {
        self.data_dir().join("server/tls/etcd")
    }

    /// The etcd endpoint with the client certificate k3rs wrote for etcdctl.
    pub fn endpoint(&self) -> Endpoint {
        let tls = self.etcd_tls_dir();
        Endpoint {
            url: format!("https://127.0.0.1:{}", self.port),
            tls: Some(TlsFiles {
                ca: tls.join("server-ca.crt"),
                cert: Some(tls.join("client.crt")),
                key: Some(tls.join("client.key")),
            }),
        }
    }

    /// Adds `arg` (one argument) to the next starts.
    pub fn add_arg(&mut self, arg: &str) {
        self.extra_args.push(arg.to_string());
    }

    /// Leaves flag `arg` (one exact argument) out of the next starts.
    pub fn remove_arg(&mut self, arg: &str) {
        self.extra_args.retain(|a| a != arg);
    }

    /// Starts the server process again (on the same data dir and port) without waiting.
    pub fn relaunch(&mut self) {
        self.kill();
        self.spawn();
    }

    fn spawn(&mut self) {
        let mut cmd = Command::new(super::k3rs_binary());
        cmd.arg("server")
            .arg("--data-dir")
            .arg(self.data_dir())
            .arg("--etcd-client-port")
            .arg(self.port.to_string())
            .arg("--etcd-client-address")
            .arg("127.0.0.1");
        if self.extra_args.iter().any(|a| a == WITH_AGENT) {
            cmd.args(TEST_NODE_KUBELET_ARGS);
        }
        cmd.args(self.extra_args.iter().filter(|a| *a != WITH_AGENT))
            .args(self.api_args())
            .args(["--https-listen-port", &self.https_port.to_string()])
            .env_remove("K3RS_DATA_DIR")
            .env_remove("K3RS_ETCD_CLIENT_PORT")
            // Never the machine's /etc/k3rs/config.yaml: only the flags the test gives.
            .env("K3RS_CONFIG_FILE", "/dev/null")
            .envs(self.env.iter().map(|(k, v)| (k, v)));
        // Loopback only, unless the test (in a namespace of its own) asks for another address.
        if !self.extra_args.iter().any(|a| a == "--bind-address") {
            cmd.args(["--bind-address", "127.0.0.1"]);
        }
        if !self.extra_args.iter().any(|a| a == WITH_AGENT) {
            // The embedded agent runs containers and writes iptables rules: only tests in a
            // network namespace of their own ask for it.
            cmd.arg("--disable-agent");
        }
        self.proc = Some(ChildGuard::spawn("k3rs server", cmd, &self.log_path()));
    }

    fn api_args(&self) -> Vec<String> {
        let mut args = match self.api_port {
            None => vec!["--disable-apiserver".into()],
            Some(_) => vec![
                "--write-kubeconfig".into(),
                self.kubeconfig().display().to_string(),
            ],
        };
        // Loopback only: peers reach each other at 127.0.0.1.
        if !self.extra_args.iter().any(|a| a == "--node-ip") {
            args.extend(["--node-ip".into(), "127.0.0.1".into()]);
        }
        args
    }

    /// With `--datastore-endpoint` the server serves no etcd API: waits for the kubeconfig.
    fn wait_kubeconfig(&mut self) {
        let path = self.kubeconfig();
        let proc = self.proc.as_mut().expect("started");
        let deadline = std::time::Instant::now() + START_TIMEOUT;
        while !path.exists() {
            proc.assert_running();
            assert!(
                std::time::Instant::now() < deadline,
                "no kubeconfig after {START_TIMEOUT:?}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits until the client certificate exists and a read through etcdctl succeeds.
    pub fn wait_ready(&mut self) {
        if let Err(e) = self.try_wait_ready() {
            panic!("{e}");
        }
    }

    /// Like [`K3rs::wait_ready`], but says why the server did not become ready.
    fn try_wait_ready(&mut self) -> Result<(), String> {
        if self.extra_args.iter().any(|a| a == "--datastore-endpoint") {
            self.wait_kubeconfig();
            return Ok(());
        }
        let ep = self.endpoint();
        let cert = self.etcd_tls_dir().join("client.key");
        let log = self.log_path();
        let proc = self.proc.as_mut().expect("started");
        let mut last = String::new();
        let deadline = std::time::Instant::now() + START_TIMEOUT;
        loop {
            if let Some(status) = proc.exited() {
                return Err(format!(
                    "k3rs server exited before it was ready ({status}); log tail:\n{}",
                    super::log_tail(&log, 40)
                ));
            }
            if cert.exists() {
                let args = [
                    "get",
                    "--dial-timeout=1s",
                    "--command-timeout=2s",
                    "k3rs-test-ready",
                ];
                let out = etcdctl_with_timeout(&ep, &args, None, Duration::from_secs(5));
                if out.success() {
                    return Ok(());
                }
                last = format!("{out:?}");
            }
            if std::time::Instant::now() > deadline {
                return Err(format!(
                    "k3rs server not ready after {START_TIMEOUT:?}; last etcdctl: {last}\n\
                     log tail:\n{}",
                    super::log_tail(&log, 40)
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Panics (with the log) if the server process has exited.
    pub fn assert_running(&mut self) {
        self.proc.as_mut().expect("started").assert_running();
    }

    /// SIGKILL, like a power cut for the process.
    pub fn kill(&mut self) {
        if let Some(mut p) = self.proc.take() {
            p.kill();
        }
    }

    /// SIGTERM and wait; returns the exit status if it exited by itself within `grace`.
    pub fn terminate(&mut self, grace: Duration) -> Option<std::process::ExitStatus> {
        self.proc.take().and_then(|mut p| p.terminate(grace))
    }

    /// Sends `signal` ("TERM", "INT", ...) and waits up to `grace` for the exit (SIGKILL after).
    pub fn stop_with(&mut self, signal: &str, grace: Duration) -> Option<std::process::ExitStatus> {
        let mut p = self.proc.take()?;
        p.signal(signal);
        p.wait_exit(grace)
    }

    /// Starts the server again on the same data dir and port, and waits until it answers.
    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
        self.wait_ready();
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}
