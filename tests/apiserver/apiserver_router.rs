//! The API server's router in-process (no TCP, no TLS) over the embedded Raft datastore:
//! the request/response contract that kubectl alone does not exercise: bad input and its
//! Status codes, authentication, discovery negotiation, paging, watch semantics, finalizers,
//! status/spec split, dry run.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{header, Method, Request, StatusCode};
use axum::Router;
use http_body_util::BodyExt;
use k3rs_apimachinery::catalog;
use k3rs_apiserver::http::router::router;
use k3rs_apiserver::registry::{Registry, Target, WriteOptions};
use k3rs_apiserver::{bootstrap, metrics::Metrics, ApiState};
use k3rs_auth::{InProcessUser, UserInfo};
use k3rs_datastore::{Datastore, Embedded};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

struct Api {
    app: Router,
    ds: Arc<dyn Datastore>,
    node: Arc<k3rs_raft::Node>,
    _dir: tempfile::TempDir,
}

async fn start() -> Api {
    let dir = tempfile::tempdir().unwrap();
    let node = k3rs_raft::Node::start(k3rs_raft::NodeConfig {
        data_dir: dir.path().join("db"),
        node_id: 1,
        name: "router-test".into(),
        peer_urls: vec!["https://127.0.0.1:2380".into()],
        client_urls: vec!["https://127.0.0.1:2379".into()],
        heartbeat_interval: Duration::from_millis(100),
        election_timeout: Duration::from_millis(1000),
        snapshot_entries: 10_000,
    })
    .await
    .unwrap();
    let ds: Arc<dyn Datastore> = Arc::new(Embedded::new(node.clone()));
    let registry = Arc::new(Registry::new(ds.clone(), "10.43.0.0/16".parse().unwrap()));
    let settings = bootstrap::Settings {
        https_port: 6443,
        kube_dns: Some("10.43.0.10".parse().unwrap()),
    };
    bootstrap::ensure(&registry, settings).await.unwrap();
    // What the service-account controller (not running here) would create: pods need it.
    let accounts = Target {
        resource: catalog::lookup("", "v1", "serviceaccounts").unwrap(),
        namespace: Some("default".into()),
        name: None,
        subresource: None,
    };
    let sa = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}});
    registry
        .create(&accounts, sa, WriteOptions::default())
        .await
        .unwrap();
    let state = Arc::new(ApiState {
        registry,
        metrics: Metrics::default(),
        server_ca_pem: "CA".into(),
        advertise_address: "127.0.0.1:6443".into(),
        stop: CancellationToken::new(),
        authn: k3rs_auth::authn::Chain::new(vec![Arc::new(k3rs_auth::authn::X509)]),
        authz: k3rs_auth::authz::Chain::new(vec![Arc::new(k3rs_auth::authz::SystemMasters)]),
        service_accounts: None,
        audit: None,
        kubelet: None,
        client_ca_pem: "CLIENT CA".into(),
        inflight: k3rs_apiserver::http::inflight::Inflight::new(Default::default()),
        resource_metrics: None,
        aggregator: None,
    });
    Api {
        app: router(state),
        ds,
        node,
        _dir: dir,
    }
}

/// The admin, as an in-process client (the router trusts this extension; hyper never sets it).
fn authenticated() -> InProcessUser {
    InProcessUser(Arc::new(UserInfo::authenticated(
        "system:admin",
        vec!["system:masters".into()],
    )))
}

struct Resp {
    status: StatusCode,
    headers: axum::http::HeaderMap,
    body: Vec<u8>,
}

impl Resp {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&self.body)))
    }

    /// Asserts a Status with this code and reason.
    fn status_is(&self, code: u16, reason: &str) -> Value {
        let v = self.json();
        assert_eq!(self.status.as_u16(), code, "{v}");
        assert_eq!(v["kind"], "Status", "{v}");
        assert_eq!(v["code"], code, "{v}");
        assert_eq!(v["reason"], reason, "{v}");
        v
    }
}

impl Api {
    async fn call(&self, req: Request<Body>) -> Resp {
        let resp = self.app.clone().oneshot(req).await.unwrap();
        let status = resp.status();
        let headers = resp.headers().clone();
        let body = resp
            .into_body()
            .collect()
            .await
            .unwrap()
            .to_bytes()
            .to_vec();
        Resp {
            status,
            headers,
            body,
        }
    }

    async fn send(&self, method: Method, uri: &str, content_type: &str, body: Vec<u8>) -> Resp {
        let mut req = Request::builder()
            .method(method)
            .uri(uri)
            .header(header::CONTENT_TYPE, content_type)
            .body(Body::from(body))
            .unwrap();
        req.extensions_mut().insert(authenticated());
        self.call(req).await
    }

    async fn get(&self, uri: &str) -> Resp {
        self.send(Method::GET, uri, "application/json", Vec::new())
            .await
    }

    async fn post(&self, uri: &str, v: Value) -> Resp {
        self.send(
            Method::POST,
            uri,
            "application/json",
            v.to_string().into_bytes(),
        )
        .await
    }

    async fn put(&self, uri: &str, v: Value) -> Resp {
        self.send(
            Method::PUT,
            uri,
            "application/json",
            v.to_string().into_bytes(),
        )
        .await
    }

    async fn delete(&self, uri: &str) -> Resp {
        self.send(Method::DELETE, uri, "application/json", Vec::new())
            .await
    }
}

fn cm(name: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels}, "data": {"k": "v"}})
}

const CMS: &str = "/api/v1/namespaces/default/configmaps";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_a_status_with_the_right_code() {
    let api = start().await;
    api.send(Method::POST, CMS, "application/json", b"{".to_vec())
        .await
        .status_is(400, "BadRequest");
    api.send(Method::POST, CMS, "application/yaml", b"a: [".to_vec())
        .await
        .status_is(400, "BadRequest");
    api.send(Method::POST, CMS, "text/plain", b"{}".to_vec())
        .await
        .status_is(415, "UnsupportedMediaType");
    let big = json!({"metadata": {"name": "big"}, "data": {"k": "x".repeat(4 << 20)}});
    api.post(CMS, big)
        .await
        .status_is(413, "RequestEntityTooLarge");
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}});
    api.post(CMS, pod).await.status_is(400, "BadRequest");
    let wrong_type = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "t"}, "data": {"k": 1}});
    api.post(CMS, wrong_type).await.status_is(400, "BadRequest");
    let invalid = api.post(CMS, cm("Bad_Name", json!({"bad key": "v"}))).await;
    let s = invalid.status_is(422, "Invalid");
    let fields: Vec<&str> = s["details"]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["field"].as_str().unwrap())
        .collect();
    assert_eq!(fields, ["metadata.name", "metadata.labels"]);
    api.get(&format!("{CMS}?labelSelector=a%20in%20(b"))
        .await
        .status_is(400, "BadRequest");
    api.get(&format!("{CMS}?fieldSelector=spec.nodeName%3Dx"))
        .await
        .status_is(400, "BadRequest");
    api.get(&format!("{CMS}?limit=1&continue=garbage"))
        .await
        .status_is(400, "BadRequest");
    api.get("/api/v1/namespaces/default/nothings")
        .await
        .status_is(404, "NotFound");
    api.post("/api/v1/namespaces/nope/configmaps", cm("x", json!({})))
        .await
        .status_is(404, "NotFound");
    api.get(&format!("{CMS}?watch=true&sendInitialEvents=true"))
        .await
        .status_is(422, "Invalid");
    api.node.shutdown().await.unwrap();
}

/// Bodies, and patches whose result, are not JSON objects get a 400 Status; the server keeps
/// serving and the stored object is unchanged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_object_bodies_and_patch_results_are_bad_requests() {
    let api = start().await;
    for body in ["[1]", "\"x\"", "7", "null"] {
        api.send(
            Method::POST,
            CMS,
            "application/json",
            body.as_bytes().to_vec(),
        )
        .await
        .status_is(400, "BadRequest");
    }
    api.post(CMS, cm("keep", json!({}))).await;
    let one = format!("{CMS}/keep");
    for body in ["[1]", "\"x\"", "null"] {
        api.send(
            Method::PUT,
            &one,
            "application/json",
            body.as_bytes().to_vec(),
        )
        .await
        .status_is(400, "BadRequest");
    }
    let patches: [(&str, &str); 4] = [
        ("application/merge-patch+json", "[1]"),
        ("application/merge-patch+json", "\"x\""),
        (
            "application/json-patch+json",
            r#"[{"op":"replace","path":"","value":"x"}]"#,
        ),
        ("application/apply-patch+yaml", "- 1"),
    ];
    for (content_type, body) in patches {
        let r = api
            .send(Method::PATCH, &one, content_type, body.as_bytes().to_vec())
            .await;
        let v = r.json();
        assert_eq!(v["kind"], "Status", "{content_type} {body}: {v}");
        let code = v["code"].as_u64().unwrap();
        assert!((400..500).contains(&code), "{content_type} {body}: {v}");
    }
    let live = api.get(&one).await.json();
    assert_eq!(live["data"], json!({"k": "v"}), "{live}");

    // Fields of the wrong JSON type where strategies write nested fields: a 4xx Status.
    let cases = [
        ("/api/v1/namespaces/default/pods", "v1", "Pod"),
        ("/api/v1/namespaces/default/services", "v1", "Service"),
        (
            "/apis/apps/v1/namespaces/default/deployments",
            "apps/v1",
            "Deployment",
        ),
        ("/api/v1/namespaces", "v1", "Namespace"),
    ];
    for (path, api_version, kind) in cases {
        for (i, field) in [
            json!({"spec": "x"}),
            json!({"spec": [1]}),
            json!({"status": 5}),
            json!({"metadata": {"name": format!("w{}", 0), "labels": "x"}}),
        ]
        .into_iter()
        .enumerate()
        {
            let mut obj = json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": format!("w{i}")}});
            for (k, v) in field.as_object().unwrap() {
                obj[k] = v.clone();
            }
            let r = api.post(path, obj.clone()).await;
            let v = r.json();
            assert_eq!(v["kind"], "Status", "{path} {obj}: {v}");
            let code = v["code"].as_u64().unwrap();
            assert!((400..500).contains(&code), "{path} {obj}: {v}");
        }
    }
    api.node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn authentication_and_anonymous_endpoints() {
    let api = start().await;
    let anonymous = |uri: &str| Request::get(uri).body(Body::empty()).unwrap();
    let r = api.call(anonymous("/api/v1/namespaces")).await;
    r.status_is(401, "Unauthorized");
    for path in ["/healthz", "/livez", "/readyz", "/version", "/cacerts"] {
        assert_eq!(
            api.call(anonymous(path)).await.status,
            StatusCode::OK,
            "{path}"
        );
    }
    let ready = api.call(anonymous("/readyz?verbose")).await;
    let text = String::from_utf8(ready.body).unwrap();
    assert_eq!(text, "[+]ping ok\n[+]etcd ok\nreadyz check passed\n");
    let version = api.call(anonymous("/version")).await.json();
    assert_eq!(
        (version["major"].as_str(), version["minor"].as_str()),
        (Some("1"), Some("33"))
    );
    api.node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_legacy_and_aggregated() {
    let api = start().await;
    let legacy = api.get("/api/v1").await.json();
    let names: Vec<&str> = legacy["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"pods") && names.contains(&"pods/status"),
        "{names:?}"
    );
    let groups = api.get("/apis").await.json();
    assert_eq!(groups["kind"], "APIGroupList");
    let accept =
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json";
    let req = |etag: Option<&str>| {
        let mut b = Request::get("/apis").header(header::ACCEPT, accept);
        if let Some(e) = etag {
            b = b.header(header::IF_NONE_MATCH, e);
        }
        let mut r = b.body(Body::empty()).unwrap();
        r.extensions_mut().insert(authenticated());
        r
    };
    let agg = api.call(req(None)).await;
    assert_eq!(
        agg.headers[header::CONTENT_TYPE],
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    );
    assert_eq!(agg.headers[header::VARY], "Accept");
    let etag = agg.headers[header::ETAG].to_str().unwrap().to_string();
    assert_eq!(agg.json()["items"][0]["metadata"]["name"], "apps");
    assert_eq!(
        api.call(req(Some(&etag))).await.status,
        StatusCode::NOT_MODIFIED
    );
    api.node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paging_with_continue_and_resource_versions() {
    let api = start().await;
    for i in 0..5 {
        let r = api
            .post(CMS, cm(&format!("c{i}"), json!({"n": i.to_string()})))
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.json());
    }
    let mut names = Vec::new();
    let mut uri = format!("{CMS}?limit=2");
    let mut pages = 0;
    let mut first_rv = None;
    loop {
        let page = api.get(&uri).await.json();
        pages += 1;
        let rv = page["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .to_string();
        assert_eq!(
            *first_rv.get_or_insert(rv.clone()),
            rv,
            "pages read one revision"
        );
        names.extend(
            page["items"]
                .as_array()
                .unwrap()
                .iter()
                .map(|i| i["metadata"]["name"].as_str().unwrap().to_string()),
        );
        match page["metadata"]["continue"].as_str() {
            Some(c) => uri = format!("{CMS}?limit=2&continue={c}"),
            None => break,
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(names, ["c0", "c1", "c2", "c3", "c4"]);
    // Selectors with a limit still fill pages.
    let sel = api
        .get(&format!("{CMS}?limit=1&labelSelector=n%20in%20(3,4)"))
        .await
        .json();
    assert_eq!(sel["items"][0]["metadata"]["name"], "c3");
    assert!(sel["metadata"]["continue"].is_string());

    // An Exact list at an old revision sees the old state; after compaction it is 410.
    let rv: i64 = first_rv.unwrap().parse().unwrap();
    api.delete(&format!("{CMS}/c0")).await;
    let old = api
        .get(&format!(
            "{CMS}?resourceVersion={rv}&resourceVersionMatch=Exact"
        ))
        .await
        .json();
    assert_eq!(old["items"].as_array().unwrap().len(), 5);
    let token = api.get(&format!("{CMS}?limit=1")).await.json()["metadata"]["continue"]
        .as_str()
        .unwrap()
        .to_string();
    let now = api.ds.current_revision().await.unwrap();
    api.post(CMS, cm("later", json!({}))).await;
    api.ds.compact(now + 1).await.unwrap();
    api.get(&format!(
        "{CMS}?resourceVersion={rv}&resourceVersionMatch=Exact"
    ))
    .await
    .status_is(410, "Expired");
    let expired = api.get(&format!("{CMS}?limit=1&continue={token}")).await;
    let s = expired.status_is(410, "Expired");
    assert!(s["message"]
        .as_str()
        .unwrap()
        .starts_with("The provided continue parameter is too old"));
    api.node.shutdown().await.unwrap();
}

fn events(body: &[u8]) -> Vec<(String, String)> {
    String::from_utf8_lossy(body)
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            let name = v["object"]["metadata"]["name"]
                .as_str()
                .unwrap_or("")
                .to_string();
            let code = v["object"]["code"]
                .as_i64()
                .map(|c| c.to_string())
                .unwrap_or_default();
            (
                v["type"].as_str().unwrap().to_string(),
                if name.is_empty() { code } else { name },
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_streams_end_with_timeout_and_report_expired_versions() {
    let api = start().await;
    // A revision from before the first watch, i.e. before the watch cache's window.
    let early = api.get(CMS).await.json()["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let created = api.post(CMS, cm("w1", json!({"app": "a"}))).await.json();
    let rv = created["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    // Changes after the list: relabeling out of the selector is a DELETED for that watcher.
    let watch = {
        let app = api.app.clone();
        let uri = format!("{CMS}?watch=true&labelSelector=app%3Da&timeoutSeconds=2");
        tokio::spawn(async move {
            let mut req = Request::get(uri).body(Body::empty()).unwrap();
            req.extensions_mut().insert(authenticated());
            let resp = app.oneshot(req).await.unwrap();
            resp.into_body()
                .collect()
                .await
                .unwrap()
                .to_bytes()
                .to_vec()
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut changed = created.clone();
    changed["metadata"]["labels"] = json!({"app": "b"});
    assert_eq!(
        api.put(&format!("{CMS}/w1"), changed).await.status,
        StatusCode::OK
    );
    let body = tokio::time::timeout(Duration::from_secs(10), watch)
        .await
        .expect("timeoutSeconds ends the watch")
        .unwrap();
    assert_eq!(
        events(&body),
        [
            ("ADDED".to_string(), "w1".to_string()),
            ("DELETED".to_string(), "w1".to_string())
        ]
    );

    // From an explicit resourceVersion: only what came after it.
    let from = api
        .get(&format!(
            "{CMS}?watch=1&resourceVersion={rv}&timeoutSeconds=1"
        ))
        .await;
    assert_eq!(
        events(&from.body),
        [("MODIFIED".to_string(), "w1".to_string())]
    );

    // Compaction does not cut the watch cache's window (as with kube-apiserver's cacher): a
    // start inside it is still served from the cache.
    let now = api.ds.current_revision().await.unwrap();
    api.post(CMS, cm("w2", json!({}))).await;
    api.ds.compact(now + 1).await.unwrap();
    let inside = api
        .get(&format!(
            "{CMS}?watch=1&resourceVersion={rv}&timeoutSeconds=1"
        ))
        .await;
    assert_eq!(
        events(&inside.body),
        [
            ("MODIFIED".to_string(), "w1".to_string()),
            ("ADDED".to_string(), "w2".to_string())
        ]
    );

    // Too old (before the cache's window, and compacted in the store): 200, then one ERROR
    // event with a 410 Status.
    let old = api
        .get(&format!(
            "{CMS}?watch=1&resourceVersion={early}&timeoutSeconds=5"
        ))
        .await;
    assert_eq!(old.status, StatusCode::OK);
    assert_eq!(
        events(&old.body),
        [("ERROR".to_string(), "410".to_string())]
    );
    api.node.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_follow_kube_apiserver_semantics() {
    let api = start().await;
    // generateName, dry run.
    let gen =
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "gen-"}});
    let made = api.post(CMS, gen.clone()).await.json();
    let name = made["metadata"]["name"].as_str().unwrap();
    assert!(name.starts_with("gen-") && name.len() == 9, "{name}");
    let dry = api
        .post(&format!("{CMS}?dryRun=All"), cm("dry", json!({})))
        .await;
    assert_eq!(dry.status, StatusCode::CREATED);
    api.get(&format!("{CMS}/dry"))
        .await
        .status_is(404, "NotFound");
    api.post(CMS, cm("dup", json!({}))).await;
    api.post(CMS, cm("dup", json!({})))
        .await
        .status_is(409, "AlreadyExists");

    // Deployment: generation moves with spec only; status goes through /status only.
    let deps = "/apis/apps/v1/namespaces/default/deployments";
    let d = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
        "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}},
        "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}, "status": {"replicas": 9}});
    let d = api.post(deps, d).await.json();
    assert_eq!(d["metadata"]["generation"], 1);
    assert!(d.get("status").is_none(), "create resets status: {d}");
    let mut labeled = d.clone();
    labeled["metadata"]["labels"] = json!({"x": "y"});
    labeled["status"] = json!({"replicas": 5});
    let labeled = api.put(&format!("{deps}/d"), labeled).await.json();
    assert_eq!(labeled["metadata"]["generation"], 1);
    assert!(labeled.get("status").is_none(), "main PUT ignores status");
    let mut status = labeled.clone();
    status["status"] = json!({"replicas": 2});
    status["spec"]["replicas"] = json!(7);
    let status = api.put(&format!("{deps}/d/status"), status).await.json();
    assert_eq!(
        (
            status["status"]["replicas"].as_i64(),
            status["spec"]["replicas"].as_i64()
        ),
        (Some(2), Some(1))
    );
    let mut scaled = status.clone();
    scaled["spec"]["replicas"] = json!(3);
    let scaled = api.put(&format!("{deps}/d"), scaled).await.json();
    assert_eq!(scaled["metadata"]["generation"], 2);
    assert_eq!(scaled["status"]["replicas"], 2);
    let stale = status;
    api.put(&format!("{deps}/d"), stale)
        .await
        .status_is(409, "Conflict");

    // Finalizers hold a delete: deletionTimestamp set, 200 with the object; removing the
    // last finalizer completes it. Creating in a terminating namespace is 403.
    let mut f = cm("fin", json!({}));
    f["metadata"]["finalizers"] = json!(["example.com/hold"]);
    api.post(CMS, f).await;
    let pending = api.delete(&format!("{CMS}/fin")).await;
    assert_eq!(pending.status, StatusCode::OK);
    let mut held = pending.json();
    assert!(held["metadata"]["deletionTimestamp"].is_string(), "{held}");
    held["metadata"]["finalizers"] = json!([]);
    assert_eq!(
        api.put(&format!("{CMS}/fin"), held).await.status,
        StatusCode::OK
    );
    api.get(&format!("{CMS}/fin"))
        .await
        .status_is(404, "NotFound");
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "t", "finalizers": ["example.com/hold"]}});
    api.post("/api/v1/namespaces", ns).await;
    let terminating = api.delete("/api/v1/namespaces/t").await.json();
    assert_eq!(terminating["status"]["phase"], "Terminating");
    api.post("/api/v1/namespaces/t/configmaps", cm("x", json!({})))
        .await
        .status_is(403, "Forbidden");

    // Propagation policies are recorded as kube-apiserver's finalizers.
    api.post(CMS, cm("orphaned", json!({}))).await;
    let orphan = api
        .send(
            Method::DELETE,
            &format!("{CMS}/orphaned"),
            "application/json",
            json!({"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Orphan"})
                .to_string()
                .into_bytes(),
        )
        .await
        .json();
    assert_eq!(orphan["metadata"]["finalizers"], json!(["orphan"]));

    // Events are written with a TTL lease (shared for a minute); other objects without.
    let event = |name: &str| {
        json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": name},
            "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"},
            "reason": "Test", "message": "m", "type": "Normal"})
    };
    let events = "/api/v1/namespaces/default/events";
    assert_eq!(
        api.post(events, event("e1")).await.status,
        StatusCode::CREATED
    );
    assert_eq!(
        api.post(events, event("e2")).await.status,
        StatusCode::CREATED
    );
    let lease_of = |key: &'static str| {
        let ds = api.ds.clone();
        async move { ds.get(key.as_bytes()).await.unwrap().0.unwrap().lease }
    };
    let (l1, l2) = (
        lease_of("/registry/events/default/e1").await,
        lease_of("/registry/events/default/e2").await,
    );
    assert!(l1 != 0 && l1 == l2, "{l1} {l2}");
    assert_eq!(lease_of("/registry/configmaps/default/dup").await, 0);

    // deletecollection honours selectors.
    for (n, tier) in [("dc1", "a"), ("dc2", "a"), ("dc3", "b")] {
        api.post(CMS, cm(n, json!({"tier": tier}))).await;
    }
    let gone = api
        .delete(&format!("{CMS}?labelSelector=tier%3Da"))
        .await
        .json();
    assert_eq!(gone["items"].as_array().unwrap().len(), 2);
    let left = api.get(&format!("{CMS}?labelSelector=tier")).await.json();
    assert_eq!(left["items"][0]["metadata"]["name"], "dc3");
    assert_eq!(left["items"].as_array().unwrap().len(), 1);

    // A pod bound to a node terminates gracefully (the kubelet finishes it with grace 0);
    // an unbound pod goes at once.
    let pods = "/api/v1/namespaces/default/pods";
    let pod = |name: &str, node: Option<&str>| {
        let mut p = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]}});
        if let Some(n) = node {
            p["spec"]["nodeName"] = json!(n);
        }
        p
    };
    let bound = api.post(pods, pod("bound", Some("n1"))).await.json();
    assert_eq!(bound["status"]["phase"], "Pending");
    assert_eq!(bound["spec"]["terminationGracePeriodSeconds"], 30);
    let terminating = api.delete(&format!("{pods}/bound")).await.json();
    assert_eq!(terminating["metadata"]["deletionGracePeriodSeconds"], 30);
    let on_node = api
        .get(&format!("{pods}?fieldSelector=spec.nodeName%3Dn1"))
        .await
        .json();
    assert_eq!(on_node["items"].as_array().unwrap().len(), 1);
    api.delete(&format!("{pods}/bound?gracePeriodSeconds=0"))
        .await;
    api.get(&format!("{pods}/bound"))
        .await
        .status_is(404, "NotFound");
    api.post(pods, pod("unbound", None)).await;
    // Pods' registry returns the deleted object (`ReturnDeletedObject`), not a Status.
    let done = api.delete(&format!("{pods}/unbound")).await.json();
    assert_eq!(
        (&done["kind"], &done["metadata"]["name"]),
        (&json!("Pod"), &json!("unbound")),
        "{done}"
    );

    // Services get a ClusterIP; `kubernetes` holds the first one.
    let svc = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": {"ports": [{"port": 80}]}});
    let svc = api
        .post("/api/v1/namespaces/default/services", svc)
        .await
        .json();
    assert_eq!(svc["spec"]["clusterIP"], "10.43.0.2");
    assert_eq!(svc["spec"]["ports"][0]["targetPort"], 80);
    let k = api
        .get("/api/v1/namespaces/default/services/kubernetes")
        .await
        .json();
    assert_eq!(k["spec"]["clusterIP"], "10.43.0.1");

    // NodePorts: the lowest free one, a requested one checked; a PUT that leaves the
    // allocated values out keeps them.
    let svcs = "/api/v1/namespaces/default/services";
    let np = |name: &str, node_port: Option<u16>| {
        let mut port = json!({"port": 80});
        if let Some(n) = node_port {
            port["nodePort"] = json!(n);
        }
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
            "spec": {"type": "NodePort", "ports": [port]}})
    };
    let first = api.post(svcs, np("np1", None)).await.json();
    assert_eq!(first["spec"]["ports"][0]["nodePort"], 30000);
    api.post(svcs, np("np2", Some(30000)))
        .await
        .status_is(422, "Invalid");
    let second = api.post(svcs, np("np3", Some(31000))).await.json();
    assert_eq!(second["spec"]["ports"][0]["nodePort"], 31000);
    let mut replaced = np("np1", None);
    replaced["metadata"]["resourceVersion"] = first["metadata"]["resourceVersion"].clone();
    replaced["metadata"]["labels"] = json!({"changed": "yes"});
    let replaced = api.put(&format!("{svcs}/np1"), replaced).await.json();
    assert_eq!(replaced["spec"]["clusterIP"], first["spec"]["clusterIP"]);
    assert_eq!(replaced["spec"]["ports"][0]["nodePort"], 30000);
    api.node.shutdown().await.unwrap();
}

/// Components inside the server use kube-rs through the router: list, create, get and
/// watch work, and the request carries the component's identity (a write stamps it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_process_kube_client_goes_through_the_router() {
    use futures::{StreamExt, TryStreamExt};
    use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
    use kube::api::{Api as KApi, ListParams, PostParams, WatchEvent, WatchParams};
    let api = start().await;
    let client = k3rs_apiserver::in_process::client(
        api.app.clone(),
        UserInfo::authenticated("system:admin", vec!["system:masters".into()]),
        "default",
    );
    let namespaces: KApi<Namespace> = KApi::all(client.clone());
    let names: Vec<String> = namespaces
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    assert!(names.contains(&"kube-system".to_string()), "{names:?}");
    let cms: KApi<ConfigMap> = KApi::default_namespaced(client);
    let list = cms.list(&ListParams::default()).await.unwrap();
    let rv = list.metadata.resource_version.unwrap();
    let mut watch = cms
        .watch(&WatchParams::default().timeout(10), &rv)
        .await
        .unwrap()
        .boxed();
    let cm: ConfigMap = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "in-process"}, "data": {"k": "v"}
    }))
    .unwrap();
    let created = cms.create(&PostParams::default(), &cm).await.unwrap();
    assert_eq!(created.data.unwrap()["k"], "v");
    let got = cms.get("in-process").await.unwrap();
    assert_eq!(got.metadata.uid, created.metadata.uid);
    match watch.try_next().await.unwrap() {
        Some(WatchEvent::Added(c)) => assert_eq!(c.metadata.name.as_deref(), Some("in-process")),
        other => panic!("{other:?}"),
    }
    let err = cms.get("missing").await.unwrap_err();
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 404),
        "{err:?}"
    );
}

/// Leader election through the API: one elector leads, a second waits while the Lease is
/// held, and takes over as soon as the first stops and releases it (long before the 30 s
/// lease duration would let it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_election_hands_over_on_release() {
    use k3rs_server::leader_election::{LeaderElector, Record, Timing};
    use k8s_openapi::api::coordination::v1::Lease;
    // The elector's protocol only: an admin client (this router has no bootstrap RBAC roles
    // for the controller manager's user), a Lease nobody else uses.
    const LEASE: &str = "test-election";
    let api = start().await;
    let client = k3rs_apiserver::in_process::client(
        api.app.clone(),
        UserInfo::authenticated("admin-test", vec!["system:masters".into()]),
        "kube-system",
    );
    let timing = Timing {
        lease_duration: Duration::from_secs(30),
        renew_deadline: Duration::from_secs(20),
        retry_period: Duration::from_millis(100),
    };
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(&'static str, bool)>();
    let spawn = |who: &'static str, stop: CancellationToken| {
        let elector = LeaderElector::new(client.clone(), "kube-system", LEASE, who.into(), timing);
        let tx = tx.clone();
        tokio::spawn(elector.run(stop, move |leading| {
            let tx = tx.clone();
            async move {
                tx.send((who, true)).unwrap();
                leading.cancelled().await;
                tx.send((who, false)).unwrap();
            }
        }))
    };
    async fn next(
        rx: &mut tokio::sync::mpsc::UnboundedReceiver<(&'static str, bool)>,
    ) -> (&'static str, bool) {
        tokio::time::timeout(Duration::from_secs(10), rx.recv())
            .await
            .expect("no leadership change within 10 s")
            .unwrap()
    }
    let stop_a = CancellationToken::new();
    let a = spawn("a", stop_a.clone());
    assert_eq!(next(&mut rx).await, ("a", true));
    let stop_b = CancellationToken::new();
    let b = spawn("b", stop_b.clone());
    // b retries ten times meanwhile; the Lease stays a's.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        rx.try_recv().is_err(),
        "b must not lead while a holds the lease"
    );
    let leases: kube::Api<Lease> = kube::Api::namespaced(client.clone(), "kube-system");
    let held = Record::of(&leases.get(LEASE).await.unwrap());
    assert_eq!((held.holder.as_str(), held.lease_transitions), ("a", 0));
    stop_a.cancel();
    assert_eq!(next(&mut rx).await, ("a", false));
    a.await.unwrap();
    assert_eq!(next(&mut rx).await, ("b", true));
    let held = Record::of(&leases.get(LEASE).await.unwrap());
    assert_eq!((held.holder.as_str(), held.lease_transitions), ("b", 1));
    assert_eq!(held.lease_duration_seconds, 30);
    stop_b.cancel();
    b.await.unwrap();
    let released = Record::of(&leases.get(LEASE).await.unwrap());
    assert_eq!(
        (released.holder.as_str(), released.lease_duration_seconds),
        ("", 1)
    );
}
