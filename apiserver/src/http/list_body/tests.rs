use std::sync::Arc;

use axum::body::HttpBody;
use http_body_util::BodyExt;
use serde_json::json;

use super::*;
use crate::registry::continue_token;
use crate::registry::list_pager::ListPager;
use crate::registry::mem_store::MemStore;
use crate::registry::{decode_as, encode, keys, ListOptions, Target};
use k3rs_apimachinery::catalog;
use k3rs_apimachinery::selector::{FieldSelector, LabelSelector};
use k3rs_apimachinery::status::ApiResult;
use k3rs_datastore::{prefix_end, Datastore, GuardedOp, ListRequest};

fn configmaps() -> &'static Resource {
    catalog::lookup("", "v1", "configmaps").unwrap()
}

fn target(namespace: Option<&str>) -> Target {
    Target {
        resource: configmaps(),
        namespace: namespace.map(str::to_string),
        name: None,
        subresource: None,
    }
}

/// A store with `n` ConfigMaps over namespaces `a` and `b`, labelled `parity=even|odd`.
async fn store(n: usize) -> Arc<MemStore> {
    let store = Arc::new(MemStore::default());
    for i in 0..n {
        let ns = if i % 3 == 0 { "b" } else { "a" };
        let name = format!("cm-{i:04}");
        let parity = if i % 2 == 0 { "even" } else { "odd" };
        let obj = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": ns, "labels": {"parity": parity},
                         "uid": format!("u{i}")},
            "data": {"k": "v\"\u{e9}\\</", "i": i.to_string()}});
        let key = keys::object_key(configmaps(), Some(ns), &name);
        let value = encode(&obj).unwrap();
        store
            .guarded(&key, 0, GuardedOp::Put { value, lease: 0 })
            .await
            .unwrap();
    }
    store
}

/// The list as the server built it before streaming: one read of the whole range (pages of
/// `limit` when one is set), every item decoded, then one `Value` serialized at once.
async fn reference(ds: &dyn Datastore, t: &Target, opts: &ListOptions) -> ApiResult<String> {
    let r = t.resource;
    let prefix = keys::list_prefix(r, t.namespace.as_deref());
    let end = prefix_end(&prefix);
    let (start, mut revision) = match opts.continue_token.as_deref() {
        Some(token) => {
            let (rev, start) = continue_token::decode(token)?;
            (Some(start), rev)
        }
        None => (None, 0),
    };
    let mut key = match &start {
        Some(s) => [prefix.as_slice(), s.as_bytes()].concat(),
        None => prefix.clone(),
    };
    let filtered = !opts.labels.is_empty() || !opts.fields.is_empty();
    let mut items = Vec::new();
    let mut next: Option<Vec<u8>> = None;
    let mut remaining: Option<i64> = None;
    loop {
        let resp = ds
            .list(ListRequest {
                key: key.clone(),
                range_end: end.clone(),
                limit: opts.limit,
                revision,
            })
            .await?;
        if revision == 0 {
            revision = resp.revision;
        }
        let page_len = resp.kvs.len();
        let mut cut_at: Option<usize> = None;
        for (i, kv) in resp.kvs.iter().enumerate() {
            let obj = decode_as(t.resource, kv)?;
            if !filtered || opts.matches(&obj) {
                items.push(obj);
            }
            if opts.limit > 0 && items.len() as i64 >= opts.limit && (i + 1 < page_len || resp.more)
            {
                cut_at = Some(i);
                break;
            }
        }
        if let Some(i) = cut_at {
            let mut after = resp.kvs[i].key.clone();
            after.push(0);
            if !filtered && i + 1 == page_len {
                remaining = Some(resp.count - page_len as i64);
            }
            next = Some(after);
            break;
        }
        if !resp.more {
            break;
        }
        let Some(last) = resp.kvs.last() else { break };
        key = [last.key.as_slice(), b"\0"].concat();
    }
    let mut metadata = json!({ "resourceVersion": revision.to_string() });
    if let Some(after) = next {
        let rel = String::from_utf8_lossy(&after[prefix.len()..]).into_owned();
        metadata["continue"] = json!(continue_token::encode(revision, &rel));
        if let Some(n) = remaining.filter(|n| *n > 0) {
            metadata["remainingItemCount"] = json!(n);
        }
    }
    Ok(json!({
        "kind": format!("{}List", r.kind),
        "apiVersion": r.group_version(),
        "metadata": metadata,
        "items": items,
    })
    .to_string())
}

async fn streamed(ds: Arc<dyn Datastore>, t: &Target, opts: ListOptions, page: i64) -> String {
    let pager = ListPager::start_paged(ds, t, opts, page).await.unwrap();
    let resp = response(pager, t.resource);
    assert_eq!(resp.headers()[header::CONTENT_TYPE], "application/json");
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    String::from_utf8(bytes.to_vec()).unwrap()
}

fn opts(limit: i64, labels: &str, fields: &str) -> ListOptions {
    ListOptions {
        labels: LabelSelector::parse(labels).unwrap(),
        fields: FieldSelector::parse(fields, configmaps()).unwrap(),
        limit,
        ..Default::default()
    }
}

#[test]
fn the_encoder_writes_what_the_whole_value_serializes_to() {
    let metadatas = [
        json!({"resourceVersion": "12"}),
        json!({"resourceVersion": "12", "continue": "abc=", "remainingItemCount": 7}),
    ];
    let item = |i: usize| {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": format!("p{i}"),
               "annotations": {"q": "\"\\\n\u{1}é"}}, "spec": {"n": i, "f": 1.5, "l": [null, true]}})
    };
    for n in [0, 1, 2, 500] {
        for metadata in &metadatas {
            let items: Vec<Value> = (0..n).map(item).collect();
            let whole = json!({"kind": "PodList", "apiVersion": "v1",
                               "metadata": metadata, "items": items});
            let mut e = ListEncoder::open("v1").unwrap();
            let mut out = Vec::new();
            for obj in &items {
                e.item(obj).unwrap();
                if e.pending() > 100 {
                    out.extend_from_slice(&e.take());
                }
            }
            e.close("PodList", metadata).unwrap();
            out.extend_from_slice(&e.take());
            assert_eq!(
                String::from_utf8(out).unwrap(),
                whole.to_string(),
                "{n} items"
            );
        }
    }
}

#[tokio::test]
async fn streamed_lists_are_the_bytes_of_the_whole_list() {
    let store = store(23).await;
    let ds: Arc<dyn Datastore> = store.clone();
    let all = target(None);
    let in_a = target(Some("a"));
    let empty = target(Some("none"));
    let cases = [
        (&all, opts(0, "", "")),
        (&in_a, opts(0, "", "")),
        (&empty, opts(0, "", "")),
        (&empty, opts(5, "", "")),
        (&all, opts(1, "", "")),
        (&all, opts(5, "", "")),
        (&all, opts(22, "", "")),
        (&all, opts(23, "", "")),
        (&all, opts(24, "", "")),
        (&all, opts(0, "parity=odd", "")),
        (&all, opts(4, "parity=odd", "")),
        (&all, opts(11, "parity=even", "")),
        (&all, opts(12, "parity=even", "")),
        (&all, opts(3, "", "metadata.namespace=b")),
        (&in_a, opts(2, "parity!=odd", "metadata.name!=cm-0004")),
        (&all, opts(0, "parity=none", "")),
    ];
    for (t, o) in cases {
        let want = reference(ds.as_ref(), t, &o).await.unwrap();
        for page in [1, 2, 3, 7, 500] {
            let got = streamed(ds.clone(), t, o.clone(), page).await;
            assert_eq!(got, want, "{:?} {o:?}, pages of {page}", t.namespace);
        }
        // Follow the continue tokens to the end: every page agrees too.
        let mut next: Value = serde_json::from_str(&want).unwrap();
        while let Some(token) = next["metadata"]["continue"].as_str() {
            let o = ListOptions {
                continue_token: Some(token.to_string()),
                ..o.clone()
            };
            let want = reference(ds.as_ref(), t, &o).await.unwrap();
            assert_eq!(streamed(ds.clone(), t, o.clone(), 3).await, want);
            next = serde_json::from_str(&want).unwrap();
        }
    }
    let whole: Value = serde_json::from_str(&streamed(ds, &all, opts(5, "", ""), 2).await).unwrap();
    assert_eq!(whole["items"].as_array().unwrap().len(), 5);
    assert_eq!(whole["metadata"]["remainingItemCount"], 18);
}

#[tokio::test]
async fn a_long_list_is_sent_in_chunks_and_read_only_as_the_client_reads() {
    let store = store(600).await;
    let ds: Arc<dyn Datastore> = store.clone();
    let pager = ListPager::start_paged(ds.clone(), &target(None), opts(0, "", ""), 50)
        .await
        .unwrap();
    assert_eq!(
        store.take_reads().len(),
        1,
        "the first page is read up front"
    );
    let mut body = response(pager, configmaps()).into_body();
    assert_eq!(body.size_hint().exact(), None, "the body is streamed");
    let first = body.frame().await.unwrap().unwrap().into_data().unwrap();
    assert!(first.len() >= CHUNK && first.len() < 2 * CHUNK);
    let pages_read = store.take_reads().len();
    assert!(pages_read < 12, "one chunk read {pages_read} of 12 pages");
    // A client that goes away: the body is dropped and the store is not read again; the
    // list's reader let go of the store.
    drop(body);
    assert_eq!(Arc::strong_count(&ds), 2, "only the test holds the store");
    assert!(store.take_reads().is_empty());
}
