//! The aggregation layer end to end: a small HTTPS extension API server started by the test
//! (trusting only k3rs's request-header CA for client certificates) is registered by an
//! APIService, a selector-less Service and manual Endpoints on loopback. Through k3rs,
//! `kubectl get --raw` reaches it as the authenticated user (front-proxy certificate and
//! `X-Remote-*` headers), `kubectl api-resources` lists its resources and the APIService is
//! `Available`. Stopped, it becomes `Available=False` (`FailedDiscoveryCheck`) and its group
//! leaves discovery while discovery and the built-in APIs keep working; an APIService whose
//! Service does not exist is `ServiceNotFound`. Built-in groups have `Local` APIServices, and
//! `kube-system/extension-apiserver-authentication` publishes the CAs extension servers trust.

use std::sync::Arc;

use base64::Engine;
use serde_json::{json, Value};

use crate::common::kubectl::{wait_json, Kubectl};
use crate::common::tls_server::{self, Received};

const GROUP_VERSION: &str = "/apis/wardle.example.com/v1alpha1";

/// The extension server: its discovery and a list of flunders naming who asked, for the
/// aggregation layer's certificate only.
fn wardle(r: &Received) -> (u16, String) {
    if r.client_cn.as_deref() != Some("system:auth-proxy") {
        return (401, json!({"kind": "Status", "code": 401}).to_string());
    }
    let path = r.path.split('?').next().unwrap_or("");
    match path {
        GROUP_VERSION => (
            200,
            json!({"kind": "APIResourceList", "apiVersion": "v1",
                "groupVersion": "wardle.example.com/v1alpha1",
                "resources": [{"name": "flunders", "singularName": "flunder", "namespaced": true,
                    "kind": "Flunder", "verbs": ["get", "list"]}]})
            .to_string(),
        ),
        p if p == format!("{GROUP_VERSION}/namespaces/default/flunders") => {
            let user = r.header("x-remote-user").concat();
            let groups = r.header("x-remote-group");
            (
                200,
                json!({"kind": "FlunderList", "apiVersion": "wardle.example.com/v1alpha1",
                    "metadata": {}, "items": [{"kind": "Flunder",
                    "metadata": {"name": format!("seen-by-{user}"), "namespace": "default"},
                    "groups": groups,
                    "authorization": r.header("authorization")}]})
                .to_string(),
            )
        }
        _ => (404, json!({"kind": "Status", "code": 404}).to_string()),
    }
}

fn registration(port: u16, ca_pem: &[u8]) -> String {
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    format!(
        r#"
apiVersion: v1
kind: Namespace
metadata: {{name: wardle}}
---
apiVersion: v1
kind: Service
metadata: {{name: api, namespace: wardle}}
spec:
  ports: [{{name: https, port: 443, targetPort: {port}}}]
---
apiVersion: v1
kind: Endpoints
metadata: {{name: api, namespace: wardle}}
subsets:
- addresses: [{{ip: 127.0.0.1}}]
  ports: [{{name: https, port: {port}}}]
---
{}"#,
        api_service(
            "v1alpha1.wardle.example.com",
            "wardle.example.com",
            &format!("service: {{namespace: wardle, name: api, port: 443}}\n  caBundle: {ca}")
        )
    )
}

/// APIService `<version>.<group>` named `name` (the version is its first label), with `spec`
/// lines after the priorities (indented by two spaces).
fn api_service(name: &str, group: &str, spec: &str) -> String {
    let version = name.split('.').next().unwrap_or("");
    format!(
        r#"apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {{name: {name}}}
spec:
  group: {group}
  version: {version}
  groupPriorityMinimum: 1000
  versionPriority: 15
  {spec}
"#
    )
}

/// The `Available` condition of APIService `name`, once `check` holds for it.
fn available(k: &Kubectl, name: &str, check: impl Fn(&Value) -> bool) -> Value {
    let find = |v: &Value| {
        v["status"]["conditions"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["type"] == "Available").cloned())
    };
    let v = wait_json(
        k,
        &format!("APIService {name}'s Available condition"),
        &["get", "apiservice", name],
        |v| find(v).is_some_and(|c| check(&c)),
    );
    find(&v).unwrap_or_default()
}

fn groups(k: &Kubectl) -> Vec<String> {
    let v: Value = serde_json::from_str(&k.ok(&["get", "--raw", "/apis"])).unwrap();
    v["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["name"].as_str().unwrap_or("").to_string())
        .collect()
}

#[test]
fn an_extension_api_server_is_reached_through_the_aggregation_layer() {
    let (server, k) = Kubectl::start_server(&[]);
    let request_header_ca = server.data_dir().join("server/tls/request-header-ca.crt");
    let dir = tempfile::tempdir().unwrap();
    let ext = tls_server::start_with(
        dir.path(),
        &["api.wardle.svc"],
        Some(&request_header_ca),
        Arc::new(wardle),
    );

    // Extension servers find the CAs to trust where upstream publishes them.
    let trust = wait_json(
        &k,
        "the extension-apiserver-authentication ConfigMap",
        &[
            "get",
            "configmap",
            "-n",
            "kube-system",
            "extension-apiserver-authentication",
        ],
        |v| v["data"].is_object(),
    );
    let data = &trust["data"];
    assert_eq!(
        data["requestheader-client-ca-file"].as_str(),
        Some(
            std::fs::read_to_string(&request_header_ca)
                .unwrap()
                .as_str()
        )
    );
    assert_eq!(
        data["requestheader-allowed-names"],
        "[\"system:auth-proxy\"]"
    );
    assert_eq!(
        data["requestheader-username-headers"],
        "[\"X-Remote-User\"]"
    );
    assert!(data["client-ca-file"]
        .as_str()
        .unwrap()
        .contains("BEGIN CERTIFICATE"));
    k.ok(&[
        "get",
        "role",
        "-n",
        "kube-system",
        "extension-apiserver-authentication-reader",
    ]);

    // Built-in groups are registered as Local APIServices.
    let local = available(&k, "v1.apps", |c| c["status"] == "True");
    assert_eq!(local["reason"], "Local");
    available(&k, "v1.", |c| c["status"] == "True");

    let ca = std::fs::read(&ext.ca).unwrap();
    k.ok_stdin(&["apply", "-f", "-"], Some(&registration(ext.port, &ca)));
    let up = available(&k, "v1alpha1.wardle.example.com", |c| c["status"] == "True");
    assert_eq!(up["reason"], "Passed", "{up}");

    // Through k3rs, as the authenticated user, without the client's credentials.
    let list: Value = serde_json::from_str(&k.ok(&[
        "get",
        "--raw",
        &format!("{GROUP_VERSION}/namespaces/default/flunders"),
    ]))
    .unwrap();
    let item = &list["items"][0];
    assert_eq!(item["metadata"]["name"], "seen-by-system:admin", "{list}");
    let groups_seen = item["groups"].as_array().unwrap();
    assert!(groups_seen.contains(&json!("system:masters")), "{list}");
    assert_eq!(item["authorization"], json!([]), "{list}");
    assert!(
        ext.count(|r| r.client_cn.as_deref() == Some("system:auth-proxy")) >= 2,
        "the discovery check and the list came through the front proxy"
    );

    // In discovery: legacy, aggregated (kubectl api-resources) and the APIService table.
    assert!(groups(&k).contains(&"wardle.example.com".to_string()));
    let resources = k.ok(&[
        "api-resources",
        "--api-group=wardle.example.com",
        "--no-headers",
    ]);
    let row: Vec<&str> = resources.split_whitespace().collect();
    assert_eq!(
        row,
        ["flunders", "wardle.example.com/v1alpha1", "true", "Flunder"],
        "{resources}"
    );
    let table = k.ok(&["get", "apiservices"]);
    let wardle_row = table
        .lines()
        .find(|l| l.starts_with("v1alpha1.wardle.example.com"))
        .unwrap_or_else(|| panic!("{table}"));
    assert!(
        wardle_row.contains("wardle/api") && wardle_row.contains("True"),
        "{table}"
    );
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("v1.apps ") && l.contains("Local")),
        "{table}"
    );

    // Stopped: unavailable with the reason, gone from discovery, nothing else breaks.
    ext.stop();
    let down = available(&k, "v1alpha1.wardle.example.com", |c| {
        c["status"] == "False"
    });
    assert_eq!(down["reason"], "FailedDiscoveryCheck", "{down}");
    assert!(
        down["message"]
            .as_str()
            .unwrap_or("")
            .starts_with("failing or missing response from https://127.0.0.1:"),
        "{down}"
    );
    assert!(!groups(&k).contains(&"wardle.example.com".to_string()));
    let all = k.ok(&["api-resources", "--no-headers"]);
    assert!(!all.contains("flunders"), "{all}");
    assert!(all.contains("deployments"), "{all}");
    k.ok(&["get", "pods", "-A"]);
    k.fails_with(
        &[
            "get",
            "--raw",
            &format!("{GROUP_VERSION}/namespaces/default/flunders"),
        ],
        None,
        "ServiceUnavailable",
    );

    // Bad input: an APIService whose Service does not exist.
    let missing_service =
        "insecureSkipTLSVerify: true\n  service: {namespace: wardle, name: nothing-here}";
    k.ok_stdin(
        &["apply", "-f", "-"],
        Some(&api_service(
            "v1.missing.example.com",
            "missing.example.com",
            missing_service,
        )),
    );
    let missing = available(&k, "v1.missing.example.com", |c| c["status"] == "False");
    assert_eq!(missing["reason"], "ServiceNotFound", "{missing}");
    assert_eq!(
        missing["message"],
        "service/nothing-here in \"wardle\" is not present"
    );
    // And an invalid one is refused with a Status.
    k.fails_with(
        &["apply", "-f", "-"],
        Some(&api_service("v1.wrong-name.example.com", "other.example.com", "")),
        "metadata.name: Invalid value: \"v1.wrong-name.example.com\": must be `spec.version+\".\"+spec.group`",
    );
}
