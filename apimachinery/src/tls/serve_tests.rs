use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::routing::get;
use axum::Extension;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::Notify;
use tokio::time::timeout;

use super::*;

const GET: &str = "GET / HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n";

/// What the server sent back for `request` until it closed the connection.
async fn exchange(addr: SocketAddr, request: &str) -> String {
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    tcp.write_all(request.as_bytes()).await.unwrap();
    let mut got = Vec::new();
    let _ = tcp.read_to_end(&mut got).await;
    String::from_utf8_lossy(&got).into_owned()
}

/// Answers `hello <peer IP>`.
fn hello() -> Router {
    Router::new().route(
        "/",
        get(
            |Extension(PeerAddr(peer)): Extension<PeerAddr>| async move {
                format!("hello {}", peer.ip())
            },
        ),
    )
}

/// Signals `entered` on each request, then answers `done` once `release` is notified.
fn held(entered: Arc<Notify>, release: Arc<Notify>) -> Router {
    Router::new().route(
        "/",
        get(move || async move {
            entered.notify_one();
            release.notified().await;
            "done"
        }),
    )
}

fn spawn_plain(
    listener: impl Accept + 'static,
    app: Router,
    limits: Limits,
) -> (CancellationToken, tokio::task::JoinHandle<()>) {
    let stop = CancellationToken::new();
    let server = tokio::spawn({
        let stop = stop.clone();
        async move { accept_loop(listener, Transport::Plain, app, stop, &limits, "test").await }
    });
    (stop, server)
}

async fn local() -> (TcpListener, SocketAddr) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    (listener, addr)
}

#[test]
fn failed_accepts_wait_twice_as_long_each_time_up_to_a_second_and_start_over_after_a_success() {
    let mut backoff = AcceptBackoff::default();
    let waits: Vec<Duration> = (0..10).map(|_| backoff.failed()).collect();
    let expected: Vec<Duration> = [5, 10, 20, 40, 80, 160, 320, 640, 1000, 1000]
        .into_iter()
        .map(Duration::from_millis)
        .collect();
    assert_eq!(waits, expected);
    backoff.accepted();
    assert_eq!(backoff.failed(), Duration::from_millis(5));
}

/// A listener whose first `failures` accepts fail (as with `EMFILE`), recording when each
/// accept was asked for.
struct Flaky {
    inner: TcpListener,
    failures: usize,
    calls: Arc<Mutex<Vec<Instant>>>,
}

impl Accept for Flaky {
    fn accept(&mut self) -> impl Future<Output = io::Result<(TcpStream, SocketAddr)>> + Send {
        self.calls.lock().unwrap().push(Instant::now());
        let fail = self.failures > 0;
        self.failures = self.failures.saturating_sub(1);
        let inner = &self.inner;
        async move {
            if fail {
                Err(io::Error::from_raw_os_error(24))
            } else {
                inner.accept().await
            }
        }
    }
}

#[tokio::test]
async fn failed_accepts_are_retried_after_growing_waits_and_plain_http_is_served() {
    let (inner, addr) = local().await;
    let calls = Arc::new(Mutex::new(Vec::new()));
    let flaky = Flaky {
        inner,
        failures: 3,
        calls: calls.clone(),
    };
    let (stop, server) = spawn_plain(flaky, hello(), Limits::default());

    let response = timeout(Duration::from_secs(10), exchange(addr, GET))
        .await
        .unwrap();
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert!(response.ends_with("hello 127.0.0.1"), "{response}");

    let calls = calls.lock().unwrap().clone();
    assert!(
        calls.len() >= 4,
        "three failures, then the accept that worked"
    );
    let gaps: Vec<Duration> = calls.windows(2).take(3).map(|w| w[1] - w[0]).collect();
    for (gap, least) in gaps.iter().zip([5, 10, 20]) {
        assert!(*gap >= Duration::from_millis(least), "{gaps:?}");
    }
    stop.cancel();
    timeout(Duration::from_secs(5), server)
        .await
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn stop_closes_the_listener_and_lets_open_requests_finish() {
    let (listener, addr) = local().await;
    let (entered, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let limits = Limits {
        drain: Duration::from_secs(30),
        ..Limits::default()
    };
    let (stop, server) = spawn_plain(listener, held(entered.clone(), release.clone()), limits);
    let client = tokio::spawn(exchange(addr, GET));
    timeout(Duration::from_secs(10), entered.notified())
        .await
        .unwrap();

    stop.cancel();
    let mut refused = false;
    for _ in 0..200 {
        if TcpStream::connect(addr).await.is_err() {
            refused = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(refused, "the listener is closed once stop is cancelled");
    assert!(!server.is_finished(), "the open request holds the drain");

    release.notify_one();
    let response = timeout(Duration::from_secs(10), client)
        .await
        .unwrap()
        .unwrap();
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert!(response.ends_with("done"), "{response}");
    // Well before the 30 s drain: the server ends once its last connection has.
    timeout(Duration::from_secs(10), server)
        .await
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn connections_still_open_after_the_drain_are_closed() {
    let (listener, addr) = local().await;
    let (entered, never) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let limits = Limits {
        drain: Duration::from_millis(300),
        ..Limits::default()
    };
    let (stop, server) = spawn_plain(listener, held(entered.clone(), never), limits);
    let client = tokio::spawn(exchange(addr, GET));
    timeout(Duration::from_secs(10), entered.notified())
        .await
        .unwrap();

    let stopped = Instant::now();
    stop.cancel();
    timeout(Duration::from_secs(10), server)
        .await
        .unwrap()
        .unwrap();
    assert!(stopped.elapsed() >= Duration::from_millis(300));
    let response = timeout(Duration::from_secs(10), client)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(response, "", "closed without an answer");
}
