//! NodeRestriction (upstream's admission plugin of that name), as a pure check: what a kubelet
//! (`system:node:<name>`) may write, given the object and the stored one.
//!
//! # Guarantees
//! - Users that are not nodes are never refused here.
//! - A node may create/update/delete only its own Node, never setting labels in the
//!   `node-restriction.kubernetes.io` domain or unknown `kubernetes.io`/`k8s.io` labels, never
//!   changing its taints on update; create only mirror pods bound to itself that reference no
//!   secrets, configmaps, claims or service accounts; update the status of, evict and delete
//!   only pods bound to itself; create only its own Lease in `kube-node-lease`.
//! - A node's TokenRequest must be bound to a pod (by name and uid) that is bound to the node
//!   and runs as the requested service account ([`admit_token_request`]).
//! - Refusals are upstream's messages; the caller renders them as 403 `Forbidden`.

use std::collections::BTreeSet;

use k3rs_apimachinery::labels::{in_domain, label_domain, restricted_for_kubelet};
use serde_json::Value;

use super::node::refs::pod_refs;
use super::UserInfo;

/// The write being admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// A create (POST).
    Create,
    /// An update or patch (PUT/PATCH).
    Update,
    /// A delete.
    Delete,
}

/// The request, as admission sees it.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// Which kind of write this is.
    pub operation: Operation,
    /// The API group; empty for the core group.
    pub group: &'a str,
    /// Plural resource name.
    pub resource: &'a str,
    /// The subresource (e.g. `status`, `eviction`); empty for the object itself.
    pub subresource: &'a str,
    /// The object's namespace; empty when cluster-scoped.
    pub namespace: &'a str,
    /// The object's name.
    pub name: &'a str,
    /// The object written (create/update).
    pub object: Option<&'a Value>,
    /// The stored object (update/delete).
    pub old: Option<&'a Value>,
}

const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";

/// Why NodeRestriction refuses a node's request (upstream's messages; rendered as 403).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// A `system:node:` user without a node name.
    #[error("could not determine node from user {0:?}")]
    UnknownNode(String),
    /// A TokenRequest not bound to a pod.
    #[error("node requested token not bound to a pod")]
    TokenNotBoundToPod,
    /// A TokenRequest bound to a pod by name only.
    #[error("node requested token with a pod binding without a uid")]
    TokenBindingWithoutUid,
    /// The bound pod does not exist.
    #[error("pod {0:?} not found")]
    PodNotFound(String),
    /// The bound pod's uid (given here) is not the stored pod's.
    #[error("the UID in the bound object reference ({0}) does not match the UID in record. The object might have been deleted and then recreated")]
    UidMismatch(String),
    /// The bound pod runs on another node.
    #[error("node requested token bound to a pod scheduled on a different node")]
    TokenForOtherNodesPod,
    /// The bound pod runs as another service account.
    #[error("node requested token for service account {requested:?} bound to a pod running as {runs_as:?}")]
    TokenForOtherAccount {
        /// The account the token is for.
        requested: String,
        /// The pod's account.
        runs_as: String,
    },
    /// A pod created without the mirror-pod annotation.
    #[error("pod does not have \"{MIRROR_ANNOTATION}\" annotation, node {0:?} can only create mirror pods")]
    NotMirrorPod(String),
    /// A pod write for a pod bound to another node; `verb` is what the node may do
    /// (`create pods`, `delete pods`, …).
    #[error("node {node:?} can only {verb} with spec.nodeName set to itself")]
    PodOfOtherNode {
        /// The requesting node.
        node: String,
        /// What it attempted.
        verb: &'static str,
    },
    /// A mirror pod that references secrets, configmaps, claims or a service account.
    #[error("node {node:?} can not create pods that reference {what}")]
    PodReferences {
        /// The requesting node.
        node: String,
        /// What the pod references.
        what: &'static str,
    },
    /// A pod operation NodeRestriction does not expect.
    #[error("unexpected operation {0:?}")]
    UnexpectedOperation(Operation),
    /// A write to another Node.
    #[error("node {node:?} is not allowed to modify node {other:?}")]
    OtherNode {
        /// The requesting node.
        node: String,
        /// The Node written.
        other: String,
    },
    /// Restricted labels on a created Node.
    #[error("node {node:?} is not allowed to set the following labels: {}", .labels.join(", "))]
    SetLabels {
        /// The requesting node.
        node: String,
        /// The labels it may not set.
        labels: Vec<String>,
    },
    /// Changed taints on an updated Node.
    #[error("node {0:?} is not allowed to modify taints")]
    ModifyTaints(String),
    /// Changed restricted labels on an updated Node.
    #[error("node {node:?} is not allowed to modify labels: {}", .labels.join(", "))]
    ModifyLabels {
        /// The requesting node.
        node: String,
        /// The labels it may not change.
        labels: Vec<String>,
    },
    /// A Lease outside `kube-node-lease`.
    #[error("can only access leases in the \"kube-node-lease\" system namespace")]
    LeaseNamespace,
    /// A Lease created under another name.
    #[error("can only access node lease with the same name as the requesting node")]
    OtherNodesLease,
}

fn forbidden_label(label: &str) -> bool {
    in_domain(label_domain(label), "node-restriction.kubernetes.io")
        || restricted_for_kubelet(label)
}

fn labels(obj: Option<&Value>) -> Vec<(String, Value)> {
    obj.and_then(|o| o["metadata"]["labels"].as_object())
        .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
        .unwrap_or_default()
}

/// Labels added, changed or removed from `old` to `new` that a node may not touch.
fn forbidden_changes(new: Option<&Value>, old: Option<&Value>) -> BTreeSet<String> {
    let (n, o) = (labels(new), labels(old));
    let changed = n
        .iter()
        .filter(|kv| !o.contains(kv))
        .chain(o.iter().filter(|kv| !n.contains(kv)))
        .map(|(k, _)| k.clone());
    changed.filter(|k| forbidden_label(k)).collect()
}

fn node_of(pod: Option<&Value>) -> &str {
    pod.and_then(|p| p["spec"]["nodeName"].as_str())
        .unwrap_or_default()
}

/// The node `user` is, when it is one (`system:node:<name>` in `system:nodes`); `Err` for a
/// node user whose name is missing.
pub fn requesting_node(user: &UserInfo) -> Option<Result<&str, Refusal>> {
    if !user.in_group(super::user::NODES_GROUP)
        || !user.username.starts_with(super::user::NODE_USER_PREFIX)
    {
        return None;
    }
    Some(
        user.node_name()
            .ok_or_else(|| Refusal::UnknownNode(user.username.clone())),
    )
}

/// The bound object a TokenRequest names: `(kind, name, uid)` (uid empty when not given).
pub type BoundRef<'a> = (&'a str, &'a str, &'a str);

/// `Err(message)` when `node` may not mint a token for `service_account` bound to `bound`
/// (upstream's `admitServiceAccount`, and the pod's account checked here too so a node never
/// gets a token for an account its pod does not run as). `pod` is the stored pod `bound`
/// names, when it exists (a missing pod is the caller's 404).
pub fn admit_token_request(
    node: &str,
    service_account: &str,
    bound: Option<BoundRef<'_>>,
    pod: Option<&Value>,
) -> Result<(), Refusal> {
    let Some((kind, name, uid)) = bound.filter(|(k, n, _)| *k == "Pod" && !n.is_empty()) else {
        return Err(Refusal::TokenNotBoundToPod);
    };
    debug_assert_eq!(kind, "Pod");
    if uid.is_empty() {
        return Err(Refusal::TokenBindingWithoutUid);
    }
    let Some(pod) = pod else {
        return Err(Refusal::PodNotFound(name.to_string()));
    };
    let stored_uid = pod["metadata"]["uid"].as_str().unwrap_or_default();
    if uid != stored_uid {
        return Err(Refusal::UidMismatch(uid.to_string()));
    }
    if node_of(Some(pod)) != node {
        return Err(Refusal::TokenForOtherNodesPod);
    }
    let runs_as = pod["spec"]["serviceAccountName"]
        .as_str()
        .unwrap_or_default();
    if runs_as != service_account {
        return Err(Refusal::TokenForOtherAccount {
            requested: service_account.to_string(),
            runs_as: runs_as.to_string(),
        });
    }
    Ok(())
}

/// `Err(message)` when `user`, a node, may not make this write.
pub fn admit(user: &UserInfo, r: &Request<'_>) -> Result<(), Refusal> {
    let node = match requesting_node(user) {
        None => return Ok(()),
        Some(node) => node?,
    };
    match (r.group, r.resource) {
        ("", "pods") => admit_pod(node, r),
        ("", "nodes") => admit_node(node, r),
        ("coordination.k8s.io", "leases") => admit_lease(node, r),
        _ => Ok(()),
    }
}

fn admit_pod(node: &str, r: &Request<'_>) -> Result<(), Refusal> {
    match (r.operation, r.subresource) {
        (Operation::Create, "") => {
            let pod = r.object.cloned().unwrap_or(Value::Null);
            if pod["metadata"]["annotations"][MIRROR_ANNOTATION].is_null() {
                return Err(Refusal::NotMirrorPod(node.to_string()));
            }
            if node_of(Some(&pod)) != node {
                return Err(Refusal::PodOfOtherNode {
                    node: node.to_string(),
                    verb: "create pods",
                });
            }
            let typed: Option<k8s_openapi::api::core::v1::Pod> =
                serde_json::from_value(pod.clone()).ok();
            if let Some(refs) = typed.as_ref().and_then(pod_refs) {
                if !refs.service_account.is_empty() {
                    return Err(Refusal::PodReferences {
                        node: node.to_string(),
                        what: "a service account",
                    });
                }
                for (what, set) in [
                    ("secrets", &refs.secrets),
                    ("configmaps", &refs.configmaps),
                    ("persistentvolumeclaims", &refs.pvcs),
                ] {
                    if !set.is_empty() {
                        return Err(Refusal::PodReferences {
                            node: node.to_string(),
                            what,
                        });
                    }
                }
            }
            Ok(())
        }
        (Operation::Update, "status") => {
            if node_of(r.old) != node {
                return Err(Refusal::PodOfOtherNode {
                    node: node.to_string(),
                    verb: "update pod status for pods",
                });
            }
            Ok(())
        }
        (Operation::Delete, "") => {
            if node_of(r.old) != node {
                return Err(Refusal::PodOfOtherNode {
                    node: node.to_string(),
                    verb: "delete pods",
                });
            }
            Ok(())
        }
        // The pod deletion an eviction makes is checked like the eviction itself.
        (Operation::Create | Operation::Delete, "eviction") => {
            if node_of(r.old) != node {
                return Err(Refusal::PodOfOtherNode {
                    node: node.to_string(),
                    verb: "evict pods",
                });
            }
            Ok(())
        }
        _ => Err(Refusal::UnexpectedOperation(r.operation)),
    }
}

fn admit_node(node: &str, r: &Request<'_>) -> Result<(), Refusal> {
    if r.name != node {
        return Err(Refusal::OtherNode {
            node: node.to_string(),
            other: r.name.to_string(),
        });
    }
    match r.operation {
        Operation::Create => {
            let bad = forbidden_changes(r.object, None);
            if !bad.is_empty() {
                return Err(Refusal::SetLabels {
                    node: node.to_string(),
                    labels: bad.into_iter().collect(),
                });
            }
        }
        Operation::Update if r.subresource.is_empty() => {
            let taints = |o: Option<&Value>| o.map(|o| o["spec"]["taints"].clone());
            let none = |t: Option<Value>| {
                t.filter(|t| !t.is_null() && t.as_array().is_none_or(|a| !a.is_empty()))
            };
            if none(taints(r.object)) != none(taints(r.old)) {
                return Err(Refusal::ModifyTaints(node.to_string()));
            }
            let bad = forbidden_changes(r.object, r.old);
            if !bad.is_empty() {
                return Err(Refusal::ModifyLabels {
                    node: node.to_string(),
                    labels: bad.into_iter().collect(),
                });
            }
        }
        _ => {}
    }
    Ok(())
}

fn admit_lease(node: &str, r: &Request<'_>) -> Result<(), Refusal> {
    if r.namespace != "kube-node-lease" {
        return Err(Refusal::LeaseNamespace);
    }
    if r.operation == Operation::Create && r.name != node {
        return Err(Refusal::OtherNodesLease);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn n1() -> UserInfo {
        UserInfo::authenticated("system:node:n1", vec!["system:nodes".into()])
    }

    fn req<'a>(
        op: Operation,
        resource: &'a str,
        sub: &'a str,
        name: &'a str,
        object: Option<&'a Value>,
        old: Option<&'a Value>,
    ) -> Request<'a> {
        Request {
            operation: op,
            group: "",
            resource,
            subresource: sub,
            namespace: "default",
            name,
            object,
            old,
        }
    }

    #[test]
    fn non_nodes_pass() {
        let alice = UserInfo::authenticated("alice", vec![]);
        let r = req(Operation::Delete, "nodes", "", "n2", None, None);
        assert_eq!(admit(&alice, &r), Ok(()));
    }

    #[test]
    fn own_node_only_without_restricted_labels_or_taints() {
        let old = json!({"metadata": {"name": "n1", "labels": {"kubernetes.io/hostname": "n1"}},
            "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]}});
        let other = req(Operation::Update, "nodes", "", "n2", Some(&old), Some(&old));
        assert_eq!(
            admit(&n1(), &other).map_err(|e| e.to_string()),
            Err("node \"n1\" is not allowed to modify node \"n2\"".into())
        );
        let same = req(Operation::Update, "nodes", "", "n1", Some(&old), Some(&old));
        assert_eq!(admit(&n1(), &same), Ok(()));
        let mut relabel = old.clone();
        relabel["metadata"]["labels"]["node-restriction.kubernetes.io/secure"] = json!("x");
        relabel["metadata"]["labels"]["example.com/mine"] = json!("ok");
        relabel["metadata"]["labels"]["node.kubernetes.io/exclude"] = json!("ok");
        let r = req(
            Operation::Update,
            "nodes",
            "",
            "n1",
            Some(&relabel),
            Some(&old),
        );
        assert_eq!(
            admit(&n1(), &r).map_err(|e| e.to_string()),
            Err("node \"n1\" is not allowed to modify labels: node-restriction.kubernetes.io/secure".into())
        );
        let mut untaint = old.clone();
        untaint["spec"]["taints"] = json!([]);
        let r = req(
            Operation::Update,
            "nodes",
            "",
            "n1",
            Some(&untaint),
            Some(&old),
        );
        assert_eq!(
            admit(&n1(), &r).map_err(|e| e.to_string()),
            Err("node \"n1\" is not allowed to modify taints".into())
        );
        let status = req(
            Operation::Update,
            "nodes",
            "status",
            "n1",
            Some(&untaint),
            Some(&old),
        );
        assert_eq!(admit(&n1(), &status), Ok(()));
        let created =
            json!({"metadata": {"name": "n1", "labels": {"kubernetes.io/role": "master"}}});
        let r = req(Operation::Create, "nodes", "", "n1", Some(&created), None);
        assert_eq!(
            admit(&n1(), &r).map_err(|e| e.to_string()),
            Err(
                "node \"n1\" is not allowed to set the following labels: kubernetes.io/role".into()
            )
        );
        let r = req(Operation::Delete, "nodes", "", "n2", None, Some(&old));
        assert!(admit(&n1(), &r).is_err());
    }

    #[test]
    fn pods_bound_to_the_node_only() {
        let mine = json!({"metadata": {"name": "p"}, "spec": {"nodeName": "n1", "containers": [{"name": "c"}]}});
        let theirs = json!({"metadata": {"name": "p"}, "spec": {"nodeName": "n2", "containers": [{"name": "c"}]}});
        let r = req(
            Operation::Update,
            "pods",
            "status",
            "p",
            Some(&theirs),
            Some(&theirs),
        );
        assert_eq!(
            admit(&n1(), &r).map_err(|e| e.to_string()),
            Err(
                "node \"n1\" can only update pod status for pods with spec.nodeName set to itself"
                    .into()
            )
        );
        let r = req(
            Operation::Update,
            "pods",
            "status",
            "p",
            Some(&mine),
            Some(&mine),
        );
        assert_eq!(admit(&n1(), &r), Ok(()));
        let r = req(Operation::Delete, "pods", "", "p", None, Some(&theirs));
        assert_eq!(
            admit(&n1(), &r).map_err(|e| e.to_string()),
            Err("node \"n1\" can only delete pods with spec.nodeName set to itself".into())
        );
        let r = req(Operation::Create, "pods", "", "p", Some(&mine), None);
        assert_eq!(
            admit(&n1(), &r).map_err(|e| e.to_string()),
            Err("pod does not have \"kubernetes.io/config.mirror\" annotation, node \"n1\" can only create mirror pods".into())
        );
        let mut mirror = mine.clone();
        mirror["metadata"]["annotations"] = json!({"kubernetes.io/config.mirror": "hash"});
        let r = req(Operation::Create, "pods", "", "p", Some(&mirror), None);
        assert_eq!(admit(&n1(), &r), Ok(()));
        let mut with_secret = mirror.clone();
        with_secret["spec"]["volumes"] = json!([{"name": "s", "secret": {"secretName": "x"}}]);
        let r = req(Operation::Create, "pods", "", "p", Some(&with_secret), None);
        assert_eq!(
            admit(&n1(), &r).map_err(|e| e.to_string()),
            Err("node \"n1\" can not create pods that reference secrets".into())
        );
        let mut elsewhere = mirror.clone();
        elsewhere["spec"]["nodeName"] = json!("n2");
        let r = req(Operation::Create, "pods", "", "p", Some(&elsewhere), None);
        assert!(admit(&n1(), &r).is_err());
    }

    #[test]
    fn tokens_only_for_own_pods_by_uid_and_account() {
        let pod = |node: &str| {
            json!({"metadata": {"name": "p", "uid": "u1"},
                "spec": {"nodeName": node, "serviceAccountName": "sa"}})
        };
        let mine = pod("n1");
        let admit = |sa: &str, bound: Option<BoundRef<'_>>, pod: Option<&Value>| {
            admit_token_request("n1", sa, bound, pod)
        };
        assert_eq!(admit("sa", Some(("Pod", "p", "u1")), Some(&mine)), Ok(()));
        assert_eq!(
            admit("sa", None, None).map_err(|e| e.to_string()),
            Err("node requested token not bound to a pod".into())
        );
        assert_eq!(
            admit("sa", Some(("Secret", "s", "u")), None).map_err(|e| e.to_string()),
            Err("node requested token not bound to a pod".into())
        );
        assert_eq!(
            admit("sa", Some(("Pod", "p", "")), Some(&mine)).map_err(|e| e.to_string()),
            Err("node requested token with a pod binding without a uid".into())
        );
        assert!(admit("sa", Some(("Pod", "p", "u2")), Some(&mine))
            .unwrap_err()
            .to_string()
            .starts_with("the UID in the bound object reference (u2) does not match"));
        assert_eq!(
            admit("sa", Some(("Pod", "p", "u1")), Some(&pod("n2"))).map_err(|e| e.to_string()),
            Err("node requested token bound to a pod scheduled on a different node".into())
        );
        assert_eq!(
            admit("sa", Some(("Pod", "p", "u1")), Some(&pod(""))).map_err(|e| e.to_string()),
            Err("node requested token bound to a pod scheduled on a different node".into())
        );
        assert_eq!(
            admit("other", Some(("Pod", "p", "u1")), Some(&mine)).map_err(|e| e.to_string()),
            Err("node requested token for service account \"other\" bound to a pod running as \"sa\"".into())
        );
        assert_eq!(
            requesting_node(&UserInfo::authenticated("alice", vec![])),
            None
        );
        assert_eq!(requesting_node(&n1()), Some(Ok("n1")));
    }

    #[test]
    fn own_lease_only() {
        let mut r = req(Operation::Create, "leases", "", "n2", None, None);
        r.group = "coordination.k8s.io";
        r.namespace = "kube-node-lease";
        assert_eq!(
            admit(&n1(), &r).map_err(|e| e.to_string()),
            Err("can only access node lease with the same name as the requesting node".into())
        );
        r.name = "n1";
        assert_eq!(admit(&n1(), &r), Ok(()));
    }
}
