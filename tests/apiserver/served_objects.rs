//! A small valid object of every built-in resource that can be created and deleted, for the
//! tables that go over every served resource (DELETE answers, name lengths).

use serde_json::{json, Value};

use k3rs_apimachinery::catalog::Resource;

/// The collection path of `r` (in namespace `ns` when namespaced).
pub fn collection(r: &Resource, ns: &str) -> String {
    let base = if r.group.is_empty() {
        format!("/api/{}", r.version)
    } else {
        format!("/apis/{}/{}", r.group, r.version)
    };
    if r.namespaced {
        format!("{base}/namespaces/{ns}/{}", r.plural)
    } else {
        format!("{base}/{}", r.plural)
    }
}

fn pod_template() -> Value {
    json!({"metadata": {"labels": {"app": "t"}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
}

/// A valid `r` named `name` in namespace `ns`, or `None` for a resource this table does
/// not know (the callers fail on that, so a new resource must be added here). `csr` is a
/// base64 PEM certificate request, for CertificateSigningRequests.
pub fn minimal(r: &Resource, name: &str, ns: &str, csr: &str) -> Option<Value> {
    let selector = json!({"matchLabels": {"app": "t"}});
    let spec_and_more = match (r.group, r.kind) {
        ("", "Namespace" | "ConfigMap" | "Secret" | "ServiceAccount" | "Node" | "Endpoints") => {
            json!({})
        }
        ("", "Pod") => json!({"spec": pod_template()["spec"]}),
        ("", "Service") => json!({"spec": {"ports": [{"port": 80}]}}),
        ("", "Event") => json!({"involvedObject": {"kind": "Pod", "name": "p", "namespace": ns},
            "reason": "Test", "message": "m", "type": "Normal"}),
        ("", "PersistentVolume") => json!({"spec": {"capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/tmp/k3rs-test-pv"}}}),
        ("", "PersistentVolumeClaim") => json!({"spec": {"accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}}}}),
        ("", "ResourceQuota") => json!({"spec": {"hard": {"pods": "10"}}}),
        ("", "LimitRange") => {
            json!({"spec": {"limits": [{"type": "Container", "default": {"cpu": "100m"}}]}})
        }
        ("", "ReplicationController") => json!({"spec": {"replicas": 0,
            "selector": {"app": "t"}, "template": pod_template()}}),
        ("", "PodTemplate") => json!({"template": pod_template()}),
        ("apps", "Deployment" | "ReplicaSet") => json!({"spec": {"replicas": 0,
            "selector": selector, "template": pod_template()}}),
        ("apps", "StatefulSet") => json!({"spec": {"replicas": 0, "serviceName": "s",
            "selector": selector, "template": pod_template()}}),
        ("apps", "DaemonSet") => {
            json!({"spec": {"selector": selector, "template": pod_template()}})
        }
        ("apps", "ControllerRevision") => json!({"revision": 1, "data": {}}),
        ("batch", "Job") => json!({"spec": {"suspend": true, "template": {"spec": {
            "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}}),
        ("batch", "CronJob") => json!({"spec": {"schedule": "*/5 * * * *", "suspend": true,
            "jobTemplate": {"spec": {"template": {"spec": {"restartPolicy": "Never",
            "containers": [{"name": "c", "image": "busybox"}]}}}}}}),
        ("autoscaling", "HorizontalPodAutoscaler") => json!({"spec": {"maxReplicas": 2,
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "d"}}}),
        ("policy", "PodDisruptionBudget") => {
            json!({"spec": {"minAvailable": 1, "selector": selector}})
        }
        ("coordination.k8s.io", "Lease") => json!({"spec": {}}),
        ("discovery.k8s.io", "EndpointSlice") => json!({"addressType": "IPv4", "endpoints": []}),
        ("events.k8s.io", "Event") => json!({"eventTime": "2026-01-01T00:00:00.000000Z",
            "reportingController": "example.com/test", "reportingInstance": "i",
            "action": "Test", "reason": "Test", "type": "Normal",
            "regarding": {"kind": "Pod", "name": "p", "namespace": ns}}),
        ("networking.k8s.io", "Ingress") => json!({"spec": {"defaultBackend": {
            "service": {"name": "s", "port": {"number": 80}}}}}),
        ("networking.k8s.io", "IngressClass") => json!({"spec": {"controller": "example.com/c"}}),
        ("networking.k8s.io", "NetworkPolicy") => json!({"spec": {"podSelector": {}}}),
        ("storage.k8s.io", "StorageClass") => json!({"provisioner": "example.com/p"}),
        ("storage.k8s.io", "CSIDriver") => json!({"spec": {}}),
        ("scheduling.k8s.io", "PriorityClass") => json!({"value": 10}),
        ("rbac.authorization.k8s.io", "Role" | "ClusterRole") => json!({"rules": []}),
        ("rbac.authorization.k8s.io", "RoleBinding") => json!({"roleRef": {
            "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"}}),
        ("rbac.authorization.k8s.io", "ClusterRoleBinding") => json!({"roleRef": {
            "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "r"}}),
        ("apiextensions.k8s.io", "CustomResourceDefinition") => {
            let (plural, group) = name.split_once('.')?;
            json!({"spec": {"group": group, "scope": "Namespaced",
                "names": {"plural": plural, "singular": "widget", "kind": "Widget"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object",
                        "x-kubernetes-preserve-unknown-fields": true}}}]}})
        }
        ("apiregistration.k8s.io", "APIService") => {
            let (version, group) = name.split_once('.')?;
            json!({"spec": {"group": group, "version": version,
                "groupPriorityMinimum": 1000, "versionPriority": 15}})
        }
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy") => json!({"spec": {
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                "operations": ["CREATE"], "resources": ["configmaps"]}]},
            "validations": [{"expression": "true"}]}}),
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding") => {
            json!({"spec": {"policyName": "p", "validationActions": ["Deny"]}})
        }
        (
            "admissionregistration.k8s.io",
            "ValidatingWebhookConfiguration" | "MutatingWebhookConfiguration",
        ) => json!({"webhooks": []}),
        ("certificates.k8s.io", "CertificateSigningRequest") => json!({"spec": {
            "request": csr, "signerName": "kubernetes.io/kube-apiserver-client",
            "usages": ["client auth"]}}),
        _ => return None,
    };
    let mut obj = json!({"apiVersion": r.group_version(), "kind": r.kind,
        "metadata": {"name": name}});
    for (k, v) in spec_and_more.as_object()? {
        obj[k] = v.clone();
    }
    Some(obj)
}

/// The built-in resources a client can create and delete, once each (the autoscaling/v1
/// HPA is the v2 one's other version).
pub fn deletable() -> Vec<&'static Resource> {
    let mut seen = std::collections::BTreeSet::new();
    k3rs_apimachinery::catalog::CATALOG
        .iter()
        .filter(|r| r.verbs.contains(&"delete") && r.verbs.contains(&"create"))
        .filter(|r| seen.insert((r.group, r.plural)))
        .collect()
}

/// Creates namespace `ns` and waits for its `default` ServiceAccount (pods need it).
pub async fn create_namespace(c: &crate::common::kube::KubeClient, ns: &str) {
    let obj = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
    c.ok("POST", "/api/v1/namespaces", Some(&obj))
        .await
        .unwrap();
    let sa = format!("/api/v1/namespaces/{ns}/serviceaccounts/default");
    for _ in 0..600 {
        if c.request("GET", &sa, None).await.unwrap().0 == 200 {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("no default ServiceAccount in {ns} after 30 s");
}
