//! The core kinds (and leases) as `kubectl get` shows them: kube's `printService`,
//! `printNode`, `printNamespace`, `printConfigMap`, `printSecret`, `printServiceAccount`,
//! `printEndpoints`, `printEvent`, `printLease`.

use serde_json::{json, Value};

use super::age;
use super::printers::{age as age_cell, format_labels, int_of, len_of, name, or_none, str_of};
use super::printers::{Column, AGE, NAME};

pub const SERVICE_COLUMNS: &[Column] = &[
    NAME,
    Column::new("Type", "string", "The type of the service (spec.type)."),
    Column::new(
        "Cluster-IP",
        "string",
        "The IP address of the service inside the cluster (spec.clusterIPs[0]).",
    ),
    Column::new(
        "External-IP",
        "string",
        "External IPs, load balancer ingress or external name of the service.",
    ),
    Column::new(
        "Port(s)",
        "string",
        "The ports the service exposes (port[:nodePort]/protocol).",
    ),
    AGE,
    Column::new(
        "Selector",
        "string",
        "The labels of the pods the service routes to.",
    )
    .wide(),
];

fn service_external_ip(svc: &Value) -> String {
    let external: Vec<&str> = svc["spec"]["externalIPs"]
        .as_array()
        .into_iter()
        .flatten()
        .map(str_of)
        .collect();
    match str_of(&svc["spec"]["type"]) {
        "ClusterIP" | "NodePort" | "" => {
            if external.is_empty() {
                "<none>".into()
            } else {
                external.join(",")
            }
        }
        "LoadBalancer" => {
            let mut all = load_balancer_ingress(&svc["status"]["loadBalancer"]);
            all.extend(external.iter().map(|s| s.to_string()));
            if all.is_empty() {
                "<pending>".into()
            } else {
                all.join(",")
            }
        }
        "ExternalName" => str_of(&svc["spec"]["externalName"]).to_string(),
        _ => "<unknown>".into(),
    }
}

fn service_ports(svc: &Value) -> String {
    let ports: Vec<String> = svc["spec"]["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            let proto = match str_of(&p["protocol"]) {
                "" => "TCP",
                other => other,
            };
            match int_of(&p["nodePort"]) {
                0 => format!("{}/{proto}", int_of(&p["port"])),
                np => format!("{}:{np}/{proto}", int_of(&p["port"])),
            }
        })
        .collect();
    ports.join(",")
}

pub fn service_cells(svc: &Value, now: i64) -> Vec<Value> {
    let cluster_ip = match str_of(&svc["spec"]["clusterIPs"][0]) {
        "" => str_of(&svc["spec"]["clusterIP"]),
        ip => ip,
    };
    vec![
        name(svc),
        json!(str_of(&svc["spec"]["type"])),
        or_none(cluster_ip.to_string()),
        json!(service_external_ip(svc)),
        or_none(service_ports(svc)),
        age_cell(svc, now),
        json!(format_labels(&svc["spec"]["selector"])),
    ]
}

pub const NODE_COLUMNS: &[Column] = &[
    NAME,
    Column::new("Status", "string", "The status of the node."),
    Column::new("Roles", "string", "The roles of the node."),
    AGE,
    Column::new("Version", "string", "Kubelet Version reported by the node."),
    Column::new(
        "Internal-IP",
        "string",
        "The node's first InternalIP address.",
    )
    .wide(),
    Column::new(
        "External-IP",
        "string",
        "The node's first ExternalIP address.",
    )
    .wide(),
    Column::new("OS-Image", "string", "OS image reported by the node.").wide(),
    Column::new(
        "Kernel-Version",
        "string",
        "Kernel version reported by the node.",
    )
    .wide(),
    Column::new(
        "Container-Runtime",
        "string",
        "Container runtime and version reported by the node.",
    )
    .wide(),
];

fn node_address(node: &Value, kind: &str) -> Value {
    node["status"]["addresses"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|a| a["type"] == kind)
        .map_or(json!("<none>"), |a| json!(str_of(&a["address"])))
}

fn node_roles(node: &Value) -> String {
    let mut roles: Vec<String> = Vec::new();
    for (k, v) in node["metadata"]["labels"].as_object().into_iter().flatten() {
        let role = if let Some(r) = k.strip_prefix("node-role.kubernetes.io/") {
            r
        } else if k == "kubernetes.io/role" {
            str_of(v)
        } else {
            continue;
        };
        if !role.is_empty() && !roles.iter().any(|x| x == role) {
            roles.push(role.to_string());
        }
    }
    roles.sort();
    if roles.is_empty() {
        "<none>".into()
    } else {
        roles.join(",")
    }
}

pub fn node_cells(node: &Value, now: i64) -> Vec<Value> {
    let mut status: Vec<String> = node["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["type"] == "Ready")
        .take(1)
        .map(|c| {
            if c["status"] == "True" {
                "Ready".into()
            } else {
                "NotReady".into()
            }
        })
        .collect();
    if status.is_empty() {
        status.push("Unknown".into());
    }
    if node["spec"]["unschedulable"] == Value::Bool(true) {
        status.push("SchedulingDisabled".into());
    }
    let info = &node["status"]["nodeInfo"];
    let unknown = |v: &Value| match str_of(v) {
        "" => json!("<unknown>"),
        s => json!(s),
    };
    vec![
        name(node),
        json!(status.join(",")),
        json!(node_roles(node)),
        age_cell(node, now),
        json!(str_of(&info["kubeletVersion"])),
        node_address(node, "InternalIP"),
        node_address(node, "ExternalIP"),
        unknown(&info["osImage"]),
        unknown(&info["kernelVersion"]),
        unknown(&info["containerRuntimeVersion"]),
    ]
}

pub const NAMESPACE_COLUMNS: &[Column] = &[
    NAME,
    Column::new("Status", "string", "The status of the namespace"),
    AGE,
];

pub fn namespace_cells(ns: &Value, now: i64) -> Vec<Value> {
    vec![
        name(ns),
        json!(str_of(&ns["status"]["phase"])),
        age_cell(ns, now),
    ]
}

pub const CONFIGMAP_COLUMNS: &[Column] = &[
    NAME,
    Column::new(
        "Data",
        "integer",
        "Number of entries in data and binaryData.",
    ),
    AGE,
];

pub fn configmap_cells(cm: &Value, now: i64) -> Vec<Value> {
    let n = len_of(&cm["data"]) + len_of(&cm["binaryData"]);
    vec![name(cm), json!(n), age_cell(cm, now)]
}

pub const SECRET_COLUMNS: &[Column] = &[
    NAME,
    Column::new("Type", "string", "The type of the secret"),
    Column::new("Data", "integer", "The number of entries in the data"),
    AGE,
];

pub fn secret_cells(s: &Value, now: i64) -> Vec<Value> {
    vec![
        name(s),
        json!(str_of(&s["type"])),
        json!(len_of(&s["data"])),
        age_cell(s, now),
    ]
}

pub const SERVICEACCOUNT_COLUMNS: &[Column] = &[
    NAME,
    Column::new(
        "Secrets",
        "integer",
        "The number of secrets of the service account.",
    ),
    AGE,
];

pub fn serviceaccount_cells(sa: &Value, now: i64) -> Vec<Value> {
    vec![name(sa), json!(len_of(&sa["secrets"])), age_cell(sa, now)]
}

pub const ENDPOINTS_COLUMNS: &[Column] = &[
    NAME,
    Column::new(
        "Endpoints",
        "string",
        "Endpoints of the service (the first three, then a count).",
    ),
    AGE,
];

/// The IP (else hostname) of each load balancer ingress point of a `LoadBalancerStatus`.
pub fn load_balancer_ingress(lb: &Value) -> Vec<String> {
    lb["ingress"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|i| match str_of(&i["ip"]) {
            "" => str_of(&i["hostname"]).to_string(),
            ip => ip.to_string(),
        })
        .filter(|s| !s.is_empty())
        .collect()
}

/// kube's `formatEndpoints`: up to three `ip:port`, then ` + N more...`.
fn format_endpoints(ep: &Value) -> String {
    const MAX: usize = 3;
    let subsets = ep["subsets"].as_array().cloned().unwrap_or_default();
    if subsets.is_empty() {
        return "<none>".into();
    }
    let mut list: Vec<String> = Vec::new();
    let mut count = 0;
    for ss in &subsets {
        let addrs: Vec<&str> = ss["addresses"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|a| str_of(&a["ip"]))
            .collect();
        let ports = ss["ports"].as_array().cloned().unwrap_or_default();
        if ports.is_empty() {
            count += addrs.len();
            list.extend(
                addrs
                    .iter()
                    .take(MAX.saturating_sub(list.len()))
                    .map(|a| a.to_string()),
            );
            continue;
        }
        for p in &ports {
            count += addrs.len();
            for a in &addrs {
                if list.len() == MAX {
                    break;
                }
                let host = if a.contains(':') {
                    format!("[{a}]")
                } else {
                    a.to_string()
                };
                list.push(format!("{host}:{}", int_of(&p["port"])));
            }
        }
    }
    let joined = list.join(",");
    if count > list.len() {
        format!("{joined} + {} more...", count - MAX)
    } else if joined.is_empty() {
        "<none>".into()
    } else {
        joined
    }
}

pub fn endpoints_cells(ep: &Value, now: i64) -> Vec<Value> {
    vec![name(ep), json!(format_endpoints(ep)), age_cell(ep, now)]
}

pub const EVENT_COLUMNS: &[Column] = &[
    Column::new("Last Seen", "string", "The last time the event was seen."),
    Column::new("Type", "string", "Type of this event (Normal, Warning)."),
    Column::new("Reason", "string", "Why the action was taken."),
    Column::new("Object", "string", "The object this event is about."),
    Column::new(
        "Subobject",
        "string",
        "The part of the object this event is about.",
    )
    .wide(),
    Column::new("Source", "string", "The component reporting this event.").wide(),
    Column::new("Message", "string", "A description of the event."),
    Column::new("First Seen", "string", "The first time the event was seen.").wide(),
    Column::new(
        "Count",
        "string",
        "The number of times this event has occurred.",
    )
    .wide(),
    Column {
        format: "name",
        ..Column::new("Name", "string", "The name of the event.").wide()
    },
];

/// An events.k8s.io/v1 Event prints as the core Event it is (kube prints the internal type).
pub fn events_v1_cells(ev: &Value, now: i64) -> Vec<Value> {
    event_cells(&crate::resources::event_convert::to_core(ev), now)
}

pub fn event_cells(ev: &Value, now: i64) -> Vec<Value> {
    let first = match age::parse_time(&ev["firstTimestamp"]) {
        Some(_) => age::since(&ev["firstTimestamp"], now),
        None => age::since(&ev["eventTime"], now),
    };
    let mut last = match age::parse_time(&ev["lastTimestamp"]) {
        Some(_) => age::since(&ev["lastTimestamp"], now),
        None => first.clone(),
    };
    let mut count = int_of(&ev["count"]);
    if ev["series"].is_object() {
        last = age::since(&ev["series"]["lastObservedTime"], now);
        count = int_of(&ev["series"]["count"]);
    } else if count == 0 {
        count = 1;
    }
    let involved = &ev["involvedObject"];
    let kind = str_of(&involved["kind"]).to_lowercase();
    let target = match str_of(&involved["name"]) {
        "" => kind,
        n => format!("{kind}/{n}"),
    };
    let component = match str_of(&ev["source"]["component"]) {
        "" => str_of(&ev["reportingComponent"]),
        c => c,
    };
    let instance = match str_of(&ev["source"]["host"]) {
        "" => str_of(&ev["reportingInstance"]),
        h => h,
    };
    let source = if instance.is_empty() {
        component.to_string()
    } else {
        format!("{component}, {instance}")
    };
    vec![
        json!(last),
        json!(str_of(&ev["type"])),
        json!(str_of(&ev["reason"])),
        json!(target),
        json!(str_of(&involved["fieldPath"])),
        json!(source),
        json!(str_of(&ev["message"]).trim()),
        json!(first),
        json!(count),
        name(ev),
    ]
}

pub const LEASE_COLUMNS: &[Column] = &[
    NAME,
    Column::new(
        "Holder",
        "string",
        "The holder of the lease (spec.holderIdentity).",
    ),
    AGE,
];

pub fn lease_cells(l: &Value, now: i64) -> Vec<Value> {
    vec![
        name(l),
        json!(str_of(&l["spec"]["holderIdentity"])),
        age_cell(l, now),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: &str = "2024-01-01T00:00:00Z";

    fn now() -> i64 {
        age::parse_time(&json!(T0)).unwrap() + 2 * 86400
    }

    fn meta(name: &str) -> Value {
        json!({"name": name, "creationTimestamp": T0})
    }

    #[test]
    fn service_rows() {
        let svc = json!({"metadata": meta("web"), "spec": {
            "type": "NodePort", "clusterIP": "10.43.0.10", "clusterIPs": ["10.43.0.10"],
            "ports": [{"port": 80, "nodePort": 30080, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}],
            "selector": {"app": "web"},
        }});
        assert_eq!(
            service_cells(&svc, now()),
            vec![
                json!("web"),
                json!("NodePort"),
                json!("10.43.0.10"),
                json!("<none>"),
                json!("80:30080/TCP,53/UDP"),
                json!("2d"),
                json!("app=web")
            ]
        );
        let lb = json!({"metadata": meta("lb"), "spec": {"type": "LoadBalancer", "clusterIPs": ["10.43.0.11"]}});
        assert_eq!(service_cells(&lb, now())[3], "<pending>");
        assert_eq!(service_cells(&lb, now())[4], "<none>");
        assert_eq!(service_cells(&lb, now())[6], "<none>");
        let ext = json!({"metadata": meta("x"), "spec": {"type": "ExternalName", "externalName": "example.com"}});
        assert_eq!(service_cells(&ext, now())[2], "<none>");
        assert_eq!(service_cells(&ext, now())[3], "example.com");
    }

    #[test]
    fn node_row() {
        let node = json!({"metadata": {"name": "n1", "creationTimestamp": T0, "labels": {
                "node-role.kubernetes.io/control-plane": "", "node-role.kubernetes.io/master": "true"}},
            "spec": {"unschedulable": true},
            "status": {"conditions": [{"type": "MemoryPressure", "status": "False"}, {"type": "Ready", "status": "True"}],
                "addresses": [{"type": "Hostname", "address": "n1"}, {"type": "InternalIP", "address": "10.0.0.1"}],
                "nodeInfo": {"kubeletVersion": "v1.33.0", "osImage": "Debian", "kernelVersion": "6.1", "containerRuntimeVersion": "containerd://2.0"}}});
        assert_eq!(
            node_cells(&node, now()),
            vec![
                json!("n1"),
                json!("Ready,SchedulingDisabled"),
                json!("control-plane,master"),
                json!("2d"),
                json!("v1.33.0"),
                json!("10.0.0.1"),
                json!("<none>"),
                json!("Debian"),
                json!("6.1"),
                json!("containerd://2.0")
            ]
        );
        let bare = json!({"metadata": meta("n2")});
        assert_eq!(
            node_cells(&bare, now())[1..3],
            [json!("Unknown"), json!("<none>")]
        );
        assert_eq!(node_cells(&bare, now())[7], "<unknown>");
    }

    #[test]
    fn small_kinds() {
        let ns = json!({"metadata": meta("default"), "status": {"phase": "Active"}});
        assert_eq!(
            namespace_cells(&ns, now()),
            vec![json!("default"), json!("Active"), json!("2d")]
        );
        let cm =
            json!({"metadata": meta("c"), "data": {"a": "1", "b": "2"}, "binaryData": {"c": ""}});
        assert_eq!(
            configmap_cells(&cm, now()),
            vec![json!("c"), json!(3), json!("2d")]
        );
        let s = json!({"metadata": meta("s"), "type": "Opaque", "data": {"k": "dg=="}});
        assert_eq!(
            secret_cells(&s, now()),
            vec![json!("s"), json!("Opaque"), json!(1), json!("2d")]
        );
        let sa = json!({"metadata": meta("default")});
        assert_eq!(
            serviceaccount_cells(&sa, now()),
            vec![json!("default"), json!(0), json!("2d")]
        );
        let l = json!({"metadata": meta("l"), "spec": {"holderIdentity": "n1"}});
        assert_eq!(
            lease_cells(&l, now()),
            vec![json!("l"), json!("n1"), json!("2d")]
        );
    }

    #[test]
    fn endpoints_are_capped_at_three() {
        let ep = json!({"metadata": meta("e"), "subsets": [{
            "addresses": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}],
            "ports": [{"port": 80}, {"port": 443}],
        }]});
        assert_eq!(
            endpoints_cells(&ep, now())[1],
            "10.0.0.1:80,10.0.0.2:80,10.0.0.1:443 + 1 more..."
        );
        let none = json!({"metadata": meta("e")});
        assert_eq!(endpoints_cells(&none, now())[1], "<none>");
        let headless =
            json!({"metadata": meta("e"), "subsets": [{"addresses": [{"ip": "10.0.0.1"}]}]});
        assert_eq!(endpoints_cells(&headless, now())[1], "10.0.0.1");
    }

    #[test]
    fn event_row() {
        let ev = json!({"metadata": meta("p.1"), "type": "Warning", "reason": "BackOff",
            "involvedObject": {"kind": "Pod", "name": "p", "fieldPath": "spec.containers{a}"},
            "source": {"component": "kubelet", "host": "n1"}, "message": " Back-off \n",
            "firstTimestamp": "2024-01-02T23:00:00Z", "lastTimestamp": "2024-01-02T23:59:00Z", "count": 4});
        assert_eq!(
            event_cells(&ev, now()),
            vec![
                json!("60s"),
                json!("Warning"),
                json!("BackOff"),
                json!("pod/p"),
                json!("spec.containers{a}"),
                json!("kubelet, n1"),
                json!("Back-off"),
                json!("60m"),
                json!(4),
                json!("p.1")
            ]
        );
    }
}
