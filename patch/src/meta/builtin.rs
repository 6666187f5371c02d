//! [`BuiltinPatchMeta`]: the merge keys and strategies of the built-in types, as declared by
//! their Go struct tags (`patchStrategy`, `patchMergeKey`) and list/map type markers.

use serde_json::Value;

use super::{FieldMeta, ListKind, MapKind, PatchMeta};

/// Built-in (group, version, kind)s served with strategic merge patch support.
const KINDS: &[(&str, &str)] = &[
    ("v1", "Namespace"),
    ("v1", "Pod"),
    ("v1", "Service"),
    ("v1", "Endpoints"),
    ("v1", "ConfigMap"),
    ("v1", "Secret"),
    ("v1", "ServiceAccount"),
    ("v1", "Node"),
    ("v1", "Event"),
    ("v1", "PersistentVolume"),
    ("v1", "PersistentVolumeClaim"),
    ("v1", "ResourceQuota"),
    ("v1", "LimitRange"),
    ("v1", "ReplicationController"),
    ("v1", "PodTemplate"),
    ("apps/v1", "Deployment"),
    ("apps/v1", "ReplicaSet"),
    ("apps/v1", "StatefulSet"),
    ("apps/v1", "DaemonSet"),
    ("apps/v1", "ControllerRevision"),
    ("batch/v1", "Job"),
    ("batch/v1", "CronJob"),
    ("autoscaling/v2", "HorizontalPodAutoscaler"),
    ("autoscaling/v1", "HorizontalPodAutoscaler"),
    ("autoscaling/v1", "Scale"),
    ("coordination.k8s.io/v1", "Lease"),
    ("discovery.k8s.io/v1", "EndpointSlice"),
    ("events.k8s.io/v1", "Event"),
    ("policy/v1", "PodDisruptionBudget"),
    ("policy/v1", "Eviction"),
    ("networking.k8s.io/v1", "Ingress"),
    ("networking.k8s.io/v1", "IngressClass"),
    ("networking.k8s.io/v1", "NetworkPolicy"),
    ("storage.k8s.io/v1", "StorageClass"),
    ("storage.k8s.io/v1", "CSIDriver"),
    ("scheduling.k8s.io/v1", "PriorityClass"),
    ("rbac.authorization.k8s.io/v1", "Role"),
    ("rbac.authorization.k8s.io/v1", "ClusterRole"),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
    ("certificates.k8s.io/v1", "CertificateSigningRequest"),
    (
        "admissionregistration.k8s.io/v1",
        "ValidatingAdmissionPolicy",
    ),
    (
        "admissionregistration.k8s.io/v1",
        "ValidatingAdmissionPolicyBinding",
    ),
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition"),
    // kube-aggregator serves it with its Go type, so `kubectl apply` patches it strategically.
    ("apiregistration.k8s.io/v1", "APIService"),
];

/// Patch metadata of one built-in kind.
///
/// Lists not named here are atomic: e.g. `tolerations`, `envFrom`, `readinessGates`, node
/// `taints` have no patch strategy upstream and are replaced by a strategic merge patch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuiltinPatchMeta {
    kind: &'static str,
}

impl BuiltinPatchMeta {
    /// The metadata of a built-in kind; `None` for anything else (custom resources), for which
    /// kube-apiserver refuses strategic merge patches.
    pub fn for_kind(api_version: &str, kind: &str) -> Option<BuiltinPatchMeta> {
        KINDS
            .iter()
            .find(|(v, k)| *v == api_version && *k == kind)
            .map(|(_, k)| BuiltinPatchMeta { kind: k })
    }

    /// Where the pod spec sits in this kind, if it has one.
    fn pod_spec_root(&self) -> Option<&'static [&'static str]> {
        match self.kind {
            "Pod" => Some(&["spec"]),
            "PodTemplate" => Some(&["template", "spec"]),
            "Deployment"
            | "ReplicaSet"
            | "StatefulSet"
            | "DaemonSet"
            | "Job"
            | "ReplicationController" => Some(&["spec", "template", "spec"]),
            "CronJob" => Some(&["spec", "jobTemplate", "spec", "template", "spec"]),
            _ => None,
        }
    }

    fn kind_field(&self, path: &[&str]) -> Option<FieldMeta> {
        Some(match (self.kind, path) {
            ("Deployment", ["spec", "strategy"]) => retain_keys(),
            ("Service", ["spec", "ports"]) => keyed_with_protocol("port"),
            ("Node", ["status", "addresses"]) => FieldMeta::keyed("type"),
            ("Node", ["spec", "podCIDRs"]) => set(),
            ("Node", ["status", "capacity" | "allocatable"]) => granular(),
            ("Pod", ["status", "podIPs" | "hostIPs"]) => FieldMeta::keyed("ip"),
            ("ServiceAccount", ["secrets"]) => FieldMeta::keyed("name"),
            ("ConfigMap" | "Secret", ["data" | "binaryData" | "stringData"]) => granular(),
            ("PersistentVolumeClaim", ["spec", "resources", "requests" | "limits"]) => granular(),
            ("PersistentVolumeClaim", ["status", "capacity"]) => granular(),
            (_, ["status", "conditions"]) => FieldMeta::keyed("type"),
            _ => return None,
        })
    }
}

impl PatchMeta for BuiltinPatchMeta {
    fn field(&self, path: &[&str]) -> FieldMeta {
        if let Some(meta) = object_meta_field(path) {
            return meta;
        }
        if let Some(root) = self.pod_spec_root() {
            if let Some(rest) = path.strip_prefix(root) {
                if let Some(meta) = pod_spec_field(rest) {
                    return meta;
                }
            }
            // The pod template's own metadata (`spec.template.metadata.labels`).
            if let Some(rest) = path.strip_prefix(&root[..root.len() - 1]) {
                if let Some(meta) = object_meta_field(rest) {
                    return meta;
                }
            }
        }
        if let Some(meta) = self.kind_field(path) {
            return meta;
        }
        match path.last() {
            // Label selectors and node selectors are atomic maps (`mapType=atomic`,
            // `structType=atomic`), wherever they appear.
            Some(
                &("selector" | "labelSelector" | "namespaceSelector" | "podSelector"
                | "nodeSelector"),
            ) => atomic_map(),
            _ => FieldMeta::default(),
        }
    }
}

/// ObjectMeta fields relative to the object (or template) root.
fn object_meta_field(path: &[&str]) -> Option<FieldMeta> {
    Some(match path {
        ["metadata", "finalizers"] => set(),
        ["metadata", "ownerReferences"] => FieldMeta::keyed("uid"),
        ["metadata", "labels" | "annotations"] => granular(),
        _ => return None,
    })
}

/// PodSpec fields relative to the pod spec.
fn pod_spec_field(rest: &[&str]) -> Option<FieldMeta> {
    let containers = |c: &str| matches!(c, "containers" | "initContainers" | "ephemeralContainers");
    Some(match rest {
        [c] if containers(c) => FieldMeta::keyed("name"),
        [c, "ports"] if containers(c) => keyed_with_protocol("containerPort"),
        [c, "env"] if containers(c) => FieldMeta::keyed("name"),
        [c, "volumeMounts"] if containers(c) => FieldMeta::keyed("mountPath"),
        [c, "volumeDevices"] if containers(c) => FieldMeta::keyed("devicePath"),
        [c, "resources", "limits" | "requests"] if containers(c) => granular(),
        ["volumes"] => FieldMeta {
            retain_keys: true,
            ..FieldMeta::keyed("name")
        },
        ["resourceClaims"] => FieldMeta {
            retain_keys: true,
            ..FieldMeta::keyed("name")
        },
        ["imagePullSecrets"] => FieldMeta::keyed("name"),
        ["schedulingGates"] => FieldMeta::keyed("name"),
        ["hostAliases"] => FieldMeta::keyed("ip"),
        ["topologySpreadConstraints"] => FieldMeta {
            list: ListKind::Map {
                merge_key: "topologyKey".to_string(),
                keys: vec![
                    ("topologyKey".to_string(), None),
                    ("whenUnsatisfiable".to_string(), None),
                ],
            },
            ..FieldMeta::default()
        },
        ["overhead"] => granular(),
        _ => return None,
    })
}

fn set() -> FieldMeta {
    FieldMeta {
        list: ListKind::Set,
        ..FieldMeta::default()
    }
}

fn granular() -> FieldMeta {
    FieldMeta {
        map: MapKind::Granular,
        ..FieldMeta::default()
    }
}

fn atomic_map() -> FieldMeta {
    FieldMeta {
        map: MapKind::Atomic,
        ..FieldMeta::default()
    }
}

fn retain_keys() -> FieldMeta {
    FieldMeta {
        retain_keys: true,
        ..FieldMeta::default()
    }
}

/// Ports: merged by `key` in strategic merge patch, keyed by `key` and `protocol` (default
/// `TCP`) in server-side apply.
fn keyed_with_protocol(key: &str) -> FieldMeta {
    FieldMeta {
        list: ListKind::Map {
            merge_key: key.to_string(),
            keys: vec![
                (key.to_string(), None),
                ("protocol".to_string(), Some(Value::from("TCP"))),
            ],
        },
        ..FieldMeta::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(v: &str, k: &str) -> BuiltinPatchMeta {
        BuiltinPatchMeta::for_kind(v, k).unwrap()
    }

    #[test]
    fn unknown_kinds_have_no_builtin_meta() {
        assert_eq!(BuiltinPatchMeta::for_kind("example.com/v1", "Widget"), None);
        assert_eq!(
            BuiltinPatchMeta::for_kind("apps/v1beta1", "Deployment"),
            None
        );
    }

    #[test]
    fn pod_template_paths_per_workload() {
        let name = Some("name");
        assert_eq!(
            meta("v1", "Pod").field(&["spec", "containers"]).merge_key(),
            name
        );
        for kind in ["Deployment", "ReplicaSet", "StatefulSet", "DaemonSet"] {
            let m = meta("apps/v1", kind);
            let path = ["spec", "template", "spec", "initContainers"];
            assert_eq!(m.field(&path).merge_key(), name, "{kind}");
        }
        let job = meta("batch/v1", "Job");
        assert_eq!(
            job.field(&["spec", "template", "spec", "volumes"]),
            FieldMeta {
                retain_keys: true,
                ..FieldMeta::keyed("name")
            }
        );
        let cron = meta("batch/v1", "CronJob");
        let path = [
            "spec",
            "jobTemplate",
            "spec",
            "template",
            "spec",
            "containers",
            "env",
        ];
        assert_eq!(cron.field(&path).merge_key(), name);
        let rc = meta("v1", "ReplicationController");
        let path = ["spec", "template", "spec", "containers", "ports"];
        assert_eq!(rc.field(&path).merge_key(), Some("containerPort"));
        let pt = meta("v1", "PodTemplate");
        assert_eq!(
            pt.field(&["template", "spec", "hostAliases"]).merge_key(),
            Some("ip")
        );
    }

    #[test]
    fn merge_keys_of_the_contract() {
        let pod = meta("v1", "Pod");
        let cases: &[(&[&str], &str)] = &[
            (&["spec", "ephemeralContainers"], "name"),
            (&["spec", "containers", "volumeMounts"], "mountPath"),
            (&["spec", "containers", "volumeDevices"], "devicePath"),
            (&["spec", "imagePullSecrets"], "name"),
            (&["spec", "topologySpreadConstraints"], "topologyKey"),
            (&["status", "conditions"], "type"),
            (&["metadata", "ownerReferences"], "uid"),
        ];
        for (path, key) in cases {
            assert_eq!(pod.field(path).merge_key(), Some(*key), "{path:?}");
        }
        let svc = meta("v1", "Service");
        assert_eq!(svc.field(&["spec", "ports"]).merge_key(), Some("port"));
        let node = meta("v1", "Node");
        assert_eq!(
            node.field(&["status", "addresses"]).merge_key(),
            Some("type")
        );
        assert_eq!(pod.field(&["metadata", "finalizers"]).list, ListKind::Set);
        assert!(
            meta("apps/v1", "Deployment")
                .field(&["spec", "strategy"])
                .retain_keys
        );
    }

    #[test]
    fn lists_without_patch_strategy_are_atomic() {
        let pod = meta("v1", "Pod");
        for path in [
            &["spec", "tolerations"][..],
            &["spec", "containers", "envFrom"],
            &["spec", "containers", "args"],
            &["spec", "readinessGates"],
        ] {
            assert_eq!(pod.field(path).list, ListKind::Atomic, "{path:?}");
        }
        assert_eq!(
            meta("v1", "Node").field(&["spec", "taints"]).list,
            ListKind::Atomic
        );
        // Service ports are not container ports.
        assert_eq!(pod.field(&["spec", "ports"]).list, ListKind::Atomic);
    }

    #[test]
    fn template_metadata_and_maps() {
        let d = meta("apps/v1", "Deployment");
        assert_eq!(
            d.field(&["spec", "template", "metadata", "labels"]).map,
            MapKind::Granular
        );
        assert_eq!(d.field(&["spec", "selector"]).map, MapKind::Atomic);
        let pod = meta("v1", "Pod");
        assert_eq!(pod.field(&["spec", "nodeSelector"]).map, MapKind::Atomic);
        let path = ["spec", "topologySpreadConstraints", "labelSelector"];
        assert_eq!(pod.field(&path).map, MapKind::Atomic);
        assert_eq!(
            meta("v1", "Service").field(&["spec", "selector"]).map,
            MapKind::Atomic
        );
        let np = meta("networking.k8s.io/v1", "NetworkPolicy");
        assert_eq!(np.field(&["spec", "podSelector"]).map, MapKind::Atomic);
        assert_eq!(pod.field(&["metadata", "labels"]).map, MapKind::Granular);
        let path = ["spec", "containers", "resources", "limits"];
        assert_eq!(pod.field(&path).map, MapKind::Granular);
        assert_eq!(d.field(&["spec"]).map, MapKind::Struct);
    }
}
