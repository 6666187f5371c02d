//! Resource bombs: requests built to make the server spend memory or time out of all
//! proportion to their size (patches that double an object, YAML aliases, deep nesting,
//! oversized bodies and objects, numbers at the edge of their type). Each is answered with a
//! Kubernetes `Status` (4xx) within a second, the server's RSS grows by less than 50 MiB over
//! all of them, and the server still answers afterwards.

use std::time::{Duration, Instant};

use bytes::Bytes;
use serde_json::{json, Value};

use crate::common::client::runtime;
use crate::common::hollow::HollowAgent;
use crate::common::kube::{KubeClient, Kubeconfig};
use crate::common::kubectl::{json as kjson, Kubectl};
use crate::common::stats::rss_mib;
use crate::common::wait_for;

const JSON: &str = "application/json";
const YAML: &str = "application/yaml";
const JSON_PATCH: &str = "application/json-patch+json";
const MERGE_PATCH: &str = "application/merge-patch+json";
const STRATEGIC_PATCH: &str = "application/strategic-merge-patch+json";
const APPLY_PATCH: &str = "application/apply-patch+yaml";

const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";
const DEEPS: &str = "/apis/bombs.k3rs.test/v1/namespaces/default/deeps";

struct Bomb {
    name: &'static str,
    method: &'static str,
    path: String,
    content_type: &'static str,
    body: Vec<u8>,
    /// The acceptable answers (where upstream's depends on the field's Go type).
    expect: &'static [u16],
}

fn bomb(
    name: &'static str,
    method: &'static str,
    path: &str,
    content_type: &'static str,
    body: impl Into<Vec<u8>>,
    expect: &'static [u16],
) -> Bomb {
    Bomb {
        name,
        method,
        path: path.to_string(),
        content_type,
        body: body.into(),
        expect,
    }
}

/// `levels` nested JSON arrays around `inner`.
fn nested_arrays(levels: usize, inner: &str) -> String {
    format!("{}{inner}{}", "[".repeat(levels), "]".repeat(levels))
}

/// The classic "billion laughs": nine levels of nine aliases each, 9^9 strings if expanded.
fn billion_laughs() -> String {
    let mut y = String::from(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: lol\ndata:\n  a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n",
    );
    let names = ["a", "b", "c", "d", "e", "f", "g", "h", "i"];
    for w in names.windows(2) {
        let refs = vec![format!("*{}", w[0]); 9].join(",");
        y.push_str(&format!("  {}: &{} [{refs}]\n", w[1], w[1]));
    }
    y
}

fn bombs() -> Vec<Bomb> {
    let big = |n: usize| "y".repeat(n);
    let cm = |name: &str, value: String| {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
               "data": {"v": value}})
        .to_string()
    };
    // 40 copies, each doubling `/data/d`: 2^40 × 64 KiB if nothing stopped it.
    let mut doubling = vec![json!({"op": "copy", "from": "/data/a", "path": "/data/d"})];
    doubling.extend((0..40).map(|_| json!({"op": "copy", "from": "/data", "path": "/data/d"})));
    // A JSON patch adding 120 levels below a path 120 levels deep: each part parses, the
    // result is deeper than any body could be.
    let deep_path = format!("/spec{}", "/n".repeat(120));
    let deep_add = json!([{"op": "add", "path": format!("{deep_path}/x"),
                          "value": serde_json::from_str::<Value>(&nested_arrays(120, "1")).unwrap()}]);
    vec![
        bomb(
            "json patch copy doubling",
            "PATCH",
            &format!("{CONFIGMAPS}/big"),
            JSON_PATCH,
            Value::Array(doubling).to_string(),
            &[413],
        ),
        bomb(
            "json patch add past the storable size",
            "PATCH",
            &format!("{CONFIGMAPS}/big"),
            JSON_PATCH,
            json!([{"op": "add", "path": "/data/b", "value": big(2 << 20)}]).to_string(),
            &[413],
        ),
        bomb(
            "merge patch past the storable size",
            "PATCH",
            &format!("{CONFIGMAPS}/big"),
            MERGE_PATCH,
            json!({"data": {"b": big(2 << 20)}}).to_string(),
            &[413],
        ),
        bomb(
            "strategic merge patch past the storable size",
            "PATCH",
            &format!("{CONFIGMAPS}/big"),
            STRATEGIC_PATCH,
            json!({"data": {"b": big(2 << 20)}}).to_string(),
            &[413],
        ),
        bomb(
            "apply past the storable size",
            "PATCH",
            &format!("{CONFIGMAPS}/big?fieldManager=bomber&force=true"),
            APPLY_PATCH,
            cm("big", big(2 << 20)),
            &[413],
        ),
        bomb(
            "create past the storable size",
            "POST",
            CONFIGMAPS,
            JSON,
            cm("huge", big(2 << 20)),
            &[413],
        ),
        bomb(
            "body over the request limit",
            "POST",
            CONFIGMAPS,
            JSON,
            cm("huger", big(4 << 20)),
            &[413],
        ),
        bomb(
            "yaml billion laughs",
            "POST",
            CONFIGMAPS,
            YAML,
            billion_laughs(),
            &[400],
        ),
        bomb(
            "json nested past the parser's depth",
            "POST",
            CONFIGMAPS,
            JSON,
            format!(
                r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"deep"}},"data":{{"v":{}}}}}"#,
                nested_arrays(100_000, "")
            ),
            &[400],
        ),
        bomb(
            "yaml nested past the parser's depth",
            "POST",
            CONFIGMAPS,
            YAML,
            format!(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: deep\ndata:\n  v: {}\n",
                nested_arrays(100_000, "")
            ),
            &[400],
        ),
        bomb(
            "json patch nesting past the storable depth",
            "PATCH",
            &format!("{DEEPS}/deep"),
            JSON_PATCH,
            deep_add.to_string(),
            &[422],
        ),
        bomb(
            "gracePeriodSeconds past int64",
            "DELETE",
            &format!("{CONFIGMAPS}/big?gracePeriodSeconds=9223372036854775808"),
            JSON,
            "",
            &[400],
        ),
        bomb(
            "watch timeoutSeconds past uint64",
            "GET",
            &format!("{CONFIGMAPS}?watch=1&timeoutSeconds=99999999999999999999999"),
            JSON,
            "",
            &[400],
        ),
        bomb(
            "port past 65535",
            "POST",
            "/api/v1/namespaces/default/services",
            JSON,
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "p"},
                    "spec": {"ports": [{"port": 9_223_372_036_854_775_807_i64}]}})
            .to_string(),
            &[400, 422],
        ),
        bomb(
            "quantity past any unit",
            "POST",
            "/api/v1/namespaces/default/resourcequotas",
            JSON,
            json!({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q"},
                    "spec": {"hard": {"cpu": format!("9{}Ei", "9".repeat(400))}}})
            .to_string(),
            &[201, 422],
        ),
    ]
}

/// A CRD whose `spec` keeps anything, and an object of it 120 levels deep.
async fn deep_object(c: &KubeClient) {
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "deeps.bombs.k3rs.test"},
        "spec": {"group": "bombs.k3rs.test", "scope": "Namespaced",
                 "names": {"plural": "deeps", "singular": "deep", "kind": "Deep"},
                 "versions": [{"name": "v1", "served": true, "storage": true,
                               "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                                   "spec": {"type": "object",
                                            "x-kubernetes-preserve-unknown-fields": true}}}}}]}});
    c.ok(
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        Some(&crd),
    )
    .await
    .unwrap();
    let spec = (0..120).fold(json!({}), |inner, _| json!({ "n": inner }));
    let obj = json!({"apiVersion": "bombs.k3rs.test/v1", "kind": "Deep",
                     "metadata": {"name": "deep"}, "spec": spec});
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (code, body) = c.request("POST", DEEPS, Some(&obj)).await.unwrap();
        if code == 201 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "creating the deep object: {code} {body}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[test]
fn resource_bombs_are_refused_before_they_cost_anything() {
    let (server, k) = Kubectl::start_server(&[]);
    let pid = server.pid().expect("server pid");
    let rt = runtime();
    rt.block_on(async {
        let c = KubeClient::connect(&Kubeconfig::read(&server.kubeconfig()).unwrap())
            .await
            .unwrap();
        let seed = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big"},
                          "data": {"a": "x".repeat(64 * 1024)}});
        c.ok("POST", CONFIGMAPS, Some(&seed)).await.unwrap();
        deep_object(&c).await;

        let before = rss_mib(pid);
        let mut peak = before;
        for b in bombs() {
            let t0 = Instant::now();
            let body = (!b.body.is_empty()).then(|| Bytes::from(b.body));
            let (code, body) = c
                .raw(b.method, &b.path, b.content_type, body)
                .await
                .unwrap_or_else(|e| panic!("{}: {e:#}", b.name));
            let took = t0.elapsed();
            let rss = rss_mib(pid);
            peak = peak.max(rss);
            let text = String::from_utf8_lossy(&body);
            println!("{:<46} {code} in {took:>10.3?}, RSS {rss:.0} MiB", b.name);
            assert!(b.expect.contains(&code), "{}: {code} {text}", b.name);
            if code >= 400 {
                let status: Value = serde_json::from_slice(&body)
                    .unwrap_or_else(|e| panic!("{}: not a Status ({e}): {text}", b.name));
                assert_eq!(status["kind"], "Status", "{}: {text}", b.name);
                assert_eq!(status["code"], code, "{}: {text}", b.name);
            }
            // A guard against a request the server works on for long (the time is printed
            // above); not a performance check, which belongs to benchmarks.
            assert!(took < Duration::from_secs(20), "{} took {took:?}", b.name);
        }
        println!("RSS before {before:.0} MiB, peak {peak:.0} MiB");
        assert!(
            peak - before < 50.0,
            "RSS grew from {before:.0} to {peak:.0} MiB"
        );

        // Nothing was stored, and the server still serves.
        let (_, cm) = c
            .request("GET", &format!("{CONFIGMAPS}/big"), None)
            .await
            .unwrap();
        assert_eq!(cm["data"].as_object().unwrap().len(), 1, "{cm}");
        let (code, _) = c.raw("GET", "/readyz", JSON, None).await.unwrap();
        assert_eq!(code, 200);
    });
    k.ok(&["get", "configmaps", "big"]);
}

/// `gracePeriodSeconds`/`terminationGracePeriodSeconds` of int64's largest value is a valid
/// (endless) grace period: the deletion timestamp saturates at the end of RFC 3339's range,
/// the ReplicaSet controller scales such pods down and keeps working.
#[test]
fn the_largest_grace_period_saturates_and_controllers_keep_working() {
    let (server, k) = Kubectl::start_server(&[]);
    let _nodes = HollowAgent::start(&server.kubeconfig(), 2, "grace-", &[]);
    wait_for("two hollow nodes", Duration::from_secs(60), || {
        (kjson(&k, &["get", "nodes"])["items"].as_array()?.len() == 2).then_some(())
    });

    // A pod bound to a node that does not exist is deleted gracefully.
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bound"},
                     "spec": {"nodeName": "nowhere", "containers": [{"name": "c", "image": "busybox"}]}});
    k.ok_stdin(&["create", "-f", "-"], Some(&pod.to_string()));
    let deleted = k.ok(&[
        "delete",
        "pod",
        "bound",
        "--grace-period=9223372036854775807",
        "--wait=false",
    ]);
    assert!(deleted.contains("deleted"), "{deleted}");
    let p = kjson(&k, &["get", "pod", "bound"]);
    assert_eq!(
        p["metadata"]["deletionTimestamp"], "9999-12-30T22:00:00Z",
        "{p}"
    );
    assert_eq!(
        p["metadata"]["deletionGracePeriodSeconds"],
        json!(i64::MAX),
        "{p}"
    );
    k.ok(&["delete", "pod", "bound", "--grace-period=0", "--force"]);

    let deployment = |name: &str, replicas: u32| {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
               "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                        "template": {"metadata": {"labels": {"app": name}},
                                     "spec": {"terminationGracePeriodSeconds": i64::MAX,
                                              "activeDeadlineSeconds": i64::MAX,
                                              "containers": [{"name": "c", "image": "busybox"}]}}}})
        .to_string()
    };
    let pods = |app: &str| {
        kjson(&k, &["get", "pods", "-l", &format!("app={app}")])["items"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    };
    let running = |app: &str| {
        pods(app)
            .iter()
            .filter(|p| p["status"]["phase"] == "Running")
            .count()
    };
    k.ok_stdin(&["create", "-f", "-"], Some(&deployment("forever", 3)));
    wait_for("3 pods running", Duration::from_secs(90), || {
        (running("forever") == 3).then_some(())
    });
    k.ok(&["scale", "deployment", "forever", "--replicas=0"]);
    wait_for("the pods gone", Duration::from_secs(90), || {
        pods("forever").is_empty().then_some(())
    });

    // The ReplicaSet controller still works.
    k.ok_stdin(&["create", "-f", "-"], Some(&deployment("after", 2)));
    wait_for("2 pods running", Duration::from_secs(90), || {
        (running("after") == 2).then_some(())
    });
    let log = server.log();
    assert!(!log.contains("panicked"), "the server panicked:\n{log}");
}
