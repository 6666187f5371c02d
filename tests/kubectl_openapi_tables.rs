//! End to end: the real `k3rs server` and the real `kubectl` with validation on. OpenAPI v3
//! (explain, apply -f created/unchanged/configured through client-side apply's strategic merge
//! patch, create -f rejected for an unknown field with `fieldValidation=Strict`) and server-side
//! Tables (the column headers kube prints, -o wide, --sort-by, --show-labels, custom-columns,
//! get -w).

mod common;

use std::time::Duration;

use common::kubectl::{header, table, Kubectl, Watch};
use common::K3rs;

fn deployment(image: &str) -> String {
    format!(
        "\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {{app: web}}
spec:
  replicas: 2
  selector: {{matchLabels: {{app: web}}}}
  strategy: {{type: RollingUpdate, rollingUpdate: {{maxSurge: 1}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      containers:
      - name: nginx
        image: {image}
        ports: [{{containerPort: 80}}]
        resources: {{limits: {{cpu: 500m, memory: 64Mi}}}}
"
    )
}

const UNKNOWN_FIELD: &str = "\
apiVersion: v1
kind: ConfigMap
metadata: {name: strict}
data: {a: b}
bogus: 1
";

const POD: &str = "\
apiVersion: v1
kind: Pod
metadata: {name: p1, labels: {tier: web}}
spec:
  containers: [{name: c, image: nginx}]
";

fn wait_api(k: &Kubectl, server: &mut K3rs) {
    common::wait_for("the API", Duration::from_secs(60), || {
        server.assert_running();
        k.run(&["get", "namespace", "default", "-o", "name"])
            .ok
            .then_some(())
    });
}

#[test]
fn openapi_and_tables_with_kubectl() {
    let mut server = K3rs::start_kubernetes(&["--disable-agent"]);
    let k = Kubectl {
        bin: common::require_program("kubectl", "kubectl"),
        kubeconfig: server.kubeconfig(),
    };
    wait_api(&k, &mut server);

    // The OpenAPI v3 index and a document.
    let index: serde_json::Value =
        serde_json::from_str(&k.ok(&["get", "--raw", "/openapi/v3"])).unwrap();
    let url = index["paths"]["apis/apps/v1"]["serverRelativeURL"]
        .as_str()
        .expect("apps/v1 in the index");
    assert!(url.starts_with("/openapi/v3/apis/apps/v1?hash="), "{url}");
    let doc: serde_json::Value = serde_json::from_str(&k.ok(&["get", "--raw", url])).unwrap();
    assert_eq!(doc["openapi"], "3.0.0");

    // explain renders nested fields from v3.
    let explain = k.ok(&["explain", "pods.spec.containers.image"]);
    assert!(explain.contains("FIELD: image <string>"), "{explain}");
    assert!(explain.contains("Container image name"), "{explain}");
    let explain = k.ok(&["explain", "deployment.spec.strategy"]);
    assert!(
        explain.contains("rollingUpdate\t<RollingUpdateDeployment>"),
        "{explain}"
    );

    // apply with validation on: created, unchanged, configured.
    let apply = |image: &str| k.ok_stdin(&["apply", "-f", "-"], Some(&deployment(image)));
    assert_eq!(apply("nginx:1.27"), "deployment.apps/web created\n");
    assert_eq!(apply("nginx:1.27"), "deployment.apps/web unchanged\n");
    assert_eq!(apply("nginx:1.28"), "deployment.apps/web configured\n");
    let image = k.ok(&[
        "get",
        "deploy",
        "web",
        "-o",
        "jsonpath={.spec.template.spec.containers[0].image} {.spec.strategy.rollingUpdate.maxSurge}",
    ]);
    assert_eq!(image, "nginx:1.28 1");

    // Strict field validation, on create (POST) and on apply to an existing object (PATCH).
    let typo = deployment("nginx:1.28").replace("  replicas: 2", "  replicaz: 2");
    let out = k.run_stdin(&["apply", "-f", "-"], Some(&typo));
    assert!(!out.ok, "{out:?}");
    assert!(
        out.stderr.contains("unknown field \"spec.replicaz\""),
        "{out:?}"
    );
    let out = k.run_stdin(&["create", "-f", "-"], Some(UNKNOWN_FIELD));
    assert!(!out.ok, "{out:?}");
    assert!(
        out.stderr
            .contains("strict decoding error: unknown field \"bogus\""),
        "{out:?}"
    );

    // Warn (and Ignore) drop unknown fields; Warn says so.
    let out = k.run_stdin(
        &["create", "--validate=warn", "-f", "-"],
        Some(UNKNOWN_FIELD),
    );
    assert!(out.ok, "{out:?}");
    assert!(
        out.stderr.contains("Warning: unknown field \"bogus\""),
        "{out:?}"
    );
    let stored = k.ok(&["get", "cm", "strict", "-o", "json"]);
    assert!(!stored.contains("bogus"), "{stored}");

    // Tables: the columns kube prints.
    k.ok_stdin(&["apply", "-f", "-"], Some(POD));
    let pods = k.ok(&["get", "pods"]);
    assert_eq!(
        header(&pods),
        ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    );
    assert_eq!(table(&pods)[1][..4], ["p1", "0/1", "Pending", "0"]);
    let wide = k.ok(&["get", "pods", "-o", "wide"]);
    assert_eq!(
        header(&wide),
        [
            "NAME",
            "READY",
            "STATUS",
            "RESTARTS",
            "AGE",
            "IP",
            "NODE",
            "NOMINATED",
            "NODE",
            "READINESS",
            "GATES"
        ]
    );
    let deploy = k.ok(&["get", "deploy", "-o", "wide"]);
    assert_eq!(
        header(&deploy),
        [
            "NAME",
            "READY",
            "UP-TO-DATE",
            "AVAILABLE",
            "AGE",
            "CONTAINERS",
            "IMAGES",
            "SELECTOR"
        ]
    );
    let row = &table(&deploy)[1];
    assert_eq!(row[..4], ["web", "0/2", "0", "0"]);
    assert_eq!(row[5..], ["nginx", "nginx:1.28", "app=web"]);
    let scale = k.ok(&["get", "deploy", "web", "--subresource=scale"]);
    assert_eq!(header(&scale), ["NAME", "DESIRED", "AVAILABLE", "AGE"]);
    assert_eq!(table(&scale)[1][..3], ["web", "2", "0"]);
    let ns = k.ok(&["get", "ns"]);
    assert_eq!(header(&ns), ["NAME", "STATUS", "AGE"]);
    assert!(
        table(&ns).iter().any(|r| r[..2] == ["default", "Active"]),
        "{ns}"
    );
    let svc = k.ok(&["get", "svc", "-o", "wide"]);
    assert_eq!(
        header(&svc),
        [
            "NAME",
            "TYPE",
            "CLUSTER-IP",
            "EXTERNAL-IP",
            "PORT(S)",
            "AGE",
            "SELECTOR"
        ]
    );
    assert_eq!(
        table(&svc)[1][..5],
        ["kubernetes", "ClusterIP", "10.43.0.1", "<none>", "443/TCP"]
    );

    // --sort-by needs full objects in the rows; --show-labels reads their metadata.
    k.ok(&["create", "namespace", "sorting"]);
    k.ok(&[
        "create",
        "configmap",
        "zz",
        "-n",
        "sorting",
        "--from-literal=rank=1",
    ]);
    let aa = ["--from-literal=rank=2", "--from-literal=x=y"];
    k.ok(&["create", "configmap", "aa", "-n", "sorting", aa[0], aa[1]]);
    let sorted = k.ok(&["get", "cm", "-n", "sorting", "--sort-by=.data.rank"]);
    assert_eq!(header(&sorted), ["NAME", "DATA", "AGE"]);
    let names: Vec<String> = table(&sorted)[1..].iter().map(|r| r[0].clone()).collect();
    assert_eq!(names, ["zz", "aa"], "{sorted}");
    assert_eq!(table(&sorted)[2][1], "2");
    let labels = k.ok(&["get", "pods", "--show-labels"]);
    assert_eq!(header(&labels).last().map(String::as_str), Some("LABELS"));
    assert_eq!(
        table(&labels)[1].last().map(String::as_str),
        Some("tier=web")
    );
    let custom = k.ok(&[
        "get",
        "deploy",
        "-o",
        "custom-columns=NAME:.metadata.name,IMAGE:.spec.template.spec.containers[0].image",
    ]);
    assert_eq!(table(&custom), [["NAME", "IMAGE"], ["web", "nginx:1.28"]]);

    // get -w prints table rows for watch events.
    let dir = tempfile::tempdir().unwrap();
    let watch = Watch::start(
        &k,
        &["get", "cm", "-w", "-n", "sorting"],
        &dir.path().join("watch.out"),
    );
    watch.wait_until("the table header", |t| header(t) == ["NAME", "DATA", "AGE"]);
    k.ok(&[
        "create",
        "configmap",
        "watched",
        "-n",
        "sorting",
        "--from-literal=a=b",
    ]);
    watch.wait_until("the new row", |t| {
        table(t).iter().any(|r| r[..2] == ["watched", "1"])
    });
}
