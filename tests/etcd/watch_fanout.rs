//! The watch cache's fan-out end to end: 2,000 concurrent API watches with different
//! namespaces and label/field selectors on one real `k3rs server` (HTTP/2, admin client
//! certificate), then a sequence of creates, relabels and deletes. Every watcher must receive
//! exactly the events its selectors imply (ADDED when an object starts matching, DELETED when
//! it stops), in order, with the resourceVersions the writes returned. Watchers opened
//! afterwards from the same start replay the same sequence from the cache's ring. Runs on the
//! embedded datastore and on a real etcd 3.4.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::common;
use crate::common::client::runtime;
use crate::common::kube::{KubeClient, Kubeconfig, WatchLines};
use crate::common::{Etcd, K3rs};
use anyhow::{bail, Context};
use serde_json::{json, Value};

const WATCHERS: usize = 2000;
const OBJECTS: usize = 120;
const GROUPS: usize = 20;
const NAMESPACES: [&str; 2] = ["fan-a", "fan-b"];
/// Watches per HTTP/2 connection (the server allows 1000 streams on one).
const PER_CONNECTION: usize = 500;

/// One watcher's scope and selectors, and the same rules evaluated by the test.
#[derive(Debug, Clone)]
struct Watcher {
    namespace: Option<&'static str>,
    /// Label values of `group` it accepts (`group in (...)`), or None for `group` present
    /// and not `exclude`.
    groups: Option<Vec<String>>,
    exclude: Option<String>,
    /// `metadata.namespace=` field selector.
    field_namespace: Option<&'static str>,
}

fn watcher(i: usize) -> Watcher {
    let g = |n: usize| format!("g{}", n % GROUPS);
    let ns = NAMESPACES[i % 2];
    match i % 4 {
        0 => Watcher {
            namespace: None,
            groups: Some(vec![g(i), "end".into()]),
            exclude: None,
            field_namespace: None,
        },
        1 => Watcher {
            namespace: Some(ns),
            groups: Some(vec![g(i), g(i + 7), "end".into()]),
            exclude: None,
            field_namespace: None,
        },
        2 => Watcher {
            namespace: None,
            groups: None,
            exclude: Some(g(i)),
            field_namespace: Some(ns),
        },
        _ => Watcher {
            namespace: Some(ns),
            groups: Some(vec![g(i), "end".into()]),
            exclude: None,
            field_namespace: Some(ns),
        },
    }
}

impl Watcher {
    fn path(&self, rv: &str) -> String {
        let base = match self.namespace {
            Some(ns) => format!("/api/v1/namespaces/{ns}/configmaps"),
            None => "/api/v1/configmaps".to_string(),
        };
        let labels = match (&self.groups, &self.exclude) {
            (Some(gs), _) => format!("group in ({})", gs.join(",")),
            (None, Some(x)) => format!("group,group notin ({x})"),
            (None, None) => String::new(),
        };
        let mut q = format!(
            "?watch=1&resourceVersion={rv}&labelSelector={}",
            encode(&labels)
        );
        if let Some(ns) = self.field_namespace {
            q += &format!(
                "&fieldSelector={}",
                encode(&format!("metadata.namespace={ns}"))
            );
        }
        base + &q
    }

    fn matches(&self, ns: &str, group: &str) -> bool {
        self.namespace.is_none_or(|n| n == ns)
            && self.field_namespace.is_none_or(|n| n == ns)
            && match (&self.groups, &self.exclude) {
                (Some(gs), _) => gs.iter().any(|g| g == group),
                (None, Some(x)) => group != x,
                (None, None) => true,
            }
    }

    /// The events this watcher must see for `writes`.
    fn expected(&self, writes: &[Write]) -> Vec<Expected> {
        let mut out = Vec::new();
        for w in writes {
            let before = w.before.as_deref().map(|g| self.matches(w.ns, g));
            let after = w.after.as_deref().map(|g| self.matches(w.ns, g));
            let kind = match (before, after) {
                (None | Some(false), Some(true)) => "ADDED",
                (Some(true), Some(true)) => "MODIFIED",
                (Some(true), Some(false) | None) => "DELETED",
                _ => continue,
            };
            out.push(Expected {
                kind,
                name: format!("{}/{}", w.ns, w.name),
                rv: w.rv,
            });
        }
        out
    }
}

fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'.' | b'_' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// One acknowledged write: the `group` label before and after (None = absent object).
#[derive(Debug, Clone)]
struct Write {
    ns: &'static str,
    name: String,
    before: Option<String>,
    after: Option<String>,
    /// The resourceVersion the write returned (deletes answer a Status, so None).
    rv: Option<i64>,
}

#[derive(Debug, Clone, PartialEq)]
struct Expected {
    kind: &'static str,
    name: String,
    rv: Option<i64>,
}

fn rv_of(obj: &Value) -> anyhow::Result<i64> {
    obj["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .with_context(|| format!("no resourceVersion in {obj}"))
}

/// Creates, relabels, deletes, then one `end` object per namespace; returns every write.
async fn workload(c: &KubeClient) -> anyhow::Result<Vec<Write>> {
    let mut writes = Vec::new();
    let mut group: BTreeMap<usize, usize> = BTreeMap::new();
    let cm = |ns: &str, name: &str, g: &str| {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": ns, "labels": {"group": g}},
            "data": {"k": name}})
    };
    let ns_of = |i: usize| NAMESPACES[i % 2];
    for i in 0..OBJECTS {
        let (ns, name, g) = (ns_of(i), format!("cm-{i}"), i % GROUPS);
        let path = format!("/api/v1/namespaces/{ns}/configmaps");
        let created = c
            .ok("POST", &path, Some(&cm(ns, &name, &format!("g{g}"))))
            .await?;
        group.insert(i, g);
        writes.push(Write {
            ns,
            name,
            before: None,
            after: Some(format!("g{g}")),
            rv: Some(rv_of(&created)?),
        });
    }
    for i in (0..OBJECTS).step_by(2) {
        let (ns, name) = (ns_of(i), format!("cm-{i}"));
        let (old, new) = (group[&i], (group[&i] + 7) % GROUPS);
        let path = format!("/api/v1/namespaces/{ns}/configmaps/{name}");
        let patch = json!({"metadata": {"labels": {"group": format!("g{new}")}}});
        let mut current = c.ok("GET", &path, None).await?;
        current["metadata"]["labels"] = patch["metadata"]["labels"].clone();
        let updated = c.ok("PUT", &path, Some(&current)).await?;
        group.insert(i, new);
        writes.push(Write {
            ns,
            name,
            before: Some(format!("g{old}")),
            after: Some(format!("g{new}")),
            rv: Some(rv_of(&updated)?),
        });
    }
    for i in (0..OBJECTS).step_by(3) {
        let (ns, name) = (ns_of(i), format!("cm-{i}"));
        let path = format!("/api/v1/namespaces/{ns}/configmaps/{name}");
        c.ok("DELETE", &path, None).await?;
        writes.push(Write {
            ns,
            name,
            before: Some(format!("g{}", group[&i])),
            after: None,
            rv: None,
        });
    }
    for ns in NAMESPACES {
        let path = format!("/api/v1/namespaces/{ns}/configmaps");
        let created = c.ok("POST", &path, Some(&cm(ns, "end", "end"))).await?;
        writes.push(Write {
            ns,
            name: "end".into(),
            before: None,
            after: Some("end".into()),
            rv: Some(rv_of(&created)?),
        });
    }
    Ok(writes)
}

/// Reads exactly `want.len()` events and compares them (deletes: kind and name, with a
/// resourceVersion between its neighbours').
async fn check(id: usize, mut lines: WatchLines, want: Vec<Expected>) -> anyhow::Result<()> {
    let mut last_rv = 0;
    for (n, exp) in want.iter().enumerate() {
        let ev = tokio::time::timeout(Duration::from_secs(120), lines.next())
            .await
            .with_context(|| format!("watcher {id}: nothing after {n} of {} events", want.len()))??
            .with_context(|| format!("watcher {id}: stream ended after {n} events"))?;
        let obj = &ev["object"];
        let got = Expected {
            kind: match ev["type"].as_str() {
                Some("ADDED") => "ADDED",
                Some("MODIFIED") => "MODIFIED",
                Some("DELETED") => "DELETED",
                _ => bail!("watcher {id}: unexpected event {ev}"),
            },
            name: format!(
                "{}/{}",
                obj["metadata"]["namespace"].as_str().unwrap_or(""),
                obj["metadata"]["name"].as_str().unwrap_or("")
            ),
            rv: exp.rv.map(|_| rv_of(obj)).transpose()?,
        };
        if got != *exp {
            bail!("watcher {id}: event {n}: got {got:?}, want {exp:?}");
        }
        let rv = rv_of(obj)?;
        if rv <= last_rv {
            bail!("watcher {id}: event {n} at {rv} after {last_rv}");
        }
        last_rv = rv;
    }
    Ok(())
}

async fn wait_ready(c: &KubeClient) -> anyhow::Result<()> {
    for _ in 0..300 {
        if let Ok((200, _)) = c.request("GET", "/api/v1/namespaces/default", None).await {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    bail!("the API did not get ready")
}

async fn scenario(server: &K3rs) -> anyhow::Result<()> {
    let cfg = Kubeconfig::read(&server.kubeconfig())?;
    let writer = KubeClient::connect(&cfg).await?;
    wait_ready(&writer).await?;
    for ns in NAMESPACES {
        let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
        writer.ok("POST", "/api/v1/namespaces", Some(&body)).await?;
    }
    let listed = writer.ok("GET", "/api/v1/configmaps", None).await?;
    let start = listed["metadata"]["resourceVersion"]
        .as_str()
        .context("list resourceVersion")?
        .to_string();

    let mut conns = Vec::new();
    for _ in 0..WATCHERS.div_ceil(PER_CONNECTION) {
        conns.push(KubeClient::connect(&cfg).await?);
    }
    let mut streams = Vec::with_capacity(WATCHERS);
    for i in 0..WATCHERS {
        let c = &conns[i / PER_CONNECTION];
        streams.push(c.watch(&watcher(i).path(&start)).await?);
    }

    let writes = workload(&writer).await?;
    let mut checks = Vec::with_capacity(WATCHERS);
    let mut total = 0;
    for (i, lines) in streams.into_iter().enumerate() {
        let want = watcher(i).expected(&writes);
        assert!(!want.is_empty(), "watcher {i} expects nothing: weak test");
        total += want.len();
        checks.push(tokio::spawn(check(i, lines, want)));
    }
    for c in checks {
        c.await??;
    }
    assert!(total > WATCHERS * 10, "only {total} events in all");

    // Late watchers from the same start are served the same history from the ring.
    for i in [0, 1, 2, 3, 1001, 1998] {
        let lines = writer.watch(&watcher(i).path(&start)).await?;
        check(10_000 + i, lines, watcher(i).expected(&writes)).await?;
    }
    Ok(())
}

#[test]
fn two_thousand_selector_watchers_on_the_embedded_datastore() {
    let server = K3rs::start_kubernetes(&["--disable-agent"]);
    let rt = runtime();
    if let Err(e) = rt.block_on(scenario(&server)) {
        panic!("{e:#}\nlog:\n{}", common::log_tail(&server.log_path(), 40));
    }
}

#[test]
fn two_thousand_selector_watchers_on_an_external_etcd() {
    let etcd = Etcd::start();
    let url = etcd.endpoint().url;
    let server = K3rs::start_kubernetes(&["--disable-agent", "--datastore-endpoint", &url]);
    let rt = runtime();
    if let Err(e) = rt.block_on(scenario(&server)) {
        panic!("{e:#}\nlog:\n{}", common::log_tail(&server.log_path(), 40));
    }
}
