//! flannel's Node annotations, which a node running a flannel backend publishes (so tools
//! that read flannel's annotations read ours): `flannel.alpha.coreos.com/backend-type`
//! (`vxlan` or `host-gw`), `…/backend-data` (the backend's JSON, `null` for host-gw),
//! `…/public-ip: <node address>` and `…/kube-subnet-manager: true`. A node that changes
//! backend overwrites them, so its peers never mistake it for one of theirs.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams};
use kube::Client;

/// The node's backend (`vxlan`, `host-gw`).
pub const BACKEND_TYPE: &str = "flannel.alpha.coreos.com/backend-type";
/// The backend's data (JSON; VXLAN's VNI and VTEP MAC, `null` for host-gw).
pub const BACKEND_DATA: &str = "flannel.alpha.coreos.com/backend-data";
/// The node address other nodes send its pods' traffic to.
pub const PUBLIC_IP: &str = "flannel.alpha.coreos.com/public-ip";
/// `"true"`: the node's subnet comes from its `spec.podCIDR` (flannel's kube subnet manager).
pub const KUBE_SUBNET_MANAGER: &str = "flannel.alpha.coreos.com/kube-subnet-manager";

/// The annotations of a node running `backend_type` with `backend_data` (JSON text), at
/// `public_ip` (left out when the node has no IPv4 address).
pub fn wanted(
    backend_type: &str,
    backend_data: String,
    public_ip: Option<Ipv4Addr>,
) -> BTreeMap<String, String> {
    [
        (BACKEND_TYPE, Some(backend_type.to_string())),
        (BACKEND_DATA, Some(backend_data)),
        (PUBLIC_IP, public_ip.map(|ip| ip.to_string())),
        (KUBE_SUBNET_MANAGER, Some("true".to_string())),
    ]
    .into_iter()
    .filter_map(|(k, v)| Some((k.to_string(), v?)))
    .collect()
}

/// The merge patch that sets `wanted` on `node`, or `None` if it has them all.
pub fn patch(node: &Node, wanted: &BTreeMap<String, String>) -> Option<serde_json::Value> {
    let have = node.metadata.annotations.as_ref();
    let missing = wanted
        .iter()
        .any(|(k, v)| have.and_then(|h| h.get(k)) != Some(v));
    missing.then(|| serde_json::json!({ "metadata": { "annotations": wanted } }))
}

/// Sets `wanted` on this node (`me`, named `name`, as last listed) unless it has them; false
/// if that failed (logged, with `backend` naming who asked).
pub async fn publish(
    client: &Client,
    me: Option<&Node>,
    name: &str,
    wanted: &BTreeMap<String, String>,
    backend: &str,
) -> bool {
    let Some(patch) = me.and_then(|n| patch(n, wanted)) else {
        return true;
    };
    let api: Api<Node> = Api::all(client.clone());
    match api
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => {
            tracing::info!(
                ?wanted,
                "{backend}: flannel annotations published on the node"
            );
            true
        }
        Err(e) => {
            tracing::warn!(error = %e, "{backend}: publishing the flannel annotations failed");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn host_gw_annotations_and_patches_only_when_they_differ() {
        let want = wanted("host-gw", "null".into(), Some(Ipv4Addr::new(10, 1, 0, 2)));
        assert_eq!(
            serde_json::to_value(&want).unwrap(),
            json!({
                "flannel.alpha.coreos.com/backend-type": "host-gw",
                "flannel.alpha.coreos.com/backend-data": "null",
                "flannel.alpha.coreos.com/public-ip": "10.1.0.2",
                "flannel.alpha.coreos.com/kube-subnet-manager": "true",
            })
        );
        let mut node = Node::default();
        assert_eq!(
            patch(&node, &want),
            Some(json!({"metadata": {"annotations": want}}))
        );
        node.metadata.annotations = Some(want.clone());
        assert_eq!(patch(&node, &want), None);
        // A node that ran vxlan before is patched over.
        let mut vxlan = want.clone();
        vxlan.insert(BACKEND_TYPE.into(), "vxlan".into());
        node.metadata.annotations = Some(vxlan);
        assert!(patch(&node, &want).is_some());
        // No IPv4 address: no public-ip.
        assert!(!wanted("host-gw", "null".into(), None).contains_key(PUBLIC_IP));
    }
}
