//! The Kubernetes API server under load: the real `k3rs server --disable-agent` (embedded
//! datastore, durable), driven over HTTP/2 with the admin client certificate
//! (`tests/common/kube.rs`). With 1,000 selector watchers open it creates 10,000 configmaps
//! across 10 namespaces, then reads, lists and updates them, and measures latency p50/p99
//! and throughput of each call, and the watch-delivery latency (write acknowledged → event
//! read by a watcher). Prints a markdown table next to the Kubernetes SLOs and the k3rs goals,
//! and writes it to `benches/results/apiserver.md` (or `$BENCH_OUT`).
//!
//! Run: `cargo bench --bench apiserver` (release). Smaller runs: `BENCH_OBJECTS`,
//! `BENCH_WATCHERS`, `BENCH_CONCURRENCY` (defaults 10000, 1000, 32).

// A benchmark: a failed unwrap aborts the run, which is what it should do.
#![allow(clippy::unwrap_used)]

#[path = "../tests/common/mod.rs"]
mod common;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::kube::{KubeClient, Kubeconfig};
use common::stats::{self, env_usize, Load};
use common::K3rs;
use serde_json::{json, Value};

const NAMESPACES: usize = 10;
/// Values of the `group` label; watcher `w` selects `group=g<w % GROUPS>`.
const GROUPS: usize = 100;
/// Client connections for requests (HTTP/2, multiplexed) and for watches (500 streams each).
const REQUEST_CONNS: usize = 4;
const WATCHES_PER_CONN: usize = 500;

fn ns(i: usize) -> String {
    format!("bench-{}", i % NAMESPACES)
}

fn group(i: usize) -> String {
    format!("g{}", i % GROUPS)
}

fn configmap(i: usize, data: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": format!("cm-{i}"), "namespace": ns(i),
            "labels": {"group": group(i), "app": "bench"}},
        "data": {"payload": data}})
}

/// `metadata.resourceVersion` of an object, or of a raw watch line, as a number.
fn rv_of(obj: &Value) -> i64 {
    obj["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no resourceVersion in {obj}"))
}

fn rv_in_line(line: &[u8]) -> Option<i64> {
    const NEEDLE: &[u8] = b"\"resourceVersion\":\"";
    let at = line.windows(NEEDLE.len()).position(|w| w == NEEDLE)? + NEEDLE.len();
    let end = line[at..].iter().position(|b| *b == b'"')? + at;
    std::str::from_utf8(&line[at..end]).ok()?.parse().ok()
}

/// When each write was acknowledged, by the resourceVersion it returned.
type Acks = Arc<Mutex<HashMap<i64, Instant>>>;

/// What one watcher saw: (resourceVersion, when read), and whether its stream ended early.
struct Seen {
    events: Vec<(i64, Instant)>,
    ended_early: bool,
}

#[derive(Debug, Default)]
struct Report {
    objects: usize,
    watchers: usize,
    create: Load,
    get: Load,
    list_ns: Load,
    list_all: Load,
    list_selector: Load,
    update: Load,
    delivery: Load,
    expected_deliveries: usize,
    dropped_watchers: usize,
}

async fn run(server: &K3rs, objects: usize, watchers: usize, conc: usize) -> Report {
    let cfg = Kubeconfig::read(&server.kubeconfig()).expect("kubeconfig");
    let mut clients = Vec::new();
    for _ in 0..REQUEST_CONNS {
        clients.push(KubeClient::connect(&cfg).await.expect("connect"));
    }
    let c0 = clients[0].clone();
    let mut ready = false;
    for _ in 0..300 {
        if let Ok((200, _)) = c0.request("GET", "/api/v1/namespaces/default", None).await {
            ready = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(ready, "the API did not get ready");
    for n in 0..NAMESPACES {
        let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns(n)}});
        c0.ok("POST", "/api/v1/namespaces", Some(&body))
            .await
            .expect("namespace");
    }
    let start_rv = rv_of(
        &c0.ok("GET", "/api/v1/configmaps", None)
            .await
            .expect("list"),
    );

    // Each write goes to the watchers of its group: half of them cluster-wide, half in the
    // object's namespace (a group's objects all live in one namespace).
    let updates = objects / 2;
    let per_group = |g: usize, n: usize| (0..n).filter(|i| i % GROUPS == g).count();
    let mut watch_conns = Vec::new();
    for _ in 0..watchers.div_ceil(WATCHES_PER_CONN) {
        watch_conns.push(KubeClient::connect(&cfg).await.expect("connect"));
    }
    let mut watch_tasks = Vec::new();
    let mut expected_deliveries = 0;
    for w in 0..watchers {
        let g = w % GROUPS;
        let path = if w % 2 == 0 {
            format!(
                "/api/v1/configmaps?watch=1&resourceVersion={start_rv}&labelSelector=group%3D{}",
                group(g)
            )
        } else {
            format!(
                "/api/v1/namespaces/{}/configmaps?watch=1&resourceVersion={start_rv}&labelSelector=group%3D{}",
                ns(g),
                group(g)
            )
        };
        let want = per_group(g, objects) + per_group(g, updates);
        expected_deliveries += want;
        let mut lines = watch_conns[w / WATCHES_PER_CONN]
            .watch(&path)
            .await
            .expect("watch");
        watch_tasks.push(tokio::spawn(async move {
            let mut events = Vec::with_capacity(want);
            while events.len() < want {
                match lines.next_line().await {
                    Ok(Some(line)) => {
                        if let Some(rv) = rv_in_line(&line) {
                            events.push((rv, Instant::now()));
                        }
                    }
                    _ => {
                        return Seen {
                            events,
                            ended_early: true,
                        }
                    }
                }
            }
            Seen {
                events,
                ended_early: false,
            }
        }));
    }

    let acks: Acks = Arc::new(Mutex::new(HashMap::new()));
    let pick = {
        let clients = clients.clone();
        move |n: usize| clients[n % REQUEST_CONNS].clone()
    };
    let payload = "x".repeat(256);

    let create = {
        let (pick, acks, payload) = (pick.clone(), acks.clone(), payload.clone());
        stats::run(conc, objects, move |i| {
            let (c, acks, body) = (pick(i), acks.clone(), configmap(i, &payload));
            async move {
                let path = format!("/api/v1/namespaces/{}/configmaps", ns(i));
                let created = c.ok("POST", &path, Some(&body)).await.expect("create");
                acks.lock().unwrap().insert(rv_of(&created), Instant::now());
            }
        })
        .await
    };
    let get = {
        let pick = pick.clone();
        stats::run(conc, objects, move |n| {
            let c = pick(n);
            let i = (n * 7919) % objects;
            async move {
                let path = format!("/api/v1/namespaces/{}/configmaps/cm-{i}", ns(i));
                c.ok("GET", &path, None).await.expect("get");
            }
        })
        .await
    };
    let list_ns = {
        let pick = pick.clone();
        stats::run(4, 50, move |n| {
            let c = pick(n);
            async move {
                let path = format!("/api/v1/namespaces/{}/configmaps", ns(n));
                c.ok("GET", &path, None).await.expect("list namespace");
            }
        })
        .await
    };
    let list_all = {
        let pick = pick.clone();
        stats::run(2, 10, move |n| {
            let c = pick(n);
            async move {
                c.ok("GET", "/api/v1/configmaps", None)
                    .await
                    .expect("list all");
            }
        })
        .await
    };
    let list_selector = {
        let pick = pick.clone();
        stats::run(conc.min(8), 100, move |n| {
            let c = pick(n);
            async move {
                let path = format!("/api/v1/configmaps?labelSelector=group%3D{}", group(n));
                c.ok("GET", &path, None).await.expect("list selector");
            }
        })
        .await
    };
    let update = {
        let (pick, acks) = (pick.clone(), acks.clone());
        let data = "y".repeat(256);
        stats::run(conc, updates, move |i| {
            let (c, acks, body) = (pick(i), acks.clone(), configmap(i, &data));
            async move {
                // An unconditional update (no resourceVersion in the body), as `kubectl replace`
                // without one does.
                let path = format!("/api/v1/namespaces/{}/configmaps/cm-{i}", ns(i));
                let updated = c.ok("PUT", &path, Some(&body)).await.expect("update");
                acks.lock().unwrap().insert(rv_of(&updated), Instant::now());
            }
        })
        .await
    };

    // Every watcher has its events by now or soon; give slow ones a bounded time.
    let mut delivery = Load::default();
    let mut dropped_watchers = 0;
    let deadline = Instant::now() + Duration::from_secs(120);
    let acks = acks.lock().unwrap().clone();
    let first_write = acks.values().min().copied();
    let mut last_read = None::<Instant>;
    for t in watch_tasks {
        let left = deadline.saturating_duration_since(Instant::now());
        let seen = match tokio::time::timeout(left, t).await {
            Ok(seen) => seen.expect("watch task"),
            Err(_) => {
                dropped_watchers += 1;
                continue;
            }
        };
        dropped_watchers += usize::from(seen.ended_early);
        for (rv, at) in seen.events {
            if let Some(acked) = acks.get(&rv) {
                delivery.lat.push(at.saturating_duration_since(*acked));
                last_read = Some(last_read.map_or(at, |l: Instant| l.max(at)));
            }
        }
    }
    delivery.ops = delivery.lat.len();
    delivery.secs = match (first_write, last_read) {
        (Some(a), Some(b)) => b.saturating_duration_since(a).as_secs_f64(),
        _ => 0.0,
    };
    Report {
        objects,
        watchers,
        create,
        get,
        list_ns,
        list_all,
        list_selector,
        update,
        delivery,
        expected_deliveries,
        dropped_watchers,
    }
}

fn table(r: &Report) -> String {
    let row = |what: String, l: &Load, slo: &str, goal: &str| {
        format!(
            "| {what} | {} | {:.0} | {:.1} | {:.1} | {slo} | {goal} |\n",
            l.ops,
            l.rate(),
            l.pct(50),
            l.pct(99)
        )
    };
    let per_ns = r.objects / NAMESPACES;
    let per_group = r.objects / GROUPS;
    let mut s = String::new();
    s += "| call | count | throughput /s | p50 ms | p99 ms | Kubernetes SLO (p99) | k3rs goal (p99) |\n";
    s += "|---|---:|---:|---:|---:|---|---|\n";
    s += &row(
        "create configmap (POST)".into(),
        &r.create,
        "≤ 1 s",
        "< 50 ms",
    );
    s += &row(
        "update configmap (PUT)".into(),
        &r.update,
        "≤ 1 s",
        "< 50 ms",
    );
    s += &row("get configmap".into(), &r.get, "≤ 1 s", "");
    s += &row(
        format!("list one namespace ({per_ns} objects)"),
        &r.list_ns,
        "≤ 30 s",
        "",
    );
    s += &row(
        format!("list all namespaces ({} objects)", r.objects),
        &r.list_all,
        "≤ 30 s",
        "",
    );
    s += &row(
        format!(
            "list all namespaces, label selector ({per_group} of {})",
            r.objects
        ),
        &r.list_selector,
        "≤ 30 s",
        "",
    );
    s += &row(
        format!(
            "watch delivery, write ack → event read ({} watchers)",
            r.watchers
        ),
        &r.delivery,
        "none yet (WIP upstream)",
        "< 100 ms",
    );
    s += &format!(
        "\nWatch events delivered: {} of {} expected; watchers closed or late: {}.\n",
        r.delivery.ops, r.expected_deliveries, r.dropped_watchers
    );
    s
}

fn main() {
    let objects = env_usize("BENCH_OBJECTS", 10_000);
    let watchers = env_usize("BENCH_WATCHERS", 1_000);
    let conc = env_usize("BENCH_CONCURRENCY", 32);
    let server = K3rs::start_kubernetes(&["--disable-agent"]);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let report = rt.block_on(run(&server, objects, watchers, conc));
    let commit = stats::commit();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mut out = format!(
        "## Kubernetes API server benchmark (k3rs {commit}, {} build)\n\n\
         `cargo bench --bench apiserver`: one `k3rs server --disable-agent` (embedded Raft store, \
         fsync per commit) on loopback, {cores} CPU cores shared with the client; HTTP/2 with \
         the admin client certificate; {} configmaps (256-byte payload) in {NAMESPACES} \
         namespaces created by {conc} concurrent clients while {} watchers are open \
         (`group=<g>` label selectors over {GROUPS} groups, half cluster-wide, half in one \
         namespace), then gets, lists and {} updates. SLOs: kube's API call latency SLO \
         (single-object calls p99 ≤ 1 s, lists ≤ 30 s); goals: issue 4.\n\n",
        stats::k3rs_build(),
        report.objects,
        report.watchers,
        report.objects / 2,
    );
    out += &table(&report);
    println!("{out}");
    let path = std::env::var_os("BENCH_OUT")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("benches/results/apiserver.md")
        });
    std::fs::write(&path, out).expect("write results");
    eprintln!("wrote {}", path.display());
}
