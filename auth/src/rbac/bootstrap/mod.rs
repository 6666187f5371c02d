//! The default RBAC policy kube-apiserver bootstraps (upstream's `bootstrappolicy`): the
//! cluster roles and their bindings, and the roles of the in-process controllers. Every object
//! carries `kubernetes.io/bootstrapping: rbac-defaults` and
//! `rbac.authorization.kubernetes.io/autoupdate: "true"`.

pub mod controllers;
mod roles;

use std::collections::BTreeMap;

use k8s_openapi::api::rbac::v1::{
    AggregationRule, ClusterRole, ClusterRoleBinding, PolicyRule, RoleRef, Subject,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

pub use controllers::CONTROLLER_ROLE_PREFIX;

/// Annotation that, set to `"false"`, stops reconciliation from changing an object.
pub const AUTOUPDATE: &str = "rbac.authorization.kubernetes.io/autoupdate";
/// The label of bootstrap objects.
pub const BOOTSTRAPPING: (&str, &str) = ("kubernetes.io/bootstrapping", "rbac-defaults");
/// Labels that aggregate a ClusterRole into `admin`, `edit`, `view`.
pub const AGGREGATE_TO_ADMIN: &str = "rbac.authorization.k8s.io/aggregate-to-admin";
pub(crate) const AGGREGATE_TO_EDIT: &str = "rbac.authorization.k8s.io/aggregate-to-edit";
pub(crate) const AGGREGATE_TO_VIEW: &str = "rbac.authorization.k8s.io/aggregate-to-view";

/// The built-in signer names (`certificates.k8s.io/v1`).
pub(crate) mod signers {
    pub const KUBE_APISERVER_CLIENT: &str = "kubernetes.io/kube-apiserver-client";
    pub const KUBE_APISERVER_CLIENT_KUBELET: &str = "kubernetes.io/kube-apiserver-client-kubelet";
    pub const KUBELET_SERVING: &str = "kubernetes.io/kubelet-serving";
    pub const LEGACY_UNKNOWN: &str = "kubernetes.io/legacy-unknown";
}

const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

pub(crate) fn meta_for(name: &str, labels: &[(&str, &str)]) -> ObjectMeta {
    let mut l: BTreeMap<String, String> = labels
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    l.insert(BOOTSTRAPPING.0.into(), BOOTSTRAPPING.1.into());
    ObjectMeta {
        name: Some(name.into()),
        labels: Some(l),
        annotations: Some(BTreeMap::from([(AUTOUPDATE.into(), "true".into())])),
        ..ObjectMeta::default()
    }
}

pub(crate) fn cluster_role(name: &str, rules: Vec<PolicyRule>) -> ClusterRole {
    ClusterRole {
        metadata: meta_for(name, &[]),
        rules: Some(rules),
        aggregation_rule: None,
    }
}

pub(crate) fn labelled(mut r: ClusterRole, labels: &[(&str, &str)]) -> ClusterRole {
    let l = r.metadata.labels.get_or_insert_with(BTreeMap::new);
    for (k, v) in labels {
        l.insert(k.to_string(), v.to_string());
    }
    r
}

/// A role whose rules are those of the ClusterRoles labelled `label: "true"`.
pub fn aggregated(name: &str, label: &str) -> ClusterRole {
    ClusterRole {
        metadata: meta_for(name, &[]),
        rules: Some(Vec::new()),
        aggregation_rule: Some(AggregationRule {
            cluster_role_selectors: Some(vec![LabelSelector {
                match_labels: Some(BTreeMap::from([(label.into(), "true".into())])),
                match_expressions: None,
            }]),
        }),
    }
}

/// A subject: `User`, `Group`, or `ServiceAccount` (`namespace/name`).
pub fn subject(kind: &str, name: &str) -> Subject {
    match kind {
        "ServiceAccount" => {
            let (ns, n) = name.split_once('/').unwrap_or(("kube-system", name));
            Subject {
                kind: kind.into(),
                name: n.into(),
                namespace: Some(ns.into()),
                api_group: None,
            }
        }
        _ => Subject {
            kind: kind.into(),
            name: name.into(),
            namespace: None,
            api_group: Some(RBAC_GROUP.into()),
        },
    }
}

pub(crate) fn binding(name: &str, role: &str, subjects: Vec<Subject>) -> ClusterRoleBinding {
    ClusterRoleBinding {
        metadata: meta_for(name, &[]),
        role_ref: RoleRef {
            api_group: RBAC_GROUP.into(),
            kind: "ClusterRole".into(),
            name: role.into(),
        },
        subjects: Some(subjects),
    }
}

/// Every bootstrap ClusterRole (the controllers' included).
pub fn cluster_roles() -> Vec<ClusterRole> {
    let mut all = roles::cluster_roles();
    all.extend(controllers::roles());
    all
}

/// Every bootstrap ClusterRoleBinding (the controllers' included).
pub fn cluster_role_bindings() -> Vec<ClusterRoleBinding> {
    let mut all = roles::bindings();
    all.extend(controllers::bindings());
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_binding_names_a_bootstrap_role_and_names_are_unique() {
        let roles = cluster_roles();
        let names: std::collections::BTreeSet<_> =
            roles.iter().map(|r| r.metadata.name.clone()).collect();
        assert_eq!(names.len(), roles.len());
        let bindings = cluster_role_bindings();
        let bnames: std::collections::BTreeSet<_> =
            bindings.iter().map(|b| b.metadata.name.clone()).collect();
        assert_eq!(bnames.len(), bindings.len());
        for b in &bindings {
            assert!(
                names.contains(&Some(b.role_ref.name.clone())),
                "{:?}",
                b.metadata.name
            );
        }
        for want in [
            "cluster-admin",
            "admin",
            "edit",
            "view",
            "system:basic-user",
            "system:discovery",
            "system:public-info-viewer",
            "system:controller:replicaset-controller",
            "system:controller:clusterrole-aggregation-controller",
        ] {
            assert!(names.contains(&Some(want.to_string())), "{want}");
        }
    }
}
