//! `pods/<name>/binding` (POST, what a scheduler sends): sets `spec.nodeName` once, adds the
//! `PodScheduled` condition and the binding's annotations. A pod already bound (or being
//! deleted) is a 409, as in kube-apiserver's `assignPod`.

use serde_json::{json, Value};

use super::decode;

use k3rs_apimachinery::meta;

use super::Registry;

use super::Target;

use super::WriteOptions;
use k3rs_apimachinery::status::{ApiError, ApiResult, Cause, Subject};

const ATTEMPTS: usize = 16;

/// `ValidatePodBinding`: a target node name, and kind `Node` (or empty).
pub fn validate_binding(b: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let kind = b["target"]["kind"].as_str().unwrap_or("");
    if !kind.is_empty() && kind != "Node" {
        causes.push(Cause::not_supported(
            "target.kind",
            kind,
            &["Node", "<empty>"],
        ));
    }
    if b["target"]["name"].as_str().is_none_or(str::is_empty) {
        causes.push(Cause::required("target.name", ""));
    }
    causes
}

/// Why a pod cannot be bound (a 409's reason, upstream's words).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BindError {
    /// The pod is being deleted.
    #[error("pod {0} is being deleted, cannot be assigned to a host")]
    Deleting(String),
    /// The pod is bound already (to the node given, JSON-quoted).
    #[error("pod {pod} is already assigned to node {node}")]
    Assigned {
        /// The pod's name.
        pod: String,
        /// Its node, JSON-quoted.
        node: Value,
    },
}

/// The pod after binding to `node`, or why it cannot be bound.
pub fn bind(mut pod: Value, binding: &Value, node: &str, now: &str) -> Result<Value, BindError> {
    let name = meta::name(&pod);
    if meta::is_deleting(&pod) {
        return Err(BindError::Deleting(name.to_string()));
    }
    if let Some(bound) = pod["spec"]["nodeName"].as_str().filter(|n| !n.is_empty()) {
        return Err(BindError::Assigned {
            pod: name.to_string(),
            node: json!(bound),
        });
    }
    pod["spec"]["nodeName"] = json!(node);
    if let Some(a) = binding["metadata"]["annotations"].as_object() {
        let m = meta::metadata_mut(&mut pod);
        let annotations = m.entry("annotations").or_insert_with(|| json!({}));
        if !annotations.is_object() {
            *annotations = json!({});
        }
        for (k, v) in a {
            annotations[k] = v.clone();
        }
    }
    if !pod["status"]["conditions"].is_array() {
        pod["status"]["conditions"] = json!([]);
    }
    let conditions = pod["status"]["conditions"]
        .as_array_mut()
        .expect("set above");
    let scheduled = json!({"type": "PodScheduled", "status": "True", "lastProbeTime": null,
        "lastTransitionTime": now});
    match conditions.iter_mut().find(|c| c["type"] == "PodScheduled") {
        Some(c) if c["status"] == "True" => {}
        Some(c) => *c = scheduled,
        None => conditions.push(scheduled),
    }
    Ok(pod)
}

/// The `Status` a successful binding or eviction answers with (201).
pub fn created_status() -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201})
}

impl Registry {
    /// POST `pods/<name>/binding`.
    pub async fn bind_pod(
        &self,
        t: &Target,
        binding: Value,
        opts: WriteOptions,
    ) -> ApiResult<Value> {
        if meta::name(&binding) != t.name() {
            return Err(ApiError::bad_request(
                "name in URL does not match name in Binding object",
            ));
        }
        let causes = validate_binding(&binding);
        if !causes.is_empty() {
            return Err(ApiError::invalid(
                Subject {
                    group: "",
                    kind: "Binding",
                    name: t.name(),
                },
                causes,
            ));
        }
        let node = binding["target"]["name"].as_str().unwrap_or("");
        let binding_subject = Subject {
            group: "",
            kind: "pods/binding",
            name: t.name(),
        };
        for _ in 0..ATTEMPTS {
            let (kv, _) = self.ds.get(&t.key()).await?;
            let kv = kv.ok_or_else(|| ApiError::not_found(t.subject()))?;
            let pod = decode(&kv)?;
            let uid = meta::uid(&binding);
            if !uid.is_empty() && uid != meta::uid(&pod) {
                return Err(ApiError::conflict_because(
                    binding_subject,
                    &format!(
                        "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                        meta::uid(&pod)
                    ),
                ));
            }
            let bound = bind(pod, &binding, node, &meta::now_rfc3339())
                .map_err(|why| ApiError::conflict_because(binding_subject, &why.to_string()))?;
            if opts.dry_run {
                return Ok(created_status());
            }
            if self
                .replace_at(t.resource, &t.key(), kv.mod_revision, bound)
                .await?
                .is_some()
            {
                return Ok(created_status());
            }
        }
        Err(ApiError::conflict(t.subject()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binding_sets_the_node_once() {
        let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": []}, "status": {"phase": "Pending"}});
        let binding = json!({"metadata": {"name": "p", "annotations": {"a": "b"}}, "target": {"kind": "Node", "name": "n1"}});
        let bound = bind(pod.clone(), &binding, "n1", "2024-01-01T00:00:00Z").unwrap();
        assert_eq!(bound["spec"]["nodeName"], "n1");
        assert_eq!(bound["metadata"]["annotations"], json!({"a": "b"}));
        assert_eq!(
            bound["status"]["conditions"],
            json!([{"type": "PodScheduled", "status": "True", "lastProbeTime": null,
                "lastTransitionTime": "2024-01-01T00:00:00Z"}])
        );
        assert_eq!(
            bind(bound.clone(), &binding, "n2", "t")
                .unwrap_err()
                .to_string(),
            "pod p is already assigned to node \"n1\""
        );
        let mut deleting = pod.clone();
        deleting["metadata"]["deletionTimestamp"] = json!("2024-01-01T00:00:00Z");
        assert!(bind(deleting, &binding, "n1", "t")
            .unwrap_err()
            .to_string()
            .contains("being deleted"));
    }

    #[test]
    fn binding_validation() {
        let causes = validate_binding(&json!({"target": {"kind": "Pod"}}));
        let fields: Vec<&str> = causes.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(fields, ["target.kind", "target.name"]);
        assert!(validate_binding(&json!({"target": {"name": "n"}})).is_empty());
    }
}
