//! The annotations a node publishes its VTEP in, flannel's own
//! ([`crate::pod_network::annotations`]): `flannel.alpha.coreos.com/backend-type: vxlan`,
//! `…/backend-data: {"VNI":1,"VtepMAC":"…"}`, `…/public-ip: <node address>` and
//! `…/kube-subnet-manager: true`.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};

use super::plan::Mac;
pub use crate::pod_network::annotations::{
    BACKEND_DATA, BACKEND_TYPE, KUBE_SUBNET_MANAGER, PUBLIC_IP,
};

/// The backend type value of the vxlan backend.
pub const VXLAN: &str = "vxlan";

/// `backend-data` of the vxlan backend (flannel's `vxlanLeaseAttrs`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackendData {
    /// The VXLAN network identifier (flannel's 1).
    #[serde(rename = "VNI")]
    pub vni: u32,
    /// `flannel.1`'s MAC address.
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
    crate::pod_network::annotations::wanted(
        VXLAN,
        serde_json::to_string(&data).expect("plain data serializes"),
        Some(public_ip),
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_annotations_are_flannels() {
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
        assert_eq!(
            parse_backend_data(&want[BACKEND_DATA]).map(|d| d.vtep_mac),
            Some(mac.to_string())
        );
        assert_eq!(parse_backend_data("null"), None);
    }
}
