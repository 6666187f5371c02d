//! End to end: admission webhooks with the real `k3rs server`, stock `kubectl` and a
//! loopback HTTPS service the test plays. A MutatingWebhookConfiguration's patch lands in
//! the stored object, a ValidatingWebhookConfiguration allows (with a warning) or denies in
//! kube-apiserver's words, the review carries what upstream sends, failurePolicy decides
//! what an unreachable or slow webhook means, invalid configurations are refused, and
//! deleting a configuration stops the calls.

mod common;

use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use common::kubectl::{table, Kubectl};
use common::tls_server::{self, Received};
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
