//! Node isolation end to end, with a kubelet's client certificate (`system:node:<name>` in
//! `system:nodes`): NodeRestriction keeps a node to its own Node and the pods bound to it.

use crate::common;
use crate::common::kubectl::Kubectl;
use crate::common::users;

fn node_kubectl(server: &common::k3rs::K3rs, admin: &Kubectl, name: &str) -> Kubectl {
    Kubectl {
        bin: admin.bin.clone(),
        kubeconfig: users::cert_kubeconfig(
            server,
            &format!("system:node:{name}"),
            &["system:nodes"],
        ),
    }
}

const NODES: &str = "apiVersion: v1
kind: Node
metadata:
  name: n1
  labels: {kubernetes.io/hostname: n1}
---
apiVersion: v1
kind: Node
metadata:
  name: n2
";

const PODS: &str = "apiVersion: v1
kind: Pod
metadata: {name: p1}
spec:
  nodeName: n1
  containers: [{name: c, image: busybox}]
---
apiVersion: v1
kind: Pod
metadata: {name: p2}
spec:
  nodeName: n2
  containers: [{name: c, image: busybox}]
";

/// `node` PUTs pod `name`'s status (as read by `admin`) with `status.message` set.
fn put_pod_status(
    admin: &Kubectl,
    node: &Kubectl,
    name: &str,
    message: &str,
) -> common::kubectl::Out {
    let path = format!("/api/v1/namespaces/default/pods/{name}/status");
    let mut pod: serde_json::Value =
        serde_json::from_str(&admin.ok(&["get", "--raw", &path])).unwrap();
    pod["status"]["message"] = serde_json::json!(message);
    let dir = tempfile::tempdir().unwrap();
    let body = dir.path().join("status.json");
    std::fs::write(&body, pod.to_string()).unwrap();
    node.run(&["replace", "--raw", &path, "-f", body.to_str().unwrap()])
}

#[test]
fn node_restriction_keeps_a_node_to_itself() {
    let (server, admin) = Kubectl::start_server(&[]);
    admin.ok_stdin(&["create", "-f", "-"], Some(NODES));
    admin.ok_stdin(&["create", "-f", "-"], Some(PODS));
    let n1 = node_kubectl(&server, &admin, "n1");

    // Its own Node: labels of its own are fine, restricted ones are not.
    n1.ok(&["label", "node", "n1", "example.com/rack=r1"]);
    n1.fails_with(
        &["label", "node", "n1", "node-restriction.kubernetes.io/secure=true"],
        None,
        "nodes \"n1\" is forbidden: node \"n1\" is not allowed to modify labels: node-restriction.kubernetes.io/secure",
    );
    n1.fails_with(
        &["taint", "node", "n1", "k=v:NoSchedule"],
        None,
        "node \"n1\" is not allowed to modify taints",
    );
    // Another node: 403.
    n1.fails_with(
        &["label", "node", "n2", "example.com/rack=r1"],
        None,
        "nodes \"n2\" is forbidden: node \"n1\" is not allowed to modify node \"n2\"",
    );
    // Another node's status: the Node authorizer lets a node update node statuses (a PUT;
    // `kubectl patch` would first GET nodes/status, which no node may), NodeRestriction
    // refuses it for another node.
    let n2_status = admin.ok(&["get", "--raw", "/api/v1/nodes/n2/status"]);
    let dir = tempfile::tempdir().unwrap();
    let body = dir.path().join("n2-status.json");
    std::fs::write(&body, n2_status).unwrap();
    n1.fails_with(
        &[
            "replace",
            "--raw",
            "/api/v1/nodes/n2/status",
            "-f",
            body.to_str().unwrap(),
        ],
        None,
        "node \"n1\" is not allowed to modify node \"n2\"",
    );
    assert_eq!(
        admin.ok(&["get", "node", "n2", "-o", "jsonpath={.metadata.labels}"]),
        ""
    );

    // Pods: status and deletion only of its own.
    // (A kubelet PUTs pod status; `kubectl patch --subresource=status` would first GET
    // pods/status, which the Node authorizer allows no node, as upstream.)
    let own = put_pod_status(&admin, &n1, "p1", "from n1");
    assert!(own.ok, "{own:?}");
    assert_eq!(
        admin.ok(&["get", "pod", "p1", "-o", "jsonpath={.status.message}"]),
        "from n1"
    );
    let other = put_pod_status(&admin, &n1, "p2", "from n1");
    assert!(
        !other.ok
            && other.stderr.contains(
                "node \"n1\" can only update pod status for pods with spec.nodeName set to itself"
            ),
        "{other:?}"
    );
    n1.fails_with(
        &["delete", "pod", "p2", "--wait=false"],
        None,
        "node \"n1\" can only delete pods with spec.nodeName set to itself",
    );
    // Only mirror pods bound to itself.
    n1.fails_with(
        &[
            "run",
            "x",
            "--image=busybox",
            "--overrides",
            r#"{"spec":{"nodeName":"n1"}}"#,
        ],
        None,
        "node \"n1\" can only create mirror pods",
    );
    let mirror = "apiVersion: v1
kind: Pod
metadata:
  name: static-n1
  annotations: {kubernetes.io/config.mirror: abc}
spec:
  nodeName: n1
  containers: [{name: c, image: busybox}]
";
    n1.ok_stdin(&["create", "-f", "-"], Some(mirror));
    n1.ok(&["delete", "pod", "p1", "--wait=false"]);
    assert!(admin.run(&["get", "pod", "p2"]).ok, "p2 is still there");
}

/// The Node authorizer narrows like RBAC: a node reads the Secret a pod bound to it uses,
/// and no query form (repeated, reordered, encoded field selectors) serves it another.
#[test]
fn a_node_reads_only_the_secrets_of_its_pods_however_it_asks() {
    let (server, admin) = Kubectl::start_server(&["--disable-agent"]);
    admin.ok_stdin(&["create", "-f", "-"], Some(NODES));
    for s in ["s1", "s2", "s3"] {
        admin.ok(&["create", "secret", "generic", s, "--from-literal=k=v"]);
    }
    let pod = "apiVersion: v1
kind: Pod
metadata: {name: uses-s1}
spec:
  nodeName: n1
  containers: [{name: c, image: busybox}]
  volumes: [{name: s, secret: {secretName: s1}}]
";
    admin.ok_stdin(&["create", "-f", "-"], Some(pod));
    let n1 = node_kubectl(&server, &admin, "n1");
    common::wait_for("the node graph", std::time::Duration::from_secs(30), || {
        n1.run(&["get", "secret", "s1"]).ok.then_some(())
    });
    n1.fails_with(&["get", "secret", "s2"], None, "Forbidden");
    n1.fails_with(&["get", "secrets"], None, "Forbidden");
    let answered = common::narrowing::assert_never_wider(
        &n1,
        "/api/v1/namespaces/default/secrets",
        "s1",
        "s2",
    );
    assert!(
        answered >= 2,
        "only {answered} narrowed queries were answered"
    );
    // n2 has no pod: nothing at all.
    let n2 = node_kubectl(&server, &admin, "n2");
    assert_eq!(
        common::narrowing::assert_never_wider(
            &n2,
            "/api/v1/namespaces/default/secrets",
            "s1",
            "s2"
        ),
        0
    );
}
