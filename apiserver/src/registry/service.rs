//! Service address allocation: ClusterIPs from `--service-cidr` and NodePorts from the
//! NodePort range, checked against every existing Service (under the registry's allocation
//! lock), and kept across updates that leave them out (kube-apiserver's
//! `patchAllocatedValues`).

use std::collections::HashSet;
use std::net::IpAddr;

use serde_json::{json, Value};

use super::decode;

use super::keys;

use k3rs_apimachinery::meta;

use super::Registry;

use super::Target;
use crate::resources::{cluster_ip, node_port};
use k3rs_apimachinery::status::{ApiError, ApiResult, Cause};

/// Addresses and ports held by Services other than the one being written.
#[derive(Debug, Default)]
struct Used {
    ips: HashSet<IpAddr>,
    node_ports: HashSet<u16>,
}

fn needs_node_ports(svc: &Value) -> bool {
    matches!(
        svc["spec"]["type"].as_str(),
        Some("NodePort" | "LoadBalancer")
    )
}

/// Carries the allocated ClusterIP and NodePorts of `old` into an update that left them out.
pub fn keep_allocations(old: &Value, new: &mut Value) {
    if !new["spec"].is_object() || new["spec"]["type"] == "ExternalName" {
        return;
    }
    let requested = new["spec"]["clusterIP"].as_str().unwrap_or("");
    if requested.is_empty() {
        for k in ["clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"] {
            if let Some(v) = old["spec"].get(k) {
                new["spec"][k] = v.clone();
            }
        }
    }
    if needs_node_ports(new) {
        let old_ports = old["spec"]["ports"].as_array().cloned().unwrap_or_default();
        if let Some(ports) = new["spec"]["ports"].as_array_mut() {
            for p in ports.iter_mut().filter(|p| p["nodePort"].is_null()) {
                let same = old_ports.iter().find(|o| {
                    o["port"] == p["port"]
                        && o["protocol"].as_str().unwrap_or("TCP")
                            == p["protocol"].as_str().unwrap_or("TCP")
                });
                if let Some(np) = same.and_then(|o| o.get("nodePort")) {
                    p["nodePort"] = np.clone();
                }
            }
        }
    }
}

impl Registry {
    /// Allocates what `svc` is missing and checks what it requests. `own` is the stored
    /// version of the same Service on update (its addresses are not conflicts).
    pub(super) async fn allocate_service(
        &self,
        t: &Target,
        svc: &mut Value,
        own: Option<&Value>,
    ) -> ApiResult<()> {
        if !svc["spec"].is_object() {
            return Ok(());
        }
        let used = self.used_by_other_services(t, own).await?;
        let name = meta::name(svc).to_string();
        let invalid = |field: String, value: String, why: String| {
            ApiError::invalid(
                t.kind_subject(&name),
                vec![Cause::invalid(field, &value, &why)],
            )
        };
        if svc["spec"]["type"] != "ExternalName" {
            let requested = svc["spec"]["clusterIP"].as_str().unwrap_or("").to_string();
            if requested == "None" {
                svc["spec"]["clusterIPs"] = json!(["None"]);
            } else {
                let ip = if requested.is_empty() {
                    cluster_ip::next_free(&self.service_cidr, &used.ips).ok_or_else(|| {
                        ApiError::internal("failed to allocate a serviceIP: range is full")
                    })?
                } else {
                    let field = "spec.clusterIPs[0]".to_string();
                    let ip: IpAddr = requested.parse().map_err(|_| {
                        invalid(
                            field.clone(),
                            requested.clone(),
                            "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)".into(),
                        )
                    })?;
                    if !self.service_cidr.contains(&ip) {
                        return Err(invalid(field, requested.clone(), format!(
                            "failed to allocate IP {requested}: the provided IP ({requested}) is not in the valid range. The range of valid IPs is {}",
                            self.service_cidr
                        )));
                    }
                    if used.ips.contains(&ip) {
                        return Err(invalid(
                            field,
                            requested.clone(),
                            format!(
                            "failed to allocate IP {requested}: provided IP is already allocated"
                        ),
                        ));
                    }
                    ip
                };
                svc["spec"]["clusterIP"] = json!(ip.to_string());
                svc["spec"]["clusterIPs"] = json!([ip.to_string()]);
                let family = if ip.is_ipv4() { "IPv4" } else { "IPv6" };
                svc["spec"]["ipFamilies"] = json!([family]);
                svc["spec"]["ipFamilyPolicy"] = json!("SingleStack");
            }
        }
        if needs_node_ports(svc) {
            let mut taken = used.node_ports;
            let ports = svc["spec"]["ports"].as_array_mut().into_iter().flatten();
            for (i, p) in ports.enumerate() {
                let port = match p["nodePort"].as_u64() {
                    Some(np) => {
                        let np = u16::try_from(np)
                            .ok()
                            .filter(|n| node_port::DEFAULT_RANGE.contains(n));
                        let field = format!("spec.ports[{i}].nodePort");
                        let shown = p["nodePort"].to_string();
                        let np = np.ok_or_else(|| invalid(field.clone(), shown.clone(), format!(
                            "provided port is not in the valid range. The range of valid ports is {}-{}",
                            node_port::DEFAULT_RANGE.start(), node_port::DEFAULT_RANGE.end()
                        )))?;
                        if taken.contains(&np) {
                            return Err(invalid(
                                field,
                                shown,
                                "provided port is already allocated".into(),
                            ));
                        }
                        np
                    }
                    None => {
                        node_port::next_free(node_port::DEFAULT_RANGE, &taken).ok_or_else(|| {
                            ApiError::internal("failed to allocate a nodePort: range is full")
                        })?
                    }
                };
                taken.insert(port);
                p["nodePort"] = json!(port);
            }
        }
        Ok(())
    }

    async fn used_by_other_services(&self, t: &Target, own: Option<&Value>) -> ApiResult<Used> {
        let kvs = self.all_under(keys::list_prefix(t.resource, None)).await?;
        let own_uid = own.map(meta::uid);
        let mut used = Used::default();
        for kv in &kvs {
            let svc = decode(kv)?;
            if own_uid.is_some_and(|u| u == meta::uid(&svc)) {
                continue;
            }
            if let Some(ip) = svc["spec"]["clusterIP"]
                .as_str()
                .and_then(|s| s.parse().ok())
            {
                used.ips.insert(ip);
            }
            for p in svc["spec"]["ports"].as_array().into_iter().flatten() {
                if let Some(np) = p["nodePort"].as_u64().and_then(|n| u16::try_from(n).ok()) {
                    used.node_ports.insert(np);
                }
            }
        }
        Ok(used)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn updates_keep_allocated_values() {
        let old = json!({"spec": {"type": "NodePort", "clusterIP": "10.43.0.9", "clusterIPs": ["10.43.0.9"],
            "ports": [{"port": 80, "protocol": "TCP", "nodePort": 30001}]}});
        let mut new = json!({"spec": {"type": "NodePort", "ports": [{"port": 80, "protocol": "TCP"}, {"port": 81}]}});
        keep_allocations(&old, &mut new);
        assert_eq!(new["spec"]["clusterIP"], "10.43.0.9");
        assert_eq!(new["spec"]["ports"][0]["nodePort"], 30001);
        assert!(new["spec"]["ports"][1]["nodePort"].is_null());
    }
}
