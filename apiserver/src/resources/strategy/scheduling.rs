//! PriorityClass (`scheduling.k8s.io/v1`): the two system classes, the reserved `system-`
//! prefix, the user-definable ceiling, defaulting and immutability of `value` and
//! `preemptionPolicy`.

use serde_json::{json, Value};

use super::{default_field, immutable, one_of};
use k3rs_apimachinery::status::Cause;

/// The highest priority a user-defined class may have (`HighestUserDefinablePriority`).
pub const HIGHEST_USER_DEFINABLE_PRIORITY: i64 = 1_000_000_000;

/// One of the classes kube-apiserver creates at start and refuses to delete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SystemPriorityClass {
    pub name: &'static str,
    pub value: i64,
    pub description: &'static str,
}

/// `system-node-critical` and `system-cluster-critical`, with upstream's values.
pub const SYSTEM_PRIORITY_CLASSES: &[SystemPriorityClass] = &[
    SystemPriorityClass {
        name: "system-node-critical",
        value: 2_000_001_000,
        description: "Used for system critical pods that must not be moved from their current node.",
    },
    SystemPriorityClass {
        name: "system-cluster-critical",
        value: 2_000_000_000,
        description: "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary.",
    },
];

/// The system class called `name`, if any.
pub fn system_class(name: &str) -> Option<&'static SystemPriorityClass> {
    SYSTEM_PRIORITY_CLASSES.iter().find(|c| c.name == name)
}

/// The object kube-apiserver stores for a system class.
pub fn system_class_object(c: &SystemPriorityClass) -> Value {
    json!({
        "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
        "metadata": {"name": c.name},
        "value": c.value,
        "description": c.description,
    })
}

/// Why deleting `name` is refused: system classes cannot be deleted.
pub fn delete_refusal(name: &str) -> Option<&'static str> {
    system_class(name).map(|_| "this is a system priority class and cannot be deleted")
}

/// `preemptionPolicy` defaults to `PreemptLowerPriority`.
pub fn defaults(pc: &mut Value) {
    default_field(pc, "preemptionPolicy", json!("PreemptLowerPriority"));
}

pub fn validate(pc: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let name = pc["metadata"]["name"].as_str().unwrap_or("");
    let value = pc["value"].as_i64().unwrap_or(0);
    if name.starts_with("system-") {
        match system_class(name) {
            Some(c) if c.value == value => {}
            Some(c) => causes.push(Cause::forbidden(
                "metadata.name",
                &format!(
                    "priority class {name} must have value {} (the value of the system priority class)",
                    c.value
                ),
            )),
            None => causes.push(Cause::forbidden(
                "metadata.name",
                "priority class names with 'system-' prefix are reserved for system use only",
            )),
        }
    } else if value > HIGHEST_USER_DEFINABLE_PRIORITY {
        causes.push(Cause::forbidden(
            "value",
            &format!(
                "maximum allowed value of a user defined priority is {HIGHEST_USER_DEFINABLE_PRIORITY}"
            ),
        ));
    }
    causes.extend(one_of(
        pc,
        "preemptionPolicy",
        &["Never", "PreemptLowerPriority"],
    ));
    causes
}

/// `value` and `preemptionPolicy` cannot change.
pub fn validate_update(new: &Value, old: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    if new["value"] != old["value"] {
        causes.push(Cause::forbidden(
            "value",
            "may not be changed in an update.",
        ));
    }
    causes.extend(immutable(new, old, "preemptionPolicy"));
    causes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pc(name: &str, value: i64) -> Value {
        json!({"metadata": {"name": name}, "value": value})
    }

    #[test]
    fn system_classes_are_upstreams() {
        let node = system_class_object(&SYSTEM_PRIORITY_CLASSES[0]);
        assert_eq!(node["metadata"]["name"], "system-node-critical");
        assert_eq!(node["value"], 2_000_001_000);
        assert_eq!(
            system_class("system-cluster-critical").unwrap().value,
            2_000_000_000
        );
        assert!(validate(&node).is_empty());
        assert_eq!(
            delete_refusal("system-node-critical"),
            Some("this is a system priority class and cannot be deleted")
        );
        assert_eq!(delete_refusal("high"), None);
    }

    #[test]
    fn defaults_preemption_policy() {
        let mut p = pc("high", 1000);
        defaults(&mut p);
        assert_eq!(p["preemptionPolicy"], "PreemptLowerPriority");
        let mut p = json!({"metadata": {"name": "x"}, "value": 1, "preemptionPolicy": "Never"});
        defaults(&mut p);
        assert_eq!(p["preemptionPolicy"], "Never");
    }

    #[test]
    fn reserved_names_and_ceiling() {
        let c = validate(&pc("system-mine", 5));
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].field, "metadata.name");
        assert_eq!(
            c[0].message,
            "Forbidden: priority class names with 'system-' prefix are reserved for system use only"
        );
        let c = validate(&pc("huge", 1_000_000_001));
        assert_eq!(
            (c[0].field.as_str(), c[0].message.as_str()),
            (
                "value",
                "Forbidden: maximum allowed value of a user defined priority is 1000000000"
            )
        );
        assert!(validate(&pc("ok", 1_000_000_000)).is_empty());
        let c = validate(
            &json!({"metadata": {"name": "x"}, "value": 1, "preemptionPolicy": "Sometimes"}),
        );
        assert_eq!(c[0].field, "preemptionPolicy");
        assert_eq!(c[0].reason, "FieldValueNotSupported");
    }

    #[test]
    fn value_is_immutable() {
        let c = validate_update(&pc("x", 2), &pc("x", 1));
        assert_eq!(c[0].field, "value");
        assert!(validate_update(&pc("x", 1), &pc("x", 1)).is_empty());
    }
}
