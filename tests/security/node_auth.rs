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

const INGRESS_WORLD: &str = "apiVersion: v1
kind: Namespace
metadata: {name: web}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: site, namespace: web}
spec:
  ingressClassName: k3rs
  tls: [{hosts: [site.example.com], secretName: site-tls}]
  defaultBackend: {service: {name: site, port: {number: 80}}}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: elsewhere, namespace: web}
spec:
  ingressClassName: nginx
  tls: [{hosts: [other.example.com], secretName: nginx-tls}]
  defaultBackend: {service: {name: site, port: {number: 80}}}
";

/// Whether node `k` may get Secret `web/name` (panics on any answer but allowed/Forbidden).
fn node_reads(k: &Kubectl, name: &str) -> bool {
    let out = k.run(&["get", "secret", "-n", "web", name]);
    assert!(out.ok || out.stderr.contains("Forbidden"), "{out:?}");
    out.ok
}

/// The TLS Secret an Ingress of the built-in class names is readable by every node, by name
/// only (each node's ingress controller serves it), and only while the Ingress names it: nodes
/// still list no Secrets and read no other, nor those of other classes' Ingresses. What the
/// ingress controller watches, nodes may list cluster-wide.
#[test]
fn every_node_reads_the_tls_secrets_of_k3rs_ingresses_by_name_only() {
    let (server, admin) = Kubectl::start_server(&["--disable-agent"]);
    admin.ok_stdin(&["create", "-f", "-"], Some(NODES));
    admin.ok_stdin(&["create", "-f", "-"], Some(INGRESS_WORLD));
    for s in ["site-tls", "nginx-tls", "other"] {
        admin.ok(&[
            "create",
            "secret",
            "generic",
            "-n",
            "web",
            s,
            "--from-literal=k=v",
        ]);
    }
    admin.ok(&[
        "create",
        "secret",
        "generic",
        "site-tls",
        "--from-literal=k=v",
    ]);
    let n1 = node_kubectl(&server, &admin, "n1");
    let n2 = node_kubectl(&server, &admin, "n2");
    let wait = std::time::Duration::from_secs(30);
    common::wait_for("the ingress edge", wait, || {
        node_reads(&n1, "site-tls").then_some(())
    });
    assert!(node_reads(&n2, "site-tls"), "every node, pods or not");
    assert!(!node_reads(&n1, "other"));
    assert!(!node_reads(&n1, "nginx-tls"), "another class's Ingress");
    n1.fails_with(
        &["get", "secret", "site-tls", "-n", "default"],
        None,
        "Forbidden",
    );
    n1.fails_with(&["get", "secrets", "-n", "web"], None, "Forbidden");
    n1.fails_with(&["get", "secrets", "-A"], None, "Forbidden");
    let answered = common::narrowing::assert_never_wider(
        &n1,
        "/api/v1/namespaces/web/secrets",
        "site-tls",
        "other",
    );
    assert!(
        answered >= 2,
        "only {answered} narrowed queries were answered"
    );
    for what in ["ingresses", "ingressclasses", "services", "endpointslices"] {
        n1.ok(&["get", what, "-A"]);
    }
    n1.ok(&[
        "get",
        "--raw",
        "/apis/networking.k8s.io/v1/ingresses?watch=true&timeoutSeconds=1",
    ]);

    // Dropping the tls entry revokes the access; naming the Secret again restores it;
    // deleting the Ingress revokes it.
    admin.ok(&[
        "patch",
        "ingress",
        "site",
        "-n",
        "web",
        "--type=json",
        "-p",
        r#"[{"op": "remove", "path": "/spec/tls"}]"#,
    ]);
    common::wait_for("revoked by the edit", wait, || {
        (!node_reads(&n2, "site-tls")).then_some(())
    });
    admin.ok(&[
        "patch",
        "ingress",
        "site",
        "-n",
        "web",
        "--type=merge",
        "-p",
        r#"{"spec": {"tls": [{"secretName": "site-tls"}]}}"#,
    ]);
    common::wait_for("named again", wait, || {
        node_reads(&n2, "site-tls").then_some(())
    });
    admin.ok(&["delete", "ingress", "site", "-n", "web"]);
    common::wait_for("revoked by the deletion", wait, || {
        (!node_reads(&n1, "site-tls")).then_some(())
    });
}

const TOKEN_WORLD: &str = "apiVersion: v1
kind: ServiceAccount
metadata: {name: app}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: other}
---
apiVersion: v1
kind: Pod
metadata: {name: mine}
spec:
  nodeName: n1
  serviceAccountName: app
  containers: [{name: c, image: busybox}]
---
apiVersion: v1
kind: Pod
metadata: {name: mine-other-sa}
spec:
  nodeName: n1
  serviceAccountName: other
  containers: [{name: c, image: busybox}]
---
apiVersion: v1
kind: Pod
metadata: {name: theirs}
spec:
  nodeName: n2
  serviceAccountName: app
  containers: [{name: c, image: busybox}]
---
apiVersion: v1
kind: Pod
metadata: {name: unbound}
spec:
  serviceAccountName: app
  containers: [{name: c, image: busybox}]
";

fn uid(admin: &Kubectl, pod: &str) -> String {
    admin.ok(&["get", "pod", pod, "-o", "jsonpath={.metadata.uid}"])
}

/// `kubectl create token <sa>` bound to pod `pod` (with `uid`) for `duration`.
fn pod_token(k: &Kubectl, sa: &str, pod: &str, uid: &str, duration: &str) -> common::kubectl::Out {
    k.run(&[
        "create",
        "token",
        sa,
        "--bound-object-kind",
        "Pod",
        "--bound-object-name",
        pod,
        "--bound-object-uid",
        uid,
        "--duration",
        duration,
    ])
}

/// NodeRestriction on TokenRequest: a node gets a token only bound (by uid) to a pod bound to
/// it that runs as the account, for at most 24 h; the token's claims name that pod and node.
#[test]
fn a_node_mints_tokens_only_for_its_own_pods() {
    let (server, admin) = Kubectl::start_server(&[]);
    admin.ok_stdin(&["create", "-f", "-"], Some(NODES));
    admin.ok_stdin(&["create", "-f", "-"], Some(TOKEN_WORLD));
    let n1 = node_kubectl(&server, &admin, "n1");
    let mine = uid(&admin, "mine");
    let out = common::wait_for("the node graph", std::time::Duration::from_secs(30), || {
        let out = pod_token(&n1, "app", "mine", &mine, "48h");
        out.ok.then_some(out)
    });
    let claims = common::jwt::claims(out.stdout.trim());
    assert_eq!(claims["sub"], "system:serviceaccount:default:app");
    assert_eq!(claims["kubernetes.io"]["pod"]["name"], "mine");
    assert_eq!(claims["kubernetes.io"]["pod"]["uid"], mine.as_str());
    assert_eq!(claims["kubernetes.io"]["node"]["name"], "n1");
    let lifetime = claims["exp"].as_i64().unwrap() - claims["iat"].as_i64().unwrap();
    assert_eq!(lifetime, 86400, "a node's token lives at most 24 h");

    let refused = |out: common::kubectl::Out, why: &str| {
        assert!(!out.ok && out.stderr.contains("forbidden"), "{out:?}");
        assert!(out.stderr.contains(why), "{why}: {out:?}");
    };
    // Another node's pod, a pod bound to no node, a wrong uid, another account of its own
    // pod, and no pod at all.
    refused(
        pod_token(&n1, "app", "theirs", &uid(&admin, "theirs"), "1h"),
        "node requested token bound to a pod scheduled on a different node",
    );
    refused(
        pod_token(&n1, "app", "unbound", &uid(&admin, "unbound"), "1h"),
        "node requested token bound to a pod scheduled on a different node",
    );
    refused(
        pod_token(&n1, "app", "mine", "0000-not-the-uid", "1h"),
        "does not match the UID in record",
    );
    refused(
        pod_token(&n1, "other", "mine", &mine, "1h"),
        "node requested token for service account \"other\" bound to a pod running as \"app\"",
    );
    refused(
        n1.run(&["create", "token", "app"]),
        "node requested token not bound to a pod",
    );
    // n2 has no pod running as `other`: the Node authorizer already says no.
    let n2 = node_kubectl(&server, &admin, "n2");
    let out = pod_token(
        &n2,
        "other",
        "mine-other-sa",
        &uid(&admin, "mine-other-sa"),
        "1h",
    );
    assert!(
        !out.ok
            && out
                .stderr
                .contains("no relationship found between node 'n2'"),
        "{out:?}"
    );

    // The lifetime bounds: under 10 minutes is 422 for everyone; beyond u64 too; an admin's
    // long token is not shortened.
    n1.fails_with(
        &[
            "create",
            "token",
            "app",
            "--bound-object-kind",
            "Pod",
            "--bound-object-name",
            "mine",
            "--bound-object-uid",
            &mine,
            "--duration",
            "5m",
        ],
        None,
        "may not specify a duration less than 10 minutes",
    );
    let huge = r#"{"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
        "spec": {"expirationSeconds": 18446744073709551615}}"#;
    admin.fails_with(
        &[
            "create",
            "--raw",
            "/api/v1/namespaces/default/serviceaccounts/app/token",
            "-f",
            "-",
        ],
        Some(huge),
        "may not specify a duration larger than 2^32 seconds",
    );
    let long = admin.ok(&["create", "token", "app", "--duration", "48h"]);
    let claims = common::jwt::claims(long.trim());
    assert_eq!(
        claims["exp"].as_i64().unwrap() - claims["iat"].as_i64().unwrap(),
        48 * 3600
    );
}

/// The PodDisruptionBudget of `theirs` (n2's pod), as the disruption controller keeps it.
const BUDGET: &str = "apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web}
spec:
  minAvailable: 0
  selector: {matchLabels: {app: web}}
";

/// Evictions are admitted (NodeRestriction: only pods bound to the node) before the budget
/// is charged: n1's refused eviction of n2's pod leaves the PDB's status as it was; n2's own
/// eviction goes through.
#[test]
fn a_node_cannot_evict_another_nodes_pod_nor_charge_its_budget() {
    let (server, admin) = Kubectl::start_server(&[]);
    admin.ok_stdin(&["create", "-f", "-"], Some(NODES));
    let pod = "apiVersion: v1
kind: Pod
metadata: {name: theirs, labels: {app: web}}
spec:
  nodeName: n2
  containers: [{name: c, image: busybox}]
";
    admin.ok_stdin(&["create", "-f", "-"], Some(pod));
    // Running and Ready, as n2's kubelet would report it.
    let status =
        r#"{"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}"#;
    admin.ok(&[
        "patch",
        "pod",
        "theirs",
        "--subresource=status",
        "--type=merge",
        "-p",
        status,
    ]);
    admin.ok_stdin(&["create", "-f", "-"], Some(BUDGET));
    let budget = || {
        let pdb = common::kubectl::json(&admin, &["get", "pdb", "web"]);
        pdb["status"].clone()
    };
    let before = common::wait_for(
        "the budget to allow a disruption",
        std::time::Duration::from_secs(30),
        || {
            let s = budget();
            (s["disruptionsAllowed"] == 1 && s["observedGeneration"] == 1).then_some(s)
        },
    );

    let eviction = r#"{"apiVersion": "policy/v1", "kind": "Eviction",
        "metadata": {"name": "theirs", "namespace": "default"}}"#;
    let evict = |k: &Kubectl| {
        k.run_stdin(
            &[
                "create",
                "--raw",
                "/api/v1/namespaces/default/pods/theirs/eviction",
                "-f",
                "-",
            ],
            Some(eviction),
        )
    };
    let n1 = node_kubectl(&server, &admin, "n1");
    let out = evict(&n1);
    assert!(
        !out.ok
            && out
                .stderr
                .contains("node \"n1\" can only evict pods with spec.nodeName set to itself"),
        "{out:?}"
    );
    assert_eq!(budget(), before, "a refused eviction charged the budget");
    assert!(admin.run(&["get", "pod", "theirs"]).ok, "the pod is gone");

    let n2 = node_kubectl(&server, &admin, "n2");
    let out = evict(&n2);
    assert!(out.ok, "{out:?}");
    common::wait_for(
        "the evicted pod to go",
        std::time::Duration::from_secs(30),
        || {
            let out = admin.run(&[
                "get",
                "pod",
                "theirs",
                "-o",
                "jsonpath={.metadata.deletionTimestamp}",
            ]);
            (!out.ok || !out.stdout.is_empty()).then_some(())
        },
    );
}

/// `node` (a kubectl) submits a kubelet-serving request for itself with `sans`; its name.
fn serving_request(
    server: &common::k3rs::K3rs,
    node: &Kubectl,
    node_name: &str,
    name: &str,
    sans: &[&str],
) -> String {
    use base64::Engine;
    let subject = format!("/O=system:nodes/CN=system:node:{node_name}");
    let (pem, _key) = users::certificate_request_with_sans(server, name, &subject, sans);
    let csr = serde_json::json!({
        "apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
        "metadata": {"name": name},
        "spec": {"request": base64::engine::general_purpose::STANDARD.encode(pem),
            "signerName": "kubernetes.io/kubelet-serving",
            "usages": ["digital signature", "key encipherment", "server auth"]}
    });
    node.ok_stdin(&["create", "-f", "-"], Some(&csr.to_string()));
    name.to_string()
}

fn csr_status(admin: &Kubectl, name: &str) -> serde_json::Value {
    common::kubectl::json(admin, &["get", "csr", name])["status"].clone()
}

/// Kubelet serving certificates are approved for the node's own names and addresses only:
/// not for a peer's name or address (even listed in the node's own status), nor for the API
/// server's names.
#[test]
fn a_node_gets_a_serving_certificate_only_for_its_own_names() {
    let (server, admin) = Kubectl::start_server(&[]);
    admin.ok_stdin(&["create", "-f", "-"], Some(NODES));
    let addresses = |ip: &str, host: &str| {
        format!(
            r#"{{"status": {{"addresses": [{{"type": "InternalIP", "address": "{ip}"}},
                {{"type": "Hostname", "address": "{host}"}}]}}}}"#
        )
    };
    admin.ok(&[
        "patch",
        "node",
        "n2",
        "--subresource=status",
        "--type=merge",
        "-p",
        &addresses("10.77.0.2", "n2"),
    ]);
    // n1 lists its own address, then also n2's and an API server name (a node writes its
    // own status).
    let n1 = node_kubectl(&server, &admin, "n1");
    let mut node: serde_json::Value =
        serde_json::from_str(&admin.ok(&["get", "--raw", "/api/v1/nodes/n1/status"])).unwrap();
    node["status"]["addresses"] = serde_json::json!([
        {"type": "InternalIP", "address": "10.77.0.1"},
        {"type": "InternalIP", "address": "10.77.0.2"},
        {"type": "Hostname", "address": "n1"},
        {"type": "Hostname", "address": "n2"},
        {"type": "InternalDNS", "address": "kubernetes.default.svc.cluster.local"}
    ]);
    let dir = tempfile::tempdir().unwrap();
    let body = dir.path().join("n1-status.json");
    std::fs::write(&body, node.to_string()).unwrap();
    n1.ok(&[
        "replace",
        "--raw",
        "/api/v1/nodes/n1/status",
        "-f",
        body.to_str().unwrap(),
    ]);

    let greedy = [
        serving_request(&server, &n1, "n1", "peer-ip", &["DNS:n1", "IP:10.77.0.2"]),
        serving_request(&server, &n1, "n1", "peer-name", &["DNS:n2"]),
        serving_request(
            &server,
            &n1,
            "n1",
            "api-name",
            &["DNS:kubernetes.default.svc.cluster.local"],
        ),
        serving_request(&server, &n1, "n2", "as-n2", &["DNS:n2", "IP:10.77.0.2"]),
    ];
    let own = serving_request(&server, &n1, "n1", "own", &["DNS:n1", "IP:10.77.0.1"]);
    let issued = common::wait_for(
        "n1's own serving certificate",
        std::time::Duration::from_secs(30),
        || {
            let s = csr_status(&admin, &own);
            s["certificate"].is_string().then_some(s)
        },
    );
    assert_eq!(issued["conditions"][0]["reason"], "AutoApproved");
    // The approver looks at a pending serving request again every 3 s: give it two rounds.
    std::thread::sleep(std::time::Duration::from_secs(7));
    for name in greedy {
        let s = csr_status(&admin, &name);
        assert!(
            s["certificate"].is_null() && s["conditions"].is_null(),
            "{name} was decided: {s}"
        );
    }
}
