//! Pod-template workloads as `kubectl get` shows them (kube's `printDeployment`,
//! `printReplicaSet`, `printStatefulSet`, `printDaemonSet`, `printReplicationController`),
//! with the pod template's containers, images and the selector.

use serde_json::{json, Value};

use super::printers::{age, int_of, name, str_of, Column, AGE, NAME};

pub const CONTAINERS: Column = Column::new(
    "Containers",
    "string",
    "Names of each container in the template.",
)
.wide();
pub const IMAGES: Column = Column::new(
    "Images",
    "string",
    "Images referenced by each container in the template.",
)
.wide();
pub const SELECTOR: Column = Column::new(
    "Selector",
    "string",
    "Label selector for the pods this object manages.",
)
.wide();

pub const DEPLOYMENT_COLUMNS: &[Column] = &[
    NAME,
    Column::new("Ready", "string", "Number of the pod with ready state"),
    Column::new("Up-to-date", "string", "Total number of non-terminated pods targeted by this deployment that have the desired template spec."),
    Column::new("Available", "string", "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment."),
    AGE,
    CONTAINERS,
    IMAGES,
    SELECTOR,
];

pub const REPLICASET_COLUMNS: &[Column] = &[
    NAME,
    Column::new("Desired", "integer", "Number of desired pods."),
    Column::new("Current", "integer", "Number of actually running pods."),
    Column::new(
        "Ready",
        "integer",
        "The number of ready replicas for this replica set.",
    ),
    AGE,
    CONTAINERS,
    IMAGES,
    SELECTOR,
];

pub const STATEFULSET_COLUMNS: &[Column] = &[
    NAME,
    Column::new("Ready", "string", "Number of the pod with ready state"),
    AGE,
    CONTAINERS,
    IMAGES,
];

pub const DAEMONSET_COLUMNS: &[Column] = &[
    NAME,
    Column::new("Desired", "integer", "The total number of nodes that should be running the daemon pod."),
    Column::new("Current", "integer", "The number of nodes that are running at least one daemon pod and are supposed to."),
    Column::new("Ready", "integer", "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and ready."),
    Column::new("Up-to-date", "integer", "The total number of nodes that are running updated daemon pod."),
    Column::new("Available", "integer", "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and available."),
    Column::new("Node Selector", "string", "The node selector of the pod template."),
    AGE,
    CONTAINERS,
    IMAGES,
    SELECTOR,
];

pub const REPLICATIONCONTROLLER_COLUMNS: &[Column] = REPLICASET_COLUMNS;

pub const SCALE_COLUMNS: &[Column] = &[
    NAME,
    Column::new(
        "Desired",
        "integer",
        "Number of desired replicas (spec.replicas).",
    ),
    Column::new(
        "Available",
        "integer",
        "Number of actual replicas (status.replicas).",
    ),
    AGE,
];

/// kube's `metav1.LabelSelectorAsSelector(..).String()`: requirements sorted by key
/// (`app=web,tier in (a,b),!legacy`); `<none>` without a selector, `""` for an empty one.
pub fn selector_string(sel: &Value) -> String {
    if sel.is_null() {
        return "<none>".to_string();
    }
    let mut reqs: Vec<(String, String)> = Vec::new();
    if let Some(m) = sel["matchLabels"].as_object() {
        for (k, v) in m {
            reqs.push((k.clone(), format!("{k}={}", str_of(v))));
        }
    }
    for e in sel["matchExpressions"].as_array().into_iter().flatten() {
        let key = str_of(&e["key"]).to_string();
        let mut values: Vec<&str> = e["values"]
            .as_array()
            .into_iter()
            .flatten()
            .map(str_of)
            .collect();
        values.sort();
        let text = match str_of(&e["operator"]) {
            "In" => format!("{key} in ({})", values.join(",")),
            "NotIn" => format!("{key} notin ({})", values.join(",")),
            "Exists" => key.clone(),
            "DoesNotExist" => format!("!{key}"),
            other => format!("{key} {other}"),
        };
        reqs.push((key, text));
    }
    reqs.sort();
    reqs.into_iter()
        .map(|(_, t)| t)
        .collect::<Vec<_>>()
        .join(",")
}

/// CONTAINERS and IMAGES of a pod template's spec.
pub fn containers_images(template_spec: &Value) -> [Value; 2] {
    let containers = template_spec["containers"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let join = |field: &str| {
        containers
            .iter()
            .map(|c| str_of(&c[field]).to_string())
            .collect::<Vec<_>>()
            .join(",")
    };
    [json!(join("name")), json!(join("image"))]
}

/// CONTAINERS, IMAGES and SELECTOR of a workload with `spec.template` and `spec.selector`.
fn template_cells(obj: &Value) -> [Value; 3] {
    let [containers, images] = containers_images(&obj["spec"]["template"]["spec"]);
    [
        containers,
        images,
        json!(selector_string(&obj["spec"]["selector"])),
    ]
}

fn desired(obj: &Value) -> i64 {
    obj["spec"]["replicas"].as_i64().unwrap_or(1)
}

/// The cells of [`DEPLOYMENT_COLUMNS`].
pub fn deployment_cells(d: &Value, now: i64) -> Vec<Value> {
    let status = &d["status"];
    let mut cells = vec![
        name(d),
        json!(format!(
            "{}/{}",
            int_of(&status["readyReplicas"]),
            desired(d)
        )),
        json!(int_of(&status["updatedReplicas"])),
        json!(int_of(&status["availableReplicas"])),
        age(d, now),
    ];
    cells.extend(template_cells(d));
    cells
}

/// The cells of [`REPLICASET_COLUMNS`].
pub fn replicaset_cells(rs: &Value, now: i64) -> Vec<Value> {
    let status = &rs["status"];
    let mut cells = vec![
        name(rs),
        json!(desired(rs)),
        json!(int_of(&status["replicas"])),
        json!(int_of(&status["readyReplicas"])),
        age(rs, now),
    ];
    cells.extend(template_cells(rs));
    cells
}

/// The cells of [`STATEFULSET_COLUMNS`].
pub fn statefulset_cells(ss: &Value, now: i64) -> Vec<Value> {
    let [containers, images, _] = template_cells(ss);
    vec![
        name(ss),
        json!(format!(
            "{}/{}",
            int_of(&ss["status"]["readyReplicas"]),
            desired(ss)
        )),
        age(ss, now),
        containers,
        images,
    ]
}

/// The cells of [`DAEMONSET_COLUMNS`].
pub fn daemonset_cells(ds: &Value, now: i64) -> Vec<Value> {
    let s = &ds["status"];
    let [containers, images, selector] = template_cells(ds);
    vec![
        name(ds),
        json!(int_of(&s["desiredNumberScheduled"])),
        json!(int_of(&s["currentNumberScheduled"])),
        json!(int_of(&s["numberReady"])),
        json!(int_of(&s["updatedNumberScheduled"])),
        json!(int_of(&s["numberAvailable"])),
        json!(super::printers::format_labels(
            &ds["spec"]["template"]["spec"]["nodeSelector"]
        )),
        age(ds, now),
        containers,
        images,
        selector,
    ]
}

/// The cells of [`REPLICATIONCONTROLLER_COLUMNS`]: a ReplicaSet's, with a map selector.
pub fn replicationcontroller_cells(rc: &Value, now: i64) -> Vec<Value> {
    let mut cells = replicaset_cells(rc, now);
    if let Some(last) = cells.last_mut() {
        *last = json!(super::printers::format_labels(&rc["spec"]["selector"]));
    }
    cells
}

/// The cells of [`SCALE_COLUMNS`] (the `scale` subresource).
pub fn scale_cells(scale: &Value, now: i64) -> Vec<Value> {
    vec![
        name(scale),
        json!(int_of(&scale["spec"]["replicas"])),
        json!(int_of(&scale["status"]["replicas"])),
        age(scale, now),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: &str = "2024-01-01T00:00:00Z";

    fn now() -> i64 {
        k3rs_apimachinery::meta::parse_time(&json!(T0)).unwrap() + 4 * 3600
    }

    fn workload(status: Value) -> Value {
        json!({
            "metadata": {"name": "web", "creationTimestamp": T0},
            "spec": {
                "replicas": 3,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {"spec": {"containers": [
                    {"name": "nginx", "image": "nginx:1.27"},
                    {"name": "side", "image": "busybox"},
                ]}},
            },
            "status": status,
        })
    }

    #[test]
    fn deployment_row() {
        let d = workload(json!({"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2}));
        assert_eq!(
            deployment_cells(&d, now()),
            vec![
                json!("web"),
                json!("2/3"),
                json!(3),
                json!(2),
                json!("4h"),
                json!("nginx,side"),
                json!("nginx:1.27,busybox"),
                json!("app=web")
            ]
        );
        let fresh = workload(json!({}));
        assert_eq!(deployment_cells(&fresh, now())[1], "0/3");
    }

    #[test]
    fn replicaset_row() {
        let rs = workload(json!({"replicas": 3, "readyReplicas": 1}));
        assert_eq!(
            replicaset_cells(&rs, now())[..5],
            [json!("web"), json!(3), json!(3), json!(1), json!("4h")]
        );
    }

    #[test]
    fn statefulset_daemonset_and_rc_rows() {
        let ss = workload(json!({"readyReplicas": 1}));
        assert_eq!(
            statefulset_cells(&ss, now()),
            vec![
                json!("web"),
                json!("1/3"),
                json!("4h"),
                json!("nginx,side"),
                json!("nginx:1.27,busybox")
            ]
        );
        let mut ds = workload(
            json!({"desiredNumberScheduled": 2, "currentNumberScheduled": 2,
            "numberReady": 1, "updatedNumberScheduled": 2, "numberAvailable": 1}),
        );
        ds["spec"]["template"]["spec"]["nodeSelector"] = json!({"kubernetes.io/os": "linux"});
        assert_eq!(
            daemonset_cells(&ds, now()),
            vec![
                json!("web"),
                json!(2),
                json!(2),
                json!(1),
                json!(2),
                json!(1),
                json!("kubernetes.io/os=linux"),
                json!("4h"),
                json!("nginx,side"),
                json!("nginx:1.27,busybox"),
                json!("app=web")
            ]
        );
        let mut rc = workload(json!({"replicas": 3, "readyReplicas": 3}));
        rc["spec"]["selector"] = json!({"app": "web", "tier": "fe"});
        assert_eq!(
            replicationcontroller_cells(&rc, now())[7],
            "app=web,tier=fe"
        );
    }

    #[test]
    fn scale_row() {
        let s = json!({"metadata": {"name": "web", "creationTimestamp": T0},
            "spec": {"replicas": 3}, "status": {"replicas": 2, "selector": "app=web"}});
        assert_eq!(
            scale_cells(&s, now()),
            vec![json!("web"), json!(3), json!(2), json!("4h")]
        );
    }

    #[test]
    fn selectors_as_kube_prints_them() {
        let sel = json!({
            "matchLabels": {"app": "web"},
            "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["b", "a"]},
                {"key": "env", "operator": "NotIn", "values": ["prod"]},
                {"key": "legacy", "operator": "DoesNotExist"},
                {"key": "zone", "operator": "Exists"},
            ],
        });
        assert_eq!(
            selector_string(&sel),
            "app=web,env notin (prod),!legacy,tier in (a,b),zone"
        );
        assert_eq!(selector_string(&Value::Null), "<none>");
        assert_eq!(selector_string(&json!({})), "");
    }
}
