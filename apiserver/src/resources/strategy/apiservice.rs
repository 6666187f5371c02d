//! APIService (`apiregistration.k8s.io/v1`), as kube-aggregator validates it: the name is
//! `<version>.<group>`, the priorities are in range, a local APIService (no `service`) has
//! neither `caBundle` nor `insecureSkipTLSVerify`, a service-backed one names its Service and
//! does not both pin a CA and skip verification.

use serde_json::Value;

use k3rs_apimachinery::catalog::NameRule;
use k3rs_apimachinery::status::Cause;
use k3rs_apimachinery::validation::validate_name;

/// The highest `groupPriorityMinimum` and `versionPriority` accepted.
const MAX_GROUP_PRIORITY: i64 = 20000;
const MAX_VERSION_PRIORITY: i64 = 1000;

pub fn validate(obj: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let spec = &obj["spec"];
    let group = spec["group"].as_str().unwrap_or("");
    let version = spec["version"].as_str().unwrap_or("");
    let name = obj["metadata"]["name"].as_str().unwrap_or("");
    if name != format!("{version}.{group}") {
        causes.push(Cause::invalid(
            "metadata.name",
            name,
            "must be `spec.version+\".\"+spec.group`",
        ));
    }
    if !group.is_empty() {
        causes.extend(validate_name(group, NameRule::Subdomain, "spec.group"));
    }
    if version.is_empty() {
        causes.push(Cause::required("spec.version", ""));
    } else {
        causes.extend(validate_name(version, NameRule::Label, "spec.version"));
    }
    for (field, max) in [
        ("groupPriorityMinimum", MAX_GROUP_PRIORITY),
        ("versionPriority", MAX_VERSION_PRIORITY),
    ] {
        let v = spec[field].as_i64().unwrap_or(0);
        if v <= 0 || v > max {
            causes.push(Cause::invalid(
                format!("spec.{field}"),
                &v.to_string(),
                &format!("must be positive and less than {max}"),
            ));
        }
    }
    let ca_bundle = spec["caBundle"].as_str().is_some_and(|b| !b.is_empty());
    let insecure = spec["insecureSkipTLSVerify"].as_bool().unwrap_or(false);
    let service = &spec["service"];
    if !service.is_object() {
        if ca_bundle {
            causes.push(Cause::invalid(
                "spec.caBundle",
                "",
                "local APIServices may not have a caBundle",
            ));
        }
        if insecure {
            causes.push(Cause::invalid(
                "spec.insecureSkipTLSVerify",
                "true",
                "local APIServices may not have insecureSkipTLSVerify",
            ));
        }
        return causes;
    }
    for field in ["namespace", "name"] {
        if service[field].as_str().unwrap_or("").is_empty() {
            causes.push(Cause::required(format!("spec.service.{field}"), ""));
        }
    }
    if let Some(port) = service["port"].as_i64() {
        if !(1..=65535).contains(&port) {
            causes.push(Cause::invalid(
                "spec.service.port",
                &port.to_string(),
                "must be between 1 and 65535, inclusive",
            ));
        }
    }
    if insecure && ca_bundle {
        causes.push(Cause::invalid(
            "spec.insecureSkipTLSVerify",
            "true",
            "may not be true if caBundle is present",
        ));
    }
    causes
}

/// `service.port` defaults to 443 (upstream's `SetDefaults_ServiceReference`).
pub fn defaults(obj: &mut Value) {
    let service = &mut obj["spec"]["service"];
    if service.is_object() && service.get("port").is_none() {
        service["port"] = Value::from(443);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fields(obj: &Value) -> Vec<String> {
        validate(obj).into_iter().map(|c| c.field).collect()
    }

    #[test]
    fn valid_local_and_service_backed() {
        let local = json!({"metadata": {"name": "v1.apps"}, "spec": {"group": "apps",
            "version": "v1", "groupPriorityMinimum": 17800, "versionPriority": 15}});
        assert!(validate(&local).is_empty());
        let core = json!({"metadata": {"name": "v1."}, "spec": {"version": "v1",
            "groupPriorityMinimum": 18000, "versionPriority": 1}});
        assert!(validate(&core).is_empty());
        let mut backed = json!({"metadata": {"name": "v1alpha1.wardle.example.com"},
            "spec": {"group": "wardle.example.com", "version": "v1alpha1",
            "groupPriorityMinimum": 1000, "versionPriority": 15,
            "service": {"namespace": "wardle", "name": "api"}, "caBundle": "LS0t"}});
        defaults(&mut backed);
        assert_eq!(backed["spec"]["service"]["port"], 443);
        assert!(validate(&backed).is_empty());
    }

    #[test]
    fn invalid_fields() {
        let bad = json!({"metadata": {"name": "v1.other"}, "spec": {"group": "wardle.example.com",
            "version": "V1", "groupPriorityMinimum": 0, "versionPriority": 1001,
            "service": {"namespace": "", "name": "api", "port": 70000},
            "caBundle": "LS0t", "insecureSkipTLSVerify": true}});
        assert_eq!(
            fields(&bad),
            [
                "metadata.name",
                "spec.version",
                "spec.groupPriorityMinimum",
                "spec.versionPriority",
                "spec.service.namespace",
                "spec.service.port",
                "spec.insecureSkipTLSVerify",
            ]
        );
        let local = json!({"metadata": {"name": "v1.x"}, "spec": {"group": "x", "version": "v1",
            "groupPriorityMinimum": 1, "versionPriority": 1, "caBundle": "LS0t",
            "insecureSkipTLSVerify": true}});
        assert_eq!(
            fields(&local),
            ["spec.caBundle", "spec.insecureSkipTLSVerify"]
        );
    }
}
