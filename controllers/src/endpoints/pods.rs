//! What the endpoints and EndpointSlice controllers read from a pod, as upstream's
//! `endpointslice/util` and `podutil` decide it: whether it belongs in a service's endpoints,
//! whether it is ready, and which port a service port resolves to on it.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, ServicePort};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

/// The pod's IP (`status.podIP`, else the first of `status.podIPs`), if it has one.
pub fn pod_ip(pod: &Pod) -> Option<&str> {
    let status = pod.status.as_ref()?;
    status
        .pod_ip
        .as_deref()
        .filter(|ip| !ip.is_empty())
        .or_else(|| status.pod_ips.as_ref()?.first().map(|p| p.ip.as_str()))
}

/// `ShouldPodBeInEndpoints`: not terminal (Succeeded/Failed), has an IP, and is not
/// terminating unless `include_terminating`.
pub fn in_endpoints(pod: &Pod, include_terminating: bool) -> bool {
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    if matches!(phase, Some("Succeeded" | "Failed")) || pod_ip(pod).is_none() {
        return false;
    }
    include_terminating || pod.metadata.deletion_timestamp.is_none()
}

/// `IsPodReady`: the `Ready` condition is `True`.
pub fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True")
}

/// Whether a service `selector` (non-empty) selects a pod with `labels`.
pub fn selects(
    selector: &BTreeMap<String, String>,
    labels: Option<&BTreeMap<String, String>>,
) -> bool {
    !selector.is_empty()
        && selector
            .iter()
            .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
}

/// `FindPort`: the port number a service port targets on this pod — the number itself, or
/// the container port with that name and the service port's protocol; `None` when the pod
/// has no such named port. An absent target port means the service port.
pub fn find_port(pod: &Pod, port: &ServicePort) -> Option<i32> {
    let protocol = port.protocol.as_deref().unwrap_or("TCP");
    match &port.target_port {
        None => Some(port.port),
        Some(IntOrString::Int(n)) => Some(*n),
        Some(IntOrString::String(name)) => pod
            .spec
            .as_ref()?
            .containers
            .iter()
            .flat_map(|c| c.ports.iter().flatten())
            .find(|p| {
                p.name.as_deref() == Some(name.as_str())
                    && p.protocol.as_deref().unwrap_or("TCP") == protocol
            })
            .map(|p| p.container_port),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::json;

    /// A pod from JSON (tests of both controllers build their pods with it).
    pub(crate) fn pod(v: serde_json::Value) -> Pod {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn membership_and_readiness() {
        let running = pod(
            json!({"metadata": {"name": "a"}, "status": {"podIP": "10.0.0.1",
            "conditions": [{"type": "Ready", "status": "True"}]}}),
        );
        assert!(in_endpoints(&running, false) && is_ready(&running));
        let no_ip = pod(json!({"metadata": {"name": "a"}, "status": {}}));
        assert!(!in_endpoints(&no_ip, true));
        let done = pod(
            json!({"metadata": {"name": "a"}, "status": {"podIP": "10.0.0.1", "phase": "Succeeded"}}),
        );
        assert!(!in_endpoints(&done, true));
        let terminating = pod(
            json!({"metadata": {"name": "a", "deletionTimestamp": "2026-01-01T00:00:00Z"},
            "status": {"podIPs": [{"ip": "10.0.0.2"}]}}),
        );
        assert_eq!(pod_ip(&terminating), Some("10.0.0.2"));
        assert!(!in_endpoints(&terminating, false) && in_endpoints(&terminating, true));
        assert!(!is_ready(&terminating));
    }

    #[test]
    fn selector_needs_every_label() {
        let sel: BTreeMap<String, String> = [("app".to_string(), "web".to_string())].into();
        let labels: BTreeMap<String, String> = [
            ("app".to_string(), "web".to_string()),
            ("x".to_string(), "y".to_string()),
        ]
        .into();
        assert!(selects(&sel, Some(&labels)));
        assert!(!selects(&sel, None));
        assert!(!selects(&BTreeMap::new(), Some(&labels)));
    }

    #[test]
    fn named_target_ports_resolve_per_pod() {
        let p = pod(json!({"metadata": {"name": "a"}, "spec": {"containers": [
            {"name": "c", "ports": [{"name": "http", "containerPort": 8080},
                                    {"name": "dns", "containerPort": 53, "protocol": "UDP"}]}]}}));
        let sp = |v| serde_json::from_value::<ServicePort>(v).unwrap();
        assert_eq!(
            find_port(&p, &sp(json!({"port": 80, "targetPort": "http"}))),
            Some(8080)
        );
        assert_eq!(
            find_port(
                &p,
                &sp(json!({"port": 53, "targetPort": "dns", "protocol": "UDP"}))
            ),
            Some(53)
        );
        assert_eq!(
            find_port(&p, &sp(json!({"port": 53, "targetPort": "dns"}))),
            None
        );
        assert_eq!(
            find_port(&p, &sp(json!({"port": 80, "targetPort": 9090}))),
            Some(9090)
        );
        assert_eq!(find_port(&p, &sp(json!({"port": 80}))), Some(80));
    }
}
