//! cluster-info, version, api-resources, api-versions, explain, the OpenAPI documents kubectl
//! reads, the bootstrap namespaces, health and metrics.

use super::{header, table, Ctx};

/// Resources that must be listed by `kubectl api-resources`: (name, short names, API version,
/// namespaced, kind).
const RESOURCES: &[(&str, &str, &str, &str, &str)] = &[
    ("configmaps", "cm", "v1", "true", "ConfigMap"),
    ("endpoints", "ep", "v1", "true", "Endpoints"),
    ("events", "ev", "v1", "true", "Event"),
    ("namespaces", "ns", "v1", "false", "Namespace"),
    ("nodes", "no", "v1", "false", "Node"),
    ("pods", "po", "v1", "true", "Pod"),
    ("secrets", "", "v1", "true", "Secret"),
    ("serviceaccounts", "sa", "v1", "true", "ServiceAccount"),
    ("services", "svc", "v1", "true", "Service"),
    ("deployments", "deploy", "apps/v1", "true", "Deployment"),
    ("replicasets", "rs", "apps/v1", "true", "ReplicaSet"),
    ("leases", "", "coordination.k8s.io/v1", "true", "Lease"),
    (
        "endpointslices",
        "",
        "discovery.k8s.io/v1",
        "true",
        "EndpointSlice",
    ),
    (
        "ingressclasses",
        "",
        "networking.k8s.io/v1",
        "false",
        "IngressClass",
    ),
    (
        "ingresses",
        "ing",
        "networking.k8s.io/v1",
        "true",
        "Ingress",
    ),
    (
        "networkpolicies",
        "netpol",
        "networking.k8s.io/v1",
        "true",
        "NetworkPolicy",
    ),
    (
        "clusterrolebindings",
        "",
        "rbac.authorization.k8s.io/v1",
        "false",
        "ClusterRoleBinding",
    ),
    (
        "clusterroles",
        "",
        "rbac.authorization.k8s.io/v1",
        "false",
        "ClusterRole",
    ),
    (
        "rolebindings",
        "",
        "rbac.authorization.k8s.io/v1",
        "true",
        "RoleBinding",
    ),
    ("roles", "", "rbac.authorization.k8s.io/v1", "true", "Role"),
    (
        "priorityclasses",
        "pc",
        "scheduling.k8s.io/v1",
        "false",
        "PriorityClass",
    ),
    ("csidrivers", "", "storage.k8s.io/v1", "false", "CSIDriver"),
    (
        "storageclasses",
        "sc",
        "storage.k8s.io/v1",
        "false",
        "StorageClass",
    ),
];

pub fn discovery_version_explain(c: &Ctx) {
    let info = c.ok(&["cluster-info"]);
    assert!(
        info.contains("Kubernetes control plane")
            && info.contains("is running at https://127.0.0.1:"),
        "{info}"
    );

    // Within kubectl's skew of 1.32, and the same numbers as /version.
    let version = c.ok(&["version", "-o", "json"]);
    let v: serde_json::Value = serde_json::from_str(&version).unwrap();
    let server = &v["serverVersion"];
    assert_eq!(server["major"], "1", "{version}");
    let minor: u32 = server["minor"].as_str().unwrap().parse().unwrap();
    assert!((31..=33).contains(&minor), "{version}");
    let git = server["gitVersion"].as_str().unwrap();
    assert!(git.starts_with(&format!("v1.{minor}.")), "{version}");
    // A release with k3rs's build as semver build metadata (k3s: `v1.33.0+k3s1`), not a
    // pre-release that Helm's `kubeVersion` constraints would reject.
    assert_eq!(git, "v1.33.0+k3rs1", "{version}");
    let raw: serde_json::Value =
        serde_json::from_str(&c.ok(&["get", "--raw", "/version"])).unwrap();
    assert_eq!(&raw, server);
    let human = c.ok(&["version"]);
    assert!(human.contains(&format!("Server Version: {git}")), "{human}");

    // api-resources: the columns, and every served resource with its short names and scope.
    let out = c.ok(&["api-resources"]);
    assert_eq!(
        header(&out),
        ["NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND"]
    );
    let rows = table(&out);
    for (name, short, version, namespaced, kind) in RESOURCES {
        let mut want = vec![*name];
        if !short.is_empty() {
            want.push(short);
        }
        want.extend([*version, *namespaced, *kind]);
        assert!(
            rows.iter()
                .any(|r| r.iter().map(String::as_str).eq(want.iter().copied())),
            "{want:?} not listed by api-resources:\n{out}"
        );
    }
    let namespaced = c.ok(&["api-resources", "--namespaced=false", "-o", "name"]);
    assert!(
        namespaced.lines().any(|l| l == "namespaces"),
        "{namespaced}"
    );
    assert!(!namespaced.lines().any(|l| l == "pods"), "{namespaced}");
    let apps = c.ok(&["api-resources", "--api-group=apps", "-o", "name"]);
    assert!(apps.lines().any(|l| l == "deployments.apps"), "{apps}");
    let verbs = c.ok(&["api-resources", "-o", "wide"]);
    let pods = table(&verbs)
        .into_iter()
        .find(|r| r.first().map(String::as_str) == Some("pods"))
        .expect("pods row");
    let verb_cell = pods.iter().find(|w| w.contains("create,")).expect("VERBS");
    for verb in [
        "create", "delete", "get", "list", "patch", "update", "watch",
    ] {
        assert!(
            verb_cell.split(',').any(|v| v == verb),
            "{verb} missing from {verb_cell}"
        );
    }

    let versions = c.ok(&["api-versions"]);
    let groups = RESOURCES.iter().map(|r| r.2);
    for gv in groups {
        assert!(
            versions.lines().any(|l| l == gv),
            "{gv} not in:\n{versions}"
        );
    }

    // explain renders nested fields from OpenAPI v3.
    let explain = c.ok(&["explain", "pods.spec.containers.image"]);
    assert!(explain.contains("FIELD: image <string>"), "{explain}");
    assert!(explain.contains("Container image name"), "{explain}");
    let explain = c.ok(&["explain", "deployment.spec.template.spec.containers.ports"]);
    assert!(explain.contains("GROUP:      apps"), "{explain}");
    assert!(
        explain.contains("FIELD: ports <[]ContainerPort>"),
        "{explain}"
    );
    assert!(
        explain.contains("containerPort\t<integer> -required-"),
        "{explain}"
    );
    let explain = c.ok(&["explain", "deployment.spec.strategy"]);
    assert!(
        explain.contains("rollingUpdate\t<RollingUpdateDeployment>"),
        "{explain}"
    );
    c.fails_with(
        &["explain", "pods.spec.nosuchfield"],
        None,
        "field \"nosuchfield\" does not exist",
    );

    // The OpenAPI v3 index and a document, as kubectl reads them.
    let index: serde_json::Value =
        serde_json::from_str(&c.ok(&["get", "--raw", "/openapi/v3"])).unwrap();
    let url = index["paths"]["apis/apps/v1"]["serverRelativeURL"]
        .as_str()
        .expect("apps/v1 in the index");
    assert!(url.starts_with("/openapi/v3/apis/apps/v1?hash="), "{url}");
    let doc: serde_json::Value = serde_json::from_str(&c.ok(&["get", "--raw", url])).unwrap();
    assert_eq!(doc["openapi"], "3.0.0");

    // The bootstrap namespaces and the kubernetes service.
    let namespaces = c.ok(&["get", "namespaces", "-o", "name"]);
    for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        assert!(
            namespaces.contains(&format!("namespace/{ns}\n")),
            "{namespaces}"
        );
    }
    let ip = c.ok(&[
        "get",
        "service",
        "kubernetes",
        "-n",
        "default",
        "-o",
        "jsonpath={.spec.clusterIP}",
    ]);
    assert_eq!(ip, "10.43.0.1");
}

pub fn health_and_metrics(c: &Ctx) {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&c.k.kubeconfig)
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "kubeconfig mode");
    let ready = c.ok(&["get", "--raw", "/readyz?verbose"]);
    assert!(
        ready.contains("[+]etcd ok") && ready.contains("readyz check passed"),
        "{ready}"
    );
    assert_eq!(c.ok(&["get", "--raw", "/livez"]), "ok");
    c.ok(&["create", "configmap", "counted"]);
    let metrics = c.ok(&["get", "--raw", "/metrics"]);
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
}
