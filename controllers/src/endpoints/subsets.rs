//! The `Endpoints` object a Service with a selector should have, without I/O: upstream's
//! endpoints controller (`syncService`) followed by `RepackSubsets`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    EndpointAddress, EndpointPort, EndpointSubset, ObjectReference, Pod, Service,
};

use super::pods::{find_port, in_endpoints, is_ready, pod_ip};

/// The label upstream puts on the endpoints of a headless service.
pub const HEADLESS_LABEL: &str = "service.kubernetes.io/headless";

/// Whether the service is headless (`clusterIP: None`).
pub fn is_headless(svc: &Service) -> bool {
    svc.spec.as_ref().and_then(|s| s.cluster_ip.as_deref()) == Some("None")
}

/// The pod's address in `svc`'s endpoints: IP, node, the pod as target and its hostname when
/// the pod's subdomain is the service.
pub fn address(svc: &Service, pod: &Pod) -> EndpointAddress {
    let spec = pod.spec.as_ref();
    let hostname = spec
        .filter(|s| s.subdomain.is_some() && s.subdomain == svc.metadata.name)
        .filter(|_| svc.metadata.namespace == pod.metadata.namespace)
        .and_then(|s| s.hostname.clone());
    EndpointAddress {
        ip: pod_ip(pod).unwrap_or_default().to_string(),
        hostname,
        node_name: spec.and_then(|s| s.node_name.clone()),
        target_ref: Some(ObjectReference {
            kind: Some("Pod".into()),
            namespace: pod.metadata.namespace.clone(),
            name: pod.metadata.name.clone(),
            uid: pod.metadata.uid.clone(),
            ..ObjectReference::default()
        }),
    }
}

/// The ports `svc`'s ports resolve to on `pod` (named target ports per pod); ports the pod
/// does not have are left out.
pub fn ports(svc: &Service, pod: &Pod) -> Vec<EndpointPort> {
    let mut out: Vec<EndpointPort> = svc
        .spec
        .as_ref()
        .and_then(|s| s.ports.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|sp| {
            Some(EndpointPort {
                name: sp.name.clone(),
                port: find_port(pod, sp)?,
                protocol: Some(sp.protocol.clone().unwrap_or_else(|| "TCP".into())),
                app_protocol: sp.app_protocol.clone(),
            })
        })
        .collect();
    out.sort_by(|a, b| (&a.name, a.port).cmp(&(&b.name, b.port)));
    out
}

/// The subsets for `svc` from the pods it selects: ready addresses (or all with
/// `publishNotReadyAddresses`) and not-ready ones, grouped by identical port sets, addresses
/// sorted by IP. Terminal pods, pods without an IP and terminating pods (unless
/// `publishNotReadyAddresses`) are left out, and so are pods on which no port resolves
/// (except for a headless service without ports).
pub fn subsets(svc: &Service, selected: &[&Pod]) -> Vec<EndpointSubset> {
    let publish = svc
        .spec
        .as_ref()
        .and_then(|s| s.publish_not_ready_addresses)
        .unwrap_or(false);
    let has_ports = svc
        .spec
        .as_ref()
        .and_then(|s| s.ports.as_ref())
        .is_some_and(|p| !p.is_empty());
    if !has_ports && !is_headless(svc) {
        return Vec::new();
    }
    // Pods with the same resolved ports (name, number, protocol) share a subset.
    type PortsKey = Vec<(Option<String>, i32, Option<String>)>;
    type Group = (Vec<EndpointAddress>, Vec<EndpointAddress>);
    let mut groups: BTreeMap<PortsKey, (Vec<EndpointPort>, Group)> = BTreeMap::new();
    for pod in selected {
        if !in_endpoints(pod, publish) {
            continue;
        }
        let resolved = ports(svc, pod);
        if has_ports && resolved.is_empty() {
            continue;
        }
        let key = resolved
            .iter()
            .map(|p| (p.name.clone(), p.port, p.protocol.clone()))
            .collect();
        let (_, (ready, not_ready)) = groups
            .entry(key)
            .or_insert_with(|| (resolved, Group::default()));
        let addr = address(svc, pod);
        if publish || is_ready(pod) {
            ready.push(addr);
        } else {
            not_ready.push(addr);
        }
    }
    groups
        .into_values()
        .map(|(ports, (mut ready, mut not_ready))| {
            for list in [&mut ready, &mut not_ready] {
                list.sort_by(|a, b| {
                    let uid =
                        |x: &EndpointAddress| x.target_ref.as_ref().and_then(|t| t.uid.clone());
                    (&a.ip, uid(a)).cmp(&(&b.ip, uid(b)))
                });
            }
            EndpointSubset {
                addresses: Some(ready).filter(|v| !v.is_empty()),
                not_ready_addresses: Some(not_ready).filter(|v| !v.is_empty()),
                ports: Some(ports).filter(|v| !v.is_empty()),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::pods::tests::pod;
    use super::*;
    use serde_json::json;

    fn svc(v: serde_json::Value) -> Service {
        serde_json::from_value(v).unwrap()
    }

    fn web(name: &str, ip: &str, ready: bool, port: i32) -> Pod {
        pod(json!({
            "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}")},
            "spec": {"nodeName": "n1", "containers": [{"name": "c",
                "ports": [{"name": "http", "containerPort": port}]}]},
            "status": {"podIP": ip, "conditions": [{"type": "Ready", "status": if ready {"True"} else {"False"}}]},
        }))
    }

    #[test]
    fn ready_and_not_ready_grouped_by_resolved_ports() {
        let s = svc(json!({"metadata": {"name": "web", "namespace": "ns"},
            "spec": {"selector": {"app": "web"}, "ports": [{"name": "http", "port": 80, "targetPort": "http"}]}}));
        let a = web("a", "10.0.0.2", true, 8080);
        let b = web("b", "10.0.0.1", false, 8080);
        let c = web("c", "10.0.0.3", true, 9090);
        let subsets = subsets(&s, &[&a, &b, &c]);
        let expected = json!([
            {"addresses": [{"ip": "10.0.0.2", "nodeName": "n1",
                "targetRef": {"kind": "Pod", "namespace": "ns", "name": "a", "uid": "uid-a"}}],
             "notReadyAddresses": [{"ip": "10.0.0.1", "nodeName": "n1",
                "targetRef": {"kind": "Pod", "namespace": "ns", "name": "b", "uid": "uid-b"}}],
             "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]},
            {"addresses": [{"ip": "10.0.0.3", "nodeName": "n1",
                "targetRef": {"kind": "Pod", "namespace": "ns", "name": "c", "uid": "uid-c"}}],
             "ports": [{"name": "http", "port": 9090, "protocol": "TCP"}]},
        ]);
        assert_eq!(serde_json::to_value(&subsets).unwrap(), expected);
    }

    #[test]
    fn publish_not_ready_makes_every_address_ready() {
        let s = svc(json!({"metadata": {"name": "web", "namespace": "ns"},
            "spec": {"selector": {"app": "web"}, "publishNotReadyAddresses": true,
                     "ports": [{"port": 80, "targetPort": 8080}]}}));
        let b = web("b", "10.0.0.1", false, 8080);
        let subsets = subsets(&s, &[&b]);
        assert_eq!(subsets.len(), 1);
        assert_eq!(subsets[0].addresses.as_ref().map(Vec::len), Some(1));
        assert_eq!(subsets[0].not_ready_addresses, None);
    }

    #[test]
    fn pods_without_the_named_port_are_left_out_and_headless_needs_no_ports() {
        let s = svc(json!({"metadata": {"name": "web", "namespace": "ns"},
            "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": "metrics"}]}}));
        let a = web("a", "10.0.0.2", true, 8080);
        assert_eq!(subsets(&s, &[&a]), vec![]);
        let headless = svc(json!({"metadata": {"name": "web", "namespace": "ns"},
            "spec": {"selector": {"app": "web"}, "clusterIP": "None"}}));
        let mut h = web("h", "10.0.0.4", true, 8080);
        h.spec.as_mut().unwrap().hostname = Some("h0".into());
        h.spec.as_mut().unwrap().subdomain = Some("web".into());
        let got = subsets(&headless, &[&h]);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].ports, None);
        assert_eq!(
            got[0].addresses.as_ref().unwrap()[0].hostname.as_deref(),
            Some("h0")
        );
    }
}
