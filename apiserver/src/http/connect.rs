//! The pod subresources that stream from the kubelet (`log`, `exec`, `attach`,
//! `portforward`) and `nodes/<name>/proxy/…`: after the checks kube-apiserver makes first (the
//! pod exists, the container is its, it has a node, the node has an address), the request is
//! carried to the node's kubelet ([`crate::kubelet`]).

use axum::extract::Request;
use axum::http::Method;
use axum::response::Response;

use crate::kubelet::location;
use crate::registry::{Registry, Target};
use crate::ApiState;
use k3rs_apimachinery::catalog;
use k3rs_apimachinery::status::{ApiError, ApiResult};

async fn node_address(reg: &Registry, node: &str) -> ApiResult<location::KubeletAddress> {
    let nodes = catalog::lookup("", "v1", "nodes").ok_or_else(ApiError::path_not_found)?;
    let n = reg
        .get(&Target {
            resource: nodes,
            namespace: None,
            name: Some(node.to_string()),
            subresource: None,
        })
        .await?;
    location::kubelet_address(&n)
}

/// Carries `pods/<sub>` of `t` to the pod's kubelet.
pub async fn pod(st: &ApiState, t: &Target, sub: &str, req: Request) -> ApiResult<Response> {
    let reg = &st.registry;
    let pod = reg.get(t).await?;
    if sub == "log" && req.method() != Method::GET {
        return Err(ApiError::method_not_allowed(req.method().as_str()));
    }
    let info = super::request::info_of(&req);
    let path = location::kubelet_path(&pod, sub, &info.query)?;
    let node = location::node_name(&pod)?;
    let at = node_address(reg, &node).await?;
    let client = st.kubelet.as_ref().ok_or_else(|| {
        ApiError::unavailable(format!(
            "pods/{sub} needs the kubelet of node {node:?}, and this server has no kubelet client"
        ))
    })?;
    client.forward(&at, &path, req).await
}

/// `/api/v1/nodes/<name>/proxy[/<path>]`: the node name and the kubelet path, if `path` is one.
pub fn node_proxy_path(path: &str) -> Option<(String, String)> {
    let rest = path.strip_prefix("/api/v1/nodes/")?;
    let (name, rest) = rest.split_once('/')?;
    let tail = if rest == "proxy" {
        ""
    } else {
        rest.strip_prefix("proxy/")?
    };
    if name.is_empty() {
        return None;
    }
    let name = percent_encoding::percent_decode_str(name)
        .decode_utf8_lossy()
        .into_owned();
    Some((name, format!("/{tail}")))
}

/// Carries `nodes/<node>/proxy/<path>` to the node's kubelet.
pub async fn node(st: &ApiState, node: &str, path: &str, req: Request) -> ApiResult<Response> {
    let at = node_address(&st.registry, node).await?;
    let client = st
        .kubelet
        .as_ref()
        .ok_or_else(|| ApiError::unavailable("this server has no kubelet client"))?;
    let target = match req.uri().query() {
        Some(q) => format!("{path}?{q}"),
        None => path.to_string(),
    };
    client.forward(&at, &target, req).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_proxy_paths() {
        assert_eq!(
            node_proxy_path("/api/v1/nodes/n1/proxy/healthz"),
            Some(("n1".into(), "/healthz".into()))
        );
        assert_eq!(
            node_proxy_path("/api/v1/nodes/n1/proxy"),
            Some(("n1".into(), "/".into()))
        );
        assert_eq!(
            node_proxy_path("/api/v1/nodes/n1/proxy/stats/summary"),
            Some(("n1".into(), "/stats/summary".into()))
        );
        assert_eq!(node_proxy_path("/api/v1/nodes/n1/status"), None);
        assert_eq!(node_proxy_path("/api/v1/nodes/n1"), None);
        assert_eq!(node_proxy_path("/api/v1/nodes//proxy"), None);
    }
}
