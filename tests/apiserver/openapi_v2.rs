//! End to end: `/openapi/v2` of the real `k3rs server`, read by the real `kubectl` (its
//! validation of kinds without a PATCH operation, `kubectl explain
//! --output=plaintext-openapiv2`), as JSON and as gnostic protobuf (decoded with k3rs's
//! messages), compared with discovery; the non-resource paths kube-apiserver lists, each
//! fetched; ETags, 304, a CRD appearing.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

use crate::common;
use crate::common::kubectl::Kubectl;
use crate::common::K3rs;
use k3rs_apiserver::openapi::v2::decode_protobuf;
use k3rs_apiserver::openapi::v2::negotiate::{PROTOBUF, PROTOBUF_DEPRECATED};

/// One answer of `GET /openapi/v2`.
struct Fetched {
    code: u16,
    headers: String,
    body: Vec<u8>,
}

impl Fetched {
    fn header(&self, name: &str) -> Option<String> {
        self.headers.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_string())
        })
    }
}

/// `GET /openapi/v2?timeout=32s` as the admin, with `Accept` and `If-None-Match` if given.
fn fetch(server: &K3rs, accept: Option<&str>, if_none_match: Option<&str>) -> Fetched {
    fetch_with(server, accept, if_none_match, false)
}

/// [`fetch`], asking for gzip (and unzipping) when `gzip`.
fn fetch_with(
    server: &K3rs,
    accept: Option<&str>,
    if_none_match: Option<&str>,
    gzip: bool,
) -> Fetched {
    let tls = server.data_dir().join("server/tls");
    let dir = server.data_dir();
    let (head, body): (PathBuf, PathBuf) =
        (dir.join("openapi-v2.head"), dir.join("openapi-v2.body"));
    // curl writes no body file for an empty body: never read the last answer's.
    let _ = std::fs::remove_file(&head);
    let _ = std::fs::remove_file(&body);
    let mut cmd = Command::new(common::require_program("curl", "curl"));
    cmd.args(["-sS", "--max-time", "30", "-w", "%{http_code}", "-D"])
        .arg(&head)
        .arg("-o")
        .arg(&body)
        .arg("--cacert")
        .arg(tls.join("server-ca.crt"))
        .arg("--cert")
        .arg(tls.join("client-admin.crt"))
        .arg("--key")
        .arg(tls.join("client-admin.key"));
    if let Some(a) = accept {
        cmd.args(["-H", &format!("Accept: {a}")]);
    }
    if let Some(tag) = if_none_match {
        cmd.args(["-H", &format!("If-None-Match: {tag}")]);
    }
    if gzip {
        cmd.arg("--compressed");
    }
    let out = cmd
        .arg(format!("{}/openapi/v2?timeout=32s", server.server_url()))
        .output()
        .expect("running curl");
    let code = String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or(0);
    Fetched {
        code,
        headers: std::fs::read_to_string(&head).unwrap_or_default(),
        body: std::fs::read(&body).unwrap_or_default(),
    }
}

/// (group, version, kind) of every `x-kubernetes-group-version-kind` of a definition.
fn defined_kinds(doc: &Value) -> BTreeSet<(String, String, String)> {
    let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
    doc["definitions"]
        .as_object()
        .expect("definitions")
        .values()
        .flat_map(|d| {
            d["x-kubernetes-group-version-kind"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .map(|g| (s(&g["group"]), s(&g["version"]), s(&g["kind"])))
        .collect()
}

/// A served resource, from discovery.
#[derive(Debug)]
struct Discovered {
    group: String,
    version: String,
    kind: String,
    plural: String,
    namespaced: bool,
}

fn raw(k: &Kubectl, path: &str) -> Value {
    serde_json::from_str(&k.ok(&["get", "--raw", path])).expect("discovery JSON")
}

/// Every resource (not subresource) of every group-version that discovery lists.
fn discovered(k: &Kubectl) -> Vec<Discovered> {
    let mut gvs: Vec<(String, String, String)> = raw(k, "/api")["versions"]
        .as_array()
        .expect("core versions")
        .iter()
        .map(|v| {
            (
                String::new(),
                v.as_str().unwrap().to_string(),
                format!("/api/{}", v.as_str().unwrap()),
            )
        })
        .collect();
    for g in raw(k, "/apis")["groups"].as_array().expect("groups") {
        for v in g["versions"].as_array().expect("versions") {
            let gv = v["groupVersion"].as_str().unwrap();
            let (group, version) = gv.split_once('/').unwrap();
            gvs.push((group.into(), version.into(), format!("/apis/{gv}")));
        }
    }
    let mut out = Vec::new();
    for (group, version, path) in gvs {
        for r in raw(k, &path)["resources"].as_array().expect("resources") {
            let plural = r["name"].as_str().unwrap();
            if plural.contains('/') {
                continue;
            }
            out.push(Discovered {
                group: group.clone(),
                version: version.clone(),
                kind: r["kind"].as_str().unwrap().into(),
                plural: plural.into(),
                namespaced: r["namespaced"] == true,
            });
        }
    }
    out
}

/// Every discovered kind is a defined kind with its collection and item paths; every
/// collection path is a discovered resource.
fn assert_matches_discovery(doc: &Value, served: &[Discovered]) {
    let kinds = defined_kinds(doc);
    let paths = doc["paths"].as_object().expect("paths");
    for r in served {
        let gvk = (r.group.clone(), r.version.clone(), r.kind.clone());
        assert!(kinds.contains(&gvk), "{r:?} has no definition");
        let prefix = if r.group.is_empty() {
            format!("/api/{}", r.version)
        } else {
            format!("/apis/{}/{}", r.group, r.version)
        };
        let ns = if r.namespaced {
            "namespaces/{namespace}/"
        } else {
            ""
        };
        let collection = format!("{prefix}/{ns}{}", r.plural);
        assert!(
            paths.contains_key(&collection),
            "{collection} is not a path"
        );
        let ops: Vec<&Value> = paths[&collection]
            .as_object()
            .unwrap()
            .iter()
            .filter(|(verb, _)| *verb != "parameters")
            .map(|(_, op)| op)
            .collect();
        for op in ops {
            assert_eq!(
                op["x-kubernetes-group-version-kind"]["kind"],
                r.kind.as_str(),
                "{collection}"
            );
        }
    }
    for p in paths.keys() {
        let rest = p.strip_prefix("/api/").map(|r| ("", r)).or_else(|| {
            let r = p.strip_prefix("/apis/")?;
            let (g, r) = r.split_once('/')?;
            Some((g, r))
        });
        let Some((group, rest)) = rest else { continue };
        let parts: Vec<&str> = rest.split('/').collect();
        let (version, plural) = match parts.as_slice() {
            [v, plural] | [v, "namespaces", "{namespace}", plural] if !plural.is_empty() => {
                (*v, *plural)
            }
            _ => continue,
        };
        assert!(
            served
                .iter()
                .any(|r| r.group == group && r.version == version && r.plural == plural),
            "{p} is not discovered"
        );
    }
}

/// The non-resource paths kube-apiserver lists: discovery of every built-in group and
/// group-version, `/version/`, the service account issuer's documents; each with upstream's
/// operation id and response schema, each served (fetched by kubectl, answering that
/// schema's kind), and no `/logs/` (k3rs does not serve it).
fn assert_non_resource_paths(doc: &Value, k: &Kubectl) {
    let paths = doc["paths"].as_object().expect("paths");
    let mut expected: Vec<(String, String, &str)> = vec![
        ("/api/".into(), "getCoreAPIVersions".into(), "APIVersions"),
        (
            "/api/v1/".into(),
            "getCoreV1APIResources".into(),
            "APIResourceList",
        ),
        ("/apis/".into(), "getAPIVersions".into(), "APIGroupList"),
        ("/version/".into(), "getCodeVersion".into(), ""),
        (
            "/.well-known/openid-configuration/".into(),
            "getServiceAccountIssuerOpenIDConfiguration".into(),
            "",
        ),
        (
            "/openid/v1/jwks/".into(),
            "getServiceAccountIssuerOpenIDKeyset".into(),
            "",
        ),
    ];
    let camel = |s: &str| -> String {
        let mut out = String::new();
        let mut up = true;
        for c in s.chars() {
            if c.is_ascii_alphanumeric() {
                out.extend(if up { c.to_uppercase().next() } else { Some(c) });
                up = false;
            } else {
                up = true;
            }
        }
        out
    };
    for g in raw(k, "/apis")["groups"].as_array().expect("groups") {
        let name = g["name"].as_str().unwrap();
        let word = camel(name.strip_suffix(".k8s.io").unwrap_or(name));
        expected.push((
            format!("/apis/{name}/"),
            format!("get{word}APIGroup"),
            "APIGroup",
        ));
        for v in g["versions"].as_array().expect("versions") {
            let version = v["version"].as_str().unwrap();
            expected.push((
                format!("/apis/{name}/{version}/"),
                format!("get{word}{}APIResources", camel(version)),
                "APIResourceList",
            ));
        }
    }
    for (path, id, kind) in &expected {
        let op = &paths
            .get(path)
            .unwrap_or_else(|| panic!("{path} is not in /openapi/v2"))["get"];
        assert_eq!(op["operationId"], id.as_str(), "{path}");
        assert_eq!(op["schemes"], serde_json::json!(["https"]), "{path}");
        let schema = &op["responses"]["200"]["schema"];
        let served = raw(k, path);
        if kind.is_empty() {
            assert!(served.is_object(), "{path}: {served}");
        } else {
            let def = format!("#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.{kind}");
            assert_eq!(schema["$ref"], def.as_str(), "{path}");
            assert_eq!(served["kind"], *kind, "{path}: {served}");
        }
        if let Some(r) = schema["$ref"].as_str() {
            let name = r.strip_prefix("#/definitions/").unwrap();
            assert!(
                doc["definitions"].get(name).is_some(),
                "{path}: {r} dangles"
            );
        }
    }
    assert_eq!(
        paths["/version/"]["get"]["responses"]["200"]["schema"]["$ref"],
        "#/definitions/io.k8s.apimachinery.pkg.version.Info"
    );
    assert!(raw(k, "/version/")["gitVersion"].is_string());
    assert_eq!(
        paths["/openid/v1/jwks/"]["get"]["produces"],
        serde_json::json!(["application/jwk-set+json"])
    );
    assert!(!paths.contains_key("/logs/"), "/logs/ is not served");
    let listed: Vec<&String> = paths.keys().filter(|p| p.ends_with('/')).collect();
    assert_eq!(listed.len(), expected.len(), "{listed:?}");
}

const TOKEN_REVIEW: &str = r#"{"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
  "spec": {"token": "TOKEN"}}"#;
const SUBJECT_ACCESS_REVIEW: &str = r#"{"apiVersion": "authorization.k8s.io/v1",
  "kind": "SubjectAccessReview", "spec": {"user": "someone", "groups": ["system:masters"],
  "resourceAttributes": {"verb": "delete", "resource": "nodes"}}}"#;

const SPROCKETS: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: sprockets.openapi.example.com}
spec:
  group: openapi.example.com
  scope: Namespaced
  names: {plural: sprockets, singular: sprocket, kind: Sprocket}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              teeth: {type: integer, description: How many teeth the sprocket has.}
"#;

#[test]
fn openapi_v2_in_json_and_protobuf_lists_every_kind_and_serves_kubectl_validation() {
    let (server, k) = Kubectl::start_server(&["--disable-agent"]);

    // JSON, as kubectl asks for it.
    let doc: Value = serde_json::from_str(&k.ok(&["get", "--raw", "/openapi/v2?timeout=32s"]))
        .expect("/openapi/v2 is JSON");
    assert_eq!(doc["swagger"], "2.0");
    assert_eq!(doc["securityDefinitions"]["BearerToken"]["type"], "apiKey");
    assert_matches_discovery(&doc, &discovered(&k));
    assert_non_resource_paths(&doc, &k);

    // Protobuf: gnostic's Document, decoding to the same document, asked for as kubectl does.
    let pb = fetch(&server, Some(PROTOBUF_DEPRECATED), None);
    assert_eq!(pb.code, 200, "{}", pb.headers);
    assert_eq!(pb.header("content-type").as_deref(), Some(PROTOBUF));
    let tag = pb.header("etag").expect("an ETag");
    let decoded = decode_protobuf(&pb.body).expect("a gnostic Document");
    assert_eq!(decoded["swagger"], "2.0");
    assert_eq!(decoded, doc);
    let json = fetch(&server, Some("application/json"), None);
    assert_eq!(
        json.header("etag"),
        Some(tag.clone()),
        "one tag for both forms"
    );
    assert_eq!(serde_json::from_slice::<Value>(&json.body).unwrap(), doc);
    let gz = fetch_with(&server, Some(PROTOBUF), None, true);
    assert_eq!(gz.header("content-encoding").as_deref(), Some("gzip"));
    assert_eq!(gz.body, pb.body);

    // Caching.
    let cached = fetch(&server, Some(PROTOBUF), Some(&tag));
    assert_eq!(cached.code, 304);
    assert!(cached.body.is_empty());
    assert_eq!(fetch(&server, None, Some(&tag)).code, 304);
    assert_eq!(fetch(&server, Some("text/html"), None).code, 406);

    // kubectl's own reader of the protobuf form.
    let explained = k.ok(&[
        "explain",
        "--output=plaintext-openapiv2",
        "pods.spec.containers",
    ]);
    assert!(
        explained.contains("KIND:       Pod") || explained.contains("KIND:     Pod"),
        "{explained}"
    );
    assert!(explained.contains("imagePullPolicy"), "{explained}");

    // Create-only kinds: kubectl validates them against /openapi/v2 (strict by default).
    let token = common::wait_for(
        "the default service account",
        std::time::Duration::from_secs(60),
        || {
            let out = k.run(&["create", "token", "default"]);
            out.ok.then(|| out.stdout.trim().to_string())
        },
    );
    let review = k.ok_stdin(
        &[
            "create",
            "-f",
            "-",
            "-o",
            "jsonpath={.status.authenticated} {.status.user.username}",
        ],
        Some(&TOKEN_REVIEW.replace("TOKEN", &token)),
    );
    assert_eq!(review, "true system:serviceaccount:default:default");
    let allowed = k.ok_stdin(
        &["create", "-f", "-", "-o", "jsonpath={.status.allowed}"],
        Some(SUBJECT_ACCESS_REVIEW),
    );
    assert_eq!(allowed, "true");
    // The schema kubectl read is the one it enforces.
    let err = k.fails_with(
        &["create", "-f", "-"],
        Some(&TOKEN_REVIEW.replace(r#""token""#, r#""tokne""#)),
        "ValidationError(TokenReview.spec)",
    );
    assert!(
        err.contains(r#"unknown field "tokne" in io.k8s.api.authentication.v1.TokenReviewSpec"#),
        "{err}"
    );

    // A CRD: rebuilt, with new ETags, its kind listed and explained.
    k.ok_stdin(&["apply", "-f", "-"], Some(SPROCKETS));
    k.crd_established("sprockets.openapi.example.com");
    let after = common::wait_for(
        "the CRD in /openapi/v2",
        std::time::Duration::from_secs(30),
        || {
            let f = fetch(&server, Some(PROTOBUF), Some(&tag));
            (f.code == 200).then_some(f)
        },
    );
    let new_tag = after.header("etag").expect("an ETag");
    assert_ne!(new_tag, tag);
    let doc: Value = decode_protobuf(&after.body).unwrap();
    assert!(defined_kinds(&doc).contains(&(
        "openapi.example.com".into(),
        "v1".into(),
        "Sprocket".into()
    )));
    assert_matches_discovery(&doc, &discovered(&k));
    // As upstream, a custom resource's group brings no discovery path to the document.
    assert!(doc["paths"].get("/apis/openapi.example.com/").is_none());
    assert!(doc["paths"].get("/apis/openapi.example.com/v1/").is_none());
    assert_eq!(fetch(&server, Some(PROTOBUF), Some(&new_tag)).code, 304);
    let explained = k.ok(&["explain", "--output=plaintext-openapiv2", "sprockets.spec"]);
    assert!(
        explained.contains("How many teeth the sprocket has."),
        "{explained}"
    );
}
