//! LIST responses streamed item by item (kube-apiserver's streaming collection encoding):
//! a long list arrives whole and in the shape of a `<Kind>List` through a raw HTTP/2 client
//! and kubectl (JSON and Table, unpaged and paged, with selectors); a client that stops
//! reading holds its read slot (`max-requests-inflight`) until it goes away, then the slot
//! and the list's reading are released; a slow reader still gets the whole list.
//!
//! Loopback only; about 12 MB of ConfigMaps.

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::{json, Value};

use crate::common::client::runtime;
use crate::common::k3rs::AS_BARE_API;
use crate::common::kube::{KubeClient, Kubeconfig};
use crate::common::kubectl::{self, Kubectl};
use crate::common::users;

const NS: &str = "stream";
/// ConfigMaps listed: more than one page of the server's store reads (500).
const COUNT: usize = 620;
/// Bytes of data per ConfigMap: the whole list (~12 MB) is far beyond a stream's window.
const DATA: usize = 20_000;

fn name(i: usize) -> String {
    format!("cm-{i:04}")
}

fn configmap(i: usize) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name(i), "labels": {"half": (i % 2).to_string()}},
        "data": {"blob": "x".repeat(DATA)}})
}

/// The names of the test's ConfigMaps in `list` (the namespace also holds the
/// root CA publisher's `kube-root-ca.crt`), in the list's order.
fn names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["metadata"]["name"].as_str().unwrap().to_string())
        .filter(|n| n.starts_with("cm-"))
        .collect()
}

async fn create_all(c: &KubeClient) {
    let path = format!("/api/v1/namespaces/{NS}/configmaps");
    for batch in (0..COUNT).collect::<Vec<_>>().chunks(32) {
        let posts = batch.iter().map(|i| {
            let obj = configmap(*i);
            let path = path.clone();
            async move { c.request("POST", &path, Some(&obj)).await.unwrap() }
        });
        for (code, answer) in futures::future::join_all(posts).await {
            assert_eq!(code, 201, "{answer}");
        }
    }
}

/// Reads a streamed body, pausing after each frame: a slow client.
async fn read_slowly(mut recv: h2::RecvStream) -> Vec<u8> {
    let mut buf = Vec::new();
    while let Some(chunk) = recv.data().await {
        let chunk = chunk.unwrap();
        let _ = recv.flow_control().release_capacity(chunk.len());
        buf.extend_from_slice(&chunk);
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    buf
}

#[test]
fn long_lists_stream_whole_and_a_stalled_reader_holds_only_its_read_slot() {
    let mut args = AS_BARE_API.to_vec();
    args.push("--kube-apiserver-arg=max-requests-inflight=1");
    let (server, k) = Kubectl::start_server(&args);
    k.ok(&["create", "namespace", NS]);
    k.ok(&[
        "create",
        "clusterrole",
        "cm-reader",
        "--verb=get,list",
        "--resource=configmaps",
    ]);
    k.ok(&[
        "create",
        "clusterrolebinding",
        "bob-reads",
        "--clusterrole=cm-reader",
        "--user=bob",
    ]);
    let admin = Kubeconfig::read(&server.kubeconfig()).unwrap();
    let bob = users::client_config(&server, "bob", &[]);
    let list_path = format!("/api/v1/namespaces/{NS}/configmaps");
    let want: Vec<String> = (0..COUNT).map(name).collect();
    runtime().block_on(async {
        let c = KubeClient::connect(&admin).await.unwrap();
        create_all(&c).await;

        // Unpaged: streamed (no Content-Length), every item, in order, a List's shape.
        let (parts, recv) = c.open(&list_path).await.unwrap();
        assert_eq!(parts.status, 200);
        assert_eq!(parts.headers["content-type"], "application/json");
        assert!(parts.headers.get("content-length").is_none(), "{parts:?}");
        let body = read_slowly(recv).await;
        let list: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(list["kind"], "ConfigMapList");
        assert_eq!(list["apiVersion"], "v1");
        let keys: Vec<&str> = list
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(keys, ["apiVersion", "items", "kind", "metadata"]);
        let rv = list["metadata"]["resourceVersion"].as_str().unwrap();
        assert!(rv.parse::<i64>().unwrap() > 0, "{}", list["metadata"]);
        assert!(list["metadata"].get("continue").is_none());
        assert_eq!(names(&list), want);
        let total = list["items"].as_array().unwrap().len() as i64;
        let first = &list["items"][0];
        assert_eq!(first["data"]["blob"].as_str().unwrap().len(), DATA);
        assert_eq!(first["metadata"]["namespace"], NS);

        // Paged: the pages join up to the same list, with remainingItemCount on the first.
        let mut paged = Vec::new();
        let mut page = c
            .ok("GET", &format!("{list_path}?limit=250"), None)
            .await
            .unwrap();
        assert_eq!(page["metadata"]["remainingItemCount"], total - 250);
        loop {
            paged.extend(names(&page));
            let Some(token) = page["metadata"]["continue"].as_str() else {
                break;
            };
            let next = format!("{list_path}?limit=250&continue={token}");
            page = c.ok("GET", &next, None).await.unwrap();
        }
        assert_eq!(paged, want);

        // A label selector, across all namespaces.
        let odd = c
            .ok("GET", "/api/v1/configmaps?labelSelector=half%3D1", None)
            .await
            .unwrap();
        let odd_names: Vec<String> = (1..COUNT).step_by(2).map(name).collect();
        assert_eq!(names(&odd), odd_names);

        // bob is limited to one read at a time. A list he stops reading holds his slot...
        let holder = KubeClient::connect(&bob).await.unwrap();
        let other = KubeClient::connect(&bob).await.unwrap();
        assert_eq!(
            other.get_until_ok(&list_path).await.unwrap(),
            200,
            "bob may list"
        );
        let mut stalled = None;
        for _ in 0..50 {
            let (parts, recv) = holder.open(&list_path).await.unwrap();
            if parts.status == 200 {
                stalled = Some(recv);
                break;
            }
            assert_eq!(parts.status, 429, "{parts:?}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let stalled = stalled.expect("a list left unread");
        let (code, _) = other.request("GET", &list_path, None).await.unwrap();
        assert_eq!(code, 429, "the unread list still holds bob's read slot");
        // ...until he goes away mid-list: the server drops the list and frees the slot.
        drop((stalled, holder));
        assert_eq!(
            other.get_until_ok(&list_path).await.unwrap(),
            200,
            "the slot came back"
        );
    });

    // kubectl: JSON unpaged, and the Table in its default chunks of 500.
    let listed = kubectl::json(&k, &["get", "configmaps", "-n", NS, "--chunk-size=0"]);
    assert_eq!(names(&listed), want);
    let rows = k.ok(&[
        "get",
        "configmaps",
        "-n",
        NS,
        "--no-headers",
        "-l",
        "half=0",
    ]);
    let printed: BTreeSet<&str> = rows
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    let even: BTreeSet<String> = (0..COUNT).step_by(2).map(name).collect();
    assert_eq!(printed, even.iter().map(String::as_str).collect());
    let all_rows = k.ok(&["get", "configmaps", "-A", "--no-headers"]);
    let ours = all_rows
        .lines()
        .filter(|l| {
            let mut cols = l.split_whitespace();
            cols.next() == Some(NS) && cols.next().is_some_and(|n| n.starts_with("cm-"))
        })
        .count();
    assert_eq!(ours, COUNT);
}
