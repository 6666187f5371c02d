//! The mutating half of LimitRanger: containers (and init containers) of a new pod get the
//! `default` limits and `defaultRequest` requests of the namespace's `Container` limit items
//! for every resource they do not state, and the pod an annotation saying what was set.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

/// The annotation that records what LimitRanger set.
pub const ANNOTATION: &str = "kubernetes.io/limit-ranger";

/// One LimitRange's defaults (later `Container` items override earlier ones).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Defaults {
    pub limits: BTreeMap<String, Value>,
    pub requests: BTreeMap<String, Value>,
}

/// The defaults of `limit_range` (empty when it has no `Container` item with defaults).
pub fn of(limit_range: &Value) -> Defaults {
    let mut d = Defaults::default();
    let items = limit_range["spec"]["limits"]
        .as_array()
        .into_iter()
        .flatten();
    for item in items.filter(|i| i["type"] == "Container") {
        for (k, v) in item["default"].as_object().into_iter().flatten() {
            d.limits.insert(k.clone(), v.clone());
        }
        for (k, v) in item["defaultRequest"].as_object().into_iter().flatten() {
            d.requests.insert(k.clone(), v.clone());
        }
    }
    d
}

/// Fills what `list` (a `limits`/`requests` object) lacks from `defaults`; the names set.
fn fill(resources: &mut Value, field: &str, defaults: &BTreeMap<String, Value>) -> Vec<String> {
    let mut set = Vec::new();
    for (k, v) in defaults {
        if resources[field].get(k).is_none() {
            if !resources[field].is_object() {
                resources[field] = Value::Object(Map::new());
            }
            resources[field][k] = v.clone();
            set.push(k.clone());
        }
    }
    set
}

/// Applies `d` to every container of `pod`, recording what it set in [`ANNOTATION`]
/// (`LimitRanger plugin set: cpu, memory request for container app; …`). The pod arrives
/// defaulted (a container's own limit is already its request when it set no request).
pub fn apply(pod: &mut Value, d: &Defaults) {
    if d.limits.is_empty() && d.requests.is_empty() {
        return;
    }
    let mut notes = Vec::new();
    for (list, what) in [
        ("containers", "container"),
        ("initContainers", "init container"),
    ] {
        let Some(cs) = pod["spec"].get_mut(list).and_then(Value::as_array_mut) else {
            continue;
        };
        for c in cs {
            let name = c["name"].as_str().unwrap_or("").to_string();
            if !c["resources"].is_object() {
                c["resources"] = Value::Object(Map::new());
            }
            let limits = fill(&mut c["resources"], "limits", &d.limits);
            let requests = fill(&mut c["resources"], "requests", &d.requests);
            if !requests.is_empty() {
                notes.push(format!("{} request for {what} {name}", requests.join(", ")));
            }
            if !limits.is_empty() {
                notes.push(format!("{} limit for {what} {name}", limits.join(", ")));
            }
        }
    }
    if notes.is_empty() {
        return;
    }
    if !pod["metadata"]["annotations"].is_object() {
        pod["metadata"]["annotations"] = Value::Object(Map::new());
    }
    pod["metadata"]["annotations"][ANNOTATION] =
        Value::String(format!("LimitRanger plugin set: {}", notes.join("; ")));
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn limit_range() -> Value {
        json!({"spec": {"limits": [
            {"type": "Pod", "max": {"cpu": "4"}},
            {"type": "Container", "default": {"cpu": "500m", "memory": "256Mi"},
             "defaultRequest": {"cpu": "100m", "memory": "128Mi"}},
        ]}})
    }

    #[test]
    fn defaults_come_from_container_items_only() {
        let d = of(&limit_range());
        assert_eq!(
            d.limits,
            BTreeMap::from([
                ("cpu".into(), json!("500m")),
                ("memory".into(), json!("256Mi"))
            ])
        );
        assert_eq!(d.requests["memory"], "128Mi");
        assert_eq!(
            of(&json!({"spec": {"limits": [{"type": "Pod"}]}})),
            Defaults::default()
        );
    }

    #[test]
    fn fills_what_each_container_lacks_and_says_so() {
        // Defaulted, as pods reach admission: the init container's limit is its request.
        let mut pod = json!({"metadata": {"name": "p"}, "spec": {
            "initContainers": [{"name": "init", "resources":
                {"limits": {"cpu": "1"}, "requests": {"cpu": "1"}}}],
            "containers": [{"name": "app"}],
        }});
        apply(&mut pod, &of(&limit_range()));
        assert_eq!(
            pod["spec"]["containers"][0]["resources"],
            json!({"limits": {"cpu": "500m", "memory": "256Mi"},
                   "requests": {"cpu": "100m", "memory": "128Mi"}})
        );
        assert_eq!(
            pod["spec"]["initContainers"][0]["resources"],
            json!({"limits": {"cpu": "1", "memory": "256Mi"},
                   "requests": {"cpu": "1", "memory": "128Mi"}})
        );
        assert_eq!(
            pod["metadata"]["annotations"][ANNOTATION],
            "LimitRanger plugin set: cpu, memory request for container app; cpu, memory limit \
             for container app; memory request for init container init; memory limit for init \
             container init"
        );
    }

    #[test]
    fn nothing_set_leaves_the_pod_as_it_was() {
        let full = json!({"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "1", "memory": "1Gi"}});
        let mut pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "a", "resources": full}]}});
        let before = pod.clone();
        apply(&mut pod, &of(&limit_range()));
        assert_eq!(pod, before);
        apply(&mut pod, &Defaults::default());
        assert_eq!(pod, before);
    }
}
