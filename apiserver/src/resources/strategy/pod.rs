//! Pod defaulting (`SetDefaults_PodSpec`, `SetDefaults_Container`) and the basic spec checks.

use serde_json::{json, Value};

use super::default_field;
use k3rs_apimachinery::status::Cause;
use k3rs_apimachinery::validation::is_dns1123_label;

pub fn defaults(pod: &mut Value) {
    if let Some(spec) = pod.get_mut("spec").filter(|s| s.is_object()) {
        default_pod_spec(spec);
        // SetDefaults_Pod, not the pod spec: templates do not get these.
        default_field(spec, "enableServiceLinks", json!(true));
        for list in ["containers", "initContainers"] {
            for c in spec[list].as_array_mut().into_iter().flatten() {
                requests_from_limits(&mut c["resources"]);
            }
        }
    }
}

/// A container's request for a resource it limits but does not request is the limit.
pub fn requests_from_limits(resources: &mut Value) {
    let Some(limits) = resources["limits"].as_object().cloned() else {
        return;
    };
    for (k, v) in limits {
        if resources["requests"].get(&k).is_none() {
            if !resources["requests"].is_object() {
                resources["requests"] = json!({});
            }
            resources["requests"][k] = v;
        }
    }
}

/// Defaults of a pod spec (also used for the templates of workloads).
pub fn default_pod_spec(spec: &mut Value) {
    if !spec.is_object() {
        return;
    }
    default_field(spec, "restartPolicy", json!("Always"));
    default_field(spec, "dnsPolicy", json!("ClusterFirst"));
    default_field(spec, "terminationGracePeriodSeconds", json!(30));
    default_field(spec, "schedulerName", json!("default-scheduler"));
    default_field(spec, "securityContext", json!({}));
    mirror_service_account(spec);
    for list in ["containers", "initContainers", "ephemeralContainers"] {
        if let Some(cs) = spec.get_mut(list).and_then(Value::as_array_mut) {
            for c in cs {
                default_container(c);
            }
        }
    }
}

/// v1's deprecated `serviceAccount` and `serviceAccountName` name the same account (the
/// v1 conversion fills the new field from the old one and always writes the old one back).
pub fn mirror_service_account(spec: &mut Value) {
    let name = spec["serviceAccountName"]
        .as_str()
        .filter(|n| !n.is_empty())
        .or_else(|| spec["serviceAccount"].as_str().filter(|n| !n.is_empty()))
        .map(str::to_string);
    if let Some(name) = name {
        spec["serviceAccountName"] = json!(name);
        spec["serviceAccount"] = json!(name);
    }
}

/// `Always` for `:latest` or untagged images, `IfNotPresent` otherwise (digests included).
pub fn image_pull_policy(image: &str) -> &'static str {
    if image.contains('@') {
        return "IfNotPresent";
    }
    let last = image.rsplit('/').next().unwrap_or(image);
    match last.split_once(':') {
        Some((_, "latest")) | None => "Always",
        Some(_) => "IfNotPresent",
    }
}

fn default_container(c: &mut Value) {
    if !c.is_object() {
        return;
    }
    default_field(c, "terminationMessagePath", json!("/dev/termination-log"));
    default_field(c, "terminationMessagePolicy", json!("File"));
    let policy = image_pull_policy(c["image"].as_str().unwrap_or(""));
    default_field(c, "imagePullPolicy", json!(policy));
    default_field(c, "resources", json!({}));
    if let Some(ports) = c.get_mut("ports").and_then(Value::as_array_mut) {
        for p in ports {
            default_field(p, "protocol", json!("TCP"));
        }
    }
}

#[cfg(test)]
mod request_defaults {
    use super::*;

    #[test]
    fn a_pods_limits_default_its_requests_but_not_a_templates() {
        let res = json!({"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "500m"}});
        let mut pod = json!({"spec": {"containers": [{"name": "a", "image": "x:1", "resources": res}],
                                      "initContainers": [{"name": "i", "image": "x:1",
                                          "resources": {"limits": {"cpu": "2"}}}]}});
        defaults(&mut pod);
        assert_eq!(
            pod["spec"]["containers"][0]["resources"]["requests"],
            json!({"cpu": "500m", "memory": "1Gi"})
        );
        assert_eq!(
            pod["spec"]["initContainers"][0]["resources"]["requests"],
            json!({"cpu": "2"})
        );
        let mut template = json!({"containers": [{"name": "a", "image": "x:1",
                                                  "resources": {"limits": {"cpu": "1"}}}]});
        default_pod_spec(&mut template);
        assert_eq!(template["containers"][0]["resources"].get("requests"), None);
    }
}

/// kube's message for a name that is not a DNS-1123 label.
pub const DNS1123_LABEL_ERROR: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";

/// Containers present, each with a DNS-label name (unique) and an image.
pub fn validate_spec(spec: &Value, path: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    let containers = spec.get("containers").and_then(Value::as_array);
    match containers {
        None => causes.push(Cause::required(format!("{path}.containers"), "")),
        Some(cs) if cs.is_empty() => causes.push(Cause::required(format!("{path}.containers"), "")),
        Some(_) => {}
    }
    let mut names = Vec::new();
    for list in ["initContainers", "containers"] {
        for (i, c) in spec
            .get(list)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            let at = format!("{path}.{list}[{i}]");
            match c["name"].as_str() {
                None | Some("") => causes.push(Cause::required(format!("{at}.name"), "")),
                Some(n) if !is_dns1123_label(n) => {
                    causes.push(Cause::invalid(format!("{at}.name"), n, DNS1123_LABEL_ERROR))
                }
                Some(n) if names.contains(&n) => causes.push(Cause {
                    reason: "FieldValueDuplicate",
                    field: format!("{at}.name"),
                    message: format!("Duplicate value: {}", json!(n)),
                }),
                Some(n) => names.push(n),
            }
            if c["image"].as_str().is_none_or(|s| s.trim().is_empty()) {
                causes.push(Cause::required(format!("{at}.image"), ""));
            }
        }
    }
    if let Some(p) = spec["restartPolicy"].as_str() {
        if !["Always", "OnFailure", "Never"].contains(&p) {
            causes.push(Cause::not_supported(
                format!("{path}.restartPolicy"),
                p,
                &["Always", "OnFailure", "Never"],
            ));
        }
    }
    causes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pull_policy_follows_the_tag() {
        assert_eq!(image_pull_policy("nginx"), "Always");
        assert_eq!(image_pull_policy("nginx:latest"), "Always");
        assert_eq!(image_pull_policy("nginx:1.27"), "IfNotPresent");
        assert_eq!(image_pull_policy("localhost:5000/nginx"), "Always");
        assert_eq!(image_pull_policy("localhost:5000/nginx:1"), "IfNotPresent");
        assert_eq!(image_pull_policy("nginx@sha256:abc"), "IfNotPresent");
    }

    #[test]
    fn pod_defaults_are_kube_apiservers() {
        let mut pod = json!({"spec": {"containers": [{"name": "c", "image": "nginx:1", "ports": [{"containerPort": 80}]}]}});
        defaults(&mut pod);
        let s = &pod["spec"];
        assert_eq!(s["restartPolicy"], "Always");
        assert_eq!(s["dnsPolicy"], "ClusterFirst");
        assert_eq!(s["terminationGracePeriodSeconds"], 30);
        assert_eq!(s["schedulerName"], "default-scheduler");
        let c = &s["containers"][0];
        assert_eq!(c["terminationMessagePath"], "/dev/termination-log");
        assert_eq!(c["terminationMessagePolicy"], "File");
        assert_eq!(c["imagePullPolicy"], "IfNotPresent");
        assert_eq!(c["ports"][0]["protocol"], "TCP");
        // Explicit values stay.
        let mut pod = json!({"spec": {"restartPolicy": "Never", "containers": []}});
        defaults(&mut pod);
        assert_eq!(pod["spec"]["restartPolicy"], "Never");
    }

    #[test]
    fn spec_validation_paths() {
        let causes = validate_spec(&json!({"containers": [{"name": "Bad"}]}), "spec");
        let fields: Vec<&str> = causes.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(
            fields,
            ["spec.containers[0].name", "spec.containers[0].image"]
        );
        assert_eq!(
            validate_spec(&json!({}), "spec")[0].field,
            "spec.containers"
        );
    }
}
