//! The table of served resources: the one source for routing, storage keys, discovery and
//! (later) OpenAPI and tables. Adding a built-in resource = adding a row here (plus a
//! strategy when it needs defaulting or validation beyond the generic ones).

use std::sync::{Arc, OnceLock, RwLock};

/// Verbs of a full read-write resource.
pub const ALL_VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];
/// Verbs of a `status`/`scale` subresource.
pub const SUB_VERBS: &[&str] = &["get", "patch", "update"];

/// A subresource served under `<resource>/<name>/<subresource>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Subresource {
    /// Its name (`status`, `scale`, …).
    pub name: &'static str,
    /// Response kind (group, version, kind); the parent's for `status`.
    pub group: &'static str,
    /// The response kind's version.
    pub version: &'static str,
    /// The response kind.
    pub kind: &'static str,
    /// The verbs it serves.
    pub verbs: &'static [&'static str],
}

/// How names of a resource are validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NameRule {
    /// RFC 1123 subdomain (most resources).
    Subdomain,
    /// RFC 1123 label (namespaces).
    Label,
    /// RFC 1035 label (services).
    Rfc1035Label,
    /// Any name that is a valid path segment: not `.` or `..`, no `/` or `%`, any length
    /// (core/v1 events, RBAC roles and bindings, certificate signing requests).
    PathSegment,
}

/// One served resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Resource {
    /// "" for the core group.
    pub group: &'static str,
    /// The version served.
    pub version: &'static str,
    /// The kind.
    pub kind: &'static str,
    /// Plural, as in URLs.
    pub plural: &'static str,
    /// Singular, as in discovery.
    pub singular: &'static str,
    /// Whether objects live in namespaces.
    pub namespaced: bool,
    /// The verbs served.
    pub verbs: &'static [&'static str],
    /// kubectl's short names (`po`, `svc`).
    pub short_names: &'static [&'static str],
    /// Discovery categories (`all`).
    pub categories: &'static [&'static str],
    /// The subresources served.
    pub subresources: &'static [Subresource],
    /// Whether writes through the main resource ignore `.status` (a `status` subresource).
    pub has_status: bool,
    /// Whether `.metadata.generation` tracks `.spec` changes.
    pub has_spec: bool,
    /// kube-apiserver's etcd key prefix, without the trailing slash.
    pub storage_prefix: &'static str,
    /// How object names are validated.
    pub name_rule: NameRule,
    /// Whether a DELETE that removes the object answers with the object rather than a
    /// `Status` (upstream's `ReturnDeletedObject` on the resource's registry). A delete that
    /// leaves the object pending (finalizers, grace period) answers with it either way.
    pub returns_deleted_object: bool,
    /// Field selector labels beyond `metadata.name`/`metadata.namespace`, with the dotted
    /// path they read.
    pub field_labels: &'static [(&'static str, &'static str)],
}

impl Resource {
    /// `group/version`, or `version` for the core group.
    pub fn group_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// Whether subresource `name` is served.
    pub fn has_subresource(&self, name: &str) -> bool {
        self.subresources.iter().any(|s| s.name == name)
    }
}

const fn status_of(group: &'static str, version: &'static str, kind: &'static str) -> Subresource {
    Subresource {
        name: "status",
        group,
        version,
        kind,
        verbs: SUB_VERBS,
    }
}

/// The `scale` subresource (an `autoscaling/v1 Scale`).
pub const SCALE: Subresource = Subresource {
    name: "scale",
    group: "autoscaling",
    version: "v1",
    kind: "Scale",
    verbs: SUB_VERBS,
};

const fn sub(
    name: &'static str,
    group: &'static str,
    kind: &'static str,
    verbs: &'static [&'static str],
) -> Subresource {
    Subresource {
        name,
        group,
        version: "v1",
        kind,
        verbs,
    }
}

/// Verbs of the streaming subresources that need a kubelet (`exec`, `attach`, `portforward`).
const CONNECT_VERBS: &[&str] = &["create", "get"];

/// The pod's subresources, as kube-apiserver lists them.
const POD_SUBRESOURCES: &[Subresource] = &[
    sub("attach", "", "PodAttachOptions", CONNECT_VERBS),
    sub("binding", "", "Binding", &["create"]),
    sub("ephemeralcontainers", "", "Pod", SUB_VERBS),
    sub("eviction", "policy", "Eviction", &["create"]),
    sub("exec", "", "PodExecOptions", CONNECT_VERBS),
    sub("log", "", "Pod", &["get"]),
    sub("portforward", "", "PodPortForwardOptions", CONNECT_VERBS),
    status_of("", "v1", "Pod"),
];

const fn row(
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    plural: &'static str,
    singular: &'static str,
    namespaced: bool,
) -> Resource {
    Resource {
        group,
        version,
        kind,
        plural,
        singular,
        namespaced,
        verbs: ALL_VERBS,
        short_names: &[],
        categories: &[],
        subresources: &[],
        has_status: false,
        has_spec: false,
        storage_prefix: "",
        name_rule: NameRule::Subdomain,
        returns_deleted_object: false,
        field_labels: &[],
    }
}

/// Every built-in resource served, in discovery order.
pub static CATALOG: &[Resource] = &[
    Resource {
        short_names: &["ns"],
        subresources: &[
            status_of("", "v1", "Namespace"),
            // The namespace controller's: replaces spec.finalizers only.
            sub("finalize", "", "Namespace", &["update"]),
        ],
        has_status: true,
        has_spec: false,
        storage_prefix: "/registry/namespaces",
        name_rule: NameRule::Label,
        verbs: &[
            "create", "delete", "get", "list", "patch", "update", "watch",
        ],
        field_labels: &[("status.phase", "status.phase")],
        returns_deleted_object: true,
        ..row("", "v1", "Namespace", "namespaces", "namespace", false)
    },
    Resource {
        short_names: &["po"],
        categories: &["all"],
        subresources: POD_SUBRESOURCES,
        has_status: true,
        has_spec: false,
        storage_prefix: "/registry/pods",
        field_labels: &[
            ("spec.nodeName", "spec.nodeName"),
            ("spec.restartPolicy", "spec.restartPolicy"),
            ("spec.schedulerName", "spec.schedulerName"),
            ("spec.serviceAccountName", "spec.serviceAccountName"),
            ("spec.hostNetwork", "spec.hostNetwork"),
            ("status.phase", "status.phase"),
            ("status.podIP", "status.podIP"),
            ("status.nominatedNodeName", "status.nominatedNodeName"),
        ],
        returns_deleted_object: true,
        ..row("", "v1", "Pod", "pods", "pod", true)
    },
    Resource {
        short_names: &["svc"],
        categories: &["all"],
        subresources: &[status_of("", "v1", "Service")],
        has_status: true,
        storage_prefix: "/registry/services/specs",
        name_rule: NameRule::Rfc1035Label,
        returns_deleted_object: true,
        ..row("", "v1", "Service", "services", "service", true)
    },
    Resource {
        short_names: &["cm"],
        storage_prefix: "/registry/configmaps",
        ..row("", "v1", "ConfigMap", "configmaps", "configmap", true)
    },
    Resource {
        storage_prefix: "/registry/secrets",
        field_labels: &[("type", "type")],
        ..row("", "v1", "Secret", "secrets", "secret", true)
    },
    Resource {
        short_names: &["sa"],
        subresources: &[Subresource {
            name: "token",
            group: "authentication.k8s.io",
            version: "v1",
            kind: "TokenRequest",
            verbs: &["create"],
        }],
        storage_prefix: "/registry/serviceaccounts",
        returns_deleted_object: true,
        ..row(
            "",
            "v1",
            "ServiceAccount",
            "serviceaccounts",
            "serviceaccount",
            true,
        )
    },
    Resource {
        short_names: &["ev"],
        storage_prefix: "/registry/events",
        name_rule: NameRule::PathSegment,
        field_labels: &[
            ("involvedObject.kind", "involvedObject.kind"),
            ("involvedObject.namespace", "involvedObject.namespace"),
            ("involvedObject.name", "involvedObject.name"),
            ("involvedObject.uid", "involvedObject.uid"),
            ("involvedObject.apiVersion", "involvedObject.apiVersion"),
            (
                "involvedObject.resourceVersion",
                "involvedObject.resourceVersion",
            ),
            ("involvedObject.fieldPath", "involvedObject.fieldPath"),
            ("reason", "reason"),
            ("reportingComponent", "reportingComponent"),
            ("source", "source.component"),
            ("type", "type"),
        ],
        ..row("", "v1", "Event", "events", "event", true)
    },
    Resource {
        short_names: &["no"],
        subresources: &[status_of("", "v1", "Node")],
        has_status: true,
        storage_prefix: "/registry/minions",
        field_labels: &[("spec.unschedulable", "spec.unschedulable")],
        ..row("", "v1", "Node", "nodes", "node", false)
    },
    Resource {
        short_names: &["ep"],
        storage_prefix: "/registry/services/endpoints",
        ..row("", "v1", "Endpoints", "endpoints", "endpoints", true)
    },
    Resource {
        short_names: &["pv"],
        subresources: &[status_of("", "v1", "PersistentVolume")],
        has_status: true,
        storage_prefix: "/registry/persistentvolumes",
        returns_deleted_object: true,
        ..row(
            "",
            "v1",
            "PersistentVolume",
            "persistentvolumes",
            "persistentvolume",
            false,
        )
    },
    Resource {
        short_names: &["pvc"],
        subresources: &[status_of("", "v1", "PersistentVolumeClaim")],
        has_status: true,
        storage_prefix: "/registry/persistentvolumeclaims",
        returns_deleted_object: true,
        ..row(
            "",
            "v1",
            "PersistentVolumeClaim",
            "persistentvolumeclaims",
            "persistentvolumeclaim",
            true,
        )
    },
    Resource {
        short_names: &["quota"],
        subresources: &[status_of("", "v1", "ResourceQuota")],
        has_status: true,
        storage_prefix: "/registry/resourcequotas",
        returns_deleted_object: true,
        ..row(
            "",
            "v1",
            "ResourceQuota",
            "resourcequotas",
            "resourcequota",
            true,
        )
    },
    Resource {
        short_names: &["limits"],
        storage_prefix: "/registry/limitranges",
        ..row("", "v1", "LimitRange", "limitranges", "limitrange", true)
    },
    Resource {
        short_names: &["rc"],
        categories: &["all"],
        subresources: &[status_of("", "v1", "ReplicationController"), SCALE],
        has_status: true,
        has_spec: true,
        storage_prefix: "/registry/controllers",
        field_labels: &[("status.replicas", "status.replicas")],
        ..row(
            "",
            "v1",
            "ReplicationController",
            "replicationcontrollers",
            "replicationcontroller",
            true,
        )
    },
    Resource {
        storage_prefix: "/registry/podtemplates",
        returns_deleted_object: true,
        ..row("", "v1", "PodTemplate", "podtemplates", "podtemplate", true)
    },
    Resource {
        short_names: &["deploy"],
        categories: &["all"],
        subresources: &[status_of("apps", "v1", "Deployment"), SCALE],
        has_status: true,
        has_spec: true,
        storage_prefix: "/registry/deployments",
        ..row(
            "apps",
            "v1",
            "Deployment",
            "deployments",
            "deployment",
            true,
        )
    },
    Resource {
        short_names: &["rs"],
        categories: &["all"],
        subresources: &[status_of("apps", "v1", "ReplicaSet"), SCALE],
        has_status: true,
        has_spec: true,
        storage_prefix: "/registry/replicasets",
        field_labels: &[("status.replicas", "status.replicas")],
        ..row(
            "apps",
            "v1",
            "ReplicaSet",
            "replicasets",
            "replicaset",
            true,
        )
    },
    Resource {
        short_names: &["sts"],
        categories: &["all"],
        subresources: &[status_of("apps", "v1", "StatefulSet"), SCALE],
        has_status: true,
        has_spec: true,
        storage_prefix: "/registry/statefulsets",
        ..row(
            "apps",
            "v1",
            "StatefulSet",
            "statefulsets",
            "statefulset",
            true,
        )
    },
    Resource {
        short_names: &["ds"],
        categories: &["all"],
        subresources: &[status_of("apps", "v1", "DaemonSet")],
        has_status: true,
        has_spec: true,
        storage_prefix: "/registry/daemonsets",
        ..row("apps", "v1", "DaemonSet", "daemonsets", "daemonset", true)
    },
    Resource {
        storage_prefix: "/registry/controllerrevisions",
        ..row(
            "apps",
            "v1",
            "ControllerRevision",
            "controllerrevisions",
            "controllerrevision",
            true,
        )
    },
    Resource {
        categories: &["all"],
        subresources: &[status_of("batch", "v1", "Job")],
        has_status: true,
        has_spec: true,
        storage_prefix: "/registry/jobs",
        field_labels: &[("status.successful", "status.successful")],
        ..row("batch", "v1", "Job", "jobs", "job", true)
    },
    Resource {
        short_names: &["cj"],
        categories: &["all"],
        subresources: &[status_of("batch", "v1", "CronJob")],
        has_status: true,
        has_spec: true,
        storage_prefix: "/registry/cronjobs",
        ..row("batch", "v1", "CronJob", "cronjobs", "cronjob", true)
    },
    Resource {
        short_names: &["hpa"],
        categories: &["all"],
        subresources: &[status_of("autoscaling", "v2", "HorizontalPodAutoscaler")],
        has_status: true,
        has_spec: true,
        storage_prefix: "/registry/horizontalpodautoscalers",
        ..row(
            "autoscaling",
            "v2",
            "HorizontalPodAutoscaler",
            "horizontalpodautoscalers",
            "horizontalpodautoscaler",
            true,
        )
    },
    // The same objects through the older schema (see `hpa_convert`); v2 is preferred.
    Resource {
        short_names: &["hpa"],
        categories: &["all"],
        subresources: &[status_of("autoscaling", "v1", "HorizontalPodAutoscaler")],
        has_status: true,
        has_spec: true,
        storage_prefix: "/registry/horizontalpodautoscalers",
        ..row(
            "autoscaling",
            "v1",
            "HorizontalPodAutoscaler",
            "horizontalpodautoscalers",
            "horizontalpodautoscaler",
            true,
        )
    },
    Resource {
        short_names: &["pdb"],
        subresources: &[status_of("policy", "v1", "PodDisruptionBudget")],
        has_status: true,
        has_spec: true,
        storage_prefix: "/registry/poddisruptionbudgets",
        ..row(
            "policy",
            "v1",
            "PodDisruptionBudget",
            "poddisruptionbudgets",
            "poddisruptionbudget",
            true,
        )
    },
    Resource {
        storage_prefix: "/registry/leases",
        ..row(
            "coordination.k8s.io",
            "v1",
            "Lease",
            "leases",
            "lease",
            true,
        )
    },
    // Part B: discovery, events.k8s.io, networking, storage, scheduling, RBAC, certificates.
    Resource {
        storage_prefix: "/registry/endpointslices",
        ..row(
            "discovery.k8s.io",
            "v1",
            "EndpointSlice",
            "endpointslices",
            "endpointslice",
            true,
        )
    },
    Resource {
        short_names: &["ev"],
        // The same objects as core/v1 events, converted (see `event_convert`).
        storage_prefix: "/registry/events",
        field_labels: &[
            ("regarding.kind", "regarding.kind"),
            ("regarding.namespace", "regarding.namespace"),
            ("regarding.name", "regarding.name"),
            ("regarding.uid", "regarding.uid"),
            ("regarding.apiVersion", "regarding.apiVersion"),
            ("regarding.resourceVersion", "regarding.resourceVersion"),
            ("regarding.fieldPath", "regarding.fieldPath"),
            ("reason", "reason"),
            ("reportingController", "reportingController"),
            ("type", "type"),
        ],
        ..row("events.k8s.io", "v1", "Event", "events", "event", true)
    },
    Resource {
        short_names: &["ing"],
        subresources: &[status_of("networking.k8s.io", "v1", "Ingress")],
        has_status: true,
        has_spec: true,
        storage_prefix: "/registry/ingress",
        ..row(
            "networking.k8s.io",
            "v1",
            "Ingress",
            "ingresses",
            "ingress",
            true,
        )
    },
    Resource {
        has_spec: true,
        storage_prefix: "/registry/ingressclasses",
        ..row(
            "networking.k8s.io",
            "v1",
            "IngressClass",
            "ingressclasses",
            "ingressclass",
            false,
        )
    },
    Resource {
        short_names: &["netpol"],
        has_spec: true,
        storage_prefix: "/registry/networkpolicies",
        ..row(
            "networking.k8s.io",
            "v1",
            "NetworkPolicy",
            "networkpolicies",
            "networkpolicy",
            true,
        )
    },
    Resource {
        short_names: &["sc"],
        storage_prefix: "/registry/storageclasses",
        returns_deleted_object: true,
        ..row(
            "storage.k8s.io",
            "v1",
            "StorageClass",
            "storageclasses",
            "storageclass",
            false,
        )
    },
    Resource {
        storage_prefix: "/registry/csidrivers",
        returns_deleted_object: true,
        ..row(
            "storage.k8s.io",
            "v1",
            "CSIDriver",
            "csidrivers",
            "csidriver",
            false,
        )
    },
    Resource {
        short_names: &["pc"],
        storage_prefix: "/registry/priorityclasses",
        ..row(
            "scheduling.k8s.io",
            "v1",
            "PriorityClass",
            "priorityclasses",
            "priorityclass",
            false,
        )
    },
    Resource {
        storage_prefix: "/registry/roles",
        name_rule: NameRule::PathSegment,
        ..row(
            "rbac.authorization.k8s.io",
            "v1",
            "Role",
            "roles",
            "role",
            true,
        )
    },
    Resource {
        storage_prefix: "/registry/rolebindings",
        name_rule: NameRule::PathSegment,
        ..row(
            "rbac.authorization.k8s.io",
            "v1",
            "RoleBinding",
            "rolebindings",
            "rolebinding",
            true,
        )
    },
    Resource {
        storage_prefix: "/registry/clusterroles",
        name_rule: NameRule::PathSegment,
        ..row(
            "rbac.authorization.k8s.io",
            "v1",
            "ClusterRole",
            "clusterroles",
            "clusterrole",
            false,
        )
    },
    Resource {
        storage_prefix: "/registry/clusterrolebindings",
        name_rule: NameRule::PathSegment,
        ..row(
            "rbac.authorization.k8s.io",
            "v1",
            "ClusterRoleBinding",
            "clusterrolebindings",
            "clusterrolebinding",
            false,
        )
    },
    Resource {
        short_names: &["crd", "crds"],
        categories: &["api-extensions"],
        subresources: &[status_of(
            "apiextensions.k8s.io",
            "v1",
            "CustomResourceDefinition",
        )],
        has_status: true,
        has_spec: true,
        storage_prefix: "/registry/apiextensions.k8s.io/customresourcedefinitions",
        ..row(
            "apiextensions.k8s.io",
            "v1",
            "CustomResourceDefinition",
            "customresourcedefinitions",
            "customresourcedefinition",
            false,
        )
    },
    // The aggregation layer's registrations (kube-aggregator's APIService).
    Resource {
        categories: &["api-extensions"],
        subresources: &[status_of("apiregistration.k8s.io", "v1", "APIService")],
        has_status: true,
        has_spec: true,
        storage_prefix: "/registry/apiregistration.k8s.io/apiservices",
        // `<version>.<group>`, and `v1.` for the core group (checked by its strategy).
        name_rule: NameRule::PathSegment,
        ..row(
            "apiregistration.k8s.io",
            "v1",
            "APIService",
            "apiservices",
            "apiservice",
            false,
        )
    },
    Resource {
        categories: &["api-extensions"],
        subresources: &[status_of(
            "admissionregistration.k8s.io",
            "v1",
            "ValidatingAdmissionPolicy",
        )],
        has_status: true,
        has_spec: true,
        storage_prefix: "/registry/validatingadmissionpolicies",
        ..row(
            "admissionregistration.k8s.io",
            "v1",
            "ValidatingAdmissionPolicy",
            "validatingadmissionpolicies",
            "validatingadmissionpolicy",
            false,
        )
    },
    Resource {
        categories: &["api-extensions"],
        has_spec: true,
        storage_prefix: "/registry/validatingadmissionpolicybindings",
        ..row(
            "admissionregistration.k8s.io",
            "v1",
            "ValidatingAdmissionPolicyBinding",
            "validatingadmissionpolicybindings",
            "validatingadmissionpolicybinding",
            false,
        )
    },
    Resource {
        categories: &["api-extensions"],
        storage_prefix: "/registry/validatingwebhookconfigurations",
        ..row(
            "admissionregistration.k8s.io",
            "v1",
            "ValidatingWebhookConfiguration",
            "validatingwebhookconfigurations",
            "validatingwebhookconfiguration",
            false,
        )
    },
    Resource {
        categories: &["api-extensions"],
        storage_prefix: "/registry/mutatingwebhookconfigurations",
        ..row(
            "admissionregistration.k8s.io",
            "v1",
            "MutatingWebhookConfiguration",
            "mutatingwebhookconfigurations",
            "mutatingwebhookconfiguration",
            false,
        )
    },
    Resource {
        short_names: &["csr"],
        subresources: &[
            status_of("certificates.k8s.io", "v1", "CertificateSigningRequest"),
            Subresource {
                name: "approval",
                group: "certificates.k8s.io",
                version: "v1",
                kind: "CertificateSigningRequest",
                verbs: SUB_VERBS,
            },
        ],
        has_status: true,
        storage_prefix: "/registry/certificatesigningrequests",
        // "We don't care what you call your certificate requests": only the path rules.
        name_rule: NameRule::PathSegment,
        field_labels: &[("spec.signerName", "spec.signerName")],
        ..row(
            "certificates.k8s.io",
            "v1",
            "CertificateSigningRequest",
            "certificatesigningrequests",
            "certificatesigningrequest",
            false,
        )
    },
    // Token reviews: created and answered, never stored (the prefix is never written).
    Resource {
        verbs: &["create"],
        storage_prefix: "/registry/tokenreviews",
        ..row(
            "authentication.k8s.io",
            "v1",
            "TokenReview",
            "tokenreviews",
            "tokenreview",
            false,
        )
    },
    Resource {
        verbs: &["create"],
        storage_prefix: "/registry/selfsubjectreviews",
        ..row(
            "authentication.k8s.io",
            "v1",
            "SelfSubjectReview",
            "selfsubjectreviews",
            "selfsubjectreview",
            false,
        )
    },
    // Access reviews: created and answered, never stored (the prefix is never written).
    Resource {
        verbs: &["create"],
        storage_prefix: "/registry/selfsubjectaccessreviews",
        ..row(
            "authorization.k8s.io",
            "v1",
            "SelfSubjectAccessReview",
            "selfsubjectaccessreviews",
            "selfsubjectaccessreview",
            false,
        )
    },
    Resource {
        verbs: &["create"],
        storage_prefix: "/registry/selfsubjectrulesreviews",
        ..row(
            "authorization.k8s.io",
            "v1",
            "SelfSubjectRulesReview",
            "selfsubjectrulesreviews",
            "selfsubjectrulesreview",
            false,
        )
    },
    Resource {
        verbs: &["create"],
        storage_prefix: "/registry/subjectaccessreviews",
        ..row(
            "authorization.k8s.io",
            "v1",
            "SubjectAccessReview",
            "subjectaccessreviews",
            "subjectaccessreview",
            false,
        )
    },
    Resource {
        verbs: &["create"],
        storage_prefix: "/registry/localsubjectaccessreviews",
        ..row(
            "authorization.k8s.io",
            "v1",
            "LocalSubjectAccessReview",
            "localsubjectaccessreviews",
            "localsubjectaccessreview",
            true,
        )
    },
];

/// The resource metrics API (`metrics.k8s.io/v1beta1`, metrics-server's): NodeMetrics and
/// PodMetrics, read-only and never stored (the prefixes are never written). Served only while
/// the API server runs its built-in metrics server ([`set_local_extensions`]).
pub static METRICS_API: &[Resource] = &[
    Resource {
        verbs: &["get", "list"],
        storage_prefix: "/registry/metrics.k8s.io/nodes",
        ..row(
            "metrics.k8s.io",
            "v1beta1",
            "NodeMetrics",
            "nodes",
            "nodemetrics",
            false,
        )
    },
    Resource {
        verbs: &["get", "list"],
        storage_prefix: "/registry/metrics.k8s.io/pods",
        ..row(
            "metrics.k8s.io",
            "v1beta1",
            "PodMetrics",
            "pods",
            "podmetrics",
            true,
        )
    },
];

/// The rows of the optional API groups the API server itself serves now (the built-in
/// metrics API unless it is disabled), set once at start ([`set_local_extensions`]).
fn local_extensions_cell() -> &'static RwLock<Arc<Vec<&'static Resource>>> {
    static S: OnceLock<RwLock<Arc<Vec<&'static Resource>>>> = OnceLock::new();
    S.get_or_init(Default::default)
}

fn local_extensions() -> Arc<Vec<&'static Resource>> {
    local_extensions_cell()
        .read()
        .unwrap_or_else(|p| p.into_inner())
        .clone()
}

/// The rows of the optional built-in groups served now.
pub fn local_extension_rows() -> Vec<&'static Resource> {
    local_extensions().to_vec()
}

/// Replaces the served rows of the API server's optional built-in groups (e.g.
/// [`METRICS_API`]); they follow the built-in rows in discovery and win over custom ones.
pub fn set_local_extensions(rows: Vec<&'static Resource>) {
    *local_extensions_cell()
        .write()
        .unwrap_or_else(|p| p.into_inner()) = Arc::new(rows);
}

/// The rows of the custom resources served now, in discovery order. The API server's CRD
/// controller replaces them whole ([`set_custom`]) whenever the set of
/// CustomResourceDefinitions changes.
fn custom_cell() -> &'static RwLock<Arc<Vec<&'static Resource>>> {
    static S: OnceLock<RwLock<Arc<Vec<&'static Resource>>>> = OnceLock::new();
    S.get_or_init(Default::default)
}

fn custom() -> Arc<Vec<&'static Resource>> {
    custom_cell()
        .read()
        .unwrap_or_else(|p| p.into_inner())
        .clone()
}

/// Replaces the served custom resource rows.
pub fn set_custom(rows: Vec<&'static Resource>) {
    *custom_cell().write().unwrap_or_else(|p| p.into_inner()) = Arc::new(rows);
}

/// Every served resource: the built-in rows, the optional built-in groups served now, then
/// the custom resources of the current CustomResourceDefinitions.
pub fn all() -> Vec<&'static Resource> {
    CATALOG
        .iter()
        .chain(local_extensions().iter().copied())
        .chain(custom().iter().copied())
        .collect()
}

/// The resource served at `group/version/plural`. Built-in rows win over custom ones.
pub fn lookup(group: &str, version: &str, plural: &str) -> Option<&'static Resource> {
    let hit = |r: &&Resource| r.group == group && r.version == version && r.plural == plural;
    CATALOG
        .iter()
        .find(hit)
        .or_else(|| local_extensions().iter().copied().find(hit))
        .or_else(|| custom().iter().copied().find(hit))
}

/// The resource of a kind in a group.
pub fn by_kind(group: &str, kind: &str) -> Option<&'static Resource> {
    all()
        .into_iter()
        .find(|r| r.group == group && r.kind == kind)
}

/// Served groups (non-core) with their versions, in catalog order.
pub fn groups() -> Vec<(&'static str, Vec<&'static str>)> {
    let mut out: Vec<(&'static str, Vec<&'static str>)> = Vec::new();
    for r in all().into_iter().filter(|r| !r.group.is_empty()) {
        match out.iter_mut().find(|(g, _)| *g == r.group) {
            Some((_, versions)) if !versions.contains(&r.version) => versions.push(r.version),
            Some(_) => {}
            None => out.push((r.group, vec![r.version])),
        }
    }
    out
}

/// Resources of one group-version.
pub fn in_group_version<'a>(
    group: &'a str,
    version: &'a str,
) -> impl Iterator<Item = &'static Resource> + 'a {
    all()
        .into_iter()
        .filter(move |r| r.group == group && r.version == version)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookups() {
        assert_eq!(
            lookup("apps", "v1", "deployments").unwrap().kind,
            "Deployment"
        );
        assert!(lookup("", "v1", "deployments").is_none());
        assert_eq!(by_kind("", "Namespace").unwrap().plural, "namespaces");
        assert_eq!(groups()[0], ("apps", vec!["v1"]));
    }

    #[test]
    fn local_extensions_are_served_once_set() {
        set_local_extensions(METRICS_API.iter().collect());
        let nodes = lookup("metrics.k8s.io", "v1beta1", "nodes").unwrap();
        assert_eq!((nodes.kind, nodes.namespaced), ("NodeMetrics", false));
        assert_eq!(nodes.verbs, ["get", "list"]);
        assert!(groups().contains(&("metrics.k8s.io", vec!["v1beta1"])));
        assert_eq!(in_group_version("metrics.k8s.io", "v1beta1").count(), 2);
    }

    #[test]
    fn every_row_has_a_storage_prefix() {
        for r in CATALOG.iter().chain(METRICS_API) {
            assert!(r.storage_prefix.starts_with("/registry/"), "{}", r.plural);
            assert!(!r.storage_prefix.ends_with('/'), "{}", r.plural);
        }
    }
}
