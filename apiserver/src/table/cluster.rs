//! Policy, RBAC and cluster kinds as `kubectl get` shows them (kube's
//! `printPodDisruptionBudget`, `printControllerRevision`, `printRole`, `printRoleBinding`,
//! `printPriorityClass`, `printResourceQuota`, `printLimitRange`, `printPodTemplate`,
//! `printCertificateSigningRequest`, and the `Created At` table of CRDs).

use serde_json::{json, Value};

use super::age;
use super::printers::{age as age_cell, format_labels, int_of, name, str_of, Column, AGE, NAME};
use super::workloads::{containers_images, CONTAINERS, IMAGES};

/// `Created At`: the creation time in RFC 3339 (kube's default table and Role printers).
pub const CREATED_AT: Column = Column::new(
    "Created At",
    "date",
    "Time the object was created (metadata.creationTimestamp).",
);

pub const CREATED_AT_COLUMNS: &[Column] = &[NAME, CREATED_AT];

pub fn created_at_cells(obj: &Value, _now: i64) -> Vec<Value> {
    let at = age::parse_time(&obj["metadata"]["creationTimestamp"])
        .and_then(|t| k8s_openapi::jiff::Timestamp::from_second(t).ok())
        .map(|t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_default();
    vec![name(obj), json!(at)]
}

pub const PDB_COLUMNS: &[Column] = &[
    NAME,
    Column::new(
        "Min Available",
        "string",
        "The minimum number of pods that must be available.",
    ),
    Column::new(
        "Max Unavailable",
        "string",
        "The maximum number of pods that may be unavailable.",
    ),
    Column::new(
        "Allowed Disruptions",
        "integer",
        "Number of pod disruptions that are currently allowed.",
    ),
    AGE,
];

pub fn pdb_cells(pdb: &Value, now: i64) -> Vec<Value> {
    let int_or_string = |v: &Value| match v {
        Value::Null => "N/A".to_string(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    vec![
        name(pdb),
        json!(int_or_string(&pdb["spec"]["minAvailable"])),
        json!(int_or_string(&pdb["spec"]["maxUnavailable"])),
        json!(int_of(&pdb["status"]["disruptionsAllowed"])),
        age_cell(pdb, now),
    ]
}

pub const CONTROLLERREVISION_COLUMNS: &[Column] = &[
    NAME,
    Column::new(
        "Controller",
        "string",
        "The owning controller (kind.group/name).",
    ),
    Column::new("Revision", "integer", "The revision of the state."),
    AGE,
];

pub fn controllerrevision_cells(cr: &Value, now: i64) -> Vec<Value> {
    let owner = cr["metadata"]["ownerReferences"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|o| o["controller"] == Value::Bool(true));
    let controller = match owner {
        Some(o) => {
            let group = str_of(&o["apiVersion"])
                .rsplit_once('/')
                .map_or("", |(g, _)| g);
            let kind = str_of(&o["kind"]).to_lowercase();
            let group_kind = if group.is_empty() {
                kind
            } else {
                format!("{kind}.{group}")
            };
            format!("{group_kind}/{}", str_of(&o["name"]))
        }
        None => "<none>".into(),
    };
    vec![
        name(cr),
        json!(controller),
        json!(int_of(&cr["revision"])),
        age_cell(cr, now),
    ]
}

pub const ROLEBINDING_COLUMNS: &[Column] = &[
    NAME,
    Column::new("Role", "string", "The role the binding grants (Kind/name)."),
    AGE,
    Column::new("Users", "string", "Users in the roleBinding").wide(),
    Column::new("Groups", "string", "Groups in the roleBinding").wide(),
    Column::new(
        "ServiceAccounts",
        "string",
        "ServiceAccounts in the roleBinding",
    )
    .wide(),
];

pub fn rolebinding_cells(rb: &Value, now: i64) -> Vec<Value> {
    let mut users = Vec::new();
    let mut groups = Vec::new();
    let mut sas = Vec::new();
    for s in rb["subjects"].as_array().into_iter().flatten() {
        let n = str_of(&s["name"]).to_string();
        match str_of(&s["kind"]) {
            "User" => users.push(n),
            "Group" => groups.push(n),
            "ServiceAccount" => sas.push(format!("{}/{n}", str_of(&s["namespace"]))),
            _ => {}
        }
    }
    let role = format!(
        "{}/{}",
        str_of(&rb["roleRef"]["kind"]),
        str_of(&rb["roleRef"]["name"])
    );
    vec![
        name(rb),
        json!(role),
        age_cell(rb, now),
        json!(users.join(", ")),
        json!(groups.join(", ")),
        json!(sas.join(", ")),
    ]
}

pub const PRIORITYCLASS_COLUMNS: &[Column] = &[
    NAME,
    Column::new("Value", "integer", "The priority of pods of this class."),
    Column::new(
        "Global-Default",
        "boolean",
        "Whether this is the default class of pods without one.",
    ),
    AGE,
    Column::new(
        "PreemptionPolicy",
        "string",
        "Whether pods of this class preempt lower-priority pods.",
    ),
];

pub fn priorityclass_cells(pc: &Value, now: i64) -> Vec<Value> {
    vec![
        name(pc),
        json!(int_of(&pc["value"])),
        json!(pc["globalDefault"].as_bool().unwrap_or(false)),
        age_cell(pc, now),
        json!(match str_of(&pc["preemptionPolicy"]) {
            "" => "PreemptLowerPriority",
            p => p,
        }),
    ]
}

pub const RESOURCEQUOTA_COLUMNS: &[Column] = &[
    NAME,
    AGE,
    Column::new(
        "Request",
        "string",
        "Used and hard quota of each resource request.",
    ),
    Column::new(
        "Limit",
        "string",
        "Used and hard quota of each resource limit.",
    ),
];

pub fn resourcequota_cells(rq: &Value, now: i64) -> Vec<Value> {
    let mut resources: Vec<&String> = rq["spec"]["hard"]
        .as_object()
        .map(|m| m.keys().collect())
        .unwrap_or_default();
    resources.sort();
    let (mut requests, mut limits) = (Vec::new(), Vec::new());
    let quantity = |v: &Value| match str_of(v) {
        "" => "0".to_string(),
        s => s.to_string(),
    };
    for r in resources {
        let text = format!(
            "{r}: {}/{}",
            quantity(&rq["status"]["used"][r]),
            quantity(&rq["status"]["hard"][r])
        );
        if r.starts_with("limits.") {
            limits.push(text);
        } else {
            requests.push(text);
        }
    }
    vec![
        name(rq),
        age_cell(rq, now),
        json!(requests.join(", ")),
        json!(limits.join(", ")),
    ]
}

pub const PODTEMPLATE_COLUMNS: &[Column] = &[
    NAME,
    CONTAINERS.normal(),
    IMAGES.normal(),
    Column::new("Pod Labels", "string", "The labels of the pod template."),
];

pub fn podtemplate_cells(pt: &Value, _now: i64) -> Vec<Value> {
    let [containers, images] = containers_images(&pt["template"]["spec"]);
    vec![
        name(pt),
        containers,
        images,
        json!(format_labels(&pt["template"]["metadata"]["labels"])),
    ]
}

pub const CSR_COLUMNS: &[Column] = &[
    NAME,
    AGE,
    Column::new("SignerName", "string", "The signer the request is for."),
    Column::new("Requestor", "string", "The user who created the request."),
    Column::new(
        "RequestedDuration",
        "string",
        "The validity the request asks for.",
    ),
    Column::new(
        "Condition",
        "string",
        "Approved, Denied or Pending; Failed and Issued when they apply.",
    ),
];

pub fn csr_cells(csr: &Value, now: i64) -> Vec<Value> {
    let has = |kind: &str| {
        csr["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == kind)
    };
    let mut condition = if has("Denied") {
        "Denied".to_string()
    } else if has("Approved") {
        "Approved".to_string()
    } else {
        "Pending".to_string()
    };
    if has("Failed") {
        condition.push_str(",Failed");
    }
    if !str_of(&csr["status"]["certificate"]).is_empty() {
        condition.push_str(",Issued");
    }
    let duration = match csr["spec"]["expirationSeconds"].as_i64() {
        Some(s) => age::human_duration(s),
        None => "<none>".into(),
    };
    let signer = match str_of(&csr["spec"]["signerName"]) {
        "" => "<none>",
        s => s,
    };
    vec![
        name(csr),
        age_cell(csr, now),
        json!(signer),
        json!(str_of(&csr["spec"]["username"])),
        json!(duration),
        json!(condition),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: &str = "2024-01-01T00:00:00Z";

    fn now() -> i64 {
        age::parse_time(&json!(T0)).unwrap() + 90
    }

    fn meta(n: &str) -> Value {
        json!({"name": n, "creationTimestamp": "2024-01-01T00:00:00.5Z"})
    }

    #[test]
    fn created_at_and_bindings() {
        let role = json!({"metadata": meta("reader")});
        assert_eq!(
            created_at_cells(&role, now()),
            vec![json!("reader"), json!("2024-01-01T00:00:00Z")]
        );
        let rb = json!({"metadata": meta("rb"), "roleRef": {"kind": "ClusterRole", "name": "view"},
            "subjects": [{"kind": "User", "name": "alice"}, {"kind": "Group", "name": "devs"},
                         {"kind": "ServiceAccount", "namespace": "ci", "name": "bot"}, {"kind": "User", "name": "bob"}]});
        assert_eq!(
            rolebinding_cells(&rb, now()),
            vec![
                json!("rb"),
                json!("ClusterRole/view"),
                json!("90s"),
                json!("alice, bob"),
                json!("devs"),
                json!("ci/bot")
            ]
        );
    }

    #[test]
    fn policy_kinds() {
        let pdb = json!({"metadata": meta("p"), "spec": {"minAvailable": "50%"}, "status": {"disruptionsAllowed": 1}});
        assert_eq!(
            pdb_cells(&pdb, now()),
            vec![
                json!("p"),
                json!("50%"),
                json!("N/A"),
                json!(1),
                json!("90s")
            ]
        );
        let pc = json!({"metadata": meta("system-cluster-critical"), "value": 2000000000});
        assert_eq!(
            priorityclass_cells(&pc, now()),
            vec![
                json!("system-cluster-critical"),
                json!(2000000000),
                json!(false),
                json!("90s"),
                json!("PreemptLowerPriority")
            ]
        );
        let rq = json!({"metadata": meta("q"), "spec": {"hard": {"pods": "10", "limits.cpu": "2", "requests.cpu": "1"}},
            "status": {"hard": {"pods": "10", "limits.cpu": "2", "requests.cpu": "1"}, "used": {"pods": "3"}}});
        assert_eq!(
            resourcequota_cells(&rq, now()),
            vec![
                json!("q"),
                json!("90s"),
                json!("pods: 3/10, requests.cpu: 0/1"),
                json!("limits.cpu: 0/2")
            ]
        );
    }

    #[test]
    fn revisions_templates_and_csrs() {
        let mut m = meta("web-6d4b");
        m["ownerReferences"] = json!([{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web", "controller": true}]);
        let cr = json!({"metadata": m, "revision": 2});
        assert_eq!(
            controllerrevision_cells(&cr, now()),
            vec![
                json!("web-6d4b"),
                json!("statefulset.apps/web"),
                json!(2),
                json!("90s")
            ]
        );
        let pt = json!({"metadata": meta("t"), "template": {"metadata": {"labels": {"a": "b"}},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]}}});
        assert_eq!(
            podtemplate_cells(&pt, now()),
            vec![json!("t"), json!("c"), json!("nginx"), json!("a=b")]
        );
        let csr = json!({"metadata": meta("node-csr"), "spec": {"signerName": "kubernetes.io/kube-apiserver-client-kubelet",
            "username": "system:node:n1", "expirationSeconds": 86400},
            "status": {"conditions": [{"type": "Approved", "status": "True"}], "certificate": "LS0t"}});
        assert_eq!(
            csr_cells(&csr, now()),
            vec![
                json!("node-csr"),
                json!("90s"),
                json!("kubernetes.io/kube-apiserver-client-kubelet"),
                json!("system:node:n1"),
                json!("24h"),
                json!("Approved,Issued")
            ]
        );
    }
}
