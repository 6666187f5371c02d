//! The pod's `ephemeralcontainers` subresource: what `ValidatePodEphemeralContainersUpdate`
//! allows (adding debug containers; never changing or removing one).

use serde_json::{json, Value};

use super::pod::DNS1123_LABEL_ERROR;
use k3rs_apimachinery::status::Cause;
use k3rs_apimachinery::validation::is_dns1123_label;

/// Container fields an ephemeral container may not set.
const FORBIDDEN: &[&str] = &[
    "ports",
    "livenessProbe",
    "readinessProbe",
    "startupProbe",
    "lifecycle",
    "resizePolicy",
    "restartPolicy",
];

fn names(spec: &Value, list: &str) -> Vec<String> {
    spec[list]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["name"].as_str().map(str::to_string))
        .collect()
}

pub fn validate_update(old: &Value, new: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let spec = &new["spec"];
    let mut taken: Vec<String> = names(spec, "containers");
    taken.extend(names(spec, "initContainers"));
    let targets = taken.clone();
    let list = spec["ephemeralContainers"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for (i, c) in list.iter().enumerate() {
        let at = format!("spec.ephemeralContainers[{i}]");
        match c["name"].as_str() {
            None | Some("") => causes.push(Cause::required(format!("{at}.name"), "")),
            Some(n) if !is_dns1123_label(n) => {
                causes.push(Cause::invalid(format!("{at}.name"), n, DNS1123_LABEL_ERROR))
            }
            Some(n) if taken.iter().any(|t| t == n) => causes.push(Cause {
                reason: "FieldValueDuplicate",
                field: format!("{at}.name"),
                message: format!("Duplicate value: {}", json!(n)),
            }),
            Some(n) => taken.push(n.to_string()),
        }
        if c["image"].as_str().is_none_or(|s| s.trim().is_empty()) {
            causes.push(Cause::required(format!("{at}.image"), ""));
        }
        for f in FORBIDDEN {
            if c.get(*f).is_some_and(|v| !v.is_null()) {
                causes.push(Cause::forbidden(
                    format!("{at}.{f}"),
                    "cannot be set for an Ephemeral Container",
                ));
            }
        }
        if let Some(t) = c["targetContainerName"].as_str() {
            if !targets.iter().any(|n| n == t) {
                causes.push(Cause {
                    reason: "FieldValueNotFound",
                    field: format!("{at}.targetContainerName"),
                    message: format!("Not found: {}", json!(t)),
                });
            }
        }
    }
    for (i, o) in old["spec"]["ephemeralContainers"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let name = o["name"].as_str().unwrap_or("");
        match list.iter().find(|c| c["name"] == o["name"]) {
            None => causes.push(Cause::forbidden(
                "spec.ephemeralContainers",
                &format!(
                    "existing ephemeral containers {} may not be removed\n",
                    json!(name)
                ),
            )),
            Some(c) if c != o => causes.push(Cause::forbidden(
                format!("spec.ephemeralContainers[{i}]"),
                &format!(
                    "existing ephemeral containers {} may not be changed\n",
                    json!(name)
                ),
            )),
            Some(_) => {}
        }
    }
    causes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(ephemeral: Value) -> Value {
        json!({"spec": {"containers": [{"name": "app", "image": "nginx"}], "ephemeralContainers": ephemeral}})
    }

    #[test]
    fn adding_a_debug_container() {
        let old = pod(json!([]));
        let new = pod(json!([{"name": "debug", "image": "busybox", "targetContainerName": "app"}]));
        assert!(validate_update(&old, &new).is_empty());
        let bad = pod(
            json!([{"name": "app", "image": "busybox", "ports": [{"containerPort": 80}],
            "targetContainerName": "nope"}]),
        );
        let fields: Vec<String> = validate_update(&old, &bad)
            .into_iter()
            .map(|c| c.field)
            .collect();
        assert_eq!(
            fields,
            [
                "spec.ephemeralContainers[0].name",
                "spec.ephemeralContainers[0].ports",
                "spec.ephemeralContainers[0].targetContainerName"
            ]
        );
    }

    #[test]
    fn existing_ones_are_frozen() {
        let old = pod(json!([{"name": "debug", "image": "busybox"}]));
        let changed = pod(json!([{"name": "debug", "image": "alpine"}]));
        assert_eq!(
            validate_update(&old, &changed)[0].field,
            "spec.ephemeralContainers[0]"
        );
        let removed = pod(json!([]));
        assert_eq!(
            validate_update(&old, &removed)[0].field,
            "spec.ephemeralContainers"
        );
    }
}
