//! End to end: admission webhooks with the real `k3rs server`, stock `kubectl` and a
//! loopback HTTPS service the test plays. A MutatingWebhookConfiguration's patch lands in
//! the stored object, a ValidatingWebhookConfiguration allows (with a warning) or denies in
//! kube-apiserver's words, the review carries what upstream sends, failurePolicy decides
//! what an unreachable or slow webhook means, invalid configurations are refused, and
//! deleting a configuration stops the calls.

use std::sync::Arc;
use std::time::Duration;

use crate::common;
use crate::common::audit_log::{s, wait_event};
use crate::common::kubectl::{table, Kubectl};
use crate::common::tls_server::{self, Received};
use base64::Engine;
use serde_json::{json, Value};

/// The service: `/mutate` annotates, `/validate` refuses objects labelled `forbidden`,
/// `/slow` answers after 3 s.
fn answer(r: &Received) -> (u16, String) {
    let review: Value = serde_json::from_str(&r.body).unwrap_or_default();
    let req = &review["request"];
    let uid = req["uid"].clone();
    let response = match r.path.as_str() {
        "/mutate" => {
            let patch = json!([{"op": "add", "path": "/metadata/annotations",
                "value": {"mutated-by": "webhook"}}]);
            json!({"uid": uid, "allowed": true, "patchType": "JSONPatch",
                "patch": base64::engine::general_purpose::STANDARD.encode(patch.to_string())})
        }
        "/validate" if req["object"]["metadata"]["labels"]["forbidden"] == "true" => {
            json!({"uid": uid, "allowed": false,
                "status": {"code": 403, "message": "objects labelled forbidden are not welcome"}})
        }
        "/validate" => {
            json!({"uid": uid, "allowed": true, "warnings": ["validated by the test webhook"]})
        }
        "/slow" => {
            std::thread::sleep(Duration::from_secs(3));
            json!({"uid": uid, "allowed": false})
        }
        _ => return (404, "{}".into()),
    };
    (
        200,
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response})
            .to_string(),
    )
}

fn configuration(kind: &str, name: &str, url: &str, ca: &str, extra: &str) -> String {
    format!(
        r#"apiVersion: admissionregistration.k8s.io/v1
kind: {kind}
metadata: {{name: {name}}}
webhooks:
- name: {name}.example.com
  clientConfig: {{url: "{url}", caBundle: "{ca}"}}
  sideEffects: None
  admissionReviewVersions: [v1]
  namespaceSelector: {{matchLabels: {{hooks: "on"}}}}
{extra}"#
    )
}

fn rules(resources: &str) -> String {
    format!("  rules:\n  - {{apiGroups: [\"\"], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [{resources}]}}\n")
}

#[test]
fn mutating_and_validating_webhooks() {
    let dir = tempfile::tempdir().unwrap();
    let hook = tls_server::start(dir.path(), Arc::new(answer));
    let ca = base64::engine::general_purpose::STANDARD.encode(std::fs::read(&hook.ca).unwrap());
    let (_server, k) = Kubectl::start_server(&["--disable-agent"]);
    k.ok(&["create", "namespace", "hooked"]);
    k.ok(&["label", "namespace", "hooked", "hooks=on"]);
    k.ok(&["create", "namespace", "plain"]);

    let mutate = configuration(
        "MutatingWebhookConfiguration",
        "annotate",
        &format!("{}/mutate", hook.url()),
        &ca,
        &rules("configmaps"),
    );
    let validate = configuration(
        "ValidatingWebhookConfiguration",
        "validate",
        &format!("{}/validate", hook.url()),
        &ca,
        &rules("configmaps"),
    );
    k.ok_stdin(&["apply", "-f", "-"], Some(&mutate));
    k.ok_stdin(&["apply", "-f", "-"], Some(&validate));

    // Both are called (the cache follows a watch: bounded retry), the patch is stored and
    // the warning reaches kubectl.
    let mut n = 0;
    let (name, out) = common::wait_for("the webhooks", Duration::from_secs(20), || {
        n += 1;
        let name = format!("cm-{n}");
        let out = k.run(&["create", "configmap", &name, "-n", "hooked"]);
        assert!(out.ok, "{out:?}");
        let annotated = k.ok(&[
            "get",
            "configmap",
            &name,
            "-n",
            "hooked",
            "-o",
            "jsonpath={.metadata.annotations.mutated-by}",
        ]);
        (annotated == "webhook").then_some((name, out))
    });
    assert!(
        out.stderr
            .contains("Warning: validated by the test webhook"),
        "{out:?}"
    );
    // The review carries upstream's fields.
    let reviews: Vec<Value> = hook
        .received
        .lock()
        .unwrap()
        .iter()
        .filter(|r| r.path == "/validate")
        .map(|r| serde_json::from_str(&r.body).unwrap())
        .collect();
    let review = reviews
        .iter()
        .find(|r| r["request"]["name"] == name.as_str())
        .expect("the validating webhook saw the create");
    let req = &review["request"];
    assert_eq!(review["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(
        req["kind"],
        json!({"group": "", "version": "v1", "kind": "ConfigMap"})
    );
    assert_eq!(req["resource"]["resource"], "configmaps");
    assert_eq!(req["operation"], "CREATE");
    assert_eq!(req["namespace"], "hooked");
    assert_eq!(req["userInfo"]["username"], "system:admin");
    assert_eq!(
        req["object"]["metadata"]["annotations"]["mutated-by"], "webhook",
        "validating webhooks see the mutated object"
    );

    // A denial in kube-apiserver's words and with the webhook's code.
    let err = k.fails_with(
        &["create", "-f", "-"],
        Some("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bad, namespace: hooked, labels: {forbidden: \"true\"}}\n"),
        "admission webhook \"validate.example.com\" denied the request: objects labelled forbidden are not welcome",
    );
    // The webhook gave a code but no reason: kubectl prints no reason either.
    assert!(err.contains("Error from server: "), "{err}");
    // Outside the namespace selector nothing is called.
    let before = hook.count(|_| true);
    k.ok_stdin(
        &["create", "-f", "-"],
        Some("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bad, namespace: plain, labels: {forbidden: \"true\"}}\n"),
    );
    assert_eq!(hook.count(|_| true), before);

    // failurePolicy: a slow webhook under Ignore admits after its timeout; an unreachable
    // one under Fail denies.
    let slow = configuration(
        "ValidatingWebhookConfiguration",
        "slow",
        &format!("{}/slow", hook.url()),
        &ca,
        &format!(
            "{}  timeoutSeconds: 1\n  failurePolicy: Ignore\n",
            rules("secrets")
        ),
    );
    let down = configuration(
        "ValidatingWebhookConfiguration",
        "down",
        "https://127.0.0.1:1/",
        &ca,
        &rules("services"),
    );
    k.ok_stdin(&["apply", "-f", "-"], Some(&slow));
    k.ok_stdin(&["apply", "-f", "-"], Some(&down));
    common::wait_for("the unreachable webhook", Duration::from_secs(20), || {
        let out = k.run(&[
            "create",
            "service",
            "clusterip",
            "web",
            "--tcp=80",
            "-n",
            "hooked",
        ]);
        if out.ok {
            k.ok(&["delete", "service", "web", "-n", "hooked"]);
            std::thread::sleep(Duration::from_millis(200));
            return None;
        }
        assert!(
            out.stderr
                .contains("failed calling webhook \"down.example.com\""),
            "{out:?}"
        );
        Some(())
    });
    common::wait_for("the slow webhook", Duration::from_secs(20), || {
        let n = hook.count(|r| r.path == "/slow");
        k.ok(&[
            "create",
            "secret",
            "generic",
            &format!("s-{n}"),
            "-n",
            "hooked",
        ]);
        (hook.count(|r| r.path == "/slow") > n).then_some(())
    });

    // Invalid configurations are refused with field errors.
    let err = k.fails_with(
        &["apply", "-f", "-"],
        Some(&configuration(
            "ValidatingWebhookConfiguration",
            "bad",
            "http://127.0.0.1:1/",
            &ca,
            "",
        )),
        "is invalid",
    );
    assert!(err.contains("webhooks[0].clientConfig.url"), "{err}");

    // kubectl lists them; deleting one stops its calls.
    let t = table(&k.ok(&["get", "validatingwebhookconfigurations"]));
    assert_eq!(t[0], ["NAME", "WEBHOOKS", "AGE"]);
    assert!(t.iter().any(|r| r[0] == "validate" && r[1] == "1"), "{t:?}");
    k.ok(&["delete", "validatingwebhookconfiguration", "validate"]);
    common::wait_for(
        "the deleted webhook to stop",
        Duration::from_secs(20),
        || {
            let ok = k
            .run_stdin(
                &["create", "-f", "-"],
                Some("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bad, namespace: hooked, labels: {forbidden: \"true\"}}\n"),
            )
            .ok;
            if !ok {
                std::thread::sleep(Duration::from_millis(200));
            }
            ok.then_some(())
        },
    );
}

/// The base64 JSON patch response allowing `req` (no patch when `ops` is empty).
fn patched(req: &Value, ops: Vec<Value>) -> Value {
    let uid = req["uid"].clone();
    if ops.is_empty() {
        return json!({"uid": uid, "allowed": true});
    }
    json!({"uid": uid, "allowed": true, "patchType": "JSONPatch",
        "patch": base64::engine::general_purpose::STANDARD.encode(Value::from(ops).to_string())})
}

/// `add` of `key: value` under the object's `field` (labels, annotations).
fn add_to(obj: &Value, field: &str, key: &str, value: &str) -> Value {
    if obj["metadata"][field].is_object() {
        json!({"op": "add", "path": format!("/metadata/{field}/{key}"), "value": value})
    } else {
        json!({"op": "add", "path": format!("/metadata/{field}"), "value": {key: value}})
    }
}

/// Counts the callers waiting for each object name, so that `/rendezvous` can tell whether
/// its two webhooks were called at the same time.
#[derive(Default)]
struct Rendezvous {
    arrived: std::sync::Mutex<std::collections::HashMap<String, usize>>,
    cv: std::sync::Condvar,
}

impl Rendezvous {
    /// Whether another call for `name` arrives (or has) within 3 s of this one.
    fn meet(&self, name: &str) -> bool {
        let mut arrived = self.arrived.lock().unwrap();
        *arrived.entry(name.to_string()).or_default() += 1;
        self.cv.notify_all();
        let (arrived, _) = self
            .cv
            .wait_timeout_while(arrived, Duration::from_secs(3), |a| a[name] < 2)
            .unwrap();
        arrived[name] >= 2
    }
}

/// `/observe` records in an annotation whether the object has label `b`; `/label` adds it;
/// `/rendezvous` admits only when the other validating webhook is called at the same time.
fn reinvocation_service(rendezvous: Arc<Rendezvous>) -> impl Fn(&Received) -> (u16, String) {
    move |r: &Received| {
        let review: Value = serde_json::from_str(&r.body).unwrap_or_default();
        let req = &review["request"];
        let obj = &req["object"];
        let response = match r.path.as_str() {
            "/observe" => {
                let b = obj["metadata"]["labels"]["b"].as_str().unwrap_or("absent");
                patched(req, vec![add_to(obj, "annotations", "observed-b", b)])
            }
            "/label" if obj["metadata"]["labels"]["b"].is_null() => {
                patched(req, vec![add_to(obj, "labels", "b", "set")])
            }
            "/label" => patched(req, vec![]),
            "/rendezvous" => {
                let name = obj["metadata"]["name"].as_str().unwrap_or_default();
                if rendezvous.meet(name) {
                    patched(req, vec![])
                } else {
                    json!({"uid": req["uid"], "allowed": false,
                        "status": {"code": 403, "message": "called one at a time"}})
                }
            }
            _ => return (404, "{}".into()),
        };
        let review = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "response": response});
        (200, review.to_string())
    }
}

#[test]
fn reinvocation_parallel_validation_and_mutation_audit() {
    let dir = tempfile::tempdir().unwrap();
    let hook = tls_server::start(dir.path(), Arc::new(reinvocation_service(Arc::default())));
    let ca = base64::engine::general_purpose::STANDARD.encode(std::fs::read(&hook.ca).unwrap());
    let policy = dir.path().join("audit-policy.yaml");
    std::fs::write(
        &policy,
        "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n  resources:\n  - group: \"\"\n    resources: [configmaps]\n- level: None\n",
    )
    .unwrap();
    let log = dir.path().join("audit.log");
    let (_server, k) = Kubectl::start_server(&[
        "--disable-agent",
        &format!(
            "--kube-apiserver-arg=audit-policy-file={}",
            policy.display()
        ),
        &format!("--kube-apiserver-arg=audit-log-path={}", log.display()),
    ]);
    k.ok(&["create", "namespace", "hooked"]);
    k.ok(&["label", "namespace", "hooked", "hooks=on"]);

    // `a-observe` runs first and asks to be called again if needed; `b-label` then changes
    // the object, so `a-observe` sees the label in the second round.
    let observe = configuration(
        "MutatingWebhookConfiguration",
        "a-observe",
        &format!("{}/observe", hook.url()),
        &ca,
        &format!("{}  reinvocationPolicy: IfNeeded\n", rules("configmaps")),
    );
    let label = configuration(
        "MutatingWebhookConfiguration",
        "b-label",
        &format!("{}/label", hook.url()),
        &ca,
        &rules("configmaps"),
    );
    k.ok_stdin(&["apply", "-f", "-"], Some(&observe));
    k.ok_stdin(&["apply", "-f", "-"], Some(&label));
    let observed = |name: &str| {
        k.ok(&[
            "get",
            "configmap",
            name,
            "-n",
            "hooked",
            "-o",
            "jsonpath={.metadata.labels.b}/{.metadata.annotations.observed-b}",
        ])
    };
    let mut n = 0;
    let name = common::wait_for("both webhooks", Duration::from_secs(20), || {
        n += 1;
        let name = format!("cm-{n}");
        k.ok(&["create", "configmap", &name, "-n", "hooked"]);
        (observed(&name) == "set/set").then_some(name)
    });
    assert_eq!(
        hook.count(|r| r.path == "/observe" && r.body.contains(&format!("\"{name}\""))),
        2,
        "observe is called twice"
    );
    assert_eq!(
        hook.count(|r| r.path == "/label" && r.body.contains(&format!("\"{name}\""))),
        1,
        "label changed the object itself: not called again"
    );
    // Each call is an audit annotation: round, index in the ordered list, and whether it
    // changed the object.
    let event = wait_event(&log, "the create", |e| {
        s(e, "/objectRef/name") == name && s(e, "/stage") == "ResponseComplete"
    });
    let mutation = |round: u8, index: u8| -> Value {
        let key =
            format!("/annotations/mutation.webhook.admission.k8s.io~1round_{round}_index_{index}");
        serde_json::from_str(s(&event, &key)).unwrap_or_else(|e| panic!("{key}: {e}: {event}"))
    };
    assert_eq!(
        mutation(0, 0),
        json!({"configuration": "a-observe", "webhook": "a-observe.example.com", "mutated": true})
    );
    assert_eq!(
        mutation(0, 1),
        json!({"configuration": "b-label", "webhook": "b-label.example.com", "mutated": true})
    );
    assert_eq!(
        mutation(1, 0),
        json!({"configuration": "a-observe", "webhook": "a-observe.example.com", "mutated": true})
    );
    assert!(
        event
            .pointer("/annotations/mutation.webhook.admission.k8s.io~1round_1_index_1")
            .is_none(),
        "{event}"
    );

    // With `Never`, the first round is all there is.
    k.ok(&[
        "patch",
        "mutatingwebhookconfiguration",
        "a-observe",
        "--type=json",
        "-p",
        r#"[{"op": "replace", "path": "/webhooks/0/reinvocationPolicy", "value": "Never"}]"#,
    ]);
    common::wait_for("reinvocation to stop", Duration::from_secs(20), || {
        n += 1;
        let name = format!("cm-{n}");
        k.ok(&["create", "configmap", &name, "-n", "hooked"]);
        (observed(&name) == "set/absent").then_some(())
    });

    // Validating webhooks are called at the same time: each of these two admits only
    // when it meets the other.
    for name in ["p1", "p2"] {
        k.ok_stdin(
            &["apply", "-f", "-"],
            Some(&configuration(
                "ValidatingWebhookConfiguration",
                name,
                &format!("{}/rendezvous", hook.url()),
                &ca,
                &rules("secrets"),
            )),
        );
    }
    common::wait_for("both validating webhooks", Duration::from_secs(40), || {
        n += 1;
        let name = format!("s-{n}");
        let out = k.run(&["create", "secret", "generic", &name, "-n", "hooked"]);
        let called =
            hook.count(|r| r.path == "/rendezvous" && r.body.contains(&format!("\"{name}\"")));
        if !out.ok {
            assert!(out.stderr.contains("called one at a time"), "{out:?}");
        }
        (out.ok && called == 2).then_some(())
    });
}
