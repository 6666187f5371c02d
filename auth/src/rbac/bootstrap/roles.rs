//! The cluster roles and bindings of upstream's `bootstrappolicy/policy.go` (the ones that
//! matter to the components k3rs runs).

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule};

use super::{
    aggregated, binding, cluster_role, labelled, signers, subject, AGGREGATE_TO_ADMIN,
    AGGREGATE_TO_EDIT, AGGREGATE_TO_VIEW,
};
use crate::rbac::rules::{rule, url_rule, with_names};

pub(super) const READ: &[&str] = &["get", "list", "watch"];
pub(super) const WRITE: &[&str] = &["create", "update", "patch", "delete", "deletecollection"];
pub(super) const READ_WRITE: &[&str] = &[
    "get",
    "list",
    "watch",
    "create",
    "update",
    "patch",
    "delete",
    "deletecollection",
];
pub(super) const READ_UPDATE: &[&str] = &["get", "list", "watch", "update", "patch"];

/// `create update patch` on events (core and events.k8s.io).
pub(super) fn events_rule() -> PolicyRule {
    rule(
        &["create", "update", "patch"],
        &["", "events.k8s.io"],
        &["events"],
    )
}

fn aggregate_to_admin() -> ClusterRole {
    labelled(
        cluster_role(
            "system:aggregate-to-admin",
            vec![
                rule(
                    &["create"],
                    &["authorization.k8s.io"],
                    &["localsubjectaccessreviews"],
                ),
                rule(
                    READ_WRITE,
                    &["rbac.authorization.k8s.io"],
                    &["roles", "rolebindings"],
                ),
            ],
        ),
        &[(AGGREGATE_TO_ADMIN, "true")],
    )
}

fn aggregate_to_edit() -> ClusterRole {
    labelled(
        cluster_role(
            "system:aggregate-to-edit",
            vec![
                rule(
                    READ,
                    &[""],
                    &[
                        "pods/attach",
                        "pods/proxy",
                        "pods/exec",
                        "pods/portforward",
                        "secrets",
                        "services/proxy",
                    ],
                ),
                rule(&["impersonate"], &[""], &["serviceaccounts"]),
                rule(
                    WRITE,
                    &[""],
                    &[
                        "pods",
                        "pods/attach",
                        "pods/proxy",
                        "pods/exec",
                        "pods/portforward",
                    ],
                ),
                rule(&["create"], &[""], &["pods/eviction"]),
                rule(
                    WRITE,
                    &[""],
                    &[
                        "replicationcontrollers",
                        "replicationcontrollers/scale",
                        "serviceaccounts",
                        "services",
                        "services/proxy",
                        "persistentvolumeclaims",
                        "configmaps",
                        "secrets",
                        "events",
                    ],
                ),
                rule(&["create"], &[""], &["serviceaccounts/token"]),
                rule(
                    WRITE,
                    &["apps"],
                    &[
                        "statefulsets",
                        "statefulsets/scale",
                        "daemonsets",
                        "deployments",
                        "deployments/scale",
                        "deployments/rollback",
                        "replicasets",
                        "replicasets/scale",
                    ],
                ),
                rule(WRITE, &["autoscaling"], &["horizontalpodautoscalers"]),
                rule(WRITE, &["batch"], &["jobs", "cronjobs"]),
                rule(
                    WRITE,
                    &["extensions"],
                    &[
                        "daemonsets",
                        "deployments",
                        "deployments/scale",
                        "deployments/rollback",
                        "ingresses",
                        "replicasets",
                        "replicasets/scale",
                        "replicationcontrollers/scale",
                        "networkpolicies",
                    ],
                ),
                rule(WRITE, &["policy"], &["poddisruptionbudgets"]),
                rule(
                    WRITE,
                    &["networking.k8s.io"],
                    &["networkpolicies", "ingresses"],
                ),
            ],
        ),
        &[(AGGREGATE_TO_EDIT, "true")],
    )
}

fn aggregate_to_view() -> ClusterRole {
    labelled(
        cluster_role(
            "system:aggregate-to-view",
            vec![
                rule(
                    READ,
                    &[""],
                    &[
                        "pods",
                        "replicationcontrollers",
                        "replicationcontrollers/scale",
                        "serviceaccounts",
                        "services",
                        "services/status",
                        "endpoints",
                        "persistentvolumeclaims",
                        "persistentvolumeclaims/status",
                        "configmaps",
                    ],
                ),
                rule(
                    READ,
                    &[""],
                    &[
                        "limitranges",
                        "resourcequotas",
                        "bindings",
                        "events",
                        "pods/status",
                        "resourcequotas/status",
                        "namespaces/status",
                        "replicationcontrollers/status",
                        "pods/log",
                    ],
                ),
                rule(READ, &[""], &["namespaces"]),
                rule(READ, &["discovery.k8s.io"], &["endpointslices"]),
                rule(
                    READ,
                    &["apps"],
                    &[
                        "controllerrevisions",
                        "statefulsets",
                        "statefulsets/status",
                        "statefulsets/scale",
                        "daemonsets",
                        "daemonsets/status",
                        "deployments",
                        "deployments/status",
                        "deployments/scale",
                        "replicasets",
                        "replicasets/status",
                        "replicasets/scale",
                    ],
                ),
                rule(
                    READ,
                    &["autoscaling"],
                    &[
                        "horizontalpodautoscalers",
                        "horizontalpodautoscalers/status",
                    ],
                ),
                rule(
                    READ,
                    &["batch"],
                    &["jobs", "jobs/status", "cronjobs", "cronjobs/status"],
                ),
                rule(
                    READ,
                    &["extensions"],
                    &[
                        "daemonsets",
                        "daemonsets/status",
                        "deployments",
                        "deployments/scale",
                        "deployments/status",
                        "ingresses",
                        "ingresses/status",
                        "replicasets",
                        "replicasets/scale",
                        "replicasets/status",
                        "replicationcontrollers/scale",
                        "networkpolicies",
                    ],
                ),
                rule(
                    READ,
                    &["policy"],
                    &["poddisruptionbudgets", "poddisruptionbudgets/status"],
                ),
                rule(
                    READ,
                    &["networking.k8s.io"],
                    &["networkpolicies", "ingresses", "ingresses/status"],
                ),
            ],
        ),
        &[(AGGREGATE_TO_VIEW, "true")],
    )
}

fn node() -> ClusterRole {
    cluster_role(
        "system:node",
        vec![
            rule(&["create"], &["authentication.k8s.io"], &["tokenreviews"]),
            rule(
                &["create"],
                &["authorization.k8s.io"],
                &["subjectaccessreviews", "localsubjectaccessreviews"],
            ),
            rule(READ, &[""], &["services"]),
            rule(&["create", "get", "list", "watch"], &[""], &["nodes"]),
            rule(&["update", "patch"], &[""], &["nodes/status"]),
            rule(&["update", "patch"], &[""], &["nodes"]),
            events_rule(),
            rule(READ, &[""], &["pods"]),
            rule(&["create", "delete"], &[""], &["pods"]),
            rule(&["update", "patch"], &[""], &["pods/status"]),
            rule(&["create"], &[""], &["pods/eviction"]),
            rule(&["get", "list", "watch"], &[""], &["secrets", "configmaps"]),
            rule(
                &["get"],
                &[""],
                &["persistentvolumeclaims", "persistentvolumes"],
            ),
            rule(&["get"], &[""], &["endpoints"]),
            rule(
                &["create", "get", "list", "watch"],
                &["certificates.k8s.io"],
                &["certificatesigningrequests"],
            ),
            rule(
                &["get", "create", "update", "patch", "delete"],
                &["coordination.k8s.io"],
                &["leases"],
            ),
            rule(&["get"], &["storage.k8s.io"], &["volumeattachments"]),
            rule(&["create"], &[""], &["serviceaccounts/token"]),
            rule(
                &["update", "patch"],
                &[""],
                &["persistentvolumeclaims/status"],
            ),
            rule(READ, &["storage.k8s.io"], &["csidrivers"]),
            rule(
                &["get", "create", "update", "patch", "delete"],
                &["storage.k8s.io"],
                &["csinodes"],
            ),
            rule(READ, &["node.k8s.io"], &["runtimeclasses"]),
        ],
    )
}

fn kube_scheduler() -> ClusterRole {
    cluster_role(
        "system:kube-scheduler",
        vec![
            events_rule(),
            rule(&["create"], &["coordination.k8s.io"], &["leases"]),
            with_names(
                rule(&["get", "update"], &["coordination.k8s.io"], &["leases"]),
                &["kube-scheduler"],
            ),
            rule(READ, &[""], &["nodes"]),
            rule(&["get", "list", "watch", "delete"], &[""], &["pods"]),
            rule(&["create"], &[""], &["bindings", "pods/binding"]),
            rule(&["patch", "update"], &[""], &["pods/status"]),
            rule(READ, &[""], &["replicationcontrollers", "services"]),
            rule(READ, &["apps", "extensions"], &["replicasets"]),
            rule(READ, &["apps"], &["statefulsets"]),
            rule(READ, &["policy"], &["poddisruptionbudgets"]),
            rule(
                READ,
                &[""],
                &["persistentvolumeclaims", "persistentvolumes"],
            ),
            rule(&["create"], &["authentication.k8s.io"], &["tokenreviews"]),
            rule(
                &["create"],
                &["authorization.k8s.io"],
                &["subjectaccessreviews"],
            ),
            rule(READ, &["storage.k8s.io"], &["csinodes"]),
            rule(READ, &[""], &["namespaces"]),
            rule(
                READ,
                &["storage.k8s.io"],
                &["csidrivers", "csistoragecapacities"],
            ),
        ],
    )
}

fn kube_controller_manager() -> ClusterRole {
    cluster_role(
        "system:kube-controller-manager",
        vec![
            events_rule(),
            rule(&["create"], &["coordination.k8s.io"], &["leases"]),
            with_names(
                rule(&["get", "update"], &["coordination.k8s.io"], &["leases"]),
                &["kube-controller-manager"],
            ),
            rule(&["create"], &[""], &["secrets", "serviceaccounts"]),
            rule(&["delete"], &[""], &["secrets"]),
            rule(
                &["get"],
                &[""],
                &["configmaps", "namespaces", "secrets", "serviceaccounts"],
            ),
            rule(&["update"], &[""], &["secrets", "serviceaccounts"]),
            rule(&["create"], &["authentication.k8s.io"], &["tokenreviews"]),
            rule(
                &["create"],
                &["authorization.k8s.io"],
                &["subjectaccessreviews"],
            ),
            rule(&["list", "watch"], &["*"], &["*"]),
            rule(&["create"], &[""], &["serviceaccounts/token"]),
        ],
    )
}

/// `system:certificates.k8s.io:<signer>-approver`: `approve` on that signer.
fn approver(role: &str, signer: &str) -> ClusterRole {
    cluster_role(
        &format!("system:certificates.k8s.io:{role}-approver"),
        vec![with_names(
            rule(&["approve"], &["certificates.k8s.io"], &["signers"]),
            &[signer],
        )],
    )
}

/// The non-controller cluster roles.
pub(super) fn cluster_roles() -> Vec<ClusterRole> {
    let discovery_urls = [
        "/livez",
        "/readyz",
        "/healthz",
        "/version",
        "/version/",
        "/openapi",
        "/openapi/*",
        "/api",
        "/api/*",
        "/apis",
        "/apis/*",
    ];
    vec![
        cluster_role(
            "cluster-admin",
            vec![rule(&["*"], &["*"], &["*"]), url_rule(&["*"], &["*"])],
        ),
        cluster_role(
            "system:discovery",
            vec![url_rule(&["get"], &discovery_urls)],
        ),
        cluster_role(
            "system:monitoring",
            vec![url_rule(
                &["get"],
                &[
                    "/metrics",
                    "/metrics/slis",
                    "/livez",
                    "/readyz",
                    "/healthz",
                    "/livez/*",
                    "/readyz/*",
                    "/healthz/*",
                ],
            )],
        ),
        cluster_role(
            "system:basic-user",
            vec![
                rule(
                    &["create"],
                    &["authorization.k8s.io"],
                    &["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                ),
                rule(
                    &["create"],
                    &["authentication.k8s.io"],
                    &["selfsubjectreviews"],
                ),
            ],
        ),
        cluster_role(
            "system:public-info-viewer",
            vec![url_rule(
                &["get"],
                &["/livez", "/readyz", "/healthz", "/version", "/version/"],
            )],
        ),
        aggregated("admin", AGGREGATE_TO_ADMIN),
        labelled(
            aggregated("edit", AGGREGATE_TO_EDIT),
            &[(AGGREGATE_TO_ADMIN, "true")],
        ),
        labelled(
            aggregated("view", AGGREGATE_TO_VIEW),
            &[(AGGREGATE_TO_EDIT, "true")],
        ),
        aggregate_to_admin(),
        aggregate_to_edit(),
        aggregate_to_view(),
        node(),
        cluster_role(
            "system:node-proxier",
            vec![
                rule(&["list", "watch"], &[""], &["services", "endpoints"]),
                rule(&["get", "list", "watch"], &[""], &["nodes"]),
                events_rule(),
                rule(
                    &["list", "watch"],
                    &["discovery.k8s.io"],
                    &["endpointslices"],
                ),
            ],
        ),
        cluster_role(
            "system:node-bootstrapper",
            vec![rule(
                &["create", "get", "list", "watch"],
                &["certificates.k8s.io"],
                &["certificatesigningrequests"],
            )],
        ),
        cluster_role(
            "system:auth-delegator",
            vec![
                rule(&["create"], &["authentication.k8s.io"], &["tokenreviews"]),
                rule(
                    &["create"],
                    &["authorization.k8s.io"],
                    &["subjectaccessreviews"],
                ),
            ],
        ),
        kube_controller_manager(),
        kube_scheduler(),
        cluster_role(
            "system:volume-scheduler",
            vec![
                rule(READ_UPDATE, &[""], &["persistentvolumes"]),
                rule(READ, &["storage.k8s.io"], &["storageclasses"]),
                rule(READ_UPDATE, &[""], &["persistentvolumeclaims"]),
            ],
        ),
        cluster_role(
            "system:certificates.k8s.io:certificatesigningrequests:nodeclient",
            vec![rule(
                &["create"],
                &["certificates.k8s.io"],
                &["certificatesigningrequests/nodeclient"],
            )],
        ),
        cluster_role(
            "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient",
            vec![rule(
                &["create"],
                &["certificates.k8s.io"],
                &["certificatesigningrequests/selfnodeclient"],
            )],
        ),
        approver("legacy-unknown", signers::LEGACY_UNKNOWN),
        approver("kubelet-serving", signers::KUBELET_SERVING),
        approver("kube-apiserver-client", signers::KUBE_APISERVER_CLIENT),
        approver(
            "kube-apiserver-client-kubelet",
            signers::KUBE_APISERVER_CLIENT_KUBELET,
        ),
        cluster_role(
            "system:kube-dns",
            vec![rule(&["list", "watch"], &[""], &["endpoints", "services"])],
        ),
        // What a node's NetworkPolicy enforcer reads (k3s's agent does it with its own
        // `system:k3s-controller` identity, which has the same read access).
        cluster_role(
            "k3rs:network-policy",
            vec![
                rule(&["list", "watch"], &[""], &["pods", "namespaces"]),
                rule(
                    &["list", "watch"],
                    &["networking.k8s.io"],
                    &["networkpolicies"],
                ),
                events_rule(),
            ],
        ),
        // What an agent reads of its server's settings (k3s's agents read `/v1-k3s/config`
        // with their node credentials).
        cluster_role(
            "k3rs:agent-config",
            vec![url_rule(&["get"], &[k3rs_apimachinery::agent_config::PATH])],
        ),
        cluster_role(
            "system:kubelet-api-admin",
            vec![
                rule(&["get", "list", "watch", "proxy"], &[""], &["nodes"]),
                rule(
                    &["*"],
                    &[""],
                    &[
                        "nodes/proxy",
                        "nodes/metrics",
                        "nodes/spec",
                        "nodes/stats",
                        "nodes/log",
                    ],
                ),
            ],
        ),
        cluster_role(
            "system:service-account-issuer-discovery",
            vec![url_rule(
                &["get"],
                &[
                    "/.well-known/openid-configuration",
                    "/.well-known/openid-configuration/",
                    "/openid/v1/jwks",
                    "/openid/v1/jwks/",
                ],
            )],
        ),
    ]
}

/// The non-controller cluster role bindings (upstream's names: the role's).
pub(super) fn bindings() -> Vec<ClusterRoleBinding> {
    let same = |role: &str, subjects| binding(role, role, subjects);
    vec![
        same("cluster-admin", vec![subject("Group", "system:masters")]),
        same(
            "system:monitoring",
            vec![subject("Group", "system:monitoring")],
        ),
        same(
            "system:discovery",
            vec![subject("Group", "system:authenticated")],
        ),
        same(
            "system:basic-user",
            vec![subject("Group", "system:authenticated")],
        ),
        same(
            "system:public-info-viewer",
            vec![
                subject("Group", "system:authenticated"),
                subject("Group", "system:unauthenticated"),
            ],
        ),
        same(
            "system:node-proxier",
            vec![subject("User", "system:kube-proxy")],
        ),
        same(
            "system:kube-controller-manager",
            vec![subject("User", "system:kube-controller-manager")],
        ),
        same(
            "system:kube-scheduler",
            vec![subject("User", "system:kube-scheduler")],
        ),
        same(
            "system:volume-scheduler",
            vec![subject("User", "system:kube-scheduler")],
        ),
        same(
            "system:kube-dns",
            vec![subject("ServiceAccount", "kube-system/kube-dns")],
        ),
        same("system:node", Vec::new()),
        same(
            "system:service-account-issuer-discovery",
            vec![subject("Group", "system:serviceaccounts")],
        ),
        // TLS bootstrap (kubeadm's bindings, for every bootstrap token): a token may ask for
        // a node client certificate, which is approved at once; a node may renew its own.
        binding(
            "k3rs:kubelet-bootstrap",
            "system:node-bootstrapper",
            vec![subject("Group", "system:bootstrappers")],
        ),
        binding(
            "k3rs:node-autoapprove-bootstrap",
            "system:certificates.k8s.io:certificatesigningrequests:nodeclient",
            vec![subject("Group", "system:bootstrappers")],
        ),
        // The agent runs the service proxy with the node's own certificate (k3s issues a
        // separate system:kube-proxy one; kubeadm binds a kube-proxy service account).
        binding(
            "k3rs:node-proxier",
            "system:node-proxier",
            vec![subject("Group", "system:nodes")],
        ),
        binding(
            "k3rs:network-policy",
            "k3rs:network-policy",
            vec![subject("Group", "system:nodes")],
        ),
        binding(
            "k3rs:agent-config",
            "k3rs:agent-config",
            vec![subject("Group", "system:nodes")],
        ),
        binding(
            "k3rs:node-autoapprove-certificate-rotation",
            "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient",
            vec![subject("Group", "system:nodes")],
        ),
    ]
}
