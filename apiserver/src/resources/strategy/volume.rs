//! PersistentVolume and PersistentVolumeClaim: defaults (`SetDefaults_PersistentVolume`,
//! `SetDefaults_PersistentVolumeClaim(Spec)`) and `ValidatePersistentVolume(Claim)`.

use serde_json::{json, Value};

use super::default_field;

use k3rs_apimachinery::quantity::{self, Quantity};
use k3rs_apimachinery::selector::LabelSelector;
use k3rs_apimachinery::status::Cause;

const ACCESS_MODES: &[&str] = &[
    "ReadOnlyMany",
    "ReadWriteMany",
    "ReadWriteOnce",
    "ReadWriteOncePod",
];
const VOLUME_MODES: &[&str] = &["Block", "Filesystem"];
const RECLAIM_POLICIES: &[&str] = &["Delete", "Recycle", "Retain"];
/// The volume sources a PersistentVolume may use (exactly one).
const PV_SOURCES: &[&str] = &[
    "awsElasticBlockStore",
    "azureDisk",
    "azureFile",
    "cephfs",
    "cinder",
    "csi",
    "fc",
    "flexVolume",
    "flocker",
    "gcePersistentDisk",
    "glusterfs",
    "hostPath",
    "iscsi",
    "local",
    "nfs",
    "photonPersistentDisk",
    "portworxVolume",
    "quobyte",
    "rbd",
    "scaleIO",
    "storageos",
    "vsphereVolume",
];

pub fn pv_defaults(pv: &mut Value) {
    if let Some(spec) = pv.get_mut("spec").filter(|s| s.is_object()) {
        default_field(spec, "persistentVolumeReclaimPolicy", json!("Retain"));
        default_field(spec, "volumeMode", json!("Filesystem"));
    }
    default_field(pv, "status", json!({}));
    default_field(&mut pv["status"], "phase", json!("Pending"));
}

/// A claim's spec defaults (also those of StatefulSet `volumeClaimTemplates`).
pub fn claim_defaults(pvc: &mut Value) {
    if let Some(spec) = pvc.get_mut("spec").filter(|s| s.is_object()) {
        default_field(spec, "volumeMode", json!("Filesystem"));
    }
    default_field(pvc, "status", json!({}));
    default_field(&mut pvc["status"], "phase", json!("Pending"));
}

fn access_modes(spec: &Value, path: &str, causes: &mut Vec<Cause>) {
    let modes = spec["accessModes"].as_array().cloned().unwrap_or_default();
    if modes.is_empty() {
        causes.push(Cause::required(
            format!("{path}.accessModes"),
            "at least 1 access mode is required",
        ));
    }
    for m in &modes {
        let m = m.as_str().unwrap_or("");
        if !ACCESS_MODES.contains(&m) {
            causes.push(Cause::not_supported(
                format!("{path}.accessModes"),
                m,
                ACCESS_MODES,
            ));
        }
    }
    if let Some(m) = spec["volumeMode"].as_str() {
        if !VOLUME_MODES.contains(&m) {
            causes.push(Cause::not_supported(
                format!("{path}.volumeMode"),
                m,
                VOLUME_MODES,
            ));
        }
    }
}

pub fn validate_pv(pv: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let spec = &pv["spec"];
    access_modes(spec, "spec", &mut causes);
    let capacity = spec["capacity"].as_object();
    match capacity {
        None => causes.push(Cause::required("spec.capacity", "")),
        Some(c) if c.is_empty() => causes.push(Cause::required("spec.capacity", "")),
        Some(c) if !c.contains_key("storage") || c.len() > 1 => {
            causes.push(Cause {
                reason: "FieldValueNotSupported",
                field: "spec.capacity".into(),
                message: format!(
                    "Unsupported value: {}: supported values: \"storage\"",
                    spec["capacity"]
                ),
            });
        }
        Some(c) => positive_quantity(&c["storage"], "spec.capacity[storage]", &mut causes),
    }
    if let Some(p) = spec["persistentVolumeReclaimPolicy"].as_str() {
        if !RECLAIM_POLICIES.contains(&p) {
            causes.push(Cause::not_supported(
                "spec.persistentVolumeReclaimPolicy",
                p,
                RECLAIM_POLICIES,
            ));
        }
    }
    let sources: Vec<&str> = PV_SOURCES
        .iter()
        .copied()
        .filter(|s| spec.get(*s).is_some_and(|v| !v.is_null()))
        .collect();
    match sources.as_slice() {
        [] => causes.push(Cause::required("spec", "must specify a volume type")),
        [_] => {}
        [_, more @ ..] => {
            for s in more {
                causes.push(Cause::forbidden(
                    format!("spec.{s}"),
                    "may not specify more than 1 volume type",
                ));
            }
        }
    }
    if spec["hostPath"].is_object() && spec["hostPath"]["path"].as_str().is_none_or(str::is_empty) {
        causes.push(Cause::required("spec.hostPath.path", ""));
    }
    if spec["local"].is_object() && spec["local"]["path"].as_str().is_none_or(str::is_empty) {
        causes.push(Cause::required("spec.local.path", ""));
    }
    causes
}

fn positive_quantity(q: &Value, path: &str, causes: &mut Vec<Cause>) {
    let s = q
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| q.to_string());
    match Quantity::parse(&s) {
        None => causes.push(Cause::invalid(path, &s, quantity::FORMAT_ERROR)),
        Some(n) if !n.is_positive() => {
            causes.push(Cause::invalid(path, &s, "must be greater than zero"))
        }
        Some(_) => {}
    }
}

/// A claim's spec at `path` (`spec`, or a StatefulSet's `spec.volumeClaimTemplates[i].spec`).
pub fn validate_claim_spec(spec: &Value, path: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    access_modes(spec, path, &mut causes);
    match spec["resources"]["requests"].get("storage") {
        None => causes.push(Cause::required(format!("{path}.resources[storage]"), "")),
        Some(q) => positive_quantity(q, &format!("{path}.resources[storage]"), &mut causes),
    }
    if spec["selector"].is_object() {
        if let Err(e) = LabelSelector::from_object(&spec["selector"]) {
            causes.push(Cause::invalid_value(
                format!("{path}.selector"),
                &spec["selector"],
                &e.to_string(),
            ));
        }
    }
    causes
}

pub fn validate_pvc(pvc: &Value) -> Vec<Cause> {
    validate_claim_spec(&pvc["spec"], "spec")
}

/// A bound claim's spec may only grow its storage request (and change its attributes class).
pub fn validate_pvc_update(old: &Value, new: &Value) -> Vec<Cause> {
    let strip = |v: &Value| {
        let mut s = v["spec"].clone();
        if let Some(o) = s.as_object_mut() {
            o.remove("volumeAttributesClassName");
            if let Some(r) = o.get_mut("resources").and_then(Value::as_object_mut) {
                r.remove("requests");
            }
            // Binding fills in the volume name once.
            if old["spec"]["volumeName"].as_str().is_none_or(str::is_empty) {
                o.remove("volumeName");
            }
        }
        s
    };
    if strip(old) != strip(new) {
        return vec![Cause::forbidden(
            "spec",
            "spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims",
        )];
    }
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pv_defaults_and_validation() {
        let mut pv = json!({"spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
            "hostPath": {"path": "/tmp/x"}}});
        pv_defaults(&mut pv);
        assert_eq!(pv["spec"]["persistentVolumeReclaimPolicy"], "Retain");
        assert_eq!(pv["spec"]["volumeMode"], "Filesystem");
        assert_eq!(pv["status"], json!({"phase": "Pending"}));
        assert!(validate_pv(&pv).is_empty(), "{:?}", validate_pv(&pv));
        let bad = json!({"spec": {"accessModes": ["Sometimes"], "persistentVolumeReclaimPolicy": "Keep"}});
        let fields: Vec<String> = validate_pv(&bad).into_iter().map(|c| c.field).collect();
        assert_eq!(
            fields,
            [
                "spec.accessModes",
                "spec.capacity",
                "spec.persistentVolumeReclaimPolicy",
                "spec"
            ]
        );
    }

    #[test]
    fn pvc_defaults_and_validation() {
        let mut pvc = json!({"spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}});
        claim_defaults(&mut pvc);
        assert_eq!(pvc["spec"]["volumeMode"], "Filesystem");
        assert_eq!(pvc["status"]["phase"], "Pending");
        assert!(validate_pvc(&pvc).is_empty());
        let causes = validate_pvc(&json!({"spec": {"resources": {"requests": {"storage": "0"}}}}));
        assert_eq!(causes[0].field, "spec.accessModes");
        assert_eq!(
            causes[0].message,
            "Required value: at least 1 access mode is required"
        );
        assert_eq!(causes[1].field, "spec.resources[storage]");
        assert_eq!(
            causes[1].message,
            "Invalid value: \"0\": must be greater than zero"
        );
        assert_eq!(
            validate_pvc(&json!({"spec": {"accessModes": ["ReadWriteOnce"]}}))[0].field,
            "spec.resources[storage]"
        );
    }

    #[test]
    fn pvc_spec_is_immutable_but_may_grow() {
        let old = json!({"spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}});
        let mut grown = old.clone();
        grown["spec"]["resources"]["requests"]["storage"] = json!("2Gi");
        assert!(validate_pvc_update(&old, &grown).is_empty());
        let mut changed = old.clone();
        changed["spec"]["accessModes"] = json!(["ReadWriteMany"]);
        assert_eq!(validate_pvc_update(&old, &changed)[0].field, "spec");
    }
}
