//! What exists from the first start: the system namespaces, the `kubernetes` service in
//! `default` (first IP of the service CIDR), the selector-less `kube-dns` service in
//! `kube-system` (tenth IP, the agents' cluster DNS; its endpoints are kept by the
//! `cluster-dns` controller; not created with `--disable coredns`) and the system priority
//! classes. Idempotent:
//! existing objects are left alone. (The RBAC policy is reconciled by
//! [`k3rs_auth::rbac::reconcile`].)

use serde_json::json;

use super::registry::{Registry, Target, WriteOptions};
use super::resources::strategy::scheduling;
use k3rs_apimachinery::catalog;
use k3rs_apimachinery::status::ApiResult;

pub const SYSTEM_NAMESPACES: &[&str] =
    &["default", "kube-system", "kube-public", "kube-node-lease"];

/// What the bootstrap objects depend on.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    /// The API server's HTTPS port (the `kubernetes` Service's target port).
    pub https_port: u16,
    /// The ClusterIP of `kube-system/kube-dns` when it is created (`--cluster-dns`, by
    /// default the tenth address of the service CIDR); `None`: not created (`--disable
    /// coredns`; an existing one is kept, as it may be the user's own DNS).
    pub kube_dns: Option<std::net::IpAddr>,
}

/// Creates whatever of the bootstrap objects is missing.
pub async fn ensure(reg: &Registry, settings: Settings) -> ApiResult<()> {
    let https_port = settings.https_port;
    let (Some(namespaces), Some(services)) = (
        catalog::lookup("", "v1", "namespaces"),
        catalog::lookup("", "v1", "services"),
    ) else {
        return Ok(());
    };
    for ns in SYSTEM_NAMESPACES {
        let t = Target {
            resource: namespaces,
            namespace: None,
            name: Some(ns.to_string()),
            subresource: None,
        };
        if reg.get(&t).await.is_err() {
            let obj = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
            ignore_exists(reg.create(&t, obj, WriteOptions::default()).await)?;
        }
    }
    let t = Target {
        resource: services,
        namespace: Some("default".into()),
        name: Some("kubernetes".into()),
        subresource: None,
    };
    if reg.get(&t).await.is_err() {
        let ip = super::resources::cluster_ip::first_ip(&reg.service_cidr)
            .map(|ip| ip.to_string())
            .unwrap_or_default();
        let svc = json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "kubernetes", "namespace": "default",
                "labels": {"component": "apiserver", "provider": "kubernetes"}},
            "spec": {"clusterIP": ip, "type": "ClusterIP", "sessionAffinity": "None",
                "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": https_port}]},
        });
        ignore_exists(reg.create(&t, svc, WriteOptions::default()).await)?;
    }
    let t = Target {
        resource: services,
        namespace: Some("kube-system".into()),
        name: Some("kube-dns".into()),
        subresource: None,
    };
    if let (Some(ip), Err(_)) = (settings.kube_dns, reg.get(&t).await) {
        ignore_exists(reg.create(&t, kube_dns(ip), WriteOptions::default()).await)?;
    }
    for pc in scheduling::SYSTEM_PRIORITY_CLASSES {
        ensure_cluster_object(
            reg,
            "scheduling.k8s.io",
            "priorityclasses",
            scheduling::system_class_object(pc),
        )
        .await?;
    }
    Ok(())
}

/// The `kube-dns` Service at `ip` (CoreDNS's in k3s, without a selector or metrics port).
fn kube_dns(ip: std::net::IpAddr) -> serde_json::Value {
    json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "kube-dns", "namespace": "kube-system",
            "labels": {"k8s-app": "kube-dns", "kubernetes.io/cluster-service": "true",
                "kubernetes.io/name": "CoreDNS"}},
        "spec": {"clusterIP": ip.to_string(), "clusterIPs": [ip.to_string()], "type": "ClusterIP",
            "sessionAffinity": "None",
            "ports": [
                {"name": "dns", "port": 53, "protocol": "UDP", "targetPort": 53},
                {"name": "dns-tcp", "port": 53, "protocol": "TCP", "targetPort": 53},
            ]},
    })
}

/// Creates the cluster-scoped `obj` of `group/v1/plural` unless an object of its name exists.
async fn ensure_cluster_object(
    reg: &Registry,
    group: &str,
    plural: &str,
    obj: serde_json::Value,
) -> ApiResult<()> {
    let Some(resource) = catalog::lookup(group, "v1", plural) else {
        return Ok(());
    };
    let t = Target {
        resource,
        namespace: None,
        name: obj["metadata"]["name"].as_str().map(str::to_string),
        subresource: None,
    };
    if reg.get(&t).await.is_err() {
        ignore_exists(reg.create(&t, obj, WriteOptions::default()).await)?;
    }
    Ok(())
}

fn ignore_exists<T>(r: ApiResult<T>) -> ApiResult<()> {
    match r {
        Ok(_) => Ok(()),
        Err(e) if e.code == 409 => Ok(()),
        Err(e) => Err(e),
    }
}
