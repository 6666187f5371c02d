//! What a ControllerRevision of a StatefulSet or DaemonSet holds (upstream's `getPatch` in both
//! controllers): a strategic merge patch `{"spec": {"template": {…, "$patch": "replace"}}}`
//! that, applied to the owner, restores the template — which is exactly what
//! `kubectl rollout undo` sends for these kinds.

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::PodTemplateSpec;
use kube::api::{Api, Patch, PatchParams};
use kube::ResourceExt;
use serde_json::{json, Value};

/// The revision data of `template`.
pub fn revision_data(template: &PodTemplateSpec) -> Value {
    let mut t = serde_json::to_value(template).unwrap_or_default();
    if let Some(o) = t.as_object_mut() {
        o.insert("$patch".into(), json!("replace"));
    }
    json!({"spec": {"template": t}})
}

/// The template a revision holds.
pub fn revision_template(cr: &ControllerRevision) -> Option<PodTemplateSpec> {
    let mut t = cr.data.as_ref()?.0.get("spec")?.get("template")?.clone();
    t.as_object_mut()?.remove("$patch");
    serde_json::from_value(t).ok()
}

/// Whether `cr` holds `template` (upstream's `Match`).
pub fn holds(cr: &ControllerRevision, template: &PodTemplateSpec) -> bool {
    cr.data.as_ref().map(|d| &d.0) == Some(&revision_data(template))
}

/// Makes `cr` revision number `revision` (a template that came back, e.g. by `kubectl
/// rollout undo`, becomes the newest revision rather than getting a duplicate).
pub async fn renumber(
    api: &Api<ControllerRevision>,
    cr: &ControllerRevision,
    revision: i64,
) -> kube::Result<ControllerRevision> {
    let patch = json!({"revision": revision});
    api.patch(
        &cr.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::runtime::RawExtension;

    #[test]
    fn revisions_hold_the_template_as_a_replacing_patch() {
        let t: PodTemplateSpec = serde_json::from_value(json!({
            "metadata": {"labels": {"app": "db"}},
            "spec": {"containers": [{"name": "c", "image": "pg:16"}]}
        }))
        .unwrap();
        let data = revision_data(&t);
        assert_eq!(
            data,
            json!({"spec": {"template": {"$patch": "replace",
                "metadata": {"labels": {"app": "db"}},
                "spec": {"containers": [{"name": "c", "image": "pg:16"}]}}}})
        );
        let cr = ControllerRevision {
            data: Some(RawExtension(data)),
            ..ControllerRevision::default()
        };
        assert_eq!(revision_template(&cr), Some(t.clone()));
        assert!(holds(&cr, &t));
        let mut other = t.clone();
        other.spec.as_mut().unwrap().containers[0].image = Some("pg:17".into());
        assert!(!holds(&cr, &other));
    }
}
