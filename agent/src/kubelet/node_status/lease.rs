//! The node's heartbeat Lease in `kube-node-lease` (upstream's NodeLease): named after the
//! node, held by it, owned by the Node (so it goes with it), renewed every 10 s with a 40 s
//! duration. Shared by the kubelet and the hollow nodes.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams, PostParams};
use kube::Api;
use serde_json::{json, Value};

/// Namespace of the node heartbeat Leases.
pub const LEASE_NAMESPACE: &str = "kube-node-lease";

/// The node's heartbeat Lease (owned by the Node, so it goes with it).
pub fn lease_object(node: &str, node_uid: &str, duration: Duration, now: Timestamp) -> Value {
    json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {
            "name": node,
            "namespace": LEASE_NAMESPACE,
            "ownerReferences": [{
                "apiVersion": "v1", "kind": "Node", "name": node, "uid": node_uid,
            }],
        },
        "spec": {
            "holderIdentity": node,
            "leaseDurationSeconds": duration.as_secs(),
            "renewTime": micro_time(now),
        },
    })
}

/// A merge patch renewing the Lease at `now`.
pub fn lease_renewal(node: &str, duration: Duration, now: Timestamp) -> Value {
    json!({ "spec": {
        "holderIdentity": node,
        "leaseDurationSeconds": duration.as_secs(),
        "renewTime": micro_time(now),
    }})
}

fn micro_time(t: Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
}

fn is_status(e: &kube::Error, code: u16) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == code)
}

/// Renews the Lease of `node` (UID `node_uid`) at `now`, creating it if it does not exist.
pub async fn renew(
    client: &kube::Client,
    node: &str,
    node_uid: &str,
    duration: Duration,
    now: Timestamp,
) -> kube::Result<()> {
    let api: Api<Lease> = Api::namespaced(client.clone(), LEASE_NAMESPACE);
    let renewal = lease_renewal(node, duration, now);
    match api
        .patch(node, &PatchParams::default(), &Patch::Merge(renewal))
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if is_status(&e, 404) => {
            let lease = lease_object(node, node_uid, duration, now);
            let lease: Lease = serde_json::from_value(lease).expect("a valid Lease");
            match api.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(()),
                Err(e) if is_status(&e, 409) => Ok(()),
                Err(e) => Err(e),
            }
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lease_is_owned_by_the_node_and_renewed_in_microseconds() {
        let now: Timestamp = "2026-01-01T00:00:01.5Z".parse().unwrap();
        let lease = lease_object("hollow-0", "nu", Duration::from_secs(40), now);
        assert_eq!(
            lease["metadata"]["ownerReferences"],
            json!([{"apiVersion": "v1", "kind": "Node", "name": "hollow-0", "uid": "nu"}])
        );
        assert_eq!(
            lease["spec"],
            json!({"holderIdentity": "hollow-0", "leaseDurationSeconds": 40,
                "renewTime": "2026-01-01T00:00:01.500000Z"})
        );
        assert_eq!(
            lease_renewal("hollow-0", Duration::from_secs(40), now),
            json!({"spec": lease["spec"]})
        );
    }
}
