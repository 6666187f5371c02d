//! Connection and request limits: idle and half-open clients of the API port are closed
//! after the timeouts without starving `kubectl`; `max-(mutating-)requests-inflight` answer
//! 429 with `Retry-After` and a `Status` while watches and `system:masters` pass; the etcd
//! client port drops a client that never finishes its TLS handshake.
//!
//! Loopback only; at most 2,000 client connections, the test raising its own open-file
//! limit for them.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::net::TcpStream;

use crate::common::client::runtime;
use crate::common::k3rs::{K3rs, AS_BARE_API};
use crate::common::kube::{KubeClient, Kubeconfig};
use crate::common::kubectl::Kubectl;
use crate::common::users;

/// Connections of each kind held against the API port.
const HALF_OPEN: usize = 1000;
const TLS_IDLE: usize = 1000;
/// The server's timeouts in the connection test (hidden flags; defaults are 10 s and 30 s).
const HANDSHAKE_TIMEOUT: &str = "8s";
const HEADER_READ_TIMEOUT: &str = "8s";

/// Raises this process's open-file soft limit to at least `need` (the server raises its
/// own); fails when the hard limit is lower.
fn raise_open_files(need: u64) {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let now = getrlimit(Resource::Nofile);
    if now.current.is_none_or(|c| c >= need) {
        return;
    }
    let current = match now.maximum {
        Some(hard) => hard,
        None => need,
    };
    assert!(
        current >= need,
        "the open-file hard limit {current} is below the {need} this test needs"
    );
    setrlimit(
        Resource::Nofile,
        Rlimit {
            current: Some(current),
            maximum: now.maximum,
        },
    )
    .expect("raising the open-file limit");
}

/// How many file descriptors the process `pid` has open.
fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("/proc/<pid>/fd")
        .count()
}

/// The soft and hard open-file limits of `pid`, from `/proc/<pid>/limits`.
fn open_file_limits(pid: u32) -> (String, String) {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).expect("/proc/limits");
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .expect("Max open files");
    let fields: Vec<&str> = line["Max open files".len()..].split_whitespace().collect();
    (fields[0].to_string(), fields[1].to_string())
}

/// A TLS client trusting the server CA of `cfg`, offering `alpn`, without a certificate.
fn tls_client(cfg: &Kubeconfig, alpn: &[u8]) -> tokio_rustls::TlsConnector {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&cfg.ca_pem) {
        roots.add(cert.unwrap()).unwrap();
    }
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![alpn.to_vec()];
    tokio_rustls::TlsConnector::from(Arc::new(config))
}

/// Whether the peer closes `io` (EOF or an error) within `within`; bytes it sends are
/// skipped.
async fn closed_within<S: AsyncRead + Unpin>(io: &mut S, within: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + within;
    let mut buf = [0u8; 4096];
    loop {
        match tokio::time::timeout_at(deadline, io.read(&mut buf)).await {
            Err(_) => return false,
            Ok(Ok(0) | Err(_)) => return true,
            Ok(Ok(_)) => {}
        }
    }
}

#[test]
fn idle_and_half_open_connections_do_not_starve_kubectl_and_are_closed() {
    let mut args = AS_BARE_API.to_vec();
    let handshake = format!("--tls-handshake-timeout={HANDSHAKE_TIMEOUT}");
    let header = format!("--https-header-read-timeout={HEADER_READ_TIMEOUT}");
    args.extend([handshake.as_str(), header.as_str()]);
    // Started before this process raises its own limit, so the server's limit is its own.
    let (server, k) = Kubectl::start_server(&args);
    let pid = server.pid().expect("server pid");
    let (soft, hard) = open_file_limits(pid);
    assert_eq!(
        soft, hard,
        "the server raises its open-file limit to the hard one"
    );
    raise_open_files((HALF_OPEN + TLS_IDLE + 256) as u64);

    let cfg = Kubeconfig::read(&server.kubeconfig()).unwrap();
    let addr = cfg.authority.clone();
    let baseline = open_fds(pid);
    let rt = runtime();
    let (mut idle, mut half_open) = rt.block_on(async {
        // TLS done, no request: half offer h2, half http/1.1 (both wait for a first byte).
        let h2 = tls_client(&cfg, b"h2");
        let h1 = tls_client(&cfg, b"http/1.1");
        let idle: Vec<_> = futures::stream::iter(0..TLS_IDLE)
            .map(|i| {
                let connector = if i % 2 == 0 { h2.clone() } else { h1.clone() };
                let addr = addr.clone();
                async move {
                    let tcp = TcpStream::connect(&addr).await.expect("connecting");
                    let name = ServerName::try_from("127.0.0.1").unwrap().to_owned();
                    connector.connect(name, tcp).await.expect("TLS handshake")
                }
            })
            .buffer_unordered(32)
            .collect()
            .await;
        // TCP connected, no handshake.
        let mut half_open = Vec::with_capacity(HALF_OPEN);
        for _ in 0..HALF_OPEN {
            half_open.push(TcpStream::connect(&addr).await.expect("connecting"));
        }
        (idle, half_open)
    });
    let held = open_fds(pid);
    assert!(
        held >= baseline + (HALF_OPEN + TLS_IDLE) * 9 / 10,
        "the server holds the connections ({baseline} fds before, {held} now)"
    );

    for _ in 0..3 {
        let started = Instant::now();
        let out = k.run(&["get", "ns"]);
        let took = started.elapsed();
        assert!(out.ok, "kubectl get ns: {}", out.stderr);
        assert!(out.stdout.contains("default"), "{}", out.stdout);
        assert!(
            took < Duration::from_secs(1),
            "kubectl get ns took {took:?} with {held} fds open in the server"
        );
    }
    let still = open_fds(pid);
    assert!(
        still >= baseline + (HALF_OPEN + TLS_IDLE) * 9 / 10,
        "the connections are still open before their timeouts ({still} fds)"
    );

    // Closed by the server after the timeouts (8 s), not by us.
    let bound = Duration::from_secs(25);
    let started = Instant::now();
    let (idle_closed, half_open_closed) = rt.block_on(async {
        let idle = futures::future::join_all(idle.iter_mut().map(|c| closed_within(c, bound)));
        let half = futures::future::join_all(half_open.iter_mut().map(|c| closed_within(c, bound)));
        let (idle, half) = futures::future::join(idle, half).await;
        (
            idle.into_iter().filter(|c| *c).count(),
            half.into_iter().filter(|c| *c).count(),
        )
    });
    assert_eq!(
        (idle_closed, half_open_closed),
        (TLS_IDLE, HALF_OPEN),
        "connections the server closed within {bound:?} (waited {:?})",
        started.elapsed()
    );
    crate::common::wait_for(
        "the server's file descriptors to come back",
        Duration::from_secs(10),
        || (open_fds(pid) < baseline + 100).then_some(()),
    );
    drop((idle, half_open));
}

#[test]
fn inflight_limits_answer_429_with_retry_after_and_spare_watches_and_masters() {
    let mut args = AS_BARE_API.to_vec();
    args.extend([
        "--kube-apiserver-arg=max-requests-inflight=1",
        "--kube-apiserver-arg=max-mutating-requests-inflight=1",
    ]);
    let (server, k) = Kubectl::start_server(&args);
    // alice is a cluster admin through RBAC, not system:masters: the limits apply to her.
    k.ok(&[
        "create",
        "clusterrolebinding",
        "alice-admin",
        "--clusterrole=cluster-admin",
        "--user=alice",
    ]);
    let admin = Kubeconfig::read(&server.kubeconfig()).unwrap();
    let alice = users::client_config(&server, "alice", &[]);
    let configmaps = "/api/v1/namespaces/default/configmaps";
    let cm = |name: &str| serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}});
    runtime().block_on(async {
        let holder = KubeClient::connect(&alice).await.unwrap();
        let other = KubeClient::connect(&alice).await.unwrap();
        // Until the binding reaches the authorizer's cache, alice is refused (403).
        let listed = other.get_until_ok(configmaps).await.unwrap();
        assert_eq!(listed, 200, "alice may list configmaps");
        // Hold the one mutating slot: a create whose body never comes. It is answered at
        // once only if a write of the server's own had the slot at that moment.
        let mut held = None;
        for _ in 0..50 {
            let (resp, body) = holder.start_without_body("POST", configmaps).await.unwrap();
            let mut resp = Box::pin(resp);
            match tokio::time::timeout(Duration::from_millis(500), &mut resp).await {
                Err(_) => {
                    held = Some((resp, body));
                    break;
                }
                Ok(r) => {
                    let code = r.unwrap().status();
                    assert_eq!(code, 429, "a create waiting for its body");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        }
        let held = held.expect("a create holding the mutating slot");

        // Another write is refused with kube-apiserver's answer.
        let (code, headers, body) = other
            .request_with_headers("POST", configmaps, Some(&cm("refused")))
            .await
            .unwrap();
        assert_eq!(code, 429, "{body}");
        assert_eq!(headers["retry-after"], "1");
        let status: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(status["kind"], "Status", "{status}");
        assert_eq!(status["reason"], "TooManyRequests", "{status}");
        assert_eq!(status["code"], 429, "{status}");

        // Watches are not counted: five at once with a read limit of one.
        let watch = format!("{configmaps}?watch=1");
        let watches = futures::future::join_all((0..5).map(|_| other.watch(&watch))).await;
        for w in &watches {
            assert!(
                w.is_ok(),
                "a watch is never refused: {:?}",
                w.as_ref().err()
            );
        }
        // ...and they leave the read slot free.
        let mut read = 0;
        for _ in 0..50 {
            read = other.request("GET", configmaps, None).await.unwrap().0;
            if read != 429 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(read, 200, "a list next to five open watches");

        // system:masters is served while the slot is taken.
        let root = KubeClient::connect(&admin).await.unwrap();
        let (code, created) = root
            .request("POST", configmaps, Some(&cm("by-admin")))
            .await
            .unwrap();
        assert_eq!(code, 201, "{created}");

        // Once the held request ends, alice's writes go through again.
        drop((held, holder));
        let mut code = 0;
        for _ in 0..50 {
            code = other
                .request("POST", configmaps, Some(&cm("after")))
                .await
                .unwrap()
                .0;
            if code != 429 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(code, 201, "a write after the slot was freed");
        drop(watches);
    });
}

#[test]
fn etcd_client_port_drops_a_client_that_never_handshakes() {
    let server = K3rs::start_with(&[
        "--etcd-auto-compaction-retention",
        "0",
        "--tls-handshake-timeout=2s",
    ]);
    let addr = format!("127.0.0.1:{}", server.port());
    runtime().block_on(async {
        let mut silent = Vec::new();
        for _ in 0..20 {
            silent.push(TcpStream::connect(&addr).await.expect("connecting"));
        }
        let started = Instant::now();
        // Still open well before the timeout...
        assert!(
            !closed_within(&mut silent[0], Duration::from_millis(1000)).await,
            "closed before the handshake timeout"
        );
        // ...and every one closed by the server after it.
        let closed = futures::future::join_all(
            silent
                .iter_mut()
                .map(|c| closed_within(c, Duration::from_secs(10))),
        )
        .await;
        assert!(
            closed.iter().all(|c| *c),
            "all closed after the 2 s handshake timeout (waited {:?})",
            started.elapsed()
        );
    });
    // The port still serves clients that do handshake.
    crate::common::etcdctl(&server.endpoint(), &["put", "k", "v"], None).expect_ok("put");
}
