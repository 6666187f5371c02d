//! Storage and networking kinds as `kubectl get` shows them (kube's
//! `printPersistentVolume`, `printPersistentVolumeClaim`, `printStorageClass`,
//! `printIngress`, `printIngressClass`, `printNetworkPolicy`, `printEndpointSlice`).

use serde_json::{json, Value};

use super::printers::{age, int_of, name, str_of, Column, AGE, NAME};
use super::workloads::selector_string;

/// kube's `GetAccessModesAsString`: `RWO,ROX,RWX,RWOP`, each once, in that order.
fn access_modes(modes: &Value) -> String {
    let has = |m: &str| modes.as_array().into_iter().flatten().any(|v| v == m);
    [
        ("ReadWriteOnce", "RWO"),
        ("ReadOnlyMany", "ROX"),
        ("ReadWriteMany", "RWX"),
        ("ReadWriteOncePod", "RWOP"),
    ]
    .iter()
    .filter(|(m, _)| has(m))
    .map(|(_, short)| *short)
    .collect::<Vec<_>>()
    .join(",")
}

/// The phase, or `Terminating` once deletion started.
fn phase(obj: &Value) -> String {
    if obj["metadata"]["deletionTimestamp"].is_null() {
        str_of(&obj["status"]["phase"]).to_string()
    } else {
        "Terminating".into()
    }
}

fn unset(v: &Value) -> Value {
    match str_of(v) {
        "" => json!("<unset>"),
        s => json!(s),
    }
}

/// The beta annotation wins over `spec.storageClassName`, as in kube.
fn storage_class(obj: &Value) -> Value {
    let ann = &obj["metadata"]["annotations"]["volume.beta.kubernetes.io/storage-class"];
    match ann.as_str() {
        Some(c) => json!(c),
        None => json!(str_of(&obj["spec"]["storageClassName"])),
    }
}

pub const PV_COLUMNS: &[Column] = &[
    NAME,
    Column::new("Capacity", "string", "The storage capacity of the volume."),
    Column::new(
        "Access Modes",
        "string",
        "The ways the volume can be mounted.",
    ),
    Column::new(
        "Reclaim Policy",
        "string",
        "What happens to the volume when released from its claim.",
    ),
    Column::new("Status", "string", "The phase of the volume."),
    Column::new(
        "Claim",
        "string",
        "The claim bound to the volume (namespace/name).",
    ),
    Column::new("StorageClass", "string", "The storage class of the volume."),
    Column::new(
        "VolumeAttributesClass",
        "string",
        "The volume attributes class of the volume.",
    ),
    Column::new("Reason", "string", "Why the volume is in its phase."),
    AGE,
    Column::new("VolumeMode", "string", "Filesystem or Block.").wide(),
];

pub fn pv_cells(pv: &Value, now: i64) -> Vec<Value> {
    let spec = &pv["spec"];
    let claim = if spec["claimRef"].is_object() {
        format!(
            "{}/{}",
            str_of(&spec["claimRef"]["namespace"]),
            str_of(&spec["claimRef"]["name"])
        )
    } else {
        String::new()
    };
    vec![
        name(pv),
        json!(str_of(&spec["capacity"]["storage"])),
        json!(access_modes(&spec["accessModes"])),
        json!(str_of(&spec["persistentVolumeReclaimPolicy"])),
        json!(phase(pv)),
        json!(claim),
        storage_class(pv),
        unset(&spec["volumeAttributesClassName"]),
        json!(str_of(&pv["status"]["reason"])),
        age(pv, now),
        unset(&spec["volumeMode"]),
    ]
}

pub const PVC_COLUMNS: &[Column] = &[
    NAME,
    Column::new("Status", "string", "The phase of the claim."),
    Column::new("Volume", "string", "The volume bound to the claim."),
    Column::new(
        "Capacity",
        "string",
        "The storage capacity of the bound volume.",
    ),
    Column::new(
        "Access Modes",
        "string",
        "The ways the bound volume can be mounted.",
    ),
    Column::new("StorageClass", "string", "The storage class of the claim."),
    Column::new(
        "VolumeAttributesClass",
        "string",
        "The volume attributes class of the claim.",
    ),
    AGE,
    Column::new("VolumeMode", "string", "Filesystem or Block.").wide(),
];

pub fn pvc_cells(pvc: &Value, now: i64) -> Vec<Value> {
    let spec = &pvc["spec"];
    let bound = !str_of(&spec["volumeName"]).is_empty();
    let (capacity, modes) = if bound {
        (
            str_of(&pvc["status"]["capacity"]["storage"]).to_string(),
            access_modes(&pvc["status"]["accessModes"]),
        )
    } else {
        (String::new(), String::new())
    };
    vec![
        name(pvc),
        json!(phase(pvc)),
        json!(str_of(&spec["volumeName"])),
        json!(capacity),
        json!(modes),
        storage_class(pvc),
        unset(&spec["volumeAttributesClassName"]),
        age(pvc, now),
        unset(&spec["volumeMode"]),
    ]
}

pub const STORAGECLASS_COLUMNS: &[Column] = &[
    NAME,
    Column::new(
        "Provisioner",
        "string",
        "The provisioner of the storage class.",
    ),
    Column::new(
        "ReclaimPolicy",
        "string",
        "The reclaim policy of volumes it provisions.",
    ),
    Column::new(
        "VolumeBindingMode",
        "string",
        "When volumes are bound and provisioned.",
    ),
    Column::new(
        "AllowVolumeExpansion",
        "string",
        "Whether volumes can be expanded.",
    ),
    AGE,
];

pub fn storageclass_cells(sc: &Value, now: i64) -> Vec<Value> {
    let annotations = &sc["metadata"]["annotations"];
    let default = annotations["storageclass.kubernetes.io/is-default-class"] == "true"
        || annotations["storageclass.beta.kubernetes.io/is-default-class"] == "true";
    let mut n = str_of(&sc["metadata"]["name"]).to_string();
    if default {
        n.push_str(" (default)");
    }
    let or = |v: &Value, d: &str| match str_of(v) {
        "" => d.to_string(),
        s => s.to_string(),
    };
    vec![
        json!(n),
        json!(str_of(&sc["provisioner"])),
        json!(or(&sc["reclaimPolicy"], "Delete")),
        json!(or(&sc["volumeBindingMode"], "Immediate")),
        json!(sc["allowVolumeExpansion"].as_bool().unwrap_or(false)),
        age(sc, now),
    ]
}

pub const CSIDRIVER_COLUMNS: &[Column] = &[
    NAME,
    Column::new(
        "AttachRequired",
        "boolean",
        "attachRequired indicates this CSI volume driver requires an attach operation.",
    ),
    Column::new(
        "PodInfoOnMount",
        "boolean",
        "podInfoOnMount indicates this CSI volume driver requires additional pod information during mount operations.",
    ),
    Column::new(
        "StorageCapacity",
        "boolean",
        "storageCapacity indicates that the CSI volume driver wants pod scheduling to consider the storage capacity.",
    ),
    Column::new(
        "TokenRequests",
        "string",
        "tokenRequests indicates the CSI driver needs pods' service account tokens it is mounting volume for.",
    ),
    Column::new(
        "RequiresRepublish",
        "boolean",
        "requiresRepublish indicates the CSI driver wants NodePublishVolume being periodically called.",
    ),
    Column::new(
        "Modes",
        "string",
        "volumeLifecycleModes defines what kind of volumes this CSI volume driver supports.",
    ),
    AGE,
];

/// kube's `printCSIDriver` (unset booleans print their defaults).
pub fn csidriver_cells(d: &Value, now: i64) -> Vec<Value> {
    let spec = &d["spec"];
    let flag = |f: &str, default: bool| json!(spec[f].as_bool().unwrap_or(default));
    let audiences: Vec<&str> = spec["tokenRequests"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| str_of(&t["audience"]))
        .collect();
    let tokens = if audiences.is_empty() {
        "<unset>".to_string()
    } else {
        audiences.join(",")
    };
    let modes: Vec<&str> = spec["volumeLifecycleModes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(str_of)
        .collect();
    let modes = if modes.is_empty() {
        "<none>".to_string()
    } else {
        modes.join(",")
    };
    vec![
        name(d),
        flag("attachRequired", true),
        flag("podInfoOnMount", false),
        flag("storageCapacity", false),
        json!(tokens),
        flag("requiresRepublish", false),
        json!(modes),
        age(d, now),
    ]
}

pub const INGRESS_COLUMNS: &[Column] = &[
    NAME,
    Column::new("Class", "string", "The ingress class of the ingress."),
    Column::new(
        "Hosts",
        "string",
        "Hosts that incoming requests are matched against.",
    ),
    Column::new(
        "Address",
        "string",
        "Address is a list containing ingress points for the load-balancer.",
    ),
    Column::new("Ports", "string", "Ports of TLS configurations that open."),
    AGE,
];

/// The first three items, then ` + N more...`.
fn first_three(items: &[String]) -> String {
    if items.len() > 3 {
        format!("{} + {} more...", items[..3].join(","), items.len() - 3)
    } else {
        items.join(",")
    }
}

pub fn ingress_cells(ing: &Value, now: i64) -> Vec<Value> {
    let spec = &ing["spec"];
    let hosts: Vec<String> = spec["rules"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| str_of(&r["host"]).to_string())
        .filter(|h| !h.is_empty())
        .collect();
    let hosts = if hosts.is_empty() {
        "*".to_string()
    } else {
        first_three(&hosts)
    };
    let address = super::core::load_balancer_ingress(&ing["status"]["loadBalancer"]);
    let tls = spec["tls"].as_array().is_some_and(|t| !t.is_empty());
    vec![
        name(ing),
        json!(spec["ingressClassName"].as_str().unwrap_or("<none>")),
        json!(hosts),
        json!(address.join(",")),
        json!(if tls { "80, 443" } else { "80" }),
        age(ing, now),
    ]
}

pub const INGRESSCLASS_COLUMNS: &[Column] = &[
    NAME,
    Column::new(
        "Controller",
        "string",
        "Controller that is responsible for handling this class.",
    ),
    Column::new(
        "Parameters",
        "string",
        "A reference to a resource with additional parameters.",
    ),
    AGE,
];

pub fn ingressclass_cells(ic: &Value, now: i64) -> Vec<Value> {
    let p = &ic["spec"]["parameters"];
    let params = if p.is_object() {
        match str_of(&p["apiGroup"]) {
            "" => format!("{}/{}", str_of(&p["kind"]), str_of(&p["name"])),
            g => format!("{}.{g}/{}", str_of(&p["kind"]), str_of(&p["name"])),
        }
    } else {
        "<none>".into()
    };
    vec![
        name(ic),
        json!(str_of(&ic["spec"]["controller"])),
        json!(params),
        age(ic, now),
    ]
}

pub const NETWORKPOLICY_COLUMNS: &[Column] = &[
    NAME,
    Column::new("Pod-Selector", "string", "The pods the policy applies to."),
    AGE,
];

pub fn networkpolicy_cells(np: &Value, now: i64) -> Vec<Value> {
    let sel = match selector_string(&np["spec"]["podSelector"]) {
        s if s.is_empty() => "<none>".to_string(),
        s => s,
    };
    vec![name(np), json!(sel), age(np, now)]
}

pub const ENDPOINTSLICE_COLUMNS: &[Column] = &[
    NAME,
    Column::new(
        "AddressType",
        "string",
        "The type of addresses of the slice.",
    ),
    Column::new("Ports", "string", "The ports of the slice."),
    Column::new("Endpoints", "string", "The first addresses of the slice."),
    AGE,
];

pub fn endpointslice_cells(es: &Value, now: i64) -> Vec<Value> {
    let ports: Vec<String> = es["ports"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| int_of(&p["port"]).to_string())
        .collect();
    let ports = if ports.is_empty() {
        "<unset>".to_string()
    } else {
        ports.join(",")
    };
    let addresses: Vec<String> = es["endpoints"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|e| e["addresses"].as_array().cloned().unwrap_or_default())
        .map(|a| str_of(&a).to_string())
        .collect();
    let endpoints = if addresses.is_empty() {
        "<unset>".to_string()
    } else {
        first_three(&addresses)
    };
    vec![
        name(es),
        json!(str_of(&es["addressType"])),
        json!(ports),
        json!(endpoints),
        age(es, now),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: &str = "2024-01-01T00:00:00Z";

    fn now() -> i64 {
        k3rs_apimachinery::meta::parse_time(&json!(T0)).unwrap() + 30
    }

    fn meta(n: &str) -> Value {
        json!({"name": n, "creationTimestamp": T0})
    }

    #[test]
    fn volumes_and_claims() {
        let pv = json!({"metadata": meta("pv1"), "spec": {"capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteMany", "ReadWriteOnce"], "persistentVolumeReclaimPolicy": "Retain",
            "claimRef": {"namespace": "d", "name": "data"}, "storageClassName": "local"},
            "status": {"phase": "Bound"}});
        assert_eq!(
            pv_cells(&pv, now()),
            vec![
                json!("pv1"),
                json!("1Gi"),
                json!("RWO,RWX"),
                json!("Retain"),
                json!("Bound"),
                json!("d/data"),
                json!("local"),
                json!("<unset>"),
                json!(""),
                json!("30s"),
                json!("<unset>")
            ]
        );
        let pending = json!({"metadata": meta("data"), "spec": {"storageClassName": "local", "volumeMode": "Filesystem"},
            "status": {"phase": "Pending"}});
        assert_eq!(
            pvc_cells(&pending, now()),
            vec![
                json!("data"),
                json!("Pending"),
                json!(""),
                json!(""),
                json!(""),
                json!("local"),
                json!("<unset>"),
                json!("30s"),
                json!("Filesystem")
            ]
        );
        let bound = json!({"metadata": meta("data"), "spec": {"volumeName": "pv1"},
            "status": {"phase": "Bound", "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"]}});
        assert_eq!(
            pvc_cells(&bound, now())[2..5],
            [json!("pv1"), json!("1Gi"), json!("RWO")]
        );
        let sc = json!({"metadata": {"name": "local", "creationTimestamp": T0,
            "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}}, "provisioner": "rancher.io/local-path"});
        assert_eq!(
            storageclass_cells(&sc, now()),
            vec![
                json!("local (default)"),
                json!("rancher.io/local-path"),
                json!("Delete"),
                json!("Immediate"),
                json!(false),
                json!("30s")
            ]
        );
    }

    #[test]
    fn ingresses_policies_and_slices() {
        let ing = json!({"metadata": meta("web"), "spec": {"ingressClassName": "traefik",
            "rules": [{"host": "a.example"}, {"host": "b.example"}, {}], "tls": [{"hosts": ["a.example"]}]},
            "status": {"loadBalancer": {"ingress": [{"ip": "10.0.0.1"}]}}});
        assert_eq!(
            ingress_cells(&ing, now()),
            vec![
                json!("web"),
                json!("traefik"),
                json!("a.example,b.example"),
                json!("10.0.0.1"),
                json!("80, 443"),
                json!("30s")
            ]
        );
        let bare = json!({"metadata": meta("x"), "spec": {}});
        assert_eq!(
            ingress_cells(&bare, now())[1..5],
            [json!("<none>"), json!("*"), json!(""), json!("80")]
        );
        let ic = json!({"metadata": meta("traefik"), "spec": {"controller": "traefik.io/ingress-controller",
            "parameters": {"apiGroup": "k8s.example.com", "kind": "IngressParameters", "name": "p"}}});
        assert_eq!(
            ingressclass_cells(&ic, now())[2],
            "IngressParameters.k8s.example.com/p"
        );
        let np = json!({"metadata": meta("deny"), "spec": {"podSelector": {}}});
        assert_eq!(networkpolicy_cells(&np, now())[1], "<none>");
        let es = json!({"metadata": meta("web-abc"), "addressType": "IPv4", "ports": [{"port": 80}, {"port": 443}],
            "endpoints": [{"addresses": ["10.42.0.1"]}, {"addresses": ["10.42.0.2"]}, {"addresses": ["10.42.0.3"]},
                          {"addresses": ["10.42.0.4"]}]});
        assert_eq!(
            endpointslice_cells(&es, now()),
            vec![
                json!("web-abc"),
                json!("IPv4"),
                json!("80,443"),
                json!("10.42.0.1,10.42.0.2,10.42.0.3 + 1 more..."),
                json!("30s")
            ]
        );
    }
}
