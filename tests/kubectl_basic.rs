//! End to end: the real `k3rs server` with its Kubernetes API on loopback, driven by the real
//! `kubectl`. Covers the API server foundation: version, namespaces, create (typed generators
//! over protobuf, and `-f` YAML), get in every output, label and field selectors, watch,
//! replace with optimistic concurrency (409), validation (422 with field paths), missing
//! namespaces (404), delete, and the anonymous health/metrics endpoints.
//!
//! `create -f` / `replace -f` here run with `--validate=false`; validation against the OpenAPI
//! schemas is covered by `kubectl_openapi_tables.rs`.

mod common;

use std::time::Duration;

use common::kubectl::{Kubectl, Watch};
use common::K3rs;

const DEPLOYMENT: &str = "\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {app: web}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: nginx
        image: nginx:1.27
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: labeled
  labels: {tier: frontend}
data: {k: v}
";

const INVALID_DEPLOYMENT: &str = "\
apiVersion: apps/v1
kind: Deployment
metadata: {name: broken}
spec:
  selector: {matchLabels: {app: a}}
  template:
    metadata: {labels: {app: b}}
    spec:
      containers: [{name: c, image: nginx}]
";

fn wait_api(k: &Kubectl, server: &mut K3rs) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        server.assert_running();
        let out = k.run(&["get", "namespace", "default", "-o", "name"]);
        if out.ok {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "API not ready after 60s: {out:?}\nlog:\n{}",
            common::log_tail(&server.log_path(), 40)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn kubectl_against_the_embedded_datastore() {
    let mut server = K3rs::start_kubernetes(&["--disable-agent"]);
    scenario(&mut server);
}

#[test]
fn kubectl_against_an_external_etcd() {
    let etcd = common::Etcd::start();
    let url = etcd.endpoint().url;
    let mut server = K3rs::start_kubernetes(&["--disable-agent", "--datastore-endpoint", &url]);
    scenario(&mut server);
}

fn scenario(server: &mut K3rs) {
    let k = Kubectl {
        bin: common::require_program("kubectl", "kubectl"),
        kubeconfig: server.kubeconfig(),
    };
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&k.kubeconfig)
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "kubeconfig mode");
    wait_api(&k, server);

    // Version and the bootstrap namespaces and service.
    let version = k.ok(&["version"]);
    assert!(version.contains("Server Version: v1.33"), "{version}");
    let namespaces = k.ok(&["get", "namespaces", "-o", "name"]);
    for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        assert!(
            namespaces.contains(&format!("namespace/{ns}\n")),
            "{namespaces}"
        );
    }
    let svc = k.ok(&[
        "get",
        "service",
        "kubernetes",
        "-o",
        "jsonpath={.spec.clusterIP}",
    ]);
    assert_eq!(svc, "10.43.0.1");

    // Typed generators (protobuf bodies) and create -f (YAML, two documents).
    k.ok(&["create", "namespace", "e2e"]);
    k.ok(&[
        "create",
        "configmap",
        "cm1",
        "-n",
        "e2e",
        "--from-literal=a=b",
    ]);
    k.ok(&[
        "create",
        "secret",
        "generic",
        "s1",
        "-n",
        "e2e",
        "--from-literal=x=y",
    ]);
    k.ok(&["create", "serviceaccount", "robot", "-n", "e2e"]);
    k.ok(&[
        "create",
        "deployment",
        "gen",
        "-n",
        "e2e",
        "--image=nginx:1.27",
        "--replicas=2",
    ]);
    k.ok(&[
        "create",
        "service",
        "clusterip",
        "gen",
        "-n",
        "e2e",
        "--tcp=80:8080",
    ]);
    let svc = k.ok(&[
        "get",
        "service",
        "gen",
        "-n",
        "e2e",
        "-o",
        "jsonpath={.spec.ports[0].targetPort} {.spec.selector.app} {.spec.clusterIP}",
    ]);
    assert!(svc.starts_with("8080 gen 10.43."), "{svc}");
    assert_eq!(
        k.ok(&[
            "get",
            "deployment",
            "gen",
            "-n",
            "e2e",
            "-o",
            "jsonpath={.spec.replicas} {.spec.template.spec.containers[0].image}"
        ]),
        "2 nginx:1.27"
    );
    assert_eq!(
        k.ok(&[
            "get",
            "secret",
            "s1",
            "-n",
            "e2e",
            "-o",
            "jsonpath={.data.x}"
        ]),
        "eQ=="
    );
    let created = k.run_stdin(
        &["create", "-n", "e2e", "--validate=false", "-f", "-"],
        Some(DEPLOYMENT),
    );
    assert!(created.ok, "{created:?}");
    assert!(
        created.stdout.contains("deployment.apps/web created"),
        "{created:?}"
    );

    // get in JSON, YAML and name output; defaults applied by the server.
    let json: serde_json::Value =
        serde_json::from_str(&k.ok(&["get", "deployment", "web", "-n", "e2e", "-o", "json"]))
            .unwrap();
    assert_eq!(json["spec"]["replicas"], 1);
    assert_eq!(json["metadata"]["generation"], 1);
    assert_eq!(
        json["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"],
        "IfNotPresent"
    );
    assert!(json["metadata"]["uid"]
        .as_str()
        .is_some_and(|u| u.len() == 36));
    let yaml = k.ok(&["get", "configmap", "cm1", "-n", "e2e", "-o", "yaml"]);
    assert!(
        yaml.contains("name: cm1") && yaml.contains("a: b"),
        "{yaml}"
    );
    assert_eq!(
        k.ok(&["get", "deployments", "-n", "e2e", "-o", "name"]),
        "deployment.apps/gen\ndeployment.apps/web\n"
    );

    // Selectors.
    assert_eq!(
        k.ok(&[
            "get",
            "configmaps",
            "-n",
            "e2e",
            "-l",
            "tier=frontend",
            "-o",
            "name"
        ]),
        "configmap/labeled\n"
    );
    assert_eq!(
        k.ok(&[
            "get",
            "configmaps",
            "-n",
            "e2e",
            "-l",
            "tier notin (frontend)",
            "-o",
            "name"
        ]),
        "configmap/cm1\n"
    );
    assert_eq!(
        k.ok(&[
            "get",
            "configmaps",
            "-n",
            "e2e",
            "--field-selector",
            "metadata.name=cm1",
            "-o",
            "name"
        ]),
        "configmap/cm1\n"
    );
    let all = k.ok(&[
        "get",
        "configmaps",
        "-A",
        "--field-selector",
        "metadata.namespace=e2e",
        "-o",
        "name",
    ]);
    assert_eq!(all, "configmap/cm1\nconfigmap/labeled\n");
    k.fails_with(
        &["get", "configmaps", "--field-selector", "spec.nodeName=x"],
        None,
        "field label not supported",
    );

    // Patches: label, annotate (merge), JSON patch (a failed test is 422), strategic merge,
    // scale (the scale subresource) and set image.
    k.ok(&["label", "configmap", "cm1", "-n", "e2e", "color=blue"]);
    k.ok(&["annotate", "configmap", "cm1", "-n", "e2e", "note=hi"]);
    assert_eq!(
        k.ok(&[
            "get",
            "configmaps",
            "-n",
            "e2e",
            "-l",
            "color=blue",
            "-o",
            "name"
        ]),
        "configmap/cm1\n"
    );
    k.ok(&[
        "patch",
        "configmap",
        "cm1",
        "-n",
        "e2e",
        "--type=merge",
        "-p",
        r#"{"data":{"m":"1"}}"#,
    ]);
    k.ok(&[
        "patch",
        "configmap",
        "cm1",
        "-n",
        "e2e",
        "--type=json",
        "-p",
        r#"[{"op":"add","path":"/data/j","value":"2"}]"#,
    ]);
    k.fails_with(
        &[
            "patch",
            "configmap",
            "cm1",
            "-n",
            "e2e",
            "--type=json",
            "-p",
            r#"[{"op":"test","path":"/data/a","value":"zzz"}]"#,
        ],
        None,
        "invalid",
    );
    assert_eq!(
        k.ok(&[
            "get",
            "configmap",
            "cm1",
            "-n",
            "e2e",
            "-o",
            "jsonpath={.data.a}{.data.m}{.data.j} {.metadata.annotations.note}"
        ]),
        "b12 hi"
    );
    k.ok(&[
        "patch",
        "deployment",
        "web",
        "-n",
        "e2e",
        "-p",
        r#"{"spec":{"template":{"spec":{"containers":[{"name":"nginx","image":"nginx:1.28"}]}}}}"#,
    ]);
    k.ok(&["scale", "deployment", "web", "-n", "e2e", "--replicas=3"]);
    k.ok(&[
        "set",
        "image",
        "deployment/web",
        "-n",
        "e2e",
        "nginx=nginx:1.29",
    ]);
    assert_eq!(
        k.ok(&["get", "deployment", "web", "-n", "e2e", "-o",
            "jsonpath={.metadata.generation} {.spec.replicas} {.spec.template.spec.containers[0].image}"]),
        "4 3 nginx:1.29"
    );

    // Watch: the initial ADDED proves the watch is established; then MODIFIED and DELETED.
    k.ok(&[
        "create",
        "configmap",
        "watched",
        "-n",
        "e2e",
        "--from-literal=v=1",
    ]);
    let dir = tempfile::tempdir().unwrap();
    let watch = Watch::start(
        &k,
        &[
            "get",
            "configmaps",
            "-n",
            "e2e",
            "--field-selector",
            "metadata.name=watched",
            "-w",
            "-o",
            "json",
            "--output-watch-events",
        ],
        &dir.path().join("watch.json"),
    );
    watch.wait_for("\"type\":\"ADDED\"", 1);
    let stale = k.ok(&["get", "configmap", "watched", "-n", "e2e", "-o", "json"]);
    let changed = stale.replace("\"v\": \"1\"", "\"v\": \"2\"");
    assert_ne!(stale, changed);
    let replaced = k.run_stdin(&["replace", "--validate=false", "-f", "-"], Some(&changed));
    assert!(replaced.ok, "{replaced:?}");
    watch.wait_for("\"type\":\"MODIFIED\"", 1);

    // A replace carrying the old resourceVersion is a 409.
    let conflict = stale.replace("\"v\": \"1\"", "\"v\": \"3\"");
    k.fails_with(
        &["replace", "--validate=false", "-f", "-"],
        Some(&conflict),
        "the object has been modified; please apply your changes to the latest version and try again",
    );
    k.ok(&["delete", "configmap", "watched", "-n", "e2e"]);
    watch.wait_for("\"type\":\"DELETED\"", 1);
    drop(watch);

    // Validation (422 with the field path) and a missing namespace (404).
    let invalid = k.fails_with(
        &["create", "-n", "e2e", "--validate=false", "-f", "-"],
        Some(INVALID_DEPLOYMENT),
        "is invalid",
    );
    assert!(
        invalid.contains("spec.template.metadata.labels"),
        "{invalid}"
    );
    k.fails_with(
        &["create", "configmap", "Bad_Name", "-n", "e2e"],
        None,
        "metadata.name: Invalid value",
    );
    k.fails_with(
        &["create", "configmap", "x", "-n", "nope"],
        None,
        "namespaces \"nope\" not found",
    );
    k.fails_with(
        &[
            "get",
            "--raw",
            "/api/v1/namespaces/e2e/configmaps?limit=1&continue=garbage",
        ],
        None,
        "continue key is not valid",
    );

    // Paging: kubectl pages with --chunk-size.
    let paged = k.ok(&[
        "get",
        "configmaps",
        "-n",
        "e2e",
        "--chunk-size=1",
        "-o",
        "name",
    ]);
    assert_eq!(paged, "configmap/cm1\nconfigmap/labeled\n");

    // Delete, then the namespace with what is left in it.
    k.ok(&["delete", "deployment", "web", "-n", "e2e"]);
    k.fails_with(
        &["get", "deployment", "web", "-n", "e2e"],
        None,
        "not found",
    );
    k.ok(&["delete", "namespace", "e2e", "--timeout=30s"]);
    k.fails_with(&["get", "namespace", "e2e"], None, "not found");

    // Health and metrics.
    let ready = k.ok(&["get", "--raw", "/readyz?verbose"]);
    assert!(
        ready.contains("[+]etcd ok") && ready.contains("readyz check passed"),
        "{ready}"
    );
    let metrics = k.ok(&["get", "--raw", "/metrics"]);
    assert!(
        metrics.contains(
            "apiserver_request_total{code=\"201\",resource=\"configmaps\",verb=\"POST\"}"
        ),
        "{metrics}"
    );
    assert!(
        metrics.contains("apiserver_request_duration_seconds_bucket"),
        "{metrics}"
    );
    server.assert_running();
}
