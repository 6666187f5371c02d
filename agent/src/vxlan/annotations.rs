//! The annotations a node publishes its VTEP in, flannel's own (so tools that read flannel's
//! annotations read ours): `flannel.alpha.coreos.com/backend-type: vxlan`,
//! `…/backend-data: {"VNI":1,"VtepMAC":"…"}`, `…/public-ip: <node address>` and
//! `…/kube-subnet-manager: true`.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use k8s_openapi::api::core::v1::Node;
use serde::{Deserialize, Serialize};

use super::plan::Mac;

pub const BACKEND_TYPE: &str = "flannel.alpha.coreos.com/backend-type";
pub const BACKEND_DATA: &str = "flannel.alpha.coreos.com/backend-data";
pub const PUBLIC_IP: &str = "flannel.alpha.coreos.com/public-ip";
pub const KUBE_SUBNET_MANAGER: &str = "flannel.alpha.coreos.com/kube-subnet-manager";

/// The backend type value of the vxlan backend.
pub const VXLAN: &str = "vxlan";

/// `backend-data` of the vxlan backend (flannel's `vxlanLeaseAttrs`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackendData {
    #[serde(rename = "VNI")]
    pub vni: u32,
    #[serde(rename = "VtepMAC")]
    pub vtep_mac: String,
}

/// `backend-data`'s value, if it is the vxlan backend's.
pub fn parse_backend_data(text: &str) -> Option<BackendData> {
    serde_json::from_str(text).ok()
}

/// The annotations of a node whose VTEP has `mac`, VNI `vni`, at `public_ip`.
pub fn wanted(vni: u32, mac: Mac, public_ip: Ipv4Addr) -> BTreeMap<String, String> {
    let data = BackendData {
        vni,
        vtep_mac: mac.to_string(),
    };
    [
        (BACKEND_TYPE, VXLAN.to_string()),
        (
            BACKEND_DATA,
            serde_json::to_string(&data).expect("plain data serializes"),
        ),
        (PUBLIC_IP, public_ip.to_string()),
        (KUBE_SUBNET_MANAGER, "true".to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_annotations_are_flannels_and_patched_only_when_they_differ() {
        let mac: Mac = "0a:1b:2c:3d:4e:5f".parse().unwrap();
        let want = wanted(1, mac, Ipv4Addr::new(10, 1, 0, 2));
        assert_eq!(
            serde_json::to_value(&want).unwrap(),
            json!({
                "flannel.alpha.coreos.com/backend-type": "vxlan",
                "flannel.alpha.coreos.com/backend-data": r#"{"VNI":1,"VtepMAC":"0a:1b:2c:3d:4e:5f"}"#,
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
        assert_eq!(
            parse_backend_data(&want[BACKEND_DATA]).map(|d| d.vtep_mac),
            Some(mac.to_string())
        );
        assert_eq!(parse_backend_data("null"), None);
    }
}
