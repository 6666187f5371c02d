//! Column definitions and the printer of each kind: the columns kube-apiserver's printers
//! declare (`pkg/printers/internalversion`), with pure functions from an object to its cells.
//! Every column is computed (the server prints "wide"); kubectl hides `priority > 0` columns
//! unless `-o wide`.

use serde_json::{json, Value};

use super::{
    admission, apiregistration, autoscaling, batch, cluster, core, metrics, pod, storage_net,
    workloads,
};

/// One `metav1.TableColumnDefinition`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Column {
    pub name: &'static str,
    /// `string`, `integer`, `date`, …
    pub kind: &'static str,
    /// `name` for the object's name column.
    pub format: &'static str,
    pub description: &'static str,
    pub priority: i32,
}

impl Column {
    pub const fn new(name: &'static str, kind: &'static str, description: &'static str) -> Column {
        Column {
            name,
            kind,
            format: "",
            description,
            priority: 0,
        }
    }

    /// Shown without `-o wide` too.
    pub const fn normal(self) -> Column {
        Column {
            priority: 0,
            ..self
        }
    }

    /// Shown with `-o wide` only.
    pub const fn wide(self) -> Column {
        Column {
            priority: 1,
            ..self
        }
    }

    pub fn to_json(&self) -> Value {
        json!({
            "name": self.name,
            "type": self.kind,
            "format": self.format,
            "description": self.description,
            "priority": self.priority,
        })
    }
}

/// The object's name.
pub const NAME: Column = Column {
    format: "name",
    ..Column::new(
        "Name",
        "string",
        "Name must be unique within a namespace. Cannot be updated.",
    )
};
/// The age from `metadata.creationTimestamp`.
pub const AGE: Column = Column::new(
    "Age",
    "string",
    "Time since the object was created (metadata.creationTimestamp).",
);

/// The cells of one object, given "now" in Unix seconds.
pub type Cells = fn(&Value, i64) -> Vec<Value>;

/// How one kind is printed.
#[derive(Debug, Clone, Copy)]
pub struct Printer {
    pub columns: &'static [Column],
    pub cells: Cells,
}

/// The printer of a kind; NAME and AGE for kinds kube has no printer for here.
pub fn printer_for(group: &str, kind: &str) -> Printer {
    let (columns, cells): (&'static [Column], Cells) = match (group, kind) {
        ("", "Pod") => (pod::COLUMNS, pod::cells),
        ("metrics.k8s.io", "NodeMetrics" | "PodMetrics") => (metrics::COLUMNS, metrics::cells),
        ("apps", "Deployment") => (workloads::DEPLOYMENT_COLUMNS, workloads::deployment_cells),
        ("apps", "ReplicaSet") => (workloads::REPLICASET_COLUMNS, workloads::replicaset_cells),
        ("autoscaling", "Scale") => (workloads::SCALE_COLUMNS, workloads::scale_cells),
        ("apps", "StatefulSet") => (workloads::STATEFULSET_COLUMNS, workloads::statefulset_cells),
        ("apps", "DaemonSet") => (workloads::DAEMONSET_COLUMNS, workloads::daemonset_cells),
        ("", "ReplicationController") => (
            workloads::REPLICATIONCONTROLLER_COLUMNS,
            workloads::replicationcontroller_cells,
        ),
        ("batch", "Job") => (batch::JOB_COLUMNS, batch::job_cells),
        ("autoscaling", "HorizontalPodAutoscaler") => {
            (autoscaling::HPA_COLUMNS, autoscaling::hpa_cells)
        }
        ("batch", "CronJob") => (batch::CRONJOB_COLUMNS, batch::cronjob_cells),
        ("", "PersistentVolume") => (storage_net::PV_COLUMNS, storage_net::pv_cells),
        ("", "PersistentVolumeClaim") => (storage_net::PVC_COLUMNS, storage_net::pvc_cells),
        ("storage.k8s.io", "StorageClass") => (
            storage_net::STORAGECLASS_COLUMNS,
            storage_net::storageclass_cells,
        ),
        ("storage.k8s.io", "CSIDriver") => {
            (storage_net::CSIDRIVER_COLUMNS, storage_net::csidriver_cells)
        }
        ("networking.k8s.io", "Ingress") => {
            (storage_net::INGRESS_COLUMNS, storage_net::ingress_cells)
        }
        ("networking.k8s.io", "IngressClass") => (
            storage_net::INGRESSCLASS_COLUMNS,
            storage_net::ingressclass_cells,
        ),
        ("networking.k8s.io", "NetworkPolicy") => (
            storage_net::NETWORKPOLICY_COLUMNS,
            storage_net::networkpolicy_cells,
        ),
        ("discovery.k8s.io", "EndpointSlice") => (
            storage_net::ENDPOINTSLICE_COLUMNS,
            storage_net::endpointslice_cells,
        ),
        ("policy", "PodDisruptionBudget") => (cluster::PDB_COLUMNS, cluster::pdb_cells),
        ("apps", "ControllerRevision") => (
            cluster::CONTROLLERREVISION_COLUMNS,
            cluster::controllerrevision_cells,
        ),
        ("rbac.authorization.k8s.io", "Role" | "ClusterRole")
        | ("", "LimitRange")
        | ("apiextensions.k8s.io", "CustomResourceDefinition") => {
            (cluster::CREATED_AT_COLUMNS, cluster::created_at_cells)
        }
        ("rbac.authorization.k8s.io", "RoleBinding" | "ClusterRoleBinding") => {
            (cluster::ROLEBINDING_COLUMNS, cluster::rolebinding_cells)
        }
        ("scheduling.k8s.io", "PriorityClass") => {
            (cluster::PRIORITYCLASS_COLUMNS, cluster::priorityclass_cells)
        }
        ("", "ResourceQuota") => (cluster::RESOURCEQUOTA_COLUMNS, cluster::resourcequota_cells),
        ("", "PodTemplate") => (cluster::PODTEMPLATE_COLUMNS, cluster::podtemplate_cells),
        ("certificates.k8s.io", "CertificateSigningRequest") => {
            (cluster::CSR_COLUMNS, cluster::csr_cells)
        }
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy") => {
            (admission::VAP_COLUMNS, admission::vap_cells)
        }
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding") => {
            (admission::VAP_BINDING_COLUMNS, admission::vap_binding_cells)
        }
        (
            "admissionregistration.k8s.io",
            "ValidatingWebhookConfiguration" | "MutatingWebhookConfiguration",
        ) => (admission::WEBHOOK_COLUMNS, admission::webhook_cells),
        ("apiregistration.k8s.io", "APIService") => (
            apiregistration::APISERVICE_COLUMNS,
            apiregistration::apiservice_cells,
        ),
        ("", "Service") => (core::SERVICE_COLUMNS, core::service_cells),
        ("", "Node") => (core::NODE_COLUMNS, core::node_cells),
        ("", "Namespace") => (core::NAMESPACE_COLUMNS, core::namespace_cells),
        ("", "ConfigMap") => (core::CONFIGMAP_COLUMNS, core::configmap_cells),
        ("", "Secret") => (core::SECRET_COLUMNS, core::secret_cells),
        ("", "ServiceAccount") => (core::SERVICEACCOUNT_COLUMNS, core::serviceaccount_cells),
        ("", "Endpoints") => (core::ENDPOINTS_COLUMNS, core::endpoints_cells),
        ("", "Event") => (core::EVENT_COLUMNS, core::event_cells),
        ("events.k8s.io", "Event") => (core::EVENT_COLUMNS, core::events_v1_cells),
        ("coordination.k8s.io", "Lease") => (core::LEASE_COLUMNS, core::lease_cells),
        _ => (DEFAULT_COLUMNS, default_cells),
    };
    Printer { columns, cells }
}

const DEFAULT_COLUMNS: &[Column] = &[NAME, AGE];

/// kube's default table (`Name`, `Created At`), with the creation time shown as kubectl
/// shows it: an age.
fn default_cells(obj: &Value, now: i64) -> Vec<Value> {
    vec![name(obj), age(obj, now)]
}

/// `metadata.name` as a cell.
pub fn name(obj: &Value) -> Value {
    obj["metadata"]["name"].clone()
}

/// The AGE cell.
pub fn age(obj: &Value, now: i64) -> Value {
    Value::from(super::age::since(
        &obj["metadata"]["creationTimestamp"],
        now,
    ))
}

/// A string field, or `""`.
pub fn str_of(v: &Value) -> &str {
    v.as_str().unwrap_or("")
}

/// An integer field, or 0.
pub fn int_of(v: &Value) -> i64 {
    v.as_i64().unwrap_or(0)
}

/// The number of entries of a list or map field (0 when absent).
pub fn len_of(v: &Value) -> i64 {
    match v {
        Value::Array(a) => a.len() as i64,
        Value::Object(m) => m.len() as i64,
        _ => 0,
    }
}

/// `<none>` for an empty string.
pub fn or_none(s: String) -> Value {
    if s.is_empty() {
        Value::from("<none>")
    } else {
        Value::from(s)
    }
}

/// kube's `labels.FormatLabels`: `k=v` sorted by key, comma-separated; `<none>` when empty.
pub fn format_labels(v: &Value) -> String {
    let Some(m) = v.as_object() else {
        return "<none>".to_string();
    };
    let mut pairs: Vec<String> = m
        .iter()
        .map(|(k, v)| format!("{k}={}", str_of(v)))
        .collect();
    pairs.sort();
    if pairs.is_empty() {
        "<none>".to_string()
    } else {
        pairs.join(",")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_table_is_name_and_age() {
        let p = printer_for("example.com", "Widget");
        let names: Vec<_> = p.columns.iter().map(|c| c.name).collect();
        assert_eq!(names, ["Name", "Age"]);
        assert_eq!(p.columns[0].to_json()["format"], "name");
        let obj = json!({"metadata": {"name": "j", "creationTimestamp": "2024-01-01T00:00:00Z"}});
        let now =
            k3rs_apimachinery::meta::parse_time(&obj["metadata"]["creationTimestamp"]).unwrap();
        assert_eq!((p.cells)(&obj, now + 3), vec![json!("j"), json!("3s")]);
    }

    #[test]
    fn labels_are_sorted() {
        assert_eq!(format_labels(&json!({"b": "2", "a": "1"})), "a=1,b=2");
        assert_eq!(format_labels(&json!({})), "<none>");
        assert_eq!(format_labels(&Value::Null), "<none>");
    }
}
