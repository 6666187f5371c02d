//! Mirror pods (upstream's `pkg/kubelet/pod/mirror_client.go` and the static-pod part of
//! `syncPod`/`HandlePodCleanups`): what the API must hold so that every static pod is visible
//! there, as a pure plan from the static pods and the mirror pods the API has.
//!
//! # Guarantees
//! - A static pod with no mirror pod of its name gets one: the static pod's metadata (UID,
//!   resourceVersion and status dropped) with `kubernetes.io/config.mirror` = its hash and the
//!   Node as controlling owner.
//! - A mirror pod is deleted (grace period 0, UID precondition) when no static pod has its
//!   name, when its hash is not the static pod's (the file changed), or when someone deletes it
//!   (it has a `deletionTimestamp`); the replacement is created on a later round, once the old
//!   one is gone.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use super::manifest::{annotation, CONFIG_HASH_ANNOTATION, CONFIG_MIRROR_ANNOTATION};

/// The Node that owns the mirror pods.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeRef {
    pub name: String,
    pub uid: String,
}

/// One API write.
#[derive(Debug, Clone, PartialEq)]
pub enum MirrorAction {
    Create(Box<Pod>),
    Delete {
        namespace: String,
        name: String,
        uid: String,
    },
}

fn full_name(p: &Pod) -> (String, String) {
    (
        p.metadata.namespace.clone().unwrap_or_default(),
        p.metadata.name.clone().unwrap_or_default(),
    )
}

/// The mirror pod of `static_pod` on `node`.
pub fn mirror_pod(static_pod: &Pod, node: &NodeRef) -> Pod {
    let hash = annotation(static_pod, CONFIG_HASH_ANNOTATION)
        .unwrap_or_default()
        .to_string();
    let mut annotations: BTreeMap<String, String> =
        static_pod.metadata.annotations.clone().unwrap_or_default();
    annotations.insert(CONFIG_MIRROR_ANNOTATION.into(), hash);
    Pod {
        metadata: ObjectMeta {
            name: static_pod.metadata.name.clone(),
            namespace: static_pod.metadata.namespace.clone(),
            labels: static_pod.metadata.labels.clone(),
            annotations: Some(annotations),
            owner_references: Some(vec![OwnerReference {
                api_version: "v1".into(),
                kind: "Node".into(),
                name: node.name.clone(),
                uid: node.uid.clone(),
                controller: Some(true),
                ..Default::default()
            }]),
            ..Default::default()
        },
        spec: static_pod.spec.clone(),
        status: None,
    }
}

/// What to write so that `mirrors` (the mirror pods bound to this node) match `statics`.
pub fn plan(statics: &[Pod], mirrors: &[Pod], node: &NodeRef) -> Vec<MirrorAction> {
    let by_name: BTreeMap<(String, String), &Pod> =
        statics.iter().map(|p| (full_name(p), p)).collect();
    let mut actions = Vec::new();
    let mut present = std::collections::BTreeSet::new();
    for m in mirrors {
        let key = full_name(m);
        present.insert(key.clone());
        let wanted = by_name.get(&key).is_some_and(|s| {
            annotation(s, CONFIG_HASH_ANNOTATION) == annotation(m, CONFIG_MIRROR_ANNOTATION)
        });
        if !wanted || m.metadata.deletion_timestamp.is_some() {
            actions.push(MirrorAction::Delete {
                namespace: key.0,
                name: key.1,
                uid: m.metadata.uid.clone().unwrap_or_default(),
            });
        }
    }
    for (key, s) in &by_name {
        if !present.contains(key) {
            actions.push(MirrorAction::Create(Box::new(mirror_pod(s, node))));
        }
    }
    actions
}

/// The static pod as the executor runs it: with the status its mirror pod has in the API
/// (what the status writes are compared with), and the mirror's UID as the target of those
/// writes, when the mirror matches it.
pub fn with_mirror_status(static_pod: &Pod, mirrors: &[Pod]) -> Pod {
    let mut pod = static_pod.clone();
    let key = full_name(static_pod);
    let hash = annotation(static_pod, CONFIG_HASH_ANNOTATION);
    let mirror = mirrors.iter().find(|m| {
        full_name(m) == key
            && annotation(m, CONFIG_MIRROR_ANNOTATION) == hash
            && m.metadata.deletion_timestamp.is_none()
    });
    if let Some(m) = mirror {
        pod.status = m.status.clone();
        pod.metadata.resource_version = m.metadata.resource_version.clone();
        pod.metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(
                STATUS_TARGET_ANNOTATION.into(),
                m.metadata.uid.clone().unwrap_or_default(),
            );
    }
    pod
}

/// On a static pod as the executor sees it (never in the API): the UID of the mirror pod its
/// status is written to.
pub const STATUS_TARGET_ANNOTATION: &str = "k3rs.io/mirror-pod-uid";

/// The UID of the API pod that `pod`'s status is written to: the pod itself, or for a static
/// pod its mirror pod (`None` while it has none).
pub fn status_target(pod: &Pod) -> Option<String> {
    if super::manifest::is_static(pod) {
        annotation(pod, STATUS_TARGET_ANNOTATION).map(str::to_string)
    } else {
        pod.metadata.uid.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(v: serde_json::Value) -> Pod {
        serde_json::from_value(v).unwrap()
    }

    fn node() -> NodeRef {
        NodeRef {
            name: "n1".into(),
            uid: "node-uid".into(),
        }
    }

    fn static_pod(name: &str, hash: &str) -> Pod {
        pod(json!({
            "metadata": {"name": name, "namespace": "default", "uid": hash,
                "resourceVersion": "x", "labels": {"app": "a"},
                "annotations": {"kubernetes.io/config.hash": hash,
                    "kubernetes.io/config.source": "file",
                    "kubernetes.io/config.seen": "2026-01-01T00:00:00.000000001Z"}},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i"}]},
            "status": {"phase": "Pending"},
        }))
    }

    fn mirror(name: &str, hash: &str, uid: &str) -> Pod {
        pod(json!({
            "metadata": {"name": name, "namespace": "default", "uid": uid,
                "resourceVersion": "7",
                "annotations": {"kubernetes.io/config.mirror": hash}},
            "status": {"phase": "Running"},
        }))
    }

    #[test]
    fn a_missing_mirror_is_created_owned_by_the_node() {
        let actions = plan(&[static_pod("web-n1", "h1")], &[], &node());
        assert_eq!(actions.len(), 1);
        let MirrorAction::Create(m) = &actions[0] else {
            panic!("{actions:?}")
        };
        assert_eq!(
            serde_json::to_value(m).unwrap(),
            json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {
                    "name": "web-n1", "namespace": "default", "labels": {"app": "a"},
                    "annotations": {"kubernetes.io/config.hash": "h1",
                        "kubernetes.io/config.mirror": "h1",
                        "kubernetes.io/config.seen": "2026-01-01T00:00:00.000000001Z",
                        "kubernetes.io/config.source": "file"},
                    "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "n1",
                        "uid": "node-uid", "controller": true}],
                },
                "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i"}]},
            })
        );
    }

    #[test]
    fn matching_mirrors_stay_and_stale_ones_go_first() {
        let statics = [static_pod("web-n1", "h1"), static_pod("db-n1", "h2")];
        let mut deleting = mirror("db-n1", "h2", "m2");
        deleting.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                "2026-01-01T00:00:00Z".parse().unwrap(),
            ));
        let mirrors = [
            mirror("web-n1", "h1", "m1"),
            deleting,
            mirror("old-n1", "h9", "m9"),
        ];
        let del = |name: &str, uid: &str| MirrorAction::Delete {
            namespace: "default".into(),
            name: name.into(),
            uid: uid.into(),
        };
        assert_eq!(
            plan(&statics, &mirrors, &node()),
            vec![del("db-n1", "m2"), del("old-n1", "m9")]
        );
        // The file changed: the old mirror goes; its replacement comes once it is gone.
        let changed = [static_pod("web-n1", "h3")];
        assert_eq!(
            plan(&changed, &[mirror("web-n1", "h1", "m1")], &node()),
            vec![del("web-n1", "m1")]
        );
        assert!(matches!(
            plan(&changed, &[], &node())[..],
            [MirrorAction::Create(_)]
        ));
    }

    #[test]
    fn status_goes_to_the_matching_mirror_only() {
        let s = static_pod("web-n1", "h1");
        assert_eq!(status_target(&with_mirror_status(&s, &[])), None);
        let stale = with_mirror_status(&s, &[mirror("web-n1", "h0", "m0")]);
        assert_eq!(status_target(&stale), None);
        assert_eq!(stale.status, s.status);
        let ok = with_mirror_status(&s, &[mirror("web-n1", "h1", "m1")]);
        assert_eq!(status_target(&ok).as_deref(), Some("m1"));
        assert_eq!(ok.metadata.resource_version.as_deref(), Some("7"));
        assert_eq!(ok.status.and_then(|s| s.phase).as_deref(), Some("Running"));
        let api_pod = pod(json!({"metadata": {"name": "p", "uid": "u"}}));
        assert_eq!(status_target(&api_pod).as_deref(), Some("u"));
    }
}
