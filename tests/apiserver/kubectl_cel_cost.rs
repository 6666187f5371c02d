//! End to end: upstream's CEL cost limits with the real `k3rs server` and the real
//! `kubectl`. A CRD whose rule is too expensive for its schema is refused with upstream's
//! message and accepted once `maxItems`/`maxLength` bound it; an object that makes an
//! accepted rule too expensive is refused with the run-time messages (per-call limit,
//! then the object's budget); a ValidatingAdmissionPolicy expression too expensive for
//! the object denies under `failurePolicy: Fail`. Meanwhile the server keeps answering and
//! its thread count stays bounded (no thread per evaluation).

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::kubectl::Kubectl;

const PAIRWISE: &str = "self.all(x, self.exists(y, x == y))";

/// A CRD `tags.example.com` whose `spec.tags` (strings, bounded by `bounds`) carries
/// `rules` copies of [`PAIRWISE`].
fn tags_crd(bounds: Value, rules: usize) -> String {
    let mut tags = json!({"type": "array", "items": {"type": "string"},
        "x-kubernetes-validations": vec![json!({"rule": PAIRWISE}); rules]});
    for (k, v) in bounds.as_object().into_iter().flatten() {
        if k == "maxLength" {
            tags["items"][k] = v.clone();
        } else {
            tags[k] = v.clone();
        }
    }
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "tags.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "tags", "kind": "Tag"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {"tags": tags}}}}}}]}})
    .to_string()
}

fn tag(name: &str, n: usize) -> String {
    let tags: Vec<String> = (0..n).map(|i| format!("tag-{i:011}")).collect();
    json!({"apiVersion": "example.com/v1", "kind": "Tag",
        "metadata": {"name": name, "namespace": "default"}, "spec": {"tags": tags}})
    .to_string()
}

/// The server's thread count (`Threads:` of `/proc/<pid>/status`).
fn threads(pid: u32) -> usize {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse().ok())
        .expect("Threads: in /proc/<pid>/status")
}

#[test]
fn crd_rule_costs_are_estimated_and_enforced() {
    let (server, k) = Kubectl::start_server(&["--disable-agent"]);
    let pid = server.pid().expect("the server's pid");

    // Unbounded: the pairwise rule could compare a million strings with a million.
    let err = k.fails_with(
        &["apply", "-f", "-"],
        Some(&tags_crd(json!({}), 1)),
        "is invalid",
    );
    assert!(
        err.contains("spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[tags].x-kubernetes-validations[0].rule: Forbidden: estimated rule cost exceeds budget by factor of more than 100x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"),
        "{err}"
    );
    assert!(!k.run(&["get", "crd", "tags.example.com"]).ok);

    // Bounded, it is accepted.
    let bounded = json!({"maxItems": 600, "maxLength": 15});
    k.ok_stdin(&["apply", "-f", "-"], Some(&tags_crd(bounded.clone(), 1)));
    k.crd_established("tags.example.com");
    k.ok_stdin(&["apply", "-f", "-"], Some(&tag("few", 20)));

    // The schema allows 600 tags, but 600 of them make this one evaluation too dear: it is
    // refused before it runs, with cel-go's per-call error.
    let err = k.fails_with(&["apply", "-f", "-"], Some(&tag("many", 600)), "is invalid");
    assert!(
        err.contains("spec.tags: Invalid value: \"array\": 'operation cancelled: actual cost limit exceeded': no further validation rules will be run due to call cost exceeds limit for rule: self.all(x, self.exists(y, x == y))"),
        "{err}"
    );

    // Twenty rules each within the per-call limit exhaust the object's budget together.
    let tighter = json!({"maxItems": 500, "maxLength": 15});
    k.ok_stdin(&["apply", "-f", "-"], Some(&tags_crd(tighter, 20)));
    let deadline = Instant::now() + Duration::from_secs(20);
    for attempt in 0.. {
        let name = format!("budget-{attempt}");
        let out = k.run_stdin(&["apply", "-f", "-"], Some(&tag(&name, 250)));
        if !out.ok {
            assert!(
                out.stderr.contains("spec.tags: Invalid value: \"array\": validation failed due to running out of cost budget, no further validation rules will be run"),
                "{out:?}"
            );
            break;
        }
        // Still validated by the one-rule schema: wait for the update to be served.
        k.ok(&["delete", "tag", &name]);
        assert!(
            Instant::now() < deadline,
            "the twenty rules never took effect"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    k.ok_stdin(&["apply", "-f", "-"], Some(&tag("fine", 30)));

    // Hostile objects from several clients at once: each is answered quickly, the server
    // stays responsive, and its threads do not grow with the number of requests.
    let before = threads(pid);
    let clients = 4;
    let per_client = 10;
    let started = Instant::now();
    std::thread::scope(|s| {
        for c in 0..clients {
            let k = &k;
            s.spawn(move || {
                for i in 0..per_client {
                    let t = Instant::now();
                    let out = k.run_stdin(
                        &["apply", "-f", "-"],
                        Some(&tag(&format!("hostile-{c}-{i}"), 500)),
                    );
                    assert!(!out.ok, "{out:?}");
                    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
                }
            });
        }
        let t = Instant::now();
        let ready = k.ok(&["get", "--raw", "/readyz"]);
        assert_eq!(ready.trim(), "ok");
        assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    });
    let after = threads(pid);
    println!(
        "{} hostile requests in {:?}: server threads {before} -> {after}",
        clients * per_client,
        started.elapsed()
    );
    assert!(
        after <= before + clients + 2,
        "threads grew from {before} to {after} over {} requests",
        clients * per_client
    );
}

const PAIRWISE_POLICY: &str = r#"
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: distinct-keys}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [configmaps]}
  validations:
  - expression: "!has(object.data) || object.data.all(a, object.data.exists_one(b, a == b))"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: distinct-keys}
spec:
  policyName: distinct-keys
  validationActions: [Deny]
  matchResources:
    namespaceSelector: {matchLabels: {cel: cost}}
"#;

fn config_map(name: &str, keys: usize) -> String {
    let data: serde_json::Map<String, Value> = (0..keys)
        .map(|i| (format!("key-{i:06}"), json!("v")))
        .collect();
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "cost"}, "data": data})
    .to_string()
}

#[test]
fn policy_expression_costs_are_enforced() {
    let (_server, k) = Kubectl::start_server(&["--disable-agent"]);
    k.ok(&["create", "namespace", "cost"]);
    k.ok(&["label", "namespace", "cost", "cel=cost"]);
    k.ok_stdin(&["apply", "-f", "-"], Some(PAIRWISE_POLICY));
    // The policy takes effect once the plugin's cache has it.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let out = k.run_stdin(&["apply", "-f", "-"], Some(&config_map("big", 3000)));
        if !out.ok {
            assert!(
                out.stderr.contains("expression '!has(object.data) || object.data.all(a, object.data.exists_one(b, a == b))' resulted in error: operation cancelled: actual cost limit exceeded"),
                "{out:?}"
            );
            break;
        }
        k.ok(&["delete", "configmap", "big", "-n", "cost"]);
        assert!(Instant::now() < deadline, "the policy never took effect");
        std::thread::sleep(Duration::from_millis(300));
    }
    k.ok_stdin(&["apply", "-f", "-"], Some(&config_map("small", 30)));
}
