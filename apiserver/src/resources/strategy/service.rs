//! Service defaulting (type, sessionAffinity, port protocol and targetPort) and validation.
//! ClusterIP allocation happens in the registry (it needs the datastore).

use serde_json::{json, Value};

use super::default_field;
use k3rs_apimachinery::status::Cause;

pub fn defaults(svc: &mut Value) {
    let Some(spec) = svc.get_mut("spec") else {
        return;
    };
    if !spec.is_object() {
        return;
    }
    default_field(spec, "type", json!("ClusterIP"));
    default_field(spec, "sessionAffinity", json!("None"));
    let external_name = spec["type"] == "ExternalName";
    if !external_name {
        default_field(spec, "internalTrafficPolicy", json!("Cluster"));
    }
    if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
        for p in ports {
            default_field(p, "protocol", json!("TCP"));
            let port = p["port"].clone();
            default_field(p, "targetPort", port);
        }
    }
}

pub fn validate(svc: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let spec = &svc["spec"];
    let ty = spec["type"].as_str().unwrap_or("ClusterIP");
    let types = ["ClusterIP", "NodePort", "LoadBalancer", "ExternalName"];
    if !types.contains(&ty) {
        causes.push(Cause::not_supported("spec.type", ty, &types));
    }
    let ports = spec["ports"].as_array();
    let headless = spec["clusterIP"] == "None";
    if ty != "ExternalName" && !headless && ports.is_none_or(|p| p.is_empty()) {
        causes.push(Cause::required("spec.ports", ""));
    }
    for (i, p) in ports.into_iter().flatten().enumerate() {
        let port = p["port"].as_i64().unwrap_or(0);
        if !(1..=65535).contains(&port) {
            causes.push(Cause::invalid(
                format!("spec.ports[{i}].port"),
                &port.to_string(),
                "must be between 1 and 65535, inclusive",
            ));
        }
        if ports.is_some_and(|all| all.len() > 1) && p["name"].as_str().is_none_or(str::is_empty) {
            causes.push(Cause::required(format!("spec.ports[{i}].name"), ""));
        }
    }
    causes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_ports_and_type() {
        let mut svc = json!({"spec": {"ports": [{"port": 80}]}});
        defaults(&mut svc);
        assert_eq!(svc["spec"]["type"], "ClusterIP");
        assert_eq!(svc["spec"]["sessionAffinity"], "None");
        assert_eq!(
            svc["spec"]["ports"][0],
            json!({"port": 80, "protocol": "TCP", "targetPort": 80})
        );
        assert!(validate(&svc).is_empty());
    }

    #[test]
    fn rejects_bad_ports() {
        let svc = json!({"spec": {"ports": [{"port": 0}]}});
        assert_eq!(validate(&svc)[0].field, "spec.ports[0].port");
        assert_eq!(validate(&json!({"spec": {}}))[0].field, "spec.ports");
    }
}
