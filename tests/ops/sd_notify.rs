//! systemd's readiness protocol (`Type=notify`) with the real binary: each test binds its own
//! unix datagram socket, passes it as `NOTIFY_SOCKET`, and checks what arrives.
//! - `k3rs server` sends `STATUS=` progress while it starts, `READY=1` (with a `STATUS=`
//!   line) once the API server answers `/readyz`, and `STOPPING=1` when SIGTERM stops it. Its socket is an abstract one (`@…`).
//! - `k3rs agent` sends `READY=1` once its Node is registered. Its socket is a path.

use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::process::Command;
use std::time::Duration;

use crate::common;
use crate::common::kubectl::Kubectl;
use crate::common::process::ChildGuard;

/// Waits (bounded) for the next datagram on `sock`.
fn receive(sock: &UnixDatagram, what: &str) -> String {
    sock.set_read_timeout(Some(Duration::from_secs(90)))
        .unwrap();
    let mut buf = [0u8; 4096];
    let n = sock
        .recv(&mut buf)
        .unwrap_or_else(|e| panic!("no {what} notification within 90 s: {e}"));
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

/// Every datagram up to and including the first that starts with `first_line`.
fn receive_until(sock: &UnixDatagram, first_line: &str) -> Vec<String> {
    let mut got = Vec::new();
    for _ in 0..50 {
        let msg = receive(sock, first_line);
        let done = msg.starts_with(first_line);
        got.push(msg);
        if done {
            return got;
        }
    }
    panic!("no {first_line} among the first 50 notifications: {got:?}");
}

#[test]
fn server_notifies_ready_after_readyz_and_stopping_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let name = format!(
        "k3rs-test-notify-{}-{}",
        std::process::id(),
        common::free_port()
    );
    let sock =
        UnixDatagram::bind_addr(&SocketAddr::from_abstract_name(name.as_bytes()).unwrap()).unwrap();
    let (api, etcd, peer) = (
        common::free_port(),
        common::free_port(),
        common::free_port(),
    );
    let data = dir.path().join("data");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_k3rs"));
    cmd.arg("server")
        .arg("--data-dir")
        .arg(&data)
        .args([
            "--etcd-client-address",
            "127.0.0.1",
            "--node-ip",
            "127.0.0.1",
        ])
        .args(["--etcd-client-port", &etcd.to_string()])
        .args(["--etcd-peer-port", &peer.to_string()])
        .args(["--https-listen-port", &api.to_string()])
        // In the machine's own network namespace: no embedded agent (containers, iptables).
        .arg("--disable-agent")
        .args(["--bind-address", "127.0.0.1", "--write-kubeconfig"])
        .arg(dir.path().join("kubeconfig.yaml"))
        .env_remove("K3RS_DATA_DIR")
        .env("K3RS_CONFIG_FILE", "/dev/null")
        .env("NOTIFY_SOCKET", format!("@{name}"));
    let mut server = ChildGuard::spawn("k3rs server", cmd, &dir.path().join("server.log"));

    // Progress first (systemctl status shows each line while the unit starts), then READY.
    let mut sent = receive_until(&sock, "READY=1");
    let ready = sent.pop().unwrap();
    assert_eq!(
        ready.lines().collect::<Vec<_>>(),
        ["READY=1", "STATUS=API server ready"],
        "{ready:?}"
    );
    assert_eq!(
        sent,
        [
            "STATUS=starting: certificates and datastore",
            "STATUS=datastore started; starting the Kubernetes API",
            "STATUS=waiting for the Kubernetes API to be ready",
        ],
        "the progress before READY"
    );
    // Sent only once the API server answers: /readyz is 200 the moment it arrives.
    let (code, body) = common::https::request(
        "GET",
        &format!("https://127.0.0.1:{api}/readyz"),
        &data.join("server/tls/server-ca.crt"),
        None,
    );
    assert_eq!((code, body.as_str()), (200, "ok"));

    server.signal("TERM");
    let stopping = receive(&sock, "STOPPING");
    assert_eq!(
        stopping.lines().collect::<Vec<_>>(),
        ["STOPPING=1", "STATUS=shutting down"],
        "{stopping:?}"
    );
    assert!(
        server.wait_exit(Duration::from_secs(60)).is_some(),
        "the server did not exit after SIGTERM"
    );
}

#[test]
fn agent_notifies_ready_once_its_node_is_registered() {
    let (server, admin) = Kubectl::start_server(&["--disable-agent"]);
    let work = tempfile::tempdir().unwrap();
    let path = work.path().join("notify.sock");
    let sock = UnixDatagram::bind(&path).unwrap();
    let token = std::fs::read_to_string(server.data_dir().join("server/agent-token")).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_k3rs"));
    cmd.arg("agent")
        .arg("--server")
        .arg(format!("https://127.0.0.1:{}", server.https_port()))
        .args(["--token", token.trim(), "--node-name", "notify-1"])
        .args(["--node-ip", "10.99.0.7", "--data-dir"])
        .arg(work.path().join("agent"))
        // No containerd answers here: the node registers NotReady, which is enough.
        .arg("--container-runtime-endpoint")
        .arg(format!(
            "unix://{}",
            work.path().join("none.sock").display()
        ))
        // In the machine's own network namespace: no iptables rules.
        .arg("--disable-kube-proxy")
        .env_remove("K3RS_TOKEN")
        .env_remove("K3RS_URL")
        .env("K3RS_CONFIG_FILE", "/dev/null")
        .env("NOTIFY_SOCKET", &path);
    let _agent = ChildGuard::spawn("k3rs agent", cmd, &work.path().join("agent.log"));

    let ready = receive(&sock, "READY");
    assert_eq!(
        ready.lines().collect::<Vec<_>>(),
        ["READY=1", "STATUS=node notify-1 registered"],
        "{ready:?}"
    );
    // Sent after the registration: the Node exists the moment it arrives.
    let out = admin.run(&["get", "node", "notify-1", "-o", "name"]);
    assert_eq!(out.stdout.trim(), "node/notify-1", "{}", out.stderr);
}
