//! The aggregation layer end to end: a small HTTPS extension API server started by the test
//! (trusting only k3rs's request-header CA for client certificates) is registered by an
//! APIService, a selector-less Service and manual Endpoints on loopback. Through k3rs,
//! `kubectl get --raw` reaches it as the authenticated user (front-proxy certificate and
//! `X-Remote-*` headers), `kubectl api-resources` lists its resources and the APIService is
//! `Available`. Stopped, it becomes `Available=False` (`FailedDiscoveryCheck`) and its group
//! leaves discovery while discovery and the built-in APIs keep working; an APIService whose
//! Service does not exist is `ServiceNotFound`. Built-in groups have `Local` APIServices, and
//! `kube-system/extension-apiserver-authentication` publishes the CAs extension servers trust.
//! The extension server's aggregated discovery (its short name), its OpenAPI v3 document
//! (`kubectl explain`) and v2 definitions (cached by ETag) are served by k3rs; its group is
//! ordered by priority; deleting and restoring its Endpoints or Service flips `Available`
//! within seconds.

use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::{json, Value};

use crate::common::kubectl::{wait_json, Kubectl};
use crate::common::tls_server::{self, Received, Reply};

const GROUP_VERSION: &str = "/apis/wardle.example.com/v1alpha1";
const AGGREGATED_V2: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
/// The ETag of the extension server's `/openapi/v2`.
const V2_ETAG: &str = "\"wardle-v2\"";

fn flunder_gvk() -> Value {
    json!({"group": "wardle.example.com", "version": "v1alpha1", "kind": "Flunder"})
}

/// The Flunder kind's schema (v3 and v2 alike).
fn flunder_schema() -> Value {
    json!({"type": "object", "description": "A Flunder is a wardle test kind.",
        "properties": {"apiVersion": {"type": "string"}, "kind": {"type": "string"},
            "spec": {"type": "object", "description": "What the flunder refers to.",
                "properties": {"reference": {"type": "string"}}}},
        "x-kubernetes-group-version-kind": [flunder_gvk()]})
}

fn v3_document() -> Value {
    json!({"openapi": "3.0.0", "info": {"title": "wardle", "version": "v0"},
        "paths": {"/apis/wardle.example.com/v1alpha1/namespaces/{namespace}/flunders": {"get": {
            "x-kubernetes-group-version-kind": flunder_gvk(),
            "responses": {"200": {"description": "OK"}}}}},
        "components": {"schemas": {"com.example.wardle.v1alpha1.Flunder": flunder_schema()}}})
}

fn v2_document() -> Value {
    json!({"swagger": "2.0", "info": {"title": "wardle", "version": "v0"},
        "paths": {"/apis/wardle.example.com/v1alpha1/namespaces/{namespace}/flunders": {"get": {
            "x-kubernetes-group-version-kind": flunder_gvk(),
            "responses": {"200": {"description": "OK"}}}}},
        "definitions": {"com.example.wardle.v1alpha1.Flunder": flunder_schema(),
            // A clash with one of k3rs's own: k3rs keeps its own.
            "io.k8s.api.core.v1.Pod": {"type": "object", "description": "wardle's Pod"}}})
}

fn resource_list(version: &str) -> Value {
    json!({"kind": "APIResourceList", "apiVersion": "v1",
        "groupVersion": format!("wardle.example.com/{version}"),
        "resources": [{"name": "flunders", "singularName": "flunder", "namespaced": true,
            "kind": "Flunder", "verbs": ["get", "list"]}]})
}

/// Its aggregated discovery: as the resource lists, plus the short name `fl`.
fn discovery_v2() -> Value {
    let version = |v: &str| {
        json!({"version": v, "freshness": "Current", "resources": [{"resource": "flunders",
            "responseKind": {"group": "wardle.example.com", "version": v, "kind": "Flunder"},
            "scope": "Namespaced", "singularResource": "flunder", "verbs": ["get", "list"],
            "shortNames": ["fl"]}]})
    };
    json!({"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2",
        "metadata": {}, "items": [{"metadata": {"name": "wardle.example.com"},
            "versions": [version("v1beta1"), version("v1alpha1")]}]})
}

/// The extension server: its discovery (legacy and aggregated), its OpenAPI, and a list of
/// flunders naming who asked, for the aggregation layer's certificate only.
fn wardle(r: &Received) -> Reply {
    let json_reply = |code: u16, v: Value| Reply::json(code, v.to_string());
    if r.client_cn.as_deref() != Some("system:auth-proxy") {
        return json_reply(401, json!({"kind": "Status", "code": 401}));
    }
    let path = r.path.split('?').next().unwrap_or("");
    match path {
        GROUP_VERSION => json_reply(200, resource_list("v1alpha1")),
        "/apis/wardle.example.com/v1beta1" => json_reply(200, resource_list("v1beta1")),
        "/apis"
            if r.header("accept")
                .concat()
                .contains("as=APIGroupDiscoveryList") =>
        {
            Reply {
                content_type: AGGREGATED_V2.into(),
                ..Reply::json(200, discovery_v2().to_string())
            }
        }
        "/openapi/v2" if r.header("if-none-match").contains(&V2_ETAG) => {
            Reply::json(304, String::new())
        }
        "/openapi/v2" => Reply {
            headers: vec![("ETag".into(), V2_ETAG.into())],
            ..Reply::json(200, v2_document().to_string())
        },
        "/openapi/v3" => json_reply(
            200,
            json!({"paths": {"apis/wardle.example.com/v1alpha1": {
                "serverRelativeURL": "/openapi/v3/apis/wardle.example.com/v1alpha1?hash=W1"}}}),
        ),
        "/openapi/v3/apis/wardle.example.com/v1alpha1" => json_reply(200, v3_document()),
        p if p == format!("{GROUP_VERSION}/namespaces/default/flunders") => {
            let user = r.header("x-remote-user").concat();
            let groups = r.header("x-remote-group");
            json_reply(
                200,
                json!({"kind": "FlunderList", "apiVersion": "wardle.example.com/v1alpha1",
                    "metadata": {}, "items": [{"kind": "Flunder",
                    "metadata": {"name": format!("seen-by-{user}"), "namespace": "default"},
                    "groups": groups,
                    "authorization": r.header("authorization")}]}),
            )
        }
        _ => json_reply(404, json!({"kind": "Status", "code": 404})),
    }
}

fn registration(port: u16, ca_pem: &[u8]) -> String {
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
{}---
{}"#,
        api_service(
            "v1alpha1.wardle.example.com",
            "wardle.example.com",
            &wardle_service(ca_pem)
        ),
        // Same version priority (kube's version order decides: v1beta1 first); its group
        // priority puts the group between apiregistration.k8s.io (18000) and apps (17800).
        api_service_with(
            "v1beta1.wardle.example.com",
            "wardle.example.com",
            (17900, 15),
            &wardle_service(ca_pem)
        )
    )
}

/// APIService `<version>.<group>` named `name` (the version is its first label), with `spec`
/// lines after the priorities (indented by two spaces).
fn api_service(name: &str, group: &str, spec: &str) -> String {
    api_service_with(name, group, (1000, 15), spec)
}

/// [`api_service`] with `(groupPriorityMinimum, versionPriority)`.
fn api_service_with(name: &str, group: &str, (gp, vp): (i64, i64), spec: &str) -> String {
    let version = name.split('.').next().unwrap_or("");
    format!(
        r#"apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata: {{name: {name}}}
spec:
  group: {group}
  version: {version}
  groupPriorityMinimum: {gp}
  versionPriority: {vp}
  {spec}
"#
    )
}

/// The service-backed part of the wardle APIServices.
fn wardle_service(ca_pem: &[u8]) -> String {
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    format!("service: {{namespace: wardle, name: api, port: 443}}\n  caBundle: {ca}")
}

/// How long after `since` APIService `name` has `Available` with `status` and `reason`.
fn flip_time(k: &Kubectl, name: &str, status: &str, reason: &str, since: Instant) -> Duration {
    let deadline = since + Duration::from_secs(60);
    loop {
        let v = crate::common::kubectl::json(k, &["get", "apiservice", name]);
        let c = v["status"]["conditions"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["type"] == "Available").cloned())
            .unwrap_or_default();
        if c["status"] == status && c["reason"] == reason {
            return since.elapsed();
        }
        assert!(
            Instant::now() < deadline,
            "{name} never became {status}/{reason}: {c}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
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
    let ext = tls_server::start_replying(
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
    available(&k, "v1beta1.wardle.example.com", |c| c["status"] == "True");

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

    // In discovery: legacy (in priority order), aggregated (kubectl api-resources, from the
    // extension server's own aggregated discovery: the short name) and the APIService table.
    let listed = groups(&k);
    let at = |g: &str| listed.iter().position(|x| x == g).unwrap_or(usize::MAX);
    assert_eq!(
        (
            at("apiregistration.k8s.io"),
            at("wardle.example.com"),
            at("apps")
        ),
        (0, 1, 2),
        "{listed:?}"
    );
    let group: Value =
        serde_json::from_str(&k.ok(&["get", "--raw", "/apis/wardle.example.com"])).unwrap();
    assert_eq!(
        group["preferredVersion"]["version"], "v1beta1",
        "kube's version order: {group}"
    );
    let resources = k.ok(&[
        "api-resources",
        "--api-group=wardle.example.com",
        "--no-headers",
    ]);
    let row: Vec<&str> = resources.split_whitespace().collect();
    assert_eq!(
        row,
        [
            "flunders",
            "fl",
            "wardle.example.com/v1beta1",
            "true",
            "Flunder"
        ],
        "{resources}"
    );
    let tls = server.data_dir().join("server/tls");
    let (code, body) = crate::common::https::request_with_headers(
        "GET",
        &format!("{}/apis", server.server_url()),
        &tls.join("server-ca.crt"),
        Some((&tls.join("client-admin.crt"), &tls.join("client-admin.key"))),
        &[&format!("Accept: {AGGREGATED_V2}")],
    );
    assert_eq!(code, 200, "{body}");
    let aggregated: Value = serde_json::from_str(&body).unwrap();
    let names: Vec<&str> = aggregated["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["metadata"]["name"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        names[..3],
        ["apiregistration.k8s.io", "wardle.example.com", "apps"],
        "aggregated discovery in priority order"
    );
    let wardle_versions: Vec<&str> = aggregated["items"][1]["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["version"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(wardle_versions, ["v1beta1", "v1alpha1"]);

    // OpenAPI: the v3 document through k3rs (kubectl explain), the v2 definitions merged.
    let index: Value = serde_json::from_str(&k.ok(&["get", "--raw", "/openapi/v3"])).unwrap();
    let url = index["paths"]["apis/wardle.example.com/v1alpha1"]["serverRelativeURL"]
        .as_str()
        .unwrap_or_else(|| panic!("{index}"));
    assert!(index["paths"]["apis/apps/v1"].is_object(), "{index}");
    let doc: Value = serde_json::from_str(&k.ok(&["get", "--raw", url])).unwrap();
    assert_eq!(doc, v3_document());
    let explained = k.ok(&[
        "explain",
        "flunders",
        "--api-version=wardle.example.com/v1alpha1",
    ]);
    assert!(
        explained.contains("A Flunder is a wardle test kind."),
        "{explained}"
    );
    let v2_has_flunder = |v2: &Value| {
        v2["definitions"]["com.example.wardle.v1alpha1.Flunder"]["description"]
            == "A Flunder is a wardle test kind."
            && v2["paths"]["/apis/wardle.example.com/v1alpha1/namespaces/{namespace}/flunders"]
                .is_object()
    };
    let v2: Value = serde_json::from_str(&k.ok(&["get", "--raw", "/openapi/v2"])).unwrap();
    assert!(v2_has_flunder(&v2), "no flunder in /openapi/v2");
    assert_ne!(
        v2["definitions"]["io.k8s.api.core.v1.Pod"]["description"], "wardle's Pod",
        "k3rs keeps its own definitions"
    );
    assert!(v2["paths"]["/api/v1/namespaces/{namespace}/pods"].is_object());
    // A change of the APIService downloads again, with the ETag: a 304 keeps the document.
    let revalidated =
        || ext.count(|r| r.path == "/openapi/v2" && r.header("if-none-match") == [V2_ETAG]);
    let before = revalidated();
    k.ok(&[
        "patch",
        "apiservice",
        "v1alpha1.wardle.example.com",
        "--type=merge",
        "-p",
        r#"{"spec":{"versionPriority":16}}"#,
    ]);
    let deadline = Instant::now() + Duration::from_secs(30);
    while revalidated() == before {
        assert!(Instant::now() < deadline, "no revalidation of /openapi/v2");
        std::thread::sleep(Duration::from_millis(100));
    }
    let v2: Value = serde_json::from_str(&k.ok(&["get", "--raw", "/openapi/v2"])).unwrap();
    assert!(v2_has_flunder(&v2), "the 304 kept the document");

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

    // Availability follows the Endpoints and the Service within seconds (not the 5 s
    // period): two round trips, each step timed.
    let name = "v1alpha1.wardle.example.com";
    let endpoints = registration(ext.port, &ca);
    for _ in 0..2 {
        k.ok(&["delete", "endpoints", "-n", "wardle", "api"]);
        let gone = flip_time(&k, name, "False", "EndpointsNotFound", Instant::now());
        k.ok_stdin(&["apply", "-f", "-"], Some(&endpoints));
        let back = flip_time(&k, name, "True", "Passed", Instant::now());
        k.ok(&["delete", "service", "-n", "wardle", "api"]);
        let no_service = flip_time(&k, name, "False", "ServiceNotFound", Instant::now());
        k.ok_stdin(&["apply", "-f", "-"], Some(&endpoints));
        let again = flip_time(&k, name, "True", "Passed", Instant::now());
        for (what, took) in [
            ("endpoints deleted", gone),
            ("endpoints back", back),
            ("service deleted", no_service),
            ("service back", again),
        ] {
            assert!(
                took < Duration::from_secs(3),
                "{what}: Available flipped after {took:?}"
            );
        }
    }

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
    let openapi: Value = serde_json::from_str(&k.ok(&["get", "--raw", "/openapi/v3"])).unwrap();
    assert!(
        openapi["paths"]["apis/wardle.example.com/v1alpha1"].is_null(),
        "{openapi}"
    );
    let v2: Value = serde_json::from_str(&k.ok(&["get", "--raw", "/openapi/v2"])).unwrap();
    assert!(
        !v2_has_flunder(&v2),
        "an unavailable server's definitions leave /openapi/v2"
    );
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
