//! The EndpointSlices a Service with a selector should have, and the writes that get there
//! from the slices it has — without I/O. As upstream's endpointslice reconciler: one group of
//! slices per address type and resolved port set, at most [`MAX_ENDPOINTS`] endpoints each,
//! conditions ready/serving/terminating, a placeholder slice when nothing is selected.

use std::collections::BTreeMap;
use std::net::IpAddr;

use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort, EndpointSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

use crate::endpoints::pods::{in_endpoints, is_ready, pod_ip};
use crate::endpoints::subsets::{self, HEADLESS_LABEL};

/// `--max-endpoints-per-slice` (upstream's default).
pub const MAX_ENDPOINTS: usize = 100;
/// The label naming a slice's Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";
/// The label naming a slice's controller.
pub const MANAGED_BY_LABEL: &str = "endpointslice.kubernetes.io/managed-by";
/// This controller's value of [`MANAGED_BY_LABEL`].
pub const MANAGED_BY: &str = "endpointslice-controller.k8s.io";

/// One write.
#[derive(Debug, Clone, PartialEq)]
pub enum SliceOp {
    /// Create (named by `generateName: <service>-`).
    Create(EndpointSlice),
    /// Replace an existing slice (its name and resourceVersion kept).
    Update(EndpointSlice),
    Delete(String),
}

/// `service.spec.ipFamilies` as address types (IPv4 when unset).
fn address_types(svc: &Service) -> Vec<String> {
    let families = svc
        .spec
        .as_ref()
        .and_then(|s| s.ip_families.clone())
        .filter(|f| !f.is_empty())
        .unwrap_or_else(|| vec!["IPv4".into()]);
    families
}

fn family(ip: &str) -> Option<&'static str> {
    match ip.parse::<IpAddr>().ok()? {
        IpAddr::V4(_) => Some("IPv4"),
        IpAddr::V6(_) => Some("IPv6"),
    }
}

/// The pod as an endpoint of `svc` (`podToEndpoint`).
pub fn endpoint(svc: &Service, pod: &Pod) -> Endpoint {
    let publish = svc
        .spec
        .as_ref()
        .and_then(|s| s.publish_not_ready_addresses)
        .unwrap_or(false);
    let terminating = pod.metadata.deletion_timestamp.is_some();
    let serving = publish || is_ready(pod);
    let ready = serving && (publish || !terminating);
    let addr = subsets::address(svc, pod);
    Endpoint {
        addresses: vec![addr.ip],
        conditions: Some(EndpointConditions {
            ready: Some(ready),
            serving: Some(serving),
            terminating: Some(terminating),
        }),
        hostname: addr.hostname,
        node_name: addr.node_name,
        target_ref: addr.target_ref,
        ..Endpoint::default()
    }
}

/// The labels of `svc`'s slices: the Service's, the service name, the manager, and the
/// headless label when headless.
pub fn labels(svc: &Service) -> BTreeMap<String, String> {
    let mut labels = svc.metadata.labels.clone().unwrap_or_default();
    labels.remove(HEADLESS_LABEL);
    if subsets::is_headless(svc) {
        labels.insert(HEADLESS_LABEL.into(), String::new());
    }
    labels.insert(
        SERVICE_NAME_LABEL.into(),
        svc.metadata.name.clone().unwrap_or_default(),
    );
    labels.insert(MANAGED_BY_LABEL.into(), MANAGED_BY.into());
    labels
}

/// The desired slices' contents: (address type, ports, endpoints) with endpoints sorted by
/// address and chunked by [`MAX_ENDPOINTS`]; one empty IPv4/first-family slice when no pod
/// qualifies.
pub fn desired(
    svc: &Service,
    selected: &[&Pod],
) -> Vec<(String, Vec<EndpointPort>, Vec<Endpoint>)> {
    let types = address_types(svc);
    let mut groups: BTreeMap<(String, String), (Vec<EndpointPort>, Vec<Endpoint>)> =
        BTreeMap::new();
    for pod in selected {
        if !in_endpoints(pod, true) {
            continue;
        }
        let Some(t) = pod_ip(pod).and_then(family) else {
            continue;
        };
        if !types.iter().any(|x| x == t) {
            continue;
        }
        let ports: Vec<EndpointPort> = subsets::ports(svc, pod)
            .into_iter()
            .map(|p| EndpointPort {
                name: p.name,
                port: Some(p.port),
                protocol: p.protocol,
                app_protocol: p.app_protocol,
            })
            .collect();
        let key = serde_json::to_string(&ports).unwrap_or_default();
        groups
            .entry((t.to_string(), key))
            .or_insert_with(|| (ports, Vec::new()))
            .1
            .push(endpoint(svc, pod));
    }
    let mut out = Vec::new();
    for ((t, _), (ports, mut endpoints)) in groups {
        endpoints.sort_by(|a, b| a.addresses.cmp(&b.addresses));
        for chunk in endpoints.chunks(MAX_ENDPOINTS) {
            out.push((t.clone(), ports.clone(), chunk.to_vec()));
        }
    }
    if out.is_empty() {
        out.push((types[0].clone(), Vec::new(), Vec::new()));
    }
    out
}

fn same_content(a: &EndpointSlice, t: &str, ports: &[EndpointPort], eps: &[Endpoint]) -> bool {
    let ports_json = |v: &[EndpointPort]| serde_json::to_value(v).ok();
    let eps_json = |v: &[Endpoint]| serde_json::to_value(v).ok();
    a.address_type == t
        && ports_json(a.ports.as_deref().unwrap_or_default()) == ports_json(ports)
        && eps_json(&a.endpoints) == eps_json(eps)
}

/// The writes that turn `existing` (this service's slices, any order) into the desired
/// slices: existing slices with the desired content and labels are kept; other desired
/// slices rewrite a leftover slice of their address type or are created; remaining leftovers
/// are deleted.
pub fn plan(svc: &Service, selected: &[&Pod], existing: &[EndpointSlice]) -> Vec<SliceOp> {
    let labels = labels(svc);
    let owner = OwnerReference {
        api_version: "v1".into(),
        kind: "Service".into(),
        name: svc.metadata.name.clone().unwrap_or_default(),
        uid: svc.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    };
    let mut existing: Vec<&EndpointSlice> = existing.iter().collect();
    existing.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let mut used = vec![false; existing.len()];
    let mut ops = Vec::new();
    let wanted = desired(svc, selected);
    // Unchanged slices first, so that they are kept rather than rewritten.
    let mut pending = Vec::new();
    for (t, ports, eps) in wanted {
        let same = existing.iter().enumerate().position(|(i, s)| {
            !used[i]
                && same_content(s, &t, &ports, &eps)
                && s.metadata.labels.as_ref() == Some(&labels)
        });
        match same {
            Some(i) => used[i] = true,
            None => pending.push((t, ports, eps)),
        }
    }
    for (t, ports, eps) in pending {
        // The address type of a slice is immutable; anything else may change.
        let reuse = existing
            .iter()
            .enumerate()
            .position(|(i, s)| !used[i] && s.address_type == t);
        let slice = |base: EndpointSlice| EndpointSlice {
            address_type: t.clone(),
            endpoints: eps.clone(),
            ports: Some(ports.clone()).filter(|p| !p.is_empty()),
            ..base
        };
        match reuse {
            Some(i) => {
                used[i] = true;
                let mut s = slice(existing[i].clone());
                s.metadata.labels = Some(labels.clone());
                ops.push(SliceOp::Update(s));
            }
            None => {
                let mut s = slice(EndpointSlice::default());
                s.metadata.generate_name = Some(format!("{}-", owner.name));
                s.metadata.namespace = svc.metadata.namespace.clone();
                s.metadata.labels = Some(labels.clone());
                s.metadata.owner_references = Some(vec![owner.clone()]);
                ops.push(SliceOp::Create(s));
            }
        }
    }
    for (i, s) in existing.iter().enumerate() {
        if !used[i] {
            ops.push(SliceOp::Delete(s.metadata.name.clone().unwrap_or_default()));
        }
    }
    ops
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::endpoints::pods::tests::pod;
    use serde_json::json;

    fn svc() -> Service {
        serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "ns", "uid": "svc-uid", "labels": {"tier": "front"}},
            "spec": {"selector": {"app": "web"}, "ports": [{"name": "http", "port": 80, "targetPort": 8080}]},
        }))
        .unwrap()
    }

    fn web(i: usize, ready: bool, terminating: bool) -> Pod {
        let mut p = pod(json!({
            "metadata": {"name": format!("p{i:03}"), "namespace": "ns", "uid": format!("u{i}")},
            "spec": {"nodeName": "n1", "containers": [{"name": "c"}]},
            "status": {"podIP": format!("10.0.{}.{}", i / 200, i % 200 + 1),
                       "conditions": [{"type": "Ready", "status": if ready {"True"} else {"False"}}]},
        }));
        if terminating {
            p.metadata.deletion_timestamp =
                serde_json::from_value(json!("2026-01-01T00:00:00Z")).unwrap();
        }
        p
    }

    #[test]
    fn conditions_as_upstream() {
        let c = |p: &Pod| serde_json::to_value(endpoint(&svc(), p).conditions).unwrap();
        assert_eq!(
            c(&web(1, true, false)),
            json!({"ready": true, "serving": true, "terminating": false})
        );
        assert_eq!(
            c(&web(1, false, false)),
            json!({"ready": false, "serving": false, "terminating": false})
        );
        assert_eq!(
            c(&web(1, true, true)),
            json!({"ready": false, "serving": true, "terminating": true})
        );
        let e = endpoint(&svc(), &web(1, true, false));
        assert_eq!(e.addresses, vec!["10.0.0.2".to_string()]);
        assert_eq!(e.node_name.as_deref(), Some("n1"));
        assert_eq!(e.target_ref.unwrap().name.as_deref(), Some("p001"));
    }

    #[test]
    fn new_service_gets_slices_of_at_most_100() {
        let pods: Vec<Pod> = (0..150).map(|i| web(i, true, false)).collect();
        let refs: Vec<&Pod> = pods.iter().collect();
        let ops = plan(&svc(), &refs, &[]);
        let sizes: Vec<usize> = ops
            .iter()
            .map(|op| match op {
                SliceOp::Create(s) => s.endpoints.len(),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(sizes, vec![100, 50]);
        let SliceOp::Create(s) = &ops[0] else {
            unreachable!()
        };
        assert_eq!(s.metadata.generate_name.as_deref(), Some("web-"));
        assert_eq!(
            serde_json::to_value(&s.metadata.labels).unwrap(),
            json!({"tier": "front", "kubernetes.io/service-name": "web",
                   "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io"})
        );
        assert_eq!(
            serde_json::to_value(&s.ports).unwrap(),
            json!([{"name": "http", "port": 8080, "protocol": "TCP"}])
        );
        let owner = &s.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
            ("Service", "svc-uid", Some(true))
        );
    }

    #[test]
    fn unchanged_slices_stay_changed_ones_update_extra_ones_go() {
        let a = web(1, true, false);
        let b = web(2, false, false);
        let named = |ops: Vec<SliceOp>, name: &str| -> Vec<EndpointSlice> {
            ops.into_iter()
                .map(|op| match op {
                    SliceOp::Create(mut s) => {
                        s.metadata.name = Some(name.into());
                        s
                    }
                    other => panic!("{other:?}"),
                })
                .collect()
        };
        let existing = named(plan(&svc(), &[&a, &b], &[]), "web-x");
        assert_eq!(plan(&svc(), &[&a, &b], &existing), vec![]);
        // b becomes ready: the slice is updated in place.
        let b_ready = web(2, true, false);
        let ops = plan(&svc(), &[&a, &b_ready], &existing);
        assert!(
            matches!(&ops[..], [SliceOp::Update(s)] if s.metadata.name.as_deref() == Some("web-x")
            && s.endpoints.len() == 2)
        );
        // No pods: the slice is kept as an empty placeholder.
        let ops = plan(&svc(), &[], &existing);
        assert!(matches!(&ops[..], [SliceOp::Update(s)] if s.endpoints.is_empty()));
        // A stray second slice is deleted.
        let mut two = existing.clone();
        let mut stray = existing[0].clone();
        stray.metadata.name = Some("web-y".into());
        stray.address_type = "IPv6".into();
        two.push(stray);
        assert_eq!(
            plan(&svc(), &[&a, &b], &two),
            vec![SliceOp::Delete("web-y".into())]
        );
    }
}
