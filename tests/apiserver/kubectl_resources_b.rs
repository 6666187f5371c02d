//! End to end: the real `k3rs server` and the real `kubectl` against the built-in resources of
//! part B (discovery.k8s.io, events.k8s.io, networking.k8s.io, storage.k8s.io,
//! scheduling.k8s.io, rbac.authorization.k8s.io, certificates.k8s.io). For each kind: a valid
//! object from YAML, its Table with kube-apiserver's columns, and a 422 naming upstream's field
//! paths for an invalid one; plus the bootstrap objects (system priority classes, which cannot
//! be deleted, and `cluster-admin`).

use crate::common;
use crate::common::kinds::{round_trip, start, RoundTrip};
use crate::common::kubectl::{header, table, Kubectl};

/// One kind: a valid object, the `kubectl get` header and the first cells of its row, and an
/// invalid object with the field paths its 422 must name.
type Case = RoundTrip<'static>;

const CASES: &[Case] = &[
    Case {
        resource: "endpointslices.discovery.k8s.io",
        name: "web-abc",
        valid: "\
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-abc, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
endpoints: [{addresses: [10.42.0.5], conditions: {ready: true}}]
ports: [{name: http, port: 80}]
",
        header: &["NAME", "ADDRESSTYPE", "PORTS", "ENDPOINTS", "AGE"],
        cells: &["web-abc", "IPv4", "80", "10.42.0.5"],
        invalid: "\
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: bad}
addressType: IPv4
endpoints: [{addresses: [not-an-ip]}]
ports: [{name: http, port: 80, protocol: ICMP}]
",
        fields: &["endpoints[0].addresses[0]", "ports[0].protocol"],
    },
    Case {
        resource: "ingresses.networking.k8s.io",
        name: "web",
        valid: "\
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: web}
spec:
  ingressClassName: nginx
  rules:
  - host: app.example.com
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}
",
        header: &["NAME", "CLASS", "HOSTS", "ADDRESS", "PORTS", "AGE"],
        cells: &["web", "nginx", "app.example.com", "80"],
        invalid: "\
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: bad}
spec:
  rules:
  - host: 10.0.0.1
    http:
      paths:
      - {path: api, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}
",
        fields: &["spec.rules[0].host", "spec.rules[0].http.paths[0].path"],
    },
    Case {
        resource: "ingressclasses.networking.k8s.io",
        name: "nginx",
        valid: "\
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: nginx}
spec: {controller: k8s.io/ingress-nginx}
",
        header: &["NAME", "CONTROLLER", "PARAMETERS", "AGE"],
        cells: &["nginx", "k8s.io/ingress-nginx", "<none>"],
        invalid: "\
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: bad}
spec: {controller: nginx}
",
        fields: &["spec.controller"],
    },
    Case {
        resource: "networkpolicies.networking.k8s.io",
        name: "deny",
        valid: "\
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: deny}
spec:
  podSelector: {matchLabels: {app: web}}
  ingress: [{from: [{ipBlock: {cidr: 10.0.0.0/8}}], ports: [{port: 80}]}]
",
        header: &["NAME", "POD-SELECTOR", "AGE"],
        cells: &["deny", "app=web"],
        invalid: "\
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: bad}
spec:
  podSelector: {}
  policyTypes: [Sideways]
  ingress: [{from: [{}]}]
",
        fields: &["spec.ingress[0].from[0]", "spec.policyTypes[0]"],
    },
    Case {
        resource: "storageclasses.storage.k8s.io",
        name: "local",
        valid: "\
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: local}
provisioner: rancher.io/local-path
",
        header: &[
            "NAME",
            "PROVISIONER",
            "RECLAIMPOLICY",
            "VOLUMEBINDINGMODE",
            "ALLOWVOLUMEEXPANSION",
            "AGE",
        ],
        cells: &[
            "local",
            "rancher.io/local-path",
            "Delete",
            "Immediate",
            "false",
        ],
        invalid: "\
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: bad}
provisioner: ''
reclaimPolicy: Recycle
",
        fields: &["provisioner", "reclaimPolicy"],
    },
    Case {
        resource: "csidrivers.storage.k8s.io",
        name: "hostpath.csi.k8s.io",
        valid: "\
apiVersion: storage.k8s.io/v1
kind: CSIDriver
metadata: {name: hostpath.csi.k8s.io}
spec: {podInfoOnMount: true}
",
        header: &[
            "NAME",
            "ATTACHREQUIRED",
            "PODINFOONMOUNT",
            "STORAGECAPACITY",
            "TOKENREQUESTS",
            "REQUIRESREPUBLISH",
            "MODES",
            "AGE",
        ],
        cells: &[
            "hostpath.csi.k8s.io",
            "true",
            "true",
            "false",
            "<unset>",
            "false",
            "Persistent",
        ],
        invalid: "\
apiVersion: storage.k8s.io/v1
kind: CSIDriver
metadata: {name: bad.csi.k8s.io}
spec: {volumeLifecycleModes: [Forever]}
",
        fields: &["spec.volumeLifecycleModes[0]"],
    },
    Case {
        resource: "priorityclasses.scheduling.k8s.io",
        name: "high",
        valid: "\
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
value: 1000
",
        header: &["NAME", "VALUE", "GLOBAL-DEFAULT", "AGE", "PREEMPTIONPOLICY"],
        cells: &["high", "1000", "false"],
        invalid: "\
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: system-mine}
value: 5
",
        fields: &["metadata.name"],
    },
    Case {
        resource: "roles.rbac.authorization.k8s.io",
        name: "reader",
        valid: "\
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: reader}
rules: [{apiGroups: [''], resources: [pods], verbs: [get, list]}]
",
        header: &["NAME", "CREATED", "AT"],
        cells: &["reader"],
        invalid: "\
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: bad}
rules: [{apiGroups: [''], resources: [pods]}, {nonResourceURLs: [/healthz], verbs: [get]}]
",
        fields: &["rules[0].verbs", "rules[1].nonResourceURLs"],
    },
    Case {
        resource: "rolebindings.rbac.authorization.k8s.io",
        name: "read-pods",
        valid: "\
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: read-pods}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: reader}
subjects: [{kind: User, name: alice}]
",
        header: &["NAME", "ROLE", "AGE"],
        cells: &["read-pods", "Role/reader"],
        invalid: "\
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: bad}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Secret, name: reader}
subjects: [{kind: Robot, name: r2d2}]
",
        fields: &["roleRef.kind", "subjects[0].kind"],
    },
    Case {
        resource: "clusterroles.rbac.authorization.k8s.io",
        name: "aggregate-view",
        valid: "\
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: aggregate-view}
aggregationRule:
  clusterRoleSelectors: [{matchLabels: {rbac.example.com/aggregate-to-view: 'true'}}]
rules: []
",
        header: &["NAME", "CREATED", "AT"],
        cells: &["aggregate-view"],
        invalid: "\
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: bad}
rules: [{apiGroups: [''], verbs: [get]}]
",
        fields: &["rules[0].resources"],
    },
    Case {
        resource: "clusterrolebindings.rbac.authorization.k8s.io",
        name: "view-alice",
        valid: "\
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: view-alice}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: aggregate-view}
subjects: [{kind: ServiceAccount, name: default, namespace: default}]
",
        header: &["NAME", "ROLE", "AGE"],
        cells: &["view-alice", "ClusterRole/aggregate-view"],
        invalid: "\
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: bad}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: reader}
subjects: [{kind: ServiceAccount, name: default}]
",
        fields: &["roleRef.kind", "subjects[0].namespace"],
    },
];

/// Every kind: create from YAML, read back as a Table, and get a 422 with upstream's field
/// paths for the invalid object.
fn check_cases(k: &Kubectl) {
    for case in CASES {
        round_trip(k, case);
    }
}

/// Defaults the server applied.
fn check_defaults(k: &Kubectl) {
    let sc = k.ok(&[
        "get",
        "storageclass",
        "local",
        "-o",
        "jsonpath={.reclaimPolicy} {.volumeBindingMode}",
    ]);
    assert_eq!(sc, "Delete Immediate");
    let np = k.ok(&[
        "get",
        "netpol",
        "deny",
        "-o",
        "jsonpath={.spec.policyTypes} {.spec.ingress[0].ports[0].protocol}",
    ]);
    assert_eq!(np, "[\"Ingress\"] TCP");
    let pc = k.ok(&["get", "pc", "high", "-o", "jsonpath={.preemptionPolicy}"]);
    assert_eq!(pc, "PreemptLowerPriority");
    // Immutable fields: a StorageClass's provisioner.
    let err = k.fails_with(
        &[
            "patch",
            "storageclass",
            "local",
            "--type=merge",
            "-p",
            r#"{"provisioner":"other.io/x"}"#,
        ],
        None,
        "is invalid",
    );
    assert!(
        err.contains("provisioner: Forbidden: updates to provisioner are forbidden."),
        "{err}"
    );
}

/// The system priority classes exist with upstream's values and cannot be deleted; the
/// `cluster-admin` role and its binding to `system:masters` exist.
fn check_bootstrap(k: &Kubectl) {
    let out = k.ok(&["get", "priorityclasses"]);
    let rows = table(&out);
    let value_of = |name: &str| {
        rows.iter()
            .find(|r| r[0] == name)
            .map(|r| r[1].clone())
            .unwrap_or_else(|| panic!("{name} missing: {out}"))
    };
    assert_eq!(value_of("system-node-critical"), "2000001000");
    assert_eq!(value_of("system-cluster-critical"), "2000000000");
    let err = k.fails_with(
        &["delete", "priorityclass", "system-node-critical"],
        None,
        "Forbidden",
    );
    assert!(
        err.contains("this is a system priority class and cannot be deleted"),
        "{err}"
    );
    // A collection delete (DELETE on the collection) leaves them too.
    k.ok(&[
        "delete",
        "--raw",
        "/apis/scheduling.k8s.io/v1/priorityclasses",
    ]);
    let left = k.ok(&["get", "pc", "-o", "name"]);
    assert_eq!(
        left,
        "priorityclass.scheduling.k8s.io/system-cluster-critical\npriorityclass.scheduling.k8s.io/system-node-critical\n"
    );
    let rules = k.ok(&[
        "get",
        "clusterrole",
        "cluster-admin",
        "-o",
        "jsonpath={.rules[0].verbs} {.rules[1].nonResourceURLs}",
    ]);
    assert_eq!(rules, "[\"*\"] [\"*\"]");
    let crb = k.ok(&["get", "clusterrolebinding", "cluster-admin", "-o", "wide"]);
    assert_eq!(
        header(&crb),
        ["NAME", "ROLE", "AGE", "USERS", "GROUPS", "SERVICEACCOUNTS"]
    );
    let row = &table(&crb)[1];
    assert_eq!(row[1], "ClusterRole/cluster-admin");
    assert_eq!(row[3], "system:masters");
}

const CORE_EVENT: &str = "\
apiVersion: v1
kind: Event
metadata: {name: web.1, namespace: default}
involvedObject: {kind: Pod, name: web, namespace: default}
reason: Pulled
message: image pulled
type: Normal
source: {component: kubelet, host: n1}
count: 3
firstTimestamp: '2026-01-01T00:00:00Z'
lastTimestamp: '2026-01-01T00:01:00Z'
";

const EVENTS_V1_EVENT: &str = "\
apiVersion: events.k8s.io/v1
kind: Event
metadata: {name: sched.1, namespace: default}
eventTime: '2026-01-01T00:00:00.000000Z'
reportingController: k3rs.io/scheduler
reportingInstance: s1
action: Binding
reason: Scheduled
note: assigned default/web to n1
type: Normal
regarding: {kind: Pod, name: web, namespace: default}
";

const BAD_EVENTS_V1_EVENT: &str = "\
apiVersion: events.k8s.io/v1
kind: Event
metadata: {name: bad.1, namespace: default}
eventTime: '2026-01-01T00:00:00.000000Z'
reason: Scheduled
type: Sometimes
deprecatedCount: 2
regarding: {kind: Pod, name: web, namespace: default}
";

fn get_json(k: &Kubectl, path: &str) -> serde_json::Value {
    serde_json::from_str(&k.ok(&["get", "--raw", path])).unwrap()
}

/// A core Event read through events.k8s.io and an events.k8s.io Event read through core/v1,
/// converted field by field; events.k8s.io's table, field selectors and strict validation.
fn check_events(k: &Kubectl) {
    k.ok_stdin(&["create", "-f", "-"], Some(CORE_EVENT));
    let e = get_json(k, "/apis/events.k8s.io/v1/namespaces/default/events/web.1");
    assert_eq!(e["apiVersion"], "events.k8s.io/v1");
    assert_eq!(e["regarding"]["name"], "web");
    assert_eq!(e["note"], "image pulled");
    assert_eq!(e["deprecatedSource"]["component"], "kubelet");
    assert_eq!(e["deprecatedCount"], 3);
    assert_eq!(e["deprecatedFirstTimestamp"], "2026-01-01T00:00:00Z");
    assert!(
        e.get("message").is_none() && e.get("involvedObject").is_none(),
        "{e}"
    );

    k.ok_stdin(&["create", "-f", "-"], Some(EVENTS_V1_EVENT));
    let c = get_json(k, "/api/v1/namespaces/default/events/sched.1");
    assert_eq!(c["apiVersion"], "v1");
    assert_eq!(c["involvedObject"]["kind"], "Pod");
    assert_eq!(c["message"], "assigned default/web to n1");
    assert_eq!(c["reportingComponent"], "k3rs.io/scheduler");
    assert_eq!(c["action"], "Binding");
    // Both lists show both events, with the same resourceVersions.
    let core_rv = c["metadata"]["resourceVersion"].clone();
    let e = get_json(
        k,
        "/apis/events.k8s.io/v1/namespaces/default/events/sched.1",
    );
    assert_eq!(e["metadata"]["resourceVersion"], core_rv);
    let names = k.ok(&["get", "events.events.k8s.io", "-o", "name"]);
    assert_eq!(
        names,
        "event.events.k8s.io/sched.1\nevent.events.k8s.io/web.1\n"
    );
    let out = k.ok(&["get", "events.events.k8s.io", "sched.1"]);
    assert_eq!(
        header(&out),
        ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    );
    assert_eq!(table(&out)[1][1..4], ["Normal", "Scheduled", "pod/web"]);
    let sel = k.ok(&[
        "get",
        "events.events.k8s.io",
        "--field-selector",
        "reportingController=k3rs.io/scheduler",
        "-o",
        "name",
    ]);
    assert_eq!(sel, "event.events.k8s.io/sched.1\n");
    // A patch through events.k8s.io lands in the core object.
    k.ok(&[
        "patch",
        "events.events.k8s.io",
        "sched.1",
        "--type=merge",
        "-p",
        r#"{"series":{"count":2,"lastObservedTime":"2026-01-01T00:05:00.000000Z"}}"#,
    ]);
    let c = get_json(k, "/api/v1/namespaces/default/events/sched.1");
    assert_eq!(c["series"]["count"], 2);
    let err = k.fails_with(
        &["create", "-f", "-"],
        Some(BAD_EVENTS_V1_EVENT),
        "is invalid",
    );
    for f in [
        "reportingController",
        "reportingInstance",
        "action",
        "type",
        "deprecatedCount",
    ] {
        assert!(err.contains(&format!("{f}: ")), "{f} in {err}");
    }
}

/// A fresh PEM certificate signing request for `cn`, base64-encoded as `spec.request` wants.
pub(crate) fn csr_request(cn: &str) -> String {
    use base64::Engine;
    let openssl = common::require_program("openssl", "openssl");
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(openssl)
        .args([
            "req",
            "-new",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-subj",
            &format!("/CN={cn}/O=dev"),
            "-keyout",
        ])
        .arg(dir.path().join("key.pem"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    base64::engine::general_purpose::STANDARD.encode(out.stdout)
}

fn csr_yaml(name: &str, request: &str) -> String {
    format!(
        "\
apiVersion: certificates.k8s.io/v1
kind: CertificateSigningRequest
metadata: {{name: {name}}}
spec:
  request: {request}
  signerName: kubernetes.io/kube-apiserver-client
  expirationSeconds: 86400
  usages: [client auth]
"
    )
}

fn csr_condition(k: &Kubectl, name: &str) -> String {
    let out = k.ok(&["get", "csr", name]);
    table(&out)[1].last().cloned().unwrap_or_default()
}

/// CSRs: the request is parsed and checked, the requester recorded, `kubectl certificate
/// approve|deny` work, Approved and Denied exclude each other, `status` cannot approve.
fn check_csrs(k: &Kubectl) {
    k.ok_stdin(
        &["create", "-f", "-"],
        Some(&csr_yaml("alice", &csr_request("alice"))),
    );
    let out = k.ok(&["get", "csr", "alice"]);
    assert_eq!(
        header(&out),
        [
            "NAME",
            "AGE",
            "SIGNERNAME",
            "REQUESTOR",
            "REQUESTEDDURATION",
            "CONDITION"
        ]
    );
    let row = &table(&out)[1];
    assert_eq!(row[0], "alice");
    assert_eq!(
        row[2..],
        [
            "kubernetes.io/kube-apiserver-client",
            "system:admin",
            "24h",
            "Pending"
        ]
    );
    let groups = k.ok(&["get", "csr", "alice", "-o", "jsonpath={.spec.groups}"]);
    assert_eq!(groups, r#"["system:masters","system:authenticated"]"#);

    let approved = k.ok(&["certificate", "approve", "alice"]);
    assert_eq!(
        approved,
        "certificatesigningrequest.certificates.k8s.io/alice approved\n"
    );
    // The kube-apiserver-client signer may already have issued the certificate.
    let condition = csr_condition(k, "alice");
    assert!(
        condition == "Approved" || condition == "Approved,Issued",
        "{condition}"
    );
    let reason = k.ok(&[
        "get",
        "csr",
        "alice",
        "-o",
        "jsonpath={.status.conditions[0].reason} {.status.conditions[0].status}",
    ]);
    assert_eq!(reason, "KubectlApprove True");
    // Denying an approved request: kubectl refuses even with --force; the server refuses a
    // PUT to /approval with both conditions.
    k.fails_with(
        &["certificate", "deny", "--force", "alice"],
        None,
        "is already Approved",
    );
    let mut both = get_json(
        k,
        "/apis/certificates.k8s.io/v1/certificatesigningrequests/alice",
    );
    both["status"]["conditions"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({"type": "Denied", "status": "True", "reason": "Nope"}));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("both.json");
    std::fs::write(&file, both.to_string()).unwrap();
    let err = k.fails_with(
        &[
            "replace",
            "--raw",
            "/apis/certificates.k8s.io/v1/certificatesigningrequests/alice/approval",
            "-f",
            file.to_str().unwrap(),
        ],
        None,
        "Approved and Denied conditions are mutually exclusive",
    );
    assert!(err.contains("status.conditions"), "{err}");
    assert!(
        csr_condition(k, "alice").starts_with("Approved"),
        "the refused approval changed nothing"
    );

    k.ok_stdin(
        &["create", "-f", "-"],
        Some(&csr_yaml("bob", &csr_request("bob"))),
    );
    let denied = k.ok(&["certificate", "deny", "bob"]);
    assert_eq!(
        denied,
        "certificatesigningrequest.certificates.k8s.io/bob denied\n"
    );
    assert_eq!(csr_condition(k, "bob"), "Denied");
    // The status subresource cannot approve (nor drop the denial).
    k.ok(&[
        "patch",
        "csr",
        "bob",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"conditions":[{"type":"Approved","status":"True"}]}}"#,
    ]);
    assert_eq!(csr_condition(k, "bob"), "Denied");

    // Not a CSR, no usages: 422 with upstream's paths.
    let bad = csr_yaml("bad", "bm90IGEgY3Ny").replace("  usages: [client auth]\n", "");
    let err = k.fails_with(&["create", "-f", "-"], Some(&bad), "is invalid");
    assert!(
        err.contains(
            "spec.request: Invalid value: \"\": PEM block type must be CERTIFICATE REQUEST"
        ),
        "{err}"
    );
    assert!(err.contains("spec.usages: Required value"), "{err}");
}

#[test]
fn part_b_resources_with_kubectl() {
    let (_server, k) = start();
    // Discovery lists every kind with its short names.
    let res = k.ok(&["api-resources", "--no-headers"]);
    for (name, short) in [
        ("endpointslices", ""),
        ("ingresses", "ing"),
        ("ingressclasses", ""),
        ("networkpolicies", "netpol"),
        ("storageclasses", "sc"),
        ("csidrivers", ""),
        ("priorityclasses", "pc"),
        ("roles", ""),
        ("rolebindings", ""),
        ("clusterroles", ""),
        ("clusterrolebindings", ""),
        ("certificatesigningrequests", "csr"),
    ] {
        let line = res
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("{name} missing from api-resources: {res}"));
        if !short.is_empty() {
            assert_eq!(line.split_whitespace().nth(1), Some(short), "{line}");
        }
    }
    check_bootstrap(&k);
    check_cases(&k);
    check_defaults(&k);
    check_events(&k);
    check_csrs(&k);
}
