//! The service environment variables a container gets (upstream's `getServiceEnvVarMap` and
//! `envvars.FromServices`): for the `kubernetes` Service in `default` always, and for every
//! Service of the pod's namespace when `enableServiceLinks` is not false — `<NAME>_SERVICE_HOST`,
//! `<NAME>_SERVICE_PORT` (first port), `<NAME>_SERVICE_PORT_<PORTNAME>` (named ports) and the
//! Docker link variables (`<NAME>_PORT`, `<NAME>_PORT_<port>_<PROTO>[_PROTO|_PORT|_ADDR]`).
//! Services without a cluster IP (headless) give none.

use std::collections::BTreeMap;
use std::net::IpAddr;

use k8s_openapi::api::core::v1::{Pod, Service};

/// `my-svc` → `MY_SVC`.
fn env_name(s: &str) -> String {
    s.replace('-', "_").to_uppercase()
}

fn cluster_ip(s: &Service) -> Option<&str> {
    s.spec
        .as_ref()
        .and_then(|s| s.cluster_ip.as_deref())
        .filter(|ip| !ip.is_empty() && *ip != "None")
}

/// `ip:port`, bracketing IPv6 (Go's `net.JoinHostPort`).
fn host_port(ip: &str, port: i32) -> String {
    match ip.parse::<IpAddr>() {
        Ok(IpAddr::V6(_)) => format!("[{ip}]:{port}"),
        _ => format!("{ip}:{port}"),
    }
}

/// The variables of one Service, in upstream's order.
pub fn service_vars(svc: &Service) -> Vec<(String, String)> {
    let Some(ip) = cluster_ip(svc) else {
        return vec![];
    };
    let prefix = env_name(svc.metadata.name.as_deref().unwrap_or_default());
    let ports = svc
        .spec
        .as_ref()
        .and_then(|s| s.ports.as_deref())
        .unwrap_or_default();
    let mut out = vec![(format!("{prefix}_SERVICE_HOST"), ip.to_string())];
    let port_var = format!("{prefix}_SERVICE_PORT");
    if let Some(first) = ports.first() {
        out.push((port_var.clone(), first.port.to_string()));
    }
    for p in ports {
        if let Some(name) = p.name.as_deref().filter(|n| !n.is_empty()) {
            out.push((format!("{port_var}_{}", env_name(name)), p.port.to_string()));
        }
    }
    for (i, p) in ports.iter().enumerate() {
        let proto = p.protocol.as_deref().unwrap_or("TCP");
        let lower = proto.to_lowercase();
        let url = format!("{lower}://{}", host_port(ip, p.port));
        if i == 0 {
            out.push((format!("{prefix}_PORT"), url.clone()));
        }
        let pp = format!("{prefix}_PORT_{}_{}", p.port, proto.to_uppercase());
        out.push((pp.clone(), url));
        out.push((format!("{pp}_PROTO"), lower));
        out.push((format!("{pp}_PORT"), p.port.to_string()));
        out.push((format!("{pp}_ADDR"), ip.to_string()));
    }
    out
}

/// The service variables for `pod` from `services` (all the node knows, any namespace).
pub fn service_env(pod: &Pod, services: &[Service]) -> BTreeMap<String, String> {
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    let links = pod
        .spec
        .as_ref()
        .and_then(|s| s.enable_service_links)
        .unwrap_or(true);
    let mut chosen: BTreeMap<&str, &Service> = BTreeMap::new();
    for s in services {
        if cluster_ip(s).is_none() {
            continue;
        }
        let name = s.metadata.name.as_deref().unwrap_or_default();
        let s_ns = s.metadata.namespace.as_deref().unwrap_or_default();
        if s_ns == "default" && name == "kubernetes" {
            chosen.entry(name).or_insert(s);
        } else if s_ns == ns && links {
            chosen.insert(name, s);
        }
    }
    chosen.values().flat_map(|s| service_vars(s)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubelet::plan::spec::tests::pod;
    use serde_json::{json, Value};

    fn svc(ns: &str, name: &str, ip: &str, ports: Value) -> Service {
        serde_json::from_value(json!({"metadata": {"name": name, "namespace": ns},
            "spec": {"clusterIP": ip, "ports": ports}}))
        .unwrap()
    }

    fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
        v.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn one_service_with_a_named_and_an_udp_port() {
        let s = svc(
            "default",
            "my-db",
            "10.43.0.20",
            json!([{"name": "sql", "port": 5432}, {"name": "metrics-udp", "port": 9000, "protocol": "UDP"}]),
        );
        assert_eq!(
            service_vars(&s),
            pairs(&[
                ("MY_DB_SERVICE_HOST", "10.43.0.20"),
                ("MY_DB_SERVICE_PORT", "5432"),
                ("MY_DB_SERVICE_PORT_SQL", "5432"),
                ("MY_DB_SERVICE_PORT_METRICS_UDP", "9000"),
                ("MY_DB_PORT", "tcp://10.43.0.20:5432"),
                ("MY_DB_PORT_5432_TCP", "tcp://10.43.0.20:5432"),
                ("MY_DB_PORT_5432_TCP_PROTO", "tcp"),
                ("MY_DB_PORT_5432_TCP_PORT", "5432"),
                ("MY_DB_PORT_5432_TCP_ADDR", "10.43.0.20"),
                ("MY_DB_PORT_9000_UDP", "udp://10.43.0.20:9000"),
                ("MY_DB_PORT_9000_UDP_PROTO", "udp"),
                ("MY_DB_PORT_9000_UDP_PORT", "9000"),
                ("MY_DB_PORT_9000_UDP_ADDR", "10.43.0.20"),
            ])
        );
    }

    #[test]
    fn ipv6_and_headless() {
        let s = svc("default", "v6", "fd00::10", json!([{"port": 80}]));
        assert_eq!(
            service_vars(&s)[2],
            ("V6_PORT".into(), "tcp://[fd00::10]:80".into())
        );
        assert_eq!(
            service_vars(&svc("default", "h", "None", json!([{"port": 80}]))),
            vec![]
        );
        assert_eq!(
            service_vars(&svc("default", "h", "", json!([{"port": 80}]))),
            vec![]
        );
    }

    #[test]
    fn which_services_a_pod_sees() {
        let services = [
            svc(
                "default",
                "kubernetes",
                "10.43.0.1",
                json!([{"name": "https", "port": 443}]),
            ),
            svc("default", "web", "10.43.0.2", json!([{"port": 80}])),
            svc("other", "db", "10.43.0.3", json!([{"port": 5432}])),
        ];
        let keys = |p: &Pod| -> Vec<String> {
            service_env(p, &services)
                .into_keys()
                .filter(|k| k.ends_with("_SERVICE_HOST"))
                .collect()
        };
        assert_eq!(
            keys(&pod(json!({}))),
            vec!["KUBERNETES_SERVICE_HOST", "WEB_SERVICE_HOST"]
        );
        let no_links = pod(json!({"spec": {"enableServiceLinks": false}}));
        assert_eq!(keys(&no_links), vec!["KUBERNETES_SERVICE_HOST"]);
        let other = pod(json!({"metadata": {"namespace": "other"}}));
        assert_eq!(
            keys(&other),
            vec!["DB_SERVICE_HOST", "KUBERNETES_SERVICE_HOST"]
        );
        let env = service_env(&pod(json!({})), &services);
        assert_eq!(env["KUBERNETES_SERVICE_PORT_HTTPS"], "443");
        assert_eq!(env["KUBERNETES_PORT"], "tcp://10.43.0.1:443");
        assert_eq!(env.len(), 2 * 7 + 1);
    }
}
