//! The roles of the controllers k3rs runs in process (upstream's `controller_policy.go`):
//! `system:controller:<name>`, each bound to the service account `kube-system/<name>` that
//! `controller_identity` (the API server's in-process clients) authenticates as.

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule};

use super::roles::{events_rule, READ};
use super::{binding, cluster_role, subject};
use crate::rbac::rules::{rule, with_names};
use k3rs_apimachinery::signers;

/// Prefix of the controller roles and bindings.
pub const CONTROLLER_ROLE_PREFIX: &str = "system:controller:";

const APPS: &[&str] = &["apps", "extensions"];

fn controller_rules(name: &str) -> Vec<PolicyRule> {
    let mut rules = match name {
        "clusterrole-aggregation-controller" => vec![rule(
            &["escalate", "get", "list", "watch", "update", "patch"],
            &["rbac.authorization.k8s.io"],
            &["clusterroles"],
        )],
        "cronjob-controller" => vec![
            rule(
                &["get", "list", "watch", "update"],
                &["batch"],
                &["cronjobs"],
            ),
            rule(
                &[
                    "get", "list", "watch", "create", "update", "delete", "patch",
                ],
                &["batch"],
                &["jobs"],
            ),
            rule(&["update"], &["batch"], &["cronjobs/status"]),
            rule(&["update"], &["batch"], &["cronjobs/finalizers"]),
            rule(&["list", "watch", "delete"], &[""], &["pods"]),
        ],
        "daemon-set-controller" => vec![
            rule(READ, APPS, &["daemonsets"]),
            rule(&["update"], APPS, &["daemonsets/status"]),
            rule(&["update"], APPS, &["daemonsets/finalizers"]),
            rule(&["list", "watch"], &[""], &["nodes"]),
            rule(
                &["list", "watch", "create", "delete", "patch"],
                &[""],
                &["pods"],
            ),
            rule(&["create"], &[""], &["pods/binding"]),
            rule(
                &[
                    "get", "list", "watch", "create", "delete", "update", "patch",
                ],
                &["apps"],
                &["controllerrevisions"],
            ),
        ],
        "deployment-controller" => vec![
            rule(&["get", "list", "watch", "update"], APPS, &["deployments"]),
            rule(&["update"], APPS, &["deployments/status"]),
            rule(&["update"], APPS, &["deployments/finalizers"]),
            rule(
                &[
                    "get", "list", "watch", "create", "update", "patch", "delete",
                ],
                APPS,
                &["replicasets"],
            ),
            rule(&["get", "list", "watch", "update"], &[""], &["pods"]),
        ],
        "disruption-controller" => vec![
            rule(READ, APPS, &["deployments", "replicasets"]),
            rule(READ, &[""], &["replicationcontrollers"]),
            rule(READ, &["policy"], &["poddisruptionbudgets"]),
            rule(READ, &["apps"], &["statefulsets"]),
            rule(&["update"], &["policy"], &["poddisruptionbudgets/status"]),
            rule(&["get"], &["*"], &["*/scale"]),
            rule(&["patch", "update"], &[""], &["pods/status"]),
            // Upstream reads pods through kube-controller-manager's shared informers; here
            // each controller watches with its own identity.
            rule(&["list", "watch"], &[""], &["pods"]),
        ],
        "endpoint-controller" => vec![
            rule(READ, &[""], &["services", "pods"]),
            rule(
                &["get", "list", "watch", "create", "update", "delete"],
                &[""],
                &["endpoints"],
            ),
            rule(&["create"], &[""], &["endpoints/restricted"]),
        ],
        "cluster-dns-controller" => vec![
            rule(READ, &[""], &["services", "nodes"]),
            rule(
                &[
                    "get", "list", "watch", "create", "update", "patch", "delete",
                ],
                &["discovery.k8s.io"],
                &["endpointslices"],
            ),
            rule(
                &[
                    "get", "list", "watch", "create", "update", "patch", "delete",
                ],
                &[""],
                &["endpoints"],
            ),
            rule(&["create"], &[""], &["endpoints/restricted"]),
        ],
        "endpointslice-controller" => vec![
            rule(READ, &[""], &["services", "pods", "nodes"]),
            rule(&["update"], &[""], &["services/finalizers"]),
            rule(
                &["get", "list", "watch", "create", "update", "delete"],
                &["discovery.k8s.io"],
                &["endpointslices"],
            ),
        ],
        "generic-garbage-collector" => vec![rule(
            &["get", "list", "watch", "patch", "update", "delete"],
            &["*"],
            &["*"],
        )],
        "horizontal-pod-autoscaler" => vec![
            rule(READ, &["autoscaling"], &["horizontalpodautoscalers"]),
            rule(
                &["update"],
                &["autoscaling"],
                &["horizontalpodautoscalers/status"],
            ),
            rule(&["get", "update"], &["*"], &["*/scale"]),
            rule(&["list", "watch"], &[""], &["pods"]),
            rule(&["list", "watch"], &["metrics.k8s.io"], &["pods"]),
            rule(READ, &["custom.metrics.k8s.io"], &["*"]),
            rule(READ, &["external.metrics.k8s.io"], &["*"]),
        ],
        "job-controller" => vec![
            rule(
                &["get", "list", "watch", "update", "patch"],
                &["batch"],
                &["jobs"],
            ),
            rule(&["update"], &["batch"], &["jobs/status"]),
            rule(&["update"], &["batch"], &["jobs/finalizers"]),
            rule(
                &["list", "watch", "create", "delete", "patch"],
                &[""],
                &["pods"],
            ),
        ],
        "namespace-controller" => vec![
            rule(&["get", "list", "watch", "delete"], &[""], &["namespaces"]),
            rule(
                &["update"],
                &[""],
                &["namespaces/finalize", "namespaces/status"],
            ),
            rule(
                &["get", "list", "watch", "delete", "deletecollection"],
                &["*"],
                &["*"],
            ),
        ],
        "node-controller" => vec![
            rule(
                &["get", "list", "watch", "update", "delete", "patch"],
                &[""],
                &["nodes"],
            ),
            rule(&["patch", "update"], &[""], &["nodes/status"]),
            rule(&["patch", "update"], &[""], &["pods/status"]),
            rule(&["list", "watch", "get", "delete"], &[""], &["pods"]),
        ],
        "persistent-volume-binder" => vec![
            rule(
                &["get", "list", "watch", "update", "create", "delete"],
                &[""],
                &["persistentvolumes"],
            ),
            rule(&["update"], &[""], &["persistentvolumes/status"]),
            rule(
                &["get", "list", "watch", "update"],
                &[""],
                &["persistentvolumeclaims"],
            ),
            rule(&["update"], &[""], &["persistentvolumeclaims/status"]),
            rule(
                &["list", "watch", "get", "create", "delete"],
                &[""],
                &["pods"],
            ),
            rule(READ, &["storage.k8s.io"], &["storageclasses"]),
            rule(&["list", "watch"], &[""], &["nodes"]),
            rule(&["watch"], &[""], &["events"]),
            rule(&["get"], &[""], &["services"]),
        ],
        "pvc-protection-controller" => vec![
            rule(
                &["get", "list", "watch", "update"],
                &[""],
                &["persistentvolumeclaims"],
            ),
            rule(&["list", "watch", "get"], &[""], &["pods"]),
        ],
        "pv-protection-controller" => vec![rule(
            &["get", "list", "watch", "update"],
            &[""],
            &["persistentvolumes"],
        )],
        // k3s's local-path provisioner (its ClusterRole local-path-provisioner-role).
        "local-path-provisioner-service-account" => vec![
            rule(
                READ,
                &[""],
                &["nodes", "persistentvolumeclaims", "configmaps"],
            ),
            rule(
                &[
                    "get", "list", "watch", "create", "patch", "update", "delete",
                ],
                &[""],
                &["pods", "persistentvolumes"],
            ),
            rule(
                &["get", "list", "watch", "create"],
                &["storage.k8s.io"],
                &["storageclasses"],
            ),
        ],
        // The built-in ingress controller's server side: the default IngressClass and
        // Ingress status.
        "ingress-controller" => vec![
            rule(
                &["get", "list", "watch", "create"],
                &["networking.k8s.io"],
                &["ingressclasses"],
            ),
            rule(READ, &["networking.k8s.io"], &["ingresses"]),
            rule(
                &["patch", "update"],
                &["networking.k8s.io"],
                &["ingresses/status"],
            ),
            rule(&["list", "watch"], &[""], &["nodes"]),
        ],
        "service-controller" => vec![
            rule(READ, &[""], &["services"]),
            rule(&["patch", "update"], &[""], &["services/status"]),
            rule(&["list", "watch"], &[""], &["nodes"]),
        ],
        "pod-garbage-collector" => vec![
            rule(&["list", "watch", "delete"], &[""], &["pods"]),
            rule(READ, &[""], &["nodes"]),
            rule(&["patch"], &[""], &["pods/status"]),
        ],
        "replicaset-controller" => vec![
            rule(&["get", "list", "watch", "update"], APPS, &["replicasets"]),
            rule(&["update"], APPS, &["replicasets/status"]),
            rule(&["update"], APPS, &["replicasets/finalizers"]),
            rule(
                &["list", "watch", "patch", "create", "delete"],
                &[""],
                &["pods"],
            ),
        ],
        "replication-controller" => vec![
            rule(
                &["get", "list", "watch", "update"],
                &[""],
                &["replicationcontrollers"],
            ),
            rule(&["update"], &[""], &["replicationcontrollers/status"]),
            rule(&["update"], &[""], &["replicationcontrollers/finalizers"]),
            rule(
                &["list", "watch", "patch", "create", "delete"],
                &[""],
                &["pods"],
            ),
        ],
        "resourcequota-controller" => vec![
            rule(&["list", "watch"], &["*"], &["*"]),
            rule(&["update"], &[""], &["resourcequotas/status"]),
        ],
        "service-account-controller" => vec![rule(&["create"], &[""], &["serviceaccounts"])],
        "statefulset-controller" => vec![
            rule(&["list", "watch"], &[""], &["pods"]),
            rule(
                &["get", "create", "delete", "update", "patch"],
                &[""],
                &["pods"],
            ),
            rule(READ, &["apps"], &["statefulsets"]),
            rule(&["update"], &["apps"], &["statefulsets/status"]),
            rule(&["update"], &["apps"], &["statefulsets/finalizers"]),
            rule(
                &[
                    "get", "create", "delete", "update", "patch", "list", "watch",
                ],
                &["apps"],
                &["controllerrevisions"],
            ),
            rule(
                &["get", "create", "list", "watch"],
                &[""],
                &["persistentvolumeclaims"],
            ),
            rule(&["update", "delete"], &[""], &["persistentvolumeclaims"]),
            rule(&["update"], &[""], &["pods/finalizers"]),
        ],
        "ttl-after-finished-controller" => {
            vec![rule(
                &["get", "list", "watch", "delete"],
                &["batch"],
                &["jobs"],
            )]
        }
        "root-ca-cert-publisher" => vec![rule(&["create", "update"], &[""], &["configmaps"])],
        "certificate-controller" => vec![
            rule(
                &["get", "list", "watch", "delete"],
                &["certificates.k8s.io"],
                &["certificatesigningrequests"],
            ),
            rule(
                &["update"],
                &["certificates.k8s.io"],
                &[
                    "certificatesigningrequests/status",
                    "certificatesigningrequests/approval",
                ],
            ),
            with_names(
                rule(&["approve"], &["certificates.k8s.io"], &["signers"]),
                &[signers::KUBELET_CLIENT, signers::KUBELET_SERVING],
            ),
            rule(
                &["create"],
                &["authorization.k8s.io"],
                &["subjectaccessreviews"],
            ),
            // k3rs: serving requests are approved for the names and addresses the Node has.
            rule(&["get"], &[""], &["nodes"]),
            with_names(
                rule(&["sign"], &["certificates.k8s.io"], &["signers"]),
                &[
                    signers::LEGACY_UNKNOWN,
                    signers::KUBE_APISERVER_CLIENT,
                    signers::KUBELET_CLIENT,
                    signers::KUBELET_SERVING,
                ],
            ),
            rule(
                &["create"],
                &["authorization.k8s.io"],
                &["subjectaccessreviews"],
            ),
        ],
        "ttl-controller" => vec![rule(
            &["update", "patch", "list", "watch"],
            &[""],
            &["nodes"],
        )],
        _ => Vec::new(),
    };
    // Upstream gives every controller the events rule but the pod garbage collector.
    if name != "pod-garbage-collector" {
        rules.push(events_rule());
    }
    rules
}

/// The controllers k3rs runs (or will run) in process.
pub const CONTROLLERS: &[&str] = &[
    "certificate-controller",
    "cluster-dns-controller",
    "clusterrole-aggregation-controller",
    "cronjob-controller",
    "daemon-set-controller",
    "deployment-controller",
    "disruption-controller",
    "endpoint-controller",
    "endpointslice-controller",
    "generic-garbage-collector",
    "horizontal-pod-autoscaler",
    "ingress-controller",
    "job-controller",
    "namespace-controller",
    "node-controller",
    "local-path-provisioner-service-account",
    "persistent-volume-binder",
    "pod-garbage-collector",
    "pv-protection-controller",
    "pvc-protection-controller",
    "replicaset-controller",
    "replication-controller",
    "resourcequota-controller",
    "root-ca-cert-publisher",
    "service-account-controller",
    "service-controller",
    "statefulset-controller",
    "ttl-after-finished-controller",
    "ttl-controller",
];

pub(super) fn roles() -> Vec<ClusterRole> {
    CONTROLLERS
        .iter()
        .map(|c| cluster_role(&format!("{CONTROLLER_ROLE_PREFIX}{c}"), controller_rules(c)))
        .collect()
}

pub(super) fn bindings() -> Vec<ClusterRoleBinding> {
    CONTROLLERS
        .iter()
        .map(|c| {
            let name = format!("{CONTROLLER_ROLE_PREFIX}{c}");
            binding(
                &name,
                &name,
                vec![subject("ServiceAccount", &format!("kube-system/{c}"))],
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The controllers coming have their upstream roles too.
    #[test]
    fn every_controller_has_a_role() {
        let coming = [
            "replicaset-controller",
            "deployment-controller",
            "statefulset-controller",
            "daemon-set-controller",
            "job-controller",
            "cronjob-controller",
            "namespace-controller",
            "disruption-controller",
            "persistent-volume-binder",
            "certificate-controller",
            "horizontal-pod-autoscaler",
        ];
        // (The controllers the manager runs are checked where both are seen: the server's
        // components.)
        for name in coming {
            assert!(CONTROLLERS.contains(&name), "{name}");
        }
    }

    #[test]
    fn upstream_exceptions() {
        let gc = controller_rules("pod-garbage-collector");
        assert!(!gc.contains(&events_rule()));
        assert_eq!(
            controller_rules("service-account-controller"),
            vec![
                rule(&["create"], &[""], &["serviceaccounts"]),
                events_rule()
            ]
        );
        let cert = controller_rules("certificate-controller");
        assert_eq!(
            cert[2].resource_names.as_deref(),
            Some(
                &[
                    "kubernetes.io/kube-apiserver-client-kubelet".to_string(),
                    "kubernetes.io/kubelet-serving".to_string()
                ][..]
            )
        );
    }
}
