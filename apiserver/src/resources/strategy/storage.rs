//! `storage.k8s.io/v1`: StorageClass (reclaimPolicy `Delete`, volumeBindingMode `Immediate`,
//! immutable provisioner/parameters/policies) and CSIDriver (the spec defaults of
//! `SetDefaults_CSIDriver`, immutable `attachRequired`).

use serde_json::{json, Value};

use super::{default_field, immutable, one_of, qualified_name};
use k3rs_apimachinery::status::Cause;

pub fn storageclass_defaults(sc: &mut Value) {
    default_field(sc, "reclaimPolicy", json!("Delete"));
    default_field(sc, "volumeBindingMode", json!("Immediate"));
}

pub fn storageclass_validate(sc: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    match sc["provisioner"].as_str() {
        None | Some("") => causes.push(Cause::required("provisioner", "")),
        Some(p) => {
            causes.extend(qualified_name(p, "provisioner"));
        }
    }
    causes.extend(one_of(sc, "reclaimPolicy", &["Delete", "Retain"]));
    causes.extend(one_of(
        sc,
        "volumeBindingMode",
        &["Immediate", "WaitForFirstConsumer"],
    ));
    causes
}

/// kube forbids changing what provisions and how (`updates to X are forbidden.`).
pub fn storageclass_validate_update(new: &Value, old: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    for f in ["parameters", "provisioner"] {
        if new[f] != old[f] {
            causes.push(Cause::forbidden(
                f,
                &format!("updates to {f} are forbidden."),
            ));
        }
    }
    if new["reclaimPolicy"] != old["reclaimPolicy"] {
        causes.push(Cause::forbidden(
            "reclaimPolicy",
            "updates to reclaimPolicy are forbidden.",
        ));
    }
    causes.extend(immutable(new, old, "volumeBindingMode"));
    causes
}

pub fn csidriver_defaults(d: &mut Value) {
    if !d["spec"].is_object() {
        d["spec"] = json!({});
    }
    let spec = &mut d["spec"];
    default_field(spec, "attachRequired", json!(true));
    default_field(spec, "podInfoOnMount", json!(false));
    default_field(spec, "storageCapacity", json!(false));
    default_field(spec, "fsGroupPolicy", json!("ReadWriteOnceWithFSType"));
    default_field(spec, "requiresRepublish", json!(false));
    default_field(spec, "seLinuxMount", json!(false));
    if spec["volumeLifecycleModes"]
        .as_array()
        .is_none_or(Vec::is_empty)
    {
        spec["volumeLifecycleModes"] = json!(["Persistent"]);
    }
}

pub fn csidriver_validate(d: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    // The generic name check already requires a DNS-1123 subdomain; CSI names are shorter.
    let name = d["metadata"]["name"].as_str().unwrap_or("");
    if name.len() > 63 {
        causes.push(Cause::too_long("metadata.name", 63));
    }
    let spec = &d["spec"];
    for (i, m) in spec["volumeLifecycleModes"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let supported = ["Persistent", "Ephemeral"];
        let m = m.as_str().unwrap_or("");
        if !supported.contains(&m) {
            causes.push(Cause::not_supported(
                format!("spec.volumeLifecycleModes[{i}]"),
                m,
                &supported,
            ));
        }
    }
    causes.extend(one_of(
        d,
        "spec.fsGroupPolicy",
        &["File", "None", "ReadWriteOnceWithFSType"],
    ));
    causes
}

pub fn csidriver_validate_update(new: &Value, old: &Value) -> Vec<Cause> {
    immutable(new, old, "spec.attachRequired")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storageclass_defaults_and_validation() {
        let mut sc = json!({"metadata": {"name": "fast"}, "provisioner": "rancher.io/local-path"});
        storageclass_defaults(&mut sc);
        assert_eq!(sc["reclaimPolicy"], "Delete");
        assert_eq!(sc["volumeBindingMode"], "Immediate");
        assert!(storageclass_validate(&sc).is_empty());
        let bad = json!({"reclaimPolicy": "Recycle", "volumeBindingMode": "Later"});
        let fields: Vec<String> = storageclass_validate(&bad)
            .into_iter()
            .map(|c| c.field)
            .collect();
        assert_eq!(
            fields,
            ["provisioner", "reclaimPolicy", "volumeBindingMode"]
        );
        let mut changed = sc.clone();
        changed["provisioner"] = json!("other.io/x");
        let c = storageclass_validate_update(&changed, &sc);
        assert_eq!(c[0].field, "provisioner");
        assert_eq!(
            c[0].message,
            "Forbidden: updates to provisioner are forbidden."
        );
    }

    #[test]
    fn csidriver_defaults_are_upstreams() {
        let mut d = json!({"metadata": {"name": "hostpath.csi.k8s.io"}});
        csidriver_defaults(&mut d);
        assert_eq!(
            d["spec"],
            json!({"attachRequired": true, "podInfoOnMount": false, "storageCapacity": false,
                "fsGroupPolicy": "ReadWriteOnceWithFSType", "requiresRepublish": false,
                "seLinuxMount": false, "volumeLifecycleModes": ["Persistent"]})
        );
        assert!(csidriver_validate(&d).is_empty());
        d["spec"]["volumeLifecycleModes"] = json!(["Forever"]);
        assert_eq!(
            csidriver_validate(&d)[0].field,
            "spec.volumeLifecycleModes[0]"
        );
        let mut new = d.clone();
        new["spec"]["attachRequired"] = json!(false);
        assert_eq!(
            csidriver_validate_update(&new, &d)[0].message,
            "Invalid value: false: field is immutable"
        );
    }
}
