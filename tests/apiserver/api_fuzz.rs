//! A seeded fuzz test over the HTTP API: random mutations of valid objects, patches of every
//! type, JSON and YAML bodies, odd query parameters, through every verb. No answer is a 5xx,
//! the server answers `/readyz` after every case, and its RSS stays under a bound printed at
//! the end. `K3RS_FUZZ_SEED` / `K3RS_FUZZ_CASES` reproduce or extend a run.

use bytes::Bytes;
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use serde_json::{json, Map, Value};

use crate::common::client::runtime;
use crate::common::kube::{KubeClient, Kubeconfig};
use crate::common::kubectl::Kubectl;
use crate::common::stats::{env_usize, rss_mib};

const NS: &str = "/api/v1/namespaces/fuzz";

/// Valid objects to start from: `(collection path, object)`.
fn seeds() -> Vec<(String, Value)> {
    let apps = "/apis/apps/v1/namespaces/fuzz";
    let pod_spec = json!({"containers": [{"name": "c", "image": "busybox",
        "ports": [{"containerPort": 80, "name": "http"}],
        "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
        "env": [{"name": "A", "value": "b"}]}],
        "terminationGracePeriodSeconds": 30});
    vec![
        (
            format!("{NS}/configmaps"),
            json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cm", "labels": {"a": "b"}}, "data": {"k": "v"}}),
        ),
        (
            format!("{NS}/secrets"),
            json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "s"}, "type": "Opaque", "data": {"k": "dg=="}}),
        ),
        (
            format!("{NS}/services"),
            json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "svc"}, "spec": {"selector": {"a": "b"},
            "ports": [{"port": 80, "targetPort": 8080, "protocol": "TCP"}]}}),
        ),
        (
            format!("{NS}/pods"),
            json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "labels": {"a": "b"}}, "spec": pod_spec}),
        ),
        (
            format!("{apps}/deployments"),
            json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d"}, "spec": {"replicas": 0,
            "selector": {"matchLabels": {"a": "b"}},
            "template": {"metadata": {"labels": {"a": "b"}}, "spec": pod_spec}}}),
        ),
        (
            "/apis/batch/v1/namespaces/fuzz/jobs".into(),
            json!({"apiVersion": "batch/v1",
            "kind": "Job", "metadata": {"name": "j"}, "spec": {"suspend": true,
            "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c",
            "image": "busybox"}]}}}}),
        ),
        (
            "/apis/rbac.authorization.k8s.io/v1/namespaces/fuzz/roles".into(),
            json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "r"}, "rules": [{"apiGroups": [""], "resources": ["pods"],
            "verbs": ["get"]}]}),
        ),
    ]
}

/// A value chosen to sit at the edge of some type.
fn odd_value(rng: &mut StdRng) -> Value {
    match rng.random_range(0..16) {
        0 => json!(i64::MAX),
        1 => json!(i64::MIN),
        2 => json!(u64::MAX),
        3 => json!(-1),
        4 => json!(1e308),
        5 => json!(0.5),
        6 => json!(""),
        7 => json!("x".repeat(rng.random_range(1..20_000))),
        8 => Value::Null,
        9 => json!({}),
        10 => json!([]),
        11 => (0..rng.random_range(1..100)).fold(json!(1), |v, _| json!([v])),
        12 => json!("9999999999999999999999999999Ei"),
        13 => json!("-1"),
        14 => json!(true),
        _ => json!({"x": [1, "a", null, {"y": false}]}),
    }
}

/// Every JSON pointer into `v`.
fn pointers(v: &Value, at: String, out: &mut Vec<String>) {
    match v {
        Value::Object(o) => o.iter().for_each(|(k, c)| {
            let p = format!("{at}/{}", k.replace('~', "~0").replace('/', "~1"));
            out.push(p.clone());
            pointers(c, p, out);
        }),
        Value::Array(a) => a.iter().enumerate().for_each(|(i, c)| {
            let p = format!("{at}/{i}");
            out.push(p.clone());
            pointers(c, p, out);
        }),
        _ => {}
    }
}

/// `obj` with one to three random changes (replace, remove, add a key).
fn mutate(rng: &mut StdRng, obj: &Value) -> Value {
    let mut obj = obj.clone();
    for _ in 0..rng.random_range(1..4) {
        let mut ps = Vec::new();
        pointers(&obj, String::new(), &mut ps);
        let Some(p) = ps.choose(rng).cloned() else {
            break;
        };
        let new = odd_value(rng);
        match rng.random_range(0..3) {
            0 => {
                if let Some(slot) = obj.pointer_mut(&p) {
                    *slot = new;
                }
            }
            1 => {
                let (parent, key) = p.rsplit_once('/').unwrap();
                match obj.pointer_mut(parent) {
                    Some(Value::Object(o)) => {
                        o.remove(&key.replace("~1", "/").replace("~0", "~"));
                    }
                    Some(Value::Array(a)) if !a.is_empty() => {
                        a.pop();
                    }
                    _ => {}
                }
            }
            _ => {
                if let Some(Value::Object(o)) = obj.pointer_mut(&p) {
                    o.insert(format!("fuzz{}", rng.random_range(0..9)), new);
                }
            }
        }
    }
    obj
}

/// A JSON patch of one to four random operations on `obj`'s pointers.
fn json_patch(rng: &mut StdRng, obj: &Value) -> Value {
    let mut ps = vec![String::new()];
    pointers(obj, String::new(), &mut ps);
    let ops = (0..rng.random_range(1..5))
        .map(|_| {
            let path = ps.choose(rng).unwrap().clone();
            let from = ps.choose(rng).unwrap().clone();
            let op = ["add", "remove", "replace", "move", "copy", "test", "bogus"]
                .choose(rng)
                .unwrap();
            let mut m = Map::new();
            m.insert("op".into(), json!(op));
            m.insert("path".into(), json!(path));
            m.insert("from".into(), json!(from));
            m.insert("value".into(), odd_value(rng));
            Value::Object(m)
        })
        .collect();
    Value::Array(ops)
}

/// A random query string: real parameter names with odd values, sometimes repeated.
fn query(rng: &mut StdRng) -> String {
    let names = [
        "labelSelector",
        "fieldSelector",
        "limit",
        "continue",
        "resourceVersion",
        "resourceVersionMatch",
        "dryRun",
        "fieldManager",
        "fieldValidation",
        "gracePeriodSeconds",
        "propagationPolicy",
        "orphanDependents",
        "pretty",
        "force",
        "timeoutSeconds",
    ];
    let values = [
        "",
        "a%3Db",
        "a%20in%20(b,c)",
        "!a",
        "metadata.name%3Dcm",
        "metadata.name%3D%3Dcm",
        "spec.nodeName!%3D",
        "-1",
        "0",
        "1",
        "9223372036854775807",
        "99999999999999999999999",
        "All",
        "Strict",
        "Orphan",
        "Foreground",
        "NotOlderThan",
        "true",
        "%E2%98%83",
        "%00",
        "a%3D%3D%3Db%2C%2C",
    ];
    (0..rng.random_range(0..5))
        .map(|_| {
            format!(
                "{}={}",
                names.choose(rng).unwrap(),
                values.choose(rng).unwrap()
            )
        })
        .collect::<Vec<_>>()
        .join("&")
}

/// One request of case `i`: `(method, path, content type, body)`.
fn case(rng: &mut StdRng, seeds: &[(String, Value)]) -> (String, String, String, Option<Bytes>) {
    let (collection, seed) = seeds.choose(rng).unwrap();
    let name = seed["metadata"]["name"].as_str().unwrap();
    let item = format!("{collection}/{name}");
    let q = query(rng);
    let with_q = |p: &str| {
        if q.is_empty() {
            p.to_string()
        } else {
            format!("{p}?{q}")
        }
    };
    let as_body = |rng: &mut StdRng, v: &Value| -> (String, Bytes) {
        // JSON is YAML too; now and then the bytes are cut short.
        let mut bytes = v.to_string().into_bytes();
        if rng.random_bool(0.05) {
            bytes.truncate(rng.random_range(0..bytes.len().max(1)));
        }
        let ctype = if rng.random_bool(0.3) {
            "application/yaml"
        } else {
            "application/json"
        };
        (ctype.into(), Bytes::from(bytes))
    };
    match rng.random_range(0..9) {
        0 => {
            let mut obj = mutate(rng, seed);
            if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
                m.insert(
                    "name".into(),
                    json!(format!("{name}-{}", rng.random_range(0..1000))),
                );
            }
            let (t, b) = as_body(rng, &obj);
            ("POST".into(), with_q(collection), t, Some(b))
        }
        1 => {
            let obj = mutate(rng, seed);
            let (t, b) = as_body(rng, &obj);
            ("PUT".into(), with_q(&item), t, Some(b))
        }
        2 => {
            let b = Bytes::from(json_patch(rng, seed).to_string());
            (
                "PATCH".into(),
                with_q(&item),
                "application/json-patch+json".into(),
                Some(b),
            )
        }
        3 | 4 => {
            let t = [
                "application/merge-patch+json",
                "application/strategic-merge-patch+json",
            ]
            .choose(rng)
            .unwrap();
            let b = Bytes::from(mutate(rng, seed).to_string());
            ("PATCH".into(), with_q(&item), t.to_string(), Some(b))
        }
        5 => {
            let path = format!("{item}?fieldManager=fuzz&{q}");
            let obj = mutate(rng, seed);
            let (_, b) = as_body(rng, &obj);
            (
                "PATCH".into(),
                path,
                "application/apply-patch+yaml".into(),
                Some(b),
            )
        }
        6 => (
            "GET".into(),
            with_q(collection),
            "application/json".into(),
            None,
        ),
        7 => {
            let body = rng.random_bool(0.5).then(|| {
                Bytes::from(
                    mutate(rng, &json!({"kind": "DeleteOptions", "apiVersion": "v1",
                                        "gracePeriodSeconds": 0, "propagationPolicy": "Background"}))
                    .to_string(),
                )
            });
            (
                "DELETE".into(),
                with_q(&item),
                "application/json".into(),
                body,
            )
        }
        _ => {
            let garbage: Vec<u8> = (0..rng.random_range(0..2048))
                .map(|_| rng.random())
                .collect();
            let t = [
                "application/json",
                "application/yaml",
                "application/vnd.kubernetes.protobuf",
            ]
            .choose(rng)
            .unwrap();
            (
                "POST".into(),
                collection.clone(),
                t.to_string(),
                Some(Bytes::from(garbage)),
            )
        }
    }
}

#[test]
fn random_requests_never_get_a_5xx_nor_hurt_the_server() {
    let seed = env_usize("K3RS_FUZZ_SEED", 0x6b33_7273) as u64;
    let cases = env_usize("K3RS_FUZZ_CASES", 300);
    let (server, k) = Kubectl::start_server(&[]);
    k.ok(&["create", "namespace", "fuzz"]);
    let pid = server.pid().expect("server pid");
    let rt = runtime();
    rt.block_on(async {
        let c = KubeClient::connect(&Kubeconfig::read(&server.kubeconfig()).unwrap())
            .await
            .unwrap();
        let seeds = seeds();
        for (collection, obj) in &seeds {
            c.ok("POST", collection, Some(obj)).await.unwrap();
        }
        let before = rss_mib(pid);
        let mut peak = before;
        let mut rng = StdRng::seed_from_u64(seed);
        let mut codes = std::collections::BTreeMap::<u16, usize>::new();
        for i in 0..cases {
            let (method, path, ctype, body) = case(&mut rng, &seeds);
            let (code, answer) = c
                .raw(&method, &path, &ctype, body)
                .await
                .unwrap_or_else(|e| panic!("case {i} (seed {seed}) {method} {path}: {e:#}"));
            *codes.entry(code).or_default() += 1;
            assert!(
                (200..500).contains(&code),
                "case {i} (seed {seed}): {method} {path} ({ctype}) answered {code}: {}",
                String::from_utf8_lossy(&answer)
            );
            let (ready, text) = c
                .raw("GET", "/readyz", "application/json", None)
                .await
                .unwrap();
            assert_eq!(
                ready,
                200,
                "/readyz after case {i} (seed {seed}) {method} {path}: {}",
                String::from_utf8_lossy(&text)
            );
            peak = peak.max(rss_mib(pid));
        }
        println!("seed {seed}, {cases} cases, answers {codes:?}");
        println!("RSS before {before:.0} MiB, peak {peak:.0} MiB (bound: before + 200 MiB)");
        assert!(
            peak < before + 200.0,
            "RSS grew from {before:.0} to {peak:.0} MiB"
        );
    });
    assert!(!server.log().contains("panicked"), "the server panicked");
}
